//! The benchmark driver: runs any [`Workload`] on any [`Engine`] for a
//! warm-up and a measured period, and reports throughput (overall and per
//! second), commits and aborts per transaction type and abort reason,
//! latency percentiles from HDR histograms, and memory.
//!
//! A workload issues each transaction through [`Exec::txn`], which retries
//! it on conflict (counting each conflict by type and reason) and times it
//! from first attempt to commit — the latency a client would see.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use granary_api::{
    AbortReason, Body, CheckpointSpan, Declared, Done, Engine, Error, Procedure, Stamp, Tx,
    TxError, TxRunner,
};
use hdrhistogram::Histogram;
use serde::Serialize;

/// A benchmark workload, written once against [`granary_api::Tx`].
pub trait Workload: Sync {
    /// Per-thread state (random stream, home warehouse, …).
    type Thread: Send;

    /// Names of the transaction types; [`Exec::txn`]'s `ty` indexes this.
    fn types(&self) -> &'static [&'static str];

    /// Create the tables and load the initial data. `progress(done,
    /// total)` may be called from any thread, in units of the workload's
    /// choosing; `total` is the same in every call and `done` reaches it
    /// when loading completes.
    ///
    /// # Errors
    /// An engine error.
    fn load<E: Engine>(
        &mut self,
        engine: &E,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), Error>;

    /// State for thread `id` of `threads`, its random stream from `seed`.
    fn thread(&self, id: usize, threads: usize, seed: u64) -> Self::Thread;

    /// Run one transaction (or one unit of the mix) through `exec`.
    ///
    /// # Errors
    /// An engine error; the run stops.
    fn run_one<R: TxRunner>(
        &self,
        t: &mut Self::Thread,
        exec: &mut Exec<'_, R>,
    ) -> Result<(), Error>;

    /// After the last [`Workload::run_one`] of a thread: wait for the
    /// procedures it still has in flight ([`Exec::drain`]) and account
    /// for them. The default has none.
    ///
    /// # Errors
    /// An engine error.
    fn finish<R: TxRunner>(
        &self,
        t: &mut Self::Thread,
        exec: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let _ = (t, exec);
        Ok(())
    }

    /// Check the workload's invariants on the final state (after the run).
    /// Returns the violations found.
    ///
    /// # Errors
    /// An engine error.
    fn verify<E: Engine>(&self, engine: &E) -> Result<Vec<String>, Error>;
}

/// Driver settings.
#[derive(Clone, Debug, Serialize)]
pub struct DriverConfig {
    pub threads: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub seed: u64,
    /// Time every `latency_every`-th transaction (1 = all). Clock reads
    /// cost ~25 ns each, noticeable on sub-microsecond transactions.
    pub latency_every: u32,
    /// Collect the per-type cost breakdown ([`Breakdown`]).
    pub breakdown: bool,
}

/// One transaction type's figures over the measured period.
#[derive(Clone, Debug, Serialize, Default)]
pub struct TypeReport {
    pub name: &'static str,
    pub commits: u64,
    /// Transactions the procedure itself rolled back (e.g. TPC-C's 1%
    /// invalid new-orders); they count as completed, as the spec says.
    pub user_aborts: u64,
    /// Conflicting attempts, by reason (each was retried).
    pub aborts: BTreeMap<&'static str, u64>,
    pub latency_us: Latency,
}

