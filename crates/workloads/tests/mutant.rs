//! The checker must catch a broken engine: Silo with read validation
//! turned off (the test-only `mutant` feature). Run with
//! `cargo test --release -p granary-workloads --features mutant --test mutant`.
#![cfg(feature = "mutant")]

mod common;
use common::seed;

mod script;

use granary::{Database, Options};
use granary_check::{check, AnomalyKind, Level};
use granary_workloads::check::{run_check, CheckConfig, CheckWorkload};
use script::{checker_agrees, Scenario};

#[test]
fn hermitage_catches_the_mutant() {
    // Without read validation, the anomalies that OCC prevents only by
    // validating reads happen — and the checker flags each one.
    for (s, kind) in [
        (Scenario::P4, AnomalyKind::GSingle),
        (Scenario::GSingle, AnomalyKind::GSingle),
        (Scenario::G2Item, AnomalyKind::G2Item),
    ] {
        let out = script::run_silo(s, true);
        assert!(
            out.anomaly,
            "{s:?} did not happen on the mutant:\n{}",
            out.trace.join("\n")
        );
        let report = check(&out.history, Level::Serializable);
        assert!(report.has(kind), "{s:?}: expected {kind:?}, got:\n{report}");
        checker_agrees(s, &out);
    }
}

#[test]
fn concurrent_mutant_run_is_flagged() {
    // A bounded run: up to five rounds of 20k contended transactions; the
    // mutant must be caught in one of them (in practice, the first).
    let base = seed();
    for round in 0..5 {
        let db = Database::new(Options::default().mutant_skip_read_validation(true)).expect("db");
        let mut cfg = CheckConfig::new(CheckWorkload::Ycsb);
        cfg.txns = 20_000;
        cfg.threads = 4;
        cfg.seed = base + round;
        let run = run_check(&db, &cfg, &|_| {}).expect("run");
        let report = check(&run.history, Level::Serializable);
        if !report.is_ok() {
            eprintln!("round {round}: {report}");
            return;
        }
    }
    panic!("the mutant engine was not caught in 5 rounds (seed {base})");
}
