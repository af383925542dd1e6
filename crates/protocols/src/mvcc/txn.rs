//! A transaction: reads at its read time, writes on the newest version,
//! and commit (validation for Hekaton, none for SI).

use super::*;

/// A transaction in progress.
pub struct Txn<'r, C: Certifier> {
    pub(super) db: &'r Shared,
    pub(super) guard: Guard,
    pub(super) st: &'r mut State,
    pub(super) slot: usize,
    pub(super) seq: u64,
    pub(super) me: u64,
    /// The read time (begin timestamp); 0 until taken by
    /// [`Txn::read_time`].
    pub(super) rt: u64,
    pub(super) oldest: u64,
    pub(super) certifier: PhantomData<C>,
}

/// What a field says about visibility.
pub(super) enum Seen {
    Yes,
    No,
    /// Yes, if the transaction in this slot (with this seq) commits.
    YesIf(usize, u64),
    /// No, if it commits.
    NoIf(usize, u64),
    /// The transaction finished meanwhile: read the field again.
    Again,
}

/// An in-place change to a value, as [`Tx::update`] passes it down.
pub(super) type Modify<'a> = &'a mut dyn FnMut(&mut [u8]);

impl<'r, C: Certifier> Txn<'r, C> {
    /// Take a dependency on (slot, seq): `Ok(true)` registered, `Ok(false)`
    /// the transaction has finished (look again).
    pub(super) fn depend(&self, slot: usize, seq: u64) -> Result<bool, TxError> {
        let w = &self.db.slots[slot];
        let mut d = w.dependents.lock().unwrap_or_else(|p| p.into_inner());
        if d.seq != seq {
            return Ok(false);
        }
        d.waiting.push(self.slot);
        // SeqCst: as every word of the dependency protocol (module doc):
        // counted before the writer, which takes the lock we hold to finish,
        // can decrement it.
        self.db.slots[self.slot]
            .pending
            .fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }

