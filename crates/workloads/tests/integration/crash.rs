//! Crash loop (kill -9): durability's acceptance test.
//!
//! The parent test, [`crash_loop`], repeatedly runs a CHILD process (this
//! test binary again, running only [`child_entry`]) that opens a durable
//! database in one directory and runs, concurrently:
//!
//! * bank transfers between accounts, each also inserting a row keyed by a
//!   unique transfer id into `transfers`;
//! * YCSB-style read-modify-writes of counters kept in pairs (both halves
//!   incremented in the same transaction; now and then the pair is deleted
//!   into a retired total instead, or the increment also writes a blob
//!   bigger than a log buffer);
//! * table creation, each new table getting one row;
//! * TPC-C, one warehouse, loaded only if no completed load is recorded
//!   ([`Tpcc::open_or_load`]), with a probe that reads Σ D_NEXT_O_ID and
//!   W_YTD;
//! * checkpoints, periodic or explicit or both.
//!
//! The child acknowledges a transaction (a `@@crash ACK` line on stdout)
//! only once it is durable: `wait_for_durable(true)`, or in token mode
//! after `wait_durable` / `is_durable` on its commit token. The parent
//! kills the child with SIGKILL at a seeded random moment — during
//! open/recovery, during the TPC-C load, or while the workloads run —
//! waits for it, then opens the directory itself and checks:
//!
//! * every acknowledged transfer's row is there, with its contents; every
//!   counter pair's total is at least its acknowledged value; every
//!   acknowledged new table holds its row; Σ D_NEXT_O_ID and W_YTD are at
//!   least the acknowledged probe's;
//! * nothing partial: each balance is exactly its initial amount plus what
//!   the present transfer rows moved (so a transfer's debit, credit and
//!   row are all there or all absent), the total is constant, both halves
//!   of a counter pair are equal or both absent, a blob is whole and
//!   records no more than its pair's total;
//! * the TPC-C consistency conditions (clause 3.3.2) hold once loaded;
//! * whatever one recovery showed stays in every later one; and a few
//!   transfers the parent commits itself without waiting for durability
//!   survive its clean close.
//!
//! Then the next cycle starts on the same directory, so recovery runs on
//! top of recoveries. `GRANARY_SEED` replays a run's choices (the kill
//! moments are times, so only approximately); `GRANARY_STRESS=n` runs
//! n × 50 cycles, `GRANARY_CRASH_TPCC_SCALE` sets TPC-C's scale-down factor
//! (default 10; 1 is the spec's population). On failure the directory is
//! kept and its path printed.

use crate::common::{seed, stress};

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::ops::Bound;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use granary::{CommitToken, Database, Engine, Options, TableId, TxError, TxRunner, Worker};
use granary_workloads::driver::{run, DriverConfig, Exec, Workload};
use granary_workloads::rng::Rng;
use granary_workloads::tpcc::rows::{key, District, Warehouse};
use granary_workloads::tpcc::{Tpcc, TpccConfig, DISTRICTS};

/// Set (to the database directory) in the child's environment.
const CHILD_DIR: &str = "GRANARY_CRASH_CHILD";
/// The child's parameters ([`Params`]).
const CHILD_PARAMS: &str = "GRANARY_CRASH_PARAMS";
/// Marks the child's protocol lines (libtest prints its own).
const TAG: &str = "@@crash";

const ACCOUNTS: u32 = 32;
const INITIAL: i64 = 1000;
const PAIRS: u32 = 8;
/// The thread number in the ids of the parent's own transfers.
const PARENT_THREAD: u64 = 0xFF;
const BASE_CYCLES: u64 = 50;
/// Tables each child creates ([`new_tables`]) …
const TABLES_PER_CYCLE: u64 = 2;
/// … while there are fewer than this many (`granary::MAX_TABLES` is 4096).
const MAX_CYCLE_TABLES: usize = 3000;

// ---------------------------------------------------------------------
// Shared: parameters, tables, reading the state.

/// One cycle's child configuration, chosen by the parent from the seed.
#[derive(Clone, Debug)]
struct Params {
    seed: u64,
    cycle: u64,
    loggers: usize,
    epoch_ms: u64,
    /// `false`: token mode (`wait_for_durable(false)` + `wait_durable`).
    wait: bool,
    /// Token mode: acknowledge at the latest after this many commits.
    batch: u64,
    /// Periodic checkpoints every this many ms (0: none).
    ckpt_interval_ms: u64,
    /// Explicit `db.checkpoint()` every about this many ms (0: none).
    ckpt_explicit_ms: u64,
    ckpt_threads: usize,
    recovery_threads: usize,
    /// TPC-C's [`TpccConfig::scale_down`].
    tpcc_scale: u32,
}

impl Params {
    fn choose(seed: u64, cycle: u64, loggers: usize, tpcc_scale: u32) -> Params {
        let mut r = Rng::new(seed, 1000 + cycle);
        let (interval, explicit) = match r.below(4) {
            0 => (50 + r.below(250), 0),
            1 => (0, 30 + r.below(300)),
            2 => (80 + r.below(200), 50 + r.below(300)),
            _ => (150 + r.below(150), 0),
        };
        Params {
            seed,
            cycle,
            loggers,
            epoch_ms: 2 + r.below(9),
            wait: r.below(2) == 0,
            batch: 1 + r.below(8),
            ckpt_interval_ms: interval,
            ckpt_explicit_ms: explicit,
            ckpt_threads: 1 + r.below(3) as usize,
            recovery_threads: 1 + r.below(3) as usize,
            tpcc_scale,
        }
    }

