//! Read/write transactions: Silo's OCC (§4.4–§4.6, Fig. 2).
//!
//! While the body runs, every record read goes into the *read-set* with
//! the TID word seen, every write is buffered in the *write-set*, and every
//! leaf a failed lookup or a scan depended on goes into the *node-set* with
//! its version. Nothing shared is written, except that an insert of a new
//! key puts an *absent* placeholder record into the tree first (§4.5), so
//! that there is something to lock.
//!
//! Commit (Fig. 2): lock the write-set in address order → fence → read the
//! global epoch `E` (the serialization point) → validate the read-set (same
//! TID, still latest, not locked by someone else) and the node-set (same
//! leaf versions) → choose the commit TID (greater than every TID read or
//! written and than this worker's last, in epoch `E`) → install each value
//! and release its lock with one store of the new TID word.

use std::ops::{Bound, Range};
use std::ptr::NonNull;

use granary_index::{Insert, LeafRef, NodeChange};

use granary_api::{ticks, Hints, Profile, TableId};

use crate::error::{AbortReason, Error, TxError};
use crate::gc::{Cleanup, Garbage, GcLists};
use crate::install::{Install, Locked};
use crate::pin::ReadPin;
use crate::record::{Pool, Record};
use crate::shared::{Shared, Table};
use crate::sync::{fence, Ordering};
use crate::tid::{snap, Tid};
use granary_api::limits::{check_bounds, check_key, check_value};

/// An owned `(key, value)` pair, as returned by `scan_collect`.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// The TID word of a fresh insert placeholder: TID 0, absent, latest.
const PLACEHOLDER: Tid = Tid(Tid::LATEST | Tid::ABSENT);

#[derive(Clone, Copy)]
struct ReadEntry {
    rec: *const Record,
    tid: Tid,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WriteKind {
    /// Overwrite (or delete) a record that was in the tree.
    Existing,
    /// A placeholder this transaction put in the tree.
    Placeholder,
    /// Overwrite the bytes from this offset on of a record that was in the
    /// tree (`Transaction::update_field`): the entry's value holds only
    /// them, and the rest of the new value is what the read-set entry
    /// read, which Phase 2 validates unchanged. Phase 3 stores them alone.
    Patch(u32),
}

impl WriteKind {
    /// A patch's entry given a whole value (or a delete) becomes a plain
    /// overwrite of its record.
    #[inline]
    fn unpatch(&mut self) {
        if let WriteKind::Patch(_) = self {
            *self = WriteKind::Existing;
        }
    }
}

#[derive(Clone)]
struct WriteEntry {
    table: TableId,
    rec: *const Record,
    kind: WriteKind,
    key: (u32, u32),
    /// The new value (arena range), or `None` for a delete.
    value: Option<(u32, u32)>,
    /// The TID word found when locking (Phase 1). Before that, for a
    /// [`WriteKind::Patch`], the word its read found.
    locked: Tid,
    /// `key_hash(table, key)`, kept for growing `TxState::by_key`.
    hash: u64,
}

#[inline]
fn key_hash(t: TableId, key: &[u8]) -> u64 {
    // FxHash-style: fast, good enough for a per-transaction table.
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = (t.0 as u64).wrapping_mul(K);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        h = (h.rotate_left(5) ^ u64::from_le_bytes(c.try_into().expect("8"))).wrapping_mul(K);
    }
    // The tail byte by byte: a variable-length copy would be a `memcpy`.
    let mut last = 0u64;
    for (i, &b) in chunks.remainder().iter().enumerate() {
        last |= (b as u64) << (8 * i);
    }
    h = (h.rotate_left(5) ^ last ^ key.len() as u64).wrapping_mul(K);
    h
}

/// Start a probe: the current ticks if profiling, else 0.
#[inline]
fn probe(on: bool) -> u64 {
    if on {
        ticks()
    } else {
        0
    }
}

