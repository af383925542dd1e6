//! `granary bench tpcc`: TPC-C's flags and its run through the shared
//! driver.

use clap::{Args, ValueEnum};
use granary_workloads::tpcc::{self, Mix, Tpcc, TpccConfig, MAX_WAREHOUSES};
use serde::Serialize;

use super::common::{check_common, drive, flag_value, CommonArgs};
use crate::interleave::Summary;
use crate::protocol::WorkloadInfo;

#[derive(Clone, Copy, Debug, ValueEnum, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum MixArg {
    /// 45% new-order, 43% payment, 4% order-status, 4% delivery, 4%
    /// stock-level.
    Standard,
    /// New-order only (Silo Fig. 8).
    NewOrder,
    /// 50% new-order, 50% stock-level (Silo Fig. 10).
    NewOrderStockLevel,
}

#[derive(Args, Debug, Clone, Serialize)]
pub struct TpccArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Warehouses (default: one per thread).
    #[arg(long)]
    pub warehouses: Option<u32>,
    /// Transaction mix.
    #[arg(long, value_enum, default_value = "standard")]
    pub mix: MixArg,
    /// Percent of new-order items supplied by a remote warehouse.
    #[arg(long, default_value_t = 1.0)]
    pub remote_item_pct: f64,
    /// Percent of payments by a customer of a remote warehouse.
    #[arg(long, default_value_t = 15)]
    pub remote_payment_pct: u32,
    /// Take order ids from per-district counters outside the transaction
    /// (Silo's FastIds).
    #[arg(long)]
    pub fast_ids: bool,
    /// Run stock-level as a read-only snapshot transaction.
    #[arg(long)]
    pub snapshot_stock_level: bool,
    /// Do not bind threads to home warehouses; pick one per transaction.
    #[arg(long)]
    pub no_bind: bool,
    /// Split STOCK as Silo's tpcc.cc does: the four columns new-order
    /// changes (20 bytes) in `stock`, S_DIST_xx and S_DATA in `stock_data`,
    /// which new-order only reads. New-order then writes, and logs, about
    /// 2.9 KB less. A durable directory keeps the layout it was loaded
    /// with: reopening it with the other one is an error.
    #[arg(long)]
    pub split_stock: bool,
}

pub fn run(a: TpccArgs) -> Result<Vec<Summary>, String> {
    // Before the warehouse count, which defaults to the thread count: an
    // error names the flag the user set.
    check_common(&a.common)?;
    if a.snapshot_stock_level && a.common.silo.no_snapshots {
        return Err("--snapshot-stock-level needs snapshots: drop --no-snapshots".into());
    }
    let warehouses = match a.warehouses {
        Some(w) if w == 0 || w > MAX_WAREHOUSES => {
            return Err(format!(
                "--warehouses must be between 1 and {MAX_WAREHOUSES}, got {w}"
            ))
        }
        Some(w) => w,
        None if a.common.threads > MAX_WAREHOUSES as usize => {
            return Err(format!(
                "--threads {} needs --warehouses: one warehouse per thread is more than {MAX_WAREHOUSES}",
                a.common.threads
            ))
        }
        None => a.common.threads as u32,
    };
    let flag = match a.warehouses {
        Some(w) => format!("--warehouses {w}"),
        None => format!("--threads {warehouses} (a warehouse per thread)"),
    };
    crate::guard::fits(
        &a.common.protocol,
        crate::guard::Data::Warehouses(warehouses.into()),
        &flag,
    )?;
    let mut cfg = TpccConfig::new(warehouses);
    cfg.mix = match a.mix {
        MixArg::Standard => Mix::Standard,
        MixArg::NewOrder => Mix::NewOrderOnly,
        MixArg::NewOrderStockLevel => Mix::NewOrderStockLevel,
    };
    cfg.remote_item_pct = a.remote_item_pct;
    cfg.remote_payment_pct = a.remote_payment_pct;
    cfg.fast_ids = a.fast_ids;
    cfg.snapshot_stock_level = a.snapshot_stock_level;
    cfg.bind_warehouses = !a.no_bind;
    cfg.split_stock = a.split_stock;
    // Checked once here, so that a bad configuration is reported before
    // any protocol is.
    Tpcc::new(cfg.clone()).map_err(|e| e.to_string())?;
    // Its transactions are procedures; under a design that needs write
    // sets up front, the ones whose writes depend on reads are predicted
    // by reconnaissance.
    let info = WorkloadInfo::partitioned("bench tpcc", tpcc::partitioning())
        .partition_values(warehouses as usize)
        .procedures(true, "");
    let make = |_| Tpcc::new(cfg.clone()).map_err(|e| e.to_string());
    let mut about = format!(
        "--warehouses {warehouses} --mix {} --remote-item-pct {} --remote-payment-pct {}",
        flag_value(&a.mix),
        a.remote_item_pct,
        a.remote_payment_pct
    );
    for (set, flag) in [
        (a.fast_ids, "--fast-ids"),
        (a.snapshot_stock_level, "--snapshot-stock-level"),
        (a.no_bind, "--no-bind"),
        (a.split_stock, "--split-stock"),
    ] {
        if set {
            about += " ";
            about += flag;
        }
    }
    drive("tpcc", &about, make, info, &a.common, &a)
}
