//! Checking that a procedure stays within its declared read and write sets
//! ([`granary_api::Declared`]): protocols that plan from declarations (BOHM)
//! would silently lose an undeclared write, so every declaring workload is
//! tested through [`Fenced`].

use std::ops::Bound;

use granary_api::{Declared, TableId, Tx, TxError};

/// A [`Tx`] that passes every operation through and records each one the
/// declaration does not cover.
pub struct Fenced<'a, T: Tx> {
    tx: &'a mut T,
    declared: &'a Declared,
    /// Undeclared accesses: (table, key, was it a write).
    pub outside: Vec<(TableId, Vec<u8>, bool)>,
}

impl<'a, T: Tx> Fenced<'a, T> {
    /// Fence `tx` with `declared`.
    pub fn new(tx: &'a mut T, declared: &'a Declared) -> Self {
        Fenced {
            tx,
            declared,
            outside: Vec::new(),
        }
    }

    fn note(&mut self, t: TableId, key: &[u8], write: bool) {
        let ok = if write {
            self.declared.covers_write(t, key)
        } else {
            self.declared.covers_read(t, key)
        };
        if !ok {
            self.outside.push((t, key.to_vec(), write));
        }
    }
}

impl<T: Tx> Tx for Fenced<'_, T> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.note(t, key, false);
        self.tx.get(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.note(t, key, true);
        self.tx.put(t, key, value)
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.note(t, key, true);
        self.tx.insert(t, key, value)
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        self.note(t, key, true);
        self.tx.delete(t, key)
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: F,
    ) -> Result<(), TxError> {
        // A range cannot be declared key by key: every row it returns must
        // be declared.
        let (declared, mut outside) = (self.declared, Vec::new());
        self.tx.scan(t, lo, hi, limit, reverse, |k, v| {
            if !declared.covers_read(t, k) {
                outside.push((t, k.to_vec(), false));
            }
            f(k, v)
        })?;
        self.outside.extend(outside);
        Ok(())
    }
}
