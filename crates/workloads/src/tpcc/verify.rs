//! TPC-C consistency conditions (clause 3.3.2.1–3.3.2.7 and 3.3.2.12),
//! checked on the final state, one transaction per district.

use std::collections::BTreeMap;
use std::ops::Bound;

use granary_api::{Engine, Error, Tx, TxError};

use crate::driver::run_until_committed;

use super::rows::{get_in, key, Customer, District, Order, OrderLine, Warehouse};
use super::{Tpcc, DISTRICTS};

/// What one district's scan found.
#[derive(Default)]
struct DistrictState {
    ytd: i64,
    next_o_id: u32,
    /// o_id → (ol_cnt, carrier null?)
    orders: BTreeMap<u32, (u8, bool)>,
    new_orders: Vec<u32>,
    /// o_id → (lines, lines with null delivery date)
    lines: BTreeMap<u32, (u32, u32)>,
    /// c_id → Σ OL_AMOUNT of the customer's delivered lines.
    delivered: BTreeMap<u32, i64>,
    /// c_id → C_BALANCE + C_YTD_PAYMENT.
    paid: BTreeMap<u32, i64>,
}

fn district_state<T: Tx>(tx: &mut T, tpcc: &Tpcc, w: u32, d: u8) -> Result<DistrictState, TxError> {
    let t = tpcc.t_checked()?;
    let mut s = DistrictState::default();
    let dv = tx
        .get(t.district, &key::district(w, d))?
        .ok_or_else(|| TxError::user(format!("district ({w},{d}) missing")))?;
    let dist = District::decode(dv)?;
    s.ytd = dist.ytd;
    s.next_o_id = dist.next_o_id;
    let (lo, hi) = (key::order(w, d, 0), key::order(w, d, key::MAX_ORDER_ID));
    let mut bad = None;
    // o_id → O_C_ID.
    let mut owner = BTreeMap::new();
    tx.scan(
        t.order,
        Bound::Included(&lo),
        Bound::Included(&hi),
        usize::MAX,
        false,
        |k, v| {
            match (key::order_id(k), Order::decode(v)) {
                (Some(o), Ok(ord)) => {
                    s.orders.insert(o, (ord.ol_cnt, ord.carrier_id == 0));
                    owner.insert(o, ord.c_id);
                }
                _ => bad = Some("oorder"),
            }
            true
        },
    )?;
    tx.scan(
        t.new_order,
        Bound::Included(&lo),
        Bound::Included(&hi),
        usize::MAX,
        false,
        |k, _| {
            match key::order_id(k) {
                Some(o) => s.new_orders.push(o),
                None => bad = Some("new_order"),
            }
            true
        },
    )?;
    let (llo, lhi) = (
        key::order_line(w, d, 0, 0),
        key::order_line(w, d, key::MAX_ORDER_ID, 15),
    );
    tx.scan(
        t.order_line,
        Bound::Included(&llo),
        Bound::Included(&lhi),
        usize::MAX,
        false,
        |k, v| {
            match (key::order_id(k), OrderLine::decode(v)) {
                (Some(o), Ok(l)) => {
                    let e = s.lines.entry(o).or_default();
                    e.0 += 1;
                    e.1 += (l.delivery_d == 0) as u32;
                    if let (true, Some(&c)) = (l.delivery_d != 0, owner.get(&o)) {
                        *s.delivered.entry(c).or_default() += l.amount;
                    }
                }
                _ => bad = Some("order_line"),
            }
            true
        },
    )?;
    let (clo, chi) = (key::customer(w, d, 0), key::customer(w, d, (1 << 12) - 1));
    tx.scan(
        t.customer,
        Bound::Included(&clo),
        Bound::Included(&chi),
        usize::MAX,
        false,
        |k, v| {
            let c = key::customer_id(k);
            let b = get_in::<i64>(v, 0, Customer::balance);
            let y = get_in::<i64>(v, 0, Customer::ytd_payment);
            match (c, b, y) {
                (Some(c), Some(b), Some(y)) => {
                    s.paid.insert(c, b + y);
                }
                _ => bad = Some("customer"),
            }
            true
        },
    )?;
    match bad {
        Some(table) => Err(super::rows::corrupt(table)),
        None => Ok(s),
    }
}

