//! Lookups: the descent from the root to a leaf (for reading, and for a
//! writer, with the parent it may have to lock), and point lookups.

use super::*;

impl RawTree {
    /// The value of `key`, if present: [`RawTree::get`]'s value, from the
    /// point index if the tree has one. It reports no leaf, so a caller
    /// that must validate an absence (a phantom check) looks an absent
    /// key up again with [`RawTree::get`].
    #[inline]
    pub fn find<G: Guard>(&self, key: &[u8], g: &G) -> Option<u64> {
        match &self.points {
            // SAFETY: pinned by `g`, a guard of the tree's domain.
            Some(p) => unsafe { p.get(&p.probe(&SearchKey::new(key))) },
            None => self.get(key, g).value,
        }
    }

    /// The most keys [`RawTree::find_many`] descends for together.
    pub const FIND_MANY: usize = 16;

    /// [`RawTree::find`] for each of `keys` (at most [`RawTree::FIND_MANY`]; the
    /// rest are left `None`), into `out`, with their cache misses
    /// overlapped: without a point index the descents go down together,
    /// a level at a time, each node fetched a round before it is read, so
    /// a level's misses are waited for once for all keys instead of once
    /// per key. Each descent makes the checks [`RawTree::get`]'s does, in the
    /// same order (a round apart), so it ends at the same leaf; one that
    /// fails a check looks its key up alone.
    pub fn find_many<G: Guard, V: Value>(&self, keys: &[&[u8]], out: &mut [Option<V>], g: &G) {
        const N: usize = RawTree::FIND_MANY;
        let n = keys.len().min(N).min(out.len());
        if self.points.is_some() {
            for (o, k) in out.iter_mut().zip(&keys[..n]) {
                *o = self.find(k, g).map(V::from_word);
            }
            return;
        }
        /// One key's descent: the node to read next (null once at its
        /// leaf or given up), its parent and the parent's version.
        #[derive(Clone, Copy)]
        struct Walk {
            node: *const Header,
            parent: *const Header,
            pv: u64,
            leaf: *const Leaf,
            v: u64,
        }
        let none = SearchKey {
            slice: 0,
            bytes: &[],
        };
        let sk: [SearchKey<'_>; N] =
            std::array::from_fn(|i| keys[..n].get(i).map_or(none, |k| SearchKey::new(k)));
        // Acquire: pairs with the Release store of a new root.
        let root = self.root.load(Ordering::Acquire) as *const Header;
        prefetch(root);
        let mut walks = [Walk {
            node: root,
            parent: std::ptr::null(),
            pv: 0,
            leaf: std::ptr::null(),
            v: 0,
        }; N];
        let mut going = true;
        while going {
            going = false;
            for (w, k) in walks.iter_mut().zip(&sk).take(n) {
                if w.node.is_null() {
                    continue;
                }
                // SAFETY: the root, never unlinked, or a child read from a
                // validated parent while pinned (as in `descend`).
                let h = unsafe { hdr(w.node) };
                let v = h.version.stable();
                // SAFETY: null, or a node this descent read while pinned.
                let parent = unsafe { w.parent.as_ref() };
                let moved = match parent {
                    // A root split leaves the old root covering only its
                    // left half (Acquire: as the root load above).
                    None => !std::ptr::eq(self.root.load(Ordering::Acquire), w.node),
                    // The child could have split between reading the
                    // pointer and its version; a split changes the parent.
                    Some(p) => p.version.has_changed(w.pv),
                };
                if moved {
                    w.node = std::ptr::null();
                    continue;
                }
                if h.is_leaf {
                    (w.leaf, w.v) = (w.node as *const Leaf, v);
                    w.node = std::ptr::null();
                    continue;
                }
                // SAFETY: `is_leaf` is false, so this is an Inner.
                let inner = unsafe { &*(w.node as *const Inner) };
                let c = inner.header.count.load(R).min(INNER_WIDTH);
                // SAFETY: pinned by the caller's guard.
                let idx = unsafe { child_index(inner, c, k, false) };
                let child = inner.children[idx].load(R) as *const Header;
                prefetch(child);
                if h.version.has_changed(v) || child.is_null() {
                    w.node = std::ptr::null();
                    continue;
                }
                (w.parent, w.pv, w.node) = (w.node, v, child);
                going = true;
            }
        }
        for ((o, w), (k, key)) in out.iter_mut().zip(&walks).zip(sk.iter().zip(keys)).take(n) {
            // SAFETY: a leaf reached as `descend` reaches one, covering `k`
            // at `w.v`; pinned by `g`.
            let found = (!w.leaf.is_null())
                .then(|| unsafe { lookup_in(&*w.leaf, w.v, k) })
                .flatten();
            *o = match found {
                Some(look) => look.value,
                None => self.get(key, g).value,
            }
            .map(V::from_word);
        }
    }

    /// Start fetching what a lookup of `key` will read first (its point
    /// index bucket; nothing for a tree without one), so that lookups of
    /// several keys known in advance wait for their misses together.
    #[inline]
    pub fn prefetch<G: Guard>(&self, key: &[u8], _g: &G) {
        if let Some(p) = &self.points {
            // SAFETY: pinned by `_g`, a guard of the tree's domain.
            unsafe { p.prefetch(&p.probe(&SearchKey::new(key))) }
        }
    }

    /// Descend (read-only) to the leaf for `t`; returns it with the stable
    /// version under which it covers `t`.
    #[inline(always)]
    pub(super) fn find_leaf<G: Guard>(&self, t: Target<'_>, g: &G) -> (*const Leaf, u64) {
        self.descend(t, g, |_, _| {})
    }

    /// [`RawTree::find_leaf`], telling `on_inner(depth, (node, version,
    /// child, separators))` each inner node it passes, whose child pointer
    /// it then validated; a restart from the root passes depth 0 again.
    #[inline(always)]
    pub(super) fn descend<'s, G: Guard>(
        &'s self,
        t: Target<'_>,
        _g: &G,
        mut on_inner: impl FnMut(usize, Step<'s>),
    ) -> (*const Leaf, u64) {
        'restart: loop {
            // Acquire: pairs with the Release store of a new root.
            let mut node = self.root.load(Ordering::Acquire) as *const Header;
            prefetch(node);
            // SAFETY: pinned; the root is never unlinked.
            let mut v = unsafe { hdr(node) }.version.stable();
            // A root split leaves the old root covering only its left half.
            if !std::ptr::eq(self.root.load(Ordering::Acquire), node) {
                continue 'restart;
            }
            let mut depth = 0;
            loop {
                // SAFETY: read while pinned through validated pointers.
                let h = unsafe { hdr(node) };
                if h.is_leaf {
                    return (node as *const Leaf, v);
                }
                // SAFETY: `is_leaf` is false, so this is an Inner.
                let inner = unsafe { &*(node as *const Inner) };
                let n = inner.header.count.load(R).min(INNER_WIDTH);
                let idx = match t {
                    // SAFETY: pinned by the caller's guard.
                    Target::At(k) => unsafe { child_index(inner, n, &k, false) },
                    // SAFETY: as above.
                    Target::Before(k) => unsafe { child_index(inner, n, &k, true) },
                    Target::Rightmost => n,
                };
                let child = inner.children[idx].load(R) as *const Header;
                prefetch(child);
                if h.version.has_changed(v) || child.is_null() {
                    continue 'restart;
                }
                // SAFETY: validated pointer to a live node.
                let cv = unsafe { hdr(child) }.version.stable();
                // The child could have split between reading the pointer and
                // its version; a split changes the parent too.
                if h.version.has_changed(v) {
                    continue 'restart;
                }
                on_inner(depth, (inner, v, idx, n));
                depth += 1;
                node = child;
                v = cv;
            }
        }
    }

