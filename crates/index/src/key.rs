//! How keys are stored in nodes.
//!
//! Every stored key is two words: its *slice* — 8 bytes of it, zero
//! padded, as a big-endian integer, so most comparisons are one integer
//! compare (Masstree §4.1) — and its *info* word: for keys of at most 8
//! bytes the length itself (0..=8); for longer keys a pointer to an
//! immutable heap copy of the whole key ([`KeyBox`]) with the key's length
//! in its top 16 bits. Such words are never ≤ 8, so the two cases cannot
//! be confused.
//!
//! Which 8 bytes the slice holds depends on the node: word `pw` of the key
//! (bytes `8·pw..8·pw + 8`), where every key stored in that node shares its
//! first `8·pw` bytes, the node's *prefix*, and is longer than it (so it
//! has a KeyBox). Most nodes have `pw = 0`: the slice is the key's first
//! 8 bytes. Keys that share a long prefix (YCSB's `user000000…`) would
//! otherwise tie on every slice and be compared out of line; in a node
//! with a prefix they are told apart by the word after it (`tree/search.rs`,
//! `probe`; ARCHITECTURE.md, "Node prefixes").
//!
//! Byte-string order from (slice, info) of two keys that share their first
//! `p = 8·pw` bytes: if the slices differ they decide. Otherwise bytes
//! `p..p + 8` agree up to the padding, so if either key ends by `p + 8` it
//! is a prefix of the other and the shorter sorts first; if both are
//! longer, their tails past `p + 8` decide.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cmp::Ordering;

/// The largest `info` value that is a length rather than a pointer.
pub(crate) const INLINE_MAX: u64 = 8;

/// The comparison form of a key being searched for.
#[derive(Clone, Copy)]
pub(crate) struct SearchKey<'a> {
    pub slice: u64,
    pub bytes: &'a [u8],
}

impl<'a> SearchKey<'a> {
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Self {
        SearchKey {
            slice: slice_of(bytes),
            bytes,
        }
    }
}

/// The first 8 bytes of `bytes`, zero padded, big-endian.
#[inline]
pub(crate) fn slice_of(bytes: &[u8]) -> u64 {
    if bytes.len() >= 8 {
        u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"))
    } else {
        let mut b = [0u8; 8];
        b[..bytes.len()].copy_from_slice(bytes);
        u64::from_be_bytes(b)
    }
}

/// Word `w` of `bytes`: bytes `8·w..8·w + 8`, zero padded, big-endian (0
/// past the end).
#[inline]
pub(crate) fn word_of(bytes: &[u8], w: usize) -> u64 {
    slice_of(bytes.get(8 * w..).unwrap_or(&[]))
}

/// The bits of a boxed key's info word that hold its address; the top 16
/// hold its length (saturated at [`LEN_SATURATED`]).
const ADDR_MASK: u64 = (1 << 48) - 1;
const LEN_SATURATED: u64 = 0xffff;

#[inline]
pub(crate) fn box_of(info: u64) -> *const KeyBox {
    (info & ADDR_MASK) as *const KeyBox
}

/// The length of the key whose info word is `info`.
///
/// # Safety
/// As for [`stored_bytes`] (a key of 65,535 bytes or more is measured in
/// its box).
#[inline]
pub(crate) unsafe fn stored_len(info: u64) -> usize {
    if info <= INLINE_MAX {
        return info as usize;
    }
    let hint = info >> 48;
    if hint < LEN_SATURATED {
        hint as usize
    } else {
        // SAFETY: caller's contract.
        unsafe { (*box_of(info)).len }
    }
}

/// Heap copy of a key longer than 8 bytes: `len` then the bytes.
#[repr(C)]
pub(crate) struct KeyBox {
    pub(crate) len: usize,
    bytes: [u8; 0],
}

pub(crate) fn keybox_layout(len: usize) -> Layout {
    Layout::from_size_align(std::mem::size_of::<usize>() + len, 8).expect("key layout")
}

