//! The conformance suite (`crates/conformance`) on Silo: every test every
//! design must pass, with Silo's expectations. Silo is serializable, runs
//! interactive sessions, scans and deletes; durable, it runs the crash
//! loop every durable design runs (`silo_crash`).

use std::time::Duration;

use granary::{Database, Options};
use granary_conformance::{conformance_tests, hermitage};

/// Fast epochs, so that snapshots trail the present by little and
/// reclamation keeps up with short tests.
fn fast_silo() -> Database {
    Database::new(Options::default().epoch_interval(Duration::from_millis(1))).expect("database")
}

conformance_tests! {
    silo,
    engine: fast_silo,
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

/// Silo with the switches of its factor analysis (Silo §5.7, Fig. 11) all
/// off: a new record for every write (no overwrites), records from the
/// global allocator (no per-worker pools), nothing freed (no GC), and old
/// versions kept on every snapshot-crossing write, so the replace path
/// links every superseded record for snapshots. Measurement modes must be
/// as correct as the default.
fn silo_factors_off() -> Database {
    let o = Options::default()
        .epoch_interval(Duration::from_millis(1))
        .overwrites(false)
        .record_pool(false)
        .gc(false)
        .snapshot_versions_idle_epochs(None);
    Database::new(o).expect("database")
}

conformance_tests! {
    silo_factors_off,
    engine: silo_factors_off,
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

/// Silo with a point index beside every tree, and no overwrites, so that
/// every write replaces its key's record in the tree and in the point
/// index (`Tree::replace`), and deletes remove keys from both.
fn silo_point_index() -> Database {
    let o = Options::default()
        .epoch_interval(Duration::from_millis(1))
        .point_index(true)
        .overwrites(false);
    Database::new(o).expect("database")
}

conformance_tests! {
    silo_point_index,
    engine: silo_point_index,
    level: Serializable,
    aborts: yes,
    interactive: yes(hermitage::SERIALIZABLE),
    scans: yes,
    deletes: yes,
}

/// Durable Silo (SiloR) in `dir`, checkpointing every 50 ms, not waiting
/// at commit (a transfer is acknowledged once its epoch is persistent):
/// the crash loop every durable design runs.
fn durable_silo(dir: &std::path::Path, mutant: bool) -> Database {
    assert!(
        !mutant,
        "the crash loop runs no Silo mutant (the power-loss test has them)"
    );
    let o = Options::default()
        .wait_for_durable(false)
        .checkpoint_interval(Some(Duration::from_millis(50)));
    Database::open(dir, o).expect("open")
}

granary_conformance::crash_tests!(silo_crash, durable_silo);
