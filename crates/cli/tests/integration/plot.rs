//! `granary plot` end to end: synthetic result files in, PNG and SVG out.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

/// TPC-C's transaction types, in the order `granary bench tpcc` reports them.
const TPCC_TYPES: [&str; 5] = [
    "new_order",
    "payment",
    "order_status",
    "delivery",
    "stock_level",
];

/// A result as `granary bench tpcc --json` writes it (the fields `plot`
/// reads, plus a few it ignores).
fn tpcc(threads: u32, remote_item_pct: f64, tput: f64, breakdown: bool) -> Value {
    let types = TPCC_TYPES;
    let breakdown = breakdown.then(|| {
        types
            .iter()
            .map(|t| json!({"name": t, "index": 0.3, "record": 0.2, "commit": 0.2, "aborted": 0.1, "other": 0.2}))
            .collect::<Vec<_>>()
    });
    let cdf: Vec<Value> = (1..=99)
        .map(|p| json!([p as f64 / 100.0, 5.0 * 1.05f64.powi(p)]))
        .collect();
    json!({
        "benchmark": "tpcc",
        "throughput_txn_per_s": tput,
        "aborts_per_s": tput / (50.0 + remote_item_pct),
        "protocol": "silo",
        "seed": 7,
        "load_s": 0.5,
        "result": {
            "throughput_txn_per_s": tput,
            "aborts_per_s": 1.0,
            "commits": 1000, "aborts": 10, "elapsed_s": 3.0,
            "per_second": [tput * 0.9, tput * 1.05, tput],
            "types": [],
            "latency_us": {"samples": 10, "mean": 30.0, "p50": 20.0, "p90": 50.0, "p99": 90.0, "p999": 120.0, "max": 150.0},
            "latency_cdf_us": cdf,
            "breakdown": breakdown,
            "rss_bytes": 0, "peak_rss_bytes": 0, "invariant_violations": []
        },
        "config": {
            "common": {"threads": threads, "seconds": 3.0, "warmup": 1.0, "seed": 7, "epoch_ms": 40, "latency_every": 1, "json": null},
            "warehouses": null, "mix": "standard", "remote_item_pct": remote_item_pct,
            "remote_payment_pct": 15, "fast_ids": false
        },
        "machine": {"cpus": 2}
    })
}

/// A result of `granary bench tpcc --protocol silo,2pl-nowait --json`: the
/// first protocol's figures at the top, then each protocol's summary.
fn tpcc_protocols(threads: u32, tput: f64) -> Value {
    let mut v = tpcc(threads, 1.0, tput, true);
    let summary = |protocol: &str, t: f64| {
        let mut result = v["result"].clone();
        result["per_second"] = json!([t * 0.9, t, t * 1.1]);
        json!({
            "protocol": protocol, "isolation": "serializable",
            "throughput_txn_per_s": t, "aborts_per_s": t / 100.0,
            "throughput_ratio": t / tput, "load_s": 0.5, "runs_txn_per_s": [t],
            "result": result
        })
    };
    v["protocols"] = json!([summary("silo", tput), summary("2pl-nowait", tput / 2.0)]);
    v
}