/// Latency percentiles in microseconds.
#[derive(Clone, Debug, Serialize, Default)]
pub struct Latency {
    pub samples: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            samples: h.len(),
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

/// One transaction type's time, split as the performance study's Fig. 2
/// and 4 split it: fractions of the type's total time, summing to 1.
///
/// Only a design that instruments its transactions ([`Profile`], today
/// Silo) splits its committed work into index, record and commit; for the
/// others those three are `None` and their time is in `other`, so that a
/// breakdown never shows a zero it did not measure.
///
/// [`Profile`]: granary_api::Profile
#[derive(Clone, Debug, Serialize, Default)]
pub struct Breakdown {
    pub name: &'static str,
    /// Index operations: tree lookups, inserts, scans' leaf walks.
    pub index: Option<f64>,
    /// Reading and writing records: copies in and out, encoding.
    pub record: Option<f64>,
    /// Concurrency control and commit: validation, locking, installing.
    pub commit: Option<f64>,
    /// Work of attempts that then aborted.
    pub aborted: f64,
    /// Everything else: the procedure's own logic, the driver (and, for a
    /// design that does not split its time, all its committed work).
    pub other: f64,
}

/// `(quantile, µs)` points of a histogram: every percentile to 99, then
/// finer steps to the maximum.
fn cdf(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut qs: Vec<f64> = (1..=99).map(|p| p as f64 / 100.0).collect();
    qs.extend([0.995, 0.999, 0.9995, 0.9999, 1.0]);
    qs.into_iter()
        .map(|q| (q, h.value_at_quantile(q) as f64 / 1000.0))
        .collect()
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Completed transactions per second (commits + user aborts) over the
    /// measured period.
    pub throughput_txn_per_s: f64,
    /// Conflicting attempts per second.
    pub aborts_per_s: f64,
    pub commits: u64,
    pub aborts: u64,
    pub elapsed_s: f64,
    /// Completed transactions in each second of the measured period.
    pub per_second: Vec<u64>,
    /// Resident set size at the end of each second of the measured
    /// period, bytes (Linux; empty elsewhere).
    pub rss_per_second: Vec<u64>,
    pub types: Vec<TypeReport>,
    pub latency_us: Latency,
    /// The latency distribution of all types together, as
    /// `(quantile, microseconds)` points (for CDF plots).
    pub latency_cdf_us: Vec<(f64, f64)>,
    /// `--breakdown`: where each transaction type's time went. `None` when
    /// not measured.
    pub breakdown: Option<Vec<Breakdown>>,
    /// Resident set size at the end of the run, bytes (Linux; 0 elsewhere):
    /// the whole process's, so with several databases loaded (a
    /// multi-protocol benchmark) all of them together.
    pub rss_bytes: u64,
    /// Peak resident set size of the process, bytes (Linux; 0 elsewhere).
    pub peak_rss_bytes: u64,
    /// Resident set size when the run began, before its warm-up, bytes
    /// (Linux; 0 elsewhere).
    pub rss_at_start_bytes: u64,
    /// The memory the run's own database holds at the end of the run,
    /// bytes: the resident set's growth over its load and over each of its
    /// runs so far. Set by the caller that loaded the database (the driver
    /// cannot see the load); `None` when not measured.
    pub database_bytes: Option<i64>,
    /// Databases loaded in the process during the run (set by the caller;
    /// 1 from the driver), so that `rss_bytes` reads right.
    pub databases_loaded: usize,
    /// Invariant violations found after the run (empty when all hold).
    pub invariant_violations: Vec<String>,
    /// Durable engines: figures of the log over the measured period.
    pub durability: Option<DurabilityReport>,
}

/// What a durable run measured (SiloR §6).
#[derive(Clone, Debug, Serialize, Default)]
pub struct DurabilityReport {
    /// From the first attempt of a (timed) transaction until its epoch
    /// was durable — what a client waiting for durability sees.
    pub durable_latency_us: Latency,
    /// Log bytes written per second over the measured period, in MB/s.
    pub log_mb_per_s: f64,
    pub log_bytes: u64,
    /// Checkpoints that overlapped the measured period, each `[began,
    /// ended]` in seconds from its start (clipped to it); empty for an
    /// engine without checkpoints.
    pub checkpoints_s: Vec<[f64; 2]>,
}

const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// Per-thread counters sampled by the driver each second (written only by
/// their thread; Relaxed: the sampler needs no ordering).
#[derive(Default)]
struct Live {
    completed: AtomicU64,
}

/// Per-type breakdown accumulators, in ticks.
#[derive(Clone, Copy, Default)]
struct Ticks {
    total: u64,
    index: u64,
    record: u64,
    commit: u64,
    aborted: u64,
    /// The design reported a [`granary_api::Profile`] (it splits its time).
    split: bool,
}

/// A thread's private tallies.
struct Tally {
    ticks: Vec<Ticks>,
    commits: Vec<u64>,
    user_aborts: Vec<u64>,
    aborts: Vec<[u64; AbortReason::ALL.len()]>,
    latency: Vec<Histogram<u64>>,
    /// Durable engines: commit-to-durable latency of timed transactions.
    durable: Histogram<u64>,
}

impl Tally {
    fn new(types: usize) -> Tally {
        let h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
        Tally {
            ticks: vec![Ticks::default(); types],
            commits: vec![0; types],
            user_aborts: vec![0; types],
            aborts: vec![[0; AbortReason::ALL.len()]; types],
            durable: h.clone(),
            latency: vec![h; types],
        }
    }

