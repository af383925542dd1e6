//! Failpoint tests (`--features failpoints`): every write, fsync and
//! rename of logging, checkpointing and recovery is made to fail, at
//! several hit counts, under a running workload.
//!
//! The workload keeps a checkable history: every transaction has a unique
//! id, moves money between accounts (constant total), records its id with
//! the id of the transaction it followed (`meta/head`, a chain through the
//! serial order) and sometimes writes into a table it just created. After
//! a failure the database must be poisoned; reopened, it must hold every
//! acknowledged transaction and be a prefix of the serial order: the chain
//! from `head` covers exactly the recovered ids, each worker's ids are
//! contiguous from its first, and every balance is the initial one plus
//! the recovered transfers.
//!
//! Replay a run with `GRANARY_SEED=<seed>`; run one failpoint with
//! `GRANARY_FP_ONLY=<name>`.
#![cfg(feature = "failpoints")]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use granary::{CommitToken, Database, Error, Options, TableId};

mod common;
use common::TempDir;

const ACCOUNTS: u8 = 8;
const INITIAL: i64 = 1000;
const NONE: u64 = u64::MAX;
/// How long a workload may run before its failpoint must have fired.
const DEADLINE: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------- helpers

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn opts(loggers: usize) -> Options {
    Options::default()
        .epoch_interval(Duration::from_millis(1))
        .loggers(loggers)
        .recovery_threads(2)
        .checkpoint_threads(2)
}

/// `"return"` at hit `n` (1-based), nothing before it.
fn at_hit(n: u32) -> String {
    if n <= 1 {
        "return".into()
    } else {
        format!("{}*off->return", n - 1)
    }
}

fn injected(point: &str) -> String {
    format!("injected failure at {point}")
}

/// Every file under `dir` (but the lock) with its length and contents.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if e.file_name() != "LOCK" {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

fn assert_same_files(before: &BTreeMap<PathBuf, Vec<u8>>, dir: &Path, ctx: &str) {
    let after = files(dir);
    let names = |m: &BTreeMap<PathBuf, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(before),
        names(&after),
        "{ctx}: files appeared or vanished after the database was poisoned"
    );
    for (p, b) in before {
        assert!(
            after[p] == *b,
            "{ctx}: {} changed after the database was poisoned ({} -> {} bytes)",
            p.display(),
            b.len(),
            after[p].len()
        );
    }
}

/// Every failpoint the engine has (checked against its source by
/// `every_failpoint_is_exercised`).
const ALL_POINTS: &[&str] = &[
    "log-create",
    "log-end-write",
    "log-end-fsync",
    "log-rename",
    "log-write",
    "log-fsync",
    "pepoch-write",
    "pepoch-fsync",
    "dir-fsync",
    "catalog-write",
    "catalog-fsync",
    "ckpt-mkdir",
    "ckpt-create",
    "ckpt-write",
    "ckpt-fsync",
    "manifest-write",
    "manifest-fsync",
    "manifest-rename",
    "cleanup-rename",
    "recover-read",
    "recover-remove",
    "recover-truncate",
    "recover-rename",
    "recover-end",
    "voids-write",
    "voids-fsync",
    "init-write",
    "dir-create",
    "dir-create-fsync",
];

/// Runs cases in isolation: a failing case is recorded (and every
/// failpoint cleared) and the others still run; `finish` fails the test
/// listing every failing case.
struct Cases {
    seed: u64,
    run: usize,
    failed: Vec<String>,
}

impl Cases {
    fn new(seed: u64) -> Cases {
        Cases {
            seed,
            run: 0,
            failed: Vec::new(),
        }
    }

    fn case(&mut self, name: &str, f: impl FnOnce()) {
        if !selected_case(name) {
            return;
        }
        eprintln!("case: {name}");
        self.run += 1;
        let t = Instant::now();
        let threads = granary_threads();
        watchdog(Some(format!("{name} (seed {})", self.seed)));
        let mut r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        watchdog(None);
        for p in ALL_POINTS {
            fail::remove(p);
        }
        if r.is_ok() {
            // Every database of the case is gone: so must its threads be.
            r = std::panic::catch_unwind(|| no_new_threads(threads, name));
        }
        match r {
            Ok(()) => eprintln!("  ok ({:?})", t.elapsed()),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                eprintln!("  FAILED: {msg}");
                self.failed.push(format!("{name}: {msg}"));
            }
        }
    }

    fn finish(self) {
        assert!(
            self.run > 0 || std::env::var("GRANARY_FP_ONLY").is_ok(),
            "no case ran"
        );
        assert!(
            self.failed.is_empty(),
            "{} of {} case(s) failed (replay with GRANARY_SEED={}):\n{}",
            self.failed.len(),
            self.run,
            self.seed,
            self.failed.join("\n")
        );
    }
}

/// How long one case may take before the run is declared hung.
const HANG: Duration = Duration::from_secs(120);

/// Arm (`Some(case)`) or disarm (`None`) the hang detector: if a case
/// runs longer than `HANG` (a deadlock in the engine), the process exits
/// with a message naming it instead of hanging the test run.
fn watchdog(case: Option<String>) {
    static ARMED: Mutex<Option<(String, Instant)>> = Mutex::new(None);
    static STARTED: std::sync::Once = std::sync::Once::new();
    *ARMED.lock().unwrap_or_else(|e| e.into_inner()) = case.map(|c| (c, Instant::now()));
    STARTED.call_once(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_millis(200));
            let armed = ARMED.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((case, since)) = &*armed {
                if since.elapsed() > HANG {
                    // Not eprintln!: the test harness would swallow it.
                    use std::io::Write;
                    let _ = writeln!(
                        std::io::stderr(),
                        "HANG: case {case:?} made no progress in {HANG:?} (engine deadlock?); \
                         attach a debugger to see where, or replay with its seed"
                    );
                    std::process::exit(101);
                }
            }
        });
    });
}

/// The engine's threads (logger, checkpointer, epoch) now alive.
fn granary_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |rd| {
        rd.flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.starts_with("granary-"))
            })
            .count()
    })
}

