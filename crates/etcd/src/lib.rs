//! Deuteronomy's etcd data component (deuteronomy-cidr15 §1, §4): the
//! TC's records kept in an etcd cluster, so that the data component is a
//! separate, replicated service — the paper's "cloud" deployment, where
//! the TC and its DCs talk over a network.
//!
//! * [`EtcdDc`] implements granary's
//!   [`DataComponent`](granary_protocols::deuteronomy::dc::DataComponent)
//!   over etcd's v3 API: records under one key prefix per table, each
//!   value with the LSN that wrote it; the TC Proxy's batches applied as
//!   etcd transactions, cut to etcd's limits and several in flight at
//!   once; unavailability retried for a bounded time, then a typed error
//!   (see `dc`'s notes and docs/ARCHITECTURE.md).
//! * [`EtcdServer`] starts a local single-node etcd (Debian's
//!   `etcd-server`) for tests and for the `granary` command, and can kill
//!   and restart it.
//!
//! The key and value layout is in `keys`.

#![deny(unsafe_code)]

mod dc;
mod keys;
mod server;

pub use dc::{EtcdDc, EtcdOptions};
pub use server::EtcdServer;