    fn encode(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {} {} {} {}",
            self.seed,
            self.cycle,
            self.loggers,
            self.epoch_ms,
            self.wait as u8,
            self.batch,
            self.ckpt_interval_ms,
            self.ckpt_explicit_ms,
            self.ckpt_threads,
            self.recovery_threads,
            self.tpcc_scale
        )
    }

    fn decode(s: &str) -> Params {
        let v: Vec<u64> = s
            .split_whitespace()
            .map(|x| x.parse().expect("bad child params"))
            .collect();
        assert_eq!(v.len(), 11, "bad child params {s:?}");
        Params {
            seed: v[0],
            cycle: v[1],
            loggers: v[2] as usize,
            epoch_ms: v[3],
            wait: v[4] != 0,
            batch: v[5],
            ckpt_interval_ms: v[6],
            ckpt_explicit_ms: v[7],
            ckpt_threads: v[8] as usize,
            recovery_threads: v[9] as usize,
            tpcc_scale: v[10] as u32,
        }
    }

    fn tpcc(&self) -> Tpcc {
        let mut c = TpccConfig::new(1);
        c.scale_down = self.tpcc_scale;
        Tpcc::new(c).expect("tpcc config")
    }

    fn options(&self) -> Options {
        Options::default()
            .epoch_interval(Duration::from_millis(self.epoch_ms))
            .loggers(self.loggers)
            .wait_for_durable(self.wait)
            .checkpoint_interval(
                (self.ckpt_interval_ms > 0).then(|| Duration::from_millis(self.ckpt_interval_ms)),
            )
            .checkpoint_threads(self.ckpt_threads)
            .recovery_threads(self.recovery_threads)
    }
}

/// The bank and counter tables.
#[derive(Clone, Copy)]
struct Tables {
    accounts: TableId,
    transfers: TableId,
    counters: TableId,
    blobs: TableId,
}

impl Tables {
    fn open(db: &Database) -> Result<Tables, granary::Error> {
        Ok(Tables {
            accounts: db.open_table("accounts")?,
            transfers: db.open_table("transfers")?,
            counters: db.open_table("counters")?,
            blobs: db.open_table("blobs")?,
        })
    }
}

fn account_key(a: u32) -> [u8; 4] {
    a.to_be_bytes()
}

fn counter_key(pair: u32, half: u8) -> [u8; 5] {
    let mut k = [0; 5];
    k[..4].copy_from_slice(&pair.to_be_bytes());
    k[4] = half;
    k
}

fn i64_of(v: &[u8]) -> Result<i64, TxError> {
    Ok(i64::from_le_bytes(
        v.try_into().map_err(|_| TxError::user("bad i64 value"))?,
    ))
}

fn u64_of(v: &[u8]) -> Result<u64, TxError> {
    Ok(u64::from_le_bytes(
        v.try_into().map_err(|_| TxError::user("bad u64 value"))?,
    ))
}

/// A transfer: (from, to, amount).
type Transfer = (u32, u32, i64);

fn encode_transfer(t: Transfer) -> [u8; 16] {
    let mut v = [0; 16];
    v[..4].copy_from_slice(&t.0.to_le_bytes());
    v[4..8].copy_from_slice(&t.1.to_le_bytes());
    v[8..].copy_from_slice(&t.2.to_le_bytes());
    v
}

fn decode_transfer(v: &[u8]) -> Option<Transfer> {
    if v.len() != 16 {
        return None;
    }
    Some((
        u32::from_le_bytes(v[..4].try_into().ok()?),
        u32::from_le_bytes(v[4..8].try_into().ok()?),
        i64::from_le_bytes(v[8..].try_into().ok()?),
    ))
}

/// TPC-C's monotone figures: (Σ D_NEXT_O_ID, W_YTD) of warehouse 1.
fn tpcc_probe(w: &mut Worker, tpcc: &Tpcc) -> Result<(u64, i64), granary::Error> {
    let t = tpcc.tables().expect("tpcc attached");
    w.run(|tx| {
        let mut next = 0u64;
        for d in 1..=DISTRICTS {
            let v = tx
                .get(t.district, &key::district(1, d))?
                .ok_or_else(|| TxError::user(format!("district {d} missing")))?;
            next += District::decode(v)?.next_o_id as u64;
        }
        let v = tx
            .get(t.warehouse, &key::warehouse(1))?
            .ok_or_else(|| TxError::user("warehouse 1 missing"))?;
        Ok((next, Warehouse::decode(v)?.ytd))
    })
}

// ---------------------------------------------------------------------
// The child.

/// Write one protocol line, flushed (acknowledgements must reach the pipe
/// before the next transaction starts).
fn say(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{TAG} {line}");
    let _ = o.flush();
}

/// Report an unexpected error and exit: the parent fails the test.
fn die(what: String) -> ! {
    say(&format!("ERROR {what}"));
    eprintln!("crash child: {what}");
    std::process::exit(2)
}

/// The child: runs only when the parent set [`CHILD_DIR`]; otherwise a
/// no-op test.
#[test]
fn child_entry() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let p = Params::decode(&std::env::var(CHILD_PARAMS).expect("child params"));
    std::panic::set_hook(Box::new(|info| die(format!("panic: {info}"))));
    child(Path::new(&dir), &p)
}

