//! `granary check <workload>`: run a contended workload with history
//! recording on, then check the history with `granary-check`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use granary::{Engine, Options};
use granary_check::{check, Level, Report};
use granary_workloads::check::{run_check, CheckConfig, CheckRun, CheckWorkload};
use serde::Serialize;

use crate::designs::with_engine;
use crate::designs::EngineOptions;
use crate::protocol::{check_all, Isolation, Protocol, WorkloadInfo};
use crate::report::{fresh_seed, machine, progress, write_json, Machine};

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
    /// (transfers, scanning audits, inserting deposits), list-append
    /// (Elle's list-append) or write-skew (pairs kept at sum ≥ 1: snapshot
    /// isolation lets two transactions clear both).
    #[arg(value_parser = CheckWorkload::parse)]
    pub workload: CheckWorkload,
    /// Protocol(s) to check, comma-separated: each in turn, on a fresh
    /// database of its own, with the same seed; each is reported (and the
    /// exit status is 1 if any shows an anomaly). A protocol that cannot
    /// run the workload is refused before anything runs.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "silo")]
    pub protocol: Vec<Protocol>,
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
    /// Isolation level to check against. Default: the level each protocol
    /// claims (serializable for Silo, snapshot isolation for si). At si,
    /// the write skews the write-skew workload sees are reported but not
    /// counted as anomalies: snapshot isolation allows them.
    #[arg(long, value_enum)]
    pub level: Option<LevelArg>,
    /// Write the result as JSON (top-level `transactions` and `anomalies`;
    /// with several protocols, their totals and `protocols`, one entry per
    /// protocol).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the recorded history as JSON, for offline inspection (with
    /// several protocols, one file each: FILE's name with `-N-PROTOCOL`
    /// before its extension, N counting from 0).
    #[arg(long)]
    pub save_history: Option<PathBuf>,
    /// Epoch interval in milliseconds (short epochs interleave commits
    /// across epochs more often).
    #[arg(long, default_value_t = 5)]
    pub epoch_ms: u64,
    /// Keep a point index (a hash table over the table's keys) beside the
    /// tree, as `bench --point-index` does (every design but
    /// Deuteronomy).
    #[arg(long)]
    pub point_index: bool,
    /// Tell the designs that the table's keys are the numbers below
    /// `--keys` (`TableOptions::dense_keys`): hekaton, si and ermia keep
    /// their chains in an array by key, as `bench smallbank` does for its
    /// id-keyed tables. Other designs ignore it.
    #[arg(long)]
    pub dense_keys: bool,
    #[command(flatten)]
    pub bohm: crate::designs::BohmArgs,
    #[command(flatten)]
    pub tc: crate::designs::TcArgs,
}

/// One protocol's result.
#[derive(Serialize)]
struct Output {
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
    /// Workload invariants that failed, counted in `anomalies` (write
    /// skews among them at the serializable level).
    invariant_violations: Vec<String>,
    /// Write skews seen at snapshot isolation, which allows them: not
    /// counted.
    write_skews_allowed: usize,
    report: Report,
    machine: Machine,
}

/// Several protocols' results: the totals, then one entry each.
#[derive(Serialize)]
struct Outputs<'a> {
    transactions: usize,
    anomalies: usize,
    workload: &'static str,
    seed: u64,
    protocols: &'a [Output],
}

/// What `workload` is, for protocols to refuse.
fn info(workload: CheckWorkload) -> WorkloadInfo {
    let name = format!("check {workload}");
    let info = match workload {
        CheckWorkload::Bank => WorkloadInfo::unpartitioned(name, "its audits scan every account"),
        CheckWorkload::ListAppend | CheckWorkload::Ycsb | CheckWorkload::WriteSkew => {
            WorkloadInfo::unpartitioned(name, "the check workloads declare no partitions")
        }
    };
    // Every check transaction is a procedure (its loading and final audit
    // are closures, which a pipelined design runs alone).
    info.procedures(true, "").check()
}

