//! Contended workloads for `granary check`: run with history recording on,
//! over any [`Engine`], then handed to the serializability checker.
//!
//! * [`CheckWorkload::Ycsb`] — YCSB-style transactions of 2–8 distinct
//!   keys drawn from a Zipfian (θ = 0.99 by default): reads,
//!   read-modify-writes and blind writes. Keys start absent, so the run
//!   begins with inserts.
//! * [`CheckWorkload::Bank`] — transfers between accounts, audits that scan
//!   every account (and must see the constant total), and deposits into
//!   accounts that may not exist yet (inserts inside scanned ranges, the
//!   source of predicate anti-dependencies).
//! * [`CheckWorkload::ListAppend`] — Elle's list-append: transactions
//!   append unique elements to lists and read whole lists, so the order of
//!   every key's versions is visible in the values themselves. Keys rotate
//!   every few thousand transactions to keep lists short.
//! * [`CheckWorkload::WriteSkew`] — built to provoke write skew (G2-item):
//!   keys in pairs, each pair's sum kept at least 1 ("one doctor on
//!   call"). A transaction reads both keys of a pair and, if both are 1,
//!   sets one of them to 0; otherwise it sets one back to 1. Under
//!   snapshot isolation two transactions can both see (1, 1) and clear
//!   different keys; a serializable design never lets a pair reach (0, 0).

use std::fmt;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use granary_api::{
    Body, Declared, Done, Engine, Error, Procedure, TableId, TableOptions, Tx, TxError, TxRunner,
};
use granary_check::History;

use crate::record::{merge, Attempt, AttemptIds, RecTx, Recorder, RecordingRunner};
use crate::rng::Rng;
use crate::zipf::Zipf;

/// Which contended workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckWorkload {
    /// Zipfian read/write transactions over registers.
    Ycsb,
    /// Bank transfers, scanning audits, deposits that insert.
    Bank,
    /// Elle's list-append.
    ListAppend,
    /// Pairs whose sum must stay at least 1: write skew's test.
    WriteSkew,
}

impl CheckWorkload {
    /// Every workload, for help texts and CI loops.
    pub const ALL: [CheckWorkload; 4] = [
        CheckWorkload::Ycsb,
        CheckWorkload::Bank,
        CheckWorkload::ListAppend,
        CheckWorkload::WriteSkew,
    ];

    /// The workload's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            CheckWorkload::Ycsb => "ycsb",
            CheckWorkload::Bank => "bank",
            CheckWorkload::ListAppend => "list-append",
            CheckWorkload::WriteSkew => "write-skew",
        }
    }

    /// Parse a command-line name.
    ///
    /// # Errors
    /// An unknown name, with the list of known ones.
    pub fn parse(s: &str) -> Result<CheckWorkload, String> {
        CheckWorkload::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = CheckWorkload::ALL.iter().map(|w| w.name()).collect();
                format!("unknown check workload {s:?}; known: {}", names.join(", "))
            })
    }

    /// Default key count: small, for contention.
    pub fn default_keys(self) -> u64 {
        match self {
            CheckWorkload::Ycsb => 1000,
            CheckWorkload::Bank => 50,
            CheckWorkload::ListAppend => 32,
            CheckWorkload::WriteSkew => 16,
        }
    }
}

impl fmt::Display for CheckWorkload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to run a check workload.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    pub workload: CheckWorkload,
    /// Worker threads.
    pub threads: usize,
    /// Committed transactions to record (the run stops at this many,
    /// give or take one per thread).
    pub txns: u64,
    /// Key count (accounts for the bank, lists per generation for
    /// list-append).
    pub keys: u64,
    /// Zipfian skew of key choice.
    pub theta: f64,
    /// Seed of every worker's random stream (worker `i` uses stream `i+1`).
    pub seed: u64,
    /// Hint the table's keys as dense numbers ([`TableOptions::dense_keys`]:
    /// the keys are `0..keys`, 8 bytes big-endian), so a design that acts
    /// on it is checked that way.
    pub dense_keys: bool,
}

