//! Database options ([`Options`]) and the recovery mode of a durable
//! open ([`RecoveryMode`]). Below everything that reads them: the engine's
//! shared state and durability both start from them.

use std::time::Duration;

use crate::silo::error::Error;

/// Database options. `Options::default()` is Silo's configuration.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// How often the global epoch advances (Silo: 40 ms). Commit latency
    /// under durable logging and snapshot freshness scale with it.
    pub epoch_interval: Duration,
    /// Keep old versions for snapshot transactions (Silo §4.9).
    pub snapshots: bool,
    /// `Some(n)`: keep old versions only while snapshot transactions are in
    /// use — from the first one's request until `n` epochs pass without
    /// one; a snapshot transaction arriving while versions are off waits
    /// (about two snapshot periods) until they cover its snapshot epoch.
    /// `None`: always keep them, exactly as Silo does. See ARCHITECTURE.md.
    pub snapshot_versions_idle_epochs: Option<u64>,
    /// The most workers that may exist at once.
    pub max_workers: usize,
    /// Take commit TIDs from one shared atomic counter (the paper's
    /// MemSilo+GlobalTID, §5.2) — a deliberately non-scalable baseline.
    pub global_tid: bool,
    /// `true`: a table created with the hint
    /// [`TableOptions::point_lookups`](granary_api::TableOptions::point_lookups)
    /// keeps a point index beside its tree, a hash table that finds a
    /// present key with one bucket probe instead of a descent; absent keys
    /// and scans still use the tree, so phantom protection is unchanged
    /// (ARCHITECTURE.md, "The point index"). It costs 20–45 bytes a key
    /// and some work on each insert and remove. `false` (default): the
    /// tree alone, as Silo's Masstree.
    pub point_index: bool,
    /// `true` (default): a committed value that fits its record overwrites
    /// it in place (Silo §4.5). `false`: every write allocates a new record
    /// that replaces the old one in the tree — Fig. 11's *Simple*, kept
    /// only to measure what overwrites are worth (§5.7).
    pub overwrites: bool,
    /// `true` (default): each worker recycles freed records and carves
    /// old-version copies from its own chunks (the role of Silo's per-core
    /// allocator, §5.1). `false`: every record comes from and returns to
    /// the global allocator — Fig. 11 without *+Allocator* (§5.7).
    pub record_pool: bool,
    /// `true` (default): workers free retired records and old versions once
    /// no reader can hold them (Silo §4.8). `false`: nothing is freed
    /// until the database is dropped, so memory grows with every
    /// replaced record and kept version — Fig. 11's *+NoGC*, for
    /// measurement only (§5.7). Deleted keys still leave their trees.
    pub gc: bool,
    /// How many conflicting attempts `Worker::run` makes before giving up.
    pub max_retries: u32,
    /// A deliberately broken Silo for testing the checker: commit skips
    /// read-set validation (Fig. 2, Phase 2), so it is NOT serializable.
    /// Only exists with the test-only `mutant` feature.
    #[cfg(feature = "mutant")]
    pub mutant_skip_read_validation: bool,
    /// Durable databases ([`Database::open`](crate::Database::open)) only:
    /// logger threads, each with its own directory `log.<i>` (make them
    /// symlinks to put logs on separate disks). SiloR §3.
    pub loggers: usize,
    /// Size of one worker log buffer (SiloR: 512 KB).
    pub log_buffer_bytes: usize,
    /// Buffers per worker; a worker whose buffers are all waiting for
    /// their logger blocks (backpressure).
    pub log_buffers_per_worker: usize,
    /// `true` (default): write log and checkpoint files with `O_DIRECT`
    /// where the file system supports it (Linux), so the kernel writes
    /// from granary's buffers instead of copying them into its page cache
    /// first; `false`, or a file system without it: ordinary buffered
    /// writes. Either way every such write is 4 KiB-aligned
    /// (docs/FORMAT.md).
    pub direct_io: bool,
    /// `true` (default): `run` returns only once the transaction is
    /// durable. `false`: it returns at commit; wait with
    /// [`Database::wait_durable`](crate::Database::wait_durable) on
    /// [`Worker::commit_token`](crate::Worker::commit_token).
    pub wait_for_durable: bool,
    /// Take a checkpoint this often (`None`: only on
    /// [`Database::checkpoint`](crate::Database::checkpoint)).
    pub checkpoint_interval: Option<Duration>,
    /// Checkpointer threads, each walking a key-range slice of every table.
    pub checkpoint_threads: usize,
    /// Files each checkpointer thread writes round-robin.
    pub checkpoint_files_per_thread: usize,
    /// Threads recovery uses to load the checkpoint and replay the logs.
    pub recovery_threads: usize,
    /// What opening a damaged directory does: [`RecoveryMode::Strict`]
    /// (default) refuses it; [`RecoveryMode::Salvage`] recovers what
    /// survives.
    pub recovery_mode: RecoveryMode,
}

