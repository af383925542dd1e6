//! The five transactions (clauses 2.4–2.8), and the [`Workload`] impl.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use granary_api::{Body, Declared, Engine, Error, Procedure, ReadOnly, Tx, TxError, TxRunner};

use super::rows::{
    add_in, corrupt, get_in, key, put_in, Customer, District, History, Item, NewOrder, Order,
    OrderLine, Stock, StockData, StockHot, Str, Warehouse,
};
use super::{
    last_name_str, load, now, nurand, uniform, verify, Mix, Tables, Tpcc, TpccThread, C_ID,
    C_LAST_RUN, C_OL_I_ID, DELIVERY, DISTRICTS, NEW_ORDER, ORDER_STATUS, PAYMENT, STOCK_LEVEL,
    TYPES,
};
use crate::driver::{Exec, Workload};
use crate::rng::Rng;

/// Read and decode a row that must exist.
fn get_row<T: Tx, R>(
    tx: &mut T,
    t: granary_api::TableId,
    k: &[u8],
    decode: impl FnOnce(&[u8]) -> Result<R, TxError>,
    what: &str,
) -> Result<R, TxError> {
    match tx.get(t, k)? {
        Some(v) => decode(v),
        None => Err(corrupt(what)),
    }
}

/// Payment's change to a warehouse or district row `k` of `t`: `amount`
/// added to its year-to-date sum, its name read, as one field update over
/// the fields' bytes (`name` lies before `ytd` in both rows).
fn pay_into<T: Tx>(
    tx: &mut T,
    t: granary_api::TableId,
    k: &[u8],
    (name, ytd): (std::ops::Range<usize>, std::ops::Range<usize>),
    amount: i64,
    what: &str,
) -> Result<Str<10>, TxError> {
    let at = name.start;
    tx.update_field(t, k, at..ytd.end, |b| {
        add_in(b, at, ytd, amount)?;
        get_in::<Str<10>>(b, at, name)
    })?
    .flatten()
    .ok_or_else(|| corrupt(what))
}

/// The id in the first key of `lo..=hi` in `t` (the last if `reverse`):
/// the oldest NEW-ORDER row, a customer's newest order.
fn edge_id<T: Tx>(
    tx: &mut T,
    t: granary_api::TableId,
    lo: &[u8],
    hi: &[u8],
    reverse: bool,
    id: fn(&[u8]) -> Option<u32>,
) -> Result<Option<u32>, TxError> {
    let mut found = None;
    tx.scan(
        t,
        Bound::Included(lo),
        Bound::Included(hi),
        1,
        reverse,
        |k, _| {
            found = id(k);
            false
        },
    )?;
    Ok(found)
}

/// How a customer is chosen (clause 2.5.1.2 / 2.6.1.2).
#[derive(Clone, Debug)]
enum CustomerSel {
    Id(u32),
    Last(Str<16>),
}

/// Resolve a customer by last name: the one at position ⌈n/2⌉ of those
/// with that name, sorted by first name (the index's order). `ids` is
/// scratch. Over any reader: a transaction, or reconnaissance's snapshot.
fn customer_id<T: ReadOnly + ?Sized>(
    tx: &mut T,
    t: &Tables,
    w: u32,
    d: u8,
    sel: &CustomerSel,
    ids: &mut Vec<u32>,
) -> Result<u32, TxError> {
    match sel {
        CustomerSel::Id(c) => Ok(*c),
        CustomerSel::Last(last) => {
            let lo = key::customer_name_prefix(w, d, last.as_bytes());
            let hi = granary_api::keys::prefix_end(&lo);
            ids.clear();
            let hi_b = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            tx.read_range(
                t.customer_name,
                Bound::Included(&lo),
                hi_b,
                usize::MAX,
                false,
                &mut |k, _| {
                    if let Some(c) = key::customer_name_id(k) {
                        ids.push(c);
                    }
                    true
                },
            )?;
            if ids.is_empty() {
                // Every generated last name exists (clause 4.3.2.3).
                return Err(corrupt("customer_name_idx"));
            }
            Ok(ids[(ids.len() - 1) / 2])
        }
    }
}

