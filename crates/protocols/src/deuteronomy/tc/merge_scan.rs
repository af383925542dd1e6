//! A transaction's scans: the TC's index and the DC merged in key
//! order, a chunk from each at a time.

use std::ops::Bound;

use granary_api::{TableId, TxError};

use super::txn::{Miss, Txn};
use crate::deuteronomy::shared::Table;
use crate::deuteronomy::table::Item;
use crate::reclaim::Pin;

/// Keys a scan takes from each source per round.
pub(super) const SCAN_CHUNK: usize = 64;

impl<'a> Txn<'a> {
    /// A scan merges two ordered sources, a chunk at a time: the keys the
    /// TC has items for (its index, read first) and the keys in the DC. A
    /// key with an item reads its version at our timestamp (the DC's
    /// value, read again, if none is listed there); a key with none takes
    /// the DC chunk's value, which is the one we should see (see the
    /// module's notes on what the DC holds).
    /// Each round covers keys up to the nearer of the two chunks' last
    /// keys, so no key of either source is skipped.
    pub(super) fn merge_scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        table: &Table,
        (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
        limit: usize,
        reverse: bool,
        mut f: F,
    ) -> Result<(), TxError> {
        let owned = |b: Bound<&[u8]>| b.map(<[u8]>::to_vec);
        let (mut lo, mut hi) = (owned(lo), owned(hi));
        let mut tc: Vec<(Vec<u8>, *const Item)> = Vec::with_capacity(SCAN_CHUNK);
        let mut dc: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(SCAN_CHUNK);
        let mut n = 0;
        let g = crossbeam_epoch::pin();
        loop {
            tc.clear();
            dc.clear();
            let (l, h) = (as_ref(&lo), as_ref(&hi));
            table.index.scan(
                l,
                h,
                reverse,
                &Pin(&g),
                |_, _| {},
                |k, c| {
                    tc.push((k.to_vec(), c));
                    tc.len() < SCAN_CHUNK
                },
            );
            self.s
                .dc
                .range(t.index(), l, h, SCAN_CHUNK, reverse, &mut |k, v| {
                    dc.push((k.to_vec(), v.to_vec()));
                    true
                })
                .map_err(TxError::Failed)?;
            let (tc_full, dc_full) = (tc.len() == SCAN_CHUNK, dc.len() == SCAN_CHUNK);
            // The last key this round may settle.
            let edge: Option<Vec<u8>> = match (tc_full, dc_full) {
                (false, false) => None,
                (true, false) => tc.last().map(|e| e.0.clone()),
                (false, true) => dc.last().map(|e| e.0.clone()),
                (true, true) => {
                    let (a, b) = (&tc.last().expect("full").0, &dc.last().expect("full").0);
                    Some(if (a < b) != reverse {
                        a.clone()
                    } else {
                        b.clone()
                    })
                }
            };
            let before = |k: &[u8]| match &edge {
                None => true,
                Some(e) => (k <= e.as_slice()) != reverse || k == e.as_slice(),
            };
            let (mut i, mut j) = (0, 0);
            loop {
                let a = tc.get(i).filter(|e| before(&e.0));
                let b = dc.get(j).filter(|e| before(&e.0));
                let (key, item, dc_value) = match (a, b) {
                    (None, None) => break,
                    (Some(a), None) => (&a.0, Some(a.1), None),
                    (None, Some(b)) => (&b.0, None, Some(&b.1)),
                    (Some(a), Some(b)) if a.0 == b.0 => (&a.0, Some(a.1), Some(&b.1)),
                    (Some(a), Some(b)) if (a.0 < b.0) != reverse => (&a.0, Some(a.1), None),
                    (Some(_), Some(b)) => (&b.0, None, Some(&b.1)),
                };
                if item.is_some() {
                    i += 1;
                }
                if dc_value.is_some() {
                    j += 1;
                }
                // SAFETY: an evicted item is freed past a grace period, and
                // we are pinned.
                let item = item.map(|c| unsafe { &*c });
                let value = match item {
                    // Read after the version list: a version applied and
                    // trimmed since the DC chunk was read is in the DC now.
                    Some(i) => match self.visible(i) {
                        Ok(v) => self.value(i, v)?,
                        Err(Miss::Gone) => self.read(t, key)?,
                        Err(blocked) => return Err(blocked.into()),
                    },
                    // No item when the index was read (before the DC): no
                    // version we may see can have reached the DC since.
                    None => dc_value.map(Vec::as_slice),
                };
                if let Some(v) = value {
                    n += 1;
                    if !f(key, v) || n == limit {
                        return Ok(());
                    }
                }
            }
            let Some(edge) = edge else { return Ok(()) };
            match reverse {
                false => lo = Bound::Excluded(edge),
                true => hi = Bound::Excluded(edge),
            }
        }
    }
}

pub(super) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}
