//! Per-thread worker handles: transaction sets, garbage lists, statistics.

use granary_api::{Profile, Stats, TableId};
use std::sync::Arc;

use crate::silo::error::{AbortReason, Error, TxError};
use crate::silo::gc::{Cleanup, Garbage, GcLists};
use crate::silo::install::{Locked, Unversioned};
use crate::silo::pin::ReadPin;
use crate::silo::record::{Pool, Record};
use crate::silo::session::{Session, SessionEnd};
use crate::silo::shared::{Owner, Shared};
use crate::silo::snapshot::Snapshot;
use crate::silo::sync::Ordering;
use crate::silo::tid::Tid;
use crate::silo::txn::{Core, Transaction};
use granary_api::limits::{check_key, check_value};

/// Identifies a committed transaction's durability requirement; see
/// [`Worker::commit_token`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct CommitToken {
    /// The transaction is durable once the persistent epoch reaches this.
    pub epoch: u64,
}

/// A thread's handle on the database. Runs transactions (retrying on
/// conflict), snapshot transactions, and reclaims garbage between them.
/// Not `Sync`: one per thread.
pub struct Worker {
    pub(crate) shared: Arc<Shared>,
    /// Keeps a durable database open (`None` for granary's own workers).
    _owner: Option<Arc<Owner>>,
    slot: usize,
    pub(crate) core: Core,
    stats: Stats,
    rng: u64,
}

// SAFETY: the raw pointers a worker holds (transaction sets, garbage,
// pooled records) point into its database, which the worker keeps alive
// through `shared`; none is shared with another thread's state, and the
// epoch protocol does not depend on which OS thread a worker runs on.
unsafe impl Send for Worker {}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("slot", &self.slot)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Worker {
    pub(crate) fn new(shared: Arc<Shared>, owner: Option<Arc<Owner>>) -> Result<Worker, Error> {
        let slot = shared.epochs.register().ok_or(Error::TooManyWorkers {
            max: shared.options.max_workers,
        })?;
        let pool = if shared.options.record_pool {
            Pool::default()
        } else {
            Pool::unpooled()
        };
        Ok(Worker {
            shared,
            _owner: owner,
            slot,
            core: Core {
                slot,
                pool,
                ..Core::default()
            },
            stats: Stats::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ (slot as u64 + 1),
        })
    }

