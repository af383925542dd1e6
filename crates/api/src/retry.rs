//! Retrying a transaction that conflicted, written once for every design:
//! a bound on the attempts, and a randomized exponential backoff between
//! them.

use crate::{AbortReason, Error};

/// How many conflicting attempts in a row a retry loop makes before it
/// gives up with [`Error::RetriesExhausted`] (Silo's default
/// `max_retries` too). A conflict that keeps coming back that long is a
/// bug, or a workload that starves one transaction.
pub const MAX_ATTEMPTS: u32 = 100_000;

/// Randomized exponential backoff after an abort, for designs that abort
/// on conflict instead of waiting (no-wait 2PL, first-updater-wins MVCC):
/// retrying at once would meet the same holder again.
#[derive(Debug)]
pub struct Backoff {
    /// Consecutive aborts (capped).
    aborts: u32,
    rng: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

impl Backoff {
    /// A backoff with a random stream of its own (runners must not pause
    /// in lockstep).
    pub fn new() -> Backoff {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        // Relaxed: only distinctness matters.
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

/// Run `attempt` until it commits: each `Ok(Err(reason))` is a conflict,
/// retried after a backoff, at most `max` times in a row.
///
/// # Errors
/// The first failure of an attempt; [`Error::RetriesExhausted`] (with the
/// last conflict's reason) when `max` attempts in a row conflicted.
pub fn until_committed<T>(
    max: u32,
    mut attempt: impl FnMut() -> Result<Result<T, AbortReason>, Error>,
) -> Result<T, Error> {
    let mut backoff = Backoff::new();
    let mut attempts = 0;
    loop {
        match attempt()? {
            Ok(v) => return Ok(v),
            Err(last) => {
                attempts += 1;
                if attempts >= max.max(1) {
                    return Err(Error::RetriesExhausted { attempts, last });
                }
                backoff.after_abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_that_keeps_coming_back_gives_up() {
        let mut calls = 0;
        let r: Result<(), Error> = until_committed(50, || {
            calls += 1;
            Ok(Err(AbortReason::ReadLocked))
        });
        assert!(
            matches!(
                r,
                Err(Error::RetriesExhausted {
                    attempts: 50,
                    last: AbortReason::ReadLocked
                })
            ),
            "{r:?}"
        );
        assert_eq!(calls, 50);
    }

    #[test]
    fn a_commit_after_conflicts_is_returned_and_a_failure_is_not_retried() {
        let mut calls = 0;
        let r = until_committed(50, || {
            calls += 1;
            Ok(if calls < 3 {
                Err(AbortReason::ReadLocked)
            } else {
                Ok(calls)
            })
        });
        assert_eq!(r.ok(), Some(3));
        let mut calls = 0;
        let r: Result<(), Error> = until_committed(50, || {
            calls += 1;
            Err(Error::RolledBack)
        });
        assert!(matches!(r, Err(Error::RolledBack)));
        assert_eq!(calls, 1);
    }
}
