//! Snapshot Isolation (Berenson et al., "A Critique of ANSI SQL Isolation
//! Levels", SIGMOD 1995; BOHM §4's SI baseline) on the multiversion store
//! ([`crate::mvcc`]).
//!
//! A transaction reads the versions valid at its read time (its snapshot)
//! and writes on the newest version of a key only if that is the one it
//! sees: the first updater wins ([`AbortReason::WriteConflict`]), which
//! the store enforces for every design on it. SI adds nothing at commit
//! ([`FirstUpdaterWins`]): it records no reads and validates none, so two
//! transactions that read each other's write sets and write disjoint keys
//! both commit (write skew). `granary check` holds it to snapshot
//! isolation, and shows that skew at serializable.
//!
//! ```
//! use granary_api::{Engine, Tx, TxRunner};
//! use granary_protocols::si::Si;
//!
//! let db = Si::new();
//! let t = db.create_table("t").unwrap();
//! let mut w = db.runner().unwrap();
//! w.try_run(|tx| tx.put(t, b"k", b"v")).unwrap().unwrap();
//! ```

use granary_api::AbortReason;

use crate::mvcc::{Certifier, Mvcc, Txn};

/// Snapshot Isolation: the multiversion store, certified by nothing.
pub type Si = Mvcc<FirstUpdaterWins>;

/// SI's commit rule: nothing beyond the store's first-updater-wins.
pub struct FirstUpdaterWins;

impl Certifier for FirstUpdaterWins {
    const RECORDS_READS: bool = false;

    fn certify(_: &Txn<'_, Self>, end: u64) -> Result<u64, AbortReason> {
        Ok(end)
    }
}