/// Wait (a little) until no more engine threads are alive than `before`.
fn no_new_threads(before: usize, ctx: &str) {
    let t = Instant::now();
    loop {
        let now = granary_threads();
        if now <= before {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{ctx}: {} engine thread(s) still running after every database was dropped \
             (leaked by a failed open?)",
            now - before
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a case is selected by `GRANARY_FP_ONLY` (a comma-separated
/// list of failpoint names; a case runs if its name mentions one).
fn selected_case(name: &str) -> bool {
    std::env::var("GRANARY_FP_ONLY").map_or(true, |only| {
        only.split(',').any(|o| {
            name.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .any(|w| w == o)
        })
    })
}

// ------------------------------------------------------------------ model

/// What transaction `id` does (derived from the seed and the id).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Op {
    from: u8,
    to: u8,
    amount: i64,
    /// A table created just before the transaction, which it writes to.
    extra: Option<String>,
}

/// id = session << 40 | thread << 32 | seq.
fn make_id(session: u64, thread: u64, seq: u64) -> u64 {
    (session << 40) | (thread << 32) | seq
}

fn id_worker(id: u64) -> u64 {
    id >> 32
}

fn id_seq(id: u64) -> u64 {
    id & 0xFFFF_FFFF
}

#[derive(Default)]
struct Model {
    /// Everything ever attempted and not ruled out by a recovery.
    attempted: BTreeMap<u64, Op>,
    /// Acknowledged: must survive every recovery.
    acked: BTreeSet<u64>,
    /// Whether the setup transaction was acknowledged.
    setup: bool,
}

impl Model {
    /// After a successful recovery of `r`: what it holds is durable now,
    /// and nothing else attempted before may ever come back.
    fn settle(&mut self, r: &BTreeSet<u64>) {
        self.attempted.retain(|id, _| r.contains(id));
        self.acked = r.clone();
    }
}

struct Tables {
    acct: TableId,
    ids: TableId,
    meta: TableId,
}

fn tables(db: &Database) -> Tables {
    Tables {
        acct: db.table("acct").expect("table acct"),
        ids: db.table("ids").expect("table ids"),
        meta: db.table("meta").expect("table meta"),
    }
}

fn get_i64(v: Option<&[u8]>) -> i64 {
    i64::from_be_bytes(v.expect("present").try_into().expect("8 bytes"))
}

/// Create the tables and balances (one acknowledged transaction).
fn setup(db: &Database, m: &Mutex<Model>) {
    let acct = db.open_table("acct").unwrap();
    let _ = db.open_table("ids").unwrap();
    let meta = db.open_table("meta").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for a in 0..ACCOUNTS {
            tx.put(acct, &[a], &INITIAL.to_be_bytes())?;
        }
        tx.put(meta, b"head", &NONE.to_be_bytes())
    })
    .unwrap();
    if !db.options().wait_for_durable {
        db.wait_durable(w.commit_token()).unwrap();
    }
    m.lock().unwrap().setup = true;
}

/// Check the recovered `db` against `m`; returns the recovered ids.
fn verify(db: &Database, m: &Model, ctx: &str) -> BTreeSet<u64> {
    if !m.setup && db.table("meta").is_err() {
        // Nothing was set up (or acknowledged) yet.
        return BTreeSet::new();
    }
    let t = tables(db);
    let mut w = db.worker().unwrap();
    let all = |w: &mut granary::Worker, tbl: TableId| {
        w.run(|tx| tx.scan_collect(tbl, Bound::Unbounded, Bound::Unbounded, usize::MAX, false))
            .unwrap()
    };
    let accts = all(&mut w, t.acct);
    let rows = all(&mut w, t.ids);
    let meta = all(&mut w, t.meta);
    if !m.setup && meta.is_empty() {
        assert!(
            rows.is_empty() && accts.is_empty(),
            "{ctx}: rows without setup"
        );
        return BTreeSet::new();
    }
    assert_eq!(meta.len(), 1, "{ctx}: meta {meta:?}");
    let head = u64::from_be_bytes(meta[0].1[..].try_into().unwrap());

    // The recovered ids, each attempted, with what it did.
    let mut prev = BTreeMap::new();
    for (k, v) in &rows {
        let id = u64::from_be_bytes(k[..].try_into().unwrap());
        let op = m.attempted.get(&id).unwrap_or_else(|| {
            panic!("{ctx}: recovered transaction {id:#x} was never attempted (or was lost before)")
        });
        assert_eq!(v.len(), 18, "{ctx}: id row {id:#x}");
        let p = u64::from_be_bytes(v[..8].try_into().unwrap());
        let got = (
            v[8],
            v[9],
            i64::from_be_bytes(v[10..18].try_into().unwrap()),
        );
        assert_eq!(
            got,
            (op.from, op.to, op.amount),
            "{ctx}: id row {id:#x} holds another transaction's data"
        );
        prev.insert(id, p);
    }
    let r: BTreeSet<u64> = prev.keys().copied().collect();
    let lost: Vec<_> = m.acked.difference(&r).map(|i| format!("{i:#x}")).collect();
    assert!(
        lost.is_empty(),
        "{ctx}: {} acknowledged transaction(s) lost: {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );

    // The chain from head through the serial order covers exactly r.
    let mut seen = BTreeSet::new();
    let mut at = head;
    while at != NONE {
        assert!(seen.insert(at), "{ctx}: chain cycles at {at:#x}");
        at = *prev
            .get(&at)
            .unwrap_or_else(|| panic!("{ctx}: chain reaches {at:#x}, which was not recovered"));
    }
    assert_eq!(
        seen.len(),
        r.len(),
        "{ctx}: recovered transactions outside the chain from head (not a prefix): {:?}",
        r.difference(&seen).take(10).collect::<Vec<_>>()
    );

    // Each worker's transactions: contiguous from its first.
    let mut per: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for id in &r {
        per.entry(id_worker(*id)).or_default().push(id_seq(*id));
    }
    for (wk, seqs) in &per {
        for (i, s) in seqs.iter().enumerate() {
            assert_eq!(
                *s,
                i as u64,
                "{ctx}: worker {wk:#x} recovered seqs with a hole: {:?}",
                &seqs[..seqs.len().min(20)]
            );
        }
    }

    // Balances: initial plus the recovered transfers, exactly.
    let mut want = vec![INITIAL; ACCOUNTS as usize];
    for id in &r {
        let op = &m.attempted[id];
        want[op.from as usize] -= op.amount;
        want[op.to as usize] += op.amount;
    }
    let got: Vec<i64> = accts.iter().map(|(_, v)| get_i64(Some(v))).collect();
    assert_eq!(
        accts.iter().map(|(k, _)| k[0]).collect::<Vec<_>>(),
        (0..ACCOUNTS).collect::<Vec<_>>(),
        "{ctx}: accounts"
    );
    assert_eq!(got, want, "{ctx}: balances are not the recovered transfers");
    assert_eq!(got.iter().sum::<i64>(), INITIAL * ACCOUNTS as i64, "{ctx}");

    // Tables created for transactions: a recovered transaction's table and
    // row exist; a table holds only its own recovered transaction's row.
    for id in &r {
        if let Some(name) = &m.attempted[id].extra {
            let x = db
                .table(name)
                .unwrap_or_else(|_| panic!("{ctx}: table {name} of recovered {id:#x} is missing"));
            let rows = all(&mut w, x);
            assert_eq!(rows.len(), 1, "{ctx}: table {name}");
            assert_eq!(rows[0].0, id.to_be_bytes(), "{ctx}: table {name}");
        }
    }
    for (name, x) in db.tables() {
        if !name.starts_with('x') {
            continue;
        }
        for (k, _) in all(&mut w, x) {
            let id = u64::from_be_bytes(k[..].try_into().unwrap());
            assert!(
                r.contains(&id) && m.attempted[&id].extra.as_deref() == Some(&name),
                "{ctx}: table {name} holds a row of {id:#x}, not recovered or not its own"
            );
        }
    }
    r
}

/// Reopen, verify, and settle the model.
fn reopen_verify(dir: &Path, loggers: usize, m: &Mutex<Model>, ctx: &str) -> Database {
    let db = Database::open(dir, opts(loggers))
        .unwrap_or_else(|e| panic!("{ctx}: reopening failed: {e}"));
    let (e, ep) = (db.epoch(), db.durable_epoch().unwrap());
    assert!(
        e > ep,
        "{ctx}: reopened at global epoch {e}, not past e_p {ep}: new commits would be \
         acknowledged before they are durable, and skipped by later recoveries"
    );
    let mut m = m.lock().unwrap();
    let r = verify(&db, &m, ctx);
    m.settle(&r);
    db
}

// --------------------------------------------------------------- workload

#[derive(Clone, Copy)]
struct Work {
    session: u64,
    seed: u64,
    threads: u64,
    /// Stop each worker after this many transactions.
    max_txns: u64,
    /// Worker 0 creates a table for every n-th transaction.
    extra_every: Option<u64>,
    /// Call `db.checkpoint()` this often from a separate thread.
    checkpoint_every: Option<Duration>,
    /// Stop once a failure was seen (or at `DEADLINE`).
    until_failure: bool,
}

impl Work {
    fn op(&self, thread: u64, seq: u64) -> Op {
        let id = make_id(self.session, thread, seq);
        let r = mix(self.seed ^ mix(id));
        let from = (r % ACCOUNTS as u64) as u8;
        let to = ((from as u64 + 1 + (r >> 8) % (ACCOUNTS as u64 - 1)) % ACCOUNTS as u64) as u8;
        let amount = ((r >> 20) % 100) as i64 + 1;
        let extra = match self.extra_every {
            Some(n) if thread == 0 && seq % n == n - 1 => {
                Some(format!("x{}_{}", self.session, seq))
            }
            _ => None,
        };
        Op {
            from,
            to,
            amount,
            extra,
        }
    }
}

#[derive(Default)]
struct Outcome {
    /// Every error seen, by whom.
    errors: Vec<String>,
    /// A `db.checkpoint()` failed.
    checkpoint_failed: bool,
    checkpoints: usize,
    committed: usize,
}

struct Shared<'a> {
    db: &'a Database,
    work: Work,
    model: &'a Mutex<Model>,
    stop: AtomicBool,
    failed: AtomicBool,
    running: AtomicUsize,
    out: Mutex<Outcome>,
}

impl Shared<'_> {
    fn fail(&self, who: &str, e: &Error) {
        self.out.lock().unwrap().errors.push(format!("{who}: {e}"));
        self.failed.store(true, Ordering::Release);
    }
}

