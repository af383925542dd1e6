//! Phantoms (Silo §4.6), as Silo catches them: by the node-set. A
//! scanner whose range (or failed lookup) gains a key before it commits
//! aborts with `NodeValidation`, even where a serial order would exist
//! (serializability alone does not require it, so this is Silo's own
//! test; the conformance suite checks phantoms on every design).

use crate::common;

use std::ops::Bound;

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
