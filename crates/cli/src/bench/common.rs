//! What every `granary bench <workload>` run by the shared driver
//! (`granary_workloads::driver`) shares: the common flags, the run over
//! each protocol, the printed report and the JSON.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use granary::Options;
use granary_workloads::driver::{DriverConfig, RunReport, Workload};
use serde::Serialize;

use crate::designs::{print_durability, BohmArgs, DurableArgs, EngineOptions, SiloArgs, TcArgs};
use crate::interleave::{self, Summary};
use crate::protocol::{check_all, Protocol, WorkloadInfo};
use crate::report::{fresh_seed, machine, write_json, Machine};

/// Flags every driver benchmark takes.
#[derive(Args, Debug, Clone, Serialize)]
pub struct CommonArgs {
    /// Protocol(s) to run, comma-separated. Several (e.g. `silo,silo`)
    /// each get their own database, loaded alike before any measured run;
    /// the runs then alternate protocol by protocol, and each protocol's
    /// medians and throughput ratio to the first are reported. A protocol
    /// that cannot run the workload is refused before anything runs.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "silo")]
    pub protocol: Vec<Protocol>,
    /// Measured runs per protocol; medians are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Measured seconds (after warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Warm-up seconds, run but not counted.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Random seed (printed; random if not given).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Epoch interval in milliseconds (Silo: 40).
    #[arg(long, default_value_t = 40)]
    pub epoch_ms: u64,
    /// Time one transaction in this many (1 = every one).
    #[arg(long, default_value_t = 1)]
    pub latency_every: u32,
    /// Report where each transaction type's time goes (index, record
    /// access, commit, aborted work, other), as the Silo performance study
    /// does. Adds two clock reads per probed operation; off by default.
    #[arg(long)]
    pub breakdown: bool,
    /// Keep a point index beside the tree of each table the workload
    /// reads mostly by key (YCSB's, SmallBank's, TPC-C's warehouse,
    /// district, customer, item and stock): a hash table that finds a
    /// present key with one bucket probe instead of a descent. Absent keys,
    /// scans and phantom checks still use the tree. Not in the papers
    /// (Silo has Masstree alone). Every design but Deuteronomy.
    #[arg(long)]
    pub point_index: bool,
    /// Write every figure, the configuration and the machine as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A name for this run, kept in the JSON: `granary plot` names the
    /// run's series and bars by it (`--kind configs` draws a bar per label).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    #[command(flatten)]
    pub durable: DurableArgs,
    #[command(flatten)]
    pub silo: SiloArgs,
    #[command(flatten)]
    pub bohm: BohmArgs,
    #[command(flatten)]
    pub tc: TcArgs,
}

/// The JSON result: top-level `throughput_txn_per_s` / `aborts_per_s` are
/// a contract scripts rely on. With several protocols (or runs), the
/// top-level figures are the first protocol's medians, `result` its median
/// run, and `protocols` has every protocol's [`Summary`].
#[derive(Serialize)]
struct Output<'a, C: Serialize> {
    benchmark: &'static str,
    throughput_txn_per_s: f64,
    aborts_per_s: f64,
    protocol: Protocol,
    seed: u64,
    load_s: f64,
    result: &'a RunReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    protocols: Option<&'a [Summary]>,
    config: &'a C,
    machine: Machine,
}

fn opts(c: &CommonArgs) -> Options {
    let o = Options::default()
        .epoch_interval(Duration::from_millis(c.epoch_ms))
        .max_workers(c.threads + 16)
        .point_index(c.point_index);
    c.silo.apply(o)
}

/// The common flags' values are in range; the error names the flag.
pub(crate) fn check_common(c: &CommonArgs) -> Result<(), String> {
    check_run(c.threads, c.seconds, c.warmup, c.latency_every)?;
    if let Some(s) = c.durable.checkpoint_interval {
        if !(s.is_finite() && s > 0.0) {
            return Err(format!("--checkpoint-interval must be positive, got {s}"));
        }
    }
    // Flags a protocol does not take are refused by `flags::check`.
    check_epoch_ms(c.epoch_ms)
}

