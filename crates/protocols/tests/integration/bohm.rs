//! BOHM runs the workloads' procedures through its pipeline (sequencer,
//! CC threads, execution threads) and their books balance: YCSB's value
//! counters add up to the read-modify-writes that committed, SmallBank's
//! money is conserved, on contended keys, with every thread arrangement
//! this machine can run; the batch watermark keeps chains short (a unit
//! test in `src/bohm/tests.rs`); a long reader holds up no writer; snapshot reads
//! see a growing consistent prefix; TPC-C's stale predictions are
//! resubmitted and commit.

use std::time::{Duration, Instant};

use granary_api::{Body, Done, Engine, Procedure, Stamp, TableId, Tx, TxError, TxRunner};
use granary_protocols::bohm::{Bohm, Config};
use granary_workloads::driver::{run, DriverConfig, Workload};
use granary_workloads::smallbank::{SmallBank, SmallBankConfig};
use granary_workloads::ycsb::{WriteKind, Ycsb, YcsbConfig};

/// The tests here run one at a time: each starts BOHM's threads and
/// clients, and run together on 2 cores they starve one another (the
/// long-reader test, which counts the writers that finish while an audit
/// runs, failed that way once).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

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
        let r = run(&w, &db, &driver(s), &|_, _, _| {}).unwrap();
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
    let _serial = serial();
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
    let _serial = serial();
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

/// Moves `amount` from account `from` to account `to`.
struct Transfer {
    t: TableId,
    from: u64,
    to: u64,
    amount: u64,
}

fn balance(v: Option<&[u8]>) -> u64 {
    v.map_or(0, |v| {
        u64::from_be_bytes(v[..8].try_into().expect("8 bytes"))
    })
}

impl Transfer {
    /// A declared transfer of 1–10 between two different accounts of
    /// `0..accounts`, drawn from `rng` (xorshift).
    fn random(t: TableId, rng: &mut u64, accounts: u64) -> Box<Procedure<Transfer>> {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let from = *rng % accounts;
        let to = (from + 1 + (*rng >> 20) % (accounts - 1)) % accounts;
        let mut p = Procedure::new(
            0,
            Transfer {
                t,
                from,
                to,
                amount: 1 + (*rng >> 40) % 10,
            },
        );
        p.declared.write(t, &from.to_be_bytes());
        p.declared.write(t, &to.to_be_bytes());
        p.planned = true;
        p
    }

    /// Adds one to `counter` (a transfer of nothing onto itself).
    fn count(t: TableId, counter: u64) -> Transfer {
        Transfer {
            t,
            from: counter,
            to: counter,
            amount: 0,
        }
    }
}

impl Body for Transfer {
    type Output = ();

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<(), TxError> {
        if self.from == self.to {
            let k = self.from.to_be_bytes();
            let n = balance(tx.get(self.t, &k)?);
            return tx.put(self.t, &k, &(n + 1).to_be_bytes());
        }
        let a = balance(tx.get(self.t, &self.from.to_be_bytes())?);
        if a < self.amount {
            return Err(TxError::rollback());
        }
        let b = balance(tx.get(self.t, &self.to.to_be_bytes())?);
        tx.put(
            self.t,
            &self.from.to_be_bytes(),
            &(a - self.amount).to_be_bytes(),
        )?;
        tx.put(
            self.t,
            &self.to.to_be_bytes(),
            &(b + self.amount).to_be_bytes(),
        )?;
        Ok(())
    }
}

/// Sums every account, then works on for `linger` (a long reader).
struct Audit {
    t: TableId,
    accounts: u64,
    linger: Duration,
}

impl Body for Audit {
    type Output = u64;

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<u64, TxError> {
        let mut sum = 0;
        for a in 0..self.accounts {
            sum += balance(tx.get(self.t, &a.to_be_bytes())?);
        }
        std::thread::sleep(self.linger);
        Ok(sum)
    }
}