    /// Counters since the worker was created (or last reset).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = Stats::default();
    }

    /// Garbage items this worker holds (awaiting their epochs).
    pub fn pending_garbage(&self) -> usize {
        self.core.gc.len()
    }

    /// Run `body` as one serializable transaction, retrying it (with bounded
    /// randomized backoff) while it conflicts. Returns its result once it
    /// commits.
    ///
    /// # Errors
    /// Whatever [`Error`] the body failed with (after checking that the
    /// reads it saw were consistent; if not, the attempt is retried
    /// instead), or [`Error::RetriesExhausted`] after
    /// `Options::max_retries` conflicts.
    ///
    /// ```
    /// # use granary::{Database, Options, keys};
    /// let db = Database::new(Options::default())?;
    /// let t = db.create_table("counters")?;
    /// let mut w = db.worker()?;
    /// for _ in 0..3 {
    ///     w.run(|tx| {
    ///         let n = tx.get(t, b"hits")?.map_or(0, |v| keys::decode_u64(v));
    ///         tx.put(t, b"hits", &(n + 1).to_be_bytes())
    ///     })?;
    /// }
    /// assert_eq!(w.run(|tx| Ok(tx.get(t, b"hits")?.map(keys::decode_u64)))?, Some(3));
    /// # Ok::<(), granary::Error>(())
    /// ```
    pub fn run<T>(
        &mut self,
        mut body: impl FnMut(&mut Transaction<'_>) -> Result<T, TxError>,
    ) -> Result<T, Error> {
        let mut attempts = 0u32;
        loop {
            match self.try_run(&mut body)? {
                Ok(v) => return Ok(v),
                Err(last) => {
                    attempts += 1;
                    if attempts >= self.shared.options.max_retries {
                        return Err(Error::RetriesExhausted { attempts, last });
                    }
                    self.backoff(attempts);
                }
            }
        }
    }

    /// Run `body` once. `Ok(Err(reason))` means it conflicted and was rolled
    /// back (the caller may retry).
    ///
    /// # Errors
    /// As for [`Worker::run`], except conflicts.
    pub fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Transaction<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        if let Some(d) = self.shared.durable.get() {
            d.check()?;
        }
        self.pin();
        let mut tx = Transaction::new(&self.shared, &mut self.core);
        let out = match body(&mut tx) {
            Ok(v) => tx.commit().map(|()| v),
            Err(TxError::Conflict(r)) => {
                tx.abort();
                Err(r)
            }
            Err(TxError::Failed(e)) => {
                // Only report an error seen from a consistent state.
                let consistent = tx.reads_still_valid();
                tx.abort();
                if consistent {
                    self.unpin();
                    self.stats.failures += 1;
                    return Err(e);
                }
                Err(AbortReason::ReadValidation)
            }
        };
        self.unpin();
        match &out {
            Ok(_) => {
                self.stats.commits += 1;
                if let Some(d) = self.shared.durable.get() {
                    // SiloR §3: acknowledge only once the epoch is durable
                    // (unpinned, so the epoch can move on meanwhile).
                    if d.wait {
                        d.wait_durable(self.core.durable_need)?;
                    }
                }
            }
            Err(r) => self.stats.aborts[r.index()] += 1,
        }
        Ok(out)
    }

    /// A token for the last transaction this worker committed: on a
    /// durable database opened with `wait_for_durable(false)`, wait for it
    /// with [`Database::wait_durable`](crate::Database::wait_durable)
    /// before acknowledging the transaction to anyone. Tokens never go
    /// back: once one is durable, so is every earlier commit of this
    /// worker (a read-only transaction's token covers the worker's
    /// previous writes as well as what it read).
    pub fn commit_token(&self) -> CommitToken {
        CommitToken {
            epoch: self.core.durable_need,
        }
    }

    /// Begin an interactive transaction that stays open until
    /// [`Session::commit`] or drop; see [`Session`]. No retries: a conflict
    /// surfaces as an error from an operation or from `commit`.
    pub fn begin(&mut self) -> Session<'_> {
        self.pin();
        let Worker {
            shared,
            slot,
            core,
            stats,
            ..
        } = self;
        Session {
            tx: Transaction::new(shared, core),
            end: SessionEnd {
                epochs: &shared.epochs,
                slot: *slot,
                stats,
                open: true,
            },
        }
    }

    /// Collect a cost breakdown ([`Profile`](crate::Profile)) from now on
    /// (or stop). Costs two tick reads per probed operation while on.
    pub fn set_profiling(&mut self, on: bool) {
        self.core.profiling = on;
    }

    /// The breakdown collected since the last call (zeros if profiling is
    /// off), and reset it.
    pub fn take_profile(&mut self) -> Profile {
        std::mem::take(&mut self.core.prof)
    }

    /// The TID of this worker's last committed transaction that wrote
    /// something (read-only commits take no TID, Silo §4.2).
    pub fn last_commit_tid(&self) -> Tid {
        self.core.last_tid
    }

    /// Run a read-only snapshot transaction (Silo §4.9). It reads the
    /// database as of the current snapshot epoch (which trails the present by
    /// 25–50 epochs; see [`Database::wait_for_snapshot`](crate::Database::wait_for_snapshot)),
    /// writes nothing shared, and never aborts.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] if the database has snapshots turned off;
    /// otherwise whatever the body returns.
    pub fn snapshot<T>(
        &mut self,
        body: impl FnOnce(&mut Snapshot<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if !self.shared.options.snapshots {
            return Err(Error::InvalidOption(
                "snapshots are disabled for this database".into(),
            ));
        }
        loop {
            self.pin();
            if self
                .shared
                .epochs
                .snapshot_ready(self.core.epoch, self.core.snap_epoch)
            {
                break;
            }
            // Old versions were not being kept back to our snapshot epoch
            // (on-demand mode, after a quiet period): wait for them.
            self.unpin();
            std::thread::sleep(self.shared.options.epoch_interval);
        }
        let (se, buf) = (self.core.snap_epoch, &mut self.core.st.buf);
        let r = body(&mut Snapshot::new(&self.shared, se, buf));
        self.unpin();
        if let (Ok(_), Some(d)) = (&r, self.shared.durable.get()) {
            // It saw exactly the epochs before its snapshot epoch.
            let need = self
                .core
                .durable_need
                .max(self.core.snap_epoch.saturating_sub(1));
            self.core.durable_need = need;
            if d.wait {
                d.wait_durable(need)?;
            }
        }
        if r.is_ok() {
            self.stats.commits += 1;
        } else {
            self.stats.failures += 1;
        }
        r
    }

    /// Non-transactional point read on the bare index (the paper's
    /// Key-Value system, §5.2): no read set, no validation, not
    /// serializable with anything. For baselines.
    ///
    /// # Errors
    /// [`Error::UnknownTableId`], [`Error::KeyTooLarge`].
    pub fn kv_get(&mut self, t: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool, Error> {
        check_key(key)?;
        self.pin();
        let found = (|| {
            let tree = &self.shared.table(t)?.tree;
            // SAFETY: this function pinned the worker above and unpins it
            // only after this closure, which `pin` does not outlive.
            let pin = unsafe { ReadPin::new() };
            loop {
                let Some(p) = tree.find(key, &pin) else {
                    return Ok(false);
                };
                // SAFETY: reachable from the tree while pinned.
                let rec = unsafe { &*p };
                let tid = rec.read(out);
                if tid.is_latest() {
                    return Ok(!tid.is_absent());
                }
            }
        })();
        self.unpin();
        found
    }

    /// Non-transactional blind write on the bare index (Key-Value baseline).
    /// Not snapshot-aware.
    ///
    /// # Errors
    /// [`Error::UnknownTableId`], [`Error::KeyTooLarge`], [`Error::ValueTooLarge`].
    pub fn kv_put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), Error> {
        check_key(key)?;
        check_value(value)?;
        self.pin();
        let r = self.kv_put_pinned(t, key, value);
        self.unpin();
        r
    }

    fn kv_put_pinned(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let shared = self.shared.clone();
        let table = shared.table(t)?;
        let tree = &table.tree;
        loop {
            // SAFETY: pinned by the caller.
            let mut pin = unsafe { ReadPin::new() };
            match tree.find(key, &pin) {
                None => {
                    let tid = Tid::new(self.core.epoch, 0).with(Tid::LATEST);
                    let r = Record::alloc(tid, value, 0, std::ptr::null_mut());
                    // SAFETY: ours, not yet published.
                    table.widen(unsafe { r.as_ref() }.capacity());
                    match tree.insert(key, r.as_ptr(), &mut pin) {
                        granary_index::Insert::Inserted(_) => return Ok(()),
                        // SAFETY: never published.
                        granary_index::Insert::Exists { .. } => unsafe { Record::free(r) },
                    }
                }
                Some(p) => {
                    // SAFETY: reachable while pinned.
                    let rec = unsafe { &*p };
                    let Some(locked) = Locked::latest(rec) else {
                        continue;
                    };
                    // The next TID of the record's own sequence: no epoch
                    // or commit protocol here.
                    let word = Tid(locked.old().id().0 + Tid::SEQ_ONE).with(Tid::LATEST);
                    let mut how = Unversioned::new(&mut self.core.gc, &shared.epochs, |w, v| {
                        Record::alloc(w, v, 0, std::ptr::null_mut())
                    });
                    locked.install(|| (table, key), word, value, &mut how, &mut pin);
                    return Ok(());
                }
            }
        }
    }

    /// Pin the worker's epochs and reclaim what is due (Silo §4.8: workers
    /// collect garbage between requests).
    pub(crate) fn pin(&mut self) {
        let (e, se) = self.shared.epochs.pin(self.slot);
        self.core.epoch = e;
        self.core.snap_epoch = se;
        if self.shared.orphan_count.load(Ordering::Relaxed) > 0 {
            let mut o = self.shared.orphans.lock();
            self.core.gc.absorb(&mut o);
            self.shared.orphan_count.store(0, Ordering::Relaxed);
        }
        if self.core.gc.len() == 0 {
            return;
        }
        let (tree_safe, snap_safe) = self.shared.epochs.safe();
        // The bounds move once per epoch; between moves there is nothing
        // new to reclaim.
        if (tree_safe, snap_safe) == self.core.gc_seen {
            return;
        }
        self.core.gc_seen = (tree_safe, snap_safe);
        if !self.shared.options.gc {
            // Fig. 11's +NoGC (Options::gc): free nothing, but deleted
            // keys still leave their trees.
            self.run_cleanups(tree_safe, snap_safe);
            return;
        }
        // SAFETY: the bounds come from this database's epochs, where every
        // item was retired.
        unsafe {
            self.core
                .gc
                .collect(tree_safe, snap_safe, &mut self.core.pool)
        };
        self.run_cleanups(tree_safe, snap_safe);
    }

    pub(crate) fn unpin(&mut self) {
        self.shared.epochs.unpin(self.slot);
    }

    /// Unhook deleted records whose snapshot readers are gone (§4.9).
    fn run_cleanups(&mut self, tree_safe: u64, snap_safe: u64) {
        // Acquire: pairs with the Release store in `publish_pepoch`.
        let durable = self
            .shared
            .durable
            .get()
            .map_or(u64::MAX, |d| d.pepoch.load(Ordering::Acquire));
        while let Some(c) = self.core.gc.cleanup.front() {
            let bound = if c.snapshot { snap_safe } else { tree_safe };
            // A reader that misses the key must not be acknowledged before
            // the delete is durable: unhook only durable deletes.
            if c.label >= bound || c.tid.epoch() > durable {
                break;
            }
            let c = self.core.gc.cleanup.pop_front().expect("front");
            unhook(&self.shared, &mut self.core.gc, c);
        }
    }

    fn backoff(&mut self, attempts: u32) {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let cap = 1u64 << attempts.min(10);
        for _ in 0..(self.rng % cap) * 8 {
            std::hint::spin_loop();
        }
        if attempts > 16 {
            std::thread::yield_now();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.epochs.unregister(self.slot);
        let gc = &mut self.core.gc;
        self.core
            .pool
            .close_chunk(|c, (s, t)| gc.snap.push_back((s, t, Garbage::Chunk(c))));
        if self.core.gc.len() > 0 {
            let n = self.core.gc.len() as u64;
            self.shared.orphans.lock().absorb(&mut self.core.gc);
            self.shared.orphan_count.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Unhook a deleted record whose snapshot readers are gone (§4.9).
pub(crate) fn unhook(shared: &Shared, gc: &mut GcLists, c: Cleanup) {
    let Ok(table) = shared.table(TableId(c.table)) else {
        return;
    };
    // SAFETY: pinned.
    let pin = unsafe { ReadPin::new() };
    // Dereference the record only if the tree still maps the key to it:
    // then it is reachable, hence live, while we are pinned.
    if table.tree.find(&c.key, &pin) != Some(c.rec.as_ptr()) {
        return;
    }
    // SAFETY: reachable while pinned (checked above).
    let rec = unsafe { c.rec.as_ref() };
    let t = rec.lock();
    if t != c.tid {
        // Re-inserted (or deleted again, with its own cleanup) since.
        rec.unlock(t);
        return;
    }
    Locked::new(rec, t).unhook(&table.tree, &c.key, t, gc, &shared.epochs);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Database, Options};

    /// The record the tree maps `key` to.
    fn entry(db: &Database, w: &mut Worker, t: TableId, key: &[u8]) -> *const Record {
        w.pin();
        // SAFETY: pinned just above.
        let pin = unsafe { ReadPin::new() };
        let v = db.shared.table(t).expect("table").tree.find(key, &pin);
        w.unpin();
        v.expect("key present")
    }

    /// Fig. 11's switches (Silo §5.7) change what they say: without
    /// overwrites every update replaces the key's record; without GC the
    /// replaced records are never freed; without the pool there are no
    /// bins to recycle into.
    #[test]
    fn factor_switches_take_effect() {
        for (overwrites, gc, pool) in [
            (true, true, true),
            (false, true, true),
            (false, false, false),
        ] {
            let o = Options::default()
                .epoch_interval(Duration::from_secs(3600))
                .snapshots(false)
                .overwrites(overwrites)
                .gc(gc)
                .record_pool(pool);
            let db = Database::new(o).expect("database");
            let t = db.open_table("t").expect("table");
            let mut w = db.worker().expect("worker");
            w.run(|tx| tx.put(t, b"k", b"v0")).expect("insert");
            let first = entry(&db, &mut w, t, b"k");
            for i in 1..=10u8 {
                w.run(|tx| tx.put(t, b"k", &[b'v', i])).expect("update");
            }
            let last = entry(&db, &mut w, t, b"k");
            assert_eq!(first == last, overwrites, "overwrites={overwrites}");
            assert_eq!(w.core.pool.recycles(), pool, "record_pool={pool}");
            let retired = w.core.gc.len();
            assert_eq!(retired, if overwrites { 0 } else { 10 });
            for _ in 0..4 {
                db.tick_epoch_for_tests();
            }
            w.run(|tx| tx.get(t, b"k").map(|v| v.is_some()))
                .expect("read");
            let left = w.core.gc.len();
            assert_eq!(left, if gc { 0 } else { retired }, "gc={gc}");
            assert_eq!(
                w.run(|tx| tx.get(t, b"k").map(|v| v.map(<[u8]>::to_vec)))
                    .expect("read"),
                Some(vec![b'v', 10])
            );
        }
    }

    /// Without a log, and while no snapshot needs old versions, a
    /// committed delete takes its key out of the tree at once: no cleanup
    /// waits for the epochs, and the record is freed through them like
    /// any unlinked record. The key can be inserted again right away.
    #[test]
    fn a_delete_unhooks_its_key_at_commit() {
        let o = Options::default().epoch_interval(Duration::from_secs(3600));
        let db = Database::new(o).expect("database");
        let t = db.open_table("t").expect("table");
        let mut w = db.worker().expect("worker");
        w.run(|tx| tx.insert(t, b"k", b"v")).expect("insert");
        assert!(w.run(|tx| tx.delete(t, b"k")).expect("delete"));
        w.pin();
        // SAFETY: pinned just above.
        let pin = unsafe { ReadPin::new() };
        let found = db.shared.table(t).expect("table").tree.find(b"k", &pin);
        w.unpin();
        assert_eq!(found, None, "the key left the tree at commit");
        assert_eq!(w.core.gc.cleanup.len(), 0);
        assert_eq!(w.core.gc.tree.len(), 1, "the record waits for the epochs");
        for _ in 0..4 {
            db.tick_epoch_for_tests();
        }
        w.run(|tx| tx.insert(t, b"k", b"w")).expect("insert again");
        assert_eq!(w.core.gc.len(), 0, "freed once the epochs passed");
        assert_eq!(
            w.run(|tx| tx.get(t, b"k").map(|v| v.map(<[u8]>::to_vec)))
                .expect("read"),
            Some(b"w".to_vec())
        );
    }
}
