//! Pass 2: trace every read of every committed transaction to its writer,
//! report the anomalies that need no graph (G1a, G1b, internal, garbage,
//! incompatible list orders), and emit the dependency edges.
//!
//! Registers (version order from [`Versions`]):
//! * ww: writer of version i → writer of version i+1 of the same key;
//! * wr: writer of the version read → reader;
//! * rw (item): reader of version i (or of the initial state) → writer of
//!   version i+1 (or of the first version);
//! * rw (predicate): a scan of `[lo, hi)` that did not return key k saw it
//!   absent → writer of k's first version.
//!
//! Lists (Elle's list-append inference): the longest read of a key fixes its
//! order and every other read must be a prefix of it. ww runs between the
//! appenders of consecutive elements, wr from the appender of a read's last
//! element to the reader, rw from the reader of a prefix of length n to the
//! appender of element n+1. Appends nobody read are left unordered.
//!
//! A read of a key the transaction itself wrote earlier must return that
//! write (else *internal*) and adds no edge: the transaction's own ww
//! edges already place it.

use crate::hash::{FastSet, LocalMap};
use crate::history::{History, Key, Op, Txn, VersionId};
use crate::report::{Anomaly, AnomalyKind, EdgeKind, Sink};
use crate::versions::{Node, Versions, NOT_INSTALLED, NO_NEXT};

/// One dependency edge before deduplication, packed in 16 bytes: the
/// kind sits in the low two bits of `to_kind` (node ids are below 2^30).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawEdge {
    pub(crate) from: Node,
    to_kind: u32,
    pub(crate) key: Key,
}

impl RawEdge {
    pub(crate) fn new(from: Node, to: Node, kind: EdgeKind, key: Key) -> RawEdge {
        RawEdge {
            from,
            to_kind: (to << 2) | kind as u32,
            key,
        }
    }

    pub(crate) fn target(self) -> Node {
        self.to_kind >> 2
    }

    pub(crate) fn kind(self) -> EdgeKind {
        EdgeKind::from_index(self.to_kind & 3)
    }

    /// Sort key grouping parallel edges: target, then kind in bit order.
    pub(crate) fn target_kind(self) -> u32 {
        self.to_kind
    }
}

/// A committed register read (or scan row) that must be joined to its
/// writer: not a read of the reader's own earlier write.
#[derive(Debug, Clone, Copy)]
struct ExtRead {
    version: VersionId,
    key: Key,
    reader: Node,
}

/// A committed read of a list, kept until every read of its key is known.
#[derive(Debug, Clone, Copy)]
struct ListRead {
    key: Key,
    node: Node,
    op: u32,
    /// Whether the read may produce edges (not an internal read after the
    /// transaction's own appends).
    external: bool,
}

/// Per-transaction state of one list key.
#[derive(Debug, Default)]
struct ListLocal {
    /// Elements this transaction appended to the key, in order.
    own: Vec<u64>,
    /// How many of `own` were appended before the last read.
    own_at_read: usize,
    /// Op index of the transaction's last read of the key.
    last_read: Option<u32>,
}

/// Traces reads and emits edges. See the module docs.
pub(crate) fn collect(history: &History, v: &Versions, sink: &mut Sink) -> Vec<RawEdge> {
    let ops: usize = history.txns.iter().map(|t| t.ops.len()).sum();
    let mut c = Collector {
        history,
        v,
        // One ww per write, one wr and one rw per read.
        edges: Vec::with_capacity(ops * 2),
        list_reads: Vec::new(),
        reads: Vec::with_capacity(v.writes.len()),
    };
    // ww edges of registers come straight from the version order.
    for &(a, b, key) in &v.ww {
        c.edge(a, b, EdgeKind::Ww, key);
    }
    let mut writes: LocalMap<VersionId> = LocalMap::default();
    let mut lists: LocalMap<ListLocal> = LocalMap::default();
    for (node, t) in history.txns.iter().enumerate() {
        if !t.is_committed() {
            continue;
        }
        writes.clear();
        lists.clear();
        let node = node as Node;
        for (i, op) in t.ops.iter().enumerate() {
            match op {
                Op::Write { key, version } => {
                    writes.insert(*key, *version);
                }
                Op::Read { key, version } => {
                    c.read(sink, node, t, &writes, *key, *version);
                }
                Op::Scan { lo, hi, rows } => c.scan(sink, node, t, &writes, *lo, *hi, rows),
                Op::Append { key, elem } => match lists.get_mut(*key) {
                    Some(l) => l.own.push(*elem),
                    None => {
                        lists.insert(
                            *key,
                            ListLocal {
                                own: vec![*elem],
                                ..ListLocal::default()
                            },
                        );
                    }
                },
                Op::ReadList { key, elems } => {
                    if lists.get(*key).is_none() {
                        lists.insert(*key, ListLocal::default());
                    }
                    if let Some(l) = lists.get_mut(*key) {
                        c.read_list(sink, node, t, i as u32, l, *key, elems);
                    }
                }
            }
        }
    }
    c.join_reads(sink);
    c.list_edges(sink);
    c.edges
}

