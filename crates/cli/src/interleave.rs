//! Benchmarks of one or several protocols: each protocol gets its own
//! database, loaded once with the same data (same workload configuration
//! and seed) before any measured run; then the runs alternate protocol by
//! protocol, run by run, so drift on a shared machine hits each alike.
//! Medians over each protocol's runs are reported, with each protocol's
//! throughput ratio to the first.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use granary::Database;
use granary_api::Engine;
use granary_workloads::driver::{self, DriverConfig, RunReport, Workload};
use serde::Serialize;

use crate::designs::with_engine;
use crate::designs::{EngineOptions, Kv};
use crate::protocol::{check_all, Isolation, Protocol, WorkloadInfo};
use crate::report::{progress, progress_with_status};

/// A protocol's database with its workload loaded (the engine's type
/// erased, so that protocols of different types take turns).
pub trait Loaded {
    /// Its protocol.
    fn protocol(&self) -> Protocol;
    /// Seconds its loading took.
    fn load_s(&self) -> f64;
    /// How much the process's resident set grew over its load, bytes (0
    /// where the resident set cannot be read).
    fn load_rss_growth(&self) -> i64;
    /// One measured run. `tick(elapsed_s, total_s, completed, waiting)`
    /// is called about every 250 ms, `waiting` saying what the design's
    /// writers wait on now, if it knows.
    ///
    /// # Errors
    /// The driver's.
    fn run(&self, cfg: &DriverConfig, tick: &Tick<'_>) -> Result<RunReport, String>;
    /// Print the logging counters of a durable Silo database (nothing for
    /// any other).
    fn print_logging(&self);
    /// Deuteronomy's TC counters so far (`None` for any other design).
    fn tc_report(&self) -> Option<granary_protocols::deuteronomy::tc::Report>;
}

/// A run's progress callback: `(elapsed_s, total_s, completed, waiting)`.
pub type Tick<'a> = dyn Fn(f64, f64, u64, Option<String>) + Sync + 'a;

struct Db<E, W> {
    protocol: Protocol,
    db: E,
    w: W,
    load_s: f64,
    load_rss_growth: i64,
}

impl<E: Engine + 'static, W: Workload> Loaded for Db<E, W> {
    fn protocol(&self) -> Protocol {
        self.protocol
    }

    fn load_s(&self) -> f64 {
        self.load_s
    }

    fn load_rss_growth(&self) -> i64 {
        self.load_rss_growth
    }

    fn run(&self, cfg: &DriverConfig, tick: &Tick<'_>) -> Result<RunReport, String> {
        let tc = (&self.db as &dyn Any).downcast_ref::<granary_protocols::deuteronomy::tc::Tc>();
        let tick = |el, total, done| tick(el, total, done, tc.and_then(|tc| tc.waiting_on()));
        driver::run(&self.w, &self.db, cfg, &tick).map_err(|e| format!("run failed: {e}"))
    }

    fn print_logging(&self) {
        if let Some(db) = (&self.db as &dyn Any).downcast_ref::<Database>() {
            crate::designs::print_logging(db);
        }
    }

    fn tc_report(&self) -> Option<granary_protocols::deuteronomy::tc::Report> {
        (&self.db as &dyn Any)
            .downcast_ref::<granary_protocols::deuteronomy::tc::Tc>()
            .map(|tc| tc.report())
    }
}

/// One line on what Deuteronomy's TC did in a run of `secs` seconds:
/// where reads were served (§6.3: the TC's cache hit rate), what the TC
/// Proxy applied at the DC, and the sizes garbage collection holds.
fn tc_line(
    a: &granary_protocols::deuteronomy::tc::Report,
    b: &granary_protocols::deuteronomy::tc::Report,
    secs: f64,
) -> String {
    let (log, cache, dc) = (
        b.log_reads - a.log_reads,
        b.cache_reads - a.cache_reads,
        b.dc_reads - a.dc_reads,
    );
    let reads = (log + cache + dc).max(1) as f64;
    let applied = b.applied - a.applied;
    format!(
        "tc: reads {:.1}% from the log, {:.1}% from the read cache, {:.1}% from the DC; \
         DC applied {:.0} ops/s ({} batches); {} versions trimmed, {} items evicted; \
         {} items, {} versions, {} log buffers now",
        100.0 * log as f64 / reads,
        100.0 * cache as f64 / reads,
        100.0 * dc as f64 / reads,
        applied as f64 / secs.max(1e-9),
        b.batches - a.batches,
        b.trimmed - a.trimmed,
        b.evicted - a.evicted,
        b.items,
        b.versions,
        b.log_buffers,
    )
}

