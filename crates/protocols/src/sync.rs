//! Atomics, swapped for loom's under `cfg(loom)` so the lock words can be
//! model-checked.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

/// One step of a busy wait: a pause, or a yield once waiting has lasted
/// (2 cores are easily oversubscribed).
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    *spins += 1;
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}