fn worker_loop(s: &Shared<'_>, thread: u64) {
    let db = s.db;
    let wait = db.options().wait_for_durable;
    let mut w = match db.worker() {
        Ok(w) => w,
        Err(e) => return s.fail("worker()", &e),
    };
    let t = tables(db);
    let mut pending: Vec<(u64, CommitToken)> = Vec::new();
    for seq in 0..s.work.max_txns {
        if s.stop.load(Ordering::Acquire) {
            break;
        }
        let id = make_id(s.work.session, thread, seq);
        let op = s.work.op(thread, seq);
        let xt = match &op.extra {
            Some(name) => match db.open_table(name) {
                Ok(x) => Some(x),
                Err(e) => {
                    assert!(
                        matches!(e, Error::Storage { .. } | Error::Poisoned(_)),
                        "open_table: {e}"
                    );
                    s.fail(&format!("open_table({name})"), &e);
                    break;
                }
            },
            None => None,
        };
        s.model.lock().unwrap().attempted.insert(id, op.clone());
        let r = w.run(|tx| {
            let head = get_i64(tx.get(t.meta, b"head")?) as u64;
            let fb = get_i64(tx.get(t.acct, &[op.from])?);
            let tb = get_i64(tx.get(t.acct, &[op.to])?);
            tx.put(t.acct, &[op.from], &(fb - op.amount).to_be_bytes())?;
            tx.put(t.acct, &[op.to], &(tb + op.amount).to_be_bytes())?;
            let mut row = head.to_be_bytes().to_vec();
            row.extend_from_slice(&[op.from, op.to]);
            row.extend_from_slice(&op.amount.to_be_bytes());
            tx.put(t.ids, &id.to_be_bytes(), &row)?;
            tx.put(t.meta, b"head", &id.to_be_bytes())?;
            if let Some(x) = xt {
                tx.put(x, &id.to_be_bytes(), b"x")?;
            }
            Ok(())
        });
        match r {
            Ok(()) => {
                s.out.lock().unwrap().committed += 1;
                if wait {
                    s.model.lock().unwrap().acked.insert(id);
                } else {
                    pending.push((id, w.commit_token()));
                }
            }
            Err(e) => {
                assert!(matches!(e, Error::Poisoned(_)), "run failed with {e}");
                s.fail(&format!("worker {thread} run"), &e);
                // Refused for good.
                let again = w.run(|tx| tx.get(t.meta, b"head").map(|_| ()));
                assert!(
                    matches!(again, Err(Error::Poisoned(_))),
                    "a run after a failed one: {again:?}"
                );
                break;
            }
        }
    }
    // Without wait_for_durable: acknowledged = its token is durable.
    let mut m = s.model.lock().unwrap();
    for (id, tok) in pending {
        if db.is_durable(tok) {
            m.acked.insert(id);
        }
    }
}

