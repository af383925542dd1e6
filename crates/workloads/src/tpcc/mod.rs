//! TPC-C (spec revision 5.11), as Silo §5.3 runs it: all nine tables at
//! full row width, the customer-by-last-name and order-by-customer
//! secondary indexes, the five transactions in the standard 45/43/4/4/4
//! mix with NURand inputs, 1% remote new-order items, 15% remote payments
//! and 1% rolled-back new-orders. Each thread is bound to a home warehouse
//! (thread `i` → warehouse `i mod W + 1`).
//!
//! Options reproduce Silo's Fig. 8–10 variants: new-order only with a given
//! remote-item probability; any number of warehouses; FastIds (order ids
//! from a per-district counter outside the transaction); and a 50/50
//! new-order / stock-level mix with stock-level as a snapshot or regular
//! transaction.
//!
//! After a run, [`Tpcc::verify`](crate::driver::Workload::verify) checks
//! the consistency conditions of clause 3.3.2 that hold under Delivery.

pub mod rows;

mod durable;
mod load;
mod txns;
mod verify;

pub use txns::{TpccOutput, TpccTxn};

use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;

use granary_api::{Done, PartitionRule, Partitioning, Procedure, TableId};

use crate::rng::Rng;
use crate::ConfigError;

/// Districts per warehouse (clause 1.2).
pub const DISTRICTS: u8 = 10;
/// Customers per district.
pub const CUSTOMERS: u32 = 3000;
/// Items in the catalogue.
pub const ITEMS: u32 = 100_000;
/// Orders loaded per district.
pub const ORDERS: u32 = 3000;
/// The first loaded order still undelivered (it has a NEW-ORDER row).
pub const FIRST_UNDELIVERED: u32 = 2101;
/// The most warehouses [`Tpcc::new`] accepts.
pub const MAX_WAREHOUSES: u32 = 10_000;

/// Which transactions to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// 45% new-order, 43% payment, 4% each order-status, delivery,
    /// stock-level (clause 5.2.3).
    Standard,
    /// New-order only (Silo Fig. 8).
    NewOrderOnly,
    /// 50% new-order, 50% stock-level (Silo Fig. 10).
    NewOrderStockLevel,
}

/// TPC-C configuration.
#[derive(Clone, Debug)]
pub struct TpccConfig {
    pub warehouses: u32,
    pub mix: Mix,
    /// Probability (percent) that a new-order item comes from a remote
    /// warehouse (spec: 1).
    pub remote_item_pct: f64,
    /// Probability (percent) that a payment is for a remote customer
    /// (spec: 15).
    pub remote_payment_pct: u32,
    /// Take order ids from a per-district atomic counter outside the
    /// transaction instead of reading and writing D_NEXT_O_ID (Silo's
    /// FastIds, Fig. 9).
    pub fast_ids: bool,
    /// Run stock-level as a read-only snapshot transaction (Silo Fig. 10).
    pub snapshot_stock_level: bool,
    /// Bind thread `i` to warehouse `i mod W + 1` (spec and Silo);
    /// otherwise each transaction picks a random home warehouse.
    pub bind_warehouses: bool,
    /// Divide the per-warehouse population — items (and stock),
    /// customers and loaded orders per district — by this, for small test
    /// databases (crash loops). 1, the default, is the spec's; at most
    /// [`MAX_SCALE_DOWN`].
    pub scale_down: u32,
    /// Split STOCK as Silo's `tpcc.cc` does: S_QUANTITY, S_YTD,
    /// S_ORDER_CNT and S_REMOTE_CNT in `stock` (20 bytes, what new-order
    /// writes), S_DIST_xx and S_DATA in `stock_data` (read-only after the
    /// load; new-order reads its district's S_DIST_xx there). Vertical
    /// partitioning is the spec's to allow (clause 1.6); it shrinks
    /// new-order's writes, and so the log, by about 2.9 KB. Off by default.
    pub split_stock: bool,
}

/// The largest [`TpccConfig::scale_down`] (100 customers per district).
pub const MAX_SCALE_DOWN: u32 = 30;

impl TpccConfig {
    /// The standard mix over `warehouses` warehouses.
    pub fn new(warehouses: u32) -> TpccConfig {
        TpccConfig {
            warehouses,
            mix: Mix::Standard,
            remote_item_pct: 1.0,
            remote_payment_pct: 15,
            fast_ids: false,
            snapshot_stock_level: false,
            bind_warehouses: true,
            scale_down: 1,
            split_stock: false,
        }
    }

