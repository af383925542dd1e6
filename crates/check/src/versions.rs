//! Pass 1: who wrote what, and in which order the committed versions of
//! each register key were installed.
//!
//! Every write of every transaction (committed or aborted) is recorded and
//! sorted by [`VersionId`], so reads can later be joined to their writers
//! by a merge: a probe into a hash table of millions of versions is a
//! cache (and TLB) miss per read, while sorting streams through memory and
//! is nearly free on the mostly-ascending version ids recorders produce.
//! Appends are indexed by `(key, elem)`. For registers the *version order*
//! of each key is the committed writers' final writes to it, sorted by
//! `commit_key`: Adya's version order is the order in which the system
//! installed versions, and the commit key is the protocol's record of it.
//! Lists need no commit key: their order is read off the lists themselves
//! (see [`crate::deps`]).

use crate::hash::{FastMap, FastSet, LocalMap};
use crate::history::{History, Key, Op, TxnId, VersionId};
use crate::report::{Anomaly, AnomalyKind, Sink};

/// A transaction's position in [`History::txns`]; the graph's node id.
pub(crate) type Node = u32;

/// [`WriteRec::next`] of a write that is not in any key's version order:
/// its writer aborted, or overwrote it later in the same transaction.
pub(crate) const NOT_INSTALLED: u32 = u32::MAX;
/// [`WriteRec::next`] of a key's last installed version.
pub(crate) const NO_NEXT: u32 = u32::MAX - 1;

/// One register write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteRec {
    pub(crate) version: VersionId,
    pub(crate) key: Key,
    pub(crate) writer: Node,
    /// The writer of the version installed right after this one, or
    /// [`NO_NEXT`], or [`NOT_INSTALLED`]. A committed writer's write is
    /// installed exactly when it is the writer's final write to `key`.
    pub(crate) next: u32,
}

/// What we know about one list append.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AppendInfo {
    pub(crate) appender: Node,
    /// Whether this is the appender's final append to the key.
    pub(crate) last: bool,
}

/// The register keys with installed versions, and who installed each
/// key's first version. (The rest of each key's version order lives in
/// [`WriteRec::next`] and [`Versions::ww`].)
#[derive(Debug, Default)]
pub(crate) struct RegisterOrder {
    /// Keys with at least one committed version, ascending.
    pub(crate) keys: Vec<Key>,
    /// `first[i]`: the writer of `keys[i]`'s first installed version.
    pub(crate) first: Vec<Node>,
}

impl RegisterOrder {
    /// The writer of `key`'s first installed version, if any.
    pub(crate) fn first_writer(&self, key: Key) -> Option<Node> {
        let i = self.keys.binary_search(&key).ok()?;
        Some(self.first[i])
    }

    /// Indices into `keys` of the keys in `[lo, hi)`.
    pub(crate) fn key_range(&self, lo: Key, hi: Option<Key>) -> std::ops::Range<usize> {
        let a = self.keys.partition_point(|&k| k < lo);
        let b = match hi {
            Some(hi) => self.keys.partition_point(|&k| k < hi),
            None => self.keys.len(),
        };
        a..b.max(a)
    }
}

/// Everything pass 1 learns.
#[derive(Debug, Default)]
pub(crate) struct Versions {
    /// Every register write, sorted by version.
    pub(crate) writes: Vec<WriteRec>,
    pub(crate) appends: FastMap<(Key, u64), AppendInfo>,
    pub(crate) registers: RegisterOrder,
    /// Register ww edges `(from, to, key)`: each installed version's writer
    /// to the next version's writer, ascending by `from` (which makes the
    /// graph's sort by source cheap).
    pub(crate) ww: Vec<(Node, Node, Key)>,
    /// `committed[node]`: whether that transaction committed.
    pub(crate) committed: Vec<bool>,
}

/// A committed final write, before version ordering.
#[derive(Debug, Clone, Copy)]
struct Installed {
    key: Key,
    commit_key: u64,
    writer: Node,
    /// Index into the (history-ordered) writes.
    write: u32,
}

