//! Hermitage-style isolation scenarios (after Kleppmann's hermitage
//! suite): each anomaly of Adya's thesis scripted as a deterministic
//! interleaving of interactive transactions ([`Interactive`]), all on one
//! thread, and recorded for the checker.
//!
//! For each scenario the script decides, from what the transactions saw
//! and which committed, whether the anomaly *happened*; a design states
//! per scenario whether it must be prevented or must happen
//! ([`Expect`], tables [`SERIALIZABLE`] and [`SNAPSHOT_ISOLATION`]), and
//! [`scenarios`] asserts that. Independently, the recorded history goes
//! through `granary-check`, whose verdict must agree with the script's
//! ([`checker_agrees`]), and which must find the history within the
//! design's level.
//!
//! A session begins at its first step, as hermitage's `begin` does: a
//! design that takes its snapshot at begin (SI) then reads what was
//! committed before that step, which is what the scripts are written for.
//!
//! Every scenario starts from x = 10 (key 1) and y = 20 (key 2).

use std::ops::Bound;

use granary_api::{Engine, Interactive, InteractiveTx, TableId, TableOptions, Tx, TxError};
use granary_check::{check, History, Level};
use granary_workloads::record::{merge, Attempt, RecTx, Recorder, RecordingRunner};

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
    /// Predicate-many-preceders: a repeated predicate read sees a new row
    /// (needs scans).
    Pmp,
    /// Lost update: both read x and both write x + 1.
    P4,
    /// Read skew: a reader sees x before and y after a writer.
    GSingle,
    /// Write skew: both read x and y, each writes one.
    G2Item,
    /// Write skew through a predicate: both scan, each inserts (needs
    /// scans).
    G2,
    /// The read-only anomaly (Fekete, O'Neil and O'Neil, "A Read-Only
    /// Transaction Anomaly Under Snapshot Isolation", SIGMOD Record 2004):
    /// T1 reads x and y and withdraws from x; T2 deposits into y and
    /// commits; T3, read-only, sees the deposit but not the withdrawal;
    /// then T1 commits. T1 → T2 → T3 → T1: snapshot isolation commits all
    /// three, and a design that certifies only writers cannot stop it.
    ReadOnly,
}

/// Every scenario, in the order they run.
pub const ALL: [Scenario; 11] = [
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
    Scenario::ReadOnly,
];

/// What a design must give in one scenario. The scripts are deterministic,
/// so a design's outcome is too: a table states it exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The anomaly does not happen: a transaction aborts, or what the
    /// committed ones saw has a serial explanation.
    Prevented,
    /// The anomaly happens (a design weaker than serializable shows its
    /// weakness, and the table says which).
    Happens,
    /// Not run, for the reason given: the scenario needs a capability the
    /// design lacks (PMP and G2 scan).
    Skipped(&'static str),
}

/// A serializable design prevents every anomaly.
pub const SERIALIZABLE: [(Scenario, Expect); 11] = [
    (Scenario::G0, Expect::Prevented),
    (Scenario::G1a, Expect::Prevented),
    (Scenario::G1b, Expect::Prevented),
    (Scenario::G1c, Expect::Prevented),
    (Scenario::Otv, Expect::Prevented),
    (Scenario::Pmp, Expect::Prevented),
    (Scenario::P4, Expect::Prevented),
    (Scenario::GSingle, Expect::Prevented),
    (Scenario::G2Item, Expect::Prevented),
    (Scenario::G2, Expect::Prevented),
    (Scenario::ReadOnly, Expect::Prevented),
];

/// Snapshot isolation lets write skew through (G2-item, and G2 through a
/// predicate) and the read-only anomaly, and prevents the rest: first-committer-wins stops the lost
/// update (P4), reading one snapshot stops read skew and vanishing
/// transactions.
pub const SNAPSHOT_ISOLATION: [(Scenario, Expect); 11] = [
    (Scenario::G0, Expect::Prevented),
    (Scenario::G1a, Expect::Prevented),
    (Scenario::G1b, Expect::Prevented),
    (Scenario::G1c, Expect::Prevented),
    (Scenario::Otv, Expect::Prevented),
    (Scenario::Pmp, Expect::Prevented),
    (Scenario::P4, Expect::Prevented),
    (Scenario::GSingle, Expect::Prevented),
    (Scenario::G2Item, Expect::Happens),
    (Scenario::G2, Expect::Happens),
    (Scenario::ReadOnly, Expect::Happens),
];