fn child(dir: &Path, p: &Params) -> ! {
    say("START");
    let t0 = Instant::now();
    let db = Database::open(dir, p.options()).unwrap_or_else(|e| die(format!("open: {e}")));
    let rec = db.durability_stats().expect("durable").recovery;
    say(&format!(
        "OPENED {} ms, recovered pepoch {} ckpt {:?} ({} records) log records {}",
        t0.elapsed().as_millis(),
        rec.pepoch,
        rec.checkpoint_low,
        rec.checkpoint_records,
        rec.log_records_applied
    ));
    let t = Tables::open(&db).unwrap_or_else(|e| die(format!("open tables: {e}")));
    // The accounts appear all at once, in one transaction.
    let mut w = db.worker().unwrap_or_else(|e| die(format!("worker: {e}")));
    w.run(|tx| {
        if tx.get(t.accounts, &account_key(0))?.is_none() {
            for a in 0..ACCOUNTS {
                tx.insert(t.accounts, &account_key(a), &INITIAL.to_le_bytes())?;
            }
        }
        Ok(())
    })
    .unwrap_or_else(|e| die(format!("bank init: {e}")));
    if !p.wait {
        db.wait_durable(w.commit_token())
            .unwrap_or_else(|e| die(format!("bank init durable: {e}")));
    }
    drop(w);
    let db = &db;
    std::thread::scope(|s| {
        for i in 0..2u64 {
            s.spawn(move || bank(db, t, p, i).unwrap_or_else(|e| die(format!("bank {i}: {e}"))));
        }
        for i in 0..2u64 {
            s.spawn(move || {
                counters(db, t, p, i).unwrap_or_else(|e| die(format!("counters {i}: {e}")))
            });
        }
        if p.ckpt_explicit_ms > 0 {
            s.spawn(move || {
                let mut r = Rng::new(p.seed, p.cycle * 100 + 99);
                loop {
                    std::thread::sleep(Duration::from_millis(
                        p.ckpt_explicit_ms / 2 + r.below(p.ckpt_explicit_ms),
                    ));
                    say("CHECKPOINTING");
                    match db.checkpoint() {
                        Ok(c) => say(&format!("CHECKPOINT {} records {} ms", c.records, c.millis)),
                        Err(e) => die(format!("checkpoint: {e}")),
                    }
                }
            });
        }
        s.spawn(move || new_tables(db, p).unwrap_or_else(|e| die(format!("new tables: {e}"))));
        s.spawn(move || tpcc(db, p).unwrap_or_else(|e| die(format!("tpcc: {e}"))));
        // The parent kills us long before this.
        std::thread::sleep(Duration::from_secs(120));
        die("not killed after 120 s".into())
    })
}

/// Acknowledgements waiting for durability (token mode).
struct Acks {
    wait: bool,
    batch: usize,
    pending: Vec<String>,
    /// The newest token among the pending ones. (Tokens are not monotone
    /// per worker: a read-only transaction's covers only what it read,
    /// which may be older than the worker's previous commit.)
    newest: Option<CommitToken>,
}

impl Acks {
    fn new(p: &Params) -> Acks {
        Acks {
            wait: p.wait,
            batch: p.batch as usize,
            pending: Vec::new(),
            newest: None,
        }
    }

    /// `ack` is for the transaction `w` just committed.
    fn push(&mut self, db: &Database, w: &Worker, ack: String) -> Result<(), granary::Error> {
        if self.wait {
            // `run` returned only once it was durable.
            say(&ack);
            return Ok(());
        }
        self.pending.push(ack);
        let token = self.newest.max(Some(w.commit_token())).expect("a token");
        self.newest = Some(token);
        if self.pending.len() >= self.batch {
            db.wait_durable(token)?;
        } else if !db.is_durable(token) {
            return Ok(());
        }
        for a in self.pending.drain(..) {
            say(&a);
        }
        self.newest = None;
        Ok(())
    }
}

fn bank(db: &Database, t: Tables, p: &Params, i: u64) -> Result<(), granary::Error> {
    let mut r = Rng::new(p.seed, p.cycle * 100 + i);
    let mut w = db.worker()?;
    let mut acks = Acks::new(p);
    for seq in 1u64.. {
        // Unique across cycles and threads.
        let id = p.cycle << 40 | i << 32 | seq;
        let from = r.below(ACCOUNTS as u64) as u32;
        let to = (from + 1 + r.below(ACCOUNTS as u64 - 1) as u32) % ACCOUNTS;
        let amount = 1 + r.below(100) as i64;
        transfer(&mut w, t, id, (from, to, amount))?;
        acks.push(db, &w, format!("ACK X {id} {from} {to} {amount}"))?;
    }
    Ok(())
}

/// Move money and record the transfer, in one transaction.
fn transfer(w: &mut Worker, t: Tables, id: u64, tr: Transfer) -> Result<(), granary::Error> {
    let (from, to, amount) = tr;
    w.run(|tx| {
        let (fk, tk) = (account_key(from), account_key(to));
        let a = i64_of(
            tx.get(t.accounts, &fk)?
                .ok_or_else(|| TxError::user("no account"))?,
        )?;
        let b = i64_of(
            tx.get(t.accounts, &tk)?
                .ok_or_else(|| TxError::user("no account"))?,
        )?;
        tx.put(t.accounts, &fk, &(a - amount).to_le_bytes())?;
        tx.put(t.accounts, &tk, &(b + amount).to_le_bytes())?;
        tx.insert(t.transfers, &id.to_be_bytes(), &encode_transfer(tr))
    })
}

/// The counter half holding what retirements moved out of a pair.
const RETIRED: u8 = 2;

/// A blob recording counter total `n`: `n`, then a pattern from it.
fn blob(n: u64, len: usize) -> Vec<u8> {
    let mut v = n.to_le_bytes().to_vec();
    v.extend((8..len.max(8)).map(|i| blob_byte(n, i)));
    v
}

fn blob_byte(n: u64, i: usize) -> u8 {
    (n as u8) ^ (i as u8) ^ ((i >> 8) as u8)
}

/// The total a well-formed blob records.
fn blob_total(v: &[u8]) -> Option<u64> {
    let n = u64::from_le_bytes(v.get(..8)?.try_into().ok()?);
    v.iter()
        .enumerate()
        .skip(8)
        .all(|(i, &b)| b == blob_byte(n, i))
        .then_some(n)
}

