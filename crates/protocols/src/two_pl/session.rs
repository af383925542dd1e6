//! Interactive transactions, for the hermitage scripts.

use granary_api::{AbortReason, Error, Interactive, InteractiveTx, Stats};

use super::runner::Runner;
use super::txn::Txn;

/// An interactive transaction (the hermitage scripts' sessions). Every
/// lock is taken no-wait, whatever the variant: a session must never wait
/// for another open one.
pub struct Session<'a> {
    tx: Txn<'a>,
    stats: &'a mut Stats,
    last_commit_key: &'a mut u64,
}

impl Interactive for Runner {
    type Session<'a> = Session<'a>;

    fn begin(&mut self) -> Result<Session<'_>, Error> {
        Ok(Session {
            tx: Txn::begin(&self.db, &mut self.st),
            stats: &mut self.stats,
            last_commit_key: &mut self.last_commit_key,
        })
    }
}

impl InteractiveTx for Session<'_> {
    fn commit(mut self) -> Result<Result<u64, AbortReason>, Error> {
        match self.tx.validate_nodes() {
            Ok(()) => {
                let wrote = self.tx.wrote();
                *self.last_commit_key = self.tx.commit(*self.last_commit_key);
                self.stats.commits += 1;
                Ok(Ok(if wrote { *self.last_commit_key } else { 0 }))
            }
            Err(reason) => {
                self.tx.rollback();
                self.stats.aborts[reason.index()] += 1;
                Ok(Err(reason))
            }
        }
    }
}

granary_api::forward_tx!(Session<'_>, s => &mut s.tx);
