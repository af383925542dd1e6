//! Commit (Fig. 2): lock the write-set, read the epoch, validate the
//! read-set and node-set, choose the TID, install (Phase 3, §4.4); and
//! abort.

use std::ptr::NonNull;

use granary_api::ticks;

use crate::silo::error::AbortReason;
use crate::silo::gc::{Cleanup, Garbage, GcLists};
use crate::silo::install::{Install, Locked};
use crate::silo::pin::ReadPin;
use crate::silo::record::{Pool, Record};
use crate::silo::shared::Shared;
use crate::silo::sync::{fence, Ordering};
use crate::silo::tid::{snap, Tid};

use super::sets::*;
use super::*;

impl<'w> Transaction<'w> {
    /// Whether the transaction has writes to install at commit.
    pub(crate) fn writes_anything(&self) -> bool {
        !self.c.st.write_set.is_empty()
    }

    /// The worker's last commit TID (this transaction's, right after it
    /// committed writes).
    pub(crate) fn last_tid(&self) -> Tid {
        self.c.last_tid
    }

    /// Check, without locks, that everything read is still as it was.
    pub(crate) fn reads_still_valid(&self) -> bool {
        self.doomed.is_none() && validate(&self.c.st, false, true).is_ok()
    }

    /// Fig. 2, timed when profiling.
    pub(crate) fn commit(&mut self) -> Result<(), AbortReason> {
        let t0 = probe(self.c.profiling);
        let r = self.commit_inner();
        if self.c.profiling {
            self.c.prof.commit += ticks() - t0;
        }
        r
    }

    /// Fig. 2. On failure everything is rolled back.
    fn commit_inner(&mut self) -> Result<(), AbortReason> {
        if let Some(r) = self.doomed {
            self.abort();
            return Err(r);
        }
        if self.c.st.write_set.is_empty() {
            // Read-only: Phase 2 only; no TID, nothing to install.
            validate(&self.c.st, false, validates_reads(self.shared))
                .inspect_err(|_| self.abort())?;
            if self.shared.durable.get().is_some() {
                // Its results may be released once what it read is durable.
                // `max`: a worker's token never goes back, so a durable
                // token covers all of the worker's earlier commits too.
                let read = self
                    .c
                    .st
                    .read_set
                    .iter()
                    .map(|r| r.tid.epoch())
                    .max()
                    .unwrap_or(0);
                self.c.durable_need = self.c.durable_need.max(read);
            }
            return Ok(());
        }
        // Phase 1: lock the write-set in a global (address) order.
        let st = &mut self.c.st;
        st.order.clear();
        st.order.extend(
            st.write_set
                .iter()
                .enumerate()
                .map(|(i, w)| (w.rec as usize, i as u32)),
        );
        // Sorting the addresses themselves, not positions by an indirect
        // key, halves the sort's instructions.
        st.order.sort_unstable();
        for k in 0..st.order.len() {
            let i = st.order[k].1 as usize;
            // SAFETY: write-set records are reachable (we are pinned).
            let rec = unsafe { &*st.write_set[i].rec };
            let t = rec.lock();
            st.write_set[i].locked = t.with(Tid::LOCK);
            if !t.is_latest() {
                // Superseded since we found it: our write would be lost.
                unlock_first(st, k + 1);
                self.abort();
                return Err(AbortReason::WriteValidation);
            }
        }
        // The locks must be visible before we read E and the read-set:
        // SeqCst fence, pairs with the same fence in every other committer
        // (Fig. 3's store-buffering shape).
        fence(Ordering::SeqCst);
        // The serialization point.
        let e = self.shared.epochs.global();
        // Phase 2.
        if let Err(r) = validate(st, true, validates_reads(self.shared)) {
            unlock_first(st, st.order.len());
            self.abort();
            return Err(r);
        }
        // Choose the commit TID (§4.2).
        let mut max = self.c.last_tid.id();
        for r in &st.read_set {
            max = max.max(r.tid.id());
        }
        for w in &st.write_set {
            max = max.max(w.locked.id());
        }
        let mut commit = Tid(max.0 + Tid::SEQ_ONE).max(Tid::new(e, 0));
        if self.shared.options.global_tid {
            // MemSilo+GlobalTID (§5.2): one shared counter per commit.
            let g = self.shared.global_tid.fetch_add(1, Ordering::Relaxed);
            commit = commit.max(Tid::new(e, g));
        }
        debug_assert_eq!(commit.epoch(), e, "sequence overflow within an epoch");
        if st.patches && (self.shared.durable.get().is_some() || !self.shared.options.overwrites) {
            // The log takes whole values (SiloR §3.1), and a record that
            // is never overwritten is replaced whole: each patch becomes
            // its record's value with the patch over it. The records are
            // locked by us and validated, so a plain copy is consistent.
            for i in 0..st.write_set.len() {
                if let WriteKind::Patch(from) = st.write_set[i].kind {
                    let at = st.arena.len();
                    // SAFETY: write-set records are reachable (pinned).
                    unsafe { &*st.write_set[i].rec }.load_prefix_at(&mut st.arena, at, usize::MAX);
                    patch_over(st, i, from, at);
                }
            }
        }
        // Phase 3.
        for i in 0..self.c.st.write_set.len() {
            self.install(i, commit, e);
        }
        self.c.last_tid = commit;
        if let Some(d) = self.shared.durable.get() {
            // SiloR §3.1, §3.2: value logging, still pinned in epoch ≤ e.
            let st = &self.c.st;
            let a = &st.arena[..];
            let range = |r: (u32, u32)| &a[r.0 as usize..(r.0 + r.1) as usize];
            d.append(
                self.c.slot,
                e,
                commit.raw(),
                st.write_set
                    .iter()
                    .map(|w| (w.table.0, range(w.key), w.value.map(range))),
            );
            self.c.durable_need = e;
        }
        Ok(())
    }

