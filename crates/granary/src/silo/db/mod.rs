//! The database handle ([`Database`]): it makes the engine state, names
//! its tables and hands out workers. The top of the engine; `open.rs`
//! adds [`Database::open`].

mod open;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;
use granary_api::{TableId, TableOptions, MAX_TABLE_NAME_BYTES};
use granary_index::Tree;
use parking_lot::Mutex;

use crate::silo::epoch::Epochs;
use crate::silo::error::Error;
use crate::silo::gc::GcLists;
use crate::silo::options::Options;
use crate::silo::shared::{Owner, Shared, Table, MAX_TABLES};
use crate::silo::sync::{AtomicU64, Ordering};
use crate::silo::worker::Worker;

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
        #[cfg(not(feature = "loom"))]
        crate::silo::epoch::spawn_advancer(Arc::downgrade(&shared), shared.options.epoch_interval)
            .map_err(Error::Io)?;
        let owner = Some(Arc::new(Owner {
            shared: shared.clone(),
            lock: Mutex::new(None),
        }));
        Ok(Database { shared, owner })
    }

    /// Take a checkpoint now (SiloR §4.1); returns what it wrote. Logs it
    /// makes redundant and the previous checkpoint are deleted before it
    /// returns, in paced steps (about 0.4 GB a second with 40 ms epochs,
    /// so freeing them does not stall the log; see ARCHITECTURE.md).
    ///
    /// # Errors
    /// [`Error::InvalidOption`] on an in-memory database; storage errors
    /// (which also poison the database).
    pub fn checkpoint(&self) -> Result<crate::silo::durable::checkpoint::CheckpointStats, Error> {
        crate::silo::durable::checkpoint::run(&self.shared)
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
    pub fn durability_stats(&self) -> Option<crate::silo::durable::log::DurabilityStats> {
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
        self.create_table_with(name, TableOptions::default())
    }

    /// Create a table with hints on its use: with
    /// [`Options::point_index`](crate::Options::point_index) on, a table
    /// of [`TableOptions::point_lookups`] keeps a point index beside its
    /// tree. The hint is not logged: a table recovered from disk has no
    /// point index.
    ///
    /// # Errors
    /// As for [`Database::create_table`].
    pub fn create_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
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
        let tree = if self.shared.options.point_index && o.point_lookups {
            Tree::with_point_index()
        } else {
            Tree::new()
        };
        let _ = self.shared.tables[id].set(Table::new(name, tree));
        names.insert(name.to_string(), t);
        Ok(t)
    }

    /// The table with this name, created if there is none (for code that
    /// runs both on a fresh directory and on a recovered one).
    ///
    /// # Errors
    /// As for [`Database::create_table`].
    pub fn open_table(&self, name: &str) -> Result<TableId, Error> {
        self.open_table_with(name, TableOptions::default())
    }

    /// [`Database::open_table`], creating the table with `o`
    /// ([`Database::create_table_with`]) if it does not exist.
    ///
    /// # Errors
    /// As for [`Database::create_table`].
    pub fn open_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
        match self.table(name) {
            Ok(t) => Ok(t),
            Err(_) => match self.create_table_with(name, o) {
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
        self.shared.tables()
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