/// How [`Database::open`](crate::Database::open) treats a directory that
/// lost durable data.
///
/// ```
/// use granary::{Database, Error, Options, RecoveryMode};
///
/// let dir = std::env::temp_dir().join(format!("granary-doc-salvage-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// {
///     let db = Database::open(&dir, Options::default())?;
///     let t = db.open_table("kv")?;
///     db.worker()?.run(|tx| tx.put(t, b"k", b"v"))?; // durable
/// }
/// // Cut the log file that holds that commit back to its header.
/// let log = dir.join("log.0").join("data.log");
/// std::fs::OpenOptions::new().write(true).open(&log).unwrap().set_len(4096).unwrap();
/// // A strict open refuses, naming the file.
/// match Database::open(&dir, Options::default()) {
///     Err(Error::Missing { path, .. }) => assert_eq!(path, log.canonicalize().unwrap()),
///     other => panic!("{other:?}"),
/// }
/// // A salvage recovers what survives (here: nothing after the cut) and
/// // says which acknowledged epochs were lost.
/// let salvage = Options::default().recovery_mode(RecoveryMode::Salvage);
/// let db = Database::open(&dir, salvage)?;
/// let report = db.durability_stats().unwrap().recovery.salvage.unwrap();
/// assert!(report.lost.is_some());
/// let t = db.open_table("kv")?;
/// assert_eq!(db.worker()?.run(|tx| tx.get(t, b"k").map(|v| v.is_some()))?, false);
/// drop(db);
/// // The salvaged directory opens strictly again.
/// Database::open(&dir, Options::default())?;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), granary::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecoveryMode {
    /// Open only if recovery holds everything the durable state needs;
    /// otherwise fail with [`Error::Missing`] or [`Error::Corrupt`] naming
    /// the file. Never an open with acknowledged data missing.
    #[default]
    Strict,
    /// Recover the longest consistent prefix that survives: the durable
    /// state as of the last epoch that every logger still holds completely
    /// (never one logger further than another). Epochs after it are lost
    /// for good; what was lost is in
    /// [`RecoveryStats::salvage`](crate::silo::durable::RecoveryStats::salvage).
    /// Before `open` returns, a checkpoint of the salvaged state is taken
    /// and the damaged files are deleted, so the directory opens strictly
    /// again. Fails with [`Error::Missing`] if no consistent state
    /// survives from the checkpoint on (its logs from e_l through e_h
    /// are damaged), or the checkpoint itself is gone.
    Salvage,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            epoch_interval: Duration::from_millis(40),
            snapshots: true,
            snapshot_versions_idle_epochs: Some(250),
            max_workers: 256,
            global_tid: false,
            point_index: false,
            overwrites: true,
            record_pool: true,
            gc: true,
            max_retries: granary_api::retry::MAX_ATTEMPTS,
            #[cfg(feature = "mutant")]
            mutant_skip_read_validation: false,
            loggers: 1,
            log_buffer_bytes: 512 << 10,
            log_buffers_per_worker: 8,
            direct_io: true,
            wait_for_durable: true,
            checkpoint_interval: None,
            checkpoint_threads: 2,
            checkpoint_files_per_thread: 2,
            recovery_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            recovery_mode: RecoveryMode::Strict,
        }
    }
}

