//! Checking that a procedure stays within its declared read and write sets
//! ([`granary_api::Declared`]): protocols that plan from declarations (BOHM)
//! would silently lose an undeclared write, so every declaring workload is
//! tested through [`Fenced`].

use std::ops::Bound;

use granary_api::{Declared, TableId, Tx, TxError};

/// A [`Tx`] that passes every operation through and records each one the
/// declaration (or another rule) does not cover.
pub struct Fenced<'a, T: Tx + ?Sized> {
    tx: &'a mut T,
    rule: Rule<'a>,
    /// Accesses outside: (table, key, was it a write).
    pub outside: Vec<(TableId, Vec<u8>, bool)>,
}

/// What a fence lets through.
enum Rule<'a> {
    /// The declared keys.
    Declared(&'a Declared),
    /// What `f(table, key, is_write)` allows.
    Custom(&'a dyn Fn(TableId, &[u8], bool) -> bool),
}

impl<'a, T: Tx + ?Sized> Fenced<'a, T> {
    /// Fence `tx` with `declared`.
    pub fn new(tx: &'a mut T, declared: &'a Declared) -> Self {
        Fenced {
            tx,
            rule: Rule::Declared(declared),
            outside: Vec::new(),
        }
    }

    /// Fence `tx` with a rule of the caller's: `allows(table, key,
    /// is_write)` (e.g. the declared partitions).
    pub fn with(tx: &'a mut T, allows: &'a dyn Fn(TableId, &[u8], bool) -> bool) -> Self {
        Fenced {
            tx,
            rule: Rule::Custom(allows),
            outside: Vec::new(),
        }
    }

    fn covers(&self, t: TableId, key: &[u8], write: bool) -> bool {
        match self.rule {
            Rule::Declared(d) if write => d.covers_write(t, key),
            Rule::Declared(d) => d.covers_read(t, key),
            Rule::Custom(f) => f(t, key, write),
        }
    }

    fn note(&mut self, t: TableId, key: &[u8], write: bool) {
        if !self.covers(t, key, write) {
            self.outside.push((t, key.to_vec(), write));
        }
    }
}

impl<T: Tx + ?Sized> Tx for Fenced<'_, T> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.note(t, key, false);
        self.tx.get(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.note(t, key, true);
        self.tx.put(t, key, value)
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        self.note(t, key, true);
        self.tx.update(t, key, f)
    }

    fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: std::ops::Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        self.note(t, key, true);
        self.tx.update_field(t, key, field, f)
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
        let mut seen = Vec::new();
        self.tx.scan(t, lo, hi, limit, reverse, |k, v| {
            seen.push(k.to_vec());
            f(k, v)
        })?;
        for k in seen {
            self.note(t, &k, false);
        }
        Ok(())
    }
}
