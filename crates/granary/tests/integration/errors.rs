//! Bad input gives typed errors, never a panic or a damaged index.

use granary::{
    AbortReason, Database, Error, Options, TxError, MAX_KEY_BYTES, MAX_TABLE_NAME_BYTES,
    MAX_VALUE_BYTES,
};
use std::ops::Bound;

#[test]
fn bad_input_is_a_typed_error() {
    let db = Database::new(Options::default()).unwrap();
    let t = db.create_table("t").unwrap();
    assert!(matches!(db.create_table("t"), Err(Error::TableExists(_))));
    assert!(matches!(db.table("nope"), Err(Error::UnknownTable(_))));
    let other = Database::new(Options::default()).unwrap();
    other.create_table("a").unwrap();
    let foreign = other.create_table("b").unwrap();
    let mut w = db.worker().unwrap();

    let long_key = vec![1u8; MAX_KEY_BYTES + 1];
    let big_val = vec![1u8; MAX_VALUE_BYTES + 1];
    assert!(matches!(
        w.run(|tx| tx.put(t, &long_key, b"v")),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        w.run(|tx| tx.get(t, &long_key).map(|_| ())),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        w.run(|tx| tx.put(t, b"k", &big_val)),
        Err(Error::ValueTooLarge { .. })
    ));
    assert!(matches!(
        w.run(|tx| tx.put(foreign, b"k", b"v")),
        Err(Error::UnknownTableId(1))
    ));
    let r = w.run(|tx| {
        tx.scan_collect(
            t,
            Bound::Included(&long_key[..]),
            Bound::Unbounded,
            1,
            false,
        )
    });
    assert!(matches!(r, Err(Error::KeyTooLarge { .. })));

    // A key of exactly the limit works, and a failed transaction left
    // nothing behind.
    let max_key = vec![2u8; MAX_KEY_BYTES];
    w.run(|tx| tx.insert(t, &max_key, b"ok")).unwrap();
    assert!(matches!(
        w.run(|tx| tx.insert(t, &max_key, b"again")),
        Err(Error::KeyExists)
    ));
    let all = w
        .run(|tx| tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, 10, false))
        .unwrap();
    assert_eq!(all, vec![(max_key.clone(), b"ok".to_vec())]);

    // A rollback undoes inserts (the placeholder leaves the tree).
    let r = w.run(|tx| {
        tx.insert(t, b"temp", b"x")?;
        Err::<(), _>(TxError::rollback())
    });
    assert!(matches!(r, Err(Error::RolledBack)));
    assert!(w.run(|tx| Ok(tx.get(t, b"temp")?.is_none())).unwrap());
    // An application error is carried through.
    let r = w.run(|_| Err::<(), _>(TxError::user("out of stock")));
    assert_eq!(
        r.unwrap_err().to_string(),
        "transaction failed: out of stock"
    );
}

#[test]
fn doomed_transaction_stays_doomed() {
    let db = Database::new(Options::default()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    a.run(|tx| tx.put(t, b"k", b"0")).unwrap();
    let r = a
        .try_run(|tx| {
            assert!(tx.get(t, b"missing")?.is_none());
            b.run(|tx2| tx2.put(t, b"other", b"1")).unwrap();
            // Our own insert meets a leaf someone else changed: doomed.
            let e = tx.insert(t, b"mine", b"x").unwrap_err();
            assert!(matches!(e, TxError::Conflict(AbortReason::NodeValidation)));
            // Every later operation reports the same conflict; nothing panics.
            assert!(matches!(tx.get(t, b"k"), Err(TxError::Conflict(_))));
            assert!(matches!(tx.put(t, b"k", b"1"), Err(TxError::Conflict(_))));
            Ok(())
        })
        .unwrap();
    assert_eq!(r, Err(AbortReason::NodeValidation));
    assert!(a.run(|tx| Ok(tx.get(t, b"mine")?.is_none())).unwrap());
}

#[test]
fn a_too_long_table_name_is_its_own_error() {
    let db = Database::new(Options::default()).unwrap();
    db.create_table(&"a".repeat(MAX_TABLE_NAME_BYTES)).unwrap();
    let long = "b".repeat(MAX_TABLE_NAME_BYTES + 1);
    match db.create_table(&long) {
        Err(e @ Error::TableNameTooLong { len, max }) => {
            assert_eq!((len, max), (MAX_TABLE_NAME_BYTES + 1, MAX_TABLE_NAME_BYTES));
            assert_eq!(
                e.to_string(),
                format!("table name of {len} bytes exceeds the {max}-byte limit")
            );
        }
        other => panic!("expected TableNameTooLong, got {other:?}"),
    }
    assert!(matches!(
        db.open_table(&long),
        Err(Error::TableNameTooLong { .. })
    ));
    assert!(matches!(db.table(&long), Err(Error::UnknownTable(_))));
}

#[test]
fn options_and_limits() {
    assert!(matches!(
        Database::new(Options::default().epoch_interval(std::time::Duration::ZERO)),
        Err(Error::InvalidOption(_))
    ));
    let db = Database::new(Options::default().max_workers(2)).unwrap();
    let _a = db.worker().unwrap();
    let b = db.worker().unwrap();
    assert!(matches!(db.worker(), Err(Error::TooManyWorkers { max: 2 })));
    drop(b);
    db.worker().unwrap();
    let nosnap = Database::new(Options::default().snapshots(false)).unwrap();
    let mut w = nosnap.worker().unwrap();
    assert!(matches!(
        w.snapshot(|_| Ok(())),
        Err(Error::InvalidOption(_))
    ));
}