/// YCSB-style read-modify-writes of counter pairs: both halves go up by
/// one in one transaction. Now and then a pair is retired instead (both
/// halves deleted, their value added to the pair's `RETIRED` row), so a
/// pair's total — retired plus live — only grows; or the increment also
/// writes a big blob (up to 700 KB, bigger than a log buffer) recording
/// the new total.
fn counters(db: &Database, t: Tables, p: &Params, i: u64) -> Result<(), granary::Error> {
    let mut r = Rng::new(p.seed, p.cycle * 100 + 10 + i);
    let mut w = db.worker()?;
    let mut acks = Acks::new(p);
    loop {
        // Skewed: half the updates go to pair 0.
        let pair = if r.below(2) == 0 {
            0
        } else {
            r.below(PAIRS as u64) as u32
        };
        let retire = r.below(20) == 0;
        let blob_len = if r.below(100) == 0 {
            8 + r.below(700_000) as usize
        } else {
            0
        };
        let total = w.run(|tx| {
            let get = |tx: &mut granary::Transaction<'_>, half| -> Result<Option<u64>, TxError> {
                tx.get(t.counters, &counter_key(pair, half))?
                    .map(u64_of)
                    .transpose()
            };
            let (a, b) = (get(tx, 0)?, get(tx, 1)?);
            if a != b {
                return Err(TxError::user(format!(
                    "counter pair {pair} halves differ: {a:?} vs {b:?}"
                )));
            }
            let retired = get(tx, RETIRED)?.unwrap_or(0);
            let live = a.unwrap_or(0);
            if retire {
                if a.is_some() {
                    tx.delete(t.counters, &counter_key(pair, 0))?;
                    tx.delete(t.counters, &counter_key(pair, 1))?;
                    tx.put(
                        t.counters,
                        &counter_key(pair, RETIRED),
                        &(retired + live).to_le_bytes(),
                    )?;
                }
                return Ok(retired + live);
            }
            tx.put(t.counters, &counter_key(pair, 0), &(live + 1).to_le_bytes())?;
            tx.put(t.counters, &counter_key(pair, 1), &(live + 1).to_le_bytes())?;
            let total = retired + live + 1;
            if blob_len > 0 {
                tx.put(t.blobs, &pair.to_be_bytes(), &blob(total, blob_len))?;
            }
            Ok(total)
        })?;
        acks.push(db, &w, format!("ACK C {pair} {total}"))?;
    }
}

/// The name of the `k`th table created in `cycle`.
fn cycle_table(cycle: u64, k: u64) -> String {
    format!("t{cycle}.{k}")
}

/// Create tables while the rest runs, each with one row (the catalog
/// must keep up with the log).
fn new_tables(db: &Database, p: &Params) -> Result<(), granary::Error> {
    let mut r = Rng::new(p.seed, p.cycle * 100 + 50);
    let mut w = db.worker()?;
    for k in 0..TABLES_PER_CYCLE {
        std::thread::sleep(Duration::from_millis(r.below(300)));
        if db.tables().len() >= MAX_CYCLE_TABLES {
            return Ok(());
        }
        let name = cycle_table(p.cycle, k);
        let t = db.open_table(&name)?;
        w.run(|tx| tx.put(t, b"row", &p.cycle.to_le_bytes()))?;
        if !p.wait {
            db.wait_durable(w.commit_token())?;
        }
        say(&format!("ACK N {name}"));
    }
    Ok(())
}

fn tpcc(db: &Database, p: &Params) -> Result<(), granary::Error> {
    let mut tpcc = p.tpcc();
    if !tpcc.attach(db)? {
        say("LOADING");
        let t0 = Instant::now();
        tpcc.open_or_load(db, &|_, _| {})?;
        say(&format!("LOADED {} ms", t0.elapsed().as_millis()));
    }
    say("READY");
    let paced = Paced(tpcc);
    let tpcc = &paced.0;
    std::thread::scope(|s| {
        s.spawn(move || {
            let probe = || -> Result<(), granary::Error> {
                let mut w = db.worker()?;
                loop {
                    std::thread::sleep(Duration::from_millis(15));
                    let (next, ytd) = tpcc_probe(&mut w, tpcc)?;
                    if !p.wait {
                        // A read-only transaction's token: what it read
                        // is durable.
                        db.wait_durable(w.commit_token())?;
                    }
                    say(&format!("ACK T {next} {ytd}"));
                }
            };
            probe().unwrap_or_else(|e| die(format!("tpcc probe: {e}")))
        });
        let cfg = DriverConfig {
            threads: 1,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(3600),
            seed: p.seed ^ p.cycle,
            latency_every: 1000,
            breakdown: false,
        };
        run(&paced, db, &cfg, &|_, _, _| {}).map(|_| ())
    })
}

/// TPC-C at most one transaction per [`PACE`], so the database stays
/// small over many cycles (recovery time grows with it).
struct Paced(Tpcc);

const PACE: Duration = Duration::from_millis(2);

impl Workload for Paced {
    type Thread = <Tpcc as Workload>::Thread;

    fn types(&self) -> &'static [&'static str] {
        self.0.types()
    }

    fn load<E: Engine>(
        &mut self,
        engine: &E,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), granary::Error> {
        self.0.load(engine, progress)
    }

    fn thread(&self, id: usize, threads: usize, seed: u64) -> Self::Thread {
        self.0.thread(id, threads, seed)
    }

    fn run_one<R: TxRunner>(
        &self,
        t: &mut Self::Thread,
        exec: &mut Exec<'_, R>,
    ) -> Result<(), granary::Error> {
        self.0.run_one(t, exec)?;
        std::thread::sleep(PACE);
        Ok(())
    }

    fn verify<E: Engine>(&self, engine: &E) -> Result<Vec<String>, granary::Error> {
        self.0.verify(engine)
    }
}

// ---------------------------------------------------------------------
// The parent.

