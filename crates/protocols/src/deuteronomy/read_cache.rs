//! Deuteronomy §3.3 (Figure 3): the read cache, a log-structured ring of
//! versions and a lossy index from an opaque 64-bit id to where its
//! version might be in the ring. Both are latch-free.
//!
//! The ring's `tail` is a byte offset that only grows; it names ring byte
//! `tail % ring size`, and `tail / ring size` is its lap. An insert
//! reserves its entry with one atomic add on the tail (§3.3, and §3.4: an
//! add, not a compare-and-swap), then copies the entry in: a header (the
//! id and the value's length, one word each) and the value, padded to
//! whole words. Entries are never split across the ring's end: a
//! reservation that would be is left as padding and the writer reserves
//! again, at the next lap. Each reservation passes over entries of the
//! previous lap, which are simply overwritten.
//!
//! The index has rows of [`WAYS`] slots; an id's row is chosen by its
//! hash. A slot is one word: the entry's absolute ring offset and a few
//! bits of the id's hash, so lookups skip most slots of other ids without
//! touching the ring. An insert overwrites the slot with the lowest offset
//! in its row (§3.3's row-by-row FIFO eviction), so the index forgets
//! entries that may still be in the ring, and keeps offsets whose entries
//! were overwritten: an offset is a hint. A lookup checks the tail before
//! it copies (an entry a later lap has reserved over is gone), bounds the
//! length it finds by what the entry could hold (a length read from bytes
//! being overwritten may be anything), checks the header's id, and checks
//! the tail again after copying: if a later lap reserved over the entry
//! meanwhile, what it copied may be torn, and the lookup is a miss.
//!
//! The paper's tail checks catch writers of a *later* lap, not a writer of
//! an *earlier* lap that reserved its space, stalled for a whole lap, and
//! then copies over entries of the next (it would tear a complete entry
//! with no tail movement to show for it). So the ring is cut into up to 64
//! segments, each with a claim word holding a lap and the writers copying
//! into the segment in that lap (a packed [`Claim`]). A writer claims every
//! segment its entry touches before copying, and gives up (its reservation
//! becomes padding: the cache is lossy) if a segment is claimed by a later
//! lap (it was lapped) or by an earlier lap with writers still in it. A
//! segment moves to a new lap only when it has no writers, so no two laps
//! write one segment at once.
//!
//! Memory ordering. An entry is published by the Release compare-and-swap
//! that installs its slot, after every byte of it is written; lookups load
//! slots with Acquire, so the bytes they copy are that writer's or a later
//! writer's. (The slot is the entry's "published" mark. A mark in the ring,
//! such as the header's id stored last, is not enough alone: a lookup that
//! found the offset through a Relaxed slot could read an older lap's word
//! equal to the mark.) Bytes from a later writer are caught seqlock-style:
//! a writer issues a Release fence after its reservation and before its
//! stores; a lookup issues an Acquire fence after its loads and before
//! reading the tail again, so a lookup that read any byte of a later
//! writer sees that writer's reservation in the tail. Bytes from an earlier
//! writer cannot appear: a claim is taken with Acquire and given back with
//! Release, so an earlier lap's stores to a segment happen before a later
//! lap's. Every ring byte is in an atomic word (Relaxed loads and stores),
//! so a lookup racing with a writer reads stale or new words, never
//! undefined ones.
//!
//! Limits. A value of more than a quarter of the ring is not cached. The
//! tail may reach 2^56 bytes of inserts (two years at 1 GB/s); past that,
//! inserts are dropped (the slot and claim layouts have no room for more).
//! At most 4095 writers copy into one segment at once (one insert in
//! flight per thread); more give up.

use crate::sync::{fence, AtomicU64, Ordering};

/// Slots per index row: one cache line of words.
pub(crate) const WAYS: usize = 8;

/// An entry's header: the id, then the value's length in bytes.
const HEADER: u64 = 16;

