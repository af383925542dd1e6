//! Power loss, not only `kill -9`: a crash keeps only what was made
//! durable. With the `crashsim` feature, every file operation of a
//! durable database is journaled (`granary::durable::crashsim`). This test
//! runs a bank workload with logging, log rotation, checkpoints, a clean
//! close, a reopen (recovery's own renames, end records and truncations)
//! and more work, all journaled; then it replays the journal against a
//! model disk that keeps two images (as written, and as made durable by a
//! completed fsync of the file or, for names, of its directory), crashes
//! at every sync point, drops everything not yet durable, and recovers a
//! materialized copy of the durable image. Every time: the open succeeds,
//! every transaction acknowledged before the crash is present, and the
//! state is a prefix of the serial order (the bank total holds, each
//! worker's receipts have no holes).
//!
//! `GRANARY_STRESS=N` runs N rounds with different seeds.
#![cfg(feature = "crashsim")]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Rng, TempDir};
use granary::durable::crashsim::model::Disk;
use granary::durable::crashsim::{self, Op};
use granary::{Database, Options};

const ACCOUNTS: u64 = 32;
const START: u64 = 1_000;
const WORKERS: u64 = 3;
/// The mark of the transaction that loads the accounts.
const LOADED: u64 = u64::MAX;

fn opts() -> Options {
    Options::default()
        .epoch_interval(Duration::from_millis(3))
        .loggers(2)
        .checkpoint_threads(2)
        .checkpoint_files_per_thread(1)
        .recovery_threads(2)
}

fn mark(worker: u64, seq: u64) -> u64 {
    (worker << 32) | seq
}

// ------------------------------------------------------------- the bank

/// Run transfers on `WORKERS` threads, each marking its acknowledged
/// receipts (numbered from `first[worker]`), while `during` runs; returns
/// each worker's next receipt number.
fn bank(db: &Database, seed: u64, first: &[u64], during: impl FnOnce()) -> Vec<u64> {
    let tables = common::bank::tables(db);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..WORKERS)
            .map(|id| {
                let stop = &stop;
                let mut n = first[id as usize];
                s.spawn(move || {
                    let mut rng = Rng::new(seed, id);
                    let mut w = db.worker().unwrap();
                    while !stop.load(Ordering::Relaxed) {
                        let (a, b) = (rng.below(ACCOUNTS), rng.below(ACCOUNTS));
                        let amount = rng.below(30);
                        w.run(|tx| common::bank::transfer(tx, tables, id, n, a, b, amount))
                            .unwrap();
                        // Durable: `run` waits for it.
                        crashsim::mark(mark(id, n));
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        during();
        stop.store(true, Ordering::Relaxed);
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Check the recovered database against the acknowledged marks.
fn check(db: &Database, acked: &BTreeSet<u64>, ctx: &str) {
    let (accounts, total, receipts) = common::bank::state(db);
    if accounts == 0 {
        assert!(
            acked.is_empty(),
            "{ctx}: the accounts are gone, {} acked",
            acked.len()
        );
    } else {
        assert_eq!(accounts as u64, ACCOUNTS, "{ctx}: accounts");
        assert_eq!(total, ACCOUNTS * START, "{ctx}: the bank total");
    }
    for (id, seqs) in &receipts {
        let k = seqs.len() as u64;
        assert!(
            seqs.iter().copied().eq(0..k),
            "{ctx}: worker {id}'s receipts have holes"
        );
    }
    for &m in acked {
        if m == LOADED {
            assert!(accounts > 0, "{ctx}: the acknowledged load is gone");
            continue;
        }
        let (id, n) = (m >> 32, m & 0xFFFF_FFFF);
        let have = receipts.get(&id).map_or(0, |v| v.len() as u64);
        assert!(
            n < have,
            "{ctx}: worker {id}'s acknowledged receipt {n} is gone ({have} left)"
        );
    }
}

/// The journal is one per process: tests take turns.
static JOURNAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One journaled run of a database in `root/db`, which the run creates;
/// returns the journal of everything under `root`.
fn journaled_run(root: &Path, seed: u64) -> Vec<Op> {
    crashsim::arm(root);
    let dir = &root.join("db");
    let mut next = vec![0; WORKERS as usize];
    {
        let db = Database::open(dir, opts()).unwrap();
        let (acc, _) = common::bank::tables(&db);
        db.worker()
            .unwrap()
            .run(|tx| {
                for a in 0..ACCOUNTS {
                    tx.put(acc, &common::enc(a), &common::enc(START))?;
                }
                Ok(())
            })
            .unwrap();
        crashsim::mark(LOADED);
        // A rotation every 100 epochs of 3 ms; checkpoints between.
        next = bank(&db, seed, &next, || {
            for _ in 0..2 {
                std::thread::sleep(Duration::from_millis(150));
                db.checkpoint().unwrap();
            }
            std::thread::sleep(Duration::from_millis(250));
        });
    }
    {
        // Recovery's renames, end records and truncations, and more work.
        let db = Database::open(dir, opts()).unwrap();
        bank(&db, seed ^ 1, &next, || {
            std::thread::sleep(Duration::from_millis(100));
            db.checkpoint().unwrap();
            std::thread::sleep(Duration::from_millis(100));
        });
    }
    crashsim::disarm()
}

/// Replay `journal` (of a run under `root`) against the model, crashing
/// at every sync point and recovering a copy of `root/db` in `crash/db`;
/// returns the number of sync points, or the first failure.
fn replay(journal: &[Op], root: &Path, crash: &Path, seed: u64) -> Result<usize, String> {
    let mut disk = Disk::new(root);
    let mut acked = BTreeSet::new();
    let mut points = 0;
    for (k, op) in journal.iter().enumerate() {
        if let Op::Mark(m) = op {
            acked.insert(*m);
        }
        if !disk.apply(op) {
            continue;
        }
        points += 1;
        let ctx = format!("seed {seed}: power cut after operation {k} ({op:?})");
        let ctx = ctx.chars().take(300).collect::<String>();
        disk.materialize(crash);
        let db = Database::open(crash.join("db"), opts())
            .map_err(|e| format!("{ctx}: recovery failed: {e}"))?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&db, &acked, &ctx)))
            .map_err(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| format!("{ctx}: check failed"))
            })?;
    }
    Ok(points)
}

