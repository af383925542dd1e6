//! Silo (SOSP 2013), the default design: optimistic concurrency control
//! with decentralized epoch-based transaction ids (`tid`, `epoch`), records
//! behind the shared index (`record`), read/write transactions (`txn`),
//! snapshot transactions (`snapshot`), epoch-based garbage collection
//! (`gc`), and SiloR's durability (`durable`). The crate root re-exports
//! what users see ([`crate::Database`], [`crate::Worker`],
//! [`crate::Transaction`], …).

pub(crate) mod db;
pub mod durable;
mod epoch;
mod gc;
mod install;
pub mod kv;
pub(crate) mod options;
mod pin;
mod record;
pub(crate) mod session;
pub(crate) mod shared;
pub(crate) mod snapshot;
mod sync;
pub(crate) mod tid;
mod tx;
pub(crate) mod txn;
pub(crate) mod worker;

/// The shared vocabulary under the paths the engine's modules use.
mod error {
    pub use granary_api::{AbortReason, Error, TxError};
}
