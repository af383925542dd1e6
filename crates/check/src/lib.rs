//! `granary-check`: an Elle-style checker that decides whether a recorded
//! transaction history is serializable (or snapshot isolated), and if not,
//! names the anomaly with the smallest cycle that proves it.
//!
//! Its users: the conformance suite (`granary-conformance`), whose history
//! tests record runs of every design through `granary-workloads`'
//! recorder and check them here, and the `granary check` command, which
//! does the same for a chosen design and workload and prints the report.
//! `docs/ARCHITECTURE.md` ("The checker") describes how histories are
//! recorded.
//!
//! # Where to start
//!
//! Build (or deserialize) a [`History`] of [`Txn`]s, call [`check`] at a
//! [`Level`], and read the [`Report`]: [`Report::is_ok`], [`Report::has`]
//! for one [`AnomalyKind`], or each [`Anomaly`] found
//! ([`Report::anomalies`], a cycle with its [`Step`]s).
//!
//! # Model
//!
//! A [`History`] lists transaction attempts with their [`Status`] and
//! operations ([`Op`]). Every register write carries a unique
//! [`VersionId`] and every list append a unique element, so each read
//! names exactly the write it observed (Elle's "recoverability").
//!
//! # Algorithm
//!
//! The checker builds Adya's *direct serialization graph* (DSG) over the
//! committed transactions and looks for cycles, following Adya's thesis
//! (*Weak Consistency*, MIT 1999) for the definitions and Elle
//! (Kingsbury & Alvaro, *Elle: Inferring Isolation Anomalies from
//! Experimental Observations*, VLDB 2020) for inferring version orders and
//! for the search:
//!
//! 1. **Versions** (`versions.rs`). Record every write by version and
//!    index every append by `(key, element)`. A register key's *version
//!    order* is its committed writers' final writes sorted by their
//!    [`Txn::commit_key`] (equal keys: [`AnomalyKind::AmbiguousVersionOrder`]).
//! 2. **Reads** (`deps.rs`). Join each committed read to its writer (both
//!    sorted by version: a merge, not a hash probe per read). Reads of
//!    unknown versions are *garbage*, of aborted writes G1a, of overwritten
//!    intermediate writes G1b; a read that ignores the reader's own earlier
//!    write is *internal*. The rest yield Adya's edges: `ww` (consecutive
//!    versions), `wr` (writer → reader), item `rw` (reader of version i →
//!    writer of version i+1) and predicate `rw` (a scan that saw key k
//!    absent → writer of k's first version). List orders come from the
//!    longest read of each list, as in Elle; every other read must be a
//!    prefix of it, else [`AnomalyKind::IncompatibleOrder`].
//! 3. **Graph** (`graph.rs`). Edges are merged per transaction pair (a
//!    kind mask plus one witness key per kind) into a compressed sparse row
//!    graph, and an iterative Tarjan finds the strongly connected
//!    components (SCCs); every cycle lies inside one.
//! 4. **Cycles** (`cycles.rs`). In each non-trivial SCC, breadth-first
//!    searches find the shortest cycle of the first class present, in
//!    Elle's order: G0 (ww only), G1c (ww/wr, at least one wr), G-single
//!    (exactly one rw), then G2-item/G2 (two or more rw; G2 when one is a
//!    predicate edge). Under [`Level::SnapshotIsolation`] the last class
//!    is G-nonadjacent instead: cycles whose rw edges are never adjacent;
//!    cycles in which two rw edges meet (write skew) are allowed. One
//!    anomaly is reported per SCC.
//!
//! Passes 1–3 take time linear in the history (plus sorts); the cycle
//! searches are bounded per SCC (see `cycles.rs`). A million transactions
//! with about 5.6 million operations check in about two seconds in a
//! release build on a 2-core VM (`tests/integration/perf.rs`).
//!
//! ```
//! use granary_check::{check, AnomalyKind, History, Level, Op, Txn};
//!
//! // Write skew: each reads both keys initial, each writes a different one.
//! let mut h = History::new();
//! for (id, key) in [(1, 10), (2, 20)] {
//!     h.push(Txn::committed(id, id, vec![
//!         Op::Read { key: 10, version: None },
//!         Op::Read { key: 20, version: None },
//!         Op::Write { key, version: id },
//!     ]));
//! }
//! assert!(check(&h, Level::Serializable).has(AnomalyKind::G2Item));
//! assert!(check(&h, Level::SnapshotIsolation).is_ok());
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod check;
mod cycles;
mod deps;
mod graph;
mod hash;
mod history;
mod report;
mod versions;

pub use check::{check, MAX_STORED_PER_KIND, MAX_TXNS};
pub use history::{History, Key, Op, Status, Txn, TxnId, VersionId};
pub use report::{Anomaly, AnomalyKind, EdgeKind, Level, Report, Step};

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    fn saveable<T: Serialize + DeserializeOwned>() {}
    fn reportable<T: Serialize>() {}

    #[test]
    fn histories_load_and_save_and_reports_save() {
        saveable::<History>();
        saveable::<Txn>();
        saveable::<Op>();
        saveable::<Status>();
        reportable::<Report>();
        reportable::<Anomaly>();
        reportable::<Step>();
        reportable::<EdgeKind>();
        reportable::<AnomalyKind>();
        reportable::<Level>();
    }
}