/// What a TPC-C transaction needs to run: its type and inputs, drawn by
/// the client (clauses 2.4.1–2.8.1), and, for a design that needs write
/// sets up front ([`TxRunner::needs_write_sets`]), what reconnaissance
/// predicted from a snapshot, which the run checks.
#[derive(Clone, Debug)]
enum Args {
    NewOrder {
        w: u32,
        d: u8,
        c: u32,
        all_local: u8,
        /// FastIds: the order id, taken outside the transaction.
        fast_id: Option<u32>,
        entry_d: u64,
        /// The predicted order id (D_NEXT_O_ID when it runs).
        predicted: Option<u32>,
    },
    Payment {
        w: u32,
        d: u8,
        c_w: u32,
        c_d: u8,
        sel: CustomerSel,
        amount: i64,
        history: [u8; 8],
        date: u64,
        /// The predicted customer id (a customer chosen by last name).
        predicted: Option<u32>,
    },
    OrderStatus {
        w: u32,
        d: u8,
        sel: CustomerSel,
    },
    Delivery {
        w: u32,
        carrier: u8,
        date: u64,
        /// Per district, the oldest order id that may still be
        /// undelivered (see `delivery`).
        hints: [u32; DISTRICTS as usize],
        /// Per district, the predicted oldest undelivered order (0: none).
        predicted: Option<[u32; DISTRICTS as usize]>,
    },
    StockLevel {
        w: u32,
        d: u8,
        threshold: u32,
    },
}

/// A TPC-C transaction as a value (a [`Procedure`]'s body): its inputs,
/// and scratch buffers kept across reuse.
pub struct TpccTxn {
    t: Tables,
    args: Args,
    /// New-order's items: (item, supplying warehouse, quantity).
    items: Vec<(u32, u32, u8)>,
    buf: Vec<u8>,
    /// The customer ids sharing a last name.
    ids: Vec<u32>,
    /// What a run found where its plan went stale (D_NEXT_O_ID for
    /// new-order), for the next prediction.
    found: u32,
}

/// What a committed TPC-C transaction tells its client: for delivery, per
/// district, one past the order it delivered (0: none); zeros otherwise.
pub type TpccOutput = [u32; DISTRICTS as usize];

impl Body for TpccTxn {
    type Output = TpccOutput;

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<TpccOutput, TxError> {
        let t = self.t;
        match self.args {
            Args::NewOrder { .. } => self.new_order(tx).map(|()| [0; DISTRICTS as usize]),
            Args::Payment { .. } => self.payment(tx).map(|()| [0; DISTRICTS as usize]),
            Args::OrderStatus { w, d, ref sel } => {
                order_status(tx, &t, w, d, sel, &mut self.ids).map(|_| [0; DISTRICTS as usize])
            }
            Args::Delivery { .. } => self.delivery(tx),
            Args::StockLevel { w, d, threshold } => {
                stock_level(tx, &t, w, d, threshold).map(|_| [0; DISTRICTS as usize])
            }
        }
    }
}

impl TpccTxn {
    /// Clause 2.4.2.
    fn new_order<T: Tx>(&mut self, tx: &mut T) -> Result<(), TxError> {
        let Args::NewOrder {
            w,
            d,
            c,
            all_local,
            fast_id,
            entry_d,
            predicted,
        } = self.args
        else {
            unreachable!("new-order's arguments")
        };
        let t = &self.t;
        let buf = &mut self.buf;
        let wh = get_row(
            tx,
            t.warehouse,
            &key::warehouse(w),
            Warehouse::decode,
            "warehouse",
        )?;
        let dk = key::district(w, d);
        let tax = |b: &[u8]| get_in::<u32>(b, 0, District::tax).ok_or_else(|| corrupt("district"));
        let (d_tax, o) = match fast_id {
            Some(o) => (get_row(tx, t.district, &dk, tax, "district")?, o),
            None => {
                // D_TAX and D_NEXT_O_ID as one field: D_YTD lies between
                // them, and the rest of the row is not copied.
                let span = District::tax.start..District::next_o_id.end;
                let (d_tax, o) = tx
                    .update_field(t.district, &dk, span.clone(), |b| {
                        let tax = get_in::<u32>(b, span.start, District::tax)?;
                        let o = get_in::<u32>(b, span.start, District::next_o_id)?;
                        // A stale or exhausted id is not taken (the
                        // transaction fails below, so nothing is written).
                        if predicted.is_none_or(|p| p == o) && o <= key::MAX_ORDER_ID {
                            put_in(b, span.start, District::next_o_id, &(o + 1))?;
                        }
                        Some((tax, o))
                    })?
                    .flatten()
                    .ok_or_else(|| corrupt("district"))?;
                if predicted.is_some_and(|p| p != o) {
                    // OLLP: the order id reconnaissance predicted was
                    // taken; nothing is written.
                    self.found = o;
                    return Err(TxError::Failed(Error::StalePlan("new-order's order id")));
                }
                if o > key::MAX_ORDER_ID {
                    return Err(TxError::Failed(Error::InvalidOption(format!(
                        "district ({w},{d}) ran out of order ids ({})",
                        key::MAX_ORDER_ID
                    ))));
                }
                (d_tax, o)
            }
        };
        let cust = get_row(
            tx,
            t.customer,
            &key::customer(w, d, c),
            Customer::decode,
            "customer",
        )?;
        Order {
            c_id: c,
            entry_d,
            carrier_id: 0,
            ol_cnt: self.items.len() as u8,
            all_local,
        }
        .encode(buf);
        tx.insert(t.order, &key::order(w, d, o), buf)?;
        tx.insert(t.order_customer, &key::order_customer(w, d, c, o), &[])?;
        NewOrder { present: 1 }.encode(buf);
        tx.insert(t.new_order, &key::order(w, d, o), buf)?;
        let mut total = 0i64;
        for (n, &(i, supply, qty)) in self.items.iter().enumerate() {
            let Some(iv) = tx.get(t.item, &key::item(i))? else {
                // Clause 2.4.2.3: an unused item rolls the order back.
                return Err(TxError::rollback());
            };
            let item = Item::decode(iv)?;
            let sk = key::stock(supply, i);
            let q = qty as u32;
            let remote = supply != w;
            let dist_info = if let Some(sd) = t.stock_data {
                // Split as Silo's tpcc.cc splits it: the 20 bytes that
                // change are written; S_DIST_xx is read from the rest.
                let hot = 0..StockHot::remote_cnt.end;
                tx.update_field(t.stock, &sk, hot, |b| StockHot::order_in(b, 0, q, remote))?
                    .flatten()
                    .ok_or_else(|| corrupt("stock"))?;
                match tx.read_prefix(sd, &sk, StockData::dist_bytes(d))? {
                    Some(v) => StockData::dist_of(v, d)?,
                    None => return Err(corrupt("stock_data")),
                }
            } else {
                // Everything up to S_DATA, which new-order does not read.
                let upto = 0..Stock::remote_cnt.end;
                tx.update_field(t.stock, &sk, upto, |b| {
                    Stock::order_in(b, 0, q, remote)?;
                    get_in::<Str<24>>(b, 0, Stock::dist_span(d))
                })?
                .flatten()
                .ok_or_else(|| corrupt("stock"))?
            };
            let amount = q as i64 * item.price;
            total += amount;
            OrderLine {
                i_id: i,
                supply_w_id: supply,
                delivery_d: 0,
                quantity: qty,
                amount,
                dist_info,
            }
            .encode(buf);
            tx.insert(t.order_line, &key::order_line(w, d, o, n as u8 + 1), buf)?;
        }
        // The total the terminal would display (clause 2.4.3.3).
        let _ = total * (10_000 - cust.discount as i64) * (10_000 + wh.tax as i64 + d_tax as i64);
        Ok(())
    }

