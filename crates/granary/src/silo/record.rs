//! Records (Silo §4.3): a TID word, a previous-version pointer, and the
//! value stored inline in the same allocation.
//!
//! ```text
//! +--------+--------+-----+-----+-------------------------+
//! | tid    | prev   | len | cap | value words …           |
//! | 8 B    | 8 B    | 4 B | 4 B | cap bytes (8-aligned)   |
//! +--------+--------+-----+-----+-------------------------+
//! ```
//!
//! The header is 24 bytes, so a 100-byte value shares the header's cache
//! line for its first 40 bytes. Values are overwritten in place when the new
//! value fits (§4.5), so readers copy them under the seqlock protocol:
//! read the TID word (spinning while locked), copy, fence, re-read. The
//! value words are atomics with Relaxed access (plain moves on x86) so the
//! racing copy is defined behaviour; the re-check discards torn copies.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ops::Range;
use std::ptr::NonNull;

use crate::silo::sync::{fence, spin, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::silo::tid::Tid;

#[repr(C)]
pub(crate) struct Record {
    pub tid: AtomicU64,
    /// The previous version, kept for snapshot transactions (§4.9); older
    /// versions are immutable.
    pub prev: AtomicPtr<Record>,
    len: AtomicU32,
    /// Capacity in bytes, a multiple of 8, or'ed with [`IN_SLAB`] for a
    /// record that lives in a [`Slabs`] slab; immutable once published.
    cap: u32,
    data: [AtomicU64; 0],
}

const HEADER: usize = std::mem::size_of::<Record>();
const _: () = assert!(HEADER <= 32, "Silo §4.3: record header at most 32 bytes");
// `init_streaming` writes the header as three words in this layout (loom's
// atomics are bigger; it never takes that path).
#[cfg(not(feature = "loom"))]
const _: () = assert!(
    HEADER == 24
        && std::mem::offset_of!(Record, tid) == 0
        && std::mem::offset_of!(Record, prev) == 8
        && std::mem::offset_of!(Record, len) == 16
        && std::mem::offset_of!(Record, cap) == 20
);

/// A value as the data words that store it: native-endian, the last one
/// zero padded.
#[inline]
fn value_words(value: &[u8]) -> impl Iterator<Item = u64> + '_ {
    // Whole words as plain loads (a variable-length copy per word would be
    // a `memcpy` call each); only the tail is padded.
    let whole = value.chunks_exact(8);
    let rest = whole.remainder();
    let tail = (!rest.is_empty()).then(|| tail_word(rest));
    whole
        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
        .chain(tail)
}

/// The last, partial data word of a value: its 1..=7 bytes, zero padded.
#[inline]
fn tail_word(rest: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..rest.len()].copy_from_slice(rest);
    u64::from_ne_bytes(b)
}

fn layout(cap: usize) -> Layout {
    Layout::from_size_align(HEADER + cap, 8).expect("record layout")
}

impl Record {
    /// Allocate a record holding `value` (capacity at least `min_cap`).
    pub fn alloc(tid: Tid, value: &[u8], min_cap: usize, prev: *mut Record) -> NonNull<Record> {
        let cap = value.len().max(min_cap).div_ceil(8) * 8;
        let l = layout(cap);
        // SAFETY: non-zero size (the header).
        let p = unsafe { alloc(l) } as *mut Record;
        let Some(p) = NonNull::new(p) else {
            handle_alloc_error(l)
        };
        // SAFETY: fresh allocation of the right layout.
        unsafe { Record::init_at(p, cap, tid, value, prev) }
    }

    /// Build a record in raw memory of `HEADER + cap` bytes, 8-aligned.
    ///
    /// # Safety
    /// `p` is exclusively owned, 8-aligned, with room for `HEADER + cap`
    /// bytes; `cap` is a multiple of 8 and at least `value.len()`.
    unsafe fn init_at(
        p: NonNull<Record>,
        cap: usize,
        tid: Tid,
        value: &[u8],
        prev: *mut Record,
    ) -> NonNull<Record> {
        // SAFETY: per the contract; every field and data word is initialised
        // before anyone can see the record.
        unsafe {
            p.as_ptr().write(Record {
                tid: AtomicU64::new(tid.0),
                prev: AtomicPtr::new(prev),
                len: AtomicU32::new(value.len() as u32),
                cap: cap as u32,
                data: [],
            });
            // The data words hold the value's bytes in order (native-endian
            // words), then zeros: one `memcpy` after zeroing the padding
            // (the last word, unless the capacity is larger), not a loop
            // of word stores (which cost a checkpoint load ~150
            // instructions a record). Nobody can read the record yet, so
            // plain byte writes are fine.
            #[cfg(not(feature = "loom"))]
            {
                let data = std::ptr::addr_of_mut!((*p.as_ptr()).data) as *mut u8;
                let pad = cap - value.len();
                if pad < 8 && cap > 0 {
                    // Zero the last word, then copy over all but its padding.
                    (data.add(cap - 8) as *mut u64).write(0);
                } else {
                    std::ptr::write_bytes(data.add(value.len()), 0, pad);
                }
                std::ptr::copy_nonoverlapping(value.as_ptr(), data, value.len());
            }
            // loom's atomics are bigger than their values: word by word.
            #[cfg(feature = "loom")]
            {
                let words = std::ptr::addr_of_mut!((*p.as_ptr()).data) as *mut AtomicU64;
                let mut i = 0;
                for x in value_words(value) {
                    words.add(i).write(AtomicU64::new(x));
                    i += 1;
                }
                while i < cap / 8 {
                    words.add(i).write(AtomicU64::new(0));
                    i += 1;
                }
            }
        }
        p
    }

