//! The point index: an optional hash table over a tree's keys, so that a
//! lookup of one key costs a hash and one bucket instead of a descent
//! (ARCHITECTURE.md, "The point index").
//!
//! The tree stays the index of record. The point index maps the same keys
//! to the same values, and is changed only by the tree, inside the leaf
//! lock under which the tree changes the key: two changes to one key are
//! ordered by that lock, so the table never disagrees with the tree once
//! a change has unlocked its leaf. Readers use it only for the value of a
//! present key; an absent key is looked up in the tree, which reports the
//! leaf version a transaction must validate (Silo §4.6).
//!
//! A bucket is two cache lines: a version word ([`NodeVersion`], the same
//! seqlock as the tree's nodes), an overflow pointer, six one-byte tags
//! and six (key word, value) pairs. A key of at most 8 bytes is stored
//! whole: its tag is its length + 1 and its word is its first 8 bytes.
//! A longer key's word is the tree's info word for it (a pointer to the
//! tree's heap copy of the key, freed by the tree through the caller's
//! guard after the entry is gone from both), and its tag is 0x80 plus
//! seven bits of the hash. A full bucket chains overflow buckets; the
//! head's version covers the whole chain.
//!
//! The table doubles when overflow buckets reach an eighth of its buckets
//! (a Poisson load of about four keys per bucket). One thread at a time
//! moves the buckets, one by one: under the old bucket's lock it copies
//! the chain into the two new buckets it splits into, then unlocks it
//! with the deleted mark, which sends readers and writers on to the new
//! table. No one else touches those two new buckets before that unlock,
//! so the mover needs no locks in the new table.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use crate::key::{stored_len, SearchKey, INLINE_MAX};
use crate::sync::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use crate::version::{is_deleted, NodeVersion};

const R: Ordering = Ordering::Relaxed;

/// Entries per bucket: with the header, two cache lines.
const SLOTS: usize = 6;
/// The tag bytes in use.
const TAGS: u64 = (1 << (8 * SLOTS)) - 1;
const LOW_BITS: u64 = 0x0101_0101_0101_0101 & TAGS;
const SEVEN_BITS: u64 = 0x7f7f_7f7f_7f7f_7f7f & TAGS;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080 & TAGS;
/// A new table's buckets (a power of two; two under loom, so that a few
/// keys chain and a grow is short enough to model-check).
const FIRST_BUCKETS: usize = if cfg!(feature = "loom") { 2 } else { 16 };

#[repr(C, align(64))]
struct Bucket {
    /// The chain's version (only the head's is used).
    version: NodeVersion,
    /// The next bucket of the chain, or null.
    next: AtomicPtr<Bucket>,
    /// Byte `i` is slot `i`'s tag; 0 is an empty slot.
    tags: AtomicU64,
    words: [AtomicU64; SLOTS],
    values: [AtomicU64; SLOTS],
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            version: NodeVersion::new(),
            next: AtomicPtr::new(std::ptr::null_mut()),
            tags: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            values: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

pub(crate) struct Table {
    /// 64 − log2(buckets): a hash's top bits pick its bucket.
    shift: u32,
    /// The table the buckets are moving to, once a resize began.
    next: AtomicPtr<Table>,
    /// Overflow buckets chained so far.
    overflows: AtomicU64,
    buckets: Box<[Bucket]>,
}

impl Table {
    fn new(buckets: usize) -> Table {
        debug_assert!(buckets.is_power_of_two());
        Table {
            shift: 64 - buckets.trailing_zeros(),
            next: AtomicPtr::new(std::ptr::null_mut()),
            overflows: AtomicU64::new(0),
            buckets: (0..buckets).map(|_| Bucket::new()).collect(),
        }
    }

