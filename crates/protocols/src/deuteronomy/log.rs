//! Deuteronomy §5.1: a recovery log buffer, reserved latch-free.
//!
//! One 64-bit word holds `USERS` (high 32 bits) and `OFFSET` (low 32
//! bits). A reservation of `size` bytes is one atomic add of
//! `2^32 + size`: it always succeeds, and the `OFFSET` it returns, minus
//! nothing, is where its bytes start (§5.1: the sum returned, minus
//! `SIZE`). A writer copies its bytes in and then subtracts `2^32`.
//!
//! The reservation whose bytes would cross the buffer's end seals it: it
//! gets no space, and it alone must see the buffer written (§5.1: "the
//! sole thread whose atomic-add operation returned an offset beyond buffer
//! end, but whose begin offset was within the buffer extent"). Ours also
//! counts a reservation that begins exactly at the end as the sealer
//! (otherwise a buffer filled to the byte would have none). Reservations
//! after it find the buffer full. Once sealed and with no users left, the
//! buffer's bytes up to where the sealer began are final: ready to be
//! written, and then kept as a version cache (§3.1).
//!
//! A buffer that must go out before it is full (group commit, a reader
//! waiting for durability) is sealed early the same way: a reservation of
//! more than the whole buffer.
//!
//! `OFFSET` grows past the end as late reservations add to it. A thread
//! looks (one plain load) before it adds, and adds nothing to a buffer it
//! sees sealed, so only reservations racing the seal add past it: each at
//! most one buffer's size, one per thread, so with buffers of at most
//! [`MAX_BUFFER`] bytes and fewer than 2^31 / `MAX_BUFFER` threads it
//! cannot carry into `USERS`. (Without the look, a log that stays full —
//! its appenders retrying, its flusher sealing — carried into `USERS`
//! within seconds.)

#[cfg(feature = "loom")]
use loom::cell::UnsafeCell;
#[cfg(not(feature = "loom"))]
use std::cell::UnsafeCell;

use crate::sync::{AtomicU64, Ordering};

/// One user in the `USERS` half of the word.
const USER: u64 = 1 << 32;
/// The `OFFSET` half.
const OFFSET: u64 = USER - 1;

/// The largest buffer (16 MiB).
pub(crate) const MAX_BUFFER: u32 = 1 << 24;

/// What a reservation got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reserved {
    /// Bytes `start..start + size` are the caller's to fill, after which
    /// it must call [`LogBuffer::release`].
    Space(u32),
    /// The reservation crossed the end and sealed the buffer: the caller
    /// holds no space, and must see the buffer written once it is
    /// [`LogBuffer::ready`]; its bytes go to the next buffer.
    Sealer,
    /// The buffer was already sealed: use the next one.
    Full,
}

/// A recovery log buffer.
pub(crate) struct LogBuffer {
    /// `USERS << 32 | OFFSET`.
    word: AtomicU64,
    /// Where the sealer's reservation began: the end of the data. Stored
    /// by the sealer before it gives up its user, so whoever sees the
    /// buffer sealed with no users sees it.
    sealed_at: AtomicU64,
    capacity: u32,
    /// The sequence number of the log buffer it holds (set while the
    /// [`Log`] owns it alone, before it is published).
    seq: u64,
    bytes: Box<[UnsafeCell<u8>]>,
}

// SAFETY: a byte is written only by the one reservation that owns it,
// before that reservation's release; it is read only after the buffer is
// sealed and every user has released (the Acquire load of the word that
// sees no users follows every release).
unsafe impl Sync for LogBuffer {}

/// `n` zero bytes, each a cell: one zeroed allocation (the allocator
/// hands out fresh pages, which are zero already, without writing them;
/// a cell at a time, the bytes were written one by one, or memset, each
/// time a buffer was made).
#[cfg(not(feature = "loom"))]
fn zeroed(n: usize) -> Box<[UnsafeCell<u8>]> {
    let bytes = vec![0u8; n].into_boxed_slice();
    // SAFETY: `UnsafeCell<u8>` has the same layout as `u8`
    // (`repr(transparent)`), so the box's pointer, length and allocation
    // are those of a `[UnsafeCell<u8>]` of the same bytes.
    unsafe { Box::from_raw(Box::into_raw(bytes) as *mut [UnsafeCell<u8>]) }
}

/// Under loom a cell is loom's, which is not a bare byte: made one by one.
#[cfg(feature = "loom")]
fn zeroed(n: usize) -> Box<[UnsafeCell<u8>]> {
    (0..n).map(|_| UnsafeCell::new(0)).collect()
}