impl CheckConfig {
    /// Defaults for `workload`: 4 threads, 100k transactions, the
    /// workload's key count, θ = 0.99, seed 1.
    pub fn new(workload: CheckWorkload) -> CheckConfig {
        CheckConfig {
            workload,
            threads: 4,
            txns: 100_000,
            keys: workload.default_keys(),
            theta: 0.99,
            seed: 1,
            dense_keys: false,
        }
    }
}

/// A recorded run.
#[derive(Debug)]
pub struct CheckRun {
    /// Every attempt, committed or not.
    pub history: History,
    pub committed: u64,
    pub aborted: u64,
    pub elapsed: Duration,
    /// Workload invariants that failed (e.g. a bank audit that saw the
    /// wrong total). Empty on a correct engine.
    pub invariant_violations: Vec<String>,
    /// Write skews the write-skew workload saw (a committed transaction
    /// read both doctors of a pair off call). Serializability forbids
    /// them; snapshot isolation allows them, so they count against a
    /// design only at the serializable level.
    pub write_skews: Vec<String>,
}

impl CheckRun {
    /// The invariant violations that count against a design checked at
    /// serializability (`serializable`: write skews included) or at
    /// snapshot isolation (which allows them).
    pub fn violations(&self, serializable: bool) -> Vec<&str> {
        let skews = self.write_skews.iter().filter(|_| serializable);
        self.invariant_violations
            .iter()
            .chain(skews)
            .map(String::as_str)
            .collect()
    }
}

const INITIAL_BALANCE: u64 = 1000;
/// List-append keys move to a fresh generation after this many commits.
const LIST_GENERATION: u64 = 1000;

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