fn checkpoint_loop(s: &Shared<'_>, every: Duration) {
    while !s.stop.load(Ordering::Acquire) && s.running.load(Ordering::Acquire) > 0 {
        std::thread::sleep(every);
        match s.db.checkpoint() {
            Ok(_) => s.out.lock().unwrap().checkpoints += 1,
            Err(e) => {
                s.out.lock().unwrap().checkpoint_failed = true;
                s.fail("checkpoint", &e);
                return;
            }
        }
    }
}

/// Run the workload on `db` until every worker is done, or (with
/// `until_failure`) the first failure or the deadline.
fn run_work(db: &Database, work: Work, model: &Mutex<Model>) -> Outcome {
    let s = Shared {
        db,
        work,
        model,
        stop: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        running: AtomicUsize::new(work.threads as usize),
        out: Mutex::new(Outcome::default()),
    };
    let start = Instant::now();
    std::thread::scope(|sc| {
        for k in 0..work.threads {
            let s = &s;
            sc.spawn(move || {
                worker_loop(s, k);
                s.running.fetch_sub(1, Ordering::AcqRel);
            });
        }
        if let Some(every) = work.checkpoint_every {
            let s = &s;
            sc.spawn(move || checkpoint_loop(s, every));
        }
        loop {
            std::thread::sleep(Duration::from_millis(1));
            if s.running.load(Ordering::Acquire) == 0 {
                break;
            }
            if work.until_failure
                && (s.failed.load(Ordering::Acquire) || start.elapsed() > DEADLINE)
            {
                break;
            }
        }
        s.stop.store(true, Ordering::Release);
    });
    s.out.into_inner().unwrap()
}

fn clean_work(session: u64, seed: u64, txns: u64) -> Work {
    Work {
        session,
        seed,
        threads: 2,
        max_txns: txns,
        extra_every: Some(7),
        checkpoint_every: None,
        until_failure: false,
    }
}

/// A fresh directory with some history: setup, a checkpoint and more log
/// (closed cleanly: everything acknowledged).
fn populate(dir: &Path, loggers: usize, seed: u64, m: &Mutex<Model>) {
    let db = Database::open(dir, opts(loggers)).unwrap();
    setup(&db, m);
    let o = run_work(&db, clean_work(1, seed, 20), m);
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    db.checkpoint().unwrap();
    let o = run_work(&db, clean_work(2, seed, 20), m);
    assert!(o.errors.is_empty(), "{:?}", o.errors);
}

/// After a recovery: the database works, closes cleanly and recovers
/// the same again.
fn keep_going(db: Database, dir: &Path, loggers: usize, seed: u64, m: &Mutex<Model>, ctx: &str) {
    let o = run_work(&db, clean_work(90, seed, 15), m);
    assert!(o.errors.is_empty(), "{ctx}: after recovery: {:?}", o.errors);
    drop(db);
    let db = reopen_verify(dir, loggers, m, &format!("{ctx}, second reopen"));
    drop(db);
}