impl LogBuffer {
    /// An empty buffer of `capacity` bytes (1..=[`MAX_BUFFER`]).
    pub fn new(capacity: u32) -> LogBuffer {
        assert!(
            (1..=MAX_BUFFER).contains(&capacity),
            "log buffer of {capacity} bytes"
        );
        LogBuffer {
            word: AtomicU64::new(0),
            sealed_at: AtomicU64::new(0),
            capacity,
            seq: 0,
            bytes: zeroed(capacity as usize),
        }
    }

    /// Its size in bytes.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Whether it is sealed (a reservation crossed its end).
    fn is_sealed(&self) -> bool {
        self.word.load(Ordering::Relaxed) & OFFSET > u64::from(self.capacity)
    }

    /// Whether anything was reserved in it yet.
    pub fn is_empty(&self) -> bool {
        self.reserved() == 0
    }

    /// How many bytes were reserved in it so far (past its capacity once
    /// sealed).
    pub fn reserved(&self) -> u64 {
        // Acquire: as every load of the word that may see users' releases; only
        // the count is used here.
        self.word.load(Ordering::Acquire) & OFFSET
    }

    /// Empty it for reuse as log buffer `seq` (its bytes are left as they
    /// were: every byte is written before it is read).
    fn reset(&mut self, seq: u64) {
        self.word = AtomicU64::new(0);
        self.sealed_at = AtomicU64::new(0);
        self.seq = seq;
    }

    /// Reserve `size` bytes (1..=capacity): one atomic add (§5.1).
    pub fn reserve(&self, size: u32) -> Reserved {
        debug_assert!((1..=self.capacity).contains(&size));
        if self.is_sealed() {
            // Adding to a sealed buffer's OFFSET would only grow it: while
            // the log is full, threads come back again and again.
            return Reserved::Full;
        }
        // AcqRel: the reservation, one RMW on the word ordered with the seal
        // and the releases (what carries the bytes is `release`'s Release and
        // `ready`'s Acquire).
        let old = self
            .word
            .fetch_add(USER + u64::from(size), Ordering::AcqRel);
        let start = old & OFFSET;
        if start + u64::from(size) <= u64::from(self.capacity) {
            return Reserved::Space(start as u32);
        }
        let sealer = start <= u64::from(self.capacity);
        if sealer {
            self.sealed_at.store(start, Ordering::Relaxed);
        }
        // No space: we are not a user after all.
        // Release: the user goes after `sealed_at` is stored: whoever sees no
        // users (`ready`, Acquire) sees it.
        self.word.fetch_sub(USER, Ordering::Release);
        match sealer {
            true => Reserved::Sealer,
            false => Reserved::Full,
        }
    }

    /// Seal the buffer now, if no one has (a reservation of more than all
    /// of it). True if this call sealed it: the caller must then see it
    /// written, as a [`Reserved::Sealer`].
    pub fn seal(&self) -> bool {
        if self.is_sealed() {
            return false;
        }
        // AcqRel: the sealing reservation, an RMW on the word as in `reserve`.
        let old = self
            .word
            .fetch_add(USER + u64::from(self.capacity) + 1, Ordering::AcqRel);
        let start = old & OFFSET;
        let sealer = start <= u64::from(self.capacity);
        if sealer {
            self.sealed_at.store(start, Ordering::Relaxed);
        }
        // Release: as in `reserve`: `sealed_at` is seen by whoever sees no
        // users left.
        self.word.fetch_sub(USER, Ordering::Release);
        sealer
    }

