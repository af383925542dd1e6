//! Workloads declare what protocols that read declarations need, and
//! nothing for those that do not (`TxRunner::uses_declared`).
//!
//! `Checked` runs Silo underneath and fences every procedure (`Fenced`)
//! with its declaration the way Partitioned-Store (Silo §5.4) would lock
//! it: the partitions declared outright plus those of the
//! declared keys, all of them when nothing is declared; a shared table is
//! read under any partition and written only holding all. A key of a
//! hash-partitioned table must be declared itself (its partition is a hash
//! of it). Each workload runs through the driver on it (loading and
//! verification included) and must leave no access outside.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use granary::{Database, Options, Worker};
use granary_api::{
    AbortReason, Declared, Engine, Error, PartitionRule, Partitioning, ReadOnly, Stats, TableId,
    Tx, TxError, TxRunner,
};
use granary_workloads::driver::{self, DriverConfig, Workload};
use granary_workloads::fence::Fenced;
use granary_workloads::silo52::Silo52;
use granary_workloads::smallbank::{SmallBank, SmallBankConfig};
use granary_workloads::tpcc::{Tpcc, TpccConfig};
use granary_workloads::ycsb::{Ycsb, YcsbConfig};

/// The object-safe part of [`Tx`] a fence needs.
trait DynTx {
    fn get_(&mut self, t: TableId, k: &[u8]) -> Result<Option<&[u8]>, TxError>;
    fn put_(&mut self, t: TableId, k: &[u8], v: &[u8]) -> Result<(), TxError>;
    fn insert_(&mut self, t: TableId, k: &[u8], v: &[u8]) -> Result<(), TxError>;
    fn delete_(&mut self, t: TableId, k: &[u8]) -> Result<bool, TxError>;
    #[allow(clippy::too_many_arguments)]
    fn scan_(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), TxError>;
}

impl<T: Tx> DynTx for T {
    fn get_(&mut self, t: TableId, k: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.get(t, k)
    }
    fn put_(&mut self, t: TableId, k: &[u8], v: &[u8]) -> Result<(), TxError> {
        self.put(t, k, v)
    }
    fn insert_(&mut self, t: TableId, k: &[u8], v: &[u8]) -> Result<(), TxError> {
        self.insert(t, k, v)
    }
    fn delete_(&mut self, t: TableId, k: &[u8]) -> Result<bool, TxError> {
        self.delete(t, k)
    }
    fn scan_(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), TxError> {
        self.scan(t, lo, hi, limit, reverse, f)
    }
}

/// What the engine and its runners share.
struct Shared {
    partitioning: Partitioning,
    /// Per table (by id): its name and rule.
    tables: RwLock<Vec<(String, PartitionRule)>>,
    /// Accesses outside the declaration.
    outside: Mutex<Vec<String>>,
    /// Procedures run with a declaration.
    declared_runs: AtomicU64,
}

/// Silo, checking declarations as Partitioned-Store would lock them.
struct Checked {
    db: Database,
    reads_declarations: bool,
    shared: Arc<Shared>,
}

impl Checked {
    fn new(partitioning: Partitioning, reads_declarations: bool) -> Checked {
        let o = Options::default().epoch_interval(Duration::from_millis(5));
        Checked {
            db: Database::new(o).expect("db"),
            reads_declarations,
            shared: Arc::new(Shared {
                partitioning,
                tables: RwLock::new(Vec::new()),
                outside: Mutex::new(Vec::new()),
                declared_runs: AtomicU64::new(0),
            }),
        }
    }

    fn outside(&self) -> Vec<String> {
        self.shared.outside.lock().unwrap().clone()
    }

    fn declared_runs(&self) -> u64 {
        self.shared.declared_runs.load(Ordering::Relaxed)
    }
}