impl Versions {
    /// Indexes every write and append of `history`, reporting malformed
    /// input (duplicate transaction ids, versions or elements; keys used
    /// both as register and list; equal commit keys on one key) to `sink`.
    pub(crate) fn build(history: &History, sink: &mut Sink) -> Versions {
        let ops: usize = history.txns.iter().map(|t| t.ops.len()).sum();
        let mut v = Versions {
            writes: Vec::with_capacity(ops / 2),
            appends: FastMap::default(),
            registers: RegisterOrder::default(),
            ww: Vec::new(),
            committed: history.txns.iter().map(|t| t.is_committed()).collect(),
        };
        // Keys used as lists; register uses are checked against it after
        // the loop, so register-only histories pay nothing.
        let mut list_keys: FastSet<Key> = FastSet::default();
        let mut installed: Vec<Installed> = Vec::with_capacity(ops / 2);
        let mut last_write: LocalMap<u32> = LocalMap::default();
        let mut last_append: LocalMap<u64> = LocalMap::default();

        for (node, t) in history.txns.iter().enumerate() {
            let node = node as Node;
            last_write.clear();
            last_append.clear();
            for op in &t.ops {
                match *op {
                    Op::Read { .. } | Op::Scan { .. } => {}
                    Op::ReadList { key, .. } => {
                        list_keys.insert(key);
                    }
                    Op::Write { key, version } => {
                        last_write.insert(key, v.writes.len() as u32);
                        v.writes.push(WriteRec {
                            version,
                            key,
                            writer: node,
                            next: NOT_INSTALLED,
                        });
                    }
                    Op::Append { key, elem } => {
                        list_keys.insert(key);
                        let info = AppendInfo {
                            appender: node,
                            last: true,
                        };
                        if v.appends.insert((key, elem), info).is_some() {
                            sink.report(AnomalyKind::InvalidHistory, || {
                                Anomaly::new(
                                    AnomalyKind::InvalidHistory,
                                    vec![t.id],
                                    format!(
                                        "element {elem} is appended to list {key} more than \
                                         once (T{} among the appenders)",
                                        t.id
                                    ),
                                )
                            });
                        }
                        if let Some(prev) = last_append.insert(key, elem) {
                            if let Some(p) = v.appends.get_mut(&(key, prev)) {
                                if p.appender == node {
                                    p.last = false;
                                }
                            }
                        }
                    }
                }
            }
            if t.is_committed() {
                last_write.for_each(|key, &write| {
                    installed.push(Installed {
                        key,
                        commit_key: t.commit_key,
                        writer: node,
                        write,
                    });
                });
            }
        }
        if !list_keys.is_empty() {
            check_key_kinds(history, &list_keys, sink);
        }
        check_unique_ids(history, sink);
        v.order_registers(history, installed, sink);
        v.writes.sort_unstable_by_key(|w| w.version);
        for pair in v.writes.windows(2) {
            if pair[0].version == pair[1].version {
                let (a, b) = (
                    history.txns[pair[0].writer as usize].id,
                    history.txns[pair[1].writer as usize].id,
                );
                let version = pair[0].version;
                sink.report(AnomalyKind::InvalidHistory, || {
                    Anomaly::new(
                        AnomalyKind::InvalidHistory,
                        vec![a, b],
                        format!("version v{version} is written more than once (by T{a} and T{b})"),
                    )
                });
            }
        }
        v
    }

    /// Sorts the installed versions into each key's version order:
    /// by key, then commit key, then position in the history.
    fn order_registers(
        &mut self,
        history: &History,
        mut installed: Vec<Installed>,
        sink: &mut Sink,
    ) {
        installed.sort_unstable_by_key(|i| (i.key, i.commit_key, i.writer));
        let r = &mut self.registers;
        // (index into writes, next writer), applied below in index order:
        // streaming beats a random store per version.
        let mut next: Vec<(u32, u32)> = Vec::with_capacity(installed.len());
        for (pos, inst) in installed.iter().enumerate() {
            if r.keys.last() != Some(&inst.key) {
                r.keys.push(inst.key);
                r.first.push(inst.writer);
            } else {
                let prev = installed[pos - 1];
                if prev.commit_key == inst.commit_key {
                    let (a, b) = (
                        history.txns[prev.writer as usize].id,
                        history.txns[inst.writer as usize].id,
                    );
                    let (key, ck) = (inst.key, inst.commit_key);
                    sink.report(AnomalyKind::AmbiguousVersionOrder, || {
                        Anomaly::new(
                            AnomalyKind::AmbiguousVersionOrder,
                            vec![a, b],
                            format!(
                                "T{a} and T{b} both wrote key {key} with commit_key {ck}; \
                                 ordered by position in the history"
                            ),
                        )
                    });
                }
            }
            let after = match installed.get(pos + 1) {
                Some(n) if n.key == inst.key => n.writer,
                _ => NO_NEXT,
            };
            next.push((inst.write, after));
        }
        drop(installed);
        next.sort_unstable_by_key(|&(w, _)| w);
        self.ww.reserve_exact(next.len());
        for (w, after) in next {
            let rec = &mut self.writes[w as usize];
            rec.next = after;
            if after != NO_NEXT {
                self.ww.push((rec.writer, after, rec.key));
            }
        }
    }
}

/// Reports every key of `list_keys` that is also used as a register.
fn check_key_kinds(history: &History, list_keys: &FastSet<Key>, sink: &mut Sink) {
    let mut reported: FastSet<Key> = FastSet::default();
    for t in &history.txns {
        for op in &t.ops {
            let rows: &[(Key, VersionId)] = match op {
                Op::Scan { rows, .. } => rows,
                _ => &[],
            };
            let keys = match *op {
                Op::Read { key, .. } | Op::Write { key, .. } => Some(key),
                _ => None,
            };
            for key in keys.into_iter().chain(rows.iter().map(|&(k, _)| k)) {
                if list_keys.contains(&key) && reported.insert(key) {
                    sink.report(AnomalyKind::InvalidHistory, || {
                        Anomaly::new(
                            AnomalyKind::InvalidHistory,
                            vec![t.id],
                            format!(
                                "key {key} is used both as a register (by T{} among others) \
                                 and as a list",
                                t.id
                            ),
                        )
                    });
                }
            }
        }
    }
}

/// Reports every transaction id used more than once.
fn check_unique_ids(history: &History, sink: &mut Sink) {
    let mut ids: Vec<TxnId> = history.txns.iter().map(|t| t.id).collect();
    ids.sort_unstable();
    for pair in ids.windows(2) {
        if pair[0] == pair[1] {
            let id = pair[0];
            sink.report(AnomalyKind::InvalidHistory, || {
                Anomaly::new(
                    AnomalyKind::InvalidHistory,
                    vec![id],
                    format!("transaction id T{id} appears more than once"),
                )
            });
        }
    }
}
