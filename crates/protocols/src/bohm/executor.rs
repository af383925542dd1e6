//! Execution (§3.3.1): procedures run against the planned versions,
//! reads of placeholders not yet produced evaluated on demand; and the
//! thread loops of the CC and execution stages.

use super::*;

/// Start fetching what `slot` will read, stage by stage (each stage reads
/// only what the one before fetched). The batch is planned, so the
/// pointers are set and the versions alive (Condition 3); a value not yet
/// produced is null, which prefetching ignores.
pub(super) fn warm(slot: &Slot, stage: Warm) {
    /// At most this many lines of one value.
    const MOST_LINES: usize = 32;
    for arg in slot.inputs.iter() {
        // Acquire: pairs with planning's Release store of the input (module
        // doc): the version it names is seen whole.
        let mut v = arg.v.load(Ordering::Acquire);
        if arg.write && !v.is_null() {
            // Acquire: a chain link (module doc).
            // SAFETY: our batch's placeholder, alive.
            v = unsafe { (*v).prev.load(Ordering::Acquire) };
        }
        if v.is_null() {
            continue;
        }
        if stage == Warm::Versions {
            prefetch(v);
            continue;
        }
        // Acquire: pairs with `Version::produce`'s Release: a produced value is
        // seen whole (a hint here).
        // SAFETY: alive (above); only the pointer is read.
        let d = unsafe { (*v).data.load(Ordering::Acquire) };
        if d.is_null() {
            continue;
        }
        if stage == Warm::Heads {
            prefetch(d);
        } else {
            // SAFETY: a produced value is immutable while its version is
            // alive (above); its room is set once, when it is made.
            let n = unsafe { (*d).footprint() }.div_ceil(64).min(MOST_LINES);
            granary_index::prefetch_lines((d as *const u8).wrapping_add(64), n - 1);
        }
    }
}

/// An execution thread's work (§3.3.1), batch by batch.
pub(super) struct Executor {
    pub(super) me: usize,
    pub(super) buf: WriteBuf,
    /// Procedures of this thread's share, from batches it has moved past,
    /// that another thread was running when it got to them (a helper
    /// took them, or a reader evaluates them): not waited for, but this
    /// thread's `finished` stays below their batch until they complete.
    pub(super) pending: Vec<(Arc<Batch>, usize)>,
    /// The batch after the last one run, and the timestamp after it.
    pub(super) through: (u64, u64),
}

impl Executor {
    pub(super) fn new(me: usize) -> Executor {
        Executor {
            me,
            buf: WriteBuf::default(),
            pending: Vec::new(),
            through: (0, 0),
        }
    }