/// The run's flags every driver benchmark and `bench ycsb` take are in
/// range; the error names the flag.
///
/// # Errors
/// The first out of range.
pub(crate) fn check_run(
    threads: usize,
    seconds: f64,
    warmup: f64,
    latency_every: u32,
) -> Result<(), String> {
    if threads == 0 {
        return Err("--threads must be at least 1, got 0".into());
    }
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("--seconds must be positive, got {seconds}"));
    }
    if !(warmup.is_finite() && warmup >= 0.0) {
        return Err(format!("--warmup must be at least 0, got {warmup}"));
    }
    if latency_every == 0 {
        return Err("--latency-every must be at least 1, got 0".into());
    }
    Ok(())
}

/// `--theta` is a Zipfian skew in [0, 1).
///
/// # Errors
/// Anything else, named.
pub(crate) fn check_theta(theta: f64) -> Result<(), String> {
    if !(0.0..1.0).contains(&theta) {
        return Err(format!(
            "--theta is a Zipfian skew, at least 0 and below 1, got {theta}"
        ));
    }
    Ok(())
}

/// `--epoch-ms` is at least 1 (an epoch of 0 ms would spin).
///
/// # Errors
/// 0, named.
pub(crate) fn check_epoch_ms(ms: u64) -> Result<(), String> {
    if ms == 0 {
        return Err("--epoch-ms must be at least 1, got 0".into());
    }
    Ok(())
}

/// The flags every benchmark shares, as a user types them: `--protocol
/// … --seed S`, then `--durable DIR` if set (the run's header).
pub(crate) fn run_flags(
    protocols: &[Protocol],
    threads: usize,
    (seconds, warmup): (f64, f64),
    runs: usize,
    seed: u64,
    durable: &DurableArgs,
) -> String {
    let names: Vec<String> = protocols.iter().map(|p| p.name()).collect();
    let mut s = format!(
        "--protocol {} --threads {threads} --seconds {seconds} --warmup {warmup} --runs {runs} \
         --seed {seed}",
        names.join(",")
    );
    if let Some(d) = &durable.durable {
        s += &format!(" --durable {}", d.display());
    }
    s
}

