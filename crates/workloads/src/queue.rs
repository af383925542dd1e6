//! A queue per driver thread (`granary bench queue`): every transaction
//! appends an item at its queue's tail and removes the one at its head, as
//! TPC-C's new-order table is filled by new-order and drained by delivery,
//! so a table of constant size keeps moving to higher keys. It measures
//! what deletes leave behind in the index (tree memory) rather than
//! throughput: the driver records the resident set
//! size in each second.
//!
//! Keys are 8 bytes, big-endian: the queue's number in the top 16 bits and
//! the item's sequence number in the low 48, so each queue is a contiguous
//! range of the table, and its tail the right edge of that range.

use std::ops::Bound;
use std::sync::{Arc, Mutex};

use granary_api::{Declared, Engine, Error, PartitionRule, TableId, Tx, TxError, TxRunner};

use crate::driver::{load_parallel, run_until_committed, Exec, Workload};

/// The table's name.
pub const TABLE: &str = "queue";
/// Bits of a key that hold the sequence number.
const SEQ_BITS: u32 = 48;
/// The most queues (the key's top 16 bits).
pub const MAX_QUEUES: usize = 1 << (64 - SEQ_BITS);
/// Items per loading transaction.
const LOAD_BATCH: u64 = 1000;
/// Items per verification transaction.
const VERIFY_CHUNK: u64 = 20_000;
const TYPES: [&str; 1] = ["push_pop"];

/// The key of item `seq` of queue `q`.
pub fn key(q: usize, seq: u64) -> [u8; 8] {
    ((q as u64) << SEQ_BITS | seq).to_be_bytes()
}

/// The partition key is the queue (Partitioned-Store: a partition per
/// queue).
pub fn partitioning() -> granary_api::Partitioning {
    |table| {
        (table == TABLE).then_some(PartitionRule::Field {
            shift: 0,
            bits: 64 - SEQ_BITS,
        })
    }
}

/// The workload's parameters.
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// Queues: one per driver thread.
    pub queues: usize,
    /// Items in each queue, at load and after every transaction.
    pub live: u64,
    pub value_bytes: usize,
}

impl QueueConfig {
    /// Resident bytes the live items need at the least: their keys and
    /// values.
    pub fn live_bytes(&self) -> u64 {
        self.queues as u64 * self.live * (8 + self.value_bytes as u64)
    }
}

/// A queue per thread; each transaction pushes one item and pops one.
/// Drive it with at most [`QueueConfig::queues`] threads (a thread past
/// them panics: two threads on one queue would pop each other's items).
///
/// **Invariant** (checked after each run): queue `q` holds exactly the
/// items `head_q..head_q + live`, each with its value, where `head_q` is
/// the number of transactions its thread committed (every item a
/// transaction pushes carries its sequence number in its first 8 bytes).
pub struct Queue {
    cfg: QueueConfig,
    table: Option<TableId>,
    /// Each queue's head after the last run, handed back by threads.
    heads: Arc<Mutex<Vec<u64>>>,
}

impl Queue {
    /// # Errors
    /// [`Error::InvalidOption`] for no queues, more than [`MAX_QUEUES`], an
    /// empty queue, or a value shorter than its 8-byte sequence number.
    pub fn new(cfg: QueueConfig) -> Result<Queue, Error> {
        if cfg.queues == 0 || cfg.queues > MAX_QUEUES {
            return Err(Error::InvalidOption(format!(
                "queues must be between 1 and {MAX_QUEUES}, got {}",
                cfg.queues
            )));
        }
        if cfg.live == 0 || cfg.live >= 1 << 40 {
            return Err(Error::InvalidOption(format!(
                "live items per queue must be between 1 and 2^40 - 1, got {}",
                cfg.live
            )));
        }
        if cfg.value_bytes < 8 {
            return Err(Error::InvalidOption(format!(
                "value bytes must be at least 8 (the item's sequence number), got {}",
                cfg.value_bytes
            )));
        }
        Ok(Queue {
            heads: Arc::new(Mutex::new(vec![0; cfg.queues])),
            cfg,
            table: None,
        })
    }

