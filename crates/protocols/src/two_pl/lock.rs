//! The 2PL lock word: one `u64` per row.
//!
//! Bit 63 set: held exclusive (no shared holders then). Otherwise the low
//! bits count the shared holders. Every transition is one compare-and-swap
//! (or, for releases, one atomic op), so a lock costs one cache-line
//! round trip when uncontended. Acquire on taking, Release on giving back:
//! what a holder reads or writes under the lock happens between the two.

use crate::sync::{backoff, AtomicU64, Ordering};

const X: u64 = 1 << 63;

/// How a transaction holds a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    Shared,
    Exclusive,
}

/// A reader-writer lock word that never blocks unless asked to.
#[derive(Debug, Default)]
pub(crate) struct RowLock(AtomicU64);

impl RowLock {
    /// A lock held exclusive by its creator (a row born in a transaction).
    pub fn new_exclusive() -> RowLock {
        RowLock(AtomicU64::new(X))
    }

    /// Take it shared, if no one holds it exclusive.
    #[inline]
    pub fn try_shared(&self) -> bool {
        let mut v = self.0.load(Ordering::Relaxed);
        loop {
            if v & X != 0 {
                return false;
            }
            // Acquire: taking the lock (module doc): what the last exclusive
            // holder did under it is seen.
            match self
                .0
                .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
    }

    /// Take it exclusive, if no one holds it at all.
    #[inline]
    pub fn try_exclusive(&self) -> bool {
        // Acquire: taking the lock exclusive: what every holder did before its
        // Release is seen.
        self.0
            .compare_exchange(0, X, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Trade the caller's shared hold for an exclusive one, if it is the
    /// only holder.
    #[inline]
    pub fn try_upgrade(&self) -> bool {
        // Acquire: the upgrade takes the lock exclusive, as `try_exclusive`.
        self.0
            .compare_exchange(1, X, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    pub fn try_lock(&self, m: Mode) -> bool {
        match m {
            Mode::Shared => self.try_shared(),
            Mode::Exclusive => self.try_exclusive(),
        }
    }

    /// Wait until it can be taken in mode `m`. Deadlock-free only when
    /// every waiting transaction takes its locks in one global order.
    pub fn lock(&self, m: Mode) {
        let mut spins = 0;
        while !self.try_lock(m) {
            backoff(&mut spins);
        }
    }

    /// Give back a hold in mode `m`.
    #[inline]
    pub fn unlock(&self, m: Mode) {
        match m {
            // Release (both arms): giving the lock back publishes what we did
            // under it to its next taker (Acquire).
            // While it is exclusive, no one else changes the word.
            Mode::Exclusive => self.0.store(0, Ordering::Release),
            Mode::Shared => {
                self.0.fetch_sub(1, Ordering::Release);
            }
        }
    }

    #[cfg(all(test, not(feature = "loom")))]
    pub fn raw(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn transitions() {
        let l = RowLock::default();
        assert!(l.try_shared() && l.try_shared());
        assert!(!l.try_exclusive(), "readers hold it");
        assert!(!l.try_upgrade(), "two readers: no upgrade");
        l.unlock(Mode::Shared);
        assert!(l.try_upgrade(), "the only reader upgrades");
        assert!(!l.try_shared() && !l.try_exclusive());
        l.unlock(Mode::Exclusive);
        assert_eq!(l.raw(), 0);
        let n = RowLock::new_exclusive();
        assert!(!n.try_shared());
        n.unlock(Mode::Exclusive);
        assert!(n.try_exclusive());
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    /// A writer adds one under an exclusive lock taken by blocking; a
    /// second adds one if it can upgrade its shared hold, and otherwise
    /// checks that the value did not change under that hold; a blocking
    /// reader runs alongside. No update is lost.
    #[test]
    fn loom_exclusive_excludes() {
        // Blocking acquisition spins; bounding preemptions keeps the
        // model finite (as the index's loom tests do).
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b.check(|| {
            let l = Arc::new((RowLock::default(), UnsafeCell::new(0u32)));
            let a = {
                let l = l.clone();
                loom::thread::spawn(move || {
                    l.0.lock(Mode::Exclusive);
                    // SAFETY: written under the exclusive hold.
                    l.1.with_mut(|p| unsafe { *p += 1 });
                    l.0.unlock(Mode::Exclusive);
                })
            };
            let b = {
                let l = l.clone();
                loom::thread::spawn(move || {
                    if !l.0.try_shared() {
                        return 0;
                    }
                    // SAFETY: (loom cell) read under a shared hold.
                    let first = l.1.with(|p| unsafe { *p });
                    if l.0.try_upgrade() {
                        // SAFETY: written under the exclusive hold.
                        l.1.with_mut(|p| unsafe { *p += 1 });
                        l.0.unlock(Mode::Exclusive);
                        return 1;
                    }
                    // SAFETY: read under a shared hold.
                    let again = l.1.with(|p| unsafe { *p });
                    assert_eq!(first, again, "changed under a shared lock");
                    l.0.unlock(Mode::Shared);
                    0
                })
            };
            l.0.lock(Mode::Shared);
            // SAFETY: read under a shared hold.
            let seen = l.1.with(|p| unsafe { *p });
            assert!(seen <= 2);
            l.0.unlock(Mode::Shared);
            a.join().unwrap();
            let b_wrote = b.join().unwrap();
            // SAFETY: every other thread has finished.
            let end = l.1.with(|p| unsafe { *p });
            assert_eq!(end, 1 + b_wrote, "an update was lost");
        });
    }

    /// No-wait acquisition never blocks: two transactions each holding one
    /// row and trying the other's both fail or one succeeds, and both
    /// finish (there is no deadlock to wait in).
    #[test]
    fn loom_no_wait_cannot_deadlock() {
        loom::model(|| {
            let rows = Arc::new([RowLock::default(), RowLock::default()]);
            let hs: Vec<_> = (0..2)
                .map(|i| {
                    let rows = rows.clone();
                    loom::thread::spawn(move || {
                        if !rows[i].try_exclusive() {
                            return false;
                        }
                        let got = rows[1 - i].try_exclusive();
                        if got {
                            rows[1 - i].unlock(Mode::Exclusive);
                        }
                        rows[i].unlock(Mode::Exclusive);
                        got
                    })
                })
                .collect();
            let got: Vec<bool> = hs.into_iter().map(|h| h.join().unwrap()).collect();
            assert_eq!(rows[0].0.load(Ordering::Relaxed), 0);
            assert_eq!(rows[1].0.load(Ordering::Relaxed), 0);
            let _ = got;
        });
    }
}