fn journal_stats(journal: &[Op]) -> (usize, usize) {
    let syncs = journal
        .iter()
        .filter(|o| matches!(o, Op::Sync { .. } | Op::SyncDir { .. }))
        .count();
    let renames = journal
        .iter()
        .filter(|o| matches!(o, Op::Rename { .. }))
        .count();
    (syncs, renames)
}

/// The journaled directory under `base`: the database's parent, so that
/// creating the database directory is journaled too.
fn journal_root(base: &TempDir) -> PathBuf {
    let root = base.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    root.canonicalize().unwrap()
}

#[test]
fn every_sync_point_recovers_what_was_acknowledged() {
    let _turn = JOURNAL.lock().unwrap_or_else(|p| p.into_inner());
    let seed = common::seed("powerloss");
    for round in 0..common::stress() {
        let seed = seed.wrapping_add(round);
        let base = TempDir::new("powerloss");
        let root = journal_root(&base);
        let journal = journaled_run(&root, seed);
        let (syncs, renames) = journal_stats(&journal);
        eprintln!(
            "round {round}: {} operations, {syncs} sync points, {renames} renames",
            journal.len()
        );
        assert!(renames >= 4, "no log rotation or checkpoint was journaled");
        if let Err(e) = replay(&journal, &root, &base.path().join("crash"), seed) {
            panic!("{e}");
        }
    }
}

/// The model catches an engine that skips a sync: each mutant leaves a
/// kind of fsync out of the journal, and some power cut then loses
/// acknowledged data or fails recovery.
#[test]
fn mutants_that_skip_a_sync_are_caught() {
    let _turn = JOURNAL.lock().unwrap_or_else(|p| p.into_inner());
    let seed = common::seed("powerloss-mutants");
    for m in [
        crashsim::Mutant::LogDirSync,
        crashsim::Mutant::LogFileSync,
        crashsim::Mutant::NewDirSync,
    ] {
        let base = TempDir::new("powerloss-mutant");
        let root = journal_root(&base);
        crashsim::set_mutant(m);
        let journal = journaled_run(&root, seed);
        crashsim::set_mutant(crashsim::Mutant::None);
        match replay(&journal, &root, &base.path().join("crash"), seed) {
            Ok(n) => panic!("mutant {m:?} survived all {n} power cuts"),
            Err(e) => eprintln!("mutant {m:?} caught: {e}"),
        }
    }
}
