//! Initial population (clause 4.3.3), in parallel: the item table on one
//! thread, then warehouses spread over the loader threads. Rows go in as
//! batches of inserts, a few hundred per transaction.

use std::sync::atomic::{AtomicU64, Ordering};

use granary_api::{Declared, Engine, Error, TableOptions, Tx, TxRunner};

use super::rows::{
    key, Customer, District, History, Item, NewOrder, Order, OrderLine, Stock, StockData, StockHot,
    Str, Warehouse,
};
use super::{
    astring, last_name, now, nstring, nurand, uniform, Tables, Tpcc, TpccConfig, C_LAST_LOAD,
    DISTRICTS,
};
use crate::driver::run_until_committed_declared;
use crate::rng::Rng;

/// Rows per loading transaction.
const BATCH: usize = 400;

/// A batch of pending inserts, flushed as one transaction.
struct Batch<'r, R: TxRunner> {
    runner: &'r mut R,
    rows: Vec<(granary_api::TableId, Vec<u8>, Vec<u8>)>,
    /// Rows of `rows` that count for progress (see [`progress_total`]).
    counted: u64,
    done: &'r AtomicU64,
    progress: &'r (dyn Fn(u64, u64) + Sync),
    total: u64,
    /// For protocols that read declarations (else `None`): the warehouse
    /// being loaded, declared as each batch's partition; a batch of the
    /// shared ITEM table declares nothing (Partitioned-Store writes a
    /// shared table only holding every partition). Batches then end at
    /// each warehouse's (and the items') last row.
    declared: Option<Declared>,
}