/// The hash `TxState::by_rec` files a record under.
#[inline]
fn rec_hash(rec: *const Record) -> u64 {
    (rec as usize as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Write-sets of up to this many entries are searched entry by entry (by
/// key hash, or by record); past it, through `TxState::by_key` and
/// `TxState::by_rec`, which are filled only then. Filing each write twice
/// cost a 10-operation YCSB transaction more than its searches saved.
const LINEAR_WRITES: usize = 8;

/// An open-addressing index from a hash to write-set positions (linear
/// probing on the hash's top bits). Emptied in O(1) per transaction: a slot
/// counts only if it carries the current `stamp`. It replaced two
/// `HashMap`s that were built only past 16 writes and cost about 8% of
/// TPC-C's instructions (inserts, and the linear search below the
/// threshold).
#[derive(Default)]
struct SlotIndex {
    /// `stamp << 32 | write-set position`.
    slots: Vec<u64>,
    stamp: u32,
    /// 64 − log2(slots.len()).
    shift: u32,
}

impl SlotIndex {
    /// Forget every entry.
    fn clear(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Stamps wrapped: old slots could look current again.
            self.slots.fill(0);
            self.stamp = 1;
        }
    }

    /// Room for `n` entries at a load factor of at most ½? If not, resize
    /// (the caller then re-adds every entry).
    fn fits(&mut self, n: usize) -> bool {
        if n * 2 <= self.slots.len() {
            return true;
        }
        let len = (n * 2).next_power_of_two().max(64);
        self.slots.clear();
        self.slots.resize(len, 0);
        self.shift = 64 - len.trailing_zeros();
        self.stamp = 1;
        false
    }

    #[inline]
    fn add(&mut self, h: u64, pos: usize) {
        let mask = self.slots.len() - 1;
        let mut i = (h >> self.shift) as usize;
        while (self.slots[i] >> 32) as u32 == self.stamp {
            i = (i + 1) & mask;
        }
        self.slots[i] = (self.stamp as u64) << 32 | pos as u64;
    }

    /// The first position filed under `h` for which `is` holds.
    #[inline]
    fn find(&self, h: u64, mut is: impl FnMut(usize) -> bool) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = (h >> self.shift) as usize;
        loop {
            let s = self.slots[i];
            if (s >> 32) as u32 != self.stamp {
                return None;
            }
            let pos = s as u32 as usize;
            if is(pos) {
                return Some(pos);
            }
            i = (i + 1) & mask;
        }
    }
}

/// Key equality with the common 8-byte case as one integer compare (a
/// slice `==` of unknown length calls `memcmp`: 1.2% of an in-cache YCSB
/// transaction's instructions).
#[inline(always)]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    match (<&[u8; 8]>::try_from(a), <&[u8; 8]>::try_from(b)) {
        (Ok(x), Ok(y)) => u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y),
        _ => a == b,
    }
}

#[derive(Clone, Copy)]
struct NodeEntry {
    leaf: LeafRef,
    version: u64,
}

/// The reusable per-worker sets (no allocation per transaction once warm).
#[derive(Default)]
pub(crate) struct TxState {
    read_set: Vec<ReadEntry>,
    write_set: Vec<WriteEntry>,
    node_set: Vec<NodeEntry>,
    /// Keys and values of the write-set.
    arena: Vec<u8>,
    /// The last value read, returned by reference from `get`.
    pub(crate) buf: Vec<u8>,
    scratch: Vec<u8>,
    /// Phase 1's lock order: (record address, write-set position), sorted.
    order: Vec<(usize, u32)>,
    /// Whether the write-set may hold a [`WriteKind::Patch`].
    patches: bool,
    /// Write-set positions by key hash.
    by_key: SlotIndex,
    /// Write-set positions by record address.
    by_rec: SlotIndex,
    /// The record the last `get` found, so a read-modify-write's `put`
    /// need not search the tree again.
    last: Option<(TableId, *const Record)>,
    last_key: Vec<u8>,
    /// The records `prefetch_many` found, in the order hinted. A lookup
    /// of the next one hinted takes it instead of searching again.
    hints: Hints<*const Record>,
}

impl TxState {
    fn clear(&mut self) {
        self.read_set.clear();
        self.write_set.clear();
        self.node_set.clear();
        self.arena.clear();
        self.clear_writes();
        self.last = None;
        self.hints.clear();
    }

    /// Empty the write-set and its indexes.
    fn clear_writes(&mut self) {
        self.write_set.clear();
        self.patches = false;
        self.by_key.clear();
        self.by_rec.clear();
    }

    fn last_found(&self, t: TableId, key: &[u8]) -> Option<*const Record> {
        match self.last {
            Some((lt, p)) if lt == t && same_key(&self.last_key, key) => Some(p),
            _ => None,
        }
    }

    fn push_write(&mut self, e: WriteEntry) {
        let i = self.write_set.len();
        if i >= LINEAR_WRITES {
            let key_fits = self.by_key.fits(i + 1);
            let rec_fits = self.by_rec.fits(i + 1);
            if i == LINEAR_WRITES || !(key_fits && rec_fits) {
                // The first entry past the linear ones, or resized (both
                // always are together): file everything.
                for (j, w) in self.write_set.iter().enumerate() {
                    self.by_key.add(w.hash, j);
                    self.by_rec.add(rec_hash(w.rec), j);
                }
            }
            self.by_key.add(e.hash, i);
            self.by_rec.add(rec_hash(e.rec), i);
        }
        self.write_set.push(e);
    }

    #[inline]
    fn find_rec(&self, rec: *const Record) -> Option<usize> {
        if self.write_set.len() <= LINEAR_WRITES {
            return self.write_set.iter().position(|w| w.rec == rec);
        }
        self.by_rec
            .find(rec_hash(rec), |j| self.write_set[j].rec == rec)
    }

