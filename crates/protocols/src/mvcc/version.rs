//! Versions and their chains: begin and end fields that hold a timestamp
//! or a writer's reference, and the tables of chains by key.

use super::*;

/// "Not ended yet", and the begin of an aborted version (never visible).
pub(super) const INF: u64 = (1 << 63) - 1;
/// A field holding a transaction reference rather than a timestamp.
pub(super) const REF: u64 = 1 << 63;
/// The end of a deletion whose key has left the tree (`unhook_due`): as a
/// timestamp it is later than any, so the deletion stays visible to
/// readers still on the chain, and it is not `INF`, so no writer can
/// claim it; validation fails a read of it (a new chain may hold a newer
/// version of the key).
pub(super) const DEAD: u64 = INF - 1;
pub(super) const SLOT_BITS: u32 = 10;

pub(super) fn txref(slot: usize, seq: u64) -> u64 {
    REF | seq << SLOT_BITS | slot as u64
}

pub(super) fn ref_parts(f: u64) -> (usize, u64) {
    (
        (f & ((1 << SLOT_BITS) - 1)) as usize,
        (f & !REF) >> SLOT_BITS,
    )
}

/// A version's header: its validity and the version below it, and the
/// Serial Safety Net's two stamps (`crate::ermia`; the other designs
/// leave them as made).
pub(super) struct Stamps {
    pub(super) begin: AtomicU64,
    pub(super) end: AtomicU64,
    pub(super) prev: AtomicPtr<Version>,
    /// η(V): the latest commit stamp of a committed reader of this
    /// version, or of its creator (SSN's `v.pstamp`). Read and written
    /// only under the store's commit latch (`Certifier::SERIAL_COMMIT`).
    pub(super) pstamp: AtomicU64,
    /// π(U) of the committed transaction U that overwrote this version,
    /// `INF` until then (SSN's `v.sstamp`). Under the latch too.
    pub(super) sstamp: AtomicU64,
}

