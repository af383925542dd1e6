//! Classic anomalies under real concurrency: Silo Fig. 3 and write skew
//! must never commit on a serializable design; on every design, no
//! increment of a shared counter is lost.

use std::sync::Barrier;

use granary_api::{Engine, TableOptions, Tx, TxError, TxRunner};

use crate::support::{dec, enc, run, stress};

/// Silo Fig. 3: T1 reads x and writes y = x + 1; T2 reads y and writes
/// x = y + 1. Run concurrently from x = y = 0, the outcome x = y = 1 is not
/// serializable and must never happen (snapshot isolation allows it).
pub fn fig3_never_both_one<E: Engine>(make: impl Fn() -> E) {
    let db = make();
    let t = db
        .create_table_with("t", TableOptions::point_lookups())
        .unwrap();
    let rounds = 2000 * stress();
    let barrier = Barrier::new(3);
    let mut outcomes = std::collections::BTreeMap::new();
    std::thread::scope(|s| {
        let hs: Vec<_> = [(b"x", b"y"), (b"y", b"x")]
            .into_iter()
            .map(|(from, to)| {
                let db = &db;
                let barrier = &barrier;
                s.spawn(move || {
                    let mut w = db.runner().unwrap();
                    for _ in 0..rounds {
                        barrier.wait();
                        run(&mut w, |tx| {
                            let v = tx.get(t, from)?.map_or(0, dec);
                            tx.put(t, to, &enc(v + 1))
                        })
                        .unwrap();
                        barrier.wait();
                        barrier.wait(); // main thread checks and resets here
                    }
                })
            })
            .collect();
        let mut w = db.runner().unwrap();
        for _ in 0..rounds {
            barrier.wait();
            barrier.wait();
            let (x, y) = run(&mut w, |tx| {
                let x = tx.get(t, b"x")?.map_or(0, dec);
                let y = tx.get(t, b"y")?.map_or(0, dec);
                tx.put(t, b"x", &enc(0))?;
                tx.put(t, b"y", &enc(0))?;
                Ok::<_, TxError>((x, y))
            })
            .unwrap();
            assert_ne!((x, y), (1, 1), "Fig. 3 anomaly: x = y = 1");
            *outcomes.entry((x, y)).or_insert(0) += 1;
            barrier.wait();
        }
        for h in hs {
            h.join().unwrap();
        }
    });
    eprintln!("fig3 outcomes: {outcomes:?}");
}

/// Write skew: two doctors on call; each goes off call if the other is
/// still on. Both going off must never commit (snapshot isolation allows
/// it).
pub fn write_skew_never_commits<E: Engine>(make: impl Fn() -> E) {
    let db = make();
    let t = db
        .create_table_with("oncall", TableOptions::point_lookups())
        .unwrap();
    let rounds = 2000 * stress();
    let barrier = Barrier::new(3);
    std::thread::scope(|s| {
        for (me, other) in [(b"alice", b"bob__"), (b"bob__", b"alice")] {
            let (db, barrier) = (&db, &barrier);
            s.spawn(move || {
                let mut w = db.runner().unwrap();
                for _ in 0..rounds {
                    barrier.wait();
                    run(&mut w, |tx| {
                        let other_on = tx.get(t, other)?.is_some_and(|v| v == b"on");
                        if other_on {
                            tx.put(t, me, b"off")?;
                        }
                        Ok(())
                    })
                    .unwrap();
                    barrier.wait();
                }
            });
        }
        let mut w = db.runner().unwrap();
        for _ in 0..rounds {
            run(&mut w, |tx| {
                tx.put(t, b"alice", b"on")?;
                tx.put(t, b"bob__", b"on")
            })
            .unwrap();
            barrier.wait();
            barrier.wait();
            let on = run(&mut w, |tx| {
                let a = tx.get(t, b"alice")?.is_some_and(|v| v == b"on");
                let b = tx.get(t, b"bob__")?.is_some_and(|v| v == b"on");
                Ok::<_, TxError>(a as u32 + b as u32)
            })
            .unwrap();
            assert!(on >= 1, "write skew: both doctors went off call");
        }
    });
}