struct Collector<'a> {
    history: &'a History,
    v: &'a Versions,
    edges: Vec<RawEdge>,
    list_reads: Vec<ListRead>,
    reads: Vec<ExtRead>,
}

impl Collector<'_> {
    fn id(&self, node: Node) -> u64 {
        self.history.txns[node as usize].id
    }

    fn edge(&mut self, from: Node, to: Node, kind: EdgeKind, key: Key) {
        if from != to {
            self.edges.push(RawEdge::new(from, to, kind, key));
        }
    }

    /// A register read (or scan row) by committed `node` of `key`
    /// returning `version`.
    fn read(
        &mut self,
        sink: &mut Sink,
        node: Node,
        t: &Txn,
        writes: &LocalMap<VersionId>,
        key: Key,
        version: Option<VersionId>,
    ) {
        if let Some(&own) = writes.get(key) {
            if version != Some(own) {
                sink.report(AnomalyKind::Internal, || {
                    let got = version.map_or("absent".to_string(), |v| format!("v{v}"));
                    Anomaly::new(
                        AnomalyKind::Internal,
                        vec![t.id],
                        format!("T{} wrote v{own} to key {key}, then read {got}", t.id),
                    )
                });
            }
            return;
        }
        let Some(version) = version else {
            if let Some(first) = self.v.registers.first_writer(key) {
                self.edge(node, first, EdgeKind::RwItem, key);
            }
            return;
        };
        self.reads.push(ExtRead {
            version,
            key,
            reader: node,
        });
    }

    /// Joins every [`ExtRead`] to its writer (both sorted by version) and
    /// checks it: unknown version or another key's (garbage), the reader's
    /// own later write (internal), an aborted write (G1a), an overwritten
    /// one (G1b); else emits wr and item rw edges.
    fn join_reads(&mut self, sink: &mut Sink) {
        let mut reads = std::mem::take(&mut self.reads);
        reads.sort_unstable_by_key(|r| r.version);
        let v = self.v;
        let writes = &v.writes;
        let mut wi = 0;
        for r in reads {
            while wi < writes.len() && writes[wi].version < r.version {
                wi += 1;
            }
            let (version, key) = (r.version, r.key);
            // Ids are looked up only for anomalies: a lookup per read
            // would be a cache miss per read.
            let reader = || self.id(r.reader);
            let Some(&w) = writes.get(wi).filter(|w| w.version == version) else {
                sink.report(AnomalyKind::Garbage, || {
                    let reader = reader();
                    Anomaly::new(
                        AnomalyKind::Garbage,
                        vec![reader],
                        format!("T{reader} read v{version} of key {key}, which nobody wrote"),
                    )
                });
                continue;
            };
            let problem = if w.key != key {
                Some(AnomalyKind::Garbage)
            } else if w.writer == r.reader {
                Some(AnomalyKind::Internal)
            } else if !v.committed[w.writer as usize] {
                Some(AnomalyKind::G1a)
            } else if w.next == NOT_INSTALLED {
                Some(AnomalyKind::G1b)
            } else {
                None
            };
            if let Some(kind) = problem {
                sink.report(kind, || {
                    let (reader, writer) = (reader(), self.id(w.writer));
                    let why = match kind {
                        AnomalyKind::Garbage => {
                            format!("but T{writer} wrote v{version} to key {}", w.key)
                        }
                        AnomalyKind::Internal => "before writing it itself".to_string(),
                        AnomalyKind::G1a => format!("written by aborted T{writer}"),
                        _ => format!("which T{writer} later overwrote"),
                    };
                    let txns = if kind == AnomalyKind::Internal {
                        vec![reader]
                    } else {
                        vec![reader, writer]
                    };
                    Anomaly::new(
                        kind,
                        txns,
                        format!("T{reader} read v{version} of key {key}, {why}"),
                    )
                });
                continue;
            }
            self.edge(w.writer, r.reader, EdgeKind::Wr, key);
            if w.next != NO_NEXT {
                self.edge(r.reader, w.next, EdgeKind::RwItem, key);
            }
        }
    }

    /// A range scan by committed `node`.
    #[allow(clippy::too_many_arguments)]
    fn scan(
        &mut self,
        sink: &mut Sink,
        node: Node,
        t: &Txn,
        writes: &LocalMap<VersionId>,
        lo: Key,
        hi: Option<Key>,
        rows: &[(Key, VersionId)],
    ) {
        let in_range = |k: Key| k >= lo && !matches!(hi, Some(hi) if k >= hi);
        let sorted = rows.windows(2).all(|p| p[0].0 < p[1].0);
        if !sorted || !rows.iter().all(|&(k, _)| in_range(k)) {
            sink.report(AnomalyKind::InvalidHistory, || {
                Anomaly::new(
                    AnomalyKind::InvalidHistory,
                    vec![t.id],
                    format!(
                        "T{}'s scan from {lo} returned rows out of order or out of range",
                        t.id
                    ),
                )
            });
            return;
        }
        for &(key, version) in rows {
            self.read(sink, node, t, writes, key, Some(version));
        }
        // Every installed key in range that the scan did not return was
        // observed absent.
        let mut rows = rows.iter().map(|&(k, _)| k).peekable();
        for i in self.v.registers.key_range(lo, hi) {
            let key = self.v.registers.keys[i];
            while rows.next_if(|&r| r < key).is_some() {}
            if rows.next_if_eq(&key).is_some() {
                continue;
            }
            if let Some(&own) = writes.get(key) {
                sink.report(AnomalyKind::Internal, || {
                    Anomaly::new(
                        AnomalyKind::Internal,
                        vec![t.id],
                        format!(
                            "T{} wrote v{own} to key {key}, then its scan from {lo} missed it",
                            t.id
                        ),
                    )
                });
                continue;
            }
            let first = self.v.registers.first[i];
            self.edge(node, first, EdgeKind::RwPredicate, key);
        }
    }

    /// A list read by committed `node` (op index `op`); `l` is the
    /// transaction's state for this key. Checks each element and the
    /// transaction's own appends; edges come later, in [`Self::list_edges`].
    #[allow(clippy::too_many_arguments)]
    fn read_list(
        &mut self,
        sink: &mut Sink,
        node: Node,
        t: &Txn,
        op: u32,
        l: &mut ListLocal,
        key: Key,
        elems: &[u64],
    ) {
        for &e in elems {
            match self.v.appends.get(&(key, e)) {
                None => sink.report(AnomalyKind::Garbage, || {
                    Anomaly::new(
                        AnomalyKind::Garbage,
                        vec![t.id],
                        format!(
                            "T{} read element {e} in list {key}, which nobody appended",
                            t.id
                        ),
                    )
                }),
                Some(a) if a.appender == node => {
                    if !l.own.contains(&e) {
                        sink.report(AnomalyKind::Internal, || {
                            Anomaly::new(
                                AnomalyKind::Internal,
                                vec![t.id],
                                format!(
                                    "T{} read element {e} in list {key} before appending it",
                                    t.id
                                ),
                            )
                        });
                    }
                }
                Some(a) if !self.v.committed[a.appender as usize] => {
                    let writer = self.id(a.appender);
                    sink.report(AnomalyKind::G1a, || {
                        Anomaly::new(
                            AnomalyKind::G1a,
                            vec![t.id, writer],
                            format!(
                                "T{} read element {e} in list {key}, appended by aborted T{writer}",
                                t.id
                            ),
                        )
                    });
                }
                Some(_) => {}
            }
        }
        if let Some(&e) = elems.last() {
            if let Some(a) = self.v.appends.get(&(key, e)) {
                if a.appender != node && self.v.committed[a.appender as usize] && !a.last {
                    let writer = self.id(a.appender);
                    sink.report(AnomalyKind::G1b, || {
                        Anomaly::new(
                            AnomalyKind::G1b,
                            vec![t.id, writer],
                            format!("T{} read list {key} ending at {e}, which T{writer} appended before appending more", t.id),
                        )
                    });
                }
            }
        }
        let external = l.own.is_empty();
        if !external {
            // The read must show the transaction's own appends: exactly its
            // previous read plus the appends since, or (without a previous
            // read) end with all of its appends.
            let ok = match l.last_read {
                Some(prev) => {
                    let Op::ReadList { elems: p, .. } = &t.ops[prev as usize] else {
                        unreachable!("last_read indexes a ReadList")
                    };
                    let since = &l.own[l.own_at_read..];
                    elems.len() == p.len() + since.len()
                        && elems.starts_with(p)
                        && elems.ends_with(since)
                }
                None => elems.ends_with(&l.own),
            };
            if !ok {
                sink.report(AnomalyKind::Internal, || {
                    Anomaly::new(
                        AnomalyKind::Internal,
                        vec![t.id],
                        format!(
                            "T{}'s read of list {key} does not end with its own appends {:?}",
                            t.id, l.own
                        ),
                    )
                });
            }
        }
        l.last_read = Some(op);
        l.own_at_read = l.own.len();
        self.list_reads.push(ListRead {
            key,
            node,
            op,
            external,
        });
    }

    /// The committed appender of element `e` of list `key`, if any.
    fn appender(&self, key: Key, e: u64) -> Option<Node> {
        let a = self.v.appends.get(&(key, e))?;
        self.v.committed[a.appender as usize].then_some(a.appender)
    }

    /// Infers each list's order from its longest read and emits list edges.
    fn list_edges(&mut self, sink: &mut Sink) {
        let history = self.history;
        let mut reads = std::mem::take(&mut self.list_reads);
        reads.sort_by_key(|r| r.key);
        for group in reads.chunk_by(|a, b| a.key == b.key) {
            let key = group[0].key;
            let longest = group
                .iter()
                .max_by_key(|r| list_elems(history, r).len())
                .copied()
                .expect("chunk_by yields non-empty groups");
            let order = list_elems(history, &longest);
            // A repeated element makes the list's order meaningless.
            let mut seen: FastSet<u64> = FastSet::default();
            if let Some(&dup) = order.iter().find(|&&e| !seen.insert(e)) {
                let who = self.id(longest.node);
                sink.report(AnomalyKind::IncompatibleOrder, || {
                    Anomaly::new(
                        AnomalyKind::IncompatibleOrder,
                        vec![who],
                        format!("T{who} read list {key} with element {dup} twice"),
                    )
                });
                continue;
            }
            // ww between appenders of consecutive (committed) elements.
            let mut prev: Option<Node> = None;
            for &e in order {
                if let Some(a) = self.appender(key, e) {
                    if let Some(p) = prev {
                        self.edge(p, a, EdgeKind::Ww, key);
                    }
                    prev = Some(a);
                }
            }
            for r in group {
                let elems = list_elems(history, r);
                if !order.starts_with(elems) {
                    let (a, b) = (self.id(r.node), self.id(longest.node));
                    sink.report(AnomalyKind::IncompatibleOrder, || {
                        Anomaly::new(
                            AnomalyKind::IncompatibleOrder,
                            vec![a, b],
                            format!(
                                "T{a} read list {key} as {}, not a prefix of T{b}'s {}",
                                brief(elems),
                                brief(order)
                            ),
                        )
                    });
                    continue;
                }
                if !r.external {
                    continue;
                }
                let last = elems.last().and_then(|&e| {
                    let a = self.v.appends.get(&(key, e))?;
                    (self.v.committed[a.appender as usize] && a.last).then_some(a.appender)
                });
                if let Some(w) = last {
                    self.edge(w, r.node, EdgeKind::Wr, key);
                }
                let next = order[elems.len()..]
                    .iter()
                    .find_map(|&e| self.appender(key, e));
                if let Some(n) = next {
                    self.edge(r.node, n, EdgeKind::RwItem, key);
                }
            }
        }
    }
}

/// The elements a [`ListRead`] returned.
fn list_elems<'h>(history: &'h History, r: &ListRead) -> &'h [u64] {
    match &history.txns[r.node as usize].ops[r.op as usize] {
        Op::ReadList { elems, .. } => elems,
        _ => unreachable!("ListRead indexes a ReadList"),
    }
}

/// A list for a message: whole if short, else its ends.
fn brief(list: &[u64]) -> String {
    const SHOW: usize = 8;
    if list.len() <= 2 * SHOW {
        return format!("{list:?}");
    }
    let (head, tail) = (&list[..SHOW], &list[list.len() - SHOW..]);
    format!("{head:?} … ({} more) … {tail:?}", list.len() - 2 * SHOW)
}
