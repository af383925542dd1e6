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
    /// Its end timestamp, once it has one (published before PREPARING).
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
                let c = c as *mut Chain;
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
    /// The state and end timestamp of transaction (slot, seq), or `None`
    /// if the slot has moved on (the field that named it has been
    /// rewritten since).
    ///
    /// A transaction that is PREPARING but has not published its end
    /// timestamp yet is waited for (a few instructions): its timestamp may
    /// be below or above the caller's, and visibility depends on which.
    pub(super) fn status(&self, slot: usize, seq: u64) -> Option<(u64, u64)> {
        let s = &self.slots[slot];
        let mut spins = 0;
        loop {
            let w = s.word.load(Ordering::SeqCst);
            let end = s.end.load(Ordering::SeqCst);
            if w >> 2 != seq || s.word.load(Ordering::SeqCst) != w {
                return None;
            }
            if w & 3 == PREPARING && end == INF {
                crate::sync::backoff(&mut spins);
                continue;
            }
            return Some((w & 3, end));
        }
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