/// What must be in every later recovery: acknowledged by a child, or seen
/// by an earlier recovery. Each entry says where it came from.
#[derive(Default)]
struct Required {
    transfers: HashMap<u64, (Transfer, String)>,
    counters: HashMap<u32, (u64, String)>,
    tpcc_next: (u64, String),
    tpcc_ytd: (i64, String),
    bank_initialized: Option<String>,
    tpcc_loaded: Option<String>,
    /// Tables from [`new_tables`], by name.
    tables: HashMap<String, String>,
}

impl Required {
    fn ack(&mut self, cycle: u64, line: &str) -> Result<(), String> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("cycle {cycle}: bad ack line {line:?}");
        let num = |i: usize| f.get(i).and_then(|x| x.parse::<i64>().ok()).ok_or_else(bad);
        let from = format!("acked in cycle {cycle}");
        match f.get(1).copied() {
            Some("X") => {
                let id = f
                    .get(2)
                    .and_then(|x| x.parse::<u64>().ok())
                    .ok_or_else(bad)?;
                let tr = (num(3)? as u32, num(4)? as u32, num(5)?);
                self.transfers.insert(id, (tr, from.clone()));
                self.bank_initialized.get_or_insert(from);
            }
            Some("C") => {
                let (pair, n) = (num(2)? as u32, num(3)? as u64);
                let e = self.counters.entry(pair).or_insert((0, String::new()));
                if n > e.0 {
                    *e = (n, from);
                }
            }
            Some("N") => {
                let name = f.get(2).ok_or_else(bad)?;
                self.tables.insert(name.to_string(), from);
            }
            Some("T") => {
                let (next, ytd) = (num(2)? as u64, num(3)?);
                if next > self.tpcc_next.0 {
                    self.tpcc_next = (next, from.clone());
                }
                if ytd > self.tpcc_ytd.0 {
                    self.tpcc_ytd = (ytd, from.clone());
                }
                self.tpcc_loaded.get_or_insert(from);
            }
            _ => return Err(bad()),
        }
        Ok(())
    }
}

/// The recovered state, as the parent read it.
struct State {
    accounts: Vec<(Vec<u8>, Vec<u8>)>,
    transfers: Vec<(Vec<u8>, Vec<u8>)>,
    counters: Vec<(Vec<u8>, Vec<u8>)>,
    blobs: Vec<(Vec<u8>, Vec<u8>)>,
}

fn read_state(db: &Database) -> Result<Option<State>, granary::Error> {
    let Ok(t) = (|| -> Result<Tables, granary::Error> {
        Ok(Tables {
            accounts: db.table("accounts")?,
            transfers: db.table("transfers")?,
            counters: db.table("counters")?,
            blobs: db.table("blobs")?,
        })
    })() else {
        return Ok(None);
    };
    let mut w = db.worker()?;
    w.run(|tx| {
        let all = |tx: &mut granary::Transaction<'_>, t| {
            tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, usize::MAX, false)
        };
        Ok(Some(State {
            accounts: all(tx, t.accounts)?,
            transfers: all(tx, t.transfers)?,
            counters: all(tx, t.counters)?,
            blobs: all(tx, t.blobs)?,
        }))
    })
}

