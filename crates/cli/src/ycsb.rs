//! `granary bench ycsb`: Silo §5.2's YCSB variant — one table of 8-byte
//! keys and 100-byte values, 80% single-key read transactions and 20%
//! single-key read-modify-write transactions, keys uniform.
//!
//! `--engine kv` runs the same operations on the bare index with no
//! transactions (the paper's Key-Value, [`crate::kv`]); `--global-tid`
//! takes commit TIDs from one shared counter (MemSilo+GlobalTID).
//!
//! Every run goes through the shared driver ([`granary_workloads::driver`],
//! as `bench tpcc`, `smallbank` and `ycsb-mix` do), so runs also report
//! per-type latency, a per-second series, memory and (Silo only) an
//! invariant check. The workload is this command's own rather than
//! `ycsb-mix`'s `silo` preset: the same transactions, but without the
//! general generator's per-transaction planning and declared key sets,
//! which cost about an eighth more instructions per transaction (this is
//! the command that compares against Silo's own numbers).

use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use granary::Options;
use granary_workloads::driver::{self, DriverConfig, RunReport, Workload};
use granary_workloads::silo52::Silo52;
use serde::Serialize;

use crate::report::{fresh_seed, machine, progress, write_json, Machine};
use granary::kv::KvEngine;

#[derive(Clone, Copy, Debug, ValueEnum, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Silo's serializable OCC (MemSilo).
    Silo,
    /// The bare index: single-key gets and puts, no transactions.
    Kv,
}

#[derive(Args, Debug, Clone, Serialize)]
pub struct YcsbArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Measured seconds (after warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Warm-up seconds, run but not counted.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Number of keys loaded before the run.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// Percentage of read-only transactions (the rest are read-modify-writes).
    #[arg(long, default_value_t = 80)]
    pub read_pct: u32,
    /// Engine(s) to run; several (e.g. `silo,kv`) alternate run by run on the
    /// same loaded table and report their throughput ratio.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "silo")]
    pub engine: Vec<Engine>,
    /// Measured runs per engine; medians are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Commit TIDs from one shared atomic counter (MemSilo+GlobalTID).
    #[arg(long)]
    pub global_tid: bool,
    /// Turn off snapshot versions (Silo §4.9): no old-version copies.
    #[arg(long)]
    pub no_snapshots: bool,
    /// Keep old versions on every snapshot-crossing write even when no
    /// snapshot transaction runs (Silo's own behaviour; granary's default
    /// keeps them only while snapshots are in use).
    #[arg(long)]
    pub always_versions: bool,
    /// Epoch interval in milliseconds.
    #[arg(long, default_value_t = 40)]
    pub epoch_ms: u64,
    /// Seed for key choice (printed; random if not given).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Time one transaction in this many (1 = every one). Each timing costs
    /// two clock reads, about 5% of a transaction this short.
    #[arg(long, default_value_t = 100)]
    pub latency_every: u32,
    /// Report where each transaction type's time goes (index, record
    /// access, commit, aborted work, other), as the driver benchmarks do;
    /// kv has no probes, so all of its time shows as other. Off by
    /// default: it adds clock reads to every probed operation.
    #[arg(long)]
    pub breakdown: bool,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub durable: crate::bench::DurableArgs,
}

/// The JSON result. Top-level `throughput_txn_per_s` / `aborts_per_s` are the
/// medians of the first `--engine` (a contract scripts rely on).
#[derive(Serialize, Debug)]
pub struct YcsbResult {
    pub benchmark: &'static str,
    pub throughput_txn_per_s: f64,
    pub aborts_per_s: f64,
    pub engines: Vec<EngineSummary>,
    pub runs: Vec<Measurement>,
    pub load_s: f64,
    pub seed: u64,
    pub config: YcsbArgs,
    pub machine: Machine,
}

#[derive(Serialize, Debug)]
pub struct EngineSummary {
    pub engine: Engine,
    pub throughput_txn_per_s: f64,
    pub aborts_per_s: f64,
}

/// One measured run of one engine: the figures `bench ycsb` always wrote,
/// then the driver's full report.
#[derive(Serialize, Debug)]
pub struct Measurement {
    pub engine: Engine,
    pub throughput_txn_per_s: f64,
    pub aborts_per_s: f64,
    pub commits: u64,
    pub aborts: u64,
    pub abort_reasons: std::collections::BTreeMap<&'static str, u64>,
    pub elapsed_s: f64,
    pub result: RunReport,
}

impl Measurement {
    fn new(engine: Engine, r: RunReport) -> Measurement {
        let mut abort_reasons = std::collections::BTreeMap::new();
        for t in &r.types {
            for (&reason, &n) in &t.aborts {
                *abort_reasons.entry(reason).or_insert(0) += n;
            }
        }
        Measurement {
            engine,
            throughput_txn_per_s: r.throughput_txn_per_s,
            aborts_per_s: r.aborts_per_s,
            commits: r.commits,
            aborts: r.aborts,
            abort_reasons,
            elapsed_s: r.elapsed_s,
            result: r,
        }
    }
}

