//! Deuteronomy (CIDR'15): Figs. 7 and 9.

use super::experiment::*;
use crate::plot::Kind;

/// `deuteronomy-fig7`.
pub(super) fn fig7() -> Experiment {
    Experiment {
        name: "deuteronomy-fig7",
        title: "Deuteronomy Fig. 7: throughput over the read/write mix",
        paper: "Read-intensive mixes run at 1–2M txn/s (4–8M operations/s) on the TC's \
                cores; below about 70% reads the TC Proxy and data component, busy applying \
                updates, bound throughput.",
        scale: |s| {
            format!(
                "Deuteronomy's YCSB preset over the in-memory data component, {} keys, {} threads",
                s.pick("100,000", "1,000,000"),
                s.max
            )
        },
        steps: |s| {
            let keys = s.pick("100000", "1000000");
            let t = s.max.to_string();
            let mixes: &[&str] =
                s.pick(&["50", "80", "100"], &["0", "50", "70", "80", "90", "100"]);
            mixes
                .iter()
                .map(|r| {
                    let a = [
                        "bench",
                        "ycsb-mix",
                        "--preset",
                        "deuteronomy",
                        "--keys",
                        keys,
                        "--threads",
                        &t,
                        "--read-pct",
                        r,
                        "--protocol",
                        "deuteronomy",
                    ];
                    step(format!("{r}% reads"), &a, &s.run(), s.seconds + 2.0)
                })
                .collect()
        },
        charts: &[Kind::Contention],
        x: Some("config.args.read_pct"),
        verdict: |runs, _| {
            let pts: Vec<(f64, f64)> = runs
                .iter()
                .filter_map(|r| {
                    Some((
                        num(r, "config.args.read_pct")?,
                        num(r, "throughput_txn_per_s")?,
                    ))
                })
                .collect();
            let rows = pts
                .iter()
                .map(|(r, t)| {
                    [
                        format!("{r}% reads: txn/s"),
                        format!("{t:.0}"),
                        "rises with the read share".into(),
                    ]
                })
                .collect();
            let sentence = match (pts.first(), pts.last()) {
                (Some(a), Some(b)) if pts.len() > 1 => format!(
                    "From {}% to {}% reads throughput changes {}: the paper's rise with the \
                     read share {}.",
                    a.0,
                    b.0,
                    ratio(b.1 / a.1),
                    if b.1 > a.1 { "holds" } else { "does not hold" }
                ),
                _ => failed_sentence(),
            };
            Verdict { rows, sentence }
        },
    }
}

/// `deuteronomy-fig9`.
pub(super) fn fig9() -> Experiment {
    Experiment {
        name: "deuteronomy-fig9",
        title: "Deuteronomy Fig. 9: the cost of MVCC garbage collection",
        paper: "Garbage collection at the soft and hard watermarks slows steady-state \
                throughput by about 20%, and holds the MVCC table between its watermarks.",
        scale: |s| {
            format!(
                "Deuteronomy's YCSB preset over the in-memory data component, {} keys, {} \
                 threads, {} s runs; soft and hard watermarks at 1.1× and 1.3× the keys, \
                 against none",
                s.pick("100,000", "1,000,000"),
                s.max,
                fmt_num(s.seconds.max(4.0))
            )
        },
        steps: |s| {
            let keys = s.pick("100000", "1000000");
            let t = s.max.to_string();
            let base = [
                "bench",
                "ycsb-mix",
                "--preset",
                "deuteronomy",
                "--keys",
                keys,
                "--threads",
                &t,
                "--protocol",
                "deuteronomy",
            ];
            // Watermarks just above the table's items, so that the
            // collector works throughout the run (as in
            // docs/BENCHMARKS.md's Fig. 9 runs).
            let mut tight = base.to_vec();
            tight.extend([
                "--tc-soft-versions",
                s.pick("110000", "1100000"),
                "--tc-hard-versions",
                s.pick("130000", "1300000"),
            ]);
            let mut none = base.to_vec();
            none.extend([
                "--tc-soft-versions",
                "1099511627776",
                "--tc-hard-versions",
                "1099511627776",
            ]);
            // A throughput over time needs several seconds, also at
            // --quick scale.
            let run = s.run_at_least(4.0, 0.0);
            let est = s.seconds.max(4.0) + 2.0;
            vec![
                step("tight watermarks", &tight, &run, est),
                step("no garbage collection", &none, &run, est),
            ]
        },
        charts: &[Kind::Timeseries],
        x: None,
        verdict: |runs, _| {
            let tp = |i: usize| tput(runs, i);
            match (tp(0), tp(1)) {
                (Some(gc), Some(none)) => Verdict {
                    rows: vec![[
                        "with GC / without".into(),
                        ratio(gc / none),
                        "≈ 0.80×".into(),
                    ]],
                    sentence: if gc < none {
                        format!(
                            "Garbage collection costs {:.0}% of throughput here (the paper: \
                             about 20%); the direction holds.",
                            100.0 * (1.0 - gc / none)
                        )
                    } else {
                        format!(
                            "No cost of garbage collection shows here (with / without = {}), \
                             within the noise of short runs; the paper measured about 20%.",
                            ratio(gc / none)
                        )
                    },
                },
                _ => Verdict::failed(),
            }
        },
    }
}
