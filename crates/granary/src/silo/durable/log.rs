//! SiloR's logging (§3.1–§3.5): per-worker log buffers, logger threads,
//! and the persistent epoch; and [`Durable`], the durability state of an
//! open database, which the engine holds.
//!
//! `Durable` is defined here, not in `durable/mod.rs`, because the logger
//! threads and the workers' appends use it as a whole, and it is mostly
//! their state: with it anywhere else, this module and that one would
//! import each other. Its other parts come from below ([`Checkpoints`],
//! the checkpointer's state, is here too; `RecoveryStats` is `recover`'s);
//! what drives the engine (the checkpointer, replay, open) is above it.
//!
//! * A committing worker appends its transaction (TID, and the table, key
//!   and new value or delete marker of each write) to its current buffer
//!   while it is still pinned in its epoch. A buffer holds one epoch: the
//!   worker seals it and queues it for its logger when the epoch changes or
//!   it is full, then takes a free buffer from its own bounded pool —
//!   waiting for the logger to recycle one if all are in flight
//!   (backpressure, not unbounded memory).
//! * Each logger serves the workers whose slot ≡ its index (mod loggers).
//!   After every epoch tick it reads the bound `B = tree_safe` (every
//!   worker's next commit lands in an epoch ≥ B — the same argument that
//!   makes the bound safe for reclamation, see `epoch`), takes its
//!   workers' buffers of epochs < B, writes them, recycles them (right
//!   after the write, §3.4), fdatasyncs, and reports `d = B − 1`:
//!   everything of epoch ≤ d from its workers is on disk.
//! * The distinguished logger (0) computes `e_p = min d`, writes it with
//!   every logger's durable file position to `pepoch`, fdatasyncs it, and
//!   only then publishes it (§3.1, §3.5). Commits wait for it.
//! * Every 100 epochs a logger closes `data.log`: it appends an end record
//!   (so a closed file that lost its end is known to be short), syncs it,
//!   renames the file to `old_data.<max epoch>.g<generation>` and starts
//!   a new file.
//! * The pepoch also carries the [`Ledger`]: what recovery must find (the
//!   checkpoint the state needs, and each logger's oldest needed file).
//! * Any failed write, fsync or rename poisons the database: nothing more
//!   is written or acknowledged.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::abuf::{open_aligned, seal_block, AlignedBuf};
use super::files::write_end;
use super::format::{
    self, Ledger, LogEnd, Manifest, Pepoch, BLOCK_HEADER, BLOCK_MAGIC_LOG, CURRENT_LOG, IO_ALIGN,
};
use super::recover::RecoveryStats;
use crate::silo::epoch::Epochs;
use crate::silo::error::Error;
use crate::silo::options::Options;
use granary_storage::crashsim;
use granary_storage::fs::{fp, sync_dir};

/// Shared durability state of one open database: the loggers' and the
/// checkpointer's, the table catalog, and what recovery found.
pub(crate) struct Durable {
    pub dir: PathBuf,
    pub epochs: Arc<Epochs>,
    pub epoch_interval: Duration,
    pub buffer_bytes: usize,
    pub buffers_per_worker: usize,
    /// Open log and checkpoint files with `O_DIRECT` where supported.
    pub direct_io: bool,
    pub wait: bool,
    pub slots: Box<[SlotLog]>,
    pub loggers: Box<[LoggerShared]>,
    /// The published persistent epoch: commits of epochs ≤ it are durable.
    pub pepoch: AtomicU64,
    pub pepoch_lock: Mutex<()>,
    pub pepoch_changed: Condvar,
    pub pepoch_writer: Mutex<PepochWriter>,
    /// What recovery must find, written with every pepoch.
    pub ledger: Mutex<Ledger>,
    poisoned: AtomicBool,
    poison_cause: Mutex<Option<String>>,
    pub stopping: AtomicBool,
    pub counters: LogCounters,
    pub catalog: Mutex<File>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    pub checkpoints: Checkpoints,
    pub recovered: RecoveryStats,
}

/// Parameters for starting durability on a recovered directory.
pub(crate) struct Start {
    pub dir: PathBuf,
    pub epochs: Arc<Epochs>,
    pub options: Options,
    pub pepoch: u64,
    pub pepoch_seq: u64,
    /// Per logger: the next log file generation.
    pub generations: Vec<u64>,
    /// What recovery must find, as recovery left it.
    pub ledger: Ledger,
    pub checkpoint: Option<Manifest>,
    pub recovered: RecoveryStats,
}