impl Stamps {
    /// Claim this version's end for `me` (a writer's reference, or
    /// [`DEAD`]): compare-and-swap from [`INF`], so of the writers that
    /// race for a version exactly one wins (the first updater). Checked
    /// by the loom model `loom_end_claim_has_one_winner`.
    #[inline]
    pub(super) fn claim_end(&self, me: u64) -> bool {
        // AcqRel: Release so a reader that sees our reference here also
        // sees our slot word naming the transaction (stored ACTIVE before
        // any write); Acquire so we see the version as the last claimant
        // left it (an aborted writer restores INF with Release).
        self.end
            .compare_exchange(INF, me, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// A version: [`Stamps`] and the value's bytes right after them, in one
/// allocation ([`Tail`], [`Tight`]). A version of a value up to 36 bytes is one cache
/// line; a longer one is one block, not a header and a second, dependent
/// heap block (BOHM's 10RMW writes 1,000-byte values: two allocations and
/// two frees per write were a quarter of its time). The value and its
/// length are written only by the version's creator before it commits.
pub(super) type Version = Tail<Stamps, Tight>;

/// A new version of `value` (`None`: a deletion) by `begin`, on `prev`.
pub(super) fn new_version(begin: u64, prev: *mut Version, value: Option<&[u8]>) -> *mut Version {
    #[cfg(test)]
    LIVE_VERSIONS.fetch_add(1, Ordering::Relaxed);
    let stamps = Stamps {
        begin: AtomicU64::new(begin),
        end: AtomicU64::new(INF),
        prev: AtomicPtr::new(prev),
        pstamp: AtomicU64::new(0),
        sstamp: AtomicU64::new(INF),
    };
    Version::alloc(stamps, value, 0)
}

/// Free a version made by [`new_version`].
///
/// # Safety
/// As [`Tail::free`].
pub(super) unsafe fn free_version(p: *mut Version) {
    #[cfg(test)]
    LIVE_VERSIONS.fetch_sub(1, Ordering::Relaxed);
    // SAFETY: the caller's contract.
    unsafe { Version::free(p) }
}

/// Versions alive in this process (unit tests only: they check that
/// garbage is freed, not just unlinked). A plain std atomic even under
/// loom: a static needs a const constructor, which loom's lack, and the
/// count orders nothing (as the read cache's test counters).
#[cfg(test)]
pub(super) static LIVE_VERSIONS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Free the versions at `ps` (addresses, or [`Tail::tagged`] ones) once
/// no pinned thread can see them: one deferred call for the lot (see
/// [`crate::reclaim::retire_all`]).
///
/// # Safety
/// Each is unreachable for threads that pin from now on, and retired once.
pub(super) unsafe fn retire_versions(g: &Guard, ps: Vec<usize>) {
    /// # Safety
    /// As [`free_version`], for an address or a [`Tail::tagged`] one.
    unsafe fn free(p: usize) {
        #[cfg(test)]
        LIVE_VERSIONS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { Version::free_tagged(p) }
    }
    // SAFETY: the caller's contract.
    unsafe { retire_all(g, ps, free) }
}

// SAFETY: a version's length and bytes change only while it is its
// uncommitted writer's (readers other than the writer never read them
// then: an active writer's versions are invisible to them).
unsafe impl Sync for Version {}
// SAFETY: as above; a version is plain data.
unsafe impl Send for Version {}

/// A key's version chain (what the index maps the key to).
pub(super) struct Chain {
    pub(super) head: AtomicPtr<Version>,
}

/// The most chains a table's array may hold ([`TableOptions::dense_keys`]):
/// 8 GiB of them.
pub(super) const DENSE_MAX: u64 = 1 << 30;

/// A table: its index, which maps each key to its chain, and the chains
/// of the keys that are numbers below [`TableOptions::dense_keys`], in an
/// array by number. Such a key's chain is found by its address, one load
/// from its newest version (as the BOHM authors' stores find a record by
/// `&slots[key]`), not by an index probe first; the index still maps the
/// key to it, for scans and their phantom checks, from the key's first
/// write on. An array chain is never unhooked or freed before the table:
/// a deleted key keeps its tombstone (older versions are still cut).
pub(super) struct Table {
    pub(super) tree: Tree<*const Chain>,
    pub(super) dense: Box<[Chain]>,
}

impl Table {
    pub(super) fn new(tree: Tree<*const Chain>, o: TableOptions) -> Result<Table, Error> {
        if o.dense_keys > DENSE_MAX {
            return Err(Error::InvalidOption(format!(
                "dense_keys({}): at most {DENSE_MAX} chains per table",
                o.dense_keys
            )));
        }
        let mut dense = Vec::new();
        dense
            .try_reserve_exact(o.dense_keys as usize)
            .map_err(|e| Error::InvalidOption(format!("dense_keys({}): {e}", o.dense_keys)))?;
        dense.resize_with(o.dense_keys as usize, || Chain {
            head: AtomicPtr::new(std::ptr::null_mut()),
        });
        Ok(Table {
            tree,
            dense: dense.into_boxed_slice(),
        })
    }

    /// The array chain of `key`, if it is a number below the bound.
    #[inline(always)]
    pub(super) fn dense(&self, key: &[u8]) -> Option<&Chain> {
        let k: [u8; 8] = key.try_into().ok()?;
        self.dense.get(usize::try_from(u64::from_be_bytes(k)).ok()?)
    }

    /// Whether `c` is one of the array's chains.
    #[inline]
    pub(super) fn owns(&self, c: *const Chain) -> bool {
        in_array(&self.dense, c)
    }
}

/// Whether `c` points into `dense` (an array chain, not the index's own).
#[inline]
pub(super) fn in_array(dense: &[Chain], c: *const Chain) -> bool {
    dense.as_ptr_range().contains(&c)
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Two writers, transaction 1 of slots 0 and 1, take their read times
    /// and claim the end of the same newest version (`Stamps::claim_end`,
    /// as `Txn::write` does): exactly one wins, and the end names it. The
    /// loser, reading the end as a reader does (`Txn::visible`), finds the
    /// winner's slot at the winner's transaction (`Slot::status`), not at
    /// an older one.
    #[test]
    fn loom_end_claim_has_one_winner() {
        loom::model(|| {
            let clock = Arc::new(AtomicU64::new(2));
            let slots = Arc::new([Slot::default(), Slot::default()]);
            let v = Arc::new(Stamps {
                begin: AtomicU64::new(1),
                end: AtomicU64::new(INF),
                prev: AtomicPtr::new(std::ptr::null_mut()),
                pstamp: AtomicU64::new(0),
                sstamp: AtomicU64::new(INF),
            });
            let writers: Vec<_> = (0..2)
                .map(|slot| {
                    let (clock, slots, v) = (clock.clone(), slots.clone(), v.clone());
                    loom::thread::spawn(move || {
                        slots[slot].take_read_time(1, &clock);
                        if v.claim_end(txref(slot, 1)) {
                            return true;
                        }
                        // Acquire: as `Txn::visible` reads an end field.
                        let (winner, seq) = ref_parts(v.end.load(Ordering::Acquire));
                        assert_ne!(winner, slot, "lost to itself");
                        assert_eq!(
                            slots[winner].status(seq).map(|s| s.0),
                            Some(ACTIVE),
                            "the winner's slot is not at its transaction"
                        );
                        false
                    })
                })
                .collect();
            let wins = writers
                .into_iter()
                .map(|w| w.join().unwrap())
                .filter(|&won| won)
                .count();
            assert_eq!(wins, 1, "{wins} writers claimed the version");
            let (winner, seq) = ref_parts(v.end.load(Ordering::Relaxed));
            assert!(winner < 2 && seq == 1, "the end names no writer");
        });
    }
}
