//! Atomics used by the index, swapped for loom's under the `loom` feature so the
//! node-version protocol can be model-checked.

#[cfg(feature = "loom")]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// Back off inside a spin loop.
#[inline]
pub(crate) fn spin() {
    #[cfg(feature = "loom")]
    loom::thread::yield_now();
    #[cfg(not(feature = "loom"))]
    std::hint::spin_loop();
}