/// The command that replays this run: the arguments as given, with the
/// seed it used in place of any `--seed` (so the request streams repeat;
/// thread interleavings still differ). Every other flag is kept as typed,
/// so the replay runs the same configuration.
fn replay_line(args: impl Iterator<Item = String>, seed: u64) -> String {
    let mut out = vec!["granary".to_string()];
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        if a == "--seed" {
            args.next();
            continue;
        }
        if a.starts_with("--seed=") {
            continue;
        }
        out.push(a);
    }
    out.push("--seed".into());
    out.push(seed.to_string());
    crate::report::shell_join(&out)
}

/// Returns the number of anomalies found over every protocol (the caller
/// exits non-zero if any).
pub fn run(a: CheckArgs) -> Result<usize, String> {
    check_all(&a.protocol, &info(a.workload))?;
    crate::bench::common::check_epoch_ms(a.epoch_ms)?;
    if a.txns == 0 {
        return Err("--txns must be at least 1, got 0 (there would be nothing to check)".into());
    }
    if a.threads == 0 {
        return Err("--threads must be at least 1, got 0".into());
    }
    crate::bench::common::check_theta(a.theta)?;
    let bohm = if a.protocol.iter().any(|p| p.traits().pipelined) {
        a.bohm.config()?
    } else {
        granary_protocols::bohm::Config::default()
    };
    let tc = a.tc.config()?;
    let seed = a.seed.unwrap_or_else(fresh_seed);
    eprintln!("{}", replay_line(std::env::args().skip(1), seed));
    let mut cfg = CheckConfig::new(a.workload);
    cfg.threads = a.threads;
    cfg.txns = a.txns;
    cfg.keys = a.keys.unwrap_or(cfg.keys);
    cfg.theta = a.theta;
    cfg.seed = seed;
    cfg.dense_keys = a.dense_keys;
    let silo = Options::default()
        .epoch_interval(Duration::from_millis(a.epoch_ms))
        .point_index(a.point_index);
    let mut opts = EngineOptions::new(&info(a.workload), a.threads, silo, None);
    opts.bohm = bohm;
    opts.bohm.point_index = a.point_index;
    opts.tc = tc;
    opts.dc = a.tc.dc;
    opts.dc_cache = a.tc.dc_cache_mb << 20;
    opts.etcd_endpoints = a.tc.etcd_endpoints.clone();
    let several = a.protocol.len() > 1;
    let mut outs = Vec::new();
    for (i, &p) in a.protocol.iter().enumerate() {
        if several {
            println!("protocol {p}:");
        }
        let history = a.save_history.as_ref().map(|f| {
            if several {
                numbered(f, i, p)
            } else {
                f.clone()
            }
        });
        outs.push(check_one(&a, p, &cfg, &opts, history.as_deref())?);
    }
    let anomalies = outs.iter().map(|o| o.anomalies).sum();
    if let Some(path) = &a.json {
        if several {
            write_json(
                path,
                &Outputs {
                    transactions: outs.iter().map(|o| o.transactions).sum(),
                    anomalies,
                    workload: a.workload.name(),
                    seed,
                    protocols: &outs,
                },
            )?;
        } else {
            write_json(path, &outs[0])?;
        }
    }
    Ok(anomalies)
}

/// `f` with `-i-protocol` before its extension.
fn numbered(f: &Path, i: usize, p: Protocol) -> PathBuf {
    let stem = f
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy());
    let name = match f.extension() {
        Some(e) => format!("{stem}-{i}-{p}.{}", e.to_string_lossy()),
        None => format!("{stem}-{i}-{p}"),
    };
    f.with_file_name(name)
}

