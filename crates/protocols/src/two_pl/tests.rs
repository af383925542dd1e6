use std::ops::Bound;

use granary_api::{
    AbortReason, Declared, Engine, Error, TableId, Tx, TxError, TxRunner, MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
};

use super::{TwoPl, Variant};
use crate::reclaim::Pin;

fn num(v: Option<&[u8]>) -> u64 {
    v.map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap()))
}

#[test]
fn reads_writes_deletes_and_rollback() {
    for variant in [Variant::Ordered, Variant::NoWait] {
        let db = TwoPl::new(variant);
        let t = db.create_table("t").unwrap();
        let mut w = db.runner().unwrap();
        w.try_run(|tx| {
            tx.insert(t, b"a", &1u64.to_be_bytes())?;
            tx.put(t, b"b", &2u64.to_be_bytes())?;
            assert_eq!(num(tx.get(t, b"a")?), 1, "reads its own writes");
            Ok(())
        })
        .unwrap()
        .unwrap();
        let r = w.try_run(|tx| {
            tx.put(t, b"a", &5u64.to_be_bytes())?;
            tx.delete(t, b"b")?;
            tx.insert(t, b"c", b"x")?;
            Err::<(), _>(TxError::rollback())
        });
        assert!(matches!(r, Err(Error::RolledBack)));
        let (a, b, c) = w
            .try_run(|tx| {
                Ok((
                    num(tx.get(t, b"a")?),
                    num(tx.get(t, b"b")?),
                    tx.get(t, b"c")?.is_some(),
                ))
            })
            .unwrap()
            .unwrap();
        assert_eq!((a, b, c), (1, 2, false), "rolled back");
        assert!(matches!(
            w.try_run(|tx| tx.insert(t, b"a", b"y")),
            Err(Error::KeyExists)
        ));
        w.try_run(|tx| tx.delete(t, b"a")).unwrap().unwrap();
        let mut keys = Vec::new();
        w.try_run(|tx| {
            tx.scan(t, Bound::Unbounded, Bound::Unbounded, 10, false, |k, _| {
                keys.push(k.to_vec());
                true
            })
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            keys,
            vec![b"b".to_vec()],
            "deleted and rolled-back keys are gone"
        );
        assert_eq!((w.stats().commits, w.stats().failures), (4, 2));
    }
}

#[test]
fn no_wait_conflicts_abort_and_release() {
    let db = TwoPl::new(Variant::NoWait);
    let t = db.create_table("t").unwrap();
    let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
    a.try_run(|tx| tx.put(t, b"k", b"1")).unwrap().unwrap();
    let r = a
        .try_run(|tx| {
            tx.put(t, b"k", b"2")?;
            // b cannot read what a holds exclusive, nor write it.
            let seen = b.try_run(|tx2| Ok(tx2.get(t, b"k")?.map(<[u8]>::to_vec)));
            Ok(seen)
        })
        .unwrap()
        .unwrap();
    assert!(matches!(r, Ok(Err(AbortReason::LockConflict))));
    assert_eq!(b.stats().aborts_for(AbortReason::LockConflict), 1);
    // a committed: b now reads the new value.
    let v = b
        .try_run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))
        .unwrap();
    assert_eq!(v.unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn many_keys_held_at_once_are_found_again() {
    // Key hashes collide in unit tests (8 buckets), so this walks the
    // chains of held keys.
    let db = TwoPl::new(Variant::NoWait);
    let (a, b) = (db.create_table("a").unwrap(), db.create_table("b").unwrap());
    let mut w = db.runner().unwrap();
    w.try_run(|tx| {
        for i in 0..300u64 {
            tx.put(a, &i.to_be_bytes(), &i.to_be_bytes())?;
            tx.put(b, &i.to_be_bytes(), &(i + 1).to_be_bytes())?;
        }
        for i in 0..300u64 {
            assert_eq!(num(tx.get(a, &i.to_be_bytes())?), i);
            assert_eq!(num(tx.get(b, &i.to_be_bytes())?), i + 1);
        }
        Ok(())
    })
    .unwrap()
    .unwrap();
    let n = w
        .try_run(|tx| {
            let mut n = 0;
            tx.scan(
                b,
                Bound::Unbounded,
                Bound::Unbounded,
                usize::MAX,
                false,
                |_, _| {
                    n += 1;
                    true
                },
            )?;
            Ok(n)
        })
        .unwrap()
        .unwrap();
    assert_eq!(n, 300);
}

/// The history recorder needs each key's writers in increasing commit
/// key order, also across a delete (whose row leaves the index) and a
/// re-insert by another worker.
#[test]
fn commit_keys_increase_across_delete_and_reinsert() {
    let db = TwoPl::new(Variant::NoWait);
    let t = db.create_table("t").unwrap();
    let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
    for _ in 0..3 {
        a.try_run(|tx| tx.put(t, b"k", b"1")).unwrap().unwrap();
    }
    a.try_run(|tx| tx.delete(t, b"k")).unwrap().unwrap();
    let deleted = a.last_commit_key();
    b.try_run(|tx| tx.insert(t, b"k", b"2")).unwrap().unwrap();
    assert!(
        b.last_commit_key() > deleted,
        "{} <= {deleted}",
        b.last_commit_key()
    );
}

/// A value longer than its row's room moves the key to a larger row
/// in the index; a rollback puts the old value back in the new row.
#[test]
fn a_value_longer_than_its_row_moves_the_key() {
    for variant in [Variant::Ordered, Variant::NoWait] {
        let db = TwoPl::new(variant);
        let t = db.create_table("t").unwrap();
        let mut w = db.runner().unwrap();
        w.try_run(|tx| tx.put(t, b"k", b"short")).unwrap().unwrap();
        let row = |db: &TwoPl| {
            db.0.tables
                .get(t)
                .unwrap()
                .tree
                .find(b"k", &Pin(&crossbeam_epoch::pin()))
        };
        let before = row(&db);
        let long = vec![7u8; 300];
        w.try_run(|tx| {
            tx.put(t, b"k", &long)?;
            assert_eq!(tx.get(t, b"k")?, Some(&long[..]), "reads its own write");
            tx.update(t, b"k", |v| v[0] = 1)?;
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_ne!(row(&db), before, "a larger row");
        let mut want = long.clone();
        want[0] = 1;
        // Grown again, changed, then rolled back: the value it had.
        let r = w.try_run(|tx| {
            tx.put(t, b"k", &[9u8; 2000])?;
            tx.put(t, b"k", b"x")?;
            tx.delete(t, b"k")?;
            Err::<(), _>(TxError::rollback())
        });
        assert!(matches!(r, Err(Error::RolledBack)));
        let (got, n) = w
            .try_run(|tx| {
                let got = tx.get(t, b"k")?.map(<[u8]>::to_vec);
                let mut n = 0;
                tx.scan(t, Bound::Unbounded, Bound::Unbounded, 9, false, |_, _| {
                    n += 1;
                    true
                })?;
                Ok((got, n))
            })
            .unwrap()
            .unwrap();
        assert_eq!(got.as_deref(), Some(&want[..]), "{variant:?}");
        assert_eq!(n, 1, "one entry for the key");
    }
}

/// A transaction waiting for a row that another moves to a larger one
/// finds the new row once the mover commits.
#[test]
fn a_waiter_follows_a_moved_row() {
    let db = TwoPl::new(Variant::Ordered);
    let t = db.create_table("t").unwrap();
    let (mut a, mut b) = (db.runner().unwrap(), db.runner().unwrap());
    a.try_run(|tx| tx.put(t, b"k", b"1")).unwrap().unwrap();
    let long = vec![5u8; 500];
    std::thread::scope(|s| {
        a.try_run(|tx| {
            tx.put(t, b"k", b"2")?;
            let waiter = s.spawn(|| {
                let mut d = Declared::new();
                d.write(t, b"k");
                // Waits for `a` (the ordered variant's declared locks
                // wait), on the row `a` is about to replace.
                b.try_run_declared(&d, |tx| {
                    let v = tx.get(t, b"k")?.map(<[u8]>::to_vec);
                    tx.update(t, b"k", |v| v[1] = 6)?;
                    Ok(v)
                })
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            tx.put(t, b"k", &long)?;
            Ok(waiter)
        })
        .unwrap()
        .unwrap()
        .join()
        .unwrap()
        .unwrap()
        .map(|seen| assert_eq!(seen.as_deref(), Some(&long[..]), "saw a's commit"))
        .unwrap();
    });
    let v = a
        .try_run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))
        .unwrap()
        .unwrap();
    let mut want = long;
    want[1] = 6;
    assert_eq!(v, Some(want));
}

#[test]
fn errors_are_typed() {
    let db = TwoPl::new(Variant::NoWait);
    let mut w = db.runner().unwrap();
    let big = vec![0u8; MAX_KEY_BYTES + 1];
    assert!(matches!(
        w.try_run(|tx| tx.get(TableId::new(0), b"k").map(|_| ())),
        Err(Error::UnknownTableId(0))
    ));
    let t = db.create_table("t").unwrap();
    assert!(matches!(
        w.try_run(|tx| tx.get(t, &big).map(|_| ())),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        w.try_run(|tx| tx.put(t, b"k", &vec![0; MAX_VALUE_BYTES + 1])),
        Err(Error::ValueTooLarge { .. })
    ));
    assert_eq!(w.stats().failures, 3);
}
