//! Strict two-phase locking, the baseline of BOHM §4 and CCBench's `ss2pl`.
//!
//! Every row carries a reader-writer lock word (`lock::RowLock`). A
//! transaction takes a shared lock to read a row and an exclusive one to
//! write it, updates rows in place (keeping their old values in an undo
//! buffer), and releases everything only after it has committed or rolled
//! back (strict 2PL). Two variants decide what happens at a conflict:
//!
//! * [`Variant::Ordered`] (BOHM §4: "2PL ... acquires locks in a
//!   pre-defined order ... to avoid deadlocks"): a procedure that declares
//!   its read and write sets ([`TxRunner::try_run_declared`]) has all of
//!   them locked before its body runs, in one global order (table, then
//!   key bytes), waiting for each. Waits are acyclic, so it never
//!   deadlocks, and conflict-free work never aborts. Accesses outside the
//!   declaration (and procedures with none) fall back to no-wait.
//! * [`Variant::NoWait`]: a lock held in a conflicting mode aborts the
//!   requester ([`AbortReason::LockConflict`]); the runner backs off
//!   (randomized, exponential) before it returns, and the caller retries.
//!   Nothing ever waits, so nothing can deadlock.
//!
//! **Keys that do not exist** are locked too: a point access to a missing
//! key puts an absent placeholder row in the index and locks it, so an
//! insert of that key waits for (or conflicts with) the reader.
//!
//! **Phantoms** (range scans): a scan locks every row it visits, shared,
//! and records the version of each index leaf it read (the same leaf
//! versions Silo's node set uses, Silo §4.6). At commit, with every lock
//! still held, each of those leaves must be unchanged except by this
//! transaction's own inserts; otherwise a key appeared in or left a
//! scanned range, and the scanner aborts ([`AbortReason::NodeValidation`]).
//! This protects ranges at leaf granularity without range locks; it is
//! optimistic where the rest of 2PL is pessimistic (ARCHITECTURE.md says
//! why).
//!
//! Rows whose key ends absent under an exclusive lock (a delete, an
//! aborted insert) are taken out of the index before the lock is released
//! and freed through epoch reclamation; a waiter that then gets the lock
//! sees the row marked removed and looks the key up again.

mod lock;

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::{Bound, Range};

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_epoch::Guard;
use granary_api::{
    AbortReason, Declared, Engine, Error, Interactive, InteractiveTx, Stats, TableId, TableOptions,
    Tx, TxError, TxRunner,
};
use granary_index::{Insert, LeafRef, NodeChange, Tree};

use crate::catalog::Catalog;
use crate::reclaim::Pin;
use crate::scan::Batch;
use crate::sync::Backoff;
use crate::value;
use granary_api::limits::{check_bounds, check_key, check_value};
use lock::{Mode, RowLock};

/// What a conflict does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Declared sets are locked up front in a global order, waiting;
    /// anything else is no-wait.
    Ordered,
    /// Every conflict aborts the requester.
    NoWait,
    /// NOT serializable: no-wait, but a read holds its shared lock only
    /// while it copies the value (read committed), so a lost update or a
    /// read skew can commit. Exists only in builds with the test-only
    /// `mutant` feature, for the checker to catch.
    #[cfg(feature = "mutant")]
    MutantShortReads,
}

/// A row: its lock word and bookkeeping, then its value's bytes, in one
/// block of whole cache lines ([`value::Tail`]): a row is one cache miss
/// (and one stream of adjacent lines) whatever its value's length, and
/// carries no heap block of its own. A row is made with room for the value
/// its creator is about to write; a later value that does not fit moves
/// the key to a larger row ([`Txn::store`]).
type Row = value::Tail<RowHead>;

/// What comes before a row's value.
struct RowHead {
    lock: RowLock,
    /// `commit_key << 1 | removed`, read and written under the lock:
    /// * `removed`: taken out of the index (set under the exclusive lock,
    ///   before it is released): a later holder must look the key up
    ///   again;
    /// * `commit_key`: that of the row's last writer (for
    ///   [`TxRunner::last_commit_key`]).
    meta: UnsafeCell<u64>,
}
#[cfg(not(feature = "loom"))]
const _: () = assert!(std::mem::size_of::<RowHead>() == 16);

impl RowHead {
    /// Born held exclusive by its creator, with `commit_key`.
    fn new(commit_key: u64) -> RowHead {
        RowHead {
            lock: RowLock::new_exclusive(),
            meta: UnsafeCell::new(commit_key << 1),
        }
    }

    /// Whether the row left the index. The caller holds the lock.
    fn removed(&self) -> bool {
        // SAFETY: under the lock (the caller's contract).
        unsafe { *self.meta.get() & 1 != 0 }
    }

    /// The commit key of the row's last writer. The caller holds the lock.
    fn commit_key(&self) -> u64 {
        // SAFETY: as `removed`.
        unsafe { *self.meta.get() >> 1 }
    }

    /// Mark the row taken out of the index. The caller holds it exclusive.
    fn set_removed(&self) {
        // SAFETY: held exclusive: no one else reads or writes it.
        unsafe { *self.meta.get() |= 1 }
    }

    /// Stamp the row's last writer. The caller holds it exclusive.
    fn set_commit_key(&self, ck: u64) {
        // SAFETY: as `set_removed`.
        unsafe { *self.meta.get() = ck << 1 | (*self.meta.get() & 1) }
    }
}

