//! SmallBank (Cahill, Röhm and Fekete, SIGMOD'08), as BOHM §4.3 runs it:
//! a banking application over three tables and small transactions that
//! touch one to three rows each.
//!
//! * `account`: customer name → customer id (never updated);
//! * `savings`, `checking`: customer id → balance (`i64` cents, 8 bytes —
//!   BOHM: "each record … is 8 bytes long").
//!
//! Every transaction takes customer *names* and first resolves them through
//! `account`, as in the original. With [`SmallBankConfig::by_id`] the
//! transactions take customer ids and skip `account`, as the BOHM authors'
//! code does (its SmallBank has only savings and checking); use it to
//! compare with that code. The six transactions:
//!
//! | type | effect | net money |
//! | --- | --- | --- |
//! | Balance | read savings + checking (read-only) | 0 |
//! | DepositChecking(V) | checking += V (V > 0) | +V |
//! | TransactSavings(V) | savings += V (V of either sign); rolls back if savings would go negative | +V |
//! | Amalgamate(a, b) | move all of a's savings and checking into b's checking | 0 |
//! | WriteCheck(V) | checking −= V, or V + $1 penalty if savings + checking < V | −V or −(V+100) |
//! | SendPayment(a, b, V) | checking a −= V, checking b += V; rolls back if a's checking < V | 0 |
//!
//! **Mix.** BOHM names five transactions (no SendPayment) and says 20% are
//! Balance, which is a uniform mix over the five; that is [`Mix::Bohm`], the
//! default. [`Mix::OltpBench`] is OLTPBench's six-way mix (Amalgamate 15,
//! Balance 15, DepositChecking 15, SendPayment 25, TransactSavings 15,
//! WriteCheck 15). Amalgamate follows Cahill (both of the first customer's
//! accounts move into the second's checking), not OLTPBench's variant,
//! which does not conserve money.
//!
//! **Contention** is set by the customer count: BOHM uses 50 (high) and
//! 100,000 (low); the SmallBank literature's default is 18,000. An optional
//! hotspot draws a given percentage of customer choices from the first few
//! customers (OLTPBench's fixed-size hotspot). BOHM also makes every
//! transaction busy-spin 50 µs "to make the transactions slightly less
//! trivial" ([`SmallBankConfig::spin`]); the spin runs at the end of the
//! body, after the transaction's reads and writes and before commit, on
//! every outcome (a rollback spins too) and again on every retry.
//!
//! **Invariant.** Each thread tallies, per customer, the net money change
//! of every transaction it committed (never of an aborted or rolled-back
//! attempt); [`verify`](crate::driver::Workload::verify) checks that every
//! customer's savings + checking equals its initial balance plus those
//! deltas, that no savings balance is negative (TransactSavings forbids
//! it), and that every table holds exactly one row per customer. The tally
//! costs each thread 8 bytes per customer.
//!
//! Amalgamate empties accounts, so over a run more and more TransactSavings
//! withdrawals and SendPayments find too little money and roll back (they
//! count as completed, as user aborts).

use std::ops::Bound;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use granary_api::{
    Body, Done, Engine, Error, Procedure, TableId, TableOptions, Tx, TxError, TxRunner,
};

use crate::driver::{load_parallel, run_until_committed, Exec, Workload};
use crate::rng::Rng;
use crate::ConfigError;

/// The transaction types' names, in report order ([`Exec::txn`]'s `ty`
/// is [`TxType::index`]).
pub const TYPES: [&str; 6] = [
    "amalgamate",
    "balance",
    "deposit_checking",
    "send_payment",
    "transact_savings",
    "write_check",
];

/// A SmallBank transaction type, in report order: the discriminant is the
/// position in [`TYPES`] and [`TxType::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxType {
    Amalgamate,
    Balance,
    DepositChecking,
    SendPayment,
    TransactSavings,
    WriteCheck,
}

impl TxType {
    /// Every type, in report order.
    pub const ALL: [TxType; 6] = [
        TxType::Amalgamate,
        TxType::Balance,
        TxType::DepositChecking,
        TxType::SendPayment,
        TxType::TransactSavings,
        TxType::WriteCheck,
    ];

    /// The position in [`TYPES`] (the driver's transaction type).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name reports use.
    pub fn name(self) -> &'static str {
        TYPES[self.index()]
    }
}

