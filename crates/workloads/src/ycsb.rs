//! YCSB-style key-value transactions (Cooper et al., SoCC'10) with the
//! variants the papers run, as named presets of one generator.
//!
//! One table of 8-byte big-endian keys `0..keys` and fixed-size values.
//! The first 8 bytes of a value are a little-endian counter that every
//! read-modify-write increments; the rest is filler. A transaction performs
//! `ops_per_txn` operations on distinct keys, each a read, a
//! read-modify-write (RMW) or a blind write; optionally a fraction of
//! transactions are instead long read-only scans of random keys.
//!
//! | preset | paper | ops/txn | operations | values | keys (paper's) | skew |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | `silo` | silo-sosp13 §5.2 | 1 | 80% read, 20% RMW | 100 B | 1M (160M) | uniform |
//! | `silor` | silor-osdi14 §6.2 | 1 | 70% read, 30% RMW | 100 B | 1M (400M) | uniform |
//! | `bohm-10rmw` | bohm-vldb15 §4.2.1 | 10 | 10 RMW | 1,000 B | 1M (1M) | θ = 0.9 (paper: 0.9 or 0) |
//! | `bohm-2rmw8r` | bohm-vldb15 §4.2.2 | 10 | 2 RMW + 8 reads | 1,000 B | 1M (1M) | θ = 0.9 (paper: 0.9 or 0) |
//! | `bohm-longread` | bohm-vldb15 §4.2.3 | 10 | 10 RMW; 1% of txns read 10,000 uniform keys | 1,000 B | 1M (1M) | θ = 0 |
//! | `deuteronomy` | deuteronomy-cidr15 §6.1 | 4 | each op 84% read, else blind update | 100 B | 1M (50M) | 80% of accesses to 20% of keys |
//! | `study` | silo-performance-study §4.4 | 1 | 50% read, 50% blind write | 100 B | 2,000 (2,000) | θ = 0.99 (paper: "skewness 2") |
//!
//! Judgement calls, each overridable:
//! * Key counts above a few million are scaled down to 1M by default (the
//!   papers' 160M/400M/50M need tens of GB); `keys` restores them.
//! * Skewed keys come from YCSB's Zipfian generator over the key count
//!   ([`Zipf::new`], Gray's method, rank 0 hottest), with ranks spread over
//!   the key space by a fixed bijection (`rank · m mod keys`, m coprime to
//!   keys) so hot keys are not index neighbours. Unlike
//!   [`Zipf::scrambled`] (ranks of 10¹⁰ items hashed onto the keys) this
//!   keeps the exact Zipfian frequencies over the configured key count,
//!   which BOHM's θ and Deuteronomy's 80/20 refer to.
//! * Deuteronomy's "80% of accesses to 20% of keys" is turned into θ for
//!   the key count by [`theta_for_hot_set`] (θ ≈ 0.894 at 1M keys, 0.878 at
//!   the paper's 50M). Its operations are chosen read or update
//!   independently with p = 0.84, which gives the paper's "about 50% of
//!   transactions read-only" (0.84⁴ ≈ 0.50); updates are blind writes.
//! * The performance study's skewness 2 is beyond Gray's generator
//!   (θ < 1); `study` defaults to θ = 0.99, YCSB's usual maximum. Its
//!   writes are blind: the study finds write-heavy mixes abort less "because
//!   there are not enough reads to be invalidated", which only holds if
//!   writes do not read.
//! * BOHM's long read-only transactions run as ordinary serializable
//!   transactions, as BOHM's OCC baseline runs them; `snapshot_long_reads`
//!   runs them as Silo snapshot transactions instead (§4.9).
//!
//! **Invariant.** With RMW writes, the counters sum to the number of RMW
//! operations committed (each thread tallies its committed RMWs and hands
//! the count back when dropped); every key is present with its size.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use granary_api::{
    Body, Done, Engine, Error, Procedure, ReadOnly, TableId, TableOptions, Tx, TxError, TxRunner,
};
use serde::Serialize;

use crate::driver::{load_parallel, run_until_committed, Exec, Workload};
use crate::rng::Rng;
use crate::zipf::{theta_for_hot_set, Zipf};
use crate::ConfigError;

/// The transaction types, in report order.
pub const TYPES: [&str; 3] = ["read_only", "update", "long_read"];
const READ_ONLY: usize = 0;
const UPDATE: usize = 1;
const LONG_READ: usize = 2;