    /// Copy `data` to `start` in a reservation of ours.
    ///
    /// # Safety
    /// `start..start + data.len()` lies within a [`Reserved::Space`] this
    /// caller got and has not released.
    pub unsafe fn write(&self, start: u32, data: &[u8]) {
        let at = &self.bytes[start as usize..start as usize + data.len()];
        #[cfg(not(feature = "loom"))]
        // SAFETY: the caller owns these bytes; the pointer comes from the
        // whole range of cells (not one cell), and cells may be written
        // through a shared reference.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                UnsafeCell::raw_get(at.as_ptr()),
                data.len(),
            );
        }
        #[cfg(feature = "loom")]
        for (cell, &b) in at.iter().zip(data) {
            // SAFETY: as above.
            cell.with_mut(|p| unsafe { *p = b });
        }
    }

    /// Done filling a reservation (§5.1: subtract `2^32`).
    pub fn release(&self) {
        // Release: publishes the bytes we copied in: whoever sees no users left
        // (`ready`, Acquire) sees them.
        self.word.fetch_sub(USER, Ordering::Release);
    }

    /// If the buffer is sealed and no one is still filling it: how many
    /// of its bytes hold data (everything before the sealer's start).
    pub fn ready(&self) -> Option<u32> {
        // Acquire: pairs with every user's Release: with no users left, every
        // byte and `sealed_at` are seen.
        let w = self.word.load(Ordering::Acquire);
        let sealed = w & OFFSET > u64::from(self.capacity);
        (w >> 32 == 0 && sealed).then(|| self.sealed_at.load(Ordering::Relaxed) as u32)
    }

    /// How many of its bytes hold data, once [`LogBuffer::ready`] has
    /// said so: unlike `ready`, which a late reservation's passing visit
    /// to `USERS` can hide for a moment, this stays put.
    pub fn sealed_len(&self) -> u32 {
        self.sealed_at.load(Ordering::Relaxed) as u32
    }

    /// Bytes `start..start + len`, written by a reservation that has
    /// been released.
    ///
    /// # Safety
    /// Their writer's release happened before this call, and the range is
    /// within what it wrote.
    pub unsafe fn read_at(&self, start: u32, len: u32) -> Vec<u8> {
        let at = &self.bytes[start as usize..(start + len) as usize];
        #[cfg(not(feature = "loom"))]
        // SAFETY: final bytes (the caller's contract), contiguous cells.
        return unsafe { std::slice::from_raw_parts(at.as_ptr().cast::<u8>(), at.len()) }.to_vec();
        #[cfg(feature = "loom")]
        // SAFETY: as above.
        at.iter().map(|c| c.with(|p| unsafe { *p })).collect()
    }

    /// Bytes `0..len` of a buffer that is [`ready`](LogBuffer::ready).
    ///
    /// # Safety
    /// The buffer is ready and `len` is at most what `ready` returned.
    pub unsafe fn read(&self, len: u32) -> Vec<u8> {
        // SAFETY: the caller's contract: every byte before `len` is final.
        unsafe { self.read_at(0, len) }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn reservations_tile_the_buffer_and_one_seals_it() {
        let b = LogBuffer::new(10);
        assert_eq!(b.reserve(4), Reserved::Space(0));
        assert_eq!(b.reserve(6), Reserved::Space(4));
        assert_eq!(b.ready(), None, "full but not sealed");
        // Begins exactly at the end: it seals.
        assert_eq!(b.reserve(1), Reserved::Sealer);
        assert_eq!(b.reserve(3), Reserved::Full);
        assert_eq!(b.ready(), None, "two users still filling");
        // SAFETY: our reservations.
        unsafe {
            b.write(0, b"abcd");
            b.write(4, b"efghij");
        }
        b.release();
        assert_eq!(b.ready(), None);
        b.release();
        assert_eq!(b.ready(), Some(10));
        // SAFETY: ready, 10 bytes.
        assert_eq!(unsafe { b.read(10) }, b"abcdefghij");
        assert!(!b.seal(), "already sealed");
    }

    /// A log that stays full keeps its appenders retrying and its
    /// flusher sealing: none of that may grow a sealed buffer's OFFSET
    /// (it carried into USERS once, and buffers read as garbage).
    #[test]
    fn a_sealed_buffer_does_not_grow() {
        let b = LogBuffer::new(1 << 20);
        assert!(b.seal());
        let w = b.word.load(Ordering::Relaxed);
        for _ in 0..100_000 {
            assert_eq!(b.reserve(1 << 20), Reserved::Full);
            assert!(!b.seal());
        }
        assert_eq!(b.word.load(Ordering::Relaxed), w);
        assert_eq!(b.ready(), Some(0));
    }

    #[test]
    fn a_straddling_reservation_seals_and_gets_nothing() {
        let b = LogBuffer::new(10);
        assert_eq!(b.reserve(7), Reserved::Space(0));
        assert_eq!(b.reserve(7), Reserved::Sealer);
        assert_eq!(b.reserve(1), Reserved::Full);
        b.release();
        assert_eq!(b.ready(), Some(7));
    }

    #[test]
    fn sealing_early_keeps_what_was_written() {
        let b = LogBuffer::new(100);
        assert_eq!(b.reserve(3), Reserved::Space(0));
        // SAFETY: ours.
        unsafe { b.write(0, b"xyz") };
        b.release();
        assert_eq!(b.ready(), None);
        assert!(b.seal());
        assert!(!b.seal());
        assert_eq!(b.reserve(1), Reserved::Full);
        assert_eq!(b.ready(), Some(3));
        // SAFETY: ready, 3 bytes.
        assert_eq!(unsafe { b.read(3) }, b"xyz");
        let empty = LogBuffer::new(8);
        assert!(empty.seal());
        assert_eq!(empty.ready(), Some(0));
    }

    /// Threads hammer one buffer after another: every reservation is
    /// disjoint from the others, exactly one thread seals each buffer,
    /// and the bytes read once it is ready are exactly what the holders
    /// wrote.
    #[test]
    fn threads_fill_buffers_without_overlap() {
        for _ in 0..50 {
            let b = LogBuffer::new(4096);
            let sealers = crate::sync::AtomicU32::new(0);
            let spans = std::sync::Mutex::new(Vec::new());
            std::thread::scope(|s| {
                for t in 0..4u8 {
                    let (b, sealers, spans) = (&b, &sealers, &spans);
                    s.spawn(move || loop {
                        let size = 1 + u32::from(t) * 7;
                        match b.reserve(size) {
                            Reserved::Space(at) => {
                                // SAFETY: ours until released.
                                unsafe { b.write(at, &vec![t + 1; size as usize]) };
                                b.release();
                                spans.lock().unwrap().push((at, size, t + 1));
                            }
                            Reserved::Sealer => {
                                sealers.fetch_add(1, Ordering::Relaxed);
                                return;
                            }
                            Reserved::Full => return,
                        }
                    });
                }
            });
            assert_eq!(sealers.into_inner(), 1);
            let len = b.ready().expect("sealed, no users");
            // SAFETY: ready.
            let bytes = unsafe { b.read(len) };
            let mut spans = spans.into_inner().unwrap();
            spans.sort_unstable();
            let mut next = 0;
            for (at, size, t) in spans {
                assert_eq!(at, next, "reservations tile the buffer");
                assert!(bytes[at as usize..(at + size) as usize]
                    .iter()
                    .all(|&x| x == t));
                next = at + size;
            }
            assert_eq!(next, len);
        }
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Two writers and a thread that seals early: whichever of the three
    /// seals the buffer waits until it is ready and reads it, while the
    /// others may still be writing — so the bytes it reads are ordered
    /// after every write only by the word (loom checks the byte cells for
    /// races). Exactly one seals; each writer's bytes are in the buffer in
    /// full at a disjoint place, or it got no space.
    #[test]
    fn loom_reserve_write_seal() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let buf = Arc::new(LogBuffer::new(4));
            // What the sealer read, if this thread sealed.
            fn flush(buf: &LogBuffer) -> Vec<u8> {
                loop {
                    if let Some(len) = buf.ready() {
                        // SAFETY: ready.
                        return unsafe { buf.read(len) };
                    }
                    loom::thread::yield_now();
                }
            }
            let writers: Vec<_> = (1..=2u8)
                .map(|t| {
                    let buf = Arc::clone(&buf);
                    loom::thread::spawn(move || match buf.reserve(2) {
                        Reserved::Space(at) => {
                            // SAFETY: ours until released.
                            unsafe { buf.write(at, &[t, t]) };
                            buf.release();
                            (Some(at), None)
                        }
                        Reserved::Sealer => (None, Some(flush(&buf))),
                        Reserved::Full => (None, None),
                    })
                })
                .collect();
            let early = buf.seal().then(|| flush(&buf));
            let results: Vec<_> = writers.into_iter().map(|h| h.join().unwrap()).collect();
            let mut flushed: Vec<Vec<u8>> = results.iter().filter_map(|r| r.1.clone()).collect();
            flushed.extend(early);
            assert_eq!(flushed.len(), 1, "one sealer: {results:?}");
            let bytes = &flushed[0];
            let mut placed: Vec<u32> = results.iter().filter_map(|r| r.0).collect();
            placed.sort_unstable();
            assert_eq!(bytes.len(), placed.len() * 2, "{results:?}");
            for (i, at) in placed.iter().enumerate() {
                assert_eq!(*at as usize, 2 * i);
                let pair = &bytes[2 * i..2 * i + 2];
                assert!(pair[0] == pair[1] && pair[0] != 0, "{bytes:?}");
            }
        });
    }
}

