//! The transaction table: one slot per runner with its state, its
//! timestamps and its commit dependencies, and the global counter.

use super::*;

/// Transaction states in a slot's word (`seq << 2 | state`).
pub(super) const ACTIVE: u64 = 0;
pub(super) const PREPARING: u64 = 1;
pub(super) const COMMITTED: u64 = 2;
pub(super) const ABORTED: u64 = 3;

/// A worker's entry in the transaction table.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) in_use: AtomicBool,
    /// `seq << 2 | state` of the slot's current (or last) transaction.
    pub(super) word: AtomicU64,
    /// Its end timestamp, once it has one (`INF`, stored before
    /// PREPARING, until then: see [`Slot::prepare`]).
    pub(super) end: AtomicU64,
    /// Its read time while active, `INF` between transactions (the
    /// garbage collector's watermark).
    pub(super) begin: AtomicU64,
    /// Transactions that depend on this one's outcome.
    pub(super) dependents: Mutex<Dependents>,
    /// Outstanding dependencies of this slot's transaction.
    pub(super) pending: AtomicU64,
    /// A transaction this one depends on aborted.
    pub(super) abort_now: AtomicBool,
}

impl Slot {
    /// Start transaction `seq` in this slot: publish a lower bound of its
    /// read time, mark it ACTIVE, then take its read time from `clock`
    /// ([`Txn::take_read_time`]).
    #[inline]
    pub(super) fn take_read_time(&self, seq: u64, clock: &AtomicU64) -> u64 {
        // SeqCst: the lower bound is published before the increment for
        // every observer, so the garbage collector never misses this
        // transaction (`oldest_reader`).
        self.begin
            .store(clock.load(Ordering::SeqCst), Ordering::SeqCst);
        // SeqCst: ACTIVE (naming `seq`) is seen by anyone who meets this
        // transaction's reference, which it writes only after this.
        self.word.store(seq << 2 | ACTIVE, Ordering::SeqCst);
        // SeqCst: one total order of the counter's increments (each
        // transaction's read and end timestamps).
        let rt = clock.fetch_add(1, Ordering::SeqCst);
        // SeqCst: the exact read time, ordered after the bound above.
        self.begin.store(rt, Ordering::SeqCst);
        rt
    }

    /// Enter PREPARING as transaction `seq`, then take the end timestamp
    /// from `clock` and publish it ([`Txn::commit`]): in this order, a
    /// transaction still seen ACTIVE has not taken its end timestamp, so
    /// it will be above every timestamp its observer already holds, and
    /// one seen PREPARING with the timestamp unknown is waited for
    /// ([`Slot::status`]). Model-checked by `loom_commit_publication`.
    #[inline]
    pub(super) fn prepare(&self, seq: u64, clock: &AtomicU64) -> u64 {
        // SeqCst: INF replaces the previous transaction's end before
        // PREPARING is stored, so no observer of PREPARING reads that end.
        self.end.store(INF, Ordering::SeqCst);
        // SeqCst: PREPARING is stored before the increment below, so an
        // observer whose read time comes after it sees PREPARING (or
        // later), never ACTIVE.
        self.word.store(seq << 2 | PREPARING, Ordering::SeqCst);
        // SeqCst: the end timestamp, in the counter's one total order
        // (its release carries PREPARING to later incrementers).
        let e = clock.fetch_add(1, Ordering::SeqCst);
        // SeqCst: publishes the end timestamp that PREPARING observers
        // wait for.
        self.end.store(e, Ordering::SeqCst);
        e
    }

    /// The state and end timestamp of this slot's transaction `seq`, or
    /// `None` if the slot has moved on (the field that named it has been
    /// rewritten since).
    ///
    /// A transaction that is PREPARING but has not published its end
    /// timestamp yet is waited for (a few instructions): its timestamp may
    /// be below or above the caller's, and visibility depends on which.
    pub(super) fn status(&self, seq: u64) -> Option<(u64, u64)> {
        let mut spins = 0;
        loop {
            // SeqCst: pairs with `prepare`'s stores: a word seen
            // PREPARING comes with the end stored before it (INF or the
            // timestamp), one seen ACTIVE precedes the end increment.
            let w = self.word.load(Ordering::SeqCst);
            // SeqCst: read after the word, so it is at least the end
            // stored before the word's state.
            let end = self.end.load(Ordering::SeqCst);
            // SeqCst: the word again: unchanged, so `end` is this
            // transaction's (a later one stores its word first).
            if w >> 2 != seq || self.word.load(Ordering::SeqCst) != w {
                return None;
            }
            if w & 3 == PREPARING && end == INF {
                crate::sync::backoff(&mut spins);
                continue;
            }
            return Some((w & 3, end));
        }
    }
}

#[derive(Default)]
pub(super) struct Dependents {
    /// The transaction whose dependents these are: the slot's current one,
    /// or its next once the current one has finished.
    pub(super) seq: u64,
    pub(super) waiting: Vec<usize>,
}

