//! The paper's Key-Value baseline (Silo §5.2, `granary bench ycsb
//! --engine kv`) as an [`Engine`], so the shared driver runs it like any
//! protocol.
//!
//! A "transaction" here is just its body run once against the bare index:
//! [`Tx::get`] is [`Worker::kv_get`] and [`Tx::put`] is [`Worker::kv_put`],
//! with no read set, no validation and no commit. It never aborts, and it
//! is not serializable with anything (a concurrent read-modify-write can
//! lose an update): a baseline for throughput only. Inserts, deletes and
//! scans have no bare-index counterpart and fail.

use std::ops::Bound;

use granary_api::{
    AbortReason, Engine, Error, ReadOnly, Stats, TableId, TableOptions, Tx, TxError, TxRunner,
};

use crate::{Database, Worker};

/// The bare index of a [`Database`], without transactions.
pub struct KvEngine<'a>(pub &'a Database);

impl Engine for KvEngine<'_> {
    type Runner = KvRunner;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        self.0.create_table(name)
    }

    fn create_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
        self.0.create_table_with(name, o)
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.0.table(name)
    }

    fn runner(&self) -> Result<KvRunner, Error> {
        Ok(KvRunner {
            w: self.0.worker()?,
            buf: Vec::new(),
            stats: Stats::default(),
        })
    }
}

/// A thread's handle: a Silo [`Worker`] used only for its kv calls.
pub struct KvRunner {
    w: Worker,
    /// Where [`Tx::get`] copies the value it returns.
    buf: Vec<u8>,
    stats: Stats,
}

/// One body's view of the bare index.
pub struct KvTx<'a> {
    w: &'a mut Worker,
    buf: &'a mut Vec<u8>,
}

fn unsupported(op: &str) -> TxError {
    TxError::user(format!(
        "the kv engine has only get and put (no {op}): it is the bare index"
    ))
}

impl Tx for KvTx<'_> {
    #[inline]
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        Ok(if self.w.kv_get(t, key, self.buf)? {
            Some(self.buf.as_slice())
        } else {
            None
        })
    }

    #[inline]
    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        Ok(self.w.kv_put(t, key, value)?)
    }

    fn insert(&mut self, _t: TableId, _key: &[u8], _value: &[u8]) -> Result<(), TxError> {
        Err(unsupported("insert"))
    }

    fn delete(&mut self, _t: TableId, _key: &[u8]) -> Result<bool, TxError> {
        Err(unsupported("delete"))
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        _t: TableId,
        _lo: Bound<&[u8]>,
        _hi: Bound<&[u8]>,
        _limit: usize,
        _reverse: bool,
        _f: F,
    ) -> Result<(), TxError> {
        Err(unsupported("scan"))
    }
}

impl TxRunner for KvRunner {
    type Tx<'a> = KvTx<'a>;

    #[inline]
    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut KvTx<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let mut tx = KvTx {
            w: &mut self.w,
            buf: &mut self.buf,
        };
        // Only a body can make up a conflict: nothing here validates.
        self.stats.record(body(&mut tx))
    }

    fn last_commit_key(&self) -> u64 {
        // Writes take no TID beyond the record's own sequence number.
        0
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn snapshot_read<T>(
        &mut self,
        body: &mut dyn FnMut(&mut dyn ReadOnly) -> Result<T, TxError>,
    ) -> Result<T, Error> {
        self.w.snapshot_read(body)
    }
}
