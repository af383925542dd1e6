//! granary's workloads, written once against the protocol-neutral
//! [`granary::Tx`] interface so every protocol runs them unchanged.
//!
//! * [`check`] — contended workloads for the serializability checker,
//!   recorded through [`record`].
//! * [`driver`] — runs any [`driver::Workload`] on any engine and measures
//!   it.
//! * [`tpcc`] — TPC-C, complete, with its consistency checks.
//! * [`zipf`] — YCSB's (scrambled) Zipfian key chooser.
//! * [`rng`] — the fast seeded generator every workload draws from.

pub mod check;
pub mod driver;
pub mod record;
pub mod rng;
pub mod tpcc;
pub mod zipf;
