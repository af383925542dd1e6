//! `SecondaryIndex` (granary-api, written against any `Tx`) on Silo:
//! lookups in primary-key order, removal, and phantom protection of a
//! lookup (Silo §4.7: the index is just another table).

use granary::{Database, Options, SecondaryIndex};

#[test]
fn lookup_insert_remove() {
    let db = Database::new(Options::default()).unwrap();
    let customers = db.create_table("customer").unwrap();
    let by_name = SecondaryIndex::create(&db, "customer_by_last").unwrap();
    assert_eq!(
        SecondaryIndex::open(&db, "customer_by_last").unwrap(),
        by_name
    );
    let mut w = db.worker().unwrap();
    w.run(|tx| {
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
    let pks = w.run(|tx| by_name.lookup(tx, b"SMITH", 10)).unwrap();
    assert_eq!(pks, vec![b"c1".to_vec(), b"c2".to_vec()]);
    assert!(w.run(|tx| by_name.remove(tx, b"SMITH", b"c1")).unwrap());
    assert!(!w.run(|tx| by_name.remove(tx, b"SMITH", b"c1")).unwrap());
    let pks = w.run(|tx| by_name.lookup(tx, b"SMITH", 10)).unwrap();
    assert_eq!(pks, vec![b"c2".to_vec()]);
}

#[test]
fn a_concurrent_insert_is_a_phantom_for_a_lookup() {
    let db = Database::new(Options::default()).unwrap();
    let by_name = SecondaryIndex::create(&db, "by_name").unwrap();
    let out = db.create_table("out").unwrap();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    let mut s = a.begin();
    let seen = by_name.lookup(&mut s, b"SMITH", 10).unwrap();
    assert!(seen.is_empty());
    b.run(|tx| by_name.insert(tx, b"SMITH", b"c9")).unwrap();
    // The lookup's range changed: `s` cannot commit a write based on it.
    let doomed = granary::Tx::put(&mut s, out, b"count", b"0").is_err() || s.commit().is_err();
    assert!(doomed, "a phantom went unnoticed");
}