    fn push_bytes(&mut self, b: &[u8]) -> (u32, u32) {
        let start = self.arena.len();
        granary_api::append_bytes(&mut self.arena, b);
        (start as u32, b.len() as u32)
    }

    fn bytes(&self, r: (u32, u32)) -> &[u8] {
        &self.arena[r.0 as usize..(r.0 + r.1) as usize]
    }

    #[inline]
    fn find_write(&self, t: TableId, key: &[u8]) -> Option<usize> {
        if self.write_set.is_empty() {
            return None; // read-only so far: skip hashing the key
        }
        let h = key_hash(t, key);
        let is = |w: &WriteEntry| w.hash == h && w.table == t && same_key(self.bytes(w.key), key);
        if self.write_set.len() <= LINEAR_WRITES {
            return self.write_set.iter().position(is);
        }
        self.by_key.find(h, |j| is(&self.write_set[j]))
    }

    /// Apply our own insert's leaf change to the node-set (§4.6): a leaf we
    /// depended on moves from `old` to `new` only if nobody else changed it
    /// first; a split-off sibling inherits the dependency.
    fn apply_node_change(&mut self, c: &NodeChange) -> Result<(), AbortReason> {
        let mut tracked = false;
        for n in self.node_set.iter_mut().filter(|n| n.leaf == c.leaf) {
            if n.version != c.old_version {
                return Err(AbortReason::NodeValidation);
            }
            n.version = c.new_version;
            tracked = true;
        }
        if let (true, Some((right, v))) = (tracked, c.split) {
            self.node_set.push(NodeEntry {
                leaf: right,
                version: v,
            });
        }
        Ok(())
    }
}

/// A worker's mutable state, split from its `shared` handle so a running
/// transaction can borrow both without reference-count traffic. Owned by
/// its [`Worker`](crate::Worker); defined here, with the transaction that
/// runs on it.
#[derive(Default)]
pub(crate) struct Core {
    pub st: TxState,
    pub gc: GcLists,
    /// The TID of this worker's last commit (Silo §4.2 rule b).
    pub last_tid: Tid,
    pub epoch: u64,
    pub snap_epoch: u64,
    pub pool: Pool,
    /// The reclamation bounds at the last collection.
    pub gc_seen: (u64, u64),
    /// This worker's epoch slot (also its log slot).
    pub slot: usize,
    /// The epoch that must be durable before the last committed
    /// transaction may be acknowledged (durable databases only).
    pub durable_need: u64,
    /// Cost breakdown collection (off unless asked for).
    pub profiling: bool,
    pub prof: Profile,
}

enum Found {
    Record(*const Record),
    Missing(LeafRef, u64),
}

/// A read/write transaction in progress; see [`Worker::run`]. Every
/// operation returns [`TxError::Conflict`] once the attempt is doomed, and
/// keeps returning it: a doomed transaction cannot commit. A transaction
/// only exists inside its body's closure, so a finished one cannot be used
/// at all (the borrow checker refuses it).
///
/// [`Worker::run`]: crate::Worker::run
pub struct Transaction<'w> {
    shared: &'w Shared,
    c: &'w mut Core,
    doomed: Option<AbortReason>,
}

impl<'w> Transaction<'w> {
    pub(crate) fn new(shared: &'w Shared, c: &'w mut Core) -> Self {
        c.st.clear();
        Transaction {
            shared,
            c,
            doomed: None,
        }
    }

    #[inline]
    fn enter(&self, t: TableId, key: &[u8]) -> Result<(), TxError> {
        if let Some(r) = self.doomed {
            return Err(TxError::Conflict(r));
        }
        check_key(key)?;
        self.shared.table(t)?;
        Ok(())
    }

    fn doom(&mut self, r: AbortReason) -> TxError {
        self.doomed = Some(r);
        TxError::Conflict(r)
    }

    #[inline]
    fn table(&self, t: TableId) -> &Table {
        self.shared.table(t).expect("checked in enter")
    }

    /// `key`'s record: the one a `get` just found, a hint, or the tree's.
    /// The first two are inlined into each caller, and the descent is a
    /// call (its saved registers cost a hinted lookup a third of its
    /// instructions when it was inlined here).
    #[inline(always)]
    fn lookup(&mut self, t: TableId, key: &[u8]) -> Found {
        // Used once: a caller that finds the record superseded looks again.
        if let Some(p) = self.c.st.last_found(t, key) {
            self.c.st.last = None;
            return Found::Record(p);
        }
        if let Some(p) = self.c.st.hints.take(t, key) {
            return Found::Record(p);
        }
        self.lookup_tree(t, key)
    }