    /// Phase 3 for one record: write it (keeping the old version for
    /// snapshots if the write crosses a snapshot epoch, §4.9) and release
    /// its lock with the new TID word.
    #[inline]
    fn install(&mut self, i: usize, commit: Tid, e: u64) {
        let shared = self.shared;
        let w: &mut Core = &mut *self.c;
        let we = w.st.write_set[i].clone();
        // SAFETY: locked by us, reachable.
        let rec = unsafe { &*we.rec };
        let old = we.locked.without(Tid::LOCK);
        let crosses = shared.options.snapshots
            && snap(old.epoch()) != snap(e)
            && !(old.is_absent() && rec.prev.load(Ordering::Relaxed).is_null())
            && shared.epochs.copying(e);
        let mut how = Phase3 {
            shared,
            pool: &mut w.pool,
            gc: &mut w.gc,
            scratch: &mut w.st.scratch,
            old,
            e,
            crosses,
            // An insert's placeholder is already the new record it needs.
            overwrites: shared.options.overwrites || we.kind == WriteKind::Placeholder,
        };
        let arena = &w.st.arena;
        // In `usize`, so the slice's length is `r.1` as far as the
        // optimizer knows (no u32 wrap): the install's bounds checks fold.
        let range = |r: (u32, u32)| {
            let (s, n) = (r.0 as usize, r.1 as usize);
            &arena[s..s + n]
        };
        match (we.kind, we.value) {
            (WriteKind::Patch(from), Some(v)) => {
                // In place, the patch's bytes alone (`update_field`): the
                // rest of the value is what Phase 2 validated.
                debug_assert!(how.overwrites);
                how.overwriting(rec);
                rec.store_field(from as usize, range(v));
                rec.unlock(commit.with(Tid::LATEST));
            }
            (_, Some(v)) => {
                // Only a record too small for the value needs its tree.
                let place = || (shared.table(we.table).expect("table"), range(we.key));
                // SAFETY: pinned.
                let mut pin = unsafe { ReadPin::new() };
                let word = commit.with(Tid::LATEST);
                Locked::new(rec, old).install(place, word, range(v), &mut how, &mut pin);
            }
            (_, None) => {
                if crosses {
                    how.keep_old(rec);
                }
                let new_word = commit.with(Tid::LATEST | Tid::ABSENT);
                // Unhook from the tree once no snapshot can need it (§4.9).
                // Outside the copy window no snapshot reader can need the
                // key's past (none may run over epoch `e`, and the delete
                // kept no old version). Then, without a log, the key leaves
                // its tree now, before the lock is released: a reader
                // that found the record sees it superseded (no latest bit)
                // and looks again, a transaction that read it fails
                // validation, and its memory waits for `tree_safe` as any
                // unlinked record's. A logged delete must first be durable
                // (`Worker::run_cleanups`), so it waits in the cleanup list.
                let versioned = shared.options.snapshots && shared.epochs.copying(e);
                if !versioned && shared.durable.get().is_none() {
                    let tree = &shared.table(we.table).expect("table").tree;
                    Locked::new(rec, old).unhook(
                        tree,
                        range(we.key),
                        new_word,
                        &mut w.gc,
                        &shared.epochs,
                    );
                    return;
                }
                rec.unlock(new_word);
                w.gc.cleanup.push_back(Cleanup {
                    label: if versioned { snap(e) } else { e },
                    snapshot: versioned,
                    table: we.table.0,
                    key: range(we.key).into(),
                    rec: NonNull::from(rec),
                    tid: new_word,
                });
            }
        }
    }