/// WriteCheck's overdraft penalty: one dollar.
pub const PENALTY_CENTS: i64 = 100;
/// Initial balances are uniform in this range of dollars, per account
/// (OLTPBench's `MIN_BALANCE`/`MAX_BALANCE`).
pub const INITIAL_DOLLARS: (i64, i64) = (10_000, 50_000);
/// Transaction amounts are at most this many cents ($100).
pub const MAX_AMOUNT_CENTS: i64 = 10_000;
/// The load's random stream (balances do not depend on the run's seed).
const LOAD_SEED: u64 = 0x5a11_ba2c;
/// Rows per loading transaction.
const LOAD_BATCH: u64 = 500;
/// Rows per verification transaction.
const VERIFY_CHUNK: u64 = 10_000;

/// The transaction mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// BOHM §4.3: Amalgamate, Balance, DepositChecking, TransactSavings,
    /// WriteCheck, 20% each; no SendPayment.
    Bohm,
    /// OLTPBench: Amalgamate 15, Balance 15, DepositChecking 15,
    /// SendPayment 25, TransactSavings 15, WriteCheck 15.
    OltpBench,
}

impl Mix {
    /// Percent of each type, indexed as [`TYPES`]; sums to 100.
    pub fn weights(self) -> [u32; 6] {
        match self {
            Mix::Bohm => [20, 20, 20, 0, 20, 20],
            Mix::OltpBench => [15, 15, 15, 25, 15, 15],
        }
    }

    /// The type the mix runs for a draw `x` in `0..100`: each type for as
    /// many of the hundred values as its weight.
    ///
    /// # Panics
    /// If `x` ≥ 100.
    pub fn pick(self, mut x: u32) -> TxType {
        for (ty, w) in TxType::ALL.into_iter().zip(self.weights()) {
            if x < w {
                return ty;
            }
            x -= w;
        }
        panic!("a draw past the mix's 100 percent");
    }
}

/// SmallBank configuration.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SmallBankConfig {
    /// Customers (rows per table). Fewer customers, more contention.
    pub customers: u64,
    pub mix: Mix,
    /// Busy-spin this long inside every transaction (BOHM: 50 µs; its
    /// code spins 10,000 `nop`s, about 2.4 µs here). Zero: none.
    pub spin: Duration,
    /// Customers in the hotspot (the first ones); 0: no hotspot, every
    /// customer equally likely.
    pub hotspot_customers: u64,
    /// Percent of customer choices drawn from the hotspot.
    pub hotspot_pct: u32,
    /// Transactions take customer ids and skip the `account` lookup (the
    /// BOHM authors' code); `false`: they resolve names first (Cahill's
    /// SmallBank, and BOHM §4.3's description).
    pub by_id: bool,
}

impl SmallBankConfig {
    /// BOHM's mix over `customers` customers, no spin, no hotspot.
    pub fn new(customers: u64) -> SmallBankConfig {
        SmallBankConfig {
            customers,
            mix: Mix::Bohm,
            spin: Duration::ZERO,
            hotspot_customers: 0,
            hotspot_pct: 90,
            by_id: false,
        }
    }
}

/// The three tables.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    /// name → customer id.
    pub account: TableId,
    /// customer id → savings balance.
    pub savings: TableId,
    /// customer id → checking balance.
    pub checking: TableId,
    /// Customers are given by id: [`Tables::lookup`] reads nothing
    /// ([`SmallBankConfig::by_id`]).
    pub by_id: bool,
}

/// The workload: configuration, tables once loaded, initial balances and
/// the committed deltas threads hand back.
pub struct SmallBank {
    pub cfg: SmallBankConfig,
    tables: Option<Tables>,
    /// Per customer: initial savings + checking, cents.
    initial: Vec<i64>,
    /// Per customer: net change by committed transactions, merged in by
    /// each [`SmallBankThread`] when it is dropped (at the end of a run).
    deltas: Arc<Mutex<Vec<i64>>>,
    /// `cfg.spin` in [`granary_api::ticks`], as given to [`SmallBank::new`].
    spin_ticks: u64,
}

/// A thread's state: its random stream and the per-customer money deltas
/// of the transactions it committed (flushed into the workload on drop, so
/// the hot path touches no shared memory).
pub struct SmallBankThread {
    rng: Rng,
    /// Procedures back from the engine, to be reused.
    #[allow(clippy::vec_box)] // boxes travel to the engine and back
    spare: Vec<Box<Procedure<SmallBankTxn>>>,
    /// Procedures the engine has just finished.
    done: Vec<Done<SmallBankTxn>>,
    deltas: Vec<i64>,
    sink: Arc<Mutex<Vec<i64>>>,
}