    #[inline(never)]
    fn lookup_tree(&mut self, t: TableId, key: &[u8]) -> Found {
        // SAFETY: the worker is pinned for the whole transaction.
        let pin = unsafe { ReadPin::new() };
        let t0 = probe(self.c.profiling);
        let tree = &self.table(t).tree;
        if tree.has_point_index() {
            if let Some(p) = tree.find(key, &pin) {
                if self.c.profiling {
                    self.c.prof.index += ticks() - t0;
                }
                return Found::Record(p as *const Record);
            }
        }
        let l = tree.get(key, &pin);
        if self.c.profiling {
            self.c.prof.index += ticks() - t0;
        }
        match l.value {
            Some(p) => Found::Record(p as *const Record),
            None => Found::Missing(l.leaf, l.version),
        }
    }

    /// Read `key`. The slice is valid until the next operation.
    ///
    /// # Errors
    /// A conflict, [`Error::KeyTooLarge`], [`Error::UnknownTableId`].
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
                    *r = p as *const Record;
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

    /// Write `key → value`, inserting the key if it is missing.
    ///
    /// # Errors
    /// A conflict, [`Error::KeyTooLarge`], [`Error::ValueTooLarge`],
    /// [`Error::UnknownTableId`].
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
    fn fill_patch(&mut self, i: usize) -> Result<(), TxError> {
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

    /// Insert `key → value`; fails with [`Error::KeyExists`] if the key is
    /// present.
    ///
    /// # Errors
    /// As for [`Transaction::put`], plus [`Error::KeyExists`].
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
    /// A conflict, [`Error::KeyTooLarge`], [`Error::UnknownTableId`].
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

    /// Visit up to `limit` keys in `[lo, hi)`-style bounds in ascending order
    /// (descending if `reverse`), with their values; `f` returns false to
    /// stop. The scanned range is protected against phantoms (§4.6).
    ///
    /// # Errors
    /// A conflict, [`Error::UnknownTableId`], [`Error::KeyTooLarge`].
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
                let mut p = p as *const Record;
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
                        Some(q) => p = q as *const Record,
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
        let inserted = table.tree.insert(key, ph.as_ptr() as u64, &mut pin);
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

    /// Whether the transaction has writes to install at commit.
    pub(crate) fn writes_anything(&self) -> bool {
        !self.c.st.write_set.is_empty()
    }

    /// The worker's last commit TID (this transaction's, right after it
    /// committed writes).
    pub(crate) fn last_tid(&self) -> Tid {
        self.c.last_tid
    }

    /// Check, without locks, that everything read is still as it was.
    pub(crate) fn reads_still_valid(&self) -> bool {
        self.doomed.is_none() && validate(&self.c.st, false, true).is_ok()
    }

    /// Fig. 2, timed when profiling.
    pub(crate) fn commit(&mut self) -> Result<(), AbortReason> {
        let t0 = probe(self.c.profiling);
        let r = self.commit_inner();
        if self.c.profiling {
            self.c.prof.commit += ticks() - t0;
        }
        r
    }

    /// Fig. 2. On failure everything is rolled back.
    fn commit_inner(&mut self) -> Result<(), AbortReason> {
        if let Some(r) = self.doomed {
            self.abort();
            return Err(r);
        }
        if self.c.st.write_set.is_empty() {
            // Read-only: Phase 2 only; no TID, nothing to install.
            validate(&self.c.st, false, validates_reads(self.shared))
                .inspect_err(|_| self.abort())?;
            if self.shared.durable.get().is_some() {
                // Its results may be released once what it read is durable.
                // `max`: a worker's token never goes back, so a durable
                // token covers all of the worker's earlier commits too.
                let read = self
                    .c
                    .st
                    .read_set
                    .iter()
                    .map(|r| r.tid.epoch())
                    .max()
                    .unwrap_or(0);
                self.c.durable_need = self.c.durable_need.max(read);
            }
            return Ok(());
        }
        // Phase 1: lock the write-set in a global (address) order.
        let st = &mut self.c.st;
        st.order.clear();
        st.order.extend(
            st.write_set
                .iter()
                .enumerate()
                .map(|(i, w)| (w.rec as usize, i as u32)),
        );
        // Sorting the addresses themselves, not positions by an indirect
        // key, halves the sort's instructions.
        st.order.sort_unstable();
        for k in 0..st.order.len() {
            let i = st.order[k].1 as usize;
            // SAFETY: write-set records are reachable (we are pinned).
            let rec = unsafe { &*st.write_set[i].rec };
            let t = rec.lock();
            st.write_set[i].locked = t.with(Tid::LOCK);
            if !t.is_latest() {
                // Superseded since we found it: our write would be lost.
                unlock_first(st, k + 1);
                self.abort();
                return Err(AbortReason::WriteValidation);
            }
        }
        // The locks must be visible before we read E and the read-set:
        // SeqCst fence, pairs with the same fence in every other committer
        // (Fig. 3's store-buffering shape).
        fence(Ordering::SeqCst);
        // The serialization point.
        let e = self.shared.epochs.global();
        // Phase 2.
        if let Err(r) = validate(st, true, validates_reads(self.shared)) {
            unlock_first(st, st.order.len());
            self.abort();
            return Err(r);
        }
        // Choose the commit TID (§4.2).
        let mut max = self.c.last_tid.id();
        for r in &st.read_set {
            max = max.max(r.tid.id());
        }
        for w in &st.write_set {
            max = max.max(w.locked.id());
        }
        let mut commit = Tid(max.0 + Tid::SEQ_ONE).max(Tid::new(e, 0));
        if self.shared.options.global_tid {
            // MemSilo+GlobalTID (§5.2): one shared counter per commit.
            let g = self.shared.global_tid.fetch_add(1, Ordering::Relaxed);
            commit = commit.max(Tid::new(e, g));
        }
        debug_assert_eq!(commit.epoch(), e, "sequence overflow within an epoch");
        if st.patches && (self.shared.durable.get().is_some() || !self.shared.options.overwrites) {
            // The log takes whole values (SiloR §3.1), and a record that
            // is never overwritten is replaced whole: each patch becomes
            // its record's value with the patch over it. The records are
            // locked by us and validated, so a plain copy is consistent.
            for i in 0..st.write_set.len() {
                if let WriteKind::Patch(from) = st.write_set[i].kind {
                    let at = st.arena.len();
                    // SAFETY: write-set records are reachable (pinned).
                    unsafe { &*st.write_set[i].rec }.load_prefix_at(&mut st.arena, at, usize::MAX);
                    patch_over(st, i, from, at);
                }
            }
        }
        // Phase 3.
        for i in 0..self.c.st.write_set.len() {
            self.install(i, commit, e);
        }
        self.c.last_tid = commit;
        if let Some(d) = self.shared.durable.get() {
            // SiloR §3.1, §3.2: value logging, still pinned in epoch ≤ e.
            let st = &self.c.st;
            let a = &st.arena[..];
            let range = |r: (u32, u32)| &a[r.0 as usize..(r.0 + r.1) as usize];
            d.append(
                self.c.slot,
                e,
                commit.raw(),
                st.write_set
                    .iter()
                    .map(|w| (w.table.0, range(w.key), w.value.map(range))),
            );
            self.c.durable_need = e;
        }
        Ok(())
    }

    /// Phase 3 for one record: write it (keeping the old version for
    /// snapshots if the write crosses a snapshot epoch, §4.9) and release
    /// its lock with the new TID word.
    #[inline]
    fn install(&mut self, i: usize, commit: Tid, e: u64) {
        let shared = self.shared;
        let w: &mut Core = &mut *self.c;
        let we = w.st.write_set[i].clone();
        // SAFETY: locked by us, reachable.
        let rec = unsafe { &*we.rec };
        let old = we.locked.without(Tid::LOCK);
        let crosses = shared.options.snapshots
            && snap(old.epoch()) != snap(e)
            && !(old.is_absent() && rec.prev.load(Ordering::Relaxed).is_null())
            && shared.epochs.copying(e);
        let mut how = Phase3 {
            shared,
            pool: &mut w.pool,
            gc: &mut w.gc,
            scratch: &mut w.st.scratch,
            old,
            e,
            crosses,
            // An insert's placeholder is already the new record it needs.
            overwrites: shared.options.overwrites || we.kind == WriteKind::Placeholder,
        };
        let arena = &w.st.arena;
        // In `usize`, so the slice's length is `r.1` as far as the
        // optimizer knows (no u32 wrap): the install's bounds checks fold.
        let range = |r: (u32, u32)| {
            let (s, n) = (r.0 as usize, r.1 as usize);
            &arena[s..s + n]
        };
        match (we.kind, we.value) {
            (WriteKind::Patch(from), Some(v)) => {
                // In place, the patch's bytes alone (`update_field`): the
                // rest of the value is what Phase 2 validated.
                debug_assert!(how.overwrites);
                how.overwriting(rec);
                rec.store_field(from as usize, range(v));
                rec.unlock(commit.with(Tid::LATEST));
            }
            (_, Some(v)) => {
                // Only a record too small for the value needs its tree.
                let place = || (shared.table(we.table).expect("table"), range(we.key));
                // SAFETY: pinned.
                let mut pin = unsafe { ReadPin::new() };
                let word = commit.with(Tid::LATEST);
                Locked::new(rec, old).install(place, word, range(v), &mut how, &mut pin);
            }
            (_, None) => {
                if crosses {
                    how.keep_old(rec);
                }
                let new_word = commit.with(Tid::LATEST | Tid::ABSENT);
                // Unhook from the tree once no snapshot can need it (§4.9).
                // Outside the copy window no snapshot reader can need the
                // key's past (none may run over epoch `e`, and the delete
                // kept no old version). Then, without a log, the key leaves
                // its tree now, before the lock is released: a reader
                // that found the record sees it superseded (no latest bit)
                // and looks again, a transaction that read it fails
                // validation, and its memory waits for `tree_safe` as any
                // unlinked record's. A logged delete must first be durable
                // (`Worker::run_cleanups`), so it waits in the cleanup list.
                let versioned = shared.options.snapshots && shared.epochs.copying(e);
                if !versioned && shared.durable.get().is_none() {
                    let tree = &shared.table(we.table).expect("table").tree;
                    Locked::new(rec, old).unhook(
                        tree,
                        range(we.key),
                        new_word,
                        &mut w.gc,
                        &shared.epochs,
                    );
                    return;
                }
                rec.unlock(new_word);
                w.gc.cleanup.push_back(Cleanup {
                    label: if versioned { snap(e) } else { e },
                    snapshot: versioned,
                    table: we.table.0,
                    key: range(we.key).into(),
                    rec: NonNull::from(rec),
                    tid: new_word,
                });
            }
        }
    }

    /// Roll back: remove this attempt's placeholders from the tree (locks
    /// were already released by the caller, or never taken).
    pub(crate) fn abort(&mut self) {
        let shared = self.shared;
        for i in 0..self.c.st.write_set.len() {
            let we = &self.c.st.write_set[i];
            if we.kind != WriteKind::Placeholder {
                continue;
            }
            // SAFETY: we inserted it and are still pinned, so even if another
            // transaction superseded and retired it, it is not yet freed.
            let rec = unsafe { &*we.rec };
            let t = rec.lock();
            if t != PLACEHOLDER {
                // Another transaction committed an insert over it: theirs now.
                rec.unlock(t);
                continue;
            }
            let (ks, kn) = (we.key.0 as usize, we.key.1 as usize);
            let tree = &shared.table(we.table).expect("table").tree;
            let c = &mut *self.c;
            let key = &c.st.arena[ks..ks + kn];
            Locked::new(rec, t).unhook(tree, key, t, &mut c.gc, &shared.epochs);
        }
        self.c.st.clear_writes();
    }
}

/// How Phase 3 installs a version (§4.4): a write that crosses a snapshot
/// epoch keeps the old version for snapshot transactions (§4.9).
struct Phase3<'a> {
    shared: &'a Shared,
    pool: &'a mut Pool,
    gc: &'a mut GcLists,
    scratch: &'a mut Vec<u8>,
    /// The record's TID word before Phase 1 locked it.
    old: Tid,
    /// The commit's epoch.
    e: u64,
    /// Whether the write crosses a snapshot epoch that snapshot
    /// transactions may read (old versions are being kept).
    crosses: bool,
    /// `Options::overwrites`.
    overwrites: bool,
}

