//! SiloR (OSDI'14): logging and checkpoints over time (Fig. 1), and recovery.

use super::experiment::*;
use crate::plot::Kind;
use crate::report::machine;

/// `silor-fig1`.
pub(super) fn fig1() -> Experiment {
    Experiment {
        name: "silor-fig1",
        title: "SiloR Fig. 1: throughput over time with logging and checkpoints (YCSB)",
        paper: "On SiloR's YCSB (32 workers) average throughput is 8.76M txn/s with logging \
                and checkpoints, 80% of MemSilo's 10.83M; checkpoints show as shallow dips.",
        scale: |s| {
            format!(
                "SiloR's YCSB preset, {} keys, {} workers, {} s runs, a checkpoint every 2 s",
                s.pick("100,000", "1,000,000"),
                s.max,
                fmt_num(s.seconds.max(6.0))
            )
        },
        steps: |s| {
            let t = s.max.to_string();
            let keys = s.pick("100000", "1000000");
            let run = s.run_at_least(6.0, 0.0);
            let base = [
                "bench",
                "ycsb-mix",
                "--preset",
                "silor",
                "--keys",
                keys,
                "--threads",
                &t,
            ];
            let dir = s.tmp.join("silor-fig1");
            let mut durable = step(
                "logging and checkpoints",
                &base,
                &[
                    run.to_vec(),
                    vec![
                        "--durable".into(),
                        path_arg(&dir),
                        "--checkpoint-interval".into(),
                        "2".into(),
                    ],
                ]
                .concat(),
                s.seconds.max(6.0) + 4.0,
            );
            durable.scratch = Some(dir);
            vec![
                step("in memory", &base, &run, s.seconds.max(6.0) + 2.0),
                durable,
            ]
        },
        charts: &[Kind::Timeseries],
        x: None,
        verdict: |runs, _| {
            let tp = |i: usize| tput(runs, i);
            match (tp(0), tp(1)) {
                (Some(m), Some(d)) => Verdict {
                    rows: vec![[
                        "logging + checkpoints / in memory".into(),
                        ratio(d / m),
                        "0.80×".into(),
                    ]],
                    sentence: format!(
                        "Durable throughput is {} of in-memory here against 0.80× in SiloR, \
                         whose loggers and checkpointers had cores of their own; here they \
                         share {} cores with the workers.",
                        ratio(d / m),
                        machine().cpus
                    ),
                },
                _ => Verdict::failed(),
            }
        },
    }
}

/// `silor-recovery`.
pub(super) fn recovery() -> Experiment {
    Experiment {
        name: "silor-recovery",
        title: "SiloR §6.4: recovery time per GB of checkpoint and log",
        paper: "SiloR recovers YCSB (36 GB checkpoint + 64 GB log) in 106 s, 1.06 s/GB, and \
                TPC-C (15.7 GB + 180 GB) in 211 s, 1.08 s/GB, with 24–32 threads on 4 disks.",
        scale: |s| {
            format!(
                "a TPC-C directory of {} warehouses written for {} s with a checkpoint every \
                 2 s, recovered with {} threads",
                s.max,
                fmt_num(s.seconds.max(3.0)),
                s.max
            )
        },
        steps: |s| {
            let t = s.max.to_string();
            let dir = s.tmp.join("recovery-db");
            let mut write = step(
                "write the directory",
                &["bench", "tpcc", "--threads", &t, "--warehouses", &t],
                &[
                    s.run_at_least(3.0, 0.0).to_vec(),
                    vec![
                        "--checkpoint-interval".into(),
                        "2".into(),
                        "--durable".into(),
                        path_arg(&dir),
                    ],
                ]
                .concat(),
                s.seconds.max(3.0) + 5.0,
            );
            write.json = false;
            let mut rec = step(
                "recover it",
                &["bench", "recover", &path_arg(&dir), "--threads", &t],
                &[],
                8.0,
            );
            rec.scratch = Some(dir);
            vec![write, rec]
        },
        charts: &[],
        x: None,
        verdict: |runs, _| {
            let r = runs.last();
            let secs = r.and_then(|r| num(r, "recovery_seconds"));
            let bytes = r.and_then(|r| num(r, "read_bytes"));
            let mut rows = Vec::new();
            let sentence = match (secs, bytes) {
                (Some(s), Some(b)) if b > 0.0 => {
                    let per = s / (b / 1e9);
                    rows.push([
                        "GB read (checkpoint + log)".into(),
                        format!("{:.2}", b / 1e9),
                        "195.7 (TPC-C)".into(),
                    ]);
                    rows.push(["recovery, s".into(), format!("{s:.2}"), "211".into()]);
                    rows.push([
                        "recovery, s/GB".into(),
                        format!("{per:.2}"),
                        "1.08 (TPC-C), 1.06 (YCSB)".into(),
                    ]);
                    format!(
                        "{:.2} s/GB with {} threads against SiloR's 1.08 s/GB with 32 \
                         threads and 4 disks: recovery here is CPU-bound (index inserts \
                         and first touch of memory), see docs/BENCHMARKS.md.",
                        per,
                        runs.last()
                            .and_then(|r| num(r, "threads"))
                            .unwrap_or(f64::NAN)
                    )
                }
                _ => "No numbers: a step failed.".into(),
            };
            Verdict { rows, sentence }
        },
    }
}
