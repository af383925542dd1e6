//! Partitioned-Store, H-Store style (Silo §5.4).
//!
//! "We partition the data ... one lock per partition. ... Before executing
//! a transaction, a worker acquires the locks of the partitions it needs,
//! in sorted order, and then executes with no further concurrency control"
//! (Silo §5.4's description of its Partitioned-Store). Here:
//!
//! * The data is split by the workload's partition key ([`Partitioning`]:
//!   the warehouse for TPC-C, a hash for YCSB and SmallBank). Each table
//!   has one tree per partition: the index every design uses (Silo §5.4:
//!   "the same B+-trees ... except we remove the concurrency control"),
//!   touched by the partition lock's holder alone, so its node version
//!   words are never contended (ARCHITECTURE.md says why they stay). The
//!   tree maps a key to a row holding the value, short values inline.
//! * Each partition has one spinlock on its own cache line. A procedure's
//!   partitions come from its declaration ([`Declared::partition`] and
//!   the partitions of its declared keys); it takes their locks in sorted
//!   order (so it never deadlocks), runs, and releases them. A procedure
//!   that declares nothing takes every lock: it runs alone.
//! * Tables whose rule is [`PartitionRule::Shared`] (TPC-C's ITEM) are one
//!   map, read under any partition's lock and written only by a procedure
//!   that holds every lock (loading).
//! * Writes go in place; old values are copied into an undo buffer for a
//!   rollback (one byte arena, reused: no allocation per write). There is
//!   nothing to validate: a procedure that holds its partitions never
//!   conflicts, so it never aborts.
//!
//! An access outside the locked partitions is a bug in the procedure's
//! declaration and fails with [`Error::Undeclared`] before it touches
//! anything.

use std::hash::Hasher;
use std::ops::Bound;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use granary_api::{
    AbortReason, Declared, Engine, Error, PartitionRule, Partitioning, Stats, TableId,
    TableOptions, Tx, TxError, TxRunner,
};

use granary_index::{Insert, Retired, Tree};

use crate::catalog::Catalog;
use crate::sync::{backoff, AtomicU64, Ordering};
use crate::value::Tail;
use granary_api::limits::{check_bounds, check_key, check_value};

/// The most partitions a store has (bits of a lock mask).
pub const MAX_PARTITIONS: usize = 1024;

/// A row: the value's bytes, in one block of their size (at least a
/// cache line). No lock, no version: the partition lock is the only
/// protection.
type Row = Tail<()>;

struct Table {
    name: String,
    rule: PartitionRule,
    /// One tree per partition (one in all for a shared table), mapping a
    /// key to a `*mut Row`.
    trees: Box<[Tree]>,
}

/// The index's guard for a tree only its partition's holder touches: a
/// partition's tree under its lock, a shared table's written only by the
/// holder of every lock. Nothing another thread could read is retired,
/// so retired memory is freed at once.
struct Owner;

// SAFETY: retired memory (the heap copy of a removed long key) is
// unreachable from the tree, and no other thread is in the tree while
// its owner writes it (above); the owner keeps no reference into tree
// memory from one call to the next.
unsafe impl granary_index::Guard for Owner {
    fn retire(&mut self, garbage: Retired) {
        // SAFETY: as above.
        unsafe { garbage.reclaim() }
    }
}

/// The row at an index value.
///
/// # Safety
/// `v` is a value of a tree the caller holds (rows live until their key
/// is removed or their row replaced, and that transaction commits).
unsafe fn row<'a>(v: u64) -> &'a Row {
    // SAFETY: the caller's contract.
    unsafe { &*(v as *const Row) }
}

/// The value of the row at `v` (rows in a tree always have one).
///
/// # Safety
/// As [`row`]; no one writes it meanwhile.
unsafe fn row_value<'a>(v: u64) -> &'a [u8] {
    // SAFETY: the caller's contract.
    unsafe { row(v).value() }.expect("rows in a tree hold a value")
}

/// A partition's spinlock, and the commit key of its last transaction.
#[derive(Default)]
struct PartitionLock {
    held: AtomicU64,
    /// Written only by the lock's holder.
    last_commit: AtomicU64,
}

