//! The protocol-neutral transaction interface.
//!
//! Workloads, the history recorder and the isolation tests are written once
//! against [`Tx`] (the operations a one-shot procedure performs) and
//! [`TxRunner`] (how a worker thread runs a procedure once), made by an
//! [`Engine`], so that every
//! concurrency-control design granary carries can run them unchanged
//! (DESIGN.md, "The one interface every protocol implements"). Silo's
//! [`Transaction`], [`Session`], [`Worker`] and [`Database`] implement them.
//!
//! [`Database`]: crate::Database
//!
//! Generic code (`T: Tx`) is monomorphized; nothing here is `dyn`.

use std::ops::Bound;

use crate::db::TableId;
use crate::error::{AbortReason, Error, TxError};
use crate::snapshot::Snapshot;
use crate::tid::Tid;
use crate::txn::{Profile, Transaction};
use crate::worker::{Stats, Worker};

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

    /// Insert `key → value`; [`Error::KeyExists`] if present.
    ///
    /// # Errors
    /// A conflict, [`Error::KeyExists`], or a typed error for bad input.
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

/// Reads only, object-safe: one read-only body can run as a regular
/// transaction (every [`Tx`] is one) or against a snapshot
/// ([`TxRunner::snapshot_read`]).
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

impl ReadOnly for Snapshot<'_> {
    fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        Ok(self.get(t, key)?)
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
        Ok(self.scan(t, lo, hi, limit, reverse, f)?)
    }
}

/// A procedure's read and write sets, declared before it runs when its
/// parameters determine them (DESIGN.md: BOHM plans transactions from
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

/// A worker thread's handle for running one-shot procedures under some
/// concurrency-control protocol.
pub trait TxRunner {
    /// The transaction type procedures are handed.
    type Tx<'a>: Tx
    where
        Self: 'a;

    /// Run `body` once: `Ok(Ok(v))` committed, `Ok(Err(reason))` conflicted
    /// and rolled back (the caller may retry), `Err(e)` failed.
    ///
    /// # Errors
    /// Whatever the body failed with, checked to come from a consistent
    /// state.
    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Self::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error>;

    /// As [`try_run`](TxRunner::try_run), for a procedure whose read and
    /// write sets are declared up front. The body must stay within them.
    /// The default (Silo's) ignores the declaration.
    ///
    /// # Errors
    /// As for `try_run`.
    fn try_run_declared<T>(
        &mut self,
        declared: &Declared,
        body: impl FnOnce(&mut Self::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let _ = declared;
        self.try_run(body)
    }

    /// The protocol's commit-order key of this worker's last committed
    /// transaction that wrote something: for Silo, its TID. For any one
    /// key, the commit keys of its successive writers increase.
    fn last_commit_key(&self) -> u64;

    /// Counters since the runner was created (or last reset).
    fn stats(&self) -> &Stats;

    /// Start (or stop) collecting a cost breakdown. Protocols without
    /// instrumentation ignore it.
    fn set_profiling(&mut self, _on: bool) {}

    /// The breakdown since the last call, reset; `None` if the protocol
    /// does not collect one.
    fn take_profile(&mut self) -> Option<Profile> {
        None
    }

    /// For a durable engine that does not wait at commit: the persistent
    /// epoch that acknowledges the last committed transaction (see
    /// [`Engine::durable_epoch`]). 0 when there is nothing to wait for.
    fn durable_token(&self) -> u64 {
        0
    }

    /// Run a read-only body against a consistent snapshot (Silo §4.9: it
    /// never aborts). Protocols without snapshots run it as a regular
    /// transaction, retried on conflict.
    ///
    /// # Errors
    /// Whatever the body failed with.
    fn snapshot_read<T>(
        &mut self,
        body: &mut dyn FnMut(&mut dyn ReadOnly) -> Result<T, TxError>,
    ) -> Result<T, Error>;
}

/// A database running some protocol: makes tables and per-thread runners.
pub trait Engine: Sync {
    /// A worker thread's runner.
    type Runner: TxRunner + Send;

    /// Create a table; [`Error::TableExists`] if the name is taken.
    ///
    /// # Errors
    /// As the protocol's own `create_table`.
    fn create_table(&self, name: &str) -> Result<TableId, Error>;

    /// A runner for the calling thread.
    ///
    /// # Errors
    /// [`Error::TooManyWorkers`] past the protocol's limit.
    fn runner(&self) -> Result<Self::Runner, Error>;

    /// For a durable engine: the persistent epoch now (a transaction is
    /// durable once this reaches its [`TxRunner::durable_token`]). `None`
    /// for an in-memory engine.
    fn durable_epoch(&self) -> Option<u64> {
        None
    }

    /// For a durable engine: log bytes written so far.
    fn log_bytes(&self) -> Option<u64> {
        None
    }
}

impl Engine for crate::db::Database {
    type Runner = Worker;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        crate::db::Database::create_table(self, name)
    }

    fn runner(&self) -> Result<Worker, Error> {
        self.worker()
    }

    fn durable_epoch(&self) -> Option<u64> {
        crate::db::Database::durable_epoch(self)
    }

