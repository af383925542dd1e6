//! The crash loop every durable design runs (kill -9): an acknowledged
//! transaction is always there after recovery, and nothing is there in
//! part.
//!
//! A design's test file expands [`crash_tests!`](crate::crash_tests) with
//! a function that opens (recovering) its durable database in a
//! directory. The parent test, `crash_loop`, runs a CHILD process (the
//! same test binary, running only the module's `child_entry`) that opens
//! the database, loads a bank ([`Ledger`]) once, and runs transfers on two
//! threads, each also inserting a receipt keyed by its unique id. The
//! child acknowledges a transfer (a `@@crash ACK` line on stdout) only
//! once the engine says it is durable: its runner's
//! [`durable_token`](granary_api::TxRunner::durable_token) reached by the
//! engine's [`durable_epoch`](Engine::durable_epoch). The parent kills
//! the child with SIGKILL at a seeded random moment (during recovery, the
//! load or the transfers), opens the directory itself and audits it
//! ([`State::audit`](granary_workloads::ledger::State::audit)): every
//! acknowledged receipt is there; each balance is its initial amount plus
//! what the present receipts moved (a transfer's debit, credit and
//! receipt are all there or all absent); the total is constant. The next
//! cycle runs on the same directory, so recovery runs on top of
//! recoveries.
//!
//! `GRANARY_SEED` replays a run's choices (the kill moments are times, so
//! only approximately); `GRANARY_STRESS=n` runs n × [`CYCLES`] cycles. On
//! failure the directory is kept and its path printed.

use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use granary_api::{Engine, TxRunner};
use granary_workloads::ledger::Ledger;
use granary_workloads::replay::{seed, stress};
use granary_workloads::rng::Rng;

/// The child's directory (set only in a child's environment).
const CHILD_DIR: &str = "GRANARY_CRASH_LOOP_DIR";
/// The child's cycle number (its transfer ids' high bits).
const CHILD_CYCLE: &str = "GRANARY_CRASH_LOOP_CYCLE";
/// Set in a child's environment: open with the design's mutant.
const CHILD_MUTANT: &str = "GRANARY_CRASH_LOOP_MUTANT";
const TAG: &str = "@@crash";
const ACCOUNTS: u32 = 16;
const INITIAL: i64 = 1000;
/// Cycles of one run of the loop (times `GRANARY_STRESS`).
pub const CYCLES: u64 = 20;

/// Whether this process is a crash loop's child (every other test of the
/// binary should then return at once).
pub fn in_child() -> bool {
    std::env::var_os(CHILD_DIR).is_some()
}

/// The child: recover, load once, transfer until killed. Returns at once
/// unless this process is a crash loop's child.
///
/// `open(dir, mutant)` opens (recovering) the design's database in `dir`,
/// with its recovery mutant if `mutant`.
pub fn child<E: Engine>(open: impl Fn(&Path, bool) -> E) {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let cycle: u64 = std::env::var(CHILD_CYCLE)
        .expect("a child has a cycle")
        .parse()
        .expect("a cycle number");
    let db = open(Path::new(&dir), std::env::var_os(CHILD_MUTANT).is_some());
    println!("{TAG} RECOVERED");
    let ledger = Ledger::open(&db, ACCOUNTS, INITIAL).expect("the ledger's tables");
    let mut r = db.runner().expect("a runner");
    // Nothing conflicts with the load, but a design may shed load: retry.
    while r.try_run(|tx| ledger.load(tx)).expect("load").is_err() {}
    drop(r);
    std::thread::scope(|s| {
        for thread in 0..2u64 {
            let (db, ledger) = (&db, &ledger);
            s.spawn(move || {
                let mut r = db.runner().expect("a runner");
                let mut rng = Rng::new(cycle, thread);
                let mut pending = VecDeque::new();
                for n in 0u64.. {
                    let id = cycle << 40 | thread << 32 | n;
                    let (a, b) = (
                        rng.below(u64::from(ACCOUNTS)) as u32,
                        rng.below(u64::from(ACCOUNTS)) as u32,
                    );
                    let amount = 1 + rng.below(50) as i64;
                    let done = r
                        .try_run(|tx| ledger.transfer(tx, id, a, b, amount))
                        .expect("no engine error");
                    if done.is_ok() {
                        pending.push_back((r.durable_token(), id));
                    }
                    let durable = db.durable_epoch().expect("a durable engine");
                    while pending.front().is_some_and(|&(t, _)| t <= durable) {
                        let (_, id) = pending.pop_front().expect("front");
                        println!("{TAG} ACK {id}");
                    }
                }
            });
        }
    });
}

/// Check the directory after a crash: what was acknowledged is there, and
/// nothing is there in part.
fn verify<E: Engine>(db: &E, acked: &HashSet<u64>) -> Result<(), String> {
    let ledger = Ledger::open(db, ACCOUNTS, INITIAL).map_err(|e| format!("verify: {e}"))?;
    let mut r = db.runner().map_err(|e| format!("verify: {e}"))?;
    let state = r
        .try_run(|tx| ledger.read(tx))
        .map_err(|e| format!("verify: {e}"))?
        .map_err(|e| format!("verify conflicted: {e:?}"))?;
    state.audit(&ledger, false, acked)
}