    /// Items in the catalogue ([`ITEMS`] unless scaled down).
    pub fn items(&self) -> u32 {
        ITEMS / self.scale_down.max(1)
    }

    /// Customers per district ([`CUSTOMERS`] unless scaled down).
    pub fn customers(&self) -> u32 {
        CUSTOMERS / self.scale_down.max(1)
    }

    /// Orders loaded per district, one per customer ([`ORDERS`] unless
    /// scaled down).
    pub fn orders(&self) -> u32 {
        ORDERS / self.scale_down.max(1)
    }

    /// The first loaded order still undelivered: the last 30% of the
    /// loaded orders have NEW-ORDER rows ([`FIRST_UNDELIVERED`] unless
    /// scaled down).
    pub fn first_undelivered(&self) -> u32 {
        self.orders() - self.orders() * 3 / 10 + 1
    }

    /// Distinct customer last names, numbers `0..last_names()`: the
    /// spec's 1000, or fewer when there are fewer customers per district
    /// (so every name drawn exists, clause 4.3.2.3).
    pub fn last_names(&self) -> u32 {
        self.customers().min(1000)
    }
}

/// The transaction types, in report order.
pub const TYPES: [&str; 5] = [
    "new_order",
    "payment",
    "order_status",
    "delivery",
    "stock_level",
];
const NEW_ORDER: usize = 0;
const PAYMENT: usize = 1;
const ORDER_STATUS: usize = 2;
const DELIVERY: usize = 3;
const STOCK_LEVEL: usize = 4;

/// The nine tables and two indexes.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    pub warehouse: TableId,
    pub district: TableId,
    pub customer: TableId,
    pub customer_name: TableId,
    pub history: TableId,
    pub new_order: TableId,
    pub order: TableId,
    pub order_customer: TableId,
    pub order_line: TableId,
    pub item: TableId,
    pub stock: TableId,
    /// STOCK's read-only columns, when split ([`TpccConfig::split_stock`]).
    pub stock_data: Option<TableId>,
}

/// TPC-C's partitioning (for Partitioned-Store, Silo §5.4): by
/// warehouse. The warehouse is the top [`rows::key::WAREHOUSE_BITS`] bits
/// of every packed 8-byte key, and of the customer-by-name key (whose
/// first 4 bytes are those of its district's key); WAREHOUSE's own key is
/// the id as a 4-byte big-endian `u32`; ITEM is read by every warehouse
/// and written only while loading ([`PartitionRule::Shared`]).
pub fn partitioning() -> Partitioning {
    |table| {
        let by_warehouse = PartitionRule::Field {
            shift: 0,
            bits: rows::key::WAREHOUSE_BITS,
        };
        match table {
            "warehouse" => Some(PartitionRule::Field { shift: 0, bits: 32 }),
            "item" => Some(PartitionRule::Shared),
            "district" | "customer" | "customer_name_idx" | "history" | "new_order" | "oorder"
            | "oorder_c_id_idx" | "order_line" | "stock" | "stock_data" => Some(by_warehouse),
            _ => None,
        }
    }
}

/// The workload: configuration, tables once loaded, FastIds counters.
pub struct Tpcc {
    pub cfg: TpccConfig,
    tables: Option<Tables>,
    /// FastIds: next order id per (warehouse, district).
    next_ids: Vec<AtomicU32>,
    /// Payment's history keys continue after this sequence number (0 on a
    /// fresh load; past the highest one found when reopening a durable
    /// database, so new keys never collide with recovered ones).
    history_base: u64,
    /// Per thread id, the last history sequence number used: a later run
    /// on the same database (`--runs`, several protocols) continues it,
    /// so its keys never collide with an earlier run's.
    history_seqs: std::sync::Mutex<std::collections::HashMap<u16, Arc<AtomicU64>>>,
}

impl Tpcc {
    /// # Errors
    /// [`ConfigError`] for zero or too many warehouses or a probability out
    /// of range.
    pub fn new(cfg: TpccConfig) -> Result<Tpcc, ConfigError> {
        if cfg.warehouses == 0 || cfg.warehouses > MAX_WAREHOUSES {
            return Err(ConfigError(format!(
                "warehouses must be between 1 and {MAX_WAREHOUSES}, got {}",
                cfg.warehouses
            )));
        }
        if !(0.0..=100.0).contains(&cfg.remote_item_pct) || cfg.remote_payment_pct > 100 {
            return Err(ConfigError(format!(
                "remote percentages must be between 0 and 100, got {} (items) and {} (payments)",
                cfg.remote_item_pct, cfg.remote_payment_pct
            )));
        }
        if !(1..=MAX_SCALE_DOWN).contains(&cfg.scale_down) {
            return Err(ConfigError(format!(
                "scale_down must be between 1 and {MAX_SCALE_DOWN}, got {}",
                cfg.scale_down
            )));
        }
        let n = cfg.warehouses as usize * DISTRICTS as usize;
        let next = cfg.orders() + 1;
        Ok(Tpcc {
            cfg,
            tables: None,
            next_ids: (0..n).map(|_| AtomicU32::new(next)).collect(),
            history_base: 0,
            history_seqs: Default::default(),
        })
    }