    /// Descend for a write to `k`, splitting any full inner node on the
    /// way. Returns the leaf and its version, and the parent (null if the
    /// leaf is the root) and its version.
    pub(super) fn find_leaf_for_write(
        &self,
        k: &SearchKey<'_>,
    ) -> (*const Leaf, u64, *const Inner, u64) {
        'restart: loop {
            // Acquire: pairs with the Release store of a new root.
            let mut node = self.root.load(Ordering::Acquire) as *const Header;
            prefetch(node);
            // SAFETY: pinned; the root is never unlinked.
            let mut v = unsafe { hdr(node) }.version.stable();
            if !std::ptr::eq(self.root.load(Ordering::Acquire), node) {
                continue 'restart;
            }
            let mut parent: *const Inner = std::ptr::null();
            let mut pv = 0;
            loop {
                // SAFETY: live node.
                let h = unsafe { hdr(node) };
                if h.is_leaf {
                    return (node as *const Leaf, v, parent, pv);
                }
                // SAFETY: not a leaf.
                let inner = unsafe { &*(node as *const Inner) };
                let n = inner.header.count.load(R).min(INNER_WIDTH);
                if n == INNER_WIDTH {
                    // SAFETY: parent (if any) is live.
                    let p = unsafe { parent.as_ref() };
                    if let Some(p) = p {
                        if !p.header.version.try_lock(pv) {
                            continue 'restart;
                        }
                    }
                    if !h.version.try_lock(v) {
                        if let Some(p) = p {
                            p.header.version.unlock_unchanged();
                        }
                        continue 'restart;
                    }
                    // SAFETY: pinned; locked.
                    let at = unsafe { child_index(inner, n, k, false) };
                    // SAFETY: both locked at the versions we validated.
                    unsafe { self.split_inner(inner, p, at) };
                    h.version.unlock();
                    if let Some(p) = p {
                        p.header.version.unlock();
                    }
                    continue 'restart;
                }
                // SAFETY: pinned by the caller.
                let idx = unsafe { child_index(inner, n, k, false) };
                let child = inner.children[idx].load(R) as *const Header;
                prefetch(child);
                if h.version.has_changed(v) || child.is_null() {
                    continue 'restart;
                }
                // SAFETY: validated pointer to a live node.
                let cv = unsafe { hdr(child) }.version.stable();
                if h.version.has_changed(v) {
                    continue 'restart;
                }
                parent = inner;
                pv = v;
                node = child;
                v = cv;
            }
        }
    }

    /// Point lookup.
    pub fn get<G: Guard>(&self, key: &[u8], g: &G) -> Lookup {
        let k = SearchKey::new(key);
        loop {
            let (leaf, v) = self.find_leaf(Target::At(k), g);
            // SAFETY: found while pinned by `g`; `leaf`
            // covers `k` at `v`; pinned by `g`.
            if let Some(look) = unsafe { lookup_in(&*leaf, v, &k) } {
                return look;
            }
        }
    }

    /// Point lookup, as [`RawTree::get`], trying first the leaf `hint` — the
    /// [`Lookup::leaf`] of an earlier lookup in this tree, typically of a
    /// nearby key — and its right sibling. A leaf is used only if, read
    /// under its version, it covers the key (the same check as a
    /// [`Cursor`]'s); otherwise the lookup descends from the root. Keys
    /// that arrive in runs (a transaction's order lines, say) then mostly
    /// skip the descent. A stale or distant hint makes the lookup slower,
    /// never wrong.
    ///
    /// # Safety
    /// `hint` is a leaf of this tree that is not freed: found while the
    /// caller was pinned as it still is, or in an earlier pin with no
    /// node unlinked since ([`RawTree::unlinks`]). A leaf of another tree
    /// could cover the key and answer for the wrong tree.
    pub unsafe fn get_hinted<G: Guard>(&self, hint: LeafRef, key: &[u8], g: &G) -> Lookup {
        let k = SearchKey::new(key);
        let mut leaf = hint.0;
        for _ in 0..2 {
            // SAFETY: not freed (caller's contract), or a sibling read
            // from such a leaf while pinned.
            let l = unsafe { leaf.as_ref() };
            let v = l.header.version.stable();
            // SAFETY: pinned by the caller's guard.
            match unsafe { covers(l, v, &k) } {
                Covers::Yes => {
                    // SAFETY: `l` covers `k` at `v`; pinned by `g`.
                    match unsafe { lookup_in(l, v, &k) } {
                        Some(look) => return look,
                        None => break,
                    }
                }
                Covers::Right(next) => leaf = next,
                Covers::No => break,
            }
        }
        self.get(key, g)
    }
}
