//! The hermitage scenarios, shared by `hermitage.rs` and `mutant.rs`.
#![allow(dead_code)]

use std::ops::Bound;

use granary::{Database, Options, TableId, Tx, TxError, Worker};
use granary_check::{check, History, Level};
use granary_workloads::record::{merge, Attempt, RecTx, Recorder};

/// The anomalies of Adya's thesis / hermitage, each one scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Write cycles: two writers interleave their writes to x and y.
    G0,
    /// Aborted read: a reader sees a write of a transaction that aborts.
    G1a,
    /// Intermediate read: a reader sees a value later overwritten by the
    /// same writer.
    G1b,
    /// Circular information flow: each reads the other's write.
    G1c,
    /// Observed transaction vanishes: a reader sees one writer's x and
    /// another's y.
    Otv,
    /// Predicate-many-preceders: a repeated predicate read sees a new row.
    Pmp,
    /// Lost update: both read x and both write x + 1.
    P4,
    /// Read skew: a reader sees x before and y after a writer.
    GSingle,
    /// Write skew: both read x and y, each writes one.
    G2Item,
    /// Write skew through a predicate: both scan, each inserts.
    G2,
}

pub const ALL: [Scenario; 10] = [
    Scenario::G0,
    Scenario::G1a,
    Scenario::G1b,
    Scenario::G1c,
    Scenario::Otv,
    Scenario::Pmp,
    Scenario::P4,
    Scenario::GSingle,
    Scenario::G2Item,
    Scenario::G2,
];

impl Scenario {
    /// Whether snapshot isolation allows this anomaly.
    pub fn allowed_under_si(self) -> bool {
        matches!(self, Scenario::G2Item | Scenario::G2)
    }
}

/// What a scripted run produced.
#[derive(Debug)]
pub struct Outcome {
    /// The anomaly happened: committed transactions saw or left something
    /// no serial order explains.
    pub anomaly: bool,
    pub history: History,
    /// What happened, for failure messages.
    pub trace: Vec<String>,
}

const X: u64 = 1;
const Y: u64 = 2;

fn k(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

fn v(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

fn num(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().expect("8-byte value"))
}

/// Interleaves up to three interactive transactions, recording each.
struct Script<'w> {
    table: TableId,
    sessions: Vec<Option<granary::Session<'w>>>,
    attempts: Vec<Option<Attempt>>,
    recorder: Recorder,
    trace: Vec<String>,
}

