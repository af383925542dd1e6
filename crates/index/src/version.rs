//! The node version word: Masstree's `stable()` / `has_changed()` /
//! `lock()` / `unlock()` protocol over one `u64`.
//!
//! ```text
//!  63  62                                          1   0
//! +---+---------------------------------------------+---+
//! | D |               change counter                | L |
//! +---+---------------------------------------------+---+
//! ```
//!
//! `L` is the writer lock. `D` marks a node unlinked from its tree (an
//! emptied leaf, or an inner node left without children, freed after the
//! grace period): it never clears, and a version with it never validates,
//! so a reader that reached the node through a stale pointer restarts.
//! Every unlock that follows a change to the node's key set or structure
//! adds 2 (one counter step), so a reader that saw an unlocked version
//! `v`, read the node, and then sees `v` again knows that what it read was
//! a consistent state of the node (a seqlock). Readers never store to the
//! word.

use crate::sync::{fence, spin, AtomicU64, Ordering};

const LOCK: u64 = 1;
const STEP: u64 = 2;
const DELETED: u64 = 1 << 63;
const _: () = assert!(LOCK & STEP == 0 && STEP == LOCK << 1);

/// Whether version `v` (from [`NodeVersion::stable`] or
/// [`NodeVersion::load`]) is that of an unlinked node.
#[inline(always)]
pub fn is_deleted(v: u64) -> bool {
    v & DELETED != 0
}

/// A node's version word (see the module docs for the bit layout).
#[derive(Debug)]
pub struct NodeVersion(AtomicU64);

impl Default for NodeVersion {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeVersion {
    /// A fresh, unlocked version.
    pub fn new() -> Self {
        NodeVersion(AtomicU64::new(0))
    }

    /// A fresh version that starts out locked by its creator.
    pub fn new_locked() -> Self {
        NodeVersion(AtomicU64::new(LOCK))
    }

    /// Spin until the node is unlocked and return its version.
    #[inline]
    pub fn stable(&self) -> u64 {
        loop {
            // Acquire: pairs with the Release store in `unlock`, so the
            // reader sees everything the last writer wrote.
            let v = self.0.load(Ordering::Acquire);
            if v & LOCK == 0 {
                return v;
            }
            spin();
        }
    }

    /// The current word, locked or not.
    #[inline]
    pub fn load(&self) -> u64 {
        // Acquire: pairs with the Release store in `unlock`.
        self.0.load(Ordering::Acquire)
    }

    /// True if the node changed (or is locked) since `stable()` returned `v`,
    /// or `v` is the version of an unlinked node (what was read there is
    /// no longer the tree's). Call it after the optimistic reads it
    /// protects.
    #[inline]
    pub fn has_changed(&self, v: u64) -> bool {
        // Acquire fence: orders the (Relaxed) reads of node fields before
        // this re-load; pairs with the Release fence in `try_lock`, so if any
        // of those reads saw a writer's store, this load sees its lock.
        fence(Ordering::Acquire);
        self.0.load(Ordering::Relaxed) != v || is_deleted(v)
    }

    /// Lock the node if it is still at version `v` (an upgrade from an
    /// optimistic read). Returns false if the node changed or is unlinked.
    #[inline]
    pub fn try_lock(&self, v: u64) -> bool {
        debug_assert!(v & LOCK == 0);
        if is_deleted(v) {
            return false;
        }
        // Acquire: pairs with the Release store in `unlock` of the previous
        // writer, so we see its writes before modifying the node.
        let ok = self
            .0
            .compare_exchange(v, v | LOCK, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if ok {
            // Release fence: our following (Relaxed) field stores cannot be
            // seen by a reader whose re-check misses the lock bit; pairs with
            // the Acquire fence in `has_changed`.
            fence(Ordering::Release);
        }
        ok
    }

    /// Lock the node, spinning while another writer holds it. Returns the
    /// version it had just before locking. Never returns for an unlinked
    /// node: the tree itself locks only with [`NodeVersion::try_lock`].
    #[inline]
    pub fn lock(&self) -> u64 {
        loop {
            let v = self.stable();
            if self.try_lock(v) {
                return v;
            }
        }
    }

    /// Unlock after a change: the counter advances. Returns the new version.
    #[inline]
    pub fn unlock(&self) -> u64 {
        let v = self.0.load(Ordering::Relaxed);
        debug_assert!(v & LOCK != 0);
        let new = (v & !LOCK).wrapping_add(STEP);
        // Release: pairs with the Acquire loads in `stable` / `try_lock`.
        self.0.store(new, Ordering::Release);
        new
    }

    /// Unlock a node just unlinked from its tree: the counter advances and
    /// the deleted mark is set for good, so no version read before or
    /// after validates or locks again.
    #[inline]
    pub fn unlock_deleted(&self) {
        let v = self.0.load(Ordering::Relaxed);
        debug_assert!(v & LOCK != 0);
        let new = ((v & !LOCK).wrapping_add(STEP)) | DELETED;
        // Release: pairs with the Acquire loads in `stable` / `try_lock`.
        self.0.store(new, Ordering::Release);
    }

    /// Make the word that of a fresh unlocked node, as if the node's
    /// memory had been freed and reused (tests of stale references).
    #[cfg(all(test, not(feature = "loom")))]
    pub(crate) fn reset(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// Unlock without advancing the counter: for changes that keep the key
    /// set the same (a value swap), so scans' node-sets stay valid.
    #[inline]
    pub fn unlock_unchanged(&self) {
        let v = self.0.load(Ordering::Relaxed);
        debug_assert!(v & LOCK != 0);
        // Release: pairs with the Acquire loads in `stable` / `try_lock`.
        self.0.store(v & !LOCK, Ordering::Release);
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A writer updates two words under the version lock; an optimistic
    /// reader that validates must never see them torn.
    #[test]
    fn optimistic_read_never_torn() {
        loom::model(|| {
            struct Node {
                v: NodeVersion,
                a: AtomicU64,
                b: AtomicU64,
            }
            let n = Arc::new(Node {
                v: NodeVersion::new(),
                a: AtomicU64::new(0),
                b: AtomicU64::new(0),
            });
            let w = {
                let n = n.clone();
                loom::thread::spawn(move || {
                    n.v.lock();
                    n.a.store(1, Ordering::Relaxed);
                    n.b.store(1, Ordering::Relaxed);
                    n.v.unlock();
                })
            };
            let v = loop {
                let v = n.v.0.load(Ordering::Acquire);
                if v & LOCK == 0 {
                    break v;
                }
                loom::thread::yield_now();
            };
            let a = n.a.load(Ordering::Relaxed);
            let b = n.b.load(Ordering::Relaxed);
            if !n.v.has_changed(v) {
                assert_eq!(a, b, "validated read saw a torn node");
            }
            w.join().unwrap();
        });
    }

    /// Two writers never both hold the lock.
    #[test]
    fn lock_is_exclusive() {
        loom::model(|| {
            let v = Arc::new(NodeVersion::new());
            let c = Arc::new(AtomicU64::new(0));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let (v, c) = (v.clone(), c.clone());
                    loom::thread::spawn(move || {
                        v.lock();
                        let x = c.load(Ordering::Relaxed);
                        c.store(x + 1, Ordering::Relaxed);
                        v.unlock();
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(c.load(Ordering::Relaxed), 2);
            assert_eq!(v.stable(), 4);
        });
    }
}
