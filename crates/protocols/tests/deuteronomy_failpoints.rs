//! Injected I/O failures in Deuteronomy's durable TC (the `failpoints`
//! feature; `granary_storage::fs::fp`): a failed write, fsync or segment
//! creation of the recovery log poisons the TC, which acknowledges
//! nothing after it; a failed write of the table names fails that table's
//! creation; a failed directory creation or torn-tail cut fails the open.
//! Every time, reopening without the failure recovers every transfer that
//! was acknowledged (its durable token reached), and no transfer in part.
//! (`segment-remove`, a failed truncation after a checkpoint, is the
//! storage layer's own test: it needs 64 MiB segments to happen here.)
#![cfg(feature = "failpoints")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use granary_api::{Engine, Error, TxRunner};
use granary_protocols::deuteronomy::dc::MemoryDc;
use granary_protocols::deuteronomy::tc::{self, Tc};
use granary_workloads::ledger::Ledger;

const ACCOUNTS: u32 = 8;
const INITIAL: i64 = 1000;

/// Every failpoint Deuteronomy's durable TC passes (checked against the
/// sources by `every_failpoint_is_listed`).
const ALL_POINTS: &[&str] = &[
    "segment-create",
    "segment-write",
    "segment-fsync",
    "segment-remove",
    "segment-cut",
    "dir-fsync",
    "dir-create",
    "dir-create-fsync",
    "tables-write",
    "tables-rename",
];

/// The failpoints are one per process: tests take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!(
            "granary-deut-failpoints-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(dir: &Path) -> Result<Tc, Error> {
    Tc::open(tc::Config::default(), dir, Box::new(MemoryDc::new())).map(|(tc, _)| tc)
}

fn ledger(tc: &Tc) -> Ledger {
    Ledger::open(tc, ACCOUNTS, INITIAL).expect("the ledger's tables")
}

/// Fail `point` from its `hit`-th pass on.
fn arm(point: &str, hit: u32) {
    let spec = match hit {
        1 => "return".to_string(),
        n => format!("{}*off->return", n - 1),
    };
    fail::cfg(point, &spec).unwrap();
}

/// Load (if not yet) and transfer for up to `limit`, stopping at the
/// first engine error; returns the transfers acknowledged (durable) and
/// the error, if any. Acknowledged: the durable token was reached while
/// the TC still answered.
fn work(tc: &Tc, round: u64, limit: Duration) -> (BTreeSet<u64>, Option<Error>) {
    let ledger = ledger(tc);
    let mut r = tc.runner().unwrap();
    let mut acked = BTreeSet::new();
    let mut pending = std::collections::VecDeque::new();
    let t0 = Instant::now();
    let mut n = 0u64;
    let mut failed = None;
    let loaded = r.try_run(|tx| ledger.load(tx));
    if let Err(e) = loaded {
        return (acked, Some(e));
    }
    while t0.elapsed() < limit {
        let id = round << 32 | n;
        let (a, b) = ((n % 8) as u32, ((n * 3 + 1) % 8) as u32);
        n += 1;
        let done = r.try_run(|tx| ledger.transfer(tx, id, a, b, 5));
        match done {
            Ok(Ok(())) => pending.push_back((r.durable_token(), id)),
            Ok(Err(_)) => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        let d = tc.durable_epoch().expect("a durable TC");
        while pending.front().is_some_and(|&(t, _)| t <= d) {
            acked.insert(pending.pop_front().unwrap().1);
        }
    }
    (acked, failed)
}

/// Reopen without failures: every acknowledged transfer is there, each
/// balance matches the receipts, and the TC takes new work.
fn verify(dir: &Path, acked: &BTreeSet<u64>, ctx: &str) {
    let tc = open(dir).unwrap_or_else(|e| panic!("{ctx}: reopening failed: {e}"));
    let ledger = ledger(&tc);
    let mut r = tc.runner().unwrap();
    let state = r
        .try_run(|tx| ledger.read(tx))
        .unwrap_or_else(|e| panic!("{ctx}: reading back: {e}"))
        .unwrap_or_else(|e| panic!("{ctx}: reading back conflicted: {e:?}"));
    if let Err(e) = state.audit(&ledger, false, acked) {
        panic!("{ctx}: {e}");
    }
    let (more, err) = work(&tc, 99, Duration::from_millis(200));
    assert!(err.is_none(), "{ctx}: after reopening: {err:?}");
    assert!(
        !more.is_empty(),
        "{ctx}: nothing acknowledged after reopening"
    );
}

#[test]
fn log_failures_poison_and_lose_nothing() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let scenario = fail::FailScenario::setup();
    // Armed once the tables exist, before the log's first write: dir-fsync
    // is then the first segment's directory entry.
    let cases: &[(&str, &[u32])] = &[
        ("segment-write", &[1, 4]),
        ("segment-fsync", &[1, 4]),
        ("segment-create", &[1]),
        ("dir-fsync", &[1]),
    ];
    for &(point, hits) in cases {
        for &hit in hits {
            let ctx = format!("{point} failing at hit {hit}");
            let s = Scratch::new(&format!("{point}-{hit}"));
            let tc = open(&s.0).unwrap();
            let _ = ledger(&tc);
            arm(point, hit);
            let (acked, err) = work(&tc, 2, Duration::from_secs(5));
            let err = err.unwrap_or_else(|| panic!("{ctx}: the failure never surfaced"));
            if hit > 1 {
                assert!(!acked.is_empty(), "{ctx}: nothing acknowledged before it");
            }
            assert!(
                matches!(err, Error::Poisoned(_)),
                "{ctx}: failed with {err}, not poisoned"
            );
            // Poisoned: nothing more is acknowledged or committed.
            let (after, err) = work(&tc, 3, Duration::from_millis(20));
            assert!(after.is_empty(), "{ctx}: acknowledged after the poison");
            assert!(err.is_some(), "{ctx}: committed after the poison");
            drop(tc);
            fail::remove(point);
            verify(&s.0, &acked, &ctx);
        }
    }
    scenario.teardown();
}