/// bohm-vldb15 §3.3: a long read-only transaction neither blocks nor
/// aborts the writers that come after it. While an audit of every
/// account is running (it lingers 300 ms after its reads), transfers
/// submitted after it complete — on the other execution thread, which
/// evaluates any of their inputs the audit's thread has not reached —
/// and every audit sees the same total and commits. Whichever thread
/// runs the audit (its owner, or the other one in its pass over the
/// owner's share), the other goes on: a thread does not wait for a
/// procedure of its share that another thread is running (it stays
/// pending, holding the thread's watermark below its batch).
#[test]
fn long_readers_never_block_or_abort_writers() {
    let _serial = serial();
    let s = seed();
    // Separate CC threads: a thread that also plans (`both`) would hold
    // up its partition's planning while it runs the long reader.
    let db = Bohm::new(Config {
        cc_threads: 1,
        exec_threads: 2,
        batch: 64,
        ..Config::default()
    })
    .unwrap();
    let t = db.create_table("accounts").unwrap();
    const ACCOUNTS: u64 = 2_000;
    db.runner()
        .unwrap()
        .try_run(|tx| {
            for a in 0..ACCOUNTS {
                tx.put(t, &a.to_be_bytes(), &100u64.to_be_bytes())?;
            }
            Ok(())
        })
        .unwrap()
        .unwrap();
    let audit_window = std::sync::Mutex::new(None::<(Stamp, Stamp)>);
    let writes_done = std::sync::Mutex::new(Vec::<(Stamp, Stamp)>::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut w = db.runner().unwrap();
            let mut rng = s | 1;
            let mut done: Vec<Done<Transfer>> = Vec::new();
            let mut in_flight = 0;
            let mut times = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut p = Transfer::random(t, &mut rng, ACCOUNTS);
                p.submitted = Some(Stamp::now());
                w.submit(p).unwrap();
                in_flight += 1;
                w.poll(in_flight >= 32, &mut done).unwrap();
                for d in done.drain(..) {
                    in_flight -= 1;
                    assert!(d.outcome.is_ok(), "a transfer failed");
                    times.push((d.procedure.submitted.unwrap(), Stamp::now()));
                }
            }
            while in_flight > 0 {
                w.poll(true, &mut done).unwrap();
                in_flight -= done.len();
                done.clear();
            }
            *writes_done.lock().unwrap() = times;
        });
        let mut r = db.runner().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        for round in 0..3 {
            let mut p = Procedure::new(
                0,
                Audit {
                    t,
                    accounts: ACCOUNTS,
                    linger: Duration::from_millis(300),
                },
            );
            for a in 0..ACCOUNTS {
                p.declared.read(t, &a.to_be_bytes());
            }
            p.planned = true;
            let start = Stamp::now();
            r.submit(p).unwrap();
            let mut done: Vec<Done<Audit>> = Vec::new();
            r.poll(true, &mut done).unwrap();
            let end = Stamp::now();
            let sum = done.pop().unwrap().outcome.unwrap();
            assert_eq!(sum, Some(100 * ACCOUNTS), "audit {round} (seed {s})");
            if round == 0 {
                *audit_window.lock().unwrap() = Some((start, end));
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let (start, end) = audit_window.into_inner().unwrap().unwrap();
    let during = writes_done
        .into_inner()
        .unwrap()
        .iter()
        .filter(|&&(sub, fin)| sub > start && fin < end)
        .count();
    eprintln!("{during} transfers submitted after the first audit completed before it");
    assert!(
        during >= 100,
        "seed {s}: only {during} transfers submitted after a long reader completed before it"
    );
}

/// Snapshot reads (what reconnaissance reads): while transfers run
/// through the pipeline, each snapshot sums every account to the total
/// (a consistent prefix of the log, never a half-applied transfer), a
/// later snapshot never sees fewer transfers than an earlier one, and the
/// snapshots move forward. With a small batch, garbage is cut under the
/// readers all along: a version cut while a snapshot read it would show
/// as a wrong sum (or a crash under the sanitizer-free build's reuse).
#[test]
// Test-only `mutant` builds give the config one more field.
#[allow(clippy::needless_update)]
fn snapshot_reads_see_a_consistent_growing_prefix() {
    let _serial = serial();
    let s = seed();
    for (m, n, batch, both) in [(1, 1, 8, false), (2, 2, 4, true)] {
        let db = Bohm::new(Config {
            cc_threads: m,
            exec_threads: n,
            batch,
            both,
            ..Config::default()
        })
        .unwrap();
        let t = db.create_table("accounts").unwrap();
        const ACCOUNTS: u64 = 16;
        // The last key counts the transfers.
        const COUNTER: u64 = ACCOUNTS;
        db.runner()
            .unwrap()
            .try_run(|tx| {
                for a in 0..ACCOUNTS {
                    tx.put(t, &a.to_be_bytes(), &100u64.to_be_bytes())?;
                }
                tx.put(t, &COUNTER.to_be_bytes(), &0u64.to_be_bytes())
            })
            .unwrap()
            .unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                let mut w = db.runner().unwrap();
                let mut rng = s | 1;
                let mut done: Vec<Done<Transfer>> = Vec::new();
                let mut in_flight = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    w.submit(Transfer::random(t, &mut rng, ACCOUNTS)).unwrap();
                    let mut c = Procedure::new(0, Transfer::count(t, COUNTER));
                    c.declared.write(t, &COUNTER.to_be_bytes());
                    c.planned = true;
                    w.submit(c).unwrap();
                    in_flight += 2;
                    w.poll(in_flight >= 32, &mut done).unwrap();
                    in_flight -= done.len();
                    done.clear();
                }
                while in_flight > 0 {
                    w.poll(true, &mut done).unwrap();
                    in_flight -= done.len();
                    done.clear();
                }
            });
            // Stop the writer however this thread ends (a failed
            // assertion must fail the test, not hang it).
            struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            let _stop = StopOnDrop(&stop);
            let mut r = db.runner().unwrap();
            let mut last = 0;
            let mut moved = 0;
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(300) {
                let (sum, count) = r
                    .snapshot_read(&mut |tx| {
                        let mut sum = 0;
                        for a in 0..ACCOUNTS {
                            sum += balance(tx.read(t, &a.to_be_bytes())?);
                        }
                        let mut n = 0;
                        tx.read_range(
                            t,
                            std::ops::Bound::Unbounded,
                            std::ops::Bound::Unbounded,
                            usize::MAX,
                            false,
                            &mut |_, _| {
                                n += 1;
                                true
                            },
                        )?;
                        assert_eq!(n, ACCOUNTS + 1, "a scan sees every key once");
                        Ok((sum, balance(tx.read(t, &COUNTER.to_be_bytes())?)))
                    })
                    .unwrap();
                assert_eq!(sum, 100 * ACCOUNTS, "m={m} n={n} (seed {s})");
                assert!(
                    count >= last,
                    "m={m} n={n}: {count} after {last} (seed {s})"
                );
                moved += (count > last) as u32;
                last = count;
            }
            assert!(moved > 10, "m={m} n={n}: snapshots moved {moved} times");
            eprintln!("m={m} n={n}: {moved} snapshots moved forward, {last} transfers seen");
        });
    }
}