    /// Clause 2.5.2.
    fn payment<T: Tx>(&mut self, tx: &mut T) -> Result<(), TxError> {
        let Args::Payment {
            w,
            d,
            c_w,
            c_d,
            ref sel,
            amount,
            history,
            date,
            predicted,
        } = self.args
        else {
            unreachable!("payment's arguments")
        };
        let t = &self.t;
        let buf = &mut self.buf;
        // The warehouse's and district's names and year-to-date sums, and
        // the customer's credit and payment columns, are read and changed
        // as fields; C_DATA only for a bad-credit customer.
        let wk = key::warehouse(w);
        let (name, ytd) = (Warehouse::name, Warehouse::ytd);
        let w_name = pay_into(tx, t.warehouse, &wk, (name, ytd), amount, "warehouse")?;
        let dk = key::district(w, d);
        let (name, ytd) = (District::name, District::ytd);
        let d_name = pay_into(tx, t.district, &dk, (name, ytd), amount, "district")?;
        let c = customer_id(tx, t, c_w, c_d, sel, &mut self.ids)?;
        if predicted.is_some_and(|p| p != c) {
            self.found = c;
            return Err(TxError::Failed(Error::StalePlan("payment's customer")));
        }
        let ck = key::customer(c_w, c_d, c);
        let span = Customer::credit.start..Customer::payment_cnt.end;
        let credit = tx
            .update_field(t.customer, &ck, span.clone(), |b| {
                let at = span.start;
                add_in(b, at, Customer::balance, -amount)?;
                add_in(b, at, Customer::ytd_payment, amount)?;
                add_in(b, at, Customer::payment_cnt, 1u32)?;
                get_in::<Str<2>>(b, at, Customer::credit)
            })?
            .flatten()
            .ok_or_else(|| corrupt("customer"))?;
        if credit.as_bytes() == b"BC" {
            let at = Customer::data.start;
            tx.update_field(t.customer, &ck, Customer::data, |b| {
                let old = get_in::<Str<500>>(b, at, Customer::data)?;
                let mut data = format!("{c} {c_d} {c_w} {d} {w} {amount} ").into_bytes();
                data.extend_from_slice(old.as_bytes());
                put_in(b, at, Customer::data, &Str::<500>::new(&data))
            })?
            .flatten()
            .ok_or_else(|| corrupt("customer"))?;
        }
        let hdata = Str::concat(&[w_name.as_bytes(), b"    ", d_name.as_bytes()]);
        History {
            c_id: c,
            c_d_id: c_d,
            c_w_id: c_w,
            d_id: d,
            w_id: w,
            date,
            amount,
            data: hdata,
        }
        .encode(buf);
        tx.insert(t.history, &history, buf)
    }

