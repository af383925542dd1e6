//! Single-threaded model check of the tree against `BTreeMap`, and a
//! concurrent stress test with disjoint writers and validating readers.

use granary_index::{Insert, LeakGuard, Tree};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u8>, u64),
    Upsert(Vec<u8>, u64),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    Scan(Vec<u8>, Vec<u8>, bool, usize),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Short keys collide often; long ones exercise the heap-key path; a
    // shared prefix exercises equal slices; long shared prefixes (YCSB's
    // `user000…`, some as long as a node's prefix can be, some longer, some
    // ending where a word does, some differing in the middle) exercise the
    // node prefixes, which grow on splits and shrink when a key that does
    // not share them arrives.
    prop_oneof![
        1 => proptest::collection::vec(0u8..4, 0..4),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
        1 => proptest::collection::vec(0u8..3, 6..20),
        3 => (0usize..8, 0u8..4, proptest::collection::vec(0u8..3, 0..10)).prop_map(
            |(l, mid, tail)| {
                let len = [8, 16, 19, 24, 40, 47, 56, 61][l];
                let mut k: Vec<u8> = (0..len).map(|i| b"user0000"[i % 8]).collect();
                if mid == 3 && len > 12 {
                    k[12] = b'1';
                }
                k.extend(tail);
                k
            }
        ),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Upsert(k, v)),
        2 => key().prop_map(Op::Remove),
        2 => key().prop_map(Op::Get),
        1 => (key(), key(), any::<bool>(), 0usize..40).prop_map(|(a, b, r, n)| Op::Scan(a, b, r, n)),
    ]
}

fn scan(
    t: &Tree,
    g: &LeakGuard,
    lo: &[u8],
    hi: &[u8],
    rev: bool,
    limit: usize,
) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    t.scan(
        Bound::Included(lo),
        Bound::Excluded(hi),
        rev,
        g,
        |_, _| {},
        |k, v| {
            out.push((k.to_vec(), v));
            out.len() < limit
        },
    );
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn matches_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        let t = Tree::new();
        // SAFETY: only LeakGuards are used on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let mut m = BTreeMap::new();
        for o in ops {
            match o {
                Op::Insert(k, v) => {
                    let r = t.insert(&k, v, &mut g);
                    match m.get(&k) {
                        Some(&old) => { let ok = matches!(r, Insert::Exists { value } if value == old); prop_assert!(ok) }
                        None => { let ok = matches!(r, Insert::Inserted(_)); prop_assert!(ok); m.insert(k, v); }
                    }
                }
                Op::Upsert(k, v) => {
                    let (old, _) = t.upsert(&k, v, &mut g);
                    prop_assert_eq!(old, m.insert(k, v));
                }
                Op::Remove(k) => {
                    prop_assert_eq!(t.remove(&k, &mut g).map(|x| x.0), m.remove(&k));
                }
                Op::Get(k) => prop_assert_eq!(t.get(&k, &g).value, m.get(&k).copied()),
                Op::Scan(a, b, rev, n) => {
                    let got = scan(&t, &g, &a, &b, rev, n.max(1));
                    let want: Vec<_> = if a >= b { vec![] } else if rev {
                        m.range(a.clone()..b.clone()).rev().take(n.max(1)).map(|(k, v)| (k.clone(), *v)).collect()
                    } else {
                        m.range(a.clone()..b.clone()).take(n.max(1)).map(|(k, v)| (k.clone(), *v)).collect()
                    };
                    prop_assert_eq!(got, want);
                }
            }
        }
        let all = scan(&t, &g, &[], &[0xff; 32], false, usize::MAX);
        let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
        prop_assert_eq!(&all, &want);
        let mut rev = scan(&t, &g, &[], &[0xff; 32], true, usize::MAX);
        rev.reverse();
        prop_assert_eq!(rev, want);
    }
}

fn seed() -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("seed: {s} (replay with GRANARY_SEED={s})");
    s
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Writers insert and remove disjoint key sets (key mod threads); readers
/// scan concurrently and check order; at the end each writer's keys are
/// exactly what it left.
#[test]
fn concurrent_disjoint_writers() {
    let base = seed();
    let t = Tree::new();
    let threads = 4u64;
    std::thread::scope(|s| {
        for w in 0..threads {
            let t = &t;
            s.spawn(move || {
                // SAFETY: only LeakGuards on this tree.
                let mut g = unsafe { LeakGuard::new() };
                let mut rng = base ^ (w + 1).wrapping_mul(0x9E3779B97F4A7C15);
                let mut mine = std::collections::BTreeSet::new();
                for _ in 0..40_000 {
                    let k = (xorshift(&mut rng) % 5_000) * threads + w;
                    let key = format!("key-{k:012}");
                    if xorshift(&mut rng).is_multiple_of(3) {
                        assert_eq!(t.remove(key.as_bytes(), &mut g).is_some(), mine.remove(&k));
                    } else {
                        let fresh =
                            matches!(t.insert(key.as_bytes(), k, &mut g), Insert::Inserted(_));
                        assert_eq!(fresh, mine.insert(k));
                    }
                }
                for k in &mine {
                    assert_eq!(t.get(format!("key-{k:012}").as_bytes(), &g).value, Some(*k));
                }
            });
        }
        for r in 0..2 {
            let t = &t;
            s.spawn(move || {
                // SAFETY: only LeakGuards on this tree.
                let g = unsafe { LeakGuard::new() };
                for i in 0..200 {
                    let mut prev: Option<Vec<u8>> = None;
                    t.scan(
                        Bound::Unbounded,
                        Bound::Unbounded,
                        (i + r) % 2 == 1,
                        &g,
                        |_, _| {},
                        |k, v| {
                            let s = std::str::from_utf8(k).unwrap();
                            assert_eq!(s[4..].parse::<u64>().unwrap(), v);
                            if let Some(p) = &prev {
                                if (i + r) % 2 == 1 {
                                    assert!(k < p.as_slice())
                                } else {
                                    assert!(k > p.as_slice())
                                }
                            }
                            prev = Some(k.to_vec());
                            true
                        },
                    );
                }
            });
        }
    });
}
