//! Recovery never opens a directory that lost durable data: a bank
//! workload (transfers, plus one receipt row per acknowledged transaction)
//! on two loggers with rotated logs and a periodic checkpoint; then every
//! file of its directory is deleted in turn, and every closed file cut at
//! several offsets, each in a fresh copy. A strict open either recovers
//! everything acknowledged (the file was not needed) or fails with
//! `Error::Missing` / `Error::Corrupt` naming that file (or the directory
//! it belongs in). A salvage of the same copy either recovers a prefix of
//! the serial order (the bank total holds and each worker's receipts have
//! no holes), which then opens strictly, or fails naming the file too.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::{Rng, TempDir};
use granary::{Database, Error, Options, RecoveryMode};

const ACCOUNTS: u64 = 64;
const START: u64 = 1_000;
const WORKERS: u64 = 4;

fn opts() -> Options {
    Options::default()
        .epoch_interval(Duration::from_millis(2))
        .loggers(2)
        .checkpoint_threads(2)
        .recovery_threads(2)
}

/// What the bank holds: the balance total, and per worker the receipt
/// numbers present.
struct State {
    total: u64,
    accounts: usize,
    receipts: BTreeMap<u64, Vec<u64>>,
}

fn read_state(db: &Database) -> State {
    let (accounts, total, receipts) = common::bank::state(db);
    State {
        total,
        accounts,
        receipts,
    }
}

/// Run the bank on a new directory until each worker's log has rotated a
/// few times and several checkpoints were taken; returns each worker's
/// acknowledged receipt count.
fn make_bank(dir: &Path, seed: u64) -> BTreeMap<u64, u64> {
    let db = Database::open(dir, opts()).unwrap();
    let (acc, rec) = common::bank::tables(&db);
    let mut w = db.worker().unwrap();
    for a in 0..ACCOUNTS {
        w.run(|tx| tx.put(acc, &common::enc(a), &common::enc(START)))
            .unwrap();
    }
    drop(w);
    let stop = AtomicBool::new(false);
    let acked = std::thread::scope(|s| {
        let hs: Vec<_> = (0..WORKERS)
            .map(|id| {
                let (db, stop) = (&db, &stop);
                s.spawn(move || {
                    let mut rng = Rng::new(seed, id);
                    let mut w = db.worker().unwrap();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let (a, b) = (rng.below(ACCOUNTS), rng.below(ACCOUNTS));
                        let amount = rng.below(50);
                        w.run(|tx| common::bank::transfer(tx, (acc, rec), id, n, a, b, amount))
                            .unwrap();
                        // Durable when `run` returns (wait_for_durable).
                        n += 1;
                    }
                    (id, n)
                })
            })
            .collect();
        // Rotations every 100 epochs of 2 ms; two checkpoints, then at
        // least two more rotations, so the logs the last checkpoint needs
        // span several files.
        for _ in 0..2 {
            std::thread::sleep(Duration::from_millis(400));
            db.checkpoint().unwrap();
        }
        std::thread::sleep(Duration::from_millis(700));
        stop.store(true, Ordering::Relaxed);
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .collect::<BTreeMap<_, _>>()
    });
    assert!(
        db.durability_stats().unwrap().checkpoints >= 2,
        "the bank took fewer than two checkpoints"
    );
    acked
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// Every file under `dir`, relative to it.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in std::fs::read_dir(dir.join(&rel)).unwrap().flatten() {
            let r = rel.join(e.file_name());
            if e.path().is_dir() {
                stack.push(r);
            } else {
                out.push(r);
            }
        }
    }
    out.sort();
    out
}

/// The bank is a prefix of what was acknowledged: the total holds, and
/// each worker's receipts are 0..k with k at most its acknowledged count.
fn assert_prefix(s: &State, acked: &BTreeMap<u64, u64>, ctx: &str) {
    assert_eq!(s.accounts as u64, ACCOUNTS, "{ctx}: accounts");
    assert_eq!(s.total, ACCOUNTS * START, "{ctx}: the bank total");
    for (id, seqs) in &s.receipts {
        let k = seqs.len() as u64;
        assert!(
            seqs.iter().copied().eq(0..k),
            "{ctx}: worker {id}'s receipts have holes"
        );
        assert!(
            k <= acked[id],
            "{ctx}: worker {id} has unacknowledged receipts"
        );
    }
}

/// What opening a damaged copy gave, for the summary.
#[derive(Default, Debug)]
struct Tally {
    complete: usize,
    refused: usize,
    salvaged_all: usize,
    salvaged_prefix: usize,
    salvage_refused: usize,
}