/// Check the recovered directory against `req`; then require what it
/// showed from later recoveries too. Returns the violations and a summary
/// of what was checked.
fn verify(dir: &Path, p: &Params, req: &mut Required) -> (Vec<String>, String) {
    let mut bad = Vec::new();
    let mut sum = String::new();
    let opts = Options::default()
        .epoch_interval(Duration::from_millis(5))
        .loggers(p.loggers)
        .recovery_threads(p.recovery_threads % 3 + 1)
        .wait_for_durable(false);
    let t0 = Instant::now();
    let db = match Database::open(dir, opts) {
        Ok(db) => db,
        Err(e) => return (vec![format!("recovery failed: {e}")], sum),
    };
    let rec = db.durability_stats().expect("durable").recovery;
    let _ = write!(
        sum,
        "recovery {} ms (pepoch {}, ckpt {:?} {} records, {} log records); ",
        t0.elapsed().as_millis(),
        rec.pepoch,
        rec.checkpoint_low,
        rec.checkpoint_records,
        rec.log_records_applied
    );
    let state = match read_state(&db) {
        Ok(s) => s,
        Err(e) => return (vec![format!("reading the state: {e}")], sum),
    };
    let empty = State {
        accounts: Vec::new(),
        transfers: Vec::new(),
        counters: Vec::new(),
        blobs: Vec::new(),
    };
    let st = state.as_ref().unwrap_or(&empty);

    // The bank: all accounts or none (one transaction made them).
    let mut balances = HashMap::new();
    for (k, v) in &st.accounts {
        let a = u32::from_be_bytes(k.as_slice().try_into().unwrap_or([0xFF; 4]));
        match i64_of(v) {
            Ok(b) if a < ACCOUNTS => {
                balances.insert(a, b);
            }
            _ => bad.push(format!("bad account row {k:?} = {v:?}")),
        }
    }
    if balances.is_empty() {
        if let Some(from) = &req.bank_initialized {
            bad.push(format!("accounts missing, but the bank was {from}"));
        }
        if !st.transfers.is_empty() {
            bad.push(format!(
                "no accounts but {} transfer rows",
                st.transfers.len()
            ));
        }
    } else if balances.len() != ACCOUNTS as usize {
        bad.push(format!(
            "partial bank initialization: {} of {ACCOUNTS} accounts",
            balances.len()
        ));
    }
    // Each balance = initial + what the present transfers moved: a
    // transfer's debit, credit and row are all present or all absent.
    let mut present = HashMap::new();
    let mut expect: HashMap<u32, i64> = (0..ACCOUNTS).map(|a| (a, INITIAL)).collect();
    for (k, v) in &st.transfers {
        let (Ok(id), Some(tr)) = (
            k.as_slice().try_into().map(u64::from_be_bytes),
            decode_transfer(v),
        ) else {
            bad.push(format!("bad transfer row {k:?} = {v:?}"));
            continue;
        };
        *expect.entry(tr.0).or_default() -= tr.2;
        *expect.entry(tr.1).or_default() += tr.2;
        present.insert(id, tr);
    }
    if !balances.is_empty() {
        let total: i64 = balances.values().sum();
        if total != INITIAL * ACCOUNTS as i64 {
            bad.push(format!(
                "bank total {total}, expected {}",
                INITIAL * ACCOUNTS as i64
            ));
        }
        let mut off = 0;
        for a in 0..ACCOUNTS {
            let (got, want) = (balances.get(&a).copied(), expect[&a]);
            if got != Some(want) {
                off += 1;
                if off <= 5 {
                    bad.push(format!(
                        "partial transfer: account {a} holds {got:?} but the {} present transfers make it {want}",
                        present.len()
                    ));
                }
            }
        }
    }
    let mut missing = 0;
    for (id, (tr, from)) in &req.transfers {
        match present.get(id) {
            Some(got) if got == tr => {}
            got => {
                missing += 1;
                if missing <= 10 {
                    bad.push(format!(
                        "transfer {id} (cycle {}, thread {}, seq {}) {tr:?} {from}: found {got:?}",
                        id >> 40,
                        (id >> 32) & 0xFF,
                        id & 0xFFFF_FFFF
                    ));
                }
            }
        }
    }
    if missing > 10 {
        bad.push(format!("... {missing} required transfers missing in all"));
    }
    let _ = write!(
        sum,
        "bank: {} accounts, {} transfer rows, {} required present; ",
        balances.len(),
        present.len(),
        req.transfers.len()
    );

    // Counters: halves both present and equal or both absent (one
    // transaction wrote or deleted them), totals at least as acknowledged,
    // blobs whole and not ahead of their pair's total.
    let mut pairs: HashMap<u32, [Option<u64>; 3]> = HashMap::new();
    for (k, v) in &st.counters {
        match (k.len(), u64_of(v)) {
            (5, Ok(n)) if k[4] <= RETIRED => {
                let pair = u32::from_be_bytes(k[..4].try_into().expect("4 bytes"));
                pairs.entry(pair).or_default()[k[4] as usize] = Some(n);
            }
            _ => bad.push(format!("bad counter row {k:?} = {v:?}")),
        }
    }
    for (&pair, h) in &pairs {
        if h[0] != h[1] {
            bad.push(format!(
                "partial counter update: pair {pair} halves {:?} vs {:?} (retired {:?})",
                h[0], h[1], h[2]
            ));
        }
    }
    let totals: HashMap<u32, u64> = pairs
        .iter()
        .map(|(&p, h)| (p, h[0].unwrap_or(0) + h[2].unwrap_or(0)))
        .collect();
    for (pair, (n, from)) in &req.counters {
        let got = totals.get(pair).copied().unwrap_or(0);
        if got < *n {
            bad.push(format!(
                "counter pair {pair} totals {got} ({:?}), but {n} was {from}",
                pairs.get(pair)
            ));
        }
    }
    for (k, v) in &st.blobs {
        let pair = k.as_slice().try_into().map(u32::from_be_bytes);
        match (pair, blob_total(v)) {
            (Ok(pair), Some(n)) => {
                let total = totals.get(&pair).copied().unwrap_or(0);
                if n > total {
                    bad.push(format!(
                        "partial counter update: pair {pair}'s blob records total {n}, but the pair totals {total}"
                    ));
                }
            }
            _ => bad.push(format!(
                "damaged blob {k:?} ({} bytes, starts {:?})",
                v.len(),
                &v[..v.len().min(16)]
            )),
        }
    }
    let _ = write!(
        sum,
        "counter totals: {:?}, {} blobs ({} KB); ",
        (0..PAIRS)
            .map(|p| totals.get(&p).copied().unwrap_or(0))
            .collect::<Vec<_>>(),
        st.blobs.len(),
        st.blobs.iter().map(|(_, v)| v.len()).sum::<usize>() / 1024
    );

    // Tables created while running: each holds its row or nothing.
    let mut rows = HashSet::new();
    for (name, t) in db.tables() {
        let Some(cycle) = name
            .strip_prefix('t')
            .and_then(|n| n.split('.').next())
            .and_then(|c| c.parse::<u64>().ok())
        else {
            continue;
        };
        let got = db.worker().and_then(|mut w| {
            w.run(|tx| tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, usize::MAX, false))
        });
        match got {
            Ok(r) if r.is_empty() => {}
            Ok(r) if r == [(b"row".to_vec(), cycle.to_le_bytes().to_vec())] => {
                rows.insert(name);
            }
            Ok(r) => bad.push(format!("table {name} holds {r:?}")),
            Err(e) => bad.push(format!("reading table {name}: {e}")),
        }
    }
    for (name, from) in &req.tables {
        if !rows.contains(name) {
            let there = db.table(name).is_ok();
            bad.push(format!(
                "table {name}'s row missing (table {}), but it was {from}",
                if there { "present" } else { "missing too" }
            ));
        }
    }
    let _ = write!(sum, "{} new tables with their row; ", rows.len());

    // TPC-C.
    let mut tpcc = p.tpcc();
    let mut probe = None;
    match tpcc.attach(&db) {
        Ok(true) => {
            match tpcc.verify(&db) {
                Ok(v) => bad.extend(v.into_iter().map(|v| format!("tpcc: {v}"))),
                Err(e) => bad.push(format!("tpcc verify: {e}")),
            }
            match db.worker().and_then(|mut w| tpcc_probe(&mut w, &tpcc)) {
                Ok((next, ytd)) => {
                    if next < req.tpcc_next.0 {
                        bad.push(format!(
                            "tpcc Σ D_NEXT_O_ID = {next}, but {} was {}",
                            req.tpcc_next.0, req.tpcc_next.1
                        ));
                    }
                    if ytd < req.tpcc_ytd.0 {
                        bad.push(format!(
                            "tpcc W_YTD = {ytd}, but {} was {}",
                            req.tpcc_ytd.0, req.tpcc_ytd.1
                        ));
                    }
                    probe = Some((next, ytd));
                    let _ = write!(
                        sum,
                        "tpcc: loaded, 3.3.2 checked, Σ D_NEXT_O_ID {next}, W_YTD {ytd}"
                    );
                }
                Err(e) => bad.push(format!("tpcc probe: {e}")),
            }
        }
        Ok(false) => {
            if let Some(from) = &req.tpcc_loaded {
                bad.push(format!("tpcc load marker missing, but the load was {from}"));
            }
            let _ = write!(sum, "tpcc: not loaded");
        }
        Err(e) => bad.push(format!("tpcc attach: {e}")),
    }

    // A few transfers committed without waiting for durability, then a
    // clean close, which must make them durable before it returns.
    let mut closed = Vec::new();
    if bad.is_empty() && balances.len() == ACCOUNTS as usize {
        let t = Tables::open(&db).expect("tables");
        let mut r = Rng::new(p.seed, 9000 + p.cycle);
        let mut w = db.worker().expect("worker");
        for seq in 0..1 + r.below(20) {
            let id = p.cycle << 40 | PARENT_THREAD << 32 | seq;
            let from = r.below(ACCOUNTS as u64) as u32;
            let to = (from + 1 + r.below(ACCOUNTS as u64 - 1) as u32) % ACCOUNTS;
            let amount = 1 + r.below(100) as i64;
            match transfer(&mut w, t, id, (from, to, amount)) {
                Ok(()) => closed.push((id, (from, to, amount))),
                Err(e) => bad.push(format!("parent transfer: {e}")),
            }
        }
        let _ = write!(sum, "; {} transfers before a clean close", closed.len());
    }
    drop(db);

    // What this recovery showed must survive every later one.
    let seen = format!("seen by the recovery after cycle {}", p.cycle);
    for (id, tr) in closed {
        req.transfers.insert(
            id,
            (
                tr,
                format!("committed before the clean close after cycle {}", p.cycle),
            ),
        );
    }
    for (id, tr) in present {
        req.transfers.entry(id).or_insert((tr, seen.clone()));
    }
    for (pair, n) in totals {
        let e = req.counters.entry(pair).or_insert((0, String::new()));
        if n > e.0 {
            *e = (n, seen.clone());
        }
    }
    if !balances.is_empty() {
        req.bank_initialized.get_or_insert(seen.clone());
    }
    for name in rows {
        req.tables.entry(name).or_insert_with(|| seen.clone());
    }
    if let Some((next, ytd)) = probe {
        req.tpcc_loaded.get_or_insert(seen.clone());
        if next > req.tpcc_next.0 {
            req.tpcc_next = (next, seen.clone());
        }
        if ytd > req.tpcc_ytd.0 {
            req.tpcc_ytd = (ytd, seen);
        }
    }
    (bad, sum)
}