/// The presets and what they are.
pub const PRESETS: [(&str, &str); 7] = [
    ("silo", "Silo §5.2: 1 op/txn, 80% read / 20% RMW, 100 B, uniform"),
    ("silor", "SiloR §6.2: 1 op/txn, 70% read / 30% RMW, 100 B, uniform"),
    ("bohm-10rmw", "BOHM §4.2.1: 10 RMW/txn, 1,000 B, 1M keys, θ 0.9"),
    ("bohm-2rmw8r", "BOHM §4.2.2: 2 RMW + 8 reads/txn, 1,000 B, 1M keys, θ 0.9"),
    (
        "bohm-longread",
        "BOHM §4.2.3: 10 RMW/txn, θ 0, plus 1% read-only txns of 10,000 uniform keys",
    ),
    (
        "deuteronomy",
        "Deuteronomy §6.1: 4 ops/txn, 84% reads, blind updates, 100 B, 80% of accesses to 20% of keys",
    ),
    (
        "study",
        "Silo performance study §4.4: 1 op/txn, 50% read / 50% blind write, 2,000 keys, θ 0.99",
    ),
];

/// Largest `ops_per_txn` / `long_read_keys` accepted.
pub const MAX_OPS_PER_TXN: usize = 1_000_000;
/// Rows per loading transaction.
const LOAD_BATCH: u64 = 200;
/// Rows per verification transaction.
const VERIFY_CHUNK: u64 = 20_000;

/// Which of a transaction's operations write.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpMix {
    /// Each operation is independently a read with this probability
    /// (percent), else a write.
    PerOp { read_pct: f64 },
    /// Exactly this many operations of each transaction write (the first
    /// ones); the rest read.
    Fixed { writes: usize },
}

/// What a write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteKind {
    /// Read the value, increment its counter, write it back, through the
    /// design's one-copy [`Tx::update`].
    Rmw,
    /// As [`WriteKind::Rmw`], but as a `get`, a copy and a `put`: the
    /// path [`Tx::update`] replaced, kept to measure it against.
    RmwGetPut,
    /// Read and change the counter alone (the value's first 8 bytes),
    /// through [`Tx::update_field`]: a design that overwrites records in
    /// place copies those bytes and no others. The rest of the value is
    /// neither read nor written (the key's whole value is still read for
    /// the concurrency control).
    RmwField,
    /// Overwrite the value without reading it.
    Blind,
}

impl WriteKind {
    /// Whether a write reads the value first.
    pub fn reads(self) -> bool {
        self != WriteKind::Blind
    }
}

/// How keys are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Skew {
    /// Zipfian with this θ in `[0, 1)`; 0 is uniform.
    Theta(f64),
    /// The θ that sends `access_pct`% of accesses to the hottest
    /// `keys_pct`% of keys.
    HotSet { keys_pct: f64, access_pct: f64 },
}

/// Where the Zipfian ranks land in the key space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Rank `r` is key `r · m mod n` for a large `m` coprime with `n`: hot
    /// keys are scattered over the index, as YCSB's scrambled generator
    /// scatters them.
    #[default]
    Spread,
    /// Rank `r` is key `r`: the hottest keys are neighbours, sharing
    /// leaves, as CCBench and DBx1000 place them.
    Adjacent,
}

/// The most bytes [`YcsbConfig::key_bytes`] accepts.
pub const MAX_KEY_BYTES: usize = 256;

/// Key number `k` as the key's bytes: 8 bytes big-endian at `len` 8, else
/// YCSB's own form, `user` and the number in decimal zero-padded to `len`
/// bytes (with room to spare, every key starts `user0000` as YCSB's do;
/// the padding keeps byte order equal to numeric order).
#[inline(always)]
pub fn key_bytes(k: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    append_key(k, len, out);
}

/// As [`key_bytes`], appended to `out`.
#[inline(always)]
fn append_key(k: u64, len: usize, out: &mut Vec<u8>) {
    if len == 8 {
        out.extend_from_slice(&k.to_be_bytes());
    } else {
        decimal_key(k, len, out);
    }
}

#[inline(never)]
fn decimal_key(k: u64, len: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(b"user");
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = k;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let pad = len.saturating_sub(4 + (digits.len() - i));
    out.resize(start + 4 + pad, b'0');
    out.extend_from_slice(&digits[i..]);
}

fn decimal_digits(mut v: u64) -> usize {
    let mut d = 1;
    while v >= 10 {
        v /= 10;
        d += 1;
    }
    d
}