/// N threads × M increments of one counter: the final value equals the
/// number of committed increments (no lost update, at any level). Half
/// the threads read then write; the others change the value in place,
/// through [`Tx::update`] or [`Tx::update_field`].
pub fn counter_increments_add_up<E: Engine>(make: impl Fn() -> E) {
    let db = make();
    let t = db
        .create_table_with("c", TableOptions::point_lookups())
        .unwrap();
    let (threads, m) = (4u64, 5000 * stress());
    let aborts: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let db = &db;
                s.spawn(move || {
                    let mut w = db.runner().unwrap();
                    for _ in 0..m {
                        run(&mut w, |tx| {
                            let bump = |v: &mut [u8]| v.copy_from_slice(&enc(dec(v) + 1));
                            if i % 4 == 1 && tx.update(t, b"n", bump)?.is_some() {
                                return Ok(());
                            }
                            if i % 4 == 3 && tx.update_field(t, b"n", 0..8, bump)?.is_some() {
                                return Ok(());
                            }
                            let v = tx.get(t, b"n")?.map_or(0, dec);
                            tx.put(t, b"n", &enc(v + 1))
                        })
                        .unwrap();
                    }
                    assert_eq!(w.stats().commits, m);
                    w.stats().total_aborts()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let mut w = db.runner().unwrap();
    let n = run(&mut w, |tx| Ok(tx.get(t, b"n")?.map_or(0, dec))).unwrap();
    assert_eq!(n, threads * m);
    eprintln!("counter: {n} increments, {aborts} aborts");
}

/// Threads bump two counters in one 1,000-byte value: one thread the
/// first through [`Tx::update_field`], one the second, one both through a
/// whole-value [`Tx::update`]. No increment is lost, and the bytes no one
/// writes keep their pattern: a field's write neither tears nor
/// overwrites the rest of the value, and a whole-value write does not
/// lose a field's.
pub fn field_updates_keep_the_rest<E: Engine>(make: impl Fn() -> E) {
    let db = make();
    let t = db
        .create_table_with("f", TableOptions::point_lookups())
        .unwrap();
    let pattern = |i: usize| (i * 7 + 3) as u8;
    let mut init: Vec<u8> = (0..1000).map(pattern).collect();
    init[..16].fill(0);
    let mut w = db.runner().unwrap();
    run(&mut w, |tx| tx.put(t, b"r", &init)).unwrap();
    let m = 3000 * stress();
    std::thread::scope(|s| {
        for i in 0..3usize {
            let db = &db;
            s.spawn(move || {
                let mut w = db.runner().unwrap();
                let bump = |v: &mut [u8]| v.copy_from_slice(&enc(dec(v) + 1));
                for _ in 0..m {
                    run(&mut w, |tx| {
                        let found = match i {
                            0 => tx.update_field(t, b"r", 0..8, bump)?,
                            1 => tx.update_field(t, b"r", 8..16, bump)?,
                            _ => tx.update(t, b"r", |v| {
                                bump(&mut v[..8]);
                                bump(&mut v[8..16]);
                            })?,
                        };
                        assert!(found.is_some(), "the record is there");
                        Ok(())
                    })
                    .unwrap();
                }
            });
        }
    });
    let v = run(&mut w, |tx| Ok(tx.get(t, b"r")?.map(<[u8]>::to_vec))).unwrap();
    let v = v.expect("the record is there");
    assert_eq!(v.len(), 1000);
    assert_eq!((dec(&v[..8]), dec(&v[8..16])), (2 * m, 2 * m));
    for (i, &b) in v.iter().enumerate().skip(16) {
        assert_eq!(b, pattern(i), "byte {i}, which no one wrote");
    }
}
