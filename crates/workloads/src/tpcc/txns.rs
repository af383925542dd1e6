//! The five transactions (clauses 2.4–2.8), and the [`Workload`] impl.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::time::Instant;

use granary_api::{Declared, Engine, Error, ReadOnly, Tx, TxError, TxRunner};

use super::rows::{
    corrupt, key, Customer, District, History, Item, NewOrder, Order, OrderLine, Stock, Str,
    Warehouse,
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
/// scratch.
fn customer_id<T: Tx>(
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
            tx.scan(
                t.customer_name,
                Bound::Included(&lo),
                hi_b,
                usize::MAX,
                false,
                |k, _| {
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

/// The warehouses `ws` declared as the transaction's partitions in `d`
/// (each once), if the protocol reads declarations; `None` (nothing built)
/// if not. TPC-C's transactions know their warehouses up front, not all
/// their keys (new-order allocates its order id inside).
fn warehouses<'d, R: TxRunner>(
    ex: &Exec<'_, R>,
    d: &'d mut Declared,
    ws: impl IntoIterator<Item = u32>,
) -> Option<&'d Declared> {
    if !ex.uses_declared() {
        return None;
    }
    d.clear();
    for w in ws {
        if !d.partitions().contains(&u64::from(w)) {
            d.partition(u64::from(w));
        }
    }
    Some(d)
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

    /// Clause 2.4.
    fn new_order<R: TxRunner>(
        &self,
        th: &mut TpccThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let t = self.t();
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
        let items = &th.items;
        let buf = &mut th.buf;
        let entry_d = now();
        let declared = warehouses(
            ex,
            &mut th.declared,
            std::iter::once(w).chain(items.iter().map(|&(_, s, _)| s)),
        );
        ex.txn_declared(NEW_ORDER, declared, |tx| {
            let wh = get_row(
                tx,
                t.warehouse,
                &key::warehouse(w),
                Warehouse::decode,
                "warehouse",
            )?;
            let dk = key::district(w, d);
            let mut dist = get_row(tx, t.district, &dk, District::decode, "district")?;
            let o = match fast_id {
                Some(o) => o,
                None => {
                    let o = dist.next_o_id;
                    if o > key::MAX_ORDER_ID {
                        return Err(TxError::Failed(Error::InvalidOption(format!(
                            "district ({w},{d}) ran out of order ids ({})",
                            key::MAX_ORDER_ID
                        ))));
                    }
                    dist.next_o_id += 1;
                    dist.encode(buf);
                    tx.put(t.district, &dk, buf)?;
                    o
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
                ol_cnt: items.len() as u8,
                all_local,
            }
            .encode(buf);
            tx.insert(t.order, &key::order(w, d, o), buf)?;
            tx.insert(t.order_customer, &key::order_customer(w, d, c, o), &[])?;
            NewOrder { present: 1 }.encode(buf);
            tx.insert(t.new_order, &key::order(w, d, o), buf)?;
            let mut total = 0i64;
            for (n, &(i, supply, qty)) in items.iter().enumerate() {
                let Some(iv) = tx.get(t.item, &key::item(i))? else {
                    // Clause 2.4.2.3: an unused item rolls the order back.
                    return Err(TxError::rollback());
                };
                let item = Item::decode(iv)?;
                let sk = key::stock(supply, i);
                let mut st = get_row(tx, t.stock, &sk, Stock::decode, "stock")?;
                let q = qty as u32;
                st.quantity = if st.quantity >= q + 10 {
                    st.quantity - q
                } else {
                    st.quantity + 91 - q
                };
                st.ytd += q as u64;
                st.order_cnt += 1;
                if supply != w {
                    st.remote_cnt += 1;
                }
                let dist_info = st.dist[d as usize - 1];
                st.encode(buf);
                tx.put(t.stock, &sk, buf)?;
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
            let _ = total
                * (10_000 - cust.discount as i64)
                * (10_000 + wh.tax as i64 + dist.tax as i64);
            Ok(())
        })?;
        Ok(())
    }

    /// Clause 2.5.
    fn payment<R: TxRunner>(&self, th: &mut TpccThread, ex: &mut Exec<'_, R>) -> Result<(), Error> {
        let t = self.t();
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
        th.history_seq += 1;
        let hk = key::history(w, th.id, th.history_seq);
        let buf = &mut th.buf;
        let ids = &mut th.ids;
        let date = now();
        let declared = warehouses(ex, &mut th.declared, [w, c_w]);
        ex.txn_declared(PAYMENT, declared, |tx| {
            let wk = key::warehouse(w);
            let mut wh = get_row(tx, t.warehouse, &wk, Warehouse::decode, "warehouse")?;
            wh.ytd += amount;
            wh.encode(buf);
            tx.put(t.warehouse, &wk, buf)?;
            let dk = key::district(w, d);
            let mut dist = get_row(tx, t.district, &dk, District::decode, "district")?;
            dist.ytd += amount;
            dist.encode(buf);
            tx.put(t.district, &dk, buf)?;
            let c = customer_id(tx, &t, c_w, c_d, &sel, ids)?;
            let ck = key::customer(c_w, c_d, c);
            let mut cust = get_row(tx, t.customer, &ck, Customer::decode, "customer")?;
            cust.balance -= amount;
            cust.ytd_payment += amount;
            cust.payment_cnt += 1;
            if cust.credit.as_bytes() == b"BC" {
                let mut data = format!("{c} {c_d} {c_w} {d} {w} {amount} ").into_bytes();
                data.extend_from_slice(cust.data.as_bytes());
                cust.data = Str::new(&data);
            }
            cust.encode(buf);
            tx.put(t.customer, &ck, buf)?;
            let hdata = Str::concat(&[wh.name.as_bytes(), b"    ", dist.name.as_bytes()]);
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
            tx.insert(t.history, &hk, buf)
        })?;
        Ok(())
    }

    /// Clause 2.6 (read-only).
    fn order_status<R: TxRunner>(
        &self,
        th: &mut TpccThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let t = self.t();
        let w = self.home(th);
        let rng = &mut th.rng;
        let d = uniform(rng, 1, DISTRICTS as u32) as u8;
        let sel = self.customer_sel(rng);
        let ids = &mut th.ids;
        let declared = warehouses(ex, &mut th.declared, [w]);
        ex.txn_declared(ORDER_STATUS, declared, |tx| {
            let c = customer_id(tx, &t, w, d, &sel, ids)?;
            let _cust = get_row(
                tx,
                t.customer,
                &key::customer(w, d, c),
                Customer::decode,
                "customer",
            )?;
            // The customer's most recent order: last key of (w, d, c, *).
            let last = edge_id(
                tx,
                t.order_customer,
                &key::order_customer(w, d, c, 0),
                &key::order_customer(w, d, c, key::MAX_ORDER_ID),
                true,
                key::order_customer_id,
            )?;
            let Some(o) = last else { return Ok(0) };
            let _order = get_row(tx, t.order, &key::order(w, d, o), Order::decode, "oorder")?;
            let mut lines = 0;
            tx.scan(
                t.order_line,
                Bound::Included(&key::order_line(w, d, o, 0)),
                Bound::Included(&key::order_line(w, d, o, 15)),
                usize::MAX,
                false,
                |_, v| {
                    lines += OrderLine::decode(v).is_ok() as u32;
                    true
                },
            )?;
            Ok(lines)
        })?;
        Ok(())
    }

    /// Clause 2.7, run as one transaction over the ten districts (the
    /// spec allows deferred execution; Silo runs it inline).
    fn delivery<R: TxRunner>(
        &self,
        th: &mut TpccThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let t = self.t();
        let w = self.home(th);
        let carrier = uniform(&mut th.rng, 1, 10) as u8;
        let buf = &mut th.buf;
        let date = now();
        // Start each district's scan at the oldest undelivered order this
        // thread last saw, as Silo's tpcc.cc does (`last_no_o_ids`):
        // delivered NEW-ORDER rows stay in the tree as absent records
        // until garbage collection unhooks them, and scanning from 0 would
        // walk all of them. New orders only get larger ids and delivery
        // takes the oldest, so no row below the hint can appear; a stale
        // (too low) hint only costs time.
        let hints = th
            .delivery_hints
            .entry(w)
            .or_insert([0; DISTRICTS as usize]);
        let mut found = [0u32; DISTRICTS as usize];
        let declared = warehouses(ex, &mut th.declared, [w]);
        ex.txn_declared(DELIVERY, declared, |tx| {
            for d in 1..=DISTRICTS {
                let oldest = edge_id(
                    tx,
                    t.new_order,
                    &key::order(w, d, hints[d as usize - 1]),
                    &key::order(w, d, key::MAX_ORDER_ID),
                    false,
                    key::order_id,
                )?;
                let Some(o) = oldest else { continue };
                found[d as usize - 1] = o + 1;
                let ok = key::order(w, d, o);
                tx.delete(t.new_order, &ok)?;
                let mut order = get_row(tx, t.order, &ok, Order::decode, "oorder")?;
                order.carrier_id = carrier;
                order.encode(buf);
                tx.put(t.order, &ok, buf)?;
                let mut sum = 0;
                for n in 1..=order.ol_cnt {
                    let lk = key::order_line(w, d, o, n);
                    let mut line = get_row(tx, t.order_line, &lk, OrderLine::decode, "order_line")?;
                    sum += line.amount;
                    line.delivery_d = date;
                    line.encode(buf);
                    tx.put(t.order_line, &lk, buf)?;
                }
                let ck = key::customer(w, d, order.c_id);
                let mut cust = get_row(tx, t.customer, &ck, Customer::decode, "customer")?;
                cust.balance += sum;
                cust.delivery_cnt += 1;
                cust.encode(buf);
                tx.put(t.customer, &ck, buf)?;
            }
            Ok(())
        })?;
        for (h, f) in hints.iter_mut().zip(found) {
            *h = (*h).max(f);
        }
        Ok(())
    }

    /// Clause 2.8 (read-only).
    fn stock_level<R: TxRunner>(
        &self,
        th: &mut TpccThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let t = self.t();
        let w = self.home(th);
        // Clause 2.8.1.1: each terminal has a fixed district; use the
        // thread's id.
        let d = (th.id as u32 % DISTRICTS as u32 + 1) as u8;
        let threshold = uniform(&mut th.rng, 10, 20);
        let mut body = |tx: &mut dyn ReadOnly| -> Result<u32, TxError> {
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
                if let Some(v) =
                    tx.read_prefix(t.stock, &key::stock(w, i), Stock::QUANTITY_BYTES)?
                {
                    if Stock::quantity_of(v)? < threshold {
                        low += 1;
                    }
                }
            }
            Ok(low)
        };
        if self.cfg.snapshot_stock_level {
            let start = Instant::now();
            ex.runner().snapshot_read(&mut body)?;
            ex.completed_outside(STOCK_LEVEL, start);
        } else {
            let declared = warehouses(ex, &mut th.declared, [w]);
            ex.txn_declared(STOCK_LEVEL, declared, |tx| body(tx))?;
        }
        Ok(())
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
        let t = load::create_tables(engine)?;
        load::load(self, engine, &t, 0x7bcc, progress)?;
        self.tables = Some(t);
        Ok(())
    }

    fn thread(&self, id: usize, _threads: usize, seed: u64) -> TpccThread {
        TpccThread {
            rng: Rng::new(seed, id as u64 + 1),
            home: (id as u32 % self.cfg.warehouses) + 1,
            id: id as u16,
            history_seq: self.history_base,
            delivery_hints: Default::default(),
            buf: Vec::with_capacity(1024),
            items: Vec::with_capacity(15),
            ids: Vec::with_capacity(16),
            declared: Declared::new(),
        }
    }

    fn run_one<R: TxRunner>(&self, th: &mut TpccThread, ex: &mut Exec<'_, R>) -> Result<(), Error> {
        let x = uniform(&mut th.rng, 1, 100);
        match self.cfg.mix {
            Mix::NewOrderOnly => self.new_order(th, ex),
            Mix::NewOrderStockLevel if x <= 50 => self.new_order(th, ex),
            Mix::NewOrderStockLevel => self.stock_level(th, ex),
            Mix::Standard => match x {
                1..=45 => self.new_order(th, ex),
                46..=88 => self.payment(th, ex),
                89..=92 => self.order_status(th, ex),
                93..=96 => self.delivery(th, ex),
                _ => self.stock_level(th, ex),
            },
        }
    }

    fn verify<E: Engine>(&self, engine: &E) -> Result<Vec<String>, Error> {
        verify::verify(self, engine)
    }
}