    /// Clause 2.7.4, run as one transaction over the ten districts (the
    /// spec allows deferred execution; Silo runs it inline).
    fn delivery<T: Tx>(&mut self, tx: &mut T) -> Result<TpccOutput, TxError> {
        let Args::Delivery {
            w,
            carrier,
            date,
            hints,
            predicted,
        } = self.args
        else {
            unreachable!("delivery's arguments")
        };
        let t = &self.t;
        let buf = &mut self.buf;
        let mut found = [0u32; DISTRICTS as usize];
        for d in 1..=DISTRICTS {
            let i = d as usize - 1;
            let oldest = edge_id(
                tx,
                t.new_order,
                &key::order(w, d, hints[i]),
                &key::order(w, d, key::MAX_ORDER_ID),
                false,
                key::order_id,
            )?;
            if predicted.is_some_and(|p| p[i] != oldest.map_or(0, |o| o)) {
                return Err(TxError::Failed(Error::StalePlan(
                    "delivery's oldest new order",
                )));
            }
            let Some(o) = oldest else { continue };
            found[i] = o + 1;
            let ok = key::order(w, d, o);
            tx.delete(t.new_order, &ok)?;
            let mut order = get_row(tx, t.order, &ok, Order::decode, "oorder")?;
            order.carrier_id = carrier;
            order.encode(buf);
            tx.put(t.order, &ok, buf)?;
            let mut sum = 0;
            // OL_DELIVERY_D and OL_AMOUNT, and C_BALANCE and C_DELIVERY_CNT,
            // are changed as fields: the rest of each row is not copied.
            let line = OrderLine::delivery_d.start..OrderLine::amount.end;
            for n in 1..=order.ol_cnt {
                let lk = key::order_line(w, d, o, n);
                let amount = tx.update_field(t.order_line, &lk, line.clone(), |b| {
                    put_in(b, line.start, OrderLine::delivery_d, &date)?;
                    get_in::<i64>(b, line.start, OrderLine::amount)
                })?;
                sum += amount.flatten().ok_or_else(|| corrupt("order_line"))?;
            }
            let ck = key::customer(w, d, order.c_id);
            let cust = Customer::balance.start..Customer::delivery_cnt.end;
            tx.update_field(t.customer, &ck, cust.clone(), |b| {
                add_in(b, cust.start, Customer::balance, sum)?;
                add_in(b, cust.start, Customer::delivery_cnt, 1u32)
            })?
            .flatten()
            .ok_or_else(|| corrupt("customer"))?;
        }
        Ok(found)
    }
}

/// Clause 2.6.2 (read-only): the number of lines of the customer's last
/// order.
fn order_status<T: ReadOnly + ?Sized>(
    tx: &mut T,
    t: &Tables,
    w: u32,
    d: u8,
    sel: &CustomerSel,
    ids: &mut Vec<u32>,
) -> Result<u32, TxError> {
    let c = customer_id(tx, t, w, d, sel, ids)?;
    let _cust = Customer::decode(
        tx.read(t.customer, &key::customer(w, d, c))?
            .ok_or_else(|| corrupt("customer"))?,
    )?;
    // The customer's most recent order: last key of (w, d, c, *).
    let mut last = None;
    tx.read_range(
        t.order_customer,
        Bound::Included(&key::order_customer(w, d, c, 0)),
        Bound::Included(&key::order_customer(w, d, c, key::MAX_ORDER_ID)),
        1,
        true,
        &mut |k, _| {
            last = key::order_customer_id(k);
            false
        },
    )?;
    let Some(o) = last else { return Ok(0) };
    let _order = Order::decode(
        tx.read(t.order, &key::order(w, d, o))?
            .ok_or_else(|| corrupt("oorder"))?,
    )?;
    let mut lines = 0;
    tx.read_range(
        t.order_line,
        Bound::Included(&key::order_line(w, d, o, 0)),
        Bound::Included(&key::order_line(w, d, o, 15)),
        usize::MAX,
        false,
        &mut |_, v| {
            lines += OrderLine::decode(v).is_ok() as u32;
            true
        },
    )?;
    Ok(lines)
}