/// A partitioned database.
pub struct Partitioned(Arc<Shared>);

struct Shared {
    partitioning: Partitioning,
    locks: Box<[CachePadded<PartitionLock>]>,
    tables: Catalog<Table>,
    /// Tables hinted [`TableOptions::point_lookups`] keep a point index.
    point_index: bool,
}

impl Partitioned {
    /// An empty store of `partitions` partitions (1..=[`MAX_PARTITIONS`]),
    /// split by `partitioning`.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a partition count out of range.
    pub fn new(partitions: usize, partitioning: Partitioning) -> Result<Partitioned, Error> {
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(Error::InvalidOption(format!(
                "partitions must be in 1..={MAX_PARTITIONS}, got {partitions}"
            )));
        }
        Ok(Partitioned(Arc::new(Shared {
            partitioning,
            locks: (0..partitions).map(|_| CachePadded::default()).collect(),
            tables: Catalog::default(),
            point_index: false,
        })))
    }

    /// [`Partitioned::new`], whose tables hinted
    /// [`TableOptions::point_lookups`] keep a point index in each
    /// partition (`granary_index::Tree::with_point_index`).
    ///
    /// # Errors
    /// As [`Partitioned::new`].
    pub fn with_point_index(
        partitions: usize,
        partitioning: Partitioning,
    ) -> Result<Partitioned, Error> {
        let mut p = Self::new(partitions, partitioning)?;
        Arc::get_mut(&mut p.0).expect("not shared yet").point_index = true;
        Ok(p)
    }

    /// How many partitions it has.
    pub fn partitions(&self) -> usize {
        self.0.locks.len()
    }
}

impl Engine for Partitioned {
    type Runner = Runner;

    /// Create a table. Its rule comes from the store's partitioning;
    /// [`Error::InvalidOption`] if the partitioning has none for it.
    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        self.create_table_with(name, TableOptions::default())
    }

    /// As `create_table`, with a point index per partition if hinted and
    /// enabled.
    fn create_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
        let point = self.0.point_index && o.point_lookups;
        let rule = (self.0.partitioning)(name).ok_or_else(|| {
            Error::InvalidOption(format!(
                "Partitioned-Store needs a partition key for every table; table {name:?} has none"
            ))
        })?;
        let n = if rule == PartitionRule::Shared {
            1
        } else {
            self.0.locks.len()
        };
        self.0.tables.create(name, || Table {
            name: name.to_string(),
            rule,
            trees: (0..n)
                .map(|_| {
                    if point {
                        Tree::with_point_index()
                    } else {
                        Tree::new()
                    }
                })
                .collect(),
        })
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.0.tables.find(name)
    }

    fn runner(&self) -> Result<Runner, Error> {
        Ok(Runner {
            db: self.0.clone(),
            locked: Vec::new(),
            mask: vec![0; self.0.locks.len().div_ceil(64)],
            undo: Undo::default(),
            stats: Stats::default(),
            last_commit: 0,
        })
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for t in self.tables.tables_mut() {
            for tree in t.trees.iter_mut() {
                // SAFETY: every value is a live row, in one tree once; the
                // last runner is gone.
                tree.for_each_value(|v| unsafe { Row::free(v as *mut Row) });
            }
        }
    }
}

/// What a transaction changed, undone in reverse on rollback. Old values
/// and keys are copied into one byte arena, kept from one transaction to
/// the next.
#[derive(Default)]
struct Undo {
    steps: Vec<Step>,
    bytes: Vec<u8>,
}

/// One change; `at..at + len` is a range of [`Undo::bytes`].
enum Step {
    /// A row's value overwritten in place: its old bytes.
    Overwrite { row: u64, at: u32, len: u32 },
    /// A field of a row's value changed in place: its old bytes, which
    /// start at byte `off` of the value.
    Field {
        row: u64,
        off: u32,
        at: u32,
        len: u32,
    },
    /// A key added to table `t`'s partition `p`: the key.
    Added {
        t: TableId,
        p: u32,
        at: u32,
        len: u32,
    },
    /// A key removed from table `t`'s partition `p`, with its row (freed
    /// at commit).
    Removed {
        t: TableId,
        p: u32,
        at: u32,
        len: u32,
        row: u64,
    },
    /// A key's row replaced by a larger one, `new`: `old` is freed at
    /// commit, `new` on rollback.
    Replaced {
        t: TableId,
        p: u32,
        at: u32,
        len: u32,
        old: u64,
        new: u64,
    },
}

