//! Tables by name and by [`TableId`], shared by the designs of this crate.

use std::sync::{Mutex, OnceLock};

use granary_api::{Error, TableId, MAX_TABLE_NAME_BYTES};

/// The most tables one database holds.
pub const MAX_TABLES: usize = 4096;

/// A design's tables: `T` per table, found by id without a lock (a table
/// is never dropped while its database lives), and by name under a mutex
/// (table creation is rare).
pub struct Catalog<T> {
    slots: Box<[OnceLock<T>]>,
    names: Mutex<Vec<String>>,
}

impl<T> Default for Catalog<T> {
    fn default() -> Self {
        Catalog {
            slots: (0..MAX_TABLES).map(|_| OnceLock::new()).collect(),
            names: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Catalog<T> {
    /// Add table `name`, made by `make`; [`Error::TableExists`] if taken.
    ///
    /// # Errors
    /// [`Error::TableExists`], [`Error::TableNameTooLong`],
    /// [`Error::TooManyTables`].
    pub fn create(&self, name: &str, make: impl FnOnce() -> T) -> Result<TableId, Error> {
        if name.len() > MAX_TABLE_NAME_BYTES {
            return Err(Error::TableNameTooLong {
                len: name.len(),
                max: MAX_TABLE_NAME_BYTES,
            });
        }
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.iter().any(|n| n == name) {
            return Err(Error::TableExists(name.to_string()));
        }
        let i = names.len();
        if i == MAX_TABLES {
            return Err(Error::TooManyTables { max: MAX_TABLES });
        }
        let _ = self.slots[i].set(make());
        names.push(name.to_string());
        Ok(TableId::new(i as u32))
    }

    /// The table named `name`.
    ///
    /// # Errors
    /// [`Error::UnknownTable`].
    pub fn find(&self, name: &str) -> Result<TableId, Error> {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        names
            .iter()
            .position(|n| n == name)
            .map(|i| TableId::new(i as u32))
            .ok_or_else(|| Error::UnknownTable(name.to_string()))
    }

    /// Every table's name, in id order.
    pub fn names(&self) -> Vec<String> {
        self.names.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The name of table `t`, if it exists.
    pub fn name(&self, t: TableId) -> Option<String> {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        names.get(t.index() as usize).cloned()
    }

    /// Table `t`.
    ///
    /// # Errors
    /// [`Error::UnknownTableId`].
    #[inline]
    pub fn get(&self, t: TableId) -> Result<&T, Error> {
        self.slots
            .get(t.index() as usize)
            .and_then(OnceLock::get)
            .ok_or(Error::UnknownTableId(t.index()))
    }

    /// Every table, mutably (for teardown).
    pub fn tables_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().filter_map(OnceLock::get_mut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids() {
        let c: Catalog<u32> = Catalog::default();
        let a = c.create("a", || 7).unwrap();
        let b = c.create("b", || 8).unwrap();
        assert_eq!((a.index(), b.index()), (0, 1));
        assert!(matches!(c.create("a", || 9), Err(Error::TableExists(_))));
        assert_eq!(c.find("b").unwrap(), b);
        assert!(matches!(c.find("c"), Err(Error::UnknownTable(_))));
        assert_eq!(*c.get(a).unwrap(), 7);
        assert!(matches!(
            c.get(TableId::new(2)),
            Err(Error::UnknownTableId(2))
        ));
        assert!(matches!(
            c.get(TableId::new(u32::MAX)),
            Err(Error::UnknownTableId(_))
        ));
        let long = "x".repeat(MAX_TABLE_NAME_BYTES + 1);
        assert!(matches!(
            c.create(&long, || 0),
            Err(Error::TableNameTooLong { .. })
        ));
    }
}
