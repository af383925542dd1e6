//! A transaction: locks taken and held, rows changed in place with their
//! undo, commit and rollback, and the leaves its scans must find unchanged.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::{Bound, Range};

use crossbeam_epoch::Guard;
use granary_api::{AbortReason, Declared, Error, TableId, Tx, TxError};
use granary_index::{Insert, LeafRef, NodeChange, Tree};

use super::lock::Mode;
#[cfg(feature = "mutant")]
use super::Variant;
use super::{new_absent, retire_row, Row, RowHead, Shared};
use crate::reclaim::Pin;
use crate::scan::Batch;
use crate::sync::Ordering;
use granary_api::limits::{check_bounds, check_key, check_value};

/// A hasher for keys that are hashes already ([`key_hash`]).
#[derive(Default)]
struct Premixed(u64);

impl Hasher for Premixed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only premixed u64s are hashed")
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

/// A hash of (table, key): eight bytes at a time, one multiply each.
#[inline]
fn key_hash(t: TableId, key: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (t.index() as u64 ^ key.len() as u64).wrapping_mul(K);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        h = (h ^ u64::from_le_bytes(c.try_into().expect("8 bytes"))).wrapping_mul(K);
        h = h.rotate_left(29);
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(K);
    let h = h ^ h >> 32;
    // Unit tests collide keys on purpose, to walk the chains.
    if cfg!(test) {
        h & 7
    } else {
        h
    }
}

/// A lock this transaction holds.
struct Held {
    row: *const Row,
    mode: Mode,
    /// Index into `State::writes` once the row is held exclusive.
    write: Option<u32>,
    table: TableId,
    key_at: u32,
    key_len: u32,
    /// The previous held key with the same hash.
    same_hash: Option<u32>,
}

/// A row this transaction changed, with what to restore on rollback: its
/// whole old value, or (`field`: its start) only the old bytes of the one
/// field an `update_field` changed, the rest being as it was.
pub(super) struct Write {
    held: u32,
    was_present: bool,
    old_at: u32,
    old_len: u32,
    field: Option<u32>,
}

/// A worker's transaction state, reused from one transaction to the next.
#[derive(Default)]
pub(super) struct State {
    held: Vec<Held>,
    /// The last held key of each key hash (the others chain through
    /// `Held::same_hash`).
    by_key: HashMap<u64, u32, BuildHasherDefault<Premixed>>,
    pub(super) writes: Vec<Write>,
    /// Keys of held rows and old values of written ones.
    bytes: Vec<u8>,
    /// Leaves scans read, with the versions they were read at.
    nodes: Vec<(LeafRef, u64)>,
    /// Declared entries, sorted for ordered locking.
    order: Vec<(TableId, u32, u32, Mode)>,
    order_keys: Vec<u8>,
    batch: Batch<*const Row>,
    /// The mutant's copy of the value it read last.
    #[cfg(feature = "mutant")]
    read_copy: Vec<u8>,
}

/// A 2PL transaction in progress.
pub struct Txn<'r> {
    db: &'r Shared,
    guard: Guard,
    pub(super) st: &'r mut State,
    /// Blocking allowed (the ordered variant's up-front phase only).
    wait: bool,
}

impl<'r> Txn<'r> {
    /// A transaction on `st`, pinned, that never blocks until told to.
    pub(super) fn begin(db: &'r Shared, st: &'r mut State) -> Txn<'r> {
        Txn {
            db,
            guard: crossbeam_epoch::pin(),
            st,
            wait: false,
        }
    }

    /// Whether it has written anything.
    pub(super) fn wrote(&self) -> bool {
        !self.st.writes.is_empty()
    }
}

