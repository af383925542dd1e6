//! Concurrency control (§3.2.2–3.2.4): each CC thread installs the
//! placeholders of the keys it owns, batch by batch.

use super::*;

/// A CC thread's work (§3.2.2–3.2.4), batch by batch.
pub(super) struct Planner {
    pub(super) me: usize,
    /// Versions this thread superseded, by batch: cut once every
    /// execution thread has finished the batch (Condition 3).
    pub(super) superseded: VecDeque<(u64, *mut Version)>,
    /// Versions cut, to be reused (only this thread makes and cuts its
    /// partition's versions).
    pub(super) pool: Vec<*mut Version>,
    /// Values cut, on their way to the execution threads (see
    /// [`Shared::spare`]).
    pub(super) cut_values: Vec<usize>,
    /// This thread's keys and their chains.
    pub(super) map: ChainMap,
    /// Hash buffers for [`Planner::plan`].
    pub(super) hashes: Vec<u64>,
    pub(super) starts: Vec<u32>,
}

impl Drop for Planner {
    fn drop(&mut self) {
        for v in self.pool.drain(..) {
            // SAFETY: unreachable (cut), pooled once; its data was taken.
            drop(unsafe { Box::from_raw(v) });
        }
        for d in self.cut_values.drain(..) {
            // SAFETY: unreachable (cut), listed once.
            unsafe { Data::free(d as *mut Data) };
        }
    }
}

impl Planner {
    pub(super) fn new(me: usize) -> Planner {
        Planner {
            me,
            superseded: VecDeque::new(),
            pool: Vec::new(),
            cut_values: Vec::new(),
            map: ChainMap::default(),
            hashes: Vec::new(),
            starts: Vec::new(),
        }
    }

