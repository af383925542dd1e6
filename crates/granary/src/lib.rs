//! granary: a multicore in-memory serializable transaction engine — Silo's
//! optimistic concurrency control (SOSP'13) over a Masstree-style index.
//!
//! * [`Database`] holds tables ([`TableId`]) and runs the epoch thread.
//! * Each thread takes a [`Worker`] and runs one-shot transactions as
//!   closures: [`Worker::run`] retries conflicts, [`Worker::try_run`] runs
//!   once, [`Worker::snapshot`] reads a consistent recent snapshot and
//!   never aborts.
//! * Inside, a [`Transaction`] offers `get`, `put`, `insert`, `delete` and
//!   `scan` over byte keys and values; [`keys`] encodes composite keys in
//!   order; [`SecondaryIndex`] keeps a secondary index in step.
//! * Errors are typed ([`Error`]); conflicts are outcomes
//!   ([`AbortReason`]), counted per worker ([`Stats`]).
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

mod db;
pub mod durable;
mod epoch;
mod gc;
mod install;
pub mod kv;
mod options;
mod pin;
mod record;
mod session;
mod shared;
mod snapshot;
mod sync;
mod tid;
mod tx;
mod txn;
mod worker;

/// The protocol-neutral vocabulary (`granary-api`), re-exported: Silo
/// implements it, and a user of Silo alone needs only this crate.
pub use granary_api::{
    keys, ticks, AbortReason, Declared, Engine, Error, Interactive, InteractiveTx, Profile,
    ReadOnly, SecondaryIndex, Stats, TableId, TableOptions, Tx, TxError, TxRunner, MAX_KEY_BYTES,
    MAX_TABLE_NAME_BYTES, MAX_VALUE_BYTES,
};

pub use db::Database;
pub use options::{Options, RecoveryMode};
pub use session::Session;
pub use shared::MAX_TABLES;
pub use snapshot::Snapshot;
pub use tid::{Tid, SNAPSHOT_K};
pub use txn::{KeyValue, Transaction};
pub use worker::{CommitToken, Worker};

/// The shared vocabulary under the paths the engine's modules use.
mod error {
    pub use granary_api::{AbortReason, Error, TxError};
}
