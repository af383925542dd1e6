//! Recorded histories of the contended check workloads
//! (`granary_workloads::check`), run on 4 threads and handed to the
//! checker: no anomaly beyond the design's level, no broken invariant,
//! and proof that the runs were contended. (CI also runs `granary check`
//! at 100k transactions on three seeds; this is the quick in-suite
//! version.)

use granary_api::Engine;
use granary_check::{check, Level};
use granary_workloads::check::{run_check, CheckConfig, CheckWorkload};

use crate::support::{seed, stress};

/// Aborted attempts the checked histories of one workload must hold
/// together, on a design whose conflicts abort: a history without
/// conflicts says nothing about concurrency control.
pub const MIN_ABORTED: u64 = 100;

/// Rounds at most. Whether 4 threads overlap at all depends on the
/// scheduler (on 2 cores, with other tests running, a release-build round
/// of Silo has aborted anywhere from 3 to 3,200 attempts), so the test
/// runs further rounds, each checked, until the aborts add up.
const MAX_ROUNDS: u64 = 20;

/// Rounds at most when the test may use only one core (`taskset`, a
/// one-CPU container): its threads then overlap only when the scheduler
/// preempts one mid-transaction, and Deuteronomy's bank aborted about 90
/// attempts in 20 rounds there.
const MAX_ROUNDS_ONE_CORE: u64 = 80;

fn max_rounds() -> u64 {
    match std::thread::available_parallelism() {
        Ok(n) if n.get() == 1 => MAX_ROUNDS_ONE_CORE,
        _ => MAX_ROUNDS,
    }
}

/// Run `workload` in rounds of 20k transactions, each on a fresh
/// database with the next seed, and check each history at `level`, until
/// the histories hold `min_aborted` aborted attempts (0 for a design that
/// waits instead of aborting: then one round).
pub fn history_is_within_level<E: Engine>(
    make: impl Fn() -> E,
    workload: CheckWorkload,
    level: Level,
    min_aborted: u64,
) {
    let base = seed(&format!("history {workload}"));
    let (mut aborted, mut recorded) = (0, 0);
    let rounds = max_rounds();
    for round in 0..rounds {
        let seed = base.wrapping_add(round);
        let db = make();
        let mut cfg = CheckConfig::new(workload);
        cfg.txns = 20_000 * stress();
        cfg.seed = seed;
        let run = run_check(&db, &cfg, &|_| {}).expect("run");
        assert!(run.committed >= cfg.txns);
        assert!(
            run.violations(level == Level::Serializable).is_empty(),
            "{workload} (seed {seed}): {:?}",
            run.violations(level == Level::Serializable)
        );
        let report = check(&run.history, level);
        assert!(
            report.is_ok(),
            "{workload} (seed {seed}):\n{report}\n{}",
            report.explain(&run.history)
        );
        assert!(report.transactions as u64 >= cfg.txns);
        eprintln!(
            "{workload} round {round}: {} committed, {} aborted attempts ({} in the history)",
            run.committed, run.aborted, report.aborted
        );
        aborted += run.aborted;
        recorded += report.aborted as u64;
        if aborted >= min_aborted && recorded >= min_aborted {
            return;
        }
    }
    panic!(
        "{workload} (seed {base}): {aborted} aborted attempts in {rounds} rounds ({recorded} \
         in the histories), fewer than {min_aborted}: not a contended run"
    );
}
