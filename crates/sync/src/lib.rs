//! granary-sync: the one loom shim. The index, Silo and the other designs
//! take their atomics, fences and spin-loop steps from here; under the
//! `loom` feature they are loom's, so a lock or version word written with
//! them can be model-checked (every crate's `loom_*` tests, run by
//! `.ci/run`). Without the feature they are `std`'s, at no cost.
//!
//! A crate whose models need more than atomics (threads, `Arc`, `model`)
//! takes them from loom directly, in its tests.

#[cfg(feature = "loom")]
pub use loom::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(feature = "loom"))]
pub use std::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// One step of a spin loop: a pause (under loom, a yield, so that the
/// model runs the thread being waited for).
#[inline]
pub fn spin() {
    #[cfg(feature = "loom")]
    loom::thread::yield_now();
    #[cfg(not(feature = "loom"))]
    std::hint::spin_loop();
}

/// One step of a busy wait that may last: a pause, or a yield to the
/// scheduler once waiting has lasted (`spins` counts the steps; 2 cores
/// are easily oversubscribed).
#[inline]
pub fn backoff(spins: &mut u32) {
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