impl Drop for SmallBankThread {
    fn drop(&mut self) {
        // A poisoned lock still holds valid integers.
        let mut all = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        for (a, d) in all.iter_mut().zip(&self.deltas) {
            *a += d;
        }
    }
}

/// The transactions, on the tables: what a procedure runs, wherever it
/// runs (in place, or handed to a pipelined design).
impl Tables {
    /// Hint that the rows of customers `a` and `b` come soon
    /// ([`Tx::prefetch_many`]): each one's account row (unless
    /// [`Tables::by_id`]), and the balances
    /// under its own number (the id the loader gives it; a hint for
    /// another id would only be wasted).
    pub fn prefetch<T: Tx>(&self, tx: &mut T, a: u64, b: Option<u64>) {
        let names = [name(a), name(b.unwrap_or(a))];
        let ids = [id_key(a), id_key(b.unwrap_or(a))];
        let n = 1 + usize::from(b.is_some());
        let mut keys: [(TableId, &[u8]); 6] = [(self.account, &[]); 6];
        let mut k = 0;
        for i in 0..n {
            if !self.by_id {
                keys[k] = (self.account, &names[i]);
                k += 1;
            }
            keys[k] = (self.savings, &ids[i]);
            keys[k + 1] = (self.checking, &ids[i]);
            k += 2;
        }
        tx.prefetch_many(&keys[..k]);
    }

    /// Resolve a customer's name to its id (every transaction's first
    /// step). With [`Tables::by_id`] customer `c` is id `c`, and nothing is
    /// read.
    ///
    /// # Errors
    /// A conflict, or a user error if the name is unknown.
    pub fn lookup<T: Tx>(&self, tx: &mut T, c: u64) -> Result<u64, TxError> {
        let t = self;
        if t.by_id {
            return Ok(c);
        }
        match tx.get(t.account, &name(c))? {
            Some(v) if v.len() == 8 => Ok(u64::from_be_bytes(v.try_into().expect("8 bytes"))),
            Some(v) => Err(TxError::user(format!(
                "account: bad row of {} bytes",
                v.len()
            ))),
            None => Err(TxError::user(format!("account: no customer named {c}"))),
        }
    }

    /// Balance: savings + checking of customer `c` (read-only). Returns
    /// the total.
    ///
    /// # Errors
    /// A conflict, or a user error for a missing row.
    pub fn balance<T: Tx>(&self, tx: &mut T, c: u64) -> Result<i64, TxError> {
        let t = self;
        let id = self.lookup(tx, c)?;
        let s = balance_of(tx, t.savings, id, "savings")?;
        let k = balance_of(tx, t.checking, id, "checking")?;
        Ok(s + k)
    }

    /// DepositChecking: checking += `v`. Returns the net money change.
    ///
    /// # Errors
    /// A conflict; [`TxError::rollback`] if `v` is negative.
    pub fn deposit_checking<T: Tx>(&self, tx: &mut T, c: u64, v: i64) -> Result<i64, TxError> {
        if v < 0 {
            return Err(TxError::rollback());
        }
        let t = self;
        let id = self.lookup(tx, c)?;
        let k = balance_of(tx, t.checking, id, "checking")?;
        set_balance(tx, t.checking, id, k + v)?;
        Ok(v)
    }

    /// TransactSavings: savings += `v` (a deposit or, negative, a
    /// withdrawal). Returns the net money change.
    ///
    /// # Errors
    /// A conflict; [`TxError::rollback`] if savings would go negative.
    pub fn transact_savings<T: Tx>(&self, tx: &mut T, c: u64, v: i64) -> Result<i64, TxError> {
        let t = self;
        let id = self.lookup(tx, c)?;
        let s = balance_of(tx, t.savings, id, "savings")?;
        if s + v < 0 {
            return Err(TxError::rollback());
        }
        set_balance(tx, t.savings, id, s + v)?;
        Ok(v)
    }

    /// Amalgamate: move all of `a`'s savings and checking into `b`'s
    /// checking. Returns the net money change (per customer: `a` loses
    /// what `b` gains), i.e. the amount moved.
    ///
    /// # Errors
    /// A conflict, or a user error for a missing row.
    pub fn amalgamate<T: Tx>(&self, tx: &mut T, a: u64, b: u64) -> Result<i64, TxError> {
        let t = self;
        let ia = self.lookup(tx, a)?;
        let ib = self.lookup(tx, b)?;
        let sa = balance_of(tx, t.savings, ia, "savings")?;
        let ka = balance_of(tx, t.checking, ia, "checking")?;
        let kb = balance_of(tx, t.checking, ib, "checking")?;
        set_balance(tx, t.savings, ia, 0)?;
        set_balance(tx, t.checking, ia, 0)?;
        set_balance(tx, t.checking, ib, kb + sa + ka)?;
        Ok(sa + ka)
    }