impl Durable {
    pub(crate) fn start(s: Start) -> Result<Arc<Durable>, Error> {
        let o = &s.options;
        let io = |what: &str, e: io::Error| Error::storage(what, &s.dir, e);
        let catalog = OpenOptions::new()
            .append(true)
            .open(s.dir.join(format::CATALOG_FILE))
            .map_err(|e| io("open the table catalog", e))?;
        let writer = PepochWriter::open(&s.dir.join(format::PEPOCH_FILE), s.pepoch_seq)
            .map_err(|e| io("open pepoch", e))?;
        let start = Position {
            epoch: s.pepoch,
            generation: 0,
            len: 0,
        };
        let d = Arc::new(Durable {
            dir: s.dir.clone(),
            epochs: s.epochs,
            epoch_interval: o.epoch_interval,
            buffer_bytes: o.log_buffer_bytes,
            buffers_per_worker: o.log_buffers_per_worker,
            direct_io: o.direct_io,
            wait: o.wait_for_durable,
            slots: (0..o.max_workers).map(|_| SlotLog::new()).collect(),
            loggers: (0..o.loggers).map(|_| LoggerShared::new(start)).collect(),
            pepoch: AtomicU64::new(s.pepoch),
            pepoch_lock: Mutex::new(()),
            pepoch_changed: Condvar::new(),
            pepoch_writer: Mutex::new(writer),
            ledger: Mutex::new(s.ledger),
            poisoned: AtomicBool::new(false),
            poison_cause: Mutex::new(None),
            stopping: AtomicBool::new(false),
            counters: LogCounters::default(),
            catalog: Mutex::new(catalog),
            threads: Mutex::new(Vec::new()),
            checkpoints: Checkpoints::new(s.checkpoint, o),
            recovered: s.recovered,
        });
        let starts: Vec<LoggerStart> = s
            .generations
            .iter()
            .enumerate()
            .map(|(i, g)| LoggerStart {
                index: i,
                dir: format::logger_dir(&s.dir, i),
                generation: *g,
            })
            .collect();
        let mut files = Vec::new();
        for st in &starts {
            files.push(create(&d, st).map_err(|e| io("create a log file", e))?);
        }
        // From here on a failure must stop the loggers already started:
        // nothing may keep running (and writing) after open returns Err.
        let fail = |what: &str, e: io::Error| {
            let err = io(what, e);
            d.poison(err.to_string());
            d.shutdown();
            err
        };
        for (st, f) in starts.into_iter().zip(files) {
            match spawn(d.clone(), st, f) {
                Ok(h) => d.threads.lock().push(h),
                Err(e) => return Err(fail("start a logger", e)),
            }
        }
        // Record the new files' positions before anything is logged, so
        // recovery never mistakes them for tails of older generations.
        if let Err(e) = d.publish_pepoch() {
            return Err(fail("write pepoch", e));
        }
        Ok(d)
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Stop acknowledging anything, for good.
    pub fn poison(&self, cause: String) {
        let mut c = self.poison_cause.lock();
        if c.is_none() {
            *c = Some(cause);
        }
        self.poisoned.store(true, Ordering::Release);
        drop(c);
        let _g = self.pepoch_lock.lock();
        self.pepoch_changed.notify_all();
    }

    pub fn poison_error(&self) -> Error {
        Error::Poisoned(
            self.poison_cause
                .lock()
                .clone()
                .unwrap_or_else(|| "unknown".into()),
        )
    }

    /// `Err` once poisoned.
    #[inline]
    pub fn check(&self) -> Result<(), Error> {
        if self.is_poisoned() {
            return Err(self.poison_error());
        }
        Ok(())
    }

    /// Block until every transaction of epoch ≤ `e` is durable.
    pub fn wait_durable(&self, e: u64) -> Result<(), Error> {
        if self.pepoch.load(Ordering::Acquire) >= e {
            // Durable before any failure: still durable.
            return Ok(());
        }
        let mut g = self.pepoch_lock.lock();
        loop {
            self.check()?;
            if self.pepoch.load(Ordering::Acquire) >= e {
                return Ok(());
            }
            if self.stopping.load(Ordering::Acquire) {
                return Err(Error::Poisoned("the database is shutting down".into()));
            }
            self.pepoch_changed.wait_for(&mut g, self.epoch_interval);
        }
    }

    /// Wake the loggers (after an epoch tick).
    pub fn on_tick(&self) {
        for l in self.loggers.iter() {
            l.wake();
        }
    }

    /// Append a table to the catalog, durably.
    pub fn add_table(&self, id: u32, name: &str) -> Result<(), Error> {
        self.check()?;
        let mut c = self.catalog.lock();
        let path = self.dir.join(format::CATALOG_FILE);
        let entry = format::encode_catalog_entry(id, name);
        let at = crashsim::append_at(&c);
        let r = fp("catalog-write")
            .and_then(|()| c.write_all(&entry))
            .map(|()| crashsim::wrote(&path, at, &entry))
            .and_then(|()| fp("catalog-fsync"))
            .and_then(|()| c.sync_data())
            .map(|()| crashsim::synced(&path));
        r.map_err(|e| {
            let err = Error::storage("append to the table catalog", &self.dir, e);
            self.poison(err.to_string());
            err
        })
    }

    /// Flush everything and stop the loggers (the database is closing: no
    /// worker is left, and the caller advanced the epochs past every
    /// commit).
    pub fn shutdown(&self) {
        self.checkpoints.stop();
        self.stopping.store(true, Ordering::Release);
        self.on_tick();
        let me = std::thread::current().id();
        let hs: Vec<_> = self.threads.lock().drain(..).collect();
        for h in hs {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
        if !self.is_poisoned() {
            if let Err(e) = self.publish_pepoch() {
                self.poison(format!("final pepoch: {e}"));
            }
        }
        self.checkpoints.join();
    }

    /// Logging counters: (bytes, blocks, syncs, waits for a free buffer).
    pub fn counters(&self) -> (u64, u64, u64, u64) {
        let c = &self.counters;
        (
            c.bytes.load(Ordering::Relaxed),
            c.blocks.load(Ordering::Relaxed),
            c.syncs.load(Ordering::Relaxed),
            c.buffer_waits.load(Ordering::Relaxed),
        )
    }
}

/// Logging, checkpoint and recovery figures of a durable database.
#[derive(Clone, Debug, Default)]
pub struct DurabilityStats {
    /// The persistent epoch e_p.
    pub pepoch: u64,
    pub log_bytes: u64,
    pub log_blocks: u64,
    pub log_syncs: u64,
    /// Times a worker waited for a free log buffer (backpressure).
    pub buffer_waits: u64,
    pub checkpoints: u64,
    /// What opening the directory recovered.
    pub recovery: RecoveryStats,
}

impl Durable {
    pub fn stats(&self) -> DurabilityStats {
        let (log_bytes, log_blocks, log_syncs, buffer_waits) = self.counters();
        DurabilityStats {
            pepoch: self.pepoch.load(Ordering::Acquire),
            log_bytes,
            log_blocks,
            log_syncs,
            buffer_waits,
            checkpoints: self.checkpoints.completed.load(Ordering::Relaxed),
            recovery: self.recovered.clone(),
        }
    }
}

/// The checkpointer's state (the checkpointer itself, `checkpoint`, walks
/// the engine's trees, so it sits above the engine; this is the part the
/// engine's [`Durable`] holds).
pub(crate) struct Checkpoints {
    pub threads: usize,
    pub files_per_thread: usize,
    pub interval: Option<Duration>,
    pub last: Mutex<Option<Manifest>>,
    /// One checkpoint at a time.
    pub running: Mutex<()>,
    stop: AtomicBool,
    pub periodic: Mutex<Option<JoinHandle<()>>>,
    pub completed: AtomicU64,
    /// When the most recent checkpoints ran (`Engine::checkpoint_spans`).
    pub spans: Mutex<std::collections::VecDeque<granary_api::CheckpointSpan>>,
}

impl Checkpoints {
    pub fn new(last: Option<Manifest>, o: &Options) -> Checkpoints {
        Checkpoints {
            threads: o.checkpoint_threads.max(1),
            files_per_thread: o.checkpoint_files_per_thread.max(1),
            interval: o.checkpoint_interval,
            last: Mutex::new(last),
            running: Mutex::new(()),
            stop: AtomicBool::new(false),
            periodic: Mutex::new(None),
            completed: AtomicU64::new(0),
            spans: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// Record a finished checkpoint's span, keeping the most recent
    /// [`granary_api::MAX_CHECKPOINT_SPANS`].
    pub fn finished(&self, span: granary_api::CheckpointSpan) {
        self.completed.fetch_add(1, Ordering::Relaxed);
        let mut spans = self.spans.lock();
        if spans.len() == granary_api::MAX_CHECKPOINT_SPANS {
            spans.pop_front();
        }
        spans.push_back(span);
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    pub fn join(&self) {
        let h = self.periodic.lock().take();
        if let Some(h) = h {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// Epochs per log file before it is renamed (SiloR §3.5).
pub const ROTATE_EPOCHS: u64 = 100;

/// A log buffer: one block being filled. `data` starts with room for the
/// block header, written when the buffer is sealed; its memory is aligned
/// for `O_DIRECT`.
pub(crate) struct LogBuf {
    data: AlignedBuf,
    epoch: u64,
    count: u32,
    slot: u32,
}

impl LogBuf {
    fn new(cap: usize, slot: u32) -> LogBuf {
        // Room for the padding `seal` adds, so sealing never reallocates.
        let mut data = AlignedBuf::with_capacity(cap + IO_ALIGN);
        data.resize_zeroed(BLOCK_HEADER);
        LogBuf {
            data,
            epoch: 0,
            count: 0,
            slot,
        }
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn reset(&mut self, standard: usize) {
        if self.data.capacity() > 2 * (standard + IO_ALIGN) {
            // A transaction bigger than a buffer grew this one: shrink back.
            self.data = AlignedBuf::with_capacity(standard + IO_ALIGN);
        }
        self.data.resize_zeroed(0);
        self.data.resize_zeroed(BLOCK_HEADER);
        self.count = 0;
    }

    /// Seal the block: header, then padding (`seal_block`).
    fn seal(&mut self) {
        seal_block(
            &mut self.data,
            BLOCK_MAGIC_LOG,
            self.epoch,
            self.slot,
            self.count,
        );
    }
}

/// One worker slot's logging state.
pub(crate) struct SlotLog {
    /// The buffer being filled (locked by its worker for each append; by
    /// its logger to take it once its epoch is over).
    cur: Mutex<Option<LogBuf>>,
    /// Recycled buffers, and how many exist for this slot.
    free: Mutex<Vec<LogBuf>>,
    freed: Condvar,
    allocated: AtomicUsize,
}

impl SlotLog {
    pub fn new() -> SlotLog {
        SlotLog {
            cur: Mutex::new(None),
            free: Mutex::new(Vec::new()),
            freed: Condvar::new(),
            allocated: AtomicUsize::new(0),
        }
    }
}

/// What a logger has made durable: everything of epoch ≤ `epoch` from its
/// workers, in log files up to `generation`, whose durable length is `len`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Position {
    pub epoch: u64,
    pub generation: u64,
    pub len: u64,
}

pub(crate) struct LoggerShared {
    /// Sealed buffers waiting to be written.
    queue: Mutex<Vec<LogBuf>>,
    pub position: Mutex<Position>,
    thread: Mutex<Option<Thread>>,
}

impl LoggerShared {
    pub fn new(start: Position) -> LoggerShared {
        LoggerShared {
            queue: Mutex::new(Vec::new()),
            position: Mutex::new(start),
            thread: Mutex::new(None),
        }
    }

    pub fn wake(&self) {
        if let Some(t) = self.thread.lock().as_ref() {
            t.unpark();
        }
    }
}

/// Counters for reports.
#[derive(Default)]
pub(crate) struct LogCounters {
    pub bytes: AtomicU64,
    pub blocks: AtomicU64,
    pub syncs: AtomicU64,
    pub buffer_waits: AtomicU64,
}

impl Durable {
    /// Append one committed transaction to the worker's log (called at
    /// commit, while the worker is pinned in `epoch`).
    pub(crate) fn append<'a, I>(&self, slot: usize, epoch: u64, tid: u64, writes: I)
    where
        I: Iterator<Item = (u32, &'a [u8], Option<&'a [u8]>)> + Clone,
    {
        let (need, count) = writes
            .clone()
            .fold((format::LOG_TXN_HEADER, 0u32), |(n, c), (_, k, v)| {
                (n + format::log_write_len(k, v), c + 1)
            });
        let s = &self.slots[slot];
        let mut cur = s.cur.lock();
        let stale = cur.as_ref().is_some_and(|b| {
            !b.is_empty() && (b.epoch != epoch || b.data.len() + need > self.buffer_bytes)
        });
        if stale {
            let mut b = cur.take().expect("checked");
            b.seal();
            let full = b.epoch == epoch;
            let lg = &self.loggers[slot % self.loggers.len()];
            lg.queue.lock().push(b);
            if full {
                lg.wake();
            }
        }
        if cur.is_none() {
            // Wait for a free buffer WITHOUT the slot lock: the logger
            // takes that lock in every round, and it is the logger that
            // frees buffers. (Only this worker ever fills the slot, and
            // we are still pinned, so the logger cannot pass our epoch.)
            drop(cur);
            let fresh = self.take_buffer(slot);
            cur = s.cur.lock();
            debug_assert!(cur.is_none(), "only the slot's worker fills it");
            *cur = Some(fresh);
        }
        let b = cur.as_mut().expect("filled above");
        b.epoch = epoch;
        b.count += 1;
        b.data.reserve(need);
        format::put_log_header(&mut b.data, tid, count);
        for (t, k, v) in writes {
            format::put_log_write(&mut b.data, t, k, v);
        }
    }

    /// A free buffer from the slot's pool, waiting if all are in flight.
    fn take_buffer(&self, slot: usize) -> LogBuf {
        let s = &self.slots[slot];
        let mut free = s.free.lock();
        loop {
            if let Some(b) = free.pop() {
                return b;
            }
            if s.allocated.load(Ordering::Relaxed) < self.buffers_per_worker
                || self.is_poisoned()
                || self.stopping.load(Ordering::Acquire)
            {
                // Poisoned or stopping: nothing will be written, but the
                // commit must not hang; it is never acknowledged.
                s.allocated.fetch_add(1, Ordering::Relaxed);
                return LogBuf::new(self.buffer_bytes, slot as u32);
            }
            self.counters.buffer_waits.fetch_add(1, Ordering::Relaxed);
            self.loggers[slot % self.loggers.len()].wake();
            s.freed.wait_for(&mut free, Duration::from_millis(10));
        }
    }

    fn recycle(&self, mut b: LogBuf) {
        b.reset(self.buffer_bytes);
        let s = &self.slots[b.slot as usize];
        s.free.lock().push(b);
        s.freed.notify_one();
    }
}

/// A logger's open file.
pub(crate) struct LogFile {
    dir: PathBuf,
    /// `dir/data.log`.
    path: PathBuf,
    file: File,
    generation: u64,
    len: u64,
    /// The first and last epoch of the blocks written to it, and how many.
    min_epoch: u64,
    max_epoch: u64,
    blocks: u32,
}

impl LogFile {
    /// Start `data.log` with generation `g`, durably: its header, padded
    /// to `IO_ALIGN` (where the first block starts).
    fn create(dir: &Path, logger: u32, g: u64, direct: bool) -> io::Result<LogFile> {
        fp("log-create")?;
        let mut o = OpenOptions::new();
        o.create(true).write(true).truncate(true);
        let path = dir.join(CURRENT_LOG);
        let mut file = open_aligned(&o, &path, direct)?;
        crashsim::created(&path, true);
        let mut head = AlignedBuf::with_capacity(IO_ALIGN);
        head.extend_from_slice(&format::encode_log_file_header(logger, g));
        head.resize_zeroed(IO_ALIGN);
        file.write_all(head.as_slice())?;
        crashsim::wrote(&path, 0, head.as_slice());
        file.sync_data()?;
        crashsim::synced(&path);
        sync_dir(dir)?;
        Ok(LogFile {
            dir: dir.to_path_buf(),
            path,
            file,
            generation: g,
            len: IO_ALIGN as u64,
            min_epoch: u64::MAX,
            max_epoch: 0,
            blocks: 0,
        })
    }

    /// Append the end record (everything of epoch ≤ `durable` from this
    /// logger's workers is in this file or an older one) and sync it.
    fn close(&mut self, logger: u32, durable: u64) -> io::Result<()> {
        let end = LogEnd {
            durable_epoch: durable,
            logger,
            blocks: self.blocks,
            generation: self.generation,
            min_epoch: if self.blocks == 0 { 0 } else { self.min_epoch },
            max_epoch: self.max_epoch,
        };
        self.len = write_end(&self.file, &self.path, self.len, &end)?;
        Ok(())
    }

    /// Rename `data.log` to its finished name (it is closed and synced).
    fn retire(&self) -> io::Result<()> {
        fp("log-rename")?;
        let to = self
            .dir
            .join(format::old_log_name(self.max_epoch, self.generation));
        std::fs::rename(&self.path, &to)?;
        crashsim::renamed(&self.path, &to);
        sync_dir(&self.dir)
    }
}

pub(crate) struct LoggerStart {
    pub index: usize,
    pub dir: PathBuf,
    pub generation: u64,
}

/// Logger `index`'s new file, its position recorded. Every logger's file
/// is created before any logger runs, so the first pepoch written names
/// them all.
pub(crate) fn create(d: &Durable, start: &LoggerStart) -> io::Result<LogFile> {
    let file = LogFile::create(
        &start.dir,
        start.index as u32,
        start.generation,
        d.direct_io,
    )?;
    let mut p = d.loggers[start.index].position.lock();
    p.generation = file.generation;
    p.len = file.len;
    Ok(file)
}

/// Spawn logger `index` on its file.
pub(crate) fn spawn(
    d: Arc<Durable>,
    start: LoggerStart,
    file: LogFile,
) -> io::Result<JoinHandle<()>> {
    let h = std::thread::Builder::new()
        .name(format!("granary-log-{}", start.index))
        .spawn(move || {
            let mut l = Logger {
                d,
                index: start.index,
                file,
                batch: Vec::new(),
                synced_bound: 0,
                unsynced: false,
            };
            l.run();
        })?;
    Ok(h)
}

struct Logger {
    d: Arc<Durable>,
    index: usize,
    file: LogFile,
    batch: Vec<LogBuf>,
    /// The bound of the last round that synced and reported.
    synced_bound: u64,
    /// Blocks written since the last fsync.
    unsynced: bool,
}

impl Logger {
    fn run(&mut self) {
        *self.d.loggers[self.index].thread.lock() = Some(std::thread::current());
        let nap = self.d.epoch_interval;
        loop {
            std::thread::park_timeout(nap);
            let stopping = self.d.stopping.load(Ordering::Acquire);
            if self.d.is_poisoned() {
                return;
            }
            if let Err(e) = self.round(stopping) {
                self.d.poison(format!("logger {}: {e}", self.index));
                return;
            }
            if stopping {
                return;
            }
        }
    }

    /// One round: collect what is due and write it; then, if an epoch has
    /// completed since the last sync (or we are stopping), sync and report.
    fn round(&mut self, stopping: bool) -> io::Result<()> {
        let d = &*self.d;
        let epochs: &Epochs = &d.epochs;
        // Everything committed in an epoch below `bound` has been appended
        // (the Acquire load pairs with the advancer's Release; the appends
        // happened before the unpins it observed).
        let bound = epochs.safe().0;
        let n = d.loggers.len();
        for s in (self.index..d.slots.len()).step_by(n) {
            let mut cur = d.slots[s].cur.lock();
            if cur
                .as_ref()
                .is_some_and(|b| !b.is_empty() && b.epoch < bound)
            {
                let mut b = cur.take().expect("checked");
                drop(cur);
                b.seal();
                self.batch.push(b);
            }
        }
        // After the slots: a buffer sealed before we looked at its slot is
        // queued by now (sealing queues it under the slot lock).
        self.batch.append(&mut d.loggers[self.index].queue.lock());
        if !self.batch.is_empty() {
            for b in &self.batch {
                fp("log-write")?;
                self.file.file.write_all(b.data.as_slice())?;
                crashsim::wrote(&self.file.path, self.file.len, b.data.as_slice());
                self.file.len += b.data.len() as u64;
                self.file.min_epoch = self.file.min_epoch.min(b.epoch);
                self.file.max_epoch = self.file.max_epoch.max(b.epoch);
                self.file.blocks += 1;
                d.counters
                    .bytes
                    .fetch_add(b.data.len() as u64, Ordering::Relaxed);
                d.counters.blocks.fetch_add(1, Ordering::Relaxed);
            }
            // SiloR §3.4: buffers go back to their workers as soon as they
            // are written (`write` has copied them, or with O_DIRECT the
            // device has them), not after the fsync, so a slow fsync (a
            // checkpoint writing at the same time) does not turn into
            // backpressure on the workers.
            for b in self.batch.drain(..) {
                d.recycle(b);
            }
            self.unsynced = true;
        }
        // Woken for full buffers within the same epochs: they are written
        // and back with their workers. Syncing now would make nothing
        // more durable (SiloR §3.1: durability advances in whole epochs,
        // so it takes a new bound), so the fsync and the
        // pepoch write wait for the bound to move: at ~400 full buffers a
        // second that is 2 × 25 syncs a second instead of 2 × 400.
        if bound == self.synced_bound && !stopping {
            return Ok(());
        }
        self.synced_bound = bound;
        if self.unsynced {
            fp("log-fsync")?;
            self.file.file.sync_data()?;
            crashsim::synced(&self.file.path);
            d.counters.syncs.fetch_add(1, Ordering::Relaxed);
            self.unsynced = false;
        }
        let durable = bound.saturating_sub(1);
        if self.file.min_epoch != u64::MAX
            && self.file.max_epoch >= self.file.min_epoch + ROTATE_EPOCHS
        {
            self.file.close(self.index as u32, durable)?;
            self.file.retire()?;
            self.file = LogFile::create(
                &self.file.dir.clone(),
                self.index as u32,
                self.file.generation + 1,
                d.direct_io,
            )?;
        }
        {
            let mut p = d.loggers[self.index].position.lock();
            p.epoch = p.epoch.max(durable);
            p.generation = self.file.generation;
            p.len = self.file.len;
        }
        if self.index == 0 {
            d.publish_pepoch()?;
        }
        Ok(())
    }
}

impl Durable {
    /// Compute e_p = min over loggers, write it durably, then publish it.
    /// Called by logger 0 (and at shutdown).
    pub(crate) fn publish_pepoch(&self) -> io::Result<()> {
        let mut w = self.pepoch_writer.lock();
        let positions: Vec<Position> = self.loggers.iter().map(|l| *l.position.lock()).collect();
        let ledger = self.ledger.lock().clone();
        let e = positions.iter().map(|p| p.epoch).min().unwrap_or(0);
        if e <= self.pepoch.load(Ordering::Acquire) && !w.dirty(&positions, &ledger) {
            return Ok(());
        }
        let e = e.max(self.pepoch.load(Ordering::Acquire));
        w.write(e, &positions, &ledger)?;
        // Only now may commits of epoch ≤ e be acknowledged.
        self.pepoch.store(e, Ordering::Release);
        let _g = self.pepoch_lock.lock();
        self.pepoch_changed.notify_all();
        Ok(())
    }
}

/// Writes the two-slot `pepoch` file.
pub(crate) struct PepochWriter {
    file: File,
    path: PathBuf,
    seq: u64,
    last: Vec<Position>,
    last_ledger: Option<Ledger>,
}

impl PepochWriter {
    pub fn open(path: &Path, seq: u64) -> io::Result<PepochWriter> {
        let file = OpenOptions::new().write(true).open(path)?;
        Ok(PepochWriter {
            file,
            path: path.to_path_buf(),
            seq,
            last: Vec::new(),
            last_ledger: None,
        })
    }

    /// Whether the recorded file positions or the ledger changed since the
    /// last write.
    fn dirty(&self, p: &[Position], ledger: &Ledger) -> bool {
        self.last_ledger.as_ref() != Some(ledger)
            || self.last.len() != p.len()
            || self
                .last
                .iter()
                .zip(p)
                .any(|(a, b)| (a.generation, a.len) != (b.generation, b.len))
    }

    pub fn write(&mut self, epoch: u64, positions: &[Position], ledger: &Ledger) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.seq += 1;
        let rec = Pepoch {
            version: format::PEPOCH_VERSION,
            seq: self.seq,
            epoch,
            positions: positions.iter().map(|p| (p.generation, p.len)).collect(),
            voids: ledger.voids,
            checkpoint: ledger.checkpoint,
            lows: ledger.lows.clone(),
        };
        let at = (self.seq % 2) * format::PEPOCH_SLOT as u64;
        fp("pepoch-write")?;
        let bytes = rec.encode();
        self.file.write_all_at(&bytes, at)?;
        crashsim::wrote(&self.path, at, &bytes);
        fp("pepoch-fsync")?;
        self.file.sync_data()?;
        crashsim::synced(&self.path);
        self.last = positions.to_vec();
        self.last_ledger = Some(ledger.clone());
        Ok(())
    }
}
