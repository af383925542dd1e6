//! The runner: one transaction at a time, its outcome counted, a no-wait
//! abort backed off.

use std::sync::Arc;

use granary_api::{AbortReason, Declared, Error, Stats, TxError, TxRunner};

use super::txn::{State, Txn};
use super::{Shared, Variant};
use crate::sync::Backoff;

/// A worker thread's 2PL handle.
pub struct Runner {
    pub(super) db: Arc<Shared>,
    pub(super) st: State,
    pub(super) stats: Stats,
    pub(super) last_commit_key: u64,
    /// No-wait's pause before a retry.
    pub(super) backoff: Backoff,
}

// SAFETY: the raw row pointers in `State` are empty between transactions
// (a runner moves between threads only then), and a row is read and
// written only under its lock.
unsafe impl Send for Runner {}

impl Runner {
    pub(super) fn new(db: Arc<Shared>) -> Runner {
        Runner {
            db,
            st: State::default(),
            stats: Stats::default(),
            last_commit_key: 0,
            backoff: Backoff::new(),
        }
    }

    fn run<T>(
        &mut self,
        declared: Option<&Declared>,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let r = {
            let mut tx = Txn::begin(&self.db, &mut self.st);
            let r = match declared {
                Some(d) if self.db.variant == Variant::Ordered => match tx.lock_declared(d) {
                    Ok(()) => body(&mut tx),
                    Err(e) => Err(e),
                },
                _ => body(&mut tx),
            };
            match r {
                Ok(v) => match tx.validate_nodes() {
                    Ok(()) => {
                        self.last_commit_key = tx.commit(self.last_commit_key);
                        Ok(Ok(v))
                    }
                    Err(reason) => {
                        tx.rollback();
                        Ok(Err(reason))
                    }
                },
                Err(e) => {
                    tx.rollback();
                    match e {
                        TxError::Conflict(reason) => Ok(Err(reason)),
                        TxError::Failed(e) => Err(e),
                    }
                }
            }
        };
        self.stats.count(&r);
        match &r {
            Ok(Ok(_)) => self.backoff.reset(),
            Ok(Err(_)) => self.backoff.after_abort(),
            Err(_) => {}
        }
        r
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Txn<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(None, |tx| body(tx))
    }

    fn try_run_declared<T>(
        &mut self,
        declared: &Declared,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(Some(declared), |tx| body(tx))
    }

    fn uses_declared(&self) -> bool {
        self.db.variant == Variant::Ordered
    }

    fn last_commit_key(&self) -> u64 {
        self.last_commit_key
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }
}