    /// Once `b` is planned, run this thread's share of it, then publish
    /// that the thread is past it (as far as its pending procedures let
    /// it). False if stopping first.
    pub(super) fn run(&mut self, s: &Shared, b: &Arc<Batch>) -> bool {
        let n = s.cfg.exec_threads;
        let m = s.cfg.cc_threads;
        let mut spins = 0;
        // SeqCst: a progress word (module doc): once it reaches m, every CC
        // thread's placeholders, stored before its count, are seen.
        while b.planned.load(Ordering::SeqCst) < m {
            // SeqCst: a progress word (module doc), read in one order with the
            // others.
            if s.stop.load(Ordering::SeqCst) {
                return false;
            }
            self.idle(s);
            pause(&mut spins);
        }
        // Our share: procedures me, me + n, ...; others may run them too.
        // The first pass fetches ahead what the next procedures will read
        // (a procedure's inputs are known before it runs): their inputs'
        // versions three ahead, those versions' values' first lines two
        // ahead, and the rest of the values one ahead.
        refill_spare(s);
        let share: Vec<usize> = (self.me..b.slots.len()).step_by(n).collect();
        let mut left = Vec::with_capacity(share.len());
        for (k, &i) in share.iter().enumerate() {
            if let Some(&j) = share.get(k + 3) {
                warm(&b.slots[j], Warm::Versions);
            }
            if let Some(&j) = share.get(k + 2) {
                warm(&b.slots[j], Warm::Heads);
            }
            if let Some(&j) = share.get(k + 1) {
                warm(&b.slots[j], Warm::Values);
            }
            let slot = &b.slots[i];
            // Acquire (both): pairs with `execute`'s Release of COMPLETE: the
            // procedure's versions happen before this thread publishes
            // `finished` past it.
            if slot.state.load(Ordering::Acquire) != COMPLETE {
                let _ = execute(s, slot, &mut self.buf, 0);
                if slot.state.load(Ordering::Acquire) != COMPLETE {
                    left.push(i);
                }
            }
        }
        // Run again what was put back (an input was being produced
        // elsewhere: soon done). What another thread is running — a
        // helper may have taken a long reader — is not waited for: it
        // goes pending.
        while !left.is_empty() {
            left.retain(|&i| {
                let slot = &b.slots[i];
                // Acquire: as above, pairs with `execute`'s Release of COMPLETE
                // (or of UNPROCESSED, a job put back).
                match slot.state.load(Ordering::Acquire) {
                    COMPLETE => false,
                    EXECUTING => {
                        self.pending.push((Arc::clone(b), i));
                        false
                    }
                    _ => {
                        let _ = execute(s, slot, &mut self.buf, 0);
                        // Acquire: as above (`execute`'s Release of COMPLETE).
                        slot.state.load(Ordering::Acquire) != COMPLETE
                    }
                }
            });
            if !left.is_empty() {
                pause(&mut spins);
            }
        }
        // Then one pass over the others' shares: a procedure whose thread
        // is busy (a long reader before it) need not wait for it. Before
        // publishing that we are past the batch: its versions stay alive
        // while we run its procedures (Condition 3).
        for slot in b.slots.iter() {
            // Acquire: pairs with `execute`'s Release of UNPROCESSED (a job put
            // back) or COMPLETE, as above.
            if slot.state.load(Ordering::Acquire) == UNPROCESSED {
                let _ = execute(s, slot, &mut self.buf, 0);
            }
        }
        self.through = (b.number + 1, b.slots.last().map_or(0, |l| l.ts + 1));
        self.settle(s);
        // The last execution thread through a batch drops it from the log
        // (once every thread is past it, no one needs its slots; readers
        // that loaded a pointer to one are pinned: retire it).
        let low = low_watermark(s);
        let mut q = s.batches.lock().unwrap_or_else(|p| p.into_inner());
        while q.front().is_some_and(|f| f.number < low) {
            let old = q.pop_front().expect("front");
            crossbeam_epoch::pin().defer(move || drop(old));
        }
        true
    }

    /// While waiting for the next batch: see to the pending procedures
    /// (one a helper gave up is ours to run, and its client may be
    /// waiting for it).
    pub(super) fn idle(&mut self, s: &Shared) {
        if !self.pending.is_empty() {
            self.settle(s);
        }
    }

    /// Run the pending procedures put back, forget the completed ones,
    /// hand back what this thread completed, and publish how far it is:
    /// past every batch it has run, except those with a procedure of its
    /// share still pending (Condition 3: their versions must stay), and
    /// every timestamp below its oldest pending procedure complete.
    pub(super) fn settle(&mut self, s: &Shared) {
        let buf = &mut self.buf;
        self.pending.retain(|(b, i)| {
            let slot = &b.slots[*i];
            // Acquire (both): as in `run`, pairs with `execute`'s Release of
            // the state: a COMPLETE procedure's versions happen before
            // `finished` below.
            if slot.state.load(Ordering::Acquire) == UNPROCESSED {
                let _ = execute(s, slot, buf, 0);
            }
            slot.state.load(Ordering::Acquire) != COMPLETE
        });
        hand_back();
        let (mut finished, mut done) = self.through;
        for (b, i) in &self.pending {
            finished = finished.min(b.number);
            done = done.min(b.slots[*i].ts);
        }
        // SeqCst (both): progress words (module doc): `done_ts` is raised
        // before `finished` (the pin protocol, `pin.rs`), and both publish
        // every version this thread saw COMPLETE.
        s.done_ts[self.me].fetch_max(done, Ordering::SeqCst);
        s.finished[self.me].fetch_max(finished, Ordering::SeqCst);
    }
}

/// Give the procedures this thread completed back to their clients: one
/// lock and one wake-up per client and batch, not per procedure (and
/// sooner when a long procedure runs: see [`LONG_RUN`]).
pub(super) fn hand_back() {
    COMPLETED.with_borrow_mut(|out| {
        for (client, mut jobs) in out.drain(..) {
            let mut done = client.done.lock().unwrap_or_else(|p| p.into_inner());
            done.append(&mut jobs);
            if client.waiting.load(Ordering::Relaxed) {
                client.ready.notify_all();
            }
        }
    });
}