/// A value-enum flag's value as a user types it (`new-order`).
pub(crate) fn flag_value<E: ValueEnum>(e: &E) -> String {
    e.to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// Load `make(protocol)`'s workload into a fresh database of each
/// `--protocol` and run them, alternating; print and write the report.
/// `info` says what the workload is, for protocols to refuse; `about` is
/// the workload's configuration in flag words, for the header.
pub(crate) fn drive<W: Workload + 'static, C: Serialize>(
    name: &'static str,
    about: &str,
    make: impl Fn(Protocol) -> Result<W, String>,
    info: WorkloadInfo,
    c: &CommonArgs,
    config: &C,
) -> Result<Vec<Summary>, String> {
    check_common(c)?;
    if c.runs == 0 {
        return Err("--runs must be at least 1, got 0".into());
    }
    let info = info.durable(c.durable.durable.is_some());
    // Refused before anything is printed or loaded.
    check_all(&c.protocol, &info)?;
    crate::guard::warn_threads(c.threads);
    let tc = c.tc.config()?;
    let bohm = if c.protocol.contains(&Protocol::Bohm) {
        Some(c.bohm.config()?)
    } else {
        None
    };
    let seed = c.seed.unwrap_or_else(fresh_seed);
    // The run's configuration in flag words, with the results (stdout).
    println!(
        "{name}:{}{about} {}",
        if about.is_empty() { "" } else { " " },
        run_flags(
            &c.protocol,
            c.threads,
            (c.seconds, c.warmup),
            c.runs,
            seed,
            &c.durable
        )
    );
    let mut opts = EngineOptions::new(&info, c.threads, opts(c), Some(&c.durable));
    if let Some(bohm) = bohm {
        opts.bohm = bohm;
        opts.bohm.point_index = c.point_index;
    }
    opts.tc = tc;
    opts.dc = c.tc.dc;
    opts.dc_cache = c.tc.dc_cache_mb << 20;
    opts.etcd_endpoints = c.tc.etcd_endpoints.clone();
    let loaded = interleave::load_all(name, &c.protocol, &opts, &info, make)?;
    let cfg = DriverConfig {
        threads: c.threads,
        warmup: Duration::from_secs_f64(c.warmup),
        duration: Duration::from_secs_f64(c.seconds),
        seed,
        latency_every: c.latency_every,
        breakdown: c.breakdown,
    };
    // One protocol, one run: the report as it always was.
    let single = loaded.len() == 1 && c.runs == 1;
    let reports = interleave::alternate(&loaded, c.runs, &cfg, &mut |r, p, report| {
        if single {
            print_report(&format!("{name} protocol={p}"), c.threads, report);
        } else {
            print_report(&format!("{name} run {r} protocol={p}"), c.threads, report);
        }
    })?;
    let summaries = interleave::summarize(&loaded, &reports);
    if !single {
        print_summaries(name, c.threads, &summaries);
        print_memory(name, &summaries);
    }
    for l in &loaded {
        l.print_logging();
    }
    let first = &summaries[0];
    if let Some(p) = &c.json {
        write_json(
            p,
            &Output {
                benchmark: name,
                throughput_txn_per_s: first.throughput_txn_per_s,
                aborts_per_s: first.aborts_per_s,
                protocol: first.protocol,
                seed,
                load_s: first.load_s,
                result: &first.result,
                protocols: (!single).then_some(&summaries[..]),
                config,
                machine: machine(),
            },
        )?;
    }
    let violations = interleave::violations(&reports);
    if violations > 0 {
        return Err(format!("{violations} invariant violations after the run"));
    }
    Ok(summaries)
}

/// Summary `i`'s protocol, told apart by its place when `--protocol`
/// names it twice (`silo (#1)`, `silo (#2)`).
pub(crate) fn named(summaries: &[Summary], i: usize) -> String {
    let p = summaries[i].protocol;
    if summaries.iter().filter(|s| s.protocol == p).count() > 1 {
        format!("{p} (#{})", i + 1)
    } else {
        p.to_string()
    }
}

/// With several databases in one process, each one's own memory (the
/// process's resident set is all of them together).
pub(crate) fn print_memory(name: &str, summaries: &[Summary]) {
    if summaries.len() < 2 {
        return;
    }
    let own: Vec<String> = (0..summaries.len())
        .filter_map(|i| {
            let b = summaries[i].database_bytes?;
            Some(format!(
                "{} {:.1} MiB",
                named(summaries, i),
                b as f64 / 1048576.0
            ))
        })
        .collect();
    if !own.is_empty() {
        println!(
            "{name} memory, each database's own (resident-set growth over its load and runs; \
             memory one run freed can be reused by a later load, so later ones may read low): {}",
            own.join(", ")
        );
    }
}

/// Each protocol's medians and its ratio to the first.
fn print_summaries(name: &str, threads: usize, summaries: &[Summary]) {
    let named = |i: usize| named(summaries, i);
    for (i, s) in summaries.iter().enumerate() {
        let runs = s.runs_txn_per_s.len();
        let ratio = if i == 0 {
            String::new()
        } else {
            format!(
                "; {:.3}x the throughput of {}",
                s.throughput_ratio,
                named(0)
            )
        };
        println!(
            "{name} protocol={} threads={threads}: median of {runs} run{} {:.0} txn/s ({:.0}/thread), {:.0} aborts/s{ratio}",
            named(i),
            if runs == 1 { "" } else { "s" },
            s.throughput_txn_per_s,
            s.throughput_txn_per_s / threads as f64,
            s.aborts_per_s,
        );
    }
}