/// Clause 2.8.2 (read-only): how many items of the district's last 20
/// orders are below `threshold` in stock.
fn stock_level<T: ReadOnly + ?Sized>(
    tx: &mut T,
    t: &Tables,
    w: u32,
    d: u8,
    threshold: u32,
) -> Result<u32, TxError> {
    let dist = District::decode(
        tx.read(t.district, &key::district(w, d))?
            .ok_or_else(|| corrupt("district"))?,
    )?;
    let next = dist.next_o_id;
    let mut items = Vec::with_capacity(200);
    tx.read_range(
        t.order_line,
        Bound::Included(&key::order_line(w, d, next.saturating_sub(20), 0)),
        Bound::Excluded(&key::order_line(w, d, next, 0)),
        usize::MAX,
        false,
        &mut |_, v| {
            if let Ok(l) = OrderLine::decode(v) {
                items.push(l.i_id);
            }
            true
        },
    )?;
    items.sort_unstable();
    items.dedup();
    let mut low = 0;
    for i in items {
        // Only S_QUANTITY is needed: copy just that much, as Silo's
        // stock-level does (`max_bytes_read`).
        if let Some(v) = tx.read_prefix(t.stock, &key::stock(w, i), Stock::QUANTITY_BYTES)? {
            if Stock::quantity_of(v)? < threshold {
                low += 1;
            }
        }
    }
    Ok(low)
}

impl Tpcc {
    fn t(&self) -> Tables {
        self.tables().expect("run before load")
    }

    fn home(&self, th: &mut TpccThread) -> u32 {
        if self.cfg.bind_warehouses {
            th.home
        } else {
            uniform(&mut th.rng, 1, self.cfg.warehouses)
        }
    }

    fn other_warehouse(&self, rng: &mut Rng, w: u32) -> u32 {
        if self.cfg.warehouses == 1 {
            return w;
        }
        let o = uniform(rng, 1, self.cfg.warehouses - 1);
        if o >= w {
            o + 1
        } else {
            o
        }
    }

    fn customer_sel(&self, rng: &mut Rng) -> CustomerSel {
        if uniform(rng, 1, 100) <= 60 {
            let names = self.cfg.last_names();
            CustomerSel::Last(last_name_str(nurand(rng, 255, C_LAST_RUN, 0, names - 1)))
        } else {
            CustomerSel::Id(nurand(rng, 1023, C_ID, 1, self.cfg.customers()))
        }
    }

    /// A procedure from `th`'s spares (or a new one) with `args`.
    fn procedure(&self, th: &mut TpccThread, kind: usize, args: Args) -> Box<Procedure<TpccTxn>> {
        let mut p = th.spare.pop().unwrap_or_else(|| {
            Procedure::new(
                kind,
                TpccTxn {
                    t: self.t(),
                    args: args.clone(),
                    items: Vec::with_capacity(15),
                    buf: Vec::with_capacity(1024),
                    ids: Vec::with_capacity(16),
                    found: 0,
                },
            )
        });
        p.kind = kind;
        p.body.args = args;
        p
    }

    /// Clause 2.4.1: new-order's inputs.
    fn new_order(&self, th: &mut TpccThread) -> Box<Procedure<TpccTxn>> {
        let rng = &mut th.rng;
        let w = if self.cfg.bind_warehouses {
            th.home
        } else {
            uniform(rng, 1, self.cfg.warehouses)
        };
        let d = uniform(rng, 1, DISTRICTS as u32) as u8;
        let c = nurand(rng, 1023, C_ID, 1, self.cfg.customers());
        let ol_cnt = uniform(rng, 5, 15) as usize;
        let rollback = uniform(rng, 1, 100) == 1;
        th.items.clear();
        let mut all_local = 1u8;
        for n in 0..ol_cnt {
            let mut i = nurand(rng, 8191, C_OL_I_ID, 1, self.cfg.items());
            if rollback && n == ol_cnt - 1 {
                i = self.cfg.items() + 1; // unused item id: the transaction rolls back
            }
            let remote = rng.below(1_000_000) < (self.cfg.remote_item_pct * 10_000.0) as u64;
            let supply = if remote {
                self.other_warehouse(rng, w)
            } else {
                w
            };
            if supply != w {
                all_local = 0;
            }
            th.items.push((i, supply, uniform(rng, 1, 10) as u8));
        }
        // Items in a global order avoid nothing under OCC, but match
        // Silo's client (it sorts to reduce lock-order deadlocks in 2PL
        // baselines that share the workload).
        th.items.sort_unstable_by_key(|&(i, s, _)| (s, i));
        let fast_id = self
            .cfg
            .fast_ids
            .then(|| self.next_id_slot(w, d).fetch_add(1, Ordering::Relaxed));
        let args = Args::NewOrder {
            w,
            d,
            c,
            all_local,
            fast_id,
            entry_d: now(),
            predicted: None,
        };
        let mut p = self.procedure(th, NEW_ORDER, args);
        p.body.items.clear();
        p.body.items.extend_from_slice(&th.items);
        p
    }

