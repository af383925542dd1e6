//! ERMIA's serializable scheme: Snapshot Isolation made serializable by
//! the Serial Safety Net (Kim et al., "ERMIA: Fast Memory-Optimized
//! Database System for Heterogeneous Workloads", SIGMOD 2016; Wang et al.,
//! "Efficiently making (almost) any concurrency control mechanism
//! serializable", VLDB Journal 2017) on the multiversion store
//! ([`crate::mvcc`]).
//!
//! A transaction runs exactly as under [`crate::si`]: it reads the
//! versions valid at its read time, and the first updater of a key wins.
//! What this design adds is at commit ([`SerialSafetyNet`]): the store
//! records the versions a transaction read, and SSN's stamps (§3) —
//! each transaction's η (the latest commit of one that must precede it)
//! and π (the earliest of one that must follow it), and each version's
//! η and π — decide whether it may commit: only if π(T) > η(T), so that no
//! dependency cycle can close through it ([`AbortReason::Exclusion`]).
//! SI's write skew is such a cycle; ERMIA aborts one of its two
//! transactions. `ermia` and `si` differ by this net alone, so their
//! throughputs side by side are what serializability costs on SI.
//!
//! Deviations (ARCHITECTURE.md, "ERMIA"): commits run one at a time under
//! the store's commit latch, which makes the stamps exact without ERMIA's
//! reader bitmaps and in-flight waits (§4); phantoms are Silo's node-set
//! check, as ERMIA's are; a key read as absent that a committed
//! transaction wrote since, and an insert after anyone saw its key absent,
//! are handled conservatively (a version carries no stamp for "absent").
//!
//! ```
//! use granary_api::{Engine, Tx, TxRunner};
//! use granary_protocols::ermia::Ermia;
//!
//! let db = Ermia::new();
//! let t = db.create_table("t").unwrap();
//! let mut w = db.runner().unwrap();
//! w.try_run(|tx| tx.put(t, b"k", b"v")).unwrap().unwrap();
//! ```

use granary_api::AbortReason;

use crate::mvcc::{Certifier, Mvcc, Txn};

/// ERMIA: the multiversion store under SI, certified by the Serial Safety
/// Net.
pub type Ermia = Mvcc<SerialSafetyNet>;

/// ERMIA's commit rule: SSN's exclusion window test (§3.2), with the
/// stamps left for later commits.
pub struct SerialSafetyNet;

impl Certifier for SerialSafetyNet {
    const RECORDS_READS: bool = true;
    const SERIAL_COMMIT: bool = true;

    fn certify(tx: &Txn<'_, Self>, end: u64) -> Result<u64, AbortReason> {
        tx.safety_net(end)
    }

    fn install(tx: &Txn<'_, Self>, end: u64, pi: u64) {
        tx.leave_stamps(end, pi)
    }
}
