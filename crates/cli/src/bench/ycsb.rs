//! `granary bench ycsb`: Silo §5.2's YCSB variant — one table of 8-byte
//! keys and 100-byte values, 80% single-key read transactions and 20%
//! single-key read-modify-write transactions, keys uniform.
//!
//! `--protocol kv` runs the same operations on the bare index with no
//! transactions (the paper's Key-Value, [`granary::kv`]); `--global-tid`
//! takes commit TIDs from one shared counter (MemSilo+GlobalTID). With
//! several protocols (`--protocol silo,kv`), each loads its own table and
//! the runs alternate ([`crate::session`]).
//!
//! Every run goes through the shared driver ([`granary_workloads::driver`],
//! as `bench tpcc`, `smallbank` and `ycsb-mix` do), so runs also report
//! per-type latency, a per-second series, memory and (Silo only) an
//! invariant check. The workload is this command's own rather than
//! `ycsb-mix`'s `silo` preset: the same transactions, but without the
//! general generator's per-transaction planning and declared key sets,
//! which cost about an eighth more instructions per transaction (this is
//! the command that compares against Silo's own numbers).

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Args;
use granary::Options;
use granary_workloads::driver::{DriverConfig, RunReport};
use granary_workloads::silo52::Silo52;
use granary_workloads::ycsb;
use serde::Serialize;

use crate::designs::EngineOptions;
use crate::interleave::{self, Summary};
use crate::protocol::{check_all, Protocol, WorkloadInfo};
use crate::report::{fresh_seed, machine, write_json, Machine};

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
    /// Protocol(s) to run, comma-separated: `kv` (Silo's bare index, no
    /// transactions: the paper's Key-Value baseline) runs here only.
    /// Several (e.g. `silo,kv`) each get their own table, loaded alike
    /// before any measured run; the runs then alternate protocol by
    /// protocol, and each protocol's medians and throughput ratio to the
    /// first are reported. `--engine` is an old name of this flag.
    #[arg(
        long,
        alias = "engine",
        value_enum,
        value_delimiter = ',',
        default_value = "silo"
    )]
    pub protocol: Vec<Protocol>,
    /// Measured runs per protocol; medians are reported.
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
    /// A name for this run, kept in the JSON: `granary plot` names the
    /// run's series and bars by it (`--kind configs` draws a bar per label).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    #[command(flatten)]
    pub durable: crate::designs::DurableArgs,
}

/// The JSON result. Top-level `throughput_txn_per_s` / `aborts_per_s` are the
/// medians of the first `--protocol` (a contract scripts rely on);
/// `protocols` has each protocol's [`Summary`], and `engines` the older
/// shape of the same medians.
#[derive(Serialize, Debug)]
pub struct YcsbResult {
    pub benchmark: &'static str,
    pub throughput_txn_per_s: f64,
    pub aborts_per_s: f64,
    pub protocols: Vec<Summary>,
    pub engines: Vec<EngineSummary>,
    pub runs: Vec<Measurement>,
    pub load_s: f64,
    pub seed: u64,
    pub config: YcsbArgs,
    pub machine: Machine,
}

/// A protocol's medians, as `bench ycsb` wrote them before `protocols`.
#[derive(Serialize, Debug)]
pub struct EngineSummary {
    pub engine: Protocol,
    pub throughput_txn_per_s: f64,
    pub aborts_per_s: f64,
}

/// One measured run of one protocol: the figures `bench ycsb` always
/// wrote, then the driver's full report.
#[derive(Serialize, Debug)]
pub struct Measurement {
    pub protocol: Protocol,
    pub throughput_txn_per_s: f64,
    pub aborts_per_s: f64,
    pub commits: u64,
    pub aborts: u64,
    pub abort_reasons: BTreeMap<&'static str, u64>,
    pub elapsed_s: f64,
    pub result: RunReport,
}

/// A run's conflicts by reason, over every transaction type.
fn abort_reasons(r: &RunReport) -> BTreeMap<&'static str, u64> {
    let mut by = BTreeMap::new();
    for t in &r.types {
        for (&reason, &n) in &t.aborts {
            *by.entry(reason).or_insert(0) += n;
        }
    }
    by
}

impl Measurement {
    fn new(protocol: Protocol, r: RunReport) -> Measurement {
        Measurement {
            protocol,
            throughput_txn_per_s: r.throughput_txn_per_s,
            aborts_per_s: r.aborts_per_s,
            commits: r.commits,
            aborts: r.aborts,
            abort_reasons: abort_reasons(&r),
            elapsed_s: r.elapsed_s,
            result: r,
        }
    }
}