impl Undo {
    /// Copy `b` into the arena: where it starts.
    fn keep(&mut self, b: &[u8]) -> (u32, u32) {
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(b);
        (at, b.len() as u32)
    }

    fn clear(&mut self) {
        self.steps.clear();
        self.bytes.clear();
    }
}

/// A worker thread's handle.
pub struct Runner {
    db: Arc<Shared>,
    /// Partitions held, sorted.
    locked: Vec<u32>,
    mask: Vec<u64>,
    undo: Undo,
    stats: Stats,
    last_commit: u64,
}

/// A transaction holding its partitions.
pub struct Txn<'r> {
    db: &'r Shared,
    mask: &'r [u64],
    all: bool,
    undo: &'r mut Undo,
}

fn hash(key: &[u8]) -> u64 {
    // FNV-1a: stable across runs and platforms.
    let mut h = std::hash::BuildHasher::build_hasher(&FnvState);
    h.write(key);
    h.finish()
}

#[derive(Default)]
struct FnvState;
struct Fnv(u64);
impl std::hash::BuildHasher for FnvState {
    type Hasher = Fnv;
    fn build_hasher(&self) -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}
impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
}

impl Shared {
    /// The partition of `key` in `table` (`None` for a shared table).
    fn partition_of(&self, table: &Table, key: &[u8]) -> Option<u32> {
        let n = self.locks.len() as u64;
        match table.rule {
            PartitionRule::Shared => None,
            PartitionRule::Hash => Some((hash(key) % n) as u32),
            r @ PartitionRule::Field { .. } => {
                Some((r.field_value(key).expect("a field rule") % n) as u32)
            }
        }
    }
}

