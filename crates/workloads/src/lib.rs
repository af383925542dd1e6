//! granary's workloads, written once against the protocol-neutral
//! [`granary_api::Tx`] interface so every protocol runs them unchanged.
//!
//! * [`check`] — contended workloads for the serializability checker,
//!   recorded through [`record`].
//! * [`driver`] — runs any [`driver::Workload`] on any engine and measures
//!   it.
//! * [`tpcc`] — TPC-C, complete, with its consistency checks.
//! * [`smallbank`] — SmallBank (BOHM §4.3), with a money-conservation
//!   check.
//! * [`ycsb`] — YCSB transactions with the papers' variants as presets.
//! * [`zipf`] — YCSB's (scrambled) Zipfian key chooser.
//! * [`rng`] — the fast seeded generator every workload draws from;
//!   [`replay`] — tests' seeds (`GRANARY_SEED`) and stress factor.
//!
//! A bad configuration of any workload is a [`ConfigError`].

#![deny(unsafe_code)]

pub mod check;
pub mod driver;
pub mod fence;
pub mod queue;
pub mod record;
pub mod replay;
pub mod rng;
pub mod silo52;
pub mod smallbank;
pub mod tpcc;
pub mod ycsb;
pub mod zipf;

mod error;
pub use error::ConfigError;
