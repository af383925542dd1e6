//! Editing a node's layout: its shared key prefix and its entries.

use super::*;

/// Shrink a locked node's prefix, if need be, so that it admits `k`: to
/// the words `k` shares with it, keeping `k` longer than the prefix.
/// Returns `k`'s slice in the node's (new) encoding.
///
/// # Safety
/// The node is locked (its version changes before it is unlocked); the
/// caller is pinned; `n` is its entry count.
pub(super) unsafe fn fit_prefix(
    h: &Header,
    slices: &[crate::sync::AtomicU64],
    infos: &[crate::sync::AtomicU64],
    n: usize,
    k: &[u8],
) -> u64 {
    let pw = h.pw.load(R) as usize;
    let mut w = 0;
    while w < pw && k.len() > 8 * (w + 1) && word_of(k, w) == h.prefix[w].load(R) {
        w += 1;
    }
    if w < pw {
        // SAFETY: forwarded contract.
        unsafe { set_prefix(h, slices, infos, n, w, k) };
    }
    word_of(k, w)
}

/// Grow (or keep) a locked node's prefix to the longest its `n` keys
/// allow: the words its first and last key share (every key between them
/// shares them too), with every key longer than the prefix.
///
/// # Safety
/// As for [`fit_prefix`].
pub(super) unsafe fn repack(
    h: &Header,
    slices: &[crate::sync::AtomicU64],
    infos: &[crate::sync::AtomicU64],
    n: usize,
) {
    if n == 0 {
        return;
    }
    let (mut t0, mut t1) = ([0u8; 8], [0u8; 8]);
    // SAFETY: live entries of a locked node (inline keys only where the
    // prefix is empty, so their slice is their first word).
    let first = unsafe { stored_bytes(slices[0].load(R), infos[0].load(R), &mut t0) };
    // SAFETY: as above.
    let last = unsafe { stored_bytes(slices[n - 1].load(R), infos[n - 1].load(R), &mut t1) };
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let mut pw = (common / 8).min(PREFIX_WORDS);
    // The smallest key is the only one that can be as short as the prefix.
    if pw > 0 && first.len() <= 8 * pw {
        pw -= 1;
    }
    if pw != h.pw.load(R) as usize {
        // `first` is a copy in `t0` or an immutable heap copy: re-encoding
        // the slices does not touch it.
        // SAFETY: forwarded contract.
        unsafe { set_prefix(h, slices, infos, n, pw, first) };
    }
}

/// Re-encode a locked node's `n` slices for a prefix of `pw` words, taken
/// from `model` (which every key of the node shares that far).
///
/// # Safety
/// As for [`fit_prefix`].
pub(super) unsafe fn set_prefix(
    h: &Header,
    slices: &[crate::sync::AtomicU64],
    infos: &[crate::sync::AtomicU64],
    n: usize,
    pw: usize,
    model: &[u8],
) {
    for i in 0..n {
        let mut t = [0u8; 8];
        // SAFETY: as in `repack`.
        let b = unsafe { stored_bytes(slices[i].load(R), infos[i].load(R), &mut t) };
        let w = word_of(b, pw);
        slices[i].store(w, R);
    }
    for (w, word) in h.prefix.iter().enumerate() {
        word.store(if w < pw { word_of(model, w) } else { 0 }, R);
    }
    h.pw.store(pw as u8, R);
}

/// Give a new (locked, unpublished) node `to` the prefix of `from`, whose
/// entries it is about to receive as they are encoded.
pub(super) fn copy_prefix(from: &Header, to: &Header) {
    for (a, b) in from.prefix.iter().zip(&to.prefix) {
        b.store(a.load(R), R);
    }
    to.pw.store(from.pw.load(R), R);
}

#[inline]
pub(super) fn copy_entry(leaf: &Leaf, from: usize, to: &Leaf, at: usize) {
    to.slices[at].store(leaf.slices[from].load(R), R);
    to.infos[at].store(leaf.infos[from].load(R), R);
    to.values[at].store(leaf.values[from].load(R), R);
}

#[inline]
pub(super) fn clear_entry(leaf: &Leaf, i: usize) {
    leaf.slices[i].store(UNUSED_SLICE, R);
    leaf.infos[i].store(0, R);
    leaf.values[i].store(0, R);
}

/// Insert an entry at `pos` into a locked leaf holding `n < LEAF_WIDTH`.
pub(super) fn leaf_insert_at(leaf: &Leaf, n: usize, pos: usize, e: (u64, u64, u64)) {
    debug_assert!(n < LEAF_WIDTH && pos <= n);
    for i in (pos..n).rev() {
        copy_entry(leaf, i, leaf, i + 1);
    }
    leaf.slices[pos].store(e.0, R);
    leaf.infos[pos].store(e.1, R);
    leaf.values[pos].store(e.2, R);
    leaf.header.count.store(n + 1, R);
}