/// What a scripted run produced.
#[derive(Debug)]
pub struct Outcome {
    /// The anomaly happened: committed transactions saw or left something
    /// no serial order explains.
    pub anomaly: bool,
    /// The loader and every attempt of the script, for the checker.
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

/// One scripted transaction.
enum Slot<'w, R: Interactive + 'w> {
    /// Not begun yet: the runner it begins on at its first step.
    Idle(&'w mut R),
    Open(R::Session<'w>, Attempt),
    /// Committed, aborted, or killed by a conflict.
    Done,
}

/// Interleaves up to three interactive transactions, recording each.
struct Script<'w, R: Interactive + 'w> {
    table: TableId,
    slots: Vec<Slot<'w, R>>,
    recorder: Recorder,
    trace: Vec<String>,
}

impl<'w, R: Interactive + 'w> Script<'w, R> {
    fn new(table: TableId, runners: &'w mut [R]) -> Script<'w, R> {
        Script {
            table,
            slots: runners.iter_mut().map(Slot::Idle).collect(),
            recorder: Recorder::new(0),
            trace: Vec::new(),
        }
    }

    /// Begin transaction `i` if this is its first step.
    fn open(&mut self, i: usize) {
        if let Slot::Idle(_) = self.slots[i] {
            let Slot::Idle(r) = std::mem::replace(&mut self.slots[i], Slot::Done) else {
                unreachable!()
            };
            let s = r.begin().expect("begin");
            self.slots[i] = Slot::Open(s, self.recorder.begin());
        }
    }

    /// Run `op` in transaction `i`; a conflict kills the transaction (it
    /// rolls back and later steps of it are skipped).
    fn step<T>(
        &mut self,
        i: usize,
        what: &str,
        op: impl FnOnce(&mut RecTx<'_, R::Session<'w>>, TableId) -> Result<T, TxError>,
    ) -> Option<T> {
        self.open(i);
        let Slot::Open(s, a) = &mut self.slots[i] else {
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

    /// End transaction `i` without committing (a session rolls back when
    /// dropped).
    fn kill(&mut self, i: usize) {
        if let Slot::Open(s, a) = std::mem::replace(&mut self.slots[i], Slot::Done) {
            s.abort();
            self.recorder.finish(a, None);
        }
    }

    fn abort(&mut self, i: usize) {
        self.trace.push(format!("T{} abort", i + 1));
        self.kill(i);
    }

    fn commit(&mut self, i: usize) -> bool {
        self.open(i);
        let Slot::Open(s, a) = std::mem::replace(&mut self.slots[i], Slot::Done) else {
            self.trace
                .push(format!("T{} commit: skipped (dead)", i + 1));
            return false;
        };
        match s.commit().expect("commit") {
            Ok(key) => {
                self.trace.push(format!("T{} commit: ok", i + 1));
                self.recorder.finish(a, Some(key));
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

/// Run scenario `s` on `db`, a fresh database.
///
/// # Panics
/// On an engine error (not a conflict): the scripts' operations are all
/// valid.
pub fn run<E: Engine>(db: &E, s: Scenario) -> Outcome
where
    E::Runner: Interactive,
{
    let t = db
        .create_table_with("test", TableOptions::point_lookups())
        .expect("table");
    let mut loader = Recorder::new(1);
    {
        let mut w = db.runner().expect("runner");
        let mut rr = RecordingRunner {
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
    let mut runners: Vec<E::Runner> = (0..3).map(|_| db.runner().expect("runner")).collect();
    let mut sc = Script::new(t, &mut runners);
    let anomaly = script(s, &mut sc);
    // Roll back whatever the script left open.
    for i in 0..sc.slots.len() {
        sc.kill(i);
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
fn script<R: Interactive>(s: Scenario, sc: &mut Script<'_, R>) -> bool {
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
        Scenario::ReadOnly => {
            let a = sc.read(0, X).flatten().zip(sc.read(0, Y).flatten());
            if let Some(y) = sc.read(1, Y).flatten() {
                sc.write(1, Y, y + 20);
            }
            let c1 = sc.commit(1);
            let seen = sc.read(2, X).flatten().zip(sc.read(2, Y).flatten());
            let c2 = sc.commit(2);
            if let Some((x, _)) = a {
                sc.write(0, X, x - 10);
            }
            let c0 = sc.commit(0);
            // T3 saw the deposit but not the withdrawal, which was made
            // without the deposit: no serial order has both.
            c0 && c1 && c2 && a == Some((10, 20)) && seen == Some((10, 40))
        }
    }
}

/// Run every scenario on a fresh database from `make` and assert what
/// `table` expects of each (every scenario must be in it exactly once),
/// that the checker agrees with the script, and that the checker finds
/// every history within `level`.
pub fn scenarios<E: Engine>(make: impl Fn() -> E, level: Level, table: &[(Scenario, Expect)])
where
    E::Runner: Interactive,
{
    for s in ALL {
        let mut entries = table.iter().filter(|(t, _)| *t == s);
        let Some(&(_, expect)) = entries.next() else {
            panic!("the table has no entry for {s:?}");
        };
        assert!(entries.next().is_none(), "{s:?} is in the table twice");
        if let Expect::Skipped(why) = expect {
            eprintln!("{s:?}: skipped ({why})");
            continue;
        }
        let out = run(&make(), s);
        // The script really ran its interleaving: the loader and at least
        // two transactions are in the history.
        assert!(out.history.txns.len() >= 3, "{s:?}: {:?}", out.history);
        assert_eq!(
            out.anomaly,
            expect == Expect::Happens,
            "{s:?}: expected {expect:?}:\n{}",
            out.trace.join("\n")
        );
        checker_agrees(s, &out, level);
        let report = check(&out.history, level);
        assert!(
            report.is_ok(),
            "{s:?}: the history is not {level}:\n{report}\n{}",
            out.trace.join("\n")
        );
    }
}

/// The checker's verdict on the recorded history agrees with the
/// script's: an anomaly the script saw, the checker finds (it is not
/// serializable); a history the script found clean, the checker finds
/// within `level`. (Not clean at every level: under snapshot isolation
/// the G1c script, say, commits a write skew that is no G1c.)
pub fn checker_agrees(s: Scenario, out: &Outcome, level: Level) {
    let at = if out.anomaly {
        Level::Serializable
    } else {
        level
    };
    let report = check(&out.history, at);
    assert_eq!(
        report.is_ok(),
        !out.anomaly,
        "{s:?}: the checker at {at} disagrees with the scenario ({} anomalies):\n{report}\n{}",
        report.anomaly_count(),
        out.trace.join("\n")
    );
}