/// When to kill the child: `delay` after it prints the first of
/// `anchors` (`START`: when spawned).
#[derive(Debug)]
struct Kill {
    anchors: &'static [&'static str],
    delay: Duration,
}

/// Choose the kill moment. `open_ms` and `load_ms` estimate how long
/// opening (recovery) and the TPC-C load take; `loaded`: whether a
/// recovery has shown a completed load yet.
fn kill_plan(seed: u64, cycle: u64, open_ms: u64, load_ms: u64, loaded: bool) -> Kill {
    let mut r = Rng::new(seed, 5000 + cycle);
    let ms = |r: &mut Rng, hi: u64| Duration::from_millis(r.below(hi.max(1) + 1));
    if !loaded && r.below(4) != 0 {
        // Likely in the middle of the TPC-C load (if the load finishes
        // first or is not needed, while running).
        return Kill {
            anchors: &["LOADING", "READY"],
            delay: ms(&mut r, load_ms),
        };
    }
    match r.below(100) {
        // During open: recovery (checkpoint load, log replay) or just
        // after it, when the new log generation starts.
        0..=14 => Kill {
            anchors: &["START"],
            delay: ms(&mut r, open_ms * 5 / 4),
        },
        // Bank initialization, TPC-C attach, the first transactions.
        15..=24 => Kill {
            anchors: &["OPENED"],
            delay: ms(&mut r, 100),
        },
        _ => Kill {
            anchors: &["READY"],
            delay: ms(&mut r, 1000),
        },
    }
}

struct Outcome {
    acks: Vec<String>,
    other: Vec<String>,
    open_ms: Option<u64>,
    load_ms: Option<u64>,
    /// The anchor the kill was timed from.
    killed_after: Option<String>,
}

