//! What the checker found: [`Report`], [`Anomaly`] and their vocabulary.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::hash::{map_with_capacity, FastMap};
use crate::history::{History, Key, Txn, TxnId};

/// The isolation level a history is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Level {
    /// Adya's PL-3: every dependency cycle is an anomaly.
    Serializable,
    /// Snapshot isolation (Adya's PL-SI, as Elle checks it without real
    /// time): forbids G0, G1 and every cycle that lacks two *adjacent*
    /// anti-dependency edges (G-single, G-nonadjacent). Write skew is
    /// allowed.
    SnapshotIsolation,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Serializable => "serializable",
            Level::SnapshotIsolation => "snapshot isolation",
        })
    }
}

/// A dependency edge kind of Adya's direct serialization graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum EdgeKind {
    /// Write-write: `from` installed the version of `key` that directly
    /// precedes the one `to` installed.
    Ww,
    /// Write-read: `to` read the version of `key` that `from` installed.
    Wr,
    /// Item anti-dependency: `from` read a version of `key` and `to`
    /// installed the next one.
    RwItem,
    /// Predicate anti-dependency: `from` scanned a range and saw `key`
    /// absent; `to` installed `key`'s first version.
    RwPredicate,
}

impl EdgeKind {
    /// All kinds, in bit order of the graph's kind masks.
    pub(crate) const ALL: [EdgeKind; 4] = [
        EdgeKind::Ww,
        EdgeKind::Wr,
        EdgeKind::RwItem,
        EdgeKind::RwPredicate,
    ];

    /// Whether this is an anti-dependency (item or predicate).
    pub fn is_rw(self) -> bool {
        matches!(self, EdgeKind::RwItem | EdgeKind::RwPredicate)
    }

    /// The kind with index `i` (0..4).
    pub(crate) fn from_index(i: u32) -> EdgeKind {
        EdgeKind::ALL[i as usize & 3]
    }

    fn label(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::RwItem => "rw",
            EdgeKind::RwPredicate => "rw-pred",
        }
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The kinds of anomaly the checker reports.
///
/// Cycle kinds follow Adya's thesis (G0, G1c, G-single, G2-item, G2) and
/// Elle's refinement for snapshot isolation (G-nonadjacent). The others
/// are found without a graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum AnomalyKind {
    /// Write cycle: a cycle of ww edges only.
    G0,
    /// Aborted read: a committed transaction observed a write of an
    /// aborted one.
    G1a,
    /// Intermediate read: a committed transaction observed a version that
    /// its writer later overwrote in the same transaction.
    G1b,
    /// Circular information flow: a cycle of ww and wr edges with at
    /// least one wr.
    G1c,
    /// A cycle with exactly one anti-dependency edge (read skew, lost
    /// update).
    GSingle,
    /// A cycle with at least two anti-dependency edges, none adjacent to
    /// another (reported under snapshot isolation only).
    GNonadjacent,
    /// A cycle with at least two anti-dependency edges, all item edges
    /// (write skew).
    G2Item,
    /// A cycle with at least two anti-dependency edges, one of them a
    /// predicate edge (phantom write skew).
    G2,
    /// A transaction did not observe its own earlier writes.
    Internal,
    /// A read returned a version or element nobody wrote (to that key).
    Garbage,
    /// Two reads of one list disagree on its order: neither is a prefix of
    /// the other, or a list repeats an element.
    IncompatibleOrder,
    /// The history itself is malformed: duplicate ids or versions, a key
    /// used both as register and list, unsorted or out-of-range scan rows.
    InvalidHistory,
    /// Two committed writers of one register key have the same
    /// `commit_key`, so the key's version order is unknown.
    AmbiguousVersionOrder,
}

impl AnomalyKind {
    /// Whether anomalies of this kind carry a dependency cycle.
    pub fn is_cycle(self) -> bool {
        matches!(
            self,
            AnomalyKind::G0
                | AnomalyKind::G1c
                | AnomalyKind::GSingle
                | AnomalyKind::GNonadjacent
                | AnomalyKind::G2Item
                | AnomalyKind::G2
        )
    }