    /// The version of `chain` valid at `rt` for this transaction (taking
    /// dependencies as needed), or null.
    pub(super) fn visible(&self, chain: &Chain, rt: u64) -> Result<*mut Version, TxError> {
        'again: loop {
            // Acquire: a chain link (module doc): the version's fields and
            // value, written before it was linked, are seen.
            let mut v = chain.head.load(Ordering::Acquire);
            while !v.is_null() {
                // SAFETY: reached from the chain while pinned.
                let ver = unsafe { &*v };
                // Acquire: as every version field (module doc): what its writer
                // published before the timestamp or reference is seen.
                let b = ver.begin.load(Ordering::Acquire);
                let begun = match self.db.begin_seen(b, rt, self.me) {
                    Seen::Again => continue 'again,
                    Seen::Yes => true,
                    Seen::No => false,
                    Seen::YesIf(s, q) => {
                        if !self.depend(s, q)? {
                            continue 'again;
                        }
                        true
                    }
                    Seen::NoIf(..) => unreachable!("begin fields give YesIf"),
                };
                if begun {
                    // Acquire: as every version field (module doc).
                    let e = ver.end.load(Ordering::Acquire);
                    let valid = match self.db.end_seen(e, rt, self.me) {
                        Seen::Again => continue 'again,
                        Seen::Yes => true,
                        Seen::No => false,
                        Seen::NoIf(s, q) => {
                            if !self.depend(s, q)? {
                                continue 'again;
                            }
                            false
                        }
                        Seen::YesIf(..) => unreachable!("end fields give NoIf"),
                    };
                    return Ok(if valid { v } else { std::ptr::null_mut() });
                }
                // Acquire: a chain link (module doc).
                v = ver.prev.load(Ordering::Acquire);
            }
            return Ok(std::ptr::null_mut());
        }
    }

    pub(super) fn chain(
        &mut self,
        t: TableId,
        key: &[u8],
        create: bool,
    ) -> Result<Option<&'r Chain>, TxError> {
        check_key(key)?;
        let db: &'r Shared = self.db;
        let table = db.tables.get(t)?;
        if let Some(c) = table.dense(key) {
            // Acquire: as every load of a chain link (module doc).
            if create && c.head.load(Ordering::Acquire).is_null() {
                // Into the index before the chain's first version, so a
                // scan that missed the key sees its leaf change. (An
                // aborted first write leaves the key indexed to an empty
                // chain, which reads as absent; so does a second hook.)
                let p = c as *const Chain;
                match table.tree.insert(key, p, &mut Pin(&self.guard)) {
                    Insert::Inserted(change) => self.own_change(change),
                    Insert::Exists { value } => debug_assert_eq!(value, p),
                }
            }
            return Ok(Some(c));
        }
        let tree = &table.tree;
        if let Some(c) = self.st.hints.take(t, key) {
            // SAFETY: found in the tree by this transaction, while pinned
            // (as below). A chain unhooked since is handled as one
            // unhooked after a lookup: its deletion's end is `DEAD`, so a
            // write conflicts and a serializable read fails validation;
            // any chain that replaced it began after this transaction.
            return Ok(Some(unsafe { &*(c as *const Chain) }));
        }
        if tree.has_point_index() {
            if let Some(c) = tree.find(key, &Pin(&self.guard)) {
                // SAFETY: as below.
                return Ok(Some(unsafe { &*c }));
            }
        }
        let l = tree.get(key, &Pin(&self.guard));
        if let Some(c) = l.value {
            // SAFETY: reachable from the tree while pinned; a chain is
            // retired through the epoch only once its key has left the
            // tree (`unhook_due`), so it outlives this transaction.
            return Ok(Some(unsafe { &*c }));
        }
        if !create {
            if C::RECORDS_READS {
                // An absent key: its leaf guards against a later insert.
                self.st.nodes.push((l.leaf, l.version));
            }
            return Ok(None);
        }
        let fresh = Box::into_raw(Box::new(Chain {
            head: AtomicPtr::new(std::ptr::null_mut()),
        }));
        let c = match tree.insert(key, fresh.cast_const(), &mut Pin(&self.guard)) {
            Insert::Inserted(change) => {
                self.own_change(change);
                fresh
            }
            Insert::Exists { value } => {
                // SAFETY: never published.
                drop(unsafe { Box::from_raw(fresh) });
                value
            }
        };
        // SAFETY: as above.
        Ok(Some(unsafe { &*c }))
    }

    pub(super) fn own_change(&mut self, c: NodeChange) {
        let mut split = false;
        for n in &mut self.st.nodes {
            if n.0 == c.leaf && n.1 == c.old_version {
                n.1 = c.new_version;
                split |= c.split.is_some();
            }
        }
        if split {
            self.st.nodes.push(c.split.expect("split"));
        }
    }

    pub(super) fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        // Before the lookup: an absent key is seen at the read time too.
        let rt = self.read_time();
        let Some(chain) = self.chain(t, key, false)? else {
            return Ok(None);
        };
        let v = self.visible(chain, rt)?;
        if C::RECORDS_READS {
            self.st
                .reads
                .push((chain as *const Chain as usize, v as usize));
        }
        if v.is_null() {
            return Ok(None);
        }
        // SAFETY: pinned; a visible version's value is no longer written
        // (or is this transaction's own).
        Ok(unsafe { (*v).value() })
    }

    /// Install this transaction's version of `key`: `value` (None:
    /// delete), or with `modify`, a copy of the visible value changed in
    /// place (nothing is written if none is visible; the read counts for
    /// validation). Returns whether a value was visible before.
    pub(super) fn write(
        &mut self,
        t: TableId,
        key: &[u8],
        value: Option<&[u8]>,
        new: bool,
        modify: Option<Modify<'_>>,
    ) -> Result<bool, TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        let rt = self.read_time();
        let Some(chain) = self.chain(t, key, modify.is_none())? else {
            return Ok(false);
        };
        // Acquire: a chain link (module doc): the version's fields are seen.
        let head = chain.head.load(Ordering::Acquire);
        if !head.is_null() {
            // SAFETY: pinned.
            let h = unsafe { &*head };
            // Acquire: as every version field (module doc).
            if h.begin.load(Ordering::Acquire) == self.me {
                // Our own version: change it in place.
                // SAFETY: uncommitted and ours; no one else reads it.
                let cur = unsafe { h.value_mut() };
                let existed = cur.is_some();
                if let Some(f) = modify {
                    if let Some(v) = cur {
                        f(v);
                    }
                    return Ok(existed);
                }
                if new && existed {
                    return Err(Error::KeyExists.into());
                }
                // SAFETY: as above.
                if !unsafe { h.overwrite(value) } {
                    self.regrow(chain, head, value);
                }
                if value.is_none() {
                    self.deleted(t, key, chain);
                }
                return Ok(existed);
            }
        }
        // Only the newest version may be updated, and only if it is the
        // one this transaction sees (first updater wins).
        let seen = self.visible(chain, rt)?;
        // SAFETY: pinned.
        let seen_value = (!seen.is_null())
            .then(|| unsafe { (*seen).value() })
            .flatten();
        if modify.is_some() && seen_value.is_none() {
            // Nothing to change: what remains is a read of the absence.
            // (A read that is followed by a version of ours needs no
            // validation: the version read stays the newest, its end
            // claimed by us, until we finish.)
            if C::RECORDS_READS {
                self.st
                    .reads
                    .push((chain as *const Chain as usize, seen as usize));
            }
            return Ok(false);
        }
        // The newest version must be the one we see (a committed deletion
        // included); anything else is newer than our read time, or
        // uncommitted, or being committed: the first updater wins.
        let mut newest_seen = seen == head;
        if newest_seen && !head.is_null() {
            // Not on top of a version whose writer is still committing: if
            // it aborted, it would unlink its version from under ours.
            // SAFETY: pinned.
            let h = unsafe { &*head };
            // Acquire: as every version field (module doc).
            let b = h.begin.load(Ordering::Acquire);
            if b & REF != 0 {
                let (slot, seq) = ref_parts(b);
                newest_seen = matches!(self.db.status(slot, seq), Some((COMMITTED, _))) || {
                    // Postprocessed meanwhile?
                    // Acquire: as every version field: the postprocessed
                    // timestamp comes with its writer's outcome.
                    let b = h.begin.load(Ordering::Acquire);
                    b & REF == 0 && b < rt
                };
            }
        }
        if !newest_seen {
            return Err(TxError::Conflict(AbortReason::WriteConflict));
        }
        let existed = seen_value.is_some();
        if new && existed {
            return Err(Error::KeyExists.into());
        }
        if !head.is_null() {
            // SAFETY: pinned.
            let h = unsafe { &*head };
            if !h.claim_end(self.me) {
                return Err(TxError::Conflict(AbortReason::WriteConflict));
            }
        }
        let deleting = value.is_none() && modify.is_none();
        let v = match modify {
            Some(f) => {
                let v = new_version(self.me, head, seen_value);
                // SAFETY: ours and unpublished.
                if let Some(bytes) = unsafe { (*v).value_mut() } {
                    f(bytes);
                }
                v
            }
            None => new_version(self.me, head, value),
        };
        // AcqRel: Release links our version (fields and value written) on top,
        // as every link (module doc); Acquire sees the head a rival first
        // insert linked.
        if chain
            .head
            .compare_exchange(head, v, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Only an empty chain can race here (a non-empty head's end
            // was ours to claim): another first insert won.
            debug_assert!(head.is_null());
            // SAFETY: never published.
            unsafe { free_version(v) };
            return Err(TxError::Conflict(AbortReason::WriteConflict));
        }
        self.st
            .writes
            .push((chain as *const Chain as usize, v as usize, head as usize));
        if deleting {
            self.deleted(t, key, chain);
        }
        Ok(existed)
    }

    /// Note a deletion of `key`, whose chain leaves the index once every
    /// reader sees it (`unhook_due`); an array chain stays.
    pub(super) fn deleted(&mut self, t: TableId, key: &[u8], chain: &Chain) {
        let c = chain as *const Chain;
        if self.db.tables.get(t).is_ok_and(|table| !table.owns(c)) {
            self.st.deletes.push((t, key.into(), c as usize));
        }
    }

    /// Replace our own version `old`, the head of `chain`, with a larger
    /// one holding `value`. Only we change a chain whose head is our
    /// uncommitted version; a reader may still be on `old` (it skips it:
    /// its begin names us), so it is retired through the epoch. Reads of
    /// `old` recorded for validation stay as they are: its begin still
    /// names us, and validation skips our own versions.
    pub(super) fn regrow(&mut self, chain: &Chain, old: *mut Version, value: Option<&[u8]>) {
        // Acquire: a chain link (module doc).
        // SAFETY: our own version, pinned.
        let prev = unsafe { (&*old).prev.load(Ordering::Acquire) };
        let v = new_version(self.me, prev, value);
        // Release: links the regrown version, its fields and value written
        // (module doc).
        chain.head.store(v, Ordering::Release);
        let w = self
            .st
            .writes
            .iter_mut()
            .find(|w| w.1 == old as usize)
            .expect("our version is in the write set");
        w.1 = v as usize;
        // SAFETY: unlinked above; retired once.
        unsafe { retire_versions(&self.guard, vec![old as usize]) };
    }

    /// The read time, taken now if not yet (the counter's first
    /// increment, Hekaton's begin timestamp): at the start of the first
    /// read, write or scan, so that everything the transaction sees,
    /// absent keys included, is seen at it. Before it, at most
    /// `prefetch_many` has sent for lines (it takes the read time before
    /// it looks anything up); the transaction has written nothing, so no
    /// one can depend on it or meet its slot's sequence number.
    #[inline]
    pub(super) fn read_time(&mut self) -> u64 {
        if self.rt == 0 {
            self.rt = Self::take_read_time(self.db, self.slot, self.seq);
        }
        self.rt
    }

    #[inline(never)]
    pub(super) fn take_read_time(db: &Shared, slot: usize, seq: u64) -> u64 {
        // Publish a lower bound of the read time before taking it, so the
        // garbage collector never misses this transaction.
        db.slots[slot].take_read_time(seq, &db.clock)
    }

    /// Certify, wait for dependencies, and finish. Returns the end
    /// timestamp (a read-only transaction's: its read time, unless its
    /// design certifies read-only transactions too).
    pub(super) fn commit(&mut self) -> Result<u64, AbortReason> {
        let db = self.db;
        let s = &db.slots[self.slot];
        // Held to the end of the commit (the outcome published), so each
        // commit sees every earlier one whole (`Certifier::SERIAL_COMMIT`).
        let _latch =
            C::SERIAL_COMMIT.then(|| db.commit_latch.lock().unwrap_or_else(|p| p.into_inner()));
        if self.st.writes.is_empty() && !C::SERIAL_COMMIT {
            // Read-only: it commits at its read time, with neither the
            // counter's second increment nor validation. Everything it
            // read is the state at that time (versions of transactions
            // that end below it, absent keys included: a deletion leaves
            // the tree only below every published read time), and it
            // waits for the writers it read from that are still
            // committing; so it is serializable there, among transactions
            // ordered by their end timestamps, and under SI too.
            self.wait_for_dependencies();
            // SeqCst: as below, the aborting writer set the flag before it
            // decremented `pending`, which the wait saw reach zero.
            let r = if s.abort_now.load(Ordering::SeqCst) {
                Err(AbortReason::CommitDependency)
            } else {
                Ok(self.rt)
            };
            self.finish(r.is_ok(), self.rt);
            return r;
        }
        // PREPARING first, with the end timestamp unknown, and only then
        // the second increment. A transaction still seen ACTIVE has not
        // taken its end timestamp, so it will be above every timestamp
        // its observer already holds (Hekaton §3: an active writer's
        // version is invisible, the version it replaces still valid);
        // one seen PREPARING with the timestamp unknown is waited for
        // (`Slot::prepare`, `Slot::status`). Taking the timestamp while still ACTIVE
        // let a validation pass over a writer that then committed below
        // it (found by `granary check ycsb --protocol hekaton`).
        let e = s.prepare(self.seq, &db.clock);
        let mut certified = Ok(e);
        #[cfg(feature = "mutant")]
        let validates = !db.mutant_skip_validation;
        #[cfg(not(feature = "mutant"))]
        let validates = true;
        if validates {
            certified = C::certify(self, e);
        }
        let mut r = certified.map(|_| e);
        // Hekaton §3.2: a transaction with commit dependencies waits for
        // them before it can commit (they all end below our end time, so
        // the waits are acyclic).
        self.wait_for_dependencies();
        // SeqCst: an aborting writer sets the flag before it decrements
        // `pending`, which the wait above saw reach zero.
        if r.is_ok() && s.abort_now.load(Ordering::SeqCst) {
            r = Err(AbortReason::CommitDependency);
        }
        if let (Ok(_), Ok(c)) = (r, certified) {
            C::install(self, e, c);
        }
        if r.is_ok() {
            let st = &mut *self.st;
            for &(_, _, old) in &st.writes {
                // SAFETY: we still own each chain we wrote (our versions
                // are on top, uncommitted); pinned.
                unsafe { truncate(old as *mut Version, self.oldest, &mut st.garbage) };
            }
            if st.garbage.len() >= RETIRE_BATCH {
                let garbage =
                    std::mem::replace(&mut st.garbage, Vec::with_capacity(2 * RETIRE_BATCH));
                // SAFETY: cut off by this runner's commits (unreachable
                // for any thread that pins from now on), each listed once.
                unsafe { retire_versions(&self.guard, garbage) };
            }
        }
        self.finish(r.is_ok(), e);
        r
    }

    /// Hekaton's read validation (Larson et al. §3.2, "Validation"):
    /// every leaf a scan or an absent read saw still has the version it
    /// had (no phantom), and every version read is still the one visible
    /// at end timestamp `e`. Needs [`Certifier::RECORDS_READS`].
    pub fn validate_reads(&self, e: u64) -> Result<(), AbortReason> {
        self.validate_nodes()?;
        for &(chain, seen) in &self.st.reads {
            // A read of this transaction's own write needs no validation
            // (and its version is invisible to `visible_ignoring_own`).
            let own = seen != 0 && {
                // SAFETY: a version we read is alive while we are pinned.
                let v = unsafe { &*(seen as *const Version) };
                // Acquire: as every version field (module doc).
                v.begin.load(Ordering::Acquire) == self.me
            };
            if own {
                continue;
            }
            // SAFETY: we reached it while pinned, and still are (see
            // `chain`).
            let chain = unsafe { &*(chain as *const Chain) };
            // What is valid at our end time, looking past our own writes:
            // it must be what we read.
            let now = match self.visible_ignoring_own(chain, e) {
                Some(v) => v,
                None => return Err(AbortReason::ReadValidation),
            };
            if now as usize != seen {
                return Err(AbortReason::ReadValidation);
            }
            // A deletion whose key has left the tree since: a new chain
            // may hold a newer version, which this chain cannot show.
            if seen != 0 {
                // SAFETY: a version we read is alive while we are pinned.
                let v = unsafe { &*(seen as *const Version) };
                // Acquire: as every read of an end field (`visible`).
                if v.end.load(Ordering::Acquire) == DEAD {
                    return Err(AbortReason::ReadValidation);
                }
            }
        }
        Ok(())
    }

    /// Every leaf a scan or an absent read saw still has the version it
    /// had: no key came or went in a range this transaction looked at
    /// (phantoms, checked as Silo §4.6 does).
    pub fn validate_nodes(&self) -> Result<(), AbortReason> {
        for &(leaf, v) in &self.st.nodes {
            // SAFETY: `self.guard` has pinned us since the leaf was read (an
            // unlinked leaf is freed only after the grace period).
            if unsafe { leaf.version() } != v {
                return Err(AbortReason::NodeValidation);
            }
        }
        Ok(())
    }

    /// The committed version valid at `e`, ignoring this transaction's
    /// own writes; `None` if that depends on a transaction still
    /// committing (conservatively: fail).
    pub(super) fn visible_ignoring_own(&self, chain: &Chain, e: u64) -> Option<*mut Version> {
        // Acquire: a chain link (module doc): the version's fields and value
        // are seen.
        let mut v = chain.head.load(Ordering::Acquire);
        while !v.is_null() {
            // SAFETY: pinned.
            let ver = unsafe { &*v };
            // Acquire: as every version field (module doc).
            let b = ver.begin.load(Ordering::Acquire);
            if b != self.me {
                match self.db.begin_seen(b, e, self.me) {
                    Seen::Yes => {
                        // Acquire: as every version field (module doc).
                        let f = ver.end.load(Ordering::Acquire);
                        return match f {
                            f if f == self.me => Some(v),
                            f => match self.db.end_seen(f, e, self.me) {
                                Seen::Yes => Some(v),
                                Seen::No => Some(std::ptr::null_mut()),
                                _ => None,
                            },
                        };
                    }
                    Seen::No => {}
                    _ => return None,
                }
            }
            // Acquire: a chain link (module doc).
            v = ver.prev.load(Ordering::Acquire);
        }
        Some(std::ptr::null_mut())
    }

    pub(super) fn wait_for_dependencies(&self) {
        let s = &self.db.slots[self.slot];
        let mut spins = 0;
        // SeqCst: pairs with the dependents' decrements (`finish`): at zero,
        // every `abort_now` set before them is seen.
        while s.pending.load(Ordering::SeqCst) != 0 {
            crate::sync::backoff(&mut spins);
        }
    }

    /// Publish the outcome, postprocess the versions written (timestamps
    /// in, or the aborted versions out), and tell dependents.
    pub(super) fn finish(&mut self, committed: bool, e: u64) {
        let db = self.db;
        let s = &db.slots[self.slot];
        // Dependencies resolve before the slot may move on (their
        // decrements would otherwise land on the next transaction).
        self.wait_for_dependencies();
        let state = if committed { COMMITTED } else { ABORTED };
        // SeqCst: the outcome is in the slot word (`Slot::status`) before the
        // versions' timestamps below replace our reference.
        s.word.store(self.seq << 2 | state, Ordering::SeqCst);
        for &(chain, new, old) in self.st.writes.iter().rev() {
            // SAFETY: our versions and chains; pinned.
            let (chain, newv) = unsafe { (&*(chain as *const Chain), &*(new as *const Version)) };
            // SAFETY: the version we superseded: alive while pinned.
            let oldv = (old != 0).then(|| unsafe { &*(old as *const Version) });
            if committed {
                // Release (both): as every version field (module doc): a reader
                // that sees the timestamp also sees the outcome published
                // above.
                newv.begin.store(e, Ordering::Release);
                if let Some(o) = oldv {
                    o.end.store(e, Ordering::Release);
                }
            } else {
                // Release: as every version field: INF (never visible) replaces
                // our reference once the outcome is published.
                newv.begin.store(INF, Ordering::Release);
                // Unlink our version: no one links on top of a version
                // whose writer has not committed.
                // AcqRel/Acquire: the unlink is a chain link store (Release)
                // that reads the head (Acquire), as every link (module doc).
                let _ = chain.head.compare_exchange(
                    new as *mut Version,
                    old as *mut Version,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                if let Some(o) = oldv {
                    // Release: the superseded version is claimable again; its
                    // next claimant (Acquire in `Stamps::claim_end`) sees our
                    // unlink above.
                    o.end.store(INF, Ordering::Release);
                }
                // SAFETY: unlinked above; retired once.
                unsafe { retire_versions(&self.guard, vec![new]) };
            }
        }
        if !committed {
            self.st.writes.clear();
        }
        // Tell dependents (Hekaton §3.2), and close the list: it names the
        // slot's next transaction from now on, so a late registrant looks
        // again and finds the versions postprocessed.
        let mut d = s.dependents.lock().unwrap_or_else(|p| p.into_inner());
        for w in d.waiting.drain(..) {
            let t = &db.slots[w];
            if !committed {
                // SeqCst: the flag is set before the decrement below, which the
                // dependent waits for (`wait_for_dependencies`).
                t.abort_now.store(true, Ordering::SeqCst);
            }
            // SeqCst: releases the flag above to the dependent that sees its
            // count reach zero.
            t.pending.fetch_sub(1, Ordering::SeqCst);
        }
        d.seq = self.seq + 1;
    }
}