impl<R: TxRunner> Batch<'_, R> {
    /// Add a row that counts for progress.
    fn add(&mut self, t: granary_api::TableId, k: &[u8], v: &[u8]) -> Result<(), Error> {
        self.counted += 1;
        self.add_uncounted(t, k, v)
    }

    /// Add an order line: how many an order has is drawn at random, so
    /// they do not count for progress.
    fn add_uncounted(&mut self, t: granary_api::TableId, k: &[u8], v: &[u8]) -> Result<(), Error> {
        self.rows.push((t, k.to_vec(), v.to_vec()));
        if self.rows.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Start loading warehouse `w`, or the items (`None`).
    fn start(&mut self, w: Option<u32>) -> Result<(), Error> {
        if self.declared.is_some() {
            // The pending rows belong to the previous unit's declaration.
            self.flush()?;
        }
        if let Some(d) = &mut self.declared {
            d.clear();
            if let Some(w) = w {
                d.partition(u64::from(w));
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Error> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = &self.rows;
        let declared = self
            .declared
            .as_ref()
            .filter(|d| !d.partitions().is_empty());
        run_until_committed_declared(self.runner, declared, |tx| {
            for (t, k, v) in rows {
                tx.insert(*t, k, v)?;
            }
            Ok(())
        })?;
        let n = std::mem::take(&mut self.counted);
        self.rows.clear();
        // Relaxed: a progress counter only.
        let d = self.done.fetch_add(n, Ordering::Relaxed) + n;
        (self.progress)(d, self.total);
        Ok(())
    }
}

/// What loading `c` reports progress in: every row but the order lines
/// (5 to 15 per order, drawn at random), so that the total announced is
/// the count reached. Per warehouse: itself, a stock row per item (two
/// when STOCK is split), and per district itself, three rows per customer
/// (customer, name index, history) and per order two (order, customer
/// index) plus a new-order row for each undelivered one. Plus the items.
pub(super) fn progress_total(c: &TpccConfig) -> u64 {
    let (items, orders) = (c.items() as u64, c.orders() as u64);
    let undelivered = orders + 1 - c.first_undelivered() as u64;
    let per_d = 1 + c.customers() as u64 * 3 + orders * 2 + undelivered;
    let stock = items * if c.split_stock { 2 } else { 1 };
    items + c.warehouses as u64 * (1 + stock + DISTRICTS as u64 * per_d)
}

pub(super) fn create_tables<E: Engine>(e: &E, split_stock: bool) -> Result<Tables, Error> {
    make_tables(split_stock, |name, o| e.create_table_with(name, o))
}

/// The tables, each made by `f(name, options)` (`stock_data` too if
/// `split_stock`). Warehouse, district, customer, item and stock rows are
/// read and updated by key; the others are inserted all run and scanned,
/// so they take no point index.
pub(super) fn make_tables(
    split_stock: bool,
    mut f: impl FnMut(&str, TableOptions) -> Result<granary_api::TableId, Error>,
) -> Result<Tables, Error> {
    let (point, plain) = (TableOptions::point_lookups(), TableOptions::default());
    Ok(Tables {
        warehouse: f("warehouse", point)?,
        district: f("district", point)?,
        customer: f("customer", point)?,
        customer_name: f("customer_name_idx", plain)?,
        history: f("history", plain)?,
        new_order: f("new_order", plain)?,
        order: f("oorder", plain)?,
        order_customer: f("oorder_c_id_idx", plain)?,
        order_line: f("order_line", plain)?,
        item: f("item", point)?,
        stock: f("stock", point)?,
        stock_data: split_stock.then(|| f("stock_data", point)).transpose()?,
    })
}

/// `ORIGINAL` in 10% of data strings (clause 4.3.3.1).
fn data_field(rng: &mut Rng, lo: u32, hi: u32, out: &mut Vec<u8>) {
    astring(rng, lo, hi, out);
    if rng.below(10) == 0 {
        let at = rng.below((out.len() - 8) as u64) as usize;
        out[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
}

fn address(rng: &mut Rng, s: &mut Vec<u8>) -> [Vec<u8>; 5] {
    let mut f = || {
        astring(rng, 10, 20, s);
        s.clone()
    };
    let (a, b, c) = (f(), f(), f());
    astring(rng, 2, 2, s);
    let state = s.clone();
    nstring(rng, 4, 4, s);
    s.extend_from_slice(b"11111");
    [a, b, c, state, s.clone()]
}

pub(super) fn load<E: Engine>(
    tpcc: &Tpcc,
    engine: &E,
    t: &Tables,
    seed: u64,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<(), Error> {
    let total = progress_total(&tpcc.cfg);
    let done = AtomicU64::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(tpcc.cfg.warehouses as usize + 1)
        .max(1);
    let next = AtomicU64::new(0);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let (done, next) = (&done, &next);
                s.spawn(move || -> Result<(), Error> {
                    let mut r = engine.runner()?;
                    let declared = r.uses_declared().then(Declared::new);
                    let mut b = Batch {
                        runner: &mut r,
                        rows: Vec::new(),
                        counted: 0,
                        done,
                        progress,
                        total,
                        declared,
                    };
                    // Unit 0 is the item table; unit w is warehouse w.
                    loop {
                        let unit = next.fetch_add(1, Ordering::Relaxed);
                        if unit > tpcc.cfg.warehouses as u64 {
                            break;
                        }
                        let mut rng = Rng::new(seed, 1_000_000 + unit * 7 + i as u64);
                        b.start((unit > 0).then_some(unit as u32))?;
                        if unit == 0 {
                            load_items(&mut b, &tpcc.cfg, t, &mut rng)?;
                        } else {
                            load_warehouse(&mut b, &tpcc.cfg, t, unit as u32, &mut rng)?;
                        }
                    }
                    b.flush()
                })
            })
            .collect();
        hs.into_iter()
            .try_for_each(|h| h.join().expect("loader panicked"))
    })
}

fn load_items<R: TxRunner>(
    b: &mut Batch<'_, R>,
    c: &TpccConfig,
    t: &Tables,
    rng: &mut Rng,
) -> Result<(), Error> {
    let (mut s, mut v) = (Vec::new(), Vec::new());
    for i in 1..=c.items() {
        astring(rng, 14, 24, &mut s);
        let name = Str::new(&s);
        data_field(rng, 26, 50, &mut s);
        Item {
            im_id: uniform(rng, 1, 10_000),
            name,
            price: uniform(rng, 100, 10_000) as i64,
            data: Str::new(&s),
        }
        .encode(&mut v);
        b.add(t.item, &key::item(i), &v)?;
    }
    Ok(())
}

fn load_warehouse<R: TxRunner>(
    b: &mut Batch<'_, R>,
    cfg: &TpccConfig,
    t: &Tables,
    w: u32,
    rng: &mut Rng,
) -> Result<(), Error> {
    let (mut s, mut v) = (Vec::new(), Vec::new());
    let a = address(rng, &mut s);
    astring(rng, 6, 10, &mut s);
    Warehouse {
        name: Str::new(&s),
        street_1: Str::new(&a[0]),
        street_2: Str::new(&a[1]),
        city: Str::new(&a[2]),
        state: Str::new(&a[3]),
        zip: Str::new(&a[4]),
        tax: uniform(rng, 0, 2000),
        ytd: 30_000_000,
    }
    .encode(&mut v);
    b.add(t.warehouse, &key::warehouse(w), &v)?;

    for i in 1..=cfg.items() {
        let mut st = Stock {
            quantity: uniform(rng, 10, 100),
            ..Stock::default()
        };
        for d in &mut st.dist {
            astring(rng, 24, 24, &mut s);
            *d = Str::new(&s);
        }
        data_field(rng, 26, 50, &mut s);
        st.data = Str::new(&s);
        if let Some(sd) = t.stock_data {
            StockHot {
                quantity: st.quantity,
                ..StockHot::default()
            }
            .encode(&mut v);
            b.add(t.stock, &key::stock(w, i), &v)?;
            StockData {
                dist: st.dist,
                data: st.data,
            }
            .encode(&mut v);
            b.add(sd, &key::stock(w, i), &v)?;
        } else {
            st.encode(&mut v);
            b.add(t.stock, &key::stock(w, i), &v)?;
        }
    }

    let since = now();
    for d in 1..=DISTRICTS {
        let a = address(rng, &mut s);
        astring(rng, 6, 10, &mut s);
        District {
            name: Str::new(&s),
            street_1: Str::new(&a[0]),
            street_2: Str::new(&a[1]),
            city: Str::new(&a[2]),
            state: Str::new(&a[3]),
            zip: Str::new(&a[4]),
            tax: uniform(rng, 0, 2000),
            ytd: 3_000_000,
            next_o_id: cfg.orders() + 1,
        }
        .encode(&mut v);
        b.add(t.district, &key::district(w, d), &v)?;

        let mut last = Vec::new();
        let names = cfg.last_names();
        for c in 1..=cfg.customers() {
            let n = if c <= names {
                c - 1
            } else {
                nurand(rng, 255, C_LAST_LOAD, 0, names - 1)
            };
            last_name(n, &mut last);
            astring(rng, 8, 16, &mut s);
            let first = s.clone();
            let a = address(rng, &mut s);
            nstring(rng, 16, 16, &mut s);
            let phone = s.clone();
            astring(rng, 300, 500, &mut s);
            Customer {
                first: Str::new(&first),
                middle: Str::new(b"OE"),
                last: Str::new(&last),
                street_1: Str::new(&a[0]),
                street_2: Str::new(&a[1]),
                city: Str::new(&a[2]),
                state: Str::new(&a[3]),
                zip: Str::new(&a[4]),
                phone: Str::new(&phone),
                since,
                credit: Str::new(if rng.below(10) == 0 { b"BC" } else { b"GC" }),
                credit_lim: 5_000_000,
                discount: uniform(rng, 0, 5000),
                balance: -1000,
                ytd_payment: 1000,
                payment_cnt: 1,
                delivery_cnt: 0,
                data: Str::new(&s),
            }
            .encode(&mut v);
            b.add(t.customer, &key::customer(w, d, c), &v)?;
            b.add(
                t.customer_name,
                &key::customer_name(w, d, &last, &first, c),
                &[],
            )?;
            astring(rng, 12, 24, &mut s);
            History {
                c_id: c,
                c_d_id: d,
                c_w_id: w,
                d_id: d,
                w_id: w,
                date: since,
                amount: 1000,
                data: Str::new(&s),
            }
            .encode(&mut v);
            // Loader histories use thread id 0xFFFF, apart from workers'.
            let seq = d as u64 * cfg.customers() as u64 + c as u64;
            b.add(t.history, &key::history(w, 0xFFFF, seq), &v)?;
        }

        // Orders: customers in a random permutation (clause 4.3.3.1).
        let mut perm: Vec<u32> = (1..=cfg.customers()).collect();
        for i in (1..perm.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            perm.swap(i, j);
        }
        for o in 1..=cfg.orders() {
            let c = perm[o as usize - 1];
            let delivered = o < cfg.first_undelivered();
            let ol_cnt = uniform(rng, 5, 15) as u8;
            Order {
                c_id: c,
                entry_d: since,
                carrier_id: if delivered {
                    uniform(rng, 1, 10) as u8
                } else {
                    0
                },
                ol_cnt,
                all_local: 1,
            }
            .encode(&mut v);
            b.add(t.order, &key::order(w, d, o), &v)?;
            b.add(t.order_customer, &key::order_customer(w, d, c, o), &[])?;
            if !delivered {
                NewOrder { present: 1 }.encode(&mut v);
                b.add(t.new_order, &key::order(w, d, o), &v)?;
            }
            for n in 1..=ol_cnt {
                astring(rng, 24, 24, &mut s);
                OrderLine {
                    i_id: uniform(rng, 1, cfg.items()),
                    supply_w_id: w,
                    delivery_d: if delivered { since } else { 0 },
                    quantity: 5,
                    amount: if delivered {
                        0
                    } else {
                        uniform(rng, 1, 999_999) as i64
                    },
                    dist_info: Str::new(&s),
                }
                .encode(&mut v);
                b.add_uncounted(t.order_line, &key::order_line(w, d, o, n), &v)?;
            }
        }
    }
    Ok(())
}
