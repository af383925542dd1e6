//! Shared reclamation for the designs of this crate: crossbeam's epochs.
//!
//! A worker pins for the length of a transaction; memory a transaction
//! unlinks (a removed row, the heap copy of a removed long key) is freed
//! once every thread pinned before the unlink has unpinned. Silo keeps its
//! own epochs (they also number its transactions, Silo §4.1); the designs
//! here need only reclamation, so they share crossbeam's.

use crossbeam_epoch::Guard;
use granary_index::Retired;

/// A pinned crossbeam guard, as the index's [`granary_index::Guard`].
pub(crate) struct Pin<'g>(pub &'g Guard);

// SAFETY: crossbeam runs a deferred function only after every thread that
// was pinned when it was deferred has unpinned, which is the contract of
// `granary_index::Guard::retire`; every guard used on one tree comes from
// its database's one collector.
unsafe impl granary_index::Guard for Pin<'_> {
    fn retire(&mut self, garbage: Retired) {
        // SAFETY: deferred past the grace period (above).
        self.0.defer(move || unsafe { garbage.reclaim() });
    }
}

/// Free `p` (a `Box<T>` turned raw) once no pinned thread can see it.
///
/// # Safety
/// `p` came from `Box::into_raw`, is unreachable for threads that pin
/// from now on, and is retired once.
pub(crate) unsafe fn retire_box<T: Send + 'static>(g: &Guard, p: *mut T) {
    let p = p as usize;
    // SAFETY: the caller's contract; crossbeam delays the drop past the
    // grace period.
    unsafe {
        g.defer_unchecked(move || drop(Box::from_raw(p as *mut T)));
    }
}

/// Free every object in `ps` (addresses) with `free` once no pinned
/// thread can see them: one deferred call for the lot. crossbeam runs a
/// bounded number of deferred calls each time a thread pins, so a design
/// that retires a handful of objects per transaction, one call each,
/// outruns it and its garbage grows without bound.
///
/// # Safety
/// Each address is unreachable for threads that pin from now on, retired
/// once, and `free` is its destructor.
pub(crate) unsafe fn retire_all(g: &Guard, ps: Vec<usize>, free: unsafe fn(usize)) {
    if ps.is_empty() {
        return;
    }
    // SAFETY: the caller's contract, for each; delayed past the grace period.
    unsafe {
        g.defer_unchecked(move || {
            for p in ps {
                free(p);
            }
        });
    }
}
