//! The designs of granary-protocols under concurrency: money is conserved
//! and audits see the total; ordered 2PL never aborts conflict-free work;
//! no design deadlocks on crossing transfers; predicate write skew (G2)
//! never commits on a serializable design, and does on Snapshot Isolation.
//! Seeds print and replay with GRANARY_SEED=N.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use granary_api::{AbortReason, Declared, Engine, TableId, Tx, TxError, TxRunner};
use granary_protocols::hekaton::Hekaton;
use granary_protocols::si::Si;
use granary_protocols::two_pl::{TwoPl, Variant};

/// Runs `$f(name, db, args…)` on a fresh database of every runner design
/// (Partitioned-Store needs declared partitions; its own tests cover it).
macro_rules! each_design {
    ($f:ident $(, $arg:expr)*) => {{
        $f("2pl-ordered", TwoPl::new(Variant::Ordered) $(, $arg)*);
        $f("2pl-nowait", TwoPl::new(Variant::NoWait) $(, $arg)*);
        $f("hekaton", Hekaton::new() $(, $arg)*);
        $f("si", Si::new() $(, $arg)*);
    }};
}

const ACCOUNTS: u64 = 16;
const TOTAL: u64 = ACCOUNTS * 100;

fn seed() -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("seed {s} (replay with GRANARY_SEED={s})");
    s
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn num(v: Option<&[u8]>) -> u64 {
    v.map_or(0, |b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
}

fn load<E: Engine>(db: &E) -> TableId {
    let t = db.create_table("accounts").unwrap();
    let mut w = db.runner().unwrap();
    w.try_run(|tx| {
        for a in 0..ACCOUNTS {
            tx.insert(t, &a.to_be_bytes(), &100u64.to_be_bytes())?;
        }
        Ok(())
    })
    .unwrap()
    .unwrap();
    t
}

fn transfer(tx: &mut impl Tx, t: TableId, a: u64, b: u64, amt: u64) -> Result<(), TxError> {
    let x = num(tx.get(t, &a.to_be_bytes())?);
    if x < amt {
        return Ok(());
    }
    tx.put(t, &a.to_be_bytes(), &(x - amt).to_be_bytes())?;
    let y = num(tx.get(t, &b.to_be_bytes())?);
    tx.put(t, &b.to_be_bytes(), &(y + amt).to_be_bytes())
}

fn audit(tx: &mut impl Tx, t: TableId) -> Result<u64, TxError> {
    let mut sum = 0;
    tx.scan(
        t,
        Bound::Unbounded,
        Bound::Unbounded,
        usize::MAX,
        false,
        |_, v| {
            sum += num(Some(v));
            true
        },
    )?;
    Ok(sum)
}

#[test]
fn transfers_conserve_money_and_audits_see_the_total() {
    let s = seed();
    each_design!(bank, s);
}

fn bank<E: Engine>(name: &str, db: E, s: u64) {
    {
        let t = load(&db);
        // A thread can finish 3000 transfers inside one time slice on a
        // loaded 2-core machine, and then nothing overlaps. So the threads
        // start together and keep going until some conflict has happened
        // (or 10 s pass), so that the conservation check is not vacuous.
        let start = std::sync::Barrier::new(4);
        // Ordered 2PL waits rather than aborts, so it is not held to that.
        let conflicts = AtomicBool::new(name == "2pl-ordered");
        let deadline = Instant::now() + Duration::from_secs(10);
        let aborts: u64 = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4u64)
                .map(|i| {
                    let (db, start, conflicts) = (&db, &start, &conflicts);
                    sc.spawn(move || {
                        let mut w = db.runner().unwrap();
                        let mut r = s ^ (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                        let mut d = Declared::new();
                        let mut done = 0;
                        start.wait();
                        while done < 3000
                            || (!conflicts.load(Ordering::Relaxed) && Instant::now() < deadline)
                        {
                            if next(&mut r).is_multiple_of(10) {
                                let sum = loop {
                                    if let Ok(v) = w.try_run(|tx| audit(tx, t)).unwrap() {
                                        break v;
                                    }
                                };
                                assert_eq!(
                                    sum, TOTAL,
                                    "{name}: an audit saw money appear or vanish"
                                );
                                continue;
                            }
                            let a = next(&mut r) % ACCOUNTS;
                            let b = (a + 1 + next(&mut r) % (ACCOUNTS - 1)) % ACCOUNTS;
                            d.clear();
                            d.write(t, &a.to_be_bytes()).write(t, &b.to_be_bytes());
                            let r = w
                                .try_run_declared(&d, |tx| transfer(tx, t, a, b, 7))
                                .unwrap();
                            done += r.is_ok() as u32;
                            if w.stats().total_aborts() > 0 {
                                conflicts.store(true, Ordering::Relaxed);
                            }
                        }
                        w.stats().total_aborts()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let mut w = db.runner().unwrap();
        let sum = w.try_run(|tx| audit(tx, t)).unwrap().unwrap();
        assert_eq!(sum, TOTAL, "{name}");
        eprintln!("{name}: {aborts} aborts");
        if name != "2pl-ordered" {
            assert!(
                aborts > 0,
                "{name}: 4 threads on 16 accounts must have conflicted"
            );
        }
    }
}

/// Ordered 2PL waits instead of aborting: transfers that conflict with
/// each other (every one touches account 0) but declare their keys commit
/// without a single abort.
#[test]
fn ordered_commits_declared_work_without_aborts() {
    let s = seed();
    let db = TwoPl::new(Variant::Ordered);
    let t = load(&db);
    let aborts: u64 = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..3u64)
            .map(|i| {
                let db = &db;
                sc.spawn(move || {
                    let mut w = db.runner().unwrap();
                    let mut r = s ^ (i + 1);
                    let mut d = Declared::new();
                    for _ in 0..2000 {
                        let b = 1 + next(&mut r) % (ACCOUNTS - 1);
                        let (x, y) = if i.is_multiple_of(2) { (0, b) } else { (b, 0) };
                        d.clear();
                        d.write(t, &y.to_be_bytes()).write(t, &x.to_be_bytes());
                        w.try_run_declared(&d, |tx| transfer(tx, t, x, y, 1))
                            .unwrap()
                            .unwrap();
                    }
                    w.stats().total_aborts()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(aborts, 0);
}

/// Crossing transfers (a→b while b→a) cannot deadlock in either variant:
/// every thread finishes its work within a generous deadline.
#[test]
fn crossing_transfers_never_deadlock() {
    each_design!(crossing);
}

fn crossing<E: Engine>(name: &str, db: E) {
    {
        let t = load(&db);
        let done = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let watchdog = sc.spawn(|| {
                let start = Instant::now();
                while !done.load(Ordering::Relaxed) {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "{name} stalled: deadlock?"
                    );
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
            let hs: Vec<_> = (0..2u64)
                .map(|i| {
                    let db = &db;
                    sc.spawn(move || {
                        let mut w = db.runner().unwrap();
                        let mut d = Declared::new();
                        let (a, b): (u64, u64) = if i == 0 { (1, 2) } else { (2, 1) };
                        // Declared in opposite orders: ordered 2PL sorts.
                        d.write(t, &a.to_be_bytes()).write(t, &b.to_be_bytes());
                        let mut n = 0;
                        while n < 5000 {
                            match w
                                .try_run_declared(&d, |tx| transfer(tx, t, a, b, 1))
                                .unwrap()
                            {
                                Ok(()) => n += 1,
                                Err(r) => assert!(
                                    name != "2pl-ordered" || r == AbortReason::LockConflict,
                                    "{name}: {r:?}"
                                ),
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
            watchdog.join().unwrap();
        });
    }
}

/// Write skew through predicates (G2): in each round two transactions
/// each scan one range and insert into the other only if what they scanned
/// is empty. Serializably at most one range ends non-empty; without
/// phantom protection both transactions see empty ranges and both insert.
#[test]
fn scans_are_protected_against_phantoms() {
    each_design!(predicate_skew);
}

fn predicate_skew<E: Engine>(name: &str, db: E) {
    let rounds = 20_000u64;
    {
        let t = db.create_table("t").unwrap();
        let range = |round: u64, side: u64| {
            let lo = (round << 8 | side << 4).to_be_bytes();
            let hi = (round << 8 | (side + 1) << 4).to_be_bytes();
            (lo, hi)
        };
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|sc| {
            for side in 0..2u64 {
                let (db, barrier) = (&db, &barrier);
                sc.spawn(move || {
                    let mut w = db.runner().unwrap();
                    for round in 0..rounds {
                        barrier.wait();
                        let mut first = true;
                        loop {
                            let r = w
                                .try_run(|tx| {
                                    let (lo, hi) = range(round, side);
                                    let mut empty = true;
                                    tx.scan(
                                        t,
                                        Bound::Included(&lo),
                                        Bound::Excluded(&hi),
                                        1,
                                        false,
                                        |_, _| {
                                            empty = false;
                                            false
                                        },
                                    )?;
                                    // Under SI both transactions of a round
                                    // scan before either inserts, so that
                                    // the anomaly shows however the machine
                                    // schedules the threads (SI never waits
                                    // here, and these inserts never conflict).
                                    if name == "si" && std::mem::take(&mut first) {
                                        barrier.wait();
                                    }
                                    if empty {
                                        let (lo, _) = range(round, 1 - side);
                                        tx.insert(t, &lo, b"")?;
                                    }
                                    Ok(())
                                })
                                .unwrap();
                            if r.is_ok() {
                                break;
                            }
                        }
                    }
                });
            }
        });
        let mut w = db.runner().unwrap();
        let mut both = 0;
        for round in 0..rounds {
            let filled = w
                .try_run(|tx| {
                    let mut n = 0;
                    for side in 0..2 {
                        let (lo, hi) = range(round, side);
                        tx.scan(
                            t,
                            Bound::Included(&lo),
                            Bound::Excluded(&hi),
                            1,
                            false,
                            |_, _| {
                                n += 1;
                                false
                            },
                        )?;
                    }
                    Ok(n)
                })
                .unwrap()
                .unwrap();
            both += (filled == 2) as u32;
        }
        if name == "si" {
            // Snapshot isolation allows it, and every round is arranged to
            // show it.
            eprintln!("si: write skew in {both} of {rounds} rounds");
            assert_eq!(both, rounds as u32, "si must show predicate write skew");
        } else {
            assert_eq!(
                both, 0,
                "{name}: write skew through phantoms in {both} rounds"
            );
        }
    }
}

/// Scans (forward, reverse, bounded, limited, across many batches) return
/// what a model map holds, after inserts, deletes and rolled-back writes.
#[test]
fn scans_match_a_model() {
    let s = seed();
    each_design!(scan_model, s);
}

fn scan_model<E: Engine>(name: &str, db: E, s: u64) {
    use std::collections::BTreeMap;
    let t = db.create_table("t").unwrap();
    let mut w = db.runner().unwrap();
    let mut model = BTreeMap::new();
    let mut r = s | 1;
    for _ in 0..3000 {
        let k = (next(&mut r) % 400).to_be_bytes();
        let op = next(&mut r) % 4;
        let out = w.try_run(|tx| {
            match op {
                0 => {
                    tx.delete(t, &k)?;
                }
                1 => {
                    tx.put(t, &k, &k)?;
                    return Err(TxError::rollback());
                }
                _ => tx.put(t, &k, &k)?,
            }
            Ok(())
        });
        match (op, out) {
            (0, Ok(Ok(()))) => {
                model.remove(&k);
            }
            (1, Err(granary_api::Error::RolledBack)) => {}
            (_, Ok(Ok(()))) => {
                model.insert(k, k);
            }
            (op, o) => panic!("{name}: op {op}: {o:?}"),
        }
    }
    for _ in 0..300 {
        let (a, b) = (next(&mut r) % 420, next(&mut r) % 420);
        let (lo, hi) = (a.min(b).to_be_bytes(), a.max(b).to_be_bytes());
        let limit = [1, 5, 63, 64, 65, 200, usize::MAX][next(&mut r) as usize % 7];
        let reverse = next(&mut r).is_multiple_of(2);
        let mut got = Vec::new();
        w.try_run(|tx| {
            got.clear();
            tx.scan(
                t,
                Bound::Included(&lo[..]),
                Bound::Excluded(&hi[..]),
                limit,
                reverse,
                |k, _| {
                    got.push(k.to_vec());
                    true
                },
            )
        })
        .unwrap()
        .unwrap();
        let range = model.range(lo..hi).map(|(k, _)| k.to_vec());
        let want: Vec<Vec<u8>> = if reverse {
            range.rev().take(limit).collect()
        } else {
            range.take(limit).collect()
        };
        assert_eq!(
            got, want,
            "{name}: {lo:?}..{hi:?} limit {limit} reverse {reverse}"
        );
    }
}

/// Partitioned-Store: transfers inside one branch lock one partition,
/// across branches both (in sorted order, whichever way they are
/// declared); audits lock every partition. Money is conserved.
#[test]
fn partitioned_transfers_conserve_money() {
    use granary_api::PartitionRule;
    use granary_protocols::partitioned::Partitioned;
    fn rule(_: &str) -> Option<PartitionRule> {
        Some(PartitionRule::Field { shift: 0, bits: 8 })
    }
    let s = seed();
    let (branches, per) = (4u64, 8u64);
    let key = |b: u64, a: u64| [b as u8, a as u8];
    let db = Partitioned::new(branches as usize, rule).unwrap();
    let t = db.create_table("accounts").unwrap();
    let mut w = db.runner().unwrap();
    w.try_run(|tx| {
        for b in 0..branches {
            for a in 0..per {
                tx.insert(t, &key(b, a), &100u64.to_be_bytes())?;
            }
        }
        Ok(())
    })
    .unwrap()
    .unwrap();
    let audit = |tx: &mut granary_protocols::partitioned::Txn<'_>| {
        let mut sum = 0;
        for b in 0..branches {
            let (lo, hi) = ([b as u8], [b as u8 + 1]);
            tx.scan(
                t,
                Bound::Included(&lo[..]),
                Bound::Excluded(&hi[..]),
                usize::MAX,
                false,
                |_, v| {
                    sum += num(Some(v));
                    true
                },
            )?;
        }
        Ok(sum)
    };
    std::thread::scope(|sc| {
        for i in 0..3u64 {
            let db = &db;
            sc.spawn(move || {
                let mut w = db.runner().unwrap();
                let mut r = s ^ (i + 11);
                let mut d = Declared::new();
                for _ in 0..3000 {
                    if next(&mut r).is_multiple_of(20) {
                        let sum = w.try_run(audit).unwrap().unwrap();
                        assert_eq!(sum, branches * per * 100, "an audit saw money move");
                        continue;
                    }
                    let (b1, b2) = (next(&mut r) % branches, next(&mut r) % branches);
                    let (a1, a2) = (next(&mut r) % per, next(&mut r) % per);
                    d.clear();
                    d.partition(b1).partition(b2);
                    w.try_run_declared(&d, |tx| {
                        let x = num(tx.get(t, &key(b1, a1))?);
                        tx.put(t, &key(b1, a1), &(x - 1).to_be_bytes())?;
                        let y = num(tx.get(t, &key(b2, a2))?);
                        tx.put(t, &key(b2, a2), &(y + 1).to_be_bytes())
                    })
                    .unwrap()
                    .unwrap();
                }
                assert_eq!(w.stats().total_aborts(), 0, "nothing conflicts once locked");
            });
        }
    });
    assert_eq!(w.try_run(audit).unwrap().unwrap(), branches * per * 100);
}

/// Four threads increment one counter; every committed increment counts.
#[test]
fn no_update_is_lost() {
    each_design!(increments);
}

/// Returns how many increments were lost.
fn increments<E: Engine>(name: &str, db: E) -> u64 {
    let t = db.create_table("c").unwrap();
    let per = 3000u64;
    std::thread::scope(|sc| {
        for _ in 0..4 {
            let db = &db;
            sc.spawn(move || {
                let mut w = db.runner().unwrap();
                let mut done = 0;
                while done < per {
                    let r = w
                        .try_run(|tx| {
                            let c = num(tx.get(t, b"c")?);
                            // Give a racing writer room, on 2 cores.
                            std::hint::black_box((0..50).sum::<u64>());
                            tx.put(t, b"c", &(c + 1).to_be_bytes())
                        })
                        .unwrap();
                    done += r.is_ok() as u64;
                }
            });
        }
    });
    let mut w = db.runner().unwrap();
    let c = w.try_run(|tx| Ok(num(tx.get(t, b"c")?))).unwrap().unwrap();
    let lost = 4 * per - c;
    if !name.contains("mutant") {
        assert_eq!(lost, 0, "{name}: {lost} updates lost");
    }
    lost
}

/// The deliberately broken 2PL (reads release their locks at once) loses
/// updates, and the test above sees it: it is not a test that cannot fail.
#[cfg(feature = "mutant")]
#[test]
fn the_mutant_loses_updates() {
    // A loss needs a thread preempted between its read and its write;
    // on a loaded 2-core machine five runs were sometimes not enough
    // (CI failed once), so run until one loses, up to 60.
    let runs =
        (1..=60).find(|_| increments("2pl-mutant", TwoPl::new(Variant::MutantShortReads)) > 0);
    assert!(
        runs.is_some(),
        "short read locks never lost an update in 60 runs"
    );
    eprintln!("the mutant lost updates in run {}", runs.unwrap_or(0));
}

/// Interactive sessions interleave on one thread without waiting: 2PL
/// refuses a conflicting step (even ordered 2PL), MVCC reads the last
/// committed version; dropping a session rolls it back.
#[test]
fn sessions_never_wait() {
    use granary_api::{Interactive, InteractiveTx};
    fn go<E: Engine>(name: &str, db: E)
    where
        E::Runner: Interactive,
    {
        let t = db.create_table("t").unwrap();
        let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
        let mut s = a.begin().unwrap();
        s.put(t, b"x", b"1").unwrap();
        assert!(
            s.commit().unwrap().unwrap() > 0,
            "{name}: a write has a commit key"
        );
        let mut s1 = a.begin().unwrap();
        s1.put(t, b"x", b"2").unwrap();
        let mut s2 = b.begin().unwrap();
        match s2.get(t, b"x") {
            Ok(v) => {
                assert!(name == "hekaton" || name == "si", "{name} read past a lock");
                assert_eq!(v, Some(&b"1"[..]), "{name}: the committed version");
            }
            Err(TxError::Conflict(r)) => {
                assert!(name.starts_with("2pl"), "{name}: {r:?}");
                assert_eq!(r, AbortReason::LockConflict);
            }
            Err(e) => panic!("{name}: {e}"),
        }
        drop(s2);
        drop(s1); // rolled back
        let mut s3 = b.begin().unwrap();
        assert_eq!(s3.get(t, b"x").unwrap(), Some(&b"1"[..]), "{name}");
        s3.commit().unwrap().unwrap();
    }
    each_design!(go);
}
