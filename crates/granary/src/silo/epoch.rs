//! Silo's epochs (§4.1, §4.8, §4.9).
//!
//! One background thread advances the global epoch `E` every
//! `epoch_interval` and publishes the global snapshot epoch
//! `SE = snap(E − k)`. Each worker publishes, in its own cache-padded
//! slot, the local epoch `e_w` it pinned at the start of its current
//! transaction (or "inactive" between transactions) and its local snapshot
//! epoch `se_w`. The advancer never lets `E − e_w` exceed 1: it skips a
//! tick while an active worker still sits in an older epoch.
//!
//! From the slots it derives two *safe* bounds:
//! * `tree_safe = min(E, active e_w)`: memory unlinked while the global
//!   epoch was `r` (tree nodes' keys, superseded records) is freed once
//!   `r < tree_safe` — every transaction that could have seen it has ended.
//!   (Silo's "reclamation epoch ≤ min e_w − 1".)
//! * `snap_safe = min(SE, active se_w)`: a snapshot version registered at
//!   `snap(e)` is freed once `snap(e) < snap_safe`; absent records are
//!   unhooked from the tree under the same rule.
//!
//! Memory ordering: pinning stores `e_w`, issues a `SeqCst` fence and
//! re-reads `E`; the advancer stores `E`/`SE`, issues a `SeqCst` fence and
//! scans the slots. Two SeqCst fences forbid the store-buffering outcome, so
//! either the advancer sees the pin or the pinning worker sees the new
//! epoch. (Fences rather than SeqCst accesses, because loom models fences
//! exactly.)

use crossbeam_utils::CachePadded;

use crate::silo::sync::{fence, AtomicBool, AtomicU64, Ordering};
use crate::silo::tid::{snap, SNAPSHOT_K};

