//! granary-api: the protocol-neutral vocabulary of granary.
//!
//! granary runs several concurrency-control designs (Silo, and the rivals
//! and baselines of its papers) on the same workloads, checked and measured
//! side by side. Each design implements the traits here: Silo in the
//! `granary` crate, the others in `granary-protocols`. The workloads and
//! the history recorder (`granary-workloads`), the correctness suite
//! (`granary-conformance`) and the `granary` command are written once
//! against them. This crate depends on nothing: a design depends on it,
//! the index (`granary-index`) and shared reclamation, never on another
//! design. `docs/ARCHITECTURE.md` explains the interface's shape.
//!
//! # Where to start
//!
//! An [`Engine`] is a database running some design: it makes tables
//! ([`Engine::create_table`]) and one [`TxRunner`] per worker thread
//! ([`Engine::runner`]). A runner runs a procedure, a closure over a
//! [`Tx`], once ([`TxRunner::try_run`]): a conflict comes back as an
//! [`AbortReason`] for the caller to retry, a failure as an [`Error`].
//!
//! * [`Tx`]: the operations of a one-shot procedure (get, put, insert,
//!   delete, scan) over byte keys and values in tables ([`TableId`]);
//!   [`ReadOnly`]: the object-safe read side.
//! * [`TxRunner`]: how a worker thread runs a procedure once, with its
//!   counters ([`Stats`], an optional [`Profile`]). A durable design says
//!   when a commit is durable: once [`Engine::durable_epoch`] reaches the
//!   runner's [`TxRunner::durable_token`].
//! * [`Interactive`] / [`InteractiveTx`]: transactions held open across
//!   calls and stepped by the caller (the scripted isolation tests), for
//!   designs that can run them; a session never waits for another.
//! * [`Declared`]: a procedure's read and write sets, for designs that plan
//!   or lock up front.
//! * [`Procedure`] / [`Body`]: a transaction as a value that can cross
//!   threads, for pipelined designs (BOHM); a client keeps
//!   [`TxRunner::window`] of them in flight.
//! * [`Error`], [`TxError`] and [`AbortReason`]: failures are errors,
//!   conflicts are outcomes, counted by reason.
//! * [`keys`]: order-preserving composite keys; [`SecondaryIndex`]: a
//!   non-unique secondary index as a table of its own.
//!
//! * [`retry`]: a bounded retry loop with backoff, for a conflict that
//!   should be retried.
//!
//! ```
//! use granary_api::{retry, Engine, Tx, TxError, TxRunner};
//!
//! /// Move `amount` from `a` to `b`, on any design: each conflict is
//! /// retried after a backoff, up to `retry::MAX_ATTEMPTS` in a row.
//! fn transfer<E: Engine>(db: &E, t: granary_api::TableId, a: &[u8], b: &[u8], amount: u64)
//!     -> Result<(), granary_api::Error> {
//!     let mut w = db.runner()?;
//!     retry::until_committed(retry::MAX_ATTEMPTS, || {
//!         w.try_run(|tx| {
//!             let get = |v: Option<&[u8]>| v.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
//!             let x = get(tx.get(t, a)?);
//!             tx.put(t, a, &(x - amount).to_be_bytes())?;
//!             let y = get(tx.get(t, b)?);
//!             tx.put(t, b, &(y + amount).to_be_bytes())
//!         })
//!     })
//! }
//! ```
#![deny(unsafe_code)]

mod engine;
mod error;
mod hints;
mod interactive;
pub mod keys;
pub mod limits;
mod procedure;
pub mod retry;
mod secondary;
mod stats;
mod tx;

pub use engine::{CheckpointSpan, Engine, TableOptions, TxRunner, MAX_CHECKPOINT_SPANS};
pub use error::{AbortReason, Error, TxError};
pub use hints::{append_bytes, prefetch_for_write, table_runs, Hints};
pub use interactive::{Interactive, InteractiveTx};
pub use procedure::{Body, Done, Procedure};
pub use secondary::SecondaryIndex;
pub use stats::{ns_per_tick, ticks, ticks_in, Profile, Stamp, Stats};
pub use tx::{field_within, Declared, PartitionRule, Partitioning, ReadOnly, Tx};

/// The longest key every design accepts, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// The longest value every design accepts, in bytes.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// The longest table name every design accepts, in bytes.
pub const MAX_TABLE_NAME_BYTES: usize = 1024;

/// A table's handle: a small copyable id, valid for the database that
/// created it. A design numbers its tables `0, 1, 2, …` in creation order
/// and makes ids with [`TableId::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub u32);

impl TableId {
    /// The id of the `index`th table created.
    pub const fn new(index: u32) -> TableId {
        TableId(index)
    }

    /// The table's index in its database.
    pub const fn index(self) -> u32 {
        self.0
    }
}
