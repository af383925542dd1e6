//! A procedure's view of the store while it executes (`Txn`), and a
//! closure run alone with the pipeline held (`Alone`).

use super::*;

/// A procedure running at its timestamp.
pub struct Txn<'a> {
    pub(super) s: &'a Shared,
    pub(super) slot: &'a Slot,
    pub(super) g: &'a crossbeam_epoch::Guard,
    pub(super) declared: &'a Declared,
    /// The declared key after the last one used: a procedure usually
    /// uses its keys in the order it declared them, and the next lookup
    /// tries it first.
    pub(super) cursor: usize,
    pub(super) writes: WriteBuf,
    pub(super) depth: u32,
    /// A read found an input another thread is producing: the run is
    /// abandoned and retried later.
    pub(super) blocked: bool,
    /// Reads so far (see [`LONG_RUN`]).
    pub(super) reads: u32,
}

impl Txn<'_> {
    /// The declared key `key` of table `t`: (its index, whether a write);
    /// a write if it is declared both ways.
    pub(super) fn find(&mut self, t: TableId, key: &[u8]) -> Option<(usize, bool)> {
        let d = self.declared;
        let c = self.cursor;
        let found = match d.get(c) {
            // (A duplicate write goes through the key's first entry.)
            Some((dt, dk, w))
                if dt == t && dk == key && !self.slot.inputs[c].alias.load(Ordering::Relaxed) =>
            {
                Some((c, w))
            }
            _ => {
                let mut read = None;
                let mut write = None;
                for (e, (dt, dk, w)) in d.iter().enumerate() {
                    if dt == t && dk == key {
                        if w {
                            write = Some((e, true));
                            break;
                        }
                        read = read.or(Some((e, false)));
                    }
                }
                write.or(read)
            }
        };
        if let Some((e, _)) = found {
            self.cursor = e + 1;
        }
        found
    }

    /// The declared write of `key`: its index and placeholder (its table
    /// existed when the batch was planned).
    pub(super) fn placeholder(
        &mut self,
        t: TableId,
        key: &[u8],
    ) -> Result<(usize, *mut Version), TxError> {
        let e = match self.find(t, key) {
            Some((e, true)) => e,
            // Declared as a read: is it declared as a write too?
            Some(_) => self
                .declared
                .iter()
                .position(|(dt, dk, w)| w && dt == t && dk == key)
                .ok_or_else(|| Self::undeclared(t))?,
            None => return Err(Self::undeclared(t)),
        };
        // Acquire: pairs with planning's Release store of the placeholder
        // (module doc).
        let v = self.slot.inputs[e].v.load(Ordering::Acquire);
        if v.is_null() {
            return Err(Error::UnknownTableId(t.index()).into());
        }
        Ok((e, v))
    }

    pub(super) fn undeclared(t: TableId) -> TxError {
        Error::Undeclared(format!(
            "BOHM plans writes from the declared write set; table {} key not declared",
            t.index()
        ))
        .into()
    }

    /// This procedure's own buffered write of `key`, if any (a null
    /// value: its deletion).
    pub(super) fn own(&self, t: TableId, key: &[u8]) -> Option<*mut Data> {
        self.writes.entries.iter().find_map(|&(e, d)| {
            let (dt, dk, _) = self.declared.get(e)?;
            (dt == t && dk == key).then_some(d)
        })
    }

    /// What this procedure reads at `key`: its own write, or the version
    /// visible at its timestamp. A key it declared is found without the
    /// index: below its own placeholder for a write, through the CC
    /// thread's annotation for a read (§3.2.3).
    pub(super) fn read<'v>(&mut self, t: TableId, key: &[u8]) -> Result<Option<&'v [u8]>, TxError> {
        let Some((e, write)) = self.find(t, key) else {
            return self.visible(t, key);
        };
        let own = match write {
            true => self.writes.get(e),
            false if self.writes.entries.is_empty() => None,
            false => self.own(t, key),
        };
        if let Some(d) = own {
            // SAFETY: our own value, alive until the run ends.
            return Ok((!d.is_null()).then(|| unsafe { (*d).value() }).flatten());
        }
        // Acquire: pairs with planning's Release store of the input (module
        // doc).
        let v = self.slot.inputs[e].v.load(Ordering::Acquire);
        if write {
            if v.is_null() {
                return self.visible(t, key); // an unknown table: its error
            }
            // Acquire: a chain link (module doc).
            // SAFETY: our placeholder; the version below it is the newest
            // that began before us (planned in order).
            return self.resolved(unsafe { (*v).prev.load(Ordering::Acquire) });
        }
        if self.s.tables.get(t).is_err() {
            return Err(Error::UnknownTableId(t.index()).into());
        }
        self.resolved(v)
    }

    /// The version of `key` this procedure reads: the newest that began
    /// before it, found through the index.
    pub(super) fn visible<'v>(
        &mut self,
        t: TableId,
        key: &[u8],
    ) -> Result<Option<&'v [u8]>, TxError> {
        check_key(key)?;
        let tree = self.s.tables.get(t)?;
        let Some(c) = tree.find(key, &Pin(self.g)) else {
            return Ok(None);
        };
        self.visible_in(c)
    }

    /// The value chain `c` (an index value) holds at this procedure's
    /// timestamp.
    pub(super) fn visible_in<'v>(&mut self, c: *const Chain) -> Result<Option<&'v [u8]>, TxError> {
        // SAFETY: chains live as long as the database.
        let chain = unsafe { &*c };
        // Acquire: a chain link (module doc): the version's fields and value
        // are seen.
        let mut v = chain.head.load(Ordering::Acquire);
        // SAFETY: versions at or above the one we read are not cut while
        // our batch runs (Condition 3); pinned.
        while !v.is_null() && unsafe { (*v).begin } >= self.slot.ts {
            // Acquire: a chain link (module doc).
            // SAFETY: as above.
            v = unsafe { (*v).prev.load(Ordering::Acquire) };
        }
        self.resolved(v)
    }

    /// The value of version `v` (produced first if need be), or the run
    /// is abandoned: its input is being produced elsewhere.
    pub(super) fn resolved<'v>(&mut self, v: *mut Version) -> Result<Option<&'v [u8]>, TxError> {
        self.reads += 1;
        if self.reads.is_multiple_of(LONG_RUN) {
            hand_back();
        }
        #[cfg(feature = "mutant")]
        let v = {
            let mut v = v;
            let unready = |v: *mut Version| {
                // SAFETY: as in `visible_in`.
                !v.is_null() && !unsafe { &*v }.is_ready()
            };
            while self.s.cfg.mutant_skip_unready && unready(v) {
                // Acquire: a chain link (module doc).
                // SAFETY: as above.
                v = unsafe { (*v).prev.load(Ordering::Acquire) };
            }
            v
        };
        match resolve(self.s, v, self.depth, &mut WriteBuf::default()) {
            Ok(d) => Ok(d),
            Err(Blocked::Later) => {
                self.blocked = true;
                Err(TxError::Conflict(AbortReason::CommitDependency))
            }
        }
    }
}