/// The smallest ring [`ReadCache::new`] makes.
const MIN_RING: u64 = 4096;
/// The largest ring (1 TiB).
const MAX_RING: u64 = 1 << 40;
/// The most bytes [`ReadCache::new`] takes.
pub(crate) const MAX_BYTES: usize = MAX_RING as usize;
/// The smallest ring at all (a loom model's): two words of value.
const TINY_RING: u64 = 32;

/// The ring is cut into this many segments for claims (fewer, of
/// [`MIN_SEGMENT`] bytes, in rings under 2 KiB).
const SEGMENTS: u64 = 64;
const MIN_SEGMENT: u64 = 32;

/// The tail's limit: inserts beyond it are dropped.
const MAX_TAIL: u64 = 1 << 56;

/// Reservations that may cross the ring's end before an insert gives up
/// (crossing it twice means a whole lap was reserved meanwhile).
const RESERVE_TRIES: u32 = 3;
/// Compare-and-swaps an insert may lose to racing inserts in its row
/// before it leaves its entry unindexed.
const INSTALL_TRIES: u32 = 3;

/// An index slot.
///
/// ```text
///  63        53 52                                   0
/// +------------+--------------------------------------+
/// |    tag     |  the entry's tail offset / 8         |
/// +------------+--------------------------------------+
/// ```
///
/// The tag is the top bits of the id's hash. The tail starts at the ring
/// size (lap 1), so no entry is at offset 0, and an all-zero slot is
/// empty; it also has the lowest offset, so inserts fill it first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot(u64);

impl Slot {
    const OFFSET_BITS: u32 = 53;
    const TAG_BITS: u32 = 64 - Slot::OFFSET_BITS;
    const EMPTY: Slot = Slot(0);

    fn new(tag: u64, offset: u64) -> Slot {
        debug_assert!(tag < 1 << Slot::TAG_BITS && offset.is_multiple_of(8));
        Slot(tag << Slot::OFFSET_BITS | offset >> 3)
    }

    fn tag(self) -> u64 {
        self.0 >> Slot::OFFSET_BITS
    }

    /// The entry's tail offset, in bytes.
    fn offset(self) -> u64 {
        (self.0 & ((1 << Slot::OFFSET_BITS) - 1)) << 3
    }
}

const _: () = assert!(MAX_TAIL >> 3 <= 1 << Slot::OFFSET_BITS);

/// A segment's claim word.
///
/// ```text
///  63                                  12 11        0
/// +--------------------------------------+-----------+
/// |                 lap                  |  writers  |
/// +--------------------------------------+-----------+
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Claim(u64);

impl Claim {
    const WRITER_BITS: u32 = 12;
    const WRITER: u64 = 1;
    /// More writers than this in one segment at once give up.
    const MAX_WRITERS: u64 = (1 << Claim::WRITER_BITS) - 1;

    fn new(lap: u64, writers: u64) -> Claim {
        Claim(lap << Claim::WRITER_BITS | writers)
    }

    fn lap(self) -> u64 {
        self.0 >> Claim::WRITER_BITS
    }

    fn writers(self) -> u64 {
        self.0 & ((1 << Claim::WRITER_BITS) - 1)
    }
}

const _: () = assert!(MAX_TAIL / TINY_RING <= 1 << (64 - Claim::WRITER_BITS));

/// An index row, alone on its cache line.
#[repr(align(64))]
struct Row([AtomicU64; WAYS]);