    /// The tables, once loaded.
    pub fn tables(&self) -> Option<Tables> {
        self.tables
    }

    fn next_id_slot(&self, w: u32, d: u8) -> &AtomicU32 {
        &self.next_ids[(w as usize - 1) * DISTRICTS as usize + d as usize - 1]
    }
}

/// Per-thread state.
pub struct TpccThread {
    rng: Rng,
    /// Home warehouse when bound.
    home: u32,
    id: u16,
    /// The last history sequence number this thread id used (shared with
    /// later runs: see `Tpcc::history_seqs`).
    history_seq: Arc<AtomicU64>,
    /// Delivery: per warehouse, per district, the oldest order id that
    /// may still have a NEW-ORDER row.
    delivery_hints: std::collections::HashMap<u32, [u32; DISTRICTS as usize]>,
    /// Scratch for new-order's items.
    items: Vec<(u32, u32, u8)>,
    /// Finished procedures, kept for reuse.
    #[allow(clippy::vec_box)] // boxes travel to the engine and back
    spare: Vec<Box<Procedure<TpccTxn>>>,
    /// Procedures the design handed back, not yet looked at.
    done: Vec<Done<TpccTxn>>,
    /// Procedures whose predicted write set went stale, to go again.
    #[allow(clippy::vec_box)] // as `spare`
    stale: Vec<Box<Procedure<TpccTxn>>>,
    /// Reconnaissance (designs that need write sets): per (warehouse,
    /// district), the order id after the last one this client predicted.
    next_order: std::collections::HashMap<(u32, u8), u32>,
    /// Reconnaissance: per warehouse and district, the order id after the
    /// last one this client's deliveries were predicted to take.
    next_delivery: std::collections::HashMap<u32, [u32; DISTRICTS as usize]>,
}

/// The constants C of NURand (clause 2.1.6): one set for the run; the
/// load uses a different C for C_LAST within the allowed distance.
pub(crate) const C_LAST_LOAD: u32 = 157;
pub(crate) const C_LAST_RUN: u32 = 223;
pub(crate) const C_ID: u32 = 259;
pub(crate) const C_OL_I_ID: u32 = 7911;

/// NURand(A, x, y) (clause 2.1.6).
#[inline]
pub fn nurand(rng: &mut Rng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    let r1 = uniform(rng, 0, a);
    let r2 = uniform(rng, x, y);
    (((r1 | r2) + c) % (y - x + 1)) + x
}

