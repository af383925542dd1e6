//! `granary bench ycsb` end to end: its flags, its printed lines and the
//! JSON keys scripts rely on (`.ci/run`, docs/BENCHMARKS.md).

use crate::common;
use crate::common::{granary, number, text};

use std::path::PathBuf;

use serde_json::Value;

#[test]
fn json_keeps_its_contract_keys_for_both_engines() {
    let dir = scratch("contract");
    let json = dir.join("ycsb.json");
    let o = granary(&[
        "bench",
        "ycsb",
        "--threads",
        "2",
        "--seconds",
        "0.3",
        "--warmup",
        "0.1",
        "--keys",
        "5000",
        "--engine",
        "silo,kv",
        "--runs",
        "2",
        "--seed",
        "7",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for line in [
        "ycsb run 0 protocol=silo threads=2: ",
        "ycsb run 1 protocol=kv threads=2: ",
        "ycsb protocol=silo threads=2 keys=5000: median ",
        "ycsb protocol=kv threads=2 keys=5000: median ",
        "ycsb: kv / silo throughput ratio ",
    ] {
        assert!(out.contains(line), "stdout lacks {line:?}:\n{out}");
    }

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["benchmark"], "ycsb");
    // The contract: top-level throughput and aborts, the first engine's medians.
    let tput = number(&doc, "throughput_txn_per_s");
    assert!(tput > 0.0, "throughput {tput}");
    assert!(number(&doc, "aborts_per_s") >= 0.0);
    for key in ["load_s", "seed", "config", "machine", "engines", "runs"] {
        assert!(doc.get(key).is_some(), "JSON lacks `{key}`");
    }
    assert_eq!(doc["seed"], 7);
    assert_eq!(number(&doc, "config.threads"), 2.0);
    assert_eq!(number(&doc, "config.keys"), 5000.0);
    // `--engine` is an old name of `--protocol`.
    assert_eq!(doc["config"]["protocol"], serde_json::json!(["silo", "kv"]));

    let engines = doc["engines"].as_array().expect("engines");
    let names: Vec<&str> = engines
        .iter()
        .map(|e| e["engine"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["silo", "kv"]);
    assert_eq!(number(&engines[0], "throughput_txn_per_s"), tput);
    for e in engines {
        assert!(number(e, "throughput_txn_per_s") > 0.0);
        assert!(number(e, "aborts_per_s") >= 0.0);
    }
    // The same medians as `protocols`, which adds the ratios.
    let protocols = doc["protocols"].as_array().expect("protocols");
    for (p, e) in protocols.iter().zip(engines) {
        assert_eq!(p["protocol"], e["engine"]);
        assert_eq!(p["throughput_txn_per_s"], e["throughput_txn_per_s"]);
        assert!(number(p, "throughput_ratio") > 0.0);
    }
    assert_eq!(number(&protocols[0], "throughput_ratio"), 1.0);

    // Runs alternate protocols, each with the old figures and the driver's.
    let runs = doc["runs"].as_array().expect("runs");
    let order: Vec<&str> = runs
        .iter()
        .map(|r| r["protocol"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["silo", "kv", "silo", "kv"]);
    for r in runs {
        for key in [
            "throughput_txn_per_s",
            "aborts_per_s",
            "commits",
            "aborts",
            "elapsed_s",
        ] {
            number(r, key);
        }
        let reasons = r["abort_reasons"].as_object().expect("abort_reasons");
        // Every reason any design counts, Silo's among them.
        assert_eq!(
            reasons.len(),
            granary::AbortReason::ALL.len(),
            "{reasons:?}"
        );
        for r in granary::AbortReason::ALL {
            assert!(reasons.contains_key(r.name()), "{reasons:?}");
        }
        assert!(number(r, "commits") > 0.0);
        assert!(r["result"]["per_second"].is_array());
        assert!(number(r, "result.latency_us.samples") > 0.0);
        let types: Vec<&str> = r["result"]["types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["read_only", "update"]);
    }

    // `granary plot` still reads it.
    let charts = dir.join("charts");
    let o = granary(&[
        "plot",
        json.to_str().unwrap(),
        "--out",
        charts.to_str().unwrap(),
        "--kind",
        "throughput",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn silo_runs_check_the_counters() {
    let o = granary(&[
        "bench",
        "ycsb",
        "--threads",
        "2",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--keys",
        "1000",
        "--read-pct",
        "50",
        "--global-tid",
        "--always-versions",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("invariants: all hold"), "{out}");
}

#[test]
fn bad_flags_are_refused() {
    for args in [
        &["--read-pct", "101"][..],
        &["--threads", "0"],
        &["--value-bytes", "4"],
        &["--seconds", "0"],
    ] {
        let mut all = vec!["bench", "ycsb", "--keys", "10"];
        all.extend_from_slice(args);
        let o = granary(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    }
}

/// `bench ycsb` on 2 threads and 5,000 keys, durable in `db`, for
/// `seconds` after a 0.1 s warm-up, with `extra` flags; its JSON to
/// `json`.
fn durable_ycsb(
    db: &std::path::Path,
    json: &std::path::Path,
    seconds: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "bench",
        "ycsb",
        "--threads",
        "2",
        "--seconds",
        seconds,
        "--warmup",
        "0.1",
        "--keys",
        "5000",
        "--durable",
        db.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    granary(&args)
}

#[test]
fn checkpoints_are_placed_in_the_measured_period() {
    let dir = scratch("checkpoints");
    let json = dir.join("ycsb.json");
    let o = durable_ycsb(
        &dir.join("db"),
        &json,
        "2",
        &["--checkpoint-interval", "0.3"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("checkpoints in the measured period (s from its start): "),
        "{out}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let spans = doc["runs"][0]["result"]["durability"]["checkpoints_s"]
        .as_array()
        .expect("checkpoints_s")
        .clone();
    assert!(!spans.is_empty(), "{doc}");
    let elapsed = number(&doc["runs"][0]["result"], "elapsed_s");
    for s in &spans {
        let (b, e) = (s[0].as_f64().unwrap(), s[1].as_f64().unwrap());
        assert!(
            0.0 <= b && b <= e && e <= elapsed,
            "{s} outside 0..{elapsed}"
        );
    }
    // In memory there are none.
    let o = granary(&[
        "bench",
        "ycsb",
        "--threads",
        "1",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--keys",
        "1000",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains("checkpoints in the measured period"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn durable_run_logs_reports_and_recovers() {
    let dir = scratch("durable");
    let db = dir.join("db");
    let json = dir.join("ycsb.json");
    let o = durable_ycsb(&db, &json, "0.5", &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("durable commit latency µs: p50 "), "{out}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &doc["runs"][0]["result"];
    assert!(number(run, "durability.durable_latency_us.samples") > 0.0);
    assert!(number(run, "durability.log_mb_per_s") > 0.0);

    // The directory it leaves recovers, and timing that leaves it as it
    // was (a copy is recovered, then removed).
    let before = contents(&db);
    let o = granary(&["bench", "recover", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("recovered a copy of"),
        "{}",
        text(&o.stdout)
    );
    assert!(contents(&db) == before, "bench recover changed DIR");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("recovering"))
        .collect();
    assert!(left.is_empty(), "the copy was left: {left:?}");
    // --in-place recovers DIR itself, as a restart would.
    let o = granary(&["bench", "recover", "--in-place", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    // kv is not logged: asking for both is refused with a clear message.
    let o = granary(&[
        "bench",
        "ycsb",
        "--engine",
        "silo,kv",
        "--durable",
        dir.join("db2").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--durable runs silo and deuteronomy only"));
}

fn scratch(test: &str) -> PathBuf {
    common::scratch("ycsb", test)
}

/// Every file under `dir` (but `LOCK`) with its bytes, sorted by path.
fn contents(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n != "LOCK") {
                let bytes = std::fs::read(&p).unwrap();
                out.push((p, bytes));
            }
        }
    }
    out.sort();
    out
}
