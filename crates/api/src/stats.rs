//! Counters every design keeps: commits, aborts by reason, failures, and
//! an optional cost breakdown; and the cheap clock the driver times every
//! transaction with.

use crate::error::{AbortReason, Error, TxError};

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

    /// Count one attempt by how its body ended, once the design has
    /// committed or rolled it back, and give it [`TxRunner::try_run`]'s
    /// shape: `Ok` a commit, a conflict its [`AbortReason`], a failure the
    /// error. Every design's runner counts through here (or
    /// [`Stats::count`]).
    ///
    /// # Errors
    /// The body's failure.
    ///
    /// [`TxRunner::try_run`]: crate::TxRunner::try_run
    pub fn record<T>(&mut self, r: Result<T, TxError>) -> Result<Result<T, AbortReason>, Error> {
        match r {
            Ok(v) => {
                self.commits += 1;
                Ok(Ok(v))
            }
            Err(TxError::Conflict(reason)) => {
                self.aborts[reason.index()] += 1;
                Ok(Err(reason))
            }
            Err(TxError::Failed(e)) => {
                self.failures += 1;
                Err(e)
            }
        }
    }

    /// Count one attempt already in [`TxRunner::try_run`]'s shape.
    ///
    /// [`TxRunner::try_run`]: crate::TxRunner::try_run
    pub fn count<T>(&mut self, r: &Result<Result<T, AbortReason>, Error>) {
        match r {
            Ok(Ok(_)) => self.commits += 1,
            Ok(Err(reason)) => self.aborts[reason.index()] += 1,
            Err(_) => self.failures += 1,
        }
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
/// collects it only while profiling is on ([`TxRunner::set_profiling`]).
///
/// The three parts are neutral, but only Silo is instrumented today: every
/// other design returns `None` from [`TxRunner::take_profile`], and the
/// command's `--breakdown` then reports their parts as not measured
/// rather than as zero.
///
/// [`TxRunner::set_profiling`]: crate::TxRunner::set_profiling
/// [`TxRunner::take_profile`]: crate::TxRunner::take_profile
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

/// Nanoseconds per [`ticks`] tick: measured once per process against the
/// monotonic clock (a 2 ms spin, on first use) on x86-64, where ticks are
/// the time-stamp counter; 1 elsewhere. Call it before timing starts, so
/// that the measurement does not fall inside a timed span.
pub fn ns_per_tick() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        use std::time::{Duration, Instant};
        static RATE: OnceLock<f64> = OnceLock::new();
        *RATE.get_or_init(|| {
            let (i0, t0) = (Instant::now(), ticks());
            while i0.elapsed() < Duration::from_millis(2) {
                std::hint::spin_loop();
            }
            let (ns, t1) = (i0.elapsed().as_nanos() as f64, ticks());
            // A counter that did not move (never seen) reads as 1 ns a tick.
            if t1 > t0 {
                ns / (t1 - t0) as f64
            } else {
                1.0
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        1.0
    }
}

/// The ticks in `d` (at least 1 for a nonzero `d`).
pub fn ticks_in(d: std::time::Duration) -> u64 {
    if d.is_zero() {
        return 0;
    }
    ((d.as_nanos() as f64 / ns_per_tick()).round() as u64).max(1)
}

/// A moment read from [`ticks`], for timing every transaction: one
/// `rdtsc` costs about 9 ns here, where `Instant::now` costs about 23 ns
/// (and the two reads and the subtraction of a timed span ~45 ns, some 5%
/// of a short transaction). The counter is synchronized across cores
/// wherever the kernel uses it as its clock; a span that appears to run
/// backwards reads as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u64);

impl Stamp {
    /// Now.
    #[inline]
    pub fn now() -> Stamp {
        Stamp(ticks())
    }

    /// Nanoseconds from `self` to `later` (0 if `later` is earlier).
    #[inline]
    pub fn ns_until(self, later: Stamp) -> u64 {
        (later.0.saturating_sub(self.0) as f64 * ns_per_tick()) as u64
    }

    /// Nanoseconds since `self`.
    #[inline]
    pub fn elapsed_ns(self) -> u64 {
        self.ns_until(Stamp::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_stamp_times_what_the_clock_times() {
        let (i, s) = (Instant::now(), Stamp::now());
        std::thread::sleep(Duration::from_millis(20));
        let (ns, clock) = (s.elapsed_ns(), i.elapsed().as_nanos() as u64);
        // The stamp was read after the instant: it times a little less,
        // but never less than the sleep (the rate is off by ~10^-5).
        assert!(ns >= 20_000_000 * 999 / 1000, "{ns} ns");
        assert!(ns <= clock + clock / 1000, "{ns} ns, clock {clock} ns");
        assert_eq!(s.ns_until(s), 0);
        assert_eq!(Stamp::now().ns_until(s), 0, "backwards reads as 0");
    }

    #[test]
    fn ticks_in_a_duration_round_trip() {
        assert_eq!(ticks_in(Duration::ZERO), 0);
        assert!(ticks_in(Duration::from_nanos(1)) >= 1);
        let t = ticks_in(Duration::from_millis(3));
        let back = t as f64 * ns_per_tick();
        assert!((back - 3e6).abs() < 3e6 * 1e-6 + 1.0, "{back} ns");
    }
}
