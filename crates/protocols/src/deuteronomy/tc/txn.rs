//! A transaction at its timestamp: reads through the MVCC table, the
//! log's buffers, the read cache and the DC; versions written into the
//! log; commit or abort, and its outcome record.

use std::cell::{Cell, UnsafeCell};
use std::ops::Bound;

use crate::deuteronomy::log::{Log, Lsn};
use crate::deuteronomy::logrec::{self, VersionHeader, HEADER};
use crate::deuteronomy::record::{Seen, Version, ABORTED, COMMITTED};
use crate::deuteronomy::shared::{Flaw, Shared, TxSlot, IDLE, SWEEP};
use crate::deuteronomy::table::Item;
use crate::reclaim::{retire_all, Pin};
use crate::sync::{backoff, AtomicI64, Ordering};
use granary_api::limits::{check_bounds, check_key, check_value};
use granary_api::{AbortReason, Error, TableId, Tx, TxError};

use super::Epoch;

/// A runner's buffers, lent to each transaction and reused.
#[derive(Default)]
pub(super) struct Parts {
    /// The running transaction's versions.
    pub(super) writes: Vec<*const Version>,
    /// Scratch for a log record.
    pub(super) record: Vec<u8>,
    pub(super) arena: Arena,
    /// Versions trimmed by the running transaction, freed at its end.
    pub(super) trimmed: Vec<*mut Version>,
}

/// Values read from the DC, kept for the length of a transaction (the
/// body holds slices of them). Buffers are reused across transactions.
#[derive(Default)]
pub(super) struct Arena {
    bufs: UnsafeCell<Vec<Vec<u8>>>,
    used: Cell<usize>,
}

impl Arena {
    fn clear(&mut self) {
        self.used.set(0);
    }

    /// Fill a fresh buffer with `f` (true: a value) and keep it.
    fn keep<E>(&self, f: impl FnOnce(&mut Vec<u8>) -> Result<bool, E>) -> Result<Option<&[u8]>, E> {
        let i = self.used.get();
        // SAFETY: one thread uses an arena; buffers before `i` are never
        // touched again until `clear` (which takes `&mut self`, so no
        // slice is alive), so the slices handed out stay valid: they
        // point into those buffers' heap blocks, which a push to the
        // outer vector does not move.
        let bufs = unsafe { &mut *self.bufs.get() };
        if i == bufs.len() {
            bufs.push(Vec::new());
        }
        let b = &mut bufs[i];
        if !f(b)? {
            return Ok(None);
        }
        self.used.set(i + 1);
        // SAFETY: as above.
        Ok(Some(unsafe {
            std::slice::from_raw_parts(b.as_ptr(), b.len())
        }))
    }
}

/// A transaction at its timestamp.
pub struct Txn<'a> {
    pub(super) s: &'a Shared,
    /// Its runner's slot in the transaction table.
    slot: &'a TxSlot,
    ts: u64,
    writes: &'a mut Vec<*const Version>,
    record: &'a mut Vec<u8>,
    arena: &'a Arena,
    trimmed: &'a mut Vec<*mut Version>,
    /// O-LSN when the transaction began: versions below it are applied.
    o_lsn: u64,
    /// Trim the records it touches (past the soft watermark).
    trim: bool,
    /// It appended version records (so it owes an outcome record).
    logged: bool,
    /// The newest commit record among the versions it read from the log
    /// (§2.3.1; what it read from the DC is durable).
    read_commit: Cell<u64>,
    /// Its reads served from the log, the read cache and the DC.
    reads: Cell<[u64; 3]>,
    /// Record items it made, and evicted.
    made: Cell<i64>,
    evicted: i64,
    /// An interactive session's: it never waits on another transaction
    /// (a read that would wait for an older writer's outcome aborts).
    session: bool,
    /// Held for the whole transaction.
    g: crossbeam_epoch::Guard,
}

/// Why a read found no version to read.
pub(super) enum Miss {
    /// The record item was evicted: look it up again.
    Gone,
    /// A session would wait for an older writer's outcome.
    Blocked,
}