impl Phase3<'_> {
    /// Keep the old version of `rec` for snapshots (§4.9). Passes the
    /// fields on, not `self`, so the struct never has to be in memory.
    #[inline]
    fn keep_old(&mut self, rec: &Record) {
        let old = self.old.without(Tid::LATEST);
        keep_old(
            rec,
            old,
            self.e,
            self.shared,
            self.pool,
            self.gc,
            self.scratch,
        );
    }
}

/// Copy `rec`'s old version (word `old`) into new memory linked from the
/// record, so the tree keeps pointing at the same record (§4.9); `e` is
/// the epoch of the commit that supersedes it. `scratch` holds the value
/// meanwhile.
fn keep_old(
    rec: &Record,
    old: Tid,
    e: u64,
    shared: &Shared,
    pool: &mut Pool,
    gc: &mut GcLists,
    scratch: &mut Vec<u8>,
) {
    rec.load_value(scratch);
    let prev = rec.prev.load(Ordering::Relaxed);
    let labels = (snap(e), shared.epochs.global());
    let chunked = pool.alloc_version(old, scratch, prev, labels, |c, (s, t)| {
        gc.snap.push_back((s, t, Garbage::Chunk(c)))
    });
    let copy = chunked.unwrap_or_else(|| {
        let c = pool.alloc(old, scratch, 0, prev);
        gc.snap.push_back((labels.0, labels.1, Garbage::record(c)));
        c
    });
    // Release: a snapshot reader that sees the pointer (validated by the
    // TID word) sees the copy's contents.
    rec.prev.store(copy.as_ptr(), Ordering::Release);
}