/// Run one child and kill it per `plan`. `Err` if it died by itself, hung,
/// or reported an error.
fn run_child(dir: &Path, p: &Params, plan: &Kill, stderr: &Path) -> Result<Outcome, String> {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "crash::child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_PARAMS, p.encode())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(stderr).expect("stderr file"),
        ))
        .spawn()
        .expect("spawn child");
    let spawned = Instant::now();
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut o = Outcome {
        acks: Vec::new(),
        other: Vec::new(),
        open_ms: None,
        load_ms: None,
        killed_after: (plan.anchors == ["START"]).then(|| "START".to_string()),
    };
    let hang = spawned + Duration::from_secs(90);
    let mut deadline = (plan.anchors == ["START"]).then(|| spawned + plan.delay);
    let mut error = None;
    let mut take = |o: &mut Outcome, line: String, deadline: &mut Option<Instant>| {
        let Some(rest) = line.strip_prefix(TAG).map(str::trim) else {
            return;
        };
        let word = rest.split_whitespace().next().unwrap_or("");
        if word == "ACK" {
            o.acks.push(rest.to_string());
            return;
        }
        if word == "OPENED" {
            o.open_ms = Some(spawned.elapsed().as_millis() as u64);
        }
        if word == "LOADED" {
            o.load_ms = rest.split_whitespace().nth(1).and_then(|x| x.parse().ok());
        }
        if word == "ERROR" {
            error.get_or_insert_with(|| rest.to_string());
        }
        if plan.anchors.contains(&word) && deadline.is_none() {
            *deadline = Some(Instant::now() + plan.delay);
            o.killed_after = Some(word.to_string());
        }
        o.other.push(rest.to_string());
    };
    let exited = loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break None;
        }
        if now >= hang {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "child hung: no {:?} within 90 s; saw {:?}",
                plan.anchors, o.other
            ));
        }
        let until = deadline
            .unwrap_or(hang)
            .min(now + Duration::from_millis(50));
        match rx.recv_timeout(until.saturating_duration_since(now)) {
            Ok(line) => take(&mut o, line, &mut deadline),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(status)) = child.try_wait() {
                    break Some(status);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break Some(child.wait().expect("wait")),
        }
    };
    if exited.is_none() {
        // SIGKILL, then wait: the directory lock dies with the process.
        child.kill().expect("kill");
        child.wait().expect("wait");
    }
    reader.join().expect("reader");
    // Everything the child wrote before it died.
    while let Ok(line) = rx.try_recv() {
        take(&mut o, line, &mut deadline);
    }
    if let Some(e) = error {
        return Err(format!("child reported {e}"));
    }
    if let Some(status) = exited {
        return Err(format!(
            "child exited by itself ({status}) before the kill; saw {:?}",
            o.other
        ));
    }
    Ok(o)
}

#[test]
fn crash_loop() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let seed = seed();
    let cycles = BASE_CYCLES * stress();
    let root = std::env::temp_dir().join(format!("granary-crash-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("temp dir");
    let dir = root.join("db");
    let stderr = root.join("child.stderr");
    let loggers = 1 + Rng::new(seed, 7).below(2) as usize;
    let tpcc_scale = std::env::var("GRANARY_CRASH_TPCC_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    eprintln!(
        "crash loop: {cycles} cycles, {loggers} logger(s), TPC-C scaled down by {tpcc_scale}, directory {dir:?}"
    );
    let mut req = Required::default();
    let mut open_ms = 300;
    // Until measured: the spec's population loads in a few seconds on two
    // cores.
    let mut load_ms = 1200 / tpcc_scale as u64;
    // Acks, and kills by stage.
    let mut acks = 0;
    let mut stages: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut in_checkpoint = 0;
    let started = Instant::now();
    for cycle in 0..cycles {
        let p = Params::choose(seed, cycle, loggers, tpcc_scale);
        let plan = kill_plan(seed, cycle, open_ms, load_ms, req.tpcc_loaded.is_some());
        let fail = |what: String, sum: &str| -> ! {
            let tail = std::fs::read_to_string(&stderr).unwrap_or_default();
            let tail: String = tail
                .lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            panic!(
                "crash loop FAILED (seed {seed}, replay with GRANARY_SEED={seed}), cycle {cycle}\n\
                 params: {p:?}\nkill: {plan:?}\n{what}\nchecked: {sum}\n\
                 directory kept at {dir:?}\nchild stderr (tail):\n{tail}"
            );
        };
        let o = run_child(&dir, &p, &plan, &stderr).unwrap_or_else(|e| fail(e, ""));
        if let Some(ms) = o.open_ms {
            open_ms = ms;
        }
        if let Some(ms) = o.load_ms {
            load_ms = ms;
        }
        let loading = o.other.iter().any(|l| l == "LOADING");
        let loaded = o.other.iter().any(|l| l.starts_with("LOADED"));
        let ready = o.other.iter().any(|l| l == "READY");
        let word = |w: &str| {
            o.other
                .iter()
                .filter(|l| l.split_whitespace().next() == Some(w))
                .count()
        };
        // An explicit checkpoint started and not finished.
        let mid_checkpoint = word("CHECKPOINTING") > word("CHECKPOINT");
        acks += o.acks.len();
        in_checkpoint += mid_checkpoint as usize;
        for a in &o.acks {
            if let Err(e) = req.ack(cycle, a) {
                fail(e, "");
            }
        }
        let (bad, sum) = verify(&dir, &p, &mut req);
        let stage = if !o.other.iter().any(|l| l.starts_with("OPENED")) {
            "during open"
        } else if loading && !loaded {
            "during the TPC-C load"
        } else if loaded && !ready {
            "after the TPC-C load"
        } else if !ready {
            "before ready"
        } else {
            "running"
        };
        *stages.entry(stage).or_default() += 1;
        eprintln!(
            "cycle {cycle}: killed {stage}{} ({:?} after {}{}), {} acks; {sum}",
            if mid_checkpoint {
                " in an explicit checkpoint"
            } else {
                ""
            },
            plan.delay,
            o.killed_after.as_deref().unwrap_or("?"),
            o.load_ms
                .map_or(String::new(), |ms| format!("; TPC-C loaded in {ms} ms")),
            o.acks.len()
        );
        if !bad.is_empty() {
            fail(
                format!(
                    "{} violation(s) after recovery:\n  {}",
                    bad.len(),
                    bad.join("\n  ")
                ),
                &sum,
            );
        }
    }
    eprintln!(
        "crash loop: {cycles} cycles in {:.1} s, {acks} acks checked; kills by stage {stages:?}, \
         {in_checkpoint} in an explicit checkpoint",
        started.elapsed().as_secs_f64(),
    );
    let _ = std::fs::remove_dir_all(&root);
}
