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
use std::ptr::NonNull;

use crate::sync::{fence, spin, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::tid::Tid;

#[repr(C)]
pub(crate) struct Record {
    pub tid: AtomicU64,
    /// The previous version, kept for snapshot transactions (§4.9); older
    /// versions are immutable.
    pub prev: AtomicPtr<Record>,
    len: AtomicU32,
    /// Capacity in bytes, a multiple of 8; immutable.
    cap: u32,
    data: [AtomicU64; 0],
}

const HEADER: usize = std::mem::size_of::<Record>();
const _: () = assert!(HEADER <= 32, "Silo §4.3: record header at most 32 bytes");
// `init_streaming` writes the header as three words in this layout (loom's
// atomics are bigger; it never takes that path).
#[cfg(not(loom))]
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
            // Write each data word once: the value, then zeros.
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
        #[cfg(all(target_arch = "x86_64", not(loom)))]
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
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        // SAFETY: forwarded contract.
        unsafe {
            Record::init_at(p, cap, tid, value, prev)
        }
    }

    /// Free a record.
    ///
    /// # Safety
    /// `p` came from [`Record::alloc`], is freed once, and no thread can
    /// still reach it.
    pub unsafe fn free(p: NonNull<Record>) {
        // SAFETY: caller's contract.
        unsafe {
            let cap = p.as_ref().cap as usize;
            dealloc(p.as_ptr() as *mut u8, layout(cap));
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
                self.cap as usize / 8,
            )
        }
    }

    pub fn capacity(&self) -> usize {
        self.cap as usize
    }

    /// Overwrite the value. The caller holds the lock (or the record is not
    /// yet published); `value.len() <= capacity()`.
    #[inline]
    pub fn store_value(&self, value: &[u8]) {
        debug_assert!(value.len() <= self.cap as usize);
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
        let len = (self.len.load(Ordering::Relaxed) as usize)
            .min(self.cap as usize)
            .min(max);
        let words = self.words();
        let n = len / 8;
        // Fill the spare capacity word by word and set the length once: no
        // zeroing first, no per-word capacity checks.
        out.clear();
        out.reserve(len);
        let dst = out.as_mut_ptr();
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
        // SAFETY: all `len` bytes were just initialised.
        unsafe { out.set_len(len) };
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
        loop {
            let t1 = self.stable_tid();
            if t1.is_absent() {
                out.clear();
                // Absent records carry no value; re-check nothing changed.
                fence(Ordering::Acquire);
                if self.tid.load(Ordering::Relaxed) == t1.0 {
                    return t1;
                }
                continue;
            }
            self.load_prefix(out, max);
            // Acquire fence: the copy happens before the re-check; pairs with
            // the Release fence after locking in `lock`.
            fence(Ordering::Acquire);
            if self.tid.load(Ordering::Relaxed) == t1.0 {
                return t1;
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
        }
    }
}

impl Pool {
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
        if size > CHUNK_BYTES / 16 {
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
            unsafe { p.as_ref() }.cap as usize
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

    #[test]
    fn store_and_load_any_length() {
        for n in [0usize, 1, 7, 8, 9, 100, 257] {
            let v: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let r = Record::alloc(Tid::new(1, 1), &v, 0, std::ptr::null_mut());
            let mut out = Vec::new();
            // SAFETY: just allocated, freed below.
            let rec = unsafe { r.as_ref() };
            let t = rec.read(&mut out);
            assert_eq!(out, v);
            assert_eq!(t, Tid::new(1, 1));
            // SAFETY: freed once, unshared.
            unsafe { Record::free(r) };
        }
    }
}

#[cfg(all(test, loom))]
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
}
