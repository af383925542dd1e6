//! Multiversion concurrency control on one global timestamp counter:
//! Hekaton's optimistic serializable scheme (Larson et al., VLDB'12, as
//! BOHM §4 runs it) and Snapshot Isolation, on the same version store.
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

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use granary_api::{
    AbortReason, Engine, Error, Hints, Interactive, InteractiveTx, Stats, TableId, TableOptions,
    Tx, TxError, TxRunner,
};
use granary_index::{Insert, LeafRef, NodeChange, Tree};

use crate::catalog::Catalog;
use crate::limits::{check_bounds, check_key, check_value};
use crate::reclaim::{retire_all, retire_box, Pin};
use crate::scan::Batch;
use crate::sync::Backoff;
use crate::value::{Tail, Tight};

/// Which isolation the store gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Hekaton's optimistic serializable scheme: read validation at commit.
    Serializable,
    /// Snapshot isolation: first updater wins, no read validation.
    Snapshot,
}

/// The most concurrent runners.
pub const MAX_WORKERS: usize = 1024;

/// "Not ended yet", and the begin of an aborted version (never visible).
const INF: u64 = (1 << 63) - 1;
/// A field holding a transaction reference rather than a timestamp.
const REF: u64 = 1 << 63;
/// The end of a deletion whose key has left the tree (`unhook_due`): as a
/// timestamp it is later than any, so the deletion stays visible to
/// readers still on the chain, and it is not `INF`, so no writer can
/// claim it; validation fails a read of it (a new chain may hold a newer
/// version of the key).
const DEAD: u64 = INF - 1;
const SLOT_BITS: u32 = 10;

fn txref(slot: usize, seq: u64) -> u64 {
    REF | seq << SLOT_BITS | slot as u64
}

fn ref_parts(f: u64) -> (usize, u64) {
    (
        (f & ((1 << SLOT_BITS) - 1)) as usize,
        (f & !REF) >> SLOT_BITS,
    )
}

/// A version's header: its validity and the version below it.
struct Stamps {
    begin: AtomicU64,
    end: AtomicU64,
    prev: AtomicPtr<Version>,
}

/// A version: [`Stamps`] and the value's bytes right after them, in one
/// allocation ([`Tail`], [`Tight`]). A version of a value up to 36 bytes is one cache
/// line; a longer one is one block, not a header and a second, dependent
/// heap block (BOHM's 10RMW writes 1,000-byte values: two allocations and
/// two frees per write were a quarter of its time). The value and its
/// length are written only by the version's creator before it commits.
type Version = Tail<Stamps, Tight>;

/// A new version of `value` (`None`: a deletion) by `begin`, on `prev`.
fn new_version(begin: u64, prev: *mut Version, value: Option<&[u8]>) -> *mut Version {
    #[cfg(test)]
    LIVE_VERSIONS.fetch_add(1, Ordering::Relaxed);
    let stamps = Stamps {
        begin: AtomicU64::new(begin),
        end: AtomicU64::new(INF),
        prev: AtomicPtr::new(prev),
    };
    Version::alloc(stamps, value, 0)
}

/// Free a version made by [`new_version`].
///
/// # Safety
/// As [`Tail::free`].
unsafe fn free_version(p: *mut Version) {
    #[cfg(test)]
    LIVE_VERSIONS.fetch_sub(1, Ordering::Relaxed);
    // SAFETY: the caller's contract.
    unsafe { Version::free(p) }
}

/// Versions alive in this process (unit tests only: they check that
/// garbage is freed, not just unlinked).
#[cfg(test)]
static LIVE_VERSIONS: AtomicUsize = AtomicUsize::new(0);

/// Free the versions at `ps` (addresses, or [`Tail::tagged`] ones) once
/// no pinned thread can see them: one deferred call for the lot (see
/// [`crate::reclaim::retire_all`]).
///
/// # Safety
/// Each is unreachable for threads that pin from now on, and retired once.
unsafe fn retire_versions(g: &Guard, ps: Vec<usize>) {
    /// # Safety
    /// As [`free_version`], for an address or a [`Tail::tagged`] one.
    unsafe fn free(p: usize) {
        #[cfg(test)]
        LIVE_VERSIONS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { Version::free_tagged(p) }
    }
    // SAFETY: the caller's contract.
    unsafe { retire_all(g, ps, free) }
}

// SAFETY: a version's length and bytes change only while it is its
// uncommitted writer's (readers other than the writer never read them
// then: an active writer's versions are invisible to them).
unsafe impl Sync for Version {}
// SAFETY: as above; a version is plain data.
unsafe impl Send for Version {}

/// A key's version chain (what the index maps the key to).
struct Chain {
    head: AtomicPtr<Version>,
}

/// The most chains a table's array may hold ([`TableOptions::dense_keys`]):
/// 8 GiB of them.
const DENSE_MAX: u64 = 1 << 30;

/// A table: its index, which maps each key to its chain, and the chains
/// of the keys that are numbers below [`TableOptions::dense_keys`], in an
/// array by number. Such a key's chain is found by its address, one load
/// from its newest version (as the BOHM authors' stores find a record by
/// `&slots[key]`), not by an index probe first; the index still maps the
/// key to it, for scans and their phantom checks, from the key's first
/// write on. An array chain is never unhooked or freed before the table:
/// a deleted key keeps its tombstone (older versions are still cut).
struct Table {
    tree: Tree,
    dense: Box<[Chain]>,
}

impl Table {
    fn new(tree: Tree, o: TableOptions) -> Result<Table, Error> {
        if o.dense_keys > DENSE_MAX {
            return Err(Error::InvalidOption(format!(
                "dense_keys({}): at most {DENSE_MAX} chains per table",
                o.dense_keys
            )));
        }
        let mut dense = Vec::new();
        dense
            .try_reserve_exact(o.dense_keys as usize)
            .map_err(|e| Error::InvalidOption(format!("dense_keys({}): {e}", o.dense_keys)))?;
        dense.resize_with(o.dense_keys as usize, || Chain {
            head: AtomicPtr::new(std::ptr::null_mut()),
        });
        Ok(Table {
            tree,
            dense: dense.into_boxed_slice(),
        })
    }

    /// The array chain of `key`, if it is a number below the bound.
    #[inline(always)]
    fn dense(&self, key: &[u8]) -> Option<&Chain> {
        let k: [u8; 8] = key.try_into().ok()?;
        self.dense.get(usize::try_from(u64::from_be_bytes(k)).ok()?)
    }

    /// Whether `c` is one of the array's chains.
    #[inline]
    fn owns(&self, c: *const Chain) -> bool {
        in_array(&self.dense, c)
    }
}

/// Whether `c` points into `dense` (an array chain, not the index's own).
#[inline]
fn in_array(dense: &[Chain], c: *const Chain) -> bool {
    dense.as_ptr_range().contains(&c)
}

/// Transaction states in a slot's word (`seq << 2 | state`).
const ACTIVE: u64 = 0;
const PREPARING: u64 = 1;
const COMMITTED: u64 = 2;
const ABORTED: u64 = 3;

/// A worker's entry in the transaction table.
#[derive(Default)]
struct Slot {
    in_use: AtomicBool,
    /// `seq << 2 | state` of the slot's current (or last) transaction.
    word: AtomicU64,
    /// Its end timestamp, once it has one (published before PREPARING).
    end: AtomicU64,
    /// Its read time while active, `INF` between transactions (the
    /// garbage collector's watermark).
    begin: AtomicU64,
    /// Transactions that depend on this one's outcome.
    dependents: Mutex<Dependents>,
    /// Outstanding dependencies of this slot's transaction.
    pending: AtomicU64,
    /// A transaction this one depends on aborted.
    abort_now: AtomicBool,
}

#[derive(Default)]
struct Dependents {
    /// The transaction whose dependents these are: the slot's current one,
    /// or its next once the current one has finished.
    seq: u64,
    waiting: Vec<usize>,
}

/// A multiversion database.
pub struct Mvcc(Arc<Shared>);

struct Shared {
    isolation: Isolation,
    clock: CachePadded<AtomicU64>,
    slots: Box<[CachePadded<Slot>]>,
    /// Slots below this have been used (the garbage scan stops here).
    high: AtomicUsize,
    tables: Catalog<Table>,
    /// Tables hinted [`TableOptions::point_lookups`] keep a point index.
    point_index: bool,
    /// Every table keeps array chains for at least this many keys
    /// ([`Mvcc::with_dense_keys`]).
    dense_keys: u64,
}

