//! Hand-built histories, each planting one anomaly, and the kind the
//! checker must name for it.

use granary_check::{
    check, AnomalyKind, EdgeKind, History, Key, Level, Op, Report, Txn, VersionId,
};

fn r(key: Key, version: VersionId) -> Op {
    Op::Read {
        key,
        version: Some(version),
    }
}

fn r0(key: Key) -> Op {
    Op::Read { key, version: None }
}

fn w(key: Key, version: VersionId) -> Op {
    Op::Write { key, version }
}

fn scan(lo: Key, hi: Key, rows: &[(Key, VersionId)]) -> Op {
    Op::Scan {
        lo,
        hi: Some(hi),
        rows: rows.to_vec(),
    }
}

fn app(key: Key, elem: u64) -> Op {
    Op::Append { key, elem }
}

fn rl(key: Key, elems: &[u64]) -> Op {
    Op::ReadList {
        key,
        elems: elems.to_vec(),
    }
}

/// Committed transaction `id` with `commit_key = id`.
fn c(id: u64, ops: Vec<Op>) -> Txn {
    Txn::committed(id, id, ops)
}

fn hist(txns: Vec<Txn>) -> History {
    txns.into_iter().collect()
}

fn ser(h: &History) -> Report {
    check(h, Level::Serializable)
}

fn si(h: &History) -> Report {
    check(h, Level::SnapshotIsolation)
}

/// Asserts that `kind` is the only kind found, and returns the report.
fn only(report: Report, kind: AnomalyKind) -> Report {
    assert!(report.has(kind), "expected {kind}, got:\n{report}");
    assert_eq!(
        report.counts.keys().copied().collect::<Vec<_>>(),
        vec![kind],
        "{report}"
    );
    report
}

fn cycle_len(report: &Report) -> usize {
    report.smallest_cycle().expect("a cycle").cycle.len()
}

#[test]
fn empty_history_is_ok() {
    let r = ser(&History::new());
    assert!(r.is_ok());
    assert_eq!(r.transactions, 0);
}

#[test]
fn g0_lists_appended_in_opposite_orders() {
    // T1 and T2 both append to lists 1 and 2; T3 sees T1 first on list 1
    // but T2 first on list 2: a ww cycle.
    let h = hist(vec![
        c(1, vec![app(1, 11), app(2, 21)]),
        c(2, vec![app(1, 12), app(2, 22)]),
        c(3, vec![rl(1, &[11, 12]), rl(2, &[22, 21])]),
    ]);
    let rep = only(ser(&h), AnomalyKind::G0);
    assert_eq!(cycle_len(&rep), 2);
    assert!(rep.anomalies[0]
        .cycle
        .iter()
        .all(|s| s.edge == EdgeKind::Ww));
    only(si(&h), AnomalyKind::G0);
}

