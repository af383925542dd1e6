//! Deuteronomy's own flags (its TC's sizes, its data component and that
//! DC's settings) and how its TC is built over its DC: in memory, or
//! durable in a fresh directory, over memory, redb or etcd.

use clap::Args;
use serde::Serialize;

use super::options::{Dc, EngineOptions};
use crate::protocol::{DesignFlags, Protocol};

/// Why `--dc etcd` is refused by a build without the `etcd` feature, and
/// how to get one that has it.
pub const NO_ETCD: &str = "--dc etcd: this granary was built without the etcd data component. \
Rebuild with it (its build needs protoc: apt-get install protobuf-compiler libprotobuf-dev; \
a local etcd needs etcd-server): cargo install --path crates/cli --locked --features etcd";

/// Deuteronomy's transaction component and data component
/// (`--protocol deuteronomy`).
#[derive(Args, Debug, Clone, Serialize)]
pub struct TcArgs {
    /// The data component under Deuteronomy's TC.
    #[arg(long, value_enum, default_value = "memory")]
    pub dc: Dc,
    /// The TC's recovery log buffers in memory, in MiB (4 MiB each): the
    /// version cache that holds recent writes (deuteronomy-cidr15 §3.1).
    /// Writers shed load (abort as `overloaded`) while it is full.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    pub tc_log_mb: usize,
    /// MVCC entries (record items and versions) past which the TC trims
    /// the version lists of the records it touches (§6.5's soft
    /// watermark).
    #[arg(long, default_value_t = 1 << 20, value_name = "N")]
    pub tc_soft_versions: usize,
    /// MVCC entries past which the TC also sweeps its table, trimming
    /// every version the DC holds and evicting cold record items (§6.5's
    /// hard watermark).
    #[arg(long, default_value_t = 4 << 20, value_name = "N")]
    pub tc_hard_versions: usize,
    /// The TC's read cache, in MiB: versions read from the DC after their
    /// log buffer was recycled (§3.3). 0 turns it off.
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    pub tc_read_cache_mb: usize,
    /// The disk data component's page cache, in MiB.
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    pub dc_cache_mb: usize,
    /// `--dc etcd`: the client URLs of a running etcd cluster
    /// (http://host:port, comma-separated). Without it a local etcd is
    /// started for the run. Its keys go under `granary/<run>/` (removed
    /// afterwards), or `granary/<DIR>/` with `--durable DIR` (which must
    /// be empty there).
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    pub etcd_endpoints: Option<Vec<String>>,
}

impl TcArgs {
    /// The TC's configuration.
    ///
    /// # Errors
    /// Sizes that do not fit together.
    pub fn config(&self) -> Result<granary_protocols::deuteronomy::tc::Config, String> {
        if self.etcd_endpoints.is_some() && self.dc != Dc::Etcd {
            return Err("--etcd-endpoints is for --dc etcd".into());
        }
        if self.dc == Dc::Etcd && !cfg!(feature = "etcd") {
            return Err(NO_ETCD.into());
        }
        let d = granary_protocols::deuteronomy::tc::Config::default();
        let per = (d.buffer_bytes >> 20) as usize;
        let c = granary_protocols::deuteronomy::tc::Config {
            log_buffers: self.tc_log_mb / per,
            soft_versions: self.tc_soft_versions,
            hard_versions: self.tc_hard_versions,
            read_cache_bytes: self.tc_read_cache_mb.checked_mul(1 << 20).ok_or_else(|| {
                format!("--tc-read-cache-mb {} is too large", self.tc_read_cache_mb)
            })?,
            ..d
        };
        c.validate().map_err(|e| match e {
            granary_api::Error::InvalidOption(why) if c.log_buffers < 2 => {
                format!("--tc-log-mb {}: {why} of {per} MiB", self.tc_log_mb)
            }
            e => e.to_string(),
        })?;
        Ok(c)
    }
}

impl DesignFlags for TcArgs {
    const DESIGNS: &'static [Protocol] = &[Protocol::Deuteronomy];
}

