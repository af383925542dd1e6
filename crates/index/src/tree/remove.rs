//! Removes and replaces: a remove that empties a leaf unlinks it, and any
//! inner node left with no child.

use super::*;

/// How often an unlink is tried again after losing a race (a lock
/// another writer held, a node that changed under the descent) before
/// the empty leaf is left in place. A leaf left behind costs memory,
/// never correctness: it is unlinked if a later remove empties it again.
pub(super) const UNLINK_TRIES: usize = 16;

/// What one try of [`RawTree::try_unlink`] did.
pub(super) enum Unlink {
    Done,
    /// Nothing to do: the leaf is not empty, is the leftmost, or is gone.
    Not,
    /// A race was lost; nothing changed.
    Retry,
}

impl RawTree {
    /// Find `key` and lock its leaf. Returns the leaf (locked), the version
    /// it had, its entry count and the key's position; `None` (nothing
    /// locked) if the key is absent.
    pub(super) fn lock_entry<G: Guard>(
        &self,
        k: &SearchKey<'_>,
        g: &G,
    ) -> Option<(&Leaf, u64, usize, usize)> {
        loop {
            let (leaf, v) = self.find_leaf(Target::At(*k), g);
            // SAFETY: live leaf.
            let l = unsafe { &*leaf };
            let n = l.header.count.load(R).min(LEAF_WIDTH);
            // SAFETY: pinned by the caller's guard.
            let (pos, found) = unsafe { leaf_lower_bound(l, n, k) };
            if l.header.version.has_changed(v) {
                continue;
            }
            if !found {
                return None;
            }
            if l.header.version.try_lock(v) {
                return Some((l, v, n, pos));
            }
        }
    }

    /// Swap the value of `key` from `expected` to `new`. The key set is
    /// unchanged, so the leaf version is left as it was. Returns false if
    /// the key is absent or holds another value.
    pub fn replace<G: Guard>(&self, key: &[u8], expected: u64, new: u64, g: &mut G) -> bool {
        let k = SearchKey::new(key);
        let Some((l, _, _, pos)) = self.lock_entry(&k, g) else {
            return false;
        };
        let ok = l.values[pos].load(R) == expected;
        if ok {
            l.values[pos].store(new, R);
            if let Some(p) = &self.points {
                p.set(&p.probe(&k), l.infos[pos].load(R), new);
            }
        }
        l.header.version.unlock_unchanged();
        ok
    }

    /// Remove `key`; returns its value and the leaf change. A remove that
    /// empties its leaf unlinks it and hands it to `g`, so the change's
    /// `leaf` may already be unlinked (its version then carries the
    /// deleted bit): read it only while pinned, as any `LeafRef`.
    pub fn remove<G: Guard>(&self, key: &[u8], g: &mut G) -> Option<(u64, NodeChange)> {
        self.remove_impl(key, None, g)
    }

    /// Remove `key` only if it maps to `expected`.
    pub fn remove_if<G: Guard>(&self, key: &[u8], expected: u64, g: &mut G) -> Option<NodeChange> {
        self.remove_impl(key, Some(expected), g).map(|(_, c)| c)
    }

    pub(super) fn remove_impl<G: Guard>(
        &self,
        key: &[u8],
        expected: Option<u64>,
        g: &mut G,
    ) -> Option<(u64, NodeChange)> {
        let k = SearchKey::new(key);
        let (l, v, n, pos) = self.lock_entry(&k, g)?;
        let value = l.values[pos].load(R);
        if expected.is_some_and(|e| e != value) {
            l.header.version.unlock_unchanged();
            return None;
        }
        let info = l.infos[pos].load(R);
        if let Some(p) = &self.points {
            p.remove(&p.probe(&k), info);
        }
        for i in pos + 1..n {
            copy_entry(l, i, l, i - 1);
        }
        clear_entry(l, n - 1);
        l.header.count.store(n - 1, R);
        let nv = l.header.version.unlock();
        if let Some(r) = Retired::new(info) {
            g.retire(r);
        }
        let change = NodeChange {
            leaf: LeafRef(NonNull::from(l)),
            old_version: v,
            new_version: nv,
            split: None,
        };
        if n == 1 && l.low().is_some() {
            // SAFETY: pinned by `g`, since before `l` was found.
            unsafe { self.unlink_empty(l, g) };
        }
        Some((value, change))
    }

