//! Deuteronomy's crash loop (kill -9), with the disk data component: an
//! acknowledged transaction is always there after recovery, and nothing
//! is there in part.
//!
//! The parent test runs a CHILD process (this test binary again, running
//! only [`child_entry`]) that opens a durable TC over a disk DC in one
//! directory (recovering what the last child left), loads bank accounts
//! once, and runs transfers on two threads; each transfer also inserts a
//! row keyed by its unique id. The child acknowledges a transfer (a
//! `@@crash ACK` line) only once the TC says it is durable (its durable
//! token reached). The parent kills the child with SIGKILL at a seeded
//! random moment (during recovery, the load, or the transfers), then
//! opens the directory itself and checks that every acknowledged
//! transfer's row is there; that each balance is its initial amount plus
//! what the present rows moved (a transfer's debit, credit and row are all
//! there or all absent); and that the total is constant. The next cycle
//! runs on the same directory, so recovery runs on top of recoveries, and
//! checkpoints truncate the log in between.
//!
//! `GRANARY_SEED` replays a run's choices (the kill moments are times, so
//! only approximately); `GRANARY_STRESS=n` runs n × 20 cycles. On failure
//! the directory is kept and its path printed.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use granary_api::{Engine, TxRunner};
use granary_protocols::deuteronomy::disk::DiskDc;
use granary_protocols::deuteronomy::tc::{self, Tc};
use granary_workloads::ledger::Ledger;
use granary_workloads::replay::{seed, stress};
use granary_workloads::rng::Rng;

const CHILD_DIR: &str = "GRANARY_DEUTERONOMY_CRASH_DIR";
const CHILD_CYCLE: &str = "GRANARY_DEUTERONOMY_CRASH_CYCLE";
const TAG: &str = "@@crash";
const ACCOUNTS: u32 = 16;
const INITIAL: i64 = 1000;
const CYCLES: u64 = 20;
/// Set in a child's environment: recover with the mutant that replays
/// uncommitted transactions too (`mutant` builds).
const MUTANT: &str = "GRANARY_DEUTERONOMY_CRASH_MUTANT";

fn config() -> tc::Config {
    tc::Config {
        checkpoint_ms: 50,
        ..tc::Config::default()
    }
}

/// Open the TC in `dir` (with the recovery mutant if `mutant`).
fn open(dir: &Path, mutant: bool) -> (Tc, tc::Recovery) {
    let dc = DiskDc::open(&dir.join("dc.redb"), 1 << 20).expect("disk dc");
    #[cfg(feature = "mutant")]
    if mutant {
        return Tc::mutant_open_replaying_uncommitted(config(), dir, Box::new(dc)).expect("open");
    }
    assert!(!mutant, "the mutant exists in `mutant` builds only");
    Tc::open(config(), dir, Box::new(dc)).expect("open")
}

fn ledger(tc: &Tc) -> Ledger {
    Ledger::open(tc, ACCOUNTS, INITIAL).expect("the ledger's tables")
}

/// The child: recover, load once, transfer until killed.
#[test]
fn child_entry() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return; // Only as the crash loop's child.
    };
    let cycle: u64 = std::env::var(CHILD_CYCLE).unwrap().parse().unwrap();
    let dir = Path::new(&dir);
    let (tc, rec) = open(dir, std::env::var(MUTANT).is_ok());
    println!("{TAG} RECOVERED {rec:?}");
    let ledger = ledger(&tc);
    let mut r = tc.runner().unwrap();
    // Nothing conflicts with the load, but the TC may shed load: retry.
    while r.try_run(|tx| ledger.load(tx)).unwrap().is_err() {}
    drop(r);
    std::thread::scope(|s| {
        for thread in 0..2u64 {
            let (tc, ledger) = (&tc, &ledger);
            s.spawn(move || {
                let mut r = tc.runner().unwrap();
                let mut rng = Rng::new(cycle, thread);
                let mut pending = std::collections::VecDeque::new();
                for n in 0u64.. {
                    let id = cycle << 40 | thread << 32 | n;
                    let (a, b) = (
                        rng.below(ACCOUNTS as u64) as u32,
                        rng.below(ACCOUNTS as u64) as u32,
                    );
                    let amount = 1 + rng.below(50) as i64;
                    let done = r
                        .try_run(|tx| ledger.transfer(tx, id, a, b, amount))
                        .expect("no engine error");
                    if done.is_ok() {
                        pending.push_back((r.durable_token(), id));
                    }
                    let durable = tc.durable_epoch().expect("durable");
                    while pending.front().is_some_and(|&(t, _)| t <= durable) {
                        let (_, id) = pending.pop_front().unwrap();
                        println!("{TAG} ACK {id}");
                    }
                }
            });
        }
    });
}

