//! Atomics, swapped for loom's under the `loom` feature so the lock words can be
//! model-checked.

#[cfg(feature = "loom")]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

/// One step of a busy wait: a pause, or a yield once waiting has lasted
/// (2 cores are easily oversubscribed).
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    *spins += 1;
    #[cfg(feature = "loom")]
    loom::thread::yield_now();
    #[cfg(not(feature = "loom"))]
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Backoff after an abort: written once, in `granary-api`.
pub(crate) use granary_api::retry::Backoff;

/// Start fetching the cache line at `p` (a hint: never faults, even on a
/// bad or null address).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