    /// Unlink leaf `l`, which a remove just emptied, unless a key came
    /// back meanwhile. Masstree (Mao et al., EuroSys'12) removes empty
    /// leaves too; this
    /// is the B+-tree form, written out in ARCHITECTURE.md ("Freeing
    /// empty leaves"):
    ///
    /// * The leaf's left neighbour (the leaf whose `next` it is) takes
    ///   over its key range: its `next` skips the leaf.
    /// * The leaf leaves its parent, with the separator that is its
    ///   fence. A parent left with no child leaves its own parent the same
    ///   way, up to the lowest ancestor `pm` with two children or more.
    /// * If the leaf's subtree was `pm`'s first child, `pm`'s lower bound
    ///   — the separator at the lowest ancestor above where the path
    ///   does not take the first child, which is also the leaf's fence —
    ///   becomes the fence of `pm`'s new first child. So every separator
    ///   stays the fence of the leftmost leaf to its right (a leaf split
    ///   makes it so; inner splits move separators, never copy them), and
    ///   the leaf's fence can go with it.
    ///
    /// Every node involved is locked with `try_lock` at the version its
    /// descent read (so the path is exactly as read, and no lock order is
    /// needed: a lost race releases everything and tries again), changed,
    /// and unlocked; the unlinked nodes get the deleted mark and go to
    /// `g`. That includes the first children between `pj` and `pm`: their
    /// contents stay, but their lower bound moves up with `pm`'s, and a
    /// descent that passed `pj` before the unlink must see them change.
    /// The leftmost leaf stays (it has no left neighbour), so the root
    /// never goes and the tree keeps its height.
    ///
    /// # Safety
    /// The caller is pinned by `g`, since before `l` was found.
    pub(super) unsafe fn unlink_empty<G: Guard>(&self, l: &Leaf, g: &mut G) {
        for _ in 0..UNLINK_TRIES {
            // SAFETY: forwarded contract.
            match unsafe { self.try_unlink(l, g) } {
                Unlink::Done | Unlink::Not => return,
                Unlink::Retry => spin(),
            }
        }
    }

