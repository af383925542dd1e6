//! Silo's side of the protocol-neutral interface (`granary_api`): its
//! [`Transaction`], [`Worker`] and [`Database`] implement [`Tx`],
//! [`TxRunner`] and [`Engine`], a [`Snapshot`] is a [`ReadOnly`], and a
//! [`Session`] (Silo's interactive transaction) is a [`Tx`] and an
//! [`InteractiveTx`], begun through [`Interactive`].
//!
//! [`Database`]: crate::Database

use std::ops::{Bound, Range};

use granary_api::{
    AbortReason, Engine, Error, Interactive, InteractiveTx, Profile, ReadOnly, Stats, TableId,
    TableOptions, Tx, TxError, TxRunner,
};

use crate::silo::session::Session;
use crate::silo::snapshot::Snapshot;
use crate::silo::tid::Tid;
use crate::silo::txn::Transaction;
use crate::silo::worker::Worker;

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

impl Engine for crate::silo::db::Database {
    type Runner = Worker;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        crate::silo::db::Database::create_table(self, name)
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        crate::silo::db::Database::table(self, name)
    }

    fn open_table(&self, name: &str) -> Result<TableId, Error> {
        crate::silo::db::Database::open_table(self, name)
    }

    fn create_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
        crate::silo::db::Database::create_table_with(self, name, o)
    }

    fn open_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
        crate::silo::db::Database::open_table_with(self, name, o)
    }

    fn runner(&self) -> Result<Worker, Error> {
        self.worker()
    }

    fn durable_epoch(&self) -> Option<u64> {
        crate::silo::db::Database::durable_epoch(self)
    }

    fn log_bytes(&self) -> Option<u64> {
        self.durability_stats().map(|s| s.log_bytes)
    }

    fn checkpoint_spans(&self) -> Vec<granary_api::CheckpointSpan> {
        self.shared
            .durable
            .get()
            .map(|d| d.checkpoints.spans.lock().iter().copied().collect())
            .unwrap_or_default()
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
    fn prefetch(&mut self, t: TableId, key: &[u8]) {
        Transaction::prefetch(self, t, key)
    }

    #[inline]
    fn prefetch_many(&mut self, keys: &[(TableId, &[u8])]) {
        Transaction::prefetch_many(self, keys)
    }

    #[inline]
    fn prefetch_prefix_many(&mut self, keys: &[(TableId, &[u8])], max_bytes: usize) {
        Transaction::prefetch_prefix_many(self, keys, max_bytes)
    }

    #[inline]
    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        Transaction::update(self, t, key, f)
    }

    #[inline]
    fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        Transaction::update_field(self, t, key, field, f)
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

// Silo meets the contract of `Interactive` as it is: an operation never
// waits for another transaction (a read spins only on a record that a
// commit is installing, and every commit finishes inside its own step),
// and a conflict shows at an operation or at commit.
impl Interactive for Worker {
    type Session<'a> = Session<'a>;

    fn begin(&mut self) -> Result<Session<'_>, Error> {
        Ok(Worker::begin(self))
    }
}

impl InteractiveTx for Session<'_> {
    fn commit(self) -> Result<Result<u64, AbortReason>, Error> {
        Ok(Session::commit(self).map(Tid::raw))
    }

    fn abort(self) {
        Session::abort(self);
    }
}

granary_api::forward_tx!(Session<'_>, s => &mut s.tx);
