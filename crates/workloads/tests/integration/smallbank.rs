//! SmallBank on Silo: each transaction's effect, single-threaded and by
//! hand; then contended multi-threaded runs through the driver, after
//! which no money may have appeared or vanished.

use crate::common::seed;

use std::time::Duration;

use granary::{Database, Error, Options, Worker};
use granary_workloads::driver::{run, DriverConfig, Workload};
use granary_workloads::smallbank::{self, Mix, SmallBank, SmallBankConfig, PENALTY_CENTS};

fn db() -> Database {
    Database::new(Options::default().epoch_interval(Duration::from_millis(2))).expect("db")
}

fn loaded(customers: u64, f: impl FnOnce(&mut SmallBankConfig)) -> (Database, SmallBank) {
    let db = db();
    let mut cfg = SmallBankConfig::new(customers);
    f(&mut cfg);
    let mut w = SmallBank::new(cfg).expect("config");
    w.load(&db, &|_, _| {}).expect("load");
    (db, w)
}

fn balances(w: &SmallBank, wk: &mut Worker, c: u64) -> (i64, i64) {
    wk.run(|tx| w.balances(tx, c)).expect("balances")
}

#[test]
fn each_transaction_has_its_effect() {
    let (db, w) = loaded(5, |_| {});
    let mut wk = db.worker().unwrap();
    let init: Vec<(i64, i64)> = (0..5).map(|c| balances(&w, &mut wk, c)).collect();
    for &(s, k) in &init {
        assert!(
            s >= 1_000_000 && k >= 1_000_000,
            "initial balances {s}, {k}"
        );
    }

    // Names resolve to ids; an unknown name fails the transaction.
    assert_eq!(&smallbank::name(42), b"cust000000000042");
    assert_eq!(wk.run(|tx| w.lookup(tx, 3)).unwrap(), 3);
    assert!(matches!(wk.run(|tx| w.lookup(tx, 5)), Err(Error::User(_))));

    // Balance: read-only, the sum.
    let total = wk.run(|tx| w.balance(tx, 0)).unwrap();
    assert_eq!(total, init[0].0 + init[0].1);
    assert_eq!(balances(&w, &mut wk, 0), init[0]);

    // DepositChecking: checking += V; a negative deposit rolls back.
    assert_eq!(wk.run(|tx| w.deposit_checking(tx, 0, 500)).unwrap(), 500);
    assert_eq!(balances(&w, &mut wk, 0), (init[0].0, init[0].1 + 500));
    assert!(matches!(
        wk.run(|tx| w.deposit_checking(tx, 0, -1)),
        Err(Error::RolledBack)
    ));
    assert_eq!(balances(&w, &mut wk, 0), (init[0].0, init[0].1 + 500));

    // TransactSavings: deposit or withdraw; never below zero.
    let s1 = init[1].0;
    assert!(matches!(
        wk.run(|tx| w.transact_savings(tx, 1, -s1 - 1)),
        Err(Error::RolledBack)
    ));
    assert_eq!(wk.run(|tx| w.transact_savings(tx, 1, -s1)).unwrap(), -s1);
    assert_eq!(balances(&w, &mut wk, 1), (0, init[1].1));
    assert_eq!(wk.run(|tx| w.transact_savings(tx, 1, 250)).unwrap(), 250);
    assert_eq!(balances(&w, &mut wk, 1), (250, init[1].1));

    // Amalgamate: all of 0's money into 2's checking.
    let all0 = init[0].0 + init[0].1 + 500;
    assert_eq!(wk.run(|tx| w.amalgamate(tx, 0, 2)).unwrap(), all0);
    assert_eq!(balances(&w, &mut wk, 0), (0, 0));
    assert_eq!(balances(&w, &mut wk, 2), (init[2].0, init[2].1 + all0));

    // WriteCheck: covered, checking −= V; not covered, V + penalty
    // (checking may go negative).
    assert_eq!(wk.run(|tx| w.write_check(tx, 3, 700)).unwrap(), -700);
    assert_eq!(balances(&w, &mut wk, 3), (init[3].0, init[3].1 - 700));
    assert_eq!(
        wk.run(|tx| w.write_check(tx, 0, 100)).unwrap(),
        -(100 + PENALTY_CENTS)
    );
    assert_eq!(balances(&w, &mut wk, 0), (0, -(100 + PENALTY_CENTS)));

    // SendPayment: checking to checking; refused if not covered.
    assert_eq!(wk.run(|tx| w.send_payment(tx, 2, 4, 900)).unwrap(), 900);
    assert_eq!(
        balances(&w, &mut wk, 2),
        (init[2].0, init[2].1 + all0 - 900)
    );
    assert_eq!(balances(&w, &mut wk, 4), (init[4].0, init[4].1 + 900));
    assert!(matches!(
        wk.run(|tx| w.send_payment(tx, 0, 4, 1)),
        Err(Error::RolledBack)
    ));
    assert_eq!(balances(&w, &mut wk, 4), (init[4].0, init[4].1 + 900));

    // Money changed outside the threads' tallies: verify must notice.
    drop(wk);
    let bad = w.verify(&db).unwrap();
    assert!(
        bad.iter().any(|v| v.contains("customer 0")) && bad.iter().any(|v| v.contains("total")),
        "{bad:?}"
    );
}

