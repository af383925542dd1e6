//! A durable Deuteronomy TC over the etcd data component while etcd is
//! SIGKILLed and restarted under it.
//!
//! Two threads run bank transfers (each also inserts a row keyed by its
//! unique id) and a third audits the total, through a TC sized small so
//! that its proxy applies to etcd within milliseconds, checkpoints every
//! 50 ms (truncating its log: what is below the checkpoint lives only in
//! etcd), and trims versions early (so reads go to etcd). A transfer is
//! acknowledged once its durable token is reached. Every call either
//! succeeds, aborts (retried), or fails with an error that names etcd;
//! the audits never see a wrong total. Then a TC reopened on the same
//! directory over the same etcd finds every acknowledged transfer's row,
//! with its values, and balances that match the rows present.
//!
//! With a retry budget longer than the outages the TC rides them out;
//! with one shorter, the TC stops with a clear error, and reopening it
//! recovers. Seeds print and replay with GRANARY_SEED=N (the kill moments
//! are times, so only approximately).

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use granary_api::{AbortReason, Engine, Error, Tx, TxRunner};
use granary_etcd::{EtcdDc, EtcdServer};
use granary_protocols::deuteronomy::tc::{self, Tc};
use granary_workloads::ledger::Ledger;
use granary_workloads::replay::seed;
use granary_workloads::rng::Rng;

const ACCOUNTS: u32 = 64;
const INITIAL: i64 = 1000;

fn config() -> tc::Config {
    tc::Config {
        buffer_bytes: 2 << 20,
        log_buffers: 8,
        soft_versions: 256,
        hard_versions: 1024,
        checkpoint_ms: 50,
        ..tc::Config::default()
    }
}

fn open(dir: &Path, server: &EtcdServer, retry_ms: u64) -> Tc {
    let dc = EtcdDc::connect(common::options(server, retry_ms)).expect("connect");
    Tc::open(config(), dir, Box::new(dc)).expect("open").0
}

fn ledger(tc: &Tc) -> Ledger {
    Ledger::open(tc, ACCOUNTS, INITIAL).unwrap()
}

fn int(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().expect("8 bytes"))
}

/// What the workers saw.
#[derive(Default)]
struct Seen {
    acked: HashSet<u64>,
    committed: u64,
    audits: u64,
    /// Errors, by message.
    errors: Vec<String>,
}

/// An error the TC may give while etcd is away: it must say so.
fn clear(e: &Error) -> bool {
    let m = e.to_string();
    matches!(e, Error::Remote { .. } | Error::Poisoned(_)) && m.contains("etcd")
}

/// Load, then run transfers on 2 threads and audits on a third while
/// `outages` (up, down) happen to `server`; stop at the first error.
fn run(tc: &Tc, server: &mut EtcdServer, seed: u64, outages: &[(u64, u64)]) -> Seen {
    let ledger = ledger(tc);
    let accounts = ledger.accounts;
    let mut r = tc.runner().unwrap();
    while r.try_run(|tx| ledger.load(tx)).unwrap().is_err() {}
    drop(r);
    let stop = AtomicBool::new(false);
    let seen = Mutex::new(Seen::default());
    let failed = |e: Error, seen: &Mutex<Seen>, stop: &AtomicBool| {
        assert!(clear(&e), "an error that does not say etcd failed: {e:?}");
        seen.lock().unwrap().errors.push(e.to_string());
        stop.store(true, Ordering::Relaxed);
    };
    std::thread::scope(|s| {
        for thread in 0..2u64 {
            let (stop, seen, ledger) = (&stop, &seen, &ledger);
            s.spawn(move || {
                let mut r = tc.runner().unwrap();
                let mut rng = Rng::new(seed, 1 + thread);
                let mut pending = std::collections::VecDeque::new();
                for n in 0u64.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let id = thread << 32 | n;
                    let (a, b) = (
                        rng.below(ACCOUNTS as u64) as u32,
                        rng.below(ACCOUNTS as u64) as u32,
                    );
                    let amount = 1 + rng.below(50) as i64;
                    let done = r.try_run(|tx| ledger.transfer(tx, id, a, b, amount));
                    match done {
                        Ok(Ok(())) => pending.push_back((r.durable_token(), id)),
                        // The log is full while the proxy waits for etcd.
                        Ok(Err(AbortReason::Overloaded)) => {
                            std::thread::sleep(Duration::from_millis(1))
                        }
                        Ok(Err(_)) => {}
                        Err(e) => {
                            failed(e, seen, stop);
                            break;
                        }
                    }
                    let durable = tc.durable_epoch().expect("durable");
                    let mut g = seen.lock().unwrap();
                    g.committed += u64::from(matches!(done, Ok(Ok(()))));
                    while pending.front().is_some_and(|&(t, _)| t <= durable) {
                        g.acked.insert(pending.pop_front().unwrap().1);
                    }
                }
            });
        }
        let (stop, seen) = (&stop, &seen);
        s.spawn(move || {
            let mut r = tc.runner().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let total = r.try_run(|tx| {
                    let mut total = 0;
                    for a in 0..ACCOUNTS {
                        total += int(tx.get(accounts, &a.to_be_bytes())?.expect("loaded"));
                    }
                    Ok(total)
                });
                match total {
                    Ok(Ok(t)) => {
                        assert_eq!(
                            t,
                            i64::from(ACCOUNTS) * INITIAL,
                            "seed {seed}: a wrong read"
                        );
                        seen.lock().unwrap().audits += 1;
                        // Leave the transfers room (an audit holds off
                        // every older writer of the accounts).
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Ok(Err(_)) => std::thread::sleep(Duration::from_millis(1)),
                    Err(e) => {
                        failed(e, seen, stop);
                        break;
                    }
                }
            }
        });
        for &(up, down) in outages {
            std::thread::sleep(Duration::from_millis(up));
            server.kill();
            std::thread::sleep(Duration::from_millis(down));
            server.restart().unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
    });
    seen.into_inner().unwrap()
}

