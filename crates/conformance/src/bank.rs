//! Bank transfers between accounts while auditors sum all balances, by a
//! serializable scan and by a snapshot read ([`TxRunner::snapshot_read`]):
//! every audit must see the constant total.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use granary_api::keys::Key;
use granary_api::{Engine, ReadOnly, TableOptions, Tx, TxError, TxRunner};

use crate::support::{dec, enc, run, seed, stress, Rng};

const ACCOUNTS: u64 = 64;
const INITIAL: u64 = 1000;

fn acct(i: u64) -> Vec<u8> {
    Key::new().u64(i).finish()
}

/// Two threads transfer at random while one audits by scanning (in
/// alternating directions) and one by snapshot reads (a scan and every
/// account's point read, which must agree). Each audit sees every account
/// and the total, except that a snapshot may predate the load (a design's
/// snapshots may trail the present, as Silo's do), and then sees nothing.
pub fn transfers_keep_total_under_scan_and_snapshot_audits<E: Engine>(make: impl Fn() -> E) {
    let seed = seed("bank");
    let db = make();
    let t = db
        .create_table_with("accounts", TableOptions::point_lookups())
        .unwrap();
    let mut w = db.runner().unwrap();
    run(&mut w, |tx| {
        for i in 0..ACCOUNTS {
            tx.insert(t, &acct(i), &enc(INITIAL))?;
        }
        Ok(())
    })
    .unwrap();
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
                let mut w = db.runner().unwrap();
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
                    run(&mut w, |tx| {
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
            let mut w = db.runner().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let reverse = audits.load(Ordering::Relaxed) % 2 == 1;
                let (sum, n) = run(&mut w, |tx| {
                    let (mut sum, mut n) = (0, 0);
                    tx.scan(
                        t,
                        Bound::Unbounded,
                        Bound::Unbounded,
                        usize::MAX,
                        reverse,
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
            let mut w = db.runner().unwrap();
            let mut loaded = false;
            while !stop.load(Ordering::Relaxed) {
                let (sum, n, points) = w
                    .snapshot_read(&mut |snap: &mut dyn ReadOnly| {
                        let (mut sum, mut n) = (0, 0);
                        snap.read_range(
                            t,
                            Bound::Unbounded,
                            Bound::Unbounded,
                            usize::MAX,
                            false,
                            &mut |_, v| {
                                sum += dec(v);
                                n += 1;
                                true
                            },
                        )?;
                        let mut points = 0;
                        for i in 0..ACCOUNTS {
                            points += snap.read(t, &acct(i))?.map_or(0, dec);
                        }
                        Ok((sum, n, points))
                    })
                    .unwrap();
                // Checked here, not in the body: a design without
                // snapshots runs it as a transaction, which may see an
                // inconsistent state before it fails validation.
                assert_eq!(points, sum, "snapshot point reads disagree with its scan");
                if n == 0 && !loaded {
                    continue; // a snapshot from before the load
                }
                loaded = true;
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