impl From<Miss> for TxError {
    fn from(_: Miss) -> TxError {
        TxError::Conflict(AbortReason::CommitDependency)
    }
}

/// Free a trimmed version.
///
/// # Safety
/// `p` is an unlinked version, past its grace period, freed once.
unsafe fn free_version(p: usize) {
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(p as *mut Version) });
}

impl<'a> Txn<'a> {
    /// The item of `key`, made if it has none (a read of an absent key
    /// must still hold off older writers of it).
    fn item(&mut self, t: TableId, key: &[u8]) -> Result<&'a Item, TxError> {
        check_key(key)?;
        let s: &'a Shared = self.s;
        let table = s.tables.get(t)?;
        let item = s.mvcc.find_or_insert_with(t, key, &mut Epoch, |item| {
            // A new item: into the table's index, then held off from
            // writers older than the table's latest scan (see the
            // module's notes). An evicted item of this key left the
            // index before it left the hash table, so the key is free.
            let g = crossbeam_epoch::pin();
            let _ = table.index.insert(key, item as *const Item, &mut Pin(&g));
            self.made.set(self.made.get() + 1);
            // AcqRel: an RMW on the table's scan timestamp, ordered with a
            // scan's (module doc): we see a scan that raised it first, or the
            // scan sees our item in the index.
            item.record
                .hold_reads_below(table.scan_ts.fetch_add(0, Ordering::AcqRel));
        });
        if self.trim {
            // §6.5's soft watermark: versions below one that all see.
            self.trim_item(item, true);
        }
        Ok(item)
    }

    /// Garbage-collect `item`'s versions that the DC holds (§2.4): those
    /// below the newest of them, and it too unless `keep_newest`.
    fn trim_item(&mut self, item: &Item, keep_newest: bool) {
        let o_lsn = self.o_lsn;
        // Acquire: as every payload load: pairs with a second write's Release
        // of it.
        item.record.trim(
            |v| v.payload.load(Ordering::Acquire) < o_lsn,
            keep_newest,
            self.trimmed,
        );
    }

    /// The version of `item` visible at our timestamp, waiting for an
    /// older creator still running (a session does not wait: it aborts).
    pub(super) fn visible<'i>(&self, item: &'i Item) -> Result<Option<&'i Version>, Miss> {
        let mut spins = 0;
        loop {
            match item.record.read(self.ts) {
                Seen::Nothing => return Ok(None),
                Seen::Version(v) => return Ok(Some(v)),
                Seen::Pending(_) if self.session => return Err(Miss::Blocked),
                // Waits go from younger to older only: no cycle.
                Seen::Pending(_) => backoff(&mut spins),
                Seen::Gone => return Err(Miss::Gone),
            }
        }
    }

    /// The value of `item` as version `v` has it (`None`: nothing in the
    /// MVCC table at our timestamp), `None` for a deletion or an absent
    /// key: from the log if `v`'s buffer is still in memory, else from
    /// the DC (see the module's notes).
    pub(super) fn value(
        &self,
        item: &Item,
        v: Option<&Version>,
    ) -> Result<Option<&'a [u8]>, TxError> {
        let s: &'a Shared = self.s;
        let mut lsn = None;
        if let Some(v) = v {
            // Acquire: pairs with a second write's Release of the payload: the
            // bytes at the LSN are the creator's.
            let at = v.payload.load(Ordering::Acquire);
            if let Some(found) = from_log(&s.log, at) {
                if v.creator != self.ts {
                    // §2.3.1: acknowledged once what it read is durable.
                    // Acquire: the commit LSN was stored before the outcome
                    // this reader saw (Release/Acquire there); this Acquire
                    // adds nothing to that.
                    let c = v.commit.load(Ordering::Acquire);
                    self.read_commit.set(self.read_commit.get().max(c));
                }
                self.count(0);
                return Ok(found);
            }
            lsn = Some(at);
        }
        let arena: &'a Arena = self.arena;
        arena
            .keep(|out| {
                // §3.3: version `lsn`, if the read cache has it. Keyed by
                // the LSN of the redo record that wrote it, a cached value
                // is that version's whatever the DC holds now.
                if let (Some(c), Some(lsn)) = (&s.cache, lsn) {
                    if c.get(lsn, out) {
                        self.count(1);
                        return Ok(true);
                    }
                }
                self.count(2);
                let got = s.dc.get(item.table().index(), item.key(), out)?;
                if let (Some(c), Some(want)) = (&s.cache, lsn) {
                    // The DC holds version `lsn` itself (see the module's
                    // notes on why what it holds is what we must read):
                    // keep it for the next reader.
                    if got == Some(want) {
                        c.insert(want, out);
                    }
                }
                Ok(got.is_some())
            })
            .map_err(TxError::Failed)
    }

    /// Evict `item` if it lists no version and no transaction at or after
    /// `oat` read it (§6.5's hard watermark; see `record`).
    fn evict(&mut self, item: &Item, oat: u64, g: &crossbeam_epoch::Guard) {
        if !item.record.evict(oat) {
            return;
        }
        // Out of the index first: a new item of this key can be made only
        // once this one leaves the hash table.
        if let Ok(table) = self.s.tables.get(item.table()) {
            let _ = table
                .index
                .remove_if(item.key(), item as *const Item, &mut Pin(g));
        }
        self.s.mvcc.remove(item, &mut Epoch);
        self.evicted += 1;
    }

    /// Count a read served from the log (0), the read cache (1) or the
    /// DC (2).
    fn count(&self, at: usize) {
        let mut r = self.reads.get();
        r[at] += 1;
        self.reads.set(r);
    }

    pub(super) fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&'a [u8]>, TxError> {
        let mut spins = 0;
        loop {
            let item = self.item(t, key)?;
            match self.visible(item) {
                Ok(v) if self.s.flaw == Flaw::EvictRead => {
                    // The mutant evicts what it has just read, ignoring
                    // its own read timestamp: an older writer of the key
                    // then finds a fresh item.
                    let value = self.value(item, v);
                    self.trim_item(item, false);
                    self.evict(item, u64::MAX, &crossbeam_epoch::pin());
                    return value;
                }
                Ok(v) => return self.value(item, v),
                // Its evictor is removing it from the table: look again.
                Err(Miss::Gone) => backoff(&mut spins),
                Err(blocked) => return Err(blocked.into()),
            }
        }
    }

    /// Append `r` to the log, waiting briefly for room, then shedding
    /// load (§6.5).
    fn append(&mut self, record: &[u8]) -> Result<Lsn, TxError> {
        let mut spins = 0;
        loop {
            match self.s.log.append(record) {
                Ok(lsn) => return Ok(lsn),
                Err(_) if spins < 256 => backoff(&mut spins),
                Err(_) => return Err(TxError::Conflict(AbortReason::Overloaded)),
            }
        }
    }

    /// Write `value` (`None`: delete) as our version of `key`: its redo
    /// record goes into the log first, then the version that points at
    /// it (§3.1).
    fn write(&mut self, t: TableId, key: &[u8], value: Option<&[u8]>) -> Result<(), TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        let item = self.item(t, key)?;
        let mut r = std::mem::take(self.record);
        r.clear();
        logrec::push_version(&mut r, self.ts, t.index(), key, value);
        let lsn = self.append(&r);
        *self.record = r;
        let lsn = lsn?;
        self.logged = true;
        let mut spins = 0;
        let mut item = item;
        let v = loop {
            match item
                .record
                .write_checked(self.ts, lsn, self.s.flaw != Flaw::IgnoreReads)
                .map_err(TxError::Conflict)?
            {
                Some(v) => break v,
                // Evicted: write through the item that replaces it.
                None => {
                    backoff(&mut spins);
                    item = self.item(t, key)?;
                }
            }
        };
        let v = v as *const Version;
        if !self.writes.contains(&v) {
            self.writes.push(v);
        }
        Ok(())
    }
}

