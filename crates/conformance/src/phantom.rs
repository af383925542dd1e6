//! Phantoms (Silo §4.6): a transaction that scans a range and reads a
//! summary must never see the two disagree while other transactions
//! insert (and delete) inside the range.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use granary_api::keys::Key;
use granary_api::{AbortReason, Engine, TableOptions, Tx, TxError, TxRunner};

use crate::support::{collect, dec, enc, run, seed, stress, Rng};

/// Writers add rows to group g and bump the group's counter row in the
/// same transaction (and, if `deletes`, sometimes delete the group's first
/// row and lower the counter); scanners count the group's rows and must
/// always find the counter equal to the count. A phantom would let a
/// scanner see a count that disagrees.
pub fn scans_see_no_phantoms<E: Engine>(make: impl Fn() -> E, deletes: bool) {
    let seed = seed("phantom");
    let db = make();
    let rows = db
        .create_table_with("rows", TableOptions::point_lookups())
        .unwrap();
    let counts = db
        .create_table_with("counts", TableOptions::point_lookups())
        .unwrap();
    let groups = 4u64;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for th in 0..2u64 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut w = db.runner().unwrap();
                let mut rng = Rng::new(seed, th);
                for i in 0..5000 * stress() {
                    let g = rng.below(groups);
                    let del = deletes && rng.below(3) == 0;
                    run(&mut w, |tx| {
                        let c = tx.get(counts, &enc(g))?.map_or(0, dec);
                        if del {
                            // Delete the group's first row, if any.
                            let lo = Key::new().u64(g).finish();
                            let hi = Key::new().u64(g + 1).finish();
                            let first = collect(
                                tx,
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
                                    return Err(TxError::Conflict(AbortReason::ReadValidation));
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
            let mut w = db.runner().unwrap();
            let mut checks = 0u64;
            loop {
                let last = stop.load(Ordering::Relaxed);
                for g in 0..groups {
                    let (n, c) = run(&mut w, |tx| {
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
                if last {
                    break;
                }
            }
            eprintln!("phantom: {checks} checked scans, {:?}", w.stats());
        });
    });
}