impl Runner {
    fn lock_all(&mut self, d: Option<&Declared>) -> Result<bool, Error> {
        let db = &*self.db;
        self.locked.clear();
        let n = db.locks.len() as u64;
        let all = match d {
            None => true,
            Some(d) => {
                for &v in d.partitions() {
                    self.locked.push((v % n) as u32);
                }
                for (t, k) in d.reads().chain(d.writes()) {
                    let table = db.tables.get(t)?;
                    if let Some(p) = db.partition_of(table, k) {
                        self.locked.push(p);
                    }
                }
                self.locked.is_empty()
            }
        };
        if all {
            self.locked.clear();
            self.locked.extend(0..n as u32);
        }
        self.locked.sort_unstable();
        self.locked.dedup();
        // Silo §5.4: the locks of the partitions it needs, in sorted order.
        for &p in &self.locked {
            let l = &db.locks[p as usize];
            let mut spins = 0;
            // Acquire pairs with the Release of the unlock below: the
            // previous holder's writes to the partition are visible.
            while l
                .held
                .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                backoff(&mut spins);
            }
            self.mask[p as usize / 64] |= 1 << (p % 64);
        }
        Ok(self.locked.len() == db.locks.len())
    }

    fn unlock_all(&mut self) {
        for &p in &self.locked {
            self.mask[p as usize / 64] = 0;
            self.db.locks[p as usize].held.store(0, Ordering::Release);
        }
        self.locked.clear();
    }

    fn run<T>(
        &mut self,
        d: Option<&Declared>,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let all = match self.lock_all(d) {
            Ok(all) => all,
            Err(e) => {
                self.unlock_all();
                self.stats.failures += 1;
                return Err(e);
            }
        };
        let r = {
            let mut tx = Txn {
                db: &self.db,
                mask: &self.mask,
                all,
                undo: &mut self.undo,
            };
            let r = body(&mut tx);
            if r.is_err() {
                tx.rollback();
            } else {
                tx.commit();
            }
            r
        };
        if r.is_ok() {
            // A commit key above the last one of every partition held: the
            // transactions that write a key hold its partition's lock one
            // after the other, so their keys increase.
            let locks = &self.db.locks;
            let ck = self
                .locked
                .iter()
                .map(|&p| locks[p as usize].last_commit.load(Ordering::Relaxed))
                .fold(self.last_commit, u64::max)
                + 1;
            for &p in &self.locked {
                locks[p as usize].last_commit.store(ck, Ordering::Relaxed);
            }
            self.last_commit = ck;
        }
        self.unlock_all();
        // Nothing here conflicts; a body may still report one.
        self.stats.record(r)
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Txn<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(None, body)
    }

    fn try_run_declared<T>(
        &mut self,
        declared: &Declared,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(Some(declared), body)
    }

    fn uses_declared(&self) -> bool {
        true
    }

    fn last_commit_key(&self) -> u64 {
        self.last_commit
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl<'r> Txn<'r> {
    /// The tree holding `key` of table `t`, checked to be locked (for a
    /// write to a shared table: every partition locked).
    fn map(&self, t: TableId, key: &[u8], write: bool) -> Result<(&'r Table, u32), TxError> {
        check_key(key)?;
        let db: &'r Shared = self.db;
        let table = db.tables.get(t)?;
        match db.partition_of(table, key) {
            None if write && !self.all => Err(Error::Undeclared(format!(
                "a write to shared table {:?} needs every partition locked (declare none)",
                table.name
            ))
            .into()),
            None => Ok((table, 0)),
            Some(p) if self.mask[p as usize / 64] & (1 << (p % 64)) != 0 => Ok((table, p)),
            Some(p) => Err(Error::Undeclared(format!(
                "table {:?}: partition {p} was not declared",
                table.name
            ))
            .into()),
        }
    }

    /// Undo every change, newest first.
    fn rollback(&mut self) {
        let db: &Shared = self.db;
        let undo = &mut *self.undo;
        for step in undo.steps.drain(..).rev() {
            let tree = |t: TableId, p: u32| {
                &db.tables.get(t).expect("written tables exist").trees[p as usize]
            };
            let bytes = |at: u32, len: u32| &undo.bytes[at as usize..(at + len) as usize];
            match step {
                Step::Overwrite { row: r, at, len } => {
                    // SAFETY: our partition's row, alive (a later removal
                    // or replacement was undone first); its room held
                    // these bytes before.
                    let fits = unsafe { row(r).overwrite(Some(bytes(at, len))) };
                    debug_assert!(fits);
                }
                Step::Field {
                    row: r,
                    off,
                    at,
                    len,
                } => {
                    // SAFETY: as for `Overwrite`; the value has its length
                    // of when the field was saved (later changes were
                    // undone first), so the field lies within it.
                    let v = unsafe { row(r).value_mut() }.expect("rows in a tree hold a value");
                    v[off as usize..(off + len) as usize].copy_from_slice(bytes(at, len));
                }
                Step::Added { t, p, at, len } => {
                    let (v, _) = tree(t, p)
                        .remove(bytes(at, len), &mut Owner)
                        .expect("an added key is still there");
                    // SAFETY: made by this transaction, unlinked above.
                    unsafe { Row::free(v as *mut Row) };
                }
                Step::Removed { t, p, at, len, row } => {
                    let r = tree(t, p).insert(bytes(at, len), row, &mut Owner);
                    debug_assert!(matches!(r, Insert::Inserted(_)));
                }
                Step::Replaced {
                    t,
                    p,
                    at,
                    len,
                    old,
                    new,
                } => {
                    let back = tree(t, p).replace(bytes(at, len), new, old, &mut Owner);
                    debug_assert!(back);
                    // SAFETY: made by this transaction, unlinked above.
                    unsafe { Row::free(new as *mut Row) };
                }
            }
        }
        undo.bytes.clear();
    }

    /// Free the rows of the keys this transaction removed (no one else
    /// can reach them: they were unlinked under the partition's lock).
    fn commit(&mut self) {
        for step in &self.undo.steps {
            if let &Step::Removed { row: r, .. } | &Step::Replaced { old: r, .. } = step {
                // SAFETY: unlinked, and listed once.
                unsafe { Row::free(r as *mut Row) };
            }
        }
        self.undo.clear();
    }

    fn write(
        &mut self,
        t: TableId,
        key: &[u8],
        value: Option<&[u8]>,
        must_be_new: bool,
    ) -> Result<bool, TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        let (table, p) = self.map(t, key, true)?;
        let tree = &table.trees[p as usize];
        let undo = &mut *self.undo;
        if must_be_new {
            // An insert: one descent (the key is new, or the insert fails).
            let r = Row::alloc((), value, 0);
            if let Insert::Exists { .. } = tree.insert(key, r as u64, &mut Owner) {
                // SAFETY: never published.
                unsafe { Row::free(r) };
                return Err(Error::KeyExists.into());
            }
            let (at, len) = undo.keep(key);
            undo.steps.push(Step::Added { t, p, at, len });
            return Ok(false);
        }
        let found = tree.find(key, &Owner);
        match (found, value) {
            (Some(v), Some(new)) => {
                // SAFETY: a row of our partition.
                let (r, old) = unsafe { (row(v), row_value(v)) };
                let (at, len) = undo.keep(old);
                // SAFETY: as above; `old` is not used past this point.
                if unsafe { r.overwrite(Some(new)) } {
                    undo.steps.push(Step::Overwrite { row: v, at, len });
                } else {
                    // No room: a larger row takes its place.
                    let n = Row::alloc((), Some(new), 0) as u64;
                    let swapped = tree.replace(key, v, n, &mut Owner);
                    debug_assert!(swapped);
                    undo.bytes.truncate(at as usize);
                    let (at, len) = undo.keep(key);
                    undo.steps.push(Step::Replaced {
                        t,
                        p,
                        at,
                        len,
                        old: v,
                        new: n,
                    });
                }
            }
            (None, Some(new)) => {
                let r = Row::alloc((), Some(new), 0) as u64;
                let Insert::Inserted(_) = tree.insert(key, r, &mut Owner) else {
                    unreachable!("absent under our lock");
                };
                let (at, len) = undo.keep(key);
                undo.steps.push(Step::Added { t, p, at, len });
            }
            (Some(_), None) => {
                let (v, _) = tree
                    .remove(key, &mut Owner)
                    .expect("present under our lock");
                let (at, len) = undo.keep(key);
                undo.steps.push(Step::Removed {
                    t,
                    p,
                    at,
                    len,
                    row: v,
                });
            }
            (None, None) => {}
        }
        Ok(found.is_some())
    }
}