/// The value in the version record at `lsn` (`Some(None)`: a deletion),
/// if its buffer is still in memory.
fn from_log(log: &Log, lsn: Lsn) -> Option<Option<&[u8]>> {
    // SAFETY: a published version's record was appended before it; the
    // caller is pinned, so a buffer found stays.
    let h = VersionHeader::parse(unsafe { log.slice(lsn, HEADER as u32) }?);
    if h.deleted() {
        return Some(None);
    }
    let at = lsn + HEADER as u64 + u64::from(h.klen);
    // SAFETY: as above.
    unsafe { log.slice(at, h.vlen) }.map(Some)
}

impl Tx for Txn<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.read(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value))
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        if self.read(t, key)?.is_some() {
            return Err(Error::KeyExists.into());
        }
        self.write(t, key, Some(value))
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        if self.read(t, key)?.is_none() {
            return Ok(false);
        }
        self.write(t, key, None).map(|()| true)
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: F,
    ) -> Result<(), TxError> {
        check_bounds(lo, hi)?;
        let table = self.s.tables.get(t)?;
        if limit == 0 {
            return Ok(());
        }
        // Keys that appear in the range from now on are held off from
        // older writers (see the module's notes).
        // AcqRel: the scan's RMW on the table's word, ordered with a new item's
        // RMW on it (module doc).
        table.scan_ts.fetch_max(self.ts, Ordering::AcqRel);
        self.merge_scan(t, table, (lo, hi), limit, reverse, f)
    }
}

