//! Atomics, swapped for loom's under the `loom` feature so the TID lock word and
//! the epoch protocol can be model-checked.

#[cfg(feature = "loom")]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

#[inline]
pub(crate) fn spin() {
    #[cfg(feature = "loom")]
    loom::thread::yield_now();
    #[cfg(not(feature = "loom"))]
    std::hint::spin_loop();
}
