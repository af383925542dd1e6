//! `granary bench index`: point lookups on the bare ordered index versus
//! `crossbeam-skiplist`, same keys, same process, back to back.
//!
//! Keys are random 64-bit integers stored as 8-byte big-endian strings in
//! the granary index and as `u64` in the skiplist (the same order). Each
//! lookup draws a loaded key at random, so both structures see the same
//! cache-missing access pattern.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use crossbeam_skiplist::SkipMap;
use granary_index::{LeakGuard, Tree};
use serde::Serialize;

use crate::report::{fresh_seed, machine, progress, write_json, Machine};
use granary_workloads::rng::Rng;

#[derive(Args, Debug, Clone, Serialize)]
pub struct IndexArgs {
    /// Keys to load.
    #[arg(long, default_value_t = 10_000_000)]
    pub keys: u64,
    /// Thread counts to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Repetitions per measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

#[derive(Serialize, Debug)]
pub struct Point {
    pub threads: usize,
    pub granary_lookups_per_s: f64,
    pub skiplist_lookups_per_s: f64,
    pub ratio: f64,
}

#[derive(Serialize, Debug)]
pub struct IndexResult {
    pub benchmark: &'static str,
    pub points: Vec<Point>,
    /// granary throughput at the most threads over 1 thread.
    pub granary_scaling: f64,
    pub seed: u64,
    pub config: IndexArgs,
    pub machine: Machine,
}

fn keys(n: u64, seed: u64) -> Vec<u64> {
    let mut r = Rng::new(seed, 0);
    (0..n).map(|_| r.next_u64()).collect()
}

/// Lookups per second of `lookup` over `threads` threads for `secs`.
fn measure(
    threads: usize,
    secs: f64,
    ks: &[u64],
    seed: u64,
    lookup: &(dyn Fn(u64) -> bool + Sync),
) -> f64 {
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let (stop, total) = (&stop, &total);
            s.spawn(move || {
                let mut r = Rng::new(seed, 100 + th as u64);
                let mut n = 0u64;
                let mut miss = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        let k = ks[r.below(ks.len() as u64) as usize];
                        miss += !lookup(k) as u64;
                    }
                    n += 256;
                }
                assert_eq!(miss, 0, "a loaded key was not found");
                total.fetch_add(n, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    total.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: IndexArgs) -> Result<IndexResult, String> {
    if args.keys == 0 {
        return Err("--keys must be at least 1, got 0".into());
    }
    if args.threads.is_empty() || args.threads.contains(&0) {
        return Err("--threads: every thread count must be at least 1".into());
    }
    if args.runs == 0 {
        return Err("--runs must be at least 1, got 0".into());
    }
    let seed = args.seed.unwrap_or_else(fresh_seed);
    eprintln!(
        "index: keys={} threads={:?} seed={seed}",
        args.keys, args.threads
    );
    let ks = keys(args.keys, seed);
    let tree = Tree::new();
    let skip = SkipMap::new();
    let pb = progress(args.keys * 2, "loading");
    // SAFETY: only LeakGuards are used on this tree (nothing is removed).
    let mut g = unsafe { LeakGuard::new() };
    for (i, &k) in ks.iter().enumerate() {
        tree.upsert(&k.to_be_bytes(), k, &mut g);
        skip.insert(k, k);
        if i % 65536 == 0 {
            pb.set_position(2 * i as u64);
        }
    }
    pb.finish_and_clear();
    let tree_lookup = |k: u64| {
        // SAFETY: only LeakGuards are used on this tree.
        let g = unsafe { LeakGuard::new() };
        tree.get(&k.to_be_bytes(), &g).value == Some(k)
    };
    let skip_lookup = |k: u64| skip.get(&k).is_some_and(|e| *e.value() == k);
    let mut points = Vec::new();
    for &t in &args.threads {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        // Alternate the two so drift on a shared machine hits both alike.
        for _ in 0..args.runs {
            a.push(measure(t, args.seconds, &ks, seed, &tree_lookup));
            b.push(measure(t, args.seconds, &ks, seed, &skip_lookup));
        }
        let (ga, sb) = (median(a), median(b));
        println!(
            "index threads={t}: granary {:.2} M lookups/s, crossbeam-skiplist {:.2} M lookups/s, ratio {:.2}x",
            ga / 1e6,
            sb / 1e6,
            ga / sb
        );
        points.push(Point {
            threads: t,
            granary_lookups_per_s: ga,
            skiplist_lookups_per_s: sb,
            ratio: ga / sb,
        });
    }
    let one = points
        .iter()
        .find(|p| p.threads == 1)
        .map(|p| p.granary_lookups_per_s);
    let last = points
        .iter()
        .max_by_key(|p| p.threads)
        .map(|p| p.granary_lookups_per_s);
    let granary_scaling = match (one, last) {
        (Some(a), Some(b)) => b / a,
        _ => f64::NAN,
    };
    println!(
        "index: granary scaling {:.2}x from 1 to {} threads",
        granary_scaling,
        args.threads.iter().max().unwrap_or(&1)
    );
    let res = IndexResult {
        benchmark: "index",
        points,
        granary_scaling,
        seed,
        config: args.clone(),
        machine: machine(),
    };
    if let Some(p) = &args.json {
        write_json(p, &res)?;
    }
    Ok(res)
}