fn check_district(tpcc: &Tpcc, w: u32, d: u8, s: &DistrictState, out: &mut Vec<String>) {
    let at = format!("w={w} d={d}");
    let max_o = s.orders.keys().next_back().copied().unwrap_or(0);
    // 3.3.2.2: D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID). With FastIds the
    // district's counter is not maintained and rolled-back new-orders leave
    // gaps, so only max(O_ID) ≥ max(NO_O_ID) is checked.
    let max_no = s.new_orders.iter().max().copied();
    if !tpcc.cfg.fast_ids {
        if s.next_o_id - 1 != max_o {
            out.push(format!(
                "{at}: D_NEXT_O_ID − 1 = {} but max(O_ID) = {max_o}",
                s.next_o_id - 1
            ));
        }
        if let Some(m) = max_no {
            if m != max_o {
                out.push(format!("{at}: max(NO_O_ID) = {m} but max(O_ID) = {max_o}"));
            }
        }
        // 3.3.2.3: new-order rows are contiguous.
        if let (Some(&lo), Some(&hi)) = (s.new_orders.iter().min(), s.new_orders.iter().max()) {
            if (hi - lo + 1) as usize != s.new_orders.len() {
                out.push(format!(
                    "{at}: NEW-ORDER ids {lo}..={hi} but {} rows",
                    s.new_orders.len()
                ));
            }
        }
    }
    // 3.3.2.4: Σ O_OL_CNT = number of order lines.
    let ol_sum: u64 = s.orders.values().map(|&(n, _)| n as u64).sum();
    let lines: u64 = s.lines.values().map(|&(n, _)| n as u64).sum();
    if ol_sum != lines {
        out.push(format!(
            "{at}: Σ O_OL_CNT = {ol_sum} but {lines} order lines"
        ));
    }
    let has_no: std::collections::HashSet<u32> = s.new_orders.iter().copied().collect();
    let mut reported = 0;
    for (&o, &(ol_cnt, carrier_null)) in &s.orders {
        if reported >= 5 {
            break;
        }
        // 3.3.2.5: carrier null ⇔ a NEW-ORDER row exists.
        if carrier_null != has_no.contains(&o) {
            out.push(format!(
                "{at} o={o}: carrier null = {carrier_null} but new-order row = {}",
                has_no.contains(&o)
            ));
            reported += 1;
        }
        // 3.3.2.6: O_OL_CNT = its line count.
        let (n, undelivered) = s.lines.get(&o).copied().unwrap_or((0, 0));
        if n != ol_cnt as u32 {
            out.push(format!("{at} o={o}: O_OL_CNT = {ol_cnt} but {n} lines"));
            reported += 1;
        }
        // 3.3.2.7: delivery date null ⇔ carrier null (for every line).
        let want = if carrier_null { n } else { 0 };
        if undelivered != want {
            out.push(format!(
                "{at} o={o}: {undelivered} of {n} lines undelivered, carrier null = {carrier_null}"
            ));
            reported += 1;
        }
    }
    // 3.3.2.12: C_BALANCE + C_YTD_PAYMENT = Σ OL_AMOUNT of the customer's
    // delivered lines (a payment moves money between the two; a delivery
    // adds its lines to the balance).
    let mismatched = s
        .paid
        .iter()
        .filter(|&(c, &p)| p != s.delivered.get(c).copied().unwrap_or(0));
    for (c, p) in mismatched.take(5) {
        let delivered = s.delivered.get(c).copied().unwrap_or(0);
        out.push(format!(
            "{at} c={c}: C_BALANCE + C_YTD_PAYMENT = {p} but Σ delivered OL_AMOUNT = {delivered}"
        ));
    }
    for &o in &s.new_orders {
        if !s.orders.contains_key(&o) {
            out.push(format!("{at}: NEW-ORDER row {o} has no ORDER"));
            break;
        }
    }
}

impl Tpcc {
    fn t_checked(&self) -> Result<super::Tables, TxError> {
        self.tables()
            .ok_or_else(|| TxError::user("tpcc: not loaded"))
    }
}

/// Check every warehouse and district; returns the violations.
pub(super) fn verify<E: Engine>(tpcc: &Tpcc, engine: &E) -> Result<Vec<String>, Error> {
    let t = tpcc
        .tables()
        .ok_or_else(|| Error::InvalidOption("tpcc: not loaded".into()))?;
    let mut r = engine.runner()?;
    let mut out = Vec::new();
    for w in 1..=tpcc.cfg.warehouses {
        let w_ytd = run_until_committed(&mut r, |tx| {
            let v = tx
                .get(t.warehouse, &key::warehouse(w))?
                .ok_or_else(|| TxError::user(format!("warehouse {w} missing")))?;
            Ok(Warehouse::decode(v)?.ytd)
        })?;
        let mut d_ytd = 0;
        for d in 1..=DISTRICTS {
            let s = run_until_committed(&mut r, |tx| district_state(tx, tpcc, w, d))?;
            d_ytd += s.ytd;
            check_district(tpcc, w, d, &s, &mut out);
        }
        // 3.3.2.1: W_YTD = Σ D_YTD.
        if w_ytd != d_ytd {
            out.push(format!("w={w}: W_YTD = {w_ytd} but Σ D_YTD = {d_ytd}"));
        }
    }
    Ok(out)
}
