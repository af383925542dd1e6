//! A structural check of a quiescent tree, for the unit and loom tests.

use super::*;

fn bytes_of(s: u64, i: u64) -> Vec<u8> {
    let mut t = [0u8; 8];
    // SAFETY: tests never free keys while the tree lives.
    unsafe { stored_bytes(s, i, &mut t) }.to_vec()
}

/// What [`check`] found.
pub(super) struct Shape {
    pub keys: Vec<(Vec<u8>, u64)>,
    #[cfg_attr(feature = "loom", allow(dead_code))]
    pub leaves: usize,
}

/// Check every structural invariant of a quiescent tree: nodes
/// unlocked; leaves at one depth; keys sorted within each node and
/// inside the bounds their parents give them; each leaf's fence equal
/// to its lower bound and its right sibling's fence to its upper
/// bound; the sibling chain visiting the same leaves in order; unused
/// slots cleared; every key found by a lookup.
pub(super) fn check(t: &RawTree) -> Shape {
    let mut leaves = Vec::new();
    let mut keys = Vec::new();
    let mut depth = None;
    walk(
        t.root.load(R),
        (None, None),
        0,
        &mut depth,
        &mut leaves,
        &mut keys,
    );
    let mut chain = Vec::new();
    let mut p = leaves[0];
    while !p.is_null() {
        chain.push(p);
        // SAFETY: live leaf.
        p = unsafe { &*p }.next.load(R);
    }
    assert!(chain == leaves, "the sibling chain differs from the tree");
    for w in keys.windows(2) {
        assert!(w[0].0 < w[1].0, "keys out of order across leaves");
    }
    // SAFETY: only LeakGuards on these trees.
    let g = unsafe { LeakGuard::new() };
    for (k, v) in &keys {
        assert_eq!(t.get(k, &g).value, Some(*v), "lookup of {k:?}");
    }
    Shape {
        keys,
        leaves: leaves.len(),
    }
}

type Bounds = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A key stored in node `h` shares its prefix, is longer than it, and
/// is stored as its word after the prefix.
fn check_prefix(h: &Header, k: &[u8], slice: u64) {
    let pw = h.pw.load(R) as usize;
    assert!(pw <= PREFIX_WORDS);
    assert!(
        pw == 0 || k.len() > 8 * pw,
        "key {k:?} not longer than its node's prefix"
    );
    for w in 0..pw {
        assert_eq!(
            word_of(k, w),
            h.prefix[w].load(R),
            "key {k:?} outside its node's prefix"
        );
    }
    assert_eq!(
        word_of(k, pw),
        slice,
        "key {k:?} stored with the wrong slice"
    );
}

fn walk(
    node: *const Header,
    (lo, hi): Bounds,
    d: usize,
    depth: &mut Option<usize>,
    leaves: &mut Vec<*const Leaf>,
    keys: &mut Vec<(Vec<u8>, u64)>,
) {
    // SAFETY: a live node of a quiescent tree.
    let h = unsafe { hdr(node) };
    assert_eq!(h.version.load() & 1, 0, "node left locked");
    let in_bounds =
        |k: &Vec<u8>| lo.as_ref().is_none_or(|lo| k >= lo) && hi.as_ref().is_none_or(|hi| k < hi);
    if h.is_leaf {
        assert_eq!(*depth.get_or_insert(d), d, "leaves at different depths");
        // SAFETY: a leaf.
        let l = unsafe { &*(node as *const Leaf) };
        let n = l.header.count.load(R);
        assert!(n <= LEAF_WIDTH);
        assert!(
            l.low().map(|(s, i)| bytes_of(s, i)) == lo,
            "leaf fence is not its lower bound"
        );
        let next = l.next.load(R);
        let next_low = (!next.is_null()).then(|| {
            // SAFETY: live leaf.
            let (s, i) = unsafe { &*next }.low().expect("sibling fence");
            bytes_of(s, i)
        });
        assert!(
            next_low == hi,
            "sibling fence is not the leaf's upper bound"
        );
        let mut prev: Option<Vec<u8>> = None;
        for i in 0..n {
            let k = bytes_of(l.slices[i].load(R), l.infos[i].load(R));
            check_prefix(h, &k, l.slices[i].load(R));
            assert!(in_bounds(&k), "key {k:?} outside its leaf's bounds");
            assert!(
                prev.as_ref().is_none_or(|p| &k > p),
                "leaf keys out of order"
            );
            keys.push((k.clone(), l.values[i].load(R)));
            prev = Some(k);
        }
        for i in n..LEAF_WIDTH {
            let e = (l.slices[i].load(R), l.infos[i].load(R), l.values[i].load(R));
            assert_eq!(e, (UNUSED_SLICE, 0, 0), "unused slot {i} not cleared");
        }
        leaves.push(node as *const Leaf);
        return;
    }
    // SAFETY: an inner node.
    let inner = unsafe { &*(node as *const Inner) };
    let n = inner.header.count.load(R);
    // An append split leaves the right inner node one child and no
    // separator.
    assert!(n <= INNER_WIDTH);
    let seps: Vec<Vec<u8>> = (0..n)
        .map(|i| bytes_of(inner.slices[i].load(R), inner.infos[i].load(R)))
        .collect();
    for (i, k) in seps.iter().enumerate() {
        check_prefix(h, k, inner.slices[i].load(R));
    }
    for i in n..INNER_WIDTH {
        let e = (inner.slices[i].load(R), inner.infos[i].load(R));
        assert_eq!(
            e,
            (UNUSED_SLICE, 0),
            "unused separator slot {i} not cleared"
        );
    }
    for (i, s) in seps.iter().enumerate() {
        assert!(
            in_bounds(s) && lo.as_ref() != Some(s),
            "separator out of bounds"
        );
        assert!(i == 0 || seps[i - 1] < *s, "separators out of order");
    }
    for i in 0..=n {
        let clo = if i == 0 {
            lo.clone()
        } else {
            Some(seps[i - 1].clone())
        };
        let chi = if i == n {
            hi.clone()
        } else {
            Some(seps[i].clone())
        };
        walk(
            inner.children[i].load(R),
            (clo, chi),
            d + 1,
            depth,
            leaves,
            keys,
        );
    }
}
