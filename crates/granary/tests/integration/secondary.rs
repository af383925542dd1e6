//! `SecondaryIndex` on Silo: phantom protection of a lookup (Silo §4.7:
//! the index is just another table). Its lookups, removal and staying in
//! step with its table run on every design in the conformance suite
//! (`granary_conformance::secondary`).

use granary::{Database, Options, SecondaryIndex};

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
