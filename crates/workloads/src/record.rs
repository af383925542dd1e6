//! History recording for the checker, over any protocol.
//!
//! [`RecTx`] wraps a protocol's [`Tx`] and logs what each operation
//! observed as a [`granary_check::Op`]. Writes go through it with an 8-byte
//! version id prepended to the value (unique in the run: the writer's
//! attempt id and the write's position), so every later read names the
//! write it saw — the checker never has to trust the engine about what
//! was read. The only thing the protocol supplies is each committed
//! writer's commit-order key ([`TxRunner::last_commit_key`]: the TID for
//! Silo), which orders the versions of each key.
//!
//! Recording is off unless a workload is run through [`RecordingRunner`];
//! the plain paths never see this module. Keys recorded must be 8-byte
//! big-endian integers below 2⁴⁸ (the check workloads' keys); they map to
//! checker keys as `table << 48 | key`, which keeps scan ranges ordered.

use std::ops::{Bound, Range};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use granary_api::{AbortReason, Error, TableId, Tx, TxError, TxRunner};
use granary_check::{History, Key, Op, Status, Txn, TxnId, VersionId};

/// Keys below this fit the checker's key space next to their table.
pub const MAX_RECORDED_KEY: u64 = 1 << 48;

/// Writes per transaction attempt that get distinct version ids.
const WRITE_BITS: u32 = 12;

/// Attempt ids per worker (decimal, so ids read as worker · attempt).
const ATTEMPTS_PER_WORKER: u64 = 10_000_000_000;

/// Bytes prepended to every recorded value: the version id.
pub const HEADER: usize = 8;

/// One worker's recorded history.
#[derive(Debug)]
pub struct Recorder {
    ids: AttemptIds,
    txns: Vec<Txn>,
}

/// A worker's source of attempt ids, shared with the procedures it hands
/// to a pipelined design (they begin their attempts on the design's
/// threads).
#[derive(Clone, Debug)]
pub struct AttemptIds {
    worker: u64,
    next: Arc<AtomicU64>,
}

impl AttemptIds {
    /// Start recording an attempt (recorded as aborted unless
    /// [`Recorder::finish`] is told otherwise).
    pub fn begin(&self) -> Attempt {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        // Ids read as worker and attempt in decimal (T<worker><10 digits>);
        // they stay below 2^52, so version ids can append a 12-bit write
        // index.
        let id = self.worker * ATTEMPTS_PER_WORKER + n;
        Attempt {
            txn: Txn {
                id,
                status: Status::Aborted,
                commit_key: 0,
                ops: Vec::new(),
            },
            writes: 0,
        }
    }
}

impl Recorder {
    /// Recorder for worker `worker` (< 2¹⁶; ids embed it, so they are
    /// unique across workers). A recorder records at most 10¹⁰ attempts.
    pub fn new(worker: u16) -> Recorder {
        Recorder {
            ids: AttemptIds {
                worker: worker as u64,
                next: Arc::default(),
            },
            txns: Vec::new(),
        }
    }

    /// What was recorded.
    pub fn into_txns(self) -> Vec<Txn> {
        self.txns
    }

    /// Committed attempts so far.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// This worker's attempt ids, for procedures that record themselves.
    pub fn ids(&self) -> AttemptIds {
        self.ids.clone()
    }

    /// Start recording an attempt (recorded as aborted unless
    /// [`Recorder::finish`] is told otherwise).
    pub fn begin(&mut self) -> Attempt {
        self.ids.begin()
    }

    /// Record a finished attempt: `commit_key` is `Some` (the protocol's
    /// commit-order key) if it committed, `None` if it aborted.
    pub fn finish(&mut self, mut a: Attempt, commit_key: Option<u64>) {
        if let Some(k) = commit_key {
            a.txn.status = Status::Committed;
            a.txn.commit_key = k;
        }
        self.txns.push(a.txn);
    }
}

/// One transaction attempt being recorded.
#[derive(Debug)]
pub struct Attempt {
    txn: Txn,
    /// Version ids handed out so far.
    writes: u64,
}

impl Attempt {
    /// Whether the attempt wrote (or reserved an element id).
    pub fn wrote(&self) -> bool {
        self.writes > 0
    }

    /// The attempt's transaction id.
    pub fn id(&self) -> TxnId {
        self.txn.id
    }
}

/// Merge workers' recordings into one history.
pub fn merge(recorders: impl IntoIterator<Item = Recorder>) -> History {
    let mut h = History::new();
    for r in recorders {
        for t in r.into_txns() {
            h.push(t);
        }
    }
    h
}

/// A transaction whose operations are being recorded.
pub struct RecTx<'a, T: Tx> {
    tx: &'a mut T,
    a: &'a mut Attempt,
    buf: Vec<u8>,
}

fn bad_key(why: &str) -> TxError {
    TxError::Failed(Error::InvalidOption(format!(
        "recorded keys must be 8-byte big-endian integers below 2^48: {why}"
    )))
}

