//! The check workloads refuse bad configurations. (Their histories are
//! checked on every design by the conformance suite, `crates/conformance`.)

use granary::{Database, Options};
use granary_workloads::check::{run_check, CheckConfig, CheckWorkload};

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