impl Mvcc {
    /// An empty database giving `isolation`.
    pub fn new(isolation: Isolation) -> Mvcc {
        Self::build(isolation, false)
    }

    /// An empty database giving `isolation` whose tables hinted
    /// [`TableOptions::point_lookups`] keep a point index
    /// (`granary_index::Tree::with_point_index`): a key's version chain
    /// takes one hash probe to find instead of a descent.
    pub fn with_point_index(isolation: Isolation) -> Mvcc {
        Self::build(isolation, true)
    }

    /// An empty database giving `isolation` (with point indexes if
    /// `point_index`) whose every table keeps the chains of the keys that
    /// are numbers below `n` in an array, as if hinted
    /// [`TableOptions::dense_keys`] (a larger hint wins): the conformance
    /// suite runs this way too.
    pub fn with_dense_keys(isolation: Isolation, point_index: bool, n: u64) -> Mvcc {
        let mut m = Self::build(isolation, point_index);
        Arc::get_mut(&mut m.0).expect("new").dense_keys = n;
        m
    }

    fn build(isolation: Isolation, point_index: bool) -> Mvcc {
        Mvcc(Arc::new(Shared {
            isolation,
            clock: CachePadded::new(AtomicU64::new(1)),
            slots: (0..MAX_WORKERS).map(|_| CachePadded::default()).collect(),
            high: AtomicUsize::new(0),
            tables: Catalog::default(),
            point_index,
            dense_keys: 0,
        }))
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the last runner is gone; the versions still linked from
        // a chain are owned by it alone (versions cut off earlier were
        // retired separately).
        let free_chain = |chain: &Chain| unsafe {
            let mut v = chain.head.load(Ordering::Relaxed);
            while !v.is_null() {
                let prev = (&*v).prev.load(Ordering::Relaxed);
                free_version(v);
                v = prev;
            }
        };
        for t in self.tables.tables_mut() {
            let Table { tree, dense } = t;
            tree.for_each_value(|c| {
                let c = c as *mut Chain;
                // The array's chains are freed with it, below.
                if !in_array(dense, c) {
                    // SAFETY: the index owns the chains it maps to,
                    // outside the array.
                    free_chain(&*unsafe { Box::from_raw(c) });
                }
            });
            dense.iter().for_each(free_chain);
        }
    }
}

impl Engine for Mvcc {
    type Runner = Runner;

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

    fn runner(&self) -> Result<Runner, Error> {
        let slot = self
            .0
            .slots
            .iter()
            .position(|s| {
                s.in_use
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(Error::TooManyWorkers { max: MAX_WORKERS })?;
        let s = &self.0.slots[slot];
        s.begin.store(INF, Ordering::SeqCst);
        let seq = (s.word.load(Ordering::Relaxed) >> 2) + 1;
        s.dependents.lock().unwrap_or_else(|p| p.into_inner()).seq = seq;
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
        })
    }
}

/// A worker's handle.
pub struct Runner {
    db: Arc<Shared>,
    slot: usize,
    st: State,
    books: Books,
}

/// What a runner keeps from one transaction to the next.
struct Books {
    /// The sequence number the next transaction of this slot takes.
    seq: u64,
    /// A lower bound of every active read time (refreshed every
    /// `SCAN_EVERY` transactions: a stale bound only keeps more versions).
    oldest: u64,
    until_scan: u32,
    stats: Stats,
    /// The pause before retrying after a conflict.
    backoff: Backoff,
    last_end: u64,
    /// Committed deletions, oldest first, waiting for every reader to
    /// pass them.
    unhook: VecDeque<Unhook>,
}

// SAFETY: the raw pointers in `State` point at shared,
// `Sync` versions and chains; the state is empty between transactions.
unsafe impl Send for Runner {}

impl Drop for Runner {
    fn drop(&mut self) {
        let garbage = std::mem::take(&mut self.st.garbage);
        // SAFETY: cut off their chains by this runner's commits, each
        // listed once.
        unsafe { retire_versions(&crossbeam_epoch::pin(), garbage) };
        let s = &self.db.slots[self.slot];
        s.begin.store(INF, Ordering::SeqCst);
        s.in_use.store(false, Ordering::Release);
    }
}

#[derive(Default)]
struct State {
    /// Versions read: (chain, the version seen, null if none).
    reads: Vec<(usize, usize)>,
    /// Versions written: (chain, new version, the version it superseded).
    writes: Vec<(usize, usize, usize)>,
    nodes: Vec<(LeafRef, u64)>,
    /// Keys this transaction deleted: (table, key, chain).
    deletes: Vec<(TableId, Box<[u8]>, usize)>,
    batch: Batch,
    /// Chains `prefetch_many` found, in order, for the lookups that follow.
    hints: Hints<usize>,
    /// Versions this runner's commits cut off their chains, not yet
    /// retired: they are retired `RETIRE_BATCH` at a time (one deferred
    /// free, one allocation, instead of one per commit).
    garbage: Vec<usize>,
}

/// Cut versions retired together (see `State::garbage`).
const RETIRE_BATCH: usize = 64;

/// A committed deletion whose key leaves the tree once every reader
/// sees it (`unhook_due`).
struct Unhook {
    table: TableId,
    key: Box<[u8]>,
    chain: usize,
    /// The deletion's version and its commit timestamp.
    version: usize,
    ts: u64,
}

/// A transaction in progress.
pub struct Txn<'r> {
    db: &'r Shared,
    guard: Guard,
    st: &'r mut State,
    slot: usize,
    seq: u64,
    me: u64,
    /// The read time (begin timestamp); 0 until taken by
    /// [`Txn::read_time`].
    rt: u64,
    oldest: u64,
}

/// What a field says about visibility.
enum Seen {
    Yes,
    No,
    /// Yes, if the transaction in this slot (with this seq) commits.
    YesIf(usize, u64),
    /// No, if it commits.
    NoIf(usize, u64),
    /// The transaction finished meanwhile: read the field again.
    Again,
}

impl Shared {
    /// The state and end timestamp of transaction (slot, seq), or `None`
    /// if the slot has moved on (the field that named it has been
    /// rewritten since).
    ///
    /// A transaction that is PREPARING but has not published its end
    /// timestamp yet is waited for (a few instructions): its timestamp may
    /// be below or above the caller's, and visibility depends on which.
    fn status(&self, slot: usize, seq: u64) -> Option<(u64, u64)> {
        let s = &self.slots[slot];
        let mut spins = 0;
        loop {
            let w = s.word.load(Ordering::SeqCst);
            let end = s.end.load(Ordering::SeqCst);
            if w >> 2 != seq || s.word.load(Ordering::SeqCst) != w {
                return None;
            }
            if w & 3 == PREPARING && end == INF {
                crate::sync::backoff(&mut spins);
                continue;
            }
            return Some((w & 3, end));
        }
    }

    fn begin_seen(&self, f: u64, rt: u64, me: u64) -> Seen {
        if f & REF == 0 {
            return if f < rt { Seen::Yes } else { Seen::No };
        }
        if f == me {
            return Seen::Yes;
        }
        let (slot, seq) = ref_parts(f);
        match self.status(slot, seq) {
            None => Seen::Again,
            Some((ACTIVE | ABORTED, _)) => Seen::No,
            Some((COMMITTED, e)) => {
                if e < rt {
                    Seen::Yes
                } else {
                    Seen::No
                }
            }
            Some((_, e)) if e < rt => Seen::YesIf(slot, seq),
            Some(_) => Seen::No,
        }
    }

    fn end_seen(&self, f: u64, rt: u64, me: u64) -> Seen {
        if f & REF == 0 {
            return if rt < f { Seen::Yes } else { Seen::No };
        }
        if f == me {
            return Seen::No;
        }
        let (slot, seq) = ref_parts(f);
        match self.status(slot, seq) {
            None => Seen::Again,
            Some((ACTIVE | ABORTED, _)) => Seen::Yes,
            Some((COMMITTED, e)) => {
                if rt < e {
                    Seen::Yes
                } else {
                    Seen::No
                }
            }
            Some((_, e)) if e < rt => Seen::NoIf(slot, seq),
            Some(_) => Seen::Yes,
        }
    }
}