    /// The conventional name: `G0`, `G1a`, `G-single`, `G2-item`, …
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::G0 => "G0",
            AnomalyKind::G1a => "G1a",
            AnomalyKind::G1b => "G1b",
            AnomalyKind::G1c => "G1c",
            AnomalyKind::GSingle => "G-single",
            AnomalyKind::GNonadjacent => "G-nonadjacent",
            AnomalyKind::G2Item => "G2-item",
            AnomalyKind::G2 => "G2",
            AnomalyKind::Internal => "internal",
            AnomalyKind::Garbage => "garbage",
            AnomalyKind::IncompatibleOrder => "incompatible-order",
            AnomalyKind::InvalidHistory => "invalid-history",
            AnomalyKind::AmbiguousVersionOrder => "ambiguous-version-order",
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One edge of a reported cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Step {
    /// The transaction the edge leaves.
    pub from: TxnId,
    /// The transaction the edge enters.
    pub to: TxnId,
    /// The dependency.
    pub edge: EdgeKind,
    /// A key that witnesses the dependency.
    pub key: Key,
}

/// One anomaly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Anomaly {
    /// What kind.
    pub kind: AnomalyKind,
    /// For cycle kinds, the cycle as edges; the last edge's `to` is the
    /// first edge's `from`. Empty for the other kinds.
    pub cycle: Vec<Step>,
    /// The transactions involved (for cycles, each once, in cycle order).
    pub txns: Vec<TxnId>,
    /// A human-readable description.
    pub detail: String,
}

impl Anomaly {
    /// A non-cycle anomaly.
    pub(crate) fn new(kind: AnomalyKind, txns: Vec<TxnId>, detail: String) -> Anomaly {
        Anomaly {
            kind,
            cycle: Vec::new(),
            txns,
            detail,
        }
    }

    /// A cycle anomaly; `txns` and `detail` are derived from the cycle.
    pub(crate) fn cycle(kind: AnomalyKind, cycle: Vec<Step>) -> Anomaly {
        let txns = cycle.iter().map(|s| s.from).collect();
        let rw = cycle.iter().filter(|s| s.edge.is_rw()).count();
        let detail = format!(
            "cycle of {} transactions, {rw} anti-dependencies",
            cycle.len()
        );
        Anomaly {
            kind,
            cycle,
            txns,
            detail,
        }
    }
}

impl fmt::Display for Anomaly {
    /// `G-single: T12 -rw(k=5)-> T40 -wr(k=9)-> T12`, or for non-cycle
    /// anomalies `G1a: <detail>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.kind)?;
        let Some(first) = self.cycle.first() else {
            return f.write_str(&self.detail);
        };
        write!(f, "T{}", first.from)?;
        for s in &self.cycle {
            write!(f, " -{}(k={})-> T{}", s.edge, s.key, s.to)?;
        }
        Ok(())
    }
}

/// The result of [`check`](crate::check()).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Committed transactions checked.
    pub transactions: usize,
    /// Aborted transactions in the history.
    pub aborted: usize,
    /// The level checked against.
    pub level: Level,
    /// The anomalies kept: non-cycle anomalies first (by kind), then cycle
    /// anomalies, smallest cycle first. At most
    /// [`MAX_STORED_PER_KIND`](crate::MAX_STORED_PER_KIND) per kind;
    /// [`counts`](Report::counts) has the full numbers.
    pub anomalies: Vec<Anomaly>,
    /// Every anomaly found, per kind, including those not kept.
    pub counts: BTreeMap<AnomalyKind, usize>,
    /// Non-trivial strongly connected components of the dependency graph
    /// (each holds at least one cycle, allowed or not at `level`).
    pub sccs: usize,
}

impl Report {
    /// Whether no anomaly was found.
    pub fn is_ok(&self) -> bool {
        self.counts.values().all(|&n| n == 0)
    }

    /// Total anomalies found (including those not kept in `anomalies`).
    pub fn anomaly_count(&self) -> usize {
        self.counts.values().sum()
    }

    /// Anomalies of one kind found (including those not kept).
    pub fn count(&self, kind: AnomalyKind) -> usize {
        self.counts.get(&kind).copied().unwrap_or(0)
    }

    /// Whether at least one anomaly of `kind` was found.
    pub fn has(&self, kind: AnomalyKind) -> bool {
        self.count(kind) > 0
    }

    /// The cycle anomaly with the fewest transactions, if any.
    pub fn smallest_cycle(&self) -> Option<&Anomaly> {
        self.anomalies
            .iter()
            .filter(|a| !a.cycle.is_empty())
            .min_by_key(|a| a.cycle.len())
    }

