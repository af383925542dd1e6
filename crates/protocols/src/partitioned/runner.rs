//! The runner: a procedure's partitions locked in order, its body run
//! with no further concurrency control, the locks released.

use std::sync::Arc;

use granary_api::{AbortReason, Declared, Error, Stats, TxError, TxRunner};

use crate::sync::{backoff, Ordering};

use super::txn::{Txn, Undo};
use super::Shared;

/// A worker thread's handle.
pub struct Runner {
    db: Arc<Shared>,
    /// Partitions held, sorted.
    locked: Vec<u32>,
    mask: Vec<u64>,
    undo: Undo,
    stats: Stats,
    last_commit: u64,
}

impl Runner {
    pub(super) fn new(db: Arc<Shared>) -> Runner {
        Runner {
            locked: Vec::new(),
            mask: vec![0; db.locks.len().div_ceil(64)],
            undo: Undo::default(),
            stats: Stats::default(),
            last_commit: 0,
            db,
        }
    }

    fn lock_all(&mut self, d: Option<&Declared>) -> Result<bool, Error> {
        let db = &*self.db;
        self.locked.clear();
        let n = db.locks.len() as u64;
        let all = match d {
            None => true,
            Some(d) => {
                for &v in d.partitions() {
                    self.locked.push((v % n) as u32);
                }
                for (t, k) in d.reads().chain(d.writes()) {
                    let table = db.tables.get(t)?;
                    if let Some(p) = db.partition_of(table, k) {
                        self.locked.push(p);
                    }
                }
                self.locked.is_empty()
            }
        };
        if all {
            self.locked.clear();
            self.locked.extend(0..n as u32);
        }
        self.locked.sort_unstable();
        self.locked.dedup();
        // Silo §5.4: the locks of the partitions it needs, in sorted order.
        for &p in &self.locked {
            let l = &db.locks[p as usize];
            let mut spins = 0;
            // Acquire pairs with the Release of the unlock below: the
            // previous holder's writes to the partition are visible.
            while l
                .held
                .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                backoff(&mut spins);
            }
            self.mask[p as usize / 64] |= 1 << (p % 64);
        }
        Ok(self.locked.len() == db.locks.len())
    }

    fn unlock_all(&mut self) {
        for &p in &self.locked {
            self.mask[p as usize / 64] = 0;
            // Release: gives the partition back: its next holder (Acquire CAS
            // in `lock_all`) sees what we did in it.
            self.db.locks[p as usize].held.store(0, Ordering::Release);
        }
        self.locked.clear();
    }

    fn run<T>(
        &mut self,
        d: Option<&Declared>,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let all = match self.lock_all(d) {
            Ok(all) => all,
            Err(e) => {
                self.unlock_all();
                self.stats.failures += 1;
                return Err(e);
            }
        };
        let r = {
            let mut tx = Txn::begin(&self.db, &self.mask, all, &mut self.undo);
            let r = body(&mut tx);
            if r.is_err() {
                tx.rollback();
            } else {
                tx.commit();
            }
            r
        };
        if r.is_ok() {
            // A commit key above the last one of every partition held: the
            // transactions that write a key hold its partition's lock one
            // after the other, so their keys increase.
            let locks = &self.db.locks;
            let ck = self
                .locked
                .iter()
                .map(|&p| locks[p as usize].last_commit.load(Ordering::Relaxed))
                .fold(self.last_commit, u64::max)
                + 1;
            for &p in &self.locked {
                locks[p as usize].last_commit.store(ck, Ordering::Relaxed);
            }
            self.last_commit = ck;
        }
        self.unlock_all();
        // Nothing here conflicts; a body may still report one.
        self.stats.record(r)
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Txn<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(None, body)
    }

    fn try_run_declared<T>(
        &mut self,
        declared: &Declared,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(Some(declared), body)
    }

    fn uses_declared(&self) -> bool {
        true
    }

    fn last_commit_key(&self) -> u64 {
        self.last_commit
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }
}
