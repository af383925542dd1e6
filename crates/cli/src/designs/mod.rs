//! Each design's own flags and how its engine is built, one file per
//! design that has flags of its own (`silo.rs`, `bohm.rs`,
//! `deuteronomy.rs`); `durable.rs` holds the durability flags that Silo
//! and Deuteronomy share. [`EngineOptions`] gathers what every engine is
//! built from, and [`crate::protocol::with_engine!`] builds the one a
//! run names. Which flags apply to which design is declared with each
//! group ([`crate::flags::DesignFlags`]), so a flag is never silently
//! ignored.

use granary::Options;
use granary_api::Partitioning;

pub mod bohm;
pub mod deuteronomy;
pub mod durable;
pub mod silo;

pub use bohm::BohmArgs;
pub use deuteronomy::{Dc, TcArgs};
pub(crate) use durable::print_durability;
pub use durable::DurableArgs;
pub(crate) use silo::print_logging;
pub use silo::{Kv, SiloArgs};

use crate::protocol::WorkloadInfo;

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
    pub dc: crate::designs::Dc,
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
            dc: crate::designs::Dc::Memory,
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

/// 2PL of `variant`, with point indexes if `--point-index`.
pub fn two_pl(
    opts: &EngineOptions<'_>,
    variant: granary_protocols::two_pl::Variant,
) -> granary_protocols::two_pl::TwoPl {
    use granary_protocols::two_pl::TwoPl;
    if opts.point_index {
        TwoPl::with_point_index(variant)
    } else {
        TwoPl::new(variant)
    }
}

/// The multiversion store at `isolation`, with point indexes if
/// `--point-index`.
pub fn mvcc(
    opts: &EngineOptions<'_>,
    isolation: granary_protocols::mvcc::Isolation,
) -> granary_protocols::mvcc::Mvcc {
    use granary_protocols::mvcc::Mvcc;
    if opts.point_index {
        Mvcc::with_point_index(isolation)
    } else {
        Mvcc::new(isolation)
    }
}