#[test]
fn bad_configurations_are_rejected() {
    assert!(SmallBank::new(SmallBankConfig::new(1)).is_err());
    let mut c = SmallBankConfig::new(10);
    c.hotspot_customers = 11;
    assert!(SmallBank::new(c).is_err());
    let mut c = SmallBankConfig::new(10);
    c.hotspot_pct = 101;
    assert!(SmallBank::new(c).is_err());
    assert_eq!(Mix::Bohm.weights().iter().sum::<u32>(), 100);
    assert_eq!(Mix::OltpBench.weights().iter().sum::<u32>(), 100);
}

fn contended_run(seed: u64, threads: usize, secs: f64, f: impl FnOnce(&mut SmallBankConfig)) {
    let (db, w) = loaded(20, f);
    let cfg = DriverConfig {
        threads,
        warmup: Duration::ZERO,
        duration: Duration::from_secs_f64(secs),
        seed,
        latency_every: 1,
        breakdown: false,
    };
    let r = run(&w, &db, &cfg, &|_, _, _| {}).expect("run");
    assert!(
        r.invariant_violations.is_empty(),
        "seed {seed}: {:?}",
        r.invariant_violations
    );
    let weights = w.cfg.mix.weights();
    for (t, &pct) in r.types.iter().zip(&weights) {
        eprintln!(
            "{}: {} commits, {} rolled back, aborts {:?}",
            t.name, t.commits, t.user_aborts, t.aborts
        );
        if pct > 0 {
            assert!(t.commits > 0, "seed {seed}: no {} committed", t.name);
        } else {
            assert_eq!(t.commits + t.user_aborts, 0, "{} is not in the mix", t.name);
        }
    }
    assert!(
        r.aborts > 0,
        "seed {seed}: 20 customers on {threads} threads, yet no conflict"
    );
}

#[test]
fn contended_run_conserves_money() {
    let s = seed();
    contended_run(s, 4, 1.0, |c| c.mix = Mix::OltpBench);
}

#[test]
fn by_id_conserves_money() {
    let s = seed();
    contended_run(s, 3, 0.5, |c| {
        c.by_id = true;
        c.mix = Mix::OltpBench;
    });
}

#[test]
fn bohm_mix_with_spin_and_hotspot_conserves_money() {
    let s = seed();
    contended_run(s, 3, 0.5, |c| {
        c.spin = std::time::Duration::from_micros(5);
        c.hotspot_customers = 2;
        c.hotspot_pct = 50;
    });
}
