//! Counters every design keeps: commits, aborts by reason, failures, and
//! an optional cost breakdown.

use crate::error::AbortReason;

/// A runner's counters (per worker thread, merged for reports).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Committed transactions (including read-only and snapshot ones).
    pub commits: u64,
    /// Conflict aborts, indexed like [`AbortReason::ALL`].
    pub aborts: [u64; AbortReason::ALL.len()],
    /// Transactions that ended with an error (including rollbacks).
    pub failures: u64,
}

impl Stats {
    /// Aborts for one reason.
    pub fn aborts_for(&self, r: AbortReason) -> u64 {
        self.aborts[r.index()]
    }

    /// All conflict aborts.
    pub fn total_aborts(&self) -> u64 {
        self.aborts.iter().sum()
    }

    /// Add another worker's counters.
    pub fn merge(&mut self, o: &Stats) {
        self.commits += o.commits;
        self.failures += o.failures;
        for (a, b) in self.aborts.iter_mut().zip(o.aborts) {
            *a += b;
        }
    }
}

/// Where a worker's transaction time went, in [`ticks`], for the cost
/// breakdown of the Silo performance study (its Fig. 2 and 4): index
/// operations, record access (copying values in and out), and concurrency
/// control / commit (the driver adds aborted work itself). A design
/// collects it only while profiling is on ([`TxRunner::set_profiling`]);
/// designs without instrumentation leave it empty.
///
/// [`TxRunner::set_profiling`]: crate::TxRunner::set_profiling
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// Tree lookups, inserts and scans' leaf walks.
    pub index: u64,
    /// Copying record values out (reads) and into the write buffer.
    pub record: u64,
    /// Commit: locking, validation, TID choice, installing, unlocking.
    pub commit: u64,
}

/// A cheap monotonic tick counter for [`Profile`]: the time-stamp counter
/// on x86-64, nanoseconds elsewhere. Only differences are meaningful.
#[inline]
#[allow(unsafe_code)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static BASE: OnceLock<std::time::Instant> = OnceLock::new();
        BASE.get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}
