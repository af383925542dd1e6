//! Secondary indexes (Silo §4.7): to the concurrency control they are just
//! more tables, changed inside the transaction that changes the primary
//! row, so every design protects them like everything else. Written
//! against [`Tx`] and [`Engine`], so they work on any design.
//!
//! An index table's keys are `escaped(secondary key) ++ primary key` with
//! empty values, so many rows may share a secondary key and a lookup is a
//! prefix scan (which puts the scanned leaves in the node-set: a concurrent
//! insert of a matching row is a phantom and aborts the reader).

use std::ops::Bound;

use crate::error::{Error, TxError};
use crate::keys::{escape_into, prefix_end};
use crate::{Engine, TableId, Tx};

/// A non-unique secondary index: secondary key → primary keys.
///
/// ```
/// use granary_api::{SecondaryIndex, TableId, Tx, TxError};
///
/// /// Add a customer and index it by last name, in one transaction.
/// fn add<T: Tx>(tx: &mut T, customers: TableId, by_name: SecondaryIndex,
///               id: &[u8], last: &[u8], row: &[u8]) -> Result<(), TxError> {
///     tx.put(customers, id, row)?;
///     by_name.insert(tx, last, id)
/// }
///
/// /// The ids of up to 10 customers named `last`, in id order.
/// fn named<T: Tx>(tx: &mut T, by_name: SecondaryIndex, last: &[u8])
///     -> Result<Vec<Vec<u8>>, TxError> {
///     by_name.lookup(tx, last, 10)
/// }
/// ```
///
/// (`granary::SecondaryIndex` is this type; its tests run it on Silo.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecondaryIndex {
    table: TableId,
}

impl SecondaryIndex {
    /// Create the index's table.
    ///
    /// # Errors
    /// As for [`Engine::create_table`].
    pub fn create<E: Engine>(db: &E, name: &str) -> Result<SecondaryIndex, Error> {
        Ok(SecondaryIndex {
            table: db.create_table(name)?,
        })
    }

    /// Open an existing index table.
    ///
    /// # Errors
    /// [`Error::UnknownTable`].
    pub fn open<E: Engine>(db: &E, name: &str) -> Result<SecondaryIndex, Error> {
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
    /// As for [`Tx::put`].
    pub fn insert<T: Tx>(&self, tx: &mut T, sk: &[u8], pk: &[u8]) -> Result<(), TxError> {
        tx.put(self.table, &Self::entry(sk, pk), b"")
    }

    /// Remove `sk → pk`; returns whether it was there.
    ///
    /// # Errors
    /// As for [`Tx::delete`].
    pub fn remove<T: Tx>(&self, tx: &mut T, sk: &[u8], pk: &[u8]) -> Result<bool, TxError> {
        tx.delete(self.table, &Self::entry(sk, pk))
    }

    /// Up to `limit` primary keys for `sk`, in primary-key order.
    ///
    /// # Errors
    /// As for [`Tx::scan`].
    pub fn lookup<T: Tx>(
        &self,
        tx: &mut T,
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