impl Txn<'_> {
    /// Lock `key`'s row in mode `m` (creating an absent placeholder if the
    /// key is missing, with room for `room` bytes, or for the table's last
    /// new value if `room` is 0) and return the index of its [`Held`]
    /// entry.
    fn acquire(&mut self, t: TableId, key: &[u8], m: Mode, room: usize) -> Result<u32, TxError> {
        check_key(key)?;
        // A key this transaction holds already is found without the
        // index (a read-modify-write touches its key twice).
        let hash = key_hash(t, key);
        if let Some(i) = self.find_held(hash, t, key) {
            let h = &self.st.held[i as usize];
            if h.mode >= m {
                return Ok(i);
            }
            // SAFETY: pinned, and the row is held, so live.
            if !unsafe { &*h.row }.lock.try_upgrade() {
                return Err(TxError::Conflict(AbortReason::LockConflict));
            }
            self.st.held[i as usize].mode = Mode::Exclusive;
            return Ok(i);
        }
        let db: &Shared = self.db;
        let table = db.tables.get(t)?;
        let tree = &table.tree;
        let mut spins = 0u32;
        loop {
            let (row, created, change) = match tree.find(key, &Pin(&self.guard)) {
                Some(v) => (v, false, None),
                None => {
                    let room = match room {
                        0 => table.room.load(Ordering::Relaxed) as usize,
                        n => n,
                    };
                    let fresh = new_absent(table, room);
                    match tree.insert(key, fresh.cast_const(), &mut Pin(&self.guard)) {
                        Insert::Inserted(c) => (fresh.cast_const(), true, Some(c)),
                        Insert::Exists { value } => {
                            // SAFETY: never published.
                            unsafe { Row::free(fresh) };
                            (value, false, None)
                        }
                    }
                }
            };
            if let Some(c) = change {
                self.own_change(c);
            }
            // SAFETY: read from the index while pinned: live until unpin.
            let r = unsafe { &*row };
            if !created {
                if self.wait {
                    r.lock.lock(m);
                } else if !r.lock.try_lock(m) {
                    return Err(TxError::Conflict(AbortReason::LockConflict));
                }
                if r.removed() {
                    r.lock.unlock(m);
                    crate::sync::backoff(&mut spins);
                    continue;
                }
            }
            // A created row is born exclusive.
            let mode = if created { Mode::Exclusive } else { m };
            let key_at = self.st.bytes.len() as u32;
            self.st.bytes.extend_from_slice(key);
            let i = self.st.held.len() as u32;
            let same_hash = self.st.by_key.insert(hash, i);
            self.st.held.push(Held {
                row,
                mode,
                write: None,
                table: t,
                key_at,
                key_len: key.len() as u32,
                same_hash,
            });
            return Ok(i);
        }
    }

    /// The `held` entry of (`t`, `key`), whose [`key_hash`] is `hash`.
    fn find_held(&self, hash: u64, t: TableId, key: &[u8]) -> Option<u32> {
        let mut at = self.st.by_key.get(&hash).copied();
        while let Some(i) = at {
            let h = &self.st.held[i as usize];
            let k = &self.st.bytes[h.key_at as usize..(h.key_at + h.key_len) as usize];
            if h.table == t && k == key {
                return Some(i);
            }
            at = h.same_hash;
        }
        None
    }

    /// A leaf this transaction changed itself keeps its place in the node
    /// set (Silo §4.6 does the same for its own inserts).
    fn own_change(&mut self, c: NodeChange) {
        let mut split_seen = false;
        for n in &mut self.st.nodes {
            if n.0 == c.leaf && n.1 == c.old_version {
                n.1 = c.new_version;
                split_seen |= c.split.is_some();
            }
        }
        if split_seen {
            // Keys we scanned may have moved to the new right sibling.
            let s = c.split.expect("split");
            self.st.nodes.push(s);
        }
    }

    /// The ordered variant's growing phase: every declared key, locked in
    /// (table, key) order, waiting for each (BOHM §4).
    pub(super) fn lock_declared(&mut self, d: &Declared) -> Result<(), TxError> {
        let st = &mut *self.st;
        st.order.clear();
        st.order_keys.clear();
        let reads = d.reads().map(|e| (e, Mode::Shared));
        for ((t, k), m) in reads.chain(d.writes().map(|e| (e, Mode::Exclusive))) {
            let at = st.order_keys.len() as u32;
            st.order_keys.extend_from_slice(k);
            st.order.push((t, at, k.len() as u32, m));
        }
        let keys = std::mem::take(&mut st.order_keys);
        let key = |e: &(TableId, u32, u32, Mode)| &keys[e.1 as usize..(e.1 + e.2) as usize];
        // Sort by (table, key), exclusive first among equals, so one lock
        // in the stronger mode covers both.
        st.order
            .sort_unstable_by(|a, b| (a.0, key(a), b.3).cmp(&(b.0, key(b), a.3)));
        let mut order = std::mem::take(&mut st.order);
        order.dedup_by(|b, a| a.0 == b.0 && key(a) == key(b));
        // Every lock below waits for its row: send for all of them first,
        // so that their misses overlap instead of following one another.
        self.prefetch_rows(order.iter().map(|e| (e.0, key(e))));
        self.wait = true;
        let mut r = Ok(());
        for e in &order {
            if let Err(err) = self.acquire(e.0, key(e), e.3, 0) {
                r = Err(err);
                break;
            }
        }
        self.wait = false;
        self.st.order = order;
        self.st.order_keys = keys;
        r
    }

    /// Fetch the rows of `keys` in two waves: every key's index entry
    /// (with a point index its bucket; without, the first 16 keys'
    /// descents, which go down together: `Tree::find_many`), then its
    /// row, for writing, since taking its lock, shared or exclusive, is a
    /// compare-and-swap on the row's line. At most 16 keys are followed
    /// to their rows (the rest get the first wave only).
    fn prefetch_rows<'k>(&self, keys: impl Iterator<Item = (TableId, &'k [u8])> + Clone) {
        const WAVE: usize = Tree::FIND_MANY;
        let db: &Shared = self.db;
        let pin = Pin(&self.guard);
        for (t, k) in keys.clone() {
            if let Ok(table) = db.tables.get(t) {
                table.tree.prefetch(k, &pin);
            }
        }
        let mut first = [(TableId::new(0), &[][..]); WAVE];
        let mut n = 0;
        for (e, key) in first.iter_mut().zip(keys) {
            (*e, n) = (key, n + 1);
        }
        // Each run of keys of one table, found together.
        for run in granary_api::table_runs(&first[..n]) {
            let (at, end) = (run.start, run.end);
            // Without a point index a lone key is left to its lookup (as
            // Silo's `prefetch_many` does).
            if let Some(table) = db
                .tables
                .get(first[at].0)
                .ok()
                .filter(|table| end - at > 1 || table.tree.has_point_index())
            {
                let ks: [&[u8]; WAVE] =
                    std::array::from_fn(|i| first.get(at + i).map_or(&[][..], |e| e.1));
                let mut found = [None; WAVE];
                table
                    .tree
                    .find_many(&ks[..end - at], &mut found[..end - at], &pin);
                for row in found.iter().take(end - at).flatten() {
                    granary_api::prefetch_for_write(*row as *const u8, 1);
                }
            }
        }
    }

    /// The value of the row held at `i` (`None`: absent); shared or
    /// better held.
    fn value(&self, i: u32) -> Option<&[u8]> {
        // SAFETY: held, so live (pinned) and not written by anyone else.
        unsafe { (*self.st.held[i as usize].row).value() }
    }

    /// Save held row `i`'s state for rollback the first time it is
    /// written (it is held exclusive).
    fn save(&mut self, i: u32) {
        let h = &self.st.held[i as usize];
        debug_assert_eq!(h.mode, Mode::Exclusive);
        if let Some(w) = h.write {
            self.widen(w);
            return;
        }
        // SAFETY: held exclusive: no one else reads or writes it.
        let old = unsafe { (*h.row).value() };
        let old_at = self.st.bytes.len() as u32;
        self.st.bytes.extend_from_slice(old.unwrap_or_default());
        let w = self.st.writes.len() as u32;
        self.st.writes.push(Write {
            held: i,
            was_present: old.is_some(),
            old_at,
            old_len: old.map_or(0, <[u8]>::len) as u32,
            field: None,
        });
        self.st.held[i as usize].write = Some(w);
    }

    /// Save the bytes `field` of held row `i`'s value (present, held
    /// exclusive) for rollback, if nothing of the row is saved yet; a row
    /// with another field saved gets its whole old value saved instead.
    fn save_field(&mut self, i: u32, field: Range<usize>) {
        let h = &self.st.held[i as usize];
        debug_assert_eq!(h.mode, Mode::Exclusive);
        if let Some(w) = h.write {
            let s = &self.st.writes[w as usize];
            if s.field != Some(field.start as u32) || s.old_len as usize != field.len() {
                self.widen(w);
            }
            return;
        }
        // SAFETY: held exclusive: no one else reads or writes it.
        let old = unsafe { (*h.row).value() }.expect("a field of a present row");
        let old_at = self.st.bytes.len() as u32;
        self.st.bytes.extend_from_slice(&old[field.clone()]);
        let w = self.st.writes.len() as u32;
        self.st.writes.push(Write {
            held: i,
            was_present: true,
            old_at,
            old_len: field.len() as u32,
            field: Some(field.start as u32),
        });
        self.st.held[i as usize].write = Some(w);
    }

    /// Make write `w`'s saved state the row's whole old value, if it
    /// holds only a field's: the row's value now, with the field's old
    /// bytes over it (only that field has changed since).
    fn widen(&mut self, w: u32) {
        let s = &self.st.writes[w as usize];
        let Some(from) = s.field else { return };
        let (from, at, n) = (from as usize, s.old_at as usize, s.old_len as usize);
        // SAFETY: held exclusive; a row with a field saved is present.
        let now = unsafe { (*self.st.held[s.held as usize].row).value() }.expect("present");
        let whole = self.st.bytes.len();
        self.st.bytes.extend_from_slice(now);
        self.st.bytes.copy_within(at..at + n, whole + from);
        let s = &mut self.st.writes[w as usize];
        s.old_at = whole as u32;
        s.old_len = (self.st.bytes.len() - whole) as u32;
        s.field = None;
    }

    /// Write `value` (`None`: absent) into held row `i`, held exclusive
    /// and saved: in place if it fits the row's room, else in a larger
    /// row that takes the old one's place in the index. The old row is
    /// marked removed before it is unlocked, so a transaction waiting for
    /// it looks the key up again and finds the new one, held exclusive by
    /// this transaction until it ends.
    fn store(&mut self, i: u32, value: Option<&[u8]>) {
        let h = &self.st.held[i as usize];
        let row = h.row;
        // SAFETY: held exclusive.
        if unsafe { (*row).overwrite(value) } {
            return;
        }
        // SAFETY: held, so live.
        let old = unsafe { &*row };
        let new = Row::alloc(RowHead::new(old.commit_key()), value, 0);
        let key = &self.st.bytes[h.key_at as usize..(h.key_at + h.key_len) as usize];
        let db: &Shared = self.db;
        let table = db.tables.get(h.table).expect("held rows' tables exist");
        let swapped = table.tree.replace(key, row, new, &mut Pin(&self.guard));
        // A real check: retiring a row the index still maps would be a
        // use after free.
        assert!(swapped, "a held row stays in the index");
        old.set_removed();
        old.lock.unlock(Mode::Exclusive);
        // SAFETY: out of the index, marked removed for anyone who still
        // holds its address, and retired once (its `held` entry now names
        // the new row).
        unsafe { retire_row(&self.guard, row) };
        self.st.held[i as usize].row = new;
    }

    /// The mutant's read: a shared lock only while copying (unless the
    /// row is already held).
    #[cfg(feature = "mutant")]
    fn short_read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        check_key(key)?;
        if let Some(i) = self.find_held(key_hash(t, key), t, key) {
            return Ok(self.value(i));
        }
        let db: &Shared = self.db;
        let Some(row) = db.tables.get(t)?.tree.find(key, &Pin(&self.guard)) else {
            return Ok(None);
        };
        // SAFETY: from the index while pinned.
        let r = unsafe { &*row };
        if !r.lock.try_shared() {
            return Err(TxError::Conflict(AbortReason::LockConflict));
        }
        // SAFETY: locked shared.
        let value = unsafe { r.value() }.filter(|_| !r.removed());
        let present = value.is_some();
        self.st.read_copy.clear();
        self.st
            .read_copy
            .extend_from_slice(value.unwrap_or_default());
        r.lock.unlock(Mode::Shared);
        Ok(present.then_some(&self.st.read_copy[..]))
    }

    /// Check that no scanned leaf changed but by this transaction.
    pub(super) fn validate_nodes(&self) -> Result<(), AbortReason> {
        for &(leaf, v) in &self.st.nodes {
            // SAFETY: `self.guard` has pinned us since the leaf was read (an
            // unlinked leaf is freed only after the grace period).
            if unsafe { leaf.version() } != v {
                return Err(AbortReason::NodeValidation);
            }
        }
        Ok(())
    }

    /// Commit: stamp written rows, take out rows left absent, release
    /// every lock. Returns the transaction's commit key.
    pub(super) fn commit(&mut self, last: u64) -> u64 {
        // A commit key above every earlier writer's of each row written
        // (a Lamport clock: successive writers of a key hold its exclusive
        // lock one after the other, so their keys increase).
        let mut ck = last;
        for w in &self.st.writes {
            // SAFETY: held exclusive, so live.
            ck = ck.max(unsafe { &*self.st.held[w.held as usize].row }.commit_key());
        }
        ck += 1;
        let wrote = !self.st.writes.is_empty();
        for w in &self.st.writes {
            // SAFETY: held exclusive, so live.
            unsafe { &*self.st.held[w.held as usize].row }.set_commit_key(ck);
        }
        self.release();
        if wrote {
            ck
        } else {
            last
        }
    }

    /// Restore every written row, then release.
    pub(super) fn rollback(&mut self) {
        for w in self.st.writes.iter().rev() {
            let old = &self.st.bytes[w.old_at as usize..(w.old_at + w.old_len) as usize];
            if let Some(from) = w.field {
                // Only the field changed (the row kept its length).
                // SAFETY: held exclusive, so live.
                let v = unsafe { (*self.st.held[w.held as usize].row).value_mut() };
                let v = v.expect("a row with a field saved is present");
                v[from as usize..from as usize + old.len()].copy_from_slice(old);
                continue;
            }
            // SAFETY: held exclusive, so live; the row has room for every
            // value it held in this transaction (`store` only moves a key
            // to a larger row).
            let fits = unsafe {
                (*self.st.held[w.held as usize].row).overwrite(w.was_present.then_some(old))
            };
            assert!(fits, "a row has room for the values it held");
        }
        self.release();
    }

    /// The shrinking phase: every lock at once. A row held exclusive
    /// whose key is absent (deleted, never inserted, or a placeholder this
    /// transaction created) leaves the index first.
    fn release(&mut self) {
        let st = &mut *self.st;
        for h in &st.held {
            // SAFETY: held, so live.
            let r = unsafe { &*h.row };
            let mode = h.mode;
            // SAFETY: held.
            let absent = unsafe { r.value() }.is_none();
            if absent && mode == Mode::Exclusive {
                r.set_removed();
                let key = &st.bytes[h.key_at as usize..(h.key_at + h.key_len) as usize];
                let table = self
                    .db
                    .tables
                    .get(h.table)
                    .expect("held rows' tables exist");
                // Before the key leaves the index: a re-insert, which can
                // only start after, seeds its row from this (Acquire/Release).
                table
                    .removed_commit_key
                    .fetch_max(r.commit_key(), Ordering::Release);
                let gone = table.tree.remove_if(key, h.row, &mut Pin(&self.guard));
                // A real check, not a debug one: retiring a row the index
                // still maps would be a use after free, found (if ever)
                // far from here.
                assert!(gone.is_some(), "a held row stays in the index");
                r.lock.unlock(mode);
                // SAFETY: out of the index, marked removed for anyone who
                // still holds its address, and retired once (the row
                // leaves `held` below).
                unsafe { retire_row(&self.guard, h.row) };
            } else {
                r.lock.unlock(mode);
            }
        }
        st.held.clear();
        st.by_key.clear();
        st.writes.clear();
        st.bytes.clear();
        st.nodes.clear();
    }
}

