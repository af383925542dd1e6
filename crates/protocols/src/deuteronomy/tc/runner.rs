//! A thread's handle on the TC: its slot in the transaction table, its
//! buffers, and how each transaction's outcome is counted.

use std::sync::Arc;

use crate::deuteronomy::shared::{Shared, IDLE};
use crate::sync::Ordering;
use granary_api::{AbortReason, Error, Stats, TxError, TxRunner};

use super::txn::{start, Ended, Parts, Txn};

/// A thread's handle on the TC.
pub struct Runner {
    pub(super) s: Arc<Shared>,
    /// Its slot in the transaction table.
    pub(super) slot: usize,
    pub(super) books: Books,
    pub(super) parts: Parts,
}

/// What a runner keeps across its transactions.
#[derive(Default)]
pub(super) struct Books {
    stats: Stats,
    last_ts: u64,
    /// The last transaction's durable token (an LSN past its commit).
    token: u64,
}

// SAFETY: the version pointers refer to items of the shared table, which
// live as long as it; a runner is used by one thread at a time.
unsafe impl Send for Runner {}

impl Drop for Runner {
    fn drop(&mut self) {
        // SeqCst: the runner leaves the transaction table (module doc), in one
        // total order with the OAT's loads.
        self.s.slots[self.slot].ts.store(IDLE, Ordering::SeqCst);
        self.s.claimed.lock().expect("claimed")[self.slot] = false;
    }
}

impl Runner {
    /// The runner of transaction-table slot `slot`, claimed for it.
    pub(super) fn new(s: Arc<Shared>, slot: usize) -> Runner {
        Runner {
            s,
            slot,
            books: Books::default(),
            parts: Parts::default(),
        }
    }
}

impl Books {
    /// Count how a transaction ended, with what its body returned.
    pub(super) fn tally<T>(
        &mut self,
        ended: Ended,
        r: Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.token = ended.token;
        ended.error.map_or(Ok(()), Err)?;
        if r.is_ok() {
            self.last_ts = ended.ts;
        }
        self.stats.record(r)
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Txn<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.s.check_broken()?;
        let mut tx = start(&self.s, self.slot, &mut self.parts, false);
        let r = body(&mut tx);
        let ended = tx.end(r.is_ok());
        self.books.tally(ended, r)
    }

    fn last_commit_key(&self) -> u64 {
        self.books.last_ts
    }

    fn stats(&self) -> &Stats {
        &self.books.stats
    }

    fn durable_token(&self) -> u64 {
        self.books.token
    }
}