    /// WriteCheck: checking −= `v`, plus a [`PENALTY_CENTS`] penalty if
    /// savings + checking < `v` (checking may go negative). Returns the net
    /// money change (negative).
    ///
    /// # Errors
    /// A conflict, or a user error for a missing row.
    pub fn write_check<T: Tx>(&self, tx: &mut T, c: u64, v: i64) -> Result<i64, TxError> {
        let t = self;
        let id = self.lookup(tx, c)?;
        let s = balance_of(tx, t.savings, id, "savings")?;
        let k = balance_of(tx, t.checking, id, "checking")?;
        let debit = if s + k < v { v + PENALTY_CENTS } else { v };
        set_balance(tx, t.checking, id, k - debit)?;
        Ok(-debit)
    }

    /// SendPayment: move `v` from `a`'s checking to `b`'s. Returns the
    /// amount moved.
    ///
    /// # Errors
    /// A conflict; [`TxError::rollback`] if `a`'s checking is below `v`.
    pub fn send_payment<T: Tx>(&self, tx: &mut T, a: u64, b: u64, v: i64) -> Result<i64, TxError> {
        let t = self;
        let ia = self.lookup(tx, a)?;
        let ib = self.lookup(tx, b)?;
        let ka = balance_of(tx, t.checking, ia, "checking")?;
        if ka < v {
            return Err(TxError::rollback());
        }
        let kb = balance_of(tx, t.checking, ib, "checking")?;
        set_balance(tx, t.checking, ia, ka - v)?;
        set_balance(tx, t.checking, ib, kb + v)?;
        Ok(v)
    }

    /// Savings and checking of customer id `c`, read directly (for tests
    /// and verification).
    ///
    /// # Errors
    /// A conflict, or a user error for a missing row.
    pub fn balances<T: Tx>(&self, tx: &mut T, c: u64) -> Result<(i64, i64), TxError> {
        let t = self;
        Ok((
            balance_of(tx, t.savings, c, "savings")?,
            balance_of(tx, t.checking, c, "checking")?,
        ))
    }
}

/// SmallBank's partitioning (for Partitioned-Store): every table by a
/// hash of the key (a customer's name in `account`, its id in `savings`
/// and `checking`).
pub fn partitioning() -> granary_api::Partitioning {
    |table| {
        TABLES
            .contains(&table)
            .then_some(granary_api::PartitionRule::Hash)
    }
}

/// The tables' names: `account`, `savings`, `checking`.
pub const TABLES: [&str; 3] = ["account", "savings", "checking"];

/// Customer `c`'s name: `"cust"` and 12 decimal digits.
pub fn name(c: u64) -> [u8; 16] {
    let mut b = *b"cust000000000000";
    let mut x = c;
    for d in b[4..].iter_mut().rev() {
        *d = b'0' + (x % 10) as u8;
        x /= 10;
    }
    b
}

fn id_key(c: u64) -> [u8; 8] {
    c.to_be_bytes()
}

fn decode_i64(v: &[u8], what: &str) -> Result<i64, TxError> {
    v.try_into()
        .map(i64::from_be_bytes)
        .map_err(|_| TxError::user(format!("{what}: bad balance row of {} bytes", v.len())))
}

/// A balance row that must exist.
fn balance_of<T: Tx>(tx: &mut T, t: TableId, c: u64, what: &str) -> Result<i64, TxError> {
    match tx.get(t, &id_key(c))? {
        Some(v) => decode_i64(v, what),
        None => Err(TxError::user(format!("{what}: customer {c} missing"))),
    }
}

fn set_balance<T: Tx>(tx: &mut T, t: TableId, c: u64, bal: i64) -> Result<(), TxError> {
    tx.put(t, &id_key(c), &bal.to_be_bytes())
}

/// Busy-spin for `ticks` of [`granary_api::ticks`] (the time stamp
/// counter on x86-64). A loop on `Instant::now` overshot by ~60 ns here
/// (2.41 µs for 2.35 µs: its clock reads take ~23 ns each); the counter
/// is read in ~9 ns.
fn spin(ticks: u64) {
    if ticks == 0 {
        return;
    }
    let end = granary_api::ticks().saturating_add(ticks);
    while granary_api::ticks() < end {
        std::hint::spin_loop();
    }
}