/// Load `w` into `db` with a progress bar; `label` prefixes the messages.
fn load<E: Engine + 'static, W: Workload + 'static>(
    label: &str,
    protocol: Protocol,
    db: E,
    mut w: W,
) -> Result<Box<dyn Loaded>, String> {
    let t0 = Instant::now();
    let rss_before = driver::rss().0;
    let pb = progress(1, "loading");
    // Loader threads report out of order: the bar shows the furthest.
    let (reached, announced) = (AtomicU64::new(0), AtomicU64::new(0));
    let tick = |done, total| {
        // Relaxed: figures for display, read after the loaders are joined.
        announced.store(total, Ordering::Relaxed);
        let done = reached.fetch_max(done, Ordering::Relaxed).max(done);
        pb.set_length(total);
        pb.set_position(done);
    };
    match (&db as &dyn Any).downcast_ref::<Kv>() {
        // kv has no inserts: Silo, whose index it is, loads its table.
        Some(kv) => w.load(&kv.0, &tick),
        None => w.load(&db, &tick),
    }
    .map_err(|e| format!("load failed: {e}"))?;
    pb.finish_and_clear();
    let load_s = t0.elapsed().as_secs_f64();
    let load_rss_growth = match (rss_before, driver::rss().0) {
        (0, _) | (_, 0) => 0,
        (a, b) => b as i64 - a as i64,
    };
    let (done, total) = (reached.into_inner(), announced.into_inner());
    eprintln!("{label}: loaded in {load_s:.2} s (progress {done}/{total})");
    Ok(Box::new(Db {
        protocol,
        db,
        w,
        load_s,
        load_rss_growth,
    }))
}

/// Check that every protocol runs workload `info`, then give each its own
/// database built from `opts` and load it with `make(protocol)`'s
/// workload, in `protocols` order.
///
/// # Errors
/// A refusal (before anything is loaded), an engine that cannot be built,
/// or a failed load.
pub fn load_all<W: Workload + 'static>(
    name: &str,
    protocols: &[Protocol],
    opts: &EngineOptions<'_>,
    info: &WorkloadInfo,
    make: impl Fn(Protocol) -> Result<W, String>,
) -> Result<Vec<Box<dyn Loaded>>, String> {
    check_all(protocols, info)?;
    protocols
        .iter()
        .map(|&p| {
            let label = if protocols.len() > 1 {
                format!("{name} ({p})")
            } else {
                name.to_string()
            };
            let w = make(p)?;
            with_engine!(p, opts, |db| load(&label, p, db, w))
        })
        .collect()
}

/// Run each loaded protocol `runs` times, alternating: run `r` of every
/// protocol (in order) before run `r + 1` of any; run `r` uses seed
/// `cfg.seed + r`. `each(r, protocol, report)` sees every run as it ends.
/// Returns each protocol's reports in run order.
///
/// Every database stays loaded until the last run, so the process's
/// resident set is all of them together. Each report also carries its own
/// database's share ([`RunReport::database_bytes`]): the resident set's
/// growth over that database's load and over each of its runs so far
/// (the other databases sit still meanwhile).
///
/// # Errors
/// A failed run.
pub fn alternate(
    loaded: &[Box<dyn Loaded>],
    runs: usize,
    cfg: &DriverConfig,
    each: &mut dyn FnMut(usize, Protocol, &RunReport),
) -> Result<Vec<Vec<RunReport>>, String> {
    let mut out: Vec<Vec<RunReport>> = loaded.iter().map(|_| Vec::new()).collect();
    let mut held: Vec<i64> = loaded.iter().map(|l| l.load_rss_growth()).collect();
    for r in 0..runs {
        for ((l, reports), held) in loaded.iter().zip(&mut out).zip(&mut held) {
            let cfg = DriverConfig {
                seed: cfg.seed.wrapping_add(r as u64),
                ..cfg.clone()
            };
            let total = (cfg.warmup + cfg.duration).as_secs_f64();
            let pb = progress_with_status(total.ceil() as u64);
            let before = l.tc_report();
            let t0 = Instant::now();
            // Throughput over the last second or so, and what the run
            // waits on when it drops to nothing.
            let last = std::sync::Mutex::new((0.0f64, 0u64));
            let tick = |el: f64, _, done: u64, waiting: Option<String>| {
                pb.set_position(el as u64);
                let mut last = last.lock().expect("lock");
                if el - last.0 < 1.0 {
                    return;
                }
                let rate = (done - last.1) as f64 / (el - last.0);
                *last = (el, done);
                pb.set_message(match (rate < 0.5, waiting) {
                    (_, Some(why)) => format!("{rate:.0} txn/s; waiting: {why}"),
                    (true, None) => "0 txn/s in the last second".to_string(),
                    (false, None) => format!("{rate:.0} txn/s"),
                });
            };
            let mut report = l.run(&cfg, &tick)?;
            pb.finish_and_clear();
            if report.rss_at_start_bytes > 0 && report.rss_bytes > 0 {
                *held += report.rss_bytes as i64 - report.rss_at_start_bytes as i64;
                report.database_bytes = Some(*held);
            }
            report.databases_loaded = loaded.len();
            let tc = match (before, l.tc_report()) {
                (Some(a), Some(b)) => Some(tc_line(&a, &b, t0.elapsed().as_secs_f64())),
                _ => None,
            };
            each(r, l.protocol(), &report);
            // Under the run's own report, which names it.
            if let Some(tc) = tc {
                println!("  {tc}");
            }
            reports.push(report);
        }
    }
    Ok(out)
}