impl Books {
    /// Begin a transaction in `slot` (Hekaton: take the begin timestamp).
    fn start<'a>(&mut self, db: &'a Shared, slot: usize, st: &'a mut State) -> Txn<'a> {
        let s = &db.slots[slot];
        let seq = self.seq;
        // No one registers on our slot before we run (its dependents list
        // already names `seq`), and the previous transaction's
        // dependencies have all resolved: start clean.
        s.abort_now.store(false, Ordering::SeqCst);
        // The read time is taken at the first read, write or scan
        // (`Txn::read_time`), not here: `prefetch_many` first sends for
        // the transaction's lines, which then arrive while the counter's
        // line comes over from the other cores.
        if self.until_scan == 0 {
            self.oldest = oldest_reader(db);
            self.until_scan = SCAN_EVERY;
        }
        self.until_scan -= 1;
        Txn {
            db,
            guard: crossbeam_epoch::pin(),
            st,
            slot,
            seq,
            me: txref(slot, seq),
            rt: 0,
            oldest: self.oldest,
        }
    }

    /// Commit `tx` (or roll it back, if `ok` is false), then close the
    /// books on it: `Ok(Some(e))` committed at `e`, `Ok(None)` rolled back
    /// by the caller, `Err(reason)` conflicted.
    fn end(&mut self, mut tx: Txn<'_>, ok: bool) -> Result<Option<u64>, AbortReason> {
        let r = if ok {
            tx.commit().map(|e| {
                if !tx.st.writes.is_empty() {
                    self.last_end = e;
                }
                Some(e)
            })
        } else {
            tx.finish(false, 0);
            Ok(None)
        };
        if let Ok(Some(e)) = r {
            for (table, key, chain) in tx.st.deletes.drain(..) {
                // The chain's newest version of ours (a later write of the
                // key, or a regrown version, replaced the first).
                if let Some(&(_, version, _)) = tx.st.writes.iter().rev().find(|w| w.0 == chain) {
                    self.unhook.push_back(Unhook {
                        table,
                        key,
                        chain,
                        version,
                        ts: e,
                    });
                }
            }
        }
        tx.st.deletes.clear();
        tx.st.hints.clear();
        tx.st.reads.clear();
        tx.st.writes.clear();
        tx.st.nodes.clear();
        let db = tx.db;
        db.slots[tx.slot].begin.store(INF, Ordering::SeqCst);
        drop(tx);
        self.seq += 1;
        if self.unhook.front().is_some_and(|u| u.ts < self.oldest) {
            unhook_due(db, &mut self.unhook, self.oldest);
        }
        match r {
            Ok(Some(_)) => {
                self.stats.commits += 1;
                self.backoff.reset();
            }
            Ok(None) => {}
            Err(reason) => {
                self.stats.aborts[reason.index()] += 1;
                self.backoff.after_abort();
            }
        }
        r
    }
}

impl Runner {
    fn run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let mut tx = self.books.start(&self.db, self.slot, &mut self.st);
        match body(&mut tx) {
            Ok(v) => Ok(self.books.end(tx, true).map(|_| v)),
            Err(e) => {
                let _ = self.books.end(tx, false);
                match e {
                    TxError::Conflict(reason) => {
                        self.books.stats.aborts[reason.index()] += 1;
                        self.books.backoff.after_abort();
                        Ok(Err(reason))
                    }
                    TxError::Failed(e) => {
                        self.books.stats.failures += 1;
                        Err(e)
                    }
                }
            }
        }
    }
}

/// An interactive transaction (the hermitage scripts' sessions). It never
/// waits for another open session: a write conflict fails at once, and a
/// commit dependency can only be on a transaction inside its own commit
/// step, which finishes by itself.
pub struct Session<'a> {
    tx: Option<Txn<'a>>,
    books: &'a mut Books,
}

impl Interactive for Runner {
    type Session<'a> = Session<'a>;

    fn begin(&mut self) -> Result<Session<'_>, Error> {
        let tx = self.books.start(&self.db, self.slot, &mut self.st);
        Ok(Session {
            tx: Some(tx),
            books: &mut self.books,
        })
    }
}

impl<'a> Session<'a> {
    fn tx(&mut self) -> &mut Txn<'a> {
        self.tx.as_mut().expect("open until commit or drop")
    }
}

impl InteractiveTx for Session<'_> {
    fn commit(mut self) -> Result<Result<u64, AbortReason>, Error> {
        let tx = self.tx.take().expect("open");
        Ok(self.books.end(tx, true).map(|e| e.unwrap_or(0)))
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = self.books.end(tx, false);
        }
    }
}

impl Tx for Session<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.tx().get(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.tx().put(t, key, value)
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        self.tx().update(t, key, f)
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.tx().insert(t, key, value)
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        self.tx().delete(t, key)
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: F,
    ) -> Result<(), TxError> {
        self.tx().scan(t, lo, hi, limit, reverse, f)
    }
}

/// How often a runner rescans the slots for the oldest read time.
const SCAN_EVERY: u32 = 16;

/// The oldest read time of any active transaction (or the clock, if none
/// is active): every transaction active now or later reads at or above it.
fn oldest_reader(db: &Shared) -> u64 {
    // Read the clock first: a transaction that publishes its bound after
    // our scan read the clock after us (SeqCst), so its bound is at least
    // this.
    let now = db.clock.load(Ordering::SeqCst);
    db.slots[..db.high.load(Ordering::SeqCst)]
        .iter()
        .map(|s| s.begin.load(Ordering::SeqCst))
        .fold(now, u64::min)
}

/// Take out of the tree the keys of the deletions in `q` that committed
/// before `oldest` (every active transaction, and every later one, sees
/// them): a deleted key otherwise keeps its chain, its tombstone and its
/// tree entry for good, and a delete-heavy run grows without bound. A
/// deletion still on top of its chain gets the end `DEAD` by the same
/// compare-and-swap a writer uses to claim it, so either a writer
/// supersedes it (and the key stays) or no writer ever can; then the key
/// leaves the tree and the chain is retired whole. A reader or writer
/// still on the chain sees the deletion (key absent); a writer's claim
/// fails and its transaction retries on a fresh chain; validation fails
/// a read of a `DEAD` deletion (see [`DEAD`]).
fn unhook_due(db: &Shared, q: &mut VecDeque<Unhook>, oldest: u64) {
    let g = crossbeam_epoch::pin();
    let mut garbage = Vec::new();
    while q.front().is_some_and(|u| u.ts < oldest) {
        let u = q.pop_front().expect("front");
        let Ok(Table { tree, .. }) = db.tables.get(u.table) else {
            continue;
        };
        // Dereference the chain only if the tree still maps the key to it:
        // then it is reachable, hence alive, while we are pinned.
        if tree.find(&u.key, &Pin(&g)) != Some(u.chain as u64) {
            continue;
        }
        // SAFETY: reachable from the tree while pinned (above).
        let chain = unsafe { &*(u.chain as *const Chain) };
        let head = chain.head.load(Ordering::Acquire);
        if head as usize != u.version {
            // Written again since.
            continue;
        }
        // SAFETY: reachable from the chain while pinned.
        let tomb = unsafe { &*head };
        // Still the deletion, committed: the same transaction may have
        // written the key again after deleting it (its one version then
        // holds a value), and a version's begin is its commit timestamp.
        // SAFETY: committed, so its value no longer changes.
        if unsafe { tomb.value() }.is_some()
            || tomb.begin.load(Ordering::Acquire) != u.ts
            // AcqRel/Acquire: the same claim as a writer's (`write`),
            // ordered against it.
            || tomb
                .end
                .compare_exchange(INF, DEAD, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            continue;
        }
        let removed = tree.remove_if(&u.key, u.chain as u64, &mut Pin(&g));
        // A real check: retiring a chain the tree still maps would be a
        // use after free.
        assert!(removed.is_some(), "only the DEAD claimant removes");
        let mut v = head;
        while !v.is_null() {
            garbage.push(v as usize);
            // SAFETY: the chain is ours alone now (no writer can claim
            // it); its versions are alive while we are pinned.
            v = unsafe { &*v }.prev.load(Ordering::Acquire);
        }
        // SAFETY: out of the tree, so unreachable for threads that pin
        // from now on; retired once (only the DEAD claimant gets here).
        unsafe { retire_box(&g, u.chain as *mut Chain) };
    }
    // SAFETY: as for the chains.
    unsafe { retire_versions(&g, garbage) };
}

