//! This crate's integration tests, one module per area, built as one test
//! binary: every test binary links the whole crate graph, so one builds
//! much faster than many. Run one area with
//! `cargo test --release -p granary-workloads --test integration AREA::`.

mod check_config;
mod common;
mod crash;
mod declared;
mod partitions;
mod pipelined;
mod queue;
mod smallbank;
mod tpcc;
mod ycsb;
mod zipf;