/// The poisoned database refuses commits, names `point` as the cause,
/// and writes nothing more, not even when dropped.
fn check_poisoned(db: Database, dir: &Path, point: &str, ctx: &str) {
    let t = tables(&db);
    let mut w = db.worker().unwrap();
    match w.run(|tx| tx.put(t.meta, b"after", b"poison")) {
        Err(Error::Poisoned(cause)) => assert!(
            cause.contains(&injected(point)),
            "{ctx}: poisoned for another cause: {cause}"
        ),
        other => panic!("{ctx}: expected Err(Poisoned) after the failure, got {other:?}"),
    }
    assert!(
        matches!(db.open_table("after-poison"), Err(Error::Poisoned(_))),
        "{ctx}: open_table on a poisoned database"
    );
    assert!(
        matches!(db.checkpoint(), Err(Error::Poisoned(_))),
        "{ctx}: checkpoint on a poisoned database"
    );
    drop(w);
    // Let anything in flight finish before taking the picture.
    std::thread::sleep(Duration::from_millis(20));
    let before = files(dir);
    let mut w = db.worker().unwrap();
    for _ in 0..5 {
        assert!(w.run(|tx| tx.put(t.meta, b"x", b"y")).is_err(), "{ctx}");
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_same_files(&before, dir, &format!("{ctx} (running)"));
    drop(w);
    drop(db);
    assert_same_files(&before, dir, &format!("{ctx} (after drop)"));
}

// ---------------------------------------------------- runtime failpoints

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ckpt {
    /// `db.checkpoint()` from a thread of the test.
    OnDemand,
    /// `Options::checkpoint_interval`.
    Periodic,
}

/// Fail `point` at hit `hit` (counted from after open) under the workload.
fn runtime_case(point: &str, hit: u32, loggers: usize, ckpt: Ckpt, seed: u64) {
    let ctx = format!("{point} at hit {hit}, {loggers} logger(s), {ckpt:?} checkpoints");
    let dir = TempDir::new(&format!("{point}-{hit}-{loggers}"));
    let m = Mutex::new(Model::default());
    populate(dir.path(), loggers, seed, &m);

    let o = opts(loggers).checkpoint_interval(match ckpt {
        Ckpt::Periodic => Some(Duration::from_millis(10)),
        Ckpt::OnDemand => None,
    });
    let db = Database::open(dir.path(), o).unwrap();
    {
        let r = verify(&db, &m.lock().unwrap(), &format!("{ctx}, before"));
        m.lock().unwrap().settle(&r);
    }
    fail::cfg(point, &at_hit(hit)).unwrap();
    let out = run_work(
        &db,
        Work {
            session: 3,
            seed,
            threads: 2,
            max_txns: u64::MAX,
            extra_every: Some(8),
            checkpoint_every: (ckpt == Ckpt::OnDemand).then_some(Duration::from_millis(10)),
            until_failure: true,
        },
        &m,
    );
    // The workers stop at their first error; with periodic checkpoints the
    // failure shows up as poison.
    let poisoned = {
        let mut w = db.worker().unwrap();
        let t = tables(&db);
        w.run(|tx| tx.get(t.meta, b"head").map(|_| ())).is_err()
    };
    assert!(
        !out.errors.is_empty() || poisoned,
        "{ctx}: failpoint never fired within {DEADLINE:?} ({} commits, {} checkpoints) — \
         the scenario does not reach it",
        out.committed,
        out.checkpoints
    );
    assert!(
        poisoned,
        "{ctx}: a failure did not poison the database{} (errors: {:?})",
        if out.checkpoint_failed {
            " (db.checkpoint() returned the error but the database still commits)"
        } else {
            ""
        },
        out.errors
    );
    assert!(
        out.errors.is_empty() || out.errors.iter().any(|e| e.contains(&injected(point))),
        "{ctx}: failed for another reason: {:?}",
        out.errors
    );
    check_poisoned(db, dir.path(), point, &ctx);
    fail::remove(point);
    let db = reopen_verify(dir.path(), loggers, &m, &format!("{ctx}, reopen"));
    keep_going(db, dir.path(), loggers, seed, &m, &ctx);
}

/// The failpoints hit while the database runs, with the hit counts to
/// fail at.
const RUNTIME: &[(&str, &[u32])] = &[
    ("log-write", &[1, 2, 5]),
    ("log-fsync", &[1, 2, 5]),
    ("pepoch-write", &[1, 2, 5]),
    ("pepoch-fsync", &[1, 2, 5]),
    // Log rotation, every 100 epochs: the end record, the rename.
    ("log-end-write", &[1, 2]),
    ("log-end-fsync", &[1, 2]),
    ("log-rename", &[1, 2]),
    ("log-create", &[1, 2]),
    ("dir-fsync", &[1, 2, 5]),
    ("catalog-write", &[1, 2, 3]),
    ("catalog-fsync", &[1, 2, 3]),
    ("ckpt-mkdir", &[1, 2]),
    ("ckpt-create", &[1, 2, 3]),
    ("ckpt-write", &[1, 2, 5]),
    ("ckpt-fsync", &[1, 2, 5]),
    ("manifest-write", &[1, 2]),
    ("manifest-fsync", &[1, 2]),
    ("manifest-rename", &[1, 2]),
    // Deleting the previous checkpoint (and logs below e_l).
    ("cleanup-rename", &[1, 2]),
];

#[test]
fn runtime_failpoints_poison_and_recover_a_prefix() {
    let scenario = fail::FailScenario::setup();
    let mut cases = Cases::new(common::seed("failpoints"));
    let seed = cases.seed;
    let mut n = 0;
    for (point, hits) in RUNTIME {
        for &hit in *hits {
            let loggers = 1 + (mix(seed ^ n) % 2) as usize;
            n += 1;
            cases.case(
                &format!("{point} at hit {hit}, {loggers} logger(s), on-demand checkpoints"),
                || runtime_case(point, hit, loggers, Ckpt::OnDemand, seed ^ n),
            );
        }
    }
    cases.finish();
    scenario.teardown();
}

#[test]
fn periodic_checkpoint_failures_poison() {
    let scenario = fail::FailScenario::setup();
    let mut cases = Cases::new(common::seed("failpoints"));
    let seed = cases.seed;
    for point in [
        "ckpt-mkdir",
        "ckpt-create",
        "ckpt-write",
        "ckpt-fsync",
        "manifest-write",
        "manifest-fsync",
        "manifest-rename",
    ] {
        cases.case(&format!("{point} at hit 1, periodic checkpoints"), || {
            runtime_case(point, 1, 1, Ckpt::Periodic, seed)
        });
    }
    cases.finish();
    scenario.teardown();
}

// ------------------------------------------------- open-time failpoints

/// Fail `point` at hit `hit` while opening `dir`: open must return an
/// error naming it (not panic); reopened without it, nothing is lost.
fn open_fails(dir: &Path, loggers: usize, point: &str, hit: u32, ctx: &str) {
    let threads = granary_threads();
    fail::cfg(point, &at_hit(hit)).unwrap();
    let r = Database::open(dir, opts(loggers));
    fail::remove(point);
    match r {
        Ok(_) => panic!("{ctx}: open succeeded: failpoint {point} was not hit {hit} time(s)"),
        Err(e) => assert!(
            e.to_string().contains(&injected(point)),
            "{ctx}: open failed with another error: {e}"
        ),
    }
    // Nothing the failed open started may keep running (and writing).
    no_new_threads(threads, ctx);
}

/// A populated directory, opened with `point` failing at hit `hit`.
fn open_case(point: &str, hit: u32, loggers: usize, seed: u64) {
    let ctx = format!("open with {point} failing at hit {hit}, {loggers} logger(s)");
    let dir = TempDir::new(&format!("open-{point}-{hit}-{loggers}"));
    let m = Mutex::new(Model::default());
    populate(dir.path(), loggers, seed, &m);
    // Reopen once, so each logger has an older generation too.
    {
        let db = reopen_verify(dir.path(), loggers, &m, &format!("{ctx}, pre-open"));
        let o = run_work(&db, clean_work(4, seed, 20), &m);
        assert!(o.errors.is_empty(), "{:?}", o.errors);
    }
    open_fails(dir.path(), loggers, point, hit, &ctx);
    let db = reopen_verify(dir.path(), loggers, &m, &format!("{ctx}, reopen"));
    keep_going(db, dir.path(), loggers, seed, &m, &ctx);
}

/// Points hit while opening a clean, populated directory.
const OPEN: &[(&str, &[u32], usize)] = &[
    ("recover-read", &[1, 2, 3], 2),
    ("recover-rename", &[1, 2], 2),
    // Closing the current log files (an end record each) before they are
    // renamed.
    ("recover-end", &[1, 2], 2),
    ("dir-fsync", &[1, 2, 3, 4], 2),
    ("log-create", &[1, 2], 2),
    ("pepoch-write", &[1], 1),
    ("pepoch-fsync", &[1], 2),
];

#[test]
fn open_time_failpoints_fail_open_and_lose_nothing() {
    let scenario = fail::FailScenario::setup();
    let mut cases = Cases::new(common::seed("failpoints"));
    let seed = cases.seed;
    for (point, hits, loggers) in OPEN {
        for &hit in *hits {
            cases.case(
                &format!("open with {point} failing at hit {hit}, {loggers} logger(s)"),
                || open_case(point, hit, *loggers, seed),
            );
        }
    }
    // A new directory: creating it (and syncing its parent), then
    // initializing it.
    for point in ["dir-create", "dir-create-fsync"] {
        let ctx = format!("new directory, {point} failing at hit 1");
        cases.case(&ctx.clone(), || {
            let base = TempDir::new(&format!("create-{point}"));
            let dir = base.path().join("db");
            let m = Mutex::new(Model::default());
            open_fails(&dir, 1, point, 1, &ctx);
            let db = reopen_verify(&dir, 1, &m, &ctx);
            assert!(db.tables().is_empty(), "{ctx}");
            setup(&db, &m);
            keep_going(db, &dir, 1, seed, &m, &ctx);
        });
    }
    for point in ["init-write", "dir-fsync"] {
        let ctx = format!("new directory, {point} failing at hit 1");
        cases.case(&ctx.clone(), || {
            let dir = TempDir::new(&format!("init-{point}"));
            let m = Mutex::new(Model::default());
            open_fails(dir.path(), 1, point, 1, &ctx);
            let db = reopen_verify(dir.path(), 1, &m, &ctx);
            assert!(db.tables().is_empty(), "{ctx}");
            setup(&db, &m);
            keep_going(db, dir.path(), 1, seed, &m, &ctx);
        });
    }
    cases.finish();
    scenario.teardown();
}

// ------------------------------------------ recovery of a dirty directory

/// Poison a running database with `point` at hit `hit`: the directory is
/// left as a crash there would leave it.
fn crash_with(dir: &Path, loggers: usize, point: &str, hit: u32, seed: u64, m: &Mutex<Model>) {
    let db = Database::open(dir, opts(loggers)).unwrap();
    fail::cfg(point, &at_hit(hit)).unwrap();
    let out = run_work(
        &db,
        Work {
            session: 5,
            seed,
            threads: 2,
            max_txns: u64::MAX,
            extra_every: Some(9),
            checkpoint_every: None,
            until_failure: true,
        },
        m,
    );
    assert!(
        !out.errors.is_empty(),
        "{point} never fired: {} commits",
        out.committed
    );
    check_poisoned(db, dir, point, &format!("crash with {point}"));
    fail::remove(point);
}

/// Stale blocks: log blocks inside a durable prefix whose epoch is beyond
/// e_p (recovery must void them). Logger 0, which publishes e_p, is made
/// slow, so logger 1 runs ahead of e_p; then publishing fails.
fn crash_with_stale_blocks(dir: &Path, seed: u64, m: &Mutex<Model>) -> bool {
    let db = Database::open(dir, opts(2).wait_for_durable(false)).unwrap();
    fail::cfg_callback("log-write", || {
        if std::thread::current().name() == Some("granary-log-0") {
            std::thread::sleep(Duration::from_millis(15));
        }
    })
    .unwrap();
    let out = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            run_work(
                &db,
                Work {
                    session: 6,
                    seed,
                    threads: 2,
                    max_txns: u64::MAX,
                    extra_every: None,
                    checkpoint_every: None,
                    until_failure: true,
                },
                m,
            )
        });
        std::thread::sleep(Duration::from_millis(150));
        fail::cfg("pepoch-write", "return").unwrap();
        h.join().unwrap()
    });
    fail::remove("log-write");
    assert!(!out.errors.is_empty(), "pepoch-write never fired");
    check_poisoned(db, dir, "pepoch-write", "crash with stale blocks");
    fail::remove("pepoch-write");
    granary::durable::scan(dir).unwrap().stale_max.is_some()
}

