//! Silo's reclamation (§4.8–4.9): garbage freed after delete / re-insert
//! churn on the same keys, and bounded memory under 100% update churn with
//! snapshots on.

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

/// The conformance suite's delete / re-insert churn (readers, snapshot
/// readers, toggles that add up), and then Silo's part: every piece of
/// garbage it made (including deleted records unhooked from the tree) is
/// freed.
#[test]
fn delete_reinsert_churn_frees_all_garbage() {
    let db = common::fast_db();
    granary_conformance::churn::churn(&db);
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
