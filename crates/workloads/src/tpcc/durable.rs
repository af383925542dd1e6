//! TPC-C on a durable database (e.g. `granary::Database::open`) that may already hold
//! it: reopened after a clean close or after a crash, possibly in the
//! middle of the load.
//!
//! The load is many transactions, so a crash can leave part of it. A
//! completed load is recorded by one more transaction, which writes a
//! marker row into `tpcc_meta`; recovery restores a prefix of the
//! committed transactions (by epoch), so the marker is present only if the
//! whole load is. Without the marker the tables are emptied and loaded
//! again.

use std::ops::Bound;
use std::sync::atomic::Ordering;

use granary_api::{Engine, Error, TableId, Tx, TxError, TxRunner};

use super::rows::key;
use super::{load, Tables, Tpcc, DISTRICTS};
use crate::driver::run_until_committed;

/// The table holding the load marker.
pub const META_TABLE: &str = "tpcc_meta";
/// The marker's key; its value is the warehouse count and the scale-down
/// factor (u32s, big-endian).
const LOADED: &[u8] = b"loaded";
/// Keys deleted per transaction when emptying a partial load.
const CLEAR_BATCH: usize = 500;

/// The history key's fields below the warehouse: (thread 16 bits, sequence
/// 34 bits), see [`key::history`].
fn history_seq(k: &[u8]) -> Option<(u16, u64)> {
    let x = u64::from_be_bytes(k.get(..8)?.try_into().ok()?);
    Some((((x >> 34) & 0xFFFF) as u16, x & ((1 << 34) - 1)))
}

impl Tpcc {
    /// Open the tables of a TPC-C database loaded earlier into the durable
    /// `db` (for checking it after recovery). Returns `false`, leaving the
    /// workload unloaded, if no completed load is recorded.
    ///
    /// # Errors
    /// An engine error, or [`Error::InvalidOption`] if the recorded load
    /// has a different warehouse count, scale or STOCK layout
    /// ([`super::TpccConfig::split_stock`]).
    pub fn attach<E: Engine>(&mut self, db: &E) -> Result<bool, Error> {
        let Ok(meta) = db.table(META_TABLE) else {
            return Ok(false);
        };
        let mut w = db.runner()?;
        let marker =
            run_until_committed(&mut w, |tx| Ok(tx.get(meta, LOADED)?.map(<[u8]>::to_vec)))?;
        let Some(v) = marker else { return Ok(false) };
        // Warehouses, scale, then a byte 1 if STOCK is split (absent
        // before the split existed: not split).
        let (w, scale, split) = match (v.get(..4), v.get(4..8), v.get(8..)) {
            (Some(a), Some(b), Some([] | [0] | [1])) => (
                u32::from_be_bytes(a.try_into().expect("4 bytes")),
                u32::from_be_bytes(b.try_into().expect("4 bytes")),
                v.get(8) == Some(&1),
            ),
            _ => return Err(Error::InvalidOption("tpcc: bad load marker".into())),
        };
        if (w, scale) != (self.cfg.warehouses, self.cfg.scale_down) {
            return Err(Error::InvalidOption(format!(
                "tpcc: the database holds {w} warehouses scaled down by {scale}, \
                 configured for {} scaled down by {}",
                self.cfg.warehouses, self.cfg.scale_down
            )));
        }
        if split != self.cfg.split_stock {
            let how = |s: bool| if s { "split" } else { "not split" };
            return Err(Error::InvalidOption(format!(
                "tpcc: the database's STOCK is {}, configured {} (--split-stock)",
                how(split),
                how(self.cfg.split_stock)
            )));
        }
        let Ok(t) = load::make_tables(split, |name, _| db.table(name)) else {
            return Ok(false);
        };
        self.resume(db, &t)?;
        self.tables = Some(t);
        Ok(true)
    }

    /// Make the durable `db` hold a loaded TPC-C database and attach to
    /// it: keep a completed earlier load, or else empty whatever part of a
    /// load is there and load afresh (recording completion). Returns
    /// whether it loaded. Works on a fresh directory, after a clean close
    /// and after a crash at any point, including during a load.
    ///
    /// # Errors
    /// An engine error, or as for [`Tpcc::attach`].
    pub fn open_or_load<E: Engine>(
        &mut self,
        db: &E,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<bool, Error> {
        if self.attach(db)? {
            return Ok(false);
        }
        let meta = db.open_table(META_TABLE)?;
        let t = load::make_tables(self.cfg.split_stock, |name, o| db.open_table_with(name, o))?;
        let mut w = db.runner()?;
        for table in all(&t) {
            clear(&mut w, table)?;
        }
        load::load(self, db, &t, 0x7bcc, progress)?;
        let mut marker = self.cfg.warehouses.to_be_bytes().to_vec();
        marker.extend_from_slice(&self.cfg.scale_down.to_be_bytes());
        if self.cfg.split_stock {
            marker.push(1);
        }
        run_until_committed(&mut w, |tx| tx.put(meta, LOADED, &marker))?;
        self.resume(db, &t)?;
        self.tables = Some(t);
        Ok(true)
    }

    /// Continue after what `db` holds: history keys past the highest
    /// recorded one, FastIds past each district's highest order.
    fn resume<E: Engine>(&mut self, db: &E, t: &Tables) -> Result<(), Error> {
        let mut w = db.runner()?;
        let base = run_until_committed(&mut w, |tx| {
            let mut max = 0;
            tx.scan(
                t.history,
                Bound::Unbounded,
                Bound::Unbounded,
                usize::MAX,
                false,
                |k, _| {
                    if let Some((thread, seq)) = history_seq(k) {
                        if thread != 0xFFFF {
                            max = max.max(seq);
                        }
                    }
                    true
                },
            )?;
            Ok(max)
        })?;
        self.history_base = base;
        self.history_seqs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        let orders = self.cfg.orders();
        for wh in 1..=self.cfg.warehouses {
            for d in 1..=DISTRICTS {
                let top = run_until_committed(&mut w, |tx| {
                    let mut top = orders;
                    tx.scan(
                        t.order,
                        Bound::Included(&key::order(wh, d, 0)[..]),
                        Bound::Included(&key::order(wh, d, key::MAX_ORDER_ID)[..]),
                        1,
                        true,
                        |k, _| {
                            top = top.max(key::order_id(k).unwrap_or(0));
                            false
                        },
                    )?;
                    Ok(top)
                })?;
                self.next_id_slot(wh, d).store(top + 1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

fn all(t: &Tables) -> impl Iterator<Item = TableId> {
    [
        t.warehouse,
        t.district,
        t.customer,
        t.customer_name,
        t.history,
        t.new_order,
        t.order,
        t.order_customer,
        t.order_line,
        t.item,
        t.stock,
    ]
    .into_iter()
    .chain(t.stock_data)
}

/// Delete every row of `t`.
fn clear<R: TxRunner>(w: &mut R, t: TableId) -> Result<(), Error> {
    // Resume each batch after the last key deleted: deleted rows stay in
    // the tree as absent records until collected, and rescanning them
    // from the start every batch would be quadratic.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let keys = run_until_committed(w, |tx| {
            let mut keys = Vec::new();
            let lo = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            tx.scan(t, lo, Bound::Unbounded, CLEAR_BATCH, false, |k, _| {
                keys.push(k.to_vec());
                true
            })?;
            for k in &keys {
                tx.delete(t, k)?;
            }
            Ok::<_, TxError>(keys)
        })?;
        match keys.into_iter().next_back() {
            Some(k) => after = Some(k),
            None => return Ok(()),
        }
    }
}
