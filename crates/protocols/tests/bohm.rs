//! BOHM runs the workloads' procedures through its pipeline (sequencer,
//! CC threads, execution threads) and their books balance: YCSB's value
//! counters add up to the read-modify-writes that committed, SmallBank's
//! money is conserved, on contended keys, with every thread arrangement
//! this machine can run.

use std::time::Duration;

use granary_protocols::bohm::{Bohm, Config};
use granary_workloads::driver::{run, DriverConfig, Workload};
use granary_workloads::smallbank::{SmallBank, SmallBankConfig};
use granary_workloads::ycsb::{WriteKind, Ycsb, YcsbConfig};

fn seed() -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("GRANARY_SEED={s}");
    s
}

fn driver(seed: u64) -> DriverConfig {
    DriverConfig {
        threads: 2,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(400),
        seed,
        latency_every: 1,
        breakdown: false,
    }
}

/// (CC threads, execution threads, batch, whether each thread does both).
const ARRANGEMENTS: [(usize, usize, usize, bool); 5] = [
    (1, 1, 100, false),
    (2, 2, 64, false),
    (1, 2, 7, false),
    (1, 1, 50, true),
    (2, 2, 16, true),
];

/// Load `w` on BOHM with each arrangement, run it, and check its
/// invariants; `check` looks at the report too.
// Test-only `mutant` builds give the config one more field.
#[allow(clippy::needless_update)]
fn on_each_arrangement<W: Workload>(
    make: impl Fn() -> W,
    check: impl Fn(&granary_workloads::driver::RunReport) -> Result<(), String>,
) {
    let s = seed();
    for (m, n, batch, both) in ARRANGEMENTS {
        let db = Bohm::new(Config {
            cc_threads: m,
            exec_threads: n,
            batch,
            both,
            ..Config::default()
        })
        .unwrap();
        let mut w = make();
        w.load(&db, &|_, _| {}).unwrap();
        let r = run(&w, &db, &driver(s), &|_, _| {}).unwrap();
        assert!(
            r.invariant_violations.is_empty(),
            "m={m} n={n} batch={batch} both={both} (seed {s}): {:?}",
            r.invariant_violations
        );
        if let Err(e) = check(&r) {
            panic!("m={m} n={n} batch={batch} both={both} (seed {s}): {e}");
        }
        eprintln!(
            "bohm m={m} n={n} batch={batch} both={both}: {:.0} txn/s",
            r.throughput_txn_per_s
        );
    }
}

#[test]
fn ycsb_counters_add_up() {
    let cfg = YcsbConfig::preset("study")
        .unwrap()
        .keys(50)
        .theta(0.9)
        .ops_per_txn(4)
        .read_pct(50.0)
        .write_kind(WriteKind::Rmw);
    on_each_arrangement(
        || Ycsb::new(cfg.clone()).unwrap(),
        |r| match r.commits > 100 {
            true => Ok(()),
            false => Err(format!("{} commits", r.commits)),
        },
    );
}

#[test]
fn smallbank_conserves_money() {
    on_each_arrangement(
        || SmallBank::new(SmallBankConfig::new(20)).unwrap(),
        |r| {
            let rolled_back: u64 = r.types.iter().map(|t| t.user_aborts).sum();
            match r.commits > 100 && rolled_back > 0 {
                true => Ok(()),
                false => Err(format!("{} commits, {rolled_back} rolled back", r.commits)),
            }
        },
    );
}