pub fn run(args: YcsbArgs) -> Result<YcsbResult, String> {
    crate::bench::common::check_run(args.threads, args.seconds, args.warmup, args.latency_every)?;
    if args.keys == 0 {
        return Err("--keys must be at least 1, got 0".into());
    }
    if args.read_pct > 100 {
        return Err(format!(
            "--read-pct is a percentage, at most 100, got {}",
            args.read_pct
        ));
    }
    crate::bench::common::check_epoch_ms(args.epoch_ms)?;
    if args.value_bytes < 8 || args.value_bytes > granary::MAX_VALUE_BYTES {
        return Err(format!(
            "--value-bytes must be between 8 and {}, got {}",
            granary::MAX_VALUE_BYTES,
            args.value_bytes
        ));
    }
    if args.runs == 0 || args.protocol.is_empty() {
        return Err("need --runs ≥ 1 and at least one --protocol".into());
    }
    let info = WorkloadInfo::partitioned("bench ycsb", ycsb::partitioning())
        .single_key(true)
        .durable(args.durable.durable.is_some());
    // Refused before anything is printed or loaded.
    check_all(&args.protocol, &info)?;
    crate::guard::fits(
        &args.protocol,
        crate::guard::Data::Records {
            count: args.keys,
            bytes: args.value_bytes as u64 + 72,
        },
        &format!("--keys {} of --value-bytes {}", args.keys, args.value_bytes),
    )?;
    crate::guard::warn_threads(args.threads);
    let seed = args.seed.unwrap_or_else(fresh_seed);
    // The run's configuration in flag words, with the results (stdout).
    let mut flags = String::new();
    for (set, flag) in [
        (args.global_tid, " --global-tid"),
        (args.no_snapshots, " --no-snapshots"),
        (args.always_versions, " --always-versions"),
    ] {
        if set {
            flags += flag;
        }
    }
    println!(
        "ycsb: --keys {} --value-bytes {} --read-pct {}{flags} {}",
        args.keys,
        args.value_bytes,
        args.read_pct,
        crate::bench::common::run_flags(
            &args.protocol,
            args.threads,
            (args.seconds, args.warmup),
            args.runs,
            seed,
            &args.durable
        )
    );
    let silo = Options::default()
        .epoch_interval(Duration::from_millis(args.epoch_ms))
        .global_tid(args.global_tid)
        .snapshots(!args.no_snapshots)
        .snapshot_versions_idle_epochs(if args.always_versions {
            None
        } else {
            Some(250)
        })
        .max_workers(args.threads + 8);
    let opts = EngineOptions::new(&info, args.threads, silo, Some(&args.durable));
    // kv's read-modify-writes are not atomic: they may lose updates.
    let checked = |p: Protocol| p != Protocol::Kv;
    if args.protocol.iter().any(|&p| !checked(p)) {
        eprintln!(
            "ycsb: invariants not checked: kv runs are not transactional (they can lose updates)"
        );
    }
    let loaders = args
        .threads
        .min(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let make = |p| {
        let (keys, bytes, read) = (args.keys, args.value_bytes, args.read_pct);
        Ok(Silo52::new(keys, bytes, read, loaders, checked(p)))
    };
    let loaded = interleave::load_all("ycsb", &args.protocol, &opts, &info, make)?;

    let cfg = DriverConfig {
        threads: args.threads,
        warmup: Duration::from_secs_f64(args.warmup),
        duration: Duration::from_secs_f64(args.seconds),
        seed,
        latency_every: args.latency_every,
        breakdown: args.breakdown,
    };
    let reports = interleave::alternate(&loaded, args.runs, &cfg, &mut |r, p, report| {
        // Only the reasons that occurred, as `reason=count`.
        let reasons: String = abort_reasons(report)
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!(" {k}={n}"))
            .collect();
        println!(
            "ycsb run {r} protocol={p} threads={}: {:.0} txn/s ({:.0}/thread), {:.0} aborts/s{reasons}",
            args.threads,
            report.throughput_txn_per_s,
            report.throughput_txn_per_s / args.threads as f64,
            report.aborts_per_s,
        );
        crate::bench::common::print_details(report, checked(p));
        crate::designs::print_durability(report);
    })?;
    let summaries = interleave::summarize(&loaded, &reports);
    for s in &summaries {
        println!(
            "ycsb protocol={} threads={} keys={}: median {:.0} txn/s ({:.0} txn/s/thread), {:.0} aborts/s",
            s.protocol,
            args.threads,
            args.keys,
            s.throughput_txn_per_s,
            s.throughput_txn_per_s / args.threads as f64,
            s.aborts_per_s
        );
    }
    for (i, s) in summaries.iter().enumerate().skip(1) {
        println!(
            "ycsb: {} / {} throughput ratio {:.3}",
            crate::bench::common::named(&summaries, i),
            crate::bench::common::named(&summaries, 0),
            s.throughput_ratio
        );
    }
    crate::bench::common::print_memory("ycsb", &summaries);
    for l in &loaded {
        l.print_logging();
    }
    let violations = interleave::violations(&reports);
    // Run by run, alternating, as they ran.
    let mut runs = Vec::new();
    let mut per: Vec<_> = reports.into_iter().map(Vec::into_iter).collect();
    for _ in 0..args.runs {
        for (l, rs) in loaded.iter().zip(&mut per) {
            runs.extend(rs.next().map(|r| Measurement::new(l.protocol(), r)));
        }
    }
    let first = &summaries[0];
    let res = YcsbResult {
        benchmark: "ycsb",
        throughput_txn_per_s: first.throughput_txn_per_s,
        aborts_per_s: first.aborts_per_s,
        engines: summaries
            .iter()
            .map(|s| EngineSummary {
                engine: s.protocol,
                throughput_txn_per_s: s.throughput_txn_per_s,
                aborts_per_s: s.aborts_per_s,
            })
            .collect(),
        load_s: first.load_s,
        protocols: summaries,
        runs,
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