/// A result as the older `granary bench ycsb --json` writes it.
fn legacy_ycsb(threads: u32) -> Value {
    let t = f64::from(threads);
    json!({
        "benchmark": "ycsb",
        "throughput_txn_per_s": 1e6 * t,
        "aborts_per_s": 0.0,
        "engines": [
            {"engine": "silo", "throughput_txn_per_s": 1e6 * t, "aborts_per_s": 0.0},
            {"engine": "kv", "throughput_txn_per_s": 1.3e6 * t, "aborts_per_s": 0.0}
        ],
        "runs": [],
        "config": {"threads": threads, "seconds": 1.0, "keys": 1000, "engine": ["silo", "kv"], "global_tid": false}
    })
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

fn plot(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_granary"));
    c.arg("plot");
    for a in args {
        c.arg(a);
    }
    c.output().expect("run granary plot")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A real PNG of some substance, and an SVG carrying `labels` as text.
fn assert_chart(out: &Path, kind: &str, labels: &[&str]) {
    let png = std::fs::read(out.join(format!("{kind}.png"))).expect("PNG written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{kind}.png is not a PNG"
    );
    assert!(png.len() > 1024, "{kind}.png is only {} bytes", png.len());
    let svg = std::fs::read_to_string(out.join(format!("{kind}.svg"))).expect("SVG written");
    assert!(svg.contains("<svg"), "{kind}.svg is not an SVG");
    for l in labels {
        assert!(svg.contains(l), "{kind}.svg lacks {l:?}");
    }
}

#[test]
fn all_charts_the_files_support() {
    let dir = scratch("all");
    let files: Vec<PathBuf> = [(1, 1.0e5), (2, 1.9e5), (4, 3.5e5)]
        .iter()
        .map(|&(t, tput)| write(&dir, &format!("tpcc-t{t}.json"), &tpcc(t, 1.0, tput, false)))
        .collect();
    let out = dir.join("charts");
    let o = plot(&[&files[0], &files[1], &files[2], &"--out", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_chart(
        &out,
        "throughput",
        &["throughput (txn/s)", "threads", "tpcc silo"],
    );
    assert_chart(&out, "timeseries", &["time (s)", "tpcc silo threads=4"]);
    assert_chart(&out, "latency", &["latency (µs, log scale)"]);
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(printed.contains("throughput.png") && printed.contains("latency.svg"));
    // Without --breakdown data or a varying knob, those two are skipped.
    let err = stderr(&o);
    assert!(
        err.contains("skipping breakdown") && err.contains("--breakdown"),
        "{err}"
    );
    assert!(err.contains("skipping contention"), "{err}");
    assert!(!out.join("breakdown.png").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn contention_against_a_named_field() {
    let dir = scratch("contention");
    let files: Vec<PathBuf> = [(1.0, 3.0e5), (10.0, 2.5e5), (50.0, 1.5e5)]
        .iter()
        .map(|&(r, tput)| write(&dir, &format!("tpcc-r{r}.json"), &tpcc(2, r, tput, false)))
        .collect();
    let out = dir.join("charts");
    let o = plot(&[
        &files[0],
        &files[1],
        &files[2],
        &"--out",
        &out,
        &"--kind",
        &"contention",
        &"--x",
        &"remote",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_chart(
        &out,
        "contention",
        &[
            "remote-item-pct (%)",
            "throughput (txn/s)",
            "aborts (aborts/s)",
        ],
    );
    // Only what was asked for.
    assert!(!out.join("throughput.png").exists());

    // SVG only; the same axis found without --x.
    let svg_only = dir.join("svg");
    let o = plot(&[
        &files[0],
        &files[1],
        &files[2],
        &"--out",
        &svg_only,
        &"--format",
        &"svg",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(svg_only.join("contention.svg").exists());
    assert!(!svg_only.join("contention.png").exists());

    // A field the files lack is an error naming file and field.
    let o = plot(&[
        &files[0],
        &files[1],
        &"--out",
        &out,
        &"--kind",
        &"contention",
        &"--x",
        &"config.theta",
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("tpcc-r1.json") && err.contains("config.theta"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn breakdown_needs_runs_made_with_breakdown() {
    let dir = scratch("breakdown");
    let with = write(&dir, "with.json", &tpcc(2, 1.0, 1e5, true));
    let without = write(&dir, "without.json", &tpcc(2, 1.0, 1e5, false));
    let out = dir.join("charts");
    let o = plot(&[&with, &"--out", &out, &"--kind", &"breakdown"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_chart(
        &out,
        "breakdown",
        &["share of time (%)", "new_order", "commit"],
    );

    let o = plot(&[
        &without,
        &"--out",
        &dir.join("none"),
        &"--kind",
        &"breakdown",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("run the benchmark with --breakdown"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every `<text>` element of an SVG: (its attributes, its trimmed text).
fn svg_texts(svg: &str) -> Vec<(&str, &str)> {
    svg.split("<text")
        .skip(1)
        .map(|t| {
            let (attrs, rest) = t.split_once('>').expect("text element");
            let body = rest.split("</text>").next().expect("closed text");
            (attrs, body.trim())
        })
        .collect()
}

#[test]
fn breakdown_has_one_slot_per_transaction_type() {
    let dir = scratch("breakdown-slots");
    let with = write(&dir, "with.json", &tpcc(2, 1.0, 1e5, true));
    let out = dir.join("charts");
    let o = plot(&[
        &with,
        &"--out",
        &out,
        &"--kind",
        &"breakdown",
        &"--format",
        &"svg",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(out.join("breakdown.svg")).unwrap();
    let texts = svg_texts(&svg);
    // No unlabeled slot: an empty category would show as an empty label.
    let empty = texts.iter().filter(|(_, t)| t.is_empty()).count();
    assert_eq!(empty, 0, "empty labels in breakdown.svg");
    // The x axis's labels (those level with the first type's) are exactly
    // the transaction types, in order.
    let (first, _) = texts
        .iter()
        .find(|(_, t)| *t == TPCC_TYPES[0])
        .expect("the first type is labelled");
    let y = |attrs: &str| {
        attrs
            .split_whitespace()
            .find(|a| a.starts_with("y="))
            .map(str::to_owned)
    };
    let axis: Vec<&str> = texts
        .iter()
        .filter(|(a, _)| y(a) == y(first))
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(axis, TPCC_TYPES);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two values of a knob are two points, not a trend: grouped bars, a
/// group per value and a bar per series (the benchmark, in the title, is
/// not repeated in the legend).
#[test]
fn two_values_of_a_knob_are_bars() {
    let dir = scratch("two-values");
    let files: Vec<PathBuf> = [(1.0, 3.0e5), (50.0, 1.5e5)]
        .iter()
        .map(|&(r, tput)| {
            let mut v = tpcc_protocols(2, tput);
            v["config"]["remote_item_pct"] = json!(r);
            write(&dir, &format!("tpcc-r{r}.json"), &v)
        })
        .collect();
    let out = dir.join("charts");
    let o = plot(&[
        &files[0],
        &files[1],
        &"--out",
        &out,
        &"--kind",
        &"contention",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_chart(
        &out,
        "contention",
        &[
            "tpcc: throughput at each remote-item-pct",
            "remote-item-pct = 1",
            "remote-item-pct = 50",
        ],
    );
    let svg = std::fs::read_to_string(out.join("contention.svg")).unwrap();
    // The legend names the protocols alone.
    let texts: Vec<&str> = svg_texts(&svg).into_iter().map(|(_, t)| t).collect();
    assert!(texts.contains(&"2pl-nowait"), "{texts:?}");
    assert!(
        !texts.iter().any(|t| t.starts_with("tpcc silo")),
        "{texts:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn several_protocols_are_a_series_each() {
    let dir = scratch("protocols");
    let a = write(&dir, "t1.json", &tpcc_protocols(1, 1e5));
    let b = write(&dir, "t2.json", &tpcc_protocols(2, 1.8e5));
    let out = dir.join("charts");
    let o = plot(&[&a, &b, &"--out", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_chart(&out, "throughput", &["tpcc silo", "tpcc 2pl-nowait"]);
    // Per-file charts get a line (or panel) per file and protocol.
    for kind in ["timeseries", "latency"] {
        assert_chart(
            &out,
            kind,
            &[
                "tpcc silo threads=1",
                "tpcc 2pl-nowait threads=1",
                "tpcc silo threads=2",
                "tpcc 2pl-nowait threads=2",
            ],
        );
    }
    assert_chart(&out, "breakdown", &["tpcc 2pl-nowait threads=2: where"]);
    // Several protocols get their bar chart by default: a group per file's
    // configuration, a bar per protocol.
    assert_chart(
        &out,
        "configs",
        &[
            "throughput of each protocol",
            "threads=1",
            "threads=2",
            "2pl-nowait",
        ],
    );
    let svg = std::fs::read_to_string(out.join("throughput.svg")).unwrap();
    let labels: Vec<&str> = svg_texts(&svg)
        .into_iter()
        .map(|(_, t)| t)
        .filter(|t| t.starts_with("tpcc "))
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn older_bench_ycsb_results_give_throughput() {
    let dir = scratch("legacy");
    let a = write(&dir, "y1.json", &legacy_ycsb(1));
    let b = write(&dir, "y2.json", &legacy_ycsb(2));
    let out = dir.join("charts");
    let o = plot(&[&a, &b, &"--out", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_chart(&out, "throughput", &["ycsb kv", "ycsb silo"]);
    assert!(stderr(&o).contains("skipping timeseries"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn malformed_json_is_an_error_naming_the_file() {
    let dir = scratch("malformed");
    let bad = dir.join("broken.json");
    std::fs::write(&bad, "{\"benchmark\": \"tpcc\", ").unwrap();
    let o = plot(&[&bad, &"--out", &dir.join("charts")]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("broken.json") && err.contains("not valid JSON"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_field_is_an_error_naming_file_and_field() {
    let dir = scratch("missing");
    let mut v = tpcc(1, 1.0, 1e5, false);
    v["result"].as_object_mut().unwrap().remove("per_second");
    let good = write(&dir, "good.json", &tpcc(2, 1.0, 1e5, false));
    let bad = write(&dir, "no-per-second.json", &v);
    let o = plot(&[&good, &bad, &"--out", &dir.join("charts")]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("no-per-second.json: missing field `result.per_second`"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn draws_text_without_fontconfig() {
    let dir = scratch("nofontconfig");
    let a = write(&dir, "a.json", &tpcc(1, 1.0, 1e5, false));
    let b = write(&dir, "b.json", &tpcc(2, 1.0, 2e5, false));
    let out = dir.join("charts");
    let o = Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(["plot", "--kind", "throughput", "--out"])
        .arg(&out)
        .args([&a, &b])
        .env("FONTCONFIG_FILE", "/nonexistent/fonts.conf")
        .env("FONTCONFIG_PATH", "/nonexistent")
        .env("XDG_DATA_HOME", "/nonexistent")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_chart(&out, "throughput", &["throughput (txn/s)"]);
    let _ = std::fs::remove_dir_all(&dir);
}

fn scratch(test: &str) -> PathBuf {
    common::scratch("plot", test)
}
