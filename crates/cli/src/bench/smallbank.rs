//! `granary bench smallbank`: SmallBank (BOHM §4.3) on the shared driver,
//! with the money-conservation check afterwards.

use std::time::Duration;

use clap::{Args, ValueEnum};
use granary_workloads::smallbank::{self, Mix, SmallBank, SmallBankConfig};
use serde::Serialize;

use crate::bench::common::{drive, CommonArgs};
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
    /// Busy-spin this many microseconds inside every transaction (BOHM's
    /// paper: 50; the BOHM authors' code spins 10,000 `nop`s, about 2.35 µs
    /// on a 4 GHz core). Fractions are allowed, to the nanosecond: 2.35.
    #[arg(long, default_value = "0", value_parser = parse_spin_us)]
    #[serde(serialize_with = "as_micros")]
    pub spin_us: Duration,
    /// Hotspot: this many customers (the first ones) receive
    /// `--hotspot-pct` percent of customer choices. 0: no hotspot.
    #[arg(long, default_value_t = 0)]
    pub hotspot: u64,
    /// Percent of customer choices drawn from the hotspot.
    #[arg(long, default_value_t = 90)]
    pub hotspot_pct: u32,
    /// Transactions take customer ids and skip the lookup of the
    /// customer's name in `account`, as the BOHM authors' code does (its
    /// SmallBank has only savings and checking). Use it to compare with
    /// that code. Default: every transaction first resolves names, as in
    /// Cahill's SmallBank.
    #[arg(long)]
    pub by_id: bool,
}

/// The spin in the JSON's config: microseconds, as given.
fn as_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_nanos() as f64 / 1000.0)
}

/// `--spin-us`: microseconds, fractions allowed, at most one second.
fn parse_spin_us(s: &str) -> Result<Duration, String> {
    let us: f64 = s
        .parse()
        .map_err(|_| format!("not a number of microseconds: {s:?}"))?;
    if !(0.0..=1e6).contains(&us) {
        return Err(format!(
            "must be between 0 and 1000000 microseconds, got {s}"
        ));
    }
    Ok(Duration::from_nanos((us * 1000.0).round() as u64))
}

pub fn run(a: SmallbankArgs) -> Result<Vec<crate::interleave::Summary>, String> {
    let mut cfg = SmallBankConfig::new(a.customers);
    cfg.mix = match a.mix {
        MixArg::Bohm => Mix::Bohm,
        MixArg::Oltpbench => Mix::OltpBench,
    };
    cfg.spin = a.spin_us;
    cfg.hotspot_customers = a.hotspot;
    cfg.hotspot_pct = a.hotspot_pct;
    cfg.by_id = a.by_id;
    SmallBank::new(cfg.clone()).map_err(|e| e.to_string())?;
    let info = WorkloadInfo::partitioned("bench smallbank", smallbank::partitioning())
        .procedures(true, "");
    // About 1.2 KB resident per customer (two accounts, a name).
    crate::guard::fits(
        &a.common.protocol,
        crate::guard::Data::Records {
            count: a.customers,
            bytes: 1200,
        },
        &format!("--customers {}", a.customers),
    )?;
    let make = |_| SmallBank::new(cfg.clone()).map_err(|e| e.to_string());
    let mut about = format!(
        "--customers {} --mix {}",
        a.customers,
        crate::bench::common::flag_value(&a.mix)
    );
    if !a.spin_us.is_zero() {
        about += &format!(" --spin-us {}", a.spin_us.as_micros());
    }
    if a.hotspot > 0 {
        about += &format!(" --hotspot {} --hotspot-pct {}", a.hotspot, a.hotspot_pct);
    }
    if a.by_id {
        about += " --by-id";
    }
    drive("smallbank", &about, make, info, &a.common, &a)
}