#[test]
fn g1a_aborted_read() {
    let h = hist(vec![
        Txn::aborted(1, vec![w(1, 100)]),
        c(2, vec![r(1, 100)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::G1a);
    assert_eq!(rep.anomalies[0].txns, vec![2, 1]);
    assert_eq!(rep.aborted, 1);
    assert_eq!(rep.transactions, 1);
    only(si(&h), AnomalyKind::G1a);
}

#[test]
fn g1a_aborted_list_element() {
    let h = hist(vec![
        Txn::aborted(1, vec![app(7, 1)]),
        c(2, vec![rl(7, &[1])]),
    ]);
    only(ser(&h), AnomalyKind::G1a);
}

#[test]
fn aborted_transactions_reads_are_not_checked() {
    let h = hist(vec![
        c(1, vec![w(1, 100)]),
        Txn::aborted(2, vec![r(1, 999), r(1, 100), w(1, 101)]),
    ]);
    assert!(ser(&h).is_ok());
}

#[test]
fn g1b_intermediate_read() {
    let h = hist(vec![
        c(1, vec![w(1, 100), w(1, 101)]),
        c(2, vec![r(1, 100)]),
    ]);
    only(ser(&h), AnomalyKind::G1b);
}

#[test]
fn g1b_intermediate_list_read() {
    let h = hist(vec![
        c(1, vec![app(7, 1), app(7, 2)]),
        c(2, vec![rl(7, &[1])]),
        c(3, vec![rl(7, &[1, 2])]),
    ]);
    only(ser(&h), AnomalyKind::G1b);
}

#[test]
fn g1c_circular_information_flow() {
    let h = hist(vec![
        c(1, vec![w(1, 100), r(2, 200)]),
        c(2, vec![w(2, 200), r(1, 100)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::G1c);
    assert_eq!(cycle_len(&rep), 2);
    only(si(&h), AnomalyKind::G1c);
}

#[test]
fn g_single_read_skew_and_its_display() {
    // T12 sees key 5 before T40 and key 9 after it.
    let h = hist(vec![
        Txn::committed(40, 1, vec![w(5, 500), w(9, 900)]),
        Txn::committed(12, 2, vec![r0(5), r(9, 900)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::GSingle);
    assert_eq!(
        rep.anomalies[0].to_string(),
        "G-single: T12 -rw(k=5)-> T40 -wr(k=9)-> T12"
    );
    let explained = rep.explain(&h);
    assert!(
        explained.contains("T12 committed (commit_key 2): r(5)=absent r(9)=v900"),
        "{explained}"
    );
    assert!(
        explained.contains("T40 committed (commit_key 1): w(5)=v500 w(9)=v900"),
        "{explained}"
    );
    // Read skew is forbidden under snapshot isolation too.
    only(si(&h), AnomalyKind::GSingle);
}

#[test]
fn g_single_lost_update() {
    let h = hist(vec![
        c(1, vec![w(1, 100)]),
        c(2, vec![r(1, 100), w(1, 101)]),
        c(3, vec![r(1, 100), w(1, 102)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::GSingle);
    assert_eq!(cycle_len(&rep), 2);
    only(si(&h), AnomalyKind::GSingle);
}

#[test]
fn g2_item_write_skew_is_allowed_under_snapshot_isolation() {
    let h = hist(vec![
        c(1, vec![r0(1), r0(2), w(1, 100)]),
        c(2, vec![r0(1), r0(2), w(2, 200)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::G2Item);
    assert_eq!(cycle_len(&rep), 2);
    assert!(rep.anomalies[0]
        .cycle
        .iter()
        .all(|s| s.edge == EdgeKind::RwItem));
    let rep = si(&h);
    assert!(rep.is_ok(), "{rep}");
    assert_eq!(rep.sccs, 1);
}

#[test]
fn g2_predicate_scan_misses_an_insert() {
    // Each scans [0, 10), sees nothing, and inserts into the range: each
    // scan missed the other's insert.
    let h = hist(vec![
        c(1, vec![scan(0, 10, &[]), w(5, 500)]),
        c(2, vec![scan(0, 10, &[]), w(6, 600)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::G2);
    assert!(rep.anomalies[0]
        .cycle
        .iter()
        .all(|s| s.edge == EdgeKind::RwPredicate));
    assert!(si(&h).is_ok());
}

#[test]
fn scan_rows_give_item_edges() {
    // T2's scan sees T1's row for key 3 but misses T3's insert of key 4,
    // while T2 read T3's other write: G-single through one predicate edge.
    let h = hist(vec![
        c(1, vec![w(3, 300)]),
        c(2, vec![scan(0, 10, &[(3, 300)]), r(20, 2000)]),
        c(3, vec![w(20, 2000), w(4, 400)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::GSingle);
    let kinds: Vec<_> = rep.anomalies[0].cycle.iter().map(|s| s.edge).collect();
    assert!(kinds.contains(&EdgeKind::RwPredicate), "{rep}");
}

#[test]
fn g_nonadjacent_under_snapshot_isolation() {
    // T1 -rw-> T2 -wr-> T3 -rw-> T4 -wr-> T1: two rw edges, never adjacent.
    let h = hist(vec![
        c(1, vec![r0(1), r(4, 400)]),
        c(2, vec![w(1, 100), w(2, 200)]),
        c(3, vec![r(2, 200), r0(3)]),
        c(4, vec![w(3, 300), w(4, 400)]),
    ]);
    let rep = only(si(&h), AnomalyKind::GNonadjacent);
    assert_eq!(cycle_len(&rep), 4);
    only(ser(&h), AnomalyKind::G2Item);
}

#[test]
fn internal_register_read_ignores_own_write() {
    let h = hist(vec![c(1, vec![w(1, 100), r0(1)])]);
    only(ser(&h), AnomalyKind::Internal);
    let h = hist(vec![c(1, vec![w(1, 50)]), c(2, vec![w(1, 100), r(1, 50)])]);
    only(ser(&h), AnomalyKind::Internal);
}

#[test]
fn internal_scan_misses_own_write() {
    let h = hist(vec![c(1, vec![w(3, 300), scan(0, 10, &[])])]);
    only(ser(&h), AnomalyKind::Internal);
}

#[test]
fn internal_list_read_misses_own_append() {
    let h = hist(vec![c(1, vec![app(7, 1), rl(7, &[])])]);
    only(ser(&h), AnomalyKind::Internal);
    // Reading own appends at the end is fine.
    let h = hist(vec![
        c(1, vec![app(7, 1)]),
        c(
            2,
            vec![
                rl(7, &[1]),
                app(7, 2),
                rl(7, &[1, 2]),
                app(7, 3),
                rl(7, &[1, 2, 3]),
            ],
        ),
    ]);
    assert!(ser(&h).is_ok(), "{}", ser(&h));
}

#[test]
fn garbage_versions_and_elements() {
    let h = hist(vec![c(1, vec![r(1, 999)])]);
    only(ser(&h), AnomalyKind::Garbage);
    // A real version, but of another key.
    let h = hist(vec![c(1, vec![w(2, 200)]), c(2, vec![r(1, 200)])]);
    only(ser(&h), AnomalyKind::Garbage);
    let h = hist(vec![c(1, vec![rl(7, &[42])])]);
    only(ser(&h), AnomalyKind::Garbage);
}

#[test]
fn incompatible_list_orders() {
    let h = hist(vec![
        c(1, vec![app(7, 1)]),
        c(2, vec![app(7, 2)]),
        c(3, vec![app(7, 3)]),
        c(4, vec![rl(7, &[1, 2])]),
        c(5, vec![rl(7, &[1, 3])]),
    ]);
    only(ser(&h), AnomalyKind::IncompatibleOrder);
    let h = hist(vec![c(1, vec![app(7, 1)]), c(2, vec![rl(7, &[1, 1])])]);
    only(ser(&h), AnomalyKind::IncompatibleOrder);
}

#[test]
fn list_append_g_single_lost_append() {
    // Both read the empty list and append; a later read shows both.
    let h = hist(vec![
        c(1, vec![rl(7, &[]), app(7, 1)]),
        c(2, vec![rl(7, &[]), app(7, 2)]),
        c(3, vec![rl(7, &[1, 2])]),
    ]);
    let rep = only(ser(&h), AnomalyKind::GSingle);
    assert_eq!(cycle_len(&rep), 2);
    only(si(&h), AnomalyKind::GSingle);
}

#[test]
fn list_history_in_serial_order_is_ok() {
    let h = hist(vec![
        c(1, vec![rl(7, &[]), app(7, 1)]),
        c(2, vec![rl(7, &[1]), app(7, 2)]),
        c(3, vec![app(7, 3)]),
        c(4, vec![rl(7, &[1, 2, 3]), rl(8, &[])]),
        c(5, vec![rl(7, &[1, 2])]),
    ]);
    // T5 read a prefix that T3 had already extended: T5 -rw-> T3, and no
    // path back, so still serializable (T5 before T3).
    let rep = ser(&h);
    assert!(rep.is_ok(), "{rep}");
}

#[test]
fn invalid_histories() {
    // One key as register and list.
    let h = hist(vec![c(1, vec![w(1, 100)]), c(2, vec![app(1, 5)])]);
    only(ser(&h), AnomalyKind::InvalidHistory);
    // A version written twice.
    let h = hist(vec![c(1, vec![w(1, 100)]), c(2, vec![w(2, 100)])]);
    only(ser(&h), AnomalyKind::InvalidHistory);
    // A transaction id twice.
    let h = hist(vec![c(1, vec![w(1, 100)]), c(1, vec![w(2, 200)])]);
    only(ser(&h), AnomalyKind::InvalidHistory);
    // Scan rows out of order.
    let h = hist(vec![
        c(1, vec![w(1, 100), w(2, 200)]),
        c(2, vec![scan(0, 10, &[(2, 200), (1, 100)])]),
    ]);
    only(ser(&h), AnomalyKind::InvalidHistory);
}

#[test]
fn ambiguous_version_order() {
    let h = hist(vec![
        Txn::committed(1, 7, vec![w(1, 100)]),
        Txn::committed(2, 7, vec![w(1, 101)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::AmbiguousVersionOrder);
    assert_eq!(rep.anomalies[0].txns, vec![1, 2]);
}

/// Wr chain `ids[0] -> ids[1] -> … -> ids[0]`, one fresh key per edge.
fn wr_ring(ids: &[u64], key_base: Key) -> Vec<(u64, Op)> {
    let mut ops = Vec::new();
    for (i, &from) in ids.iter().enumerate() {
        let to = ids[(i + 1) % ids.len()];
        let key = key_base + i as u64;
        ops.push((from, w(key, key * 10)));
        ops.push((to, r(key, key * 10)));
    }
    ops
}

fn from_ops(n: u64, ops: Vec<(u64, Op)>) -> History {
    (1..=n)
        .map(|id| {
            let mine = ops.iter().filter(|(t, _)| *t == id).map(|(_, o)| o.clone());
            // Writes first, so no transaction reads its own future write.
            let (mut ws, rs): (Vec<Op>, Vec<Op>) = mine.partition(Op::is_write);
            ws.extend(rs);
            c(id, ws)
        })
        .collect()
}

#[test]
fn smallest_cycle_in_a_component_is_reported() {
    // One component: a 4-ring T1..T4 and a 2-ring T4 <-> T5.
    let mut ops = wr_ring(&[1, 2, 3, 4], 100);
    ops.extend(wr_ring(&[4, 5], 200));
    let h = from_ops(5, ops);
    let rep = only(ser(&h), AnomalyKind::G1c);
    assert_eq!(rep.sccs, 1);
    assert_eq!(rep.count(AnomalyKind::G1c), 1);
    assert_eq!(cycle_len(&rep), 2);
}

#[test]
fn smallest_cycle_across_components_comes_first() {
    let mut ops = wr_ring(&[1, 2, 3, 4], 100);
    ops.extend(wr_ring(&[5, 6], 200));
    ops.extend(wr_ring(&[7, 8, 9], 300));
    let h = from_ops(9, ops);
    let rep = only(ser(&h), AnomalyKind::G1c);
    assert_eq!(rep.sccs, 3);
    let lens: Vec<_> = rep.anomalies.iter().map(|a| a.cycle.len()).collect();
    assert_eq!(lens, vec![2, 3, 4]);
}

#[test]
fn priority_order_within_a_component() {
    // A G1c 2-ring plus a lost update between the same transactions: one
    // component, reported as G1c (before G-single).
    let h = hist(vec![
        c(1, vec![w(1, 100), r(2, 200), r0(3), w(3, 300)]),
        c(2, vec![w(2, 200), r(1, 100), r0(3), w(3, 301)]),
    ]);
    let rep = only(ser(&h), AnomalyKind::G1c);
    assert_eq!(rep.sccs, 1);
}

#[test]
fn non_cycle_anomalies_are_capped_but_counted() {
    let reads: Vec<Op> = (0..1000).map(|i| r(1, 10_000 + i)).collect();
    let h = hist(vec![c(1, reads)]);
    let rep = only(ser(&h), AnomalyKind::Garbage);
    assert_eq!(rep.count(AnomalyKind::Garbage), 1000);
    assert_eq!(rep.anomaly_count(), 1000);
    assert_eq!(rep.anomalies.len(), granary_check::MAX_STORED_PER_KIND);
    assert!(rep.to_string().contains("(900 more not kept)"), "{rep}");
}

#[test]
fn long_cycle_does_not_overflow_or_stall() {
    // A read-modify-write chain of 100k transactions, closed by the first
    // reading a key the last wrote: one 100k-transaction G1c cycle.
    let n = 100_000u64;
    let mut h = History::new();
    h.push(c(0, vec![r(2, 2 * n), w(1, 1)]));
    for i in 1..n {
        h.push(c(i, vec![r(1, i), w(1, i + 1)]));
    }
    h.push(c(n, vec![r(1, n), w(2, 2 * n)]));
    let start = std::time::Instant::now();
    let rep = ser(&h);
    eprintln!("100k-ring: {:?}: {rep}", start.elapsed());
    assert_eq!(rep.sccs, 1);
    assert_eq!(rep.anomaly_count(), 1, "{rep}");
    assert!(rep.smallest_cycle().is_some());
}

#[test]
fn report_display_and_explain() {
    let h = hist(vec![
        c(1, vec![w(1, 100)]),
        c(2, vec![r(1, 100), w(1, 101)]),
        c(3, vec![r(1, 100), w(1, 102)]),
        Txn::aborted(4, vec![w(9, 900)]),
        c(5, vec![r(9, 900)]),
    ]);
    let rep = ser(&h);
    let shown = rep.to_string();
    eprintln!("{shown}");
    assert!(
        shown.starts_with(
            "checked 4 committed (1 aborted) transactions for serializable: 2 anomalies"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("G1a: T5 read v900 of key 9, written by aborted T4"),
        "{shown}"
    );
    let explained = rep.explain(&h);
    eprintln!("{explained}");
    // The smallest cycle is explained, with every transaction on it.
    assert!(explained.starts_with("G-single: T"), "{explained}");
    assert!(
        explained.contains("T2 committed (commit_key 2): r(1)=v100 w(1)=v101"),
        "{explained}"
    );
    assert!(
        explained.contains("T3 committed (commit_key 3): r(1)=v100 w(1)=v102"),
        "{explained}"
    );
    assert_eq!(ser(&History::new()).explain(&History::new()), "ok");
}