impl SmallBank {
    /// # Errors
    /// [`ConfigError`] for fewer than two customers, a hotspot larger than
    /// the customer count, or a percentage above 100.
    pub fn new(cfg: SmallBankConfig) -> Result<SmallBank, ConfigError> {
        if cfg.customers < 2 {
            return Err(ConfigError(format!(
                "need at least 2 customers (Amalgamate and SendPayment take two), got {}",
                cfg.customers
            )));
        }
        if cfg.customers > 1_000_000_000_000 {
            return Err(ConfigError(format!(
                "at most 10^12 customers (12-digit names), got {}",
                cfg.customers
            )));
        }
        if cfg.hotspot_customers > cfg.customers {
            return Err(ConfigError(format!(
                "hotspot of {} customers exceeds the {} customers",
                cfg.hotspot_customers, cfg.customers
            )));
        }
        if cfg.hotspot_pct > 100 {
            return Err(ConfigError(format!(
                "hotspot percentage must be ≤ 100, got {}",
                cfg.hotspot_pct
            )));
        }
        let n = cfg.customers as usize;
        Ok(SmallBank {
            spin_ticks: granary_api::ticks_in(cfg.spin),
            cfg,
            tables: None,
            initial: Vec::new(),
            deltas: Arc::new(Mutex::new(vec![0; n])),
        })
    }

    /// The tables, once loaded.
    pub fn tables(&self) -> Option<Tables> {
        self.tables
    }

    fn t(&self) -> Result<Tables, TxError> {
        self.tables
            .ok_or_else(|| TxError::user("SmallBank: run before load"))
    }

    /// Customer `c`'s initial savings and checking balances, cents.
    fn initial_balances(rng: &mut Rng) -> (i64, i64) {
        let (lo, hi) = INITIAL_DOLLARS;
        let mut one = || (lo + rng.below((hi - lo + 1) as u64) as i64) * 100;
        (one(), one())
    }

    /// [`Tables::lookup`] on this workload's tables.
    ///
    /// # Errors
    /// As there; a user error before the workload is loaded.
    pub fn lookup<T: Tx>(&self, tx: &mut T, c: u64) -> Result<u64, TxError> {
        self.t()?.lookup(tx, c)
    }

    /// [`Tables::balance`] on this workload's tables.
    ///
    /// # Errors
    /// As there; a user error before the workload is loaded.
    pub fn balance<T: Tx>(&self, tx: &mut T, c: u64) -> Result<i64, TxError> {
        self.t()?.balance(tx, c)
    }

    /// [`Tables::deposit_checking`] on this workload's tables.
    ///
    /// # Errors
    /// As there; a user error before the workload is loaded.
    pub fn deposit_checking<T: Tx>(&self, tx: &mut T, c: u64, v: i64) -> Result<i64, TxError> {
        self.t()?.deposit_checking(tx, c, v)
    }

    /// [`Tables::transact_savings`] on this workload's tables.
    ///
    /// # Errors
    /// As there; a user error before the workload is loaded.
    pub fn transact_savings<T: Tx>(&self, tx: &mut T, c: u64, v: i64) -> Result<i64, TxError> {
        self.t()?.transact_savings(tx, c, v)
    }

    /// [`Tables::amalgamate`] on this workload's tables.
    ///
    /// # Errors
    /// As there; a user error before the workload is loaded.
    pub fn amalgamate<T: Tx>(&self, tx: &mut T, a: u64, b: u64) -> Result<i64, TxError> {
        self.t()?.amalgamate(tx, a, b)
    }

    /// [`Tables::write_check`] on this workload's tables.
    ///
    /// # Errors
    /// As there; a user error before the workload is loaded.
    pub fn write_check<T: Tx>(&self, tx: &mut T, c: u64, v: i64) -> Result<i64, TxError> {
        self.t()?.write_check(tx, c, v)
    }

    /// [`Tables::send_payment`] on this workload's tables.
    ///
    /// # Errors
    /// As there; a user error before the workload is loaded.
    pub fn send_payment<T: Tx>(&self, tx: &mut T, a: u64, b: u64, v: i64) -> Result<i64, TxError> {
        self.t()?.send_payment(tx, a, b, v)
    }

    /// [`Tables::balances`] on this workload's tables.
    ///
    /// # Errors
    /// As there; a user error before the workload is loaded.
    pub fn balances<T: Tx>(&self, tx: &mut T, c: u64) -> Result<(i64, i64), TxError> {
        self.t()?.balances(tx, c)
    }