/// The id's hash: MurmurHash3's 64-bit finalizer (ids may be sequential;
/// rows and tags need all their bits mixed).
fn hash(id: u64) -> u64 {
    let mut h = id;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The read cache.
pub(crate) struct ReadCache {
    /// The ring, in words: every byte is read and written atomically.
    ring: Box<[AtomicU64]>,
    /// The next byte offset to reserve (never wraps).
    tail: AtomicU64,
    rows: Box<[Row]>,
    /// Per segment, a [`Claim`].
    claims: Box<[AtomicU64]>,
    /// log2 of the ring's size in bytes.
    ring_shift: u32,
    /// log2 of a segment's size in bytes.
    segment_shift: u32,
    /// Counters for tests (the TC counts its own hits per thread: shared
    /// counters would put one contended line on every read). Plain std
    /// atomics even under loom: they order nothing, and modelling them
    /// would only grow the model.
    #[cfg(test)]
    hits: std::sync::atomic::AtomicU64,
    #[cfg(test)]
    misses: std::sync::atomic::AtomicU64,
    #[cfg(test)]
    inserts: std::sync::atomic::AtomicU64,
}

impl ReadCache {
    /// A cache of `bytes` bytes of ring (rounded up to a power of two, at
    /// least 4 KiB, at most 1 TiB) and an index of `rows` rows (a power of
    /// two) of [`WAYS`] slots each.
    pub fn new(bytes: usize, rows: usize) -> ReadCache {
        let ring = (bytes as u64).max(MIN_RING).next_power_of_two();
        ReadCache::with_ring(ring, rows)
    }

    /// As [`ReadCache::new`], with a ring of exactly `ring` bytes (a power
    /// of two, from 32 bytes: loom models need tiny ones).
    fn with_ring(ring: u64, rows: usize) -> ReadCache {
        assert!(
            ring.is_power_of_two() && (TINY_RING..=MAX_RING).contains(&ring),
            "read cache ring of {ring} bytes"
        );
        assert!(rows.is_power_of_two(), "read cache of {rows} rows");
        let ring_shift = ring.trailing_zeros();
        let segment_shift = (ring / SEGMENTS).max(MIN_SEGMENT).trailing_zeros();
        ReadCache {
            ring: (0..ring / 8).map(|_| AtomicU64::new(0)).collect(),
            tail: AtomicU64::new(ring),
            rows: (0..rows)
                .map(|_| Row(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            claims: (0..ring >> segment_shift)
                .map(|_| AtomicU64::new(0))
                .collect(),
            ring_shift,
            segment_shift,
            #[cfg(test)]
            hits: Default::default(),
            #[cfg(test)]
            misses: Default::default(),
            #[cfg(test)]
            inserts: Default::default(),
        }
    }

    fn ring_bytes(&self) -> u64 {
        1 << self.ring_shift
    }

    /// The largest value cached: a quarter of the ring.
    fn max_value(&self) -> u64 {
        self.ring_bytes() / 4
    }

    /// `id`'s row and tag.
    fn place(&self, id: u64) -> (&Row, u64) {
        let h = hash(id);
        let row = &self.rows[(h & (self.rows.len() as u64 - 1)) as usize];
        (row, h >> Slot::OFFSET_BITS)
    }

    /// Copy the value stored under `id` into `out` (replacing its
    /// contents); false on a miss (`out` is then empty). Never returns
    /// bytes of another id or a torn value.
    pub fn get(&self, id: u64, out: &mut Vec<u8>) -> bool {
        let (row, tag) = self.place(id);
        // Every slot of ours, newest first: an id inserted twice is read at
        // its latest copy, and the older copies are lapped first anyway.
        let mut found = [0u64; WAYS];
        let mut n = 0;
        for slot in &row.0 {
            // Acquire: pairs with the Release compare-and-swap in
            // `install`, so the entry's bytes are all written.
            let s = Slot(slot.load(Ordering::Acquire));
            if s != Slot::EMPTY && s.tag() == tag {
                found[n] = s.0;
                n += 1;
            }
        }
        // Same tag, so the words order by offset.
        found[..n].sort_unstable_by(|a, b| b.cmp(a));
        for &s in &found[..n] {
            if self.read(Slot(s).offset(), id, out) {
                #[cfg(test)]
                self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return true;
            }
        }
        out.clear();
        #[cfg(test)]
        self.misses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        false
    }

    /// Copy out the entry an index slot says is at `start`, if it is still
    /// there, whole, and `id`'s.
    fn read(&self, start: u64, id: u64, out: &mut Vec<u8>) -> bool {
        // A reservation reaching past this has begun to overwrite it.
        let lapped = start + self.ring_bytes();
        // The slot's Acquire made this entry's reservation visible: `tail`
        // is at least the entry's end.
        let tail = self.tail.load(Ordering::Relaxed);
        if tail > lapped {
            return false;
        }
        let at = start & (self.ring_bytes() - 1);
        let w = (at / 8) as usize;
        if self.ring[w].load(Ordering::Relaxed) != id {
            return false;
        }
        // Read while a later lap may be overwriting it, the length may be
        // anything: it must fit what was reserved, before the ring's end
        // (entries are never split), and what an insert caches.
        let len = self.ring[w + 1].load(Ordering::Relaxed);
        let room = (tail - start)
            .min(self.ring_bytes() - at)
            .saturating_sub(HEADER);
        if len > room || len > self.max_value() {
            return false;
        }
        out.clear();
        out.reserve(len as usize);
        let words = &self.ring[w + 2..w + 2 + len.div_ceil(8) as usize];
        for word in words {
            out.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        out.truncate(len as usize);
        // Acquire: pairs with the Release fence in `insert`. If we copied
        // any word of a later lap's writer, the tail shows its reservation.
        fence(Ordering::Acquire);
        self.tail.load(Ordering::Relaxed) <= lapped
    }

    /// Store `value` under `id`. Later `get`s may miss (the cache is
    /// lossy) but never return a wrong value. A value of more than a
    /// quarter of the ring is not cached.
    pub fn insert(&self, id: u64, value: &[u8]) {
        let len = value.len() as u64;
        if len > self.max_value() {
            return;
        }
        let size = HEADER + len.next_multiple_of(8);
        let Some(start) = self.reserve(size) else {
            return;
        };
        let at = start & (self.ring_bytes() - 1);
        let lap = start >> self.ring_shift;
        let segments = at >> self.segment_shift..=(at + size - 1) >> self.segment_shift;
        for s in segments.clone() {
            if !self.claim(s as usize, lap) {
                for c in *segments.start()..s {
                    self.unclaim(c as usize);
                }
                return;
            }
        }
        // Release: pairs with the Acquire fence in `read`: whoever reads a
        // word we store below sees our reservation in the tail.
        fence(Ordering::Release);
        let w = (at / 8) as usize;
        self.ring[w].store(id, Ordering::Relaxed);
        self.ring[w + 1].store(len, Ordering::Relaxed);
        let mut chunks = value.chunks_exact(8);
        let mut i = w + 2;
        for c in &mut chunks {
            self.ring[i].store(u64::from_le_bytes(c.try_into().unwrap()), Ordering::Relaxed);
            i += 1;
        }
        if !chunks.remainder().is_empty() {
            let mut last = [0u8; 8];
            last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
            self.ring[i].store(u64::from_le_bytes(last), Ordering::Relaxed);
        }
        for s in segments {
            self.unclaim(s as usize);
        }
        // Lapped while copying: lookups would find it gone; keep the row's
        // slots for entries that are not.
        if self.tail.load(Ordering::Relaxed) > start + self.ring_bytes() {
            return;
        }
        let (row, tag) = self.place(id);
        let _installed = self.install(row, Slot::new(tag, start));
        #[cfg(test)]
        if _installed {
            self.inserts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Reserve `size` bytes (at most a quarter of the ring plus a header)
    /// that do not cross the ring's end: their tail offset, or `None` if
    /// the insert should give up.
    fn reserve(&self, size: u64) -> Option<u64> {
        for _ in 0..RESERVE_TRIES {
            // Relaxed: the Release fence in `insert` orders it before the
            // entry's bytes; nothing before it needs ordering.
            let start = self.tail.fetch_add(size, Ordering::Relaxed);
            if start + size > MAX_TAIL {
                return None;
            }
            if (start & (self.ring_bytes() - 1)) + size <= self.ring_bytes() {
                return Some(start);
            }
            // Crosses the end: the rest of this lap is padding (and the
            // part past the end, too, which no one will write).
        }
        None
    }

    /// Claim segment `s` for a writer of `lap`: false if it was lapped
    /// (the segment has moved on) or an earlier lap still writes there.
    fn claim(&self, s: usize, lap: u64) -> bool {
        let word = &self.claims[s];
        let mut cur = Claim(word.load(Ordering::Relaxed));
        loop {
            let next = if cur.lap() == lap && cur.writers() < Claim::MAX_WRITERS {
                Claim(cur.0 + Claim::WRITER)
            } else if cur.lap() < lap && cur.writers() == 0 {
                Claim::new(lap, 1)
            } else {
                return false;
            };
            // Acquire: pairs with the Release in `unclaim`, so the earlier
            // laps' stores to this segment come before ours.
            match word.compare_exchange_weak(cur.0, next.0, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(c) => cur = Claim(c),
            }
        }
    }

    /// Done writing in segment `s`.
    fn unclaim(&self, s: usize) {
        // Release: pairs with the Acquire in `claim` by the next lap.
        self.claims[s].fetch_sub(Claim::WRITER, Ordering::Release);
    }

    /// Point a slot of `row` at a written entry: the slot with the lowest
    /// offset (§3.3's FIFO eviction), unless the entry is older than all
    /// of them (a writer that was slow: its entry is the one to forget).
    fn install(&self, row: &Row, new: Slot) -> bool {
        for _ in 0..INSTALL_TRIES {
            let (victim, old) = row
                .0
                .iter()
                .map(|s| Slot(s.load(Ordering::Relaxed)))
                .enumerate()
                .min_by_key(|(_, s)| s.offset())
                .unwrap();
            if new.offset() < old.offset() {
                return false;
            }
            // Release: pairs with the Acquire slot loads in `get`; this
            // publishes the entry.
            if row.0[victim]
                .compare_exchange(old.0, new.0, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
        false
    }

    /// Counters: hits, misses, and inserts that were cached and indexed.
    #[cfg(all(test, not(feature = "loom")))]
    pub fn stats(&self) -> (u64, u64, u64) {
        let r = std::sync::atomic::Ordering::Relaxed;
        (self.hits.load(r), self.misses.load(r), self.inserts.load(r))
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    /// Value `id`'s bytes: 1..=300 of them, all a function of `id`, so a
    /// hit can be checked without remembering what was inserted.
    fn value_of(id: u64) -> Vec<u8> {
        let h = hash(id ^ 0x5555);
        let len = 1 + (h % 300) as usize;
        (0..len)
            .map(|i| (h >> (8 * (i % 8))) as u8 ^ i as u8)
            .collect()
    }

    fn tail(c: &ReadCache) -> u64 {
        c.tail.load(Ordering::Relaxed)
    }

    #[test]
    fn insert_then_get() {
        let c = ReadCache::new(1 << 16, 64);
        let mut out = vec![9; 3];
        c.insert(7, b"seven");
        assert!(c.get(7, &mut out));
        assert_eq!(out, b"seven");
        c.insert(8, b"");
        assert!(c.get(8, &mut out));
        assert!(out.is_empty());
        assert_eq!(c.stats(), (2, 0, 2));
    }

    #[test]
    fn an_unknown_id_misses() {
        let c = ReadCache::new(1 << 16, 64);
        let mut out = b"stale".to_vec();
        assert!(!c.get(1, &mut out));
        assert!(out.is_empty(), "a miss leaves nothing behind");
        c.insert(2, b"two");
        assert!(!c.get(1, &mut out));
        assert_eq!(c.stats(), (0, 2, 1));
    }

    /// One row: the ninth insert forgets the first (the lowest offset),
    /// though its bytes are still in the ring.
    #[test]
    fn a_row_forgets_its_oldest_first() {
        let c = ReadCache::new(1 << 16, 1);
        let mut out = Vec::new();
        for id in 1..=WAYS as u64 {
            c.insert(id, &value_of(id));
        }
        for id in 1..=WAYS as u64 {
            assert!(c.get(id, &mut out), "{id}");
        }
        c.insert(100, &value_of(100));
        assert!(!c.get(1, &mut out), "oldest evicted");
        for id in (2..=WAYS as u64).chain([100]) {
            assert!(c.get(id, &mut out), "{id}");
            assert_eq!(out, value_of(id));
        }
        // The next to go is the next oldest.
        c.insert(101, &value_of(101));
        assert!(!c.get(2, &mut out));
        assert!(c.get(3, &mut out));
    }

    /// An entry reads back until a reservation of the next lap reaches
    /// it, and misses from then on (the index still points there).
    #[test]
    fn entries_last_until_their_lap_is_overwritten() {
        let c = ReadCache::new(4096, 1024);
        let mut out = Vec::new();
        let start = tail(&c);
        c.insert(1, &value_of(1));
        let mut id = 2;
        let mut seen_gone = false;
        while tail(&c) < start + 2 * 4096 {
            c.insert(id, &value_of(id));
            let alive = tail(&c) <= start + 4096;
            assert_eq!(c.get(1, &mut out), alive, "after {id}");
            if alive {
                assert_eq!(out, value_of(1));
            }
            seen_gone |= !alive;
            assert!(c.get(id, &mut out), "the newest is there");
            assert_eq!(out, value_of(id));
            id += 1;
        }
        assert!(seen_gone);
    }

    /// An entry that would cross the ring's end goes to the next lap; the
    /// rest of the lap, and what its first reservation took of the next,
    /// are padding.
    #[test]
    fn no_entry_crosses_the_ring_end() {
        let c = ReadCache::new(4096, 1024);
        let mut out = Vec::new();
        // Four entries of 16 + 1000 bytes leave 32 at the end of lap 1.
        for id in 1..=4 {
            c.insert(id, &[id as u8; 1000]);
        }
        assert_eq!(tail(&c), 4096 + 4064);
        c.insert(5, &[5; 1000]);
        // Its first reservation took 32 bytes of lap 1 and 984 of lap 2.
        let fifth = 2 * 4096 + 984;
        assert_eq!(tail(&c), fifth + 1016);
        assert!(c.get(5, &mut out));
        assert_eq!(out, [5; 1000]);
        // It lapped the first two (over their bytes, or the padding's).
        assert!(!c.get(1, &mut out));
        assert!(!c.get(2, &mut out));
        assert!(c.get(3, &mut out));
        assert_eq!(out, [3; 1000]);
        assert!(c.get(4, &mut out));
    }

    #[test]
    fn values_over_a_quarter_of_the_ring_are_not_cached() {
        let c = ReadCache::new(4096, 64);
        let mut out = Vec::new();
        c.insert(1, &[1; 1025]);
        assert!(!c.get(1, &mut out));
        assert_eq!(c.stats().2, 0);
        assert_eq!(tail(&c), 4096, "nothing reserved");
        c.insert(2, &[2; 1024]);
        assert!(c.get(2, &mut out));
        assert_eq!(out, [2; 1024]);
    }

    /// 4 threads insert and look up ids of a small id space in a 64 KiB
    /// ring for about a second: the ring wraps thousands of times, and
    /// threads (4 on however few cores) are preempted mid-copy, so
    /// lookups race with writers of later laps and stalled writers of
    /// earlier ones. Every hit must be its id's value.
    #[test]
    fn threads_never_read_a_wrong_value() {
        let seed = granary_workloads::replay::seed("read cache stress");
        let c = ReadCache::new(1 << 16, 256);
        let ids = 4096;
        let stop = std::time::Instant::now() + std::time::Duration::from_millis(1000);
        let (hits, misses, wrong) = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4u64)
                .map(|t| {
                    let c = &c;
                    s.spawn(move || {
                        // xorshift64*, one stream per thread.
                        let mut rng = hash(seed.wrapping_add(t + 1)) | 1;
                        let mut next = move || {
                            rng ^= rng >> 12;
                            rng ^= rng << 25;
                            rng ^= rng >> 27;
                            rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
                        };
                        let (mut hits, mut misses, mut wrong) = (0u64, 0u64, 0u64);
                        let mut out = Vec::new();
                        let mut n = 0u32;
                        while !n.is_multiple_of(1024) || std::time::Instant::now() < stop {
                            n = n.wrapping_add(1);
                            let r = next();
                            let id = 1 + (r >> 32) % ids;
                            if r & 1 == 0 {
                                c.insert(id, &value_of(id));
                            } else if c.get(id, &mut out) {
                                hits += 1;
                                if out != value_of(id) {
                                    wrong += 1;
                                }
                            } else {
                                misses += 1;
                            }
                        }
                        (hits, misses, wrong)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
        });
        let laps = (tail(&c) >> c.ring_shift) - 1;
        eprintln!(
            "{hits} hits, {misses} misses, {laps} laps, stats {:?}",
            c.stats()
        );
        assert_eq!(wrong, 0, "wrong values (seed {seed})");
        assert!(hits > 0 && misses > 0, "seed {seed}");
        // About 10,000 in release builds, 700 in debug ones.
        assert!(laps > 100, "the ring wrapped only {laps} times");
        assert_eq!((c.stats().0, c.stats().1), (hits, misses));
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A hit must be `want`; a miss is always allowed.
    fn check(c: &ReadCache, id: u64, want: &[u8]) {
        let mut out = Vec::new();
        if c.get(id, &mut out) {
            assert_eq!(out, want, "id {id}");
        }
    }

    /// A 64-byte ring (two 32-byte segments) whose tail is at lap 2's
    /// start, id 1's 8-byte value in its first 24 bytes. A writer's next
    /// entry, id 2, goes exactly over it while we look both up: each is a
    /// miss or its own bytes. The fences and the tail check keep id 1's
    /// copy from being torn by the writer; the slot's Release/Acquire
    /// keeps id 2 from being read before its bytes are visible.
    #[test]
    fn loom_read_cache_reader_races_a_later_lap() {
        // Exhaustive (no preemption bound): a few seconds.
        loom::model(|| {
            let c = Arc::new(ReadCache::with_ring(64, 1));
            c.insert(1, &[1; 8]);
            c.insert(7, &[]);
            c.insert(9, &[9; 8]);
            assert_eq!(c.tail.load(Ordering::Relaxed), 128);
            let w = {
                let c = Arc::clone(&c);
                loom::thread::spawn(move || c.insert(2, &[2; 8]))
            };
            check(&c, 1, &[1; 8]);
            check(&c, 2, &[2; 8]);
            w.join().unwrap();
            let mut out = Vec::new();
            assert!(!c.get(1, &mut out), "lapped");
            assert!(c.get(2, &mut out));
            assert_eq!(out, [2; 8]);
        });
    }

    /// A writer of lap 2 (id 2, the last 24 bytes of the ring) races two
    /// inserts that, if they reserve after it, fill lap 3 over its space:
    /// if it stalls between its reservation and its copy, it must not
    /// copy over id 4's complete entry (segment claims). Every lookup is
    /// a miss or the right bytes.
    #[test]
    fn loom_read_cache_a_stalled_writer_cannot_tear_a_later_lap() {
        // Exhaustive (no preemption bound): a few seconds.
        loom::model(|| {
            let c = Arc::new(ReadCache::with_ring(64, 1));
            c.insert(11, &[11; 16]);
            c.insert(12, &[12; 16]);
            c.insert(13, &[13; 8]);
            c.insert(14, &[]);
            assert_eq!(c.tail.load(Ordering::Relaxed), 128 + 40);
            let w = {
                let c = Arc::clone(&c);
                loom::thread::spawn(move || c.insert(2, &[2; 8]))
            };
            c.insert(3, &[3; 16]);
            c.insert(4, &[4; 16]);
            check(&c, 4, &[4; 16]);
            w.join().unwrap();
            check(&c, 2, &[2; 8]);
            check(&c, 3, &[3; 16]);
            check(&c, 4, &[4; 16]);
        });
    }
}
