//! [`EngineOptions`]: what every engine is built from, each design taking
//! what applies to it; and [`Dc`], Deuteronomy's data component choice.

use granary::Options;
use granary_api::Partitioning;
use serde::Serialize;

use super::durable::DurableArgs;
use crate::protocol::WorkloadInfo;

/// Deuteronomy's data component (`--dc`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dc {
    /// granary's own index, in memory.
    Memory,
    /// redb, a pure-Rust embedded B-tree store, in `--durable DIR` (or a
    /// scratch directory, removed afterwards); its page cache is
    /// `--dc-cache-mb`.
    Disk,
    /// An etcd cluster: the one at `--etcd-endpoints`, or a local
    /// single-node etcd (Debian's etcd-server) started in `DIR/etcd` with `--durable
    /// DIR` (kept with the log), else in a scratch directory.
    Etcd,
}

/// What engines are built from; each design takes what applies to it.
pub struct EngineOptions<'a> {
    /// Worker threads of the run (a design may size itself by them).
    #[allow(dead_code)] // for the designs of granary-protocols
    pub threads: usize,
    /// How many partitions suit the workload: the number of values its
    /// partition key takes where that is small (TPC-C's warehouses), else
    /// the thread count.
    pub partitions: usize,
    /// Silo's options (kv's too: it is Silo's index).
    pub silo: Options,
    /// `--durable` and its flags (Silo only; `None`: in memory).
    pub durable: Option<&'a DurableArgs>,
    /// The workload's partitioning, if it has one.
    pub partitioning: Option<Partitioning>,
    /// Point indexes for tables hinted `TableOptions::point_lookups`
    /// (`--point-index`; Silo's own switch is `silo.point_index`).
    pub point_index: bool,
    /// BOHM's threads and batch size.
    pub bohm: granary_protocols::bohm::Config,
    /// Deuteronomy's TC sizes, its data component, that DC's page cache
    /// in bytes (the disk DC's), and the etcd DC's cluster (`None`: a
    /// local etcd).
    pub tc: granary_protocols::deuteronomy::tc::Config,
    pub dc: Dc,
    pub dc_cache: usize,
    pub etcd_endpoints: Option<Vec<String>>,
}

impl<'a> EngineOptions<'a> {
    /// Options for running `w` with `threads` threads, Silo's `silo`, and
    /// `durable`'s flags.
    pub fn new(
        w: &WorkloadInfo,
        threads: usize,
        silo: Options,
        durable: Option<&'a DurableArgs>,
    ) -> Self {
        EngineOptions {
            point_index: silo.point_index,
            threads,
            partitions: w.partition_values.unwrap_or(threads).max(1),
            silo,
            durable,
            partitioning: w.partitioned,
            bohm: granary_protocols::bohm::Config::default(),
            tc: granary_protocols::deuteronomy::tc::Config::default(),
            dc: Dc::Memory,
            dc_cache: 64 << 20,
            etcd_endpoints: None,
        }
    }
}

impl EngineOptions<'_> {
    /// The workload's partitioning, for designs that need one (their
    /// [`Traits::needs_partition_key`] keeps others from getting here).
    ///
    /// # Errors
    /// A workload without one.
    pub fn partitioning(&self) -> Result<Partitioning, String> {
        self.partitioning
            .ok_or_else(|| "this workload has no partition key".to_string())
    }
}
