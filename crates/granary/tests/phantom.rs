//! Phantoms (Silo §4.6): a transaction that scans a range and then writes
//! a summary must abort (or serialize) when another transaction inserts or
//! deletes inside the range.

mod common;

use common::*;
use granary::{keys::Key, TxError};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

/// Inserters add rows to group g and bump the group's counter row in the
/// same transaction; scanners count the group's rows and must always find
/// the counter equal to the count. A phantom would let a scanner see a
/// count that disagrees.
#[test]
fn scans_see_no_phantoms() {
    let seed = seed("phantom");
    let db = common::fast_db();
    let rows = db.create_table("rows").unwrap();
    let counts = db.create_table("counts").unwrap();
    let groups = 4u64;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for th in 0..2u64 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = Rng::new(seed, th);
                for i in 0..5000 * stress() {
                    let g = rng.below(groups);
                    let del = rng.below(3) == 0;
                    w.run(|tx| {
                        let c = tx.get(counts, &enc(g))?.map_or(0, dec);
                        if del {
                            // Delete the group's first row, if any.
                            let lo = Key::new().u64(g).finish();
                            let hi = Key::new().u64(g + 1).finish();
                            let first = tx.scan_collect(
                                rows,
                                Bound::Included(&lo),
                                Bound::Excluded(&hi),
                                1,
                                false,
                            )?;
                            if let Some((k, _)) = first.first() {
                                // A body may see an inconsistent state (OCC
                                // validates at commit); never assert inside.
                                if !tx.delete(rows, k)? {
                                    return Err(TxError::Conflict(
                                        granary::AbortReason::ReadValidation,
                                    ));
                                }
                                tx.put(counts, &enc(g), &enc(c - 1))?;
                            }
                            return Ok(());
                        }
                        let k = Key::new().u64(g).u64(th).u64(i).finish();
                        tx.insert(rows, &k, b"r")?;
                        tx.put(counts, &enc(g), &enc(c + 1))
                    })
                    .unwrap();
                }
                stop.store(true, Ordering::Relaxed);
            });
        }
        let (db, stop) = (&db, &stop);
        s.spawn(move || {
            let mut w = db.worker().unwrap();
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for g in 0..groups {
                    let (n, c) = w
                        .run(|tx| {
                            let lo = Key::new().u64(g).finish();
                            let hi = Key::new().u64(g + 1).finish();
                            let mut n = 0u64;
                            tx.scan(
                                rows,
                                Bound::Included(&lo),
                                Bound::Excluded(&hi),
                                usize::MAX,
                                g % 2 == 0,
                                |_, _| {
                                    n += 1;
                                    true
                                },
                            )?;
                            let c = tx.get(counts, &enc(g))?.map_or(0, dec);
                            Ok::<_, TxError>((n, c))
                        })
                        .unwrap();
                    assert_eq!(n, c, "phantom: scan found {n} rows, counter says {c}");
                    checks += 1;
                }
            }
            eprintln!("phantom: {checks} checked scans, aborts {:?}", w.stats());
        });
    });
}

/// A scanner that saw a range empty and wrote "empty" must not commit if a
/// concurrent insert landed in the range first (deterministic interleaving
/// through `try_run`).
#[test]
fn insert_into_scanned_range_aborts_scanner() {
    let db = common::fast_db();
    let t = db.create_table("t").unwrap();
    let flag = db.create_table("flag").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    let r = a
        .try_run(|tx| {
            let n = tx.scan_collect(
                t,
                Bound::Included(b"k0".as_slice()),
                Bound::Excluded(b"k9".as_slice()),
                10,
                false,
            )?;
            assert!(n.is_empty());
            // Meanwhile, another worker inserts into the range and commits.
            b.run(|tx2| tx2.insert(t, b"k5", b"v")).unwrap();
            tx.put(flag, b"empty", b"yes")
        })
        .unwrap();
    assert_eq!(r.unwrap_err(), granary::AbortReason::NodeValidation);
    // And a failed point lookup is protected the same way.
    let r = a
        .try_run(|tx| {
            assert!(tx.get(t, b"k7")?.is_none());
            b.run(|tx2| tx2.insert(t, b"k7", b"v")).unwrap();
            tx.put(flag, b"k7-missing", b"yes")
        })
        .unwrap();
    assert_eq!(r.unwrap_err(), granary::AbortReason::NodeValidation);
    // Our own insert into a scanned leaf does not abort us.
    a.run(|tx| {
        let n = tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, 100, false)?;
        tx.insert(t, b"k6", b"mine")?;
        let m = tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, 100, false)?;
        assert_eq!(m.len(), n.len() + 1);
        Ok(())
    })
    .unwrap();
    assert_eq!(a.stats().total_aborts(), 2);
}