/// Local-epoch value of a worker between transactions.
const INACTIVE: u64 = u64::MAX;
/// "Never" for the version-copy window bounds.
const NEVER: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct Slot {
    in_use: AtomicBool,
    /// `e_w`, or `INACTIVE`.
    local: AtomicU64,
    /// `se_w`.
    snap: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct Epochs {
    global: CachePadded<AtomicU64>,
    snap_global: CachePadded<AtomicU64>,
    tree_safe: CachePadded<AtomicU64>,
    snap_safe: CachePadded<AtomicU64>,
    slots: Box<[CachePadded<Slot>]>,
    /// Ticks skipped because a worker lagged (diagnostics).
    pub delayed_ticks: AtomicU64,
    /// Old versions are copied by writes committing in epochs
    /// `[copy_from, copy_until)` (see `copying`). Written only by the
    /// advancer, before it publishes the epoch they refer to.
    copy_from: CachePadded<AtomicU64>,
    copy_until: AtomicU64,
    /// The last epoch a snapshot transaction asked for versions in
    /// (on-demand mode only).
    demand: CachePadded<AtomicU64>,
    /// `Some(idle_epochs)`: copy only while snapshots are in use, stopping
    /// after that many epochs without a request. `None`: always copy.
    on_demand: Option<u64>,
}

impl Epochs {
    /// `on_demand`: see the field of the same name.
    pub fn new(max_workers: usize, on_demand: Option<u64>) -> Epochs {
        Epochs {
            copy_from: CachePadded::new(AtomicU64::new(if on_demand.is_some() {
                NEVER
            } else {
                0
            })),
            copy_until: AtomicU64::new(NEVER),
            demand: CachePadded::new(AtomicU64::new(0)),
            on_demand,
            // Epoch 0 is reserved for insert placeholders (TID 0).
            global: CachePadded::new(AtomicU64::new(1)),
            snap_global: CachePadded::new(AtomicU64::new(0)),
            tree_safe: CachePadded::new(AtomicU64::new(0)),
            snap_safe: CachePadded::new(AtomicU64::new(0)),
            slots: (0..max_workers)
                .map(|_| {
                    CachePadded::new(Slot {
                        in_use: AtomicBool::new(false),
                        local: AtomicU64::new(INACTIVE),
                        snap: AtomicU64::new(0),
                    })
                })
                .collect(),
            delayed_ticks: AtomicU64::new(0),
        }
    }

    /// The global epoch `E`.
    #[inline]
    pub fn global(&self) -> u64 {
        // Acquire: pairs with the advancer's store; the ordering that matters
        // comes from the SeqCst fences around it (module docs).
        self.global.load(Ordering::Acquire)
    }

    /// Move `E` up to at least `e` (recovery, before any worker commits).
    pub fn raise_global(&self, e: u64) {
        self.global.fetch_max(e, Ordering::AcqRel);
    }

    /// The global snapshot epoch `SE`.
    pub fn snapshot(&self) -> u64 {
        self.snap_global.load(Ordering::Acquire)
    }

    /// `(tree_safe, snap_safe)`: garbage labelled strictly below may go.
    #[inline]
    pub fn safe(&self) -> (u64, u64) {
        // Acquire: pairs with the Release stores in `advance`; labels that
        // pass were retired before the scan that produced the bound.
        (
            self.tree_safe.load(Ordering::Acquire),
            self.snap_safe.load(Ordering::Acquire),
        )
    }

    /// Claim a free slot for a new worker.
    pub fn register(&self) -> Option<usize> {
        self.slots.iter().position(|s| {
            // Acquire/Release: the slot's previous owner is done with it.
            s.in_use
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    pub fn unregister(&self, slot: usize) {
        let s = &self.slots[slot];
        // Release: our last reads happen before anyone sees us leave.
        s.local.store(INACTIVE, Ordering::Release);
        // Release: pairs with the AcqRel claim in `register`.
        s.in_use.store(false, Ordering::Release);
    }

    /// Enter a transaction: publish `e_w = E` and `se_w = SE`. Returns
    /// `(e_w, se_w)`.
    #[inline]
    pub fn pin(&self, slot: usize) -> (u64, u64) {
        let s = &self.slots[slot];
        let mut e = self.global();
        loop {
            s.local.store(e, Ordering::Relaxed);
            // SeqCst fence: pairs with the one in `advance` — either its slot
            // scan sees this pin, or this re-load sees its epoch.
            fence(Ordering::SeqCst);
            let again = self.global();
            if again == e {
                break;
            }
            e = again;
        }
        // No second fence for se_w: this slot is already visibly active, so
        // an advancer that misses this store reads our previous se_w, which
        // is ≤ this one (SE only grows) — conservative. One that missed the
        // pin entirely published its SE before its fence, so the load below
        // sees it (first fence's argument).
        let se = self.snapshot();
        s.snap.store(se, Ordering::Relaxed);
        (e, se)
    }

    /// Refresh a long-running worker's local epoch without ending its
    /// transaction (Silo §4.1). Only safe between operations that hold no
    /// pointers into shared memory.
    #[inline]
    pub fn unpin(&self, slot: usize) {
        // Release: our reads of shared memory happen before the advancer (or
        // a reclaimer) sees us leave.
        self.slots[slot].local.store(INACTIVE, Ordering::Release);
    }

    /// Must a write committing in epoch `e` keep the old version it
    /// overwrites when it crosses a snapshot boundary (§4.9)? Call after
    /// reading `E` at the serialization point.
    #[inline]
    pub fn copying(&self, e: u64) -> bool {
        // Acquire: pairs with the advancer's Release stores; it stores the
        // window before the epoch it applies to, so we see at least that.
        let from = self.copy_from.load(Ordering::Acquire);
        from <= e && e < self.copy_until.load(Ordering::Acquire)
    }

    /// Can a snapshot transaction pinned at `(e, se)` read consistent
    /// versions for its whole life? It reads versions of epochs `< se`;
    /// every write that could supersede one commits in an epoch in
    /// `[se, e + 1]` (E − e_w ≤ 1 bounds the rest of its life), so that
    /// range must be in the copy window. If not, records the demand; the
    /// caller unpins and retries.
    pub fn snapshot_ready(&self, e: u64, se: u64) -> bool {
        if self.on_demand.is_some() && self.demand.load(Ordering::Relaxed) < e {
            self.demand.store(e, Ordering::Relaxed);
        }
        let from = self.copy_from.load(Ordering::Acquire);
        from <= se && self.copy_until.load(Ordering::Acquire) > e + 1
    }

    /// Open or close the copy window at the tick that publishes epoch
    /// `e + 1`. Every active worker is in epoch `e` or later here (the tick
    /// is not delayed), which is what makes the transitions safe:
    /// * closing sets `until = e + 2`: readers pinned at `e` or earlier keep
    ///   every write of their lifetime (≤ e + 1) copied; later ones wait.
    /// * reopening while still open (`until > e + 1`) just lifts `until`;
    ///   reopening when fully closed starts at `from = e + 1` — no ready
    ///   reader can still be active then.
    fn steer_copies(&self, e: u64) {
        let Some(idle) = self.on_demand else { return };
        let demand = self.demand.load(Ordering::Relaxed);
        let wanted = demand != 0 && demand + idle >= e;
        let from = self.copy_from.load(Ordering::Relaxed);
        let until = self.copy_until.load(Ordering::Relaxed);
        let open = from != NEVER && until == NEVER;
        if wanted && !open {
            if from != NEVER && until > e + 1 {
                self.copy_until.store(NEVER, Ordering::Release);
            } else {
                // Release: pairs with the Acquire loads in `copying` and
                // `snapshot_ready`. `until` first, so a reader that sees the
                // new `from` sees the open window.
                self.copy_until.store(NEVER, Ordering::Release);
                self.copy_from.store(e + 1, Ordering::Release);
            }
        } else if !wanted && open {
            // Release: as above.
            self.copy_until.store(e + 2, Ordering::Release);
        }
    }

    /// One tick of the epoch-advancing thread.
    pub fn advance(&self) {
        let e = self.global();
        fence(Ordering::SeqCst);
        let lagging = self.slots.iter().any(|s| {
            let l = s.local.load(Ordering::Relaxed);
            l != INACTIVE && l < e
        });
        let e = if lagging {
            // E − e_w ≤ 1 must hold: wait for the laggard (§4.1).
            self.delayed_ticks.fetch_add(1, Ordering::Relaxed);
            e
        } else {
            self.steer_copies(e);
            // Release: pairs with the Acquire in `global` (and publishes the
            // copy window set just before). A CAS, not a store: recovery may
            // have raised E meanwhile (`raise_global`), and E never goes
            // back.
            match self
                .global
                .compare_exchange(e, e + 1, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => e + 1,
                Err(now) => now,
            }
        };
        let se = if e >= SNAPSHOT_K {
            snap(e - SNAPSHOT_K)
        } else {
            0
        };
        if se > self.snapshot() {
            // Release: pairs with the Acquire in `snapshot`.
            self.snap_global.store(se, Ordering::Release);
        }
        // SeqCst fence: pairs with the fences in `pin` (module docs).
        fence(Ordering::SeqCst);
        let mut tree_safe = e;
        let mut snap_safe = se;
        for s in self.slots.iter() {
            let l = s.local.load(Ordering::Acquire);
            if l != INACTIVE {
                tree_safe = tree_safe.min(l);
                snap_safe = snap_safe.min(s.snap.load(Ordering::Relaxed));
            }
        }
        // Release: pairs with the Acquire loads in `safe`.
        self.tree_safe.fetch_max(tree_safe, Ordering::Release);
        self.snap_safe.fetch_max(snap_safe, Ordering::Release);
    }
}

/// Something the epoch thread ticks; it stops when the owner is dropped.
#[cfg_attr(feature = "loom", allow(dead_code))]
pub(crate) trait Tick: Send + Sync + 'static {
    fn tick(&self);
}

/// Start the epoch-advancing thread. It holds only a weak reference, and
/// exits at its next wake-up after the database is dropped.
#[cfg(not(feature = "loom"))]
pub(crate) fn spawn_advancer<T: Tick>(
    owner: std::sync::Weak<T>,
    interval: std::time::Duration,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("granary-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(interval);
            match owner.upgrade() {
                Some(o) => o.tick(),
                None => return,
            }
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lagging_worker_holds_epoch() {
        let ep = Epochs::new(4, None);
        let a = ep.register().unwrap();
        let (e, _) = ep.pin(a);
        ep.advance();
        assert_eq!(ep.global(), e + 1);
        // `a` is still in epoch e: E − e_w = 1, so E may not move again.
        ep.advance();
        assert_eq!(ep.global(), e + 1);
        assert_eq!(ep.safe().0, e);
        ep.unpin(a);
        ep.advance();
        assert_eq!(ep.global(), e + 2);
        assert_eq!(ep.safe().0, e + 2);
    }

    #[test]
    fn copy_window_opens_on_demand_and_closes_when_idle() {
        let ep = Epochs::new(2, Some(5));
        let a = ep.register().unwrap();
        for _ in 0..30 {
            ep.advance();
        }
        assert!(!ep.copying(ep.global()), "no demand: no copies");
        // A snapshot asks; it is not ready until SE reaches the window.
        let mut waited = 0;
        loop {
            let (e, se) = ep.pin(a);
            if ep.snapshot_ready(e, se) {
                assert!(ep.copying(e) && ep.copying(e + 1));
                ep.unpin(a);
                break;
            }
            ep.unpin(a);
            ep.advance();
            waited += 1;
            assert!(waited < 200, "snapshot never became ready");
        }
        // No more demand: the window closes after the idle period.
        for _ in 0..20 {
            ep.advance();
        }
        assert!(!ep.copying(ep.global()));
    }

    #[test]
    fn snapshot_epoch_lags_by_k() {
        let ep = Epochs::new(1, None);
        for _ in 0..60 {
            ep.advance();
        }
        let e = ep.global();
        assert_eq!(ep.snapshot(), snap(e - SNAPSHOT_K));
        assert!(ep.snapshot() + SNAPSHOT_K <= e);
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A worker pinning concurrently with an advance ends up with
    /// E − e_w ≤ 1, and tree_safe never passes a pinned epoch.
    #[test]
    fn pin_vs_advance() {
        loom::model(|| {
            let ep = Arc::new(Epochs::new(2, None));
            let slot = ep.register().unwrap();
            let adv = {
                let ep = ep.clone();
                loom::thread::spawn(move || {
                    ep.advance();
                    ep.advance();
                })
            };
            let (e, _) = ep.pin(slot);
            let g = ep.global();
            assert!(g - e <= 1, "E={g} e_w={e}");
            let (tree_safe, _) = ep.safe();
            assert!(
                tree_safe <= e,
                "tree_safe {tree_safe} passed pinned epoch {e}"
            );
            adv.join().unwrap();
            assert!(ep.safe().0 <= e);
            ep.unpin(slot);
        });
    }
}
