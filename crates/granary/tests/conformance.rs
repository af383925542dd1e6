//! The conformance suite (`crates/conformance`) on Silo: every test every
//! design must pass, with Silo's expectations. Silo is serializable, runs
//! interactive sessions, scans and deletes.

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
