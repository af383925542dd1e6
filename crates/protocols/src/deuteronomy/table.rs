//! Deuteronomy §2.2: the latch-free MVCC hash table. A bucket is a list
//! of record items, newest first; an item holds the key's hash, the full
//! key (compared only when the hashes match), and the [`Record`] (read
//! timestamp and version list).
//!
//! Items are prepended with a compare-and-swap. Removal is in two steps
//! (§2.2): the item's `next` pointer is marked with a REMOVED bit by a
//! compare-and-swap — the item is then gone for lookups — and whoever
//! next walks past it (the remover first) unlinks it by swinging its
//! predecessor's pointer. A marked `next` can no longer change, so an
//! insert or unlink that raced with the marking fails its CAS and walks
//! again: an unlinked item cannot come back to life. The thread whose
//! unlink succeeds retires the item through the epoch.
//!
//! Memory ordering: an item's fields are written before the CAS that
//! publishes it (AcqRel) and read after an Acquire load of the pointer to
//! it; its `ready` flag is stored with Release after its creator's work
//! and loaded with Acquire by lookups, so they see that work.

use granary_api::TableId;

use super::record::Record;

use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// The mark on a `next` pointer: its item is removed.
const REMOVED: usize = 1;

/// A record item.
pub(crate) struct Item {
    hash: u64,
    table: TableId,
    /// Inline up to 16 bytes (no second cache miss to compare it).
    key: crate::value::Value<16>,
    pub record: Record,
    /// The next item's address, with [`REMOVED`] if this one is removed.
    next: AtomicUsize,
    /// Set once its creator has finished making it (see
    /// [`MvccTable::find_or_insert_with`]); lookups wait for it.
    ready: AtomicBool,
}

impl Item {
    /// The item's key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The item's table.
    pub fn table(&self) -> TableId {
        self.table
    }

    fn is(&self, hash: u64, t: TableId, key: &[u8]) -> bool {
        self.hash == hash && self.table == t && *self.key == *key
    }

    fn removed(&self) -> bool {
        // Acquire: the mark (module doc): pairs with the remover's AcqRel CAS.
        self.next.load(Ordering::Acquire) & REMOVED != 0
    }
}

/// Where a retired item goes once no thread can reach it.
pub(crate) trait Retire {
    /// Free `item` (unlinked, reached by no new lookup) once every thread
    /// that might hold it is done.
    fn retire(&mut self, item: *mut Item);
}

/// The hash table: a fixed array of buckets.
pub(crate) struct MvccTable {
    buckets: Box<[AtomicUsize]>,
    mask: u64,
}

