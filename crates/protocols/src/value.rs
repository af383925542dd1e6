//! Values stored with the record that holds them.
//!
//! At a million keys every record a transaction touches is a cache miss;
//! a value in its own heap block is a second, dependent one. Two shapes:
//!
//! * [`Value`]: a short value lives inside the structure that holds it, a
//!   long one on the heap (Deuteronomy's keys).
//! * [`Tail`]: a header and the value's bytes right after it, in one
//!   allocation of the value's size (at least a cache line): one miss
//!   whatever the length (MVCC versions, Partitioned-Store and 2PL rows).

use crate::sync::{AtomicU32, Ordering};
use std::alloc::Layout;
use std::ops::Deref;

use smallvec::SmallVec;

/// Bytes kept inline up to `N`, on the heap beyond.
pub(crate) type Value<const N: usize> = SmallVec<[u8; N]>;

/// A header `H`, then a value's length and room, then the bytes; made by
/// [`Tail::alloc`] and freed by [`Tail::free`]. It derefs to its header.
///
/// `R` says where the room is kept: [`u32`] stores it (a record that is
/// overwritten in place with values of other lengths: 2PL and
/// Partitioned-Store rows, BOHM's data); [`Tight`] keeps none and derives
/// it from the length, the block being the fewest lines that hold the
/// header and the value. That saves the 4 bytes that decide whether a
/// value fits a line fewer: an MVCC version (24 bytes of stamps) holds
/// up to 36 bytes in one line, 100 in two.
#[repr(C)]
pub(crate) struct Tail<H, R: Room = u32> {
    head: H,
    /// The value's length, or [`ABSENT`]. Changed only by the one thread
    /// that may write the record (its owner; see each design); atomic
    /// (relaxed) because a [`Tight`] tail's size is read from it by
    /// others (prefetches), while an owner may overwrite the value with
    /// one that keeps the size.
    len: AtomicU32,
    /// The room, or nothing ([`Tight`]). The value's bytes start right
    /// after this field, which for a [`Tight`] tail may be inside the
    /// struct's trailing padding (never read as part of a `Tail`).
    room: R,
}

/// Where a [`Tail`] keeps the room after its header.
pub(crate) trait Room: Copy {
    /// The room is the fewest bytes that round the block up to whole
    /// lines for the value's length: nothing is stored.
    const TIGHT: bool;
    fn new(cap: u32) -> Self;
    /// The stored room (`None`: derived).
    fn get(self) -> Option<u32>;
}

impl Room for u32 {
    const TIGHT: bool = false;
    fn new(cap: u32) -> Self {
        cap
    }
    fn get(self) -> Option<u32> {
        Some(self)
    }
}

/// A [`Tail`] room that is not stored: see [`Tail`].
#[derive(Clone, Copy)]
pub(crate) struct Tight;

impl Room for Tight {
    const TIGHT: bool = true;
    fn new(_: u32) -> Self {
        Tight
    }
    fn get(self) -> Option<u32> {
        None
    }
}

/// `len` of a record without a value (a deletion).
const ABSENT: u32 = u32::MAX;
const _: () = assert!(granary_api::MAX_VALUE_BYTES < ABSENT as usize);

impl<H, R: Room> Deref for Tail<H, R> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.head
    }
}

impl<H, R: Room> Tail<H, R> {
    /// Where the bytes start: the end of the fields (for a stored room,
    /// the header's size, a multiple of its alignment, which is at most
    /// 8; for a [`Tight`] one it may be 4 bytes short of it).
    const BYTES: usize = std::mem::offset_of!(Self, room) + std::mem::size_of::<R>();

    fn layout(cap: u32) -> Layout {
        Layout::from_size_align(Self::BYTES + cap as usize, 64).expect("value sizes are bounded")
    }

    /// The room for a value of `want` bytes: the rest of the block's last
    /// line.
    fn cap_for(want: usize) -> u32 {
        let cap = ((Self::BYTES + want + 63) & !63) - Self::BYTES;
        u32::try_from(cap).expect("value sizes are bounded")
    }

