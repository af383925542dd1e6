//! The protocol-neutral transaction interface: [`Tx`], what a procedure
//! does, and what it declares ([`Declared`], [`PartitionRule`]).
//!
//! Workloads, the history recorder and the isolation tests are written once
//! against [`Tx`] (the operations a one-shot procedure performs) and
//! [`TxRunner`](crate::TxRunner) (how a worker thread runs a procedure
//! once, `engine.rs`), made by an [`Engine`](crate::Engine), so that every concurrency-control design granary carries
//! can run them unchanged (docs/ARCHITECTURE.md, "The protocol-neutral
//! interface"). Each design implements these traits in its own module;
//! Silo's are `granary::{Transaction, Worker, Database}`.
//!
//! Generic code (`T: Tx`) is monomorphized; nothing here is `dyn`.

use std::ops::Bound;

use crate::error::TxError;
use crate::TableId;

/// The operations of a transaction over byte keys and values.
///
/// Every operation may fail with [`TxError::Conflict`] (the attempt is
/// doomed and will roll back) or [`TxError::Failed`] (bad input, such as an
/// oversized key, or a user error).
pub trait Tx {
    /// Read `key`. The slice is valid until the next operation.
    ///
    /// # Errors
    /// A conflict, or a typed error for bad input.
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError>;

    /// As [`Tx::get`], but the value may be cut to its first `max_bytes`
    /// (Silo's `max_bytes_read`), for callers that need only a leading
    /// field. It is the same read for concurrency control; an engine may
    /// simply copy less. The default reads the whole value and cuts it.
    ///
    /// # Errors
    /// As [`Tx::get`].
    fn get_prefix(
        &mut self,
        t: TableId,
        key: &[u8],
        max_bytes: usize,
    ) -> Result<Option<&[u8]>, TxError> {
        Ok(self.get(t, key)?.map(|v| &v[..v.len().min(max_bytes)]))
    }

    /// Write `key → value`, inserting the key if absent.
    ///
    /// # Errors
    /// A conflict, or a typed error for bad input.
    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError>;

    /// A hint that `key` will be read or written soon: a design may start
    /// fetching what finding it takes into the cache (the point index's
    /// bucket), so that a transaction that names its keys up front waits
    /// for their cache misses together rather than one after another. It
    /// reads nothing, conflicts with nothing, and bad input is ignored.
    /// The default does nothing.
    fn prefetch(&mut self, t: TableId, key: &[u8]) {
        let _ = (t, key);
    }

    /// [`Tx::prefetch`] for several keys at once, each of its table. A
    /// design may fetch in waves: every key's bucket, then every key's
    /// record, then what the record points to, so that each wave's cache
    /// misses overlap instead of each key's misses following one another.
    /// The default hints each key in turn.
    fn prefetch_many(&mut self, keys: &[(TableId, &[u8])]) {
        for &(t, k) in keys {
            self.prefetch(t, k);
        }
    }

    /// As [`Tx::prefetch_many`], for a caller that will touch only the
    /// first `max_bytes` of each value (a [`Tx::update_field`] of a
    /// leading field, a [`Tx::get_prefix`]): a design may fetch only
    /// those lines of each record. The default is [`Tx::prefetch_many`].
    fn prefetch_prefix_many(&mut self, keys: &[(TableId, &[u8])], max_bytes: usize) {
        let _ = max_bytes;
        self.prefetch_many(keys);
    }