impl<C: Certifier> Tx for Txn<'_, C> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.read(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value), false, None).map(|_| ())
    }

    fn prefetch(&mut self, t: TableId, key: &[u8]) {
        let db: &Shared = self.db;
        if let Ok(table) = db.tables.get(t) {
            match table.dense(key) {
                Some(c) => crate::sync::prefetch(c as *const Chain),
                None => table.tree.prefetch(key, &Pin(&self.guard)),
            }
        }
    }

    /// With a point index, in four waves: every key's bucket, chain,
    /// newest version's header, and the rest of that version; each wave
    /// waits only for lines the one before started fetching. A key with
    /// an array chain starts at its chain.
    fn prefetch_many(&mut self, keys: &[(TableId, &[u8])]) {
        const WAVE: usize = Tree::FIND_MANY;
        const MOST_LINES: usize = 32;
        let db: &Shared = self.db;
        let pin = Pin(&self.guard);
        for &(t, k) in keys {
            if let Ok(table) = db.tables.get(t) {
                if let Some(c) = table.dense(k) {
                    crate::sync::prefetch(c as *const Chain);
                } else {
                    table.tree.prefetch(k, &pin);
                }
            }
        }
        // The counter's increment, while those lines are on their way
        // (a prefetch is not held back by the locked increment, the loads
        // below would be).
        if self.rt == 0 {
            self.rt = Self::take_read_time(db, self.slot, self.seq);
        }
        for chunk in keys.chunks(WAVE) {
            let mut ps = [0usize; WAVE];
            // Each run of keys of one table: the array's chains (their
            // lines on their way since the first loop), and the index's,
            // found together (`Tree::find_many`).
            for run in granary_api::table_runs(chunk) {
                let t = chunk[run.start].0;
                let Ok(table) = db.tables.get(t) else {
                    continue;
                };
                let (mut which, mut ks, mut m) = ([0; WAVE], [&[][..]; WAVE], 0);
                for i in run {
                    match table.dense(chunk[i].1) {
                        Some(c) => ps[i] = c as *const Chain as usize,
                        None => (which[m], ks[m], m) = (i, chunk[i].1, m + 1),
                    }
                }
                // Without a point index a lone key is left to its lookup
                // (as Silo's `prefetch_many` does).
                if m < 2 && !table.tree.has_point_index() {
                    continue;
                }
                let mut found = [None; WAVE];
                table.tree.find_many(&ks[..m], &mut found[..m], &pin);
                for (&i, c) in which.iter().zip(found).take(m) {
                    if let Some(c) = c {
                        ps[i] = c as usize;
                        crate::sync::prefetch(c);
                        self.st.hints.push(t, chunk[i].1, c as usize);
                    }
                }
            }
            for p in ps.iter_mut().filter(|p| **p != 0) {
                // SAFETY: reachable from the tree while pinned (see
                // `chain`).
                // Acquire: as every load of a chain link (module doc).
                let head = unsafe { &*(*p as *const Chain) }
                    .head
                    .load(Ordering::Acquire);
                *p = head as usize;
                crate::sync::prefetch(head);
            }
            for &p in ps.iter().filter(|p| **p != 0) {
                // SAFETY: a version reachable while pinned; its room is
                // immutable.
                let v = unsafe { &*(p as *const Version) };
                let n = v.footprint().div_ceil(64).min(MOST_LINES);
                granary_index::prefetch_lines((p as *const u8).wrapping_add(64), n - 1);
                // The version below: a writer's commit cuts the chain
                // under the version it supersedes (`truncate`), reading it.
                // Acquire: as every load of a chain link (module doc).
                crate::sync::prefetch(v.prev.load(Ordering::Acquire));
            }
        }
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // One descent and one copy: the new version starts as a copy of
        // the visible one and is changed in place.
        let (mut f, mut out) = (Some(f), None);
        let found = self.write(
            t,
            key,
            None,
            false,
            Some(&mut |v: &mut [u8]| out = f.take().map(|f| f(v))),
        )?;
        Ok(if found { out } else { None })
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value), true, None).map(|_| ())
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        if self.read(t, key)?.is_none() {
            return Ok(false);
        }
        self.write(t, key, None, false, None)
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: F,
    ) -> Result<(), TxError> {
        check_bounds(lo, hi)?;
        if limit == 0 {
            return Ok(());
        }
        let db: &Shared = self.db;
        let tree = &db.tables.get(t)?.tree;
        let serializable = C::RECORDS_READS;
        let rt = self.read_time();
        let mut batch = std::mem::take(&mut self.st.batch);
        batch.start();
        let mut n = 0;
        let r = 'scan: loop {
            let want = (limit - n).clamp(1, 64);
            let nodes = &mut self.st.nodes;
            let more = batch.next(tree, lo, hi, reverse, want, &Pin(&self.guard), |leaf, v| {
                if serializable {
                    nodes.push((leaf, v));
                }
            });
            if !more {
                break Ok(());
            }
            for (k, c) in batch.iter() {
                // SAFETY: read from the tree while pinned (see `chain`).
                let chain = unsafe { &*c };
                let v = match self.visible(chain, rt) {
                    Ok(v) => v,
                    Err(e) => break 'scan Err(e),
                };
                if serializable {
                    self.st.reads.push((c as usize, v as usize));
                }
                if v.is_null() {
                    continue;
                }
                // SAFETY: pinned; visible values are immutable (or ours).
                if let Some(val) = unsafe { (*v).value() } {
                    n += 1;
                    if !f(k, val) || n == limit {
                        break 'scan Ok(());
                    }
                }
            }
        };
        self.st.batch = batch;
        r
    }
}
