//! Deuteronomy's recovery log under power loss, not only `kill -9`: a
//! crash keeps only what a completed fsync made durable. With the
//! `crashsim` feature every file operation of the TC's directory is
//! journaled (`granary_storage::crashsim`), the directory's own creation
//! included. This test runs bank transfers on a durable TC over the
//! memory data component (so recovery rebuilds everything from the log:
//! the whole durable state is in the journal), closes it, reopens it
//! (recovery) and runs more; then it replays the journal against the
//! model disk, cuts the power at every sync point, and recovers a copy of
//! what was durable. Every time: the open succeeds, every transfer
//! acknowledged before the cut (its durable token reached) is present,
//! and each balance is its initial amount plus what the present transfer
//! rows moved (no transfer in part). The mutants that leave out a kind of
//! sync are caught.
//!
//! `GRANARY_STRESS=n` runs n rounds with different seeds.
#![cfg(feature = "crashsim")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use granary_api::{Engine, TxRunner};
use granary_protocols::deuteronomy::dc::MemoryDc;
use granary_protocols::deuteronomy::tc::{self, Tc};
use granary_storage::crashsim::model::Disk;
use granary_storage::crashsim::{self, Mutant, Op};
use granary_workloads::ledger::Ledger;
use granary_workloads::replay::{seed, stress};
use granary_workloads::rng::Rng;

const ACCOUNTS: u32 = 16;
const INITIAL: i64 = 1000;
/// The mark of the load.
const LOADED: u64 = u64::MAX;

fn config() -> tc::Config {
    tc::Config {
        // The smallest buffers that hold the largest record: more of them
        // written, synced and torn.
        buffer_bytes: 2 << 20,
        ..tc::Config::default()
    }
}

fn open(dir: &Path) -> Result<Tc, String> {
    Tc::open(config(), dir, Box::new(MemoryDc::new()))
        .map(|(tc, _)| tc)
        .map_err(|e| format!("recovery failed: {e}"))
}

fn ledger(tc: &Tc) -> Ledger {
    Ledger::open(tc, ACCOUNTS, INITIAL).expect("the ledger's tables")
}

/// Load the accounts once (marked `LOADED` when durable).
fn load(tc: &Tc) {
    let ledger = ledger(tc);
    let mut r = tc.runner().unwrap();
    while r.try_run(|tx| ledger.load(tx)).unwrap().is_err() {}
    let token = r.durable_token();
    while tc.durable_epoch().unwrap() < token {
        std::thread::sleep(Duration::from_micros(200));
    }
    crashsim::mark(LOADED);
}

/// Transfers on two threads until `during` returns; each one, once
/// durable, is marked with its id. `round` keeps ids unique.
fn transfer(tc: &Tc, seed: u64, round: u64, during: impl FnOnce()) {
    let ledger = ledger(tc);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for thread in 0..2u64 {
            let (stop, ledger) = (&stop, &ledger);
            s.spawn(move || {
                let mut r = tc.runner().unwrap();
                let mut rng = Rng::new(seed ^ round, thread);
                let mut pending = std::collections::VecDeque::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || !pending.is_empty() {
                    if !stop.load(Ordering::Relaxed) {
                        let id = round << 40 | thread << 32 | n;
                        n += 1;
                        let a = rng.below(u64::from(ACCOUNTS)) as u32;
                        let b = rng.below(u64::from(ACCOUNTS)) as u32;
                        let amount = 1 + rng.below(50) as i64;
                        let done = r
                            .try_run(|tx| ledger.transfer(tx, id, a, b, amount))
                            .expect("no engine error");
                        if done.is_ok() {
                            pending.push_back((r.durable_token(), id));
                        }
                    } else {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    let durable = tc.durable_epoch().expect("durable");
                    while pending.front().is_some_and(|&(t, _)| t <= durable) {
                        let (_, id) = pending.pop_front().unwrap();
                        crashsim::mark(id);
                    }
                }
            });
        }
        during();
        stop.store(true, Ordering::Relaxed);
    });
}