/// `key` of table `t` hashed: FNV-1a, then MurmurHash3's 64-bit
/// finalizer. FNV alone mixes its last bytes into the low ~17 bits and
/// the top bits only: keys that differ in their last byte (consecutive
/// integers, big-endian) shared buckets, and YCSB's chains grew long.
pub(crate) fn hash(t: TableId, key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in t.index().to_le_bytes().iter().chain(key) {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl MvccTable {
    /// A table of `2^bits` buckets.
    pub fn new(bits: u32) -> MvccTable {
        MvccTable {
            buckets: (0..1usize << bits).map(|_| AtomicUsize::new(0)).collect(),
            mask: (1u64 << bits) - 1,
        }
    }

    fn bucket(&self, hash: u64) -> &AtomicUsize {
        &self.buckets[(hash & self.mask) as usize]
    }

    /// The live item of `key`, unlinking removed items passed on the way.
    pub fn find(&self, t: TableId, key: &[u8], r: &mut impl Retire) -> Option<&Item> {
        let h = hash(t, key);
        self.walk(self.bucket(h), r, |i| i.is(h, t, key))
    }

    /// The live item of `key`, made (with no version) if it has none.
    pub fn find_or_insert(&self, t: TableId, key: &[u8], r: &mut impl Retire) -> &Item {
        self.find_or_insert_with(t, key, r, |_| {})
    }

    /// As [`MvccTable::find_or_insert`]; a new item is first passed to
    /// `made` (by its creator, once it is in the bucket), and other
    /// threads that find it wait until `made` has returned.
    pub fn find_or_insert_with(
        &self,
        t: TableId,
        key: &[u8],
        r: &mut impl Retire,
        made: impl FnOnce(&Item),
    ) -> &Item {
        let h = hash(t, key);
        let bucket = self.bucket(h);
        let mut fresh: Option<Box<Item>> = None;
        loop {
            // Acquire: a bucket link (module doc): the items' fields, written
            // before the CAS that linked them, are seen.
            let head = bucket.load(Ordering::Acquire);
            if let Some(i) = self.walk(bucket, r, |i| i.is(h, t, key)) {
                return i;
            }
            let item = fresh.get_or_insert_with(|| {
                Box::new(Item {
                    hash: h,
                    table: t,
                    key: key.into(),
                    record: Record::new(),
                    next: AtomicUsize::new(0),
                    ready: AtomicBool::new(false),
                })
            });
            item.next.store(head, Ordering::Relaxed);
            let p = &**item as *const Item as usize;
            // AcqRel: publishes the item, its fields written, by CAS (module
            // doc); Acquire sees the item a rival linked.
            if bucket
                .compare_exchange(head, p, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                let item = Box::into_raw(fresh.take().expect("made above"));
                // SAFETY: published; freed only through `Retire`.
                let item = unsafe { &*item };
                made(item);
                // Release: the item is ready: lookups that see it (Acquire) see
                // what `made` did to it.
                item.ready.store(true, Ordering::Release);
                return item;
            }
            // Someone else changed the bucket: look again (they may have
            // inserted this key).
        }
    }

    /// Remove `item` (§2.2: mark, then unlink). False if it was already
    /// removed.
    pub fn remove(&self, item: &Item, r: &mut impl Retire) -> bool {
        // Acquire: the mark and the link, as every link load (module doc).
        let mut next = item.next.load(Ordering::Acquire);
        loop {
            if next & REMOVED != 0 {
                return false;
            }
            // AcqRel: marks the item removed, ordered with the unlinking CAS
            // and the walks' Acquire loads of the link.
            match item.next.compare_exchange(
                next,
                next | REMOVED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => next = now,
            }
        }
        // Unlink it (and any other removed item on the way).
        let _ = self.walk(self.bucket(item.hash), r, |_| false);
        true
    }

    /// Walk `bucket` for the first live item that `matches`, unlinking
    /// the removed items it passes.
    fn walk<'a>(
        &'a self,
        bucket: &'a AtomicUsize,
        r: &mut impl Retire,
        matches: impl Fn(&Item) -> bool,
    ) -> Option<&'a Item> {
        'again: loop {
            let mut prev: &AtomicUsize = bucket;
            // Acquire: a bucket link (module doc): the items' fields are seen.
            let mut cur = prev.load(Ordering::Acquire);
            loop {
                if cur & REMOVED != 0 {
                    // Our predecessor was removed under us: start over.
                    continue 'again;
                }
                // SAFETY: items reachable from a bucket are freed only
                // through `Retire`, after every thread that could hold one
                // is done.
                let item = unsafe { (cur as *const Item).as_ref() }?;
                // Acquire: an item link (module doc): the next item's fields,
                // and the mark, are seen.
                let next = item.next.load(Ordering::Acquire);
                if next & REMOVED != 0 {
                    // Unlink it; whoever succeeds retires it.
                    // AcqRel: the unlink is a link CAS as an insert's (module
                    // doc): Release for the walks that load the link, Acquire
                    // for the link seen on failure.
                    match prev.compare_exchange(
                        cur,
                        next & !REMOVED,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            r.retire(cur as *mut Item);
                            cur = next & !REMOVED;
                        }
                        Err(_) => continue 'again,
                    }
                    continue;
                }
                if matches(item) {
                    let mut spins = 0;
                    // Acquire: pairs with the creator's Release of `ready`:
                    // what it made is seen.
                    while !item.ready.load(Ordering::Acquire) {
                        crate::sync::backoff(&mut spins);
                    }
                    return Some(item);
                }
                prev = &item.next;
                cur = next;
            }
        }
    }

    /// How many buckets it has.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Call `f` on each live item in buckets `from..to` (clamped), without
    /// unlinking anything (a garbage collector's sweep, §6.5).
    pub fn for_each_in(&self, from: usize, to: usize, mut f: impl FnMut(&Item)) {
        let to = to.min(self.buckets.len());
        for b in self.buckets.get(from..to).unwrap_or_default() {
            // Acquire (all three): links and the ready flag, as in `walk`
            // (module doc).
            let mut cur = b.load(Ordering::Acquire) & !REMOVED;
            // SAFETY: as in `walk`.
            while let Some(item) = unsafe { (cur as *const Item).as_ref() } {
                if !item.removed() && item.ready.load(Ordering::Acquire) {
                    f(item);
                }
                cur = item.next.load(Ordering::Acquire) & !REMOVED;
            }
        }
    }

    /// Every live item (tests, teardown).
    pub fn count(&self) -> usize {
        let mut n = 0;
        for b in self.buckets.iter() {
            // Acquire (both): links, as in `walk` (module doc).
            let mut cur = b.load(Ordering::Acquire) & !REMOVED;
            // SAFETY: as in `walk`.
            while let Some(item) = unsafe { (cur as *const Item).as_ref() } {
                n += !item.removed() as usize;
                // Acquire: an item link, as in `walk` (module doc).
                cur = item.next.load(Ordering::Acquire) & !REMOVED;
            }
        }
        n
    }
}

impl Drop for MvccTable {
    fn drop(&mut self) {
        for b in self.buckets.iter() {
            let mut cur = b.load(Ordering::Relaxed) & !REMOVED;
            while cur != 0 {
                // SAFETY: the table is going: what it still links is ours
                // (unlinked items were handed to `Retire`).
                let item = unsafe { Box::from_raw(cur as *mut Item) };
                cur = item.next.load(Ordering::Relaxed) & !REMOVED;
            }
        }
    }
}

