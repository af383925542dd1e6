//! granary-etcd: Deuteronomy's data component over etcd ("High
//! Performance Transactions in Deuteronomy", CIDR 2015, §1, §4): the TC's
//! records kept in an etcd cluster, so that the data component is a
//! separate, replicated service — the paper's "cloud" deployment, where
//! the TC and its DCs talk over a network.
//!
//! The `granary` command uses it for `--protocol deuteronomy --dc etcd`
//! (in builds with its `etcd` feature); its own tests check the DC
//! contract and run the TC over it against a local etcd. Building it
//! needs `protoc` (Debian's `protobuf-compiler`); a local etcd needs
//! Debian's `etcd-server`.
//!
//! # Where to start
//!
//! * [`EtcdDc`] implements granary's
//!   [`DataComponent`](granary_protocols::deuteronomy::dc::DataComponent)
//!   over etcd's v3 API: records under one key prefix per table, each
//!   value with the LSN that wrote it; the TC Proxy's batches applied as
//!   etcd transactions, cut to etcd's limits and several in flight at
//!   once; unavailability retried for a bounded time, then a typed error.
//!   [`EtcdDc::connect`] makes one from [`EtcdOptions`].
//! * [`EtcdServer`] starts a local single-node etcd for tests and for the
//!   `granary` command ([`EtcdServer::start`]), and can kill and restart
//!   it.
//!
//! `docs/FORMAT.md` ("Deuteronomy: the etcd DC") gives the key and value
//! layout; `docs/ARCHITECTURE.md` ("Deuteronomy") the design and its
//! measurements.
//!
//! ```no_run
//! use granary_api::{Engine, Tx, TxRunner};
//! use granary_etcd::{EtcdDc, EtcdOptions, EtcdServer};
//! use granary_protocols::deuteronomy::tc::{Config, Tc};
//! use std::path::Path;
//!
//! let dir = Path::new("/tmp/granary-etcd-example");
//! let server = EtcdServer::start(&dir.join("etcd"))?;
//! let dc = EtcdDc::connect(EtcdOptions::new(vec![server.endpoint()]))?.owning(server);
//! // A durable TC: its log in `dir`, its records in etcd.
//! let (tc, _recovery) = Tc::open(Config::default(), dir, Box::new(dc))?;
//! let t = tc.create_table("kv")?;
//! let mut w = tc.runner()?;
//! let committed = w.try_run(|tx| tx.put(t, b"k", b"v"))?;
//! assert!(committed.is_ok());
//! # Ok::<(), granary_api::Error>(())
//! ```

#![deny(unsafe_code)]

mod dc;
mod keys;
mod server;

pub use dc::{EtcdDc, EtcdOptions};
pub use server::EtcdServer;
