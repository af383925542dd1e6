//! The checker catches every broken engine the test-only `mutant` feature
//! adds: `granary check` on each must fail and report anomalies.
//!
//! Runs only in `mutant` builds:
//! `cargo test --release -p granary-cli --features mutant --test mutants`.
#![cfg(feature = "mutant")]

mod common;

use common::{granary, number, scratch, text};

/// Check 100k contended YCSB transactions on `protocol` (4 threads) and
/// expect the check to fail with anomalies counted.
fn is_caught(test: &str, protocol: &str, extra: &[&str]) {
    let dir = scratch("mutants", test);
    let json = dir.join("check.json");
    let mut args = vec![
        "check",
        "ycsb",
        "--protocol",
        protocol,
        "--threads",
        "4",
        "--txns",
        "100000",
        "--seed",
        "1",
        "--json",
        json.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    let out = granary(&args);
    assert!(
        !out.status.success(),
        "the checker missed {protocol}:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the check's JSON"))
            .expect("JSON");
    assert!(
        number(&report, "anomalies") > 0.0,
        "{protocol}'s check failed without an anomaly:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn silo_without_read_validation_is_caught() {
    is_caught("silo", "silo-mutant", &[]);
}

#[test]
fn two_pl_with_short_read_locks_is_caught() {
    is_caught("2pl", "2pl-mutant", &[]);
}

#[test]
fn bohm_reading_past_unready_placeholders_is_caught() {
    is_caught("bohm", "bohm-mutant", &["--bohm-threads", "2"]);
}

#[test]
fn deuteronomy_writers_ignoring_read_timestamps_is_caught() {
    is_caught("deuteronomy", "deuteronomy-mutant", &[]);
}