#[test]
fn table_name_failures_fail_the_table_and_lose_nothing() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let scenario = fail::FailScenario::setup();
    for point in ["tables-write", "tables-rename", "dir-fsync"] {
        let ctx = format!("creating a table with {point} failing");
        let s = Scratch::new(point);
        let tc = open(&s.0).unwrap();
        let _ = ledger(&tc);
        let (mut acked, err) = work(&tc, 1, Duration::from_millis(20));
        assert!(err.is_none(), "{ctx}: {err:?}");
        // A table's creation writes the names; the log is quiet meanwhile
        // (its own dir-fsync only comes with a new segment).
        arm(point, 1);
        let made = tc.create_table("extra");
        fail::remove(point);
        assert!(
            matches!(made, Err(Error::Storage { .. })),
            "{ctx}: {made:?}"
        );
        let (more, err) = work(&tc, 2, Duration::from_millis(20));
        assert!(err.is_none(), "{ctx}: the TC failed after: {err:?}");
        acked.extend(more);
        drop(tc);
        verify(&s.0, &acked, &ctx);
    }
    scenario.teardown();
}

#[test]
fn open_failures_fail_open_and_lose_nothing() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let scenario = fail::FailScenario::setup();
    for point in ["dir-create", "dir-create-fsync"] {
        let ctx = format!("opening a new directory with {point} failing");
        let s = Scratch::new(point);
        let dir = s.0.join("a/tc");
        arm(point, 1);
        let r = open(&dir);
        fail::remove(point);
        assert!(
            matches!(r, Err(Error::Storage { .. })),
            "{ctx}: {:?}",
            r.err()
        );
        verify(&dir, &BTreeSet::new(), &ctx);
    }
    // A torn tail: garbage after the last image of the last segment,
    // which recovery cuts off before writing on.
    let ctx = "recovering a torn tail with segment-cut failing";
    let s = Scratch::new("segment-cut");
    let acked = {
        let tc = open(&s.0).unwrap();
        let _ = ledger(&tc);
        let (acked, err) = work(&tc, 1, Duration::from_millis(30));
        assert!(err.is_none(), "{ctx}: {err:?}");
        acked
    };
    let last = std::fs::read_dir(&s.0)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("log-"))
        .max()
        .expect("a segment");
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(&[0x47, 0x4c, 0x44]);
    std::fs::write(&last, bytes).unwrap();
    arm("segment-cut", 1);
    let r = open(&s.0);
    fail::remove("segment-cut");
    assert!(
        matches!(r, Err(Error::Storage { .. })),
        "{ctx}: {:?}",
        r.err()
    );
    verify(&s.0, &acked, ctx);
    scenario.teardown();
}

/// `ALL_POINTS` is exactly the failpoints in the storage layer's files
/// and the TC's, and each is failed by a case here or (segment-remove)
/// in the storage layer's tests.
#[test]
fn every_failpoint_is_listed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        root.join("../storage/src/fs.rs"),
        root.join("../storage/src/segments.rs"),
    ];
    for e in std::fs::read_dir(root.join("src/deuteronomy/tc")).unwrap() {
        files.push(e.unwrap().path());
    }
    let mut in_source = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for part in text.split("fp(\"").skip(1) {
            in_source.insert(part.split('"').next().unwrap().to_string());
        }
    }
    // Silo's paced deletion, which the TC does not use.
    in_source.remove("cleanup-rename");
    let listed: BTreeSet<String> = ALL_POINTS.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed, in_source, "ALL_POINTS is out of date");
}
