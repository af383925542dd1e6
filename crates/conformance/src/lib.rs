//! granary-conformance: the correctness tests every granary design must
//! pass, written once against the traits of `granary-api`.
//!
//! Each test is a `pub fn` generic over [`Engine`](granary_api::Engine),
//! taking a factory (`impl Fn() -> E`) that makes a fresh, empty database.
//! A design runs them all through [`conformance_tests!`], which expands
//! into one `#[test]` per test, in a module named after the design. Its
//! test file is a few lines (Silo's, `crates/granary/tests/conformance.rs`):
//!
//! ```ignore
//! use granary::{Database, Options};
//! use granary_conformance::{conformance_tests, hermitage};
//!
//! fn silo() -> Database {
//!     Database::new(Options::default()).expect("database")
//! }
//!
//! conformance_tests! {
//!     silo,
//!     engine: silo,
//!     level: Serializable,
//!     aborts: yes,
//!     interactive: yes(hermitage::SERIALIZABLE),
//!     scans: yes,
//!     deletes: yes,
//! }
//! ```
//!
//! Every line after `engine` must be there, so a design states what it
//! is and what it lacks:
//!
//! * `level`: `Serializable` or `SnapshotIsolation` (granary-check's
//!   [`Level`]): the level histories are checked at. Fig. 3 and write
//!   skew under real concurrency ([`anomalies`]) run only at
//!   `Serializable` (snapshot isolation allows both; the hermitage table
//!   shows its write skew deterministically instead).
//! * `aborts: yes`: conflicts show as aborted attempts, so each history
//!   test runs until the checked histories hold
//!   [`histories::MIN_ABORTED`] of them (proof that the run contended).
//!   `no("…")` for a design that waits instead (ordered 2PL,
//!   Partitioned-Store): one round, its aborts only printed.
//! * `interactive: yes(table)`: the runner implements
//!   [`Interactive`](granary_api::Interactive), and the hermitage
//!   scenarios run with `table` ([`hermitage::Expect`] per scenario;
//!   [`hermitage::SERIALIZABLE`], [`hermitage::SNAPSHOT_ISOLATION`]).
//! * `scans: yes`: the phantom, bank-audit and bank-history tests run, and
//!   the model check draws scans.
//! * `deletes: yes`: the delete/re-insert churn runs, and the model and
//!   phantom tests delete.
//!
//! `interactive`, `scans` and `deletes` may be `no("the reason")`
//! instead, which leaves their tests out; the reason stays at the call
//! site for readers. The rest
//! always run: lost updates ([`anomalies::counter_increments_add_up`]),
//! the model check, and the YCSB and list-append histories.
//!
//! Randomized tests print their seed and replay with `GRANARY_SEED=N`;
//! `GRANARY_STRESS=N` lengthens them. A design's own tests may call the
//! functions directly too (Silo's churn test follows [`churn::churn`]
//! with a check that its garbage was reclaimed).

#![deny(unsafe_code)]

pub mod anomalies;
pub mod bank;
pub mod churn;
pub mod hermitage;
pub mod histories;
pub mod model;
pub mod phantom;
pub mod support;

pub use granary_check::Level;
pub use granary_workloads::check::CheckWorkload;

/// Expands into the conformance suite's `#[test]` functions for one
/// design, in a module `$name`; see the [crate docs](crate) for the
/// syntax. `engine` is an expression that makes a fresh database (a
/// function or a closure), evaluated in the module's parent.
#[macro_export]
macro_rules! conformance_tests {
    (@has yes) => {
        true
    };
    (@has no($why:literal)) => {
        false
    };
    (@min_aborted yes) => {
        $crate::histories::MIN_ABORTED
    };
    (@min_aborted no($why:literal)) => {
        0
    };
    (@history $test:ident, $workload:ident, $make:expr, $level:ident, [$($aborts:tt)+]) => {
        #[test]
        fn $test() {
            $crate::histories::history_is_within_level(
                $make,
                $crate::CheckWorkload::$workload,
                $crate::Level::$level,
                $crate::conformance_tests!(@min_aborted $($aborts)+),
            );
        }
    };
    (@level Serializable, $make:expr) => {
        #[test]
        fn fig3_never_both_one() {
            $crate::anomalies::fig3_never_both_one($make);
        }

        #[test]
        fn write_skew_never_commits() {
            $crate::anomalies::write_skew_never_commits($make);
        }
    };
    // Both happen under snapshot isolation, at random; the hermitage
    // table states its write skew instead.
    (@level SnapshotIsolation, $make:expr) => {};
    (@interactive [yes($table:expr)], $make:expr, $level:ident) => {
        #[test]
        fn hermitage() {
            $crate::hermitage::scenarios($make, $crate::Level::$level, &$table);
        }
    };
    (@interactive [no($why:literal)], $make:expr, $level:ident) => {};
    (@scans [yes], $make:expr, $level:ident, [$($aborts:tt)+], [$($deletes:tt)+]) => {
        #[test]
        fn scans_see_no_phantoms() {
            $crate::phantom::scans_see_no_phantoms(
                $make,
                $crate::conformance_tests!(@has $($deletes)+),
            );
        }

        #[test]
        fn bank_audits_see_the_total() {
            $crate::bank::transfers_keep_total_under_scan_and_snapshot_audits($make);
        }

        $crate::conformance_tests!(@history history_bank, Bank, $make, $level, [$($aborts)+]);
    };
    (@scans [no($why:literal)], $($rest:tt)+) => {};
    (@deletes [yes], $make:expr) => {
        #[test]
        fn delete_reinsert_churn() {
            $crate::churn::delete_reinsert_churn($make);
        }
    };
    (@deletes [no($why:literal)], $make:expr) => {};
    (
        $name:ident,
        engine: $make:expr,
        level: $level:ident,
        aborts: $aborts:ident $(($($aborts_arg:tt)+))?,
        interactive: $inter:ident $(($($inter_arg:tt)+))?,
        scans: $scans:ident $(($($scans_arg:tt)+))?,
        deletes: $deletes:ident $(($($deletes_arg:tt)+))? $(,)?
    ) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn counter_increments_add_up() {
                $crate::anomalies::counter_increments_add_up($make);
            }

            #[test]
            fn field_updates_keep_the_rest() {
                $crate::anomalies::field_updates_keep_the_rest($make);
            }

            #[test]
            fn model_matches_btreemap() {
                $crate::model::transactions_match_btreemap(
                    $make,
                    $crate::conformance_tests!(@has $deletes $(($($deletes_arg)+))?),
                    $crate::conformance_tests!(@has $scans $(($($scans_arg)+))?),
                );
            }

            $crate::conformance_tests!(
                @history history_ycsb, Ycsb, $make, $level,
                [$aborts $(($($aborts_arg)+))?]
            );
            $crate::conformance_tests!(
                @history history_list_append, ListAppend, $make, $level,
                [$aborts $(($($aborts_arg)+))?]
            );
            $crate::conformance_tests!(@level $level, $make);
            $crate::conformance_tests!(
                @interactive [$inter $(($($inter_arg)+))?], $make, $level
            );
            $crate::conformance_tests!(
                @scans [$scans $(($($scans_arg)+))?], $make, $level,
                [$aborts $(($($aborts_arg)+))?], [$deletes $(($($deletes_arg)+))?]
            );
            $crate::conformance_tests!(
                @deletes [$deletes $(($($deletes_arg)+))?], $make
            );
        }
    };
}