impl EngineOptions<'_> {
    /// Deuteronomy's TC over its data component: in memory, or durable
    /// in a fresh directory (`--durable`; the disk DC's file and a local
    /// etcd's data are there). The disk and etcd DCs without `--durable`
    /// log to a scratch directory, removed afterwards.
    ///
    /// # Errors
    /// A directory that already holds something, an etcd that cannot be
    /// started or reached, or the TC's.
    pub fn deuteronomy(&self) -> Result<granary_protocols::deuteronomy::tc::Tc, String> {
        use granary_protocols::deuteronomy::{dc::MemoryDc, disk::DiskDc, tc::Tc};
        let dir = self.durable.and_then(|d| d.durable.as_deref());
        let mut config = self.tc;
        if let Some(s) = self.durable.and_then(|d| d.checkpoint_interval) {
            if !(s.is_finite() && s > 0.0) {
                return Err(format!("--checkpoint-interval must be positive, not {s}"));
            }
            config.checkpoint_ms = (s * 1000.0).ceil() as u64;
        }
        let Some(dir) = dir else {
            if self.dc == Dc::Memory {
                return Tc::with(config, Box::new(MemoryDc::new())).map_err(|e| e.to_string());
            }
            // Scratch: a fresh directory, removed afterwards.
            let dir = scratch_dir("granary-dc");
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let dc: Box<dyn granary_protocols::deuteronomy::dc::DataComponent> = match self.dc {
                Dc::Etcd => Box::new(self.etcd(None)?),
                _ => Box::new(
                    DiskDc::open(&dir.join("dc.redb"), self.dc_cache).map_err(|e| e.to_string())?,
                ),
            };
            return Tc::open(config, &dir, dc)
                .map(|(tc, _)| tc.scratch())
                .map_err(|e| e.to_string());
        };
        let used = std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some());
        if used {
            return Err(format!(
                "{} is not empty; --durable needs a new or empty directory",
                dir.display()
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let dc: Box<dyn granary_protocols::deuteronomy::dc::DataComponent> = match self.dc {
            Dc::Memory => Box::new(MemoryDc::new()),
            Dc::Disk => Box::new(
                DiskDc::open(&dir.join("dc.redb"), self.dc_cache).map_err(|e| e.to_string())?,
            ),
            Dc::Etcd => Box::new(self.etcd(Some(dir))?),
        };
        Tc::open(config, dir, dc)
            .map(|(tc, _)| tc)
            .map_err(|e| e.to_string())
    }

    /// The etcd DC of a fresh database: on `--etcd-endpoints` under a
    /// namespace of its own (the durable directory's, which must hold
    /// nothing yet, or a scratch one removed afterwards), else on a local
    /// etcd started in `DIR/etcd` (durable) or a scratch directory.
    ///
    /// # Errors
    /// etcd cannot be started or reached, or already holds data there.
    #[cfg(feature = "etcd")]
    fn etcd(&self, durable: Option<&std::path::Path>) -> Result<granary_etcd::EtcdDc, String> {
        use granary_etcd::{EtcdDc, EtcdOptions, EtcdServer};
        let Some(endpoints) = &self.etcd_endpoints else {
            let server = match durable {
                Some(dir) => EtcdServer::start(&dir.join("etcd")),
                None => EtcdServer::start(&scratch_dir("granary-etcd")).map(EtcdServer::scratch),
            }
            .map_err(|e| e.to_string())?;
            let dc = EtcdDc::connect(EtcdOptions::new(vec![server.endpoint()]))
                .map_err(|e| e.to_string())?;
            return Ok(dc.owning(server));
        };
        let namespace = match durable {
            Some(dir) => {
                let dir = dir
                    .canonicalize()
                    .map_err(|e| format!("{}: {e}", dir.display()))?;
                format!("granary/{}/", dir.display())
            }
            None => format!("granary/{}/", unique("run")),
        };
        let options = EtcdOptions {
            namespace: namespace.clone().into_bytes(),
            ..EtcdOptions::new(endpoints.clone())
        };
        let dc = EtcdDc::connect(options).map_err(|e| e.to_string())?;
        if !dc.is_empty().map_err(|e| e.to_string())? {
            return Err(format!(
                "etcd at {} already holds keys under {namespace:?}: a new database needs \
                 none there (etcdctl del --prefix {namespace:?} removes them)",
                endpoints.join(",")
            ));
        }
        Ok(match durable {
            Some(_) => dc,
            None => dc.scratch(),
        })
    }

    /// Without the `etcd` feature there is no etcd DC; `TcArgs::config`
    /// refuses `--dc etcd` before anything runs, so this is not reached.
    #[cfg(not(feature = "etcd"))]
    fn etcd(
        &self,
        _durable: Option<&std::path::Path>,
    ) -> Result<granary_protocols::deuteronomy::dc::MemoryDc, String> {
        Err(NO_ETCD.to_string())
    }
}

/// A name unique to this process and call: `{prefix}-{pid}-{n}-{µs}`.
fn unique(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("{prefix}-{}-{n}-{t}", std::process::id())
}

/// A fresh path in the temporary directory (removed first if it
/// exists).
fn scratch_dir(prefix: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique(prefix));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
