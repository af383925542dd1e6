//! This crate's integration tests, one module per area, built as one test
//! binary: every test binary links the whole crate graph, so one builds
//! much faster than many. Run one area with
//! `cargo test --release -p granary-protocols --test integration AREA::`.

mod atomics;
mod bohm;
mod conformance;
