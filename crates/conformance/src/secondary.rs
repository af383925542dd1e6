//! [`SecondaryIndex`] (granary-api, written against any `Tx`: an index is
//! a table keyed by secondary key and primary key, Silo §4.7) on every
//! design with scans: lookups in primary-key order and removal, then the
//! index kept in step with its table under concurrency.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use granary_api::{AbortReason, Engine, SecondaryIndex, Tx, TxError, TxRunner};

use crate::support::{run, seed, stress, Rng};

/// Lookups return the primary keys of one secondary key in primary-key
/// order, never those of a secondary key that extends it; removal takes
/// one entry, once; `open` finds the index `create` made.
pub fn lookup_insert_remove<E: Engine>(make: impl Fn() -> E) {
    let db = make();
    let customers = db.create_table("customer").unwrap();
    let by_name = SecondaryIndex::create(&db, "customer_by_last").unwrap();
    assert_eq!(
        SecondaryIndex::open(&db, "customer_by_last").unwrap(),
        by_name
    );
    let mut w = db.runner().unwrap();
    run(&mut w, |tx| {
        tx.put(customers, b"c2", b"SMITH,Bob")?;
        by_name.insert(tx, b"SMITH", b"c2")?;
        tx.put(customers, b"c1", b"SMITH,Ann")?;
        by_name.insert(tx, b"SMITH", b"c1")?;
        // A name that extends another, and one with a zero byte, do not
        // match it.
        by_name.insert(tx, b"SMITHE", b"c3")?;
        by_name.insert(tx, b"SMITH\0", b"c4")
    })
    .unwrap();
    let pks = run(&mut w, |tx| by_name.lookup(tx, b"SMITH", 10)).unwrap();
    assert_eq!(pks, vec![b"c1".to_vec(), b"c2".to_vec()]);
    assert!(run(&mut w, |tx| by_name.remove(tx, b"SMITH", b"c1")).unwrap());
    assert!(!run(&mut w, |tx| by_name.remove(tx, b"SMITH", b"c1")).unwrap());
    let pks = run(&mut w, |tx| by_name.lookup(tx, b"SMITH", 10)).unwrap();
    assert_eq!(pks, vec![b"c2".to_vec()]);
    let pks = run(&mut w, |tx| by_name.lookup(tx, b"SMITH", 1)).unwrap();
    assert_eq!(pks.len(), 1, "a lookup's limit holds");
}

/// Writers insert rows (and, if `deletes`, delete them) together with
/// their index entries, moving rows between secondary keys too; readers
/// look a secondary key up and read each row it names, in one
/// transaction. Every committed reader must find each named row present
/// and filed under that key, and the index must match the table at the
/// end: an index entry without its row (or a row missed) would show a
/// transaction seen in part.
pub fn index_stays_in_step<E: Engine>(make: impl Fn() -> E, deletes: bool) {
    let seed = seed("secondary");
    let db = make();
    let rows = db.create_table("rows").unwrap();
    let by_group = SecondaryIndex::create(&db, "rows_by_group").unwrap();
    let (groups, keys) = (4u64, 64u64);
    let stop = AtomicBool::new(false);
    let pk = |k: u64| k.to_be_bytes();
    let sk = |g: u64| [b'g', g as u8];
    std::thread::scope(|s| {
        for th in 0..2u64 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut w = db.runner().unwrap();
                let mut rng = Rng::new(seed, th);
                for _ in 0..3000 * stress() {
                    let k = rng.below(keys);
                    let g = rng.below(groups);
                    let del = deletes && rng.below(4) == 0;
                    run(&mut w, |tx| {
                        // The row's value is its group; move it (or
                        // delete it) with its index entry.
                        let old = tx.get(rows, &pk(k))?.map(|v| u64::from(v[0]));
                        if let Some(o) = old {
                            if !by_group.remove(tx, &sk(o), &pk(k))? {
                                // The entry must be there: a body may see
                                // an inconsistent state (OCC validates at
                                // commit), so retry rather than assert.
                                return Err(TxError::Conflict(AbortReason::ReadValidation));
                            }
                        }
                        if del {
                            if old.is_some() {
                                tx.delete(rows, &pk(k))?;
                            }
                            return Ok(());
                        }
                        tx.put(rows, &pk(k), &[g as u8])?;
                        by_group.insert(tx, &sk(g), &pk(k))
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
                    let found = run(&mut w, |tx| {
                        let pks = by_group.lookup(tx, &sk(g), usize::MAX)?;
                        let mut rows_seen = Vec::new();
                        for p in &pks {
                            rows_seen.push(tx.get(rows, p)?.map(|v| u64::from(v[0])));
                        }
                        Ok::<_, TxError>((pks, rows_seen))
                    })
                    .unwrap();
                    for (p, row) in found.0.iter().zip(&found.1) {
                        assert_eq!(
                            *row,
                            Some(g),
                            "index entry ({g}, {p:?}) names a row that is {row:?}"
                        );
                    }
                    checks += 1;
                }
                if last {
                    break;
                }
            }
            eprintln!("secondary: {checks} checked lookups, {:?}", w.stats());
        });
    });
    // At rest: the index is exactly the table.
    let mut w = db.runner().unwrap();
    let (indexed, table) = run(&mut w, |tx| {
        let mut indexed = BTreeSet::new();
        for g in 0..groups {
            for p in by_group.lookup(tx, &sk(g), usize::MAX)? {
                indexed.insert((g, p));
            }
        }
        let mut table = BTreeSet::new();
        for k in 0..keys {
            if let Some(v) = tx.get(rows, &pk(k))? {
                table.insert((u64::from(v[0]), pk(k).to_vec()));
            }
        }
        Ok::<_, TxError>((indexed, table))
    })
    .unwrap();
    assert_eq!(indexed, table, "the index and its table disagree at rest");
}
