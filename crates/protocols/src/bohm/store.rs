//! The multiversion store (§3.1): each key's chain of versions, newest
//! first, in a hash map by key; a placeholder version's data is produced
//! by its procedure.

use super::*;

/// A value's bytes (`None`: a deletion).
pub(super) type Data = Tail<()>;

/// Placeholder states.
pub(super) const UNREADY: u8 = 0;
pub(super) const READY: u8 = 1;

/// A version of a key (bohm-vldb15 §3.2.3, Figure 3). **Deviation:** no
/// end timestamp. A chain is ordered by begin, and a reader takes the
/// first version that began before it (or, declared, the one its CC
/// thread annotated), so an end would be written and never read; writing
/// it cost the CC thread a miss on the old version and moved that line
/// away from the execution thread about to read it.
pub(super) struct Version {
    /// The producing procedure's timestamp.
    pub(super) begin: u64,
    /// The procedure that produces the data (valid while UNREADY).
    pub(super) producer: *const Slot,
    pub(super) state: AtomicU8,
    /// The value, once READY (null: absent).
    pub(super) data: AtomicPtr<Data>,
    pub(super) prev: AtomicPtr<Version>,
}

impl Version {
    /// Publish the placeholder's value `d` (null: absent), produced by
    /// its procedure on an execution thread (§3.3.1): the data, then
    /// READY. Model-checked by `loom_ready_placeholder_shows_its_value`.
    #[inline]
    pub(super) fn produce(&self, d: *mut Data) {
        // Release: publishes the value's bytes, written before, with the
        // pointer (a reader that loads it with Acquire sees them).
        self.data.store(d, Ordering::Release);
        // Release: publishes the data pointer (and the bytes) before
        // READY, which readers on other threads wait for.
        self.state.store(READY, Ordering::Release);
    }

    /// Whether the value is produced: once true, [`Version::data`] is the
    /// value for good.
    #[inline]
    pub(super) fn is_ready(&self) -> bool {
        // Acquire: pairs with `produce`'s Release of READY, so the data
        // pointer loaded after this is the produced one.
        self.state.load(Ordering::Acquire) == READY
    }

    /// The produced value (null: absent); only after [`Version::is_ready`]
    /// (or for a version that never was a placeholder).
    #[inline]
    pub(super) fn data(&self) -> *mut Data {
        // Acquire: pairs with `produce`'s Release of the pointer, so the
        // value's bytes are seen.
        self.data.load(Ordering::Acquire)
    }
}

// SAFETY: fields are atomics, or written once before the version is
// published (`begin`, `producer`); `producer` is dereferenced only while
// its batch is alive (see `Slot`).
unsafe impl Send for Version {}
// SAFETY: as above.
unsafe impl Sync for Version {}

/// A key's chain, newest version first; what the index maps a key to.
/// Only the CC thread that owns the key changes it. The key's bytes
/// follow it (a [`Tail`]), for the CC thread's own map to compare.
pub(super) type Chain = Tail<ChainHead>;

pub(super) struct ChainHead {
    pub(super) head: AtomicPtr<Version>,
    pub(super) table: TableId,
}

/// A new chain for `key` of table `t`, with no version yet.
pub(super) fn new_chain(t: TableId, key: &[u8]) -> *mut Chain {
    Chain::alloc(
        ChainHead {
            head: AtomicPtr::default(),
            table: t,
        },
        Some(key),
        0,
    )
}

/// A CC thread's own map from the keys of its partition to their chains:
/// the paper's per-thread hash table (§3.2.2), in front of the shared
/// ordered index (which scans and closures use, and where every chain is
/// too). Open addressing, linear probing, never shrinks (chains live as
/// long as the database).
#[derive(Default)]
pub(super) struct ChainMap {
    /// (hash, chain); a null chain is an empty slot.
    pub(super) slots: Vec<(u64, *const Chain)>,
    pub(super) len: usize,
}

impl ChainMap {
    pub(super) fn slot(&self, h: u64) -> usize {
        // The hash's low bits pick the CC thread: mix before using them.
        let x = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (x >> 20) as usize & (self.slots.len() - 1)
    }

    /// The chain of `key` (hashed to `h`) in table `t`, if mapped.
    pub(super) fn get(&self, h: u64, t: TableId, key: &[u8]) -> Option<*const Chain> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = self.slot(h);
        loop {
            let (sh, c) = self.slots[i];
            if c.is_null() {
                return None;
            }
            // SAFETY: chains live as long as the database; their keys
            // never change.
            if sh == h {
                // SAFETY: as above.
                let chain = unsafe { &*c };
                // SAFETY: as above.
                if chain.table == t && unsafe { chain.value() } == Some(key) {
                    return Some(c);
                }
            }
            i = (i + 1) & (self.slots.len() - 1);
        }
    }

    /// Start fetching the slot `h` hashes to.
    pub(super) fn prefetch(&self, h: u64) {
        if !self.slots.is_empty() {
            prefetch(&self.slots[self.slot(h)]);
        }
    }

    /// Start fetching the chain in the slot `h` hashes to (its first
    /// probe; the slot should be in cache by now).
    pub(super) fn prefetch_chain(&self, h: u64) {
        if !self.slots.is_empty() {
            prefetch(self.slots[self.slot(h)].1);
        }
    }

    /// Start fetching the newest version of the chain in the slot `h`
    /// hashes to (the slot and the chain should be in cache by now).
    pub(super) fn prefetch_head(&self, h: u64) {
        if !self.slots.is_empty() {
            let c = self.slots[self.slot(h)].1;
            if !c.is_null() {
                // SAFETY: chains live as long as the database; only the
                // pointer to the newest version is read. Acquire: as
                // planning's own load of the head (a hint either way).
                prefetch(unsafe { &*c }.head.load(Ordering::Acquire));
            }
        }
    }

    /// Map a chain not yet mapped.
    pub(super) fn insert(&mut self, h: u64, c: *const Chain) {
        if 2 * (self.len + 1) > self.slots.len() {
            let size = (2 * self.slots.len()).max(1024);
            let old = std::mem::replace(&mut self.slots, vec![(0, std::ptr::null()); size]);
            for (oh, oc) in old {
                if !oc.is_null() {
                    self.place(oh, oc);
                }
            }
        }
        self.place(h, c);
        self.len += 1;
    }

    pub(super) fn place(&mut self, h: u64, c: *const Chain) {
        let mut i = self.slot(h);
        while !self.slots[i].1.is_null() {
            i = (i + 1) & (self.slots.len() - 1);
        }
        self.slots[i] = (h, c);
    }
}