    #[inline(always)]
    fn bucket(&self, h: u64) -> &Bucket {
        // `shift` < 64 (a table has at least 2 buckets), and the index is
        // below the length by construction.
        &self.buckets[(h >> self.shift) as usize]
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        for b in self.buckets.iter() {
            let mut p = b.next.load(R);
            while !p.is_null() {
                // SAFETY: overflow buckets are owned by their chain, made
                // by `Box::into_raw`, and freed only here.
                let o = unsafe { Box::from_raw(p) };
                p = o.next.load(R);
            }
        }
    }
}

/// What a key is matched by: its tag, its word, and its bytes.
#[derive(Clone, Copy)]
pub(crate) struct Probe<'a> {
    hash: u64,
    tag: u8,
    /// For a short key, its first 8 bytes; unused for a long one.
    word: u64,
    bytes: &'a [u8],
}

/// Byte mask (the high bit of each byte of `tags`) of exactly the bytes
/// equal to `tag`. Exact, not the usual has-zero-byte test: that one also
/// flags a byte just above a match, and two short keys that differ only by
/// trailing zero bytes (`[2]`, `[2, 0]`) have the same word, so only the
/// tag tells them apart.
#[inline(always)]
fn matches(tags: u64, tag: u8) -> u64 {
    let x = tags ^ (LOW_BITS * tag as u64);
    // A byte's high bit ends up set iff the byte of `x` is zero: adding
    // 0x7f to its low seven bits sets bit 7 iff any of them is set, and
    // the byte's own bit 7 is or-ed in; no carry crosses bytes.
    !(((x & SEVEN_BITS) + SEVEN_BITS) | x | SEVEN_BITS) & HIGH_BITS
}

/// A hash table over the keys of one tree.
pub(crate) struct PointIndex {
    cur: AtomicPtr<Table>,
    /// Held by the one thread moving the table.
    resizing: AtomicBool,
    /// Set by an insert that found the table crowded; the caller with a
    /// guard then grows it ([`PointIndex::grow`]).
    crowded: AtomicBool,
    seed: u64,
}

impl PointIndex {
    pub fn new() -> PointIndex {
        PointIndex {
            cur: AtomicPtr::new(Box::into_raw(Box::new(Table::new(FIRST_BUCKETS)))),
            resizing: AtomicBool::new(false),
            crowded: AtomicBool::new(false),
            // Per table, so keys chosen to collide in one cannot be reused
            // on another (fixed under loom, whose runs must repeat).
            seed: if cfg!(feature = "loom") {
                1
            } else {
                RandomState::new().hash_one(0u64) | 1
            },
        }
    }

    #[inline(always)]
    fn hash(&self, bytes: &[u8]) -> u64 {
        let mut h = self.seed ^ (bytes.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_ne_bytes(c.try_into().expect("8 bytes"));
            h = (h ^ w).wrapping_mul(0xbf58_476d_1ce4_e5b9).rotate_left(29);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            h = (h ^ u64::from_ne_bytes(b)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        }
        h ^= h >> 31;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 29)
    }