    /// A record holding `value` (`None`: absent), with room for at least
    /// `room` bytes (a [`Tight`] tail: for the value alone; `room` must
    /// be 0), and at least a cache line in all.
    pub fn alloc(head: H, value: Option<&[u8]>, room: usize) -> *mut Self {
        const { assert!(std::mem::align_of::<H>() <= 8) };
        debug_assert!(!R::TIGHT || room == 0, "a tight tail has no spare room");
        let len = value.map_or(0, <[u8]>::len);
        // The block is a whole number of cache lines: an allocator whose
        // size classes are multiples of 64 (mimalloc's are, from 128 up)
        // then hands out aligned blocks without padding them.
        let cap = Self::cap_for(room.max(len));
        let layout = Self::layout(cap);
        let p = pool::alloc(layout) as *mut Self;
        // SAFETY: freshly allocated, large enough for the header and `len`
        // bytes after it; the bytes are written after the fields, so the
        // header's write does not clobber them.
        unsafe {
            p.write(Tail {
                head,
                len: AtomicU32::new(value.map_or(ABSENT, |_| len as u32)),
                room: R::new(cap),
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
            let layout = Self::layout((*p).room() as u32);
            std::ptr::drop_in_place(p);
            pool::free(p as *mut u8, layout);
        }
    }

    /// `p`'s address with its size in cache lines in the low bits (a
    /// record is 64-byte aligned), for [`Tail::free_tagged`], which then
    /// frees it without reading it: a record freed long after it was last
    /// touched is a cache miss to read. Reads `p`'s header now.
    ///
    /// # Safety
    /// `p` came from [`Tail::alloc`] and is alive.
    pub unsafe fn tagged(p: *mut Self) -> usize {
        // SAFETY: the caller's contract.
        let lines = unsafe { &*p }.footprint() / 64;
        p as usize | if lines < 64 { lines } else { 0 }
    }

    /// Free a record given by [`Tail::tagged`] or by its plain address.
    ///
    /// # Safety
    /// As [`Tail::free`], for the record at the address.
    pub unsafe fn free_tagged(t: usize) {
        let (p, lines) = ((t & !63) as *mut Self, t & 63);
        if lines == 0 || std::mem::needs_drop::<H>() {
            // SAFETY: the caller's contract.
            return unsafe { Self::free(p) };
        }
        // SAFETY: the caller's contract; a header without drop glue, and
        // the layout `alloc` used (`footprint` is `BYTES + room`).
        unsafe {
            pool::free(
                p as *mut u8,
                Self::layout((lines * 64 - Self::BYTES) as u32),
            )
        };
    }

    /// The bytes the record has room for. Constant for the record's life
    /// (a [`Tight`] tail is overwritten only with values that keep it).
    pub fn room(&self) -> usize {
        let derived = || {
            let len = self.len.load(Ordering::Relaxed);
            Self::cap_for(if len == ABSENT { 0 } else { len as usize })
        };
        self.room.get().unwrap_or_else(derived) as usize
    }

    /// The record's bytes in all: its header and its room.
    pub fn footprint(&self) -> usize {
        Self::BYTES + self.room()
    }

    fn bytes(p: *const Self) -> *mut u8 {
        (p as *mut u8).wrapping_add(Self::BYTES)
    }

    /// The value (`None`: absent).
    ///
    /// # Safety
    /// No one writes it meanwhile.
    pub unsafe fn value(&self) -> Option<&[u8]> {
        let len = self.len.load(Ordering::Relaxed);
        // SAFETY: the caller's contract; `len` bytes follow the header.
        (len != ABSENT)
            .then(|| unsafe { std::slice::from_raw_parts(Self::bytes(self), len as usize) })
    }

    /// The value, to change in place.
    ///
    /// # Safety
    /// The caller is the record's one writer, and holds no other
    /// reference to its bytes.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn value_mut(&self) -> Option<&mut [u8]> {
        let len = self.len.load(Ordering::Relaxed);
        // SAFETY: the caller's contract.
        (len != ABSENT)
            .then(|| unsafe { std::slice::from_raw_parts_mut(Self::bytes(self), len as usize) })
    }

    /// Overwrite the value if it fits in the record's room (a [`Tight`]
    /// tail: if it needs the same number of lines); `false` if it does
    /// not (the caller makes a record of the right size).
    ///
    /// # Safety
    /// As [`Tail::value_mut`].
    pub unsafe fn overwrite(&self, value: Option<&[u8]>) -> bool {
        let room = self.room();
        let want = value.map_or(0, <[u8]>::len);
        if want > room || (R::TIGHT && Self::cap_for(want) as usize != room) {
            return false;
        }
        if let Some(v) = value {
            // SAFETY: the caller's contract; `v` fits.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), Self::bytes(self), v.len()) };
        }
        self.len
            .store(value.map_or(ABSENT, |v| v.len() as u32), Ordering::Relaxed);
        true
    }
}

pub(crate) use granary_api::prefetch_for_write;

/// A per-thread cache of freed blocks, by size.
///
/// A version store frees blocks long after it wrote them (an MVCC version
/// lives until a newer one of its key is old enough): with a general
/// allocator each free reads the block's page metadata and each allocation
/// reads the block's free-list link, two dependent cache misses per
/// write on BOHM's 10RMW. Here a freed block's address goes on a stack
/// that is the thread's own, and the next allocation of the same size
/// takes it back: neither touches the block. Blocks may be freed on
/// another thread than the one that allocated them (epoch reclamation runs
/// deferred frees wherever it collects); any thread may keep or return
/// them. A thread that frees
/// more than it keeps hands magazines of 64 blocks to a shared depot, and
/// a thread that runs dry takes one back (Bonwick and Adams's magazines,
/// USENIX ATC 2001): one lock per 64 blocks.
///
/// Blocks of a number of lines that is not a power of two are carved from
/// chunks of the pool's own instead, and never go back to the global
/// allocator: mimalloc serves a 64-aligned request of 3, 5, 6 or 7 lines
/// (or 17: a 1,000-byte version) from its next size class up (a 192-byte
/// block takes 256 bytes; docs/BENCHMARKS.md), where a carved one
/// takes its size. The depot keeps every such block it is given, so the
/// memory they hold is bounded by the most ever in use at once.
mod pool {
    use std::alloc::Layout;

