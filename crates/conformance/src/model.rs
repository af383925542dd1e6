//! Single-threaded model check: random transactions against a `BTreeMap`,
//! including rollbacks, read-your-own-writes, in-place updates of whole
//! values and of fields, and (where the design has
//! them) deletes and scans in both directions.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use granary_api::{Engine, Error, TableId, TableOptions, Tx, TxError, TxRunner};
use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::{Config, RngSeed, TestRunner};

use crate::support::{collect, run, seed};

#[derive(Debug, Clone)]
enum Op {
    Get(Vec<u8>),
    Put(Vec<u8>, Vec<u8>),
    Insert(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// `Tx::update` xoring every byte with the mask.
    Update(Vec<u8>, u8),
    /// `Tx::update_field` xoring the field's bytes with the mask.
    UpdateField(Vec<u8>, std::ops::Range<usize>, u8),
    Scan(Vec<u8>, usize, bool),
}

impl Op {
    fn key(&self) -> &[u8] {
        match self {
            Op::Get(k)
            | Op::Put(k, _)
            | Op::Insert(k, _)
            | Op::Delete(k)
            | Op::Update(k, _)
            | Op::UpdateField(k, ..)
            | Op::Scan(k, ..) => k,
        }
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(0u8..3, 0..3),
        proptest::collection::vec(0u8..2, 8..12),
    ]
}

fn val() -> impl Strategy<Value = Vec<u8>> {
    // Small and large values: a growing value forces a new record (Silo).
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..10),
        proptest::collection::vec(any::<u8>(), 30..60)
    ]
}

/// The operations drawn: deletes and scans only if the design has them.
/// (Arms are left out rather than weighted 0: shrinking may move to any
/// earlier arm of a union, whatever its weight.)
fn op(deletes: bool, scans: bool) -> impl Strategy<Value = Op> {
    let mut arms = vec![
        (3, key().prop_map(Op::Get).boxed()),
        (3, (key(), val()).prop_map(|(k, v)| Op::Put(k, v)).boxed()),
        (
            2,
            (key(), val()).prop_map(|(k, v)| Op::Insert(k, v)).boxed(),
        ),
        (
            2,
            (key(), 1u8..).prop_map(|(k, m)| Op::Update(k, m)).boxed(),
        ),
        (
            2,
            // Fields that start and end anywhere in a word, within a small
            // or a large value, or past its end.
            (key(), 0usize..64, 0usize..20, 1u8..)
                .prop_map(|(k, s, n, m)| Op::UpdateField(k, s..s + n, m))
                .boxed(),
        ),
    ];
    if deletes {
        arms.push((2, key().prop_map(Op::Delete).boxed()));
    }
    if scans {
        let scan = (key(), 1usize..8, any::<bool>()).prop_map(|(k, n, r)| Op::Scan(k, n, r));
        arms.push((1, scan.boxed()));
    }
    Union::new_weighted(arms)
}

/// 200 cases of up to 40 transactions of up to 8 operations, each
/// transaction committed or rolled back at random, every read compared
/// with the model, and the whole table compared at the end. Cases are
/// drawn from the printed seed (`GRANARY_SEED` replays them; proptest
/// shrinks a failure to a small case).
pub fn transactions_match_btreemap<E: Engine>(make: impl Fn() -> E, deletes: bool, scans: bool) {
    let config = Config {
        cases: 200,
        rng_seed: RngSeed::Fixed(seed("model")),
        // Replay is by seed: nothing is written next to the sources.
        failure_persistence: None,
        ..Config::default()
    };
    let txns = proptest::collection::vec(
        (
            proptest::collection::vec(op(deletes, scans), 1..8),
            any::<bool>(),
        ),
        1..40,
    );
    TestRunner::new(config)
        .run(&txns, |txns| {
            one_case(&make(), &txns, scans);
            Ok(())
        })
        .unwrap();
}

