//! Randomized histories: serial executions must check clean, and planted
//! anomalies must be found. Every test prints its seed; replay one with
//! `GRANARY_SEED=<seed>`.

use std::collections::HashMap;

use crate::support::{seed, serial_history, Gen, Rng};
use granary_check::{check, AnomalyKind, History, Level, Op, Txn};
use proptest::prelude::*;

/// Debug builds run the randomized tests on smaller histories.
const SCALE: usize = if cfg!(debug_assertions) { 1 } else { 5 };

fn assert_ok(h: &History, what: &str) {
    for level in [Level::Serializable, Level::SnapshotIsolation] {
        let rep = check(h, level);
        assert!(rep.is_ok(), "{what}: {rep}\n{}", rep.explain(h));
        assert_eq!(rep.sccs, 0, "{what}: a serial history has no cycles");
    }
}

#[test]
fn serial_histories_are_serializable() {
    let s = seed("serial_histories_are_serializable");
    for i in 0..8 * SCALE {
        let mut g = Gen::small(200 + 100 * i);
        g.keys = 8 + 16 * i;
        let h = serial_history(&g, s.wrapping_add(i as u64));
        assert_ok(&h, &format!("history {i} (seed {s})"));
    }
}

#[test]
fn larger_serial_history_is_serializable() {
    let s = seed("larger_serial_history_is_serializable");
    let mut g = Gen::small(20_000 * SCALE);
    g.keys = 5_000;
    g.lists = 64;
    let h = serial_history(&g, s);
    let start = std::time::Instant::now();
    let rep = check(&h, Level::Serializable);
    eprintln!("{} txns checked in {:?}", h.len(), start.elapsed());
    assert!(rep.is_ok(), "seed {s}: {rep}");
    assert!(rep.aborted > 0);
}

/// Plants a lost update: picks a committed read-modify-write `T` of key k
/// reading version v (written by W), and adds `A` that also reads v and
/// writes k, committing right after W. Then `T -rw-> A -ww-> T`.
fn plant_lost_update(h: &mut History, rng: &mut Rng) -> bool {
    let mut candidates = Vec::new();
    for (i, t) in h.txns.iter().enumerate() {
        if !t.is_committed() {
            continue;
        }
        for pair in t.ops.windows(2) {
            if let [Op::Read {
                key,
                version: Some(v),
            }, Op::Write { key: k2, .. }] = pair
            {
                if key == k2 {
                    candidates.push((i, *key, *v));
                }
            }
        }
    }
    // Only reads of another transaction's final write (not a transaction
    // re-reading its own write, nor an intermediate version).
    let mut final_writer: HashMap<u64, usize> = HashMap::new();
    for (i, t) in h.txns.iter().enumerate() {
        let mut last: HashMap<u64, u64> = HashMap::new();
        for o in &t.ops {
            if let Op::Write { key, version } = o {
                last.insert(*key, *version);
            }
        }
        final_writer.extend(last.into_values().map(|v| (v, i)));
    }
    candidates.retain(|&(i, _, v)| final_writer.get(&v).is_some_and(|&w| w != i));
    if candidates.is_empty() {
        return false;
    }
    let (_, key, v) = candidates[rng.below(candidates.len() as u64) as usize];
    let writer = &h.txns[final_writer[&v]];
    let commit_key = writer.commit_key + 1; // generator leaves odd gaps
    let id = h.txns.iter().map(|t| t.id).max().unwrap_or(0) + 1;
    let version = u64::MAX - 1;
    h.push(Txn::committed(
        id,
        commit_key,
        vec![
            Op::Read {
                key,
                version: Some(v),
            },
            Op::Write { key, version },
        ],
    ));
    true
}

#[test]
fn planted_lost_update_is_found() {
    let s = seed("planted_lost_update_is_found");
    let mut rng = Rng::new(s);
    let mut planted = 0;
    for i in 0..6 * SCALE {
        let mut g = Gen::small(300 + 50 * i);
        g.rmw_pct = 60;
        let mut h = serial_history(&g, s.wrapping_add(i as u64));
        if !plant_lost_update(&mut h, &mut rng) {
            continue;
        }
        planted += 1;
        for level in [Level::Serializable, Level::SnapshotIsolation] {
            let rep = check(&h, level);
            assert!(
                rep.has(AnomalyKind::GSingle),
                "history {i} (seed {s}) at {level}: {rep}"
            );
            // The planted transaction is on the reported cycle.
            let planted_id = h.txns.last().map(|t| t.id).unwrap_or_default();
            assert!(
                rep.anomalies.iter().any(|a| a.txns.contains(&planted_id)),
                "{rep}"
            );
        }
    }
    // Nearly every history has a read-modify-write to plant next to.
    assert!(
        planted * 4 > 6 * SCALE * 3,
        "only {planted} histories had a read-modify-write"
    );
}