    #[inline(always)]
    pub fn probe<'a>(&self, k: &SearchKey<'a>) -> Probe<'a> {
        let hash = self.hash(k.bytes);
        let len = k.bytes.len() as u64;
        if len <= INLINE_MAX {
            Probe {
                hash,
                tag: 1 + len as u8,
                word: k.slice,
                bytes: k.bytes,
            }
        } else {
            Probe {
                hash,
                tag: 0x80 | (hash & 0x7f) as u8,
                word: 0,
                bytes: k.bytes,
            }
        }
    }

    /// Whether the key word `w`, in a slot whose tag matched, is `p`'s key.
    ///
    /// # Safety
    /// The caller is pinned (a long key's copy lives until the grace
    /// period after its entry is gone).
    #[inline(always)]
    unsafe fn is_key(p: &Probe<'_>, w: u64) -> bool {
        if p.tag < 0x80 {
            return w == p.word;
        }
        // A cleared slot's word is 0; a long key's is a pointer.
        if w <= INLINE_MAX {
            return false;
        }
        // SAFETY: caller's contract.
        unsafe {
            if stored_len(w) != p.bytes.len() {
                return false;
            }
            let mut t = [0u8; 8];
            crate::key::stored_bytes(0, w, &mut t) == p.bytes
        }
    }

    /// The value of the key, if present.
    ///
    /// # Safety
    /// The caller is pinned by a guard of the tree's domain.
    #[inline]
    pub unsafe fn get(&self, p: &Probe<'_>) -> Option<u64> {
        // Acquire: pairs with the Release store of a grown table.
        let mut t = self.cur.load(Ordering::Acquire);
        loop {
            // SAFETY: a table stays readable while pinned (retired, never
            // freed early).
            let b = unsafe { &*t }.bucket(p.hash);
            let v = b.version.stable();
            if is_deleted(v) {
                // Moved: the next table has the chain (Acquire: pairs
                // with its Release store, before any bucket moved).
                // SAFETY: as above.
                t = unsafe { &*t }.next.load(Ordering::Acquire);
                continue;
            }
            let mut found = None;
            let mut c = b;
            'chain: loop {
                let mut m = matches(c.tags.load(R), p.tag);
                while m != 0 {
                    let i = m.trailing_zeros() as usize / 8;
                    m &= m - 1;
                    let w = c.words[i].load(R);
                    // SAFETY: pinned (caller's contract).
                    if unsafe { Self::is_key(p, w) } {
                        found = Some(c.values[i].load(R));
                        break 'chain;
                    }
                }
                // Acquire: pairs with the Release store that linked it.
                let n = c.next.load(Ordering::Acquire);
                if n.is_null() {
                    break;
                }
                // SAFETY: overflow buckets live as long as their table.
                c = unsafe { &*n };
            }
            if !b.version.has_changed(v) {
                return found;
            }
        }
    }

    /// Start fetching the head bucket of `p`'s chain into the cache.
    ///
    /// # Safety
    /// The caller is pinned by a guard of the tree's domain.
    #[inline]
    pub unsafe fn prefetch(&self, p: &Probe<'_>) {
        // SAFETY: the current table is readable while pinned.
        // Acquire: pairs with the Release store of a grown table.
        let b = unsafe { &*self.cur.load(Ordering::Acquire) }.bucket(p.hash);
        crate::node::prefetch_lines(b as *const Bucket as *const u8, 2);
    }

    /// Lock the head bucket of `p`'s chain in the newest table that has
    /// it.
    fn lock(&self, p: &Probe<'_>) -> (&Table, &Bucket) {
        // Acquire: pairs with the Release store of a grown table.
        let mut t = self.cur.load(Ordering::Acquire);
        loop {
            // SAFETY: as in `get`: the caller is pinned.
            let table = unsafe { &*t };
            let b = table.bucket(p.hash);
            let v = b.version.stable();
            if is_deleted(v) {
                // Acquire: pairs with the Release store of `next`, made before any bucket moved.
                t = table.next.load(Ordering::Acquire);
                continue;
            }
            if b.version.try_lock(v) {
                return (table, b);
            }
        }
    }

    /// The slot of `p`'s key in the locked chain `b`.
    fn find_locked<'b>(b: &'b Bucket, p: &Probe<'_>, info: u64) -> Option<(&'b Bucket, usize)> {
        let word = if p.tag < 0x80 { p.word } else { info };
        let mut c = b;
        loop {
            let mut m = matches(c.tags.load(R), p.tag);
            while m != 0 {
                let i = m.trailing_zeros() as usize / 8;
                m &= m - 1;
                if c.words[i].load(R) == word {
                    return Some((c, i));
                }
            }
            let n = c.next.load(R);
            if n.is_null() {
                return None;
            }
            // SAFETY: locked; overflow buckets live as long as their table.
            c = unsafe { &*n };
        }
    }

    /// Add the key, which is absent, with `info` the tree's info word for
    /// it. The caller holds the lock of the leaf the key goes into and is
    /// pinned.
    pub fn insert(&self, p: &Probe<'_>, info: u64, value: u64) {
        let (t, b) = self.lock(p);
        debug_assert!(Self::find_locked(b, p, info).is_none());
        let word = if p.tag < 0x80 { p.word } else { info };
        if place(b, p.tag, word, value) {
            let o = t.overflows.fetch_add(1, R) + 1;
            if o as usize >= t.buckets.len() / 8 {
                self.crowded.store(true, R);
            }
        }
        b.version.unlock();
    }

    /// Set the value of the key, which is present. The caller holds the
    /// lock of the key's leaf and is pinned.
    pub fn set(&self, p: &Probe<'_>, info: u64, value: u64) {
        let (_, b) = self.lock(p);
        let Some((c, i)) = Self::find_locked(b, p, info) else {
            // A real check: a stale entry would hand out a freed value.
            b.version.unlock();
            panic!("the point index lost a key");
        };
        c.values[i].store(value, R);
        b.version.unlock();
    }

    /// Remove the key. The caller holds the lock of the key's leaf and is
    /// pinned.
    pub fn remove(&self, p: &Probe<'_>, info: u64) {
        let (_, b) = self.lock(p);
        let Some((c, i)) = Self::find_locked(b, p, info) else {
            // A real check: a stale entry would hand out a freed value.
            b.version.unlock();
            panic!("the point index lost a key");
        };
        let tags = c.tags.load(R);
        c.tags.store(tags & !(0xff << (8 * i)), R);
        c.words[i].store(0, R);
        c.values[i].store(0, R);
        b.version.unlock();
    }

    /// Whether an insert found the table crowded (then call `grow`).
    #[inline(always)]
    pub fn crowded(&self) -> bool {
        self.crowded.load(R)
    }

    /// Double the table, moving every chain, and return the old table for
    /// the caller to retire. `None` if another thread is growing it. The
    /// caller holds no leaf lock and is pinned.
    pub fn grow(&self) -> Option<*mut Table> {
        // Acquire: pairs with the Release that ended the last resize.
        if self.resizing.swap(true, Ordering::Acquire) {
            return None;
        }
        // Acquire: pairs with the Release store of the last grown table.
        let old = self.cur.load(Ordering::Acquire);
        // SAFETY: the current table, and only the resizer retires it.
        let t = unsafe { &*old };
        if !self.crowded.load(R) {
            // Grown by another caller since this one was told to.
            // Release: ends this (empty) turn as resizer, as below.
            self.resizing.store(false, Ordering::Release);
            return None;
        }
        let new = Box::into_raw(Box::new(Table::new(t.buckets.len() * 2)));
        // SAFETY: just made; freed only after it is retired in its turn.
        let nt = unsafe { &*new };
        // Release: a reader that follows `next` sees the empty buckets.
        t.next.store(new, Ordering::Release);
        for b in t.buckets.iter() {
            b.version.lock();
            let mut c = b;
            loop {
                let tags = c.tags.load(R);
                for i in 0..SLOTS {
                    let tag = (tags >> (8 * i)) as u8;
                    if tag == 0 {
                        continue;
                    }
                    let w = c.words[i].load(R);
                    let h = self.rehash(tag, w);
                    let nb = nt.bucket(h);
                    if place(nb, tag, w, c.values[i].load(R)) {
                        nt.overflows.fetch_add(1, R);
                    }
                }
                let n = c.next.load(R);
                if n.is_null() {
                    break;
                }
                // SAFETY: locked chain of a live table.
                c = unsafe { &*n };
            }
            // Release (in the unlock): the two new buckets' entries are
            // seen by whoever sees the mark.
            b.version.unlock_deleted();
        }
        self.crowded.store(false, R);
        // Release: pairs with the Acquire loads of `cur`.
        self.cur.store(new, Ordering::Release);
        self.resizing.store(false, Ordering::Release);
        Some(old)
    }

    /// The hash of a stored entry, from its tag and word.
    fn rehash(&self, tag: u8, w: u64) -> u64 {
        if tag < 0x80 {
            let len = (tag - 1) as usize;
            self.hash(&w.to_be_bytes()[..len])
        } else {
            let mut t = [0u8; 8];
            // SAFETY: a long key's word in a locked chain is the info
            // word of a key the tree holds (removes clear the slot under
            // the same lock), so its copy is live.
            self.hash(unsafe { crate::key::stored_bytes(0, w, &mut t) })
        }
    }

    /// Make the next `grow` go ahead (loom tests, which cannot afford
    /// the keys it takes to crowd a table).
    #[cfg(all(test, feature = "loom"))]
    fn set_crowded(&self) {
        self.crowded.store(true, R);
    }

    /// The number of buckets of the current table (tests).
    #[cfg(test)]
    pub fn buckets(&self) -> usize {
        // SAFETY: tests hold no concurrent resize across this.
        // Acquire: pairs with the Release store of a grown table.
        unsafe { &*self.cur.load(Ordering::Acquire) }.buckets.len()
    }
}