fn num(v: &[u8]) -> u64 {
    v.get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// Run `cfg` on `engine` with recording on. `progress` is called with the
/// committed count now and then.
///
/// # Errors
/// An engine error (table creation, too many workers, a failed
/// transaction), or a bad configuration ([`Error::InvalidOption`]).
pub fn run_check<E: Engine>(
    engine: &E,
    cfg: &CheckConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<CheckRun, Error> {
    if cfg.threads == 0 || cfg.threads >= u16::MAX as usize {
        return Err(Error::InvalidOption(format!(
            "threads must be between 1 and {}, got {}",
            u16::MAX - 1,
            cfg.threads
        )));
    }
    if cfg.keys < 2 || cfg.keys >= 1 << 30 {
        return Err(Error::InvalidOption(format!(
            "keys must be between 2 and 2^30 - 1, got {}",
            cfg.keys
        )));
    }
    if cfg.workload == CheckWorkload::WriteSkew && cfg.keys % 2 == 1 {
        return Err(Error::InvalidOption(
            "write-skew keys come in pairs: keys must be even".into(),
        ));
    }
    let zipf = Zipf::new(cfg.keys, cfg.theta).map_err(|e| Error::InvalidOption(e.to_string()))?;
    let mut options = TableOptions::point_lookups();
    if cfg.dense_keys {
        options = options.with_dense_keys(cfg.keys);
    }
    let table = engine.create_table_with(cfg.workload.name(), options)?;
    let mut loader = Recorder::new(cfg.threads as u16);
    let initial = match cfg.workload {
        CheckWorkload::Bank => Some(INITIAL_BALANCE),
        CheckWorkload::WriteSkew => Some(1),
        _ => None,
    };
    if let Some(value) = initial {
        let mut r = engine.runner()?;
        let mut rr = RecordingRunner {
            runner: &mut r,
            recorder: &mut loader,
        };
        for chunk in (0..cfg.keys).collect::<Vec<_>>().chunks(1000) {
            committed_or_err(|| {
                rr.try_run(|tx| {
                    for &a in chunk {
                        tx.put(table, &key(a), &value.to_be_bytes())?;
                    }
                    Ok(())
                })
            })?;
        }
    }
    let committed = AtomicU64::new(0);
    let start = Instant::now();
    type WorkerOut = Result<(Recorder, u64, Vec<String>, Vec<String>), Error>;
    let results: Vec<WorkerOut> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|w| {
                let (committed, zipf) = (&committed, &zipf);
                s.spawn(move || {
                    let mut runner = engine.runner()?;
                    let mut rng = Rng::new(cfg.seed, w as u64 + 1);
                    let mut ctx = Ctx {
                        cfg,
                        table,
                        zipf,
                        rng: &mut rng,
                        violations: Vec::new(),
                        skews: Vec::new(),
                        worker: w as u64,
                        rec: Recorder::new(w as u16),
                        aborted: 0,
                        committed,
                        progress,
                    };
                    ctx.run(&mut runner)?;
                    Ok((ctx.rec, ctx.aborted, ctx.violations, ctx.skews))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("check worker panicked"))
            .collect()
    });
    let elapsed = start.elapsed();
    let mut recorders = vec![loader];
    let mut aborted = 0;
    let (mut violations, mut write_skews) = (Vec::new(), Vec::new());
    for r in results {
        let (rec, a, v, skews) = r?;
        recorders.push(rec);
        aborted += a;
        violations.extend(v);
        write_skews.extend(skews);
    }
    if cfg.workload == CheckWorkload::Bank {
        // The final state must hold the same total.
        let mut r = engine.runner()?;
        let mut rr = RecordingRunner {
            runner: &mut r,
            recorder: &mut recorders[0],
        };
        let sum = committed_or_err(|| rr.try_run(|tx| audit(tx, table)))?;
        if sum != INITIAL_BALANCE * cfg.keys {
            violations.push(format!(
                "final bank total {sum}, expected {}",
                INITIAL_BALANCE * cfg.keys
            ));
        }
    }
    let committed = committed.load(Ordering::Relaxed);
    Ok(CheckRun {
        history: merge(recorders),
        committed,
        aborted,
        elapsed,
        invariant_violations: violations,
        write_skews,
    })
}

/// Run `attempt` until it commits: the load and the final audit conflict
/// with nothing, but an engine may still abort them (Deuteronomy sheds
/// load while its log is full).
fn committed_or_err<T>(
    mut attempt: impl FnMut() -> Result<Result<T, granary_api::AbortReason>, Error>,
) -> Result<T, Error> {
    const ATTEMPTS: u32 = 10_000;
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match attempt()? {
            Ok(v) => return Ok(v),
            Err(reason) => {
                last = Some(reason);
                std::thread::yield_now();
            }
        }
    }
    Err(Error::RetriesExhausted {
        attempts: ATTEMPTS,
        last: last.expect("an attempt"),
    })
}

/// Sum every account's balance (the audit's scan, also used unrecorded at
/// the end of a run).
fn audit<T: Tx>(tx: &mut T, table: TableId) -> Result<u64, TxError> {
    let mut sum = 0;
    tx.scan(
        table,
        Bound::Unbounded,
        Bound::Unbounded,
        usize::MAX,
        false,
        |_, v| {
            sum += num(v);
            true
        },
    )?;
    Ok(sum)
}

/// Procedures a client keeps in flight under a pipelined design: enough
/// for several clients' procedures to share a batch, few enough that a
/// run stops close to its transaction count.
const CHECK_WINDOW: usize = 32;

/// One worker's state for issuing transactions.
struct Ctx<'a> {
    cfg: &'a CheckConfig,
    table: TableId,
    zipf: &'a Zipf,
    rng: &'a mut Rng,
    violations: Vec<String>,
    /// Write skews seen by committed transactions.
    skews: Vec<String>,
    worker: u64,
    rec: Recorder,
    aborted: u64,
    /// Committed transactions over every worker.
    committed: &'a AtomicU64,
    progress: &'a (dyn Fn(u64) + Sync),
}

