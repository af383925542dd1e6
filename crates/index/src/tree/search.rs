//! Searching one node: where a key is, or would go, in a leaf or an inner
//! node, through the node's shared key prefix.

use super::*;

/// Where a search key falls in a node, given the node's prefix.
#[derive(Clone, Copy)]
pub(super) enum Probe {
    /// Below every key stored in the node.
    Below,
    /// Above every key stored in the node.
    Above,
    /// Shares the prefix of `p` bytes; its slice at `p` is this.
    At(u64, usize),
}

/// Place `k` against node `h`'s prefix (the key module's docs). A node
/// without one (`pw = 0`, most nodes) costs one load and a branch.
#[inline(always)]
pub(super) fn probe(h: &Header, k: &SearchKey<'_>) -> Probe {
    let pw = h.pw.load(R) as usize;
    if pw == 0 {
        return Probe::At(k.slice, 0);
    }
    probe_prefix(h, pw.min(PREFIX_WORDS), k)
}

// Out of line: only nodes with a prefix need it, and inlined at every
// search site it more than doubled the descent's code.
#[inline(never)]
pub(super) fn probe_prefix(h: &Header, pw: usize, k: &SearchKey<'_>) -> Probe {
    for (w, word) in h.prefix[..pw].iter().enumerate() {
        let (kw, nw) = (word_of(k.bytes, w), word.load(R));
        if kw != nw {
            // Padding sorts like the absent bytes it stands for: a key
            // shorter than the prefix that differs only in its padding is
            // a prefix of every stored key, and below them.
            return if kw < nw { Probe::Below } else { Probe::Above };
        }
    }
    if k.bytes.len() < 8 * pw {
        // Equal up to the padding: `k` is a proper prefix of every key.
        return Probe::Below;
    }
    Probe::At(word_of(k.bytes, pw), 8 * pw)
}

/// Compare the stored entry `i` of a node's key arrays with `k`, whose
/// slice in the node's encoding (prefix `p` bytes) is `s`, loading the info
/// word only when the slices tie.
///
/// # Safety
/// As for [`compare`].
#[inline(always)]
pub(super) unsafe fn compare_at(
    slices: &[crate::sync::AtomicU64],
    infos: &[crate::sync::AtomicU64],
    i: usize,
    (s, p): (u64, usize),
    k: &SearchKey<'_>,
) -> Cmp {
    let x = slices[i].load(R);
    if x != s {
        return x.cmp(&s);
    }
    // SAFETY: forwarded contract.
    unsafe { compare_tie(infos[i].load(R), k.bytes, p) }
}

/// The (slice, info) words of a new key for locked leaf `l` of `n`
/// entries: its heap copy (if long), and its slice in the leaf's encoding,
/// the leaf's prefix shrunk first if the key does not share it.
///
/// # Safety
/// As for [`fit_prefix`].
pub(super) unsafe fn stored_in(l: &Leaf, n: usize, k: &SearchKey<'_>) -> (u64, u64) {
    let (_, info) = make_stored(k.bytes);
    // SAFETY: forwarded contract.
    let s = unsafe { fit_prefix(&l.header, &l.slices, &l.infos, n, k.bytes) };
    (s, info)
}

/// First position in the leaf whose key is ≥ `k`, and whether it equals `k`.
///
/// # Safety
/// The caller is pinned (KeyBoxes stay valid); `n ≤ LEAF_WIDTH`.
#[inline(always)]
pub(super) unsafe fn leaf_lower_bound(leaf: &Leaf, n: usize, k: &SearchKey<'_>) -> (usize, bool) {
    let at = match probe(&leaf.header, k) {
        Probe::Below => return (0, false),
        Probe::Above => return (n, false),
        Probe::At(s, p) => (s, p),
    };
    // Fast path: count slices below the key without branches; if no slice
    // ties the key's, that count is the answer.
    let pos = match count_below(&leaf.slices, n, at.0) {
        Ok(pos) => return (pos, false),
        Err(pos) => pos,
    };
    // Every key before `pos` is below `k`. The first tie usually decides
    // (a key of at most 8 bytes that is present); else search the rest.
    // SAFETY: forwarded contract.
    match unsafe { compare_at(&leaf.slices, &leaf.infos, pos, at, k) } {
        Cmp::Less => {}
        Cmp::Equal => return (pos, true),
        Cmp::Greater => return (pos, false),
    }
    let (mut lo, mut hi) = (pos + 1, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        // SAFETY: forwarded contract.
        match unsafe { compare_at(&leaf.slices, &leaf.infos, mid, at, k) } {
            Cmp::Less => lo = mid + 1,
            Cmp::Equal => return (mid, true),
            Cmp::Greater => hi = mid,
        }
    }
    (lo, false)
}

