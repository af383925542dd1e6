//! The cursor: inserts of keys that arrive in order (a load, a queue's
//! tail) start from the leaf the last one went to, not from the root.

use super::*;

/// Inserts keys that arrive in ascending runs, such as a checkpoint file's
/// (SiloR §5.1: each recovery thread loads key ranges of a table and
/// "benefit\[s\] from locality"), without descending from the root for each.
///
/// The cursor remembers the leaf its last key went into and, when known,
/// that leaf's parent with a version at which it was the leaf's parent. A
/// key the remembered leaf covers — at least its lower fence and below its
/// right sibling's, read under the leaf's version — is inserted there by
/// the same steps as after a descent: the version read first is validated
/// and upgraded to the lock (Masstree's protocol, Silo §4.6: a reader or a
/// node-set that saw the leaf before sees its version change). A key past
/// the leaf is tried in the right sibling (Lehman and Yao's move right).
/// A full leaf splits with the remembered parent locked, if that parent
/// still has the remembered version; otherwise, and for any key the
/// remembered leaves do not cover, the insert descends from the root as
/// [`RawTree::insert`] does. So other threads may insert, remove or split
/// concurrently, each cursor's keys may interleave with theirs, and keys
/// may arrive in any order: a cursor is only slower then, never wrong.
///
/// A cursor's split keeps the keys below the new one in the left leaf and
/// moves the rest right (a plain insert moves half), so an ascending run
/// into a gap between keys already present fills whole leaves.
///
/// The remembered spot is dropped when any node of the tree has been
/// unlinked since it was found (a remove that empties a leaf unlinks it): a cursor is
/// kept from one pin to the next, and its nodes could have been freed.
#[derive(Debug)]
pub struct RawCursor<'t> {
    pub(super) tree: &'t RawTree,
    pub(super) at: Option<Spot>,
    /// The tree's unlink count when the current call began (see
    /// [`RawTree::unlinks`]).
    pub(super) unlinks: u64,
}

/// Where a key lies relative to a leaf.
pub(super) enum Covers {
    Yes,
    /// Past the leaf: try its right sibling.
    Right(NonNull<Leaf>),
    /// Below the leaf, or the leaf changed.
    No,
}

/// Whether leaf `l`, read at version `v`, covers `k`: its low fence ≤ `k`
/// < its right sibling's low fence (a leaf's range only shrinks from the
/// right, and its fence is immutable).
///
/// # Safety
/// The caller is pinned, since before `l` was found.
#[inline]
pub(super) unsafe fn covers(l: &Leaf, v: u64, k: &SearchKey<'_>) -> Covers {
    if let Some((s, i)) = l.low() {
        // SAFETY: a fence lives as long as its leaf; pinned.
        if unsafe { compare(s, i, k) } == Cmp::Greater {
            return Covers::No;
        }
    }
    let next = l.next.load(R);
    // Validate before following `next` (the sibling is only known to be
    // initialized once the split that linked it has unlocked the leaf).
    if l.header.version.has_changed(v) {
        return Covers::No;
    }
    let Some(next) = NonNull::new(next) else {
        return Covers::Yes;
    };
    // SAFETY: a validated sibling pointer, read while pinned (an unlinked
    // sibling is still readable, and its fence with it).
    let (s, i) = unsafe { next.as_ref() }
        .low()
        .expect("a right sibling has a low fence");
    // SAFETY: as above.
    match unsafe { compare(s, i, k) } {
        Cmp::Greater => Covers::Yes,
        _ => Covers::Right(next),
    }
}

impl<'t> RawCursor<'t> {
    /// Insert `key → value` if the key is absent, as [`RawTree::insert`] does,
    /// starting from where the previous key went.
    pub fn insert<G: Guard>(&mut self, key: &[u8], value: u64, g: &mut G) -> Insert {
        let k = SearchKey::new(key);
        // SeqCst: ordered after the caller's pin. A node unlinked before
        // this load counted before it (and the spot goes); one unlinked
        // after it is retired after the pin began, so it is not freed
        // while this call runs.
        let unlinks = self.tree.unlinks.load(Ordering::SeqCst);
        if unlinks != self.unlinks {
            self.at = None;
            self.unlinks = unlinks;
        }
        // SAFETY: pinned by the caller's guard, and no node was unlinked
        // since the spot was found in an earlier call (just checked).
        let done = match unsafe { self.insert_near(&k, value) } {
            Some(done) => done,
            None => self
                .tree
                .insert_impl::<G, true>(key, value, false, &mut self.at, g),
        };
        self.tree.grow_points(g);
        into_insert(done)
    }

    /// Insert into the remembered leaf, or its right sibling, if it covers
    /// `k`; `None` (nothing changed) if neither does or either changed.
    ///
    /// # Safety
    /// The caller is pinned, and the remembered nodes have not been freed.
    #[inline]
    unsafe fn insert_near(&mut self, k: &SearchKey<'_>, value: u64) -> Option<Outcome> {
        let (mut leaf, mut parent) = self.at?;
        debug_assert!(
            !matches!(parent, Parent::Root),
            "a kept spot is never the root"
        );
        for _ in 0..2 {
            // SAFETY: not freed (caller's contract).
            let l = unsafe { leaf.as_ref() };
            let v = l.header.version.stable();
            // SAFETY: pinned (caller's contract).
            match unsafe { covers(l, v, k) } {
                Covers::Yes => {
                    // SAFETY: `l` covered `k` at `v`; pinned.
                    let done = unsafe {
                        self.tree
                            .insert_into::<true>(l, v, parent, k, value, false, &mut self.at)
                    };
                    return done;
                }
                Covers::Right(next) => {
                    leaf = next;
                    parent = Parent::Unknown;
                }
                Covers::No => return None,
            }
        }
        None
    }
}

impl RawTree {
    /// A cursor for inserting keys that arrive in ascending runs; see
    /// [`RawCursor`].
    pub fn cursor(&self) -> RawCursor<'_> {
        RawCursor {
            tree: self,
            at: None,
            unlinks: self.unlinks(),
        }
    }
}