/// Every this many reads, a running procedure hands back what its thread
/// completed before it. Completions wait for the end of the batch, so
/// without this a long reader would hold back every procedure its thread
/// completed earlier in the batch for as long as it runs. (bohm-vldb15
/// §3.3 has long readers block no writer in concurrency control; handing
/// results back is ours, and must not undo that.)
pub(super) const LONG_RUN: u32 = 64;

pub(super) fn exec_thread(s: &Shared, me: usize) {
    let mut e = Executor::new(me);
    let mut number = 0;
    while let Some(b) = batch(s, number, &mut || e.idle(s)) {
        if !e.run(s, &b) {
            return;
        }
        number += 1;
    }
}

/// A thread that plays both parts ([`Config::both`]): it plans its
/// partition of each batch, meets the others, then runs its share.
pub(super) fn both_thread(s: &Shared, me: usize) {
    let mut p = Planner::new(me);
    let mut e = Executor::new(me);
    let mut number = 0;
    while let Some(b) = batch(s, number, &mut || e.idle(s)) {
        p.plan(s, &b);
        if !e.run(s, &b) {
            return;
        }
        number += 1;
        p.collect(s);
    }
}

/// Writes a running procedure buffers until it completes, and the
/// scratch space to publish them (kept by each thread, reused).
#[derive(Default)]
pub(super) struct WriteBuf {
    /// (placeholder index in the slot's writes, the value made for it;
    /// null: a deletion). Owned by the run until published.
    pub(super) entries: Vec<(usize, *mut Data)>,
    /// Per placeholder, at publication: the value it gets, if made.
    pub(super) made: Vec<Option<*mut Data>>,
}

impl WriteBuf {
    /// Free every value made and forget them (a run abandoned, rolled
    /// back or failed).
    pub(super) fn discard(&mut self) {
        for (_, d) in self.entries.drain(..) {
            if !d.is_null() {
                // SAFETY: made by this run, never published.
                unsafe { Data::free(d) };
            }
        }
    }

    /// Buffer `d` as the value of placeholder `i`, replacing (and
    /// freeing) an earlier one.
    pub(super) fn set(&mut self, i: usize, d: *mut Data) {
        match self.entries.iter_mut().find(|e| e.0 == i) {
            Some(e) => {
                if !e.1.is_null() {
                    // SAFETY: made by this run, never published.
                    unsafe { Data::free(e.1) };
                }
                e.1 = d;
            }
            None => self.entries.push((i, d)),
        }
    }

    pub(super) fn get(&self, i: usize) -> Option<*mut Data> {
        self.entries.iter().find(|e| e.0 == i).map(|e| e.1)
    }
}

/// Why a run stopped before completing.
pub(super) enum Blocked {
    /// Its input is being produced by another thread: try later.
    Later,
}

