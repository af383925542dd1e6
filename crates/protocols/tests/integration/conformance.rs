//! The conformance suite (`crates/conformance`) on every design of
//! granary-protocols, each with what it promises and what it lacks.

use granary_api::PartitionRule;
use granary_conformance::{conformance_tests, hermitage};
use granary_protocols::ermia::Ermia;
use granary_protocols::hekaton::Hekaton;
use granary_protocols::partitioned::Partitioned;
use granary_protocols::si::Si;
use granary_protocols::two_pl::{TwoPl, Variant};

conformance_tests! {
    two_pl_ordered,
    engine: || TwoPl::new(Variant::Ordered),
    level: Serializable,
    // The check workloads' histories declare their keys, which ordered
    // 2PL locks in order (waiting, not aborting); the rest of the suite
    // declares nothing, and undeclared work is no-wait.
    aborts: no("declared transactions wait for their locks in order"),
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    two_pl_no_wait,
    engine: || TwoPl::new(Variant::NoWait),
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    hekaton,
    engine: Hekaton::new,
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    ermia,
    engine: Ermia::new,
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    snapshot_isolation,
    engine: Si::new,
    level: SnapshotIsolation,
    aborts: yes,
    interactive: yes(hermitage::SNAPSHOT_ISOLATION),
    scans: yes,
    deletes: yes,
}

/// Every table of the suite hashed: the suite declares nothing, so each
/// procedure holds every partition (and may scan across them).
fn hashed(_: &str) -> Option<PartitionRule> {
    Some(PartitionRule::Hash)
}

conformance_tests! {
    partitioned,
    engine: || Partitioned::new(4, hashed).expect("partitioned store"),
    level: Serializable,
    aborts: no("a procedure holds its partitions' locks before it runs, so it never conflicts"),
    interactive: no("Partitioned-Store has no sessions: it locks a procedure's partitions up front"),
    scans: yes,
    deletes: yes,
}

/// BOHM runs closures (what most of the suite issues) alone, with its
/// pipeline held: those tests check that path (versions installed and
/// undone by a closure, scans, deletes). The anomaly tests as procedures
/// (`procedures_*`: lost updates, Fig. 3, write skew) and the recorded
/// histories (`history_*`) are procedures, sequenced, planned and run by
/// the pipeline, as are `tests/integration/bohm.rs` and
/// `tests/checked.rs` (where the BOHM mutant fails the procedure tests).
fn bohm() -> granary_protocols::bohm::Bohm {
    granary_protocols::bohm::Bohm::new(granary_protocols::bohm::Config::default()).expect("bohm")
}

conformance_tests! {
    bohm_closures,
    engine: bohm,
    level: Serializable,
    aborts: no("procedures are ordered before they run, and a closure runs alone"),
    interactive: no("BOHM needs a transaction whole before it runs (bohm-vldb15 §3)"),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    deuteronomy_tc,
    engine: granary_protocols::deuteronomy::tc::Tc::new,
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

/// Deuteronomy's TC with garbage collection always on: versions are
/// trimmed as soon as the DC holds them, buffers are sealed every 20 µs
/// and recycled as soon as they are applied, so most reads go to the DC.
fn deuteronomy_gc() -> granary_protocols::deuteronomy::tc::Tc {
    use granary_protocols::deuteronomy::{dc::MemoryDc, tc};
    tc::Tc::with(
        tc::Config {
            buffer_bytes: 2 << 20,
            log_buffers: 4,
            soft_versions: 0,
            hard_versions: 0,
            seal_after_us: 20,
            ..tc::Config::default()
        },
        Box::new(MemoryDc::new()),
    )
    .expect("tc")
}

conformance_tests! {
    deuteronomy_tc_gc,
    engine: deuteronomy_gc,
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

// The multiversion designs again with array chains for the keys that are
// 8-byte numbers below 2^17 (`Hekaton::with_dense_keys`): the suite's small
// integer keys take them, and the model's 8-byte keys of bytes 0 and 1
// mix both kinds in one table.

conformance_tests! {
    hekaton_dense_keys,
    engine: || Hekaton::with_dense_keys(true, 1 << 17),
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    snapshot_isolation_dense_keys,
    engine: || Si::with_dense_keys(false, 1 << 17),
    level: SnapshotIsolation,
    aborts: yes,
    interactive: yes(hermitage::SNAPSHOT_ISOLATION),
    scans: yes,
    deletes: yes,
}

// The suite again with point indexes (`Tree::with_point_index`) on every
// table: the suite hints `TableOptions::point_lookups` on each.

conformance_tests! {
    two_pl_no_wait_point_index,
    engine: || TwoPl::with_point_index(Variant::NoWait),
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    hekaton_point_index,
    engine: Hekaton::with_point_index,
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    snapshot_isolation_point_index,
    engine: Si::with_point_index,
    level: SnapshotIsolation,
    aborts: yes,
    interactive: yes(hermitage::SNAPSHOT_ISOLATION),
    scans: yes,
    deletes: yes,
}

conformance_tests! {
    partitioned_point_index,
    engine: || Partitioned::with_point_index(4, hashed).expect("partitioned store"),
    level: Serializable,
    aborts: no("a procedure holds its partitions' locks before it runs, so it never conflicts"),
    interactive: no("Partitioned-Store has no sessions: it locks a procedure's partitions up front"),
    scans: yes,
    deletes: yes,
}

fn bohm_point_index() -> granary_protocols::bohm::Bohm {
    granary_protocols::bohm::Bohm::new(granary_protocols::bohm::Config {
        point_index: true,
        ..Default::default()
    })
    .expect("bohm")
}

conformance_tests! {
    bohm_point_index,
    engine: bohm_point_index,
    level: Serializable,
    aborts: no("procedures are ordered before they run, and a closure runs alone"),
    interactive: no("BOHM needs a transaction whole before it runs (bohm-vldb15 §3)"),
    scans: yes,
    deletes: yes,
}