    fn customer(&self, rng: &mut Rng) -> u64 {
        let hot = self.cfg.hotspot_customers;
        if hot > 0 && rng.below(100) < self.cfg.hotspot_pct as u64 {
            rng.below(hot)
        } else {
            rng.below(self.cfg.customers)
        }
    }

    fn two_customers(&self, rng: &mut Rng) -> (u64, u64) {
        let a = self.customer(rng);
        loop {
            let b = self.customer(rng);
            if b != a {
                return (a, b);
            }
            if self.cfg.hotspot_customers == 1 {
                // The hotspot alone cannot give two distinct customers.
                return (
                    a,
                    (a + 1 + rng.below(self.cfg.customers - 1)) % self.cfg.customers,
                );
            }
        }
    }

    /// Declare what transaction `ty` on customers `a` (and `b`) reads and
    /// writes. Names map to the ids they were loaded with, so the ids are
    /// known from the parameters (BOHM's SmallBank takes ids directly).
    ///
    /// # Errors
    /// [`Error::InvalidOption`] before the workload is loaded.
    pub fn declare(
        &self,
        d: &mut granary_api::Declared,
        ty: TxType,
        a: u64,
        b: u64,
    ) -> Result<(), Error> {
        let t = self.t().map_err(|e| match e {
            TxError::Failed(e) => e,
            TxError::Conflict(_) => Error::InvalidOption("SmallBank: not loaded".into()),
        })?;
        d.clear();
        d.read(t.account, &name(a));
        match ty {
            TxType::Balance => {
                d.read(t.savings, &id_key(a)).read(t.checking, &id_key(a));
            }
            TxType::DepositChecking => {
                d.write(t.checking, &id_key(a));
            }
            TxType::TransactSavings => {
                d.write(t.savings, &id_key(a));
            }
            TxType::Amalgamate => {
                d.read(t.account, &name(b))
                    .write(t.savings, &id_key(a))
                    .write(t.checking, &id_key(a))
                    .write(t.checking, &id_key(b));
            }
            TxType::WriteCheck => {
                d.read(t.savings, &id_key(a)).write(t.checking, &id_key(a));
            }
            TxType::SendPayment => {
                d.read(t.account, &name(b))
                    .write(t.checking, &id_key(a))
                    .write(t.checking, &id_key(b));
            }
        }
        Ok(())
    }

    fn amount(rng: &mut Rng) -> i64 {
        1 + rng.below(MAX_AMOUNT_CENTS as u64) as i64
    }

    /// Run transaction type `ty` once through `ex`, crediting the
    /// committed deltas to `th`.
    fn run_type<R: TxRunner>(
        &self,
        ty: TxType,
        th: &mut SmallBankThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let rng = &mut th.rng;
        let (a, b, v) = match ty {
            TxType::Balance => (self.customer(rng), 0, 0),
            TxType::DepositChecking | TxType::WriteCheck => {
                let c = self.customer(rng);
                (c, 0, Self::amount(rng))
            }
            TxType::TransactSavings => {
                let c = self.customer(rng);
                let v = rng.below(2 * MAX_AMOUNT_CENTS as u64 + 1) as i64 - MAX_AMOUNT_CENTS;
                (c, 0, v)
            }
            TxType::Amalgamate => {
                let (a, b) = self.two_customers(rng);
                (a, b, 0)
            }
            TxType::SendPayment => {
                let (a, b) = self.two_customers(rng);
                (a, b, Self::amount(rng))
            }
        };
        // `settle` adds to these tallies once the procedure is back; they
        // are 8 bytes a customer, too many to stay cached.
        for c in [a, b] {
            if let Some(d) = th.deltas.get(c as usize) {
                granary_api::prefetch_for_write(std::ptr::from_ref(d).cast(), 1);
            }
        }
        let t = self
            .t()
            .map_err(|_| Error::InvalidOption("SmallBank: run before load".into()))?;
        let spin = self.spin_ticks;
        let mut p = th.spare.pop().unwrap_or_else(|| {
            let body = SmallBankTxn {
                t,
                ty,
                a,
                b,
                v,
                spin,
            };
            Procedure::new(ty.index(), body)
        });
        p.kind = ty.index();
        p.body.ty = ty;
        (p.body.a, p.body.b, p.body.v) = (a, b, v);
        p.planned = ex.uses_declared();
        if p.planned {
            self.declare(&mut p.declared, ty, a, b)?;
        }
        ex.submit(p, &mut th.done)?;
        th.settle();
        Ok(())
    }
}