/// A placeholder for a missing key, born held exclusive, with room for
/// `room` bytes. Its commit key starts above every row its table has
/// removed, so the writers of a key keep increasing commit keys across a
/// delete and a re-insert.
fn new_absent(table: &Table, room: usize) -> *mut Row {
    let ck = table.removed_commit_key.load(Ordering::Acquire);
    Row::alloc(RowHead::new(ck), None, room)
}

/// Free a row once no pinned thread can see it.
///
/// # Safety
/// `row` came from [`Row::alloc`], is unreachable for threads that pin
/// from now on, and is retired once.
unsafe fn retire_row(g: &Guard, row: *const Row) {
    let p = row as usize;
    // SAFETY: the caller's contract; crossbeam delays the free past the
    // grace period.
    unsafe { g.defer_unchecked(move || Row::free(p as *mut Row)) }
}

/// A table: its rows behind the index.
struct Table {
    tree: Tree,
    /// The largest commit key of a row taken out of the index.
    removed_commit_key: AtomicU64,
    /// The length of the value last written into a row made for it: the
    /// room of a placeholder made before its value is known (a declared
    /// write), so that the value usually fits.
    room: AtomicU32,
}

/// A 2PL database: tables of rows behind the shared index.
pub struct TwoPl(Arc<Shared>);

/// What the database and its runners share.
struct Shared {
    variant: Variant,
    /// Tables hinted [`TableOptions::point_lookups`] keep a point index.
    point_index: bool,
    tables: Catalog<Table>,
}

impl TwoPl {
    /// An empty database running `variant`.
    pub fn new(variant: Variant) -> TwoPl {
        TwoPl(Arc::new(Shared {
            variant,
            point_index: false,
            tables: Catalog::default(),
        }))
    }

    /// An empty database running `variant` whose tables hinted
    /// [`TableOptions::point_lookups`] keep a point index
    /// (`granary_index::Tree::with_point_index`): rows found by key take
    /// one hash probe instead of a descent.
    pub fn with_point_index(variant: Variant) -> TwoPl {
        TwoPl(Arc::new(Shared {
            variant,
            point_index: true,
            tables: Catalog::default(),
        }))
    }

    /// The variant it runs.
    pub fn variant(&self) -> Variant {
        self.0.variant
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last runner is gone; rows still in the index are owned by it
        // alone. Rows taken out earlier were retired to crossbeam's
        // collector, which frees them.
        for t in self.tables.tables_mut() {
            // SAFETY: every value is a live row, and each appears in one
            // tree once.
            t.tree
                .for_each_value(|v| unsafe { Row::free(v as *mut Row) });
        }
    }
}

impl Engine for TwoPl {
    type Runner = Runner;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        self.create_table_with(name, TableOptions::default())
    }

    fn create_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
        let point = self.0.point_index && o.point_lookups;
        self.0.tables.create(name, || Table {
            tree: if point {
                Tree::with_point_index()
            } else {
                Tree::new()
            },
            removed_commit_key: AtomicU64::new(0),
            room: AtomicU32::new(0),
        })
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.0.tables.find(name)
    }

    fn runner(&self) -> Result<Runner, Error> {
        Ok(Runner {
            db: self.0.clone(),
            st: State::default(),
            stats: Stats::default(),
            last_commit_key: 0,
            backoff: Backoff::new(),
        })
    }
}

/// A hasher for keys that are hashes already ([`key_hash`]).
#[derive(Default)]
struct Premixed(u64);

impl Hasher for Premixed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only premixed u64s are hashed")
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

/// A hash of (table, key): eight bytes at a time, one multiply each.
#[inline]
fn key_hash(t: TableId, key: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (t.index() as u64 ^ key.len() as u64).wrapping_mul(K);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        h = (h ^ u64::from_le_bytes(c.try_into().expect("8 bytes"))).wrapping_mul(K);
        h = h.rotate_left(29);
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(K);
    let h = h ^ h >> 32;
    // Unit tests collide keys on purpose, to walk the chains.
    if cfg!(test) {
        h & 7
    } else {
        h
    }
}

/// A lock this transaction holds.
struct Held {
    row: *const Row,
    mode: Mode,
    /// Index into `State::writes` once the row is held exclusive.
    write: Option<u32>,
    table: TableId,
    key_at: u32,
    key_len: u32,
    /// The previous held key with the same hash.
    same_hash: Option<u32>,
}

/// A row this transaction changed, with what to restore on rollback: its
/// whole old value, or (`field`: its start) only the old bytes of the one
/// field an `update_field` changed, the rest being as it was.
struct Write {
    held: u32,
    was_present: bool,
    old_at: u32,
    old_len: u32,
    field: Option<u32>,
}

/// A worker's transaction state, reused from one transaction to the next.
#[derive(Default)]
struct State {
    held: Vec<Held>,
    /// The last held key of each key hash (the others chain through
    /// `Held::same_hash`).
    by_key: HashMap<u64, u32, BuildHasherDefault<Premixed>>,
    writes: Vec<Write>,
    /// Keys of held rows and old values of written ones.
    bytes: Vec<u8>,
    /// Leaves scans read, with the versions they were read at.
    nodes: Vec<(LeafRef, u64)>,
    /// Declared entries, sorted for ordered locking.
    order: Vec<(TableId, u32, u32, Mode)>,
    order_keys: Vec<u8>,
    batch: Batch,
    /// The mutant's copy of the value it read last.
    #[cfg(feature = "mutant")]
    read_copy: Vec<u8>,
}

/// A worker thread's 2PL handle.
pub struct Runner {
    db: Arc<Shared>,
    st: State,
    stats: Stats,
    last_commit_key: u64,
    /// No-wait's pause before a retry.
    backoff: Backoff,
}