/// The number of a node's first `n` slices below `slice`, or `Err` with
/// the position of the first slice that equals it (then the tie must be
/// broken by the full keys). Slices are sorted (a torn read's garbage is
/// caught by the caller's version check) and the slots from `n` on hold
/// [`UNUSED_SLICE`], which is never below a slice, so this is a lower
/// bound over all `W` slots: a binary search with a fixed number of steps
/// (5 at width 12), no data-dependent branch and no clamping to `n`. Each
/// step is a conditional move, so a mispredicted branch never costs more
/// than the compares saved. That is about a third of the instructions of
/// counting every slice (which this replaced: a quarter of TPC-C's
/// instructions went to node searches), and the padding took another
/// third of each step.
#[inline(always)]
pub(super) fn count_below<const W: usize>(
    slices: &[crate::sync::AtomicU64; W],
    n: usize,
    slice: u64,
) -> Result<usize, usize> {
    let (mut base, mut size) = (0usize, W);
    while size > 1 {
        let half = size / 2;
        let below = slices[base + half].load(R) < slice;
        base += half * below as usize;
        size -= half;
    }
    let pos = base + (slices[base].load(R) < slice) as usize;
    // The first slice not below `slice` is the only one that can equal it.
    if pos < n && slices[pos].load(R) == slice {
        Err(pos)
    } else {
        Ok(pos.min(n))
    }
}

/// The child to follow: the number of separators ≤ `k` (or < `k` when
/// `before`). Child `i` holds the keys in `[sep[i-1], sep[i])`.
///
/// # Safety
/// The caller is pinned; `n ≤ INNER_WIDTH`.
#[inline(always)]
pub(super) unsafe fn child_index(
    inner: &Inner,
    n: usize,
    k: &SearchKey<'_>,
    before: bool,
) -> usize {
    let at = match probe(&inner.header, k) {
        Probe::Below => return 0,
        Probe::Above => return n,
        Probe::At(s, p) => (s, p),
    };
    // Without a tie, "separators ≤ k" and "separators < k" agree.
    let pos = match count_below(&inner.slices, n, at.0) {
        Ok(i) => return i,
        // Every separator before `pos` is below `k`.
        Err(pos) => pos,
    };
    let (mut lo, mut hi) = (pos, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        // SAFETY: forwarded contract.
        let c = unsafe { compare_at(&inner.slices, &inner.infos, mid, at, k) };
        let right = if before {
            c == Cmp::Less
        } else {
            c != Cmp::Greater
        };
        if right {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Look `k` up in leaf `l`, which covers it at version `v`: the lookup,
/// or `None` if the leaf changed since `v` (then nothing read is trusted).
///
/// # Safety
/// The caller is pinned.
#[inline(always)]
pub(super) unsafe fn lookup_in(l: &Leaf, v: u64, k: &SearchKey<'_>) -> Option<Lookup> {
    let n = l.header.count.load(R).min(LEAF_WIDTH);
    // SAFETY: pinned (caller's contract); `n` clamped.
    let (pos, found) = unsafe { leaf_lower_bound(l, n, k) };
    let value = if found { l.values[pos].load(R) } else { 0 };
    if l.header.version.has_changed(v) {
        return None;
    }
    Some(Lookup {
        value: found.then_some(value),
        leaf: LeafRef(NonNull::from(l)),
        version: v,
    })
}