    /// Read-modify-write `key`: `f` changes a copy of its current value in
    /// place (the length stays), and that copy becomes the key's new value.
    /// Returns `None`, writing nothing, if the key is absent. For the
    /// concurrency control it is a read followed by a write of the key.
    ///
    /// The default is [`Tx::get`], a copy, and [`Tx::put`]. A design whose
    /// write makes a copy anyway (a new version, an undo image) overrides
    /// it to copy once and find the key once.
    ///
    /// ```
    /// # use granary_api::{Tx, TableId, TxError};
    /// fn bump<T: Tx>(tx: &mut T, t: TableId, key: &[u8]) -> Result<Option<u64>, TxError> {
    ///     tx.update(t, key, |v| {
    ///         let n = u64::from_le_bytes(v[..8].try_into().unwrap()) + 1;
    ///         v[..8].copy_from_slice(&n.to_le_bytes());
    ///         n
    ///     })
    /// }
    /// ```
    ///
    /// # Errors
    /// As [`Tx::get`] and [`Tx::put`].
    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        let Some(v) = self.get(t, key)? else {
            return Ok(None);
        };
        let mut copy = v.to_vec();
        let r = f(&mut copy);
        self.put(t, key, &copy)?;
        Ok(Some(r))
    }

    /// Read-modify-write one field of `key`'s value: the bytes `field`
    /// (cut to the value's length). `f` changes a copy of those bytes in
    /// place, and the value with them changed becomes the key's new
    /// value; the rest of it stays as it is. Returns `None`, writing
    /// nothing, if the key is absent. For the concurrency control it is
    /// a read of the whole key followed by a write of it, exactly as
    /// [`Tx::update`]: the field's old bytes and the bytes around it are
    /// as this transaction saw them, or it does not commit.
    ///
    /// The default is [`Tx::update`] on the field's bytes. A design that
    /// overwrites records in place (Silo) overrides it to copy only the
    /// field, in and out, so that a small change to a large value does
    /// not read or write the rest of it.
    ///
    /// ```
    /// # use granary_api::{Tx, TableId, TxError};
    /// /// Add one to the counter in bytes 8..16 of `key`'s value.
    /// fn bump<T: Tx>(tx: &mut T, t: TableId, key: &[u8]) -> Result<Option<u64>, TxError> {
    ///     tx.update_field(t, key, 8..16, |v| {
    ///         let n = u64::from_le_bytes(v.try_into().unwrap_or([0; 8])) + 1;
    ///         if v.len() == 8 {
    ///             v.copy_from_slice(&n.to_le_bytes());
    ///         }
    ///         n
    ///     })
    /// }
    /// ```
    ///
    /// # Errors
    /// As [`Tx::update`].
    fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: std::ops::Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        self.update(t, key, |v| {
            let r = field_within(&field, v.len());
            f(&mut v[r])
        })
    }

    /// Insert `key → value`; [`Error::KeyExists`](crate::Error::KeyExists) if present.
    ///
    /// # Errors
    /// A conflict, [`Error::KeyExists`](crate::Error::KeyExists), or a typed error for bad input.
    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError>;

    /// Delete `key`; returns whether it was present.
    ///
    /// # Errors
    /// A conflict, or a typed error for bad input.
    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError>;

    /// Visit up to `limit` rows with keys within `lo..hi`, ascending (or
    /// descending if `reverse`); `f` returns false to stop. The range is
    /// protected against phantoms.
    ///
    /// # Errors
    /// A conflict, or a typed error for bad input.
    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: F,
    ) -> Result<(), TxError>;
}