/// Reconnaissance (bohm-vldb15 §3, Calvin's OLLP): TPC-C's new-order
/// takes its order id from the district, and delivery the oldest new
/// order; their write sets are predicted on a snapshot. Two clients share
/// one warehouse, so each one's predictions go stale as the other's
/// orders land first: the stale runs write nothing, are predicted again
/// and resubmitted, and commit; TPC-C's consistency conditions (clause
/// 3.3.2: order ids, new-order rows, order lines, balances) hold after.
/// With a warehouse per client, no order id goes stale.
#[test]
// Test-only `mutant` builds give the config one more field.
#[allow(clippy::needless_update)]
fn tpcc_stale_predictions_are_resubmitted_and_commit() {
    let _serial = serial();
    use granary_workloads::tpcc::{Tpcc, TpccConfig};
    let s = seed();
    for (warehouses, (m, n, batch, both)) in [
        (1, (1, 1, 64, false)),
        (1, (2, 2, 16, true)),
        (2, (1, 1, 64, false)),
    ] {
        let db = Bohm::new(Config {
            cc_threads: m,
            exec_threads: n,
            batch,
            both,
            ..Config::default()
        })
        .unwrap();
        let mut cfg = TpccConfig::new(warehouses);
        cfg.scale_down = 30;
        let mut w = Tpcc::new(cfg).unwrap();
        w.load(&db, &|_, _| {}).unwrap();
        let r = run(&w, &db, &driver(s), &|_, _, _| {}).unwrap();
        let at =
            format!("warehouses={warehouses} m={m} n={n} batch={batch} both={both} (seed {s})");
        assert!(
            r.invariant_violations.is_empty(),
            "{at}: {:?}",
            r.invariant_violations
        );
        let stale: u64 = r
            .types
            .iter()
            .map(|t| t.aborts.get("stale_plan").copied().unwrap_or(0))
            .sum();
        let new_orders = r.types[0].commits;
        let by_type: Vec<_> = r
            .types
            .iter()
            .map(|t| (t.name, t.aborts.get("stale_plan").copied().unwrap_or(0)))
            .collect();
        eprintln!(
            "{at}: {} commits ({new_orders} new orders), stale plans {by_type:?}",
            r.commits
        );
        assert!(new_orders > 100, "{at}: {new_orders} new orders committed");
        match warehouses {
            1 => assert!(stale > 0, "{at}: no prediction went stale"),
            // A client alone in its warehouse predicts its order ids
            // exactly. (A delivery can still go stale: when a district's
            // undelivered orders in the snapshot run out, the client's
            // own new orders in flight land before the delivery runs.)
            _ => assert_eq!(by_type[0].1, 0, "{at}: a client's own order ids went stale"),
        }
    }
}