/// The checker's key for `(t, key)`.
fn check_key(t: TableId, key: &[u8]) -> Result<Key, TxError> {
    let k: [u8; 8] = key.try_into().map_err(|_| bad_key("wrong length"))?;
    let k = u64::from_be_bytes(k);
    if k >= MAX_RECORDED_KEY || t.index() >= 1 << 16 {
        return Err(bad_key("too large"));
    }
    Ok((t.index() as u64) << 48 | k)
}

fn version_of(value: &[u8]) -> Result<VersionId, TxError> {
    let h: [u8; HEADER] = value
        .get(..HEADER)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| {
            TxError::Failed(Error::InvalidOption(
                "a recorded read found a value written without recording".into(),
            ))
        })?;
    Ok(u64::from_be_bytes(h))
}

impl<'a, T: Tx> RecTx<'a, T> {
    /// Record `tx`'s operations into `a`.
    pub fn new(tx: &'a mut T, a: &'a mut Attempt) -> Self {
        RecTx {
            tx,
            a,
            buf: Vec::new(),
        }
    }

    fn next_version(&mut self) -> Result<VersionId, TxError> {
        self.a.writes += 1;
        if self.a.writes >= 1 << WRITE_BITS {
            return Err(TxError::Failed(Error::InvalidOption(
                "too many writes in one recorded transaction".into(),
            )));
        }
        Ok(self.a.txn.id << WRITE_BITS | self.a.writes)
    }

    fn write(&mut self, t: TableId, key: &[u8], value: &[u8], insert: bool) -> Result<(), TxError> {
        let k = check_key(t, key)?;
        let v = self.next_version()?;
        self.buf.clear();
        self.buf.extend_from_slice(&v.to_be_bytes());
        self.buf.extend_from_slice(value);
        if insert {
            self.tx.insert(t, key, &self.buf)?;
        } else {
            self.tx.put(t, key, &self.buf)?;
        }
        self.a.txn.ops.push(Op::Write { key: k, version: v });
        Ok(())
    }

    /// Read the list of `u64` elements at `key` (empty if absent), recorded
    /// as a list read. Lists are stored as big-endian `u64`s after the
    /// header.
    ///
    /// # Errors
    /// As for [`Tx::get`].
    pub fn read_list(&mut self, t: TableId, key: &[u8]) -> Result<Vec<u64>, TxError> {
        let k = check_key(t, key)?;
        let elems = match self.tx.get(t, key)? {
            None => Vec::new(),
            Some(v) => {
                version_of(v)?;
                v[HEADER..]
                    .chunks_exact(8)
                    .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
                    .collect()
            }
        };
        self.a.txn.ops.push(Op::ReadList {
            key: k,
            elems: elems.clone(),
        });
        Ok(elems)
    }

    /// Append `elem` (unique in the run) to the list at `key`: a read of
    /// the list and a write of it extended, recorded as both.
    ///
    /// # Errors
    /// As for [`Tx::put`].
    pub fn append(&mut self, t: TableId, key: &[u8], elem: u64) -> Result<(), TxError> {
        let mut elems = self.read_list(t, key)?;
        elems.push(elem);
        let v = self.next_version()?;
        self.buf.clear();
        self.buf.extend_from_slice(&v.to_be_bytes());
        for e in &elems {
            self.buf.extend_from_slice(&e.to_be_bytes());
        }
        self.tx.put(t, key, &self.buf)?;
        self.a.txn.ops.push(Op::Append {
            key: check_key(t, key)?,
            elem,
        });
        Ok(())
    }

    /// A unique element for [`RecTx::append`]: this attempt's id and a
    /// counter.
    ///
    /// # Errors
    /// Too many writes in one transaction.
    pub fn unique_elem(&mut self) -> Result<u64, TxError> {
        self.next_version()
    }
}

impl<T: Tx> RecTx<'_, T> {
    /// `update` (`field` `None`) or `update_field`, through the protocol's
    /// own, so that the checker sees the path a design takes for it: the
    /// old version id is read from the bytes the design hands over and
    /// the new one written over it. A field update asks the design for
    /// the version id and everything up to the field's end (the bytes
    /// between go through unchanged).
    fn update_recorded<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: Option<Range<usize>>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        let k = check_key(t, key)?;
        let v = self.next_version()?;
        let (mut f, mut out, mut old, mut bad) = (Some(f), None, None, None);
        let change = |val: &mut [u8]| match version_of(val) {
            Ok(o) => {
                old = Some(o);
                val[..HEADER].copy_from_slice(&v.to_be_bytes());
                let rest = &mut val[HEADER..];
                let r = field.as_ref().map_or(0..rest.len(), |fd| {
                    granary_api::field_within(fd, rest.len())
                });
                out = f.take().map(|f| f(&mut rest[r]));
            }
            Err(e) => bad = Some(e),
        };
        let found = match &field {
            None => self.tx.update(t, key, change)?,
            Some(fd) => {
                let upto = 0..fd.end.saturating_add(HEADER);
                self.tx.update_field(t, key, upto, change)?
            }
        };
        if let Some(e) = bad {
            return Err(e);
        }
        self.a.txn.ops.push(Op::Read {
            key: k,
            version: old,
        });
        if found.is_some() {
            self.a.txn.ops.push(Op::Write { key: k, version: v });
        }
        Ok(out)
    }
}