    /// Clause 2.5.1: payment's inputs.
    fn payment(&self, th: &mut TpccThread) -> Box<Procedure<TpccTxn>> {
        let w = self.home(th);
        let rng = &mut th.rng;
        let d = uniform(rng, 1, DISTRICTS as u32) as u8;
        let (c_w, c_d) =
            if uniform(rng, 1, 100) <= self.cfg.remote_payment_pct && self.cfg.warehouses > 1 {
                (
                    self.other_warehouse(rng, w),
                    uniform(rng, 1, DISTRICTS as u32) as u8,
                )
            } else {
                (w, d)
            };
        let sel = self.customer_sel(rng);
        let amount = uniform(rng, 100, 500_000) as i64;
        // Only this thread uses its id's counter while it runs.
        let seq = th.history_seq.load(Ordering::Relaxed) + 1;
        th.history_seq.store(seq, Ordering::Relaxed);
        let args = Args::Payment {
            w,
            d,
            c_w,
            c_d,
            sel,
            amount,
            history: key::history(w, th.id, seq),
            date: now(),
            predicted: None,
        };
        self.procedure(th, PAYMENT, args)
    }

    /// Clause 2.6.1: order-status's inputs.
    fn order_status(&self, th: &mut TpccThread) -> Box<Procedure<TpccTxn>> {
        let w = self.home(th);
        let rng = &mut th.rng;
        let d = uniform(rng, 1, DISTRICTS as u32) as u8;
        let sel = self.customer_sel(rng);
        self.procedure(th, ORDER_STATUS, Args::OrderStatus { w, d, sel })
    }

    /// Clause 2.7.1: delivery's inputs. Each district's scan starts at the
    /// oldest undelivered order this thread last saw, as Silo's tpcc.cc
    /// does (`last_no_o_ids`): delivered NEW-ORDER rows stay in the tree
    /// as absent records until garbage collection unhooks them, and
    /// scanning from 0 would walk all of them. New orders only get larger
    /// ids and delivery takes the oldest, so no row below the hint can
    /// appear; a stale (too low) hint only costs time.
    fn delivery(&self, th: &mut TpccThread) -> Box<Procedure<TpccTxn>> {
        let w = self.home(th);
        let carrier = uniform(&mut th.rng, 1, 10) as u8;
        let hints = *th
            .delivery_hints
            .entry(w)
            .or_insert([0; DISTRICTS as usize]);
        let args = Args::Delivery {
            w,
            carrier,
            date: now(),
            hints,
            predicted: None,
        };
        self.procedure(th, DELIVERY, args)
    }

    /// Clause 2.8.1: stock-level's inputs. Each terminal has a fixed
    /// district (clause 2.8.1.1): the thread's id.
    fn stock_level(&self, th: &mut TpccThread) -> Box<Procedure<TpccTxn>> {
        let w = self.home(th);
        let d = (th.id as u32 % DISTRICTS as u32 + 1) as u8;
        let threshold = uniform(&mut th.rng, 10, 20);
        self.procedure(th, STOCK_LEVEL, Args::StockLevel { w, d, threshold })
    }

