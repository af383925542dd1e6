//! `granary bench smallbank`: SmallBank (BOHM §4.3) on the shared driver,
//! with the money-conservation check afterwards.

use clap::{Args, ValueEnum};
use granary_workloads::driver::RunReport;
use granary_workloads::smallbank::{self, Mix, SmallBank, SmallBankConfig};
use serde::Serialize;

use crate::bench::{drive, CommonArgs};
use crate::protocol::WorkloadInfo;

#[derive(Clone, Copy, Debug, ValueEnum, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum MixArg {
    /// BOHM §4.3: Amalgamate, Balance, DepositChecking, TransactSavings,
    /// WriteCheck, 20% each (no SendPayment).
    Bohm,
    /// OLTPBench: Amalgamate 15, Balance 15, DepositChecking 15,
    /// SendPayment 25, TransactSavings 15, WriteCheck 15.
    Oltpbench,
}

#[derive(Args, Debug, Clone, Serialize)]
pub struct SmallbankArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Customers (rows per table); fewer means more contention. BOHM: 50
    /// (high contention) and 100000 (low).
    #[arg(long, default_value_t = 18_000)]
    pub customers: u64,
    /// Transaction mix.
    #[arg(long, value_enum, default_value = "bohm")]
    pub mix: MixArg,
    /// Busy-spin this many microseconds inside every transaction (BOHM: 50).
    #[arg(long, default_value_t = 0)]
    pub spin_us: u64,
    /// Hotspot: this many customers (the first ones) receive
    /// `--hotspot-pct` percent of customer choices. 0: no hotspot.
    #[arg(long, default_value_t = 0)]
    pub hotspot: u64,
    /// Percent of customer choices drawn from the hotspot.
    #[arg(long, default_value_t = 90)]
    pub hotspot_pct: u32,
}

pub fn run(a: SmallbankArgs) -> Result<RunReport, String> {
    let mut cfg = SmallBankConfig::new(a.customers);
    cfg.mix = match a.mix {
        MixArg::Bohm => Mix::Bohm,
        MixArg::Oltpbench => Mix::OltpBench,
    };
    cfg.spin_us = a.spin_us;
    cfg.hotspot_customers = a.hotspot;
    cfg.hotspot_pct = a.hotspot_pct;
    SmallBank::new(cfg.clone()).map_err(|e| e.to_string())?;
    let info = WorkloadInfo::partitioned("bench smallbank", smallbank::partitioning())
        .procedures(true, "");
    let make = |_| SmallBank::new(cfg.clone()).map_err(|e| e.to_string());
    drive("smallbank", make, info, &a.common, &a)
}
