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
//! Two threads share the work. The log flusher seals a quiet active
//! buffer (group commit: when none has been sealed for
//! [`Config::seal_after_us`](super::tc::Config::seal_after_us)), writes
//! sealed buffers in order to a durable TC's log file, syncs it, and only
//! then publishes them as stable: their commit records are acknowledged
//! (§2.3.1), and the TC Proxy may apply them (§4.2: nothing reaches the
//! DC before it is stable in the log). The TC Proxy applies, recycles,
//! and checkpoints (§6) — a slow DC never holds up acknowledgements, only
//! the log's space (writers then shed load).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use std::sync::Mutex;

use super::dc::Op;
use super::log::Lsn;
use super::logrec::{kind_and_ts, VersionHeader, ABORT, COMMIT, HEADER, OUTCOME, VERSION};
use super::shared::{Flaw, Shared};
use crate::sync::Ordering;
use granary_storage::segments::SegmentLog;

/// The most operations per DC batch (a disk DC's batch is a write
/// transaction: the larger, the cheaper per operation).
const BATCH: usize = 16 << 10;

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

/// The log flusher's loop, until the TC stops or a write fails (see the
/// module's notes).
///
/// `start` is the log's first buffer: not whatever is active when this
/// thread gets going (runners may have filled buffers by then).
pub(super) fn flush(s: &Shared, start: u64, file: Option<&Mutex<SegmentLog>>) {
    let mut f = Flusher::new(s, start);
    // Acquire: pairs with the TC's Release of `stop` (`Tc::drop`).
    while !s.stop.load(Ordering::Acquire) {
        match f.step(s, file) {
            Ok(true) => {}
            Ok(false) => std::thread::park_timeout(Duration::from_micros(200)),
            Err(()) => return,
        }
    }
}

/// The flusher's state, and one step of its work.
pub(super) struct Flusher {
    next: u64,
    seal_after: Duration,
    last_seal: Instant,
    sealed: Vec<(u64, u32)>,
}

impl Flusher {
    pub(super) fn new(s: &Shared, start: u64) -> Flusher {
        Flusher {
            next: start,
            seal_after: Duration::from_micros(s.config.seal_after_us),
            last_seal: Instant::now(),
            sealed: Vec::new(),
        }
    }

    /// Whether to seal the quiet active buffer now. Each seal uses up a
    /// whole buffer, and a running transaction holds back every buffer
    /// from its first record on: sealing nearly empty buffers every
    /// millisecond let one transaction longer than the log's budget in
    /// milliseconds fill the log (and abort as overloaded, again and
    /// again). So a buffer with little in it is sealed every
    /// `seal_after` only while it is worth it — for a durable log (commit
    /// latency) whose buffers are not yet half in use — and otherwise
    /// every 64 × `seal_after`.
    fn due(&self, s: &Shared, durable: bool) -> bool {
        let quiet = self.last_seal.elapsed();
        if quiet < self.seal_after {
            return false;
        }
        let cheap = s.log.active_fill() >= 1.0 / 64.0
            || (durable && s.log.in_use() * 2 < s.config.log_buffers);
        cheap || quiet >= self.seal_after * 64
    }

    /// Seal a quiet active buffer, or write and publish the sealed ones:
    /// whether any was published (`Err` once the TC has failed).
    pub(super) fn step(
        &mut self,
        s: &Shared,
        file: Option<&Mutex<SegmentLog>>,
    ) -> Result<bool, ()> {
        // Pinned: a slot looked at may hold a buffer being recycled.
        let _g = crossbeam_epoch::pin();
        self.sealed.clear();
        let mut seq = self.next;
        while let Some(len) = s.log.buffer(seq).and_then(|b| b.ready()) {
            self.sealed.push((seq, len));
            seq += 1;
        }
        if self.sealed.is_empty() {
            if self.due(s, file.is_some()) {
                // Group commit: let a quiet log drain.
                s.log.seal_active();
                self.last_seal = Instant::now();
            }
            return Ok(false);
        }
        if let Some(f) = file {
            let mut f = f.lock().expect("log file");
            let written = self.sealed.iter().try_for_each(|&(seq, len)| {
                // SAFETY: sealed with no users: its first `len` bytes are
                // final; it is recycled only once the TC Proxy has passed
                // it, after `durable_lsn` does.
                let bytes = unsafe { s.log.slice(seq << 32, len) }.expect("installed");
                f.write(seq, bytes)
            });
            if let Err(e) = written.and_then(|()| f.sync()) {
                s.fail(format!("the recovery log could not be written: {e}"));
                return Err(());
            }
            let bytes: u64 = self.sealed.iter().map(|&(_, len)| u64::from(len)).sum();
            s.metrics.logged.fetch_add(bytes, Ordering::Relaxed);
        }
        self.next = seq;
        self.last_seal = Instant::now();
        // Release: everything below it is stable in the log file: a waiter that
        // sees it (Acquire) may acknowledge.
        s.durable_lsn.store(self.next << 32, Ordering::Release);
        Ok(true)
    }
}

