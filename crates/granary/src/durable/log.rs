//! SiloR's logging (§3.1–§3.5): per-worker log buffers, logger threads,
//! and the persistent epoch.
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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::abuf::{open_aligned, seal_block, AlignedBuf};
use super::files::{fp, sync_dir, write_end};
use super::format::Ledger;
use super::format::{self, LogEnd, Pepoch, BLOCK_HEADER, BLOCK_MAGIC_LOG, CURRENT_LOG, IO_ALIGN};
use super::{crashsim, Durable};
use crate::epoch::Epochs;

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
