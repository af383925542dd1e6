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
//!   partitions come from its declaration ([`Declared::partition`](granary_api::Declared::partition) and
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
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use granary_api::{Engine, Error, PartitionRule, Partitioning, TableId, TableOptions};

use granary_index::{Retired, Tree};

use crate::catalog::Catalog;
use crate::sync::AtomicU64;
use crate::value::Tail;

mod runner;
#[cfg(test)]
mod tests;
mod txn;

pub use runner::Runner;
pub use txn::Txn;

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
    trees: Box<[Tree<*const Row>]>,
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
unsafe fn row<'a>(v: *const Row) -> &'a Row {
    // SAFETY: the caller's contract.
    unsafe { &*v }
}

/// The value of the row at `v` (rows in a tree always have one).
///
/// # Safety
/// As [`row`]; no one writes it meanwhile.
unsafe fn row_value<'a>(v: *const Row) -> &'a [u8] {
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
        Ok(Runner::new(self.0.clone()))
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for t in self.tables.tables_mut() {
            for tree in t.trees.iter_mut() {
                // SAFETY: every value is a live row, in one tree once; the
                // last runner is gone.
                tree.for_each_value(|v| unsafe { Row::free(v.cast_mut()) });
            }
        }
    }
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
