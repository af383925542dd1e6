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

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use granary::{Error, Options, TableId, Tx, TxError, TxRunner};
use granary_workloads::driver::{
    self, run_until_committed, DriverConfig, Exec, RunReport, Workload,
};
use granary_workloads::rng::Rng;
use serde::Serialize;

use crate::kv::KvEngine;
use crate::report::{fresh_seed, machine, progress, write_json, Machine};

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
    let mut w = Silo52 {
        keys: args.keys,
        loaders: args
            .threads
            .min(std::thread::available_parallelism().map_or(1, |n| n.get())),
        value_bytes: args.value_bytes,
        read_pct: args.read_pct,
        check,
        table: None,
        rmw_ops: Arc::new(AtomicU64::new(0)),
    };
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

pub fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// The transaction types, in report order.
const TYPES: [&str; 2] = ["read_only", "update"];
const READ_ONLY: usize = 0;
const UPDATE: usize = 1;
/// Rows per loading transaction.
const LOAD_BATCH: u64 = 1000;
/// Rows per verification transaction.
const VERIFY_CHUNK: u64 = 20_000;

/// Silo §5.2's YCSB as a driver workload: keys `0..keys` (8-byte big
/// endian) with zeroed values; each transaction reads one uniform key and,
/// with probability `100 - read_pct`%, writes it back with the counter in
/// its first 8 bytes (little endian) bumped.
///
/// **Invariant** (checked after each run when `check`): every key is
/// present with its size, and the counters sum to the read-modify-writes
/// committed so far (each thread tallies its own and hands the count back
/// when dropped).
struct Silo52 {
    keys: u64,
    /// Loader threads.
    loaders: usize,
    value_bytes: usize,
    read_pct: u32,
    /// Check the invariant. Off when a kv engine runs on the table: its
    /// read-modify-writes are not atomic and may lose updates.
    check: bool,
    table: Option<TableId>,
    /// Read-modify-writes committed, handed back by threads when dropped.
    rmw_ops: Arc<AtomicU64>,
}

struct Silo52Thread {
    rng: Rng,
    /// The value being written.
    val: Vec<u8>,
    rmw_ops: u64,
    sink: Arc<AtomicU64>,
}

impl Drop for Silo52Thread {
    fn drop(&mut self) {
        // Relaxed: read after the driver joins this thread.
        self.sink.fetch_add(self.rmw_ops, Ordering::Relaxed);
    }
}

impl Workload for Silo52 {
    type Thread = Silo52Thread;