    fn merge(&mut self, o: &Tally) {
        for i in 0..self.commits.len() {
            let (a, b) = (&mut self.ticks[i], &o.ticks[i]);
            a.total += b.total;
            a.split |= b.split;
            a.index += b.index;
            a.record += b.record;
            a.commit += b.commit;
            a.aborted += b.aborted;
            self.commits[i] += o.commits[i];
            self.user_aborts[i] += o.user_aborts[i];
            for (a, b) in self.aborts[i].iter_mut().zip(&o.aborts[i]) {
                *a += b;
            }
            self.latency[i].add(&o.latency[i]).expect("same bounds");
        }
        self.durable.add(&o.durable).expect("same bounds");
    }
}

/// Timed transactions waiting for their epoch to become durable.
struct Pending<'a> {
    durable_epoch: &'a (dyn Fn() -> Option<u64> + Sync),
    queue: std::collections::VecDeque<(u64, Stamp)>,
}

impl Pending<'_> {
    /// Record the latency of every queued transaction that is durable now.
    fn settle(&mut self, h: &mut Histogram<u64>) {
        let Some(&(first, _)) = self.queue.front() else {
            return;
        };
        let Some(e) = (self.durable_epoch)() else {
            return;
        };
        if e < first {
            return;
        }
        let now = Stamp::now();
        while let Some(&(need, started)) = self.queue.front() {
            if need > e {
                break;
            }
            h.saturating_record(started.ns_until(now).max(1));
            self.queue.pop_front();
        }
    }
}

/// What a workload issues transactions through.
pub struct Exec<'a, R: TxRunner> {
    runner: &'a mut R,
    tally: Tally,
    /// `Some` on a durable engine.
    pending: Option<Pending<'a>>,
    live: &'a Live,
    completed: u64,
    latency_every: u32,
    tick: u32,
    breakdown: bool,
    /// The runner's [`TxRunner::uses_declared`], asked once.
    declares: bool,
    /// The runner's [`TxRunner::needs_write_sets`], asked once.
    predicts: bool,
    /// The runner's [`TxRunner::window`], asked once.
    window: usize,
    /// Procedures submitted to a pipelined design and not yet back.
    in_flight: usize,
}

