//! The TC Proxy (§4): it takes the log's sealed buffers in sequence and
//! applies the committed operations in them to the data component, then
//! recycles the buffers.
//!
//! One pass per buffer does §4.3.1's two jobs. Outcomes: a commit record
//! moves its transaction's operations (kept as LSNs into the log, not
//! copied) to the queue of committed transactions, in commit order; an
//! abort record discards them. Operations of transactions with no outcome
//! yet wait. The queue's head is applied to the DC, in batches, once its
//! timestamp is below the OAT (see `tc`'s notes): in commit order, which
//! for any one key is the order of its versions.
//!
//! O-LSN (§4.4) is the least LSN of an operation not yet applied or
//! discarded (the scan's end if none). A buffer wholly below it holds
//! nothing the TC still needs from it, so it is recycled.
//! **Deviation:** §4.3.1 copies undecided operations to a side buffer so
//! the log buffer can be reused at once; here the buffer itself waits
//! (short transactions decide within a buffer or two, and nothing is
//! copied).
//!
//! The T-LSN (§4.4) is where the outcome scan has reached; with the DC
//! local and the operations held back to the OAT, O-LSN alone decides
//! what garbage collection may drop (`record::Record::trim`).
//!
//! Group commit: when no buffer has been sealed for
//! [`Config::seal_after_us`](super::tc::Config::seal_after_us) and the
//! active one holds data, the TC Proxy seals it, so a quiet log still
//! drains.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::dc::Op;
use super::log::Lsn;
use super::tc::{Shared, ABORT, COMMIT, DELETED, HEADER, OUTCOME, VERSION};

/// Operations per DC batch.
const BATCH: usize = 1024;

/// What the TC Proxy keeps between buffers.
#[derive(Default)]
struct State {
    /// The next buffer to scan.
    next: u64,
    /// Operations (their LSNs) of transactions with no outcome yet.
    undecided: HashMap<u64, Vec<Lsn>>,
    /// Committed transactions waiting for the OAT, in commit order.
    committed: VecDeque<(u64, Vec<Lsn>)>,
    /// The first LSN of each transaction not yet applied or discarded.
    firsts: BTreeMap<Lsn, u64>,
    /// Scanned buffers not yet recycled.
    held: VecDeque<u64>,
}

/// The TC Proxy's loop, until the TC stops or its DC fails.
pub(super) fn run(s: &Shared) {
    let mut st = State::default();
    let seal_after = Duration::from_micros(s.config.seal_after_us);
    let mut last_seal = Instant::now();
    let mut ops: Vec<Op<'_>> = Vec::with_capacity(BATCH);
    while !s.stop.load(Ordering::Acquire) {
        let mut progressed = false;
        while let Some(buf) = s.log.buffer(st.next) {
            let Some(len) = buf.ready() else { break };
            let seq = st.next;
            // SAFETY: sealed with no users: its first `len` bytes are
            // final; we alone recycle it, after this.
            let bytes = unsafe { s.log.slice(seq << 32, len) }.expect("installed");
            scan(&mut st, seq, bytes);
            st.held.push_back(st.next);
            st.next += 1;
            progressed = true;
            last_seal = Instant::now();
        }
        if !progressed && last_seal.elapsed() >= seal_after {
            // Group commit: let a quiet log drain. Past the budget only if
            // the log is full, when the outcomes that would drain it may
            // be in the active buffer.
            let sealed = s
                .log
                .seal_active(false)
                .or_else(|_| s.log.seal_active(true));
            if sealed.is_err() {
                s.fail("the recovery log has no free slot".into());
                return;
            }
            last_seal = Instant::now();
        }
        if let Err(e) = apply(s, &mut st, &mut ops) {
            s.fail(format!("the data component failed: {e}"));
            return;
        }
        let o_lsn = st
            .firsts
            .first_key_value()
            .map_or(st.next << 32, |(&l, _)| l);
        s.o_lsn.store(o_lsn, Ordering::Release);
        let g = crossbeam_epoch::pin();
        while let Some(&seq) = st.held.front() {
            if (seq + 1) << 32 > o_lsn {
                break;
            }
            s.log.recycle(seq, &g);
            s.metrics.recycled.fetch_add(1, Ordering::Relaxed);
            st.held.pop_front();
        }
        drop(g);
        let versions = s.versions.load(Ordering::Relaxed).max(0) as usize;
        s.over_soft
            .store(versions > s.config.soft_versions, Ordering::Relaxed);
        s.over_hard
            .store(versions > s.config.hard_versions, Ordering::Relaxed);
        if !progressed {
            std::thread::park_timeout(Duration::from_micros(50));
        }
    }
}