/// A YCSB configuration: a preset plus overrides.
///
/// ```
/// use granary_workloads::ycsb::{Ycsb, YcsbConfig};
/// let cfg = YcsbConfig::preset("bohm-2rmw8r")?.keys(10_000).theta(0.0);
/// let w = Ycsb::new(cfg)?;
/// assert_eq!(w.theta(), 0.0);
/// assert!(YcsbConfig::preset("nope").unwrap_err().to_string().contains("bohm-10rmw"));
/// # Ok::<(), granary_workloads::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct YcsbConfig {
    /// The preset this started from.
    pub preset: String,
    /// Keys loaded (`0..keys`).
    pub keys: u64,
    /// Value size, bytes (at least 8: the counter).
    pub value_bytes: usize,
    /// Operations per (non-long-read) transaction, on distinct keys.
    pub ops_per_txn: usize,
    pub mix: OpMix,
    pub write_kind: WriteKind,
    pub skew: Skew,
    /// Fraction of transactions that are long read-only transactions.
    pub long_read_fraction: f64,
    /// Distinct uniform keys each long read-only transaction reads.
    pub long_read_keys: usize,
    /// Run long read-only transactions as snapshot transactions.
    pub snapshot_long_reads: bool,
    /// Where the Zipfian ranks land in the key space.
    pub placement: Placement,
    /// Bytes per key: 8 (the number, big-endian) or YCSB's `user` and
    /// zero-padded digits ([`key_bytes`]).
    pub key_bytes: usize,
}

impl YcsbConfig {
    /// The named preset (see the module docs and [`PRESETS`]).
    ///
    /// # Errors
    /// [`ConfigError`] naming the known presets if `name` is not one.
    pub fn preset(name: &str) -> Result<YcsbConfig, ConfigError> {
        let base = YcsbConfig {
            preset: name.to_string(),
            keys: 1_000_000,
            value_bytes: 100,
            ops_per_txn: 1,
            mix: OpMix::PerOp { read_pct: 80.0 },
            write_kind: WriteKind::Rmw,
            skew: Skew::Theta(0.0),
            long_read_fraction: 0.0,
            long_read_keys: 10_000,
            snapshot_long_reads: false,
            placement: Placement::Spread,
            key_bytes: 8,
        };
        let bohm = |writes, theta| YcsbConfig {
            value_bytes: 1000,
            ops_per_txn: 10,
            mix: OpMix::Fixed { writes },
            skew: Skew::Theta(theta),
            ..base.clone()
        };
        Ok(match name {
            "silo" => base,
            "silor" => YcsbConfig {
                mix: OpMix::PerOp { read_pct: 70.0 },
                ..base
            },
            "bohm-10rmw" => bohm(10, 0.9),
            "bohm-2rmw8r" => bohm(2, 0.9),
            "bohm-longread" => YcsbConfig {
                long_read_fraction: 0.01,
                ..bohm(10, 0.0)
            },
            "deuteronomy" => YcsbConfig {
                ops_per_txn: 4,
                mix: OpMix::PerOp { read_pct: 84.0 },
                write_kind: WriteKind::Blind,
                skew: Skew::HotSet {
                    keys_pct: 20.0,
                    access_pct: 80.0,
                },
                ..base
            },
            "study" => YcsbConfig {
                keys: 2000,
                mix: OpMix::PerOp { read_pct: 50.0 },
                write_kind: WriteKind::Blind,
                skew: Skew::Theta(0.99),
                ..base
            },
            _ => {
                let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
                return Err(ConfigError(format!(
                    "unknown YCSB preset {name:?}; known presets: {}",
                    names.join(", ")
                )));
            }
        })
    }

    /// Load this many keys.
    pub fn keys(mut self, n: u64) -> Self {
        self.keys = n;
        self
    }

    /// Values of this many bytes.
    pub fn value_bytes(mut self, n: usize) -> Self {
        self.value_bytes = n;
        self
    }

    /// Zipfian skew θ (0: uniform).
    pub fn theta(mut self, theta: f64) -> Self {
        self.skew = Skew::Theta(theta);
        self
    }

    /// Skew such that `access_pct`% of accesses go to `keys_pct`% of keys.
    pub fn hot_set(mut self, keys_pct: f64, access_pct: f64) -> Self {
        self.skew = Skew::HotSet {
            keys_pct,
            access_pct,
        };
        self
    }

    /// Each operation reads with this probability (percent), else writes.
    pub fn read_pct(mut self, pct: f64) -> Self {
        self.mix = OpMix::PerOp { read_pct: pct };
        self
    }

    /// Exactly this many writes per transaction, the rest reads.
    pub fn writes_per_txn(mut self, writes: usize) -> Self {
        self.mix = OpMix::Fixed { writes };
        self
    }

    /// Operations per transaction.
    pub fn ops_per_txn(mut self, n: usize) -> Self {
        self.ops_per_txn = n;
        self
    }

    /// Fraction of long read-only transactions.
    pub fn long_read_fraction(mut self, f: f64) -> Self {
        self.long_read_fraction = f;
        self
    }

    /// Keys per long read-only transaction.
    pub fn long_read_keys(mut self, n: usize) -> Self {
        self.long_read_keys = n;
        self
    }

    /// Read-modify-writes or blind writes.
    pub fn write_kind(mut self, k: WriteKind) -> Self {
        self.write_kind = k;
        self
    }