    /// Blocks of 1 to `CLASSES` cache lines are kept.
    const CLASSES: usize = 32;
    /// Each class keeps at most this many bytes per thread; the rest goes
    /// back to the global allocator.
    #[cfg(not(feature = "loom"))]
    const MAX_BYTES: usize = 4 << 20;

    fn class(layout: Layout) -> Option<usize> {
        let lines = layout.size() / 64;
        (layout.align() == 64 && layout.size().is_multiple_of(64) && (1..=CLASSES).contains(&lines))
            .then(|| lines - 1)
    }

    #[cfg(not(feature = "loom"))]
    mod cache {
        use std::alloc::Layout;
        use std::cell::RefCell;
        use std::sync::Mutex;

        use super::{CLASSES, MAX_BYTES};

        /// Blocks move between a thread and the depot this many at a time.
        const MAGAZINE: usize = 64;
        /// The depot keeps at most this many bytes per class (but every
        /// carved block).
        const DEPOT_BYTES: usize = 64 << 20;
        /// The bytes of a chunk that blocks are carved from (about).
        const CHUNK: usize = 256 << 10;

        /// Whether blocks of class `c` are carved from chunks (a number of
        /// lines that is not a power of two).
        pub(super) fn carved(c: usize) -> bool {
            !(c + 1).is_power_of_two()
        }

        /// Give up `blocks` of class `c`: to the global allocator, or, if
        /// carved (they cannot go there), to the depot.
        fn free_all(c: usize, blocks: Vec<*mut u8>) {
            if carved(c) {
                if !blocks.is_empty() {
                    lock(c).push(blocks);
                }
                return;
            }
            let layout = Layout::from_size_align((c + 1) * 64, 64).expect("small");
            for p in blocks {
                // SAFETY: kept by `put`, from the global allocator with
                // this layout, and nowhere else.
                unsafe { std::alloc::dealloc(p, layout) };
            }
        }