impl Install for Phase3<'_> {
    #[inline]
    fn overwrites(&self) -> bool {
        self.overwrites
    }

    /// Too big to overwrite: a new record replaces this one in the tree
    /// (§4.5); the old one stays reachable for snapshots through `prev` if
    /// needed.
    #[inline]
    fn replacement(&mut self, rec: &Record, word: Tid, value: &[u8]) -> NonNull<Record> {
        let prev = if self.crosses {
            rec as *const Record as *mut Record
        } else {
            rec.prev.load(Ordering::Relaxed)
        };
        self.pool.alloc(word, value, 0, prev)
    }

    #[inline]
    fn overwriting(&mut self, rec: &Record) {
        if self.crosses {
            self.keep_old(rec);
        }
    }

    #[inline]
    fn retire(&mut self, rec: NonNull<Record>) {
        let g = Garbage::record(rec);
        let label = self.shared.epochs.global();
        if self.crosses {
            self.gc.snap.push_back((snap(self.e), label, g));
        } else {
            self.gc.tree.push_back((label, g));
        }
    }
}

/// Lay write-set entry `i`'s patch (a [`WriteKind::Patch`] of the bytes
/// from `from` on) over the record's value, which the caller has just
/// copied to the arena's end (from `at`), and make that the entry's whole
/// new value.
fn patch_over(st: &mut TxState, i: usize, from: u32, at: usize) {
    let w = &mut st.write_set[i];
    debug_assert_eq!(w.kind, WriteKind::Patch(from));
    let (ps, pn) = w.value.expect("a patch has bytes");
    let (ps, pn, from) = (ps as usize, pn as usize, from as usize);
    st.arena.copy_within(ps..ps + pn, at + from);
    w.value = Some((at as u32, (st.arena.len() - at) as u32));
    w.kind = WriteKind::Existing;
}