/// A log sequence number: the buffer's sequence number in the high 32
/// bits, the byte offset in it in the low 32.
pub(crate) type Lsn = u64;

/// Slots for buffers in use: buffer `seq` lives in slot `seq % SLOTS`.
/// More buffers in use at once than this count as a full log.
pub(crate) const SLOTS: usize = 1 << 16;

/// The log has no free buffer (every one is written but not yet applied
/// at the data component and recycled): the appender waits, or sheds
/// load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Full;

/// The recovery log: buffers in sequence, the active one filled by
/// [`Log::append`]. The sealer of each buffer (or a thread that found it
/// full, §5.1's lock-free discipline) installs the next one and makes it
/// active. The TC Proxy scans sealed buffers in sequence; once a buffer
/// is no longer needed it is [recycled](Log::recycle) into a pool, past
/// an epoch grace period, and reused for a later sequence number.
///
/// Memory ordering: a buffer is fully made (reset, its sequence number
/// set) before the CAS that installs it in its slot (AcqRel), and found
/// through an Acquire load of the slot; the active number moves by CAS
/// (AcqRel) only after the buffer it names is installed, so an Acquire
/// load of it finds that buffer. A reader checks the buffer's sequence
/// number: a slot emptied or reused for a later buffer reads as gone.
pub(crate) struct Log {
    slots: Box<[AtomicPtrCell]>,
    /// The sequence number of the buffer being filled.
    active: AtomicU64,
    /// The highest sequence number ever installed (claimed by its one
    /// installer before it stores the buffer).
    installed: AtomicU64,
    capacity: u32,
    /// Recycled buffers, ready for reuse, and how many buffers exist.
    pool: std::sync::Arc<std::sync::Mutex<Pool>>,
    /// The most buffers that may exist at once.
    budget: usize,
}

