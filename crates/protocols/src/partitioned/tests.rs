use std::ops::Bound;

use granary_api::{Declared, Engine, Error, PartitionRule, Tx, TxError, TxRunner};

use super::{Partitioned, Runner};

fn by_name(name: &str) -> Option<PartitionRule> {
    match name {
        "w" => Some(PartitionRule::Field { shift: 0, bits: 8 }),
        "h" => Some(PartitionRule::Hash),
        "item" => Some(PartitionRule::Shared),
        _ => None,
    }
}

#[test]
fn declared_partitions_run_and_roll_back() {
    let db = Partitioned::new(4, by_name).unwrap();
    let w = db.create_table("w").unwrap();
    let item = db.create_table("item").unwrap();
    assert!(matches!(
        db.create_table("nope"),
        Err(Error::InvalidOption(_))
    ));
    let mut r = db.runner().unwrap();
    // Declaring nothing locks everything: loading may write anywhere.
    r.try_run(|tx| {
        tx.insert(item, b"i1", b"apple")?;
        for p in 0..8u8 {
            tx.insert(w, &[p, 1], &[p])?;
        }
        Ok(())
    })
    .unwrap()
    .unwrap();
    let mut d = Declared::new();
    d.partition(2);
    let v = r
        .try_run_declared(&d, |tx| {
            tx.put(w, &[6, 1], b"x")?; // 6 % 4 == 2
            let mut seen = Vec::new();
            tx.scan(
                w,
                Bound::Included(&[2]),
                Bound::Excluded(&[3]),
                9,
                false,
                |k, _| {
                    seen.push(k.to_vec());
                    true
                },
            )?;
            Ok((tx.get(item, b"i1")?.map(<[u8]>::to_vec), seen))
        })
        .unwrap()
        .unwrap();
    assert_eq!(
        v.0.as_deref(),
        Some(&b"apple"[..]),
        "shared tables read anywhere"
    );
    assert_eq!(v.1, vec![vec![2, 1]]);
    let e = r.try_run_declared(&d, |tx| tx.get(w, &[1, 1]).map(|_| ()));
    assert!(matches!(e, Err(Error::Undeclared(_))), "{e:?}");
    let e = r.try_run_declared(&d, |tx| tx.put(item, b"i2", b""));
    assert!(matches!(e, Err(Error::Undeclared(_))), "{e:?}");
    let e = r.try_run_declared(&d, |tx| {
        tx.delete(w, &[2, 1])?;
        tx.put(w, &[6, 1], b"y")?;
        Err::<(), _>(TxError::rollback())
    });
    assert!(matches!(e, Err(Error::RolledBack)));
    let got = r
        .try_run_declared(&d, |tx| {
            Ok((
                tx.get(w, &[2, 1])?.map(<[u8]>::to_vec),
                tx.get(w, &[6, 1])?.map(<[u8]>::to_vec),
            ))
        })
        .unwrap()
        .unwrap();
    assert_eq!(got, (Some(vec![2]), Some(b"x".to_vec())), "rolled back");
    let e = r.try_run_declared(&d, |tx| {
        tx.scan(
            w,
            Bound::Included(&[2]),
            Bound::Included(&[3]),
            9,
            false,
            |_, _| true,
        )
    });
    assert!(matches!(e, Err(Error::Undeclared(_))), "{e:?}");
    // Holding every partition, a scan crosses them, in key order.
    let mut keys = Vec::new();
    r.try_run(|tx| {
        tx.scan(
            w,
            Bound::Included(&[1]),
            Bound::Excluded(&[6, 1]),
            9,
            true,
            |k, _| {
                keys.push(k[0]);
                true
            },
        )
    })
    .unwrap()
    .unwrap();
    assert_eq!(keys, [5, 4, 3, 2, 1]);
}

/// A value that outgrows its row gets a larger row; a rollback puts
/// the old row back, and in-place updates roll back too.
#[test]
fn outgrown_rows_are_replaced_and_rolled_back() {
    let db = Partitioned::new(2, by_name).unwrap();
    let h = db.create_table("h").unwrap();
    let mut r = db.runner().unwrap();
    let get = |r: &mut Runner| {
        r.try_run(|tx| Ok(tx.get(h, b"k")?.map(<[u8]>::to_vec)))
            .unwrap()
            .unwrap()
    };
    r.try_run(|tx| tx.put(h, b"k", b"short")).unwrap().unwrap();
    let e = r.try_run(|tx| {
        tx.put(h, b"k", &[1; 500])?;
        tx.update(h, b"k", |v| v[0] = 2)?;
        tx.put(h, b"k", &[3; 2000])?;
        Err::<(), _>(TxError::rollback())
    });
    assert!(matches!(e, Err(Error::RolledBack)));
    assert_eq!(get(&mut r).as_deref(), Some(&b"short"[..]));
    r.try_run(|tx| {
        tx.put(h, b"k", &[1; 500])?;
        tx.update(h, b"k", |v| v[0] = 2)
    })
    .unwrap()
    .unwrap();
    let v = get(&mut r).unwrap();
    assert_eq!((v.len(), v[0], v[1]), (500, 2, 1));
}

#[test]
fn hashed_keys_lock_their_partitions() {
    let db = Partitioned::new(8, by_name).unwrap();
    let h = db.create_table("h").unwrap();
    let mut r = db.runner().unwrap();
    let mut d = Declared::new();
    d.write(h, b"a").read(h, b"b");
    r.try_run_declared(&d, |tx| {
        tx.put(h, b"a", b"1")?;
        tx.get(h, b"b").map(|_| ())
    })
    .unwrap()
    .unwrap();
    assert!(Partitioned::new(0, by_name).is_err());
}
