//! The atomics the designs use: `granary-sync`'s, which are loom's under
//! the `loom` feature so lock and version words can be model-checked.

pub(crate) use granary_sync::{
    backoff, fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    Ordering,
};

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