/// Open the damaged copy `dir` (damaged at `victim`) strictly, then by
/// salvage, and check each outcome.
fn check_case(dir: &Path, victim: &Path, acked: &BTreeMap<u64, u64>, ctx: &str, t: &mut Tally) {
    let backup = dir.with_extension("orig");
    copy_dir(dir, &backup);
    match Database::open(dir, opts()) {
        Ok(db) => {
            let s = read_state(&db);
            assert_prefix(&s, acked, ctx);
            for (id, n) in acked {
                let got = s.receipts.get(id).map_or(0, Vec::len) as u64;
                assert_eq!(got, *n, "{ctx}: opened Ok but worker {id} lost receipts");
            }
            t.complete += 1;
            return;
        }
        Err(Error::Missing { path, what } | Error::Corrupt { path, what, .. }) => {
            assert!(
                path == victim || victim.starts_with(&path),
                "{ctx}: the error names {} ({what}), not the damaged file",
                path.display()
            );
            t.refused += 1;
        }
        Err(e) => panic!("{ctx}: expected Missing or Corrupt, got {e}"),
    }
    // A refused open changed nothing.
    for f in files(&backup) {
        assert_eq!(
            std::fs::read(backup.join(&f)).ok(),
            std::fs::read(dir.join(&f)).ok(),
            "{ctx}: the refused open changed {}",
            f.display()
        );
    }
    let _ = std::fs::remove_dir_all(&backup);
    match Database::open(dir, opts().recovery_mode(RecoveryMode::Salvage)) {
        Ok(db) => {
            let s = read_state(&db);
            assert_prefix(&s, acked, &format!("{ctx}, salvaged"));
            let report = db.durability_stats().unwrap().recovery.salvage;
            let report = report.unwrap_or_else(|| panic!("{ctx}: salvage reported nothing"));
            let all = acked
                .iter()
                .all(|(id, n)| s.receipts.get(id).map_or(0, Vec::len) as u64 == *n);
            if all {
                t.salvaged_all += 1;
            } else {
                assert!(report.lost.is_some(), "{ctx}: lost receipts, reported none");
                t.salvaged_prefix += 1;
            }
            drop(db);
            // The salvaged directory opens strictly, to the same state.
            let db = Database::open(dir, opts())
                .unwrap_or_else(|e| panic!("{ctx}: after salvage, a strict open: {e}"));
            let again = read_state(&db);
            assert_eq!(again.receipts, s.receipts, "{ctx}: reopened after salvage");
        }
        // Nothing consistent survives (a checkpoint, the pepoch or the
        // catalog is gone or damaged, or the log from e_l to e_h is):
        // refused, naming what.
        Err(Error::Missing { path, what } | Error::Corrupt { path, what, .. }) => {
            assert!(
                path == victim || victim.starts_with(&path),
                "{ctx}: salvage names {} ({what}), not the damaged file",
                path.display()
            );
            t.salvage_refused += 1;
        }
        Err(e) => panic!("{ctx}: salvage failed with {e}"),
    }
}

#[test]
fn deleted_or_cut_files_never_open_with_data_missing() {
    let seed = common::seed("completeness");
    // GRANARY_STRESS=N: N directories, each from its own seed.
    for round in 0..common::stress() {
        damage_every_file(seed.wrapping_add(round));
    }
}

fn damage_every_file(seed: u64) {
    let base = TempDir::new("complete");
    let orig = base.path().join("db");
    let acked = make_bank(&orig, seed);
    eprintln!("seed {seed}: acknowledged receipts per worker: {acked:?}");
    let all = files(&orig);
    let closed = |f: &Path| {
        let n = f.file_name().unwrap().to_string_lossy();
        n.starts_with("old_data.") || n.starts_with("part.") || n == "MANIFEST"
    };
    assert!(
        all.iter()
            .filter(|f| f.to_string_lossy().contains("old_data."))
            .count()
            >= 2,
        "fewer than two rotated log files: {all:?}"
    );
    let work = base.path().join("copy");
    let mut t = Tally::default();
    for f in &all {
        if f.as_os_str() == "LOCK" {
            continue;
        }
        let ctx = format!("{} deleted", f.display());
        copy_dir(&orig, &work);
        std::fs::remove_file(work.join(f)).unwrap();
        check_case(&work, &work.join(f), &acked, &ctx, &mut t);
    }
    for f in all.iter().filter(|f| closed(f)) {
        let len = std::fs::metadata(orig.join(f)).unwrap().len();
        // A closed file may be empty (a checkpointer's slice with no key).
        let last = len.saturating_sub(1);
        let mut cuts = vec![0, 1, 32, 4096, len / 2, len.saturating_sub(4096), last];
        cuts.retain(|&c| c < len);
        cuts.dedup();
        for cut in cuts {
            let ctx = format!("{} cut to {cut} of {len} bytes", f.display());
            copy_dir(&orig, &work);
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(work.join(f))
                .unwrap();
            file.set_len(cut).unwrap();
            drop(file);
            check_case(&work, &work.join(f), &acked, &ctx, &mut t);
        }
    }
    eprintln!("seed {seed}: {t:?}");
    assert!(t.refused > 0 && t.complete > 0, "{t:?}");
    assert!(t.salvaged_prefix > 0, "no case lost data to salvage: {t:?}");
}
