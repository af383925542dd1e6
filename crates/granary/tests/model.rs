//! Single-threaded model check: random transactions against a `BTreeMap`,
//! including rollbacks, read-your-own-writes and scans in both directions.

use granary::{Database, Error, Options, TxError};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;

#[derive(Debug, Clone)]
enum Op {
    Get(Vec<u8>),
    Put(Vec<u8>, Vec<u8>),
    Insert(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Scan(Vec<u8>, usize, bool),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(0u8..3, 0..3),
        proptest::collection::vec(0u8..2, 8..12),
    ]
}

fn val() -> impl Strategy<Value = Vec<u8>> {
    // Small and large values: a growing value forces a new record.
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..10),
        proptest::collection::vec(any::<u8>(), 30..60)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => key().prop_map(Op::Get),
        3 => (key(), val()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (key(), val()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => key().prop_map(Op::Delete),
        1 => (key(), 1usize..8, any::<bool>()).prop_map(|(k, n, r)| Op::Scan(k, n, r)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn transactions_match_btreemap(txns in proptest::collection::vec((proptest::collection::vec(op(), 1..8), any::<bool>()), 1..40)) {
        let db = Database::new(Options::default()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (ops, rollback) in txns {
            let mut m = model.clone();
            let r = w.run(|tx| {
                m = model.clone();
                for o in &ops {
                    match o {
                        Op::Get(k) => assert_eq!(tx.get(t, k)?.map(|v| v.to_vec()), m.get(k).cloned(), "get {k:?}"),
                        Op::Put(k, v) => { tx.put(t, k, v)?; m.insert(k.clone(), v.clone()); }
                        Op::Insert(k, v) => match tx.insert(t, k, v) {
                            Ok(()) => { assert!(!m.contains_key(k)); m.insert(k.clone(), v.clone()); }
                            Err(TxError::Failed(Error::KeyExists)) => assert!(m.contains_key(k)),
                            Err(e) => return Err(e),
                        },
                        Op::Delete(k) => assert_eq!(tx.delete(t, k)?, m.remove(k).is_some(), "delete {k:?}"),
                        Op::Scan(k, n, rev) => {
                            let got = if *rev {
                                tx.scan_collect(t, Bound::Unbounded, Bound::Included(k), *n, true)?
                            } else {
                                tx.scan_collect(t, Bound::Included(k), Bound::Unbounded, *n, false)?
                            };
                            let want: Vec<_> = if *rev {
                                m.range(..=k.clone()).rev().take(*n).map(|(a, b)| (a.clone(), b.clone())).collect()
                            } else {
                                m.range(k.clone()..).take(*n).map(|(a, b)| (a.clone(), b.clone())).collect()
                            };
                            assert_eq!(got, want, "scan from {k:?} rev={rev}");
                        }
                    }
                }
                if rollback { Err(TxError::rollback()) } else { Ok(()) }
            });
            match r {
                Ok(()) => model = m,
                Err(Error::RolledBack) => prop_assert!(rollback),
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
        let all = w.run(|tx| tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, usize::MAX, false)).unwrap();
        let want: Vec<_> = model.into_iter().collect();
        prop_assert_eq!(all, want);
    }
}