/// How a check transaction ended.
enum Outcome {
    /// Committed, with an audit's total if it was one, and the design's
    /// commit-order key.
    Committed(Option<u64>, u64),
    /// Aborted (a conflict, or its own rollback).
    Aborted,
    Failed(Error),
}

impl Ctx<'_> {
    /// Issue transactions until the run has committed enough: each run in
    /// place, or, under a pipelined design, a window of them in flight.
    fn run<R: TxRunner>(&mut self, runner: &mut R) -> Result<(), Error> {
        let window = runner.window().min(CHECK_WINDOW);
        let plan = runner.uses_declared();
        let ids = self.rec.ids();
        let mut done: Vec<Done<CheckTxn>> = Vec::new();
        let mut in_flight = 0;
        loop {
            let n = self.committed.load(Ordering::Relaxed);
            if n >= self.cfg.txns {
                break;
            }
            let op = self.next(n);
            let mut p = Procedure::new(
                0,
                CheckTxn {
                    table: self.table,
                    op,
                    worker: self.worker,
                    ids: ids.clone(),
                    attempts: Vec::new(),
                    skews: Vec::new(),
                },
            );
            if plan {
                p.body.declare(&mut p.declared);
                p.planned = true;
            }
            if window <= 1 {
                let (declared, body) = p.parts();
                let r = match declared {
                    Some(d) => runner.try_run_declared(d, |tx| body.run(tx)),
                    None => runner.try_run(|tx| body.run(tx)),
                };
                let out = match r {
                    Ok(Ok(sum)) => Outcome::Committed(sum, runner.last_commit_key()),
                    Ok(Err(_)) | Err(Error::RolledBack) => Outcome::Aborted,
                    Err(e) => Outcome::Failed(e),
                };
                self.settle(&mut p.body, out)?;
                continue;
            }
            runner.submit(p)?;
            in_flight += 1;
            runner.poll(in_flight >= window, &mut done)?;
            in_flight -= done.len();
            self.settle_done(&mut done)?;
        }
        while in_flight > 0 {
            runner.poll(true, &mut done)?;
            in_flight -= done.len();
            self.settle_done(&mut done)?;
        }
        Ok(())
    }

    fn settle_done(&mut self, done: &mut Vec<Done<CheckTxn>>) -> Result<(), Error> {
        for mut d in done.drain(..) {
            let out = match d.outcome {
                Ok(Some(sum)) => Outcome::Committed(sum, d.commit_key),
                Ok(None) => Outcome::Aborted,
                Err(e) => Outcome::Failed(e),
            };
            self.settle(&mut d.procedure.body, out)?;
        }
        Ok(())
    }

    /// Record a finished transaction's runs (every run before the last
    /// was abandoned), and check what it saw.
    fn settle(&mut self, body: &mut CheckTxn, out: Outcome) -> Result<(), Error> {
        let last = body.attempts.len();
        for (i, a) in body.attempts.drain(..).enumerate() {
            let key = match out {
                // A read-only commit takes no commit key.
                Outcome::Committed(_, k) if i + 1 == last => Some(if a.wrote() { k } else { 0 }),
                _ => None,
            };
            self.rec.finish(a, key);
        }
        let sum = match out {
            Outcome::Committed(sum, _) => sum,
            Outcome::Aborted => {
                self.aborted += 1;
                return Ok(());
            }
            Outcome::Failed(e) => return Err(e),
        };
        self.skews.append(&mut body.skews);
        if let Some(sum) = sum {
            let want = INITIAL_BALANCE * self.cfg.keys;
            if sum != want {
                self.violations.push(format!(
                    "worker {}: a committed audit saw total {sum}, expected {want}",
                    self.worker
                ));
            }
        }
        let n = self.committed.fetch_add(1, Ordering::Relaxed) + 1;
        if self.worker == 0 && n.is_multiple_of(1024) {
            (self.progress)(n);
        }
        Ok(())
    }

    /// `k` distinct keys.
    fn distinct(&mut self, k: usize) -> Vec<u64> {
        let k = k.min(self.cfg.keys as usize);
        let mut out = Vec::with_capacity(k);
        while out.len() < k {
            let x = self.zipf.next(self.rng);
            if !out.contains(&x) {
                out.push(x);
            }
        }
        out
    }

    /// The next transaction's parameters (`done`: commits so far).
    fn next(&mut self, done: u64) -> Op {
        match self.cfg.workload {
            CheckWorkload::Ycsb => {
                let n = 2 + self.rng.below(7) as usize;
                let keys = self.distinct(n);
                let kinds = keys.iter().map(|_| self.rng.below(100)).collect();
                Op::Ycsb { keys, kinds }
            }
            CheckWorkload::Bank => {
                let kind = self.rng.below(100);
                let amount = 1 + self.rng.below(50);
                let ab = self.distinct(2);
                // Deposits may target an account beyond the initial ones,
                // which then appears (an insert inside every audit's range).
                let fresh = self.cfg.keys + self.rng.below(self.cfg.keys);
                if kind < 20 {
                    Op::Audit
                } else {
                    let to = if kind < 30 { fresh } else { ab[1] };
                    Op::Transfer {
                        from: ab[0],
                        to,
                        amount,
                    }
                }
            }
            CheckWorkload::WriteSkew => {
                let pair = self.zipf.next(self.rng) / 2 * 2;
                let mine = pair + self.rng.below(2);
                Op::WriteSkew { pair, mine }
            }
            CheckWorkload::ListAppend => {
                let generation = done / LIST_GENERATION * self.cfg.keys;
                let n = 1 + self.rng.below(4) as usize;
                let keys = self.distinct(n);
                let ops = keys
                    .into_iter()
                    .map(|k| (generation + k, self.rng.below(2) == 0))
                    .collect();
                Op::ListAppend { ops }
            }
        }
    }
}