        /// A thread's kept blocks by class, and what is left of the chunk
        /// it carves each carved class from (next block, end).
        pub(super) struct Stacks {
            kept: [Vec<*mut u8>; CLASSES],
            chunks: [(usize, usize); CLASSES],
        }

        impl Stacks {
            /// A new block of carved class `c`.
            fn carve(&mut self, c: usize) -> *mut u8 {
                let size = (c + 1) * 64;
                let (next, end) = &mut self.chunks[c];
                if *next == *end {
                    let n = (CHUNK / size).max(1);
                    let layout = Layout::from_size_align(n * size, 4096).expect("small");
                    // SAFETY: a non-zero size.
                    let p = unsafe { std::alloc::alloc(layout) };
                    if p.is_null() {
                        std::alloc::handle_alloc_error(layout);
                    }
                    // Kept reachable: a chunk is never freed.
                    CHUNKS
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(p as usize);
                    (*next, *end) = (p as usize, p as usize + n * size);
                }
                let p = *next as *mut u8;
                *next += size;
                p
            }
        }

        impl Drop for Stacks {
            fn drop(&mut self) {
                for c in 0..CLASSES {
                    let mut blocks = std::mem::take(&mut self.kept[c]);
                    // The rest of a chunk, as blocks for the depot.
                    let (mut next, end) = self.chunks[c];
                    while next < end {
                        blocks.push(next as *mut u8);
                        next += (c + 1) * 64;
                    }
                    free_all(c, blocks);
                }
            }
        }

        /// Every chunk carved from (never freed).
        static CHUNKS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

        /// Class `c`'s depot, locked (a panic while it was held left it
        /// consistent: each change is one push or pop).
        fn lock(c: usize) -> std::sync::MutexGuard<'static, Vec<Vec<*mut u8>>> {
            DEPOT[c].0.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// Full magazines that threads handed back, by class. Reclamation
        /// frees a version on whichever thread collects its epoch's garbage,
        /// so one thread may free more than it allocates; its surplus goes
        /// here, and a thread whose stack runs dry takes a magazine back,
        /// instead of both going to the global allocator (a free there of a
        /// block another thread allocated goes through that thread's
        /// delayed-free list).
        struct Depot(Mutex<Vec<Vec<*mut u8>>>);

        // SAFETY: the pointers are blocks (of the global allocator, or
        // carved), owned by whoever holds them; any thread may use or free
        // them.
        unsafe impl Sync for Depot {}

        static DEPOT: [Depot; CLASSES] = [const { Depot(Mutex::new(Vec::new())) }; CLASSES];

        thread_local! {
            static STACKS: RefCell<Stacks> = const {
                RefCell::new(Stacks {
                    kept: [const { Vec::new() }; CLASSES],
                    chunks: [(0, 0); CLASSES],
                })
            };
        }

        /// A kept block of class `c`. The one the next call will hand out
        /// starts coming into cache now, owned: a writer fills a new block
        /// right away, and stores that miss in every line of it hold up
        /// the compare-and-swap that publishes it (BOHM's 10RMW on Hekaton
        /// spent a fifth of its time there).
        pub(super) fn take(c: usize) -> Option<*mut u8> {
            STACKS
                .try_with(|s| {
                    let mut s = s.try_borrow_mut().ok()?;
                    let st = &mut s.kept[c];
                    if st.is_empty() {
                        if let Some(full) = lock(c).pop() {
                            st.extend(full);
                        } else if carved(c) {
                            return Some(s.carve(c));
                        } else {
                            return None;
                        }
                    }
                    let p = st.pop()?;
                    if let Some(&next) = st.last() {
                        crate::value::prefetch_for_write(next, c + 1);
                    }
                    Some(p)
                })
                .ok()
                .flatten()
        }

