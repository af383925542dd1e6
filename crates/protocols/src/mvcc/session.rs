//! Interactive sessions (the isolation tests' scripted transactions).

use super::*;

/// An interactive transaction (the hermitage scripts' sessions). It never
/// waits for another open session: a write conflict fails at once, and a
/// commit dependency can only be on a transaction inside its own commit
/// step, which finishes by itself.
pub struct Session<'a, C: Certifier> {
    pub(super) tx: Option<Txn<'a, C>>,
    pub(super) books: &'a mut Books,
}

impl<C: Certifier> Interactive for Runner<C> {
    type Session<'a> = Session<'a, C>;

    fn begin(&mut self) -> Result<Session<'_, C>, Error> {
        let tx = self.books.start(&self.db, self.slot, &mut self.st);
        Ok(Session {
            tx: Some(tx),
            books: &mut self.books,
        })
    }
}

impl<'a, C: Certifier> Session<'a, C> {
    pub(super) fn tx(&mut self) -> &mut Txn<'a, C> {
        self.tx.as_mut().expect("open until commit or drop")
    }
}

impl<C: Certifier> InteractiveTx for Session<'_, C> {
    fn commit(mut self) -> Result<Result<u64, AbortReason>, Error> {
        let tx = self.tx.take().expect("open");
        Ok(self.books.end(tx, true).map(|e| e.unwrap_or(0)))
    }
}

impl<C: Certifier> Drop for Session<'_, C> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = self.books.end(tx, false);
        }
    }
}

granary_api::forward_tx!([C: Certifier] Session<'_, C>, s => s.tx());
