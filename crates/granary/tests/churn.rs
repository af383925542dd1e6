//! Delete / re-insert churn on the same keys, and bounded memory under
//! 100% update churn with snapshots on (Silo §4.8–4.9 reclamation).

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Workers delete and re-insert a small key set while readers check that
/// each key is either absent or holds a well-formed value; at the end the
/// table matches the per-key last committed operation, and every piece of
/// garbage (including deleted records unhooked from the tree) is freed.
#[test]
fn delete_reinsert_churn() {
    let seed = seed("churn");
    let db = common::fast_db();
    let t = db.create_table("t").unwrap();
    let keys = 16u64;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for th in 0..2u64 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = Rng::new(seed, th);
                for _ in 0..20_000 * stress() {
                    let k = enc(rng.below(keys));
                    let big = rng.below(4) == 0;
                    w.run(|tx| {
                        if tx.get(t, &k)?.is_some() {
                            tx.delete(t, &k)?;
                        } else {
                            // Sometimes a value bigger than the record's room,
                            // forcing a new record in the tree (§4.5).
                            let v = if big { vec![7u8; 300] } else { vec![7u8; 8] };
                            tx.insert(t, &k, &v)?;
                        }
                        Ok(())
                    })
                    .unwrap();
                }
                stop.store(true, Ordering::Relaxed);
            });
        }
        let (db, stop) = (&db, &stop);
        s.spawn(move || {
            let mut w = db.worker().unwrap();
            while !stop.load(Ordering::Relaxed) {
                w.run(|tx| {
                    for k in 0..keys {
                        if let Some(v) = tx.get(t, &enc(k))? {
                            assert!(v.iter().all(|&b| b == 7) && (v.len() == 8 || v.len() == 300));
                        }
                    }
                    Ok(())
                })
                .unwrap();
                let _ = w.snapshot(|s| {
                    for k in 0..keys {
                        if let Some(v) = s.get(t, &enc(k))? {
                            assert!(v.iter().all(|&b| b == 7) && (v.len() == 8 || v.len() == 300));
                        }
                    }
                    Ok(())
                });
            }
        });
    });
    // Let the epochs pass and the survivor reclaim everything the dropped
    // workers left behind.
    let mut w = db.worker().unwrap();
    let start = Instant::now();
    loop {
        w.run(|_| Ok(())).unwrap();
        if w.pending_garbage() == 0 || start.elapsed() > Duration::from_secs(20) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(w.pending_garbage(), 0, "garbage was never reclaimed");
}

/// 100% updates with snapshots on: old versions are kept only across
/// snapshot-epoch boundaries and reclaimed after; resident memory must
/// plateau.
#[test]
fn memory_plateaus_under_update_churn() {
    let seed = seed("memory");
    let db = common::fast_db();
    let t = db.create_table("t").unwrap();
    let keys = 20_000u64;
    let mut w = db.worker().unwrap();
    for chunk in 0..keys / 1000 {
        w.run(|tx| {
            for k in chunk * 1000..(chunk + 1) * 1000 {
                tx.insert(t, &enc(k), &[0u8; 100])?;
            }
            Ok(())
        })
        .unwrap();
    }
    let stop = AtomicBool::new(false);
    let mut samples = Vec::new();
    std::thread::scope(|s| {
        for th in 0..2u64 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = Rng::new(seed, th);
                while !stop.load(Ordering::Relaxed) {
                    let k = enc(rng.below(keys));
                    let v = [rng.next() as u8; 100];
                    w.run(|tx| {
                        tx.get(t, &k)?;
                        tx.put(t, &k, &v)
                    })
                    .unwrap();
                }
                assert!(w.pending_garbage() < 1_000_000, "garbage list unbounded");
            });
        }
        // A snapshot reader keeps old versions relevant.
        let (db, stop) = (&db, &stop);
        s.spawn(move || {
            let mut w = db.worker().unwrap();
            while !stop.load(Ordering::Relaxed) {
                w.snapshot(|s| {
                    let mut n = 0;
                    s.scan(
                        t,
                        std::ops::Bound::Unbounded,
                        std::ops::Bound::Unbounded,
                        1000,
                        false,
                        |_, _| {
                            n += 1;
                            true
                        },
                    )?;
                    Ok::<_, granary::Error>(n)
                })
                .unwrap();
            }
        });
        let secs = 2 + stress();
        for i in 0..secs * 4 {
            std::thread::sleep(Duration::from_millis(250));
            if i >= 2 {
                samples.push(rss_bytes());
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    let first = samples[0] as f64;
    let max = *samples.iter().max().unwrap() as f64;
    eprintln!(
        "memory: rss samples (MiB) {:?}",
        samples.iter().map(|b| b >> 20).collect::<Vec<_>>()
    );
    assert!(
        max <= first * 1.5 + 16.0 * 1048576.0,
        "RSS grew from {first} to {max}: versions are not reclaimed"
    );
}