/// Cut `chain`'s versions below the first one, from `from` down, that
/// began before `oldest` (every active transaction sees it or a newer
/// one), and add them to `garbage` (to be retired together).
///
/// # Safety
/// The caller owns the chain's newest version (it is the uncommitted
/// writer on top), so no one else cuts this chain; it is pinned.
unsafe fn truncate(from: *mut Version, oldest: u64, garbage: &mut Vec<usize>) {
    let mut v = from;
    while !v.is_null() {
        // SAFETY: reachable from the chain while pinned.
        let ver = unsafe { &*v };
        let b = ver.begin.load(Ordering::Acquire);
        if b & REF == 0 && b < oldest {
            let mut cut = ver.prev.swap(std::ptr::null_mut(), Ordering::AcqRel);
            while !cut.is_null() {
                // Tagged with its size while its header is in cache: the
                // free, a grace period later, need not read it again.
                // SAFETY: alive (pinned).
                garbage.push(unsafe { Version::tagged(cut) });
                // SAFETY: unreachable now (cut off above, by the one
                // thread that may cut this chain); listed once each.
                cut = unsafe { (&*cut).prev.load(Ordering::Acquire) };
            }
            return;
        }
        v = ver.prev.load(Ordering::Acquire);
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Txn<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(body)
    }

    fn last_commit_key(&self) -> u64 {
        self.books.last_end
    }

    fn stats(&self) -> &Stats {
        &self.books.stats
    }
}

/// An in-place change to a value, as [`Tx::update`] passes it down.
type Modify<'a> = &'a mut dyn FnMut(&mut [u8]);

impl<'r> Txn<'r> {
    /// Take a dependency on (slot, seq): `Ok(true)` registered, `Ok(false)`
    /// the transaction has finished (look again).
    fn depend(&self, slot: usize, seq: u64) -> Result<bool, TxError> {
        let w = &self.db.slots[slot];
        let mut d = w.dependents.lock().unwrap_or_else(|p| p.into_inner());
        if d.seq != seq {
            return Ok(false);
        }
        d.waiting.push(self.slot);
        self.db.slots[self.slot]
            .pending
            .fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }

