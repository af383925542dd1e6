//! The checker and the isolation scripts must catch a broken engine: Silo
//! with read validation turned off (the test-only `mutant` feature). Run
//! with `cargo test --release -p granary --features mutant --test mutant`.
#![cfg(feature = "mutant")]

use granary::{Database, Options};
use granary_check::{check, AnomalyKind, Level};
use granary_conformance::hermitage::{self, checker_agrees, Scenario};
use granary_conformance::support::seed;
use granary_workloads::check::{run_check, CheckConfig, CheckWorkload};

fn mutant() -> Database {
    Database::new(Options::default().mutant_skip_read_validation(true)).expect("db")
}

#[test]
fn hermitage_catches_the_mutant() {
    // Without read validation, the anomalies that OCC prevents only by
    // validating reads happen — and the checker flags each one.
    for (s, kind) in [
        (Scenario::P4, AnomalyKind::GSingle),
        (Scenario::GSingle, AnomalyKind::GSingle),
        (Scenario::G2Item, AnomalyKind::G2Item),
    ] {
        let out = hermitage::run(&mutant(), s);
        assert!(
            out.anomaly,
            "{s:?} did not happen on the mutant:\n{}",
            out.trace.join("\n")
        );
        let report = check(&out.history, Level::Serializable);
        assert!(report.has(kind), "{s:?}: expected {kind:?}, got:\n{report}");
        checker_agrees(s, &out, Level::Serializable);
    }
}

#[test]
fn the_conformance_suite_rejects_the_mutant() {
    // The suite's hermitage test, given Silo's table, fails on the mutant
    // (as a design's test would).
    let r = std::panic::catch_unwind(|| {
        hermitage::scenarios(mutant, Level::Serializable, &hermitage::SERIALIZABLE);
    });
    assert!(r.is_err(), "the mutant passed the hermitage scenarios");
}

#[test]
fn concurrent_mutant_run_is_flagged() {
    // A bounded run: up to five rounds of 20k contended transactions; the
    // mutant must be caught in one of them (in practice, the first).
    let base = seed("mutant");
    for round in 0..5 {
        let mut cfg = CheckConfig::new(CheckWorkload::Ycsb);
        cfg.txns = 20_000;
        cfg.threads = 4;
        cfg.seed = base + round;
        let run = run_check(&mutant(), &cfg, &|_| {}).expect("run");
        let report = check(&run.history, Level::Serializable);
        if !report.is_ok() {
            eprintln!("round {round}: {report}");
            return;
        }
    }
    panic!("the mutant engine was not caught in 5 rounds (seed {base})");
}