    /// The heads, locked (a poisoned lock still holds valid numbers).
    fn heads(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        self.heads.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A driver thread's state: its queue and the queue's head.
pub struct QueueThread {
    q: usize,
    head: u64,
    live: u64,
    value: Vec<u8>,
    declared: Declared,
    sink: Arc<Mutex<Vec<u64>>>,
}

impl Drop for QueueThread {
    fn drop(&mut self) {
        let mut h = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        h[self.q] = self.head;
    }
}

impl Workload for Queue {
    type Thread = QueueThread;

    fn types(&self) -> &'static [&'static str] {
        &TYPES
    }

    fn load<E: Engine>(
        &mut self,
        engine: &E,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), Error> {
        let t = engine.create_table(TABLE)?;
        let (live, value_bytes) = (self.cfg.live, self.cfg.value_bytes);
        load_parallel(
            engine,
            self.cfg.queues as u64 * live,
            LOAD_BATCH,
            progress,
            &|item, insert| {
                let (q, seq) = ((item / live) as usize, item % live);
                let mut value = vec![0u8; value_bytes];
                value[..8].copy_from_slice(&seq.to_le_bytes());
                insert(t, &key(q, seq), &value)
            },
        )?;
        self.table = Some(t);
        *self.heads() = vec![0; self.cfg.queues];
        Ok(())
    }

    fn thread(&self, id: usize, threads: usize, _seed: u64) -> QueueThread {
        assert!(
            id < self.cfg.queues,
            "queue: a queue per driver thread, but thread {id} of {threads} and {} queues",
            self.cfg.queues
        );
        QueueThread {
            q: id,
            head: self.heads()[id],
            live: self.cfg.live,
            value: vec![0u8; self.cfg.value_bytes],
            declared: Declared::new(),
            sink: Arc::clone(&self.heads),
        }
    }

    fn run_one<R: TxRunner>(
        &self,
        th: &mut QueueThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let t = self
            .table
            .ok_or_else(|| Error::InvalidOption("queue: run before load".into()))?;
        let (q, head) = (th.q, th.head);
        let tail = head + th.live;
        let (push, pop) = (key(q, tail), key(q, head));
        let declared = if ex.uses_declared() {
            let d = &mut th.declared;
            d.clear();
            d.write(t, &push);
            d.write(t, &pop);
            Some(&*d)
        } else {
            None
        };
        let value = &mut th.value;
        value[..8].copy_from_slice(&tail.to_le_bytes());
        let done = ex.txn_declared(0, declared, |tx| push_pop(tx, t, &push, &pop, value))?;
        if done.is_some() {
            th.head += 1;
        }
        Ok(())
    }

    fn verify<E: Engine>(&self, engine: &E) -> Result<Vec<String>, Error> {
        let Some(t) = self.table else {
            return Ok(vec!["queue: verify before load".into()]);
        };
        let heads = self.heads().clone();
        let mut r = engine.runner()?;
        let mut bad = Vec::new();
        for (q, &head) in heads.iter().enumerate() {
            let mut lo = head;
            let end = head + self.cfg.live;
            // The whole queue's range, so items left before the head or
            // after the tail show too.
            let (first, last) = (key(q, 0), key(q, (1 << SEQ_BITS) - 1));
            let below = count(&mut r, t, &first, &key(q, head))?;
            if below > 0 {
                bad.push(format!("queue {q}: {below} items before its head {head}"));
            }
            while lo < end {
                let hi = (lo + VERIFY_CHUNK).min(end);
                let (n, wrong) = run_until_committed(&mut r, |tx| {
                    let (mut n, mut wrong, mut expect) = (0u64, 0u64, lo);
                    tx.scan(
                        t,
                        Bound::Included(&key(q, lo)[..]),
                        Bound::Excluded(&key(q, hi)[..]),
                        usize::MAX,
                        false,
                        |k, v| {
                            let seq = u64::from_be_bytes(k.try_into().unwrap_or([0xff; 8]))
                                & ((1 << SEQ_BITS) - 1);
                            let tag = v
                                .get(..8)
                                .map(|b| u64::from_le_bytes(b.try_into().expect("8")));
                            if seq != expect || tag != Some(seq) || v.len() != self.cfg.value_bytes
                            {
                                wrong += 1;
                            }
                            expect = seq + 1;
                            n += 1;
                            true
                        },
                    )?;
                    Ok((n, wrong))
                })?;
                if n != hi - lo || wrong > 0 {
                    bad.push(format!(
                        "queue {q}: items {lo}..{hi}: {n} present, {wrong} out of order or with the wrong value"
                    ));
                }
                lo = hi;
            }
            let above = count(&mut r, t, &key(q, end), &last)?;
            if above > 0 {
                bad.push(format!(
                    "queue {q}: {above} items past its tail {}",
                    end - 1
                ));
            }
            if bad.len() >= 20 {
                break;
            }
        }
        Ok(bad)
    }
}

/// Items with keys in `lo..hi`.
fn count<R: TxRunner>(r: &mut R, t: TableId, lo: &[u8], hi: &[u8]) -> Result<u64, Error> {
    run_until_committed(r, |tx| {
        let mut n = 0u64;
        tx.scan(
            t,
            Bound::Included(lo),
            Bound::Excluded(hi),
            usize::MAX,
            false,
            |_, _| {
                n += 1;
                true
            },
        )?;
        Ok(n)
    })
}

/// One transaction: append `value` at `push`, remove the item at `pop`.
#[inline]
fn push_pop<T: Tx>(
    tx: &mut T,
    t: TableId,
    push: &[u8],
    pop: &[u8],
    value: &[u8],
) -> Result<(), TxError> {
    tx.insert(t, push, value)?;
    if !tx.delete(t, pop)? {
        return Err(TxError::user("queue: the head item is missing"));
    }
    Ok(())
}
