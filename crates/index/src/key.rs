//! How keys are stored in nodes.
//!
//! Every stored key is two words: its *slice* — the first 8 bytes, zero
//! padded, as a big-endian integer, so most comparisons are one integer
//! compare (Masstree §4.1) — and its *info* word: for keys of at most 8
//! bytes the length itself (0..=8); for longer keys a pointer to an
//! immutable heap copy of the whole key ([`KeyBox`]). Pointers are never
//! ≤ 8, so the two cases cannot be confused.
//!
//! Byte-string order from (slice, info): if the slices differ they decide.
//! Otherwise the first `min(len, 8)` bytes agree and the padding is zeros,
//! so if either key has at most 8 bytes it is a prefix of the other and the
//! shorter sorts first; if both are longer, their tails decide.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cmp::Ordering;
use std::ptr::NonNull;

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

/// Heap copy of a key longer than 8 bytes: `len` then the bytes.
#[repr(C)]
pub(crate) struct KeyBox {
    len: usize,
    bytes: [u8; 0],
}

fn keybox_layout(len: usize) -> Layout {
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
    (slice, p as u64)
}

/// Free the [`KeyBox`] behind `info`, if it is one.
///
/// # Safety
/// `info` must come from `make_stored`, be freed once, and no reader may
/// still hold it.
pub(crate) unsafe fn free_stored(info: u64) {
    if info > INLINE_MAX {
        let p = info as *mut KeyBox;
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
        let p = info as *const KeyBox;
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
    let klen = k.bytes.len();
    if info <= INLINE_MAX {
        return (info as usize).cmp(&klen);
    }
    if klen as u64 <= INLINE_MAX {
        return Ordering::Greater;
    }
    let p = info as *const KeyBox;
    // SAFETY: per the contract the box is live and immutable.
    let stored = unsafe {
        std::slice::from_raw_parts(std::ptr::addr_of!((*p).bytes) as *const u8, (*p).len)
    };
    stored[8..].cmp(&k.bytes[8..])
}

/// An opaque piece of index memory (a removed key's heap copy) handed to a
/// [`Guard`](crate::Guard) to be freed once no reader can still see it.
#[derive(Debug)]
#[must_use = "a retired key leaks unless it is reclaimed"]
pub struct Retired(NonNull<KeyBox>);

// SAFETY: a Retired is an owned, immutable allocation; any thread may free it.
unsafe impl Send for Retired {}

impl Retired {
    pub(crate) fn new(info: u64) -> Option<Retired> {
        (info > INLINE_MAX).then(|| Retired(NonNull::new(info as *mut KeyBox).expect("non-null")))
    }

    /// Free the memory.
    ///
    /// # Safety
    /// No thread may still be inside an operation that started before this
    /// value was retired (the epoch grace period has passed).
    pub unsafe fn reclaim(self) {
        // SAFETY: the pointer came from `make_stored`; the caller vouches for
        // the grace period.
        unsafe { free_stored(self.0.as_ptr() as u64) }
    }
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
