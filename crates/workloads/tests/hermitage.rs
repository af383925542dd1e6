//! Hermitage-style isolation tests (after Kleppmann's hermitage suite):
//! each anomaly scripted as a deterministic interleaving of interactive
//! transactions, written against the `Tx` interface and recorded for the
//! checker.
//!
//! For each scenario we decide from what the transactions saw and which
//! committed whether the anomaly *happened*, and assert that against what
//! the protocol's isolation level must give (serializable: none; snapshot
//! isolation: only G2-item and G2 may happen). Independently, the recorded
//! history goes through `granary-check`, whose verdict must agree.
//!
//! Every scenario starts from x = 10 (key 1) and y = 20 (key 2).

mod script;

use granary_check::Level;
use script::{expect_level, ALL};

#[test]
fn silo_prevents_every_anomaly() {
    for s in ALL {
        let out = script::run_silo(s, false);
        expect_level(s, &out, Level::Serializable);
    }
}

#[test]
fn every_scenario_records_its_transactions() {
    // The scripts really run their interleavings: every scenario has the
    // loader plus at least two recorded transactions.
    for s in ALL {
        let out = script::run_silo(s, false);
        assert!(out.history.txns.len() >= 3, "{s:?}: {:?}", out.history);
    }
}
