//! Inserts: into a leaf, splitting it or a full inner node on the way,
//! and attaching a new node to its parent; the point index grows beside.

use super::*;

impl RawTree {
    /// Grow the point index if an insert found it crowded (with no leaf
    /// locked: moving it takes every bucket's lock in turn).
    #[inline(always)]
    pub(super) fn grow_points<G: Guard>(&self, g: &mut G) {
        if let Some(p) = &self.points {
            if p.crowded() {
                if let Some(old) = p.grow() {
                    g.retire(Retired::table(old));
                }
            }
        }
    }

    /// Split a full, locked inner node at child `at` (where the key being
    /// inserted goes); `parent` (locked, not full) or a new root receives
    /// the separator between the halves.
    ///
    /// # Safety
    /// `inner` and `parent` are locked by the caller.
    pub(super) unsafe fn split_inner(&self, inner: &Inner, parent: Option<&Inner>, at: usize) {
        let n = inner.header.count.load(R);
        // Split where the key goes: its child ends the left node. A run
        // of ascending keys — a sequential load, one loader thread's range
        // below another's, TPC-C's orders of one district — then keeps
        // adding separators at the left node's end and fills it, where a
        // split in the middle would leave half-full nodes behind it for
        // good (a taller tree: docs/BENCHMARKS.md). Past the last
        // separator this is the append split (the left node stays full).
        let m = at.min(n - 1);
        let right = Inner::new_locked();
        copy_prefix(&inner.header, &right.header);
        let (ss, si) = (inner.slices[m].load(R), inner.infos[m].load(R));
        let mut tmp = [0u8; 8];
        // SAFETY: a live separator of a locked node (separators are leaf
        // fences; a locked node's are not unlinked).
        let sep_bytes = unsafe { stored_bytes(ss, si, &mut tmp) };
        for i in m + 1..n {
            right.slices[i - m - 1].store(inner.slices[i].load(R), R);
            right.infos[i - m - 1].store(inner.infos[i].load(R), R);
        }
        for i in m + 1..=n {
            right.children[i - m - 1].store(inner.children[i].load(R), R);
        }
        right.header.count.store(n - m - 1, R);
        // The separator moves up: clear its slot, as a leaf clears moved
        // entries.
        for i in m..n {
            inner.slices[i].store(UNUSED_SLICE, R);
            inner.infos[i].store(0, R);
        }
        inner.header.count.store(m, R);
        // SAFETY: both locked, so their separators stay; pinned.
        unsafe {
            repack(&inner.header, &inner.slices, &inner.infos, m);
            repack(&right.header, &right.slices, &right.infos, n - m - 1);
        }
        let right = Box::into_raw(right);
        // SAFETY: caller holds the locks `attach` needs.
        unsafe {
            self.attach(
                parent,
                inner as *const Inner as *mut Header,
                (si, sep_bytes),
                right as *mut Header,
            )
        };
        // SAFETY: just allocated, now linked.
        unsafe { (*right).header.version.unlock() };
    }

