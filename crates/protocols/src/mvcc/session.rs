//! Interactive sessions (the isolation tests' scripted transactions).

use super::*;

/// An interactive transaction (the hermitage scripts' sessions). It never
/// waits for another open session: a write conflict fails at once, and a
/// commit dependency can only be on a transaction inside its own commit
/// step, which finishes by itself.
pub struct Session<'a> {
    pub(super) tx: Option<Txn<'a>>,
    pub(super) books: &'a mut Books,
}

impl Interactive for Runner {
    type Session<'a> = Session<'a>;

    fn begin(&mut self) -> Result<Session<'_>, Error> {
        let tx = self.books.start(&self.db, self.slot, &mut self.st);
        Ok(Session {
            tx: Some(tx),
            books: &mut self.books,
        })
    }
}

impl<'a> Session<'a> {
    pub(super) fn tx(&mut self) -> &mut Txn<'a> {
        self.tx.as_mut().expect("open until commit or drop")
    }
}

impl InteractiveTx for Session<'_> {
    fn commit(mut self) -> Result<Result<u64, AbortReason>, Error> {
        let tx = self.tx.take().expect("open");
        Ok(self.books.end(tx, true).map(|e| e.unwrap_or(0)))
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = self.books.end(tx, false);
        }
    }
}

granary_api::forward_tx!(Session<'_>, s => s.tx());