/// A check transaction's parameters.
enum Op {
    /// Per key, a kind in 0..100: a read below 50, a read and a put below
    /// 70, the design's own `update` below 85, a blind put above.
    Ycsb { keys: Vec<u64>, kinds: Vec<u64> },
    /// Sum every account.
    Audit,
    /// Move `amount` from `from` to `to` (which may not exist yet), if
    /// `from` holds it.
    Transfer { from: u64, to: u64, amount: u64 },
    /// Read both keys of `pair`; set `mine` to 0 if both are 1, to 1
    /// otherwise.
    WriteSkew { pair: u64, mine: u64 },
    /// Per key: append a unique element (true) or read the list.
    ListAppend { ops: Vec<(u64, bool)> },
}

/// A check transaction as a procedure: each run is recorded as an attempt
/// of its own (a design may abandon a run and start it again).
struct CheckTxn {
    table: TableId,
    op: Op,
    worker: u64,
    ids: AttemptIds,
    /// Every run's attempt; the last is the one whose outcome counts.
    attempts: Vec<Attempt>,
    /// Write skew the last run saw.
    skews: Vec<String>,
}

impl CheckTxn {
    /// Declare the keys it reads and writes (for designs that plan).
    fn declare(&self, d: &mut Declared) {
        let t = self.table;
        match &self.op {
            Op::Ycsb { keys, kinds } => {
                for (&k, &kind) in keys.iter().zip(kinds) {
                    if kind < 50 {
                        d.read(t, &key(k));
                    } else {
                        d.write(t, &key(k));
                    }
                }
            }
            // A scan: its keys are not known up front.
            Op::Audit => {}
            Op::Transfer { from, to, .. } => {
                d.write(t, &key(*from)).write(t, &key(*to));
            }
            Op::WriteSkew { pair, mine } => {
                d.read(t, &key(*pair)).read(t, &key(pair + 1));
                d.write(t, &key(*mine));
            }
            Op::ListAppend { ops } => {
                for &(k, append) in ops {
                    if append {
                        d.write(t, &key(k));
                    } else {
                        d.read(t, &key(k));
                    }
                }
            }
        }
    }

