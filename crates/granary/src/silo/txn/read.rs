//! A transaction's reads: point reads (§4.5's seqlock protocol), prefix
//! reads, prefetches and scans, each recorded for validation.

use std::ops::Bound;

use granary_api::{ticks, TableId};

use crate::silo::error::TxError;
use crate::silo::pin::ReadPin;
use crate::silo::record::Record;
use granary_api::limits::check_bounds;

use super::sets::*;
use super::*;

impl<'w> Transaction<'w> {
    /// Read `key`. The slice is valid until the next operation.
    ///
    /// # Errors
    /// A conflict, [`Error::KeyTooLarge`](crate::Error::KeyTooLarge), [`Error::UnknownTableId`](crate::Error::UnknownTableId).
    pub fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.get_prefix(t, key, usize::MAX)
    }

    /// As [`Transaction::get`], but copy out at most the first `max_bytes`
    /// of the value (Silo's `max_bytes_read`: its TPC-C stock-level reads
    /// only S_QUANTITY of each stock row). The read is validated exactly as
    /// a full one: the read-set holds the record's TID word either way.
    ///
    /// # Errors
    /// As for [`Transaction::get`].
    #[inline]
    pub fn get_prefix(
        &mut self,
        t: TableId,
        key: &[u8],
        max_bytes: usize,
    ) -> Result<Option<&[u8]>, TxError> {
        self.enter(t, key)?;
        let present = if let Some(i) = self.c.st.find_write(t, key) {
            self.fill_patch(i)?;
            let st = &mut self.c.st;
            match st.write_set[i].value {
                Some(r) => {
                    let (s, n) = (r.0 as usize, (r.1 as usize).min(max_bytes));
                    st.buf.clear();
                    st.buf.extend_from_slice(&st.arena[s..s + n]);
                    true
                }
                None => false,
            }
        } else {
            loop {
                match self.lookup(t, key) {
                    Found::Missing(leaf, version) => {
                        // §4.6: the key must still be missing at commit.
                        self.c.st.node_set.push(NodeEntry { leaf, version });
                        break false;
                    }
                    Found::Record(p) => {
                        // SAFETY: reachable from the tree while pinned.
                        let rec = unsafe { &*p };
                        let t0 = probe(self.c.profiling);
                        let st = &mut self.c.st;
                        let tid = rec.read_prefix(&mut st.buf, max_bytes);
                        if self.c.profiling {
                            self.c.prof.record += ticks() - t0;
                        }
                        let st = &mut self.c.st;
                        if !tid.is_latest() {
                            continue; // superseded by a bigger copy: look again
                        }
                        st.read_set.push(ReadEntry { rec: p, tid });
                        st.last = Some((t, p));
                        st.last_key.clear();
                        granary_api::append_bytes(&mut st.last_key, key);
                        break !tid.is_absent();
                    }
                }
            }
        };
        Ok(present.then_some(&self.c.st.buf[..]))
    }

    /// Start fetching what finding `key` takes into the cache
    /// ([`Tx::prefetch`](granary_api::Tx::prefetch)); nothing is read.
    pub fn prefetch(&mut self, t: TableId, key: &[u8]) {
        if let Ok(table) = self.shared.table(t) {
            // SAFETY: the worker is pinned for the whole transaction.
            let pin = unsafe { ReadPin::new() };
            table.tree.prefetch(key, &pin);
        }
    }

    /// [`Tx::prefetch_many`](granary_api::Tx::prefetch_many), in three
    /// waves, so that each wave's misses overlap: every key's entry (with
    /// a point index its bucket; without, the descents, which go down
    /// together a level at a time: `Tree::find_many`); every present
    /// key's record header; the rest of each record. A wave waits only for
    /// the lines the one before started fetching. Nothing is read for the
    /// transaction (no read-set entry, no conflict); the records found are
    /// kept, in order, for the lookups that follow (`TxState::hints`).
    pub fn prefetch_many(&mut self, keys: &[(TableId, &[u8])]) {
        self.prefetch_prefix_many(keys, usize::MAX);
    }

    /// As [`Transaction::prefetch_many`], fetching only the lines of each
    /// record that hold its header and the first `max_bytes` of its value
    /// ([`Tx::prefetch_prefix_many`](granary_api::Tx::prefetch_prefix_many)).
    pub fn prefetch_prefix_many(&mut self, keys: &[(TableId, &[u8])], max_bytes: usize) {
        /// Records whose lines are fetched together.
        const WAVE: usize = granary_index::Tree::FIND_MANY;
        /// At most this many lines of one record.
        const MOST_LINES: usize = 32;
        // SAFETY: the worker is pinned for the whole transaction.
        let pin = unsafe { ReadPin::new() };
        // Point index buckets first (a tree without one has nothing to
        // fetch before its descent).
        for run in granary_api::table_runs(keys) {
            if let Some(table) = self
                .shared
                .table(keys[run.start].0)
                .ok()
                .filter(|table| table.tree.has_point_index())
            {
                for &(_, k) in &keys[run] {
                    table.tree.prefetch(k, &pin);
                }
            }
        }
        for chunk in keys.chunks(WAVE) {
            let mut found = [None; WAVE];
            // Whether any record found may reach past its first line.
            let mut wide = false;
            // Each run of keys of one table, found together. Without a
            // point index a run of one key is left to its lookup: its
            // descent has nothing to overlap with, and a hint taken out of
            // order (SmallBank's) would descend twice.
            for run in granary_api::table_runs(chunk) {
                let (at, end) = (run.start, run.end);
                if let Some(table) = self
                    .shared
                    .table(chunk[at].0)
                    .ok()
                    .filter(|table| end - at > 1 || table.tree.has_point_index())
                {
                    let ks: [&[u8]; WAVE] =
                        std::array::from_fn(|i| chunk.get(at + i).map_or(&[][..], |e| e.1));
                    table
                        .tree
                        .find_many(&ks[..end - at], &mut found[at..end], &pin);
                    wide |= Record::footprint(table.widest().min(max_bytes)) > 64;
                }
            }
            let mut recs = [std::ptr::null::<Record>(); WAVE];
            for ((r, f), &(t, k)) in recs.iter_mut().zip(found).zip(chunk) {
                if let Some(p) = f {
                    *r = p;
                    granary_index::prefetch_lines(*r as *const u8, 1);
                    self.c.st.hints.push(t, k, *r);
                }
            }
            // The rest of each record, if a record of these tables can
            // have more (reading a record's capacity waits for its first
            // line).
            for &r in recs
                .iter()
                .take(chunk.len() * wide as usize)
                .filter(|r| !r.is_null())
            {
                // SAFETY: reachable from the tree while pinned; the
                // footprint is immutable once published.
                let n = unsafe { &*r }
                    .prefix_footprint(max_bytes)
                    .div_ceil(64)
                    .min(MOST_LINES);
                granary_index::prefetch_lines((r as *const u8).wrapping_add(64), n - 1);
            }
        }
    }

    /// Visit up to `limit` keys in `[lo, hi)`-style bounds in ascending order
    /// (descending if `reverse`), with their values; `f` returns false to
    /// stop. The scanned range is protected against phantoms (§4.6).
    ///
    /// # Errors
    /// A conflict, [`Error::UnknownTableId`](crate::Error::UnknownTableId), [`Error::KeyTooLarge`](crate::Error::KeyTooLarge).
    pub fn scan(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), TxError> {
        check_bounds(lo, hi)?;
        self.enter(t, b"")?;
        if limit == 0 {
            return Ok(());
        }
        // Our own writes shadow the records the scan meets: whole values.
        if self.c.st.patches {
            for i in 0..self.c.st.write_set.len() {
                self.fill_patch(i)?;
            }
        }
        let tree = &self.shared.table(t)?.tree;
        let st = &mut self.c.st;
        // SAFETY: pinned for the whole transaction.
        let pin = unsafe { ReadPin::new() };
        let mut emitted = 0;
        let mut buf = std::mem::take(&mut st.buf);
        let mut node_set = std::mem::take(&mut st.node_set);
        let profiling = self.c.profiling;
        let scan_start = probe(profiling);
        let mut in_records = 0;
        tree.scan(
            lo,
            hi,
            reverse,
            &pin,
            |leaf, version| node_set.push(NodeEntry { leaf, version }),
            |key, p| {
                let mut p = p;
                if let Some(w) = st.find_rec(p).map(|i| &st.write_set[i]) {
                    // Our own write shadows the record.
                    let Some((s, n)) = w.value else { return true };
                    emitted += 1;
                    return f(key, &st.arena[s as usize..(s + n) as usize]) && emitted < limit;
                }
                let tid = loop {
                    let t0 = probe(profiling);
                    // SAFETY: reachable from the tree while pinned.
                    let tid = unsafe { &*p }.read(&mut buf);
                    if profiling {
                        in_records += ticks() - t0;
                    }
                    if tid.is_latest() {
                        break tid;
                    }
                    // Superseded by a bigger copy: the tree has the new one.
                    match tree.find(key, &pin) {
                        Some(q) => p = q,
                        None => return true,
                    }
                };
                st.read_set.push(ReadEntry { rec: p, tid });
                if tid.is_absent() {
                    return true;
                }
                emitted += 1;
                f(key, &buf) && emitted < limit
            },
        );
        st.buf = buf;
        st.node_set = node_set;
        if profiling {
            let all = ticks() - scan_start;
            self.c.prof.record += in_records;
            self.c.prof.index += all.saturating_sub(in_records);
        }
        Ok(())
    }

    /// Collect up to `limit` `(key, value)` pairs of a [`scan`](Self::scan).
    ///
    /// # Errors
    /// As for [`Transaction::scan`].
    pub fn scan_collect(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>, TxError> {
        let mut out = Vec::new();
        self.scan(t, lo, hi, limit, reverse, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }
}