        /// Keep `p` (of class `c`); false if it must be freed instead.
        pub(super) fn put(c: usize, p: *mut u8) -> bool {
            let most = (MAX_BYTES / ((c + 1) * 64)).max(2 * MAGAZINE);
            STACKS
                .try_with(|s| {
                    let Ok(mut s) = s.try_borrow_mut() else {
                        return false;
                    };
                    let st = &mut s.kept[c];
                    if st.len() >= most {
                        // Hand a magazine to the depot (from the top: no
                        // block is touched, and the stack does not shift).
                        let full = st.split_off(st.len() - MAGAZINE);
                        let room = DEPOT_BYTES / ((c + 1) * 64 * MAGAZINE);
                        let mut d = lock(c);
                        if d.len() < room || carved(c) {
                            d.push(full);
                        } else {
                            drop(d);
                            free_all(c, full);
                        }
                    }
                    st.push(p);
                    true
                })
                .unwrap_or(false)
        }

        /// Keep `p` (of carved class `c`) in the depot.
        pub(super) fn keep(c: usize, p: *mut u8) {
            lock(c).push(vec![p]);
        }
    }

    /// Under loom, threads are not the OS's: no cache.
    #[cfg(feature = "loom")]
    mod cache {
        pub(super) fn take(_: usize) -> Option<*mut u8> {
            None
        }
        pub(super) fn put(_: usize, _: *mut u8) -> bool {
            false
        }
        pub(super) fn carved(_: usize) -> bool {
            false
        }
        pub(super) fn keep(_: usize, _: *mut u8) {
            unreachable!("nothing is carved under loom")
        }
    }

    /// A block of `layout` (non-zero size).
    pub(super) fn alloc(layout: Layout) -> *mut u8 {
        if let Some(p) = class(layout).and_then(cache::take) {
            return p;
        }
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        p
    }

