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
//!   its read and write sets ([`TxRunner::try_run_declared`](granary_api::TxRunner::try_run_declared)) has all of
//!   them locked before its body runs, in one global order (table, then
//!   key bytes), waiting for each. Waits are acyclic, so it never
//!   deadlocks, and conflict-free work never aborts. Accesses outside the
//!   declaration (and procedures with none) fall back to no-wait.
//! * [`Variant::NoWait`]: a lock held in a conflicting mode aborts the
//!   requester ([`AbortReason::LockConflict`](granary_api::AbortReason::LockConflict)); the runner backs off
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
//! scanned range, and the scanner aborts ([`AbortReason::NodeValidation`](granary_api::AbortReason::NodeValidation)).
//! This protects ranges at leaf granularity without range locks; it is
//! optimistic where the rest of 2PL is pessimistic (ARCHITECTURE.md says
//! why).
//!
//! Rows whose key ends absent under an exclusive lock (a delete, an
//! aborted insert) are taken out of the index before the lock is released
//! and freed through epoch reclamation; a waiter that then gets the lock
//! sees the row marked removed and looks the key up again.

mod lock;
mod runner;
mod session;
#[cfg(test)]
mod tests;
mod txn;

use std::cell::UnsafeCell;
use std::sync::Arc;

use crossbeam_epoch::Guard;
use granary_api::{Engine, Error, TableId, TableOptions};
use granary_index::Tree;

use crate::catalog::Catalog;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::value;
use lock::RowLock;
pub use runner::Runner;
pub use session::Session;
pub use txn::Txn;

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
    // Acquire: pairs with a remover's Release raise (before its key left the
    // index): the commit key of every removed row is seen.
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
    tree: Tree<*const Row>,
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
                .for_each_value(|v| unsafe { Row::free(v.cast_mut()) });
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
        Ok(Runner::new(self.0.clone()))
    }
}
