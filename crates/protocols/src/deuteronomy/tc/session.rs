//! Interactive transactions, for the Hermitage-style tests.

use granary_api::{AbortReason, Error, TxError};

use super::runner::{Books, Runner};
use super::txn::{start, Txn};

/// An interactive transaction on the TC (the Hermitage-style tests step
/// several on one thread): it never waits on another transaction. A read
/// that would wait for an older writer's outcome aborts instead (reason
/// [`AbortReason::CommitDependency`]); writes never wait anyway.
pub struct Session<'a> {
    tx: Option<Txn<'a>>,
    books: &'a mut Books,
}

impl granary_api::Interactive for Runner {
    type Session<'a> = Session<'a>;

    fn begin(&mut self) -> Result<Session<'_>, Error> {
        self.s.check_broken()?;
        Ok(Session {
            tx: Some(start(&self.s, self.slot, &mut self.parts, true)),
            books: &mut self.books,
        })
    }
}

impl<'a> Session<'a> {
    fn tx(&mut self) -> &mut Txn<'a> {
        self.tx.as_mut().expect("open until commit or drop")
    }
}

impl granary_api::InteractiveTx for Session<'_> {
    fn commit(mut self) -> Result<Result<u64, AbortReason>, Error> {
        let ended = self.tx.take().expect("open").end(true);
        let ts = ended.ts;
        Ok(self.books.tally(ended, Ok(()))?.map(|()| ts))
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let ended = tx.end(false);
            // A rollback counts as a failure, as the driver counts one.
            let _ = self
                .books
                .tally::<()>(ended, Err(TxError::Failed(Error::RolledBack)));
        }
    }
}

granary_api::forward_tx!(Session<'_>, s => s.tx());