    fn run_op<T: Tx>(&mut self, tx: &mut RecTx<'_, T>) -> Result<Option<u64>, TxError> {
        let t = self.table;
        match &self.op {
            Op::Ycsb { keys, kinds } => {
                if keys.first().is_some_and(|k| k % 2 == 0) {
                    // Half the transactions hint their keys first: the
                    // lookups then start from what the hint found.
                    let bytes: Vec<[u8; 8]> = keys.iter().map(|&k| key(k)).collect();
                    let hinted: Vec<(TableId, &[u8])> = bytes.iter().map(|b| (t, &b[..])).collect();
                    tx.prefetch_many(&hinted);
                }
                for (&k, &kind) in keys.iter().zip(kinds) {
                    if kind < 50 {
                        tx.get(t, &key(k))?;
                    } else if kind < 70 {
                        let v = tx.get(t, &key(k))?.map_or(0, num);
                        tx.put(t, &key(k), &(v + 1).to_be_bytes())?;
                    } else if kind < 85 {
                        // The design's own read-modify-write path.
                        let bump = |v: &mut [u8]| {
                            let n = num(v) + 1;
                            if let Some(head) = v.get_mut(..8) {
                                head.copy_from_slice(&n.to_be_bytes());
                            }
                        };
                        // Half through `update`, half through
                        // `update_field` of the counter alone.
                        let found = if kind < 78 {
                            tx.update(t, &key(k), bump)?
                        } else {
                            tx.update_field(t, &key(k), 0..8, bump)?
                        };
                        if found.is_none() {
                            tx.put(t, &key(k), &1u64.to_be_bytes())?;
                        }
                    } else {
                        tx.put(t, &key(k), &kind.to_be_bytes())?;
                    }
                }
                Ok(None)
            }
            Op::Audit => audit(tx, t).map(Some),
            &Op::Transfer { from, to, amount } => {
                let from_bal = tx.get(t, &key(from))?.map_or(0, num);
                if from_bal < amount {
                    return Ok(None);
                }
                let to_bal = tx.get(t, &key(to))?.map(num);
                tx.put(t, &key(from), &(from_bal - amount).to_be_bytes())?;
                let new = (to_bal.unwrap_or(0) + amount).to_be_bytes();
                match to_bal {
                    Some(_) => tx.put(t, &key(to), &new)?,
                    None => tx.insert(t, &key(to), &new)?,
                }
                Ok(None)
            }
            &Op::WriteSkew { pair, mine } => {
                let x = tx.get(t, &key(pair))?.map_or(0, num);
                let y = tx.get(t, &key(pair + 1))?.map_or(0, num);
                if x + y == 0 {
                    self.skews.push(format!(
                        "worker {}: pair {pair} read as (0, 0): write skew",
                        self.worker
                    ));
                }
                let v: u64 = if x + y >= 2 { 0 } else { 1 };
                tx.put(t, &key(mine), &v.to_be_bytes())?;
                Ok(None)
            }
            Op::ListAppend { ops } => {
                for &(k, append) in ops {
                    if append {
                        let e = tx.unique_elem()?;
                        tx.append(t, &key(k), e)?;
                    } else {
                        tx.read_list(t, &key(k))?;
                    }
                }
                Ok(None)
            }
        }
    }
}

impl Body for CheckTxn {
    /// An audit's total.
    type Output = Option<u64>;

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<Option<u64>, TxError> {
        let mut a = self.ids.begin();
        self.skews.clear();
        let r = self.run_op(&mut RecTx::new(tx, &mut a));
        self.attempts.push(a);
        r
    }
}
