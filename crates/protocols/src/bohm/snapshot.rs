//! Snapshot reads at the completed prefix of the log, without the
//! pipeline (reconnaissance reads here).

use super::*;

/// A snapshot read ([`Runner::snapshot_read`]): each key's newest
/// version timestamped below `bound`, all of them produced.
pub struct Snapshot<'a> {
    pub(super) s: &'a Shared,
    pub(super) g: &'a crossbeam_epoch::Guard,
    pub(super) bound: u64,
    pub(super) batch: ScanBatch<*const Chain>,
}

impl Snapshot<'_> {
    /// The value of `chain` at the snapshot.
    pub(super) fn visible<'v>(&self, chain: *const Chain) -> Option<&'v [u8]> {
        // SAFETY: chains live as long as the database.
        let chain = unsafe { &*chain };
        // Acquire: a chain link (module doc): the version's fields are seen.
        let mut v = chain.head.load(Ordering::Acquire);
        // SAFETY: versions at or above the one visible at `bound` are not
        // cut while our pin holds (see `snapshot_read`); the ones a closure
        // unlinks are freed through the epoch we are pinned in.
        while !v.is_null() && unsafe { (*v).begin } >= self.bound {
            // Acquire: a chain link (module doc).
            // SAFETY: as above.
            v = unsafe { (*v).prev.load(Ordering::Acquire) };
        }
        if v.is_null() {
            return None;
        }
        // SAFETY: as above.
        let ver = unsafe { &*v };
        debug_assert!(ver.is_ready());
        let d = ver.data();
        // SAFETY: READY data is immutable while its version is alive.
        (!d.is_null()).then(|| unsafe { (*d).value() }).flatten()
    }
}

impl ReadOnly for Snapshot<'_> {
    fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        check_key(key)?;
        let tree = self.s.tables.get(t)?;
        Ok(tree.find(key, &Pin(self.g)).and_then(|c| self.visible(c)))
    }

    fn read_range(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), TxError> {
        check_bounds(lo, hi)?;
        let tree = self.s.tables.get(t)?;
        let mut batch = std::mem::take(&mut self.batch);
        let this = &*self;
        let r = visit(
            &mut batch,
            tree,
            (lo, hi),
            limit,
            reverse,
            &Pin(this.g),
            |_, c| Ok(this.visible(c)),
            f,
        );
        self.batch = batch;
        r
    }
}