/// The TC Proxy's loop, until the TC stops or the DC fails: it takes the
/// stable buffers in order, applies what it can, publishes O-LSN,
/// recycles the buffers below it, and checkpoints a durable TC (§6).
///
/// `start` is the log's first buffer (as for [`flush`]). With no log
/// file (an in-memory TC) there is nothing to wait for in writing, and
/// this thread does the flusher's steps itself (one thread fewer on the
/// cores).
pub(super) fn run(s: &Shared, start: u64, file: Option<&Mutex<SegmentLog>>) {
    let mut st = State {
        next: start,
        ..State::default()
    };
    let mut flusher = file.is_none().then(|| Flusher::new(s, start));
    let checkpoint_every = Duration::from_millis(s.config.checkpoint_ms);
    let mut last_checkpoint = Instant::now();
    let mut ops: Vec<Op<'_>> = Vec::with_capacity(BATCH);
    // Acquire: pairs with the TC's Release of `stop` (`Tc::drop`).
    while !s.stop.load(Ordering::Acquire) {
        if let Some(f) = &mut flusher {
            if f.step(s, None).is_err() {
                return;
            }
        }
        // Acquire: pairs with the flusher's Release of the durable LSN: what is
        // below it is stable.
        let stable = s.durable_lsn.load(Ordering::Acquire) >> 32;
        let progressed = st.next < stable;
        while st.next < stable {
            let seq = st.next;
            // The flusher saw it ready: `ready` itself may be hidden for a
            // moment by a late reservation passing through USERS, but its
            // length stays (the flusher's Acquire load of the buffer's
            // word, then ours of `durable_lsn`, order it before us).
            let len = s
                .log
                .buffer(seq)
                .expect("a stable buffer is held until we recycle it")
                .sealed_len();
            // SAFETY: its first `len` bytes are final; we alone recycle
            // it, after this.
            let bytes = unsafe { s.log.slice(seq << 32, len) }.expect("installed");
            scan(&mut st, seq, bytes);
            st.held.push_back(seq);
            st.next = seq + 1;
        }
        if let Err(e) = apply(s, &mut st, &mut ops) {
            s.fail(format!("the data component failed: {e}"));
            return;
        }
        let o_lsn = st
            .firsts
            .first_key_value()
            .map_or(st.next << 32, |(&l, _)| l);
        // Release: O-LSN (§4.4): every operation below it is applied at the DC,
        // for the transactions that load it with Acquire and trim below it.
        s.o_lsn.store(o_lsn, Ordering::Release);
        if let (Some(f), true) = (file, last_checkpoint.elapsed() >= checkpoint_every) {
            // §6: the DC makes everything below O-LSN stable, and the log
            // below it is no longer needed (unless the DC forgets it all
            // at a restart: then recovery replays the whole log).
            let done =
                s.dc.checkpoint(o_lsn)
                    .and_then(|()| match s.dc.persistent() {
                        true => f.lock().expect("log file").truncate_below(o_lsn >> 32),
                        false => Ok(()),
                    });
            if let Err(e) = done {
                s.fail(format!("a checkpoint failed: {e}"));
                return;
            }
            last_checkpoint = Instant::now();
        }
        let g = crossbeam_epoch::pin();
        // §3.1: flushed buffers stay as the version cache (readers find
        // recent versions in place) while the log has room: up to half
        // the budget, less a few for the active and unapplied ones, and
        // none once three quarters of it are in use.
        let budget = s.config.log_buffers;
        let keep = match s.log.in_use() * 4 < budget * 3 {
            true => budget.saturating_sub(4) / 2,
            false => 0,
        };
        while let Some(&seq) = st.held.front() {
            // A sealed buffer may still be the active one (its sealer
            // found the log full): it stays until the log moves past it.
            if (seq + 1) << 32 > o_lsn || seq >= s.log.active() || st.held.len() <= keep {
                break;
            }
            s.log.recycle(seq, &g);
            s.metrics.recycled.fetch_add(1, Ordering::Relaxed);
            st.held.pop_front();
        }
        drop(g);
        // §6.5: the watermarks count MVCC entries, items and versions.
        let (items, versions) = s.entries();
        let entries = (items + versions).max(0) as usize;
        s.over_soft
            .store(entries > s.config.soft_versions, Ordering::Relaxed);
        s.over_hard
            .store(entries > s.config.hard_versions, Ordering::Relaxed);
        // For the hard watermark's evictions.
        // Release: the OAT just computed, for the hard watermark's sweeps,
        // which load it with Acquire.
        s.oat_seen.store(s.oat(), Ordering::Release);
        if !progressed {
            std::thread::park_timeout(Duration::from_micros(200));
        }
    }
}

/// One buffer's records, read for outcomes and operations.
fn scan(st: &mut State, seq: u64, bytes: &[u8]) {
    let mut at = 0usize;
    while at < bytes.len() {
        let lsn = (seq << 32) | at as u64;
        let (kind, ts) = kind_and_ts(&bytes[at..]);
        match kind {
            VERSION => {
                let h = VersionHeader::parse(&bytes[at..at + HEADER]);
                let ops = st.undecided.entry(ts).or_default();
                if ops.is_empty() {
                    st.firsts.insert(lsn, ts);
                }
                ops.push(lsn);
                at += h.record_len();
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
    let oat = match s.flaw {
        Flaw::ApplyAtOnce => u64::MAX,
        _ => s.oat(),
    };
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
            apply_batch(s, ops)?;
        }
    }
    apply_batch(s, ops)?;
    for (_, lsns) in st.committed.drain(..done) {
        st.firsts.remove(&lsns[0]);
    }
    Ok(())
}

fn apply_batch<'s>(s: &'s Shared, ops: &mut Vec<Op<'s>>) -> Result<(), granary_api::Error> {
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
    let h = VersionHeader::parse(unsafe { s.log.slice(lsn, HEADER as u32) }.expect("held buffer"));
    let at = lsn + HEADER as u64;
    // SAFETY: as above.
    let key = unsafe { s.log.slice(at, h.klen) }.expect("held buffer");
    let value = (!h.deleted()).then(|| {
        // SAFETY: as above.
        unsafe { s.log.slice(at + u64::from(h.klen), h.vlen) }.expect("held buffer")
    });
    Op {
        table: h.table,
        key,
        value,
        lsn,
    }
}