impl Tx for Txn<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.read(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        check_value(value)?;
        let (i, _) = self.placeholder(t, key)?;
        self.writes.set(i, make_value(value));
        Ok(())
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        let (i, v) = self.placeholder(t, key)?;
        if let Some(d) = self.writes.get(i) {
            // SAFETY: our own value, not yet published.
            return Ok((!d.is_null())
                .then(|| unsafe { (*d).value_mut() })
                .flatten()
                .map(f));
        }
        // The new value is made from the one below our placeholder, in
        // one copy.
        // Acquire: a chain link (module doc).
        // SAFETY: our placeholder, alive while we run.
        let Some(old) = self.resolved(unsafe { (*v).prev.load(Ordering::Acquire) })? else {
            return Ok(None);
        };
        let d = make_value(old);
        // SAFETY: just made, ours alone.
        let r = unsafe { (*d).value_mut() }.map(f);
        self.writes.set(i, d);
        Ok(r)
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        if self.get(t, key)?.is_some() {
            return Err(Error::KeyExists.into());
        }
        self.put(t, key, value)
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        let (i, v) = self.placeholder(t, key)?;
        let existed = match self.writes.get(i) {
            Some(d) => !d.is_null(),
            // Acquire: a chain link (module doc).
            // SAFETY: our placeholder, alive while we run.
            None => self
                .resolved(unsafe { (*v).prev.load(Ordering::Acquire) })?
                .is_some(),
        };
        self.writes.set(i, std::ptr::null_mut());
        Ok(existed)
    }

    /// A scan sees, for each key in range, the version visible at this
    /// procedure's timestamp (or its own write). It is serializable
    /// without predicate locks: every procedure timestamped before this
    /// one was planned before this one runs, and planning puts each key
    /// it writes — inserts included — into the index with a placeholder;
    /// keys that later procedures insert have only versions this one
    /// does not see. (ARCHITECTURE.md, "BOHM".)
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
        let tree = self.s.tables.get(t)?;
        let g = self.g;
        visit(
            &mut ScanBatch::default(),
            tree,
            (lo, hi),
            limit,
            reverse,
            &Pin(g),
            |k, c| match self.own(t, k) {
                // SAFETY: our own value, alive until the run ends.
                Some(d) => Ok((!d.is_null()).then(|| unsafe { (*d).value() }).flatten()),
                None => self.visible_in(c),
            },
            f,
        )
    }
}