/// Put an entry into the first free slot of locked chain `b`, chaining a
/// new bucket if every slot is taken. Returns whether it chained one.
fn place(b: &Bucket, tag: u8, word: u64, value: u64) -> bool {
    let mut c = b;
    loop {
        let tags = c.tags.load(R);
        // A free slot has tag 0.
        let m = matches(tags, 0);
        if m != 0 {
            let i = m.trailing_zeros() as usize / 8;
            c.words[i].store(word, R);
            c.values[i].store(value, R);
            c.tags.store(tags | (tag as u64) << (8 * i), R);
            return false;
        }
        let n = c.next.load(R);
        if n.is_null() {
            let o = Box::new(Bucket::new());
            o.words[0].store(word, R);
            o.values[0].store(value, R);
            o.tags.store(tag as u64, R);
            // Release: a reader that loads the pointer sees the entry.
            c.next.store(Box::into_raw(o), Ordering::Release);
            return true;
        }
        // SAFETY: locked chain; overflow buckets live as long as their
        // table.
        c = unsafe { &*n };
    }
}

impl Drop for PointIndex {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader remains; retired tables were
        // handed to guards and are not reachable from `cur`.
        drop(unsafe { Box::from_raw(self.cur.load(R)) });
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn find(p: &PointIndex, k: &[u8]) -> Option<u64> {
        // SAFETY: nothing is freed while the index lives (short keys).
        unsafe { p.get(&p.probe(&SearchKey::new(k))) }
    }

