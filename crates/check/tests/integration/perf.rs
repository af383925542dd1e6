//! The checker's speed on a million-transaction history. Ignored by
//! default (it needs a release build to mean anything):
//!
//! ```sh
//! cargo test -p granary-check --release --test integration perf:: -- --ignored --nocapture
//! ```

use crate::support::{seed, serial_history, Gen, Rng};
use granary_check::{check, Level};

#[test]
#[ignore = "slow: run with --release -- --ignored --nocapture"]
fn perf_one_million() {
    let s = seed("perf_one_million");
    let g = Gen {
        txns: 1_000_000,
        keys: 100_000,
        lists: 0,
        zipf_s: 0.99,
        min_ops: 2,
        max_ops: 8,
        scan_pct: 2,
        scan_width: 100,
        unbounded_pct: 0,
        abort_pct: 2,
        rmw_pct: 30,
    };
    let start = std::time::Instant::now();
    let h = serial_history(&g, s);
    let ops: usize = h.txns.iter().map(|t| t.ops.len()).sum();
    eprintln!(
        "generated {} txns, {ops} ops in {:?}",
        h.len(),
        start.elapsed()
    );
    for level in [Level::Serializable, Level::SnapshotIsolation] {
        let start = std::time::Instant::now();
        let rep = check(&h, level);
        let took = start.elapsed();
        eprintln!("check ({level}): {took:?} — {rep}");
        assert!(rep.is_ok(), "seed {s}: {rep}");
        assert!(rep.transactions >= 970_000);
    }
    // Now break it: shuffle the commit keys (as if the protocol's commit
    // order had nothing to do with what was read), which makes one giant
    // strongly connected component. The bounded cycle search must still
    // finish quickly and name a cycle.
    let mut h = h;
    let mut rng = Rng::new(s);
    let committed = || h.txns.iter().filter(|t| t.is_committed());
    let mut keys: Vec<u64> = committed().map(|t| t.commit_key).collect();
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for (t, k) in h.txns.iter_mut().filter(|t| t.is_committed()).zip(keys) {
        t.commit_key = k;
    }
    for level in [Level::Serializable, Level::SnapshotIsolation] {
        let start = std::time::Instant::now();
        let rep = check(&h, level);
        let took = start.elapsed();
        let summary = rep.to_string();
        let head: Vec<&str> = summary.lines().take(6).collect();
        let len = rep.smallest_cycle().map_or(0, |a| a.cycle.len());
        eprintln!(
            "broken check ({level}): {took:?} — smallest cycle {len} — {}",
            head.join(" | ")
        );
        assert!(!rep.is_ok());
        assert!(rep.smallest_cycle().is_some());
    }
}
