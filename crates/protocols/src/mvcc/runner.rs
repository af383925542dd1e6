//! A worker's runner: its bookkeeping, how a transaction starts and ends,
//! and the garbage its commits leave to unhook.

use super::*;

/// A worker's handle.
pub struct Runner<C: Certifier> {
    pub(super) db: Arc<Shared>,
    pub(super) slot: usize,
    pub(super) st: State,
    pub(super) books: Books,
    pub(super) certifier: PhantomData<C>,
}

/// What a runner keeps from one transaction to the next.
pub(super) struct Books {
    /// The sequence number the next transaction of this slot takes.
    pub(super) seq: u64,
    /// A lower bound of every active read time (refreshed every
    /// `SCAN_EVERY` transactions: a stale bound only keeps more versions).
    pub(super) oldest: u64,
    pub(super) until_scan: u32,
    pub(super) stats: Stats,
    /// The pause before retrying after a conflict.
    pub(super) backoff: Backoff,
    pub(super) last_end: u64,
    /// Committed deletions, oldest first, waiting for every reader to
    /// pass them.
    pub(super) unhook: VecDeque<Unhook>,
}

// SAFETY: the raw pointers in `State` point at shared,
// `Sync` versions and chains; the state is empty between transactions.
unsafe impl<C: Certifier> Send for Runner<C> {}

impl<C: Certifier> Drop for Runner<C> {
    fn drop(&mut self) {
        let garbage = std::mem::take(&mut self.st.garbage);
        // SAFETY: cut off their chains by this runner's commits, each
        // listed once.
        unsafe { retire_versions(&crossbeam_epoch::pin(), garbage) };
        let s = &self.db.slots[self.slot];
        // SeqCst: this runner's bound leaves the garbage collector's watermark,
        // as every store to `begin` (module doc).
        s.begin.store(INF, Ordering::SeqCst);
        // Release: the next runner to claim the slot (the AcqRel claim in
        // `Mvcc::runner`) sees it as this one left it.
        s.in_use.store(false, Ordering::Release);
    }
}

#[derive(Default)]
pub(super) struct State {
    /// Versions read: (chain, the version seen, null if none).
    pub(super) reads: Vec<(usize, usize)>,
    /// Versions written: (chain, new version, the version it superseded).
    pub(super) writes: Vec<(usize, usize, usize)>,
    pub(super) nodes: Vec<(LeafRef, u64)>,
    /// Keys this transaction deleted: (table, key, chain).
    pub(super) deletes: Vec<(TableId, Box<[u8]>, usize)>,
    pub(super) batch: Batch<*const Chain>,
    /// Chains `prefetch_many` found, in order, for the lookups that follow.
    pub(super) hints: Hints<usize>,
    /// Versions this runner's commits cut off their chains, not yet
    /// retired: they are retired `RETIRE_BATCH` at a time (one deferred
    /// free, one allocation, instead of one per commit).
    pub(super) garbage: Vec<usize>,
}

/// Cut versions retired together (see `State::garbage`).
pub(super) const RETIRE_BATCH: usize = 64;

/// A committed deletion whose key leaves the tree once every reader
/// sees it (`unhook_due`).
pub(super) struct Unhook {
    pub(super) table: TableId,
    pub(super) key: Box<[u8]>,
    pub(super) chain: usize,
    /// The deletion's version and its commit timestamp.
    pub(super) version: usize,
    pub(super) ts: u64,
}

impl Books {
    /// Begin a transaction in `slot` (Hekaton: take the begin timestamp).
    pub(super) fn start<'a, C: Certifier>(
        &mut self,
        db: &'a Shared,
        slot: usize,
        st: &'a mut State,
    ) -> Txn<'a, C> {
        let s = &db.slots[slot];
        let seq = self.seq;
        // No one registers on our slot before we run (its dependents list
        // already names `seq`), and the previous transaction's
        // dependencies have all resolved: start clean.
        // SeqCst: as every word of the dependency protocol (`abort_now`,
        // `pending`): cleared before any writer this transaction comes to
        // depend on can set it.
        s.abort_now.store(false, Ordering::SeqCst);
        // The read time is taken at the first read, write or scan
        // (`Txn::read_time`), not here: `prefetch_many` first sends for
        // the transaction's lines, which then arrive while the counter's
        // line comes over from the other cores.
        if self.until_scan == 0 {
            self.oldest = oldest_reader(db);
            self.until_scan = SCAN_EVERY;
        }
        self.until_scan -= 1;
        Txn {
            db,
            guard: crossbeam_epoch::pin(),
            st,
            slot,
            seq,
            me: txref(slot, seq),
            rt: 0,
            oldest: self.oldest,
            certifier: PhantomData,
        }
    }

    /// Commit `tx` (or roll it back, if `ok` is false), then close the
    /// books on it: `Ok(Some(e))` committed at `e`, `Ok(None)` rolled back
    /// by the caller, `Err(reason)` conflicted.
    pub(super) fn end<C: Certifier>(
        &mut self,
        mut tx: Txn<'_, C>,
        ok: bool,
    ) -> Result<Option<u64>, AbortReason> {
        let r = if ok {
            tx.commit().map(|e| {
                if !tx.st.writes.is_empty() {
                    self.last_end = e;
                }
                Some(e)
            })
        } else {
            tx.finish(false, 0);
            Ok(None)
        };
        if let Ok(Some(e)) = r {
            for (table, key, chain) in tx.st.deletes.drain(..) {
                // The chain's newest version of ours (a later write of the
                // key, or a regrown version, replaced the first).
                if let Some(&(_, version, _)) = tx.st.writes.iter().rev().find(|w| w.0 == chain) {
                    self.unhook.push_back(Unhook {
                        table,
                        key,
                        chain,
                        version,
                        ts: e,
                    });
                }
            }
        }
        tx.st.deletes.clear();
        tx.st.hints.clear();
        tx.st.reads.clear();
        tx.st.writes.clear();
        tx.st.nodes.clear();
        let db = tx.db;
        // SeqCst: the transaction's read time leaves the garbage collector's
        // watermark (`oldest_reader`), in the total order of the bounds and the
        // clock.
        db.slots[tx.slot].begin.store(INF, Ordering::SeqCst);
        drop(tx);
        self.seq += 1;
        if self.unhook.front().is_some_and(|u| u.ts < self.oldest) {
            unhook_due(db, &mut self.unhook, self.oldest);
        }
        match r {
            Ok(Some(_)) => {
                self.stats.commits += 1;
                self.backoff.reset();
            }
            Ok(None) => {}
            Err(reason) => {
                self.stats.aborts[reason.index()] += 1;
                self.backoff.after_abort();
            }
        }
        r
    }
}

impl<C: Certifier> Runner<C> {
    pub(super) fn run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_, C>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let mut tx = self.books.start(&self.db, self.slot, &mut self.st);
        match body(&mut tx) {
            Ok(v) => Ok(self.books.end(tx, true).map(|_| v)),
            Err(e) => {
                let _ = self.books.end(tx, false);
                let r = self.books.stats.record(Err(e));
                if matches!(r, Ok(Err(_))) {
                    self.books.backoff.after_abort();
                }
                r
            }
        }
    }
}

impl<C: Certifier> TxRunner for Runner<C> {
    type Tx<'a> = Txn<'a, C>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_, C>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.run(body)
    }

    fn last_commit_key(&self) -> u64 {
        self.books.last_end
    }

    fn stats(&self) -> &Stats {
        &self.books.stats
    }
}