impl Options {
    pub fn epoch_interval(mut self, d: Duration) -> Self {
        self.epoch_interval = d;
        self
    }
    pub fn snapshots(mut self, on: bool) -> Self {
        self.snapshots = on;
        self
    }
    pub fn max_workers(mut self, n: usize) -> Self {
        self.max_workers = n;
        self
    }
    pub fn snapshot_versions_idle_epochs(mut self, n: Option<u64>) -> Self {
        self.snapshot_versions_idle_epochs = n;
        self
    }
    pub fn global_tid(mut self, on: bool) -> Self {
        self.global_tid = on;
        self
    }
    pub fn point_index(mut self, on: bool) -> Self {
        self.point_index = on;
        self
    }
    pub fn overwrites(mut self, on: bool) -> Self {
        self.overwrites = on;
        self
    }
    pub fn record_pool(mut self, on: bool) -> Self {
        self.record_pool = on;
        self
    }
    pub fn gc(mut self, on: bool) -> Self {
        self.gc = on;
        self
    }
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }
    pub fn loggers(mut self, n: usize) -> Self {
        self.loggers = n;
        self
    }
    pub fn log_buffer_bytes(mut self, n: usize) -> Self {
        self.log_buffer_bytes = n;
        self
    }
    pub fn log_buffers_per_worker(mut self, n: usize) -> Self {
        self.log_buffers_per_worker = n;
        self
    }
    pub fn direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }
    pub fn wait_for_durable(mut self, on: bool) -> Self {
        self.wait_for_durable = on;
        self
    }
    pub fn checkpoint_interval(mut self, every: Option<Duration>) -> Self {
        self.checkpoint_interval = every;
        self
    }
    pub fn checkpoint_threads(mut self, n: usize) -> Self {
        self.checkpoint_threads = n;
        self
    }
    pub fn checkpoint_files_per_thread(mut self, n: usize) -> Self {
        self.checkpoint_files_per_thread = n;
        self
    }
    pub fn recovery_threads(mut self, n: usize) -> Self {
        self.recovery_threads = n;
        self
    }
    pub fn recovery_mode(mut self, m: RecoveryMode) -> Self {
        self.recovery_mode = m;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::InvalidOption(m.into()));
        if self.epoch_interval.is_zero() {
            return bad("epoch_interval must be positive");
        }
        if self.max_workers == 0 {
            return bad("max_workers must be at least 1");
        }
        if self.loggers == 0 || self.loggers > crate::silo::durable::format::MAX_LOGGERS {
            return Err(Error::InvalidOption(format!(
                "loggers must be between 1 and {}",
                crate::silo::durable::format::MAX_LOGGERS
            )));
        }
        if self.log_buffer_bytes < 4096 || self.log_buffer_bytes > (1 << 30) {
            return bad("log_buffer_bytes must be between 4 KiB and 1 GiB");
        }
        if self.log_buffers_per_worker < 2 {
            return bad("log_buffers_per_worker must be at least 2");
        }
        if self.checkpoint_interval.is_some_and(|d| d.is_zero()) {
            return bad("checkpoint_interval must be positive");
        }
        if self.checkpoint_threads == 0 || self.checkpoint_files_per_thread == 0 {
            return bad("checkpoint_threads and checkpoint_files_per_thread must be at least 1");
        }
        Ok(())
    }

    /// See [`Options::mutant_skip_read_validation`]. Test-only.
    #[cfg(feature = "mutant")]
    pub fn mutant_skip_read_validation(mut self, on: bool) -> Self {
        self.mutant_skip_read_validation = on;
        self
    }
}