    /// Keys that differ only by trailing zero bytes share their word and
    /// are told apart by their tags alone; both kinds crowd the same
    /// buckets, and every absent one stays absent.
    #[test]
    fn keys_with_trailing_zeros_stay_apart() {
        let p = PointIndex::new();
        let mut present = Vec::new();
        for a in 0..=255u8 {
            present.push(vec![a]);
            present.push(vec![a, 1 + a % 7]);
        }
        for (i, k) in present.iter().enumerate() {
            p.insert(&p.probe(&SearchKey::new(k)), k.len() as u64, i as u64);
        }
        for (i, k) in present.iter().enumerate() {
            assert_eq!(find(&p, k), Some(i as u64), "{k:?}");
        }
        for a in 0..=255u8 {
            assert_eq!(find(&p, &[a, 0]), None, "[{a}, 0]");
            assert_eq!(find(&p, &[a, 0, 0]), None, "[{a}, 0, 0]");
        }
        for (i, k) in present.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
            p.remove(&p.probe(&SearchKey::new(k)), k.len() as u64);
            assert_eq!(find(&p, k), None, "{k:?} ({i})");
            let mut longer = k.clone();
            longer.push(1 + k[0] % 7);
            assert!(find(&p, &longer).is_some(), "{longer:?}");
        }
    }

    #[test]
    fn tag_matches_flag_every_equal_byte() {
        for tags in [
            0u64,
            0x0203_0405_0607,
            0x0909_0909_0909,
            0x8081_0100_0900,
            0x0203_0203_0203,
            0x0102_0100_ff80,
        ] {
            for tag in 0..=255u8 {
                let m = matches(tags, tag);
                for i in 0..SLOTS {
                    let byte = (tags >> (8 * i)) as u8;
                    let flagged = m & (0x80 << (8 * i)) != 0;
                    assert_eq!(flagged, byte == tag, "tags {tags:#x} tag {tag} slot {i}");
                }
                assert_eq!(m & !HIGH_BITS, 0);
            }
        }
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Short keys only: their info word is their length.
    fn key(i: u64) -> [u8; 8] {
        i.to_be_bytes()
    }

    fn get(p: &PointIndex, i: u64) -> Option<u64> {
        let k = key(i);
        // SAFETY: loom models leak retired tables (nothing is freed early).
        unsafe { p.get(&p.probe(&SearchKey::new(&k))) }
    }

    /// An index with keys `1..=n` (value `10·i`), and a grow pending.
    fn index_of(n: u64) -> Arc<PointIndex> {
        let p = Arc::new(PointIndex::new());
        for i in 1..=n {
            let k = key(i);
            p.insert(&p.probe(&SearchKey::new(&k)), 8, 10 * i);
        }
        p.set_crowded();
        p
    }

    fn grower(p: &Arc<PointIndex>) -> loom::thread::JoinHandle<()> {
        let p = p.clone();
        loom::thread::spawn(move || {
            // Leaked: loom checks the protocol, not reclamation.
            let old = p.grow().expect("nobody else grows");
            let _ = old;
        })
    }

    fn bounded() -> loom::model::Builder {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b
    }

    /// Lookups racing a grow find every present key with its value, and
    /// no absent one.
    #[test]
    fn point_lookups_race_a_grow() {
        bounded().check(|| {
            let p = index_of(8);
            let g = grower(&p);
            let r = {
                let p = p.clone();
                loom::thread::spawn(move || {
                    assert_eq!(get(&p, 3), Some(30));
                    assert_eq!(get(&p, 8), Some(80));
                    assert_eq!(get(&p, 99), None);
                })
            };
            g.join().unwrap();
            r.join().unwrap();
            assert_eq!(p.buckets(), 2 * FIRST_BUCKETS);
        });
    }

    /// An insert and a remove racing a grow both land in the grown table.
    #[test]
    fn point_writes_race_a_grow() {
        bounded().check(|| {
            let p = index_of(8);
            let g = grower(&p);
            let w = {
                let p = p.clone();
                loom::thread::spawn(move || {
                    let (a, b) = (key(20), key(5));
                    p.insert(&p.probe(&SearchKey::new(&a)), 8, 200);
                    p.remove(&p.probe(&SearchKey::new(&b)), 8);
                    assert_eq!(get(&p, 20), Some(200));
                    assert_eq!(get(&p, 5), None);
                })
            };
            g.join().unwrap();
            w.join().unwrap();
            for i in 1..=8 {
                assert_eq!(get(&p, i), (i != 5).then_some(10 * i));
            }
            assert_eq!(get(&p, 20), Some(200));
        });
    }

    /// A lookup racing a remove and a re-insert of keys in its chain sees
    /// each key either before or after the change, never another key's
    /// value.
    #[test]
    fn point_lookup_races_a_remove_and_an_insert() {
        bounded().check(|| {
            let p = index_of(8);
            let w = {
                let p = p.clone();
                loom::thread::spawn(move || {
                    let (a, b) = (key(4), key(21));
                    p.remove(&p.probe(&SearchKey::new(&a)), 8);
                    p.insert(&p.probe(&SearchKey::new(&b)), 8, 210);
                })
            };
            let r = {
                let p = p.clone();
                loom::thread::spawn(move || {
                    let got = get(&p, 4);
                    assert!(got == Some(40) || got.is_none());
                    let got = get(&p, 21);
                    assert!(got == Some(210) || got.is_none());
                    assert_eq!(get(&p, 7), Some(70));
                })
            };
            w.join().unwrap();
            r.join().unwrap();
        });
    }
}