    /// The chain of `key` (hashed to `h`) of table `t`: from this
    /// thread's map, or found in the index (made there if `make` and the
    /// key has none) and mapped. `None`: no chain (and not `make`), or an
    /// unknown table.
    pub(super) fn chain<'s>(
        &mut self,
        s: &'s Shared,
        (h, t, key): (u64, TableId, &[u8]),
        make: bool,
        g: &crossbeam_epoch::Guard,
    ) -> Option<&'s Chain> {
        if let Some(c) = self.map.get(h, t, key) {
            // SAFETY: chains live as long as the database.
            return Some(unsafe { &*c });
        }
        let found = s.tables.get(t).ok()?.find(key, &Pin(g));
        let c: &Chain = match found {
            // SAFETY: as above.
            Some(c) => unsafe { &*c },
            None if make => chain(s, t, key, g)?,
            None => return None,
        };
        self.map.insert(h, c);
        Some(c)
    }

    /// Hash every declared key of `b` into `hashes`; procedure `k`'s are
    /// `hashes[starts[k]..starts[k + 1]]`.
    pub(super) fn hash_batch(&self, b: &Batch, hashes: &mut Vec<u64>, starts: &mut Vec<u32>) {
        hashes.clear();
        starts.clear();
        // SAFETY: the job is not run before the batch is planned.
        let job = |k: usize| unsafe { (*b.slots[k].job.get()).as_ref().expect("queued") };
        let n = b.slots.len();
        // The procedures were made on the clients' threads: each is three
        // dependent misses (the job, its declaration, the declaration's
        // buffers), fetched in stages a few procedures ahead.
        for k in 0..n {
            if k + 6 < n {
                prefetch(&**job(k + 6) as *const dyn Job as *const u8);
            }
            if k + 4 < n {
                prefetch(job(k + 4).declared() as *const Declared);
            }
            if k + 2 < n {
                for p in job(k + 2).declared().buffers() {
                    prefetch(p);
                }
            }
            starts.push(hashes.len() as u32);
            hashes.extend(job(k).declared().iter().map(|(t, key, _)| key_hash(t, key)));
        }
        starts.push(hashes.len() as u32);
    }

    /// A new version, from the pool if it has one.
    pub(super) fn version(&mut self, v: Version) -> *mut Version {
        match self.pool.pop() {
            Some(p) => {
                // SAFETY: pooled: unreachable, and its fields are plain
                // (atomics and pointers; nothing to drop).
                unsafe { p.write(v) };
                p
            }
            None => Box::into_raw(Box::new(v)),
        }
    }

    /// Install placeholders for the keys of `b` this thread owns, then
    /// check in at the batch's meeting point.
    pub(super) fn plan(&mut self, s: &Shared, b: &Batch) {
        let m = s.cfg.cc_threads;
        let g = crossbeam_epoch::pin();
        // Every key of the batch hashed first; then, while a procedure is
        // planned, the map slots of the one AHEAD procedures later are
        // fetched, the chains those slots name for the one AHEAD / 2
        // later (their slots have arrived by then), and the newest
        // versions of those chains for the next one (whose begin the
        // planning reads: a miss each, 60% of this function's time).
        const AHEAD: usize = 4;
        let mut hashes = std::mem::take(&mut self.hashes);
        let mut starts = std::mem::take(&mut self.starts);
        self.hash_batch(b, &mut hashes, &mut starts);
        let me = self.me as u64;
        let mine = move |h: u64| h % m as u64 == me;
        let keys = |k: usize| &hashes[starts[k] as usize..starts[k + 1] as usize];
        for k in 0..AHEAD.min(b.slots.len()) {
            keys(k)
                .iter()
                .filter(|&&h| mine(h))
                .for_each(|&h| self.map.prefetch(h));
        }
        for (k, slot) in b.slots.iter().enumerate() {
            if k + AHEAD < b.slots.len() {
                for &h in keys(k + AHEAD).iter().filter(|&&h| mine(h)) {
                    self.map.prefetch(h);
                }
            }
            if k + AHEAD / 2 < b.slots.len() {
                for &h in keys(k + AHEAD / 2).iter().filter(|&&h| mine(h)) {
                    self.map.prefetch_chain(h);
                }
            }
            if k + 1 < b.slots.len() {
                for &h in keys(k + 1).iter().filter(|&&h| mine(h)) {
                    self.map.prefetch_head(h);
                }
            }
            // SAFETY: the job is not run before the batch is planned.
            let job = unsafe { (*slot.job.get()).as_ref().expect("queued") };
            let first = starts[k] as usize;
            for (e, (t, key, write)) in job.declared().iter().enumerate() {
                let h = hashes[first + e];
                if !mine(h) {
                    continue;
                }
                let chain = self.chain(s, (h, t, key), write, &g);
                let Some(chain) = chain else {
                    // Absent (a read sees nothing), or an unknown table
                    // (the run fails there).
                    continue;
                };
                // Acquire: a chain link (module doc).
                let old = chain.head.load(Ordering::Acquire);
                if !write {
                    // §3.2.3: the read gets the version it must see — the
                    // newest one now, as every earlier procedure is
                    // planned and no later one is (below the procedure's
                    // own placeholder, if it declared the key a write
                    // first).
                    let mut v = old;
                    // SAFETY: our partition's versions, alive.
                    if !v.is_null() && unsafe { (*v).begin } == slot.ts {
                        // Acquire: a chain link (module doc).
                        // SAFETY: as above.
                        v = unsafe { (*v).prev.load(Ordering::Acquire) };
                    }
                    // Release: publishes the annotated version to the
                    // procedure's executor, which loads it with Acquire (module
                    // doc).
                    slot.inputs[e].v.store(v, Ordering::Release);
                    continue;
                }
                // SAFETY: our partition's versions, alive.
                if !old.is_null() && unsafe { (*old).begin } == slot.ts {
                    // Declared twice: one placeholder serves both.
                    slot.inputs[e].alias.store(true, Ordering::Relaxed);
                    // Release: publishes the placeholder to the procedure's
                    // executor (Acquire there, module doc).
                    slot.inputs[e].v.store(old, Ordering::Release);
                    continue;
                }
                // §3.2.3: the placeholder, linked to the old version.
                let v = self.version(Version {
                    begin: slot.ts,
                    producer: slot as *const Slot,
                    state: AtomicU8::new(UNREADY),
                    data: AtomicPtr::default(),
                    prev: AtomicPtr::new(old),
                });
                if !old.is_null() {
                    self.superseded.push_back((b.number, v));
                }
                // Release (both): links the placeholder, its fields written,
                // and hands it to its procedure, for Acquire loads (module
                // doc).
                chain.head.store(v, Ordering::Release);
                slot.inputs[e].v.store(v, Ordering::Release);
            }
        }
        self.hashes = hashes;
        self.starts = starts;
        drop(g);
        // §3.2.4: one meeting point per batch.
        // SeqCst: a progress word (module doc): every placeholder and
        // annotation stored above is seen by an execution thread that sees the
        // count reach m.
        b.planned.fetch_add(1, Ordering::SeqCst);
    }

    /// Cut the chains below versions written in batches every execution
    /// thread has finished: no one reads below them again (Condition 3).
    pub(super) fn collect(&mut self, s: &Shared) {
        let low = gc_watermark(s);
        while let Some(&(bn, v)) = self.superseded.front() {
            if bn >= low {
                break;
            }
            self.superseded.pop_front();
            // SAFETY: our partition's version, alive (cut only here).
            // AcqRel: Acquire to walk the versions cut off (as every link
            // load); Release as every link store (module doc).
            let mut cut = unsafe { (*v).prev.swap(std::ptr::null_mut(), Ordering::AcqRel) };
            // No procedure reads below `v` any more (above): its versions
            // are reused, their values go to the execution threads.
            while !cut.is_null() {
                // SAFETY: unreachable now; ours alone.
                let c = unsafe { &*cut };
                let d = c.data.swap(std::ptr::null_mut(), Ordering::Relaxed);
                if !d.is_null() {
                    self.cut_values.push(d as usize);
                }
                self.pool.push(cut);
                cut = c.prev.load(Ordering::Relaxed);
            }
        }
        if !self.cut_values.is_empty() {
            let mut spare = s.spare.lock().unwrap_or_else(|p| p.into_inner());
            if spare.len() < MAX_SPARE {
                spare.append(&mut self.cut_values);
            }
        }
        for d in self.cut_values.drain(..) {
            // SAFETY: unreachable (cut), listed once.
            unsafe { Data::free(d as *mut Data) };
        }
    }
}

