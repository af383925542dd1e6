//! The performance study of Silo: skew and the cost breakdown (Fig. 2).

use serde_json::Value;

use super::experiment::*;
use crate::plot::{self, Kind};

/// `study-skew`.
pub(super) fn skew() -> Experiment {
    Experiment {
        name: "study-skew",
        title: "Performance study Fig. 4–6: Silo under contention, YCSB over Zipfian skew",
        paper: "Silo's throughput holds up to moderate skew and falls steeply as θ approaches \
                1, while its abort rate climbs: at high skew the hot records' validation \
                failures, not the index, bound throughput.",
        scale: |s| {
            format!(
                "{} keys, 10 operations per transaction, 50% reads, read-modify-write \
                 writes, {} workers; θ from 0 to 0.99",
                s.pick("100,000", "1,000,000"),
                s.max
            )
        },
        steps: |s| {
            let keys = s.pick("100000", "1000000");
            let t = s.max.to_string();
            let thetas: &[&str] =
                s.pick(&["0", "0.8", "0.99"], &["0", "0.6", "0.8", "0.9", "0.99"]);
            thetas
                .iter()
                .map(|th| {
                    let a = [
                        "bench",
                        "ycsb-mix",
                        "--preset",
                        "study",
                        "--keys",
                        keys,
                        "--threads",
                        &t,
                        "--theta",
                        th,
                        "--read-pct",
                        "50",
                        "--ops-per-txn",
                        "10",
                        "--write-kind",
                        "rmw",
                    ];
                    step(format!("θ = {th}"), &a, &s.run(), s.seconds + 2.0)
                })
                .collect()
        },
        charts: &[Kind::Contention],
        x: Some("config.theta"),
        verdict: |runs, _| {
            let pts: Vec<(f64, f64, f64)> = runs
                .iter()
                .filter_map(|r| {
                    Some((
                        num(r, "config.theta")?,
                        num(r, "throughput_txn_per_s")?,
                        num(r, "aborts_per_s")?,
                    ))
                })
                .collect();
            let rows = pts
                .iter()
                .map(|&(th, tp, ab)| {
                    [
                        format!("θ = {th}: txn/s, abort rate"),
                        format!("{:.0}, {:.1}%", tp, 100.0 * ab / (tp + ab).max(1.0)),
                        "falls, and aborts climb, as θ → 1".into(),
                    ]
                })
                .collect();
            let sentence = match (pts.first(), pts.last()) {
                (Some(a), Some(b)) if pts.len() > 1 => {
                    let holds = b.1 < a.1 && b.2 / (b.1 + b.2) >= a.2 / (a.1 + a.2).max(1.0);
                    format!(
                        "From θ = {} to θ = {} throughput goes {} ({}); the paper's shape {}.",
                        a.0,
                        b.0,
                        if b.1 < a.1 { "down" } else { "up" },
                        ratio(b.1 / a.1),
                        if holds {
                            "holds"
                        } else {
                            "does not hold here: with few workers few transactions \
                             conflict even on hot keys, and skew keeps the hot records \
                             in cache"
                        }
                    )
                }
                _ => "No numbers: a step failed.".into(),
            };
            Verdict { rows, sentence }
        },
    }
}

/// `study-fig2`.
pub(super) fn fig2() -> Experiment {
    Experiment {
        name: "study-fig2",
        title: "Performance study Fig. 2: where each transaction type's time goes",
        paper: "Index operations take more than half of TPC-C new-order's and payment's \
                instructions; concurrency control is not significant for TPC-C but large for \
                short YCSB transactions; table (record) operations stay under 20%.",
        scale: |_| {
            "1 worker, 1 warehouse; time (two clock reads per probed operation) rather than \
             the paper's instruction counts"
                .into()
        },
        steps: |s| {
            vec![step(
                "TPC-C with --breakdown",
                &[
                    "bench",
                    "tpcc",
                    "--threads",
                    "1",
                    "--warehouses",
                    "1",
                    "--breakdown",
                ],
                &s.run(),
                s.seconds + 2.0,
            )]
        },
        charts: &[Kind::Breakdown],
        x: None,
        verdict: |runs, _| {
            let Some(b) = runs
                .first()
                .and_then(|r| plot::lookup(r, "result.breakdown"))
                .and_then(Value::as_array)
            else {
                return Verdict::failed();
            };
            let mut rows = Vec::new();
            let mut index_major = true;
            for t in b {
                let name = t["name"].as_str().unwrap_or("?");
                let f = |k: &str| t[k].as_f64().unwrap_or(0.0);
                if name == "new_order" || name == "payment" {
                    index_major &= f("index") >= 0.4;
                    rows.push([
                        format!("{name}: index share"),
                        format!("{:.0}%", 100.0 * f("index")),
                        "> 50% (instructions)".into(),
                    ]);
                    rows.push([
                        format!("{name}: record share"),
                        format!("{:.0}%", 100.0 * f("record")),
                        "< 20%".into(),
                    ]);
                    rows.push([
                        format!("{name}: commit (concurrency control) share"),
                        format!("{:.0}%", 100.0 * f("commit")),
                        "small".into(),
                    ]);
                }
            }
            let sentence = if index_major {
                "The shape holds: the index dominates TPC-C's new-order and payment, and \
                 commit is a few percent. Shares are of time, not instructions, so cache \
                 misses weigh in."
                    .into()
            } else {
                "The index does not dominate here as it does in the paper's instruction \
                 counts; shares here are of time."
                    .into()
            };
            Verdict { rows, sentence }
        },
    }
}
