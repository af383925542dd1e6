//! The multiversion store on one global timestamp counter that Hekaton's
//! optimistic serializable scheme ([`crate::hekaton`]; Larson et al.,
//! PVLDB 2011, as BOHM §4 runs it) and Snapshot Isolation ([`crate::si`])
//! run on; each design is the store with its [`Certifier`].
//!
//! * **Versions.** Each key's versions form a chain, newest first. A
//!   version has a begin and an end field, each either a timestamp or a
//!   reference to the transaction that is writing it; a committed version
//!   is valid over `[begin, end)`.
//! * **The counter.** One global counter hands out a transaction's begin
//!   timestamp (its read time) and its end timestamp (its commit time): at
//!   least two atomic increments per transaction, on one cache line that
//!   every core fights over. That is the cost BOHM §4 and Silo §5.2 measure,
//!   so it stays.
//! * **Writes** update only the newest version: the writer claims its end
//!   field (compare-and-swap from ∞ to its own reference) and links a new
//!   version on top. A version whose end is claimed by another
//!   transaction, or that began after the writer's read time, is a
//!   write-write conflict: the writer aborts ([`AbortReason::WriteConflict`];
//!   the first updater wins).
//! * **Reads** see the version valid at the read time. A version whose
//!   writer is still committing (it has its end timestamp but not yet its
//!   outcome) is read speculatively when that timestamp is below the read
//!   time, and the reader takes a **commit dependency** on the writer: it
//!   may not commit before the writer does, and aborts
//!   ([`AbortReason::CommitDependency`]) if the writer aborts (Hekaton §3.2).
//!   Symmetrically, a version whose end is being committed below the read
//!   time is ignored speculatively, with a dependency.
//! * **Commit.** Hekaton (serializable): take the end timestamp, then
//!   check that every version read is still the one valid at the end
//!   timestamp ([`AbortReason::ReadValidation`]), and that no scanned index
//!   leaf changed ([`AbortReason::NodeValidation`]: phantoms, checked the
//!   way Silo §4.6 does rather than by repeating the scans, see
//!   ARCHITECTURE.md). Snapshot Isolation validates nothing: it reads at
//!   its begin timestamp and lets only write-write conflicts abort it, so
//!   it shows write skew. Then wait for dependencies, publish the outcome,
//!   and write timestamps into the versions (postprocessing).
//! * **Garbage.** Below a committed version that began before the oldest
//!   active read time, no transaction will ever read: each of them sees
//!   that version or a newer one. A writer, while it still owns the newest
//!   version of a chain (before it publishes its commit, so no one else
//!   changes the chain), cuts the chain below the first such version and
//!   frees what it cut through epoch reclamation, all of a transaction's
//!   cuts in one deferred call (one call per version outran crossbeam's
//!   collector). So a key keeps the versions the running transactions may
//!   need, plus one.
//!
//! Memory ordering. Version fields and chain links are stored with
//! Release and loaded with Acquire: a reader that sees a version (or a
//! timestamp in it) sees the value and links written before it was
//! published. The transaction table (slot words, end timestamps, read-time
//! bounds, dependency counts) and the counter use SeqCst: the arguments
//! above (an ACTIVE writer's timestamp is above the observer's; the oldest
//! reader is never missed) order a store in one thread before a load in
//! another, which only a total order gives.

//!
//! The code by part: `version` (versions, chains, tables), `shared` (the
//! transaction table), `txn`, `runner`, `gc`, `session`, and `ssn` (the
//! Serial Safety Net's stamps, for ERMIA).

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use granary_api::{
    AbortReason, Engine, Error, Hints, Interactive, InteractiveTx, Stats, TableId, TableOptions,
    Tx, TxError, TxRunner,
};
use granary_index::{Insert, LeafRef, NodeChange, Tree};

use crate::catalog::Catalog;
use crate::reclaim::{retire_all, retire_box, Pin};
use crate::scan::Batch;
use crate::sync::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Backoff, Ordering};
use crate::value::{Tail, Tight};
use granary_api::limits::{check_bounds, check_key, check_value};

mod gc;
mod runner;
mod session;
mod shared;
mod ssn;
mod txn;
mod version;

#[cfg(test)]
mod tests;

pub use runner::Runner;
pub use session::Session;
pub use txn::Txn;

use gc::*;
use runner::*;
use shared::*;
use txn::*;
use version::*;