#[test]
fn planted_aborted_read_is_found() {
    let s = seed("planted_aborted_read_is_found");
    let mut h = serial_history(&Gen::small(2_000), s);
    let mut rng = Rng::new(s);
    // Point one committed read at an aborted write of the same key.
    let aborted: Vec<(u64, u64)> = h
        .txns
        .iter()
        .filter(|t| !t.is_committed())
        .flat_map(|t| t.ops.iter())
        .filter_map(|o| match o {
            Op::Write { key, version } => Some((*key, *version)),
            _ => None,
        })
        .collect();
    assert!(!aborted.is_empty(), "seed {s}");
    let (key, version) = aborted[rng.below(aborted.len() as u64) as usize];
    h.push(Txn::committed(
        u64::MAX,
        u64::MAX,
        vec![Op::Read {
            key,
            version: Some(version),
        }],
    ));
    let rep = check(&h, Level::Serializable);
    assert_eq!(rep.count(AnomalyKind::G1a), 1, "seed {s}: {rep}");
    assert_eq!(rep.anomaly_count(), 1, "seed {s}: {rep}");
}

fn arb_op() -> impl Strategy<Value = Op> {
    let key = 0u64..6;
    let ver = 0u64..12;
    prop_oneof![
        (key.clone(), proptest::option::of(ver.clone()))
            .prop_map(|(key, version)| Op::Read { key, version }),
        (key.clone(), ver.clone()).prop_map(|(key, version)| Op::Write { key, version }),
        (
            key.clone(),
            proptest::option::of(0u64..8),
            proptest::collection::vec((key.clone(), ver.clone()), 0..4)
        )
            .prop_map(|(lo, hi, rows)| Op::Scan { lo, hi, rows }),
        (key.clone(), 0u64..6).prop_map(|(key, elem)| Op::Append { key, elem }),
        (key, proptest::collection::vec(0u64..6, 0..5))
            .prop_map(|(key, elems)| Op::ReadList { key, elems }),
    ]
}

fn arb_history() -> impl Strategy<Value = History> {
    proptest::collection::vec(
        (
            0u64..10,
            any::<bool>(),
            0u64..6,
            proptest::collection::vec(arb_op(), 0..6),
        ),
        0..10,
    )
    .prop_map(|txns| {
        txns.into_iter()
            .map(|(id, ok, ck, ops)| {
                if ok {
                    Txn::committed(id, ck, ops)
                } else {
                    Txn::aborted(id, ops)
                }
            })
            .collect()
    })
}

proptest! {
    /// Arbitrary (mostly malformed) histories: no panic, deterministic
    /// results, a well-formed report.
    #[test]
    fn arbitrary_histories_never_panic(h in arb_history()) {
        for level in [Level::Serializable, Level::SnapshotIsolation] {
            let a = check(&h, level);
            let b = check(&h, level);
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(a.anomaly_count(), a.counts.values().sum::<usize>());
            for an in &a.anomalies {
                if let (Some(first), Some(last)) = (an.cycle.first(), an.cycle.last()) {
                    prop_assert_eq!(first.from, last.to);
                    for p in an.cycle.windows(2) {
                        prop_assert_eq!(p[0].to, p[1].from);
                    }
                }
            }
            let _ = a.to_string();
            let _ = a.explain(&h);
        }
    }

    /// Serial histories stay clean whatever the shape.
    #[test]
    fn generated_serial_histories_are_ok(seed in any::<u64>(), txns in 1usize..300, keys in 1usize..40) {
        let mut g = Gen::small(txns);
        g.keys = keys;
        let h = serial_history(&g, seed);
        let rep = check(&h, Level::Serializable);
        prop_assert!(rep.is_ok(), "{}", rep);
    }
}
