//! granary-protocols: the designs granary measures Silo against, each one
//! module behind the protocol-neutral traits of `granary-api`.
//!
//! * [`two_pl`]: strict two-phase locking, in two variants: **ordered**
//!   (BOHM §4's baseline: locks taken up front in one global key order
//!   from the declared read and write sets, so it never deadlocks) and
//!   **no-wait** (a lock held by another transaction aborts the
//!   requester, which retries after a backoff).
//! * [`partitioned`]: Partitioned-Store (Silo §5.4): one spinlock per
//!   partition of the workload's partition key, taken in order before the
//!   body runs, and per-partition trees touched only under their lock.
//! * [`mvcc`]: one multiversion store with a global timestamp counter,
//!   run as Hekaton's optimistic serializable scheme or as Snapshot
//!   Isolation (first updater wins, no read validation).
//! * [`bohm`]: BOHM (in progress): procedures sequenced into batches,
//!   planned by concurrency-control threads that own key partitions, and
//!   run by execution threads against the versions planned for them.
//! * [`deuteronomy`]: Deuteronomy's transaction component (not a protocol
//!   yet: its pieces so far).
//!
//! A design here depends on `granary-api`, the index (`granary-index`,
//! which maps keys to a `u64` that each design uses for its own record
//! type) and the shared pieces of this crate's root ([`Catalog`] of
//! tables, epoch-based reclamation), never on Silo (`granary`) or on
//! another design's module.
//!
//! ```
//! use granary_api::{Engine, Tx, TxRunner};
//! use granary_protocols::two_pl::{TwoPl, Variant};
//!
//! let db = TwoPl::new(Variant::NoWait);
//! let t = db.create_table("accounts").unwrap();
//! let mut w = db.runner().unwrap();
//! w.try_run(|tx| tx.put(t, b"alice", b"10")).unwrap().unwrap();
//! let v = w.try_run(|tx| Ok(tx.get(t, b"alice")?.map(<[u8]>::to_vec))).unwrap().unwrap();
//! assert_eq!(v.as_deref(), Some(&b"10"[..]));
//! ```

pub mod bohm;
mod catalog;
pub mod deuteronomy;
mod limits;
pub mod mvcc;
pub mod partitioned;
mod reclaim;
mod scan;
mod sync;
pub mod two_pl;
mod value;

pub use catalog::Catalog;