    fn types(&self) -> &'static [&'static str] {
        &TYPES
    }

    fn load<E: granary::Engine>(
        &mut self,
        engine: &E,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), Error> {
        // Not the driver's `load_parallel` (a fixed min(cores, 8) loaders,
        // each a contiguous slice): the loaders shape the tree and where the
        // records land, and that shows in the measurement. With one worker
        // thread, a two-loader table costs about 20% more last-level cache
        // misses per transaction (callgrind's cache model) and ~10% of the
        // throughput. So this keeps the loading `bench ycsb` always had, and
        // its numbers stay comparable with earlier ones: as many loaders as
        // worker threads (at most one per core), taking 1,000-key chunks in
        // turn.
        let t = engine.create_table("usertable")?;
        let value = vec![0u8; self.value_bytes];
        let (keys, chunks) = (self.keys, self.keys.div_ceil(LOAD_BATCH));
        let (next, done) = (AtomicU64::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            let loaders: Vec<_> = (0..self.loaders.max(1))
                .map(|_| {
                    let (next, done, value) = (&next, &done, &value);
                    s.spawn(move || -> Result<(), Error> {
                        let mut r = engine.runner()?;
                        loop {
                            // Relaxed: a work counter and a progress counter.
                            let c = next.fetch_add(1, Ordering::Relaxed);
                            if c >= chunks {
                                return Ok(());
                            }
                            let (lo, hi) = (c * LOAD_BATCH, ((c + 1) * LOAD_BATCH).min(keys));
                            run_until_committed(&mut r, |tx| {
                                for k in lo..hi {
                                    tx.insert(t, &key(k), value)?;
                                }
                                Ok(())
                            })?;
                            progress(done.fetch_add(hi - lo, Ordering::Relaxed) + hi - lo, keys);
                        }
                    })
                })
                .collect();
            loaders
                .into_iter()
                .try_for_each(|h| h.join().expect("loader thread panicked"))
        })?;
        self.table = Some(t);
        Ok(())
    }

    fn thread(&self, id: usize, _threads: usize, seed: u64) -> Silo52Thread {
        Silo52Thread {
            rng: Rng::new(seed, id as u64 + 1),
            val: vec![0u8; self.value_bytes],
            rmw_ops: 0,
            sink: Arc::clone(&self.rmw_ops),
        }
    }

    #[inline]
    fn run_one<R: TxRunner>(
        &self,
        th: &mut Silo52Thread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let t = self
            .table
            .ok_or_else(|| Error::InvalidOption("ycsb: run before load".into()))?;
        let (keys, rng, val) = (self.keys, &mut th.rng, &mut th.val);
        let read = (rng.below(100) as u32) < self.read_pct;
        // Inlined: on transactions this short the call into the driver
        // would cost some 3% (see `Exec::txn_inline`).
        let done = ex.txn_inline(if read { READ_ONLY } else { UPDATE }, move |tx| {
            // The key is drawn per attempt: a conflict is retried on a fresh
            // key, as Silo's driver does (its transaction draws its key);
            // the kind (read or read-modify-write) stays.
            let k = rng.below(keys);
            let key = key(k);
            let v = tx
                .get(t, &key)?
                .ok_or_else(|| TxError::user(format!("ycsb: key {k} missing")))?;
            if !read {
                let n = v.len().min(val.len());
                val[..n].copy_from_slice(&v[..n]);
                bump(val);
                tx.put(t, &key, val)?;
            }
            Ok(())
        })?;
        if !read && done.is_some() {
            th.rmw_ops += 1;
        }
        Ok(())
    }

    fn verify<E: granary::Engine>(&self, engine: &E) -> Result<Vec<String>, Error> {
        if !self.check {
            return Ok(Vec::new());
        }
        let Some(t) = self.table else {
            return Ok(vec!["ycsb: verify before load".into()]);
        };
        let mut r = engine.runner()?;
        let mut bad = Vec::new();
        let (mut rows, mut sum) = (0u64, 0u64);
        let mut lo = 0u64;
        while lo < self.keys {
            let hi = (lo + VERIFY_CHUNK).min(self.keys);
            let (n, s, wrong) = run_until_committed(&mut r, |tx| {
                let (mut n, mut s, mut wrong) = (0u64, 0u64, 0u64);
                tx.scan(
                    t,
                    Bound::Included(&key(lo)[..]),
                    Bound::Excluded(&key(hi)[..]),
                    usize::MAX,
                    false,
                    |_, v| {
                        n += 1;
                        if v.len() == self.value_bytes {
                            s = s.wrapping_add(counter(v));
                        } else {
                            wrong += 1;
                        }
                        true
                    },
                )?;
                Ok((n, s, wrong))
            })?;
            if n != hi - lo {
                bad.push(format!("keys {lo}..{hi}: {n} rows, expected {}", hi - lo));
            }
            if wrong > 0 {
                bad.push(format!(
                    "keys {lo}..{hi}: {wrong} values not of {} bytes",
                    self.value_bytes
                ));
            }
            rows += n;
            sum = sum.wrapping_add(s);
            lo = hi;
        }
        // Relaxed: the driver joined every thread (which flushed) first.
        let committed = self.rmw_ops.load(Ordering::Relaxed);
        if sum != committed {
            bad.push(format!(
                "value counters sum to {sum}, but {committed} read-modify-writes committed"
            ));
        }
        if rows != self.keys {
            bad.push(format!("{rows} rows, expected {}", self.keys));
        }
        Ok(bad)
    }
}

fn counter(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().expect("≥ 8 bytes"))
}

/// The "modify" of read-modify-write: bump a counter in the first 8 bytes.
#[inline]
fn bump(v: &mut [u8]) {
    let n = counter(v);
    v[..8].copy_from_slice(&n.wrapping_add(1).to_le_bytes());
}