/// A SmallBank transaction as a value: its type and parameters, run
/// against any design (in place, or handed to a pipelined one).
pub struct SmallBankTxn {
    t: Tables,
    ty: TxType,
    /// The customer (or the first of two).
    a: u64,
    /// The second customer (Amalgamate, SendPayment).
    b: u64,
    /// The amount, cents.
    v: i64,
    /// Busy time after the work (BOHM's SmallBank spins), in
    /// [`granary_api::ticks`].
    spin: u64,
}

impl Body for SmallBankTxn {
    /// (customer, change of its money) for the customers whose money it
    /// changed (delta 0 where none).
    type Output = [(u64, i64); 2];

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<[(u64, i64); 2], TxError> {
        let (t, a, b, v) = (&self.t, self.a, self.b, self.v);
        // The customers are known up front: their misses can overlap.
        if matches!(self.ty, TxType::Amalgamate | TxType::SendPayment) {
            t.prefetch(tx, a, Some(b));
        } else {
            t.prefetch(tx, a, None);
        }
        let r = match self.ty {
            TxType::Balance => t.balance(tx, a).map(|_| [(a, 0), (a, 0)]),
            TxType::DepositChecking => t.deposit_checking(tx, a, v).map(|d| [(a, d), (a, 0)]),
            TxType::TransactSavings => t.transact_savings(tx, a, v).map(|d| [(a, d), (a, 0)]),
            TxType::Amalgamate => t.amalgamate(tx, a, b).map(|m| [(a, -m), (b, m)]),
            TxType::WriteCheck => t.write_check(tx, a, v).map(|d| [(a, d), (a, 0)]),
            TxType::SendPayment => t.send_payment(tx, a, b, v).map(|m| [(a, -m), (b, m)]),
        };
        spin(self.spin);
        r
    }
}

impl SmallBankThread {
    /// Take back the procedures the engine finished, crediting the money
    /// each committed one moved (a rolled-back one moved none).
    fn settle(&mut self) {
        for d in self.done.drain(..) {
            if let Ok(Some(changes)) = d.outcome {
                for (c, delta) in changes {
                    self.deltas[c as usize] += delta;
                }
            }
            self.spare.push(d.procedure);
        }
    }
}

impl Workload for SmallBank {
    type Thread = SmallBankThread;

