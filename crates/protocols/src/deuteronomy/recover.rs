//! Recovery (deuteronomy-cidr15 §4.3, §6): replay the redo log from the
//! data component's last checkpoint (the RSSP), applying the operations
//! of committed transactions, in commit order, as blind writes.
//!
//! Below the RSSP every operation is applied stably at the DC or belongs
//! to a transaction that aborted, so the scan starts there. A
//! transaction's operations come before its commit record; one with an
//! abort record, or with no outcome at all (it was running at the crash,
//! so it was never acknowledged), is dropped. Blind writes in commit
//! order leave the DC as the TC left it, however often they are replayed.

use std::collections::HashMap;
use std::path::Path;

use granary_api::Error;

use super::dc::{DataComponent, Op};
use super::log::Lsn;
use super::logrec::{kind_and_ts, VersionHeader, ABORT, COMMIT, HEADER, OUTCOME, VERSION};
use granary_storage::segments;

/// What recovery found and did ([`Tc::open`](super::tc::Tc::open)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The redo scan start point: the DC's last checkpoint.
    pub from_lsn: Lsn,
    /// Log buffers read, and their bytes.
    pub buffers: u64,
    pub bytes: u64,
    /// Committed transactions, and their operations, applied to the DC.
    pub transactions: u64,
    pub operations: u64,
    /// Transactions in the log without a commit record (never
    /// acknowledged): discarded, as are aborted ones.
    pub discarded: u64,
    /// A torn last write was cut off the log (never acknowledged).
    pub torn_tail: bool,
}

/// An operation copied out of a log buffer (the buffer is gone by the
/// time its commit record arrives, maybe).
struct Owned {
    table: u32,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    lsn: Lsn,
}

/// Operations per DC batch.
const BATCH: usize = 4096;

/// Replay the log in `dir` into `dc`: what it did, and the sequence
/// number the new log starts at.
///
/// # Errors
/// A damaged or incomplete log, or the DC failed.
/// With `uncommitted` (the test-only mutant, NOT correct), every
/// operation is applied, whatever its transaction's outcome.
pub(super) fn replay(
    dir: &Path,
    dc: &dyn DataComponent,
    uncommitted: bool,
) -> Result<(Recovery, u64), Error> {
    let rssp = dc.checkpointed();
    let mut rec = Recovery {
        from_lsn: rssp,
        ..Recovery::default()
    };
    let mut undecided: HashMap<u64, Vec<Owned>> = HashMap::new();
    let mut ready: Vec<Owned> = Vec::new();
    let flush = |ready: &mut Vec<Owned>| -> Result<(), Error> {
        let ops: Vec<Op<'_>> = ready
            .iter()
            .map(|o| Op {
                table: o.table,
                key: &o.key,
                value: o.value.as_deref(),
                lsn: o.lsn,
            })
            .collect();
        dc.apply(&ops)?;
        ready.clear();
        Ok(())
    };
    let replayed = segments::replay(dir, rssp >> 32, |seq, bytes| {
        rec.buffers += 1;
        rec.bytes += bytes.len() as u64;
        let mut at = 0usize;
        while at < bytes.len() {
            let lsn = (seq << 32) | at as u64;
            let corrupt = |what: &str| Error::Corrupt {
                path: dir.to_path_buf(),
                offset: lsn,
                what: format!("log record at LSN {lsn:#x}: {what}"),
            };
            let Some(head) = bytes.get(at..at + OUTCOME) else {
                return Err(corrupt("cut short"));
            };
            let (kind, ts) = kind_and_ts(head);
            match kind {
                VERSION => {
                    let h = VersionHeader::parse(
                        bytes
                            .get(at..at + HEADER)
                            .ok_or_else(|| corrupt("cut short"))?,
                    );
                    let klen = h.klen as usize;
                    let body = bytes
                        .get(at + HEADER..at + h.record_len())
                        .ok_or_else(|| corrupt("cut short"))?;
                    // Below the RSSP: applied, or aborted.
                    if lsn >= rssp {
                        let op = Owned {
                            table: h.table,
                            key: body[..klen].to_vec(),
                            value: (!h.deleted()).then(|| body[klen..].to_vec()),
                            lsn,
                        };
                        match uncommitted {
                            true => ready.push(op),
                            false => undecided.entry(ts).or_default().push(op),
                        }
                    }
                    at += h.record_len();
                }
                COMMIT => {
                    if let Some(ops) = undecided.remove(&ts) {
                        rec.transactions += 1;
                        rec.operations += ops.len() as u64;
                        ready.extend(ops);
                        if ready.len() >= BATCH {
                            flush(&mut ready)?;
                        }
                    }
                    at += OUTCOME;
                }
                ABORT => {
                    undecided.remove(&ts);
                    at += OUTCOME;
                }
                k => return Err(corrupt(&format!("unknown kind {k}"))),
            }
        }
        Ok(())
    })?;
    flush(&mut ready)?;
    rec.discarded = undecided.len() as u64;
    if let Some((path, len)) = replayed.torn {
        // Cut the torn write off, so the segment can be followed by new
        // ones (a torn image anywhere but the very end is damage).
        segments::cut_torn(&path, len)?;
        rec.torn_tail = true;
    }
    // Everything replayed is in the DC: make it stable, so the next
    // recovery starts after it (a DC that does not persist replays all).
    dc.checkpoint(replayed.next << 32)?;
    Ok((rec, replayed.next))
}