impl Tx for Txn<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        #[cfg(feature = "mutant")]
        if self.db.variant == Variant::MutantShortReads {
            return self.short_read(t, key);
        }
        let i = self.acquire(t, key, Mode::Shared, 0)?;
        Ok(self.value(i))
    }

    fn prefetch(&mut self, t: TableId, key: &[u8]) {
        let db: &Shared = self.db;
        if let Ok(table) = db.tables.get(t) {
            table.tree.prefetch(key, &Pin(&self.guard));
        }
    }

    fn prefetch_many(&mut self, keys: &[(TableId, &[u8])]) {
        self.prefetch_rows(keys.iter().copied());
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        check_value(value)?;
        let i = self.acquire(t, key, Mode::Exclusive, value.len())?;
        if self.value(i).is_none() {
            // A new row's length: the room of the next placeholder made
            // before its value is known (stored only on a change, so the
            // line stays shared).
            let room = &self.db.tables.get(t)?.room;
            if room.load(Ordering::Relaxed) != value.len() as u32 {
                room.store(value.len() as u32, Ordering::Relaxed);
            }
        }
        self.save(i);
        self.store(i, Some(value));
        Ok(())
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // Exclusive from the start (no shared lock to upgrade), and changed
        // in place: the undo image is the only copy.
        let i = self.acquire(t, key, Mode::Exclusive, 0)?;
        if self.value(i).is_none() {
            return Ok(None);
        }
        self.save(i);
        // SAFETY: held exclusive, so live, and no one else reads or writes
        // it; the borrow ends before the next call on `self`.
        let v = unsafe { (*self.st.held[i as usize].row).value_mut() };
        Ok(v.map(f))
    }

    fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // As `update`, with only the field's old bytes saved: the rest of
        // a large row is not read.
        let i = self.acquire(t, key, Mode::Exclusive, 0)?;
        let Some(len) = self.value(i).map(<[u8]>::len) else {
            return Ok(None);
        };
        let field = granary_api::field_within(&field, len);
        self.save_field(i, field.clone());
        // SAFETY: as in `update`.
        let v = unsafe { (*self.st.held[i as usize].row).value_mut() };
        Ok(v.map(|v| f(&mut v[field])))
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        let i = self.acquire(t, key, Mode::Exclusive, value.len())?;
        if self.value(i).is_some() {
            return Err(Error::KeyExists.into());
        }
        self.put(t, key, value)
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        let i = self.acquire(t, key, Mode::Exclusive, 0)?;
        if self.value(i).is_none() {
            return Ok(false);
        }
        self.save(i);
        self.store(i, None);
        Ok(true)
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: F,
    ) -> Result<(), TxError> {
        check_bounds(lo, hi)?;
        if limit == 0 {
            return Ok(());
        }
        let db: &Shared = self.db;
        let tree = &db.tables.get(t)?.tree;
        // Rows are locked as they are met, a batch of keys at a time; the
        // leaves read are validated at commit.
        let mut batch = std::mem::take(&mut self.st.batch);
        batch.start();
        let mut seen = 0;
        let r = 'scan: loop {
            let want = (limit - seen).clamp(1, 64);
            let nodes = &mut self.st.nodes;
            let more = batch.next(tree, lo, hi, reverse, want, &Pin(&self.guard), |leaf, v| {
                nodes.push((leaf, v))
            });
            if !more {
                break Ok(());
            }
            for (k, _) in batch.iter() {
                let i = match self.acquire(t, k, Mode::Shared, 0) {
                    Ok(i) => i,
                    Err(e) => break 'scan Err(e),
                };
                if let Some(v) = self.value(i) {
                    seen += 1;
                    if !f(k, v) || seen == limit {
                        break 'scan Ok(());
                    }
                }
            }
        };
        self.st.batch = batch;
        r
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        // Every normal path has committed or rolled back; a body that
        // panicked has not, and must not leave rows locked.
        if !self.st.held.is_empty() {
            self.rollback();
        }
    }
}