#[derive(Default)]
struct Pool {
    free: Vec<LogBuffer>,
    made: usize,
}

type AtomicPtrCell = crate::sync::AtomicPtr<LogBuffer>;

impl Log {
    /// A log of buffers of `capacity` bytes, at most `budget` of them (at
    /// least 2) in memory at once, the first one active.
    pub fn new(capacity: u32, budget: usize) -> Log {
        Log::starting_at(capacity, budget, 0)
    }

    /// As [`Log::new`], its first buffer numbered `seq` (a recovered
    /// log continues its sequence).
    pub fn starting_at(capacity: u32, budget: usize, seq: u64) -> Log {
        let slots: Box<[AtomicPtrCell]> = (0..SLOTS).map(|_| AtomicPtrCell::default()).collect();
        let mut first = Box::new(LogBuffer::new(capacity));
        first.reset(seq);
        // Release: publishes the first buffer, made above, as every install
        // (type doc).
        slots[seq as usize % SLOTS].store(Box::into_raw(first), Ordering::Release);
        Log {
            slots,
            active: AtomicU64::new(seq),
            installed: AtomicU64::new(seq),
            capacity,
            pool: std::sync::Arc::new(std::sync::Mutex::new(Pool {
                free: Vec::new(),
                made: 1,
            })),
            budget: budget.clamp(2, SLOTS),
        }
    }

    /// The size of each buffer.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// How many buffers exist (in use or pooled).
    pub fn buffers(&self) -> usize {
        self.pool.lock().expect("pool").made
    }

    /// The most buffers it keeps (appends find the log full beyond it).
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// How many buffers are in use (installed, not yet back in the pool).
    pub fn in_use(&self) -> usize {
        let pool = self.pool.lock().expect("pool");
        pool.made - pool.free.len()
    }

    /// How full the active buffer is, as a fraction of its capacity (0 if
    /// it is being installed).
    pub fn active_fill(&self) -> f64 {
        self.buffer(self.active())
            .map_or(0.0, |b| b.reserved() as f64 / f64::from(self.capacity))
    }

    /// Buffer `seq`, if it is installed and not recycled. A buffer found
    /// here stays valid while the caller is pinned (recycling waits for
    /// a grace period), or until the caller recycles it (the TC Proxy).
    pub fn buffer(&self, seq: u64) -> Option<&LogBuffer> {
        // Acquire: pairs with the installer's Release: the buffer is seen fully
        // made (reset, numbered).
        let p = self.slots[seq as usize % SLOTS].load(Ordering::Acquire);
        // SAFETY: an installed buffer is freed or reused only after it is
        // unlinked from its slot and a grace period has passed.
        let b = unsafe { p.as_ref() }?;
        (b.seq == seq).then_some(b)
    }

    /// The sequence number of the buffer being filled.
    pub fn active(&self) -> u64 {
        // Acquire: the active number moves only after its buffer is installed
        // (type doc), so the buffer it names is found.
        self.active.load(Ordering::Acquire)
    }

