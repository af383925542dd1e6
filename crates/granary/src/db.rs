//! The database handle, its options, and the table catalog.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use granary_index::Tree;
use parking_lot::Mutex;

use crate::epoch::{Epochs, Tick};
use crate::error::Error;
use crate::gc::GcLists;
use crate::record::Record;
use crate::sync::{AtomicU64, Ordering};
use crate::worker::Worker;

pub use granary_api::{TableId, MAX_TABLE_NAME_BYTES};
/// The most tables one database can hold.
pub const MAX_TABLES: usize = 4096;

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
    /// How many conflicting attempts `Worker::run` makes before giving up.
    pub max_retries: u32,
    /// A deliberately broken Silo for testing the checker: commit skips
    /// read-set validation (Fig. 2, Phase 2), so it is NOT serializable.
    /// Only exists with the test-only `mutant` feature.
    #[cfg(feature = "mutant")]
    pub mutant_skip_read_validation: bool,
    /// Durable databases ([`Database::open`]) only: logger threads, each
    /// with its own directory `log.<i>` (make them symlinks to put logs on
    /// separate disks). SiloR §3.
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
    /// [`Database::wait_durable`] on [`Worker::commit_token`](crate::Worker::commit_token).
    pub wait_for_durable: bool,
    /// Take a checkpoint this often (`None`: only on
    /// [`Database::checkpoint`]).
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