/// What a design on this store checks when a transaction commits: the
/// one thing Hekaton (`crate::hekaton`), Snapshot Isolation (`crate::si`)
/// and ERMIA's Serial Safety Net (`crate::ermia`) do differently. The
/// store calls [`Certifier::certify`] once the transaction holds its end
/// timestamp and its writes are installed, before it waits for its commit
/// dependencies, and [`Certifier::install`] once it is sure to commit,
/// before it publishes the outcome.
pub trait Certifier: Send + Sync + 'static {
    /// Whether transactions record what they read (each read version and
    /// each scanned or absent key's leaf) for `certify` to check.
    const RECORDS_READS: bool;

    /// Whether the store runs each commit, from taking the end timestamp
    /// to publishing the outcome, under one latch, so that `certify` and
    /// `install` see every earlier commit whole and in end-timestamp
    /// order; read-only transactions then commit through it too (they are
    /// certified like any other).
    const SERIAL_COMMIT: bool = false;

    /// May `tx`, ending at timestamp `end`, commit? `Ok` carries what
    /// [`Certifier::install`] needs (the Serial Safety Net: π(T)).
    fn certify(tx: &Txn<'_, Self>, end: u64) -> Result<u64, AbortReason>
    where
        Self: Sized;

    /// `tx` commits at `end`, `certified` as `certify` returned (`end`
    /// where certification was skipped): leave what later commits will
    /// check.
    fn install(_tx: &Txn<'_, Self>, _end: u64, _certified: u64)
    where
        Self: Sized,
    {
    }
}

/// The most concurrent runners.
pub const MAX_WORKERS: usize = 1024;

/// A multiversion database whose transactions commit as `C` decides.
pub struct Mvcc<C: Certifier>(Arc<Shared>, PhantomData<C>);

impl<C: Certifier> Default for Mvcc<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Certifier> Mvcc<C> {
    /// An empty database.
    pub fn new() -> Self {
        Self::build(false)
    }

    /// An empty database whose tables hinted
    /// [`TableOptions::point_lookups`] keep a point index
    /// (`granary_index::Tree::with_point_index`): a key's version chain
    /// takes one hash probe to find instead of a descent.
    pub fn with_point_index() -> Self {
        Self::build(true)
    }

    /// An empty database (with point indexes if `point_index`) whose
    /// every table keeps the chains of the keys that are numbers below `n`
    /// in an array, as if hinted [`TableOptions::dense_keys`] (a larger
    /// hint wins): the conformance suite runs this way too.
    pub fn with_dense_keys(point_index: bool, n: u64) -> Self {
        let mut m = Self::build(point_index);
        Arc::get_mut(&mut m.0).expect("new").dense_keys = n;
        m
    }

    fn build(point_index: bool) -> Self {
        Mvcc(
            Arc::new(Shared {
                clock: CachePadded::new(AtomicU64::new(1)),
                slots: (0..MAX_WORKERS).map(|_| CachePadded::default()).collect(),
                high: AtomicUsize::new(0),
                tables: Catalog::default(),
                point_index,
                dense_keys: 0,
                commit_latch: Mutex::new(()),
                absent_pstamp: AtomicU64::new(0),
                #[cfg(feature = "mutant")]
                mutant_skip_validation: false,
            }),
            PhantomData,
        )
    }

    /// A database with a deliberate bug: transactions record their reads
    /// and scanned leaves, but commit without certifying them. On
    /// Hekaton that gives snapshot isolation while claiming
    /// serializability; on ERMIA, SI with the Serial Safety Net's stamps
    /// kept but its exclusion window never tested. NOT serializable:
    /// test-only `mutant` builds, for the checker to catch (write skew).
    #[cfg(feature = "mutant")]
    pub fn mutant_skipping_validation() -> Self {
        let mut m = Self::build(false);
        Arc::get_mut(&mut m.0).expect("new").mutant_skip_validation = true;
        m
    }
}

impl<C: Certifier> Engine for Mvcc<C> {
    type Runner = Runner<C>;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        self.create_table_with(name, TableOptions::default())
    }

    fn create_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
        let tree = if self.0.point_index && o.point_lookups {
            Tree::with_point_index()
        } else {
            Tree::new()
        };
        let o = o.with_dense_keys(o.dense_keys.max(self.0.dense_keys));
        let table = Table::new(tree, o)?;
        self.0.tables.create(name, || table)
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.0.tables.find(name)
    }

    fn runner(&self) -> Result<Runner<C>, Error> {
        let slot = self
            .0
            .slots
            .iter()
            .position(|s| {
                // AcqRel: Acquire sees the slot as its last runner left it
                // (released by `in_use`'s Release store in `Runner::drop`); the
                // Release half orders nothing here.
                s.in_use
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(Error::TooManyWorkers { max: MAX_WORKERS })?;
        let s = &self.0.slots[slot];
        // SeqCst: as every store to the garbage collector's watermark `begin`
        // (`oldest_reader` reads the bounds and the clock in one total order).
        s.begin.store(INF, Ordering::SeqCst);
        let seq = (s.word.load(Ordering::Relaxed) >> 2) + 1;
        s.dependents.lock().unwrap_or_else(|p| p.into_inner()).seq = seq;
        // SeqCst: the slot joins `oldest_reader`'s scan (it loads `high`)
        // before any read time is published in it.
        self.0.high.fetch_max(slot + 1, Ordering::SeqCst);
        Ok(Runner {
            db: self.0.clone(),
            slot,
            st: State::default(),
            books: Books {
                seq,
                oldest: 0,
                until_scan: 0,
                stats: Stats::default(),
                backoff: Backoff::new(),
                last_end: 0,
                unhook: VecDeque::new(),
            },
            certifier: PhantomData,
        })
    }
}