/// Begin a transaction on runner slot `slot` with `parts` (`session`: an
/// interactive one, which never waits on another).
pub(super) fn start<'a>(
    s: &'a Shared,
    slot: usize,
    parts: &'a mut Parts,
    session: bool,
) -> Txn<'a> {
    // Pinned for the whole transaction: the log buffers and versions
    // it holds slices of and pointers to stay (§5.2's one epoch
    // enter/exit per operation; see ARCHITECTURE.md).
    let g = crossbeam_epoch::pin();
    let slot: &TxSlot = &s.slots[slot];
    // A lower bound first, then the timestamp (see the module's
    // notes on the transaction table).
    // SeqCst (all four): the transaction table (module doc): the lower bound is
    // published before the timestamp is taken, in one total order with the
    // OAT's loads (`Shared::oat`).
    slot.ts
        .store(s.next_ts.load(Ordering::SeqCst), Ordering::SeqCst);
    let ts = s.next_ts.fetch_add(1, Ordering::SeqCst);
    slot.ts.store(ts, Ordering::SeqCst);
    parts.writes.clear();
    parts.arena.clear();
    let trim = s.over_soft.load(Ordering::Relaxed);
    // Acquire: pairs with the TC Proxy's Release of O-LSN: every operation
    // below it is at the DC.
    let o_lsn = s.o_lsn.load(Ordering::Acquire);
    let mut tx = Txn {
        s,
        slot,
        ts,
        writes: &mut parts.writes,
        record: &mut parts.record,
        arena: &parts.arena,
        trimmed: &mut parts.trimmed,
        o_lsn,
        trim,
        logged: false,
        read_commit: Cell::new(0),
        reads: Cell::new([0; 3]),
        made: Cell::new(0),
        evicted: 0,
        session,
        g,
    };
    if s.over_hard.load(Ordering::Relaxed) {
        // §6.5's hard watermark: sweep a slice of the table.
        let n = s.mvcc.buckets();
        let from = s.sweep.fetch_add(SWEEP, Ordering::Relaxed) % n;
        // A lower bound of the OAT however stale (the OAT only grows);
        // Acquire pairs with the proxy's Release store.
        let oat = s.oat_seen.load(Ordering::Acquire);
        let g = crossbeam_epoch::pin();
        s.mvcc.for_each_in(from, from + SWEEP, |item| {
            tx.trim_item(item, false);
            tx.evict(item, oat, &g);
        });
        // Help the collector with what we retired: a swept item's free
        // waits in the epoch collector's global queue, and a recycled log
        // buffer comes back through the same queue. The collector runs
        // a few bags per 128 pins, so sweeps retiring thousands of items
        // a second left the buffers behind them: the log stayed full and
        // writers aborted as overloaded (test
        // `evictions_do_not_hold_up_the_log`).
        if tx.evicted > 0 {
            g.flush();
        }
    }
    tx
}