    /// Link `right` (split off `left`, separated by `sep`) into `parent`,
    /// or grow a new root.
    ///
    /// # Safety
    /// `parent`, if any, is locked and not full; `left` is locked.
    pub(super) unsafe fn attach(
        &self,
        parent: Option<&Inner>,
        left: *mut Header,
        (sep_info, sep_bytes): (u64, &[u8]),
        right: *mut Header,
    ) {
        match parent {
            Some(p) => {
                let n = p.header.count.load(R);
                debug_assert!(n < INNER_WIDTH);
                // SAFETY: locked (caller's contract); pinned.
                let sep = unsafe { fit_prefix(&p.header, &p.slices, &p.infos, n, sep_bytes) };
                let idx = (0..=n)
                    .find(|&i| p.children[i].load(R) == left)
                    .expect("split node is a child of its locked parent");
                for i in (idx..n).rev() {
                    p.slices[i + 1].store(p.slices[i].load(R), R);
                    p.infos[i + 1].store(p.infos[i].load(R), R);
                }
                for i in (idx + 1..=n).rev() {
                    p.children[i + 1].store(p.children[i].load(R), R);
                }
                p.slices[idx].store(sep, R);
                p.infos[idx].store(sep_info, R);
                p.children[idx + 1].store(right, R);
                p.header.count.store(n + 1, R);
            }
            None => {
                let root = Inner::new_locked();
                root.slices[0].store(word_of(sep_bytes, 0), R);
                root.infos[0].store(sep_info, R);
                root.children[0].store(left, R);
                root.children[1].store(right, R);
                root.header.count.store(1, R);
                // SAFETY: new and locked.
                unsafe { repack(&root.header, &root.slices, &root.infos, 1) };
                root.header.version.unlock();
                // Release: pairs with the Acquire root loads in descents.
                self.root
                    .store(Box::into_raw(root) as *mut Header, Ordering::Release);
            }
        }
    }

    /// Insert `key → value` if the key is absent.
    pub fn insert<G: Guard>(&self, key: &[u8], value: u64, g: &mut G) -> Insert {
        let r = into_insert(self.insert_impl::<G, false>(key, value, false, &mut None, g));
        self.grow_points(g);
        r
    }

    /// Insert `key → value` if the key is absent, as [`RawTree::insert`]
    /// does, trying first the leaf `hint` — the [`Lookup::leaf`] of a
    /// lookup of the same key that found it absent — so the insert needs
    /// no second descent. The leaf is used only if, read under its version,
    /// it still covers the key and has room (the same checks as a
    /// [`Cursor`]'s); otherwise the insert descends from the root. A stale
    /// hint makes the insert slower, never wrong.
    ///
    /// # Safety
    /// As for [`RawTree::get_hinted`].
    pub unsafe fn insert_hinted<G: Guard>(
        &self,
        hint: LeafRef,
        key: &[u8],
        value: u64,
        g: &mut G,
    ) -> Insert {
        let k = SearchKey::new(key);
        // SAFETY: not freed (caller's contract).
        let l = unsafe { hint.0.as_ref() };
        let v = l.header.version.stable();
        // SAFETY: pinned by the caller's guard.
        if let Covers::Yes = unsafe { covers(l, v, &k) } {
            // SAFETY: `l` covered `k` at `v`; pinned. With the parent
            // unknown, a full leaf returns `None` rather than splitting.
            let done = unsafe {
                self.insert_into::<false>(l, v, Parent::Unknown, &k, value, false, &mut None)
            };
            if let Some(done) = done {
                self.grow_points(g);
                return into_insert(done);
            }
        }
        let r = into_insert(self.insert_impl::<G, false>(key, value, false, &mut None, g));
        self.grow_points(g);
        r
    }

    /// Insert or overwrite; returns the old value if there was one, and the
    /// leaf change if a key was added.
    pub fn upsert<G: Guard>(
        &self,
        key: &[u8],
        value: u64,
        g: &mut G,
    ) -> (Option<u64>, Option<NodeChange>) {
        let r = self.insert_impl::<G, false>(key, value, true, &mut None, g);
        self.grow_points(g);
        r
    }

    /// Insert by descending from the root, as often as it takes (`CURSOR`
    /// and `spot` as for [`RawTree::insert_into`]).
    pub(super) fn insert_impl<G: Guard, const CURSOR: bool>(
        &self,
        key: &[u8],
        value: u64,
        overwrite: bool,
        spot: &mut Option<Spot>,
        _g: &mut G,
    ) -> Outcome {
        let k = &SearchKey::new(key);
        loop {
            let (leaf, v, parent, pv) = self.find_leaf_for_write(k);
            let parent = match parent.is_null() {
                true => Parent::Root,
                false => Parent::Node(parent, pv),
            };
            // SAFETY: a live leaf that covered `k` at `v`; pinned by the
            // caller's guard.
            let done =
                unsafe { self.insert_into::<CURSOR>(&*leaf, v, parent, k, value, overwrite, spot) };
            if let Some(done) = done {
                return done;
            }
        }
    }