// SAFETY: the raw row pointers in `State` are empty between transactions
// (a runner moves between threads only then), and a row is read and
// written only under its lock.
unsafe impl Send for Runner {}

/// A 2PL transaction in progress.
pub struct Txn<'r> {
    db: &'r Shared,
    guard: Guard,
    st: &'r mut State,
    /// Blocking allowed (the ordered variant's up-front phase only).
    wait: bool,
}

impl Runner {
    fn run<T>(
        &mut self,
        declared: Option<&Declared>,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let r = {
            let mut tx = Txn {
                db: &self.db,
                guard: crossbeam_epoch::pin(),
                st: &mut self.st,
                wait: false,
            };
            let r = match declared {
                Some(d) if self.db.variant == Variant::Ordered => match tx.lock_declared(d) {
                    Ok(()) => body(&mut tx),
                    Err(e) => Err(e),
                },
                _ => body(&mut tx),
            };
            match r {
                Ok(v) => match tx.validate_nodes() {
                    Ok(()) => {
                        self.last_commit_key = tx.commit(self.last_commit_key);
                        Ok(Ok(v))
                    }
                    Err(reason) => {
                        tx.rollback();
                        Ok(Err(reason))
                    }
                },
                Err(e) => {
                    tx.rollback();
                    match e {
                        TxError::Conflict(reason) => Ok(Err(reason)),
                        TxError::Failed(e) => Err(e),
                    }
                }
            }
        };
        self.stats.count(&r);
        match &r {
            Ok(Ok(_)) => self.backoff.reset(),
            Ok(Err(_)) => self.backoff.after_abort(),
            Err(_) => {}
        }
        r
    }
}

/// An interactive transaction (the hermitage scripts' sessions). Every
/// lock is taken no-wait, whatever the variant: a session must never wait
/// for another open one.
pub struct Session<'a> {
    tx: Txn<'a>,
    stats: &'a mut Stats,
    last_commit_key: &'a mut u64,
}

impl Interactive for Runner {
    type Session<'a> = Session<'a>;

    fn begin(&mut self) -> Result<Session<'_>, Error> {
        Ok(Session {
            tx: Txn {
                db: &self.db,
                guard: crossbeam_epoch::pin(),
                st: &mut self.st,
                wait: false,
            },
            stats: &mut self.stats,
            last_commit_key: &mut self.last_commit_key,
        })
    }
}

impl InteractiveTx for Session<'_> {
    fn commit(mut self) -> Result<Result<u64, AbortReason>, Error> {
        match self.tx.validate_nodes() {
            Ok(()) => {
                let wrote = !self.tx.st.writes.is_empty();
                *self.last_commit_key = self.tx.commit(*self.last_commit_key);
                self.stats.commits += 1;
                Ok(Ok(if wrote { *self.last_commit_key } else { 0 }))
            }
            Err(reason) => {
                self.tx.rollback();
                self.stats.aborts[reason.index()] += 1;
                Ok(Err(reason))
            }
        }
    }
}