/// What a dirty directory needs from recovery: (a log file to remove, a
/// log tail to truncate, stale epochs to void).
fn needs(dir: &Path) -> (bool, bool, bool) {
    let info = granary::durable::scan(dir).unwrap();
    let mut remove = false;
    let mut truncate = false;
    for f in &info.logs {
        let (g, _) = info.pepoch.positions[f.logger];
        match f.generation {
            None => remove = true,
            Some(x) if x > g => remove = true,
            Some(_) => truncate |= f.bytes > f.durable_len,
        }
    }
    (remove, truncate, info.stale_max.is_some())
}

/// Recovery of a dirty directory fails at each `(point, hit)` of `steps`
/// in turn (a crash in the middle of recovery, then another); finally it
/// opens and loses nothing.
fn dirty_open_case(
    dir: &Path,
    loggers: usize,
    steps: &[(&str, u32)],
    seed: u64,
    m: &Mutex<Model>,
    ctx: &str,
) {
    for (point, hit) in steps {
        let c = format!("{ctx}: recovery failing at {point} (hit {hit})");
        open_fails(dir, loggers, point, *hit, &c);
    }
    let db = reopen_verify(dir, loggers, m, &format!("{ctx}: reopen"));
    keep_going(db, dir, loggers, seed, m, ctx);
}

