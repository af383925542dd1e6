//! Per-worker garbage lists, reclaimed by epoch in the worker between
//! transactions (Silo §4.8, §4.9).
//!
//! Three FIFO queues, each with non-decreasing labels:
//! * `tree`: memory unlinked while the global epoch was `r` (removed keys'
//!   heap copies, superseded or unhooked records); freed once
//!   `r < tree_safe`.
//! * `snap`: old record versions kept for snapshots, labelled `snap(e)` of
//!   the commit that superseded them (and the epoch they were unlinked in);
//!   freed once both bounds pass.
//! * `cleanup`: deleted (absent) records to unhook from their tree once no
//!   snapshot can need them; then the record joins `tree`.

use std::collections::VecDeque;
use std::ptr::NonNull;

use granary_index::Retired;

use crate::silo::record::{Pool, Record};
use crate::silo::tid::Tid;

pub(crate) enum Garbage {
    /// A record and its capacity (kept here so freeing it later does not
    /// touch its long-cold memory).
    Record(NonNull<Record>, u32),
    Key(Retired),
    /// A chunk of old-version copies (`Pool::alloc_version`).
    Chunk(NonNull<u8>),
}

// SAFETY: garbage is owned, unreachable memory waiting for its grace period.
unsafe impl Send for Garbage {}

impl Garbage {
    /// Garbage for a record the caller has just touched.
    pub fn record(r: NonNull<Record>) -> Garbage {
        // SAFETY: the caller hands over a live record it still holds.
        let cap = unsafe { r.as_ref() }.capacity() as u32;
        Garbage::Record(r, cap)
    }

    /// # Safety
    /// The grace period of this garbage has passed.
    unsafe fn free(self, pool: Option<&mut Pool>) {
        match (self, pool) {
            // SAFETY: caller's contract.
            (Garbage::Record(r, cap), Some(pool)) => unsafe { pool.free(r, cap as usize) },
            // SAFETY: caller's contract.
            (Garbage::Record(r, _), None) => unsafe { Record::free(r) },
            // SAFETY: caller's contract.
            (Garbage::Key(k), _) => unsafe { k.reclaim() },
            // SAFETY: caller's contract.
            (Garbage::Chunk(c), Some(pool)) => unsafe { pool.recycle_chunk(c) },
            // SAFETY: caller's contract.
            (Garbage::Chunk(c), None) => unsafe { crate::silo::record::free_chunk(c) },
        }
    }
}

/// A deleted record to unhook from its table's tree.
pub(crate) struct Cleanup {
    pub label: u64,
    /// Whether `label` is a snapshot epoch (else a global epoch).
    pub snapshot: bool,
    pub table: u32,
    pub key: Box<[u8]>,
    pub rec: NonNull<Record>,
    /// The TID word the delete installed; anything else means the record
    /// was reused since and is not ours to unhook.
    pub tid: Tid,
}

// SAFETY: the pointer is only dereferenced after re-finding it in the tree.
unsafe impl Send for Cleanup {}

#[derive(Default)]
pub(crate) struct GcLists {
    pub tree: VecDeque<(u64, Garbage)>,
    pub snap: VecDeque<(u64, u64, Garbage)>,
    pub cleanup: VecDeque<Cleanup>,
}

impl GcLists {
    pub fn len(&self) -> usize {
        self.tree.len() + self.snap.len() + self.cleanup.len()
    }

    /// Free everything whose grace period has passed.
    ///
    /// # Safety
    /// `tree_safe` / `snap_safe` come from [`crate::silo::epoch::Epochs::safe`]
    /// of the domain every item was retired in.
    pub unsafe fn collect(&mut self, tree_safe: u64, snap_safe: u64, pool: &mut Pool) -> usize {
        let mut n = 0;
        while self.tree.front().is_some_and(|(r, _)| *r < tree_safe) {
            let (_, g) = self.tree.pop_front().expect("front");
            // SAFETY: every reader that could see it has unpinned.
            unsafe { g.free(Some(pool)) };
            n += 1;
        }
        // Labels are non-decreasing per queue in each component, but an
        // item may wait on either bound, so look a little past the front.
        while self
            .snap
            .front()
            .is_some_and(|(s, r, _)| *s < snap_safe && *r < tree_safe)
        {
            let (_, _, g) = self.snap.pop_front().expect("front");
            // SAFETY: no snapshot or regular reader can reach it.
            unsafe { g.free(Some(pool)) };
            n += 1;
        }
        n
    }

    /// Move everything from `other` into `self`, keeping labels.
    pub fn absorb(&mut self, other: &mut GcLists) {
        // Merge keeping each queue sorted by label.
        let mut tree: Vec<_> = self.tree.drain(..).chain(other.tree.drain(..)).collect();
        tree.sort_by_key(|(r, _)| *r);
        self.tree = tree.into();
        let mut snap: Vec<_> = self.snap.drain(..).chain(other.snap.drain(..)).collect();
        snap.sort_by_key(|(s, r, _)| (*s, *r));
        self.snap = snap.into();
        let mut cl: Vec<_> = self
            .cleanup
            .drain(..)
            .chain(other.cleanup.drain(..))
            .collect();
        cl.sort_by_key(|c| (c.snapshot, c.label));
        self.cleanup = cl.into();
    }

    /// Free everything now.
    ///
    /// # Safety
    /// No thread can reach any of it (the database is being dropped).
    pub unsafe fn free_all(&mut self) {
        for (_, g) in self.tree.drain(..) {
            // SAFETY: caller's contract.
            unsafe { g.free(None) };
        }
        for (_, _, g) in self.snap.drain(..) {
            // SAFETY: caller's contract.
            unsafe { g.free(None) };
        }
        // Cleanup records are still in their trees; the trees' owners free
        // them.
        self.cleanup.clear();
    }
}