/// Frees items at once: only where no other thread can hold one (tests).
#[cfg(test)]
pub(crate) struct FreeNow(pub usize);

#[cfg(test)]
impl Retire for FreeNow {
    fn retire(&mut self, item: *mut Item) {
        self.0 += 1;
        // SAFETY: the test's single thread holds no reference to it.
        #[cfg(not(feature = "loom"))]
        drop(unsafe { Box::from_raw(item) });
        // Under loom other modelled threads may still hold it: leak.
        #[cfg(feature = "loom")]
        let _ = item;
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove() {
        let m = MvccTable::new(1); // two buckets: long chains
        let t = TableId::new(3);
        let mut r = FreeNow(0);
        let keys: Vec<Vec<u8>> = (0..50u32).map(|k| k.to_be_bytes().to_vec()).collect();
        let items: Vec<*const Item> = keys
            .iter()
            .map(|k| m.find_or_insert(t, k, &mut r) as *const Item)
            .collect();
        for (k, &i) in keys.iter().zip(&items) {
            assert!(
                std::ptr::eq(m.find_or_insert(t, k, &mut r), i),
                "one item per key"
            );
            assert!(std::ptr::eq(m.find(t, k, &mut r).unwrap(), i));
            assert!(m.find(TableId::new(4), k, &mut r).is_none(), "tables apart");
        }
        assert_eq!(m.count(), 50);
        for k in keys.iter().step_by(2) {
            let i = m.find(t, k, &mut r).unwrap();
            assert!(m.remove(i, &mut r));
        }
        assert_eq!(r.0, 25, "every removed item unlinked and retired once");
        assert_eq!(m.count(), 25);
        for (n, k) in keys.iter().enumerate() {
            assert_eq!(m.find(t, k, &mut r).is_some(), n % 2 == 1, "key {n}");
        }
        // A removed key comes back as a fresh item.
        let again = m.find_or_insert(t, &keys[0], &mut r);
        assert_eq!(again.key(), &keys[0][..]);
        assert_eq!(m.count(), 26);
    }

    /// Threads insert, find and remove the same few keys at once: each
    /// key has at most one live item at any time, and at the end every
    /// key that was not removed last is found.
    #[test]
    fn racing_inserts_make_one_item_per_key() {
        let m = MvccTable::new(2);
        let t = TableId::new(0);
        std::thread::scope(|s| {
            for id in 0..4u32 {
                let m = &m;
                s.spawn(move || {
                    // Items are never freed here (the threads may hold
                    // them): count them only.
                    struct Leak;
                    impl Retire for Leak {
                        fn retire(&mut self, _: *mut Item) {}
                    }
                    let mut r = Leak;
                    for n in 0..2_000u32 {
                        let k = ((n * 7 + id) % 16).to_be_bytes();
                        let i = m.find_or_insert(t, &k, &mut r);
                        assert_eq!(i.key(), &k[..]);
                        if n % 5 == id % 5 {
                            m.remove(i, &mut r);
                        }
                    }
                });
            }
        });
        let mut r = FreeNow(0);
        for k in 0..16u32 {
            let k = k.to_be_bytes();
            let mut live = 0;
            for b in m.buckets.iter() {
                let mut cur = b.load(Ordering::Acquire) & !REMOVED;
                // SAFETY: no other thread runs.
                while let Some(item) = unsafe { (cur as *const Item).as_ref() } {
                    live += (!item.removed() && item.key() == &k[..]) as usize;
                    cur = item.next.load(Ordering::Acquire) & !REMOVED;
                }
            }
            assert!(live <= 1, "key {k:?} has {live} live items");
            let _ = m.find(t, &k, &mut r);
        }
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Two threads insert the same key while a third removes another key
    /// of the same bucket: both inserters get the same item, and the
    /// removed key is gone.
    #[test]
    fn loom_insert_race_and_remove() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let m = Arc::new(MvccTable::new(0)); // one bucket
            let t = TableId::new(0);
            let other = m.find_or_insert(t, b"x", &mut FreeNow(0)) as *const Item as usize;
            let inserters: Vec<_> = (0..2)
                .map(|_| {
                    let m = Arc::clone(&m);
                    loom::thread::spawn(move || {
                        m.find_or_insert(t, b"k", &mut FreeNow(0)) as *const Item as usize
                    })
                })
                .collect();
            {
                // SAFETY: items are leaked under loom (`FreeNow`).
                let x = unsafe { &*(other as *const Item) };
                assert!(m.remove(x, &mut FreeNow(0)));
            }
            let got: Vec<usize> = inserters.into_iter().map(|h| h.join().unwrap()).collect();
            assert_eq!(got[0], got[1], "one item per key");
            assert!(m.find(t, b"x", &mut FreeNow(0)).is_none());
            assert_eq!(
                m.find(t, b"k", &mut FreeNow(0))
                    .map(|i| i as *const Item as usize),
                Some(got[0])
            );
        });
    }
}