/// Uniform in `[lo, hi]`.
#[inline]
pub fn uniform(rng: &mut Rng, lo: u32, hi: u32) -> u32 {
    lo + rng.below((hi - lo + 1) as u64) as u32
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The customer last name for number `n` in 0..=999 (clause 4.3.2.3).
pub fn last_name(n: u32, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(last_name_str(n).as_bytes());
}

/// As [`last_name`], as a fixed-width field (three syllables are at most
/// 15 bytes): no allocation in the transactions that pick customers by
/// name.
pub fn last_name_str(n: u32) -> rows::Str<16> {
    let s = |d: u32| SYLLABLES[d as usize].as_bytes();
    rows::Str::concat(&[s(n / 100), s((n / 10) % 10), s(n % 10)])
}

/// Random alphanumeric string of length in `[lo, hi]`.
pub(crate) fn astring(rng: &mut Rng, lo: u32, hi: u32, out: &mut Vec<u8>) {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    out.clear();
    let n = uniform(rng, lo, hi);
    for _ in 0..n {
        out.push(CHARS[rng.below(CHARS.len() as u64) as usize]);
    }
}

/// Random numeric string of length in `[lo, hi]`.
pub(crate) fn nstring(rng: &mut Rng, lo: u32, hi: u32, out: &mut Vec<u8>) {
    out.clear();
    let n = uniform(rng, lo, hi);
    for _ in 0..n {
        out.push(b'0' + rng.below(10) as u8);
    }
}

/// "Now" for date fields: seconds since the Unix epoch (never 0, which
/// stands for null).
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = Rng::new(3, 1);
        let mut hits = vec![0u32; 3001];
        for _ in 0..300_000 {
            let c = nurand(&mut rng, 1023, C_ID, 1, 3000);
            assert!((1..=3000).contains(&c));
            hits[c as usize] += 1;
        }
        // Non-uniform: the most popular id is drawn far more often than
        // the uniform share (100).
        let max = *hits.iter().max().unwrap();
        assert!(max > 300, "max {max}");
        for _ in 0..100_000 {
            let i = nurand(&mut rng, 8191, C_OL_I_ID, 1, ITEMS);
            assert!((1..=ITEMS).contains(&i));
            let l = nurand(&mut rng, 255, C_LAST_RUN, 0, 999);
            assert!(l <= 999);
        }
    }

    #[test]
    fn c_last_distance_is_legal() {
        // Clause 2.1.6.1: 65 ≤ |C_run − C_load| ≤ 119, not 96 or 112.
        let d = C_LAST_RUN.abs_diff(C_LAST_LOAD);
        assert!((65..=119).contains(&d) && d != 96 && d != 112);
    }

    #[test]
    fn last_names() {
        let mut b = Vec::new();
        last_name(371, &mut b);
        assert_eq!(b, b"PRICALLYOUGHT");
        last_name(0, &mut b);
        assert_eq!(b, b"BARBARBAR");
    }

    #[test]
    fn config_errors() {
        assert!(Tpcc::new(TpccConfig::new(0)).is_err());
        let mut c = TpccConfig::new(1);
        c.remote_item_pct = 101.0;
        assert!(Tpcc::new(c).is_err());
        let mut c = TpccConfig::new(1);
        c.scale_down = MAX_SCALE_DOWN + 1;
        assert!(Tpcc::new(c).is_err());
    }

    #[test]
    fn every_table_is_partitioned_by_its_warehouse() {
        use rows::key;
        let rule = partitioning();
        let mut names = Vec::new();
        load::make_tables(true, |name, _| {
            names.push(name.to_string());
            Ok(TableId::new(names.len() as u32 - 1))
        })
        .unwrap();
        assert_eq!(names.len(), 12);
        assert_eq!(rule("nope"), None);
        // The largest value of every other field: none spills into the
        // warehouse's bits.
        let (d, c, o, i) = (DISTRICTS, CUSTOMERS, key::MAX_ORDER_ID, 1 << 17);
        for w in [1, 2, 777, MAX_WAREHOUSES, (1 << key::WAREHOUSE_BITS) - 1] {
            for name in &names {
                let keys: Vec<Vec<u8>> = match name.as_str() {
                    "item" => {
                        assert_eq!(rule(name), Some(PartitionRule::Shared));
                        continue;
                    }
                    "warehouse" => vec![key::warehouse(w).to_vec()],
                    "district" => vec![key::district(w, d).to_vec()],
                    "customer" => vec![key::customer(w, d, c).to_vec()],
                    "customer_name_idx" => vec![
                        key::customer_name(w, d, &[0xFF; 16], &[0xFF; 16], u32::MAX).to_vec(),
                        key::customer_name_prefix(w, d, b"BARBARBAR").to_vec(),
                    ],
                    "history" => vec![key::history(w, u16::MAX, (1 << 34) - 1).to_vec()],
                    "new_order" | "oorder" => vec![key::order(w, d, o).to_vec()],
                    "oorder_c_id_idx" => vec![key::order_customer(w, d, c, o).to_vec()],
                    "order_line" => vec![key::order_line(w, d, o, 15).to_vec()],
                    "stock" | "stock_data" => vec![key::stock(w, i - 1).to_vec()],
                    other => panic!("table {other} has no test"),
                };
                let r = rule(name).unwrap_or_else(|| panic!("{name} has no rule"));
                for k in keys {
                    assert_eq!(r.field_value(&k), Some(w as u64), "{name} key {k:?}");
                }
            }
        }
    }

    #[test]
    fn scaled_down_population() {
        let c = TpccConfig::new(1);
        assert_eq!(
            (
                c.items(),
                c.customers(),
                c.orders(),
                c.first_undelivered(),
                c.last_names()
            ),
            (ITEMS, CUSTOMERS, ORDERS, FIRST_UNDELIVERED, 1000)
        );
        let mut c = TpccConfig::new(1);
        c.scale_down = 10;
        assert_eq!(
            (
                c.items(),
                c.customers(),
                c.orders(),
                c.first_undelivered(),
                c.last_names()
            ),
            (10_000, 300, 300, 211, 300)
        );
    }
}
