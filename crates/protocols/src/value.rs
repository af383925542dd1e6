//! Values stored with the record that holds them.
//!
//! At a million keys every record a transaction touches is a cache miss;
//! a value in its own heap block is a second, dependent one. Two shapes:
//!
//! * [`Value`]: a short value (YCSB's and SmallBank's are 8 bytes) lives
//!   inside the record, a long one (TPC-C's rows) on the heap (2PL rows,
//!   whose lock word and bookkeeping come first).
//! * [`Tail`]: a header and the value's bytes right after it, in one
//!   allocation of the value's size (at least a cache line): one miss
//!   whatever the length (MVCC versions, Partitioned-Store rows).

use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::ops::Deref;

use smallvec::SmallVec;

/// Bytes kept inline up to `N`, on the heap beyond.
pub(crate) type Value<const N: usize> = SmallVec<[u8; N]>;

/// A header `H`, then a value's length and room, then the bytes; made by
/// [`Tail::alloc`] and freed by [`Tail::free`]. It derefs to its header.
#[repr(C)]
pub(crate) struct Tail<H> {
    head: H,
    /// The value's length, or [`ABSENT`]. Changed only by the one thread
    /// that may write the record (its owner; see each design).
    len: UnsafeCell<u32>,
    /// The bytes allocated after the header.
    cap: u32,
}

/// `len` of a record without a value (a deletion).
const ABSENT: u32 = u32::MAX;
const _: () = assert!(granary_api::MAX_VALUE_BYTES < ABSENT as usize);

impl<H> Deref for Tail<H> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.head
    }
}

impl<H> Tail<H> {
    /// Where the bytes start (the header's size, a multiple of its
    /// alignment, which is at most 8).
    const BYTES: usize = std::mem::size_of::<Self>();

    fn layout(cap: u32) -> Layout {
        Layout::from_size_align(Self::BYTES + cap as usize, 64).expect("value sizes are bounded")
    }

    /// A record holding `value` (`None`: absent), with room for at least
    /// `room` bytes, and at least a cache line in all.
    pub fn alloc(head: H, value: Option<&[u8]>, room: usize) -> *mut Self {
        const { assert!(std::mem::align_of::<H>() <= 8) };
        let len = value.map_or(0, <[u8]>::len);
        // The block is a whole number of cache lines: an allocator whose
        // size classes are multiples of 64 (mimalloc's are, from 128 up)
        // then hands out aligned blocks without padding them.
        let cap = ((Self::BYTES + room.max(len) + 63) & !63) - Self::BYTES;
        let cap = u32::try_from(cap).expect("value sizes are bounded");
        let layout = Self::layout(cap);
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) } as *mut Self;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: freshly allocated, large enough for the header and `len`
        // bytes after it.
        unsafe {
            p.write(Tail {
                head,
                len: UnsafeCell::new(value.map_or(ABSENT, |_| len as u32)),
                cap,
            });
            if let Some(v) = value {
                std::ptr::copy_nonoverlapping(v.as_ptr(), Self::bytes(p), len);
            }
        }
        p
    }

    /// Drop the header and free the record.
    ///
    /// # Safety
    /// `p` came from [`Tail::alloc`], no one can reach it any more, and
    /// it is freed once.
    pub unsafe fn free(p: *mut Self) {
        // SAFETY: the caller's contract; allocated with this layout.
        unsafe {
            let layout = Self::layout((*p).cap);
            std::ptr::drop_in_place(p);
            std::alloc::dealloc(p as *mut u8, layout);
        }
    }

    /// The bytes the record has room for.
    pub fn room(&self) -> usize {
        self.cap as usize
    }

    fn bytes(p: *const Self) -> *mut u8 {
        (p as *mut u8).wrapping_add(Self::BYTES)
    }

    /// The value (`None`: absent).
    ///
    /// # Safety
    /// No one writes it meanwhile.
    pub unsafe fn value(&self) -> Option<&[u8]> {
        // SAFETY: the caller's contract; `len` bytes follow the header.
        unsafe {
            let len = *self.len.get();
            (len != ABSENT).then(|| std::slice::from_raw_parts(Self::bytes(self), len as usize))
        }
    }

    /// The value, to change in place.
    ///
    /// # Safety
    /// The caller is the record's one writer, and holds no other
    /// reference to its bytes.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn value_mut(&self) -> Option<&mut [u8]> {
        // SAFETY: the caller's contract.
        unsafe {
            let len = *self.len.get();
            (len != ABSENT).then(|| std::slice::from_raw_parts_mut(Self::bytes(self), len as usize))
        }
    }

    /// Overwrite the value if it fits in the record's room; `false` if it
    /// does not (the caller makes a larger record).
    ///
    /// # Safety
    /// As [`Tail::value_mut`].
    pub unsafe fn overwrite(&self, value: Option<&[u8]>) -> bool {
        match value {
            Some(v) if v.len() > self.cap as usize => false,
            // SAFETY: the caller's contract; `v` fits.
            Some(v) => unsafe {
                std::ptr::copy_nonoverlapping(v.as_ptr(), Self::bytes(self), v.len());
                *self.len.get() = v.len() as u32;
                true
            },
            // SAFETY: the caller's contract.
            None => unsafe {
                *self.len.get() = ABSENT;
                true
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_hold_any_length_in_one_block() {
        let short = Tail::alloc(7u64, Some(b"abc"), 0);
        let long = Tail::alloc((), Some(&[5; 1000]), 0);
        let gone = Tail::alloc(1u8, None, 0);
        // SAFETY: ours alone; each freed once.
        unsafe {
            assert_eq!(**short, 7);
            assert_eq!((*short).value(), Some(&b"abc"[..]));
            assert_eq!((*short).cap, 48, "one cache line in all");
            assert!((*short).overwrite(Some(&[1; 48])));
            assert!(!(*short).overwrite(Some(&[1; 49])), "no room");
            (*short).value_mut().unwrap()[0] = 2;
            assert_eq!((*short).value().unwrap()[..2], [2, 1]);
            assert_eq!((*long).value().map(<[u8]>::len), Some(1000));
            assert_eq!((*gone).value(), None);
            assert!((*long).overwrite(None));
            assert_eq!((*long).value(), None);
            assert_eq!(short as usize % 64, 0);
            Tail::free(short);
            Tail::free(long);
            Tail::free(gone);
        }
    }

    #[test]
    fn short_values_stay_inline_and_long_ones_spill() {
        let mut v: Value<24> = Value::new();
        v.extend_from_slice(&[7; 24]);
        assert!(!v.spilled());
        v.clear();
        v.extend_from_slice(&[9; 25]);
        assert!(v.spilled());
        assert_eq!(&v[..], &[9; 25]);
        // Sizes the records count on: the inline bytes plus one word.
        assert_eq!(std::mem::size_of::<Value<24>>(), 32);
        assert_eq!(std::mem::size_of::<Value<32>>(), 40);
        assert_eq!(Tail::<()>::BYTES, 8);
    }
}