/// Record and check `p`'s run, print what was found.
fn check_one(
    a: &CheckArgs,
    p: Protocol,
    cfg: &CheckConfig,
    opts: &EngineOptions<'_>,
    save_history: Option<&Path>,
) -> Result<Output, String> {
    let level = match a.level.map_or(p.isolation(), |l| match l {
        LevelArg::Serializable => Isolation::Serializable,
        LevelArg::Si => Isolation::Snapshot,
    }) {
        Isolation::Snapshot => Level::SnapshotIsolation,
        Isolation::Serializable | Isolation::None => Level::Serializable,
    };
    let run = with_engine!(p, opts, |db| record(&db, cfg)?);
    if let Some(f) = save_history {
        write_json(f, &run.history)?;
    }
    let t = Instant::now();
    let report = check(&run.history, level);
    let check_seconds = t.elapsed().as_secs_f64();
    // Write skews count at serializability; snapshot isolation allows
    // them (they are reported, not counted).
    let serializable = level == Level::Serializable;
    let violations: Vec<String> = run
        .violations(serializable)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let anomalies = report.anomaly_count() + violations.len();
    println!(
        "recorded {} committed transactions and {} aborted attempts in {:.2} s; checked in {:.2} s",
        run.committed,
        run.aborted,
        run.elapsed.as_secs_f64(),
        check_seconds
    );
    for v in violations.iter().take(10) {
        println!("invariant violated: {v}");
    }
    if violations.len() > 10 {
        println!("... {} invariant violations in all", violations.len());
    }
    if !serializable && !run.write_skews.is_empty() {
        println!(
            "{} write skews seen: allowed at snapshot isolation, not counted \
             (check at --level serializable to count them)",
            run.write_skews.len()
        );
    }
    if !report.is_ok() {
        print!("{}", report.summary(10));
        println!("smallest anomaly, with its transactions:");
        println!("{}", report.explain(&run.history));
    }
    // One count, told whole: what the checker found and the invariants
    // that failed, over every transaction checked (the timed ones and
    // those that loaded or audited the data).
    let parts = if violations.is_empty() {
        String::new()
    } else {
        format!(
            " ({} found by the checker, {} invariant violations)",
            report.anomaly_count(),
            violations.len()
        )
    };
    let extra = (report.transactions as u64).saturating_sub(run.committed);
    let setup = if extra == 0 {
        String::new()
    } else {
        format!(
            " ({} recorded, {extra} that loaded or audited the data)",
            run.committed
        )
    };
    println!(
        "{anomalies} anomalies{parts} in {} transactions{setup}",
        report.transactions
    );
    Ok(Output {
        transactions: report.transactions,
        anomalies,
        aborted_attempts: run.aborted,
        workload: a.workload.name(),
        protocol: p,
        level,
        threads: a.threads,
        keys: cfg.keys,
        theta: cfg.theta,
        seed: cfg.seed,
        run_seconds: run.elapsed.as_secs_f64(),
        check_seconds,
        invariant_violations: violations,
        write_skews_allowed: if serializable {
            0
        } else {
            run.write_skews.len()
        },
        report,
        machine: machine(),
    })
}

fn record<E: Engine>(engine: &E, cfg: &CheckConfig) -> Result<CheckRun, String> {
    let pb = progress(cfg.txns, "recording");
    let run = run_check(engine, cfg, &|n| pb.set_position(n)).map_err(|e| e.to_string());
    pb.finish_and_clear();
    run
}

#[cfg(test)]
mod tests {
    use super::replay_line;
    use clap::Parser;

    /// The replay line parses back to the run's whole configuration, with
    /// the seed the run used.
    #[test]
    fn the_replay_line_reproduces_the_whole_configuration() {
        let given = "check write-skew --protocol si,deuteronomy --level serializable --dc disk \
                     --tc-log-mb 64 --tc-soft-versions 1000 --keys 40 --theta 0.5 --epoch-ms 3 \
                     --threads 3 --txns 5000 --dense-keys --point-index --bohm-batch 7";
        let args = || given.split_whitespace().map(str::to_string);
        for (extra, seed) in [
            (vec![], 11),
            (vec!["--seed", "5"], 5),
            (vec!["--seed=5"], 5),
        ] {
            let argv: Vec<String> = args().chain(extra.iter().map(|s| s.to_string())).collect();
            let line = replay_line(argv.into_iter(), seed);
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words[0], "granary");
            let replayed = crate::Cli::try_parse_from(&words).expect("the replay line parses");
            let original = crate::Cli::try_parse_from(
                std::iter::once("granary".to_string())
                    .chain(args())
                    .chain(["--seed".to_string(), seed.to_string()]),
            )
            .unwrap();
            assert_eq!(format!("{replayed:?}"), format!("{original:?}"), "{line}");
        }
    }
}
