//! Shared helpers for the checker's tests: seeds, a small PRNG, a Zipf
//! sampler and a generator of *serial* (hence valid) histories.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

use granary_check::{History, Key, Op, Txn, VersionId};

/// The test seed: `GRANARY_SEED` if set, else fresh; always printed so a
/// failure can be replayed.
pub fn seed(name: &str) -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("{name}: seed {s} (replay with GRANARY_SEED={s})");
    s
}

/// xorshift64* — small, fast, good enough for workload generation.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `pct` percent.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf over `0..n` with exponent `s`, by inverse CDF.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0;
        for i in 1..=n {
            sum += 1.0 / (i as f64).powf(s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u64
    }
}

/// Shape of a generated history.
#[derive(Debug, Clone)]
pub struct Gen {
    pub txns: usize,
    /// Register keys are `0..keys` (Zipf-skewed).
    pub keys: usize,
    /// List keys are `LIST_BASE..LIST_BASE + lists` (uniform); 0 = none.
    pub lists: usize,
    pub zipf_s: f64,
    pub min_ops: u64,
    pub max_ops: u64,
    /// Percent of transactions that do one range scan.
    pub scan_pct: u64,
    /// Widest scan, in keys.
    pub scan_width: u64,
    /// Percent of scans that are unbounded above (`hi: None`).
    pub unbounded_pct: u64,
    /// Percent of attempts that abort.
    pub abort_pct: u64,
    /// Percent of register ops that are reads of the key written next
    /// (read-modify-write).
    pub rmw_pct: u64,
}

/// Where list keys start: far above every register key, so unbounded
/// scans simply see no list keys among the register versions.
pub const LIST_BASE: Key = 1 << 40;

impl Gen {
    pub fn small(txns: usize) -> Gen {
        Gen {
            txns,
            keys: 64,
            lists: 8,
            zipf_s: 0.9,
            min_ops: 1,
            max_ops: 8,
            scan_pct: 10,
            scan_width: 16,
            unbounded_pct: 5,
            abort_pct: 10,
            rmw_pct: 30,
        }
    }
}

/// A history of transactions executed one at a time against a simple
/// in-memory store, so it is serializable by construction: committed
/// transaction `i` gets `commit_key = 2 * i + 2` (even, leaving gaps for
/// tests to plant transactions between), aborted ones roll back.
pub fn serial_history(g: &Gen, seed: u64) -> History {
    let mut rng = Rng::new(seed);
    let zipf = Zipf::new(g.keys, g.zipf_s);
    let mut regs: BTreeMap<Key, VersionId> = BTreeMap::new();
    let mut lists: HashMap<Key, Vec<u64>> = HashMap::new();
    let mut next_version: VersionId = 1;
    let mut next_elem = 1u64;
    let mut h = History::new();
    h.txns.reserve(g.txns);
    let mut committed = 0u64;
    for id in 0..g.txns as u64 {
        let abort = rng.pct(g.abort_pct);
        let mut undo_regs: Vec<(Key, Option<VersionId>)> = Vec::new();
        let mut undo_lists: Vec<Key> = Vec::new();
        let n = g.min_ops + rng.below(g.max_ops - g.min_ops + 1);
        let mut ops = Vec::with_capacity(n as usize + 1);
        for _ in 0..n {
            let r = rng.below(100);
            if g.lists > 0 && r < 20 {
                let key = LIST_BASE + rng.below(g.lists as u64);
                if r < 10 {
                    let elems = lists.get(&key).cloned().unwrap_or_default();
                    ops.push(Op::ReadList { key, elems });
                } else {
                    let elem = next_elem;
                    next_elem += 1;
                    lists.entry(key).or_default().push(elem);
                    undo_lists.push(key);
                    ops.push(Op::Append { key, elem });
                }
                continue;
            }
            let key = zipf.sample(&mut rng);
            if r < 60 {
                ops.push(Op::Read {
                    key,
                    version: regs.get(&key).copied(),
                });
            } else {
                if rng.pct(g.rmw_pct) {
                    ops.push(Op::Read {
                        key,
                        version: regs.get(&key).copied(),
                    });
                }
                let version = next_version;
                next_version += 1;
                undo_regs.push((key, regs.insert(key, version)));
                ops.push(Op::Write { key, version });
            }
        }
        if rng.pct(g.scan_pct) {
            let lo = rng.below(g.keys as u64);
            let hi = if rng.pct(g.unbounded_pct) {
                None
            } else {
                Some(lo + 1 + rng.below(g.scan_width))
            };
            let rows = match hi {
                Some(hi) => regs.range(lo..hi).map(|(&k, &v)| (k, v)).collect(),
                None => regs.range(lo..).map(|(&k, &v)| (k, v)).collect(),
            };
            ops.push(Op::Scan { lo, hi, rows });
        }
        if abort {
            for (key, old) in undo_regs.into_iter().rev() {
                match old {
                    Some(v) => regs.insert(key, v),
                    None => regs.remove(&key),
                };
            }
            for key in undo_lists.into_iter().rev() {
                lists.get_mut(&key).and_then(|l| l.pop());
            }
            h.push(Txn::aborted(id, ops));
        } else {
            committed += 1;
            h.push(Txn::committed(id, 2 * committed, ops));
        }
    }
    h
}