    /// Fill in `p`'s declaration for `ex`'s design: nothing for one that
    /// ignores declarations; the warehouses it touches (its partitions)
    /// for one that locks or partitions by them; and, for one that needs
    /// every write up front, the keys it writes, predicted by
    /// reconnaissance on a snapshot where they depend on reads
    /// (bohm-vldb15 §3, Calvin's OLLP) — the run checks the prediction.
    fn plan<R: TxRunner>(
        &self,
        th: &mut TpccThread,
        ex: &mut Exec<'_, R>,
        p: &mut Procedure<TpccTxn>,
    ) -> Result<(), Error> {
        p.planned = ex.uses_declared();
        if !p.planned {
            return Ok(());
        }
        let d = &mut p.declared;
        d.clear();
        let part = |d: &mut Declared, w: u32| {
            if !d.partitions().contains(&u64::from(w)) {
                d.partition(u64::from(w));
            }
        };
        let body = &mut p.body;
        match body.args {
            Args::NewOrder { w, .. } | Args::Payment { w, .. } => part(d, w),
            Args::OrderStatus { w, .. } | Args::Delivery { w, .. } | Args::StockLevel { w, .. } => {
                part(d, w)
            }
        }
        match body.args {
            Args::NewOrder { .. } => body.items.iter().for_each(|&(_, s, _)| part(d, s)),
            Args::Payment { c_w, .. } => part(d, c_w),
            _ => {}
        }
        if !ex.needs_write_sets() {
            return Ok(());
        }
        let t = self.t();
        match &mut body.args {
            Args::NewOrder {
                w,
                d: dn,
                c,
                fast_id,
                predicted,
                ..
            } => {
                let (w, dn, c) = (*w, *dn, *c);
                // Declared in the order the run touches them (BOHM finds
                // declared keys with a cursor in that order).
                d.read(t.warehouse, &key::warehouse(w));
                let o = match *fast_id {
                    Some(o) => o,
                    None => {
                        // Reconnaissance: D_NEXT_O_ID, and whether every
                        // item exists (an order that rolls back takes no
                        // id), on a snapshot; then past the orders this
                        // client has in flight for the district.
                        let items = &body.items;
                        let (next, whole) = ex.runner().snapshot_read(&mut |tx| {
                            let dist = District::decode(
                                tx.read(t.district, &key::district(w, dn))?
                                    .ok_or_else(|| corrupt("district"))?,
                            )?;
                            let mut whole = true;
                            for &(i, _, _) in items {
                                whole &= tx.read(t.item, &key::item(i))?.is_some();
                            }
                            Ok((dist.next_o_id, whole))
                        })?;
                        let slot = th.next_order.entry((w, dn)).or_insert(0);
                        let o = next.max(*slot);
                        if whole {
                            *slot = o + 1;
                        }
                        *predicted = Some(o);
                        d.write(t.district, &key::district(w, dn));
                        o
                    }
                };
                d.read(t.customer, &key::customer(w, dn, c));
                d.write(t.order, &key::order(w, dn, o));
                d.write(t.order_customer, &key::order_customer(w, dn, c, o));
                d.write(t.new_order, &key::order(w, dn, o));
                for (n, &(i, supply, _)) in body.items.iter().enumerate() {
                    d.read(t.item, &key::item(i));
                    d.write(t.stock, &key::stock(supply, i));
                    if let Some(sd) = t.stock_data {
                        d.read(sd, &key::stock(supply, i));
                    }
                    d.write(t.order_line, &key::order_line(w, dn, o, n as u8 + 1));
                }
            }
            Args::Payment {
                w,
                d: dn,
                c_w,
                c_d,
                sel,
                history,
                predicted,
                ..
            } => {
                let (w, dn, c_w, c_d) = (*w, *dn, *c_w, *c_d);
                let c = match sel {
                    CustomerSel::Id(c) => *c,
                    CustomerSel::Last(_) => {
                        // Reconnaissance: the customer the name picks.
                        let ids = &mut body.ids;
                        let c = ex
                            .runner()
                            .snapshot_read(&mut |tx| customer_id(tx, &t, c_w, c_d, sel, ids))?;
                        *predicted = Some(c);
                        c
                    }
                };
                d.write(t.warehouse, &key::warehouse(w));
                d.write(t.district, &key::district(w, dn));
                d.write(t.customer, &key::customer(c_w, c_d, c));
                d.write(t.history, history);
            }
            Args::Delivery {
                w,
                hints,
                predicted,
                ..
            } => {
                // Reconnaissance: per district, the oldest new order past
                // the ones this client's deliveries in flight take, and
                // its customer and line count.
                let w = *w;
                let taken = th.next_delivery.entry(w).or_insert([0; DISTRICTS as usize]);
                let from: [u32; DISTRICTS as usize] =
                    std::array::from_fn(|i| hints[i].max(taken[i]));
                let oldest = ex.runner().snapshot_read(&mut |tx| {
                    let mut oldest = [(0u32, 0u32, 0u8); DISTRICTS as usize];
                    for dn in 1..=DISTRICTS {
                        let i = dn as usize - 1;
                        let mut o = None;
                        tx.read_range(
                            t.new_order,
                            Bound::Included(&key::order(w, dn, from[i])),
                            Bound::Included(&key::order(w, dn, key::MAX_ORDER_ID)),
                            1,
                            false,
                            &mut |k, _| {
                                o = key::order_id(k);
                                false
                            },
                        )?;
                        let Some(o) = o else { continue };
                        let order = Order::decode(
                            tx.read(t.order, &key::order(w, dn, o))?
                                .ok_or_else(|| corrupt("oorder"))?,
                        )?;
                        oldest[i] = (o, order.c_id, order.ol_cnt);
                    }
                    Ok(oldest)
                })?;
                let mut guess = [0u32; DISTRICTS as usize];
                for dn in 1..=DISTRICTS {
                    let i = dn as usize - 1;
                    let (o, c, lines) = oldest[i];
                    if o == 0 {
                        continue;
                    }
                    guess[i] = o;
                    taken[i] = o + 1;
                    d.write(t.new_order, &key::order(w, dn, o));
                    d.write(t.order, &key::order(w, dn, o));
                    for n in 1..=lines {
                        d.write(t.order_line, &key::order_line(w, dn, o, n));
                    }
                    d.write(t.customer, &key::customer(w, dn, c));
                }
                *predicted = Some(guess);
            }
            // Read-only: nothing to write.
            Args::OrderStatus { .. } | Args::StockLevel { .. } => {}
        }
        Ok(())
    }