    /// As [`Record::init_at`], but with non-temporal stores on x86-64: an
    /// old-version copy is written once and read only by the occasional
    /// snapshot transaction, so it should neither pull its (long-cold)
    /// lines into cache first nor evict hot data. Ends with `sfence`, so a
    /// later Release store that publishes the record orders after it.
    ///
    /// # Safety
    /// As for [`Record::init_at`].
    unsafe fn init_streaming(
        p: NonNull<Record>,
        cap: usize,
        tid: Tid,
        value: &[u8],
        prev: *mut Record,
    ) -> NonNull<Record> {
        #[cfg(all(target_arch = "x86_64", not(feature = "loom")))]
        // SAFETY: exclusively owned, 8-aligned space of HEADER + cap bytes
        // (caller's contract); the header layout is `repr(C)`: tid, prev,
        // len (u32) and cap (u32) in one word, then the data words.
        unsafe {
            use std::arch::x86_64::{_mm_sfence, _mm_stream_si64};
            let w = p.as_ptr() as *mut i64;
            _mm_stream_si64(w, tid.0 as i64);
            _mm_stream_si64(w.add(1), prev as i64);
            let len_cap = if cfg!(target_endian = "little") {
                (value.len() as u64) | ((cap as u64) << 32)
            } else {
                ((value.len() as u64) << 32) | cap as u64
            };
            _mm_stream_si64(w.add(2), len_cap as i64);
            let mut i = 3;
            for x in value_words(value) {
                _mm_stream_si64(w.add(i), x as i64);
                i += 1;
            }
            while i < 3 + cap / 8 {
                _mm_stream_si64(w.add(i), 0);
                i += 1;
            }
            _mm_sfence();
            p
        }
        #[cfg(not(all(target_arch = "x86_64", not(feature = "loom"))))]
        // SAFETY: forwarded contract.
        unsafe {
            Record::init_at(p, cap, tid, value, prev)
        }
    }

    /// Free a record (into its slab, if it lives in one).
    ///
    /// # Safety
    /// `p` came from [`Record::alloc`] or [`Slabs::alloc`], is freed once,
    /// and no thread can still reach it.
    pub unsafe fn free(p: NonNull<Record>) {
        // SAFETY: caller's contract.
        unsafe {
            let cap = p.as_ref().cap;
            if cap & IN_SLAB != 0 {
                release_from_slab(p);
            } else {
                dealloc(p.as_ptr() as *mut u8, layout(cap as usize));
            }
        }
    }

    /// Reuse a freed record's memory for a new version.
    ///
    /// # Safety
    /// `p` is exclusively owned (freed garbage past its grace period) and
    /// `value.len() <= capacity`.
    unsafe fn reinit(
        p: NonNull<Record>,
        tid: Tid,
        value: &[u8],
        prev: *mut Record,
    ) -> NonNull<Record> {
        // SAFETY: exclusively owned, per the contract.
        let r = unsafe { p.as_ref() };
        r.tid.store(tid.0, Ordering::Relaxed);
        r.prev.store(prev, Ordering::Relaxed);
        r.store_value(value);
        p
    }