    /// Run long read-only transactions as snapshot transactions.
    pub fn snapshot_long_reads(mut self, on: bool) -> Self {
        self.snapshot_long_reads = on;
        self
    }

    /// Where the Zipfian ranks land in the key space.
    pub fn placement(mut self, p: Placement) -> Self {
        self.placement = p;
        self
    }

    /// Keys of this many bytes ([`key_bytes`]).
    pub fn key_bytes(mut self, n: usize) -> Self {
        self.key_bytes = n;
        self
    }

    /// Check the configuration and resolve the skew to a θ.
    ///
    /// # Errors
    /// [`ConfigError`] for zero keys, a value too small for the counter or
    /// above granary's limit, zero or more operations than keys, a
    /// probability out of range, more writes than operations, θ outside
    /// `[0, 1)`, a hot set no θ < 1 reaches, a long read of more keys
    /// than exist, or a key length that cannot number every key.
    pub fn validate(&self) -> Result<f64, ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        if self.keys == 0 {
            return err("need at least 1 key".into());
        }
        if self.value_bytes < 8 || self.value_bytes > granary_api::MAX_VALUE_BYTES {
            return err(format!(
                "value size must be between 8 and {} bytes (8 for the counter), got {}",
                granary_api::MAX_VALUE_BYTES,
                self.value_bytes
            ));
        }
        // `keys` itself is encoded too: it bounds the verifier's last scan.
        let need = 4 + decimal_digits(self.keys);
        let kb = self.key_bytes;
        if kb != 8 && !(need..=MAX_KEY_BYTES).contains(&kb) {
            return err(format!(
                "key length must be 8 (binary) or between {need} and {MAX_KEY_BYTES} (`user` and the digits of {} keys), got {kb}",
                self.keys
            ));
        }
        let f = self.long_read_fraction;
        if !(0.0..=1.0).contains(&f) {
            return err(format!("long-read fraction must be in [0, 1], got {f}"));
        }
        if f < 1.0 {
            let ops = self.ops_per_txn;
            if ops == 0 || ops > MAX_OPS_PER_TXN || ops as u64 > self.keys {
                return err(format!(
                    "operations per transaction must be between 1 and {} and at most the key count {} (keys are distinct), got {ops}",
                    MAX_OPS_PER_TXN, self.keys
                ));
            }
        }
        match self.mix {
            OpMix::PerOp { read_pct } if !(0.0..=100.0).contains(&read_pct) => {
                return err(format!(
                    "read percentage must be in [0, 100], got {read_pct}"
                ));
            }
            OpMix::Fixed { writes } if writes > self.ops_per_txn => {
                return err(format!(
                    "{writes} writes per transaction exceed the {} operations",
                    self.ops_per_txn
                ));
            }
            _ => {}
        }
        if f > 0.0 {
            let n = self.long_read_keys;
            if n == 0 || n > MAX_OPS_PER_TXN || n as u64 > self.keys {
                return err(format!(
                    "long-read keys must be between 1 and {} and at most the key count {}, got {n}",
                    MAX_OPS_PER_TXN, self.keys
                ));
            }
        }
        let theta = match self.skew {
            Skew::Theta(t) => t,
            Skew::HotSet {
                keys_pct,
                access_pct,
            } => theta_for_hot_set(self.keys, keys_pct / 100.0, access_pct / 100.0).ok_or_else(
                || {
                    ConfigError(format!(
                        "no Zipfian θ < 1 sends {access_pct}% of accesses to {keys_pct}% of {} keys (too few keys, or percentages outside (0, 100))",
                        self.keys
                    ))
                },
            )?,
        };
        Zipf::new(self.keys, theta).map_err(|e| ConfigError(e.to_string()))?;
        Ok(theta)
    }
}

/// Key chooser: uniform, or Zipfian ranks spread by a bijection.
#[derive(Clone, Debug)]
enum Chooser {
    Uniform(u64),
    Zipf { z: Zipf, n: u64, mult: u64 },
}

impl Chooser {
    fn new(n: u64, theta: f64, placement: Placement) -> Result<Chooser, ConfigError> {
        if theta == 0.0 {
            return Ok(Chooser::Uniform(n));
        }
        let z = Zipf::new(n, theta).map_err(|e| ConfigError(e.to_string()))?;
        let mult = match placement {
            Placement::Adjacent => 1,
            Placement::Spread => {
                // The golden-ratio multiplier, nudged until coprime with
                // n, makes `rank · mult mod n` a permutation of 0..n.
                let mut mult = 0x9E37_79B9_7F4A_7C15u64 % n;
                while gcd(mult, n) != 1 {
                    mult = (mult + 1) % n;
                }
                mult
            }
        };
        Ok(Chooser::Zipf { z, n, mult })
    }

