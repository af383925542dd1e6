//! `granary bench ycsb`: Silo §5.2's YCSB variant — one table of 8-byte
//! keys and 100-byte values, 80% single-key read transactions and 20%
//! single-key read-modify-write transactions, keys uniform.
//!
//! `--engine kv` runs the same operations on the bare index with no
//! transactions (the paper's Key-Value); `--global-tid` takes commit TIDs
//! from one shared counter (MemSilo+GlobalTID).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use crossbeam_utils::CachePadded;
use granary::{AbortReason, Database, Options, TableId, TxError};
use serde::Serialize;

use crate::report::{fresh_seed, machine, progress, write_json, Machine};
use granary_workloads::rng::Rng;

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
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
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

#[derive(Serialize, Debug)]
pub struct Measurement {
    pub engine: Engine,
    pub throughput_txn_per_s: f64,
    pub aborts_per_s: f64,
    pub commits: u64,
    pub aborts: u64,
    pub abort_reasons: std::collections::BTreeMap<&'static str, u64>,
    pub elapsed_s: f64,
}

/// Per-thread counters, each on its own cache line, written only by their
/// thread (Relaxed stores: the main thread's reads need no ordering).
#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    aborts: [AtomicU64; AbortReason::ALL.len()],
}

pub fn run(args: YcsbArgs) -> Result<YcsbResult, String> {
    if args.threads == 0
        || args.keys == 0
        || args.read_pct > 100
        || args.seconds <= 0.0
        || args.warmup < 0.0
    {
        return Err(
            "need --threads ≥ 1, --keys ≥ 1, --read-pct ≤ 100, --seconds > 0, --warmup ≥ 0".into(),
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
    let db = Database::new(opts).map_err(|e| e.to_string())?;
    let table = db.create_table("usertable").map_err(|e| e.to_string())?;

    let load_start = Instant::now();
    load(&db, table, &args)?;
    let load_s = load_start.elapsed().as_secs_f64();
    eprintln!("ycsb: loaded {} keys in {load_s:.2}s", args.keys);

    // Engines alternate run by run on the same loaded table, so drift on a
    // shared machine hits each alike; medians are reported.
    let mut runs = Vec::new();
    for r in 0..args.runs {
        for &engine in &args.engine {
            let m = measure(&db, table, &args, engine, seed.wrapping_add(r as u64))?;
            println!(
                "ycsb run {r} engine={engine:?} threads={}: {:.0} txn/s ({:.0}/thread), {:.0} aborts/s {:?}",
                args.threads,
                m.throughput_txn_per_s,
                m.throughput_txn_per_s / args.threads as f64,
                m.aborts_per_s,
                m.abort_reasons
            );
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
    Ok(res)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One measured run of one engine.
fn measure(
    db: &Database,
    table: TableId,
    args: &YcsbArgs,
    engine: Engine,
    seed: u64,
) -> Result<Measurement, String> {
    let stop = AtomicBool::new(false);
    let counters: Vec<CachePadded<Counters>> =
        (0..args.threads).map(|_| CachePadded::default()).collect();
    let barrier = Barrier::new(args.threads + 1);
    let failed = AtomicBool::new(false);
    let (elapsed, start_counts, end_counts) = std::thread::scope(|s| {
        for (i, c) in counters.iter().enumerate() {
            let (stop, barrier, failed) = (&stop, &barrier, &failed);
            s.spawn(move || {
                let r = worker(db, table, args, engine, seed, i as u64, c, stop, barrier);
                if let Err(e) = r {
                    eprintln!("ycsb: worker {i} failed: {e}");
                    failed.store(true, Ordering::Relaxed);
                }
            });
        }
        barrier.wait();
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
        let t0 = Instant::now();
        let c0 = snapshot(&counters);
        let pb = progress(args.seconds.ceil() as u64, "measuring");
        let end = t0 + Duration::from_secs_f64(args.seconds);
        while Instant::now() < end {
            std::thread::sleep((end - Instant::now()).min(Duration::from_millis(250)));
            pb.set_position(t0.elapsed().as_secs());
        }
        let c1 = snapshot(&counters);
        let elapsed = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        pb.finish_and_clear();
        (elapsed, c0, c1)
    });
    if failed.load(Ordering::Relaxed) {
        return Err("a worker failed".into());
    }
    let commits = end_counts.0 - start_counts.0;
    let mut abort_reasons = std::collections::BTreeMap::new();
    let mut aborts = 0;
    for (i, r) in AbortReason::ALL.iter().enumerate() {
        let n = end_counts.1[i] - start_counts.1[i];
        abort_reasons.insert(r.name(), n);
        aborts += n;
    }
    Ok(Measurement {
        engine,
        throughput_txn_per_s: commits as f64 / elapsed,
        aborts_per_s: aborts as f64 / elapsed,
        commits,
        aborts,
        abort_reasons,
        elapsed_s: elapsed,
    })
}

fn snapshot(cs: &[CachePadded<Counters>]) -> (u64, [u64; AbortReason::ALL.len()]) {
    let mut commits = 0;
    let mut aborts = [0; AbortReason::ALL.len()];
    for c in cs {
        commits += c.commits.load(Ordering::Relaxed);
        for (a, x) in aborts.iter_mut().zip(&c.aborts) {
            *a += x.load(Ordering::Relaxed);
        }
    }
    (commits, aborts)
}

pub fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// Load `keys` rows in parallel, 1,000 per transaction.
fn load(db: &Database, t: TableId, args: &YcsbArgs) -> Result<(), String> {
    let batch = 1000u64;
    let chunks = args.keys.div_ceil(batch);
    let next = AtomicU64::new(0);
    let pb = progress(chunks, "loading");
    let value = vec![0u8; args.value_bytes];
    let threads = args
        .threads
        .min(std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (next, pb, value) = (&next, &pb, &value);
                s.spawn(move || -> Result<(), String> {
                    let mut w = db.worker().map_err(|e| e.to_string())?;
                    loop {
                        let c = next.fetch_add(1, Ordering::Relaxed);
                        if c >= chunks {
                            return Ok(());
                        }
                        let (lo, hi) = (c * batch, ((c + 1) * batch).min(args.keys));
                        w.run(|tx| {
                            for k in lo..hi {
                                tx.insert(t, &key(k), value)?;
                            }
                            Ok(())
                        })
                        .map_err(|e| e.to_string())?;
                        pb.inc(1);
                    }
                })
            })
            .collect();
        hs.into_iter()
            .try_for_each(|h| h.join().map_err(|_| "loader panicked".to_string())?)
    })?;
    pb.finish_and_clear();
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn worker(
    db: &Database,
    t: TableId,
    args: &YcsbArgs,
    engine: Engine,
    seed: u64,
    id: u64,
    c: &Counters,
    stop: &AtomicBool,
    barrier: &Barrier,
) -> Result<(), String> {
    let mut w = db.worker().map_err(|e| e.to_string())?;
    let mut rng = Rng::new(seed, id + 1);
    let mut buf = Vec::with_capacity(args.value_bytes);
    let mut val = vec![0u8; args.value_bytes];
    let (mut commits, mut aborts) = (0u64, [0u64; AbortReason::ALL.len()]);
    let mut iterations = 0u64;
    barrier.wait();
    loop {
        // Check for the end every 64 attempts: one shared load, rarely
        // written, stays in cache.
        iterations += 1;
        if iterations.is_multiple_of(64) && stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let k = key(rng.below(args.keys));
        let read = (rng.below(100) as u32) < args.read_pct;
        match engine {
            Engine::Kv => {
                w.kv_get(t, &k, &mut buf).map_err(|e| e.to_string())?;
                if !read {
                    let n = buf.len().min(val.len());
                    val[..n].copy_from_slice(&buf[..n]);
                    bump(&mut val);
                    w.kv_put(t, &k, &val).map_err(|e| e.to_string())?;
                }
            }
            Engine::Silo => {
                let r = w
                    .try_run(|tx| {
                        let v = tx.get(t, &k)?.ok_or_else(|| TxError::user("missing key"))?;
                        if !read {
                            let n = v.len().min(val.len());
                            val[..n].copy_from_slice(&v[..n]);
                            bump(&mut val);
                            tx.put(t, &k, &val)?;
                        }
                        Ok(())
                    })
                    .map_err(|e| e.to_string())?;
                if let Err(reason) = r {
                    let i = AbortReason::ALL
                        .iter()
                        .position(|x| *x == reason)
                        .unwrap_or(0);
                    aborts[i] += 1;
                    c.aborts[i].store(aborts[i], Ordering::Relaxed);
                    continue; // retried with a fresh key, as the paper's driver does
                }
            }
        }
        commits += 1;
        c.commits.store(commits, Ordering::Relaxed);
    }
}

/// The "modify" of read-modify-write: bump a counter in the first 8 bytes.
#[inline]
fn bump(v: &mut [u8]) {
    let n = u64::from_le_bytes(v[..8].try_into().expect("≥ 8 bytes"));
    v[..8].copy_from_slice(&n.wrapping_add(1).to_le_bytes());
}