/// Check the directory after a crash: what was acknowledged is there, and
/// nothing is there in part.
fn verify(dir: &Path, acked: &HashSet<u64>, mutant: bool) -> Result<tc::Recovery, String> {
    let (tc, rec) = open(dir, mutant);
    let ledger = ledger(&tc);
    let mut r = tc.runner().unwrap();
    let state = r
        .try_run(|tx| ledger.read(tx))
        .map_err(|e| format!("verify: {e}"))?
        .map_err(|e| format!("verify conflicted: {e:?}"))?;
    state.audit(&ledger, false, acked)?;
    Ok(rec)
}

#[test]
fn crash_loop() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let seed = seed("deuteronomy crash_loop");
    if let Err(e) = cycles(seed, CYCLES * stress(), false) {
        panic!("{e}");
    }
}

/// The recovery mutant that applies uncommitted transactions is caught:
/// a transfer killed halfway shows in part. The loop above can fail.
#[cfg(feature = "mutant")]
#[test]
fn crash_loop_catches_the_recovery_mutant() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let seed = seed("deuteronomy recovery mutant");
    let e = cycles(seed, 40, true).expect_err("the mutant recovered correctly for 40 cycles");
    eprintln!("caught: {e}");
    std::fs::remove_dir_all(dir_for(seed, true)).unwrap();
}

/// The directory of a crash loop.
fn dir_for(seed: u64, mutant: bool) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "granary-deut-crash-{}-{seed}-{mutant}",
        std::process::id()
    ))
}

/// Run `cycles` crash cycles on a fresh directory (removed on success),
/// recovering with the mutant if `mutant`.
fn cycles(seed: u64, cycles: u64, mutant: bool) -> Result<(), String> {
    let mut rng = Rng::new(seed, 0);
    let dir = dir_for(seed, mutant);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let me = std::env::current_exe().unwrap();
    let mut acked: HashSet<u64> = HashSet::new();
    let (mut replayed, mut cycles_with_acks) = (0u64, 0);
    for cycle in 1..=cycles {
        let t0 = Instant::now();
        let mut cmd = Command::new(&me);
        cmd.args([
            "--exact",
            "child_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR, &dir)
        .env(CHILD_CYCLE, cycle.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        match mutant {
            true => cmd.env(MUTANT, "1"),
            false => cmd.env_remove(MUTANT),
        };
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Some(id) = line.strip_prefix(&format!("{TAG} ACK ")) {
                    acks.push(id.parse::<u64>().unwrap());
                }
            }
            acks
        });
        let kill_after = Duration::from_millis(50 + rng.below(600));
        std::thread::sleep(kill_after.saturating_sub(t0.elapsed()));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acks = reader.join().unwrap();
        cycles_with_acks += usize::from(!acks.is_empty());
        acked.extend(acks);
        match verify(&dir, &acked, mutant) {
            Ok(rec) => replayed += rec.operations,
            Err(e) => {
                return Err(format!(
                    "cycle {cycle} (seed {seed}, killed after {kill_after:?}): {e}; \
                     directory kept: {}",
                    dir.display()
                ))
            }
        }
    }
    eprintln!(
        "{cycles} cycles: {} transfers acknowledged in {cycles_with_acks} cycles, \
         {replayed} operations replayed by the parent's recoveries",
        acked.len()
    );
    if cycles_with_acks == 0 {
        return Err("no child ever acknowledged a transfer".into());
    }
    std::fs::remove_dir_all(&dir).unwrap();
    Ok(())
}