/// A run's headline (`label` names it: the benchmark, and with several
/// runs the run and protocol), then its details.
fn print_report(label: &str, threads: usize, r: &RunReport) {
    println!(
        "{label} threads={threads}: {:.0} txn/s ({:.0}/thread), {:.0} aborts/s over {:.1} s",
        r.throughput_txn_per_s,
        r.throughput_txn_per_s / threads as f64,
        r.aborts_per_s,
        r.elapsed_s
    );
    print_details(r, true);
    print_durability(r);
}

/// The report below its headline: per-type figures, the breakdown, the
/// per-second series, memory and the invariants (`checked`: whether the
/// workload checked them).
pub(crate) fn print_details(r: &RunReport, checked: bool) {
    // Wide enough for the longest type name (`deposit_checking`).
    let w = r
        .types
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(0)
        .max(14);
    println!(
        "  {:<w$} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}  aborts by reason",
        "type", "commits", "rollback", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    // A type the mix never ran gets no row of zeros, only its name.
    let ran = |t: &&granary_workloads::driver::TypeReport| {
        t.commits > 0 || t.user_aborts > 0 || t.aborts.values().any(|&n| n > 0)
    };
    let idle: Vec<&str> = r.types.iter().filter(|t| !ran(t)).map(|t| t.name).collect();
    for t in r.types.iter().filter(ran) {
        let reasons: Vec<String> = t
            .aborts
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        println!(
            "  {:<w$} {:>10} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}  {}",
            t.name,
            t.commits,
            t.user_aborts,
            t.latency_us.p50,
            t.latency_us.p90,
            t.latency_us.p99,
            t.latency_us.p999,
            t.latency_us.max,
            reasons.join(" ")
        );
    }
    if !idle.is_empty() {
        println!("  no transactions of: {}", idle.join(", "));
    }
    if let Some(b) = &r.breakdown {
        println!(
            "  {:<w$} {:>8} {:>8} {:>8} {:>8} {:>8}   (share of each type's time)",
            "breakdown", "index", "record", "commit", "aborted", "other"
        );
        let pct = |x: f64| format!("{:.1}%", x * 100.0);
        let part = |x: Option<f64>| x.map_or_else(|| "-".to_string(), pct);
        // A type that never ran has no time to split (it is listed above).
        for t in b.iter().filter(|t| !idle.contains(&t.name)) {
            println!(
                "  {:<w$} {:>8} {:>8} {:>8} {:>8} {:>8}",
                t.name,
                part(t.index),
                part(t.record),
                part(t.commit),
                pct(t.aborted),
                pct(t.other)
            );
        }
        if b.iter().any(|t| t.index.is_none()) {
            println!(
                "  (this design does not split its time into index, record and commit: \
                 its committed work is in `other`; only Silo is instrumented)"
            );
        }
    }
    println!("  per second: {:?}", r.per_second);
    let mib = |b: f64| b / 1048576.0;
    let (rss, peak) = (mib(r.rss_bytes as f64), mib(r.peak_rss_bytes as f64));
    match (r.database_bytes, r.databases_loaded) {
        (Some(own), n) if n > 1 => println!(
            "  memory: its database {:.1} MiB (resident-set growth over its load and runs); \
             the process {rss:.1} MiB, peak {peak:.1} MiB, with {n} databases loaded",
            mib(own as f64)
        ),
        (Some(own), _) => println!(
            "  memory: rss {rss:.1} MiB, peak {peak:.1} MiB; the database {:.1} MiB of it \
             (resident-set growth over its load and runs)",
            mib(own as f64)
        ),
        (None, _) => println!("  memory: rss {rss:.1} MiB, peak {peak:.1} MiB"),
    }
    if !checked {
        println!("  invariants: not checked");
    } else if r.invariant_violations.is_empty() {
        println!("  invariants: all hold");
    } else {
        for v in r.invariant_violations.iter().take(20) {
            println!("  INVARIANT VIOLATED: {v}");
        }
    }
}