    /// Explains the smallest cycle (or, without cycles, the first anomaly):
    /// the anomaly line, then each involved transaction with its status,
    /// commit key and operations (at most 64 operations per transaction).
    /// Returns `"ok"` when there is nothing to explain.
    pub fn explain(&self, history: &History) -> String {
        let Some(a) = self.smallest_cycle().or(self.anomalies.first()) else {
            return "ok".to_string();
        };
        let mut by_id: FastMap<TxnId, &Txn> = map_with_capacity(history.txns.len());
        for t in &history.txns {
            by_id.entry(t.id).or_insert(t);
        }
        let mut out = format!("{a}\n");
        if !a.cycle.is_empty() {
            out.push_str(&format!("  ({})\n", a.detail));
        }
        let mut seen = Vec::new();
        for &id in &a.txns {
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            match by_id.get(&id) {
                Some(t) => out.push_str(&describe_txn(t)),
                None => out.push_str(&format!("  T{id}: not in history\n")),
            }
        }
        out
    }
}

/// One line per transaction: `T12 committed (commit_key 7): r(5)=v3 w(9)=v44`.
fn describe_txn(t: &Txn) -> String {
    const MAX_OPS: usize = 64;
    let status = if t.is_committed() {
        format!("committed (commit_key {})", t.commit_key)
    } else {
        "aborted".to_string()
    };
    let mut line = format!("  T{} {status}:", t.id);
    for op in t.ops.iter().take(MAX_OPS) {
        line.push(' ');
        line.push_str(&op.to_string());
    }
    if t.ops.len() > MAX_OPS {
        line.push_str(&format!(" … ({} more ops)", t.ops.len() - MAX_OPS));
    }
    line.push('\n');
    line
}

impl Report {
    /// Like `Display`, but showing at most `max` anomalies, each cut to a
    /// few hundred characters: for terminals.
    pub fn summary(&self, max: usize) -> String {
        const WIDTH: usize = 300;
        let full = self.to_string();
        let mut out = String::new();
        let mut shown = 0;
        let header = 1 + self.counts.len();
        for (i, line) in full.lines().enumerate() {
            if i >= header {
                if shown == max {
                    out.push_str(&format!(
                        "... ({} more; --json has them all)\n",
                        self.anomaly_count() - max
                    ));
                    break;
                }
                shown += 1;
            }
            if line.chars().count() > WIDTH {
                out.extend(line.chars().take(WIDTH));
                out.push_str(" ...\n");
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

impl fmt::Display for Report {
    /// A summary line, per-kind counts, then every kept anomaly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "checked {} committed ({} aborted) transactions for {}: ",
            self.transactions, self.aborted, self.level
        )?;
        if self.is_ok() {
            return writeln!(f, "ok ({} non-trivial SCCs allowed)", self.sccs);
        }
        writeln!(
            f,
            "{} anomalies, {} non-trivial SCCs",
            self.anomaly_count(),
            self.sccs
        )?;
        for (kind, n) in &self.counts {
            writeln!(f, "  {kind}: {n}")?;
        }
        for a in &self.anomalies {
            writeln!(f, "{a}")?;
        }
        let hidden = self.anomaly_count() - self.anomalies.len();
        if hidden > 0 {
            writeln!(f, "({hidden} more not kept)")?;
        }
        Ok(())
    }
}

/// Collects anomalies, keeping at most `cap` per kind but counting all.
#[derive(Debug)]
pub(crate) struct Sink {
    cap: usize,
    kept: BTreeMap<AnomalyKind, Vec<Anomaly>>,
    counts: BTreeMap<AnomalyKind, usize>,
}

impl Sink {
    pub(crate) fn new(cap: usize) -> Sink {
        Sink {
            cap,
            kept: BTreeMap::new(),
            counts: BTreeMap::new(),
        }
    }

    /// Counts one anomaly; builds and keeps it only while under the cap,
    /// so a badly broken history costs no formatting per anomaly.
    pub(crate) fn report(&mut self, kind: AnomalyKind, make: impl FnOnce() -> Anomaly) {
        *self.counts.entry(kind).or_insert(0) += 1;
        let kept = self.kept.entry(kind).or_default();
        if kind.is_cycle() || kept.len() < self.cap {
            kept.push(make());
        }
    }

    /// Sorts (non-cycle first, then cycles by length) and applies the cap
    /// to cycle anomalies, which are all kept until now so the smallest
    /// survive.
    pub(crate) fn finish(self) -> (Vec<Anomaly>, BTreeMap<AnomalyKind, usize>) {
        let mut plain = Vec::new();
        let mut cycles = Vec::new();
        for (kind, mut list) in self.kept {
            if kind.is_cycle() {
                list.sort_by_key(|a| a.cycle.len());
                list.truncate(self.cap);
                cycles.extend(list);
            } else {
                plain.extend(list);
            }
        }
        cycles.sort_by_key(|a| (a.cycle.len(), a.kind));
        plain.extend(cycles);
        (plain, self.counts)
    }
}