    /// Append `data` (at most one buffer): where it went, or [`Full`] if
    /// the log needs a buffer it may not make (nothing was written then).
    ///
    /// # Panics
    /// If `data` is empty or larger than a buffer.
    pub fn append(&self, data: &[u8]) -> Result<Lsn, Full> {
        self.append_with(data, false)
    }

    /// As [`Log::append`], past the budget if need be: for the records
    /// that let the log drain (a transaction's outcome), which must never
    /// wait for the log to drain. Fails only with every slot in use.
    pub fn append_forced(&self, data: &[u8]) -> Result<Lsn, Full> {
        self.append_with(data, true)
    }

    fn append_with(&self, data: &[u8], force: bool) -> Result<Lsn, Full> {
        let len = u32::try_from(data.len()).expect("record fits a buffer");
        assert!(
            len >= 1 && len <= self.capacity,
            "log record of {len} bytes"
        );
        loop {
            // Acquire: as in `active`: the buffer it names is installed and
            // seen.
            let seq = self.active.load(Ordering::Acquire);
            let Some(buf) = self.buffer(seq) else {
                // Its installer has claimed it and is storing it.
                std::hint::spin_loop();
                continue;
            };
            match buf.reserve(len) {
                Reserved::Space(at) => {
                    // SAFETY: our reservation.
                    unsafe { buf.write(at, data) };
                    buf.release();
                    return Ok((seq << 32) | u64::from(at));
                }
                Reserved::Sealer | Reserved::Full => self.advance(seq, force)?,
            }
        }
    }

    /// Seal the active buffer now (group commit), if it holds anything:
    /// true if this call sealed it. It then makes the next buffer active
    /// if the budget allows; if not, appenders find the log full until a
    /// buffer is recycled (and outcome records, which must go in, take
    /// one past the budget).
    pub fn seal_active(&self) -> bool {
        // Acquire: as in `active`: the buffer it names is installed and seen.
        let seq = self.active.load(Ordering::Acquire);
        let Some(buf) = self.buffer(seq) else {
            return false; // Being installed: nothing in it yet.
        };
        if buf.is_empty() {
            return false;
        }
        let sealed = buf.seal();
        let _ = self.advance(seq, false);
        sealed
    }

    /// Make buffer `seq + 1` active (if `seq` still is), installing it if
    /// no one has (past the budget if `force`).
    fn advance(&self, seq: u64, force: bool) -> Result<(), Full> {
        self.advance_to(seq, force)?;
        // AcqRel: the active number moves after the buffer it names is
        // installed: Release passes the installation on to `active`'s Acquire
        // loads; Acquire sees a rival's move.
        let _ = self
            .active
            .compare_exchange(seq, seq + 1, Ordering::AcqRel, Ordering::Acquire);
        Ok(())
    }

    /// Install buffer `seq + 1` if no one has.
    fn advance_to(&self, seq: u64, force: bool) -> Result<(), Full> {
        let next = seq + 1;
        // Installed already (by another thread), or long since: a caller
        // that stalled must not install `next` a second time.
        // Acquire: pairs with an installer's claim (AcqRel CAS below).
        if self.installed.load(Ordering::Acquire) >= next {
            return Ok(());
        }
        let slot = &self.slots[next as usize % SLOTS];
        // Acquire: pairs with the installer's Release store: a buffer seen is
        // fully made, and the claim before it is seen (below).
        if !slot.load(Ordering::Acquire).is_null() {
            // Either another thread installed `next` between our two loads
            // (its claim precedes its store, so the Acquire load above
            // makes the claim visible now), or buffer `next - SLOTS` is
            // still in use.
            if self.installed.load(Ordering::Acquire) >= next {
                return Ok(());
            }
            return Err(Full);
        }
        let mut fresh = {
            let mut pool = self.pool.lock().expect("pool");
            match pool.free.pop() {
                Some(b) => Box::new(b),
                None if pool.made < self.budget || force => {
                    pool.made += 1;
                    Box::new(LogBuffer::new(self.capacity))
                }
                None => return Err(Full),
            }
        };
        fresh.reset(next);
        // Claim `next`: one installer, once. The slot stays empty until
        // the claimer stores it (no one else writes it meanwhile).
        // AcqRel: the claim: Release orders it before our slot store for the
        // Acquire loads above; Acquire sees a rival's claim.
        if self
            .installed
            .compare_exchange(seq, next, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            self.pool.lock().expect("pool").free.push(*fresh);
            return Ok(());
        }
        // Release: installs the buffer, fully made (reset, numbered), for the
        // Acquire loads of the slot (type doc).
        slot.store(Box::into_raw(fresh), Ordering::Release);
        Ok(())
    }

