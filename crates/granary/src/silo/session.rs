//! Silo's interactive transaction ([`Session`]): one that stays open
//! across calls, for scripted interleavings and callers that cannot put
//! their work in a closure. Its `Tx` implementation is in `tx`.

use granary_api::{AbortReason, Stats};

use crate::silo::epoch::Epochs;
use crate::silo::tid::Tid;
use crate::silo::txn::Transaction;

/// An interactive transaction: begun by
/// [`Worker::begin`](crate::Worker::begin), it stays open across calls
/// until [`Session::commit`] or drop (which rolls it back).
///
/// Meant for scripted interleavings (the isolation tests) and for callers
/// that cannot express their work as a closure. Prefer
/// [`Worker::run`](crate::Worker::run): while a session is open its worker
/// holds its epoch, which holds back garbage collection for every worker.
///
/// ```
/// use granary::{Database, Options, Tx};
/// let db = Database::new(Options::default())?;
/// let t = db.create_table("t")?;
/// let (mut a, mut b) = (db.worker()?, db.worker()?);
/// let mut s1 = a.begin();
/// let mut s2 = b.begin();
/// assert_eq!(s1.get(t, b"x")?, None);
/// s2.put(t, b"x", b"1")?;
/// s2.commit()?;
/// // s1 read "x absent", which s2 has since changed: s1 cannot commit.
/// // The conflict shows at its next operation or at commit.
/// let doomed = s1.put(t, b"y", b"1").is_err() || s1.commit().is_err();
/// assert!(doomed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Session<'w> {
    pub(crate) tx: Transaction<'w>,
    pub(crate) end: SessionEnd<'w>,
}

/// What a session gives back to its worker when it ends.
pub(crate) struct SessionEnd<'w> {
    pub epochs: &'w Epochs,
    pub slot: usize,
    pub stats: &'w mut Stats,
    pub open: bool,
}

impl Session<'_> {
    /// Commit (Silo Fig. 2). Returns the commit TID, or zero for a
    /// read-only transaction (which takes none, Silo §4.2).
    ///
    /// # Errors
    /// The [`AbortReason`] if validation failed; the session is rolled back.
    pub fn commit(mut self) -> Result<Tid, AbortReason> {
        self.end.open = false;
        let wrote = self.tx.writes_anything();
        match self.tx.commit() {
            Ok(()) => {
                self.end.stats.commits += 1;
                Ok(if wrote {
                    self.tx.last_tid()
                } else {
                    Tid::default()
                })
            }
            Err(reason) => {
                self.end.stats.aborts[reason.index()] += 1;
                Err(reason)
            }
        }
    }

    /// Roll back explicitly (dropping the session does the same).
    pub fn abort(self) {}
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if self.end.open {
            self.tx.abort();
        }
        self.end.epochs.unpin(self.end.slot);
    }
}