    /// A plan that went stale: forget what this client predicted past the
    /// snapshot for what went stale (the next prediction starts from the
    /// snapshot, and from what the stale run found).
    fn forget(th: &mut TpccThread, p: &mut Procedure<TpccTxn>) {
        match &mut p.body.args {
            Args::NewOrder {
                w, d, predicted, ..
            } => {
                th.next_order.insert((*w, *d), p.body.found);
                *predicted = None;
            }
            Args::Payment { predicted, .. } => *predicted = None,
            Args::Delivery { w, predicted, .. } => {
                th.next_delivery.remove(w);
                *predicted = None;
            }
            Args::OrderStatus { .. } | Args::StockLevel { .. } => {}
        }
    }

    /// Plan `p` and run it (or hand it to a pipelined design), then take
    /// back what finished.
    fn submit<R: TxRunner>(
        &self,
        th: &mut TpccThread,
        ex: &mut Exec<'_, R>,
        mut p: Box<Procedure<TpccTxn>>,
    ) -> Result<(), Error> {
        self.plan(th, ex, &mut p)?;
        ex.submit(p, &mut th.done)?;
        self.settle(th);
        Ok(())
    }

    /// Take back the finished procedures: a delivery raises its
    /// warehouse's hints; a stale plan waits to be predicted again; the
    /// rest are kept for reuse.
    fn settle(&self, th: &mut TpccThread) {
        for mut d in std::mem::take(&mut th.done) {
            match d.outcome {
                Ok(Some(found)) => {
                    if let Args::Delivery { w, .. } = d.procedure.body.args {
                        let hints = th
                            .delivery_hints
                            .entry(w)
                            .or_insert([0; DISTRICTS as usize]);
                        for (h, f) in hints.iter_mut().zip(found) {
                            *h = (*h).max(f);
                        }
                    }
                }
                Err(Error::StalePlan(_)) => {
                    Self::forget(th, &mut d.procedure);
                    th.stale.push(d.procedure);
                    continue;
                }
                _ => {}
            }
            th.spare.push(d.procedure);
        }
    }
}

impl Workload for Tpcc {
    type Thread = TpccThread;

    fn types(&self) -> &'static [&'static str] {
        &TYPES
    }

    fn load<E: Engine>(
        &mut self,
        engine: &E,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), Error> {
        let t = load::create_tables(engine, self.cfg.split_stock)?;
        load::load(self, engine, &t, 0x7bcc, progress)?;
        self.tables = Some(t);
        Ok(())
    }

    fn thread(&self, id: usize, _threads: usize, seed: u64) -> TpccThread {
        TpccThread {
            rng: Rng::new(seed, id as u64 + 1),
            home: (id as u32 % self.cfg.warehouses) + 1,
            id: id as u16,
            history_seq: Arc::clone(
                self.history_seqs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(id as u16)
                    .or_insert_with(|| Arc::new(AtomicU64::new(self.history_base))),
            ),
            delivery_hints: Default::default(),
            items: Vec::with_capacity(15),
            spare: Vec::new(),
            done: Vec::new(),
            stale: Vec::new(),
            next_order: Default::default(),
            next_delivery: Default::default(),
        }
    }

    fn run_one<R: TxRunner>(&self, th: &mut TpccThread, ex: &mut Exec<'_, R>) -> Result<(), Error> {
        // A procedure whose predicted write set went stale goes again
        // first (predicted anew).
        if let Some(p) = th.stale.pop() {
            return self.submit(th, ex, p);
        }
        let x = uniform(&mut th.rng, 1, 100);
        let p = match self.cfg.mix {
            Mix::NewOrderOnly => self.new_order(th),
            Mix::NewOrderStockLevel if x <= 50 => self.new_order(th),
            Mix::NewOrderStockLevel => self.stock_level(th),
            Mix::Standard => match x {
                1..=45 => self.new_order(th),
                46..=88 => self.payment(th),
                89..=92 => self.order_status(th),
                93..=96 => self.delivery(th),
                _ => self.stock_level(th),
            },
        };
        if let (true, Args::StockLevel { w, d, threshold }) =
            (self.cfg.snapshot_stock_level, &p.body.args)
        {
            // Silo Fig. 10: stock-level as a snapshot transaction, on the
            // client's thread.
            let (t, w, d, threshold) = (self.t(), *w, *d, *threshold);
            th.spare.push(p);
            let start = granary_api::Stamp::now();
            ex.runner()
                .snapshot_read(&mut |tx| stock_level(tx, &t, w, d, threshold))?;
            ex.completed_outside(STOCK_LEVEL, start);
            return Ok(());
        }
        self.submit(th, ex, p)
    }

    fn finish<R: TxRunner>(&self, th: &mut TpccThread, ex: &mut Exec<'_, R>) -> Result<(), Error> {
        ex.drain(&mut th.done)?;
        self.settle(th);
        Ok(())
    }

    fn verify<E: Engine>(&self, engine: &E) -> Result<Vec<String>, Error> {
        verify::verify(self, engine)
    }
}