/// Failed by `recovery_failpoints_on_dirty_directories` and the new
/// directory cases.
const DIRTY: &[&str] = &[
    "recover-truncate",
    "recover-remove",
    "voids-write",
    "voids-fsync",
    "init-write",
    "dir-create",
    "dir-create-fsync",
];

#[test]
fn recovery_failpoints_on_dirty_directories() {
    let scenario = fail::FailScenario::setup();
    let mut cases = Cases::new(common::seed("failpoints"));
    let seed = cases.seed;

    // A tail to truncate: log bytes written but never synced.
    for steps in [
        &[("recover-truncate", 1)][..],
        &[
            ("recover-truncate", 1),
            ("recover-rename", 1),
            ("dir-fsync", 1),
        ][..],
    ] {
        let ctx = format!("log-fsync crash, then recovery failing at {steps:?}");
        cases.case(&ctx.clone(), || {
            let dir = TempDir::new("dirty-truncate");
            let m = Mutex::new(Model::default());
            populate(dir.path(), 1, seed, &m);
            crash_with(dir.path(), 1, "log-fsync", 3, seed, &m);
            let (_, truncate, _) = needs(dir.path());
            assert!(truncate, "{ctx}: the directory has no tail to truncate");
            dirty_open_case(dir.path(), 1, steps, seed, &m, &ctx);
        });
    }

    // A whole file to remove: the new generation a failed open created.
    let ctx = "open crash after creating the new log file, then recovery failing at recover-remove";
    cases.case(ctx, || {
        let dir = TempDir::new("dirty-remove");
        let m = Mutex::new(Model::default());
        populate(dir.path(), 1, seed, &m);
        {
            // Something in the current file, so opening retires it (a
            // file with nothing durable in it would be replaced by the new
            // one of the same generation instead).
            let db = reopen_verify(dir.path(), 1, &m, ctx);
            let o = run_work(&db, clean_work(4, seed, 20), &m);
            assert!(o.errors.is_empty(), "{:?}", o.errors);
        }
        // dir-fsync hits while opening: tidy's rename (1), the new log
        // file (2).
        open_fails(dir.path(), 1, "dir-fsync", 2, ctx);
        let (remove, _, _) = needs(dir.path());
        assert!(remove, "{ctx}: the directory has no file to remove");
        dirty_open_case(
            dir.path(),
            1,
            &[("recover-remove", 1), ("dir-fsync", 1)],
            seed,
            &m,
            ctx,
        );
    });

    // Stale epochs to void.
    for (i, point) in ["voids-write", "voids-fsync"].into_iter().enumerate() {
        let ctx = format!("stale-blocks crash, then recovery failing at {point}");
        cases.case(&ctx.clone(), || {
            let mut tries = 0;
            let (dir, m) = loop {
                tries += 1;
                let dir = TempDir::new(&format!("dirty-stale-{i}-{tries}"));
                let m = Mutex::new(Model::default());
                populate(dir.path(), 2, seed, &m);
                if crash_with_stale_blocks(dir.path(), seed, &m) {
                    break (dir, m);
                }
                assert!(tries < 10, "{ctx}: could not make stale blocks in 10 tries");
            };
            dirty_open_case(dir.path(), 2, &[(point, 1)], seed, &m, &ctx);
        });
    }
    cases.finish();
    scenario.teardown();
}

// ------------------------------------------------------- storage faults

/// With `wait_for_durable(false)`: after a log or pepoch failure no token
/// of a later transaction ever becomes durable, `wait_durable` says
/// Poisoned, and the files stop changing.
#[test]
fn storage_faults_acknowledge_nothing_more() {
    let scenario = fail::FailScenario::setup();
    let mut cases = Cases::new(common::seed("failpoints"));
    for point in ["log-write", "log-fsync", "pepoch-write", "pepoch-fsync"] {
        for loggers in [1, 2] {
            let ctx = format!("{point}, {loggers} logger(s), wait_for_durable(false)");
            cases.case(&ctx.clone(), || nothing_more(point, loggers, &ctx));
        }
    }
    cases.finish();
    scenario.teardown();
}