impl Engine for Checked {
    type Runner = Runner;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        let rule = (self.shared.partitioning)(name)
            .unwrap_or_else(|| panic!("table {name} has no partition rule"));
        let t = self.db.create_table(name)?;
        let mut tables = self.shared.tables.write().unwrap();
        assert_eq!(t.index() as usize, tables.len());
        tables.push((name.to_string(), rule));
        Ok(t)
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.db.table(name)
    }

    fn runner(&self) -> Result<Runner, Error> {
        Ok(Runner {
            w: self.db.worker()?,
            reads_declarations: self.reads_declarations,
            shared: Arc::clone(&self.shared),
        })
    }
}

struct Runner {
    w: Worker,
    reads_declarations: bool,
    shared: Arc<Shared>,
}

impl Tx for dyn DynTx + '_ {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.get_(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.put_(t, key, value)
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.insert_(t, key, value)
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        self.delete_(t, key)
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: F,
    ) -> Result<(), TxError> {
        self.scan_(t, lo, hi, limit, reverse, &mut f)
    }
}

/// A procedure's transaction, fenced by its declaration.
type Fence<'a> = Fenced<'a, dyn DynTx + 'a>;

/// What a declaration (`None`: undeclared) holds, as Partitioned-Store
/// locks it.
struct Held<'a> {
    declared: Option<&'a Declared>,
    tables: &'a [(String, PartitionRule)],
    /// The partition key values declared, outright or by the keys.
    values: Vec<u64>,
    /// Every partition: nothing declared that names one.
    all: bool,
}

impl<'a> Held<'a> {
    fn new(declared: Option<&'a Declared>, tables: &'a [(String, PartitionRule)]) -> Self {
        let mut values: Vec<u64> = Vec::new();
        let mut hashed = false;
        if let Some(d) = declared {
            values.extend(d.partitions());
            for (t, k) in d.reads().chain(d.writes()) {
                let rule = tables[t.index() as usize].1;
                values.extend(rule.field_value(k));
                hashed |= rule == PartitionRule::Hash;
            }
        }
        Held {
            declared,
            tables,
            all: values.is_empty() && !hashed,
            values,
        }
    }

    /// Whether the access is within what is held. A key of a hashed table
    /// must be declared itself (its partition is a hash of it).
    fn allows(&self, t: TableId, key: &[u8], write: bool) -> bool {
        let Some(d) = self.declared.filter(|_| !self.all) else {
            return true;
        };
        match self.tables[t.index() as usize].1 {
            PartitionRule::Shared => !write,
            PartitionRule::Hash if write => d.covers_write(t, key),
            PartitionRule::Hash => d.covers_read(t, key),
            r @ PartitionRule::Field { .. } => self
                .values
                .contains(&r.field_value(key).expect("a field rule")),
        }
    }
}