    #[inline]
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: `alloc` initialised `cap / 8` words after the header.
        unsafe {
            std::slice::from_raw_parts(
                std::ptr::addr_of!(self.data) as *const AtomicU64,
                self.capacity() / 8,
            )
        }
    }

    #[inline]
    pub fn capacity(&self) -> usize {
        (self.cap & !IN_SLAB) as usize
    }

    /// The bytes of the record's header and of the first `max_bytes` of
    /// its value's room (`usize::MAX`: the record's bytes in all).
    #[inline]
    pub fn prefix_footprint(&self, max_bytes: usize) -> usize {
        Record::footprint(self.capacity().min(max_bytes))
    }

    /// The bytes of a record's header and `room` bytes of its value.
    #[inline]
    pub fn footprint(room: usize) -> usize {
        HEADER + room
    }

    /// Overwrite the value. The caller holds the lock (or the record is not
    /// yet published); `value.len() <= capacity()`.
    #[inline]
    pub fn store_value(&self, value: &[u8]) {
        debug_assert!(value.len() <= self.capacity());
        // Whole words first, as one plain loop (a chained iterator with a
        // padded tail cost three times the instructions per word), then the
        // zero-padded tail word.
        let whole = value.chunks_exact(8);
        let rest = whole.remainder();
        let words = self.words();
        let n = value.len() / 8;
        for (w, c) in words[..n].iter().zip(whole) {
            w.store(
                u64::from_ne_bytes(c.try_into().expect("8 bytes")),
                Ordering::Relaxed,
            );
        }
        if !rest.is_empty() {
            words[n].store(tail_word(rest), Ordering::Relaxed);
        }
        self.len.store(value.len() as u32, Ordering::Relaxed);
    }

    /// Copy the value into `out` (no consistency check: the caller
    /// validates, or the version is immutable).
    #[inline]
    pub fn load_value(&self, out: &mut Vec<u8>) {
        self.load_prefix(out, usize::MAX);
    }

    /// As [`Record::load_value`], but at most the first `max` bytes.
    #[inline]
    pub fn load_prefix(&self, out: &mut Vec<u8>, max: usize) {
        self.load_prefix_at(out, 0, max);
    }

    /// As [`Record::load_prefix`], but `out` keeps its first `at` bytes
    /// and the value follows them (a read straight into a write set's
    /// arena, see `Transaction::update`).
    #[inline]
    pub fn load_prefix_at(&self, out: &mut Vec<u8>, at: usize, max: usize) {
        let len = (self.len.load(Ordering::Relaxed) as usize)
            .min(self.capacity())
            .min(max);
        let words = self.words();
        let n = len / 8;
        // Fill the spare capacity word by word and set the length once: no
        // zeroing first, no per-word capacity checks.
        out.truncate(at);
        debug_assert_eq!(out.len(), at, "`at` is within `out`");
        out.reserve(len);
        // SAFETY: `reserve` made room for `len` bytes after `at`.
        let dst = unsafe { out.as_mut_ptr().add(at) };
        for (i, w) in words[..n].iter().enumerate() {
            // SAFETY: `i * 8 + 8 <= len <= capacity`; unaligned store.
            unsafe { (dst.add(i * 8) as *mut u64).write_unaligned(w.load(Ordering::Relaxed)) };
        }
        let rest = len - n * 8;
        if rest > 0 {
            let b = words[n].load(Ordering::Relaxed).to_ne_bytes();
            // SAFETY: `n * 8 + rest == len <= capacity`; `b` has 8 ≥ rest
            // bytes and does not overlap `out`.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst.add(n * 8), rest) };
        }
        // SAFETY: the first `at` bytes were kept, and the `len` after them
        // were just initialised.
        unsafe { out.set_len(at + len) };
    }

    /// Copy the value's bytes `field` (cut to its length, see
    /// [`granary_api::field_within`]) into `out` after its first `at`
    /// bytes, which are kept; returns where the copied bytes start in the
    /// value. Only the words under the field are loaded (no consistency
    /// check: see [`Record::read_field_at`]).
    #[inline]
    pub fn load_field_at(&self, out: &mut Vec<u8>, at: usize, field: &Range<usize>) -> usize {
        let len = (self.len.load(Ordering::Relaxed) as usize).min(self.capacity());
        let r = granary_api::field_within(field, len);
        out.truncate(at);
        let first = r.start / 8;
        for (w, word) in (first..).zip(&self.words()[first..r.end.div_ceil(8)]) {
            let b = word.load(Ordering::Relaxed).to_ne_bytes();
            let (lo, hi) = (r.start.max(w * 8) - w * 8, r.end.min(w * 8 + 8) - w * 8);
            out.extend_from_slice(&b[lo..hi]);
        }
        r.start
    }

    /// Overwrite the value's bytes from `from` on with `bytes`, which lie
    /// within its length (the length stays). The caller holds the lock.
    /// Only the words under them are stored; a word they cover in part
    /// keeps its other bytes.
    #[inline]
    pub fn store_field(&self, from: usize, bytes: &[u8]) {
        let end = from + bytes.len();
        debug_assert!(end <= self.len.load(Ordering::Relaxed) as usize);
        let words = self.words();
        for w in from / 8..end.div_ceil(8) {
            let (lo, hi) = (from.max(w * 8), end.min(w * 8 + 8));
            let src = &bytes[lo - from..hi - from];
            let word = if hi - lo == 8 {
                u64::from_ne_bytes(src.try_into().expect("8 bytes"))
            } else {
                let mut b = words[w].load(Ordering::Relaxed).to_ne_bytes();
                b[lo - w * 8..hi - w * 8].copy_from_slice(src);
                u64::from_ne_bytes(b)
            };
            words[w].store(word, Ordering::Relaxed);
        }
    }

    /// The TID word, spinning while it is locked.
    #[inline]
    pub fn stable_tid(&self) -> Tid {
        loop {
            // Acquire: pairs with the Release unlock in `unlock`, so the
            // writer's value stores are visible.
            let t = self.tid.load(Ordering::Acquire);
            if t & Tid::LOCK == 0 {
                return Tid(t);
            }
            spin();
        }
    }

    /// Silo §4.5 read: a consistent (TID word, value) pair.
    #[inline]
    pub fn read(&self, out: &mut Vec<u8>) -> Tid {
        self.read_prefix(out, usize::MAX)
    }

    /// As [`Record::read`], copying at most the first `max` bytes of the
    /// value; the TID word covers the whole value all the same.
    #[inline]
    pub fn read_prefix(&self, out: &mut Vec<u8>, max: usize) -> Tid {
        self.read_prefix_at(out, 0, max)
    }

    /// As [`Record::read_prefix`], but the value lands after the first
    /// `at` bytes of `out`, which are kept (see
    /// [`Record::load_prefix_at`]).
    #[inline]
    pub fn read_prefix_at(&self, out: &mut Vec<u8>, at: usize, max: usize) -> Tid {
        self.read_with(out, at, |rec, out| rec.load_prefix_at(out, at, max))
            .0
    }

    /// As [`Record::read_prefix_at`], for the value's bytes `field` (see
    /// [`Record::load_field_at`]): a consistent (TID word, field) pair,
    /// and where the field's bytes start in the value. The TID word covers
    /// the whole value all the same.
    #[inline]
    pub fn read_field_at(
        &self,
        out: &mut Vec<u8>,
        at: usize,
        field: &Range<usize>,
    ) -> (Tid, usize) {
        self.read_with(out, at, |rec, out| rec.load_field_at(out, at, field))
    }

    /// The seqlock read (§4.5) both reads share: `load` copies some of the
    /// value to `out` after its first `at` bytes, between a stable TID
    /// word and its re-check, until the two agree. An absent record
    /// carries no value: `out` keeps its first `at` bytes and `load`'s
    /// result is its default.
    #[inline(always)]
    fn read_with<T: Default>(
        &self,
        out: &mut Vec<u8>,
        at: usize,
        load: impl Fn(&Record, &mut Vec<u8>) -> T,
    ) -> (Tid, T) {
        loop {
            let t1 = self.stable_tid();
            let got = if t1.is_absent() {
                out.truncate(at);
                T::default()
            } else {
                load(self, out)
            };
            // Acquire fence: the copy happens before the re-check; pairs with
            // the Release fence after locking in `lock`.
            fence(Ordering::Acquire);
            if self.tid.load(Ordering::Relaxed) == t1.0 {
                return (t1, got);
            }
        }
    }

    /// Acquire the lock bit, spinning; returns the TID word it held.
    #[inline]
    pub fn lock(&self) -> Tid {
        loop {
            let t = self.stable_tid();
            if self.try_lock_from(t) {
                return t;
            }
        }
    }

    /// Lock if the word is still exactly `t` (unlocked).
    #[inline]
    pub fn try_lock_from(&self, t: Tid) -> bool {
        // Acquire: pairs with the previous holder's Release unlock.
        let ok = self
            .tid
            .compare_exchange_weak(t.0, t.0 | Tid::LOCK, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if ok {
            // Release fence: value stores that follow cannot be seen by a
            // reader whose re-check misses the lock; pairs with the Acquire
            // fence in `read`.
            fence(Ordering::Release);
        }
        ok
    }

    /// Publish a new TID word (which must not have the lock bit), releasing
    /// the lock in the same store (Silo §4.4 Phase 3).
    #[inline]
    pub fn unlock(&self, t: Tid) {
        debug_assert!(!t.is_locked());
        // Release: pairs with the Acquire loads in `stable_tid` / `lock`.
        self.tid.store(t.0, Ordering::Release);
    }
}

