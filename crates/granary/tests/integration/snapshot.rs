//! Snapshot semantics at epoch boundaries, and the on-demand version window
//! switching on and off under load.

use crate::common::*;
use granary::{Database, Options, TxError};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

fn manual_db() -> Database {
    // The epoch thread effectively never ticks; the test drives epochs.
    Database::new(
        Options::default()
            .epoch_interval(Duration::from_secs(3600))
            .snapshot_versions_idle_epochs(None),
    )
    .unwrap()
}

fn tick_to(db: &Database, e: u64) {
    while db.epoch() < e {
        db.tick_epoch_for_tests();
    }
}

/// A snapshot at se shows exactly the epochs before se. A version written
/// in epoch se itself and overwritten later in the same snapshot period
/// must not leak into snapshot se (nor be needed by it).
#[test]
fn snapshot_boundary_epochs() {
    let db = manual_db();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    tick_to(&db, 49);
    w.run(|tx| tx.put(t, b"y", b"49")).unwrap();
    tick_to(&db, 50);
    // One transaction in epoch 50 writes x and z ...
    w.run(|tx| {
        tx.put(t, b"x", b"50")?;
        tx.put(t, b"z", b"50")
    })
    .unwrap();
    tick_to(&db, 52);
    // ... and x alone is overwritten later in the same snapshot period.
    w.run(|tx| tx.put(t, b"x", b"52")).unwrap();
    w.run(|tx| tx.put(t, b"y", b"52")).unwrap();
    tick_to(&db, 76); // SE = snap(76 - 25) = 50
    assert_eq!(db.snapshot_epoch(), 50);
    let got = |k: &'static [u8]| {
        move |s: &mut granary::Snapshot<'_>| Ok(s.get(t, k)?.map(|v| v.to_vec()))
    };
    let x = w.snapshot(got(b"x")).unwrap();
    let y = w.snapshot(got(b"y")).unwrap();
    let z = w.snapshot(got(b"z")).unwrap();
    // Snapshot 50 must show the epoch-50 transaction entirely or not at
    // all (it shows epochs < 50: not at all).
    assert_eq!(
        (x.as_deref(), z.as_deref()),
        (None, None),
        "partial transaction in a snapshot"
    );
    assert_eq!(
        y.as_deref(),
        Some(&b"49"[..]),
        "y's epoch-49 version is in snapshot 50"
    );
    tick_to(&db, 101); // SE = 75
    let x = w
        .snapshot(|s| Ok(s.get(t, b"x")?.map(|v| v.to_vec())))
        .unwrap();
    assert_eq!(x.as_deref(), Some(&b"52"[..]));
}

/// A field update (`Tx::update_field`) that crosses a snapshot epoch
/// stores its bytes in place, after keeping the whole old version for
/// snapshots: a snapshot before it sees the old value entire, the present
/// sees the new bytes over the rest.
#[test]
fn a_field_update_keeps_the_old_version_for_snapshots() {
    let db = manual_db();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    let old: Vec<u8> = (0..100u8).collect();
    tick_to(&db, 49);
    w.run(|tx| tx.put(t, b"x", &old)).unwrap();
    tick_to(&db, 50);
    let got = w
        .run(|tx| tx.update_field(t, b"x", 13..21, |f| f.fill(0xee)))
        .unwrap();
    assert_eq!(got, Some(()));
    tick_to(&db, 76); // SE = 50
    let snap = w
        .snapshot(|s| Ok(s.get(t, b"x")?.map(|v| v.to_vec())))
        .unwrap();
    assert_eq!(
        snap.as_deref(),
        Some(&old[..]),
        "snapshot 50 sees x whole, as of epoch 49"
    );
    let mut new = old.clone();
    new[13..21].fill(0xee);
    let now = w
        .run(|tx| Ok(tx.get(t, b"x")?.map(|v| v.to_vec())))
        .unwrap();
    assert_eq!(now, Some(new));
}

/// Transfers run while a snapshot auditor comes and goes, with a short
/// idle threshold so the version window opens and closes many times; every
/// audit must see the constant total.
#[test]
fn on_demand_versions_toggle_under_load() {
    let seed = seed("on_demand");
    let db = Database::new(
        Options::default()
            .epoch_interval(Duration::from_millis(1))
            .snapshot_versions_idle_epochs(Some(3)),
    )
    .unwrap();
    let t = db.create_table("acct").unwrap();
    let n = 32u64;
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for i in 0..n {
            tx.insert(t, &enc(i), &enc(100))?;
        }
        Ok(())
    })
    .unwrap();
    let stop = AtomicBool::new(false);
    let audits = AtomicU64::new(0);
    std::thread::scope(|s| {
        let (db, stop, audits) = (&db, &stop, &audits);
        s.spawn(move || {
            let mut w = db.worker().unwrap();
            let mut rng = Rng::new(seed, 1);
            while !stop.load(Ordering::Relaxed) {
                let (a, b) = (rng.below(n), rng.below(n));
                w.run(|tx| {
                    let va = dec(tx.get(t, &enc(a))?.expect("row"));
                    let vb = dec(tx.get(t, &enc(b))?.expect("row"));
                    if a != b && va > 0 {
                        tx.put(t, &enc(a), &enc(va - 1))?;
                        tx.put(t, &enc(b), &enc(vb + 1))?;
                    }
                    Ok::<_, TxError>(())
                })
                .unwrap();
            }
        });
        s.spawn(move || {
            let mut w = db.worker().unwrap();
            let mut rng = Rng::new(seed, 2);
            for _ in 0..40 * stress() {
                let sum = w
                    .snapshot(|s| {
                        let mut sum = 0;
                        s.scan(
                            t,
                            Bound::Unbounded,
                            Bound::Unbounded,
                            usize::MAX,
                            false,
                            |_, v| {
                                sum += dec(v);
                                true
                            },
                        )?;
                        Ok(sum)
                    })
                    .unwrap();
                assert_eq!(sum, n * 100, "snapshot audit saw a partial transfer");
                audits.fetch_add(1, Ordering::Relaxed);
                // Sometimes stay away long enough for the window to close.
                std::thread::sleep(Duration::from_millis(rng.below(12)));
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    eprintln!("on_demand: {} audits", audits.load(Ordering::Relaxed));
}

/// While no old versions are kept (no snapshot transaction in the last
/// `snapshot_versions_idle_epochs`), a deleted key waits only for regular
/// readers before it leaves the tree: a few epochs, not a snapshot
/// period. (It used to wait for the snapshot epoch, and a delete-heavy
/// run held seconds of deleted records: `bench queue` grew 174 B per
/// operation against 42 B.)
#[test]
fn deletes_outside_the_version_window_leave_within_epochs() {
    let db = Database::new(
        Options::default()
            .epoch_interval(Duration::from_secs(3600))
            .snapshot_versions_idle_epochs(Some(4)),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| tx.insert(t, b"k", b"v")).unwrap();
    // Past the idle threshold: the version window is closed.
    tick_to(&db, 30);
    w.run(|tx| tx.delete(t, b"k").map(|_| ())).unwrap();
    assert_eq!(w.pending_garbage(), 1, "the delete's cleanup");
    // Far less than a snapshot period (25 epochs): unhooked, then freed.
    for _ in 0..6 {
        db.tick_epoch_for_tests();
        w.run(|tx| tx.get(t, b"k").map(|v| assert!(v.is_none())))
            .unwrap();
    }
    assert_eq!(
        w.pending_garbage(),
        0,
        "the deleted record was not reclaimed"
    );
}