    /// Recycle buffer `seq` (sealed, scanned, everything in it applied or
    /// discarded): it leaves its slot now and returns to the pool once
    /// every thread pinned now has unpinned. Only the TC Proxy calls this,
    /// once per buffer.
    pub fn recycle(&self, seq: u64, g: &crossbeam_epoch::Guard) {
        let slot = &self.slots[seq as usize % SLOTS];
        // Acquire: the buffer as installed (type doc): its number is seen.
        let p = slot.load(Ordering::Acquire);
        assert!(
            // SAFETY: the caller owns recycling; the buffer is live.
            unsafe { p.as_ref() }.is_some_and(|b| b.seq == seq),
            "recycling buffer {seq}, which is not installed"
        );
        // Release: empties the slot: a reader that sees it null reads the
        // buffer as gone.
        slot.store(std::ptr::null_mut(), Ordering::Release);
        let pool = std::sync::Arc::clone(&self.pool);
        let budget = self.budget;
        let p = p as usize;
        // SAFETY: unlinked above; no thread that pins from now on finds
        // it, and it is returned once.
        unsafe {
            g.defer_unchecked(move || {
                let b = Box::from_raw(p as *mut LogBuffer);
                let mut pool = pool.lock().expect("pool");
                // Buffers made past the budget are freed, not pooled.
                if pool.made > budget {
                    pool.made -= 1;
                } else {
                    pool.free.push(*b);
                }
            });
        }
        // Into the global queue now: a thread keeps a few deferred calls
        // to itself until it has many, and the log waits for this one.
        g.flush();
    }

    /// The `len` bytes at `lsn`, in place, if its buffer is still in
    /// memory. They stay valid while the caller is pinned.
    ///
    /// # Safety
    /// They were appended (their `append` happened before this call).
    pub unsafe fn slice(&self, lsn: Lsn, len: u32) -> Option<&[u8]> {
        let buf = self.buffer(lsn >> 32)?;
        let at = &buf.bytes[lsn as u32 as usize..(lsn as u32 + len) as usize];
        #[cfg(not(feature = "loom"))]
        // SAFETY: written and released before (the caller's contract), and
        // not written again before the buffer is recycled; contiguous cells.
        return Some(unsafe { std::slice::from_raw_parts(at.as_ptr().cast::<u8>(), at.len()) });
        #[cfg(feature = "loom")]
        {
            let _ = at;
            unimplemented!("in-place reads are not modelled under loom")
        }
    }

