//! BOHM's watermarks and the snapshot readers' pins (§3.3.2, Condition 3,
//! and ARCHITECTURE.md's snapshot reads), written over any 64-bit word so
//! that loom can model-check the protocol with its own atomics.
//!
//! Execution threads publish `finished` (the batch they have finished,
//! +1) after raising `done_ts` (the timestamps below which they have
//! produced everything). Garbage collection may cut versions superseded
//! below [`gc_watermark`]: the least `finished`, held back by every pin.
//! A snapshot reader [`pin`]s a slot before it reads its bound, so no cut
//! passes the versions it needs while it reads.

use std::ops::Deref;

use crate::sync::{fence, AtomicU64, Ordering};

/// A 64-bit word of one of the watermark arrays, and the fence between
/// a store to one and loads of others.
///
/// Every access is SeqCst, and the store-then-load steps also have SeqCst
/// fences: under the SeqCst accesses alone the protocol holds, but loom
/// models SeqCst accesses as acquire/release and fences exactly, so the
/// fences are what its model checks (as in granary's epochs).
pub(super) trait Word {
    fn get(&self) -> u64;
    fn set(&self, v: u64);
    fn fence();
}

impl Word for AtomicU64 {
    fn get(&self) -> u64 {
        // SeqCst: as every watermark access (see [`Word`]): the pin
        // protocol orders stores to some words before loads of others.
        self.load(Ordering::SeqCst)
    }
    fn set(&self, v: u64) {
        // SeqCst: as every watermark access: a store to one word is ordered
        // before later loads of others.
        self.store(v, Ordering::SeqCst)
    }
    fn fence() {
        // SeqCst: the fence loom checks the store-then-load steps with (see
        // [`Word`]).
        fence(Ordering::SeqCst)
    }
}

/// A pin slot no reader holds.
pub(super) const UNPINNED: u64 = u64::MAX;

/// §3.3.2's low watermark: every batch below it has been finished by
/// every execution thread.
pub(super) fn low_watermark<W: Word>(finished: &[impl Deref<Target = W>]) -> u64 {
    finished.iter().map(|f| f.get()).min().unwrap_or(0)
}

/// The batch below which versions may be cut: the low watermark, held
/// back by the readers' pins.
pub(super) fn gc_watermark<W: Word>(
    finished: &[impl Deref<Target = W>],
    pins: &[impl Deref<Target = W>],
) -> u64 {
    let low = low_watermark(finished);
    // Pairs with the fence in `pin`: either this reads a reader's pin, or
    // the reader reads every `done_ts` raised before the `finished` read
    // above.
    W::fence();
    pins.iter().map(|p| p.get()).fold(low, u64::min)
}

/// Pin `slot` for a snapshot read and return its bound: the least
/// `done_ts`, below which every version is produced and none is cut
/// while the pin holds. Unpin with [`unpin`].
pub(super) fn pin<W: Word>(
    slot: &W,
    finished: &[impl Deref<Target = W>],
    done_ts: &[impl Deref<Target = W>],
) -> u64 {
    // Hold every cut while we learn where it may stop: a collector that
    // read our slot before this store read `finished` before we do below,
    // so its watermark is at most ours.
    slot.set(0);
    W::fence();
    let low = low_watermark(finished);
    slot.set(low);
    W::fence();
    // Every execution thread raised its `done_ts` before it published a
    // batch at least `low`: the bound is at least batch `low`'s first
    // timestamp, so no version above the one we see at it is in a batch
    // below `low`, and nothing we read is cut.
    done_ts.iter().map(|d| d.get()).min().unwrap_or(0)
}

/// Release a slot [`pin`] took.
pub(super) fn unpin<W: Word>(slot: &W) {
    slot.set(UNPINNED);
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Timestamps per batch in the model: batch b holds [10b, 10b + 10).
    const TS: u64 = 10;

    struct Model {
        finished: [AtomicU64; 1],
        done_ts: [AtomicU64; 1],
        pins: [AtomicU64; 1],
        /// The highest watermark a collector has cut at.
        cut: AtomicU64,
    }

    /// An execution thread finishes batches 0 and 1 and a collector cuts
    /// twice, while a reader pins, reads its bound and reads: no cut may
    /// pass the batch of the reader's bound while it holds the pin (a
    /// version it needs would be gone).
    #[test]
    fn no_cut_passes_a_pinned_readers_bound() {
        loom::model(|| {
            let m = Arc::new(Model {
                finished: [AtomicU64::new(0)],
                done_ts: [AtomicU64::new(0)],
                pins: [AtomicU64::new(UNPINNED)],
                cut: AtomicU64::new(0),
            });
            let exec = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    for b in 0..2u64 {
                        // Raised before the batch is published.
                        m.done_ts[0].set((b + 1) * TS);
                        m.finished[0].set(b + 1);
                    }
                })
            };
            let gc = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    for _ in 0..2 {
                        let wm = gc_watermark(&m.finished.each_ref(), &m.pins.each_ref());
                        if wm > m.cut.get() {
                            m.cut.set(wm);
                        }
                    }
                })
            };
            let bound = pin(&m.pins[0], &m.finished.each_ref(), &m.done_ts.each_ref());
            // The reader reads below `bound`: versions of batch
            // (bound - 1) / TS and older must still be there.
            let cut = m.cut.get();
            assert!(
                cut * TS <= bound,
                "cut at batch {cut} while a reader reads below timestamp {bound}"
            );
            unpin(&m.pins[0]);
            exec.join().unwrap();
            gc.join().unwrap();
        });
    }
}