/// Build the (slice, info) words for `bytes`, allocating a [`KeyBox`] if
/// the key is longer than 8 bytes.
pub(crate) fn make_stored(bytes: &[u8]) -> (u64, u64) {
    let slice = slice_of(bytes);
    if bytes.len() as u64 <= INLINE_MAX {
        return (slice, bytes.len() as u64);
    }
    let layout = keybox_layout(bytes.len());
    // SAFETY: the layout has non-zero size.
    let p = unsafe { alloc(layout) } as *mut KeyBox;
    if p.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `p` is a fresh allocation big enough for the header and
    // `bytes.len()` bytes.
    unsafe {
        std::ptr::addr_of_mut!((*p).len).write(bytes.len());
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            std::ptr::addr_of_mut!((*p).bytes) as *mut u8,
            bytes.len(),
        );
    }
    // User-space addresses fit in 48 bits on the 64-bit targets Rust
    // supports with 4-level page tables (x86-64, AArch64); a larger one
    // would lose its top bits to the length.
    assert!(
        p as u64 & !ADDR_MASK == 0,
        "key copy above the 48-bit address space"
    );
    (
        slice,
        p as u64 | (bytes.len() as u64).min(LEN_SATURATED) << 48,
    )
}

/// Free the [`KeyBox`] behind `info`, if it is one.
///
/// # Safety
/// `info` must come from `make_stored`, be freed once, and no reader may
/// still hold it.
pub(crate) unsafe fn free_stored(info: u64) {
    if info > INLINE_MAX {
        let p = box_of(info) as *mut KeyBox;
        // SAFETY: per the contract `p` is a live KeyBox.
        let len = unsafe { (*p).len };
        // SAFETY: allocated in `make_stored` with this layout.
        unsafe { dealloc(p as *mut u8, keybox_layout(len)) };
    }
}

/// The bytes of a stored key.
///
/// # Safety
/// If `info` is a pointer, its KeyBox must not have been freed, and the
/// result must not outlive it.
#[inline]
pub(crate) unsafe fn stored_bytes(slice: u64, info: u64, buf: &mut [u8; 8]) -> &[u8] {
    if info <= INLINE_MAX {
        *buf = slice.to_be_bytes();
        &buf[..info as usize]
    } else {
        let p = box_of(info);
        // SAFETY: per the contract the box is live and immutable.
        unsafe {
            let len = (*p).len;
            std::slice::from_raw_parts(std::ptr::addr_of!((*p).bytes) as *const u8, len)
        }
    }
}

/// Compare a stored key with a search key.
///
/// # Safety
/// As for [`stored_bytes`]. Under optimistic reads, `slice` and `info` may
/// come from different entries; the result is then meaningless but memory
/// safe, and the caller's version check discards it.
#[inline]
pub(crate) unsafe fn compare(slice: u64, info: u64, k: &SearchKey<'_>) -> Ordering {
    if slice != k.slice {
        return slice.cmp(&k.slice);
    }
    // SAFETY: forwarded contract.
    unsafe { compare_tie(info, k.bytes, 0) }
}

/// Compare a stored key with `k` when both share their first `p` bytes
/// and their slices at `p` (bytes `p..p + 8`, padded) are equal: lengths
/// decide unless both keys go on past `p + 8`, then their tails do (out of
/// line).
///
/// # Safety
/// As for [`compare`]; a torn read's garbage gives a meaningless result,
/// never an out-of-bounds access.
#[inline]
pub(crate) unsafe fn compare_tie(info: u64, k: &[u8], p: usize) -> Ordering {
    // SAFETY: forwarded contract.
    let stored_len = unsafe { stored_len(info) };
    let (rs, rk) = (stored_len.saturating_sub(p), k.len().saturating_sub(p));
    if rs <= 8 || rk <= 8 {
        return rs.cmp(&rk);
    }
    if info <= INLINE_MAX {
        return Ordering::Less; // torn: an inline key is never this long
    }
    let b = box_of(info);
    // SAFETY: per the contract the box is live and immutable.
    let stored = unsafe {
        std::slice::from_raw_parts(std::ptr::addr_of!((*b).bytes) as *const u8, (*b).len)
    };
    fn tail(x: &[u8], p: usize) -> &[u8] {
        x.get(p + 8..).unwrap_or(&[])
    }
    tail(stored, p).cmp(tail(k, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
        let (s, i) = make_stored(a);
        // SAFETY: freshly made, freed below.
        let c = unsafe { compare(s, i, &SearchKey::new(b)) };
        // SAFETY: freed once.
        unsafe { free_stored(i) };
        c
    }

    #[test]
    fn order_matches_bytes() {
        let keys: Vec<&[u8]> = vec![
            b"",
            b"\0",
            b"\0\0",
            b"a",
            b"a\0",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"abcdefghij",
            b"abcdefgi",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for a in &keys {
            for b in &keys {
                assert_eq!(cmp_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }
}
