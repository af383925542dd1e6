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

/// The longest key granary accepts, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// The longest value granary accepts, in bytes.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
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
    /// See [`Options::mutant_skip_read_validation`]. Test-only.
    #[cfg(feature = "mutant")]
    pub fn mutant_skip_read_validation(mut self, on: bool) -> Self {
        self.mutant_skip_read_validation = on;
        self
    }
}

/// A table's handle: a small copyable id, valid for the database that
/// created it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub(crate) u32);

impl TableId {
    /// The table's index in its database.
    pub fn index(self) -> u32 {
        self.0
    }
}

pub(crate) struct Table {
    pub name: String,
    pub tree: Tree,
}

pub(crate) struct Shared {
    pub epochs: Epochs,
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
        if options.epoch_interval.is_zero() {
            return Err(Error::InvalidOption(
                "epoch_interval must be positive".into(),
            ));
        }
        if options.max_workers == 0 {
            return Err(Error::InvalidOption(
                "max_workers must be at least 1".into(),
            ));
        }
        let shared = Arc::new(Shared {
            epochs: Epochs::new(options.max_workers, options.snapshot_versions_idle_epochs),
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
        Ok(Database { shared })
    }

    /// Create a table.
    ///
    /// # Errors
    /// [`Error::TableExists`] if the name is taken; [`Error::TooManyTables`]
    /// past [`MAX_TABLES`].
    pub fn create_table(&self, name: &str) -> Result<TableId, Error> {
        let mut names = self.shared.names.lock();
        if names.contains_key(name) {
            return Err(Error::TableExists(name.to_string()));
        }
        let id = names.len();
        if id >= MAX_TABLES {
            return Err(Error::TooManyTables { max: MAX_TABLES });
        }
        let t = TableId(id as u32);
        let _ = self.shared.tables[id].set(Table {
            name: name.to_string(),
            tree: Tree::new(),
        });
        names.insert(name.to_string(), t);
        Ok(t)
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
        Worker::new(self.shared.clone())
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