pub(super) struct Shared {
    pub(super) clock: CachePadded<AtomicU64>,
    pub(super) slots: Box<[CachePadded<Slot>]>,
    /// Slots below this have been used (the garbage scan stops here).
    pub(super) high: AtomicUsize,
    pub(super) tables: Catalog<Table>,
    /// Tables hinted [`TableOptions::point_lookups`] keep a point index.
    pub(super) point_index: bool,
    /// Every table keeps array chains for at least this many keys
    /// ([`Mvcc::with_dense_keys`]).
    pub(super) dense_keys: u64,
    /// Held across each commit of a design whose certifier asks for it
    /// ([`Certifier::SERIAL_COMMIT`]).
    pub(super) commit_latch: Mutex<()>,
    /// The latest end timestamp of a committed transaction that saw a key
    /// absent (an absent read, or a scan's leaves), for the Serial Safety
    /// Net: an insert overwrites no version that could carry its readers'
    /// stamp. Read and written under the commit latch.
    pub(super) absent_pstamp: AtomicU64,
    /// The mutant ([`Mvcc::mutant_skipping_validation`]): serializable in
    /// everything but the commit-time validation, which it skips.
    #[cfg(feature = "mutant")]
    pub(super) mutant_skip_validation: bool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the last runner is gone; the versions still linked from
        // a chain are owned by it alone (versions cut off earlier were
        // retired separately).
        let free_chain = |chain: &Chain| unsafe {
            let mut v = chain.head.load(Ordering::Relaxed);
            while !v.is_null() {
                let prev = (&*v).prev.load(Ordering::Relaxed);
                free_version(v);
                v = prev;
            }
        };
        for t in self.tables.tables_mut() {
            let Table { tree, dense } = t;
            tree.for_each_value(|c| {
                let c = c.cast_mut();
                // The array's chains are freed with it, below.
                if !in_array(dense, c) {
                    // SAFETY: the index owns the chains it maps to,
                    // outside the array.
                    free_chain(&*unsafe { Box::from_raw(c) });
                }
            });
            dense.iter().for_each(free_chain);
        }
    }
}

impl Shared {
    /// The state and end timestamp of transaction (slot, seq): see
    /// [`Slot::status`].
    #[inline]
    pub(super) fn status(&self, slot: usize, seq: u64) -> Option<(u64, u64)> {
        self.slots[slot].status(seq)
    }

    pub(super) fn begin_seen(&self, f: u64, rt: u64, me: u64) -> Seen {
        if f & REF == 0 {
            return if f < rt { Seen::Yes } else { Seen::No };
        }
        if f == me {
            return Seen::Yes;
        }
        let (slot, seq) = ref_parts(f);
        match self.status(slot, seq) {
            None => Seen::Again,
            Some((ACTIVE | ABORTED, _)) => Seen::No,
            Some((COMMITTED, e)) => {
                if e < rt {
                    Seen::Yes
                } else {
                    Seen::No
                }
            }
            Some((_, e)) if e < rt => Seen::YesIf(slot, seq),
            Some(_) => Seen::No,
        }
    }

    pub(super) fn end_seen(&self, f: u64, rt: u64, me: u64) -> Seen {
        if f & REF == 0 {
            return if rt < f { Seen::Yes } else { Seen::No };
        }
        if f == me {
            return Seen::No;
        }
        let (slot, seq) = ref_parts(f);
        match self.status(slot, seq) {
            None => Seen::Again,
            Some((ACTIVE | ABORTED, _)) => Seen::Yes,
            Some((COMMITTED, e)) => {
                if rt < e {
                    Seen::Yes
                } else {
                    Seen::No
                }
            }
            Some((_, e)) if e < rt => Seen::NoIf(slot, seq),
            Some(_) => Seen::Yes,
        }
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A writer in slot 0 commits its transaction 1 (`Slot::prepare`,
    /// then the outcome as `Txn::finish` stores it) while a reader in
    /// slot 1 takes its read time (`Slot::take_read_time`) and looks the
    /// writer up, as a reader that meets the writer's reference in a
    /// version does (`Slot::status`). A writer seen ACTIVE ends above the
    /// reader's read time (its versions are rightly invisible, the ones
    /// it replaces still valid); one seen PREPARING or COMMITTED comes
    /// with its end timestamp: never INF, never its previous
    /// transaction's end.
    #[test]
    fn loom_commit_publication() {
        loom::model(|| {
            let clock = Arc::new(AtomicU64::new(3));
            let slots = Arc::new([Slot::default(), Slot::default()]);
            // The writer's transaction 0 committed at 2; transaction 1
            // has taken its read time and written.
            slots[0].end.store(2, Ordering::Relaxed);
            slots[0].word.store(1 << 2 | ACTIVE, Ordering::Relaxed);
            let writer = {
                let (clock, slots) = (clock.clone(), slots.clone());
                loom::thread::spawn(move || {
                    let e = slots[0].prepare(1, &clock);
                    // As `Txn::finish` publishes the outcome.
                    slots[0].word.store(1 << 2 | COMMITTED, Ordering::SeqCst);
                    e
                })
            };
            let rt = slots[1].take_read_time(1, &clock);
            // `None`: the word changed between status's loads (Seen::Again:
            // the caller looks again).
            let seen = loop {
                if let Some(seen) = slots[0].status(1) {
                    break seen;
                }
            };
            let e = writer.join().unwrap();
            match seen {
                (ACTIVE, _) => assert!(e > rt, "seen ACTIVE, but ended at {e} below {rt}"),
                (state, end) => assert_eq!(end, e, "seen in state {state} with end {end}"),
            }
        });
    }
}
