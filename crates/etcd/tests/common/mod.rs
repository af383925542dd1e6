//! What the etcd tests share: a local etcd in a fresh temporary
//! directory, and options sized for tests.

#![allow(dead_code)] // each test binary uses its own part

use std::path::PathBuf;

use granary_etcd::{EtcdOptions, EtcdServer};

/// A fresh directory for test `name` (removed by the server's `scratch`,
/// or by the test).
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("granary-etcd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A local etcd for test `name`, its directory removed when dropped.
pub fn server(name: &str) -> EtcdServer {
    EtcdServer::start(&temp_dir(name))
        .expect("start etcd (Debian's etcd-server)")
        .scratch()
}

/// Options for `server`, retrying for `retry_ms`.
pub fn options(server: &EtcdServer, retry_ms: u64) -> EtcdOptions {
    EtcdOptions {
        retry_for_ms: retry_ms,
        ..EtcdOptions::new(vec![server.endpoint()])
    }
}