/// The most cut values kept for reuse (beyond, they are freed).
pub(super) const MAX_SPARE: usize = 1 << 16;

thread_local! {
    /// Procedures this execution thread has completed and not yet handed
    /// back, by client.
    pub(super) static COMPLETED: std::cell::RefCell<Vec<(Arc<Client>, Vec<Finished>)>> =
        std::cell::RefCell::default();

    /// This execution thread's values to reuse (taken from
    /// [`Shared::spare`]), freed when the thread ends.
    static SPARE: std::cell::RefCell<Spare> = std::cell::RefCell::default();
}

#[derive(Default)]
pub(super) struct Spare(pub(super) Vec<usize>);

impl Drop for Spare {
    fn drop(&mut self) {
        for d in self.0.drain(..) {
            // SAFETY: cut values, unreachable, listed once.
            unsafe { Data::free(d as *mut Data) };
        }
    }
}

/// Take the values the CC threads cut, if this thread has none left
/// (once per batch: not a lock per value).
pub(super) fn refill_spare(s: &Shared) {
    SPARE.with_borrow_mut(|spare| {
        if spare.0.is_empty() {
            let mut shared = s.spare.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::swap(&mut spare.0, &mut shared);
        }
    });
}

/// A value holding `bytes`, in a reused block if one fits.
pub(super) fn make_value(bytes: &[u8]) -> *mut Data {
    let reused = SPARE.with_borrow_mut(|spare| {
        let d = spare.0.pop()? as *mut Data;
        // The next one is likely of the same size (a workload's values
        // mostly are): its lines start coming now, owned, so that filling
        // it waits for none (reading this one's room waited for its first
        // line: a fifth of BOHM's 10RMW time).
        if let Some(&next) = spare.0.last() {
            crate::value::prefetch_for_write(next as *const u8, (bytes.len() + 64).div_ceil(64));
        }
        // SAFETY: a cut value, unreachable: ours alone.
        let room = unsafe { (*d).room() };
        // Reuse a block that fits without wasting more than half of it.
        if room >= bytes.len() && room <= 2 * bytes.len() + 64 {
            // SAFETY: as above.
            unsafe { (*d).overwrite(Some(bytes)) };
            return Some(d);
        }
        // SAFETY: as above.
        unsafe { Data::free(d) };
        None
    });
    reused.unwrap_or_else(|| Data::alloc((), Some(bytes), 0))
}

/// Free `v` and every version below it.
///
/// # Safety
/// No one can reach them any more.
pub(super) unsafe fn free_chain(mut v: *mut Version) {
    while !v.is_null() {
        // SAFETY: the caller's contract.
        let b = unsafe { Box::from_raw(v) };
        let d = b.data.load(Ordering::Relaxed);
        if !d.is_null() {
            // SAFETY: owned by this version alone.
            unsafe { Data::free(d) };
        }
        v = b.prev.load(Ordering::Relaxed);
    }
}

/// `key` of table `t` hashed (FNV-1a over the table and the key): its
/// CC thread is `hash % m`.
pub(super) fn key_hash(t: TableId, key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in t.index().to_le_bytes().iter().chain(key) {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// An execution thread produces a placeholder's value
    /// (`Version::produce`, as `execute` publishes it) while a reader on
    /// another execution thread waits for it (`Version::is_ready`, as
    /// `resolve` does when the producer runs elsewhere): once READY, the
    /// reader sees the value's pointer and its bytes.
    #[test]
    fn loom_ready_placeholder_shows_its_value() {
        loom::model(|| {
            let v = Arc::new(Version {
                begin: 1,
                producer: std::ptr::null(),
                state: AtomicU8::new(UNREADY),
                data: AtomicPtr::default(),
                prev: AtomicPtr::default(),
            });
            let exec = {
                let v = v.clone();
                loom::thread::spawn(move || v.produce(Data::alloc((), Some(&[7; 8]), 0)))
            };
            while !v.is_ready() {
                loom::thread::yield_now();
            }
            let d = v.data();
            assert!(!d.is_null(), "READY without its value");
            // SAFETY: produced: immutable while the version lives.
            assert_eq!(unsafe { (*d).value() }, Some(&[7u8; 8][..]));
            exec.join().unwrap();
            // SAFETY: the model's only value, made above, freed once.
            unsafe { Data::free(d) };
        });
    }
}