impl<R: TxRunner> Exec<'_, R> {
    /// Whether the protocol reads declarations
    /// ([`TxRunner::uses_declared`]): a workload builds a [`Declared`] for
    /// [`Exec::txn_declared`] only then, and passes `None` otherwise, so
    /// that protocols which execute optimistically (Silo) never pay for
    /// planning.
    #[inline]
    pub fn uses_declared(&self) -> bool {
        self.declares
    }

    /// Whether the protocol needs every write declared before a procedure
    /// runs ([`TxRunner::needs_write_sets`]): a workload whose write sets
    /// depend on reads predicts them (reconnaissance) only then.
    #[inline]
    pub fn needs_write_sets(&self) -> bool {
        self.predicts
    }

    /// Run `body` as a transaction of type `ty`, retrying conflicts until
    /// it commits. A body that fails with [`Error::RolledBack`] (the
    /// procedure's own rollback) completes as a user abort and returns
    /// `Ok(None)`.
    ///
    /// # Errors
    /// Any other error from the body or the engine.
    // Never inlined: one call per transaction costs nothing measurable but
    // on the shortest transactions (see `txn_inline`), and it gives
    // profilers (callgrind's --toggle-collect) a symbol that brackets
    // exactly the transactions.
    #[inline(never)]
    pub fn txn<T>(
        &mut self,
        ty: usize,
        body: impl FnMut(&mut R::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Option<T>, Error> {
        self.txn_declared(ty, None, body)
    }

    /// As [`Exec::txn`], for a procedure whose read and write sets are
    /// known from its parameters: protocols that plan (BOHM) or lock up
    /// front (ordered 2PL) use `declared`; the others ignore it.
    ///
    /// # Errors
    /// As for [`Exec::txn`].
    #[inline(never)]
    pub fn txn_declared<T>(
        &mut self,
        ty: usize,
        declared: Option<&Declared>,
        body: impl FnMut(&mut R::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Option<T>, Error> {
        self.run_txn(ty, declared, body)
    }

    /// As [`Exec::txn`], compiled into the caller: for transactions of well
    /// under a microsecond (`bench ycsb`'s single-key ones), where the call
    /// and handing the closure over cost about 40 instructions, some 3% of
    /// the transaction. Profilers see no `txn_declared` frame for these.
    ///
    /// # Errors
    /// As for [`Exec::txn`].
    #[inline(always)]
    pub fn txn_inline<T>(
        &mut self,
        ty: usize,
        body: impl FnMut(&mut R::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Option<T>, Error> {
        self.run_txn(ty, None, body)
    }

    /// The one implementation behind [`Exec::txn`], [`Exec::txn_declared`]
    /// and [`Exec::txn_inline`].
    #[inline(always)]
    fn run_txn<T>(
        &mut self,
        ty: usize,
        declared: Option<&Declared>,
        mut body: impl FnMut(&mut R::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Option<T>, Error> {
        self.tick += 1;
        let timed = self.tick >= self.latency_every;
        let start = timed.then(|| {
            self.tick = 0;
            Stamp::now()
        });
        let out = loop {
            let t0 = if self.breakdown {
                granary_api::ticks()
            } else {
                0
            };
            let r = match declared {
                Some(d) => self.runner.try_run_declared(d, &mut body),
                None => self.runner.try_run(&mut body),
            };
            if self.breakdown {
                let spent = granary_api::ticks() - t0;
                let p = self.runner.take_profile();
                let b = &mut self.tally.ticks[ty];
                b.split |= p.is_some();
                let p = p.unwrap_or_default();
                if matches!(r, Ok(Err(_))) {
                    b.aborted += spent;
                } else {
                    b.index += p.index;
                    b.record += p.record;
                    b.commit += p.commit;
                }
                b.total += spent;
            }
            match r {
                Ok(Ok(v)) => {
                    self.tally.commits[ty] += 1;
                    break Some(v);
                }
                Ok(Err(reason)) => self.tally.aborts[ty][reason.index()] += 1,
                Err(Error::RolledBack) => {
                    self.tally.user_aborts[ty] += 1;
                    break None;
                }
                Err(e @ Error::StalePlan(_)) => {
                    // Not retried here: the plan must be predicted again.
                    self.tally.aborts[ty][AbortReason::StalePlan.index()] += 1;
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        };
        if let Some(s) = start {
            let ns = s.elapsed_ns().max(1);
            self.tally.latency[ty].saturating_record(ns);
            if let Some(p) = &mut self.pending {
                p.queue.push_back((self.runner.durable_token(), s));
            }
        }
        if let Some(p) = &mut self.pending {
            p.settle(&mut self.tally.durable);
        }
        self.completed += 1;
        self.live.completed.store(self.completed, Ordering::Relaxed);
        Ok(out)
    }

    /// Run procedure `p`, or hand it over to a pipelined design. The
    /// procedures that have finished by the time this returns are pushed
    /// to `done` for the workload to account for and reuse: `p` itself
    /// (committed or rolled back) under a design of the runner shape, any
    /// of those in flight under a pipelined one, which keeps up to
    /// [`TxRunner::window`] in flight and blocks only when that many are.
    ///
    /// # Errors
    /// As for [`Exec::txn`]; under a pipelined design, the failure of any
    /// procedure that finished.
    #[inline(never)]
    pub fn submit<B: Body>(
        &mut self,
        mut p: Box<Procedure<B>>,
        done: &mut Vec<Done<B>>,
    ) -> Result<(), Error> {
        if self.window <= 1 {
            let ty = p.kind;
            let (declared, body) = p.parts();
            let outcome = match self.run_txn(ty, declared, |tx| body.run(tx)) {
                Err(e @ Error::StalePlan(_)) => Err(e),
                r => Ok(r?),
            };
            let commit_key = match outcome {
                Ok(Some(_)) => self.runner.last_commit_key(),
                _ => 0,
            };
            done.push(Done {
                procedure: p,
                outcome,
                commit_key,
            });
            return Ok(());
        }
        // A resubmitted procedure (its plan went stale) keeps its first
        // submission time: its latency counts every attempt.
        if p.submitted.is_none() {
            self.tick += 1;
            p.submitted = (self.tick >= self.latency_every).then(|| {
                self.tick = 0;
                Stamp::now()
            });
        }
        self.runner.submit(p)?;
        self.in_flight += 1;
        let from = done.len();
        self.runner.poll(self.in_flight >= self.window, done)?;
        self.account(&mut done[from..])
    }

    /// Wait for every procedure in flight under a pipelined design,
    /// pushing them to `done` (nothing to wait for under the others).
    ///
    /// # Errors
    /// As for [`Exec::submit`].
    pub fn drain<B: Body>(&mut self, done: &mut Vec<Done<B>>) -> Result<(), Error> {
        while self.in_flight > 0 {
            let from = done.len();
            self.runner.poll(true, done)?;
            self.account(&mut done[from..])?;
        }
        Ok(())
    }

    /// Count procedures a pipelined design handed back.
    fn account<B: Body>(&mut self, done: &mut [Done<B>]) -> Result<(), Error> {
        for d in done {
            self.in_flight -= 1;
            let ty = d.procedure.kind;
            match &d.outcome {
                Ok(Some(_)) => self.tally.commits[ty] += 1,
                Ok(None) => self.tally.user_aborts[ty] += 1,
                Err(Error::StalePlan(_)) => {
                    // Handed back to the workload to predict again.
                    self.tally.aborts[ty][AbortReason::StalePlan.index()] += 1;
                    continue;
                }
                Err(_) => {
                    let failed = std::mem::replace(&mut d.outcome, Ok(None));
                    return failed.map(|_| ());
                }
            }
            if let Some(s) = d.procedure.submitted.take() {
                let ns = s.elapsed_ns().max(1);
                self.tally.latency[ty].saturating_record(ns);
            }
            self.completed += 1;
        }
        self.live.completed.store(self.completed, Ordering::Relaxed);
        Ok(())
    }

    /// The underlying runner (for read-only snapshot transactions and
    /// other protocol-specific calls).
    pub fn runner(&mut self) -> &mut R {
        self.runner
    }

    /// Count a transaction run outside [`Exec::txn`] (e.g. a snapshot
    /// transaction) as completed, with its latency.
    pub fn completed_outside(&mut self, ty: usize, started: Stamp) {
        self.tally.commits[ty] += 1;
        let ns = started.elapsed_ns().max(1);
        self.tally.latency[ty].saturating_record(ns);
        self.completed += 1;
        self.live.completed.store(self.completed, Ordering::Relaxed);
    }
}

/// Load `w` (if not loaded yet) and run it on `engine` per `cfg`.
/// `tick(elapsed_s, total_s, completed)` is called about every 250 ms (for
/// a progress bar), with the transactions completed so far, warm-up
/// included.
///
/// # Errors
/// An engine error from any thread, or a bad configuration.
pub fn run<W: Workload, E: Engine>(
    w: &W,
    engine: &E,
    cfg: &DriverConfig,
    tick: &(dyn Fn(f64, f64, u64) + Sync),
) -> Result<RunReport, Error> {
    if cfg.threads == 0 || cfg.duration.is_zero() {
        return Err(Error::InvalidOption(
            "need at least one thread and a non-zero duration".into(),
        ));
    }
    // Latencies are timed in ticks (`Stamp`): measure their rate now,
    // before any thread times anything.
    granary_api::ns_per_tick();
    let types = w.types();
    let phase = AtomicU8::new(0);
    let live: Vec<CachePadded<Live>> = (0..cfg.threads).map(|_| CachePadded::default()).collect();
    let barrier = Barrier::new(cfg.threads + 1);
    let total_s = (cfg.warmup + cfg.duration).as_secs_f64();
    let durable_epoch = || engine.durable_epoch();
    let durable = engine.durable_epoch().is_some();
    let log_bytes_at = std::sync::Mutex::new((0u64, 0u64));
    type ThreadOut = Result<(Tally, u64), Error>;
    let mut rss_per_second = Vec::new();
    let rss_at_start_bytes = rss().0;
    let (results, per_second, m0, elapsed): (Vec<ThreadOut>, Vec<u64>, Instant, f64) =
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..cfg.threads)
                .map(|id| {
                    let (phase, live, barrier) = (&phase, &live[id], &barrier);
                    let durable_epoch = &durable_epoch;
                    s.spawn(move || -> ThreadOut {
                        let runner = engine.runner();
                        barrier.wait();
                        let mut runner = runner?;
                        let mut t = w.thread(id, cfg.threads, cfg.seed);
                        let declares = runner.uses_declared();
                        let predicts = runner.needs_write_sets();
                        let window = runner.window();
                        let mut exec = Exec {
                            runner: &mut runner,
                            tally: Tally::new(types.len()),
                            pending: durable.then(|| Pending {
                                durable_epoch,
                                queue: Default::default(),
                            }),
                            live,
                            completed: 0,
                            latency_every: cfg.latency_every.max(1),
                            tick: 0,
                            breakdown: cfg.breakdown,
                            declares,
                            predicts,
                            window,
                            in_flight: 0,
                        };
                        exec.runner.set_profiling(cfg.breakdown);
                        let mut measuring = false;
                        let mut base = 0;
                        loop {
                            let p = phase.load(Ordering::Relaxed);
                            if p == STOP {
                                break;
                            }
                            if p == MEASURE && !measuring {
                                // Warm-up over: start counting afresh.
                                measuring = true;
                                exec.tally = Tally::new(types.len());
                                base = exec.completed;
                            }
                            if let Err(e) = w.run_one(&mut t, &mut exec) {
                                phase.store(STOP, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                        // Procedures still in flight finish; they count only
                        // in the workload's own books (its invariants), not in
                        // the throughput of a period that is over.
                        let measured = exec.completed - base;
                        if let Err(e) = w.finish(&mut t, &mut exec) {
                            phase.store(STOP, Ordering::Relaxed);
                            return Err(e);
                        }
                        // Let the last timed transactions become durable, so
                        // the slowest are not left out of the distribution.
                        if let Some(p) = &mut exec.pending {
                            let deadline = Instant::now() + Duration::from_secs(5);
                            while !p.queue.is_empty() && Instant::now() < deadline {
                                std::thread::sleep(Duration::from_millis(1));
                                p.settle(&mut exec.tally.durable);
                            }
                        }
                        Ok((exec.tally, measured))
                    })
                })
                .collect();
            barrier.wait();
            let start = Instant::now();
            let sum = || {
                live.iter()
                    .map(|l| l.completed.load(Ordering::Relaxed))
                    .sum::<u64>()
            };
            let sleep_until = |t: Instant| {
                while Instant::now() < t {
                    if phase.load(Ordering::Relaxed) == STOP {
                        return false;
                    }
                    std::thread::sleep((t - Instant::now()).min(Duration::from_millis(250)));
                    tick(start.elapsed().as_secs_f64(), total_s, sum());
                }
                true
            };
            let mut ok = sleep_until(start + cfg.warmup);
            phase.store(MEASURE, Ordering::Relaxed);
            log_bytes_at.lock().expect("lock").0 = engine.log_bytes().unwrap_or(0);
            let m0 = Instant::now();
            let mut per_second = Vec::new();
            let mut last = sum();
            let secs = cfg.duration.as_secs_f64();
            let mut next = 1.0f64;
            while ok && next <= secs {
                ok = sleep_until(m0 + Duration::from_secs_f64(next));
                let now = sum();
                per_second.push(now - last);
                if let (rss @ 1.., _) = rss() {
                    rss_per_second.push(rss);
                }
                last = now;
                next += 1.0;
            }
            if ok {
                sleep_until(m0 + cfg.duration);
            }
            let elapsed = m0.elapsed().as_secs_f64();
            phase.store(STOP, Ordering::Relaxed);
            log_bytes_at.lock().expect("lock").1 = engine.log_bytes().unwrap_or(0);
            let results = handles
                .into_iter()
                .map(|h| h.join().expect("driver thread panicked"))
                .collect();
            (results, per_second, m0, elapsed)
        });
    let mut total = Tally::new(types.len());
    let mut completed = 0;
    for r in results {
        let (t, c) = r?;
        total.merge(&t);
        completed += c;
    }
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
    let mut type_reports = Vec::new();
    let breakdown = cfg.breakdown.then(|| {
        // The design splits its time if it did for any type (a type that
        // never ran reports nothing either way).
        let split = total.ticks.iter().any(|t| t.split);
        types
            .iter()
            .zip(&total.ticks)
            .map(|(&name, t)| {
                let all = t.total.max(1) as f64;
                let known = (t.index + t.record + t.commit + t.aborted) as f64;
                let part = |x: u64| split.then_some(x as f64 / all);
                Breakdown {
                    name,
                    index: part(t.index),
                    record: part(t.record),
                    commit: part(t.commit),
                    aborted: t.aborted as f64 / all,
                    other: ((all - known) / all).max(0.0),
                }
            })
            .collect()
    });
    let (mut commits, mut aborts) = (0, 0);
    for (i, &name) in types.iter().enumerate() {
        all.add(&total.latency[i]).expect("same bounds");
        let by_reason: BTreeMap<_, _> = AbortReason::ALL
            .iter()
            .zip(total.aborts[i])
            .map(|(r, n)| (r.name(), n))
            .collect();
        commits += total.commits[i];
        aborts += by_reason.values().sum::<u64>();
        type_reports.push(TypeReport {
            name,
            commits: total.commits[i],
            user_aborts: total.user_aborts[i],
            aborts: by_reason,
            latency_us: Latency::of(&total.latency[i]),
        });
    }
    let (rss_bytes, peak_rss_bytes) = rss();
    let durability = durable.then(|| {
        let (b0, b1) = *log_bytes_at.lock().expect("lock");
        let bytes = b1.saturating_sub(b0);
        DurabilityReport {
            durable_latency_us: Latency::of(&total.durable),
            log_mb_per_s: bytes as f64 / 1e6 / elapsed,
            log_bytes: bytes,
            checkpoints_s: within(&engine.checkpoint_spans(), m0, elapsed),
        }
    });
    Ok(RunReport {
        throughput_txn_per_s: completed as f64 / elapsed,
        aborts_per_s: aborts as f64 / elapsed,
        commits,
        aborts,
        elapsed_s: elapsed,
        per_second,
        rss_per_second,
        types: type_reports,
        latency_us: Latency::of(&all),
        latency_cdf_us: cdf(&all),
        breakdown,
        rss_bytes,
        peak_rss_bytes,
        rss_at_start_bytes,
        database_bytes: None,
        databases_loaded: 1,
        invariant_violations: w.verify(engine)?,
        durability,
    })
}

/// The `spans` that overlap the `elapsed` seconds from `m0`, as `[began,
/// ended]` seconds from `m0`, clipped to the period.
fn within(spans: &[CheckpointSpan], m0: Instant, elapsed: f64) -> Vec<[f64; 2]> {
    let at = |t: Instant| {
        if t >= m0 {
            (t - m0).as_secs_f64()
        } else {
            -(m0 - t).as_secs_f64()
        }
    };
    spans
        .iter()
        .map(|s| [at(s.began), at(s.ended)])
        .filter(|&[b, e]| e > 0.0 && b < elapsed)
        .map(|[b, e]| [b.max(0.0), e.min(elapsed)])
        .collect()
}

/// The most attempts [`run_until_committed`] makes (the shared bound,
/// as many as `granary::Options::default().max_retries`).
pub const UNTIL_COMMITTED_ATTEMPTS: u32 = granary_api::retry::MAX_ATTEMPTS;

/// Run `body` until it commits: for loading and verification, where a
/// conflict is rare and retrying is right. It gives up after
/// [`UNTIL_COMMITTED_ATTEMPTS`] conflicts in a row: a conflict that keeps
/// coming back is a bug, or a workload left running beside the loader.
///
/// # Errors
/// Any error from the body or the engine; [`Error::RetriesExhausted`]
/// (with the last conflict's reason) when every attempt conflicted.
pub fn run_until_committed<R: TxRunner, T>(
    r: &mut R,
    body: impl FnMut(&mut R::Tx<'_>) -> Result<T, TxError>,
) -> Result<T, Error> {
    run_until_committed_declared(r, None, body)
}

/// As [`run_until_committed`], for a procedure whose read and write sets
/// (or partitions) are `declared` up front; `None` runs it undeclared.
///
/// # Errors
/// As [`run_until_committed`].
pub fn run_until_committed_declared<R: TxRunner, T>(
    r: &mut R,
    declared: Option<&Declared>,
    mut body: impl FnMut(&mut R::Tx<'_>) -> Result<T, TxError>,
) -> Result<T, Error> {
    granary_api::retry::until_committed(UNTIL_COMMITTED_ATTEMPTS, || match declared {
        Some(d) => r.try_run_declared(d, &mut body),
        None => r.try_run(&mut body),
    })
}

/// Something a loader inserts a row with: `(table, key, value)`.
pub type InsertRow<'a> = dyn FnMut(granary_api::TableId, &[u8], &[u8]) -> Result<(), TxError> + 'a;

/// Load items `0..n` in parallel (up to 8 threads, each a contiguous
/// slice), `batch` items per transaction: `rows(item, insert)` inserts
/// item `item`'s rows. `progress(done, n)` is called after each batch.
///
/// # Errors
/// An engine error from any loader thread.
pub fn load_parallel<E: Engine>(
    engine: &E,
    n: u64,
    batch: u64,
    progress: &(dyn Fn(u64, u64) + Sync),
    rows: &(dyn Fn(u64, &mut InsertRow<'_>) -> Result<(), TxError> + Sync),
) -> Result<(), Error> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .clamp(1, 8) as u64;
    let per = n.div_ceil(threads);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let done = &done;
                s.spawn(move || -> Result<(), Error> {
                    let mut r = engine.runner()?;
                    let (lo, hi) = ((i * per).min(n), ((i + 1) * per).min(n));
                    let mut at = lo;
                    while at < hi {
                        let end = (at + batch.max(1)).min(hi);
                        run_until_committed(&mut r, |tx| {
                            for item in at..end {
                                rows(item, &mut |t, k, v| tx.insert(t, k, v))?;
                            }
                            Ok(())
                        })?;
                        // Relaxed: a progress counter only.
                        let d = done.fetch_add(end - at, Ordering::Relaxed);
                        progress(d + end - at, n);
                        at = end;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("loader thread panicked"))
    })
}

/// (current, peak) resident set size in bytes, from /proc (Linux).
pub fn rss() -> (u64, u64) {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return (0, 0);
    };
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary::{Database, Options};

    #[test]
    fn checkpoint_spans_are_placed_and_clipped_to_the_measured_period() {
        let m0 = Instant::now() + Duration::from_secs(10);
        let s = |b: f64, e: f64| CheckpointSpan {
            began: m0 + Duration::from_secs_f64(b),
            ended: m0 + Duration::from_secs_f64(e),
        };
        // Before the period (warm-up), across its start, inside, across
        // its end, after it.
        let spans = [
            s(0.5, 0.9),
            s(0.5, 1.5),
            s(2.0, 2.5),
            s(4.0, 6.0),
            s(7.0, 8.0),
        ];
        let shifted: Vec<CheckpointSpan> = spans
            .iter()
            .map(|c| CheckpointSpan {
                began: c.began - Duration::from_secs(1),
                ended: c.ended - Duration::from_secs(1),
            })
            .collect();
        let got = within(&shifted, m0, 5.0);
        let want = [[0.0, 0.5], [1.0, 1.5], [3.0, 5.0]];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g[0] - w[0]).abs() < 1e-6 && (g[1] - w[1]).abs() < 1e-6,
                "{got:?}"
            );
        }
    }

    #[test]
    fn run_until_committed_gives_up_on_endless_conflicts() {
        let db = Database::new(Options::default()).expect("db");
        let mut w = db.worker().expect("worker");
        let mut calls = 0u32;
        let r: Result<(), Error> = run_until_committed(&mut w, |_| {
            calls += 1;
            Err(TxError::Conflict(AbortReason::ReadLocked))
        });
        match r {
            Err(Error::RetriesExhausted { attempts, last }) => {
                assert_eq!(attempts, UNTIL_COMMITTED_ATTEMPTS);
                assert_eq!(last, AbortReason::ReadLocked);
            }
            other => panic!("expected RetriesExhausted, got {other:?}"),
        }
        assert_eq!(calls, UNTIL_COMMITTED_ATTEMPTS);
    }

    #[test]
    fn run_until_committed_retries_a_passing_conflict() {
        let db = Database::new(Options::default()).expect("db");
        let t = db.create_table("t").expect("table");
        let mut w = db.worker().expect("worker");
        let mut calls = 0u32;
        let v = run_until_committed(&mut w, |tx| {
            calls += 1;
            if calls < 3 {
                return Err(TxError::Conflict(AbortReason::ReadValidation));
            }
            tx.put(t, b"k", b"v")?;
            Ok(calls)
        })
        .expect("commits on the third attempt");
        assert_eq!(v, 3);
    }
}