    #[inline]
    fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            Chooser::Uniform(n) => rng.below(*n),
            Chooser::Zipf { z, n, mult } => {
                ((z.next(rng) as u128 * *mult as u128) % *n as u128) as u64
            }
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The table's name.
pub const TABLE: &str = "usertable";

/// YCSB's partitioning (for Partitioned-Store): its one table, by a hash
/// of the key (a transaction's keys are drawn independently, so no field
/// of them groups its accesses). `bench ycsb`'s workload
/// ([`Silo52`](crate::silo52::Silo52)) has the same table.
pub fn partitioning() -> granary_api::Partitioning {
    |table| (table == TABLE).then_some(granary_api::PartitionRule::Hash)
}

/// The workload.
pub struct Ycsb {
    pub cfg: YcsbConfig,
    theta: f64,
    chooser: Chooser,
    table: Option<TableId>,
    /// RMW operations committed, handed back by threads when dropped.
    rmw_ops: Arc<AtomicU64>,
}

/// A thread's state.
pub struct YcsbThread {
    rng: Rng,
    seen: HashSet<u64>,
    long_keys: Vec<u64>,
    /// Read/update procedures back from the engine, to be reused.
    #[allow(clippy::vec_box)] // boxes travel to the engine and back
    spare: Vec<Box<Procedure<YcsbTxn>>>,
    /// Procedures the engine has just finished.
    done: Vec<Done<YcsbTxn>>,
    rmw_ops: u64,
    sink: Arc<AtomicU64>,
}

impl Drop for YcsbThread {
    fn drop(&mut self) {
        // Relaxed: read after the driver joins this thread.
        self.sink.fetch_add(self.rmw_ops, Ordering::Relaxed);
    }
}

impl YcsbThread {
    /// Take back the procedures the engine finished.
    fn settle(&mut self) {
        for d in self.done.drain(..) {
            if let Ok(Some(rmws)) = d.outcome {
                self.rmw_ops += rmws;
            }
            self.spare.push(d.procedure);
        }
    }
}

/// A YCSB read/update transaction as a value: its operations, run against
/// any design (in place, or handed to a pipelined one).
pub struct YcsbTxn {
    t: TableId,
    /// (key, writes?)
    ops: Vec<(u64, bool)>,
    /// What a write does.
    kind: WriteKind,
    bytes: usize,
    key_bytes: usize,
    buf: Vec<u8>,
    key: Vec<u8>,
    /// Every operation's key, `key_bytes` each, in order.
    keys: Vec<u8>,
}

/// Keys hinted together ([`Tx::prefetch_many`]) before their operations
/// run.
const PREFETCH_KEYS: usize = 16;

impl Body for YcsbTxn {
    /// Read-modify-writes done.
    type Output = u64;

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<u64, TxError> {
        let (t, kind, bytes) = (self.t, self.kind, self.bytes);
        let mut rmws = 0u64;
        let mut acc = 0u64;
        let kb = self.key_bytes;
        self.keys.clear();
        for &(k, _) in &self.ops {
            append_key(k, kb, &mut self.keys);
        }
        for (c, chunk) in self.ops.chunks(PREFETCH_KEYS).enumerate() {
            // The keys are known up front: a chunk's cache misses overlap.
            let base = c * PREFETCH_KEYS;
            let mut keys: [(TableId, &[u8]); PREFETCH_KEYS] = [(t, &[]); PREFETCH_KEYS];
            for (j, key) in keys.iter_mut().take(chunk.len()).enumerate() {
                key.1 = &self.keys[(base + j) * kb..(base + j + 1) * kb];
            }
            if kind == WriteKind::RmwField && chunk.iter().all(|o| o.1) {
                // Only the counters will be touched.
                tx.prefetch_prefix_many(&keys[..chunk.len()], COUNTER.end);
            } else {
                tx.prefetch_many(&keys[..chunk.len()]);
            }
            for (j, &(k, write)) in chunk.iter().enumerate() {
                let key = keys[j].1;
                if write && kind == WriteKind::Blind {
                    Ycsb::initial_value(k, &mut self.buf, bytes);
                    tx.put(t, key, &self.buf)?;
                    continue;
                }
                let missing = || TxError::user(format!("YCSB key {k} missing"));
                let short = |n: usize| TxError::user(format!("YCSB key {k}: value of {n} bytes"));
                if write && kind == WriteKind::RmwGetPut {
                    let v = tx.get(t, key)?.ok_or_else(missing)?;
                    self.buf.clear();
                    self.buf.extend_from_slice(v);
                    bump_counter(&mut self.buf).map_err(short)?;
                    tx.put(t, key, &self.buf)?;
                    rmws += 1;
                    continue;
                }
                if write {
                    // The design's read-modify-write: the whole value (one
                    // copy), or the counter alone.
                    let bumped = if kind == WriteKind::RmwField {
                        tx.update_field(t, key, COUNTER, bump_counter)?
                    } else {
                        tx.update(t, key, bump_counter)?
                    };
                    bumped.ok_or_else(missing)?.map_err(short)?;
                    rmws += 1;
                    continue;
                }
                let v = tx.get(t, key)?.ok_or_else(missing)?;
                if v.len() < 8 {
                    return Err(short(v.len()));
                }
                acc = acc.wrapping_add(value_counter(v));
            }
        }
        std::hint::black_box(acc);
        Ok(rmws)
    }
}

/// Where a value's counter lies, which a read-modify-write bumps.
const COUNTER: std::ops::Range<usize> = 0..8;

/// Add one to the counter that starts `v`; `Err(v.len())` if `v` is too
/// short to hold it.
fn bump_counter(v: &mut [u8]) -> Result<(), usize> {
    let n = v.len();
    let c = v.get_mut(COUNTER).ok_or(n)?;
    let next = u64::from_le_bytes((&*c).try_into().expect("8 bytes")).wrapping_add(1);
    c.copy_from_slice(&next.to_le_bytes());
    Ok(())
}

fn value_counter(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().expect("values have at least 8 bytes"))
}

