//! Delete / re-insert churn on the same keys.

use std::sync::atomic::{AtomicBool, Ordering};

use granary_api::{Engine, ReadOnly, TableId, TableOptions, Tx, TxError, TxRunner};

use crate::support::{enc, run, seed, stress, Rng};

const KEYS: u64 = 16;

/// A value the churn writes: eight or (bigger than a record's room in
/// Silo, forcing a new record, §4.5) 300 bytes of 7s.
fn well_formed(v: &[u8]) -> bool {
    v.iter().all(|&b| b == 7) && (v.len() == 8 || v.len() == 300)
}

/// Whether every key is absent or holds a well-formed value (by a
/// transaction or a snapshot: both are [`ReadOnly`]).
fn all_well_formed<R: ReadOnly + ?Sized>(r: &mut R, t: TableId) -> Result<bool, TxError> {
    let mut ok = true;
    for k in 0..KEYS {
        ok &= r.read(t, &enc(k))?.is_none_or(well_formed);
    }
    Ok(ok)
}

/// [`churn`] on a fresh database.
pub fn delete_reinsert_churn<E: Engine>(make: impl Fn() -> E) {
    churn(&make());
}

/// Two workers toggle a small key set (delete the key if present, else
/// insert it) while a reader checks, in transactions and in snapshot
/// reads, that each key is either absent or holds a well-formed value.
/// At the end a key is present exactly if its committed toggles were odd
/// in number: no toggle was lost or applied twice. Public so that a
/// design's own test can follow it with checks of its internals (Silo:
/// that the garbage was reclaimed).
pub fn churn<E: Engine>(db: &E) {
    let seed = seed("churn");
    let t = db
        .create_table_with("churn", TableOptions::point_lookups())
        .unwrap();
    let stop = AtomicBool::new(false);
    let toggles: Vec<[u64; KEYS as usize]> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|th| {
                let stop = &stop;
                s.spawn(move || {
                    let mut w = db.runner().unwrap();
                    let mut rng = Rng::new(seed, th);
                    let mut toggles = [0u64; KEYS as usize];
                    for _ in 0..20_000 * stress() {
                        let key = rng.below(KEYS);
                        let k = enc(key);
                        let big = rng.below(4) == 0;
                        run(&mut w, |tx| {
                            if tx.get(t, &k)?.is_some() {
                                tx.delete(t, &k)?;
                            } else {
                                let v = if big { vec![7u8; 300] } else { vec![7u8; 8] };
                                tx.insert(t, &k, &v)?;
                            }
                            Ok(())
                        })
                        .unwrap();
                        toggles[key as usize] += 1;
                    }
                    stop.store(true, Ordering::Relaxed);
                    toggles
                })
            })
            .collect();
        let stop = &stop;
        s.spawn(move || {
            let mut w = db.runner().unwrap();
            while !stop.load(Ordering::Relaxed) {
                // Values are checked after commit: a body may see an
                // inconsistent state before validation fails it.
                let seen = run(&mut w, |tx| all_well_formed(tx, t)).unwrap();
                assert!(seen, "a transaction read a malformed value");
                let seen = w.snapshot_read(&mut |s| all_well_formed(s, t)).unwrap();
                assert!(seen, "a snapshot read a malformed value");
            }
        });
        writers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut w = db.runner().unwrap();
    for k in 0..KEYS {
        let n: u64 = toggles.iter().map(|t| t[k as usize]).sum();
        let present = run(&mut w, |tx| Ok(tx.get(t, &enc(k))?.is_some())).unwrap();
        assert_eq!(
            present,
            n % 2 == 1,
            "key {k}: {n} committed toggles, but the key is {}",
            if present { "present" } else { "absent" }
        );
    }
}
