//! The Serial Safety Net on the store: the stamps of ERMIA's SSN (Wang,
//! Johnson, Fekete and Pandis, "Efficiently making (almost) any
//! concurrency control mechanism serializable", VLDB Journal 2017, §3),
//! for [`crate::ermia`].
//!
//! Each committed transaction T has a commit stamp c(T) (its end
//! timestamp), η(T), the latest commit stamp of a transaction that must
//! precede it, and π(T), the earliest π of a transaction that must follow
//! it (at most c(T)). Each version V keeps its creator's c (its begin),
//! η(V) (`pstamp`: the latest c of its committed readers and creator) and
//! π(V) (`sstamp`: π of the transaction that overwrote it). T may commit
//! only if π(T) > η(T) (§3.2, the exclusion window): otherwise a
//! dependency cycle could close through it.
//!
//! Everything here runs under the store's commit latch
//! ([`Certifier::SERIAL_COMMIT`]): each commit sees every earlier one whole
//! and in end-timestamp order, so the stamps are exact as in the paper's
//! serial description (its Algorithm 1), and they are read and written
//! with Relaxed loads and stores (the latch orders them). ERMIA commits
//! in parallel instead (§4: per-version reader bitmaps, waiting for
//! in-flight committers); ARCHITECTURE.md says what the latch costs.

use super::*;

impl<C: Certifier> Txn<'_, C> {
    /// SSN's commit test (§3.2) for this transaction ending at `e`:
    /// π(T) if π(T) > η(T), else [`AbortReason::Exclusion`].
    ///
    /// Reads and writes give η and π as the paper's read and write rules
    /// do, computed at commit from the stamps as they are then (stamps
    /// only become stricter, so this is the paper's test on the latest
    /// values). Three cases the versions cannot carry are handled
    /// conservatively, as Hekaton's validation handles them: a key read
    /// as absent that a committed transaction has written since
    /// ([`AbortReason::ReadValidation`]: the writer's π is on no
    /// version), a deletion whose key has left the index, and a leaf a
    /// scan or an absent read saw that changed ([`AbortReason::NodeValidation`],
    /// the phantom check ERMIA also takes from Silo).
    pub fn safety_net(&self, e: u64) -> Result<u64, AbortReason> {
        self.validate_nodes()?;
        // π(T) starts at c(T) (§3.2: "π(T) ≤ c(T)").
        let (mut eta, mut pi) = (0u64, e);
        for &(chain, seen) in &self.st.reads {
            if seen == 0 {
                // SAFETY: reached while pinned, and still pinned.
                let chain = unsafe { &*(chain as *const Chain) };
                match self.visible_ignoring_own(chain, e) {
                    Some(v) if v.is_null() => continue,
                    _ => return Err(AbortReason::ReadValidation),
                }
            }
            // SAFETY: a version we read is alive while we are pinned.
            let v = unsafe { &*(seen as *const Version) };
            // Acquire: as every version field (module doc).
            let begin = v.begin.load(Ordering::Acquire);
            // Our own write; or a creator that aborted, whose dependency
            // aborts us after this test.
            if begin == self.me || begin >= DEAD {
                continue;
            }
            // Acquire: as every version field.
            if v.end.load(Ordering::Acquire) == DEAD {
                return Err(AbortReason::ReadValidation);
            }
            // w:r: the creator precedes us.
            eta = eta.max(begin);
            // r:w: whoever overwrote what we read follows us.
            pi = pi.min(v.sstamp.load(Ordering::Relaxed));
        }
        for &(_, _, old) in &self.st.writes {
            let readers = if old == 0 {
                // An insert: no version carries the stamp of those that
                // saw the key absent; the latest such commit stands in.
                self.db.absent_pstamp.load(Ordering::Relaxed)
            } else {
                // SAFETY: the version we overwrote, alive while pinned.
                unsafe { &*(old as *const Version) }
                    .pstamp
                    .load(Ordering::Relaxed)
            };
            // r:w and w:w: its readers and its creator precede us.
            eta = eta.max(readers);
        }
        if pi <= eta {
            return Err(AbortReason::Exclusion);
        }
        Ok(pi)
    }

    /// Leave this transaction's stamps, committing at `e` with π(T) = `pi`
    /// (Algorithm 1's post-commit): each version it read gets η(V) ≥ e,
    /// each version it overwrote π(V) = `pi`, each version it created
    /// η(V) = e; and if it saw a key absent, the store's absent stamp
    /// rises to `e`.
    pub fn leave_stamps(&self, e: u64, pi: u64) {
        let mut saw_absent = !self.st.nodes.is_empty();
        for &(_, seen) in &self.st.reads {
            if seen == 0 {
                saw_absent = true;
                continue;
            }
            // SAFETY: a version we read is alive while we are pinned.
            let v = unsafe { &*(seen as *const Version) };
            // Acquire: as every version field (module doc).
            if v.begin.load(Ordering::Acquire) != self.me {
                v.pstamp.fetch_max(e, Ordering::Relaxed);
            }
        }
        for &(_, new, old) in &self.st.writes {
            // SAFETY: our version, and the one it superseded: alive while
            // pinned.
            unsafe { &*(new as *const Version) }
                .pstamp
                .store(e, Ordering::Relaxed);
            if old != 0 {
                // SAFETY: as above.
                unsafe { &*(old as *const Version) }
                    .sstamp
                    .store(pi, Ordering::Relaxed);
            }
        }
        if saw_absent {
            self.db.absent_pstamp.fetch_max(e, Ordering::Relaxed);
        }
    }
}