pub(super) fn cc_thread(s: &Shared, me: usize) {
    let mut p = Planner::new(me);
    let mut number = 0;
    while let Some(b) = batch(s, number, &mut || {}) {
        p.plan(s, &b);
        number += 1;
        p.collect(s);
    }
}

/// `key`'s chain in table `t`, made if new (CC threads only).
pub(super) fn chain<'s>(
    s: &'s Shared,
    t: TableId,
    key: &[u8],
    g: &crossbeam_epoch::Guard,
) -> Option<&'s Chain> {
    let tree = s.tables.get(t).ok()?;
    if let Some(c) = tree.find(key, &Pin(g)) {
        // SAFETY: chains live as long as the database.
        return Some(unsafe { &*c });
    }
    let fresh = new_chain(t, key);
    let c = match tree.insert(key, fresh.cast_const(), &mut Pin(g)) {
        Insert::Inserted(_) => fresh.cast_const(),
        Insert::Exists { value } => {
            // SAFETY: never published.
            unsafe { Chain::free(fresh) };
            value
        }
    };
    // SAFETY: as above.
    Some(unsafe { &*c })
}

/// How far ahead `warm` fetches a procedure's inputs, by stage.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Warm {
    /// The versions `slot` will read (its placeholders' previous versions
    /// and its annotated reads).
    Versions,
    /// Their values' first lines (which hold the lengths).
    Heads,
    /// The rest of their values.
    Values,
}
