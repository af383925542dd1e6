//! The entry point: [`check`] runs the passes in order.

use crate::cycles;
use crate::deps;
use crate::graph::Graph;
use crate::history::History;
use crate::report::{Anomaly, AnomalyKind, Level, Report, Sink};
use crate::versions::Versions;

/// Anomalies kept per kind in [`Report::anomalies`]; the rest are only
/// counted in [`Report::counts`], so a badly broken history cannot exhaust
/// memory. Cycle anomalies keep the smallest cycles.
pub const MAX_STORED_PER_KIND: usize = 100;

/// Most transactions one history may hold: node ids are `u32`, and the
/// graph packs an edge's kind into the top two bits of its target.
pub const MAX_TXNS: usize = 1 << 30;

/// Checks `history` against `level`.
///
/// Never panics on malformed input: duplicate ids, unknown versions, keys
/// used both as register and list and the like are reported as anomalies
/// ([`AnomalyKind::InvalidHistory`], [`AnomalyKind::Garbage`], …), and the
/// check goes on with what can still be inferred. A history with more than
/// [`MAX_TXNS`] transactions is reported as invalid without being checked.
///
/// ```
/// use granary_check::{check, AnomalyKind, History, Level, Op, Txn};
///
/// // Lost update: both read the initial version, both overwrite it.
/// let mut h = History::new();
/// h.push(Txn::committed(0, 0, vec![Op::Write { key: 1, version: 10 }]));
/// h.push(Txn::committed(1, 1, vec![
///     Op::Read { key: 1, version: Some(10) },
///     Op::Write { key: 1, version: 11 },
/// ]));
/// h.push(Txn::committed(2, 2, vec![
///     Op::Read { key: 1, version: Some(10) },
///     Op::Write { key: 1, version: 12 },
/// ]));
/// let report = check(&h, Level::Serializable);
/// assert!(report.has(AnomalyKind::GSingle));
/// println!("{}", report.explain(&h));
/// ```
pub fn check(history: &History, level: Level) -> Report {
    let mut sink = Sink::new(MAX_STORED_PER_KIND);
    let transactions = history.txns.iter().filter(|t| t.is_committed()).count();
    let aborted = history.txns.len() - transactions;
    let mut sccs = 0;
    if history.txns.len() > MAX_TXNS {
        sink.report(AnomalyKind::InvalidHistory, || {
            Anomaly::new(
                AnomalyKind::InvalidHistory,
                Vec::new(),
                format!(
                    "{} transactions; at most {MAX_TXNS} can be checked",
                    history.txns.len()
                ),
            )
        });
    } else {
        let versions = Versions::build(history, &mut sink);
        let raw = deps::collect(history, &versions, &mut sink);
        drop(versions);
        let graph = Graph::build(history.txns.len(), raw);
        sccs = cycles::report_cycles(&graph, history, level, &mut sink);
    }
    let (anomalies, counts) = sink.finish();
    Report {
        transactions,
        aborted,
        level,
        anomalies,
        counts,
        sccs,
    }
}
