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

/// Randomized exponential backoff after an abort, for designs that abort
/// on conflict instead of waiting (no-wait 2PL, first-updater-wins MVCC):
/// retrying at once would meet the same holder again.
pub(crate) struct Backoff {
    /// Consecutive aborts (capped).
    aborts: u32,
    rng: u64,
}

impl Backoff {
    /// A backoff with a random stream of its own (runners must not pause
    /// in lockstep).
    pub fn new() -> Backoff {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // splitmix64 of a per-runner number.
        let mut z = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Backoff {
            aborts: 0,
            rng: (z ^ (z >> 31)) | 1,
        }
    }

    /// Pause up to 2^min(consecutive aborts, 10) spins, chosen at random;
    /// yield the core once aborts keep coming.
    pub fn after_abort(&mut self) {
        self.aborts = (self.aborts + 1).min(10);
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        for _ in 0..self.rng & ((1u64 << self.aborts) - 1) {
            std::hint::spin_loop();
        }
        if self.aborts >= 8 {
            std::thread::yield_now();
        }
    }

    /// A commit ends the streak.
    pub fn reset(&mut self) {
        self.aborts = 0;
    }
}

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