/// Size of the chunks old-version copies are bump-allocated from.
const CHUNK_BYTES: usize = 1 << 20;
/// Freed chunks kept for reuse per worker.
const SPARE_CHUNKS: usize = 16;

fn chunk_layout() -> Layout {
    Layout::from_size_align(CHUNK_BYTES, 64).expect("chunk layout")
}

/// Free a version chunk's memory.
///
/// # Safety
/// `p` came from a pool's chunk allocation and nothing reaches into it.
pub(crate) unsafe fn free_chunk(p: NonNull<u8>) {
    // SAFETY: allocated with this layout.
    unsafe { dealloc(p.as_ptr(), chunk_layout()) }
}

/// Records of at most this capacity are recycled through a worker's pool.
const POOL_MAX_CAP: usize = 512;
/// At most this many bytes of free records are kept per worker.
const POOL_BYTES_MAX: usize = 4 << 20;

/// A per-worker cache of freed records by capacity, so the old-version
/// copies snapshots need (one per write that crosses a snapshot epoch) do
/// not round-trip through the global allocator. Silo uses per-core
/// allocators for the same reason. Bounded by `POOL_BYTES_MAX`.
pub(crate) struct Pool {
    bins: Vec<Vec<NonNull<Record>>>,
    bytes: usize,
    /// The open chunk for old-version copies: base and bytes used.
    chunk: Option<(NonNull<u8>, usize)>,
    /// The reclamation labels of the newest copy in the open chunk.
    chunk_labels: (u64, u64),
    spare: Vec<NonNull<u8>>,
    /// Whether old-version copies are carved from chunks.
    chunks: bool,
}

// SAFETY: the pool exclusively owns the freed records it holds.
unsafe impl Send for Pool {}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            bins: (0..=POOL_MAX_CAP / 8).map(|_| Vec::new()).collect(),
            bytes: 0,
            chunk: None,
            chunk_labels: (0, 0),
            spare: Vec::new(),
            chunks: true,
        }
    }
}

impl Pool {
    /// A pool that keeps nothing: every record comes from and returns to
    /// the global allocator, and old-version copies are allocated one by
    /// one (`Options::record_pool` off). With no bins, [`Pool::alloc`] and
    /// [`Pool::free`] fall through to [`Record`]'s own at no extra test.
    pub fn unpooled() -> Pool {
        let mut p = Pool::default();
        p.bins = Vec::new();
        p.chunks = false;
        p
    }

    /// Whether freed records are kept for reuse.
    #[cfg(test)]
    pub fn recycles(&self) -> bool {
        !self.bins.is_empty()
    }

    /// As [`Record::alloc`], reusing pooled memory when it can.
    #[inline]
    pub fn alloc(
        &mut self,
        tid: Tid,
        value: &[u8],
        min_cap: usize,
        prev: *mut Record,
    ) -> NonNull<Record> {
        let cap = value.len().max(min_cap).div_ceil(8) * 8;
        if let Some(p) = self.bins.get_mut(cap / 8).and_then(|b| b.pop()) {
            self.bytes -= HEADER + cap;
            // SAFETY: pooled records are exclusively ours, of capacity `cap`.
            return unsafe { Record::reinit(p, tid, value, prev) };
        }
        Record::alloc(tid, value, min_cap, prev)
    }

    /// Allocate an old-version copy (Silo §4.9) whose reclamation labels are
    /// `(snap_label, tree_label)`. Copies are bump-allocated from chunks:
    /// they die in the order they are made (each worker's labels only
    /// grow), so a whole chunk is retired, with its newest copy's labels,
    /// when it fills; copies are never freed one by one. Returns `None` for
    /// copies too large for a chunk (use [`Pool::alloc`] and retire them
    /// individually). A retired chunk is handed to `retire`.
    pub fn alloc_version(
        &mut self,
        tid: Tid,
        value: &[u8],
        prev: *mut Record,
        labels: (u64, u64),
        retire: impl FnOnce(NonNull<u8>, (u64, u64)),
    ) -> Option<NonNull<Record>> {
        let cap = value.len().div_ceil(8) * 8;
        let size = HEADER + cap;
        if !self.chunks || size > CHUNK_BYTES / 16 {
            return None;
        }
        if self
            .chunk
            .is_some_and(|(_, used)| used + size > CHUNK_BYTES)
        {
            let (base, _) = self.chunk.take().expect("open chunk");
            retire(base, self.chunk_labels);
        }
        let (base, used) = match self.chunk {
            Some(c) => c,
            None => {
                let base = self.spare.pop().unwrap_or_else(|| {
                    // SAFETY: non-zero size.
                    let p = unsafe { alloc(chunk_layout()) };
                    NonNull::new(p).unwrap_or_else(|| handle_alloc_error(chunk_layout()))
                });
                (base, 0)
            }
        };
        self.chunk = Some((base, used + size));
        self.chunk_labels = labels;
        // SAFETY: `used + size ≤ CHUNK_BYTES` of a chunk only this pool
        // hands out; 8-aligned since every size is a multiple of 8.
        let p = unsafe { NonNull::new_unchecked(base.as_ptr().add(used) as *mut Record) };
        // SAFETY: exclusively owned fresh space.
        Some(unsafe { Record::init_streaming(p, cap, tid, value, prev) })
    }

