//! Hekaton's optimistic serializable scheme (Larson et al., "High-Performance
//! Concurrency Control Mechanisms for Main-Memory Databases", PVLDB 2011, as
//! BOHM §4 runs it) on the multiversion store ([`crate::mvcc`]).
//!
//! The store gives every transaction a read time from the global counter,
//! lets it read the versions valid at that time (speculatively, with
//! commit dependencies, §3.2), and lets only the first updater of a key
//! win. What makes it serializable is what this design adds at commit
//! ([`Validation`]): the transaction records each version it read and each
//! index leaf a scan or an absent read saw, and once it holds its end
//! timestamp it checks that every version read is still the one valid at
//! that timestamp and that no leaf changed (phantoms, checked the way
//! Silo §4.6 does instead of repeating the scans; ARCHITECTURE.md says
//! why). Anything else aborts it ([`AbortReason::ReadValidation`],
//! [`AbortReason::NodeValidation`]).
//!
//! ```
//! use granary_api::{Engine, Tx, TxRunner};
//! use granary_protocols::hekaton::Hekaton;
//!
//! let db = Hekaton::new();
//! let t = db.create_table("t").unwrap();
//! let mut w = db.runner().unwrap();
//! w.try_run(|tx| tx.put(t, b"k", b"v")).unwrap().unwrap();
//! ```

use granary_api::AbortReason;

use crate::mvcc::{Certifier, Mvcc, Txn};

/// Hekaton: the multiversion store certified by read validation.
pub type Hekaton = Mvcc<Validation>;

/// Hekaton's commit rule: reads and scanned leaves validated at the end
/// timestamp.
pub struct Validation;

impl Certifier for Validation {
    const RECORDS_READS: bool = true;

    fn certify(tx: &Txn<'_, Self>, end: u64) -> Result<u64, AbortReason> {
        tx.validate_reads(end).map(|()| end)
    }
}