impl Ycsb {
    /// # Errors
    /// As [`YcsbConfig::validate`].
    pub fn new(cfg: YcsbConfig) -> Result<Ycsb, ConfigError> {
        let theta = cfg.validate()?;
        Ok(Ycsb {
            chooser: Chooser::new(cfg.keys, theta, cfg.placement)?,
            theta,
            cfg,
            table: None,
            rmw_ops: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The resolved Zipfian θ (0: uniform).
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The table, once loaded.
    pub fn table(&self) -> Option<TableId> {
        self.table
    }

    fn initial_value(key: u64, out: &mut Vec<u8>, bytes: usize) {
        out.clear();
        out.extend_from_slice(&0u64.to_le_bytes());
        // The key's bytes, each with its low bit set, repeated: a word at
        // a time (a byte at a time was ~4 instructions per byte, more than
        // the engine's work on a 1,000-byte blind write).
        let fill = key.to_le_bytes().map(|b| b | 1);
        let rest = bytes - 8;
        for _ in 0..rest / 8 {
            out.extend_from_slice(&fill);
        }
        out.extend_from_slice(&fill[..rest % 8]);
    }

    /// Pick this transaction's distinct keys and which of them write.
    /// Draw a transaction's operations, (key, writes?), into `out`.
    fn plan(&self, rng: &mut Rng, seen: &mut HashSet<u64>, out: &mut Vec<(u64, bool)>) {
        let ops = self.cfg.ops_per_txn;
        out.clear();
        seen.clear();
        // A draw writes if its top 53 bits, as a fraction of 2^53, are
        // at least `read_pct`%: one integer compare per operation.
        let write_from = match self.cfg.mix {
            OpMix::PerOp { read_pct } => (read_pct / 100.0 * (1u64 << 53) as f64).ceil() as u64,
            OpMix::Fixed { .. } => 0,
        };
        while out.len() < ops {
            let k = self.chooser.next(rng);
            let dup = if ops <= 16 {
                out.iter().any(|&(o, _)| o == k)
            } else {
                !seen.insert(k)
            };
            if dup {
                continue;
            }
            let i = out.len();
            let write = match self.cfg.mix {
                OpMix::Fixed { writes } => i < writes,
                OpMix::PerOp { .. } => rng.next_u64() >> 11 >= write_from,
            };
            out.push((k, write));
        }
    }

    fn update_or_read<R: TxRunner>(
        &self,
        th: &mut YcsbThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let t = self
            .table
            .ok_or_else(|| Error::InvalidOption("YCSB: run before load".into()))?;
        let mut p = self.procedure(th, t);
        self.plan(&mut th.rng, &mut th.seen, &mut p.body.ops);
        p.kind = if p.body.ops.iter().any(|o| o.1) {
            UPDATE
        } else {
            READ_ONLY
        };
        self.submit(th, ex, p, t)
    }

    /// A procedure to fill in: one back from the engine, or a new one.
    fn procedure(&self, th: &mut YcsbThread, t: TableId) -> Box<Procedure<YcsbTxn>> {
        th.spare.pop().unwrap_or_else(|| {
            Procedure::new(
                UPDATE,
                YcsbTxn {
                    t,
                    ops: Vec::with_capacity(self.cfg.ops_per_txn.min(1024)),
                    kind: self.cfg.write_kind,
                    bytes: self.cfg.value_bytes,
                    key_bytes: self.cfg.key_bytes,
                    buf: Vec::with_capacity(self.cfg.value_bytes),
                    key: Vec::with_capacity(self.cfg.key_bytes),
                    keys: Vec::with_capacity(
                        self.cfg.key_bytes * self.cfg.ops_per_txn.min(PREFETCH_KEYS),
                    ),
                },
            )
        })
    }

    /// Declare `p`'s keys (for designs that plan) and run or submit it.
    fn submit<R: TxRunner>(
        &self,
        th: &mut YcsbThread,
        ex: &mut Exec<'_, R>,
        mut p: Box<Procedure<YcsbTxn>>,
        t: TableId,
    ) -> Result<(), Error> {
        p.planned = ex.uses_declared();
        if p.planned {
            p.declared.clear();
            let key = &mut p.body.key;
            for &(k, write) in &p.body.ops {
                key_bytes(k, self.cfg.key_bytes, key);
                if write {
                    p.declared.write(t, key);
                } else {
                    p.declared.read(t, key);
                }
            }
        }
        ex.submit(p, &mut th.done)?;
        th.settle();
        Ok(())
    }

    fn long_read<R: TxRunner>(
        &self,
        th: &mut YcsbThread,
        ex: &mut Exec<'_, R>,
    ) -> Result<(), Error> {
        let t = self
            .table
            .ok_or_else(|| Error::InvalidOption("YCSB: run before load".into()))?;
        // Floyd's sampling: `m` distinct uniform keys in `m` draws.
        let (n, m) = (self.cfg.keys, self.cfg.long_read_keys as u64);
        th.seen.clear();
        th.long_keys.clear();
        for j in n - m..n {
            let r = th.rng.below(j + 1);
            let k = if th.seen.insert(r) {
                r
            } else {
                th.seen.insert(j);
                j
            };
            th.long_keys.push(k);
        }
        if !self.cfg.snapshot_long_reads {
            // A procedure of reads (declared, for designs that plan).
            let mut p = self.procedure(th, t);
            p.kind = LONG_READ;
            p.body.ops.clear();
            p.body.ops.extend(th.long_keys.iter().map(|&k| (k, false)));
            return self.submit(th, ex, p, t);
        }
        let keys = &th.long_keys;
        let len = self.cfg.key_bytes;
        let mut key = Vec::with_capacity(len);
        let mut body = |tx: &mut dyn ReadOnly| -> Result<u64, TxError> {
            let mut acc = 0u64;
            for &k in keys {
                key_bytes(k, len, &mut key);
                let v = tx
                    .read(t, &key)?
                    .ok_or_else(|| TxError::user(format!("YCSB key {k} missing")))?;
                acc = acc.wrapping_add(v.first().copied().unwrap_or(0) as u64);
            }
            Ok(acc)
        };
        let start = granary_api::Stamp::now();
        std::hint::black_box(ex.runner().snapshot_read(&mut body)?);
        ex.completed_outside(LONG_READ, start);
        Ok(())
    }
}

impl Workload for Ycsb {
    type Thread = YcsbThread;

    fn types(&self) -> &'static [&'static str] {
        &TYPES
    }

    fn load<E: Engine>(
        &mut self,
        engine: &E,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), Error> {
        let t = engine.create_table_with(TABLE, TableOptions::point_lookups())?;
        let n = self.cfg.keys;
        let (bytes, len) = (self.cfg.value_bytes, self.cfg.key_bytes);
        load_parallel(engine, n, LOAD_BATCH, progress, &|key, insert| {
            let mut v = Vec::with_capacity(bytes);
            Self::initial_value(key, &mut v, bytes);
            let mut k = Vec::with_capacity(len);
            key_bytes(key, len, &mut k);
            insert(t, &k, &v)
        })?;
        self.table = Some(t);
        Ok(())
    }

    fn thread(&self, id: usize, _threads: usize, seed: u64) -> YcsbThread {
        YcsbThread {
            rng: Rng::new(seed, id as u64 + 1),
            seen: HashSet::new(),
            long_keys: Vec::new(),
            spare: Vec::new(),
            done: Vec::new(),
            rmw_ops: 0,
            sink: Arc::clone(&self.rmw_ops),
        }
    }

    fn run_one<R: TxRunner>(&self, th: &mut YcsbThread, ex: &mut Exec<'_, R>) -> Result<(), Error> {
        let f = self.cfg.long_read_fraction;
        let long =
            f > 0.0 && (f >= 1.0 || (th.rng.next_u64() >> 11) < (f * (1u64 << 53) as f64) as u64);
        if long {
            self.long_read(th, ex)
        } else {
            self.update_or_read(th, ex)
        }
    }

    fn finish<R: TxRunner>(&self, th: &mut YcsbThread, ex: &mut Exec<'_, R>) -> Result<(), Error> {
        ex.drain(&mut th.done)?;
        th.settle();
        Ok(())
    }

    fn verify<E: Engine>(&self, engine: &E) -> Result<Vec<String>, Error> {
        let Some(t) = self.table else {
            return Ok(vec!["YCSB: verify before load".into()]);
        };
        let n = self.cfg.keys;
        let mut r = engine.runner()?;
        let mut bad = Vec::new();
        let (mut rows, mut sum) = (0u64, 0u64);
        let mut lo = 0u64;
        while lo < n {
            let hi = (lo + VERIFY_CHUNK).min(n);
            let (mut lo_key, mut hi_key) = (Vec::new(), Vec::new());
            key_bytes(lo, self.cfg.key_bytes, &mut lo_key);
            key_bytes(hi, self.cfg.key_bytes, &mut hi_key);
            let (count, s, wrong) = run_until_committed(&mut r, |tx| {
                let (mut count, mut s, mut wrong) = (0u64, 0u64, Vec::new());
                tx.scan(
                    t,
                    Bound::Included(&lo_key[..]),
                    Bound::Excluded(&hi_key[..]),
                    usize::MAX,
                    false,
                    |k, v| {
                        count += 1;
                        if v.len() != self.cfg.value_bytes {
                            wrong.push(format!("key {k:?}: value of {} bytes", v.len()));
                        } else {
                            s = s.wrapping_add(value_counter(v));
                        }
                        true
                    },
                )?;
                Ok((count, s, wrong))
            })?;
            if count != hi - lo {
                bad.push(format!(
                    "keys {lo}..{hi}: {count} rows, expected {}",
                    hi - lo
                ));
            }
            bad.extend(wrong.into_iter().take(10));
            rows += count;
            sum = sum.wrapping_add(s);
            lo = hi;
        }
        // Relaxed: the driver joined every thread (which flushed) first.
        let committed = self.rmw_ops.load(Ordering::Relaxed);
        if self.cfg.write_kind.reads() && sum != committed {
            bad.push(format!(
                "value counters sum to {sum}, but {committed} read-modify-writes committed"
            ));
        }
        if rows != n {
            bad.push(format!("{rows} rows, expected {n}"));
        }
        Ok(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_are_ycsbs_and_keep_numeric_order() {
        let mut a = Vec::new();
        key_bytes(42, 24, &mut a);
        assert_eq!(a, b"user00000000000000000042");
        key_bytes(7, 8, &mut a);
        assert_eq!(a, 7u64.to_be_bytes());
        let mut b = Vec::new();
        for len in [8, 11, 24, 64] {
            for (x, y) in [(0u64, 1u64), (9, 10), (99_999, 100_000), (123_456, 999_999)] {
                key_bytes(x, len, &mut a);
                key_bytes(y, len, &mut b);
                assert_eq!((a.len(), b.len()), (len, len));
                assert!(a < b, "{x} < {y} at {len} bytes");
            }
        }
    }

    /// The value a key is loaded (and blind-written) with: a zero counter,
    /// then the key's bytes with their low bit set, repeated; filled a word
    /// at a time, byte for byte what the byte loop it replaced made.
    #[test]
    fn initial_values_repeat_the_key() {
        let mut v = Vec::new();
        for bytes in [8, 9, 15, 16, 17, 100, 1000] {
            let key = 0x0102_0304_0506_0780u64 + bytes as u64;
            Ycsb::initial_value(key, &mut v, bytes);
            let fill = key.to_le_bytes();
            let want: Vec<u8> = (0..8)
                .map(|_| 0)
                .chain((0..bytes - 8).map(|i| fill[i % 8] | 1))
                .collect();
            assert_eq!(v, want, "{bytes} bytes");
        }
    }

    #[test]
    fn a_key_length_too_short_for_the_keys_is_refused() {
        let cfg = YcsbConfig::preset("study").unwrap().keys(1_000_000);
        // `user` + 7 digits (the verifier encodes the key count itself).
        assert!(cfg.clone().key_bytes(11).validate().is_ok());
        let e = cfg
            .clone()
            .key_bytes(10)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("between 11 and 256"), "{e}");
        assert!(cfg.key_bytes(257).validate().is_err());
    }

    #[test]
    fn adjacent_placement_puts_the_hot_ranks_first() {
        let mut rng = Rng::new(1, 1);
        let adjacent = Chooser::new(1_000_000, 0.99, Placement::Adjacent).unwrap();
        let spread = Chooser::new(1_000_000, 0.99, Placement::Spread).unwrap();
        // Keys 1..100 (rank 0 is key 0 either way).
        let low = |c: &Chooser, rng: &mut Rng| {
            (0..10_000)
                .filter(|_| (1..100).contains(&c.next(rng)))
                .count()
        };
        // At θ = 0.99, ranks 1..100 of 1M draw about a third of the picks.
        assert!(low(&adjacent, &mut rng) > 2_500);
        assert!(low(&spread, &mut rng) < 300);
    }
}
