//! Durability (SiloR, OSDI'14): value logging with epoch group commit,
//! fuzzy checkpoints, and parallel recovery. See `log`, `checkpoint` and
//! `recover`; `docs/FORMAT.md` for the bytes.
//!
//! A database directory holds:
//!
//! ```text
//! LOCK                     held (flock) while a process has it open
//! pepoch                   the persistent epoch e_p, two 512-byte slots
//! tables                   the table catalog
//! log.<i>/data.log         logger i's current file
//! log.<i>/old_data.<e>.g<n> its finished files (max epoch e, generation n)
//! ckpt.<e_l>/part.<j>      a checkpoint's files
//! ckpt.<e_l>/MANIFEST      present once the checkpoint is complete
//! ```

mod abuf;
mod ahead;
pub mod checkpoint;
pub mod crashsim;
mod files;
pub mod format;
pub(crate) mod log;
pub mod recover;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::epoch::Epochs;
use crate::error::Error;
use files::{fp, sync_dir};
use format::Ledger;
use log::{LogCounters, LoggerShared, PepochWriter, Position, SlotLog};

/// Shared durability state of one open database.
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
    pub checkpoints: checkpoint::State,
    pub recovered: RecoveryStats,
}

/// Parameters for starting durability on a recovered directory.
pub(crate) struct Start {
    pub dir: PathBuf,
    pub epochs: Arc<Epochs>,
    pub options: crate::options::Options,
    pub pepoch: u64,
    pub pepoch_seq: u64,
    /// Per logger: the next log file generation.
    pub generations: Vec<u64>,
    /// What recovery must find, as recovery left it.
    pub ledger: Ledger,
    pub checkpoint: Option<format::Manifest>,
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
            checkpoints: checkpoint::State::new(s.checkpoint, o),
            recovered: s.recovered,
        });
        let starts: Vec<log::LoggerStart> = s
            .generations
            .iter()
            .enumerate()
            .map(|(i, g)| log::LoggerStart {
                index: i,
                dir: format::logger_dir(&s.dir, i),
                generation: *g,
            })
            .collect();
        let mut files = Vec::new();
        for st in &starts {
            files.push(log::create(&d, st).map_err(|e| io("create a log file", e))?);
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
            match log::spawn(d.clone(), st, f) {
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

pub use checkpoint::CheckpointStats;
pub use files::DELETING_SUFFIX;
pub use recover::{
    scan, CheckpointInfo, DirInfo, LogFileInfo, Problem, RecoveryStats, SalvageReport,
};

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

/// Create the files of a new database directory. `pepoch` comes last: its
/// presence marks the directory as initialized.
fn init_dir(dir: &Path, loggers: usize) -> Result<(), Error> {
    let io = |what: &str, p: &Path, e: io::Error| Error::storage(what, p, e);
    let cat = dir.join(format::CATALOG_FILE);
    let has_data = std::fs::metadata(&cat).is_ok_and(|m| m.len() > 0)
        || dir.join(format::VOIDS_FILE).exists()
        || std::fs::read_dir(dir)
            .map_err(|e| io("list", dir, e))?
            .flatten()
            .any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                format::parse_ckpt_dir_name(&n).is_some()
                    || (n.starts_with("log.")
                        && std::fs::read_dir(e.path()).is_ok_and(|mut r| r.next().is_some()))
            });
    if has_data {
        return Err(Error::Missing {
            path: dir.join(format::PEPOCH_FILE),
            what: "pepoch is gone but the directory holds logs, checkpoints or tables".into(),
        });
    }
    for i in 0..loggers {
        let l = format::logger_dir(dir, i);
        std::fs::create_dir_all(&l).map_err(|e| io("create", &l, e))?;
        crashsim::made_dir(&l);
    }
    File::create(&cat)
        .inspect(|_| crashsim::created(&cat, true))
        .and_then(|f| f.sync_all())
        .map_err(|e| io("create", &cat, e))?;
    crashsim::synced(&cat);
    let pe = Pepoch0 { loggers };
    let tmp = dir.join("pepoch.tmp");
    let write = || -> io::Result<()> {
        fp("init-write")?;
        let mut f = File::create(&tmp)?;
        crashsim::created(&tmp, true);
        let bytes = pe.bytes();
        f.write_all(&bytes)?;
        crashsim::wrote(&tmp, 0, &bytes);
        f.sync_all()?;
        crashsim::synced(&tmp);
        let to = dir.join(format::PEPOCH_FILE);
        std::fs::rename(&tmp, &to)?;
        crashsim::renamed(&tmp, &to);
        sync_dir(dir)
    };
    write().map_err(|e| io("initialize", dir, e))
}