    /// The `len` bytes at `lsn`.
    ///
    /// # Safety
    /// They were appended (their `append` happened before this call), and
    /// their buffer is not recycled.
    pub unsafe fn read(&self, lsn: Lsn, len: u32) -> Vec<u8> {
        let buf = self.buffer(lsn >> 32).expect("an appended record's buffer");
        // SAFETY: written and released before (the caller's contract);
        // no one writes them again.
        unsafe { buf.read_at(lsn as u32, len) }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        for b in self.slots.iter() {
            // Acquire: as every slot load; the log is ours alone here, so
            // Relaxed would do.
            let p = b.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: the log is going; its buffers are its own.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod log_tests {
    use super::*;

    /// Threads append records of many sizes: every record reads back
    /// intact at its LSN, LSNs never overlap, and every buffer before the
    /// active one is sealed with exactly its records in it.
    #[test]
    fn appends_read_back_and_every_buffer_is_sealed() {
        let log = Log::new(256, SLOTS);
        let out = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (log, out) = (&log, &out);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for n in 0..2_000u64 {
                        let len = 1 + ((n * 31 + t * 7) % 40) as usize;
                        let rec: Vec<u8> =
                            (0..len).map(|i| (t * 50 + n + i as u64) as u8).collect();
                        let lsn = log.append(&rec).expect("room");
                        mine.push((lsn, rec));
                    }
                    out.lock().unwrap().extend(mine);
                });
            }
        });
        let mut recs = out.into_inner().unwrap();
        recs.sort_unstable_by_key(|r| r.0);
        for w in recs.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if a.0 >> 32 == b.0 >> 32 {
                assert!(a.0 + a.1.len() as u64 <= b.0, "records overlap");
            }
        }
        for (lsn, rec) in &recs {
            // SAFETY: appended above.
            assert_eq!(&unsafe { log.read(*lsn, rec.len() as u32) }, rec);
        }
        let active = log.active();
        for seq in 0..active {
            let len = log.buffer(seq).unwrap().ready().expect("sealed, no users");
            let end = recs
                .iter()
                .filter(|r| r.0 >> 32 == seq)
                .map(|r| (r.0 as u32) + r.1.len() as u32)
                .max()
                .unwrap_or(0);
            assert_eq!(len, end, "buffer {seq} holds exactly its records");
        }
        assert!(log.seal_active());
        assert_eq!(log.active(), active + 1);
        assert!(!log.seal_active(), "nothing in it to seal");
    }

    /// With a budget of 3 buffers the log fills; recycled buffers are
    /// reused (only after the grace period), under later sequence
    /// numbers, and a recycled buffer reads as gone.
    #[test]
    fn recycled_buffers_are_reused_and_read_as_gone() {
        let log = Log::new(16, 3);
        let mut lsns = Vec::new();
        let full = loop {
            match log.append(&[7; 10]) {
                Ok(lsn) => lsns.push(lsn),
                Err(Full) => break lsns.len(),
            }
        };
        assert_eq!(full, 3, "three buffers of one 10-byte record each");
        assert_eq!(log.buffers(), 3);
        let g = crossbeam_epoch::pin();
        log.recycle(0, &g);
        // SAFETY: appended.
        assert!(unsafe { log.slice(lsns[0], 10) }.is_none(), "gone");
        assert_eq!(
            log.append(&[8; 10]),
            Err(Full),
            "not reused while a pinned thread might still read it"
        );
        drop(g);
        // The grace period ends once every thread pinned on crossbeam's
        // global collector has moved on, and other tests of this process
        // pin it too: wait for it by time, not by a count of tries (10,000
        // tries failed once while the MVCC tests ran beside it).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let lsn = std::iter::from_fn(|| {
            crossbeam_epoch::pin().flush();
            let got = log.append(&[9; 10]).ok();
            if got.is_none() {
                std::thread::yield_now();
            }
            Some(got)
        })
        .take_while(|_| std::time::Instant::now() < deadline)
        .flatten()
        .next()
        .expect("reused after the grace period");
        assert_eq!(lsn >> 32, 3, "under the next sequence number");
        assert_eq!(log.buffers(), 3, "no new buffer made");
        // SAFETY: appended.
        assert_eq!(unsafe { log.slice(lsn, 10) }, Some(&[9u8; 10][..]));
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod recycle_tests {
    use super::*;
    use crate::sync::AtomicBool;

    /// Appenders, a flusher-like sealer and a recycler race on a log of
    /// three small buffers: every record read back through its LSN while
    /// its buffer is still installed is the record that was appended
    /// there (a buffer installed twice under one sequence number, or
    /// reused while a reader holds it, would show as wrong bytes).
    #[test]
    fn records_read_back_while_buffers_are_recycled() {
        let log = Log::new(256, 3);
        let stop = AtomicBool::new(false);
        let next_unrecycled = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..3u8 {
                let (log, stop) = (&log, &stop);
                s.spawn(move || {
                    let mut n = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let g = crossbeam_epoch::pin();
                        let mut rec = vec![t; 24];
                        rec[1..5].copy_from_slice(&n.to_le_bytes());
                        if let Ok(lsn) = log.append(&rec) {
                            // SAFETY: appended above; pinned.
                            if let Some(back) = unsafe { log.slice(lsn, 24) } {
                                assert_eq!(back, &rec[..], "record {n} of thread {t} at {lsn:#x}");
                            }
                        }
                        drop(g);
                        n += 1;
                    }
                });
            }
            // Seal now and then, as the flusher does.
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let g = crossbeam_epoch::pin();
                    let _ = log.seal_active();
                    drop(g);
                    std::thread::yield_now();
                }
            });
            // Recycle sealed buffers below the active one, in order.
            s.spawn(|| {
                let t0 = std::time::Instant::now();
                while t0.elapsed() < std::time::Duration::from_millis(1500) {
                    let seq = next_unrecycled.load(Ordering::Relaxed);
                    let g = crossbeam_epoch::pin();
                    let ready = log.buffer(seq).and_then(|b| b.ready()).is_some();
                    if ready && seq < log.active() {
                        log.recycle(seq, &g);
                        next_unrecycled.store(seq + 1, Ordering::Relaxed);
                    }
                    drop(g);
                    std::thread::yield_now();
                }
                stop.store(true, Ordering::Relaxed);
            });
        });
        let n = next_unrecycled.into_inner();
        assert!(n > 100, "only {n} buffers were recycled");
    }
}
