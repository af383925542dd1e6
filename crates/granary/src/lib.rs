//! granary: a multicore in-memory serializable transaction engine, after
//! Silo ("Speedy Transactions in Multicore In-Memory Databases", Tu, Zheng,
//! Kohler, Liskov and Madden, SOSP 2013): optimistic concurrency control
//! with epoch-based commit over a Masstree-style index (`granary-index`).
//! It is durable on request, after SiloR ("Fast Databases with Fast
//! Durability and Recovery Through Multicore Parallelism", Zheng, Tu,
//! Kohler and Liskov, OSDI 2014): per-logger value logs, fuzzy
//! checkpoints and parallel recovery.
//!
//! This is the crate an application embeds. The `granary` command
//! (`crates/cli`) benchmarks it against the rival designs of
//! `granary-protocols`, which share its interface. `docs/ARCHITECTURE.md`
//! explains how the pieces fit together; `docs/FORMAT.md` describes the
//! durable directory byte by byte.
//!
//! # Where to start
//!
//! * [`Database`] holds tables ([`TableId`]) and runs the epoch thread:
//!   [`Database::new`] keeps everything in memory, [`Database::open`]
//!   logs to a directory and recovers from it. [`Options`] configures both.
//! * Each thread takes a [`Worker`] ([`Database::worker`]) and runs
//!   one-shot transactions as closures: [`Worker::run`] retries conflicts,
//!   [`Worker::try_run`] runs once, [`Worker::snapshot`] reads a
//!   consistent recent snapshot and never aborts.
//! * Inside, a [`Transaction`] offers `get`, `put`, `insert`, `delete` and
//!   `scan` over byte keys and values; [`keys`] encodes composite keys in
//!   order; [`SecondaryIndex`] keeps a secondary index in step.
//! * Errors are typed ([`Error`]); conflicts are outcomes
//!   ([`AbortReason`]), counted per worker ([`Stats`]).
//!
//! # The shared vocabulary
//!
//! [`TableId`], [`Tx`], [`TxRunner`], [`Engine`], [`Error`], [`TxError`],
//! [`AbortReason`], [`Stats`], [`keys`] and the rest of the
//! protocol-neutral interface are defined in `granary-api` and re-exported
//! here unchanged, so a user of Silo needs only this crate. [`Database`]
//! implements [`Engine`] and [`Worker`] implements [`TxRunner`], so code
//! written against those traits (the workloads, the conformance tests)
//! runs on Silo and on every other design alike.
//!
//! # In memory
//!
//! ```
//! use granary::{Database, Options, TxError};
//! use std::ops::Bound;
//!
//! let db = Database::new(Options::default())?;
//! let t = db.create_table("kv")?;
//! let mut w = db.worker()?;
//! w.run(|tx| {
//!     for i in 0u32..5 {
//!         tx.insert(t, &i.to_be_bytes(), b"x")?;
//!     }
//!     Ok(())
//! })?;
//! // Inserting an existing key is an error, not a conflict.
//! let e = w.run(|tx| tx.insert(t, &3u32.to_be_bytes(), b"y"));
//! assert!(matches!(e, Err(granary::Error::KeyExists)));
//! let n = w.run(|tx| {
//!     let rows = tx.scan_collect(t, Bound::Included(&1u32.to_be_bytes()[..]), Bound::Unbounded, 10, false)?;
//!     Ok::<_, TxError>(rows.len())
//! })?;
//! assert_eq!(n, 4);
//! # Ok::<(), granary::Error>(())
//! ```
//!
//! # Durable
//!
//! ```
//! use granary::{Database, Options};
//! use std::time::Duration;
//!
//! let dir = std::env::temp_dir().join(format!("granary-doc-crate-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let opts = Options::default().epoch_interval(Duration::from_millis(5));
//! {
//!     let db = Database::open(&dir, opts.clone())?;
//!     let t = db.open_table("kv")?;
//!     // By default `run` returns once the commit is durable.
//!     db.worker()?.run(|tx| tx.put(t, b"k", b"v"))?;
//! }
//! // Opening the directory again recovers it.
//! let db = Database::open(&dir, opts)?;
//! let t = db.table("kv")?;
//! let v = db.worker()?.run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))?;
//! assert_eq!(v.as_deref(), Some(&b"v"[..]));
//! # drop(db);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), granary::Error>(())
//! ```

mod silo;

pub use silo::{durable, kv};

// The protocol-neutral vocabulary, re-exported (see "The shared
// vocabulary" above): each item keeps its own documentation.
pub use granary_api::{
    keys, ticks, AbortReason, Declared, Engine, Error, Interactive, InteractiveTx, Profile,
    ReadOnly, SecondaryIndex, Stats, TableId, TableOptions, Tx, TxError, TxRunner, MAX_KEY_BYTES,
    MAX_TABLE_NAME_BYTES, MAX_VALUE_BYTES,
};

pub use silo::db::Database;
pub use silo::options::{Options, RecoveryMode};
pub use silo::session::Session;
pub use silo::shared::MAX_TABLES;
pub use silo::snapshot::Snapshot;
pub use silo::tid::{Tid, SNAPSHOT_K};
pub use silo::txn::{KeyValue, Transaction};
pub use silo::worker::{CommitToken, Worker};

/// README.md's library examples, compiled and run as doctests so that
/// they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
