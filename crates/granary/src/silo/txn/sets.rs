//! A transaction's read-, write- and node-sets (§4.4–§4.6) and the
//! worker's state they live in, reused from one transaction to the next.

use granary_api::{ticks, Hints, Profile, TableId};
use granary_index::{LeafRef, NodeChange};

use crate::silo::error::AbortReason;
use crate::silo::gc::GcLists;
use crate::silo::record::{Pool, Record};
use crate::silo::tid::Tid;

#[derive(Clone, Copy)]
pub(super) struct ReadEntry {
    pub(super) rec: *const Record,
    pub(super) tid: Tid,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum WriteKind {
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
    pub(super) fn unpatch(&mut self) {
        if let WriteKind::Patch(_) = self {
            *self = WriteKind::Existing;
        }
    }
}

#[derive(Clone)]
pub(super) struct WriteEntry {
    pub(super) table: TableId,
    pub(super) rec: *const Record,
    pub(super) kind: WriteKind,
    pub(super) key: (u32, u32),
    /// The new value (arena range), or `None` for a delete.
    pub(super) value: Option<(u32, u32)>,
    /// The TID word found when locking (Phase 1). Before that, for a
    /// [`WriteKind::Patch`], the word its read found.
    pub(super) locked: Tid,
    /// `key_hash(table, key)`, kept for growing `TxState::by_key`.
    pub(super) hash: u64,
}

#[inline]
pub(super) fn key_hash(t: TableId, key: &[u8]) -> u64 {
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
pub(super) fn probe(on: bool) -> u64 {
    if on {
        ticks()
    } else {
        0
    }
}

/// The hash `TxState::by_rec` files a record under.
#[inline]
pub(super) fn rec_hash(rec: *const Record) -> u64 {
    (rec as usize as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Write-sets of up to this many entries are searched entry by entry (by
/// key hash, or by record); past it, through `TxState::by_key` and
/// `TxState::by_rec`, which are filled only then. Filing each write twice
/// cost a 10-operation YCSB transaction more than its searches saved.
pub(super) const LINEAR_WRITES: usize = 8;

/// An open-addressing index from a hash to write-set positions (linear
/// probing on the hash's top bits). Emptied in O(1) per transaction: a slot
/// counts only if it carries the current `stamp`. It replaced two
/// `HashMap`s that were built only past 16 writes and cost about 8% of
/// TPC-C's instructions (inserts, and the linear search below the
/// threshold).
#[derive(Default)]
pub(super) struct SlotIndex {
    /// `stamp << 32 | write-set position`.
    pub(super) slots: Vec<u64>,
    pub(super) stamp: u32,
    /// 64 − log2(slots.len()).
    pub(super) shift: u32,
}

impl SlotIndex {
    /// Forget every entry.
    pub(super) fn clear(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Stamps wrapped: old slots could look current again.
            self.slots.fill(0);
            self.stamp = 1;
        }
    }

    /// Room for `n` entries at a load factor of at most ½? If not, resize
    /// (the caller then re-adds every entry).
    pub(super) fn fits(&mut self, n: usize) -> bool {
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
    pub(super) fn add(&mut self, h: u64, pos: usize) {
        let mask = self.slots.len() - 1;
        let mut i = (h >> self.shift) as usize;
        while (self.slots[i] >> 32) as u32 == self.stamp {
            i = (i + 1) & mask;
        }
        self.slots[i] = (self.stamp as u64) << 32 | pos as u64;
    }

    /// The first position filed under `h` for which `is` holds.
    #[inline]
    pub(super) fn find(&self, h: u64, mut is: impl FnMut(usize) -> bool) -> Option<usize> {
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
pub(super) fn same_key(a: &[u8], b: &[u8]) -> bool {
    match (<&[u8; 8]>::try_from(a), <&[u8; 8]>::try_from(b)) {
        (Ok(x), Ok(y)) => u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y),
        _ => a == b,
    }
}

#[derive(Clone, Copy)]
pub(super) struct NodeEntry {
    pub(super) leaf: LeafRef,
    pub(super) version: u64,
}

/// The reusable per-worker sets (no allocation per transaction once warm).
#[derive(Default)]
pub(crate) struct TxState {
    pub(super) read_set: Vec<ReadEntry>,
    pub(super) write_set: Vec<WriteEntry>,
    pub(super) node_set: Vec<NodeEntry>,
    /// Keys and values of the write-set.
    pub(super) arena: Vec<u8>,
    /// The last value read, returned by reference from `get`.
    pub(crate) buf: Vec<u8>,
    pub(super) scratch: Vec<u8>,
    /// Phase 1's lock order: (record address, write-set position), sorted.
    pub(super) order: Vec<(usize, u32)>,
    /// Whether the write-set may hold a [`WriteKind::Patch`].
    pub(super) patches: bool,
    /// Write-set positions by key hash.
    pub(super) by_key: SlotIndex,
    /// Write-set positions by record address.
    by_rec: SlotIndex,
    /// The record the last `get` found, so a read-modify-write's `put`
    /// need not search the tree again.
    pub(super) last: Option<(TableId, *const Record)>,
    pub(super) last_key: Vec<u8>,
    /// The records `prefetch_many` found, in the order hinted. A lookup
    /// of the next one hinted takes it instead of searching again.
    pub(super) hints: Hints<*const Record>,
}

impl TxState {
    pub(super) fn clear(&mut self) {
        self.read_set.clear();
        self.write_set.clear();
        self.node_set.clear();
        self.arena.clear();
        self.clear_writes();
        self.last = None;
        self.hints.clear();
    }

    /// Empty the write-set and its indexes.
    pub(super) fn clear_writes(&mut self) {
        self.write_set.clear();
        self.patches = false;
        self.by_key.clear();
        self.by_rec.clear();
    }

    pub(super) fn last_found(&self, t: TableId, key: &[u8]) -> Option<*const Record> {
        match self.last {
            Some((lt, p)) if lt == t && same_key(&self.last_key, key) => Some(p),
            _ => None,
        }
    }

    pub(super) fn push_write(&mut self, e: WriteEntry) {
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
    pub(super) fn find_rec(&self, rec: *const Record) -> Option<usize> {
        if self.write_set.len() <= LINEAR_WRITES {
            return self.write_set.iter().position(|w| w.rec == rec);
        }
        self.by_rec
            .find(rec_hash(rec), |j| self.write_set[j].rec == rec)
    }

    pub(super) fn push_bytes(&mut self, b: &[u8]) -> (u32, u32) {
        let start = self.arena.len();
        granary_api::append_bytes(&mut self.arena, b);
        (start as u32, b.len() as u32)
    }

    fn bytes(&self, r: (u32, u32)) -> &[u8] {
        &self.arena[r.0 as usize..(r.0 + r.1) as usize]
    }

    #[inline]
    pub(super) fn find_write(&self, t: TableId, key: &[u8]) -> Option<usize> {
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
    pub(super) fn apply_node_change(&mut self, c: &NodeChange) -> Result<(), AbortReason> {
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

/// Lay write-set entry `i`'s patch (a [`WriteKind::Patch`] of the bytes
/// from `from` on) over the record's value, which the caller has just
/// copied to the arena's end (from `at`), and make that the entry's whole
/// new value.
pub(super) fn patch_over(st: &mut TxState, i: usize, from: u32, at: usize) {
    let w = &mut st.write_set[i];
    debug_assert_eq!(w.kind, WriteKind::Patch(from));
    let (ps, pn) = w.value.expect("a patch has bytes");
    let (ps, pn, from) = (ps as usize, pn as usize, from as usize);
    st.arena.copy_within(ps..ps + pn, at + from);
    w.value = Some((at as u32, (st.arena.len() - at) as u32));
    w.kind = WriteKind::Existing;
}
