//! Silo under the checker: every contended workload, recorded on 4
//! threads, must give a history with no anomaly and no broken invariant.
//! (The CI script also runs `granary check` at 100k transactions on three
//! seeds; this is the quick in-suite version.)

mod common;
use common::{seed, stress};

use granary::{Database, Options};
use granary_check::{check, Level};
use granary_workloads::check::{run_check, CheckConfig, CheckWorkload};

#[test]
fn silo_histories_are_serializable() {
    let seed = seed();
    for w in CheckWorkload::ALL {
        let db =
            Database::new(Options::default().epoch_interval(std::time::Duration::from_millis(2)))
                .expect("db");
        let mut cfg = CheckConfig::new(w);
        cfg.txns = 20_000 * stress();
        cfg.seed = seed;
        let run = run_check(&db, &cfg, &|_| {}).expect("run");
        assert!(run.committed >= cfg.txns);
        assert!(
            run.invariant_violations.is_empty(),
            "{w}: {:?}",
            run.invariant_violations
        );
        let report = check(&run.history, Level::Serializable);
        assert!(
            report.is_ok(),
            "{w} (seed {seed}):\n{report}\n{}",
            report.explain(&run.history)
        );
        assert!(report.transactions as u64 >= cfg.txns);
        // Contended for real: attempts conflicted, and the history the
        // checker saw holds them (a history without a conflict proves
        // nothing about concurrency control).
        eprintln!(
            "{w}: {} committed, {} aborted attempts ({} in the history)",
            run.committed, run.aborted, report.aborted
        );
        assert!(
            run.aborted > 0 && report.aborted > 0,
            "{w} (seed {seed}): no attempt conflicted: not a contended run"
        );
    }
}

#[test]
fn bad_configurations_are_errors() {
    let db = Database::new(Options::default()).expect("db");
    let mut cfg = CheckConfig::new(CheckWorkload::Ycsb);
    cfg.theta = 1.5;
    assert!(run_check(&db, &cfg, &|_| {}).is_err());
    let mut cfg = CheckConfig::new(CheckWorkload::Bank);
    cfg.keys = 1;
    assert!(run_check(&db, &cfg, &|_| {}).is_err());
    assert!(CheckWorkload::parse("tpcc")
        .unwrap_err()
        .contains("ycsb, bank, list-append"));
}