    /// Roll back: remove this attempt's placeholders from the tree (locks
    /// were already released by the caller, or never taken).
    pub(crate) fn abort(&mut self) {
        let shared = self.shared;
        for i in 0..self.c.st.write_set.len() {
            let we = &self.c.st.write_set[i];
            if we.kind != WriteKind::Placeholder {
                continue;
            }
            // SAFETY: we inserted it and are still pinned, so even if another
            // transaction superseded and retired it, it is not yet freed.
            let rec = unsafe { &*we.rec };
            let t = rec.lock();
            if t != PLACEHOLDER {
                // Another transaction committed an insert over it: theirs now.
                rec.unlock(t);
                continue;
            }
            let (ks, kn) = (we.key.0 as usize, we.key.1 as usize);
            let tree = &shared.table(we.table).expect("table").tree;
            let c = &mut *self.c;
            let key = &c.st.arena[ks..ks + kn];
            Locked::new(rec, t).unhook(tree, key, t, &mut c.gc, &shared.epochs);
        }
        self.c.st.clear_writes();
    }
}

/// How Phase 3 installs a version (§4.4): a write that crosses a snapshot
/// epoch keeps the old version for snapshot transactions (§4.9).
struct Phase3<'a> {
    shared: &'a Shared,
    pool: &'a mut Pool,
    gc: &'a mut GcLists,
    scratch: &'a mut Vec<u8>,
    /// The record's TID word before Phase 1 locked it.
    old: Tid,
    /// The commit's epoch.
    e: u64,
    /// Whether the write crosses a snapshot epoch that snapshot
    /// transactions may read (old versions are being kept).
    crosses: bool,
    /// `Options::overwrites`.
    overwrites: bool,
}

impl Phase3<'_> {
    /// Keep the old version of `rec` for snapshots (§4.9). Passes the
    /// fields on, not `self`, so the struct never has to be in memory.
    #[inline]
    fn keep_old(&mut self, rec: &Record) {
        let old = self.old.without(Tid::LATEST);
        keep_old(
            rec,
            old,
            self.e,
            self.shared,
            self.pool,
            self.gc,
            self.scratch,
        );
    }
}

