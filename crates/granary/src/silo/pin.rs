//! Pins and argument checks: the lowest layer a transaction, a snapshot
//! or a worker's maintenance shares.
//!
//! A worker *pins* its epoch in its epoch slot (`Epochs::pin`) around
//! every transaction (Silo §4.8); while it is pinned, nothing it can reach
//! through the trees is freed. The tree guards below are the index's view
//! of a pin: they can only be made while the worker is pinned.

use granary_index::{Guard, Retired};

use crate::silo::epoch::Epochs;
use crate::silo::gc::{Garbage, GcLists};

/// Guard for tree operations that never retire memory (lookups, scans,
/// inserts). Only created while the worker is pinned.
pub(crate) struct ReadPin(());

impl ReadPin {
    /// # Safety
    /// The calling worker is pinned for the guard's whole life.
    pub(crate) unsafe fn new() -> ReadPin {
        ReadPin(())
    }
}

// SAFETY: created only while pinned (see `new`); never asked to retire
// (reads and inserts unlink nothing) and would leak, not free, if it were.
unsafe impl Guard for ReadPin {
    fn retire(&mut self, garbage: Retired) {
        let _ = garbage; // leaked: `Retired` frees nothing unless reclaimed
    }
}

/// Guard for tree removals: retired keys join the worker's tree list,
/// labelled with the current global epoch.
pub(crate) struct RetirePin<'a> {
    pub gc: &'a mut GcLists,
    pub epochs: &'a Epochs,
}

// SAFETY: retired memory is freed only by `GcLists::collect` once
// `tree_safe` passes its label: every worker pinned when it was unlinked has
// unpinned (see `epoch` module docs).
unsafe impl Guard for RetirePin<'_> {
    fn retire(&mut self, garbage: Retired) {
        self.gc
            .tree
            .push_back((self.epochs.global(), Garbage::Key(garbage)));
    }
}