    /// The version of `chain` valid at `rt` for this transaction (taking
    /// dependencies as needed), or null.
    fn visible(&self, chain: &Chain, rt: u64) -> Result<*mut Version, TxError> {
        'again: loop {
            let mut v = chain.head.load(Ordering::Acquire);
            while !v.is_null() {
                // SAFETY: reached from the chain while pinned.
                let ver = unsafe { &*v };
                let b = ver.begin.load(Ordering::Acquire);
                let begun = match self.db.begin_seen(b, rt, self.me) {
                    Seen::Again => continue 'again,
                    Seen::Yes => true,
                    Seen::No => false,
                    Seen::YesIf(s, q) => {
                        if !self.depend(s, q)? {
                            continue 'again;
                        }
                        true
                    }
                    Seen::NoIf(..) => unreachable!("begin fields give YesIf"),
                };
                if begun {
                    let e = ver.end.load(Ordering::Acquire);
                    let valid = match self.db.end_seen(e, rt, self.me) {
                        Seen::Again => continue 'again,
                        Seen::Yes => true,
                        Seen::No => false,
                        Seen::NoIf(s, q) => {
                            if !self.depend(s, q)? {
                                continue 'again;
                            }
                            false
                        }
                        Seen::YesIf(..) => unreachable!("end fields give NoIf"),
                    };
                    return Ok(if valid { v } else { std::ptr::null_mut() });
                }
                v = ver.prev.load(Ordering::Acquire);
            }
            return Ok(std::ptr::null_mut());
        }
    }

    fn chain(
        &mut self,
        t: TableId,
        key: &[u8],
        create: bool,
    ) -> Result<Option<&'r Chain>, TxError> {
        check_key(key)?;
        let db: &'r Shared = self.db;
        let table = db.tables.get(t)?;
        if let Some(c) = table.dense(key) {
            // Acquire: as every load of a chain link (module doc).
            if create && c.head.load(Ordering::Acquire).is_null() {
                // Into the index before the chain's first version, so a
                // scan that missed the key sees its leaf change. (An
                // aborted first write leaves the key indexed to an empty
                // chain, which reads as absent; so does a second hook.)
                let p = c as *const Chain as u64;
                match table.tree.insert(key, p, &mut Pin(&self.guard)) {
                    Insert::Inserted(change) => self.own_change(change),
                    Insert::Exists { value } => debug_assert_eq!(value, p),
                }
            }
            return Ok(Some(c));
        }
        let tree = &table.tree;
        if let Some(c) = self.st.hints.take(t, key) {
            // SAFETY: found in the tree by this transaction, while pinned
            // (as below). A chain unhooked since is handled as one
            // unhooked after a lookup: its deletion's end is `DEAD`, so a
            // write conflicts and a serializable read fails validation;
            // any chain that replaced it began after this transaction.
            return Ok(Some(unsafe { &*(c as *const Chain) }));
        }
        if tree.has_point_index() {
            if let Some(c) = tree.find(key, &Pin(&self.guard)) {
                // SAFETY: as below.
                return Ok(Some(unsafe { &*(c as *const Chain) }));
            }
        }
        let l = tree.get(key, &Pin(&self.guard));
        if let Some(c) = l.value {
            // SAFETY: reachable from the tree while pinned; a chain is
            // retired through the epoch only once its key has left the
            // tree (`unhook_due`), so it outlives this transaction.
            return Ok(Some(unsafe { &*(c as *const Chain) }));
        }
        if !create {
            if db.isolation == Isolation::Serializable {
                // An absent key: its leaf guards against a later insert.
                self.st.nodes.push((l.leaf, l.version));
            }
            return Ok(None);
        }
        let fresh = Box::into_raw(Box::new(Chain {
            head: AtomicPtr::new(std::ptr::null_mut()),
        }));
        let c = match tree.insert(key, fresh as u64, &mut Pin(&self.guard)) {
            Insert::Inserted(change) => {
                self.own_change(change);
                fresh
            }
            Insert::Exists { value } => {
                // SAFETY: never published.
                drop(unsafe { Box::from_raw(fresh) });
                value as *mut Chain
            }
        };
        // SAFETY: as above.
        Ok(Some(unsafe { &*c }))
    }

    fn own_change(&mut self, c: NodeChange) {
        let mut split = false;
        for n in &mut self.st.nodes {
            if n.0 == c.leaf && n.1 == c.old_version {
                n.1 = c.new_version;
                split |= c.split.is_some();
            }
        }
        if split {
            self.st.nodes.push(c.split.expect("split"));
        }
    }

    fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        // Before the lookup: an absent key is seen at the read time too.
        let rt = self.read_time();
        let Some(chain) = self.chain(t, key, false)? else {
            return Ok(None);
        };
        let v = self.visible(chain, rt)?;
        if self.db.isolation == Isolation::Serializable {
            self.st
                .reads
                .push((chain as *const Chain as usize, v as usize));
        }
        if v.is_null() {
            return Ok(None);
        }
        // SAFETY: pinned; a visible version's value is no longer written
        // (or is this transaction's own).
        Ok(unsafe { (*v).value() })
    }

    /// Install this transaction's version of `key`: `value` (None:
    /// delete), or with `modify`, a copy of the visible value changed in
    /// place (nothing is written if none is visible; the read counts for
    /// validation). Returns whether a value was visible before.
    fn write(
        &mut self,
        t: TableId,
        key: &[u8],
        value: Option<&[u8]>,
        new: bool,
        modify: Option<Modify<'_>>,
    ) -> Result<bool, TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        let rt = self.read_time();
        let Some(chain) = self.chain(t, key, modify.is_none())? else {
            return Ok(false);
        };
        let head = chain.head.load(Ordering::Acquire);
        if !head.is_null() {
            // SAFETY: pinned.
            let h = unsafe { &*head };
            if h.begin.load(Ordering::Acquire) == self.me {
                // Our own version: change it in place.
                // SAFETY: uncommitted and ours; no one else reads it.
                let cur = unsafe { h.value_mut() };
                let existed = cur.is_some();
                if let Some(f) = modify {
                    if let Some(v) = cur {
                        f(v);
                    }
                    return Ok(existed);
                }
                if new && existed {
                    return Err(Error::KeyExists.into());
                }
                // SAFETY: as above.
                if !unsafe { h.overwrite(value) } {
                    self.regrow(chain, head, value);
                }
                if value.is_none() {
                    self.deleted(t, key, chain);
                }
                return Ok(existed);
            }
        }
        // Only the newest version may be updated, and only if it is the
        // one this transaction sees (first updater wins).
        let seen = self.visible(chain, rt)?;
        // SAFETY: pinned.
        let seen_value = (!seen.is_null())
            .then(|| unsafe { (*seen).value() })
            .flatten();
        if modify.is_some() && seen_value.is_none() {
            // Nothing to change: what remains is a read of the absence.
            // (A read that is followed by a version of ours needs no
            // validation: the version read stays the newest, its end
            // claimed by us, until we finish.)
            if self.db.isolation == Isolation::Serializable {
                self.st
                    .reads
                    .push((chain as *const Chain as usize, seen as usize));
            }
            return Ok(false);
        }
        // The newest version must be the one we see (a committed deletion
        // included); anything else is newer than our read time, or
        // uncommitted, or being committed: the first updater wins.
        let mut newest_seen = seen == head;
        if newest_seen && !head.is_null() {
            // Not on top of a version whose writer is still committing: if
            // it aborted, it would unlink its version from under ours.
            // SAFETY: pinned.
            let h = unsafe { &*head };
            let b = h.begin.load(Ordering::Acquire);
            if b & REF != 0 {
                let (slot, seq) = ref_parts(b);
                newest_seen = matches!(self.db.status(slot, seq), Some((COMMITTED, _))) || {
                    // Postprocessed meanwhile?
                    let b = h.begin.load(Ordering::Acquire);
                    b & REF == 0 && b < rt
                };
            }
        }
        if !newest_seen {
            return Err(TxError::Conflict(AbortReason::WriteConflict));
        }
        let existed = seen_value.is_some();
        if new && existed {
            return Err(Error::KeyExists.into());
        }
        if !head.is_null() {
            // SAFETY: pinned.
            let h = unsafe { &*head };
            if h.end
                .compare_exchange(INF, self.me, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return Err(TxError::Conflict(AbortReason::WriteConflict));
            }
        }
        let deleting = value.is_none() && modify.is_none();
        let v = match modify {
            Some(f) => {
                let v = new_version(self.me, head, seen_value);
                // SAFETY: ours and unpublished.
                if let Some(bytes) = unsafe { (*v).value_mut() } {
                    f(bytes);
                }
                v
            }
            None => new_version(self.me, head, value),
        };
        if chain
            .head
            .compare_exchange(head, v, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Only an empty chain can race here (a non-empty head's end
            // was ours to claim): another first insert won.
            debug_assert!(head.is_null());
            // SAFETY: never published.
            unsafe { free_version(v) };
            return Err(TxError::Conflict(AbortReason::WriteConflict));
        }
        self.st
            .writes
            .push((chain as *const Chain as usize, v as usize, head as usize));
        if deleting {
            self.deleted(t, key, chain);
        }
        Ok(existed)
    }

    /// Note a deletion of `key`, whose chain leaves the index once every
    /// reader sees it (`unhook_due`); an array chain stays.
    fn deleted(&mut self, t: TableId, key: &[u8], chain: &Chain) {
        let c = chain as *const Chain;
        if self.db.tables.get(t).is_ok_and(|table| !table.owns(c)) {
            self.st.deletes.push((t, key.into(), c as usize));
        }
    }

    /// Replace our own version `old`, the head of `chain`, with a larger
    /// one holding `value`. Only we change a chain whose head is our
    /// uncommitted version; a reader may still be on `old` (it skips it:
    /// its begin names us), so it is retired through the epoch. Reads of
    /// `old` recorded for validation stay as they are: its begin still
    /// names us, and validation skips our own versions.
    fn regrow(&mut self, chain: &Chain, old: *mut Version, value: Option<&[u8]>) {
        // SAFETY: our own version, pinned.
        let prev = unsafe { (&*old).prev.load(Ordering::Acquire) };
        let v = new_version(self.me, prev, value);
        chain.head.store(v, Ordering::Release);
        let w = self
            .st
            .writes
            .iter_mut()
            .find(|w| w.1 == old as usize)
            .expect("our version is in the write set");
        w.1 = v as usize;
        // SAFETY: unlinked above; retired once.
        unsafe { retire_versions(&self.guard, vec![old as usize]) };
    }

    /// The read time, taken now if not yet (the counter's first
    /// increment, Hekaton's begin timestamp): at the start of the first
    /// read, write or scan, so that everything the transaction sees,
    /// absent keys included, is seen at it. Before it, at most
    /// `prefetch_many` has sent for lines (it takes the read time before
    /// it looks anything up); the transaction has written nothing, so no
    /// one can depend on it or meet its slot's sequence number.
    #[inline]
    fn read_time(&mut self) -> u64 {
        if self.rt == 0 {
            self.rt = Self::take_read_time(self.db, self.slot, self.seq);
        }
        self.rt
    }

    #[inline(never)]
    fn take_read_time(db: &Shared, slot: usize, seq: u64) -> u64 {
        let s = &db.slots[slot];
        // Publish a lower bound of the read time before taking it, so the
        // garbage collector never misses this transaction (SeqCst orders
        // the store before the increment for every observer).
        s.begin
            .store(db.clock.load(Ordering::SeqCst), Ordering::SeqCst);
        s.word.store(seq << 2 | ACTIVE, Ordering::SeqCst);
        let rt = db.clock.fetch_add(1, Ordering::SeqCst);
        s.begin.store(rt, Ordering::SeqCst);
        rt
    }

    /// Validate (serializable), wait for dependencies, and finish. Returns
    /// the end timestamp (a read-only transaction's: its read time).
    fn commit(&mut self) -> Result<u64, AbortReason> {
        let db = self.db;
        let s = &db.slots[self.slot];
        if self.st.writes.is_empty() {
            // Read-only: it commits at its read time, with neither the
            // counter's second increment nor validation. Everything it
            // read is the state at that time (versions of transactions
            // that end below it, absent keys included: a deletion leaves
            // the tree only below every published read time), and it
            // waits for the writers it read from that are still
            // committing; so it is serializable there, among transactions
            // ordered by their end timestamps, and under SI too.
            self.wait_for_dependencies();
            // SeqCst: as below, the aborting writer set the flag before it
            // decremented `pending`, which the wait saw reach zero.
            let r = if s.abort_now.load(Ordering::SeqCst) {
                Err(AbortReason::CommitDependency)
            } else {
                Ok(self.rt)
            };
            self.finish(r.is_ok(), self.rt);
            return r;
        }
        // PREPARING first, with the end timestamp unknown, and only then
        // the second increment. A transaction still seen ACTIVE has not
        // taken its end timestamp, so it will be above every timestamp
        // its observer already holds (Hekaton §3: an active writer's
        // version is invisible, the version it replaces still valid);
        // one seen PREPARING with the timestamp unknown is waited for
        // (`Shared::status`). Taking the timestamp while still ACTIVE
        // let a validation pass over a writer that then committed below
        // it (found by `granary check ycsb --protocol hekaton`).
        s.end.store(INF, Ordering::SeqCst);
        s.word.store(self.seq << 2 | PREPARING, Ordering::SeqCst);
        let e = db.clock.fetch_add(1, Ordering::SeqCst);
        s.end.store(e, Ordering::SeqCst);
        let mut r = Ok(e);
        if db.isolation == Isolation::Serializable {
            r = self.validate(e).map(|()| e);
        }
        // Hekaton §3.2: a transaction with commit dependencies waits for
        // them before it can commit (they all end below our end time, so
        // the waits are acyclic).
        self.wait_for_dependencies();
        if r.is_ok() && s.abort_now.load(Ordering::SeqCst) {
            r = Err(AbortReason::CommitDependency);
        }
        if r.is_ok() {
            let st = &mut *self.st;
            for &(_, _, old) in &st.writes {
                // SAFETY: we still own each chain we wrote (our versions
                // are on top, uncommitted); pinned.
                unsafe { truncate(old as *mut Version, self.oldest, &mut st.garbage) };
            }
            if st.garbage.len() >= RETIRE_BATCH {
                let garbage =
                    std::mem::replace(&mut st.garbage, Vec::with_capacity(2 * RETIRE_BATCH));
                // SAFETY: cut off by this runner's commits (unreachable
                // for any thread that pins from now on), each listed once.
                unsafe { retire_versions(&self.guard, garbage) };
            }
        }
        self.finish(r.is_ok(), e);
        r
    }

    fn validate(&self, e: u64) -> Result<(), AbortReason> {
        for &(leaf, v) in &self.st.nodes {
            // SAFETY: `self.guard` has pinned us since the leaf was read (an
            // unlinked leaf is freed only after the grace period).
            if unsafe { leaf.version() } != v {
                return Err(AbortReason::NodeValidation);
            }
        }
        for &(chain, seen) in &self.st.reads {
            // A read of this transaction's own write needs no validation
            // (and its version is invisible to `visible_ignoring_own`).
            let own = seen != 0 && {
                // SAFETY: a version we read is alive while we are pinned.
                let v = unsafe { &*(seen as *const Version) };
                v.begin.load(Ordering::Acquire) == self.me
            };
            if own {
                continue;
            }
            // SAFETY: we reached it while pinned, and still are (see
            // `chain`).
            let chain = unsafe { &*(chain as *const Chain) };
            // What is valid at our end time, looking past our own writes:
            // it must be what we read.
            let now = match self.visible_ignoring_own(chain, e) {
                Some(v) => v,
                None => return Err(AbortReason::ReadValidation),
            };
            if now as usize != seen {
                return Err(AbortReason::ReadValidation);
            }
            // A deletion whose key has left the tree since: a new chain
            // may hold a newer version, which this chain cannot show.
            if seen != 0 {
                // SAFETY: a version we read is alive while we are pinned.
                let v = unsafe { &*(seen as *const Version) };
                // Acquire: as every read of an end field (`visible`).
                if v.end.load(Ordering::Acquire) == DEAD {
                    return Err(AbortReason::ReadValidation);
                }
            }
        }
        Ok(())
    }

    /// The committed version valid at `e`, ignoring this transaction's
    /// own writes; `None` if that depends on a transaction still
    /// committing (conservatively: fail).
    fn visible_ignoring_own(&self, chain: &Chain, e: u64) -> Option<*mut Version> {
        let mut v = chain.head.load(Ordering::Acquire);
        while !v.is_null() {
            // SAFETY: pinned.
            let ver = unsafe { &*v };
            let b = ver.begin.load(Ordering::Acquire);
            if b != self.me {
                match self.db.begin_seen(b, e, self.me) {
                    Seen::Yes => {
                        let f = ver.end.load(Ordering::Acquire);
                        return match f {
                            f if f == self.me => Some(v),
                            f => match self.db.end_seen(f, e, self.me) {
                                Seen::Yes => Some(v),
                                Seen::No => Some(std::ptr::null_mut()),
                                _ => None,
                            },
                        };
                    }
                    Seen::No => {}
                    _ => return None,
                }
            }
            v = ver.prev.load(Ordering::Acquire);
        }
        Some(std::ptr::null_mut())
    }

    fn wait_for_dependencies(&self) {
        let s = &self.db.slots[self.slot];
        let mut spins = 0;
        while s.pending.load(Ordering::SeqCst) != 0 {
            crate::sync::backoff(&mut spins);
        }
    }

    /// Publish the outcome, postprocess the versions written (timestamps
    /// in, or the aborted versions out), and tell dependents.
    fn finish(&mut self, committed: bool, e: u64) {
        let db = self.db;
        let s = &db.slots[self.slot];
        // Dependencies resolve before the slot may move on (their
        // decrements would otherwise land on the next transaction).
        self.wait_for_dependencies();
        let state = if committed { COMMITTED } else { ABORTED };
        s.word.store(self.seq << 2 | state, Ordering::SeqCst);
        for &(chain, new, old) in self.st.writes.iter().rev() {
            // SAFETY: our versions and chains; pinned.
            let (chain, newv) = unsafe { (&*(chain as *const Chain), &*(new as *const Version)) };
            // SAFETY: the version we superseded: alive while pinned.
            let oldv = (old != 0).then(|| unsafe { &*(old as *const Version) });
            if committed {
                newv.begin.store(e, Ordering::Release);
                if let Some(o) = oldv {
                    o.end.store(e, Ordering::Release);
                }
            } else {
                newv.begin.store(INF, Ordering::Release);
                // Unlink our version: no one links on top of a version
                // whose writer has not committed.
                let _ = chain.head.compare_exchange(
                    new as *mut Version,
                    old as *mut Version,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                if let Some(o) = oldv {
                    o.end.store(INF, Ordering::Release);
                }
                // SAFETY: unlinked above; retired once.
                unsafe { retire_versions(&self.guard, vec![new]) };
            }
        }
        if !committed {
            self.st.writes.clear();
        }
        // Tell dependents (Hekaton §3.2), and close the list: it names the
        // slot's next transaction from now on, so a late registrant looks
        // again and finds the versions postprocessed.
        let mut d = s.dependents.lock().unwrap_or_else(|p| p.into_inner());
        for w in d.waiting.drain(..) {
            let t = &db.slots[w];
            if !committed {
                t.abort_now.store(true, Ordering::SeqCst);
            }
            t.pending.fetch_sub(1, Ordering::SeqCst);
        }
        d.seq = self.seq + 1;
    }
}

