//! granary's workloads, written once against the protocol-neutral
//! [`granary_api::Tx`] interface so every design runs them unchanged.
//!
//! The `granary` command's benchmarks (`granary bench`, `granary
//! reproduce`) and its `granary check` run them; the conformance suite
//! (`granary-conformance`) uses the check workloads and the history
//! recorder; the randomized tests of granary, of this crate and of the
//! conformance suite take their seeds from [`replay`].
//! `docs/ARCHITECTURE.md` ("The driver and workloads") describes the
//! driver and each workload.
//!
//! # Where to start
//!
//! A benchmark is a [`driver::Workload`] (for example [`ycsb::Ycsb`],
//! [`tpcc`] or [`smallbank`]) loaded into any
//! [`Engine`](granary_api::Engine) and run by [`driver::run`], which
//! returns a [`driver::RunReport`]: throughput, aborts by reason,
//! latencies, and the workload's invariants checked after the run.
//!
//! * [`driver`]: runs any workload on any engine and measures it.
//! * [`ycsb`]: YCSB transactions with the papers' variants as presets;
//!   [`silo52`]: Silo §5.2's variant in its lean form; [`zipf`]: YCSB's
//!   (scrambled) Zipfian key chooser.
//! * [`tpcc`]: TPC-C, complete, with its consistency checks.
//! * [`smallbank`]: SmallBank (BOHM §4.3), with a money-conservation
//!   check.
//! * [`queue`]: a queue per thread, appended at its tail and drained at
//!   its head: it measures the memory that deletes leave in the index.
//! * [`check`]: contended workloads for the serializability checker,
//!   recorded through [`record`]; [`fence`]: checks that a procedure stays
//!   within its declared sets.
//! * [`rng`]: the fast seeded generator every workload draws from;
//!   [`replay`]: tests' seeds (`GRANARY_SEED`) and stress factor.
//!
//! A bad configuration of any workload is a [`ConfigError`].
//!
//! ```
//! use granary::{Database, Options};
//! use granary_workloads::driver::{run, DriverConfig, Workload};
//! use granary_workloads::ycsb::{Ycsb, YcsbConfig};
//! use std::time::Duration;
//!
//! let db = Database::new(Options::default())?;
//! let mut w = Ycsb::new(YcsbConfig::preset("silo")?.keys(1000))?;
//! w.load(&db, &|_, _| {})?;
//! let cfg = DriverConfig {
//!     threads: 1,
//!     warmup: Duration::ZERO,
//!     duration: Duration::from_millis(200),
//!     seed: 1,
//!     latency_every: 1,
//!     breakdown: false,
//! };
//! let report = run(&w, &db, &cfg, &|_, _, _| {})?;
//! assert!(report.commits > 0 && report.invariant_violations.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(unsafe_code)]

pub mod check;
pub mod driver;
pub mod fence;
pub mod ledger;
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
