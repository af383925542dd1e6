//! A transaction's writes: buffered in the write-set until commit; an
//! insert of a new key puts an absent placeholder record in the tree
//! first (§4.5).

use std::ops::Range;

use granary_api::{ticks, TableId};
use granary_index::Insert;

use crate::silo::error::{AbortReason, Error, TxError};
use crate::silo::pin::ReadPin;
use crate::silo::record::Record;
use crate::silo::tid::Tid;
use granary_api::limits::check_value;

use super::sets::*;
use super::*;

impl<'w> Transaction<'w> {
    /// Write `key → value`, inserting the key if it is missing.
    ///
    /// # Errors
    /// A conflict, [`Error::KeyTooLarge`](crate::Error::KeyTooLarge), [`Error::ValueTooLarge`](crate::Error::ValueTooLarge),
    /// [`Error::UnknownTableId`](crate::Error::UnknownTableId).
    pub fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, value, false)
    }

    /// Read-modify-write `key` ([`Tx::update`](granary_api::Tx::update)):
    /// the read copy is changed in place and written, one copy fewer than
    /// a `get`, a copy and a `put`. `None` if the key is absent.
    ///
    /// # Errors
    /// As for [`Transaction::get`] and [`Transaction::put`].
    pub fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        self.enter(t, key)?;
        if let Some(i) = self.c.st.find_write(t, key) {
            // Our own write: change its bytes in the arena.
            self.fill_patch(i)?;
            let st = &mut self.c.st;
            return Ok(st.write_set[i].value.map(|r| {
                let (s, n) = (r.0 as usize, r.1 as usize);
                f(&mut st.arena[s..s + n])
            }));
        }
        // The value read straight after the key: the write set's copy is
        // the only one (§4.5's read, into the arena instead of `buf`).
        Ok(self
            .read_to_change(t, key, |rec, arena, at| {
                (rec.read_prefix_at(arena, at, usize::MAX), None)
            })
            .map(|at| f(&mut self.c.st.arena[at..])))
    }

    /// Read-modify-write one field of `key`'s value
    /// ([`Tx::update_field`](granary_api::Tx::update_field)): only the
    /// field's bytes are copied, into the write set, and only they are
    /// stored at commit (a `WriteKind::Patch`). The read is §4.5's all
    /// the same: the read-set holds the record's TID word, so Phase 2
    /// fails if any byte of the value changed meanwhile. `None` if the key
    /// is absent.
    ///
    /// # Errors
    /// As for [`Transaction::update`].
    pub fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        self.enter(t, key)?;
        if let Some(i) = self.c.st.find_write(t, key) {
            // Our own write: its whole value, changed in the arena.
            self.fill_patch(i)?;
            let st = &mut self.c.st;
            return Ok(st.write_set[i].value.map(|r| {
                let v = &mut st.arena[r.0 as usize..(r.0 + r.1) as usize];
                let n = v.len();
                f(&mut v[granary_api::field_within(&field, n)])
            }));
        }
        Ok(self
            .read_to_change(t, key, |rec, arena, at| {
                let (tid, from) = rec.read_field_at(arena, at, &field);
                (tid, Some(from as u32))
            })
            .map(|at| f(&mut self.c.st.arena[at..])))
    }

    /// The read of [`Transaction::update`] and
    /// [`Transaction::update_field`], for a key this transaction has not
    /// written: find the record, push the key to the arena, and `read`
    /// the bytes to change after it (returning the TID word and, for a
    /// field, where it starts in the value). The read goes into the
    /// read-set and a write-set entry is made, of the whole value or a
    /// `WriteKind::Patch`, whose bytes (the arena from the offset returned
    /// to its end) the caller then changes. `None` (nothing written) if
    /// the key is absent, which the node-set or read-set then covers.
    fn read_to_change(
        &mut self,
        t: TableId,
        key: &[u8],
        read: impl Fn(&Record, &mut Vec<u8>, usize) -> (Tid, Option<u32>),
    ) -> Option<usize> {
        loop {
            match self.lookup(t, key) {
                Found::Missing(leaf, version) => {
                    // §4.6: the key must still be missing at commit.
                    self.c.st.node_set.push(NodeEntry { leaf, version });
                    return None;
                }
                Found::Record(p) => {
                    // SAFETY: reachable from the tree while pinned.
                    let rec = unsafe { &*p };
                    let t0 = probe(self.c.profiling);
                    let st = &mut self.c.st;
                    let key_at = st.push_bytes(key);
                    let at = st.arena.len();
                    let (tid, from) = read(rec, &mut st.arena, at);
                    if self.c.profiling {
                        self.c.prof.record += ticks() - t0;
                    }
                    let st = &mut self.c.st;
                    if !tid.is_latest() {
                        st.arena.truncate(key_at.0 as usize);
                        continue; // superseded by a bigger copy: look again
                    }
                    st.read_set.push(ReadEntry { rec: p, tid });
                    if tid.is_absent() {
                        st.arena.truncate(key_at.0 as usize);
                        return None;
                    }
                    let kind = from.map_or(WriteKind::Existing, WriteKind::Patch);
                    st.patches |= from.is_some();
                    st.push_write(WriteEntry {
                        table: t,
                        rec: p,
                        kind,
                        key: key_at,
                        value: Some((at as u32, (st.arena.len() - at) as u32)),
                        // A patch keeps the word its read found.
                        locked: if from.is_some() { tid } else { Tid::default() },
                        hash: key_hash(t, key),
                    });
                    return Some(at);
                }
            }
        }
    }

    /// Turn write-set entry `i`, if it is a [`WriteKind::Patch`], into a
    /// whole value: the record's value as the patch's read found it, with
    /// the patch's bytes over it. The record is read again; if its TID
    /// word is no longer the one the patch read, the transaction could not
    /// commit anyway and is doomed now, with Phase 2's reason.
    pub(super) fn fill_patch(&mut self, i: usize) -> Result<(), TxError> {
        let st = &mut self.c.st;
        let WriteKind::Patch(from) = st.write_set[i].kind else {
            return Ok(());
        };
        // SAFETY: reachable while pinned.
        let rec = unsafe { &*st.write_set[i].rec };
        let at = st.arena.len();
        let tid = rec.read_prefix_at(&mut st.arena, at, usize::MAX);
        if tid != st.write_set[i].locked {
            st.arena.truncate(at);
            return Err(self.doom(AbortReason::ReadValidation));
        }
        patch_over(st, i, from, at);
        Ok(())
    }

    /// Insert `key → value`; fails with [`Error::KeyExists`](crate::Error::KeyExists) if the key is
    /// present.
    ///
    /// # Errors
    /// As for [`Transaction::put`], plus [`Error::KeyExists`](crate::Error::KeyExists).
    pub fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, value, true)
    }

    /// `put` (`must_be_new` false) or `insert` (true).
    fn write(
        &mut self,
        t: TableId,
        key: &[u8],
        value: &[u8],
        must_be_new: bool,
    ) -> Result<(), TxError> {
        self.enter(t, key)?;
        check_value(value)?;
        if let Some(i) = self.c.st.find_write(t, key) {
            if must_be_new && self.c.st.write_set[i].value.is_some() {
                return Err(Error::KeyExists.into());
            }
            let v = self.c.st.push_bytes(value);
            let w = &mut self.c.st.write_set[i];
            w.value = Some(v);
            w.kind.unpatch();
            return Ok(());
        }
        // An insert usually finds its key absent: try the placeholder
        // straight away (one descent, not a lookup and then an insert).
        if must_be_new
            && self.c.st.last_found(t, key).is_none()
            && self.insert_placeholder(t, key, value)?
        {
            return Ok(());
        }
        loop {
            match self.lookup(t, key) {
                Found::Missing(..) => {
                    if self.insert_placeholder(t, key, value)? {
                        return Ok(());
                    }
                }
                Found::Record(p) => {
                    // SAFETY: reachable while pinned.
                    let tid = unsafe { &*p }.stable_tid();
                    if !tid.is_latest() {
                        continue;
                    }
                    if must_be_new {
                        // The key's presence (or absence) is part of what we
                        // read.
                        self.c.st.read_set.push(ReadEntry { rec: p, tid });
                        if !tid.is_absent() {
                            return Err(Error::KeyExists.into());
                        }
                    }
                    // A put is a blind write: Phase 1 locks the record and
                    // checks it is still the latest version; no read
                    // validation is needed.
                    self.push_write(t, p, WriteKind::Existing, key, Some(value));
                    return Ok(());
                }
            }
        }
    }

    /// Delete `key`; returns whether it was present.
    ///
    /// # Errors
    /// A conflict, [`Error::KeyTooLarge`](crate::Error::KeyTooLarge), [`Error::UnknownTableId`](crate::Error::UnknownTableId).
    pub fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        self.enter(t, key)?;
        if let Some(i) = self.c.st.find_write(t, key) {
            let w = &mut self.c.st.write_set[i];
            w.kind.unpatch();
            return Ok(w.value.take().is_some());
        }
        loop {
            match self.lookup(t, key) {
                Found::Missing(leaf, version) => {
                    self.c.st.node_set.push(NodeEntry { leaf, version });
                    return Ok(false);
                }
                Found::Record(p) => {
                    // SAFETY: reachable while pinned.
                    let tid = unsafe { &*p }.stable_tid();
                    if !tid.is_latest() {
                        continue;
                    }
                    self.c.st.read_set.push(ReadEntry { rec: p, tid });
                    if tid.is_absent() {
                        return Ok(false);
                    }
                    self.push_write(t, p, WriteKind::Existing, key, None);
                    return Ok(true);
                }
            }
        }
    }

    fn push_write(
        &mut self,
        t: TableId,
        rec: *const Record,
        kind: WriteKind,
        key: &[u8],
        value: Option<&[u8]>,
    ) {
        let st = &mut self.c.st;
        let hash = key_hash(t, key);
        let key = st.push_bytes(key);
        let value = value.map(|v| st.push_bytes(v));
        st.push_write(WriteEntry {
            table: t,
            rec,
            kind,
            key,
            value,
            locked: Tid::default(),
            hash,
        });
    }

    /// §4.5 insert: put an absent placeholder in the tree (insert-if-absent)
    /// and treat it as read and written.
    /// Returns false if the key appeared meanwhile (look it up again).
    fn insert_placeholder(
        &mut self,
        t: TableId,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool, TxError> {
        let ph = self
            .c
            .pool
            .alloc(PLACEHOLDER, &[], value.len(), std::ptr::null_mut());
        // SAFETY: pinned for the whole transaction.
        let mut pin = unsafe { ReadPin::new() };
        let t0 = probe(self.c.profiling);
        let table = self.table(t);
        // SAFETY: ours, not yet published.
        table.widen(unsafe { ph.as_ref() }.capacity());
        let inserted = table.tree.insert(key, ph.as_ptr(), &mut pin);
        if self.c.profiling {
            self.c.prof.index += ticks() - t0;
        }
        match inserted {
            Insert::Exists { .. } => {
                // SAFETY: never published.
                unsafe { self.c.pool.free(ph, value.len().div_ceil(8) * 8) };
                // Someone inserted it first: the caller looks again.
                Ok(false)
            }
            Insert::Inserted(change) => {
                let p = ph.as_ptr() as *const Record;
                self.c.st.read_set.push(ReadEntry {
                    rec: p,
                    tid: PLACEHOLDER,
                });
                self.push_write(t, p, WriteKind::Placeholder, key, Some(value));
                self.c
                    .st
                    .apply_node_change(&change)
                    .map_err(|r| self.doom(r))?;
                Ok(true)
            }
        }
    }
}
