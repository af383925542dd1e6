//! This crate's integration tests, one module per area, built as one test
//! binary: every test binary links the whole crate graph, so one builds
//! much faster than many. Run one area with
//! `cargo test --release -p granary --test integration AREA::`.

#[path = "../common/mod.rs"]
mod common;
mod completeness;
mod conformance;
mod durable;
mod durable_races;
mod errors;
mod layering;
mod phantom;
mod secondary;
mod snapshot;
