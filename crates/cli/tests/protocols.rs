//! `--protocol` end to end: several protocols on a driver benchmark and
//! on `granary check`, refusals, and `--durable` with several.

mod common;
use common::{granary, number, text};

use std::path::PathBuf;

use serde_json::Value;

fn scratch(test: &str) -> PathBuf {
    common::scratch("protocols", test)
}

fn read(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("JSON written")).expect("JSON")
}

#[test]
fn two_protocols_get_two_databases_and_two_summaries() {
    let dir = scratch("two");
    let json = dir.join("smallbank.json");
    let o = granary(&[
        "bench",
        "smallbank",
        "--protocol",
        "silo,silo",
        "--runs",
        "2",
        "--threads",
        "2",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--customers",
        "100",
        "--seed",
        "9",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    // Each protocol loads its own database before any run.
    assert_eq!(
        err.matches("smallbank (silo): loaded in ").count(),
        2,
        "{err}"
    );
    // The runs alternate protocol by protocol.
    let runs: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("smallbank run "))
        .map(|l| l.split(" threads=").next().unwrap())
        .collect();
    assert_eq!(
        runs,
        [
            "smallbank run 0 protocol=silo",
            "smallbank run 0 protocol=silo",
            "smallbank run 1 protocol=silo",
            "smallbank run 1 protocol=silo"
        ]
    );
    assert_eq!(out.matches("invariants: all hold").count(), 4, "{out}");
    // The second silo against the first, told apart by place; the first
    // is not compared with itself.
    assert!(
        out.contains("protocol=silo (#2) threads=2: median of 2 runs"),
        "{out}"
    );
    assert!(out.contains("x the throughput of silo (#1)"), "{out}");
    assert_eq!(out.matches("x the throughput of").count(), 1, "{out}");

    let doc = read(&json);
    let protocols = doc["protocols"].as_array().expect("protocols");
    assert_eq!(protocols.len(), 2);
    // The top-level contract keys are the first protocol's medians.
    assert_eq!(doc["protocol"], "silo");
    assert_eq!(
        number(&doc, "throughput_txn_per_s"),
        number(&protocols[0], "throughput_txn_per_s")
    );
    assert_eq!(
        number(&doc, "aborts_per_s"),
        number(&protocols[0], "aborts_per_s")
    );
    assert_eq!(doc["result"], protocols[0]["result"]);
    assert_eq!(number(&protocols[0], "throughput_ratio"), 1.0);
    for p in protocols {
        assert_eq!(p["protocol"], "silo");
        assert_eq!(p["isolation"], "serializable");
        assert_eq!(p["runs_txn_per_s"].as_array().unwrap().len(), 2);
        assert!(number(p, "throughput_txn_per_s") > 0.0);
        assert!(number(p, "load_s") > 0.0);
        assert!(p["result"]["per_second"].is_array());
    }
    let ratio = number(&protocols[1], "throughput_ratio");
    let expected = number(&protocols[1], "throughput_txn_per_s")
        / number(&protocols[0], "throughput_txn_per_s");
    assert!((ratio - expected).abs() < 1e-9, "{ratio} vs {expected}");

    // `granary plot` draws a series per protocol.
    let charts = dir.join("charts");
    let o = granary(&[
        "plot",
        json.to_str().unwrap(),
        "--out",
        charts.to_str().unwrap(),
        "--kind",
        "throughput,latency",
        "--format",
        "svg",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let svg = std::fs::read_to_string(charts.join("latency.svg")).unwrap();
    assert!(svg.contains("smallbank silo #2"), "no second series");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_protocol_writes_the_json_it_always_wrote() {
    let dir = scratch("one");
    let json = dir.join("smallbank.json");
    let o = granary(&[
        "bench",
        "smallbank",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
        "--customers",
        "100",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // The configuration in flag words, then the result naming its protocol.
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    assert!(
        header.starts_with("smallbank: --customers 100 --mix bohm --protocol silo --threads 1"),
        "{out}"
    );
    assert!(
        lines
            .next()
            .unwrap_or("")
            .starts_with("smallbank protocol=silo threads=1: "),
        "{out}"
    );
    let doc = read(&json);
    assert_eq!(doc["protocol"], "silo");
    assert!(doc.get("protocols").is_none(), "{doc}");
    assert!(doc["result"]["per_second"].is_array());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_protocol_that_cannot_run_the_workload_is_refused() {
    for args in [
        &["bench", "tpcc", "--protocol", "silo,kv"][..],
        &["bench", "ycsb-mix", "--preset", "silo", "--protocol", "kv"],
        &["bench", "smallbank", "--protocol", "kv"],
        &["check", "bank", "--protocol", "kv"],
    ] {
        let o = granary(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("protocol `kv` cannot run `")
                && err.contains("only `bench ycsb` is made of them"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        // Nothing ran: no figures.
        assert_eq!(text(&o.stdout), "", "{args:?}");
    }
    let o = granary(&["bench", "tpcc", "--protocol", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("possible values: silo, kv"));
}

#[test]
fn durable_takes_one_protocol() {
    let dir = scratch("durable");
    let db = dir.join("db");
    for bench in [&["ycsb", "--keys", "100"][..], &["smallbank"]] {
        let mut args = vec!["bench"];
        args.extend_from_slice(bench);
        args.extend_from_slice(&["--protocol", "silo,silo", "--durable", db.to_str().unwrap()]);
        let o = granary(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("--durable takes one protocol, not 2"), "{err}");
        assert!(!db.exists(), "nothing is created");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_reports_each_protocol() {
    let dir = scratch("check");
    let json = dir.join("check.json");
    let history = dir.join("history.json");
    let o = granary(&[
        "check",
        "list-append",
        "--protocol",
        "silo,silo",
        "--threads",
        "2",
        "--txns",
        "2000",
        "--seed",
        "4",
        "--json",
        json.to_str().unwrap(),
        "--save-history",
        history.to_str().unwrap(),
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(out.matches("protocol silo:").count(), 2, "{out}");
    assert_eq!(out.matches("0 anomalies in ").count(), 2, "{out}");
    let doc = read(&json);
    let each = doc["protocols"].as_array().expect("protocols");
    assert_eq!(each.len(), 2);
    let mut total = 0.0;
    for p in each {
        assert_eq!(p["protocol"], "silo");
        assert_eq!(p["anomalies"], 0);
        assert_eq!(p["seed"], 4);
        total += number(p, "transactions");
    }
    assert_eq!(number(&doc, "transactions"), total);
    assert_eq!(doc["anomalies"], 0);
    for f in ["history-0-silo.json", "history-1-silo.json"] {
        assert!(dir.join(f).exists(), "{f} not written");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deuteronomy's TC runs the benchmarks (over the memory DC) and says
/// where its reads were served; a log too small to run is refused with
/// the reason before anything runs; `granary check` passes.
#[test]
fn deuteronomy_benchmarks_and_checks() {
    let o = granary(&[
        "bench",
        "smallbank",
        "--protocol",
        "deuteronomy",
        "--threads",
        "2",
        "--seconds",
        "0.5",
        "--warmup",
        "0",
        "--customers",
        "1000",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    // Under its run's report, with the results.
    assert!(
        out.contains("\n  tc: reads ") && out.contains("from the DC"),
        "{out}"
    );
    let o = granary(&[
        "bench",
        "smallbank",
        "--protocol",
        "deuteronomy",
        "--tc-log-mb",
        "4",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--tc-log-mb 4"), "{err}");
    assert_eq!(text(&o.stdout), "");
    let o = granary(&[
        "check",
        "bank",
        "--protocol",
        "deuteronomy",
        "--threads",
        "2",
        "--txns",
        "2000",
        "--seed",
        "3",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("0 anomalies"),
        "{}",
        text(&o.stdout)
    );
}

/// `--dc etcd` (a local etcd started for the run, Debian's etcd-server):
/// `granary check` passes; a durable benchmark keeps etcd's data with
/// the log and reports what the DC applied; `--etcd-endpoints` without
/// `--dc etcd` is refused. Built only with the `etcd` feature (CI runs
/// it: `cargo test --release -p granary-cli --features etcd`).
#[cfg(feature = "etcd")]
#[test]
fn deuteronomy_over_etcd_checks_and_benchmarks() {
    let o = granary(&[
        "check",
        "bank",
        "--protocol",
        "deuteronomy",
        "--dc",
        "etcd",
        "--threads",
        "2",
        "--txns",
        "2000",
        "--seed",
        "3",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("0 anomalies"),
        "{}",
        text(&o.stdout)
    );
    let dir = scratch("etcd");
    let o = granary(&[
        "bench",
        "smallbank",
        "--protocol",
        "deuteronomy",
        "--dc",
        "etcd",
        "--durable",
        dir.to_str().unwrap(),
        "--threads",
        "2",
        "--seconds",
        "0.5",
        "--warmup",
        "0",
        "--customers",
        "200",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("\n  tc: reads ") && out.contains("DC applied"),
        "{out}"
    );
    assert!(dir.join("etcd/data/member").is_dir(), "etcd's data is kept");
    let _ = std::fs::remove_dir_all(&dir);
    let o = granary(&[
        "check",
        "bank",
        "--protocol",
        "deuteronomy",
        "--etcd-endpoints",
        "http://127.0.0.1:1",
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--etcd-endpoints is for --dc etcd"));
}

/// A build without the `etcd` feature refuses `--dc etcd` before anything
/// runs, on every verb, and says how to rebuild with it.
#[cfg(not(feature = "etcd"))]
#[test]
fn dc_etcd_without_the_feature_says_how_to_rebuild() {
    for args in [
        &["check", "bank", "--protocol", "deuteronomy", "--dc", "etcd"][..],
        &[
            "bench",
            "smallbank",
            "--protocol",
            "deuteronomy",
            "--dc",
            "etcd",
            "--seconds",
            "0.1",
        ][..],
    ] {
        let o = granary(args);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} ran: {err}");
        assert!(
            err.contains("built without the etcd data component")
                && err.contains("--features etcd"),
            "{args:?}: {err}"
        );
    }
}