impl<T: Tx> Tx for RecTx<'_, T> {
    // Hints read nothing for the transaction: passed on, not recorded (so
    // that the checker covers the lookups they steer).
    fn prefetch(&mut self, t: TableId, key: &[u8]) {
        self.tx.prefetch(t, key);
    }

    fn prefetch_many(&mut self, keys: &[(TableId, &[u8])]) {
        self.tx.prefetch_many(keys);
    }

    fn prefetch_prefix_many(&mut self, keys: &[(TableId, &[u8])], max_bytes: usize) {
        self.tx
            .prefetch_prefix_many(keys, max_bytes.saturating_add(HEADER));
    }

    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        let k = check_key(t, key)?;
        match self.tx.get(t, key)? {
            None => {
                self.a.txn.ops.push(Op::Read {
                    key: k,
                    version: None,
                });
                Ok(None)
            }
            Some(v) => {
                let version = version_of(v)?;
                self.a.txn.ops.push(Op::Read {
                    key: k,
                    version: Some(version),
                });
                Ok(Some(&v[HEADER..]))
            }
        }
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, value, false)
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        self.update_recorded(t, key, None, f)
    }

    fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        self.update_recorded(t, key, Some(field), f)
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        // `insert` also observes the key's absence; a failed insert saw it
        // present, which the checker cannot name a version for, so it is
        // not recorded (the check workloads never insert an existing key).
        self.write(t, key, value, true)
    }

    fn delete(&mut self, _t: TableId, _key: &[u8]) -> Result<bool, TxError> {
        // A read of "absent" could not name which delete it saw.
        Err(TxError::Failed(Error::InvalidOption(
            "deletes are not recorded; check workloads write tombstone values instead".into(),
        )))
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
        let base = (t.index() as u64) << 48;
        let lo_k = match lo {
            Bound::Unbounded => base,
            Bound::Included(k) => check_key(t, k)?,
            Bound::Excluded(k) => check_key(t, k)? + 1,
        };
        let hi_k = match hi {
            Bound::Unbounded => base + MAX_RECORDED_KEY,
            Bound::Included(k) => check_key(t, k)? + 1,
            Bound::Excluded(k) => check_key(t, k)?,
        };
        let mut rows = Vec::new();
        let mut bad = None;
        let mut stopped = false;
        let mut n = 0;
        self.tx.scan(t, lo, hi, limit, reverse, |key, value| {
            let parsed = check_key(t, key).and_then(|k| Ok((k, version_of(value)?)));
            match parsed {
                Ok(row) => rows.push(row),
                Err(e) => {
                    bad = Some(e);
                    return false;
                }
            }
            n += 1;
            let go = f(key, &value[HEADER..]);
            stopped = !go || n == limit;
            go
        })?;
        if let Some(e) = bad {
            return Err(e);
        }
        // A scan cut short observed only up to its last row.
        let (lo_k, hi_k) = match (stopped, rows.last()) {
            (true, Some(&(last, _))) if reverse => (last, hi_k),
            (true, Some(&(last, _))) => (lo_k, last + 1),
            _ => (lo_k, hi_k),
        };
        self.a.txn.ops.push(Op::Scan {
            lo: lo_k,
            hi: Some(hi_k),
            rows,
        });
        Ok(())
    }
}

/// Runs procedures through a protocol's runner, recording each attempt.
pub struct RecordingRunner<'r, R: TxRunner> {
    /// The protocol's runner.
    pub runner: &'r mut R,
    /// Where attempts are recorded.
    pub recorder: &'r mut Recorder,
}

impl<R: TxRunner> RecordingRunner<'_, R> {
    /// Run `body` once, recorded: `Ok(Ok(v))` committed, `Ok(Err(r))`
    /// conflicted. Attempts that conflict or fail are recorded as aborted.
    ///
    /// # Errors
    /// As for [`TxRunner::try_run`].
    pub fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut RecTx<'_, R::Tx<'_>>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let mut a = self.recorder.begin();
        let r = self.runner.try_run(|tx| body(&mut RecTx::new(tx, &mut a)));
        let key = match &r {
            // A read-only commit takes no commit key.
            Ok(Ok(_)) if a.wrote() => Some(self.runner.last_commit_key()),
            Ok(Ok(_)) => Some(0),
            _ => None,
        };
        self.recorder.finish(a, key);
        r
    }
}
