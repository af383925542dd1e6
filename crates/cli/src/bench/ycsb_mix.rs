//! `granary bench ycsb-mix`: the papers' YCSB variants as named presets of
//! one generator (`granary_workloads::ycsb`), run by the shared driver.
//! Every preset setting can be overridden by a flag.

use clap::{Args, ValueEnum};
use granary_workloads::ycsb::{self, Placement, WriteKind, Ycsb, YcsbConfig};
use serde::Serialize;

use crate::bench::common::{drive, CommonArgs};
use crate::protocol::WorkloadInfo;

#[derive(Clone, Copy, Debug, ValueEnum, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum WriteKindArg {
    /// Read the value, change it, write it back (the design's one-copy
    /// in-place update, `Tx::update`).
    Rmw,
    /// As rmw, but as a get, a copy and a put: what `Tx::update` is
    /// measured against.
    RmwGetPut,
    /// Read and change the counter alone (the value's first 8 bytes),
    /// through `Tx::update_field`: a design that overwrites records in
    /// place (Silo) copies those 8 bytes and touches no other line of
    /// the value.
    RmwField,
    /// Overwrite without reading.
    Blind,
}

#[derive(Clone, Copy, Debug, ValueEnum, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementArg {
    /// Scatter the Zipfian ranks over the key space (YCSB's scrambled
    /// generator does the same): hot keys land in different leaves.
    Spread,
    /// Rank r is key r: the hottest keys are neighbours in the index
    /// (CCBench and DBx1000 place them so).
    Adjacent,
}

#[derive(Args, Debug, Clone, Serialize)]
pub struct YcsbMixArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The preset: silo, silor, bohm-10rmw, bohm-2rmw8r, bohm-longread,
    /// deuteronomy, study.
    #[arg(long)]
    pub preset: String,
    /// Keys loaded.
    #[arg(long)]
    pub keys: Option<u64>,
    /// Value size in bytes (at least 8).
    #[arg(long)]
    pub value_bytes: Option<usize>,
    /// Zipfian θ in [0, 1); 0 is uniform.
    #[arg(long)]
    pub theta: Option<f64>,
    /// Where the Zipfian ranks land in the key space (no effect at θ = 0).
    #[arg(long, value_enum, default_value = "spread")]
    pub placement: PlacementArg,
    /// Bytes per key: 8 is the key's number as 8 big-endian bytes; any
    /// other length is YCSB's own form, `user` and the number zero-padded
    /// to that many bytes (24 gives YCSB's keys, which share their first
    /// 8 bytes and more), up to 256.
    #[arg(long, default_value_t = 8)]
    pub key_bytes: usize,
    /// Each operation is a read with this probability (percent).
    #[arg(long, conflicts_with = "writes_per_txn")]
    pub read_pct: Option<f64>,
    /// Exactly this many writes per transaction, the rest reads.
    #[arg(long)]
    pub writes_per_txn: Option<usize>,
    /// Operations per transaction (distinct keys).
    #[arg(long)]
    pub ops_per_txn: Option<usize>,
    /// Fraction of transactions that are long read-only transactions.
    #[arg(long)]
    pub long_read_fraction: Option<f64>,
    /// Keys each long read-only transaction reads.
    #[arg(long)]
    pub long_read_keys: Option<usize>,
    /// What writes do.
    #[arg(long, value_enum)]
    pub write_kind: Option<WriteKindArg>,
    /// Run long read-only transactions as snapshot transactions (Silo §4.9).
    #[arg(long)]
    pub snapshot_long_reads: bool,
}

/// The JSON `config`: the flags as given and the configuration they
/// resolved to.
#[derive(Serialize)]
struct Config<'a> {
    args: &'a YcsbMixArgs,
    resolved: &'a YcsbConfig,
    theta: f64,
}

pub fn run(a: YcsbMixArgs) -> Result<Vec<crate::interleave::Summary>, String> {
    let mut cfg = YcsbConfig::preset(&a.preset).map_err(|e| e.to_string())?;
    if let Some(n) = a.keys {
        cfg = cfg.keys(n);
    }
    if let Some(n) = a.value_bytes {
        cfg = cfg.value_bytes(n);
    }
    if let Some(t) = a.theta {
        crate::bench::common::check_theta(t)?;
        cfg = cfg.theta(t);
    }
    if let Some(p) = a.read_pct {
        cfg = cfg.read_pct(p);
    }
    if let Some(w) = a.writes_per_txn {
        cfg = cfg.writes_per_txn(w);
    }
    if let Some(n) = a.ops_per_txn {
        cfg = cfg.ops_per_txn(n);
    }
    if let Some(f) = a.long_read_fraction {
        cfg = cfg.long_read_fraction(f);
    }
    if let Some(n) = a.long_read_keys {
        cfg = cfg.long_read_keys(n);
    }
    if let Some(k) = a.write_kind {
        cfg = cfg.write_kind(match k {
            WriteKindArg::Rmw => WriteKind::Rmw,
            WriteKindArg::RmwGetPut => WriteKind::RmwGetPut,
            WriteKindArg::RmwField => WriteKind::RmwField,
            WriteKindArg::Blind => WriteKind::Blind,
        });
    }
    if a.snapshot_long_reads {
        cfg = cfg.snapshot_long_reads(true);
    }
    cfg = cfg.key_bytes(a.key_bytes).placement(match a.placement {
        PlacementArg::Spread => Placement::Spread,
        PlacementArg::Adjacent => Placement::Adjacent,
    });
    let w = Ycsb::new(cfg.clone()).map_err(|e| e.to_string())?;
    // In the flags' own words, so the line can be typed back.
    let mix = match cfg.mix {
        granary_workloads::ycsb::OpMix::PerOp { read_pct } => format!("--read-pct {read_pct}"),
        granary_workloads::ycsb::OpMix::Fixed { writes } => format!("--writes-per-txn {writes}"),
    };
    let kind = serde_json::to_value(cfg.write_kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let placement = match cfg.placement {
        Placement::Spread => "spread",
        Placement::Adjacent => "adjacent",
    };
    let about = format!(
        "--preset {} --keys {} --key-bytes {} --value-bytes {} --ops-per-txn {} {mix} \
         --write-kind {kind} --theta {:.4} --placement {placement} --long-read-fraction {}",
        cfg.preset,
        cfg.keys,
        cfg.key_bytes,
        cfg.value_bytes,
        cfg.ops_per_txn,
        w.theta(),
        cfg.long_read_fraction,
    );
    let config = Config {
        args: &a,
        resolved: &cfg,
        theta: w.theta(),
    };
    // Long reads are point reads of declared keys: every transaction's
    // keys hash to their partitions (a range scan would have none).
    let info = WorkloadInfo::partitioned("bench ycsb-mix", ycsb::partitioning()).procedures(
        cfg.long_read_fraction == 0.0 || !cfg.snapshot_long_reads,
        "its long reads are snapshot reads (--snapshot-long-reads), which run on the client's \
         thread; BOHM's own reads never block or abort writers: drop the flag",
    );
    crate::guard::fits(
        &a.common.protocol,
        crate::guard::Data::Records {
            count: cfg.keys,
            bytes: (cfg.key_bytes + cfg.value_bytes) as u64 + 64,
        },
        &format!(
            "--keys {} of --key-bytes {} and --value-bytes {}",
            cfg.keys, cfg.key_bytes, cfg.value_bytes
        ),
    )?;
    let make = |_| Ycsb::new(cfg.clone()).map_err(|e| e.to_string());
    drive("ycsb-mix", &about, make, info, &a.common, &config)
}
