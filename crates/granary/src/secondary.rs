//! Secondary indexes (Silo §4.7): to the commit protocol they are just
//! more tables, changed inside the transaction that changes the primary
//! row, so they are validated like everything else.
//!
//! An index table's keys are `escaped(secondary key) ++ primary key` with
//! empty values, so many rows may share a secondary key and a lookup is a
//! prefix scan (which puts the scanned leaves in the node-set: a concurrent
//! insert of a matching row is a phantom and aborts the reader).

use std::ops::Bound;

use crate::db::{Database, TableId};
use crate::error::{Error, TxError};
use crate::keys::{escape_into, prefix_end};
use crate::txn::Transaction;

/// A non-unique secondary index: secondary key → primary keys.
///
/// ```
/// use granary::{Database, Options, SecondaryIndex};
/// let db = Database::new(Options::default())?;
/// let customers = db.create_table("customer")?;
/// let by_name = SecondaryIndex::create(&db, "customer_by_last")?;
/// let mut w = db.worker()?;
/// w.run(|tx| {
///     tx.put(customers, b"c1", b"SMITH,Ann")?;
///     by_name.insert(tx, b"SMITH", b"c1")?;
///     tx.put(customers, b"c2", b"SMITH,Bob")?;
///     by_name.insert(tx, b"SMITH", b"c2")
/// })?;
/// let pks = w.run(|tx| by_name.lookup(tx, b"SMITH", 10))?;
/// assert_eq!(pks, vec![b"c1".to_vec(), b"c2".to_vec()]);
/// # Ok::<(), granary::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecondaryIndex {
    table: TableId,
}

impl SecondaryIndex {
    /// Create the index's table.
    ///
    /// # Errors
    /// As for [`Database::create_table`].
    pub fn create(db: &Database, name: &str) -> Result<SecondaryIndex, Error> {
        Ok(SecondaryIndex {
            table: db.create_table(name)?,
        })
    }

    /// Open an existing index table.
    ///
    /// # Errors
    /// [`Error::UnknownTable`].
    pub fn open(db: &Database, name: &str) -> Result<SecondaryIndex, Error> {
        Ok(SecondaryIndex {
            table: db.table(name)?,
        })
    }

    /// The backing table.
    pub fn table(&self) -> TableId {
        self.table
    }

    fn entry(sk: &[u8], pk: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(sk.len() + pk.len() + 2);
        escape_into(&mut k, sk);
        k.extend_from_slice(pk);
        k
    }

    /// Map `sk → pk` (idempotent).
    ///
    /// # Errors
    /// As for [`Transaction::put`].
    pub fn insert(&self, tx: &mut Transaction<'_>, sk: &[u8], pk: &[u8]) -> Result<(), TxError> {
        tx.put(self.table, &Self::entry(sk, pk), b"")
    }

    /// Remove `sk → pk`; returns whether it was there.
    ///
    /// # Errors
    /// As for [`Transaction::delete`].
    pub fn remove(&self, tx: &mut Transaction<'_>, sk: &[u8], pk: &[u8]) -> Result<bool, TxError> {
        tx.delete(self.table, &Self::entry(sk, pk))
    }

    /// Up to `limit` primary keys for `sk`, in primary-key order.
    ///
    /// # Errors
    /// As for [`Transaction::scan`].
    pub fn lookup(
        &self,
        tx: &mut Transaction<'_>,
        sk: &[u8],
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, TxError> {
        let mut prefix = Vec::with_capacity(sk.len() + 2);
        escape_into(&mut prefix, sk);
        let end = prefix_end(&prefix);
        let hi = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut out = Vec::new();
        let n = prefix.len();
        tx.scan(
            self.table,
            Bound::Included(&prefix),
            hi,
            limit,
            false,
            |k, _| {
                out.push(k[n..].to_vec());
                true
            },
        )?;
        Ok(out)
    }
}