pub fn run(args: YcsbArgs) -> Result<YcsbResult, String> {
    if args.threads == 0
        || args.keys == 0
        || args.read_pct > 100
        || !(args.seconds > 0.0 && args.seconds.is_finite())
        || !(args.warmup >= 0.0 && args.warmup.is_finite())
        || args.latency_every == 0
    {
        return Err(
            "need --threads ≥ 1, --keys ≥ 1, --read-pct ≤ 100, --seconds > 0, --warmup ≥ 0, --latency-every ≥ 1".into(),
        );
    }
    if args.value_bytes < 8 || args.value_bytes > granary::MAX_VALUE_BYTES {
        return Err(format!(
            "--value-bytes must be in 8..={}",
            granary::MAX_VALUE_BYTES
        ));
    }
    if args.runs == 0 || args.engine.is_empty() {
        return Err("need --runs ≥ 1 and at least one --engine".into());
    }
    if args.durable.durable.is_some() && args.engine.contains(&Engine::Kv) {
        return Err(
            "--durable runs the silo engine only: kv's non-transactional writes are not logged"
                .into(),
        );
    }
    let seed = args.seed.unwrap_or_else(fresh_seed);
    eprintln!(
        "ycsb: engines={:?} threads={} keys={} value={}B read={}% global_tid={} snapshots={} always_versions={} runs={} seed={seed}",
        args.engine,
        args.threads,
        args.keys,
        args.value_bytes,
        args.read_pct,
        args.global_tid,
        !args.no_snapshots,
        args.always_versions,
        args.runs
    );
    let opts = Options::default()
        .epoch_interval(Duration::from_millis(args.epoch_ms.max(1)))
        .global_tid(args.global_tid)
        .snapshots(!args.no_snapshots)
        .snapshot_versions_idle_epochs(if args.always_versions {
            None
        } else {
            Some(250)
        })
        .max_workers(args.threads + 8);
    let db = args.durable.open(opts)?;

    let check = !args.engine.contains(&Engine::Kv);
    if !check {
        eprintln!(
            "ycsb: invariants not checked: kv runs are not transactional (they can lose updates)"
        );
    }
    let loaders = args
        .threads
        .min(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut w = Silo52::new(args.keys, args.value_bytes, args.read_pct, loaders, check);
    let load_start = Instant::now();
    let pb = progress(args.keys, "loading");
    w.load(&db, &|done, _| pb.set_position(done))
        .map_err(|e| format!("load failed: {e}"))?;
    pb.finish_and_clear();
    let load_s = load_start.elapsed().as_secs_f64();
    eprintln!("ycsb: loaded {} keys in {load_s:.2}s", args.keys);

    // Engines alternate run by run on the same loaded table, so drift on a
    // shared machine hits each alike; medians are reported.
    let mut runs = Vec::new();
    for r in 0..args.runs {
        for &engine in &args.engine {
            let cfg = DriverConfig {
                threads: args.threads,
                warmup: Duration::from_secs_f64(args.warmup),
                duration: Duration::from_secs_f64(args.seconds),
                seed: seed.wrapping_add(r as u64),
                latency_every: args.latency_every,
                breakdown: args.breakdown,
            };
            let pb = progress((args.warmup + args.seconds).ceil() as u64, "running");
            let tick = |el: f64, _| pb.set_position(el as u64);
            let report = match engine {
                Engine::Silo => driver::run(&w, &db, &cfg, &tick),
                Engine::Kv => driver::run(&w, &KvEngine(&db), &cfg, &tick),
            }
            .map_err(|e| format!("run failed: {e}"))?;
            pb.finish_and_clear();
            let m = Measurement::new(engine, report);
            println!(
                "ycsb run {r} engine={engine:?} threads={}: {:.0} txn/s ({:.0}/thread), {:.0} aborts/s {:?}",
                args.threads,
                m.throughput_txn_per_s,
                m.throughput_txn_per_s / args.threads as f64,
                m.aborts_per_s,
                m.abort_reasons
            );
            crate::bench::print_details(&m.result, check);
            crate::bench::print_durability(&m.result);
            runs.push(m);
        }
    }
    let mut per_engine = Vec::new();
    for &engine in &args.engine {
        let of = |f: &dyn Fn(&Measurement) -> f64| {
            median(runs.iter().filter(|m| m.engine == engine).map(f).collect())
        };
        per_engine.push(EngineSummary {
            engine,
            throughput_txn_per_s: of(&|m| m.throughput_txn_per_s),
            aborts_per_s: of(&|m| m.aborts_per_s),
        });
    }
    for e in &per_engine {
        println!(
            "ycsb engine={:?} threads={} keys={}: median {:.0} txn/s ({:.0} txn/s/thread), {:.0} aborts/s",
            e.engine,
            args.threads,
            args.keys,
            e.throughput_txn_per_s,
            e.throughput_txn_per_s / args.threads as f64,
            e.aborts_per_s
        );
    }
    if per_engine.len() > 1 {
        println!(
            "ycsb: {:?} / {:?} throughput ratio {:.3}",
            per_engine[1].engine,
            per_engine[0].engine,
            per_engine[1].throughput_txn_per_s / per_engine[0].throughput_txn_per_s
        );
    }
    crate::bench::print_logging(&db);
    let violations: usize = runs
        .iter()
        .map(|m| m.result.invariant_violations.len())
        .sum();
    let first = &per_engine[0];
    let res = YcsbResult {
        benchmark: "ycsb",
        throughput_txn_per_s: first.throughput_txn_per_s,
        aborts_per_s: first.aborts_per_s,
        engines: per_engine,
        runs,
        load_s,
        seed,
        config: args.clone(),
        machine: machine(),
    };
    if let Some(p) = &args.json {
        write_json(p, &res)?;
    }
    if violations > 0 {
        return Err(format!("{violations} invariant violations after the runs"));
    }
    Ok(res)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
