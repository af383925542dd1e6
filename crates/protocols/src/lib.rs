//! granary-protocols: the designs granary measures Silo against, each one
//! module behind the protocol-neutral traits of `granary-api`
//! ([`Engine`](granary_api::Engine), [`TxRunner`](granary_api::TxRunner),
//! [`Tx`](granary_api::Tx)).
//!
//! The `granary` command runs them by name (`--protocol`) on the same
//! workloads and driver as Silo, and each one's tests instantiate the
//! shared correctness suite (`granary-conformance`) and the
//! serializability checker. `docs/ARCHITECTURE.md` ("The other designs")
//! describes each one and where it deviates from its paper.
//!
//! # Where to start
//!
//! Each design is one engine type; make one, create tables and take a
//! runner per thread, as with any [`Engine`](granary_api::Engine):
//!
//! * [`two_pl::TwoPl`]: strict two-phase locking, in two variants:
//!   **ordered** (BOHM §4's baseline: locks taken up front in one global
//!   key order from the declared read and write sets, so it never
//!   deadlocks) and **no-wait** (a lock held by another transaction aborts
//!   the requester, which retries after a backoff).
//! * [`partitioned::Partitioned`]: Partitioned-Store (Silo §5.4): one
//!   spinlock per partition of the workload's partition key, taken in
//!   order before the body runs, and per-partition trees touched only
//!   under their lock.
//! * [`hekaton::Hekaton`], [`si::Si`] and [`ermia::Ermia`]: one
//!   multiversion store ([`mvcc::Mvcc`], a global timestamp counter, first
//!   updater wins) certified at commit by Hekaton's read validation, by
//!   nothing (Snapshot Isolation), or by ERMIA's Serial Safety Net (SI
//!   made serializable).
//! * [`bohm::Bohm`]: BOHM: procedures sequenced into batches, planned by
//!   concurrency-control threads that own key partitions, and run by
//!   execution threads against the versions planned for them.
//! * [`deuteronomy::tc::Tc`]: Deuteronomy's transaction component:
//!   timestamp-order MVCC whose versions are redo records in its recovery
//!   log, over a data component ([`deuteronomy::dc::DataComponent`]) kept
//!   in memory ([`deuteronomy::dc::MemoryDc`]), in redb
//!   ([`deuteronomy::disk::DiskDc`]) or in etcd (`granary-etcd`).
//!   [`Tc::open`](deuteronomy::tc::Tc::open) makes it durable;
//!   `docs/FORMAT.md` describes its log and recovery.
//!
//! Papers, by title: "Speedy Transactions in Multicore In-Memory
//! Databases" (Silo, SOSP 2013); "Rethinking serializable multiversion
//! concurrency control" (BOHM, VLDB 2015); "High-Performance Concurrency
//! Control Mechanisms for Main-Memory Databases" (Hekaton's scheme,
//! Larson et al., PVLDB 2011); "ERMIA: Fast Memory-Optimized Database
//! System for Heterogeneous Workloads" (SIGMOD 2016) and "Efficiently
//! making (almost) any concurrency control mechanism serializable" (the
//! Serial Safety Net, VLDB Journal 2017); "High Performance Transactions
//! in Deuteronomy" (CIDR 2015).
//!
//! A design here depends on `granary-api`, the index (`granary-index`,
//! whose `Tree<V>` maps keys to each design's own record pointers) and the shared pieces of this crate's root ([`Catalog`] of
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
pub mod ermia;
pub mod hekaton;
pub mod mvcc;
pub mod partitioned;
mod reclaim;
mod scan;
pub mod si;
mod sync;
pub mod two_pl;
mod value;

pub use catalog::Catalog;