/// Implement [`Tx`] for `$ty` by forwarding every method, defaults
/// included, to the transaction `$inner` names (`$s` is the receiver):
/// an interactive session is its design's transaction held open, and must
/// behave exactly as that transaction does. Written once for every
/// design's session:
///
/// ```ignore
/// granary_api::forward_tx!(Session<'_>, s => &mut s.tx);
/// // A session generic over its design's parameters:
/// granary_api::forward_tx!([C: Certifier] Session<'_, C>, s => &mut s.tx);
/// ```
#[macro_export]
macro_rules! forward_tx {
    ([$($gen:tt)*] $ty:ty, $s:ident => $inner:expr) => {
        impl<$($gen)*> $crate::Tx for $ty {
            #[inline]
            fn get(
                &mut self,
                t: $crate::TableId,
                key: &[u8],
            ) -> Result<Option<&[u8]>, $crate::TxError> {
                let $s = self;
                $crate::Tx::get($inner, t, key)
            }

            #[inline]
            fn get_prefix(
                &mut self,
                t: $crate::TableId,
                key: &[u8],
                max_bytes: usize,
            ) -> Result<Option<&[u8]>, $crate::TxError> {
                let $s = self;
                $crate::Tx::get_prefix($inner, t, key, max_bytes)
            }

            #[inline]
            fn put(
                &mut self,
                t: $crate::TableId,
                key: &[u8],
                value: &[u8],
            ) -> Result<(), $crate::TxError> {
                let $s = self;
                $crate::Tx::put($inner, t, key, value)
            }

            #[inline]
            fn prefetch(&mut self, t: $crate::TableId, key: &[u8]) {
                let $s = self;
                $crate::Tx::prefetch($inner, t, key)
            }

            #[inline]
            fn prefetch_many(&mut self, keys: &[($crate::TableId, &[u8])]) {
                let $s = self;
                $crate::Tx::prefetch_many($inner, keys)
            }

            #[inline]
            fn prefetch_prefix_many(
                &mut self,
                keys: &[($crate::TableId, &[u8])],
                max_bytes: usize,
            ) {
                let $s = self;
                $crate::Tx::prefetch_prefix_many($inner, keys, max_bytes)
            }

            #[inline]
            fn update<R>(
                &mut self,
                t: $crate::TableId,
                key: &[u8],
                f: impl FnOnce(&mut [u8]) -> R,
            ) -> Result<Option<R>, $crate::TxError> {
                let $s = self;
                $crate::Tx::update($inner, t, key, f)
            }

            #[inline]
            fn update_field<R>(
                &mut self,
                t: $crate::TableId,
                key: &[u8],
                field: std::ops::Range<usize>,
                f: impl FnOnce(&mut [u8]) -> R,
            ) -> Result<Option<R>, $crate::TxError> {
                let $s = self;
                $crate::Tx::update_field($inner, t, key, field, f)
            }

            #[inline]
            fn insert(
                &mut self,
                t: $crate::TableId,
                key: &[u8],
                value: &[u8],
            ) -> Result<(), $crate::TxError> {
                let $s = self;
                $crate::Tx::insert($inner, t, key, value)
            }

            #[inline]
            fn delete(&mut self, t: $crate::TableId, key: &[u8]) -> Result<bool, $crate::TxError> {
                let $s = self;
                $crate::Tx::delete($inner, t, key)
            }

            #[inline]
            fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
                &mut self,
                t: $crate::TableId,
                lo: std::ops::Bound<&[u8]>,
                hi: std::ops::Bound<&[u8]>,
                limit: usize,
                reverse: bool,
                f: F,
            ) -> Result<(), $crate::TxError> {
                let $s = self;
                $crate::Tx::scan($inner, t, lo, hi, limit, reverse, f)
            }
        }
    };
    ($ty:ty, $s:ident => $inner:expr) => {
        $crate::forward_tx!([] $ty, $s => $inner);
    };
}

/// The bytes of `field` within a value of `len` bytes: cut at the end,
/// and empty (at `len`) if it starts past it (see [`Tx::update_field`]).
#[inline]
pub fn field_within(field: &std::ops::Range<usize>, len: usize) -> std::ops::Range<usize> {
    let end = field.end.min(len);
    field.start.min(end)..end
}

/// Reads only, object-safe: one read-only body can run as a regular
/// transaction (every [`Tx`] is one) or against a snapshot
/// ([`TxRunner::snapshot_read`](crate::TxRunner::snapshot_read)).
pub trait ReadOnly {
    /// As [`Tx::get`].
    ///
    /// # Errors
    /// As [`Tx::get`].
    fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError>;

    /// As [`Tx::get_prefix`]. The default reads the whole value and cuts
    /// it.
    ///
    /// # Errors
    /// As [`Tx::get`].
    fn read_prefix(
        &mut self,
        t: TableId,
        key: &[u8],
        max_bytes: usize,
    ) -> Result<Option<&[u8]>, TxError> {
        Ok(self.read(t, key)?.map(|v| &v[..v.len().min(max_bytes)]))
    }