granary_api::forward_tx!(Session<'_>, s => &mut s.tx);

impl TxRunner for Runner {
    type Tx<'a> = Txn<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(None, |tx| body(tx))
    }

    fn try_run_declared<T>(
        &mut self,
        declared: &Declared,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(Some(declared), |tx| body(tx))
    }

    fn uses_declared(&self) -> bool {
        self.db.variant == Variant::Ordered
    }

    fn last_commit_key(&self) -> u64 {
        self.last_commit_key
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl Txn<'_> {
    /// Lock `key`'s row in mode `m` (creating an absent placeholder if the
    /// key is missing, with room for `room` bytes, or for the table's last
    /// new value if `room` is 0) and return the index of its [`Held`]
    /// entry.
    fn acquire(&mut self, t: TableId, key: &[u8], m: Mode, room: usize) -> Result<u32, TxError> {
        check_key(key)?;
        // A key this transaction holds already is found without the
        // index (a read-modify-write touches its key twice).
        let hash = key_hash(t, key);
        if let Some(i) = self.find_held(hash, t, key) {
            let h = &self.st.held[i as usize];
            if h.mode >= m {
                return Ok(i);
            }
            // SAFETY: pinned, and the row is held, so live.
            if !unsafe { &*h.row }.lock.try_upgrade() {
                return Err(TxError::Conflict(AbortReason::LockConflict));
            }
            self.st.held[i as usize].mode = Mode::Exclusive;
            return Ok(i);
        }
        let db: &Shared = self.db;
        let table = db.tables.get(t)?;
        let tree = &table.tree;
        let mut spins = 0u32;
        loop {
            let (row, created, change) = match tree.find(key, &Pin(&self.guard)) {
                Some(v) => (v as *const Row, false, None),
                None => {
                    let room = match room {
                        0 => table.room.load(Ordering::Relaxed) as usize,
                        n => n,
                    };
                    let fresh = new_absent(table, room);
                    match tree.insert(key, fresh as u64, &mut Pin(&self.guard)) {
                        Insert::Inserted(c) => (fresh as *const Row, true, Some(c)),
                        Insert::Exists { value } => {
                            // SAFETY: never published.
                            unsafe { Row::free(fresh) };
                            (value as *const Row, false, None)
                        }
                    }
                }
            };
            if let Some(c) = change {
                self.own_change(c);
            }
            // SAFETY: read from the index while pinned: live until unpin.
            let r = unsafe { &*row };
            if !created {
                if self.wait {
                    r.lock.lock(m);
                } else if !r.lock.try_lock(m) {
                    return Err(TxError::Conflict(AbortReason::LockConflict));
                }
                if r.removed() {
                    r.lock.unlock(m);
                    crate::sync::backoff(&mut spins);
                    continue;
                }
            }
            // A created row is born exclusive.
            let mode = if created { Mode::Exclusive } else { m };
            let key_at = self.st.bytes.len() as u32;
            self.st.bytes.extend_from_slice(key);
            let i = self.st.held.len() as u32;
            let same_hash = self.st.by_key.insert(hash, i);
            self.st.held.push(Held {
                row,
                mode,
                write: None,
                table: t,
                key_at,
                key_len: key.len() as u32,
                same_hash,
            });
            return Ok(i);
        }
    }

    /// The `held` entry of (`t`, `key`), whose [`key_hash`] is `hash`.
    fn find_held(&self, hash: u64, t: TableId, key: &[u8]) -> Option<u32> {
        let mut at = self.st.by_key.get(&hash).copied();
        while let Some(i) = at {
            let h = &self.st.held[i as usize];
            let k = &self.st.bytes[h.key_at as usize..(h.key_at + h.key_len) as usize];
            if h.table == t && k == key {
                return Some(i);
            }
            at = h.same_hash;
        }
        None
    }

    /// A leaf this transaction changed itself keeps its place in the node
    /// set (Silo §4.6 does the same for its own inserts).
    fn own_change(&mut self, c: NodeChange) {
        let mut split_seen = false;
        for n in &mut self.st.nodes {
            if n.0 == c.leaf && n.1 == c.old_version {
                n.1 = c.new_version;
                split_seen |= c.split.is_some();
            }
        }
        if split_seen {
            // Keys we scanned may have moved to the new right sibling.
            let s = c.split.expect("split");
            self.st.nodes.push(s);
        }
    }

    /// The ordered variant's growing phase: every declared key, locked in
    /// (table, key) order, waiting for each (BOHM §4).
    fn lock_declared(&mut self, d: &Declared) -> Result<(), TxError> {
        let st = &mut *self.st;
        st.order.clear();
        st.order_keys.clear();
        let reads = d.reads().map(|e| (e, Mode::Shared));
        for ((t, k), m) in reads.chain(d.writes().map(|e| (e, Mode::Exclusive))) {
            let at = st.order_keys.len() as u32;
            st.order_keys.extend_from_slice(k);
            st.order.push((t, at, k.len() as u32, m));
        }
        let keys = std::mem::take(&mut st.order_keys);
        let key = |e: &(TableId, u32, u32, Mode)| &keys[e.1 as usize..(e.1 + e.2) as usize];
        // Sort by (table, key), exclusive first among equals, so one lock
        // in the stronger mode covers both.
        st.order
            .sort_unstable_by(|a, b| (a.0, key(a), b.3).cmp(&(b.0, key(b), a.3)));
        let mut order = std::mem::take(&mut st.order);
        order.dedup_by(|b, a| a.0 == b.0 && key(a) == key(b));
        // Every lock below waits for its row: send for all of them first,
        // so that their misses overlap instead of following one another.
        self.prefetch_rows(order.iter().map(|e| (e.0, key(e))));
        self.wait = true;
        let mut r = Ok(());
        for e in &order {
            if let Err(err) = self.acquire(e.0, key(e), e.3, 0) {
                r = Err(err);
                break;
            }
        }
        self.wait = false;
        self.st.order = order;
        self.st.order_keys = keys;
        r
    }

    /// Fetch the rows of `keys` in two waves: every key's index entry
    /// (with a point index its bucket; without, the first 16 keys'
    /// descents, which go down together: `Tree::find_many`), then its
    /// row, for writing, since taking its lock, shared or exclusive, is a
    /// compare-and-swap on the row's line. At most 16 keys are followed
    /// to their rows (the rest get the first wave only).
    fn prefetch_rows<'k>(&self, keys: impl Iterator<Item = (TableId, &'k [u8])> + Clone) {
        const WAVE: usize = Tree::FIND_MANY;
        let db: &Shared = self.db;
        let pin = Pin(&self.guard);
        for (t, k) in keys.clone() {
            if let Ok(table) = db.tables.get(t) {
                table.tree.prefetch(k, &pin);
            }
        }
        let mut first = [(TableId::new(0), &[][..]); WAVE];
        let mut n = 0;
        for (e, key) in first.iter_mut().zip(keys) {
            (*e, n) = (key, n + 1);
        }
        // Each run of keys of one table, found together.
        for run in granary_api::table_runs(&first[..n]) {
            let (at, end) = (run.start, run.end);
            // Without a point index a lone key is left to its lookup (as
            // Silo's `prefetch_many` does).
            if let Some(table) = db
                .tables
                .get(first[at].0)
                .ok()
                .filter(|table| end - at > 1 || table.tree.has_point_index())
            {
                let ks: [&[u8]; WAVE] =
                    std::array::from_fn(|i| first.get(at + i).map_or(&[][..], |e| e.1));
                let mut found = [None; WAVE];
                table
                    .tree
                    .find_many(&ks[..end - at], &mut found[..end - at], &pin);
                for row in found.iter().take(end - at).flatten() {
                    granary_api::prefetch_for_write(*row as *const u8, 1);
                }
            }
        }
    }

    /// The value of the row held at `i` (`None`: absent); shared or
    /// better held.
    fn value(&self, i: u32) -> Option<&[u8]> {
        // SAFETY: held, so live (pinned) and not written by anyone else.
        unsafe { (*self.st.held[i as usize].row).value() }
    }

    /// Save held row `i`'s state for rollback the first time it is
    /// written (it is held exclusive).
    fn save(&mut self, i: u32) {
        let h = &self.st.held[i as usize];
        debug_assert_eq!(h.mode, Mode::Exclusive);
        if let Some(w) = h.write {
            self.widen(w);
            return;
        }
        // SAFETY: held exclusive: no one else reads or writes it.
        let old = unsafe { (*h.row).value() };
        let old_at = self.st.bytes.len() as u32;
        self.st.bytes.extend_from_slice(old.unwrap_or_default());
        let w = self.st.writes.len() as u32;
        self.st.writes.push(Write {
            held: i,
            was_present: old.is_some(),
            old_at,
            old_len: old.map_or(0, <[u8]>::len) as u32,
            field: None,
        });
        self.st.held[i as usize].write = Some(w);
    }

    /// Save the bytes `field` of held row `i`'s value (present, held
    /// exclusive) for rollback, if nothing of the row is saved yet; a row
    /// with another field saved gets its whole old value saved instead.
    fn save_field(&mut self, i: u32, field: Range<usize>) {
        let h = &self.st.held[i as usize];
        debug_assert_eq!(h.mode, Mode::Exclusive);
        if let Some(w) = h.write {
            let s = &self.st.writes[w as usize];
            if s.field != Some(field.start as u32) || s.old_len as usize != field.len() {
                self.widen(w);
            }
            return;
        }
        // SAFETY: held exclusive: no one else reads or writes it.
        let old = unsafe { (*h.row).value() }.expect("a field of a present row");
        let old_at = self.st.bytes.len() as u32;
        self.st.bytes.extend_from_slice(&old[field.clone()]);
        let w = self.st.writes.len() as u32;
        self.st.writes.push(Write {
            held: i,
            was_present: true,
            old_at,
            old_len: field.len() as u32,
            field: Some(field.start as u32),
        });
        self.st.held[i as usize].write = Some(w);
    }

    /// Make write `w`'s saved state the row's whole old value, if it
    /// holds only a field's: the row's value now, with the field's old
    /// bytes over it (only that field has changed since).
    fn widen(&mut self, w: u32) {
        let s = &self.st.writes[w as usize];
        let Some(from) = s.field else { return };
        let (from, at, n) = (from as usize, s.old_at as usize, s.old_len as usize);
        // SAFETY: held exclusive; a row with a field saved is present.
        let now = unsafe { (*self.st.held[s.held as usize].row).value() }.expect("present");
        let whole = self.st.bytes.len();
        self.st.bytes.extend_from_slice(now);
        self.st.bytes.copy_within(at..at + n, whole + from);
        let s = &mut self.st.writes[w as usize];
        s.old_at = whole as u32;
        s.old_len = (self.st.bytes.len() - whole) as u32;
        s.field = None;
    }

    /// Write `value` (`None`: absent) into held row `i`, held exclusive
    /// and saved: in place if it fits the row's room, else in a larger
    /// row that takes the old one's place in the index. The old row is
    /// marked removed before it is unlocked, so a transaction waiting for
    /// it looks the key up again and finds the new one, held exclusive by
    /// this transaction until it ends.
    fn store(&mut self, i: u32, value: Option<&[u8]>) {
        let h = &self.st.held[i as usize];
        let row = h.row;
        // SAFETY: held exclusive.
        if unsafe { (*row).overwrite(value) } {
            return;
        }
        // SAFETY: held, so live.
        let old = unsafe { &*row };
        let new = Row::alloc(RowHead::new(old.commit_key()), value, 0);
        let key = &self.st.bytes[h.key_at as usize..(h.key_at + h.key_len) as usize];
        let db: &Shared = self.db;
        let table = db.tables.get(h.table).expect("held rows' tables exist");
        let swapped = table
            .tree
            .replace(key, row as u64, new as u64, &mut Pin(&self.guard));
        // A real check: retiring a row the index still maps would be a
        // use after free.
        assert!(swapped, "a held row stays in the index");
        old.set_removed();
        old.lock.unlock(Mode::Exclusive);
        // SAFETY: out of the index, marked removed for anyone who still
        // holds its address, and retired once (its `held` entry now names
        // the new row).
        unsafe { retire_row(&self.guard, row) };
        self.st.held[i as usize].row = new;
    }

    /// The mutant's read: a shared lock only while copying (unless the
    /// row is already held).
    #[cfg(feature = "mutant")]
    fn short_read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        check_key(key)?;
        if let Some(i) = self.find_held(key_hash(t, key), t, key) {
            return Ok(self.value(i));
        }
        let db: &Shared = self.db;
        let Some(row) = db.tables.get(t)?.tree.find(key, &Pin(&self.guard)) else {
            return Ok(None);
        };
        // SAFETY: from the index while pinned.
        let r = unsafe { &*(row as *const Row) };
        if !r.lock.try_shared() {
            return Err(TxError::Conflict(AbortReason::LockConflict));
        }
        // SAFETY: locked shared.
        let value = unsafe { r.value() }.filter(|_| !r.removed());
        let present = value.is_some();
        self.st.read_copy.clear();
        self.st
            .read_copy
            .extend_from_slice(value.unwrap_or_default());
        r.lock.unlock(Mode::Shared);
        Ok(present.then_some(&self.st.read_copy[..]))
    }

    /// Check that no scanned leaf changed but by this transaction.
    fn validate_nodes(&self) -> Result<(), AbortReason> {
        for &(leaf, v) in &self.st.nodes {
            // SAFETY: `self.guard` has pinned us since the leaf was read (an
            // unlinked leaf is freed only after the grace period).
            if unsafe { leaf.version() } != v {
                return Err(AbortReason::NodeValidation);
            }
        }
        Ok(())
    }

    /// Commit: stamp written rows, take out rows left absent, release
    /// every lock. Returns the transaction's commit key.
    fn commit(&mut self, last: u64) -> u64 {
        // A commit key above every earlier writer's of each row written
        // (a Lamport clock: successive writers of a key hold its exclusive
        // lock one after the other, so their keys increase).
        let mut ck = last;
        for w in &self.st.writes {
            // SAFETY: held exclusive, so live.
            ck = ck.max(unsafe { &*self.st.held[w.held as usize].row }.commit_key());
        }
        ck += 1;
        let wrote = !self.st.writes.is_empty();
        for w in &self.st.writes {
            // SAFETY: held exclusive, so live.
            unsafe { &*self.st.held[w.held as usize].row }.set_commit_key(ck);
        }
        self.release();
        if wrote {
            ck
        } else {
            last
        }
    }

    /// Restore every written row, then release.
    fn rollback(&mut self) {
        for w in self.st.writes.iter().rev() {
            let old = &self.st.bytes[w.old_at as usize..(w.old_at + w.old_len) as usize];
            if let Some(from) = w.field {
                // Only the field changed (the row kept its length).
                // SAFETY: held exclusive, so live.
                let v = unsafe { (*self.st.held[w.held as usize].row).value_mut() };
                let v = v.expect("a row with a field saved is present");
                v[from as usize..from as usize + old.len()].copy_from_slice(old);
                continue;
            }
            // SAFETY: held exclusive, so live; the row has room for every
            // value it held in this transaction (`store` only moves a key
            // to a larger row).
            let fits = unsafe {
                (*self.st.held[w.held as usize].row).overwrite(w.was_present.then_some(old))
            };
            assert!(fits, "a row has room for the values it held");
        }
        self.release();
    }

    /// The shrinking phase: every lock at once. A row held exclusive
    /// whose key is absent (deleted, never inserted, or a placeholder this
    /// transaction created) leaves the index first.
    fn release(&mut self) {
        let st = &mut *self.st;
        for h in &st.held {
            // SAFETY: held, so live.
            let r = unsafe { &*h.row };
            let mode = h.mode;
            // SAFETY: held.
            let absent = unsafe { r.value() }.is_none();
            if absent && mode == Mode::Exclusive {
                r.set_removed();
                let key = &st.bytes[h.key_at as usize..(h.key_at + h.key_len) as usize];
                let table = self
                    .db
                    .tables
                    .get(h.table)
                    .expect("held rows' tables exist");
                // Before the key leaves the index: a re-insert, which can
                // only start after, seeds its row from this (Acquire/Release).
                table
                    .removed_commit_key
                    .fetch_max(r.commit_key(), Ordering::Release);
                let gone = table
                    .tree
                    .remove_if(key, h.row as u64, &mut Pin(&self.guard));
                // A real check, not a debug one: retiring a row the index
                // still maps would be a use after free, found (if ever)
                // far from here.
                assert!(gone.is_some(), "a held row stays in the index");
                r.lock.unlock(mode);
                // SAFETY: out of the index, marked removed for anyone who
                // still holds its address, and retired once (the row
                // leaves `held` below).
                unsafe { retire_row(&self.guard, h.row) };
            } else {
                r.lock.unlock(mode);
            }
        }
        st.held.clear();
        st.by_key.clear();
        st.writes.clear();
        st.bytes.clear();
        st.nodes.clear();
    }
}