/// Run `cycles` crash cycles (kill -9 of a child, recovery, audit) on a
/// fresh directory, removed on success. `child_test` is the child test's
/// name as the test binary knows it (`module_path!()` without the crate,
/// then `::child_entry`); `mutant` has the children and the parent's
/// recoveries open with the design's mutant.
///
/// # Errors
/// The first cycle whose audit fails, or a loop in which no child ever
/// acknowledged a transfer.
pub fn cycles<E: Engine>(
    child_test: &str,
    open: impl Fn(&Path, bool) -> E,
    seed: u64,
    cycles: u64,
    mutant: bool,
) -> Result<(), String> {
    let mut rng = Rng::new(seed, 0);
    let dir = dir_for(child_test, seed, mutant);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut acked: HashSet<u64> = HashSet::new();
    let mut cycles_with_acks = 0;
    for cycle in 1..=cycles {
        let t0 = Instant::now();
        let mut cmd = Command::new(&me);
        cmd.args(["--exact", child_test, "--nocapture", "--test-threads", "1"])
            .env(CHILD_DIR, &dir)
            .env(CHILD_CYCLE, cycle.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        match mutant {
            true => cmd.env(CHILD_MUTANT, "1"),
            false => cmd.env_remove(CHILD_MUTANT),
        };
        let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", me.display()))?;
        let out = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Some(id) = line.strip_prefix(&format!("{TAG} ACK ")) {
                    acks.push(id.parse::<u64>().expect("an id"));
                }
            }
            acks
        });
        let kill_after = Duration::from_millis(50 + rng.below(600));
        std::thread::sleep(kill_after.saturating_sub(t0.elapsed()));
        child.kill().map_err(|e| e.to_string())?; // SIGKILL
        child.wait().map_err(|e| e.to_string())?;
        let acks = reader.join().expect("the reader");
        cycles_with_acks += usize::from(!acks.is_empty());
        acked.extend(acks);
        let db = open(&dir, mutant);
        if let Err(e) = verify(&db, &acked) {
            drop(db);
            let e = format!("cycle {cycle} (seed {seed}, killed after {kill_after:?}): {e}");
            // A mutant's failure is what its test expects: nothing to keep.
            if mutant {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
            return Err(format!("{e}; directory kept: {}", dir.display()));
        }
    }
    eprintln!(
        "{child_test}: {cycles} cycles, {} transfers acknowledged in {cycles_with_acks} cycles",
        acked.len()
    );
    if cycles_with_acks == 0 {
        return Err(format!(
            "no child ever acknowledged a transfer (is `{child_test}` the child test's exact name?)"
        ));
    }
    std::fs::remove_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(())
}

/// The loop of [`crash_tests!`](crate::crash_tests): [`CYCLES`] ×
/// `GRANARY_STRESS` cycles with a logged, replayable seed; panics with
/// the failing cycle.
pub fn crash_loop<E: Engine>(module: &str, open: impl Fn(&Path, bool) -> E) {
    if in_child() {
        return;
    }
    let test = child_test(module);
    let seed = seed(&format!("{module}: crash loop"));
    if let Err(e) = cycles(&test, open, seed, CYCLES * stress(), false) {
        panic!("{e}");
    }
}

/// The child test's name for libtest's `--exact`: `module` (a
/// `module_path!()`) without its crate, then `::child_entry`.
pub fn child_test(module: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::child_entry"),
        None => "child_entry".to_string(),
    }
}

/// The directory of a crash loop.
fn dir_for(child_test: &str, seed: u64, mutant: bool) -> PathBuf {
    let name = child_test.replace("::", "-");
    std::env::temp_dir().join(format!(
        "granary-crash-{name}-{}-{seed}-{mutant}",
        std::process::id()
    ))
}

/// The crash loop ([`crash`](crate::crash)) on one durable design: a
/// module `$name` with its `child_entry` and `crash_loop` tests. `$open`
/// names a `fn(&Path, bool) -> E` of the enclosing module that opens (recovering) the design's
/// database in a directory, with its recovery mutant if the flag is set
/// (a design without one asserts it is unset).
///
/// ```ignore
/// fn open(dir: &Path, mutant: bool) -> Database {
///     assert!(!mutant);
///     Database::open(dir, Options::default()).expect("open")
/// }
/// granary_conformance::crash_tests!(silo, open);
/// ```
#[macro_export]
macro_rules! crash_tests {
    ($name:ident, $open:ident) => {
        mod $name {
            /// The crash loop's child (returns at once unless run as one).
            #[test]
            fn child_entry() {
                $crate::crash::child(super::$open);
            }

            /// Kill -9 a child at random moments; after each, what it
            /// acknowledged is there and nothing is there in part.
            #[test]
            fn crash_loop() {
                $crate::crash::crash_loop(module_path!(), super::$open);
            }
        }
    };
}