fn one_case<E: Engine>(db: &E, txns: &[(Vec<Op>, bool)], scans: bool) {
    let t = db
        .create_table_with("t", TableOptions::point_lookups())
        .unwrap();
    let mut w = db.runner().unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (i, &(ref ops, rollback)) in txns.iter().enumerate() {
        let mut m = model.clone();
        // `Tx::prefetch_many` is a hint: hinting the keys in order, in
        // reverse (a design that keeps what it found must not hand it to
        // the wrong key), or not at all changes no result.
        let mut hints: Vec<(TableId, &[u8])> = ops.iter().map(|o| (t, o.key())).collect();
        match i % 3 {
            0 => {}
            1 => hints.reverse(),
            _ => hints.clear(),
        }
        // Single-threaded: nothing runs beside it, so it may not conflict
        // (once, not retried), and the body may assert.
        let r = w.try_run(|tx| {
            tx.prefetch_many(&hints);
            for o in ops {
                match o {
                    Op::Get(k) => assert_eq!(
                        tx.get(t, k)?.map(|v| v.to_vec()),
                        m.get(k).cloned(),
                        "get {k:?}"
                    ),
                    Op::Put(k, v) => {
                        tx.put(t, k, v)?;
                        m.insert(k.clone(), v.clone());
                    }
                    Op::Insert(k, v) => match tx.insert(t, k, v) {
                        Ok(()) => {
                            assert!(!m.contains_key(k));
                            m.insert(k.clone(), v.clone());
                        }
                        Err(TxError::Failed(Error::KeyExists)) => assert!(m.contains_key(k)),
                        Err(e) => return Err(e),
                    },
                    Op::Delete(k) => {
                        assert_eq!(tx.delete(t, k)?, m.remove(k).is_some(), "delete {k:?}");
                    }
                    Op::Update(k, mask) => {
                        let len = tx.update(t, k, |v| {
                            v.iter_mut().for_each(|b| *b ^= mask);
                            v.len()
                        })?;
                        let want = m.get_mut(k).map(|v| {
                            v.iter_mut().for_each(|b| *b ^= mask);
                            v.len()
                        });
                        assert_eq!(len, want, "update {k:?}");
                    }
                    Op::UpdateField(k, field, mask) => {
                        let len = tx.update_field(t, k, field.clone(), |v| {
                            v.iter_mut().for_each(|b| *b ^= mask);
                            v.len()
                        })?;
                        let want = m.get_mut(k).map(|v| {
                            let r = granary_api::field_within(field, v.len());
                            v[r.clone()].iter_mut().for_each(|b| *b ^= mask);
                            r.len()
                        });
                        assert_eq!(len, want, "update_field {k:?} {field:?}");
                    }
                    Op::Scan(k, n, rev) => {
                        let got = if *rev {
                            collect(tx, t, Bound::Unbounded, Bound::Included(k), *n, true)?
                        } else {
                            collect(tx, t, Bound::Included(k), Bound::Unbounded, *n, false)?
                        };
                        let want: Vec<_> = if *rev {
                            m.range(..=k.clone())
                                .rev()
                                .take(*n)
                                .map(|(a, b)| (a.clone(), b.clone()))
                                .collect()
                        } else {
                            m.range(k.clone()..)
                                .take(*n)
                                .map(|(a, b)| (a.clone(), b.clone()))
                                .collect()
                        };
                        assert_eq!(got, want, "scan from {k:?} rev={rev}");
                    }
                }
            }
            if rollback {
                Err(TxError::rollback())
            } else {
                Ok(())
            }
        });
        match r {
            Ok(Ok(())) => model = m,
            Ok(Err(reason)) => panic!("a transaction alone conflicted: {reason}"),
            Err(Error::RolledBack) => assert!(rollback),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    // Every key the case touched reads as the model says (so a key the
    // model lacks must be absent), and with scans the whole table matches.
    let touched: BTreeSet<&[u8]> = txns.iter().flat_map(|(ops, _)| ops).map(Op::key).collect();
    for k in touched {
        let got = run(&mut w, |tx| Ok(tx.get(t, k)?.map(<[u8]>::to_vec))).unwrap();
        assert_eq!(got.as_ref(), model.get(k), "final read of {k:?}");
    }
    if scans {
        let all = run(&mut w, |tx| {
            collect(tx, t, Bound::Unbounded, Bound::Unbounded, usize::MAX, false)
        })
        .unwrap();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    }
}