    fn log_bytes(&self) -> Option<u64> {
        self.durability_stats().map(|s| s.log_bytes)
    }
}

impl Tx for Transaction<'_> {
    #[inline]
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        Transaction::get(self, t, key)
    }

    #[inline]
    fn get_prefix(
        &mut self,
        t: TableId,
        key: &[u8],
        max_bytes: usize,
    ) -> Result<Option<&[u8]>, TxError> {
        Transaction::get_prefix(self, t, key, max_bytes)
    }

    #[inline]
    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        Transaction::put(self, t, key, value)
    }

    #[inline]
    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        Transaction::insert(self, t, key, value)
    }

    #[inline]
    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        Transaction::delete(self, t, key)
    }

    #[inline]
    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: F,
    ) -> Result<(), TxError> {
        Transaction::scan(self, t, lo, hi, limit, reverse, f)
    }
}

impl TxRunner for Worker {
    type Tx<'a> = Transaction<'a>;

    #[inline]
    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Transaction<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        Worker::try_run(self, body)
    }

    fn last_commit_key(&self) -> u64 {
        self.last_commit_tid().0
    }

    fn durable_token(&self) -> u64 {
        self.commit_token().epoch
    }

    fn stats(&self) -> &Stats {
        Worker::stats(self)
    }

    fn set_profiling(&mut self, on: bool) {
        Worker::set_profiling(self, on);
    }

    fn take_profile(&mut self) -> Option<Profile> {
        Some(Worker::take_profile(self))
    }

    fn snapshot_read<T>(
        &mut self,
        body: &mut dyn FnMut(&mut dyn ReadOnly) -> Result<T, TxError>,
    ) -> Result<T, Error> {
        Worker::snapshot(self, |s| {
            body(s).map_err(|e| match e {
                TxError::Failed(e) => e,
                // Snapshot reads never conflict; only a body that makes up
                // a conflict gets here.
                TxError::Conflict(last) => Error::RetriesExhausted { attempts: 1, last },
            })
        })
    }
}

/// An interactive transaction: begun by [`Worker::begin`], it stays open
/// across calls until [`Session::commit`] or drop (which rolls it back).
///
/// Meant for scripted interleavings (the isolation tests) and for callers
/// that cannot express their work as a closure. Prefer [`Worker::run`]:
/// while a session is open its worker holds its epoch, which holds back
/// garbage collection for every worker.
///
/// ```
/// use granary::{Database, Options, Tx};
/// let db = Database::new(Options::default())?;
/// let t = db.create_table("t")?;
/// let (mut a, mut b) = (db.worker()?, db.worker()?);
/// let mut s1 = a.begin();
/// let mut s2 = b.begin();
/// assert_eq!(s1.get(t, b"x")?, None);
/// s2.put(t, b"x", b"1")?;
/// s2.commit()?;
/// // s1 read "x absent", which s2 has since changed: s1 cannot commit.
/// // The conflict shows at its next operation or at commit.
/// let doomed = s1.put(t, b"y", b"1").is_err() || s1.commit().is_err();
/// assert!(doomed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Session<'w> {
    pub(crate) tx: Transaction<'w>,
    pub(crate) end: SessionEnd<'w>,
}

/// What a session gives back to its worker when it ends.
pub(crate) struct SessionEnd<'w> {
    pub epochs: &'w crate::epoch::Epochs,
    pub slot: usize,
    pub stats: &'w mut Stats,
    pub open: bool,
}

impl Session<'_> {
    /// Commit (Silo Fig. 2). Returns the commit TID, or zero for a
    /// read-only transaction (which takes none, Silo §4.2).
    ///
    /// # Errors
    /// The [`AbortReason`] if validation failed; the session is rolled back.
    pub fn commit(mut self) -> Result<Tid, AbortReason> {
        self.end.open = false;
        let wrote = self.tx.writes_anything();
        match self.tx.commit() {
            Ok(()) => {
                self.end.stats.commits += 1;
                Ok(if wrote {
                    self.tx.last_tid()
                } else {
                    Tid::default()
                })
            }
            Err(reason) => {
                self.end.stats.aborts[reason.index()] += 1;
                Err(reason)
            }
        }
    }

    /// Roll back explicitly (dropping the session does the same).
    pub fn abort(self) {}
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if self.end.open {
            self.tx.abort();
        }
        self.end.epochs.unpin(self.end.slot);
    }
}

impl Tx for Session<'_> {
    #[inline]
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.tx.get(t, key)
    }

    #[inline]
    fn get_prefix(
        &mut self,
        t: TableId,
        key: &[u8],
        max_bytes: usize,
    ) -> Result<Option<&[u8]>, TxError> {
        self.tx.get_prefix(t, key, max_bytes)
    }

    #[inline]
    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.tx.put(t, key, value)
    }

    #[inline]
    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.tx.insert(t, key, value)
    }

    #[inline]
    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        self.tx.delete(t, key)
    }

    #[inline]
    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: F,
    ) -> Result<(), TxError> {
        self.tx.scan(t, lo, hi, limit, reverse, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