/// The initial pepoch: e_p = 0, every logger at generation 0, length 0,
/// needing generations from 0 on, and no checkpoint.
struct Pepoch0 {
    loggers: usize,
}

impl Pepoch0 {
    fn bytes(&self) -> Vec<u8> {
        let p = format::Pepoch {
            version: format::PEPOCH_VERSION,
            seq: 0,
            epoch: 0,
            positions: vec![(0, 0); self.loggers],
            voids: 0,
            checkpoint: 0,
            lows: vec![0; self.loggers],
        };
        let mut b = p.encode().to_vec();
        b.extend_from_slice(&[0u8; format::PEPOCH_SLOT]);
        b
    }
}

/// `Database::open`.
pub(crate) fn open(dir: &Path, options: crate::options::Options) -> Result<crate::Database, Error> {
    let io = |what: &str, p: &Path, e: io::Error| Error::storage(what, p, e);
    std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    let dir = dir.canonicalize().map_err(|e| io("resolve", dir, e))?;
    let lock_path = dir.join(format::LOCK_FILE);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| io("open", &lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(dir)),
        Err(std::fs::TryLockError::Error(e)) => return Err(io("lock", &lock_path, e)),
    }
    if !recover::exists(&dir) {
        init_dir(&dir, options.loggers)?;
    }
    // The log files are scanned during the checkpoint load (`replay`).
    let mut info = recover::scan_meta(&dir)?;
    let n = info.pepoch.positions.len();
    if n != options.loggers {
        return Err(Error::InvalidOption(format!(
            "{} was created with {n} logger(s); open it with Options::loggers({n})",
            dir.display()
        )));
    }
    // The checkpoint the durable state needs, or the voids: no salvage
    // without them.
    if let Some(p) = info.problems.first() {
        return Err(p.to_error());
    }
    let db = crate::Database::new(options.clone())?;
    for (_, name) in &info.tables {
        db.create_table(name)?;
    }
    let recovered = recover::replay(
        &db,
        &mut info,
        options.recovery_threads,
        options.direct_io,
        options.recovery_mode,
    )?;
    {
        let mut w = db.worker()?;
        for &t in &recovered.tables_with_deletes {
            w.sweep_tombstones(granary_api::TableId(t));
        }
    }
    let tidied = recover::tidy(&info)?;
    db.shared.epochs.raise_global(tidied.first_epoch);
    *db.owner.as_ref().expect("a user handle").lock.lock() = Some(lock);
    // A salvage leaves damaged files behind, and a directory from before
    // pepoch version 3 has no record of which log files it needs: a
    // checkpoint (before anything new is acknowledged) records that, and
    // deletes what it supersedes.
    let rebase = info.salvage.is_some() || tidied.ledger.lows.contains(&format::LOW_UNKNOWN);
    // Recovery's own threads use internal handles (no owner), so failing
    // here releases the lock with `db`.
    let d = Durable::start(Start {
        dir,
        epochs: db.shared.epochs.clone(),
        options,
        pepoch: info.pepoch.epoch,
        pepoch_seq: info.pepoch.seq,
        generations: tidied.generations,
        ledger: tidied.ledger,
        checkpoint: info.checkpoint().map(|(_, m)| m.clone()),
        recovered,
    })?;
    if db.shared.durable.set(d).is_err() {
        unreachable!("durability is set once, here");
    }
    if rebase {
        checkpoint::run_with(&db, true)?;
    }
    checkpoint::spawn_periodic(&db.shared).map_err(Error::Io)?;
    Ok(db)
}