impl<'w> Script<'w> {
    fn new(table: TableId, workers: &'w mut [Worker]) -> Script<'w> {
        let mut recorder = Recorder::new(0);
        let n = workers.len();
        let attempts = (0..n).map(|_| Some(recorder.begin())).collect();
        let sessions = workers.iter_mut().map(|w| Some(w.begin())).collect();
        Script {
            table,
            sessions,
            attempts,
            recorder,
            trace: Vec::new(),
        }
    }

    /// Run `op` in transaction `i`; a conflict kills the transaction (it
    /// rolls back and later steps of it are skipped).
    fn step<T>(
        &mut self,
        i: usize,
        what: &str,
        op: impl FnOnce(&mut RecTx<'_, granary::Session<'w>>, TableId) -> Result<T, TxError>,
    ) -> Option<T> {
        let (Some(s), Some(a)) = (self.sessions[i].as_mut(), self.attempts[i].as_mut()) else {
            self.trace
                .push(format!("T{} {what}: skipped (dead)", i + 1));
            return None;
        };
        let r = op(&mut RecTx::new(s, a), self.table);
        match r {
            Ok(v) => {
                self.trace.push(format!("T{} {what}: ok", i + 1));
                Some(v)
            }
            Err(e) => {
                self.trace.push(format!("T{} {what}: {e}", i + 1));
                self.kill(i);
                None
            }
        }
    }

    fn read(&mut self, i: usize, key: u64) -> Option<Option<u64>> {
        let r = self.step(i, &format!("read {key}"), |tx, t| {
            Ok(tx.get(t, &k(key))?.map(num))
        });
        if let Some(v) = r {
            self.trace.push(format!("   -> {v:?}"));
        }
        r
    }

    fn write(&mut self, i: usize, key: u64, val: u64) {
        self.step(i, &format!("write {key}={val}"), |tx, t| {
            tx.put(t, &k(key), &v(val))
        });
    }

    fn insert(&mut self, i: usize, key: u64, val: u64) {
        self.step(i, &format!("insert {key}={val}"), |tx, t| {
            tx.insert(t, &k(key), &v(val))
        });
    }

    /// Keys whose value is a multiple of 3 (a predicate read, by scan).
    fn scan_mod3(&mut self, i: usize) -> Option<Vec<u64>> {
        let r = self.step(i, "scan value % 3 == 0", |tx, t| {
            let mut out = Vec::new();
            tx.scan(
                t,
                Bound::Unbounded,
                Bound::Unbounded,
                usize::MAX,
                false,
                |key, val| {
                    if num(val).is_multiple_of(3) {
                        out.push(num(key));
                    }
                    true
                },
            )?;
            Ok(out)
        });
        if let Some(v) = &r {
            self.trace.push(format!("   -> {v:?}"));
        }
        r
    }

    fn kill(&mut self, i: usize) {
        self.sessions[i] = None; // drop rolls back
        if let Some(a) = self.attempts[i].take() {
            self.recorder.finish(a, None);
        }
    }

    fn abort(&mut self, i: usize) {
        self.trace.push(format!("T{} abort", i + 1));
        self.kill(i);
    }

    fn commit(&mut self, i: usize) -> bool {
        let (Some(s), Some(a)) = (self.sessions[i].take(), self.attempts[i].take()) else {
            self.trace
                .push(format!("T{} commit: skipped (dead)", i + 1));
            return false;
        };
        match s.commit() {
            Ok(tid) => {
                self.trace.push(format!("T{} commit: ok", i + 1));
                self.recorder.finish(a, Some(tid.raw()));
                true
            }
            Err(r) => {
                self.trace.push(format!("T{} commit: {r}", i + 1));
                self.recorder.finish(a, None);
                false
            }
        }
    }
}

/// Run scenario `s` on a fresh Silo database (the mutant engine if
/// `mutant`; that needs the `mutant` feature).
pub fn run_silo(s: Scenario, mutant: bool) -> Outcome {
    let opts = Options::default();
    #[cfg(feature = "mutant")]
    let opts = opts.mutant_skip_read_validation(mutant);
    #[cfg(not(feature = "mutant"))]
    assert!(!mutant, "the mutant engine needs --features mutant");
    let db = Database::new(opts).expect("db");
    let t = db.create_table("test").expect("table");
    let mut loader = Recorder::new(1);
    {
        let mut w = db.worker().expect("worker");
        let mut rr = granary_workloads::record::RecordingRunner {
            runner: &mut w,
            recorder: &mut loader,
        };
        rr.try_run(|tx| {
            tx.put(t, &k(X), &v(10))?;
            tx.put(t, &k(Y), &v(20))
        })
        .expect("load")
        .expect("load commits");
    }
    let mut workers: Vec<Worker> = (0..3).map(|_| db.worker().expect("worker")).collect();
    let mut sc = Script::new(t, &mut workers);
    let anomaly = script(s, &mut sc);
    // Roll back whatever the script left open.
    for i in 0..sc.sessions.len() {
        if sc.sessions[i].is_some() {
            sc.kill(i);
        }
    }
    let Script {
        trace, recorder, ..
    } = sc;
    Outcome {
        anomaly,
        history: merge([loader, recorder]),
        trace,
    }
}

/// The scripts. Returns whether the anomaly happened.
fn script(s: Scenario, sc: &mut Script<'_>) -> bool {
    match s {
        Scenario::G0 => {
            sc.write(0, X, 11);
            sc.write(1, X, 12);
            sc.write(0, Y, 21);
            sc.commit(0);
            sc.write(1, Y, 22);
            sc.commit(1);
            let x = sc.read(2, X).flatten();
            let y = sc.read(2, Y).flatten();
            sc.commit(2);
            // x and y must come from the same writer.
            !matches!((x, y), (Some(11), Some(21)) | (Some(12), Some(22)))
        }
        Scenario::G1a => {
            sc.write(0, X, 101);
            let r1 = sc.read(1, X).flatten();
            sc.abort(0);
            let r2 = sc.read(1, X).flatten();
            let c = sc.commit(1);
            c && (r1 == Some(101) || r2 == Some(101))
        }
        Scenario::G1b => {
            sc.write(0, X, 101);
            let r1 = sc.read(1, X).flatten();
            sc.write(0, X, 11);
            sc.commit(0);
            let r2 = sc.read(1, X).flatten();
            let c = sc.commit(1);
            c && (r1 == Some(101) || r2 == Some(101))
        }
        Scenario::G1c => {
            sc.write(0, X, 11);
            sc.write(1, Y, 22);
            let y = sc.read(0, Y).flatten();
            let x = sc.read(1, X).flatten();
            let c0 = sc.commit(0);
            let c1 = sc.commit(1);
            c0 && c1 && y == Some(22) && x == Some(11)
        }
        Scenario::Otv => {
            sc.write(0, X, 11);
            sc.write(0, Y, 19);
            sc.write(1, X, 12);
            sc.commit(0);
            let x = sc.read(2, X).flatten();
            sc.write(1, Y, 18);
            sc.commit(1);
            let y = sc.read(2, Y).flatten();
            let c2 = sc.commit(2);
            // T3 must see x and y from the same transaction (or neither).
            c2 && !matches!(
                (x, y),
                (Some(10), Some(20)) | (Some(11), Some(19)) | (Some(12), Some(18))
            )
        }
        Scenario::Pmp => {
            let first = sc.scan_mod3(0);
            sc.insert(1, 3, 30);
            sc.commit(1);
            let second = sc.scan_mod3(0);
            let c0 = sc.commit(0);
            c0 && first.is_some() && first != second
        }
        Scenario::P4 => {
            let a = sc.read(0, X).flatten();
            let b = sc.read(1, X).flatten();
            if let Some(a) = a {
                sc.write(0, X, a + 1);
            }
            if let Some(b) = b {
                sc.write(1, X, b + 1);
            }
            let c0 = sc.commit(0);
            let c1 = sc.commit(1);
            c0 && c1
        }
        Scenario::GSingle => {
            let x = sc.read(0, X).flatten();
            sc.read(1, X);
            sc.read(1, Y);
            sc.write(1, X, 12);
            sc.write(1, Y, 18);
            sc.commit(1);
            let y = sc.read(0, Y).flatten();
            let c0 = sc.commit(0);
            // x + y must be 30 in any serial order.
            c0 && x.zip(y).is_some_and(|(x, y)| x + y != 30)
        }
        Scenario::G2Item => {
            // Each lowers its own key by 10 after checking x + y ≥ 30, so
            // that x + y ≥ 20 holds; together they break it.
            let a = sc.read(0, X).flatten().zip(sc.read(0, Y).flatten());
            let b = sc.read(1, X).flatten().zip(sc.read(1, Y).flatten());
            let w0 = a.is_some_and(|(x, y)| x + y >= 30);
            let w1 = b.is_some_and(|(x, y)| x + y >= 30);
            if w0 {
                sc.write(0, X, a.map_or(0, |(x, _)| x) - 10);
            }
            if w1 {
                sc.write(1, Y, b.map_or(0, |(_, y)| y) - 10);
            }
            let c0 = sc.commit(0);
            let c1 = sc.commit(1);
            w0 && w1 && c0 && c1
        }
        Scenario::G2 => {
            // Each inserts a multiple of 3 only if none exists yet.
            let a = sc.scan_mod3(0);
            let b = sc.scan_mod3(1);
            let w0 = a.as_ref().is_some_and(Vec::is_empty);
            let w1 = b.as_ref().is_some_and(Vec::is_empty);
            if w0 {
                sc.insert(0, 3, 30);
            }
            if w1 {
                sc.insert(1, 4, 42);
            }
            let c0 = sc.commit(0);
            let c1 = sc.commit(1);
            w0 && w1 && c0 && c1
        }
    }
}

/// Assert the outcome a protocol at `level` must give, and that the
/// checker agrees with the scenario's own verdict.
pub fn expect_level(s: Scenario, out: &Outcome, level: Level) {
    let allowed = match level {
        Level::Serializable => false,
        Level::SnapshotIsolation => s.allowed_under_si(),
    };
    if !allowed {
        assert!(
            !out.anomaly,
            "{s:?} happened at {level:?}:\n{}",
            out.trace.join("\n")
        );
    }
    checker_agrees(s, out);
}

/// The checker's verdict on the recorded history matches the scenario's.
pub fn checker_agrees(s: Scenario, out: &Outcome) {
    let report = check(&out.history, Level::Serializable);
    assert_eq!(
        report.is_ok(),
        !out.anomaly,
        "{s:?}: the checker disagrees with the scenario ({} anomalies):\n{report}\n{}",
        report.anomaly_count(),
        out.trace.join("\n")
    );
}