/// Copy `rec`'s old version (word `old`) into new memory linked from the
/// record, so the tree keeps pointing at the same record (§4.9); `e` is
/// the epoch of the commit that supersedes it. `scratch` holds the value
/// meanwhile.
fn keep_old(
    rec: &Record,
    old: Tid,
    e: u64,
    shared: &Shared,
    pool: &mut Pool,
    gc: &mut GcLists,
    scratch: &mut Vec<u8>,
) {
    rec.load_value(scratch);
    let prev = rec.prev.load(Ordering::Relaxed);
    let labels = (snap(e), shared.epochs.global());
    let chunked = pool.alloc_version(old, scratch, prev, labels, |c, (s, t)| {
        gc.snap.push_back((s, t, Garbage::Chunk(c)))
    });
    let copy = chunked.unwrap_or_else(|| {
        let c = pool.alloc(old, scratch, 0, prev);
        gc.snap.push_back((labels.0, labels.1, Garbage::record(c)));
        c
    });
    // Release: a snapshot reader that sees the pointer (validated by the
    // TID word) sees the copy's contents.
    rec.prev.store(copy.as_ptr(), Ordering::Release);
}

impl Install for Phase3<'_> {
    #[inline]
    fn overwrites(&self) -> bool {
        self.overwrites
    }

    /// Too big to overwrite: a new record replaces this one in the tree
    /// (§4.5); the old one stays reachable for snapshots through `prev` if
    /// needed.
    #[inline]
    fn replacement(&mut self, rec: &Record, word: Tid, value: &[u8]) -> NonNull<Record> {
        let prev = if self.crosses {
            rec as *const Record as *mut Record
        } else {
            rec.prev.load(Ordering::Relaxed)
        };
        self.pool.alloc(word, value, 0, prev)
    }

    #[inline]
    fn overwriting(&mut self, rec: &Record) {
        if self.crosses {
            self.keep_old(rec);
        }
    }

    #[inline]
    fn retire(&mut self, rec: NonNull<Record>) {
        let g = Garbage::record(rec);
        let label = self.shared.epochs.global();
        if self.crosses {
            self.gc.snap.push_back((snap(self.e), label, g));
        } else {
            self.gc.tree.push_back((label, g));
        }
    }
}

/// Release the first `k` locks of the commit order, restoring their words.
fn unlock_first(st: &mut TxState, k: usize) {
    for &(_, i) in &st.order[..k] {
        let w = &st.write_set[i as usize];
        // SAFETY: locked by us.
        unsafe { &*w.rec }.unlock(w.locked.without(Tid::LOCK));
    }
}

/// False only in the test-only mutant engine
/// (`Options::mutant_skip_read_validation`).
#[inline]
fn validates_reads(_shared: &Shared) -> bool {
    #[cfg(feature = "mutant")]
    return !_shared.options.mutant_skip_read_validation;
    #[cfg(not(feature = "mutant"))]
    true
}

/// Phase 2: the read-set and node-set are as the body saw them. With
/// `locked`, the write-set is locked by us and sorted in `st.order`.
/// `reads` false skips the read-set: only the test-only mutant does that.
fn validate(st: &TxState, locked: bool, reads: bool) -> Result<(), AbortReason> {
    for r in st.read_set.iter().filter(|_| reads) {
        // SAFETY: reachable while pinned.
        let cur = Tid(unsafe { &*r.rec }.tid.load(Ordering::Acquire));
        if cur.without(Tid::LOCK) != r.tid || !cur.is_latest() {
            return Err(AbortReason::ReadValidation);
        }
        if cur.is_locked() && !(locked && st.find_rec(r.rec).is_some()) {
            return Err(AbortReason::ReadLocked);
        }
    }
    for n in &st.node_set {
        // SAFETY: the worker has been pinned since the leaf was read (an
        // unlinked leaf is freed only after every worker pinned then has
        // unpinned).
        if unsafe { n.leaf.version() } != n.version {
            return Err(AbortReason::NodeValidation);
        }
    }
    Ok(())
}
