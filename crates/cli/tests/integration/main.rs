//! This crate's integration tests, one module per area, built as one test
//! binary: every test binary links the whole crate graph, so one builds
//! much faster than many. Run one area with
//! `cargo test --release -p granary-cli --test integration AREA::`.

mod bad_invocations;
#[path = "../common/mod.rs"]
mod common;
mod plot;
mod queue;
mod readme;
mod recover;
mod reproduce;
mod tpcc;
mod ycsb;