    /// One try of [`RawTree::unlink_empty`].
    ///
    /// # Safety
    /// As for [`RawTree::unlink_empty`].
    pub(super) unsafe fn try_unlink<G: Guard>(&self, l: &Leaf, g: &mut G) -> Unlink {
        let v = l.header.version.stable();
        if is_deleted(v) || l.header.count.load(R) != 0 {
            return Unlink::Not;
        }
        let Some((fs, fi)) = l.low() else {
            return Unlink::Not;
        };
        let mut tmp = [0u8; 8];
        // SAFETY: the fence is immutable and lives with the leaf; pinned.
        let fence = unsafe { stored_bytes(fs, fi, &mut tmp) };
        let k = SearchKey::new(fence);
        // The path from the root to the leaf, by its fence.
        let mut path: Vec<Step<'_>> = Vec::with_capacity(8);
        let (node, nv) = self.descend(Target::At(k), &*g, |depth, step| {
            path.truncate(depth);
            path.push(step);
        });
        if !std::ptr::eq(node, l) || nv != v {
            return Unlink::Retry;
        }
        // `pm`: the lowest ancestor with a second child; the ones below it
        // have only the child on the path and go with the leaf.
        let Some(m) = path.iter().rposition(|&(_, _, _, n)| n >= 1) else {
            return Unlink::Not;
        };
        let (pm, pmv, cm, nm) = path[m];
        // `pj`: where `pm`'s lower bound is kept, if the path enters `pm`'s
        // first child.
        let j = match cm {
            0 => match path[..m].iter().rposition(|&(_, _, c, _)| c > 0) {
                Some(j) => Some(j),
                None => return Unlink::Not,
            },
            _ => None,
        };
        let (ls, lsv) = self.find_leaf(Target::Before(k), &*g);
        // SAFETY: found while pinned.
        let ls = unsafe { &*ls };
        if std::ptr::eq(ls, l) {
            return Unlink::Retry;
        }
        // The first children between `pj` and `pm`: their lower bound
        // moves up with `pm`'s, so they change version too. A descent for
        // a key of the leaf's old range that passed `pj` before the unlink
        // would otherwise go on down through them unchallenged and reach
        // `pm` after it, whose new first child starts above the key: a
        // leaf that does not cover it (an insert there is lost).
        let between = j.map_or(&path[..0], |j| &path[j + 1..m]);
        let mut held: Vec<&NodeVersion> = Vec::with_capacity(path.len() + 3);
        let h = &mut held;
        let locked = lock_at(h, &ls.header.version, lsv)
            && lock_at(h, &l.header.version, v)
            && path[m + 1..]
                .iter()
                .all(|&(n, nv, _, _)| lock_at(h, &n.header.version, nv))
            && lock_at(h, &pm.header.version, pmv)
            && between
                .iter()
                .all(|&(n, nv, _, _)| lock_at(h, &n.header.version, nv))
            && j.is_none_or(|j| lock_at(h, &path[j].0.header.version, path[j].1));
        // Under its lock the left neighbour cannot split, so a `next` that
        // is the leaf stays so.
        let linked = locked && std::ptr::eq(ls.next.load(R), l);
        // Every separator is the fence of the leftmost leaf to its right:
        // the one left of the path at `pm` (or `pj`) is the leaf's.
        let (sn, sc) = match j {
            None => (pm, cm - 1),
            Some(j) => (path[j].0, path[j].2 - 1),
        };
        // SAFETY: locked (or just read; only used if locked); pinned.
        let fenced = linked
            && sn.infos[sc].load(R) == fi
            && unsafe { stored_bytes(sn.slices[sc].load(R), fi, &mut [0u8; 8]) } == fence;
        if !fenced {
            debug_assert!(!linked, "a separator is not its leaf's fence");
            for h in held {
                h.unlock_unchanged();
            }
            return Unlink::Retry;
        }
        // The left neighbour's range grows over the leaf's (B-link: a
        // reader that moves right from it now skips the leaf).
        ls.next.store(l.next.load(R), R);
        match j {
            None => inner_remove(pm, nm, cm - 1, cm),
            Some(j) => {
                let (pj, _, cj, nj) = path[j];
                // `pm`'s second child's fence becomes `pm`'s lower bound.
                let (ns, ni) = (pm.slices[0].load(R), pm.infos[0].load(R));
                let mut t = [0u8; 8];
                // SAFETY: a separator of a locked node; pinned.
                let nb = unsafe { stored_bytes(ns, ni, &mut t) };
                // SAFETY: `pj` is locked; pinned. The new separator lies
                // between `pj`'s neighbours of the old one.
                let s = unsafe { fit_prefix(&pj.header, &pj.slices, &pj.infos, nj, nb) };
                pj.slices[cj - 1].store(s, R);
                pj.infos[cj - 1].store(ni, R);
                inner_remove(pm, nm, 0, 0);
            }
        }
        // SeqCst: before the retirements (see `RawTree::unlinks`).
        self.unlinks.fetch_add(1, Ordering::SeqCst);
        l.header.version.unlock_deleted();
        for &(n, ..) in &path[m + 1..] {
            n.header.version.unlock_deleted();
        }
        // Bottom up: a descent that read a node's new version finds its
        // parent's changed too, or still locked.
        pm.header.version.unlock();
        for &(n, ..) in between.iter().rev() {
            n.header.version.unlock();
        }
        if let Some(j) = j {
            path[j].0.header.version.unlock();
        }
        ls.header.version.unlock();
        g.retire(Retired::leaf(NonNull::from(l)));
        for &(n, ..) in &path[m + 1..] {
            g.retire(Retired::inner(NonNull::from(n)));
        }
        Unlink::Done
    }
}

/// `try_lock` `nv` at `v`, noting it in `held` if that worked.
pub(super) fn lock_at<'a>(held: &mut Vec<&'a NodeVersion>, nv: &'a NodeVersion, v: u64) -> bool {
    let ok = nv.try_lock(v);
    if ok {
        held.push(nv);
    }
    ok
}

/// Take separator `sep` and child `child` out of locked inner node `p`
/// of `n` separators, closing the gaps and clearing the freed slots.
pub(super) fn inner_remove(p: &Inner, n: usize, sep: usize, child: usize) {
    debug_assert!(n >= 1 && sep < n && child <= n);
    for i in sep..n - 1 {
        p.slices[i].store(p.slices[i + 1].load(R), R);
        p.infos[i].store(p.infos[i + 1].load(R), R);
    }
    p.slices[n - 1].store(UNUSED_SLICE, R);
    p.infos[n - 1].store(0, R);
    for i in child..n {
        p.children[i].store(p.children[i + 1].load(R), R);
    }
    p.children[n].store(std::ptr::null_mut(), R);
    p.header.count.store(n - 1, R);
}