/// How [`Database::open`] treats a directory that lost durable data.
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
    /// [`RecoveryStats::salvage`](crate::durable::RecoveryStats::salvage).
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
            max_retries: 100_000,
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

    fn validate(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::InvalidOption(m.into()));
        if self.epoch_interval.is_zero() {
            return bad("epoch_interval must be positive");
        }
        if self.max_workers == 0 {
            return bad("max_workers must be at least 1");
        }
        if self.loggers == 0 || self.loggers > crate::durable::format::MAX_LOGGERS {
            return Err(Error::InvalidOption(format!(
                "loggers must be between 1 and {}",
                crate::durable::format::MAX_LOGGERS
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

pub(crate) struct Table {
    pub name: String,
    pub tree: Tree,
}

pub(crate) struct Shared {
    pub epochs: Arc<Epochs>,
    /// Set (once) for a database opened on a directory.
    pub durable: OnceLock<Arc<crate::durable::Durable>>,
    pub tables: Box<[OnceLock<Table>]>,
    names: Mutex<HashMap<String, TableId>>,
    pub options: Options,
    /// Only used with `Options::global_tid`.
    pub global_tid: CachePadded<AtomicU64>,
    /// Garbage left by dropped workers, adopted by the next worker that
    /// starts a transaction.
    pub orphans: Mutex<GcLists>,
    pub orphan_count: AtomicU64,
}

impl Shared {
    #[inline]
    pub fn table(&self, t: TableId) -> Result<&Table, Error> {
        self.tables
            .get(t.0 as usize)
            .and_then(|c| c.get())
            .ok_or_else(|| Error::UnknownTableId(t.0))
    }
}

impl Tick for Shared {
    fn tick(&self) {
        self.epochs.advance();
        if let Some(d) = self.durable.get() {
            d.on_tick();
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone: no worker, no reader.
        unsafe { self.orphans.get_mut().free_all() };
        for t in self.tables.iter_mut() {
            if let Some(t) = t.get_mut() {
                t.tree.for_each_value(|v| {
                    // SAFETY: every value is a live record owned by the tree;
                    // superseded versions were freed with the garbage above.
                    unsafe { Record::free(std::ptr::NonNull::new_unchecked(v as *mut Record)) }
                });
            }
        }
    }
}

/// An in-memory Silo database. Cloning the handle is cheap; the database
/// lives until the last handle and the last [`Worker`] are dropped.
///
/// ```
/// use granary::{Database, Options};
///
/// let db = Database::new(Options::default())?;
/// let accounts = db.create_table("accounts")?;
/// let mut w = db.worker()?;
/// w.run(|tx| {
///     tx.put(accounts, b"alice", b"100")?;
///     tx.put(accounts, b"bob", b"50")
/// })?;
/// let alice = w.run(|tx| Ok(tx.get(accounts, b"alice")?.map(|v| v.to_vec())))?;
/// assert_eq!(alice.as_deref(), Some(&b"100"[..]));
/// # Ok::<(), granary::Error>(())
/// ```
#[derive(Clone)]
pub struct Database {
    pub(crate) shared: Arc<Shared>,
    /// Held by every user handle and worker (not by granary's own
    /// threads): when the last one goes, a durable database flushes,
    /// stops its threads and unlocks its directory.
    pub(crate) owner: Option<Arc<Owner>>,
}

/// See [`Database::owner`].
pub(crate) struct Owner {
    shared: Arc<Shared>,
    /// The directory lock, released last.
    pub lock: Mutex<Option<std::fs::File>>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(d) = self.shared.durable.get() {
            d.checkpoints.stop();
            d.checkpoints.join();
            // No user worker is left and the checkpointer has stopped:
            // two ticks put every commit below the bound the loggers
            // flush up to.
            self.shared.epochs.advance();
            self.shared.epochs.advance();
            d.shutdown();
        }
        drop(self.lock.lock().take());
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("epoch", &self.epoch())
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// Create an empty in-memory database and start its epoch thread.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a zero epoch interval or worker limit;
    /// [`Error::Io`] if the epoch thread cannot be started.
    pub fn new(options: Options) -> Result<Database, Error> {
        options.validate()?;
        let shared = Arc::new(Shared {
            epochs: Arc::new(Epochs::new(
                options.max_workers,
                options.snapshot_versions_idle_epochs,
            )),
            durable: OnceLock::new(),
            tables: (0..MAX_TABLES).map(|_| OnceLock::new()).collect(),
            names: Mutex::new(HashMap::new()),
            global_tid: CachePadded::new(AtomicU64::new(0)),
            orphans: Mutex::new(GcLists::default()),
            orphan_count: AtomicU64::new(0),
            options,
        });
        #[cfg(not(loom))]
        crate::epoch::spawn_advancer(Arc::downgrade(&shared), shared.options.epoch_interval)
            .map_err(Error::Io)?;
        let owner = Some(Arc::new(Owner {
            shared: shared.clone(),
            lock: Mutex::new(None),
        }));
        Ok(Database { shared, owner })
    }

    /// Open (or create) a durable database in `dir` (SiloR): recover
    /// whatever the directory holds — the newest complete checkpoint plus
    /// the log up to the persistent epoch — then serve, logging every
    /// commit. Tables come back under their names and ids.
    ///
    /// With the default `wait_for_durable`, [`Worker::run`] returns only
    /// once the transaction is durable (about one to three epochs).
    ///
    /// ```
    /// use granary::{Database, Options};
    /// let dir = std::env::temp_dir().join(format!("granary-doc-open-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let opts = Options::default().epoch_interval(std::time::Duration::from_millis(5));
    /// {
    ///     let db = Database::open(&dir, opts.clone())?;
    ///     let t = db.open_table("kv")?;
    ///     db.worker()?.run(|tx| tx.put(t, b"k", b"v"))?; // durable on return
    /// }
    /// let db = Database::open(&dir, opts)?; // recovers
    /// let t = db.table("kv")?;
    /// let v = db.worker()?.run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))?;
    /// assert_eq!(v.as_deref(), Some(&b"v"[..]));
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), granary::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Locked`] if another process or handle has the directory
    /// open; [`Error::Corrupt`] for damage within what was durable (see
    /// `docs/FORMAT.md` for the recovery policy); [`Error::Storage`] for
    /// failed file operations; [`Error::InvalidOption`] for bad options,
    /// or a logger count different from the directory's.
    pub fn open(dir: impl AsRef<std::path::Path>, options: Options) -> Result<Database, Error> {
        crate::durable::open(dir.as_ref(), options)
    }

    /// Take a checkpoint now (SiloR §4.1); returns what it wrote. Logs it
    /// makes redundant and the previous checkpoint are deleted before it
    /// returns, in paced steps (about 0.4 GB a second with 40 ms epochs,
    /// so freeing them does not stall the log; see ARCHITECTURE.md).
    ///
    /// # Errors
    /// [`Error::InvalidOption`] on an in-memory database; storage errors
    /// (which also poison the database).
    pub fn checkpoint(&self) -> Result<crate::durable::CheckpointStats, Error> {
        crate::durable::checkpoint::run(self)
    }

    /// The persistent epoch e_p: every transaction of an epoch ≤ e_p is
    /// durable. `None` for an in-memory database.
    pub fn durable_epoch(&self) -> Option<u64> {
        // Acquire: pairs with the Release store in `publish_pepoch`, after
        // e_p was written durably.
        self.shared
            .durable
            .get()
            .map(|d| d.pepoch.load(Ordering::Acquire))
    }

    /// Block until the transaction behind `token` is durable (returns at
    /// once on an in-memory database).
    ///
    /// # Errors
    /// [`Error::Poisoned`] if the log failed, or the database is closing.
    pub fn wait_durable(&self, token: crate::CommitToken) -> Result<(), Error> {
        match self.shared.durable.get() {
            Some(d) => d.wait_durable(token.epoch),
            None => Ok(()),
        }
    }

    /// Whether the transaction behind `token` is durable yet.
    pub fn is_durable(&self, token: crate::CommitToken) -> bool {
        self.durable_epoch().is_none_or(|e| e >= token.epoch)
    }

    /// Logging and recovery figures (`None` for an in-memory database).
    pub fn durability_stats(&self) -> Option<crate::durable::DurabilityStats> {
        self.shared.durable.get().map(|d| d.stats())
    }

    /// Stop the periodic checkpointer, then drop this handle. When it is
    /// the last handle (and no worker is left), everything committed is
    /// flushed and the directory is unlocked before this returns.
    pub fn close(self) {
        if let Some(d) = self.shared.durable.get() {
            d.checkpoints.stop();
            d.checkpoints.join();
        }
    }

    /// Create a table.
    ///
    /// # Errors
    /// [`Error::TableExists`] if the name is taken; [`Error::TooManyTables`]
    /// past [`MAX_TABLES`]; [`Error::TableNameTooLong`] past
    /// [`MAX_TABLE_NAME_BYTES`].
    pub fn create_table(&self, name: &str) -> Result<TableId, Error> {
        if name.len() > MAX_TABLE_NAME_BYTES {
            return Err(Error::TableNameTooLong {
                len: name.len(),
                max: MAX_TABLE_NAME_BYTES,
            });
        }
        let mut names = self.shared.names.lock();
        if names.contains_key(name) {
            return Err(Error::TableExists(name.to_string()));
        }
        let id = names.len();
        if id >= MAX_TABLES {
            return Err(Error::TooManyTables { max: MAX_TABLES });
        }
        let t = TableId(id as u32);
        if let Some(d) = self.shared.durable.get() {
            d.add_table(t.0, name)?;
        }
        let _ = self.shared.tables[id].set(Table {
            name: name.to_string(),
            tree: Tree::new(),
        });
        names.insert(name.to_string(), t);
        Ok(t)
    }

    /// The table with this name, created if there is none (for code that
    /// runs both on a fresh directory and on a recovered one).
    ///
    /// # Errors
    /// As for [`Database::create_table`].
    pub fn open_table(&self, name: &str) -> Result<TableId, Error> {
        match self.table(name) {
            Ok(t) => Ok(t),
            Err(_) => match self.create_table(name) {
                Err(Error::TableExists(_)) => self.table(name),
                r => r,
            },
        }
    }

    /// The table with this name.
    ///
    /// # Errors
    /// [`Error::UnknownTable`].
    pub fn table(&self, name: &str) -> Result<TableId, Error> {
        self.shared
            .names
            .lock()
            .get(name)
            .copied()
            .ok_or_else(|| Error::UnknownTable(name.to_string()))
    }

    /// The table's name.
    ///
    /// # Errors
    /// [`Error::UnknownTableId`].
    pub fn table_name(&self, t: TableId) -> Result<String, Error> {
        Ok(self.shared.table(t)?.name.clone())
    }

    /// Every table, in creation order.
    pub fn tables(&self) -> Vec<(String, TableId)> {
        let mut v: Vec<_> = self
            .shared
            .names
            .lock()
            .iter()
            .map(|(n, t)| (n.clone(), *t))
            .collect();
        v.sort_by_key(|(_, t)| *t);
        v
    }

    /// A worker handle for the calling thread. Each thread that runs
    /// transactions needs its own.
    ///
    /// # Errors
    /// [`Error::TooManyWorkers`] past `Options::max_workers` live workers.
    pub fn worker(&self) -> Result<Worker, Error> {
        Worker::new(self.shared.clone(), self.owner.clone())
    }

    /// The current global epoch.
    pub fn epoch(&self) -> u64 {
        self.shared.epochs.global()
    }

    /// The current global snapshot epoch: snapshot transactions started now
    /// see every transaction committed in an earlier epoch (and none from
    /// this epoch or later).
    pub fn snapshot_epoch(&self) -> u64 {
        self.shared.epochs.snapshot()
    }

    /// Block until snapshot transactions see everything committed before
    /// this call (about `25 + 25` epochs at worst: Silo's snapshots trail
    /// the present by design, §4.9).
    pub fn wait_for_snapshot(&self) {
        let target = self.epoch();
        while self.snapshot_epoch() <= target {
            std::thread::sleep(self.shared.options.epoch_interval / 2);
        }
    }

    /// Advance the epoch as the epoch thread does (for deterministic tests
    /// with a long `epoch_interval`).
    #[doc(hidden)]
    pub fn tick_epoch_for_tests(&self) {
        self.shared.epochs.advance();
    }

    /// Ticks the epoch thread skipped because a worker lagged behind.
    pub fn delayed_epoch_ticks(&self) -> u64 {
        self.shared.epochs.delayed_ticks.load(Ordering::Relaxed)
    }

    /// The options the database was created with.
    pub fn options(&self) -> &Options {
        &self.shared.options
    }
}
