//! Read/write transactions: Silo's OCC (§4.4–§4.6, Fig. 2).
//!
//! While the body runs, every record read goes into the *read-set* with
//! the TID word seen, every write is buffered in the *write-set*, and every
//! leaf a failed lookup or a scan depended on goes into the *node-set* with
//! its version. Nothing shared is written, except that an insert of a new
//! key puts an *absent* placeholder record into the tree first (§4.5), so
//! that there is something to lock.
//!
//! Commit (Fig. 2): lock the write-set in address order → fence → read the
//! global epoch `E` (the serialization point) → validate the read-set (same
//! TID, still latest, not locked by someone else) and the node-set (same
//! leaf versions) → choose the commit TID (greater than every TID read or
//! written and than this worker's last, in epoch `E`) → install each value
//! and release its lock with one store of the new TID word.

use granary_api::{ticks, TableId};
use granary_index::LeafRef;

use crate::silo::error::{AbortReason, TxError};
use crate::silo::pin::ReadPin;
use crate::silo::record::Record;
use crate::silo::shared::{Shared, Table};
use crate::silo::tid::Tid;
use granary_api::limits::check_key;

mod commit;
mod read;
mod sets;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use sets::Core;
use sets::*;

/// An owned `(key, value)` pair, as returned by `scan_collect`.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// The TID word of a fresh insert placeholder: TID 0, absent, latest.
const PLACEHOLDER: Tid = Tid(Tid::LATEST | Tid::ABSENT);

enum Found {
    Record(*const Record),
    Missing(LeafRef, u64),
}

/// A read/write transaction in progress; see [`Worker::run`]. Every
/// operation returns [`TxError::Conflict`] once the attempt is doomed, and
/// keeps returning it: a doomed transaction cannot commit. A transaction
/// only exists inside its body's closure, so a finished one cannot be used
/// at all (the borrow checker refuses it).
///
/// [`Worker::run`]: crate::Worker::run
pub struct Transaction<'w> {
    shared: &'w Shared,
    c: &'w mut Core,
    doomed: Option<AbortReason>,
}

impl<'w> Transaction<'w> {
    pub(crate) fn new(shared: &'w Shared, c: &'w mut Core) -> Self {
        c.st.clear();
        Transaction {
            shared,
            c,
            doomed: None,
        }
    }

    #[inline]
    fn enter(&self, t: TableId, key: &[u8]) -> Result<(), TxError> {
        if let Some(r) = self.doomed {
            return Err(TxError::Conflict(r));
        }
        check_key(key)?;
        self.shared.table(t)?;
        Ok(())
    }

    fn doom(&mut self, r: AbortReason) -> TxError {
        self.doomed = Some(r);
        TxError::Conflict(r)
    }

    #[inline]
    fn table(&self, t: TableId) -> &Table {
        self.shared.table(t).expect("checked in enter")
    }

    /// `key`'s record: the one a `get` just found, a hint, or the tree's.
    /// The first two are inlined into each caller, and the descent is a
    /// call (its saved registers cost a hinted lookup a third of its
    /// instructions when it was inlined here).
    #[inline(always)]
    fn lookup(&mut self, t: TableId, key: &[u8]) -> Found {
        // Used once: a caller that finds the record superseded looks again.
        if let Some(p) = self.c.st.last_found(t, key) {
            self.c.st.last = None;
            return Found::Record(p);
        }
        if let Some(p) = self.c.st.hints.take(t, key) {
            return Found::Record(p);
        }
        self.lookup_tree(t, key)
    }

    #[inline(never)]
    fn lookup_tree(&mut self, t: TableId, key: &[u8]) -> Found {
        // SAFETY: the worker is pinned for the whole transaction.
        let pin = unsafe { ReadPin::new() };
        let t0 = probe(self.c.profiling);
        let tree = &self.table(t).tree;
        if tree.has_point_index() {
            if let Some(p) = tree.find(key, &pin) {
                if self.c.profiling {
                    self.c.prof.index += ticks() - t0;
                }
                return Found::Record(p);
            }
        }
        let l = tree.get(key, &pin);
        if self.c.profiling {
            self.c.prof.index += ticks() - t0;
        }
        match l.value {
            Some(p) => Found::Record(p),
            None => Found::Missing(l.leaf, l.version),
        }
    }
}