/// One protocol's figures over its runs.
#[derive(Serialize, Debug, Clone)]
pub struct Summary {
    pub protocol: Protocol,
    /// The isolation level the protocol claims.
    pub isolation: Isolation,
    /// Median over its runs.
    pub throughput_txn_per_s: f64,
    /// Median over its runs.
    pub aborts_per_s: f64,
    /// Its median throughput over the first protocol's.
    pub throughput_ratio: f64,
    pub load_s: f64,
    /// Each run's throughput, in run order.
    pub runs_txn_per_s: Vec<f64>,
    /// The memory its database holds after its last run, bytes: the
    /// resident set's growth over its load and its runs (the process's
    /// resident set is every protocol's together). `None` where the
    /// resident set cannot be read.
    pub database_bytes: Option<i64>,
    /// The report of a run at the median (of an even count of runs, the
    /// lower of the middle two).
    pub result: RunReport,
}

/// The median of `v` (of an even count, the mean of the middle two), and
/// the index of a run at the median (of an even count, the lower middle
/// one).
fn median(v: &[f64]) -> (f64, usize) {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let n = order.len();
    if n % 2 == 1 {
        let i = order[n / 2];
        (v[i], i)
    } else {
        let (lo, hi) = (order[n / 2 - 1], order[n / 2]);
        ((v[lo] + v[hi]) / 2.0, lo)
    }
}

/// Each protocol's summary, from [`alternate`]'s reports.
pub fn summarize(loaded: &[Box<dyn Loaded>], reports: &[Vec<RunReport>]) -> Vec<Summary> {
    let mut out: Vec<Summary> = Vec::new();
    for (l, rs) in loaded.iter().zip(reports) {
        let tput: Vec<f64> = rs.iter().map(|r| r.throughput_txn_per_s).collect();
        let aborts: Vec<f64> = rs.iter().map(|r| r.aborts_per_s).collect();
        let (t, at) = median(&tput);
        let first = out.first().map_or(t, |s| s.throughput_txn_per_s);
        out.push(Summary {
            protocol: l.protocol(),
            isolation: l.protocol().isolation(),
            throughput_txn_per_s: t,
            aborts_per_s: median(&aborts).0,
            throughput_ratio: if first > 0.0 { t / first } else { f64::NAN },
            load_s: l.load_s(),
            runs_txn_per_s: tput,
            database_bytes: rs.last().and_then(|r| r.database_bytes),
            result: rs[at].clone(),
        });
    }
    out
}

/// Invariant violations over every run.
pub fn violations(reports: &[Vec<RunReport>]) -> usize {
    reports
        .iter()
        .flatten()
        .map(|r| r.invariant_violations.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_where_it_is() {
        assert_eq!(median(&[3.0]), (3.0, 0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), (3.0, 2));
        assert_eq!(median(&[4.0, 1.0]), (2.5, 1));
        assert_eq!(median(&[4.0, 1.0, 8.0, 2.0]), (3.0, 3));
    }
}