/// One buffer's records, read for outcomes and operations.
fn scan(st: &mut State, seq: u64, bytes: &[u8]) {
    let mut at = 0usize;
    while at < bytes.len() {
        let lsn = (seq << 32) | at as u64;
        let kind = bytes[at];
        let ts = u64::from_le_bytes(bytes[at + 1..at + 9].try_into().expect("8 bytes"));
        match kind {
            VERSION => {
                let h = &bytes[at..at + HEADER];
                let klen = u32::from_le_bytes(h[13..17].try_into().expect("4 bytes")) as usize;
                let vlen = u32::from_le_bytes(h[17..21].try_into().expect("4 bytes"));
                let vlen = if vlen == DELETED { 0 } else { vlen as usize };
                let ops = st.undecided.entry(ts).or_default();
                if ops.is_empty() {
                    st.firsts.insert(lsn, ts);
                }
                ops.push(lsn);
                at += HEADER + klen + vlen;
            }
            COMMIT | ABORT => {
                if let Some(ops) = st.undecided.remove(&ts) {
                    if kind == COMMIT {
                        st.committed.push_back((ts, ops));
                    } else {
                        st.firsts.remove(&ops[0]);
                    }
                }
                at += OUTCOME;
            }
            k => unreachable!("log record of kind {k} at {lsn:#x}"),
        }
    }
}

/// Apply the committed transactions below the OAT, in commit order.
fn apply<'s>(
    s: &'s Shared,
    st: &mut State,
    ops: &mut Vec<Op<'s>>,
) -> Result<(), granary_api::Error> {
    if st.committed.is_empty() {
        return Ok(());
    }
    let oat = match s.apply_at_once {
        true => u64::MAX,
        false => s.oat(),
    };
    let g = crossbeam_epoch::pin();
    let mut done = 0;
    while let Some((ts, lsns)) = st.committed.get(done) {
        if *ts >= oat {
            break;
        }
        for &lsn in lsns {
            ops.push(op(s, lsn));
        }
        done += 1;
        if ops.len() >= BATCH {
            flush(s, ops)?;
        }
    }
    flush(s, ops)?;
    for (_, lsns) in st.committed.drain(..done) {
        st.firsts.remove(&lsns[0]);
    }
    drop(g);
    Ok(())
}

fn flush<'s>(s: &'s Shared, ops: &mut Vec<Op<'s>>) -> Result<(), granary_api::Error> {
    if ops.is_empty() {
        return Ok(());
    }
    s.dc.apply(ops)?;
    s.metrics
        .applied
        .fetch_add(ops.len() as u64, Ordering::Relaxed);
    s.metrics.batches.fetch_add(1, Ordering::Relaxed);
    ops.clear();
    Ok(())
}

/// The operation of the version record at `lsn`.
fn op(s: &Shared, lsn: Lsn) -> Op<'_> {
    // SAFETY: a scanned record, in a buffer the TC Proxy has not recycled
    // (it is not below O-LSN while this operation waits); only the TC
    // Proxy recycles, so the slice outlives this batch.
    let h = unsafe { s.log.slice(lsn, HEADER as u32) }.expect("held buffer");
    let table = u32::from_le_bytes(h[9..13].try_into().expect("4 bytes"));
    let klen = u32::from_le_bytes(h[13..17].try_into().expect("4 bytes"));
    let vlen = u32::from_le_bytes(h[17..21].try_into().expect("4 bytes"));
    let at = lsn + HEADER as u64;
    // SAFETY: as above.
    let key = unsafe { s.log.slice(at, klen) }.expect("held buffer");
    let value = (vlen != DELETED).then(|| {
        // SAFETY: as above.
        unsafe { s.log.slice(at + u64::from(klen), vlen) }.expect("held buffer")
    });
    Op {
        table,
        key,
        value,
        lsn,
    }
}