impl Tx for Txn<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.read(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value), false, None).map(|_| ())
    }

    fn prefetch(&mut self, t: TableId, key: &[u8]) {
        let db: &Shared = self.db;
        if let Ok(table) = db.tables.get(t) {
            match table.dense(key) {
                Some(c) => crate::sync::prefetch(c as *const Chain),
                None => table.tree.prefetch(key, &Pin(&self.guard)),
            }
        }
    }

    /// With a point index, in four waves: every key's bucket, chain,
    /// newest version's header, and the rest of that version; each wave
    /// waits only for lines the one before started fetching. A key with
    /// an array chain starts at its chain.
    fn prefetch_many(&mut self, keys: &[(TableId, &[u8])]) {
        const WAVE: usize = Tree::FIND_MANY;
        const MOST_LINES: usize = 32;
        let db: &Shared = self.db;
        let pin = Pin(&self.guard);
        for &(t, k) in keys {
            if let Ok(table) = db.tables.get(t) {
                if let Some(c) = table.dense(k) {
                    crate::sync::prefetch(c as *const Chain);
                } else {
                    table.tree.prefetch(k, &pin);
                }
            }
        }
        // The counter's increment, while those lines are on their way
        // (a prefetch is not held back by the locked increment, the loads
        // below would be).
        if self.rt == 0 {
            self.rt = Self::take_read_time(db, self.slot, self.seq);
        }
        for chunk in keys.chunks(WAVE) {
            let mut ps = [0usize; WAVE];
            // Each run of keys of one table: the array's chains (their
            // lines on their way since the first loop), and the index's,
            // found together (`Tree::find_many`).
            for run in granary_api::table_runs(chunk) {
                let t = chunk[run.start].0;
                let Ok(table) = db.tables.get(t) else {
                    continue;
                };
                let (mut which, mut ks, mut m) = ([0; WAVE], [&[][..]; WAVE], 0);
                for i in run {
                    match table.dense(chunk[i].1) {
                        Some(c) => ps[i] = c as *const Chain as usize,
                        None => (which[m], ks[m], m) = (i, chunk[i].1, m + 1),
                    }
                }
                // Without a point index a lone key is left to its lookup
                // (as Silo's `prefetch_many` does).
                if m < 2 && !table.tree.has_point_index() {
                    continue;
                }
                let mut found = [None; WAVE];
                table.tree.find_many(&ks[..m], &mut found[..m], &pin);
                for (&i, c) in which.iter().zip(found).take(m) {
                    if let Some(c) = c {
                        ps[i] = c as usize;
                        crate::sync::prefetch(c as *const Chain);
                        self.st.hints.push(t, chunk[i].1, c as usize);
                    }
                }
            }
            for p in ps.iter_mut().filter(|p| **p != 0) {
                // SAFETY: reachable from the tree while pinned (see
                // `chain`).
                // Acquire: as every load of a chain link (module doc).
                let head = unsafe { &*(*p as *const Chain) }
                    .head
                    .load(Ordering::Acquire);
                *p = head as usize;
                crate::sync::prefetch(head);
            }
            for &p in ps.iter().filter(|p| **p != 0) {
                // SAFETY: a version reachable while pinned; its room is
                // immutable.
                let v = unsafe { &*(p as *const Version) };
                let n = v.footprint().div_ceil(64).min(MOST_LINES);
                granary_index::prefetch_lines((p as *const u8).wrapping_add(64), n - 1);
                // The version below: a writer's commit cuts the chain
                // under the version it supersedes (`truncate`), reading it.
                // Acquire: as every load of a chain link (module doc).
                crate::sync::prefetch(v.prev.load(Ordering::Acquire));
            }
        }
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // One descent and one copy: the new version starts as a copy of
        // the visible one and is changed in place.
        let (mut f, mut out) = (Some(f), None);
        let found = self.write(
            t,
            key,
            None,
            false,
            Some(&mut |v: &mut [u8]| out = f.take().map(|f| f(v))),
        )?;
        Ok(if found { out } else { None })
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value), true, None).map(|_| ())
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        if self.read(t, key)?.is_none() {
            return Ok(false);
        }
        self.write(t, key, None, false, None)
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: F,
    ) -> Result<(), TxError> {
        check_bounds(lo, hi)?;
        if limit == 0 {
            return Ok(());
        }
        let db: &Shared = self.db;
        let tree = &db.tables.get(t)?.tree;
        let serializable = db.isolation == Isolation::Serializable;
        let rt = self.read_time();
        let mut batch = std::mem::take(&mut self.st.batch);
        batch.start();
        let mut n = 0;
        let r = 'scan: loop {
            let want = (limit - n).clamp(1, 64);
            let nodes = &mut self.st.nodes;
            let more = batch.next(tree, lo, hi, reverse, want, &Pin(&self.guard), |leaf, v| {
                if serializable {
                    nodes.push((leaf, v));
                }
            });
            if !more {
                break Ok(());
            }
            for (k, c) in batch.iter() {
                // SAFETY: read from the tree while pinned (see `chain`).
                let chain = unsafe { &*(c as *const Chain) };
                let v = match self.visible(chain, rt) {
                    Ok(v) => v,
                    Err(e) => break 'scan Err(e),
                };
                if serializable {
                    self.st.reads.push((c as usize, v as usize));
                }
                if v.is_null() {
                    continue;
                }
                // SAFETY: pinned; visible values are immutable (or ours).
                if let Some(val) = unsafe { (*v).value() } {
                    n += 1;
                    if !f(k, val) || n == limit {
                        break 'scan Ok(());
                    }
                }
            }
        };
        self.st.batch = batch;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain_len(db: &Mvcc, t: TableId, key: &[u8]) -> usize {
        let g = crossbeam_epoch::pin();
        let tree = &db.0.tables.get(t).unwrap().tree;
        let c = tree.find(key, &Pin(&g)).unwrap() as *const Chain;
        // SAFETY: reached from the tree while pinned.
        let mut v = unsafe { &*c }.head.load(Ordering::Acquire);
        let mut n = 0;
        while !v.is_null() {
            n += 1;
            // SAFETY: as above.
            v = unsafe { &*v }.prev.load(Ordering::Acquire);
        }
        n
    }

    /// Keys in `t`'s tree (chains, whatever their versions).
    fn tree_keys(db: &Shared, t: TableId) -> usize {
        let g = crossbeam_epoch::pin();
        let mut n = 0;
        let tree = &db.tables.get(t).unwrap().tree;
        tree.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            &Pin(&g),
            |_, _| {},
            |_, _| {
                n += 1;
                true
            },
        );
        n
    }

    /// A deleted key leaves the tree, chain and versions, once every
    /// reader sees the deletion: a queue of 100k pushes and pops leaves
    /// only the live items (it kept a tombstone per key, for good).
    #[test]
    fn deleted_keys_leave_the_tree() {
        for iso in [Isolation::Serializable, Isolation::Snapshot] {
            let db = Mvcc::new(iso);
            let t = db.create_table("t").unwrap();
            let mut w = db.runner().unwrap();
            let live = 100u64;
            for k in 0..100_000u64 {
                w.try_run(|tx| {
                    tx.insert(t, &k.to_be_bytes(), b"item")?;
                    if k >= live {
                        assert!(tx.delete(t, &(k - live).to_be_bytes())?);
                    }
                    Ok(())
                })
                .unwrap()
                .unwrap();
            }
            // Enough transactions for the reader bound to move past the
            // last deletions.
            for _ in 0..2 * SCAN_EVERY {
                w.try_run(|_| Ok(())).unwrap().unwrap();
            }
            assert_eq!(
                tree_keys(&db.0, t),
                live as usize,
                "{iso:?}: keys left in the tree"
            );
            let left = w
                .try_run(|tx| {
                    let mut n = 0;
                    tx.scan(
                        t,
                        Bound::Unbounded,
                        Bound::Unbounded,
                        usize::MAX,
                        false,
                        |_, _| {
                            n += 1;
                            true
                        },
                    )?;
                    Ok(n)
                })
                .unwrap()
                .unwrap();
            assert_eq!(left, live);
        }
    }

    /// Keys below the dense bound live in the table's array, the rest in
    /// the index, in one table: both kinds are read, deleted, written
    /// again and scanned in order; a deleted array key's chain keeps only
    /// its tombstone and what readers may need.
    #[test]
    fn array_chains_and_indexed_chains_share_a_table() {
        for iso in [Isolation::Serializable, Isolation::Snapshot] {
            let db = Mvcc::new(iso);
            let o = TableOptions::point_lookups().with_dense_keys(50);
            let t = db.create_table_with("t", o).unwrap();
            let mut w = db.runner().unwrap();
            let keys: Vec<Vec<u8>> = (0..100u64)
                .map(|k| k.to_be_bytes().to_vec())
                .chain([b"a".to_vec(), b"long key, not a number".to_vec()])
                .collect();
            for round in 0..200u64 {
                w.try_run(|tx| {
                    for k in &keys {
                        if round % 2 == 0 {
                            tx.insert(t, k, &round.to_be_bytes())?;
                        } else {
                            assert!(tx.delete(t, k)?);
                        }
                    }
                    Ok(())
                })
                .unwrap()
                .unwrap();
            }
            // Every key is deleted; an array chain is still indexed (and
            // reads as absent), an indexed one left the index.
            for _ in 0..2 * SCAN_EVERY {
                w.try_run(|_| Ok(())).unwrap().unwrap();
            }
            assert_eq!(tree_keys(&db.0, t), 50, "{iso:?}");
            let n = chain_len(&db, t, &7u64.to_be_bytes());
            // Writers cut what no reader needs, behind a reader bound
            // refreshed every `SCAN_EVERY` transactions: 200 writes leave
            // no more than that window.
            assert!(n <= SCAN_EVERY as usize + 2, "{iso:?}: {n} versions");
            w.try_run(|tx| {
                for k in keys.iter().step_by(3) {
                    assert_eq!(tx.get(t, k)?, None);
                    tx.put(t, k, k)?;
                }
                Ok(())
            })
            .unwrap()
            .unwrap();
            let seen = w
                .try_run(|tx| {
                    let mut seen = Vec::new();
                    tx.scan(
                        t,
                        Bound::Unbounded,
                        Bound::Unbounded,
                        usize::MAX,
                        false,
                        |k, v| {
                            assert_eq!(k, v);
                            seen.push(k.to_vec());
                            true
                        },
                    )?;
                    Ok(seen)
                })
                .unwrap()
                .unwrap();
            let mut want: Vec<Vec<u8>> = keys.iter().step_by(3).cloned().collect();
            want.sort();
            assert_eq!(seen, want, "{iso:?}");
        }
    }

    /// A bound the array cannot have is refused, with a typed error.
    #[test]
    fn a_dense_bound_too_large_is_refused() {
        let db = Mvcc::new(Isolation::Snapshot);
        let o = TableOptions::default().with_dense_keys(u64::MAX);
        assert!(matches!(
            db.create_table_with("t", o),
            Err(Error::InvalidOption(_))
        ));
    }

    /// A serializable reader that saw a deletion whose key then left the
    /// tree and was inserted again (on a new chain, committed before the
    /// reader's end) must fail validation: its read is stale, and the old
    /// chain cannot show it.
    #[test]
    fn a_read_of_an_unhooked_deletion_fails_validation() {
        let db = Mvcc::new(Isolation::Serializable);
        let t = db.create_table("t").unwrap();
        let (mut r, mut w) = (db.runner().unwrap(), db.runner().unwrap());
        w.try_run(|tx| tx.insert(t, b"k", b"1")).unwrap().unwrap();
        assert!(w.try_run(|tx| tx.delete(t, b"k")).unwrap().unwrap());
        let out = r
            .try_run(|tx| {
                assert_eq!(tx.get(t, b"k")?, None);
                // Meanwhile the deleter's books move past the deletion
                // (this reader's read time is above it), the key leaves
                // the tree, and is inserted again.
                for _ in 0..2 * SCAN_EVERY {
                    w.try_run(|_| Ok(())).unwrap().unwrap();
                }
                assert_eq!(tree_keys(tx.db, t), 0, "the deletion was unhooked");
                w.try_run(|tx2| tx2.insert(t, b"k", b"2")).unwrap().unwrap();
                tx.put(t, b"other", b"x")
            })
            .unwrap();
        assert_eq!(out, Err(AbortReason::ReadValidation));
    }

    /// Ten versions cut per transaction, each retired on its own, outran
    /// crossbeam (it runs at most 512 deferred calls per 128 pins): the
    /// garbage grew without bound (6.5 GB after 13 s of BOHM's 10RMW).
    /// Cut versions are freed, not merely unlinked.
    #[test]
    fn cut_versions_are_freed_at_the_rate_they_are_cut() {
        let db = Mvcc::new(Isolation::Serializable);
        let t = db.create_table("t").unwrap();
        let mut w = db.runner().unwrap();
        for i in 0..40_000u64 {
            w.try_run(|tx| {
                for k in 0..10u64 {
                    tx.put(t, &k.to_be_bytes(), &i.to_be_bytes())?;
                }
                Ok(())
            })
            .unwrap()
            .unwrap();
        }
        // 400k versions were made. Other tests in this process hold a few
        // thousand at most; unfreed garbage would be about 240k.
        let live = LIVE_VERSIONS.load(Ordering::Relaxed);
        assert!(live < 50_000, "{live} versions alive");
    }

    #[test]
    fn a_long_reader_keeps_its_snapshot_and_versions_stay_bounded() {
        for iso in [Isolation::Snapshot, Isolation::Serializable] {
            let db = Mvcc::new(iso);
            let t = db.create_table("t").unwrap();
            let (mut r, mut w) = (db.runner().unwrap(), db.runner().unwrap());
            w.try_run(|tx| tx.put(t, b"k", b"0")).unwrap().unwrap();
            let out = r
                .try_run(|tx| {
                    let first = tx.get(t, b"k")?.map(<[u8]>::to_vec);
                    for i in 1..=300u32 {
                        w.try_run(|tx| tx.put(t, b"k", i.to_string().as_bytes()))
                            .unwrap()
                            .unwrap();
                    }
                    assert!(chain_len(&db, t, b"k") >= 2, "the reader's version is kept");
                    let again = tx.get(t, b"k")?.map(<[u8]>::to_vec);
                    assert_eq!(first, again, "{iso:?}: a snapshot read changed");
                    // Write something so that the transaction has to
                    // validate its reads (serializable).
                    tx.put(t, b"other", b"x")
                })
                .unwrap();
            match iso {
                Isolation::Snapshot => assert!(out.is_ok()),
                Isolation::Serializable => {
                    assert_eq!(
                        out,
                        Err(AbortReason::ReadValidation),
                        "a stale read commits"
                    )
                }
            }
            for i in 0..300u32 {
                w.try_run(|tx| tx.put(t, b"k", i.to_string().as_bytes()))
                    .unwrap()
                    .unwrap();
            }
            // A runner's bound of the oldest reader is at most SCAN_EVERY
            // transactions old, so a key keeps at most that many more.
            let n = chain_len(&db, t, b"k");
            assert!(
                n <= SCAN_EVERY as usize + 2,
                "{iso:?}: {n} versions of one key: garbage is not collected"
            );
        }
    }

    #[test]
    fn first_updater_wins_and_rollback_restores() {
        let db = Mvcc::new(Isolation::Snapshot);
        let t = db.create_table("t").unwrap();
        let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
        a.try_run(|tx| tx.insert(t, b"k", b"1")).unwrap().unwrap();
        let r = a
            .try_run(|tx| {
                tx.put(t, b"k", b"2")?;
                Ok(b.try_run(|tx| tx.put(t, b"k", b"3")).unwrap())
            })
            .unwrap()
            .unwrap();
        assert_eq!(r, Err(AbortReason::WriteConflict));
        let e = a.try_run(|tx| {
            tx.put(t, b"k", b"4")?;
            tx.delete(t, b"k")?;
            tx.insert(t, b"n", b"5")?;
            Err::<(), _>(TxError::rollback())
        });
        assert!(matches!(e, Err(Error::RolledBack)));
        let got = b
            .try_run(|tx| {
                Ok((
                    tx.get(t, b"k")?.map(<[u8]>::to_vec),
                    tx.get(t, b"n")?.is_some(),
                ))
            })
            .unwrap()
            .unwrap();
        assert_eq!(got, (Some(b"2".to_vec()), false));
        assert!(matches!(
            b.try_run(|tx| tx.insert(t, b"k", b"")),
            Err(Error::KeyExists)
        ));
        assert!(b.try_run(|tx| tx.delete(t, b"k")).unwrap().unwrap());
        b.try_run(|tx| tx.insert(t, b"k", b"6")).unwrap().unwrap();
    }

    /// A transaction that reads what it wrote itself (an insert, then a
    /// read of it, as TPC-C's new-order does) commits, alone.
    #[test]
    fn reading_your_own_write_validates() {
        for iso in [Isolation::Serializable, Isolation::Snapshot] {
            let db = Mvcc::new(iso);
            let t = db.create_table("t").unwrap();
            let mut w = db.runner().unwrap();
            w.try_run(|tx| tx.put(t, b"a", b"0")).unwrap().unwrap();
            let r = w
                .try_run(|tx| {
                    tx.insert(t, b"n", b"1")?;
                    assert_eq!(tx.get(t, b"n")?, Some(&b"1"[..]));
                    tx.put(t, b"a", b"2")?;
                    assert_eq!(tx.get(t, b"a")?, Some(&b"2"[..]));
                    Ok(())
                })
                .unwrap();
            assert_eq!(r, Ok(()), "{iso:?}");
        }
    }

    /// A transaction's own version outgrown by a later write is replaced
    /// by a larger one, and its earlier read of it still validates.
    #[test]
    fn an_outgrown_own_version_is_replaced() {
        let db = Mvcc::new(Isolation::Serializable);
        let t = db.create_table("t").unwrap();
        let mut w = db.runner().unwrap();
        let long = vec![7u8; 300];
        w.try_run(|tx| {
            tx.put(t, b"k", b"short")?;
            assert_eq!(tx.get(t, b"k")?, Some(&b"short"[..]));
            tx.put(t, b"k", &long)?;
            assert_eq!(tx.get(t, b"k")?, Some(&long[..]));
            assert_eq!(tx.update(t, b"k", |v| v[299] = 8)?, Some(()));
            tx.put(t, b"k", b"short again")
        })
        .unwrap()
        .unwrap();
        let got = w
            .try_run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))
            .unwrap()
            .unwrap();
        assert_eq!(got.as_deref(), Some(&b"short again"[..]));
        assert_eq!(chain_len(&db, t, b"k"), 1);
    }

    /// Write skew on two rows (G2-item): each transaction reads both and
    /// writes one. Snapshot isolation commits both; Hekaton's read
    /// validation aborts the second.
    #[test]
    fn write_skew_commits_under_si_only() {
        for iso in [Isolation::Snapshot, Isolation::Serializable] {
            let db = Mvcc::new(iso);
            let t = db.create_table("t").unwrap();
            let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
            a.try_run(|tx| {
                tx.put(t, b"x", b"1")?;
                tx.put(t, b"y", b"1")
            })
            .unwrap()
            .unwrap();
            let inner = a
                .try_run(|tx| {
                    tx.get(t, b"x")?;
                    tx.get(t, b"y")?;
                    let inner = b
                        .try_run(|tx| {
                            tx.get(t, b"x")?;
                            tx.get(t, b"y")?;
                            tx.put(t, b"y", b"0")
                        })
                        .unwrap();
                    tx.put(t, b"x", b"0")?;
                    Ok(inner)
                })
                .unwrap();
            match iso {
                Isolation::Snapshot => assert_eq!(inner, Ok(Ok(())), "both commit"),
                Isolation::Serializable => {
                    assert_eq!(inner, Err(AbortReason::ReadValidation), "the outer aborts")
                }
            }
        }
    }
}