/// Evaluate `slot` if no one else is (§3.3.1); `depth` bounds the
/// recursion through producers. A completed procedure stays in its slot
/// until the thread whose share it is hands it back.
pub(super) fn execute(
    s: &Shared,
    slot: &Slot,
    buf: &mut WriteBuf,
    depth: u32,
) -> Result<(), Blocked> {
    // AcqRel/Acquire: Acquire takes the job as its last runner left it (it put
    // it back with Release); the Release half and the failure's Acquire order
    // nothing here.
    if slot
        .state
        .compare_exchange(UNPROCESSED, EXECUTING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(Blocked::Later);
    }
    // SAFETY: EXECUTING is ours alone.
    let job = unsafe { (*slot.job.get()).as_mut().expect("not yet handed back") };
    let g = crossbeam_epoch::pin();
    let env = Env {
        s,
        slot,
        g: &g,
        writes: std::mem::take(buf),
        depth,
    };
    let (r, mut writes, blocked) = job.run(env);
    let committed = match r {
        _ if blocked => {
            writes.discard();
            *buf = writes;
            // Release: puts the job back for its next runner (the Acquire claim
            // above) with our changes to it.
            slot.state.store(UNPROCESSED, Ordering::Release);
            return Err(Blocked::Later);
        }
        Ok(c) => c,
        Err(TxError::Conflict(_)) => unreachable!("BOHM procedures do not conflict"),
        Err(TxError::Failed(_)) => false,
    };
    // Publish every placeholder: the value written, or (not written,
    // rolled back) the previous version's (§3.3.1: an aborted procedure
    // copies it into its placeholders). All values are made first: if a
    // previous version is still being produced elsewhere, nothing is
    // published and the procedure runs again later.
    let mut made = std::mem::take(&mut writes.made);
    made.clear();
    made.resize(slot.inputs.len(), None);
    if committed {
        for (i, d) in writes.entries.drain(..) {
            made[i] = Some(d);
        }
    } else {
        writes.discard();
    }
    let mut blocked = false;
    for (arg, m) in slot.inputs.iter().zip(made.iter_mut()) {
        // Acquire: pairs with planning's Release store of the placeholder
        // (module doc).
        let v = arg.v.load(Ordering::Acquire);
        if !arg.write || v.is_null() || m.is_some() || arg.alias.load(Ordering::Relaxed) {
            continue; // a read, written, an unknown table, or a duplicate
        }
        // Acquire: a chain link (module doc).
        // SAFETY: our placeholder, alive until we complete.
        let prev = unsafe { (*v).prev.load(Ordering::Acquire) };
        match resolve(s, prev, depth, &mut WriteBuf::default()) {
            Ok(Some(bytes)) => *m = Some(make_value(bytes)),
            Ok(None) => *m = Some(std::ptr::null_mut()),
            Err(Blocked::Later) => {
                blocked = true;
                break;
            }
        }
    }
    if blocked {
        for d in made.iter().flatten() {
            if !d.is_null() {
                // SAFETY: never published.
                unsafe { Data::free(*d) };
            }
        }
        writes.made = made;
        *buf = writes;
        // Release: puts the job back, as above, for its next runner's Acquire
        // claim.
        slot.state.store(UNPROCESSED, Ordering::Release);
        return Err(Blocked::Later);
    }
    for (arg, m) in slot.inputs.iter().zip(&made) {
        // Acquire: pairs with planning's Release store of the placeholder
        // (module doc).
        let v = arg.v.load(Ordering::Acquire);
        if !arg.write || v.is_null() || arg.alias.load(Ordering::Relaxed) {
            continue;
        }
        // SAFETY: our placeholder, alive until we complete.
        let ver = unsafe { &*v };
        ver.produce(m.expect("made above"));
    }
    writes.made = made;
    *buf = writes;
    // The thread that completes a procedure hands it back (with the
    // others it completes in this batch; see `hand_back`).
    // SAFETY: still ours (EXECUTING); no one reads a job afterwards.
    let job = unsafe { (*slot.job.get()).take().expect("completed once") };
    COMPLETED.with_borrow_mut(|out| {
        match out.iter_mut().find(|(c, _)| Arc::ptr_eq(c, &slot.client)) {
            Some((_, jobs)) => jobs.push(job.into_any()),
            None => out.push((Arc::clone(&slot.client), vec![job.into_any()])),
        }
    });
    // Release: the versions produced above and the job handed back happen
    // before anyone sees the procedure COMPLETE (`Executor::run`, `settle`).
    slot.state.store(COMPLETE, Ordering::Release);
    Ok(())
}

/// The value of version `v` (null: none), evaluating its producer if it
/// is not produced yet.
pub(super) fn resolve<'v>(
    s: &Shared,
    v: *mut Version,
    depth: u32,
    buf: &mut WriteBuf,
) -> Result<Option<&'v [u8]>, Blocked> {
    if v.is_null() {
        return Ok(None);
    }
    // SAFETY: reached from a chain by a pinned reader.
    let ver = unsafe { &*v };
    if !ver.is_ready() {
        // SAFETY: an unready placeholder's producer's batch is alive
        // (batches are retired through the epoch we are pinned in).
        let producer = unsafe { &*ver.producer };
        if (depth >= 32 || execute(s, producer, buf, depth + 1).is_err()) && !ver.is_ready() {
            return Err(Blocked::Later);
        }
    }
    let d = ver.data();
    // SAFETY: READY data is immutable and freed only with its version.
    Ok((!d.is_null()).then(|| unsafe { (*d).value() }).flatten())
}
