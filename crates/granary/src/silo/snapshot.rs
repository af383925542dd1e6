//! Snapshot transactions (Silo §4.9): read-only, as of the worker's
//! snapshot epoch `se_w`, never validated, never aborted.
//!
//! A snapshot at `se` (a multiple of k) shows exactly the transactions of
//! epochs `< se` — the state at the boundary where epoch `se` began. (The
//! paper writes "epoch ≤ se_w", but with that reading its own overwrite
//! rule — copy only when `snap(old) ≠ snap(new)` — loses a version written
//! in epoch `se` itself and overwritten later in the same period; with the
//! strict reading the rule is exact: a version from epoch `o` is visible to
//! some snapshot that a write in epoch `w` hides it from iff
//! `o < snap(w)`.) For each record the reader wants the newest version
//! with epoch `< se`: the record itself if its TID is old enough (read
//! under the usual TID-word check), else the first such version down its
//! `prev` chain.
//! Older versions are immutable and freed only after every worker's
//! snapshot epoch has passed the epoch that superseded them.

use std::ops::Bound;

use granary_api::TableId;

use crate::silo::error::Error;
use crate::silo::pin::ReadPin;
use crate::silo::record::Record;
use crate::silo::shared::Shared;
use crate::silo::sync::{fence, Ordering};
use crate::silo::tid::Tid;
use granary_api::limits::{check_bounds, check_key};

/// A snapshot transaction in progress; see [`Worker::snapshot`](crate::Worker::snapshot).
pub struct Snapshot<'w> {
    shared: &'w Shared,
    /// The worker's snapshot epoch `se_w`.
    se: u64,
    /// Where reads copy values (the worker's read buffer).
    buf: &'w mut Vec<u8>,
}

impl<'w> Snapshot<'w> {
    pub(crate) fn new(shared: &'w Shared, se: u64, buf: &'w mut Vec<u8>) -> Self {
        Snapshot { shared, se, buf }
    }

    /// The snapshot epoch this transaction reads at: it sees every
    /// transaction of an earlier epoch, and none of a later one.
    pub fn snapshot_epoch(&self) -> u64 {
        self.se
    }

    /// Read `key` as of the snapshot. The slice is valid until the next call.
    ///
    /// # Errors
    /// [`Error::KeyTooLarge`], [`Error::UnknownTableId`].
    pub fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, Error> {
        check_key(key)?;
        let tree = &self.shared.table(t)?.tree;
        // SAFETY: pinned for the whole snapshot transaction.
        let pin = unsafe { ReadPin::new() };
        let Some(p) = tree.find(key, &pin) else {
            return Ok(None);
        };
        // SAFETY: reachable from the tree while pinned.
        let found = unsafe { read_as_of(&*p, self.se, self.buf) };
        Ok(found.then_some(&self.buf[..]))
    }

    /// Visit up to `limit` keys of the snapshot within the bounds, in order
    /// (descending if `reverse`); `f` returns false to stop.
    ///
    /// # Errors
    /// [`Error::KeyTooLarge`], [`Error::UnknownTableId`].
    pub fn scan(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        check_bounds(lo, hi)?;
        if limit == 0 {
            return Ok(());
        }
        let tree = &self.shared.table(t)?.tree;
        let (se, buf) = (self.se, &mut *self.buf);
        // SAFETY: pinned for the whole snapshot transaction.
        let pin = unsafe { ReadPin::new() };
        let mut emitted = 0;
        tree.scan(
            lo,
            hi,
            reverse,
            &pin,
            |_, _| {},
            |key, p| {
                // SAFETY: reachable from the tree while pinned.
                if !unsafe { read_as_of(&*p, se, buf) } {
                    return true;
                }
                emitted += 1;
                f(key, buf) && emitted < limit
            },
        );
        Ok(())
    }
}

/// Copy the version of `rec` visible at snapshot epoch `se` into `out`;
/// false if the key did not exist then.
///
/// # Safety
/// `rec` is reachable and the caller is pinned with snapshot epoch `se`.
unsafe fn read_as_of(rec: &Record, se: u64, out: &mut Vec<u8>) -> bool {
    loop {
        let t = rec.stable_tid();
        if t.epoch() < se {
            let t2 = rec.read(out);
            if t2 != t {
                continue;
            }
            return !t.is_absent();
        }
        // Acquire: pairs with the Release store of `prev` in Phase 3.
        let mut p = rec.prev.load(Ordering::Acquire);
        fence(Ordering::Acquire);
        if rec.tid.load(Ordering::Relaxed) != t.0 {
            continue;
        }
        while !p.is_null() {
            // SAFETY: versions on the chain that a reader at `se` can reach
            // are freed only after `snap_safe` passes `se` (gc module).
            let v = unsafe { &*p };
            let vt = Tid(v.tid.load(Ordering::Acquire));
            if vt.epoch() < se {
                if vt.is_absent() {
                    return false;
                }
                v.load_value(out);
                return true;
            }
            p = v.prev.load(Ordering::Acquire);
        }
        return false;
    }
}
