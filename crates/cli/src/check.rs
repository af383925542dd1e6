//! `granary check <workload>`: run a contended workload with history
//! recording on, then check the history with `granary-check`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use granary::{Database, Engine, Options};
use granary_check::{check, Level, Report};
use granary_workloads::check::{run_check, CheckConfig, CheckRun, CheckWorkload};
use serde::Serialize;

use crate::report::{fresh_seed, machine, progress, write_json, Machine};

#[derive(Clone, Copy, Debug, ValueEnum, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Silo's serializable OCC (the default engine).
    Silo,
    /// Silo with read-set validation turned off: NOT serializable. Exists
    /// only in builds with the test-only `mutant` feature, to show the
    /// checker catching a broken engine.
    #[cfg(feature = "mutant")]
    SiloMutant,
}

#[derive(Clone, Copy, Debug, ValueEnum, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LevelArg {
    /// No cycle at all in the dependency graph (Adya PL-3).
    Serializable,
    /// Snapshot isolation: no G0/G1, and every cycle has two adjacent
    /// anti-dependency (rw) edges.
    Si,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// Workload: ycsb (Zipfian 2–8-key read/write transactions), bank
    /// (transfers, scanning audits, inserting deposits) or list-append
    /// (Elle's list-append).
    #[arg(value_parser = CheckWorkload::parse)]
    pub workload: CheckWorkload,
    /// Concurrency-control protocol to check.
    #[arg(long, value_enum, default_value = "silo")]
    pub protocol: Protocol,
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Committed transactions to record and check.
    #[arg(long, default_value_t = 100_000)]
    pub txns: u64,
    /// Keys (accounts for bank; lists per generation for list-append).
    /// Default: the workload's own, small for contention.
    #[arg(long)]
    pub keys: Option<u64>,
    /// Zipfian skew of key choice, in [0, 1).
    #[arg(long, default_value_t = 0.99)]
    pub theta: f64,
    /// Random seed (printed; pass it back to replay the same request
    /// streams — thread interleavings still differ run to run).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Isolation level to check against. Default: the level the protocol
    /// claims (serializable for Silo).
    #[arg(long, value_enum)]
    pub level: Option<LevelArg>,
    /// Write the result as JSON (top-level `transactions` and `anomalies`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the recorded history as JSON, for offline inspection.
    #[arg(long)]
    pub save_history: Option<PathBuf>,
    /// Epoch interval in milliseconds (short epochs interleave commits
    /// across epochs more often).
    #[arg(long, default_value_t = 5)]
    pub epoch_ms: u64,
}

#[derive(Serialize)]
struct Output<'a> {
    /// Committed transactions checked.
    transactions: usize,
    /// Anomalies found by the checker plus workload invariant violations.
    anomalies: usize,
    aborted_attempts: u64,
    workload: &'static str,
    protocol: Protocol,
    level: Level,
    threads: usize,
    keys: u64,
    theta: f64,
    seed: u64,
    run_seconds: f64,
    check_seconds: f64,
    invariant_violations: &'a [String],
    report: &'a Report,
    machine: Machine,
}

/// Returns the number of anomalies found (the caller exits non-zero if
/// any).
pub fn run(a: CheckArgs) -> Result<usize, String> {
    let seed = a.seed.unwrap_or_else(fresh_seed);
    eprintln!(
        "granary check {} --protocol {} --threads {} --txns {} --seed {seed}",
        a.workload,
        a.protocol.to_possible_value().expect("named").get_name(),
        a.threads,
        a.txns
    );
    let mut cfg = CheckConfig::new(a.workload);
    cfg.threads = a.threads;
    cfg.txns = a.txns;
    cfg.keys = a.keys.unwrap_or(cfg.keys);
    cfg.theta = a.theta;
    cfg.seed = seed;
    let opts = Options::default().epoch_interval(Duration::from_millis(a.epoch_ms.max(1)));
    let level = match a.level {
        Some(LevelArg::Serializable) | None => Level::Serializable,
        Some(LevelArg::Si) => Level::SnapshotIsolation,
    };
    let run = match a.protocol {
        Protocol::Silo => record(&Database::new(opts).map_err(|e| e.to_string())?, &cfg)?,
        #[cfg(feature = "mutant")]
        Protocol::SiloMutant => record(
            &Database::new(opts.mutant_skip_read_validation(true)).map_err(|e| e.to_string())?,
            &cfg,
        )?,
    };
    if let Some(p) = &a.save_history {
        write_json(p, &run.history)?;
    }
    let t = Instant::now();
    let report = check(&run.history, level);
    let check_seconds = t.elapsed().as_secs_f64();
    let anomalies = report.anomaly_count() + run.invariant_violations.len();
    println!(
        "recorded {} committed transactions and {} aborted attempts in {:.2} s; checked in {:.2} s",
        run.committed,
        run.aborted,
        run.elapsed.as_secs_f64(),
        check_seconds
    );
    for v in run.invariant_violations.iter().take(10) {
        println!("invariant violated: {v}");
    }
    if run.invariant_violations.len() > 10 {
        println!(
            "... {} invariant violations in all",
            run.invariant_violations.len()
        );
    }
    if !report.is_ok() {
        print!("{}", report.summary(10));
        println!("smallest anomaly, with its transactions:");
        println!("{}", report.explain(&run.history));
    }
    println!(
        "{anomalies} anomalies in {} transactions",
        report.transactions
    );
    if let Some(p) = &a.json {
        write_json(
            p,
            &Output {
                transactions: report.transactions,
                anomalies,
                aborted_attempts: run.aborted,
                workload: a.workload.name(),
                protocol: a.protocol,
                level,
                threads: a.threads,
                keys: cfg.keys,
                theta: cfg.theta,
                seed,
                run_seconds: run.elapsed.as_secs_f64(),
                check_seconds,
                invariant_violations: &run.invariant_violations,
                report: &report,
                machine: machine(),
            },
        )?;
    }
    Ok(anomalies)
}

fn record<E: Engine>(engine: &E, cfg: &CheckConfig) -> Result<CheckRun, String> {
    let pb = progress(cfg.txns, "recording");
    let run = run_check(engine, cfg, &|n| pb.set_position(n)).map_err(|e| e.to_string());
    pb.finish_and_clear();
    run
}
