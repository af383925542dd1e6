//! Range scans, forward and reverse, leaf by leaf.

use super::*;

impl RawTree {
    /// Visit the keys in `(lo, hi)` in order (descending if `reverse`).
    ///
    /// `on_leaf` is told each leaf whose validated contents were used, with
    /// its version, before `visit` sees that leaf's keys; together those
    /// leaves cover the whole range scanned so far. `visit` returns false
    /// to stop. Keys are passed as slices valid for the call.
    pub fn scan<G: Guard>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        g: &G,
        mut on_leaf: impl FnMut(LeafRef, u64),
        mut visit: impl FnMut(&[u8], u64) -> bool,
    ) {
        if reverse {
            self.scan_rev(lo, hi, g, &mut on_leaf, &mut visit)
        } else {
            self.scan_fwd(lo, hi, g, &mut on_leaf, &mut visit)
        }
    }

    pub(super) fn scan_fwd<G: Guard>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        g: &G,
        on_leaf: &mut dyn FnMut(LeafRef, u64),
        visit: &mut dyn FnMut(&[u8], u64) -> bool,
    ) {
        // The lowest key still wanted: `lo`, or just past the last key
        // visited (a stored pair, valid while we are pinned).
        let mut last: Option<(u64, u64)> = None;
        let mut ents = [(0u64, 0u64, 0u64); LEAF_WIDTH];
        let (mut leaf, mut v) = self.find_leaf(Target::At(SearchKey::new(bound_key(lo))), g);
        let mut check_lo = true;
        loop {
            // SAFETY: live leaf.
            let l = unsafe { &*leaf };
            let n = l.header.count.load(R).min(LEAF_WIDTH);
            for (i, e) in ents.iter_mut().enumerate().take(n) {
                *e = (l.slices[i].load(R), l.infos[i].load(R), l.values[i].load(R));
            }
            let next = l.next.load(R);
            if l.header.version.has_changed(v) {
                let mut tmp = [0u8; 8];
                let cur = match last {
                    // SAFETY: a key we visited; pinned.
                    Some((s, i)) => unsafe { stored_bytes(s, i, &mut tmp) },
                    None => bound_key(lo),
                };
                (leaf, v) = self.find_leaf(Target::At(SearchKey::new(cur)), g);
                check_lo = true;
                continue;
            }
            on_leaf(LeafRef(NonNull::from(l)), v);
            for &(s, info, val) in &ents[..n] {
                let mut tmp = [0u8; 8];
                // SAFETY: validated entry; pinned.
                let kb = unsafe { stored_bytes(s, info, &mut tmp) };
                if check_lo {
                    let below = match last {
                        Some((ls, li)) => {
                            let mut t2 = [0u8; 8];
                            // SAFETY: as above.
                            kb <= unsafe { stored_bytes(ls, li, &mut t2) }
                        }
                        None => match lo {
                            Bound::Included(b) => kb < b,
                            Bound::Excluded(b) => kb <= b,
                            Bound::Unbounded => false,
                        },
                    };
                    if below {
                        continue;
                    }
                    check_lo = false;
                }
                let above = match hi {
                    Bound::Included(b) => kb > b,
                    Bound::Excluded(b) => kb >= b,
                    Bound::Unbounded => false,
                };
                if above || !visit(kb, val) {
                    return;
                }
                last = Some((s, info));
            }
            if next.is_null() {
                return;
            }
            leaf = next;
            // SAFETY: live leaf.
            v = unsafe { &*next }.header.version.stable();
        }
    }

    pub(super) fn scan_rev<G: Guard>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        g: &G,
        on_leaf: &mut dyn FnMut(LeafRef, u64),
        visit: &mut dyn FnMut(&[u8], u64) -> bool,
    ) {
        // The highest key still wanted: `hi`, or just below `upper` (the
        // last key visited or the low fence of the last leaf).
        let mut upper: Option<(u64, u64)> = None;
        let mut ents = [(0u64, 0u64, 0u64); LEAF_WIDTH];
        let target = |upper: Option<(u64, u64)>, tmp: &mut [u8; 8]| -> (*const Leaf, u64) {
            match upper {
                // SAFETY: a visited key or a fence; pinned.
                Some((s, i)) => self.find_leaf(
                    Target::Before(SearchKey::new(unsafe { stored_bytes(s, i, tmp) })),
                    g,
                ),
                None => match hi {
                    Bound::Included(b) => self.find_leaf(Target::At(SearchKey::new(b)), g),
                    Bound::Excluded(b) => self.find_leaf(Target::Before(SearchKey::new(b)), g),
                    Bound::Unbounded => self.find_leaf(Target::Rightmost, g),
                },
            }
        };
        let mut tmp = [0u8; 8];
        let (mut leaf, mut v) = target(upper, &mut tmp);
        loop {
            // SAFETY: live leaf.
            let l = unsafe { &*leaf };
            let n = l.header.count.load(R).min(LEAF_WIDTH);
            for (i, e) in ents.iter_mut().enumerate().take(n) {
                *e = (l.slices[i].load(R), l.infos[i].load(R), l.values[i].load(R));
            }
            if l.header.version.has_changed(v) {
                (leaf, v) = target(upper, &mut tmp);
                continue;
            }
            on_leaf(LeafRef(NonNull::from(l)), v);
            for &(s, info, val) in ents[..n].iter().rev() {
                let mut t = [0u8; 8];
                // SAFETY: validated entry; pinned.
                let kb = unsafe { stored_bytes(s, info, &mut t) };
                let too_high = match upper {
                    Some((us, ui)) => {
                        let mut t2 = [0u8; 8];
                        // SAFETY: as above.
                        kb >= unsafe { stored_bytes(us, ui, &mut t2) }
                    }
                    None => match hi {
                        Bound::Included(b) => kb > b,
                        Bound::Excluded(b) => kb >= b,
                        Bound::Unbounded => false,
                    },
                };
                if too_high {
                    continue;
                }
                if below_lo(kb, lo) || !visit(kb, val) {
                    return;
                }
                upper = Some((s, info));
            }
            let Some(low) = l.low() else { return };
            let mut t = [0u8; 8];
            // SAFETY: a fence lives as long as its leaf; pinned.
            if below_lo(unsafe { stored_bytes(low.0, low.1, &mut t) }, lo) {
                return;
            }
            upper = Some(low);
            (leaf, v) = target(upper, &mut tmp);
        }
    }
}

/// Is `k` below the lower bound?
pub(super) fn below_lo(k: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Included(b) => k < b,
        Bound::Excluded(b) => k <= b,
        Bound::Unbounded => false,
    }
}

pub(super) fn bound_key(b: Bound<&[u8]>) -> &[u8] {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => k,
        Bound::Unbounded => &[],
    }
}
