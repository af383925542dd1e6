//! Bank transfers between accounts while auditors sum all balances, by a
//! serializable scan and by a snapshot transaction: every audit must see
//! the constant total.

mod common;

use common::*;
use granary::{keys::Key, TxError};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ACCOUNTS: u64 = 64;
const INITIAL: u64 = 1000;

fn acct(i: u64) -> Vec<u8> {
    Key::new().u64(i).finish()
}

#[test]
fn transfers_keep_total_under_scan_and_snapshot_audits() {
    let seed = seed("bank");
    let db = common::fast_db();
    let t = db.create_table("accounts").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for i in 0..ACCOUNTS {
            tx.insert(t, &acct(i), &enc(INITIAL))?;
        }
        Ok(())
    })
    .unwrap();
    db.wait_for_snapshot();
    let total = ACCOUNTS * INITIAL;
    let stop = AtomicBool::new(false);
    let transfers = AtomicU64::new(0);
    let audits = AtomicU64::new(0);
    let snap_audits = AtomicU64::new(0);
    std::thread::scope(|s| {
        for th in 0..2u64 {
            let (db, stop, transfers, audits, snap_audits) =
                (&db, &stop, &transfers, &audits, &snap_audits);
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = Rng::new(seed, th);
                let n = 20_000 * stress();
                let start = std::time::Instant::now();
                let mut i = 0;
                // Run until both kinds of audit have overlapped many transfers.
                while i < n
                    || (audits.load(Ordering::Relaxed) < 200 * stress()
                        || snap_audits.load(Ordering::Relaxed) < 50 * stress())
                        && start.elapsed().as_secs() < 30
                {
                    i += 1;
                    let (a, b) = (rng.below(ACCOUNTS), rng.below(ACCOUNTS));
                    let amt = rng.below(50);
                    w.run(|tx| {
                        let va = dec(tx.get(t, &acct(a))?.expect("account"));
                        if va < amt || a == b {
                            return Ok(());
                        }
                        let vb = dec(tx.get(t, &acct(b))?.expect("account"));
                        tx.put(t, &acct(a), &enc(va - amt))?;
                        tx.put(t, &acct(b), &enc(vb + amt))
                    })
                    .unwrap();
                    transfers.fetch_add(1, Ordering::Relaxed);
                }
                stop.store(true, Ordering::Relaxed);
            });
        }
        let (db, stop, audits) = (&db, &stop, &audits);
        s.spawn(move || {
            let mut w = db.worker().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let (sum, n) = w
                    .run(|tx| {
                        let (mut sum, mut n) = (0, 0);
                        tx.scan(
                            t,
                            Bound::Unbounded,
                            Bound::Unbounded,
                            usize::MAX,
                            n % 2 == 1,
                            |_, v| {
                                sum += dec(v);
                                n += 1;
                                true
                            },
                        )?;
                        Ok::<_, TxError>((sum, n))
                    })
                    .unwrap();
                assert_eq!(
                    (sum, n),
                    (total, ACCOUNTS),
                    "serializable audit saw a partial transfer"
                );
                audits.fetch_add(1, Ordering::Relaxed);
            }
        });
        let snap_audits = &snap_audits;
        s.spawn(move || {
            let mut w = db.worker().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let (sum, n) = w
                    .snapshot(|snap| {
                        let (mut sum, mut n) = (0, 0);
                        snap.scan(
                            t,
                            Bound::Unbounded,
                            Bound::Unbounded,
                            usize::MAX,
                            false,
                            |_, v| {
                                sum += dec(v);
                                n += 1;
                                true
                            },
                        )?;
                        // Point reads agree with the scan.
                        let p: u64 = (0..ACCOUNTS)
                            .map(|i| snap.get(t, &acct(i)).unwrap().map_or(0, dec))
                            .sum();
                        assert_eq!(p, sum, "snapshot point reads disagree with its scan");
                        Ok((sum, n))
                    })
                    .unwrap();
                assert_eq!(
                    (sum, n),
                    (total, ACCOUNTS),
                    "snapshot audit saw a partial transfer"
                );
                snap_audits.fetch_add(1, Ordering::Relaxed);
            }
        });
    });
    eprintln!(
        "bank: {} transfers, {} scan audits, {} snapshot audits",
        transfers.load(Ordering::Relaxed),
        audits.load(Ordering::Relaxed),
        snap_audits.load(Ordering::Relaxed)
    );
    assert!(audits.load(Ordering::Relaxed) > 0 && snap_audits.load(Ordering::Relaxed) > 0);
}