impl Tx for Txn<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        #[cfg(feature = "mutant")]
        if self.db.variant == Variant::MutantShortReads {
            return self.short_read(t, key);
        }
        let i = self.acquire(t, key, Mode::Shared, 0)?;
        Ok(self.value(i))
    }

    fn prefetch(&mut self, t: TableId, key: &[u8]) {
        let db: &Shared = self.db;
        if let Ok(table) = db.tables.get(t) {
            table.tree.prefetch(key, &Pin(&self.guard));
        }
    }

    fn prefetch_many(&mut self, keys: &[(TableId, &[u8])]) {
        self.prefetch_rows(keys.iter().copied());
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        check_value(value)?;
        let i = self.acquire(t, key, Mode::Exclusive, value.len())?;
        if self.value(i).is_none() {
            // A new row's length: the room of the next placeholder made
            // before its value is known (stored only on a change, so the
            // line stays shared).
            let room = &self.db.tables.get(t)?.room;
            if room.load(Ordering::Relaxed) != value.len() as u32 {
                room.store(value.len() as u32, Ordering::Relaxed);
            }
        }
        self.save(i);
        self.store(i, Some(value));
        Ok(())
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // Exclusive from the start (no shared lock to upgrade), and changed
        // in place: the undo image is the only copy.
        let i = self.acquire(t, key, Mode::Exclusive, 0)?;
        if self.value(i).is_none() {
            return Ok(None);
        }
        self.save(i);
        // SAFETY: held exclusive, so live, and no one else reads or writes
        // it; the borrow ends before the next call on `self`.
        let v = unsafe { (*self.st.held[i as usize].row).value_mut() };
        Ok(v.map(f))
    }

    fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // As `update`, with only the field's old bytes saved: the rest of
        // a large row is not read.
        let i = self.acquire(t, key, Mode::Exclusive, 0)?;
        let Some(len) = self.value(i).map(<[u8]>::len) else {
            return Ok(None);
        };
        let field = granary_api::field_within(&field, len);
        self.save_field(i, field.clone());
        // SAFETY: as in `update`.
        let v = unsafe { (*self.st.held[i as usize].row).value_mut() };
        Ok(v.map(|v| f(&mut v[field])))
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        let i = self.acquire(t, key, Mode::Exclusive, value.len())?;
        if self.value(i).is_some() {
            return Err(Error::KeyExists.into());
        }
        self.put(t, key, value)
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        let i = self.acquire(t, key, Mode::Exclusive, 0)?;
        if self.value(i).is_none() {
            return Ok(false);
        }
        self.save(i);
        self.store(i, None);
        Ok(true)
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
        // Rows are locked as they are met, a batch of keys at a time; the
        // leaves read are validated at commit.
        let mut batch = std::mem::take(&mut self.st.batch);
        batch.start();
        let mut seen = 0;
        let r = 'scan: loop {
            let want = (limit - seen).clamp(1, 64);
            let nodes = &mut self.st.nodes;
            let more = batch.next(tree, lo, hi, reverse, want, &Pin(&self.guard), |leaf, v| {
                nodes.push((leaf, v))
            });
            if !more {
                break Ok(());
            }
            for (k, _) in batch.iter() {
                let i = match self.acquire(t, k, Mode::Shared, 0) {
                    Ok(i) => i,
                    Err(e) => break 'scan Err(e),
                };
                if let Some(v) = self.value(i) {
                    seen += 1;
                    if !f(k, v) || seen == limit {
                        break 'scan Ok(());
                    }
                }
            }
        };
        self.st.batch = batch;
        r
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        // Every normal path has committed or rolled back; a body that
        // panicked has not, and must not leave rows locked.
        if !self.st.held.is_empty() {
            self.rollback();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

    fn num(v: Option<&[u8]>) -> u64 {
        v.map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap()))
    }

    #[test]
    fn reads_writes_deletes_and_rollback() {
        for variant in [Variant::Ordered, Variant::NoWait] {
            let db = TwoPl::new(variant);
            let t = db.create_table("t").unwrap();
            let mut w = db.runner().unwrap();
            w.try_run(|tx| {
                tx.insert(t, b"a", &1u64.to_be_bytes())?;
                tx.put(t, b"b", &2u64.to_be_bytes())?;
                assert_eq!(num(tx.get(t, b"a")?), 1, "reads its own writes");
                Ok(())
            })
            .unwrap()
            .unwrap();
            let r = w.try_run(|tx| {
                tx.put(t, b"a", &5u64.to_be_bytes())?;
                tx.delete(t, b"b")?;
                tx.insert(t, b"c", b"x")?;
                Err::<(), _>(TxError::rollback())
            });
            assert!(matches!(r, Err(Error::RolledBack)));
            let (a, b, c) = w
                .try_run(|tx| {
                    Ok((
                        num(tx.get(t, b"a")?),
                        num(tx.get(t, b"b")?),
                        tx.get(t, b"c")?.is_some(),
                    ))
                })
                .unwrap()
                .unwrap();
            assert_eq!((a, b, c), (1, 2, false), "rolled back");
            assert!(matches!(
                w.try_run(|tx| tx.insert(t, b"a", b"y")),
                Err(Error::KeyExists)
            ));
            w.try_run(|tx| tx.delete(t, b"a")).unwrap().unwrap();
            let mut keys = Vec::new();
            w.try_run(|tx| {
                tx.scan(t, Bound::Unbounded, Bound::Unbounded, 10, false, |k, _| {
                    keys.push(k.to_vec());
                    true
                })
            })
            .unwrap()
            .unwrap();
            assert_eq!(
                keys,
                vec![b"b".to_vec()],
                "deleted and rolled-back keys are gone"
            );
            assert_eq!((w.stats().commits, w.stats().failures), (4, 2));
        }
    }

    #[test]
    fn no_wait_conflicts_abort_and_release() {
        let db = TwoPl::new(Variant::NoWait);
        let t = db.create_table("t").unwrap();
        let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
        a.try_run(|tx| tx.put(t, b"k", b"1")).unwrap().unwrap();
        let r = a
            .try_run(|tx| {
                tx.put(t, b"k", b"2")?;
                // b cannot read what a holds exclusive, nor write it.
                let seen = b.try_run(|tx2| Ok(tx2.get(t, b"k")?.map(<[u8]>::to_vec)));
                Ok(seen)
            })
            .unwrap()
            .unwrap();
        assert!(matches!(r, Ok(Err(AbortReason::LockConflict))));
        assert_eq!(b.stats().aborts_for(AbortReason::LockConflict), 1);
        // a committed: b now reads the new value.
        let v = b
            .try_run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))
            .unwrap();
        assert_eq!(v.unwrap().as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn many_keys_held_at_once_are_found_again() {
        // Key hashes collide in unit tests (8 buckets), so this walks the
        // chains of held keys.
        let db = TwoPl::new(Variant::NoWait);
        let (a, b) = (db.create_table("a").unwrap(), db.create_table("b").unwrap());
        let mut w = db.runner().unwrap();
        w.try_run(|tx| {
            for i in 0..300u64 {
                tx.put(a, &i.to_be_bytes(), &i.to_be_bytes())?;
                tx.put(b, &i.to_be_bytes(), &(i + 1).to_be_bytes())?;
            }
            for i in 0..300u64 {
                assert_eq!(num(tx.get(a, &i.to_be_bytes())?), i);
                assert_eq!(num(tx.get(b, &i.to_be_bytes())?), i + 1);
            }
            Ok(())
        })
        .unwrap()
        .unwrap();
        let n = w
            .try_run(|tx| {
                let mut n = 0;
                tx.scan(
                    b,
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
        assert_eq!(n, 300);
    }

    /// The history recorder needs each key's writers in increasing commit
    /// key order, also across a delete (whose row leaves the index) and a
    /// re-insert by another worker.
    #[test]
    fn commit_keys_increase_across_delete_and_reinsert() {
        let db = TwoPl::new(Variant::NoWait);
        let t = db.create_table("t").unwrap();
        let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
        for _ in 0..3 {
            a.try_run(|tx| tx.put(t, b"k", b"1")).unwrap().unwrap();
        }
        a.try_run(|tx| tx.delete(t, b"k")).unwrap().unwrap();
        let deleted = a.last_commit_key();
        b.try_run(|tx| tx.insert(t, b"k", b"2")).unwrap().unwrap();
        assert!(
            b.last_commit_key() > deleted,
            "{} <= {deleted}",
            b.last_commit_key()
        );
    }

    /// A value longer than its row's room moves the key to a larger row
    /// in the index; a rollback puts the old value back in the new row.
    #[test]
    fn a_value_longer_than_its_row_moves_the_key() {
        for variant in [Variant::Ordered, Variant::NoWait] {
            let db = TwoPl::new(variant);
            let t = db.create_table("t").unwrap();
            let mut w = db.runner().unwrap();
            w.try_run(|tx| tx.put(t, b"k", b"short")).unwrap().unwrap();
            let row = |db: &TwoPl| {
                db.0.tables
                    .get(t)
                    .unwrap()
                    .tree
                    .find(b"k", &Pin(&crossbeam_epoch::pin()))
            };
            let before = row(&db);
            let long = vec![7u8; 300];
            w.try_run(|tx| {
                tx.put(t, b"k", &long)?;
                assert_eq!(tx.get(t, b"k")?, Some(&long[..]), "reads its own write");
                tx.update(t, b"k", |v| v[0] = 1)?;
                Ok(())
            })
            .unwrap()
            .unwrap();
            assert_ne!(row(&db), before, "a larger row");
            let mut want = long.clone();
            want[0] = 1;
            // Grown again, changed, then rolled back: the value it had.
            let r = w.try_run(|tx| {
                tx.put(t, b"k", &[9u8; 2000])?;
                tx.put(t, b"k", b"x")?;
                tx.delete(t, b"k")?;
                Err::<(), _>(TxError::rollback())
            });
            assert!(matches!(r, Err(Error::RolledBack)));
            let (got, n) = w
                .try_run(|tx| {
                    let got = tx.get(t, b"k")?.map(<[u8]>::to_vec);
                    let mut n = 0;
                    tx.scan(t, Bound::Unbounded, Bound::Unbounded, 9, false, |_, _| {
                        n += 1;
                        true
                    })?;
                    Ok((got, n))
                })
                .unwrap()
                .unwrap();
            assert_eq!(got.as_deref(), Some(&want[..]), "{variant:?}");
            assert_eq!(n, 1, "one entry for the key");
        }
    }

    /// A transaction waiting for a row that another moves to a larger one
    /// finds the new row once the mover commits.
    #[test]
    fn a_waiter_follows_a_moved_row() {
        let db = TwoPl::new(Variant::Ordered);
        let t = db.create_table("t").unwrap();
        let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
        a.try_run(|tx| tx.put(t, b"k", b"1")).unwrap().unwrap();
        let long = vec![5u8; 500];
        std::thread::scope(|s| {
            a.try_run(|tx| {
                tx.put(t, b"k", b"2")?;
                let waiter = s.spawn(|| {
                    let mut d = Declared::new();
                    d.write(t, b"k");
                    // Waits for `a` (the ordered variant's declared locks
                    // wait), on the row `a` is about to replace.
                    b.try_run_declared(&d, |tx| {
                        let v = tx.get(t, b"k")?.map(<[u8]>::to_vec);
                        tx.update(t, b"k", |v| v[1] = 6)?;
                        Ok(v)
                    })
                });
                std::thread::sleep(std::time::Duration::from_millis(50));
                tx.put(t, b"k", &long)?;
                Ok(waiter)
            })
            .unwrap()
            .unwrap()
            .join()
            .unwrap()
            .unwrap()
            .map(|seen| assert_eq!(seen.as_deref(), Some(&long[..]), "saw a's commit"))
            .unwrap();
        });
        let v = a
            .try_run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))
            .unwrap()
            .unwrap();
        let mut want = long;
        want[1] = 6;
        assert_eq!(v, Some(want));
    }

    #[test]
    fn errors_are_typed() {
        let db = TwoPl::new(Variant::NoWait);
        let mut w = db.runner().unwrap();
        let big = vec![0u8; MAX_KEY_BYTES + 1];
        assert!(matches!(
            w.try_run(|tx| tx.get(TableId::new(0), b"k").map(|_| ())),
            Err(Error::UnknownTableId(0))
        ));
        let t = db.create_table("t").unwrap();
        assert!(matches!(
            w.try_run(|tx| tx.get(t, &big).map(|_| ())),
            Err(Error::KeyTooLarge { .. })
        ));
        assert!(matches!(
            w.try_run(|tx| tx.put(t, b"k", &vec![0; MAX_VALUE_BYTES + 1])),
            Err(Error::ValueTooLarge { .. })
        ));
        assert_eq!(w.stats().failures, 3);
    }
}