    /// Insert `k → value` into leaf `l` (or find `k` there), where `l`
    /// covered `k` when its version was `v`, and `parent` is what is known
    /// of where `l` hangs. A full leaf is split, with its parent locked too.
    /// Returns `None`, having changed nothing, if `l` changed since `v`, a
    /// lock was taken, or a split is needed and the parent is unknown or
    /// has no room: the caller descends and tries again. For a `CURSOR`,
    /// a full leaf splits at the key ([`RawTree::split_leaf`]) and `spot` is
    /// set to where the key is; plain inserts leave `spot` alone (so they
    /// pay nothing for it).
    ///
    /// # Safety
    /// The caller is pinned; `l` covered `k` at version `v` (or `v` is
    /// stale, which the version checks here catch).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) unsafe fn insert_into<const CURSOR: bool>(
        &self,
        l: &Leaf,
        v: u64,
        parent: Parent,
        k: &SearchKey<'_>,
        value: u64,
        overwrite: bool,
        spot: &mut Option<Spot>,
    ) -> Option<Outcome> {
        let here = NonNull::from(l);
        // "The leaf is the root" holds only at version `v`: after this call
        // the leaf's parent is unknown.
        let kept = match parent {
            Parent::Root => Parent::Unknown,
            p => p,
        };
        let n = l.header.count.load(R).min(LEAF_WIDTH);
        // SAFETY: pinned (caller's contract).
        let (pos, found) = unsafe { leaf_lower_bound(l, n, k) };
        if found {
            let old = l.values[pos].load(R);
            if l.header.version.has_changed(v) {
                return None;
            }
            if overwrite {
                if !l.header.version.try_lock(v) {
                    return None;
                }
                l.values[pos].store(value, R);
                if let Some(p) = &self.points {
                    p.set(&p.probe(k), l.infos[pos].load(R), value);
                }
                l.header.version.unlock_unchanged();
            }
            if CURSOR {
                *spot = Some((here, kept));
            }
            return Some((Some(old), None));
        }
        if l.header.version.has_changed(v) {
            return None;
        }
        let lref = LeafRef(here);
        if n < LEAF_WIDTH {
            if !l.header.version.try_lock(v) {
                return None;
            }
            // SAFETY: locked at `v` (so `n` and `pos` hold); pinned.
            let (s, info) = unsafe { stored_in(l, n, k) };
            leaf_insert_at(l, n, pos, (s, info, value));
            if let Some(p) = &self.points {
                p.insert(&p.probe(k), info, value);
            }
            let nv = l.header.version.unlock();
            if CURSOR {
                *spot = Some((here, kept));
            }
            let change = NodeChange {
                leaf: lref,
                old_version: v,
                new_version: nv,
                split: None,
            };
            return Some((None, Some(change)));
        }
        // Full leaf: lock parent and leaf, split, insert, in one step.
        let p = match parent {
            Parent::Root => None,
            Parent::Node(p, pv) => {
                // SAFETY: found while pinned (caller's contract).
                let p = unsafe { &*p };
                if !p.header.version.try_lock(pv) {
                    return None;
                }
                // A parent met on a descent has room (full inner nodes are
                // split on the way down); one a cursor kept may have filled.
                if p.header.count.load(R) >= INNER_WIDTH {
                    p.header.version.unlock_unchanged();
                    return None;
                }
                Some(p)
            }
            Parent::Unknown => return None,
        };
        if !l.header.version.try_lock(v) {
            if let Some(p) = p {
                p.header.version.unlock_unchanged();
            }
            return None;
        }
        // SAFETY: locked at `v` (so `n` and `pos` hold); pinned.
        let (s, info) = unsafe { stored_in(l, n, k) };
        // SAFETY: leaf and parent are locked at validated versions, and the
        // parent has room.
        let (right, in_left) = unsafe { self.split_leaf(l, p, pos, (s, info, value), CURSOR) };
        if let Some(pi) = &self.points {
            pi.insert(&pi.probe(k), info, value);
        }
        let nv = l.header.version.unlock();
        // SAFETY: `right` was just linked and is live.
        let rv = unsafe { (*right).header.version.unlock() };
        let right = NonNull::new(right).expect("non-null");
        // Both halves are children of the parent at the version it unlocks
        // with; a new root is not known here.
        let parent = match p {
            Some(p) => Parent::Node(p, p.header.version.unlock()),
            None => Parent::Unknown,
        };
        if CURSOR {
            *spot = Some((if in_left { here } else { right }, parent));
        }
        let change = NodeChange {
            leaf: lref,
            old_version: v,
            new_version: nv,
            split: Some((LeafRef(right), rv)),
        };
        Some((None, Some(change)))
    }

    /// Split a full locked leaf, inserting entry `e` at position `pos`.
    /// Returns the new right leaf, still locked, and whether the new entry
    /// went into the left leaf.
    ///
    /// # Safety
    /// `leaf` and `parent` are locked, `parent` has room; the caller is
    /// pinned.
    pub(super) unsafe fn split_leaf(
        &self,
        leaf: &Leaf,
        parent: Option<&Inner>,
        pos: usize,
        e: (u64, u64, u64),
        at_key: bool,
    ) -> (*mut Leaf, bool) {
        let n = LEAF_WIDTH;
        // Appending at the end (a sequential load) leaves the left leaf
        // full and starts the right one with just the new key. Inside a
        // leaf, a split moves the upper half right, or, for a cursor's
        // ascending run, every key above the new one: the run then goes on
        // filling the left leaf (the new key is its last) instead of
        // splitting again every few keys and leaving half-full leaves
        // behind, as it would when loaded into a gap between keys already
        // there (another checkpoint file's).
        let append = pos == n;
        let m = match (append, at_key) {
            (true, _) => n,
            (false, false) => n / 2,
            (false, true) => pos,
        };
        let in_left = pos < m || (pos == m && !append);
        let mut tmp = [0u8; 8];
        // The separator is the right leaf's first key: entry m, or the new
        // key when appending. The fence gets its own copy.
        let (ss, si) = if append {
            (e.0, e.1)
        } else {
            (leaf.slices[m].load(R), leaf.infos[m].load(R))
        };
        // SAFETY: a live entry (or the new key) while we hold the lock.
        let sep_bytes = unsafe { stored_bytes(ss, si, &mut tmp) };
        let low = make_stored(sep_bytes);
        let right = Leaf::new(Some(low), true);
        copy_prefix(&leaf.header, &right.header);
        for i in m..n {
            copy_entry(leaf, i, &right, i - m);
        }
        right.header.count.store(n - m, R);
        // Clear moved slots: a stale key pointer left here could later be
        // freed through the right leaf while optimistic readers of this one
        // still load it.
        for i in m..n {
            clear_entry(leaf, i);
        }
        leaf.header.count.store(m, R);
        if in_left {
            leaf_insert_at(leaf, m, pos, e);
        } else {
            leaf_insert_at(&right, n - m, pos - m, e);
        }
        // SAFETY: both locked; pinned.
        unsafe {
            repack(
                &leaf.header,
                &leaf.slices,
                &leaf.infos,
                leaf.header.count.load(R),
            );
            repack(
                &right.header,
                &right.slices,
                &right.infos,
                right.header.count.load(R),
            );
        }
        right.next.store(leaf.next.load(R), R);
        let right = Box::into_raw(right);
        leaf.next.store(right, R);
        // SAFETY: caller holds the locks.
        unsafe {
            self.attach(
                parent,
                leaf as *const Leaf as *mut Header,
                (low.1, sep_bytes),
                right as *mut Header,
            )
        };
        (right, in_left)
    }
}