impl Runner {
    fn fenced<T>(
        &mut self,
        declared: Option<&Declared>,
        body: impl FnOnce(&mut Fence<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let shared = &*self.shared;
        self.w.try_run(|tx| {
            let tables = shared.tables.read().unwrap();
            let held = Held::new(declared, &tables);
            let allows = |t: TableId, k: &[u8], w: bool| held.allows(t, k, w);
            let mut f: Fence<'_> = Fenced::with(tx, &allows);
            let r = body(&mut f);
            let mut outside = shared.outside.lock().unwrap();
            for (t, k, w) in &f.outside {
                outside.push(format!(
                    "{} of {} key {k:?} outside partitions {:?}",
                    if *w { "write" } else { "read" },
                    tables[t.index() as usize].0,
                    held.values
                ));
            }
            r
        })
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Fence<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Fence<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.fenced(None, body)
    }

    fn try_run_declared<T>(
        &mut self,
        declared: &Declared,
        body: impl FnOnce(&mut Fence<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.shared.declared_runs.fetch_add(1, Ordering::Relaxed);
        self.fenced(Some(declared), body)
    }

    fn uses_declared(&self) -> bool {
        self.reads_declarations
    }

    fn last_commit_key(&self) -> u64 {
        self.w.last_commit_key()
    }

    fn stats(&self) -> &Stats {
        TxRunner::stats(&self.w)
    }

    fn snapshot_read<T>(
        &mut self,
        body: &mut dyn FnMut(&mut dyn ReadOnly) -> Result<T, TxError>,
    ) -> Result<T, Error> {
        self.w.snapshot_read(body)
    }
}

/// Load `w` on a fence and run it briefly with 2 threads; returns the
/// engine for its tallies.
fn run<W: Workload>(mut w: W, partitioning: Partitioning, reads_declarations: bool) -> Checked {
    let e = Checked::new(partitioning, reads_declarations);
    w.load(&e, &|_, _| {}).expect("load");
    let cfg = DriverConfig {
        threads: 2,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(300),
        seed: 11,
        latency_every: 1,
        breakdown: false,
    };
    let r = driver::run(&w, &e, &cfg, &|_, _, _| {}).expect("run");
    assert!(r.commits > 0);
    assert_eq!(r.invariant_violations, Vec::<String>::new());
    e
}

fn tpcc() -> Tpcc {
    let mut cfg = TpccConfig::new(3);
    cfg.scale_down = 30;
    // Many remote items and payments, and no home warehouse: every
    // transaction's set of warehouses varies.
    cfg.remote_item_pct = 30.0;
    cfg.remote_payment_pct = 50;
    cfg.bind_warehouses = false;
    Tpcc::new(cfg).expect("config")
}

fn ycsb() -> Ycsb {
    let cfg = YcsbConfig::preset("bohm-longread")
        .unwrap()
        .keys(2000)
        .long_read_keys(100)
        .long_read_fraction(0.1);
    Ycsb::new(cfg).expect("config")
}

fn smallbank() -> SmallBank {
    SmallBank::new(SmallBankConfig::new(100)).expect("config")
}

/// `run` for each workload, with its partitioning.
fn each(reads_declarations: bool, check: impl Fn(&str, Checked)) {
    use granary_workloads::{smallbank, tpcc, ycsb};
    check(
        "tpcc",
        run(tpcc(), tpcc::partitioning(), reads_declarations),
    );
    check(
        "ycsb-mix",
        run(ycsb(), ycsb::partitioning(), reads_declarations),
    );
    check(
        "smallbank",
        run(smallbank(), smallbank::partitioning(), reads_declarations),
    );
    let silo52 = Silo52::new(2000, 100, 50, 2, true);
    check(
        "ycsb",
        run(silo52, ycsb::partitioning(), reads_declarations),
    );
}

#[test]
fn every_access_is_within_the_declared_partitions() {
    each(true, |name, e| {
        assert!(e.declared_runs() > 0, "{name} declared nothing");
        let out = e.outside();
        assert!(
            out.is_empty(),
            "{name}: {} accesses outside the declaration, e.g. {:?}",
            out.len(),
            &out[..out.len().min(5)]
        );
    });
}

#[test]
fn nothing_is_declared_for_protocols_that_ignore_declarations() {
    each(false, |name, e| {
        assert_eq!(e.declared_runs(), 0, "{name} declared for Silo");
    });
}

#[test]
fn the_fence_catches_an_access_outside() {
    let e = Checked::new(granary_workloads::tpcc::partitioning(), true);
    let wh = e.create_table("warehouse").unwrap();
    let item = e.create_table("item").unwrap();
    let mut r = e.runner().unwrap();
    let mut d = Declared::new();
    d.partition(1);
    let ok = r.try_run_declared(&d, |tx| {
        tx.put(wh, &1u32.to_be_bytes(), b"one")?;
        tx.put(wh, &2u32.to_be_bytes(), b"two")?;
        tx.get(item, &7u32.to_be_bytes())?;
        tx.put(item, &7u32.to_be_bytes(), b"item")
    });
    assert!(matches!(ok, Ok(Ok(()))));
    let out = e.outside();
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out[0].starts_with("write of warehouse"), "{out:?}");
    assert!(out[1].starts_with("write of item"), "{out:?}");
}