/// Reopen the TC on `dir` over `server`'s etcd and check what it holds
/// against what was acknowledged.
fn verify(dir: &Path, server: &EtcdServer, acked: &HashSet<u64>, seed: u64) {
    let tc = open(dir, server, 10_000);
    let ledger = ledger(&tc);
    let mut r = tc.runner().unwrap();
    let state = r
        .try_run(|tx| ledger.read(tx))
        .expect("verify")
        .expect("nothing else runs");
    assert!(
        state
            .receipts
            .iter()
            .all(|r| r.amount > 0 && r.amount <= 50),
        "seed {seed}: row values"
    );
    if let Err(e) = state.audit(&ledger, true, acked) {
        panic!("seed {seed}: {e}");
    }
    let rows = &state.receipts;
    eprintln!(
        "reopened: {} rows, all {} acknowledged present",
        rows.len(),
        acked.len()
    );
}

#[test]
fn a_tc_rides_out_kills_of_etcd_within_the_retry_budget() {
    let seed = seed("etcd a_tc_rides_out_kills_of_etcd_within_the_retry_budget");
    let mut rng = Rng::new(seed, 0);
    let mut server = common::server("tc-rides");
    let dir = common::temp_dir("tc-rides-log");
    let outages: Vec<(u64, u64)> = (0..3)
        .map(|_| (300 + rng.below(500), rng.below(800)))
        .collect();
    eprintln!("outages (up ms, down ms): {outages:?}");
    let tc = open(&dir, &server, 30_000);
    let seen = run(&tc, &mut server, seed, &outages);
    let report = tc.report();
    drop(tc);
    eprintln!(
        "{} committed, {} acknowledged, {} audits, errors {:?}; DC: {} reads, {} applied",
        seen.committed,
        seen.acked.len(),
        seen.audits,
        seen.errors,
        report.dc_reads,
        report.applied
    );
    assert!(
        seen.errors.is_empty(),
        "seed {seed}: the 30 s budget covers every outage"
    );
    assert!(
        seen.acked.len() > 100 && seen.audits > 0,
        "seed {seed}: ran"
    );
    assert!(
        report.dc_reads > 0 && report.applied > 0,
        "seed {seed}: the DC was used"
    );
    verify(&dir, &server, &seen.acked, seed);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_outage_past_the_budget_stops_the_tc_clearly_and_reopening_recovers() {
    let seed = seed("etcd an_outage_past_the_budget_stops_the_tc_clearly");
    let mut server = common::server("tc-stops");
    let dir = common::temp_dir("tc-stops-log");
    let tc = open(&dir, &server, 500);
    // Down for 2.5 s with a budget of 0.5 s.
    let seen = run(&tc, &mut server, seed, &[(500, 2500)]);
    drop(tc);
    eprintln!(
        "{} committed, {} acknowledged; errors: {:?}",
        seen.committed,
        seen.acked.len(),
        seen.errors
    );
    assert!(
        !seen.errors.is_empty(),
        "seed {seed}: the outage was noticed"
    );
    assert!(!seen.acked.is_empty(), "seed {seed}: ran");
    verify(&dir, &server, &seen.acked, seed);
    std::fs::remove_dir_all(&dir).unwrap();
}