/// One journaled run of a TC in `root/tc`, which the run creates; returns
/// the journal of everything under `root`.
fn journaled_run(root: &Path, seed: u64) -> Vec<Op> {
    crashsim::arm(root);
    let dir = root.join("tc");
    {
        let tc = open(&dir).unwrap();
        load(&tc);
        transfer(&tc, seed, 1, || {
            std::thread::sleep(Duration::from_millis(80))
        });
    }
    {
        // Recovery (a torn tail cut off, if any), then more transfers.
        let tc = open(&dir).unwrap();
        transfer(&tc, seed, 2, || {
            std::thread::sleep(Duration::from_millis(50))
        });
    }
    crashsim::disarm()
}

/// Check a recovered TC against the acknowledged marks.
fn check(tc: &Tc, acked: &BTreeSet<u64>) -> Result<(), String> {
    let ledger = ledger(tc);
    let mut r = tc.runner().unwrap();
    let state = r
        .try_run(|tx| ledger.read(tx))
        .map_err(|e| format!("reading back: {e}"))?
        .map_err(|e| format!("reading back conflicted: {e:?}"))?;
    let transfers = acked.iter().filter(|&&m| m != LOADED);
    state.audit(&ledger, acked.contains(&LOADED), transfers)
}

/// Replay `journal` (of a run under `root`) against the model, cutting
/// the power at every sync point and recovering a copy of `root/tc` in
/// `crash/tc`; returns the number of sync points and of acknowledged
/// transfers, or the first failure.
fn replay(journal: &[Op], root: &Path, crash: &Path, seed: u64) -> Result<(usize, usize), String> {
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
        let tc = open(&crash.join("tc")).map_err(|e| format!("{ctx}: {e}"))?;
        check(&tc, &acked).map_err(|e| format!("{ctx}: {e}"))?;
    }
    Ok((points, acked.len()))
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!(
            "granary-deut-powerloss-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join("root")).unwrap();
        Scratch(p)
    }

    /// The journaled directory: the TC directory's parent, so that its
    /// creation is journaled too.
    fn root(&self) -> PathBuf {
        self.0.join("root").canonicalize().unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The journal is one per process: tests take turns.
static JOURNAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_sync_point_recovers_what_was_acknowledged() {
    let _turn = JOURNAL.lock().unwrap_or_else(|p| p.into_inner());
    let seed = seed("deuteronomy powerloss");
    for round in 0..stress() {
        let seed = seed.wrapping_add(round);
        let scratch = Scratch::new("run");
        let root = scratch.root();
        let journal = journaled_run(&root, seed);
        let syncs = journal
            .iter()
            .filter(|o| matches!(o, Op::Sync { .. } | Op::SyncDir { .. }))
            .count();
        match replay(&journal, &root, &scratch.0.join("crash"), seed) {
            Ok((points, acked)) => {
                eprintln!(
                    "round {round}: {} operations, {syncs} sync points, {acked} acknowledged",
                    journal.len()
                );
                assert!(points >= 10, "only {points} sync points were journaled");
                assert!(acked >= 10, "only {acked} transfers were acknowledged");
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// Each mutant leaves a kind of sync out of the journal (as if the log
/// never made it); some power cut then loses an acknowledged transfer or
/// fails recovery.
#[test]
fn mutants_that_skip_a_sync_are_caught() {
    let _turn = JOURNAL.lock().unwrap_or_else(|p| p.into_inner());
    let seed = seed("deuteronomy powerloss mutants");
    for m in [Mutant::LogDirSync, Mutant::LogFileSync, Mutant::NewDirSync] {
        let scratch = Scratch::new("mutant");
        let root = scratch.root();
        crashsim::set_mutant(m);
        let journal = journaled_run(&root, seed);
        crashsim::set_mutant(Mutant::None);
        match replay(&journal, &root, &scratch.0.join("crash"), seed) {
            Ok((n, _)) => panic!("mutant {m:?} survived all {n} power cuts"),
            Err(e) => eprintln!("mutant {m:?} caught: {e}"),
        }
    }
}