    /// As [`Tx::scan`], with a `dyn` visitor.
    ///
    /// # Errors
    /// As [`Tx::scan`].
    fn read_range(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), TxError>;
}

impl<T: Tx> ReadOnly for T {
    fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.get(t, key)
    }

    fn read_prefix(
        &mut self,
        t: TableId,
        key: &[u8],
        max_bytes: usize,
    ) -> Result<Option<&[u8]>, TxError> {
        self.get_prefix(t, key, max_bytes)
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
        self.scan(t, lo, hi, limit, reverse, f)
    }
}

/// A procedure's read and write sets, declared before it runs when its
/// parameters determine them (BOHM plans transactions from
/// their write sets, BOHM §3; ordered 2PL locks them up front). Protocols
/// that execute optimistically (Silo) ignore them. Reusable: [`clear`]
/// keeps the buffers.
///
/// [`clear`]: Declared::clear
#[derive(Clone, Debug, Default)]
pub struct Declared {
    keys: Vec<u8>,
    /// (table, offset, length, is_write)
    entries: Vec<(TableId, u32, u32, bool)>,
    /// Partition key values declared outright (see
    /// [`Declared::partition`]).
    partitions: Vec<u64>,
}

impl Declared {
    /// An empty declaration.
    pub fn new() -> Declared {
        Declared::default()
    }

    /// Forget every entry (keeping the buffers).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.entries.clear();
        self.partitions.clear();
    }

    /// Declare that the procedure touches the partition whose partition
    /// key is `value` (TPC-C: the warehouse id; see [`PartitionRule`]).
    /// For procedures whose keys are not all known up front but whose
    /// partitions are (TPC-C's new-order allocates its order id inside).
    /// Partitioned-Store (Silo §5.4) locks these and the partitions of the
    /// declared keys.
    pub fn partition(&mut self, value: u64) -> &mut Self {
        self.partitions.push(value);
        self
    }

    /// The partition key values declared outright, in declaration order.
    pub fn partitions(&self) -> &[u64] {
        &self.partitions
    }

    fn push(&mut self, t: TableId, key: &[u8], write: bool) -> &mut Self {
        let at = self.keys.len() as u32;
        self.keys.extend_from_slice(key);
        self.entries.push((t, at, key.len() as u32, write));
        self
    }

    /// Declare that the procedure reads `key`.
    pub fn read(&mut self, t: TableId, key: &[u8]) -> &mut Self {
        self.push(t, key, false)
    }

    /// Declare that the procedure writes (puts, inserts or deletes) `key`.
    pub fn write(&mut self, t: TableId, key: &[u8]) -> &mut Self {
        self.push(t, key, true)
    }

    fn entries(&self, write: bool) -> impl Iterator<Item = (TableId, &[u8])> + '_ {
        self.entries
            .iter()
            .filter(move |e| e.3 == write)
            .map(|&(t, at, n, _)| (t, &self.keys[at as usize..(at + n) as usize]))
    }

    /// Where the declaration's entries and key bytes live, for a design
    /// that prefetches declarations ahead of reading them (BOHM's planner
    /// reads every procedure of a batch, made on other threads). Only
    /// addresses: nothing is read through them here.
    pub fn buffers(&self) -> [*const u8; 2] {
        [self.entries.as_ptr().cast(), self.keys.as_ptr()]
    }

    /// Every declared key in declaration order: (table, key, is a write).
    pub fn iter(&self) -> impl Iterator<Item = (TableId, &[u8], bool)> + '_ {
        self.entries
            .iter()
            .map(|&(t, at, n, w)| (t, &self.keys[at as usize..(at + n) as usize], w))
    }

    /// The `i`th declared key (declaration order): (table, key, is a
    /// write).
    pub fn get(&self, i: usize) -> Option<(TableId, &[u8], bool)> {
        let &(t, at, n, w) = self.entries.get(i)?;
        Some((t, &self.keys[at as usize..(at + n) as usize], w))
    }

    /// How many keys are declared (reads and writes).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The declared reads.
    pub fn reads(&self) -> impl Iterator<Item = (TableId, &[u8])> + '_ {
        self.entries(false)
    }

    /// The declared writes.
    pub fn writes(&self) -> impl Iterator<Item = (TableId, &[u8])> + '_ {
        self.entries(true)
    }

    /// Whether `key` is declared as read (or written: a write may read).
    pub fn covers_read(&self, t: TableId, key: &[u8]) -> bool {
        self.reads()
            .chain(self.writes())
            .any(|(u, k)| u == t && k == key)
    }

    /// Whether `key` is declared as written.
    pub fn covers_write(&self, t: TableId, key: &[u8]) -> bool {
        self.writes().any(|(u, k)| u == t && k == key)
    }
}