    /// Close the open chunk (the worker is going away): hand it to
    /// `retire` with its labels.
    pub fn close_chunk(&mut self, retire: impl FnOnce(NonNull<u8>, (u64, u64))) {
        if let Some((base, _)) = self.chunk.take() {
            retire(base, self.chunk_labels);
        }
    }

    /// Take back a retired chunk whose copies are all unreachable.
    ///
    /// # Safety
    /// As for [`free_chunk`].
    pub unsafe fn recycle_chunk(&mut self, p: NonNull<u8>) {
        if self.spare.len() < SPARE_CHUNKS {
            self.spare.push(p);
        } else {
            // SAFETY: forwarded contract.
            unsafe { free_chunk(p) };
        }
    }

    /// Free (or keep for reuse) a record.
    ///
    /// # Safety
    /// As for [`Record::free`].
    #[inline]
    pub unsafe fn free(&mut self, p: NonNull<Record>, cap: usize) {
        debug_assert_eq!(cap, {
            // SAFETY: the caller hands over an unreachable record.
            unsafe { p.as_ref() }.capacity()
        });
        match self.bins.get_mut(cap / 8) {
            Some(b) if self.bytes + HEADER + cap <= POOL_BYTES_MAX => {
                self.bytes += HEADER + cap;
                b.push(p)
            }
            // SAFETY: forwarded contract.
            _ => unsafe { Record::free(p) },
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        debug_assert!(
            self.chunk.is_none(),
            "open version chunk must be retired first"
        );
        for p in self.spare.drain(..) {
            // SAFETY: spare chunks hold no live copies.
            unsafe { free_chunk(p) };
        }
        for b in &mut self.bins {
            for p in b.drain(..) {
                // SAFETY: pooled records are unreachable and owned here.
                unsafe { Record::free(p) };
            }
        }
    }
}

/// Size and alignment of recovery's record slabs (see [`Slabs`]).
const SLAB_BYTES: usize = 2 << 20;
/// Bytes at the start of a slab for its [`SlabHeader`].
const SLAB_HEADER: usize = 64;
/// Records larger than this get their own allocation, not slab room.
const SLAB_RECORD_MAX: usize = 64 << 10;
/// The top bit of `Record::cap`: the record lives in a slab.
const IN_SLAB: u32 = 1 << 31;
/// The references a [`Slabs`] holds on the slab it is filling: enough that
/// records freed meanwhile cannot release the slab under it.
const OPEN: u64 = 1 << 40;

struct SlabHeader {
    /// [`OPEN`] while the slab is being filled, less one per record freed;
    /// when it is closed, the records it holds still live.
    live: AtomicU64,
    /// Mapped by [`new_slab`], not allocated.
    mapped: bool,
}

const _: () = assert!(std::mem::size_of::<SlabHeader>() <= SLAB_HEADER);

fn slab_layout() -> Layout {
    Layout::from_size_align(SLAB_BYTES, SLAB_BYTES).expect("slab layout")
}

/// A fresh slab: `SLAB_BYTES` aligned to its size, and whether it was
/// mapped (else it came from the allocator). On Linux it is mapped
/// directly and marked `MADV_HUGEPAGE`, so (with transparent huge pages
/// `always` or `madvise`) it faults in as one 2 MiB page instead of 512
/// small ones: a TPC-C recovery took 1.2k page faults instead of 90k, and
/// 0.55 s instead of 0.64 s (docs/BENCHMARKS.md). From the allocator the
/// memory would not qualify: mimalloc has already touched the region. If
/// the mapping fails (at `vm.max_map_count`, say) the allocator serves.
fn new_slab() -> (NonNull<u8>, bool) {
    if let Some(p) = map_slab() {
        return (p, true);
    }
    let l = slab_layout();
    // SAFETY: non-zero size.
    let p = unsafe { alloc(l) };
    (
        NonNull::new(p).unwrap_or_else(|| handle_alloc_error(l)),
        false,
    )
}

/// Give back a slab from [`new_slab`].
///
/// # Safety
/// `base` and `mapped` came from `new_slab`, and nothing in the slab is
/// reachable.
unsafe fn free_slab(base: NonNull<u8>, mapped: bool) {
    if mapped {
        // SAFETY: the slab is exactly one mapping of ours (contract). A
        // failure (no room to split a merged mapping) only leaks it.
        #[cfg(target_os = "linux")]
        let _ = unsafe { libc::munmap(base.as_ptr() as *mut libc::c_void, SLAB_BYTES) };
    } else {
        // SAFETY: allocated by `new_slab` with this layout.
        unsafe { dealloc(base.as_ptr(), slab_layout()) };
    }
}

#[cfg(test)]
std::thread_local! {
    /// Make this thread's slab mappings fail (for tests).
    static MAP_FAILS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// An aligned, `MADV_HUGEPAGE` mapping of `SLAB_BYTES`, if the system
/// gives one.
#[cfg(target_os = "linux")]
fn map_slab() -> Option<NonNull<u8>> {
    #[cfg(test)]
    if MAP_FAILS.with(|f| f.get()) {
        return None;
    }
    // Twice the size, then trim to an aligned slab.
    let len = 2 * SLAB_BYTES;
    // SAFETY: a fresh private anonymous mapping; no existing memory is named.
    let m = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if m == libc::MAP_FAILED {
        return None;
    }
    let m = m as *mut u8;
    let head = m.align_offset(SLAB_BYTES);
    let tail = len - head - SLAB_BYTES;
    // SAFETY: both ranges lie inside the mapping just made, outside the
    // slab, and nothing refers to them.
    unsafe {
        if head > 0 {
            libc::munmap(m as *mut libc::c_void, head);
        }
        if tail > 0 {
            libc::munmap(m.add(head + SLAB_BYTES) as *mut libc::c_void, tail);
        }
    }
    // SAFETY: `head + SLAB_BYTES ≤ len`: inside the mapping.
    let p = unsafe { m.add(head) };
    // A hint: without huge pages the slab still works, in small pages.
    // SAFETY: advice on our own mapping; it changes no contents.
    let _ = unsafe { libc::madvise(p as *mut libc::c_void, SLAB_BYTES, libc::MADV_HUGEPAGE) };
    NonNull::new(p)
}

#[cfg(not(target_os = "linux"))]
fn map_slab() -> Option<NonNull<u8>> {
    None
}

/// A bump allocator for the records recovery loads: millions at once, one
/// thread each. Records are carved one after another from 2 MiB slabs,
/// with no allocator call and no size-class rounding per record: a TPC-C
/// checkpoint loads about 20% faster in 10% less memory than with one
/// `malloc` per record (docs/BENCHMARKS.md); slabs are mapped in huge
/// pages where the system allows ([`new_slab`]). A slab goes back to the
/// system when its last record is freed:
/// [`Record::free`] finds the slab's header by masking the record's
/// address, as slabs are aligned to their size. Freed slab records may be
/// reused through a worker's [`Pool`] like any other.
pub(crate) struct Slabs {
    /// The slab being filled.
    open: Option<NonNull<u8>>,
    /// Bytes of it carved so far (a multiple of 8).
    used: usize,
    /// Records carved from it.
    carved: u64,
}

// SAFETY: the open slab's unused room is exclusively ours; its records are
// shared only through the atomic live count.
unsafe impl Send for Slabs {}

impl Default for Slabs {
    fn default() -> Self {
        Slabs {
            open: None,
            used: SLAB_BYTES,
            carved: 0,
        }
    }
}

impl Slabs {
    /// As [`Record::alloc`] (capacity the value's length, no previous
    /// version), from the open slab.
    pub fn alloc(&mut self, tid: Tid, value: &[u8]) -> NonNull<Record> {
        let cap = value.len().div_ceil(8) * 8;
        let size = HEADER + cap;
        if size > SLAB_RECORD_MAX {
            return Record::alloc(tid, value, 0, std::ptr::null_mut());
        }
        if self.used + size > SLAB_BYTES {
            self.close();
            self.open_slab();
        }
        let base = self.open.expect("a slab was just opened");
        // SAFETY: `[used, used + size)` lies inside the slab and was never
        // handed out; `used` is a multiple of 8, so the record is aligned.
        let p = unsafe { NonNull::new_unchecked(base.as_ptr().add(self.used) as *mut Record) };
        self.used += size;
        self.carved += 1;
        // SAFETY: exclusively owned room for `HEADER + cap` bytes; the flag
        // is set before the record is published.
        unsafe {
            Record::init_at(p, cap, tid, value, std::ptr::null_mut());
            (*p.as_ptr()).cap |= IN_SLAB;
        }
        p
    }

    fn open_slab(&mut self) {
        let (p, mapped) = new_slab();
        // SAFETY: fresh, aligned, and big enough for the header.
        unsafe {
            (p.as_ptr() as *mut SlabHeader).write(SlabHeader {
                live: AtomicU64::new(OPEN),
                mapped,
            })
        };
        self.open = Some(p);
        self.used = SLAB_HEADER;
        self.carved = 0;
    }

    /// Stop filling the open slab: trade the open references for one per
    /// record carved (fewer those already freed).
    fn close(&mut self) {
        if let Some(base) = self.open.take() {
            // SAFETY: our open references keep the slab alive until here.
            unsafe { slab_unref(base, OPEN - self.carved) };
        }
    }
}

impl Drop for Slabs {
    fn drop(&mut self) {
        self.close();
    }
}

/// Drop `n` references to the slab at `base`; the last one frees it.
///
/// # Safety
/// `base` is a live slab on which the caller holds `n` references.
unsafe fn slab_unref(base: NonNull<u8>, n: u64) {
    // SAFETY: a live slab starts with its header.
    let h = unsafe { &*(base.as_ptr() as *const SlabHeader) };
    // Release: this thread's accesses to the slab's records happen before
    // the free; Acquire, for the last: everyone else's do too (as `Arc`).
    if h.live.fetch_sub(n, Ordering::AcqRel) == n {
        #[cfg(test)]
        SLABS_FREED.with(|c| c.set(c.get() + 1));
        // SAFETY: no references remain, so no record in it is reachable.
        unsafe { free_slab(base, h.mapped) };
    }
}

#[cfg(test)]
std::thread_local! {
    /// Slabs this thread has returned to the allocator (for tests).
    static SLABS_FREED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Free a slab record: one reference less on its slab.
///
/// # Safety
/// As for [`Record::free`], and the record is `IN_SLAB`.
unsafe fn release_from_slab(p: NonNull<Record>) {
    let offset = p.as_ptr().addr() & (SLAB_BYTES - 1);
    // Back to the slab's start, keeping the record pointer's provenance.
    let base = p.as_ptr().cast::<u8>().wrapping_sub(offset);
    // SAFETY: the record's slab is live while the record is (its reference
    // is the one dropped here); slabs are aligned to their size.
    unsafe { slab_unref(NonNull::new_unchecked(base), 1) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_copy_reads_back() {
        let mut pool = Pool::default();
        for n in [0usize, 5, 8, 100, 300] {
            let v: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            let mut retired = 0;
            let r = pool
                .alloc_version(Tid::new(3, 9), &v, std::ptr::null_mut(), (0, 0), |_, _| {
                    retired += 1
                })
                .expect("fits a chunk");
            // SAFETY: freshly built, owned by the pool's chunk.
            let rec = unsafe { r.as_ref() };
            let mut out = Vec::new();
            assert_eq!(rec.read(&mut out), Tid::new(3, 9));
            assert_eq!(out, v);
            assert_eq!(rec.capacity(), n.div_ceil(8) * 8);
            assert!(rec.prev.load(Ordering::Relaxed).is_null());
        }
        pool.close_chunk(|c, _| {
            // SAFETY: nothing reaches the test's copies any more.
            unsafe { free_chunk(c) }
        });
    }

    /// Every field of values up to 26 bytes, starting and ending at every
    /// byte (and past the end): the field's bytes are read alone, where
    /// they start is returned, and a store changes those bytes and no
    /// other, whatever words they share.
    #[test]
    fn fields_load_and_store_alone() {
        for n in 0..=26usize {
            let v: Vec<u8> = (0..n).map(|i| i as u8 | 0x40).collect();
            let r = Record::alloc(Tid::new(1, 1), &v, n + 9, std::ptr::null_mut());
            // SAFETY: just allocated, freed below.
            let rec = unsafe { r.as_ref() };
            for s in 0..=n + 3 {
                for e in s..=n + 3 {
                    let want = granary_api::field_within(&(s..e), n);
                    let mut out = vec![9u8; 3];
                    let (t, from) = rec.read_field_at(&mut out, 2, &(s..e));
                    assert_eq!((t, from), (Tid::new(1, 1), want.start), "n={n} {s}..{e}");
                    assert_eq!(&out[..2], &[9, 9]);
                    assert_eq!(&out[2..], &v[want.clone()], "n={n} {s}..{e}");
                    let patch: Vec<u8> = want.clone().map(|i| !(i as u8)).collect();
                    rec.store_field(want.start, &patch);
                    let mut expect = v.clone();
                    expect[want.clone()].copy_from_slice(&patch);
                    let mut all = Vec::new();
                    rec.load_value(&mut all);
                    assert_eq!(all, expect, "n={n} {s}..{e}");
                    rec.store_value(&v);
                }
            }
            // SAFETY: never published.
            unsafe { Record::free(r) };
        }
    }

    #[test]
    fn store_and_load_any_length() {
        for n in [0usize, 1, 7, 8, 9, 100, 257] {
            for min_cap in [0, n + 1, n + 20] {
                let v: Vec<u8> = (0..n).map(|i| i as u8 | 0x80).collect();
                let r = Record::alloc(Tid::new(1, 1), &v, min_cap, std::ptr::null_mut());
                let mut out = Vec::new();
                // SAFETY: just allocated, freed below.
                let rec = unsafe { r.as_ref() };
                let t = rec.read(&mut out);
                assert_eq!(out, v);
                assert_eq!(t, Tid::new(1, 1));
                assert_eq!(rec.capacity(), n.max(min_cap).div_ceil(8) * 8);
                // The data words: the value's bytes, then zeros.
                // SAFETY: `capacity()` initialised bytes follow the header.
                let data = unsafe {
                    std::slice::from_raw_parts(
                        std::ptr::addr_of!(rec.data) as *const u8,
                        rec.capacity(),
                    )
                };
                assert_eq!(&data[..n], &v[..]);
                assert!(
                    data[n..].iter().all(|&b| b == 0),
                    "padding of {n}/{min_cap}"
                );
                // SAFETY: freed once, unshared.
                unsafe { Record::free(r) };
            }
        }
    }

    fn slabs_freed() -> usize {
        SLABS_FREED.with(|c| c.get())
    }

    /// Records carved from slabs read back whole, across slab boundaries;
    /// a slab is returned once, when its last record is freed, whether
    /// records die before or after it is closed; large values get their
    /// own allocation.
    #[test]
    fn slab_records_live_and_die() {
        slab_round(cfg!(target_os = "linux"));
    }

    /// As [`slab_records_live_and_die`], with the slabs from the allocator
    /// (as when the system refuses a mapping).
    #[test]
    fn slabs_from_the_allocator_when_mapping_fails() {
        MAP_FAILS.with(|f| f.set(true));
        slab_round(false);
        MAP_FAILS.with(|f| f.set(false));
    }

    fn slab_round(mapped: bool) {
        let before = slabs_freed();
        let mut slabs = Slabs::default();
        let mut recs = Vec::new();
        let first = slabs.alloc(Tid::new(2, 0), b"first");
        let base = first.as_ptr().addr() & !(SLAB_BYTES - 1);
        // SAFETY: the open slab starts with its header.
        assert_eq!(unsafe { &*(base as *const SlabHeader) }.mapped, mapped);
        recs.push((first, b"first".to_vec()));
        // ~3 slabs' worth of mixed sizes, and one too large for a slab.
        let mut n = 0usize;
        let mut bytes = 0;
        while bytes < 3 * SLAB_BYTES {
            let len = (n * 37) % 700;
            let v: Vec<u8> = (0..len).map(|i| (i + n) as u8).collect();
            let r = slabs.alloc(Tid::new(2, n as u64), &v);
            bytes += HEADER + len.div_ceil(8) * 8;
            recs.push((r, v));
            n += 1;
        }
        let big = vec![9u8; SLAB_RECORD_MAX];
        let r = slabs.alloc(Tid::new(2, 0), &big);
        // SAFETY: live until freed below.
        assert_eq!(unsafe { r.as_ref() }.cap & IN_SLAB, 0);
        recs.push((r, big));
        let mut out = Vec::new();
        for (r, v) in &recs {
            // SAFETY: live until freed below.
            let rec = unsafe { r.as_ref() };
            rec.read(&mut out);
            assert_eq!(&out, v);
            assert_eq!(rec.capacity(), v.len().div_ceil(8) * 8);
        }
        // Free every other record while the last slab is still open, then
        // close it, then free the rest: no slab may go early.
        for (r, _) in recs.iter().step_by(2) {
            // SAFETY: freed once; nothing else reaches it.
            unsafe { Record::free(*r) };
        }
        assert_eq!(slabs_freed(), before, "a slab with live records was freed");
        drop(slabs);
        assert_eq!(slabs_freed(), before);
        for (r, v) in recs.iter().skip(1).step_by(2) {
            // SAFETY: the other half is still live.
            unsafe { r.as_ref() }.read(&mut out);
            assert_eq!(&out, v);
        }
        for (r, _) in recs.iter().skip(1).step_by(2) {
            // SAFETY: freed once; nothing else reaches it.
            unsafe { Record::free(*r) };
        }
        assert!(
            slabs_freed() - before >= 3,
            "every slab is returned with its last record"
        );
    }

    /// A pooled slab record is reused with its slab flag, and freed back
    /// into its slab in the end.
    #[test]
    fn pooled_slab_records_keep_their_slab() {
        let before = slabs_freed();
        let mut slabs = Slabs::default();
        let r = slabs.alloc(Tid::new(1, 1), &[1u8; 40]);
        drop(slabs);
        let mut pool = Pool::default();
        // SAFETY: unpublished, handed to the pool once.
        unsafe { pool.free(r, 40) };
        let again = pool.alloc(Tid::new(1, 2), &[2u8; 33], 0, std::ptr::null_mut());
        assert_eq!(again, r, "the pool reuses the freed record");
        let mut out = Vec::new();
        // SAFETY: live until freed below.
        unsafe { again.as_ref() }.read(&mut out);
        assert_eq!(out, [2u8; 33]);
        assert_eq!(slabs_freed(), before);
        // SAFETY: freed once.
        unsafe { Record::free(again) };
        assert_eq!(slabs_freed(), before + 1);
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    struct Shared(NonNull<Record>);
    // SAFETY: test-only; the record is freed after both threads join.
    unsafe impl Send for Shared {}
    // SAFETY: as above.
    unsafe impl Sync for Shared {}

    /// A writer overwrites a 16-byte value under the TID lock; a reader's
    /// validated read is never torn and its TID matches its value.
    #[test]
    fn tid_lock_word_seqlock() {
        loom::model(|| {
            let r = Arc::new(Shared(Record::alloc(
                Tid::new(1, 0),
                &[1u8; 16],
                0,
                std::ptr::null_mut(),
            )));
            let w = {
                let r = r.clone();
                loom::thread::spawn(move || {
                    // SAFETY: live until the end of the model run.
                    let rec = unsafe { r.0.as_ref() };
                    rec.lock();
                    rec.store_value(&[2u8; 16]);
                    rec.unlock(Tid::new(2, 0));
                })
            };
            // SAFETY: as above.
            let rec = unsafe { r.0.as_ref() };
            let mut out = Vec::new();
            let t = rec.read(&mut out);
            let expect = if t == Tid::new(1, 0) { 1 } else { 2 };
            assert!(
                out.iter().all(|&b| b == expect),
                "torn read {out:?} at {t:?}"
            );
            w.join().unwrap();
            // SAFETY: both threads are done.
            unsafe { Record::free(r.0) };
        });
    }
    /// A writer patches the bytes 4..20 of a 24-byte value under the TID
    /// lock (three words, two in part); a reader's validated read of the
    /// field 2..22 is never torn and matches its TID, and the bytes
    /// outside the patch keep their value.
    #[test]
    fn field_patch_seqlock() {
        loom::model(|| {
            let r = Arc::new(Shared(Record::alloc(
                Tid::new(1, 0),
                &[1u8; 24],
                0,
                std::ptr::null_mut(),
            )));
            let w = {
                let r = r.clone();
                loom::thread::spawn(move || {
                    // SAFETY: live until the end of the model run.
                    let rec = unsafe { r.0.as_ref() };
                    rec.lock();
                    rec.store_field(4, &[2u8; 16]);
                    rec.unlock(Tid::new(2, 0));
                })
            };
            // SAFETY: as above.
            let rec = unsafe { r.0.as_ref() };
            let mut out = Vec::new();
            let (t, from) = rec.read_field_at(&mut out, 0, &(2..22));
            assert_eq!((from, out.len()), (2, 20));
            let patched = t == Tid::new(2, 0);
            for (i, &b) in (2..).zip(&out) {
                let want = if patched && (4..20).contains(&i) {
                    2
                } else {
                    1
                };
                assert_eq!(b, want, "torn field read {out:?} at {t:?}");
            }
            w.join().unwrap();
            // SAFETY: both threads are done.
            unsafe { Record::free(r.0) };
        });
    }

    /// A slab record freed on another thread while the slab is closed:
    /// the close's reference exchange and the free's decrement never lose
    /// the slab under its other, still live record.
    #[test]
    fn slab_close_races_a_free() {
        loom::model(|| {
            let mut slabs = Slabs::default();
            let a = Shared(slabs.alloc(Tid::new(1, 0), &[1u8; 8]));
            let b = slabs.alloc(Tid::new(1, 1), &[2u8; 8]);
            let t = loom::thread::spawn(move || {
                let a = a;
                // SAFETY: freed once; only this thread holds it.
                unsafe { Record::free(a.0) };
            });
            drop(slabs);
            let mut out = Vec::new();
            // SAFETY: `b` is live: its reference keeps the slab.
            unsafe { b.as_ref() }.read(&mut out);
            assert_eq!(out, [2u8; 8]);
            t.join().unwrap();
            // SAFETY: freed once, after the other thread is done.
            unsafe { Record::free(b) };
        });
    }
}