    fn types(&self) -> &'static [&'static str] {
        &TYPES
    }

    fn load<E: Engine>(
        &mut self,
        engine: &E,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), Error> {
        let n = self.cfg.customers;
        // The balances are keyed by customer id, 0 to n - 1.
        let ids = TableOptions::point_lookups().with_dense_keys(n);
        let t = Tables {
            account: engine.create_table_with(TABLES[0], TableOptions::point_lookups())?,
            savings: engine.create_table_with(TABLES[1], ids)?,
            checking: engine.create_table_with(TABLES[2], ids)?,
            by_id: self.cfg.by_id,
        };
        let mut rng = Rng::new(LOAD_SEED, 0);
        let balances: Vec<(i64, i64)> = (0..n).map(|_| Self::initial_balances(&mut rng)).collect();
        load_parallel(engine, n, LOAD_BATCH, progress, &|id, insert| {
            let (sv, ck) = balances[id as usize];
            insert(t.account, &name(id), &id.to_be_bytes())?;
            insert(t.savings, &id_key(id), &sv.to_be_bytes())?;
            insert(t.checking, &id_key(id), &ck.to_be_bytes())
        })?;
        self.initial = balances.iter().map(|(s, c)| s + c).collect();
        self.tables = Some(t);
        Ok(())
    }

    fn thread(&self, id: usize, _threads: usize, seed: u64) -> SmallBankThread {
        SmallBankThread {
            rng: Rng::new(seed, id as u64 + 1),
            spare: Vec::new(),
            done: Vec::new(),
            deltas: vec![0; self.cfg.customers as usize],
            sink: Arc::clone(&self.deltas),
        }
    }

    fn run_one<R: TxRunner>(
        &self,
        th: &mut SmallBankThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let ty = self.cfg.mix.pick(th.rng.below(100) as u32);
        self.run_type(ty, th, ex)
    }

    fn finish<R: TxRunner>(
        &self,
        th: &mut SmallBankThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        ex.drain(&mut th.done)?;
        th.settle();
        Ok(())
    }

    fn verify<E: Engine>(&self, engine: &E) -> Result<Vec<String>, Error> {
        let Some(t) = self.tables else {
            return Ok(vec!["SmallBank: verify before load".into()]);
        };
        let n = self.cfg.customers;
        let deltas = self
            .deltas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut r = engine.runner()?;
        let mut bad = Vec::new();
        // Keep the report short: the first violations say enough.
        fn note(bad: &mut Vec<String>, m: String) {
            if bad.len() < 20 {
                bad.push(m);
            }
        }
        let (mut sum, mut expected) = (0i64, 0i64);
        let mut rows = [0u64; 3];
        let mut lo = 0u64;
        // Chunks, each a transaction (nothing runs concurrently now).
        while lo < n {
            let hi = (lo + VERIFY_CHUNK).min(n);
            let chunk = run_until_committed(&mut r, |tx| {
                let mut sv = Vec::with_capacity((hi - lo) as usize);
                let mut ck = Vec::with_capacity((hi - lo) as usize);
                let mut accounts = 0u64;
                for (table, out) in [(t.savings, &mut sv), (t.checking, &mut ck)] {
                    let mut err = None;
                    tx.scan(
                        table,
                        Bound::Included(&id_key(lo)[..]),
                        Bound::Excluded(&id_key(hi)[..]),
                        usize::MAX,
                        false,
                        |k, v| {
                            match (k.try_into().map(u64::from_be_bytes), decode_i64(v, "row")) {
                                (Ok(id), Ok(b)) => out.push((id, b)),
                                _ => err = Some(format!("malformed row {k:?}")),
                            }
                            true
                        },
                    )?;
                    if let Some(e) = err {
                        return Err(TxError::user(e));
                    }
                }
                for c in lo..hi {
                    if tx.get(t.account, &name(c))? == Some(&c.to_be_bytes()[..]) {
                        accounts += 1;
                    }
                }
                Ok((sv, ck, accounts))
            })?;
            let (sv, ck, accounts) = chunk;
            rows[0] += accounts;
            rows[1] += sv.len() as u64;
            rows[2] += ck.len() as u64;
            if sv.len() as u64 != hi - lo || ck.len() as u64 != hi - lo {
                note(
                    &mut bad,
                    format!(
                        "customers {lo}..{hi}: {} savings rows, {} checking rows",
                        sv.len(),
                        ck.len()
                    ),
                );
                lo = hi;
                continue;
            }
            for ((c, s), (c2, k)) in sv.into_iter().zip(ck) {
                if c != c2 {
                    note(
                        &mut bad,
                        format!("savings/checking ids differ: {c} vs {c2}"),
                    );
                    continue;
                }
                let want = self.initial[c as usize] + deltas[c as usize];
                sum += s + k;
                expected += want;
                if s + k != want {
                    note(
                        &mut bad,
                        format!(
                            "customer {c}: savings {s} + checking {k} = {} cents, expected initial {} + committed deltas {} = {want}",
                            s + k,
                            self.initial[c as usize],
                            deltas[c as usize]
                        ),
                    );
                }
                if s < 0 {
                    note(&mut bad, format!("customer {c}: negative savings {s}"));
                }
            }
            lo = hi;
        }
        for (what, got) in ["account", "savings", "checking"].iter().zip(rows) {
            if got != n {
                bad.push(format!(
                    "{what}: {got} rows resolve correctly, expected {n}"
                ));
            }
        }
        if sum != expected {
            bad.push(format!(
                "total money {sum} cents, expected initial {} + committed deltas {} = {expected}",
                self.initial.iter().sum::<i64>(),
                deltas.iter().sum::<i64>()
            ));
        }
        Ok(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_spin_lasts_at_least_its_time() {
        for us in [3, 50, 2_000] {
            let d = Duration::from_micros(us);
            let t = Instant::now();
            spin(granary_api::ticks_in(d));
            // Less only by the rate's rounding (a part in a million).
            assert!(
                t.elapsed().as_nanos() * 1000 >= d.as_nanos() * 999,
                "{us} µs"
            );
        }
        assert_eq!(granary_api::ticks_in(Duration::ZERO), 0);
    }

    #[test]
    fn types_and_names_agree() {
        for (i, ty) in TxType::ALL.into_iter().enumerate() {
            assert_eq!(ty.index(), i);
            assert_eq!(ty.name(), TYPES[i]);
        }
    }

    #[test]
    fn a_mix_picks_each_type_as_often_as_its_weight() {
        for mix in [Mix::Bohm, Mix::OltpBench] {
            let mut n = [0u32; 6];
            for x in 0..100 {
                n[mix.pick(x).index()] += 1;
            }
            assert_eq!(n, mix.weights(), "{mix:?}");
        }
    }

    #[test]
    #[should_panic(expected = "100 percent")]
    fn a_draw_past_the_mix_is_refused() {
        Mix::Bohm.pick(100);
    }
}