/// A closure running alone (nothing else runs in the pipeline meanwhile):
/// writes install committed versions at once, undone on rollback.
pub struct Alone<'a> {
    pub(super) s: &'a Shared,
    pub(super) g: &'a crossbeam_epoch::Guard,
    pub(super) ts: u64,
    /// (chain, the version installed, whether it replaced one of ours)
    pub(super) undo: Vec<(*const Chain, *mut Version)>,
}

impl Alone<'_> {
    pub(super) fn head(&self, t: TableId, key: &[u8]) -> Result<Option<&Chain>, TxError> {
        check_key(key)?;
        let tree = self.s.tables.get(t)?;
        // SAFETY: chains live as long as the database.
        Ok(tree
            .find(key, &Pin(self.g))
            .map(|c| unsafe { &*(c as *const Chain) }))
    }

    /// The newest version's value (everything has completed).
    pub(super) fn latest(chain: &Chain) -> Option<&[u8]> {
        // Acquire: a chain link (module doc): the version's fields are seen.
        let v = chain.head.load(Ordering::Acquire);
        if v.is_null() {
            return None;
        }
        // Acquire: pairs with the Release that published the value
        // (`Version::produce`, or a closure's own).
        // SAFETY: alive while pinned; READY (nothing is in flight).
        let d = unsafe { (*v).data.load(Ordering::Acquire) };
        // SAFETY: READY data is immutable until its version is freed.
        (!d.is_null()).then(|| unsafe { (*d).value() }).flatten()
    }

    pub(super) fn write(
        &mut self,
        t: TableId,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<bool, TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        check_key(key)?;
        if self.s.tables.get(t).is_err() {
            return Err(Error::UnknownTableId(t.index()).into());
        }
        let chain = chain(self.s, t, key, self.g).expect("table exists");
        let existed = Self::latest(chain).is_some();
        // Acquire: a chain link (module doc).
        let head = chain.head.load(Ordering::Acquire);
        let data = value.map_or(std::ptr::null_mut(), |v| Data::alloc((), Some(v), 0));
        // SAFETY: alive while pinned.
        if !head.is_null() && unsafe { (*head).begin } == self.ts {
            // Ours already: replace its value (the old one was never seen
            // by anyone else).
            // AcqRel: Release publishes the new value's bytes with the pointer
            // (readers load it with Acquire); the Acquire half orders nothing
            // (the old value is ours).
            // SAFETY: ours.
            let old = unsafe { (*head).data.swap(data, Ordering::AcqRel) };
            if !old.is_null() {
                // SAFETY: no one else reads our uncommitted version.
                unsafe { Data::free(old) };
            }
            return Ok(existed);
        }
        let v = Box::into_raw(Box::new(Version {
            begin: self.ts,
            producer: std::ptr::null(),
            state: AtomicU8::new(READY),
            data: AtomicPtr::new(data),
            prev: AtomicPtr::new(head),
        }));
        // Release: links the version, its fields and value written, as every
        // link (module doc).
        chain.head.store(v, Ordering::Release);
        self.undo.push((chain as *const Chain, v));
        Ok(existed)
    }

    pub(super) fn commit(&mut self) {
        self.undo.clear();
    }

    pub(super) fn rollback(&mut self) {
        for (chain, v) in self.undo.drain(..).rev() {
            // SAFETY: our chain and version; nothing else runs.
            unsafe {
                // Acquire/Release: the undo relinks the version below, loaded
                // and stored as every chain link (module doc).
                (&*chain)
                    .head
                    .store((*v).prev.load(Ordering::Acquire), Ordering::Release);
                (*v).prev.store(std::ptr::null_mut(), Ordering::Relaxed);
            }
            // A snapshot reader may be passing over it: free it once no
            // pinned thread can hold it.
            let v = v as usize;
            // SAFETY: unlinked above; reachable only by pinned readers.
            self.g
                .defer(move || unsafe { free_chain(v as *mut Version) });
        }
    }
}

impl Tx for Alone<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        Ok(self.head(t, key)?.and_then(Self::latest))
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value)).map(|_| ())
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        if self.get(t, key)?.is_some() {
            return Err(Error::KeyExists.into());
        }
        self.put(t, key, value)
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        if self.get(t, key)?.is_none() {
            return Ok(false);
        }
        self.write(t, key, None)
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
        let tree = self.s.tables.get(t)?;
        if limit == 0 {
            return Ok(());
        }
        let mut n = 0;
        // Nothing changes while we run alone: read inside the index's scan.
        tree.scan(
            lo,
            hi,
            reverse,
            &Pin(self.g),
            |_, _| {},
            |k, c| {
                // SAFETY: chains live as long as the database.
                match Self::latest(unsafe { &*(c as *const Chain) }) {
                    Some(v) => {
                        n += 1;
                        f(k, v) && n < limit
                    }
                    None => true,
                }
            },
        );
        Ok(())
    }
}