impl Tx for Txn<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        let (table, p) = self.map(t, key, false)?;
        let v = table.trees[p as usize].find(key, &Owner);
        // SAFETY: locked (checked by `map`): no one else writes it.
        Ok(v.map(|v| unsafe { row_value(v) }))
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // The whole value is one field: its length does not change, so
        // restoring its old bytes in place undoes it.
        self.update_field(t, key, 0..usize::MAX, f)
    }

    fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: std::ops::Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // In place; only the field's old bytes are saved for undo.
        let (table, p) = self.map(t, key, true)?;
        let Some(v) = table.trees[p as usize].find(key, &Owner) else {
            return Ok(None);
        };
        // SAFETY: locked (checked by `map`): no one else reads or writes it.
        let bytes = unsafe { row(v).value_mut() }.expect("rows in a tree hold a value");
        let field = granary_api::field_within(&field, bytes.len());
        let (at, len) = self.undo.keep(&bytes[field.clone()]);
        let off = field.start as u32;
        self.undo.steps.push(Step::Field {
            row: v,
            off,
            at,
            len,
        });
        Ok(Some(f(&mut bytes[field])))
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value), false).map(|_| ())
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value), true).map(|_| ())
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        self.write(t, key, None, false)
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
        let db: &Shared = self.db;
        let table = db.tables.get(t)?;
        check_bounds(lo, hi)?;
        if limit == 0 {
            return Ok(());
        }
        if self.all && table.trees.len() > 1 {
            // Holding every partition (a procedure that declared nothing,
            // such as a verification pass), a scan may cross them: merge
            // the partitions' ranges in key order (up to `limit` from
            // each).
            let mut rows: Vec<(Vec<u8>, u64)> = Vec::new();
            for tree in table.trees.iter() {
                let mut n = 0;
                tree.scan(
                    lo,
                    hi,
                    reverse,
                    &Owner,
                    |_, _| {},
                    |k, v| {
                        rows.push((k.to_vec(), v));
                        n += 1;
                        n < limit
                    },
                );
            }
            rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            if reverse {
                rows.reverse();
            }
            for (k, v) in rows.into_iter().take(limit) {
                // SAFETY: every partition is locked by this transaction.
                if !f(&k, unsafe { row_value(v) }) {
                    break;
                }
            }
            return Ok(());
        }
        // A scan reads one partition: the one its low bound is in. The
        // range must not leave it (an exclusive high bound may sit at the
        // next partition key's first key).
        let (Bound::Included(l) | Bound::Excluded(l)) = lo else {
            return Err(Error::Undeclared(format!(
                "table {:?}: a scan needs a low bound inside one partition",
                table.name
            ))
            .into());
        };
        let (_, p) = self.map(t, l, false)?;
        let in_one = match (table.rule, hi) {
            (PartitionRule::Shared, _) => true,
            (PartitionRule::Hash, _) => false,
            (r, Bound::Included(h)) => r.field_value(h) == r.field_value(l),
            (r @ PartitionRule::Field { shift, bits }, Bound::Excluded(h)) => {
                let (vl, vh) = (r.field_value(l), r.field_value(h));
                let rest_zero = {
                    let mut b = [0u8; 8];
                    let n = h.len().min(8);
                    b[..n].copy_from_slice(&h[..n]);
                    let used = (shift + bits).min(64);
                    let low = if used >= 64 {
                        0
                    } else {
                        u64::from_be_bytes(b) << used
                    };
                    low == 0 && h[n..].iter().all(|&x| x == 0)
                };
                vl == vh || (vh == vl.map(|v| v + 1) && rest_zero)
            }
            (_, Bound::Unbounded) => false,
        };
        if !in_one {
            return Err(Error::Undeclared(format!(
                "table {:?}: a scan must stay within one partition",
                table.name
            ))
            .into());
        }
        let mut n = 0;
        let tree = &table.trees[p as usize];
        tree.scan(
            lo,
            hi,
            reverse,
            &Owner,
            |_, _| {},
            |k, v| {
                n += 1;
                // SAFETY: locked (checked by `map`).
                f(k, unsafe { row_value(v) }) && n < limit
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_name(name: &str) -> Option<PartitionRule> {
        match name {
            "w" => Some(PartitionRule::Field { shift: 0, bits: 8 }),
            "h" => Some(PartitionRule::Hash),
            "item" => Some(PartitionRule::Shared),
            _ => None,
        }
    }

    #[test]
    fn declared_partitions_run_and_roll_back() {
        let db = Partitioned::new(4, by_name).unwrap();
        let w = db.create_table("w").unwrap();
        let item = db.create_table("item").unwrap();
        assert!(matches!(
            db.create_table("nope"),
            Err(Error::InvalidOption(_))
        ));
        let mut r = db.runner().unwrap();
        // Declaring nothing locks everything: loading may write anywhere.
        r.try_run(|tx| {
            tx.insert(item, b"i1", b"apple")?;
            for p in 0..8u8 {
                tx.insert(w, &[p, 1], &[p])?;
            }
            Ok(())
        })
        .unwrap()
        .unwrap();
        let mut d = Declared::new();
        d.partition(2);
        let v = r
            .try_run_declared(&d, |tx| {
                tx.put(w, &[6, 1], b"x")?; // 6 % 4 == 2
                let mut seen = Vec::new();
                tx.scan(
                    w,
                    Bound::Included(&[2]),
                    Bound::Excluded(&[3]),
                    9,
                    false,
                    |k, _| {
                        seen.push(k.to_vec());
                        true
                    },
                )?;
                Ok((tx.get(item, b"i1")?.map(<[u8]>::to_vec), seen))
            })
            .unwrap()
            .unwrap();
        assert_eq!(
            v.0.as_deref(),
            Some(&b"apple"[..]),
            "shared tables read anywhere"
        );
        assert_eq!(v.1, vec![vec![2, 1]]);
        let e = r.try_run_declared(&d, |tx| tx.get(w, &[1, 1]).map(|_| ()));
        assert!(matches!(e, Err(Error::Undeclared(_))), "{e:?}");
        let e = r.try_run_declared(&d, |tx| tx.put(item, b"i2", b""));
        assert!(matches!(e, Err(Error::Undeclared(_))), "{e:?}");
        let e = r.try_run_declared(&d, |tx| {
            tx.delete(w, &[2, 1])?;
            tx.put(w, &[6, 1], b"y")?;
            Err::<(), _>(TxError::rollback())
        });
        assert!(matches!(e, Err(Error::RolledBack)));
        let got = r
            .try_run_declared(&d, |tx| {
                Ok((
                    tx.get(w, &[2, 1])?.map(<[u8]>::to_vec),
                    tx.get(w, &[6, 1])?.map(<[u8]>::to_vec),
                ))
            })
            .unwrap()
            .unwrap();
        assert_eq!(got, (Some(vec![2]), Some(b"x".to_vec())), "rolled back");
        let e = r.try_run_declared(&d, |tx| {
            tx.scan(
                w,
                Bound::Included(&[2]),
                Bound::Included(&[3]),
                9,
                false,
                |_, _| true,
            )
        });
        assert!(matches!(e, Err(Error::Undeclared(_))), "{e:?}");
        // Holding every partition, a scan crosses them, in key order.
        let mut keys = Vec::new();
        r.try_run(|tx| {
            tx.scan(
                w,
                Bound::Included(&[1]),
                Bound::Excluded(&[6, 1]),
                9,
                true,
                |k, _| {
                    keys.push(k[0]);
                    true
                },
            )
        })
        .unwrap()
        .unwrap();
        assert_eq!(keys, [5, 4, 3, 2, 1]);
    }

    /// A value that outgrows its row gets a larger row; a rollback puts
    /// the old row back, and in-place updates roll back too.
    #[test]
    fn outgrown_rows_are_replaced_and_rolled_back() {
        let db = Partitioned::new(2, by_name).unwrap();
        let h = db.create_table("h").unwrap();
        let mut r = db.runner().unwrap();
        let get = |r: &mut Runner| {
            r.try_run(|tx| Ok(tx.get(h, b"k")?.map(<[u8]>::to_vec)))
                .unwrap()
                .unwrap()
        };
        r.try_run(|tx| tx.put(h, b"k", b"short")).unwrap().unwrap();
        let e = r.try_run(|tx| {
            tx.put(h, b"k", &[1; 500])?;
            tx.update(h, b"k", |v| v[0] = 2)?;
            tx.put(h, b"k", &[3; 2000])?;
            Err::<(), _>(TxError::rollback())
        });
        assert!(matches!(e, Err(Error::RolledBack)));
        assert_eq!(get(&mut r).as_deref(), Some(&b"short"[..]));
        r.try_run(|tx| {
            tx.put(h, b"k", &[1; 500])?;
            tx.update(h, b"k", |v| v[0] = 2)
        })
        .unwrap()
        .unwrap();
        let v = get(&mut r).unwrap();
        assert_eq!((v.len(), v[0], v[1]), (500, 2, 1));
    }

    #[test]
    fn hashed_keys_lock_their_partitions() {
        let db = Partitioned::new(8, by_name).unwrap();
        let h = db.create_table("h").unwrap();
        let mut r = db.runner().unwrap();
        let mut d = Declared::new();
        d.write(h, b"a").read(h, b"b");
        r.try_run_declared(&d, |tx| {
            tx.put(h, b"a", b"1")?;
            tx.get(h, b"b").map(|_| ())
        })
        .unwrap()
        .unwrap();
        assert!(Partitioned::new(0, by_name).is_err());
    }
}