/// What ending a transaction left for its runner.
pub(super) struct Ended {
    pub(super) ts: u64,
    /// Its durable token (§2.3.1).
    pub(super) token: u64,
    /// The TC stopped while it ended (no outcome record could go in).
    pub(super) error: Option<Error>,
}

impl Txn<'_> {
    /// Commit (`commit`, and the body succeeded) or abort: the outcome
    /// record, the versions' states, the transaction table and counters.
    pub(super) fn end(self, commit: bool) -> Ended {
        let Txn {
            s,
            slot,
            ts,
            writes,
            record,
            trimmed,
            logged,
            read_commit,
            reads,
            made,
            evicted,
            g,
            ..
        } = self;
        for (c, n) in slot.reads.iter().zip(reads.get()) {
            if n > 0 {
                // Ours alone: no other writer, so no contended line.
                c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
            }
        }
        let state = match commit {
            true => COMMITTED,
            false => ABORTED,
        };
        let mut outcome = Ok(());
        let mut commit_lsn = 0;
        if logged {
            // §2.3.1 fast commit: committed once the commit record is in
            // a buffer; acknowledged (`durable_token`) once that buffer is
            // stable.
            record.clear();
            logrec::push_outcome(record, state == COMMITTED, ts);
            outcome = s.log.append_forced(record).map(|l| commit_lsn = l);
        }
        let state = if outcome.is_err() { ABORTED } else { state };
        for &v in writes.iter() {
            // SAFETY: our versions, in items that live while we are
            // pinned (an item with versions is never evicted).
            unsafe {
                // Release: the outcome (`record`): a reader that sees it
                // (Acquire) sees the commit LSN stored before it.
                (*v).commit.store(commit_lsn, Ordering::Relaxed);
                (*v).state.store(state, Ordering::Release);
            }
        }
        // §2.3.1: a writer waits for its commit record; a reader for the
        // newest commit record it read, if that is not yet durable (ours:
        // it waits on the durable LSN instead of logging a commit record
        // of its own).
        let read_commit = read_commit.get();
        let token = match (logged, state) {
            (true, COMMITTED) => commit_lsn + 1,
            // Acquire: pairs with the TC Proxy's Release of the durable LSN.
            _ if read_commit != 0 && read_commit >= s.durable_lsn.load(Ordering::Acquire) => {
                read_commit + 1
            }
            _ => 0,
        };
        // SeqCst: the transaction leaves the transaction table (module doc), in
        // one total order with the OAT's loads.
        slot.ts.store(IDLE, Ordering::SeqCst);
        let created = writes.len() as i64;
        let n_trimmed = trimmed.len();
        // Ours alone: no other writer, so no contended line.
        let add = |c: &AtomicI64, n: i64| {
            if n != 0 {
                c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
            }
        };
        add(&slot.versions, created - n_trimmed as i64);
        add(&slot.items, made.get() - evicted);
        if evicted != 0 {
            s.metrics
                .evicted
                .fetch_add(evicted as u64, Ordering::Relaxed);
        }
        if n_trimmed != 0 {
            s.metrics
                .trimmed
                .fetch_add(n_trimmed as u64, Ordering::Relaxed);
            let ps = trimmed.drain(..).map(|p| p as usize).collect();
            // SAFETY: unlinked by this transaction's trims, each once.
            unsafe { retire_all(&g, ps, free_version) };
        }
        let error = outcome.is_err().then(|| {
            // Every slot of the log in use: nothing can be committed.
            let why = "the recovery log has no free slot for an outcome record";
            s.fail(why.into());
            Error::Poisoned(why.into())
        });
        Ended { ts, token, error }
    }
}