/// Release the first `k` locks of the commit order, restoring their words.
fn unlock_first(st: &mut TxState, k: usize) {
    for &(_, i) in &st.order[..k] {
        let w = &st.write_set[i as usize];
        // SAFETY: locked by us.
        unsafe { &*w.rec }.unlock(w.locked.without(Tid::LOCK));
    }
}

/// False only in the test-only mutant engine
/// (`Options::mutant_skip_read_validation`).
#[inline]
fn validates_reads(_shared: &Shared) -> bool {
    #[cfg(feature = "mutant")]
    return !_shared.options.mutant_skip_read_validation;
    #[cfg(not(feature = "mutant"))]
    true
}

/// Phase 2: the read-set and node-set are as the body saw them. With
/// `locked`, the write-set is locked by us and sorted in `st.order`.
/// `reads` false skips the read-set: only the test-only mutant does that.
fn validate(st: &TxState, locked: bool, reads: bool) -> Result<(), AbortReason> {
    for r in st.read_set.iter().filter(|_| reads) {
        // SAFETY: reachable while pinned.
        let cur = Tid(unsafe { &*r.rec }.tid.load(Ordering::Acquire));
        if cur.without(Tid::LOCK) != r.tid || !cur.is_latest() {
            return Err(AbortReason::ReadValidation);
        }
        if cur.is_locked() && !(locked && st.find_rec(r.rec).is_some()) {
            return Err(AbortReason::ReadLocked);
        }
    }
    for n in &st.node_set {
        // SAFETY: the worker has been pinned since the leaf was read (an
        // unlinked leaf is freed only after every worker pinned then has
        // unpinned).
        if unsafe { n.leaf.version() } != n.version {
            return Err(AbortReason::NodeValidation);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hash that `SlotIndex` files at `slot` of a 64-slot table (the
    /// top six bits choose the slot).
    fn at(slot: u64) -> u64 {
        slot << 58
    }

    /// An empty index of 64 slots.
    fn index() -> SlotIndex {
        let mut s = SlotIndex::default();
        assert!(!s.fits(1), "an empty index has no room");
        assert_eq!(s.slots.len(), 64);
        s
    }

    #[test]
    fn slot_index_finds_what_was_added() {
        let mut s = index();
        s.add(at(7), 0);
        s.add(at(7), 1);
        s.add(at(8), 2);
        // Two positions under one hash: `is` tells them apart.
        assert_eq!(s.find(at(7), |_| true), Some(0));
        assert_eq!(s.find(at(7), |p| p == 1), Some(1));
        assert_eq!(s.find(at(8), |p| p == 2), Some(2));
        assert_eq!(s.find(at(8), |p| p == 0), None);
        assert_eq!(s.find(at(30), |_| true), None);
    }

    #[test]
    fn slot_index_probes_past_the_last_slot() {
        let mut s = index();
        s.add(at(63), 0);
        s.add(at(63), 1); // wraps to slot 0
        assert_eq!(s.find(at(63), |p| p == 1), Some(1));
        assert_eq!(s.slots[0] as u32, 1);
    }

    #[test]
    fn slot_index_grows_past_half_full() {
        let mut s = index();
        assert!(s.fits(32));
        assert!(!s.fits(33), "more than half full");
        assert_eq!(s.slots.len(), 128);
        assert_eq!(s.shift, 64 - 7);
        assert!(s.fits(64));
    }

    #[test]
    fn slot_index_clear_forgets_every_entry() {
        let mut s = index();
        s.add(at(5), 0);
        s.clear();
        assert_eq!(s.find(at(5), |_| true), None);
        s.add(at(5), 1);
        assert_eq!(s.find(at(5), |_| true), Some(1));
    }

    #[test]
    fn slot_index_stamp_wraps_around_without_reviving_entries() {
        let mut s = index();
        // Filed under stamp 1, where a wrapped stamp starts again.
        s.add(at(9), 0);
        // As after 2^32 − 2 more transactions that wrote nothing here
        // (clearing that often takes seconds, so set the stamp).
        s.stamp = u32::MAX;
        s.clear();
        assert_eq!(s.stamp, 1, "stamp 0 would match every empty slot");
        assert_eq!(s.find(at(9), |_| true), None, "a stale entry revived");
        assert_eq!(s.find(at(10), |_| true), None);
        s.add(at(9), 1);
        assert_eq!(s.find(at(9), |_| true), Some(1));
    }

    #[test]
    fn key_hash_tells_tables_lengths_and_bytes_apart() {
        let (t0, t1) = (TableId(0), TableId(1));
        assert_eq!(key_hash(t0, b"abc"), key_hash(t0, b"abc"));
        assert_ne!(key_hash(t0, b"abc"), key_hash(t1, b"abc"));
        // Trailing zero bytes count, through the length.
        assert_ne!(key_hash(t0, b""), key_hash(t0, b"\0"));
        assert_ne!(key_hash(t0, b"a"), key_hash(t0, b"a\0"));
        assert_ne!(key_hash(t0, b"12345678"), key_hash(t0, b"12345678\0"));
        // Every byte counts, in the 8-byte chunks and in the tail.
        let k = [7u8; 21];
        for i in 0..k.len() {
            let mut m = k;
            m[i] ^= 1;
            assert_ne!(key_hash(t0, &k), key_hash(t0, &m), "byte {i}");
        }
    }

    /// A write-set entry for a made-up record address (never
    /// dereferenced: the index only hashes and compares it).
    fn entry(st: &mut TxState, t: TableId, key: &[u8], rec: usize) -> WriteEntry {
        WriteEntry {
            table: t,
            rec: rec as *const Record,
            kind: WriteKind::Existing,
            key: st.push_bytes(key),
            value: None,
            locked: Tid(0),
            hash: key_hash(t, key),
        }
    }

    #[test]
    fn write_set_indexes_survive_growth_and_clearing() {
        let mut st = TxState::default();
        let rec = |i: usize| 0x1000 + 64 * i;
        let keys: Vec<(TableId, [u8; 4])> = (0..200u32)
            .map(|i| (TableId(i % 3), i.to_be_bytes()))
            .collect();
        for (i, (t, k)) in keys.iter().enumerate() {
            let e = entry(&mut st, *t, k, rec(i));
            st.push_write(e);
            // Searched entry by entry, then through the indexes from the
            // first write past `LINEAR_WRITES` on.
            if i <= 2 * LINEAR_WRITES {
                for (j, (t, k)) in keys[..=i].iter().enumerate() {
                    assert_eq!(st.find_write(*t, k), Some(j), "{i} written");
                    assert_eq!(st.find_rec(rec(j) as *const Record), Some(j));
                }
                assert_eq!(st.find_write(keys[i + 1].0, &keys[i + 1].1), None);
                assert_eq!(st.find_rec(rec(i + 1) as *const Record), None);
            }
        }
        assert!(st.by_key.slots.len() >= 400, "grew past 64 slots");
        assert!(keys.len() > LINEAR_WRITES, "the indexes are used");
        for (i, (t, k)) in keys.iter().enumerate() {
            assert_eq!(st.find_write(*t, k), Some(i));
            assert_eq!(st.find_rec(rec(i) as *const Record), Some(i));
        }
        // Key 0 is table 0's.
        assert_eq!(st.find_write(TableId(1), &0u32.to_be_bytes()), None);
        assert_eq!(st.find_write(TableId(0), b"none"), None);
        assert_eq!(st.find_rec(rec(200) as *const Record), None);
        st.clear_writes();
        assert_eq!(st.find_write(keys[0].0, &keys[0].1), None);
        assert_eq!(st.find_rec(rec(0) as *const Record), None);
    }

    #[test]
    fn a_transaction_reads_its_own_writes_past_index_growth() {
        let db = crate::Database::new(crate::Options::default()).expect("db");
        let t = db.create_table("t").expect("table");
        let mut w = db.worker().expect("worker");
        let value = |i: u32| -> &'static [u8] {
            if i % 2 == 1 {
                b"first"
            } else {
                b"second"
            }
        };
        w.run(|tx| {
            for i in 0..300u32 {
                tx.put(t, &i.to_be_bytes(), b"first")?;
            }
            for i in (0..300u32).step_by(2) {
                tx.put(t, &i.to_be_bytes(), b"second")?;
            }
            // A second put of a key updates its entry in place.
            assert_eq!(tx.c.st.write_set.len(), 300);
            for i in 0..300u32 {
                assert_eq!(tx.get(t, &i.to_be_bytes())?, Some(value(i)));
            }
            Ok(())
        })
        .expect("commit");
        w.run(|tx| {
            for i in 0..300u32 {
                assert_eq!(tx.get(t, &i.to_be_bytes())?, Some(value(i)));
            }
            Ok(())
        })
        .expect("read back");
    }
}