/// Where a table's partition key lies in its keys (Silo §5.4: the data
/// of Partitioned-Store is split by a partition key, the warehouse for
/// TPC-C). A workload that can run partitioned gives a rule for each of
/// its tables by name ([`Partitioning`]); a design maps the key's value to
/// one of its partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionRule {
    /// The value is a field of the key: `bits` bits (1..=64) starting
    /// `shift` bits from the top of the key's first 8 bytes, read big-endian
    /// and zero-padded if the key is shorter.
    Field {
        /// Bits above the field.
        shift: u32,
        /// The field's width.
        bits: u32,
    },
    /// The value is a hash of the whole key (YCSB, SmallBank).
    Hash,
    /// Read by every partition and written only while loading (TPC-C's
    /// ITEM).
    Shared,
}

impl PartitionRule {
    /// The partition key value of `key` under a `Field` rule (`None` for
    /// the other rules).
    pub fn field_value(self, key: &[u8]) -> Option<u64> {
        let PartitionRule::Field { shift, bits } = self else {
            return None;
        };
        let mut b = [0u8; 8];
        let n = key.len().min(8);
        b[..n].copy_from_slice(&key[..n]);
        let x = u64::from_be_bytes(b) << shift.min(63);
        Some(if bits >= 64 { x } else { x >> (64 - bits) })
    }
}

/// A workload's partitioning: the rule for each of its tables, by name;
/// `None` for a table with no partition key (such a workload cannot run
/// partitioned).
pub type Partitioning = fn(&str) -> Option<PartitionRule>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_fields() {
        let f = PartitionRule::Field { shift: 0, bits: 14 };
        let k = (0x1234_5678_9abc_def0u64).to_be_bytes();
        assert_eq!(f.field_value(&k), Some(0x1234 >> 2));
        let f = PartitionRule::Field { shift: 0, bits: 32 };
        assert_eq!(f.field_value(&7u32.to_be_bytes()), Some(7), "zero-padded");
        let f = PartitionRule::Field { shift: 4, bits: 64 };
        assert_eq!(f.field_value(&k), Some(0x2345_6789_abcd_ef00));
        assert_eq!(PartitionRule::Hash.field_value(&k), None);
    }

    #[test]
    fn declared_sets() {
        let (a, b) = (TableId(0), TableId(1));
        let mut d = Declared::new();
        d.read(a, b"x").write(b, b"yy").read(a, b"");
        assert_eq!(
            d.reads().collect::<Vec<_>>(),
            [(a, &b"x"[..]), (a, &b""[..])]
        );
        assert_eq!(d.writes().collect::<Vec<_>>(), [(b, &b"yy"[..])]);
        assert!(d.covers_read(b, b"yy"), "a declared write may be read");
        assert!(!d.covers_write(a, b"x"));
        assert!(!d.covers_read(a, b"yy"), "tables are part of the key");
        d.clear();
        assert_eq!(d.reads().count() + d.writes().count(), 0);
    }
}
