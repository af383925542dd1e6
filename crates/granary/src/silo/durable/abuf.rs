//! A growable byte buffer whose memory starts on an [`IO_ALIGN`] boundary,
//! so a log buffer can be handed to `write` on a file opened with
//! `O_DIRECT` as it is: the kernel then DMAs from it instead of copying it
//! into the page cache (see `log`).

use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::ptr::NonNull;

use super::format::{self, BlockHeader, BLOCK_HEADER, IO_ALIGN};

/// Bytes `[0, len)` are initialized; the rest of the allocation is not.
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
}

// SAFETY: an owned allocation with no interior sharing, like `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: `&AlignedBuf` only gives out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

// Log and checkpoint records are appended straight into aligned buffers.
impl format::Sink for AlignedBuf {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// `n` rounded up to a multiple of [`IO_ALIGN`].
pub(crate) fn round_up(n: usize) -> usize {
    n.div_ceil(IO_ALIGN) * IO_ALIGN
}

impl AlignedBuf {
    /// An empty buffer with room for at least `cap` bytes.
    pub fn with_capacity(cap: usize) -> AlignedBuf {
        let cap = round_up(cap.max(1));
        let layout = Layout::from_size_align(cap, IO_ALIGN).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout);
        };
        AlignedBuf { ptr, cap, len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `[0, len)` is initialized and owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes it exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Make room for `extra` more bytes (at least doubling when it grows).
    #[inline]
    pub fn reserve(&mut self, extra: usize) {
        if extra > self.cap - self.len {
            self.grow(extra);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, extra: usize) {
        let need = self.len.checked_add(extra).expect("buffer size overflow");
        let mut bigger = AlignedBuf::with_capacity(need.max(2 * self.cap));
        // SAFETY: both allocations are live and distinct; `len` bytes are
        // initialized in the old one and fit in the new one.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), bigger.ptr.as_ptr(), self.len);
        }
        bigger.len = self.len;
        *self = bigger;
    }

    #[inline]
    pub fn extend_from_slice(&mut self, b: &[u8]) {
        self.reserve(b.len());
        // SAFETY: `reserve` made room for `b` after `len`; `b` cannot alias
        // our allocation (we hold `&mut self`).
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), self.ptr.as_ptr().add(self.len), b.len());
        }
        self.len += b.len();
    }

    /// Grow to `n` bytes with zeros, or cut to `n` bytes.
    pub fn resize_zeroed(&mut self, n: usize) {
        if n > self.len {
            self.reserve(n - self.len);
            // SAFETY: `reserve` made room for `n` bytes.
            unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(self.len), 0, n - self.len) };
        }
        self.len = n;
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.cap, IO_ALIGN).expect("valid layout");
        // SAFETY: allocated in `with_capacity` with this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

/// Seal the block in `buf` (its first `BLOCK_HEADER` bytes reserved, the
/// payload after them): write its header over the reserved bytes, then
/// pad it with zeros to a multiple of [`IO_ALIGN`], so it can be written
/// with `O_DIRECT` and the next block starts aligned (docs/FORMAT.md, v02).
pub(crate) fn seal_block(buf: &mut AlignedBuf, magic: u32, epoch: u64, source: u32, count: u32) {
    let body = &buf.as_slice()[BLOCK_HEADER..];
    let h = BlockHeader {
        magic,
        len: body.len() as u32,
        epoch,
        source,
        count,
        body_crc: format::crc(body),
    };
    buf.as_mut_slice()[..BLOCK_HEADER].copy_from_slice(&h.encode());
    buf.resize_zeroed(round_up(buf.len()));
}

/// Open `path` with `o` for aligned writes: with `direct`, with `O_DIRECT`
/// if the file system takes it (tmpfs, for one, may not: then buffered).
/// Every write to such a file must be a multiple of [`IO_ALIGN`] bytes,
/// from `IO_ALIGN`-aligned memory, at an aligned offset.
pub(crate) fn open_aligned(o: &OpenOptions, path: &Path, direct: bool) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    if direct {
        use std::os::unix::fs::OpenOptionsExt;
        let mut d = o.clone();
        d.custom_flags(libc::O_DIRECT);
        match d.open(path) {
            Ok(f) => return Ok(f),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = direct;
    o.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_grows_and_keeps_bytes() {
        let mut b = AlignedBuf::with_capacity(10);
        assert_eq!(b.capacity(), IO_ALIGN);
        for i in 0..3 * IO_ALIGN {
            b.extend_from_slice(&[(i % 251) as u8]);
            assert_eq!(b.as_slice().as_ptr() as usize % IO_ALIGN, 0);
        }
        assert_eq!(b.len(), 3 * IO_ALIGN);
        assert!(b
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i % 251) as u8));
        b.resize_zeroed(3 * IO_ALIGN + 5);
        assert_eq!(&b.as_slice()[3 * IO_ALIGN..], &[0; 5]);
        b.resize_zeroed(7);
        assert_eq!(b.as_slice(), &[0, 1, 2, 3, 4, 5, 6]);
        b.as_mut_slice()[0] = 9;
        assert_eq!(b.as_slice()[0], 9);
        assert_eq!(round_up(0), 0);
        assert_eq!(round_up(1), IO_ALIGN);
        assert_eq!(round_up(IO_ALIGN), IO_ALIGN);
    }
}