    /// Free a block from [`alloc`] with the same layout.
    ///
    /// # Safety
    /// `p` came from [`alloc`] with `layout`, and is freed once.
    pub(super) unsafe fn free(p: *mut u8, layout: Layout) {
        if let Some(c) = class(layout) {
            if cache::put(c, p) {
                return;
            }
            if cache::carved(c) {
                // Not the global allocator's to free (this thread is
                // exiting: its own stack is gone).
                return cache::keep(c, p);
            }
        }
        // SAFETY: the caller's contract: a block of a class that is not
        // carved, or of no class, comes from the global allocator with its
        // layout.
        unsafe { std::alloc::dealloc(p, layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_hold_any_length_in_one_block() {
        let short = Tail::<_>::alloc(7u64, Some(b"abc"), 0);
        let long = Tail::<_>::alloc((), Some(&[5; 1000]), 0);
        let gone = Tail::<_>::alloc(1u8, None, 0);
        // SAFETY: ours alone; each freed once.
        unsafe {
            assert_eq!(**short, 7);
            assert_eq!((*short).value(), Some(&b"abc"[..]));
            assert_eq!((*short).room(), 48, "one cache line in all");
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
    fn tight_tails_derive_their_room_and_keep_their_size() {
        type T = Tail<[u64; 3], Tight>;
        assert_eq!(T::BYTES, 28, "no room stored: 4 bytes into the padding");
        let two = T::alloc([1, 2, 3], Some(&[7; 100]), 0);
        let one = T::alloc([4, 5, 6], None, 0);
        // SAFETY: ours alone; each freed once.
        unsafe {
            assert_eq!((*two).footprint(), 128, "28 + 100 bytes: two lines");
            assert_eq!((*one).footprint(), 64);
            assert_eq!(**two, [1, 2, 3], "the value does not clobber the header");
            assert_eq!((*two).value(), Some(&[7; 100][..]));
            assert!((*two).overwrite(Some(&[8; 37])), "still two lines");
            assert_eq!((*two).footprint(), 128);
            assert!(
                !(*two).overwrite(Some(&[8; 36])),
                "one line: a smaller block"
            );
            assert!(!(*two).overwrite(Some(&[8; 101])), "three lines");
            assert!(!(*two).overwrite(None), "a deletion takes one line");
            assert!((*one).overwrite(Some(&[9; 36])));
            assert_eq!((*one).value(), Some(&[9; 36][..]));
            assert!((*one).overwrite(None));
            let t = T::tagged(two);
            assert_eq!(t & 63, 2);
            T::free_tagged(t);
            T::free(one);
        }
    }

    #[test]
    fn freed_blocks_are_reused_and_tags_carry_the_size() {
        let a = Tail::<_>::alloc(3u64, Some(&[1; 1000]), 0);
        // SAFETY: ours alone; freed once.
        let t = unsafe { Tail::tagged(a) };
        assert_eq!(t & !63, a as usize);
        assert_eq!(
            t & 63,
            1024 / 64,
            "16 bytes of header and 1,000 of value: 16 lines"
        );
        // SAFETY: as above.
        unsafe { Tail::<u64>::free_tagged(t) };
        // The thread keeps the block and hands it out again, for the same
        // size only.
        let small = Tail::<_>::alloc(3u64, Some(&[2; 8]), 0);
        assert_ne!(small, a);
        let b = Tail::<_>::alloc(4u64, Some(&[3; 1000]), 0);
        assert_eq!(b, a);
        // SAFETY: ours alone; each freed once (a plain address is a
        // valid tag).
        unsafe {
            assert_eq!((*b).value(), Some(&[3; 1000][..]));
            Tail::<u64>::free_tagged(b as usize);
            Tail::free(small);
        }
    }

    #[test]
    fn a_threads_surplus_of_freed_blocks_goes_to_another_thread() {
        // 16 bytes of header and 1,968 of value: 31 lines, a size no other
        // test uses. A thread keeps at most 4 MiB of a size; one that frees
        // more hands magazines of 64 to the depot.
        const VALUE: usize = 31 * 64 - 16;
        let n = (4 << 20) / (31 * 64) + 64;
        let (tx, rx) = std::sync::mpsc::channel();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        // The freeing thread stays alive while the other allocates: the
        // general allocator would hand its freed blocks back to it alone.
        let a = std::thread::spawn(move || {
            let blocks: Vec<_> = (0..n)
                .map(|_| Tail::<_>::alloc(0u64, Some(&[1; VALUE]), 0))
                .collect();
            let set: std::collections::HashSet<usize> =
                blocks.iter().map(|&b| b as usize).collect();
            for b in blocks {
                // SAFETY: ours alone; each freed once.
                unsafe { Tail::free(b) };
            }
            tx.send(set).unwrap();
            wait.recv().unwrap();
        });
        let freed = rx.recv().unwrap();
        let taken = std::thread::spawn(|| Tail::<_>::alloc(0u64, Some(&[2; VALUE]), 0) as usize)
            .join()
            .unwrap();
        done.send(()).unwrap();
        a.join().unwrap();
        assert!(
            freed.contains(&taken),
            "a thread with no blocks of its own takes a magazine another freed"
        );
        // SAFETY: allocated above, freed once (any thread may free a block).
        unsafe { Tail::<u64>::free(taken as *mut Tail<u64>) };
    }

    /// A block of a number of lines that is not a power of two is carved
    /// (mimalloc serves 3 lines from its 256-byte class): consecutive ones
    /// are adjacent and line-aligned, and a freed one comes back. 27 lines:
    /// a size no other test uses (the depot is shared).
    #[test]
    fn blocks_of_odd_sizes_are_carved_and_reused() {
        const VALUE: usize = 27 * 64 - 8;
        let blocks: Vec<_> = (0..100)
            .map(|i| Tail::<_>::alloc((), Some(&[i as u8; VALUE]), 0))
            .collect();
        let adjacent = blocks
            .windows(2)
            .filter(|w| w[1] as usize == w[0] as usize + 27 * 64)
            .count();
        assert!(adjacent >= 90, "{adjacent} of 99 pairs adjacent");
        for (i, &b) in blocks.iter().enumerate() {
            assert_eq!(b as usize % 64, 0);
            // SAFETY: ours alone.
            assert_eq!(unsafe { (*b).value() }, Some(&[i as u8; VALUE][..]));
        }
        let last = *blocks.last().unwrap();
        for b in blocks {
            // SAFETY: ours alone; each freed once.
            unsafe { Tail::free(b) };
        }
        let again = Tail::<_>::alloc((), Some(&[1; VALUE]), 0);
        assert_eq!(again, last, "the last freed comes back first");
        // SAFETY: ours alone; freed once.
        unsafe { Tail::free(again) };
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