fn nothing_more(point: &str, loggers: usize, ctx: &str) {
    let dir = TempDir::new(&format!("nowait-{point}-{loggers}"));
    let m = Mutex::new(Model::default());
    let db = Database::open(dir.path(), opts(loggers).wait_for_durable(false)).unwrap();
    setup(&db, &m);
    let t = tables(&db);
    let mut w = db.worker().unwrap();
    let put = |w: &mut granary::Worker, i: u64| {
        w.run(|tx| tx.put(t.meta, &i.to_be_bytes(), b"v"))
            .map(|()| w.commit_token())
    };
    let mut i = 0u64;
    for _ in 0..50 {
        put(&mut w, i).unwrap();
        i += 1;
    }
    let before = w.commit_token();
    db.wait_durable(before).unwrap();
    assert!(db.is_durable(before));
    let durable_before: Vec<u64> = (0..i).collect();

    fail::cfg(point, "return").unwrap();
    let start = Instant::now();
    let mut after = Vec::new();
    let first_err = loop {
        match put(&mut w, i) {
            Ok(tok) => after.push((i, tok)),
            Err(e) => break e,
        }
        i += 1;
        assert!(start.elapsed() < DEADLINE, "{ctx}: never poisoned");
    };
    match &first_err {
        Error::Poisoned(c) => assert!(c.contains(&injected(point)), "{ctx}: {c}"),
        e => panic!("{ctx}: expected Poisoned, got {e}"),
    }
    let ep = db.durable_epoch().unwrap();
    for (_, tok) in &after {
        assert!(
            !db.is_durable(*tok),
            "{ctx}: a token after the failure is durable"
        );
        match db.wait_durable(*tok) {
            Err(Error::Poisoned(_)) => {}
            other => panic!("{ctx}: wait_durable after the failure: {other:?}"),
        }
    }
    assert!(db.is_durable(before), "{ctx}");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        db.durable_epoch(),
        Some(ep),
        "{ctx}: e_p moved after the failure"
    );
    for (_, tok) in &after {
        assert!(!db.is_durable(*tok), "{ctx}: became durable later");
    }
    let snap = files(dir.path());
    for _ in 0..10 {
        assert!(matches!(put(&mut w, 1 << 40), Err(Error::Poisoned(_))));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_same_files(&snap, dir.path(), ctx);
    drop(w);
    drop(db);
    assert_same_files(&snap, dir.path(), &format!("{ctx} (after drop)"));
    fail::remove(point);

    // Reopened: everything durable is there; the meta keys written
    // after the failure may or may not be, but only as a prefix.
    let db = Database::open(dir.path(), opts(loggers)).unwrap();
    let t = tables(&db);
    let keys: BTreeSet<u64> = db
        .worker()
        .unwrap()
        .run(|tx| {
            tx.scan_collect(
                t.meta,
                Bound::Unbounded,
                Bound::Unbounded,
                usize::MAX,
                false,
            )
        })
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.len() == 8)
        .map(|(k, _)| u64::from_be_bytes(k[..].try_into().unwrap()))
        .collect();
    for k in &durable_before {
        assert!(keys.contains(k), "{ctx}: durable write {k} lost");
    }
    let n = keys.len() as u64;
    assert_eq!(
        keys,
        (0..n).collect::<BTreeSet<_>>(),
        "{ctx}: not a prefix of one worker's writes"
    );
    assert!(n <= i, "{ctx}");
}

/// A checkpoint running when the log fails stops writing too: after the
/// poison no file grows and none appears (removing the unfinished
/// checkpoint is allowed).
#[test]
fn checkpoint_in_flight_stops_at_poison() {
    let scenario = fail::FailScenario::setup();
    let mut cases = Cases::new(common::seed("failpoints"));
    cases.case("log-fsync while ckpt-write is busy", || {
        let dir = TempDir::new("ckpt-in-flight");
        let db = Database::open(dir.path(), opts(1).checkpoint_threads(1)).unwrap();
        let t = db.open_table("big").unwrap();
        let mut w = db.worker().unwrap();
        for chunk in 0..50u32 {
            w.run(|tx| {
                for i in 0..1000u32 {
                    tx.put(t, &(chunk * 1000 + i).to_be_bytes(), &[1u8; 200])?;
                }
                Ok(())
            })
            .unwrap();
        }
        // Let the epoch pass the writes, so the checkpoint has them all.
        let e = db.epoch();
        while db.epoch() < e + 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // About 40 blocks, 10 ms each.
        fail::cfg_callback("ckpt-write", || {
            std::thread::sleep(Duration::from_millis(10))
        })
        .unwrap();
        std::thread::scope(|s| {
            let c = s.spawn(|| db.checkpoint());
            std::thread::sleep(Duration::from_millis(50));
            fail::cfg("log-fsync", "return").unwrap();
            let r = w.run(|tx| tx.put(t, b"last", b"v"));
            assert!(matches!(r, Err(Error::Poisoned(_))), "{r:?}");
            std::thread::sleep(Duration::from_millis(20));
            let before = files(dir.path());
            let r = c.join().unwrap();
            assert!(
                r.is_err(),
                "the checkpoint succeeded after the poison: {r:?}"
            );
            let after = files(dir.path());
            for (p, b) in &after {
                assert!(
                    before.get(p) == Some(b),
                    "{} was written after the database was poisoned ({} -> {} bytes)",
                    p.display(),
                    before.get(p).map_or(0, |b| b.len()),
                    b.len()
                );
            }
        });
        drop(w);
        drop(db);
        fail::remove("ckpt-write");
        fail::remove("log-fsync");
        let db = Database::open(dir.path(), opts(1)).unwrap();
        let n = db
            .worker()
            .unwrap()
            .run(|tx| tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, usize::MAX, false))
            .unwrap()
            .len();
        assert!(n == 50_000 || n == 50_001, "recovered {n} rows");
    });
    cases.finish();
    scenario.teardown();
}

/// `ALL_POINTS` is exactly the engine's failpoints, and every one of them
/// is failed by some case above.
#[test]
fn every_failpoint_is_exercised() {
    // Every file of the engine, and the storage layer's, which the
    // engine's files pass through.
    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.push(root.join("../storage/src/fs.rs"));
    let mut in_source = BTreeSet::new();
    for path in files {
        let text = std::fs::read_to_string(path).unwrap();
        for part in text.split("fp(\"").skip(1) {
            in_source.insert(part.split('"').next().unwrap().to_string());
        }
    }
    let listed: BTreeSet<String> = ALL_POINTS.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed, in_source, "ALL_POINTS is out of date");

    let mut covered: BTreeSet<&str> = BTreeSet::new();
    covered.extend(RUNTIME.iter().map(|(p, _)| *p));
    covered.extend(OPEN.iter().map(|(p, _, _)| *p));
    covered.extend(DIRTY);
    let missing: Vec<_> = ALL_POINTS
        .iter()
        .filter(|p| !covered.contains(*p))
        .collect();
    assert!(missing.is_empty(), "failpoints no case fails: {missing:?}");
}
