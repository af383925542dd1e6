//! The sequencer (§3.2.1): submitted procedures in arrival order, cut
//! into batches.

use super::*;

pub(super) fn sequencer(s: &Shared) {
    let mut pending: Vec<(Box<dyn Job>, Arc<Client>)> = Vec::new();
    // The batch cut last: while the CC threads are still planning it, a
    // new batch could not start anyway, so input keeps gathering into a
    // fuller one (batches grow with the load, up to `batch`).
    let mut last: Option<Arc<Batch>> = None;
    loop {
        let mut input = s.input.lock().unwrap_or_else(|p| p.into_inner());
        // SeqCst: `stop` is a progress word (module doc), seen in one order
        // with the others.
        while input.queue.is_empty() && pending.is_empty() && !s.stop.load(Ordering::SeqCst) {
            input.sleeping = true;
            input = s
                .input_ready
                .wait_timeout(input, std::time::Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            input.sleeping = false;
        }
        // SeqCst: a progress word (module doc).
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        let mut exclusive = None;
        while pending.len() < s.cfg.batch {
            match input.queue.pop_front() {
                Some(Input::Job(j, c)) => pending.push((j, c)),
                Some(Input::Exclusive(e)) => {
                    exclusive = Some(e);
                    break;
                }
                None => break,
            }
        }
        drop(input);
        // SeqCst: a progress word (module doc): the CC threads that have
        // planned the last batch.
        let planning = last
            .as_ref()
            .is_some_and(|b| b.planned.load(Ordering::SeqCst) < s.cfg.cc_threads);
        if !pending.is_empty() && planning && pending.len() < s.cfg.batch && exclusive.is_none() {
            std::thread::yield_now();
            continue;
        }
        if !pending.is_empty() {
            last = Some(cut_batch(s, &mut pending));
        }
        if let Some(e) = exclusive {
            // Everything cut so far must complete first.
            // SeqCst (with `finished` and `stop` below): progress words (module
            // doc): once every thread's `finished` passes the last batch cut,
            // its versions are produced and seen here.
            let last = s.next_batch.load(Ordering::SeqCst);
            let mut spins = 0;
            while s.finished.iter().any(|f| f.load(Ordering::SeqCst) < last) {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                pause(&mut spins);
            }
            let (lock, cv) = &*e;
            let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
            *st = 1; // go
            cv.notify_all();
            while *st != 2 {
                st = cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        }
    }
}

/// Give `pending` timestamps (§3.2.1: their positions in the log) and
/// publish them as the next batch.
pub(super) fn cut_batch(s: &Shared, pending: &mut Vec<(Box<dyn Job>, Arc<Client>)>) -> Arc<Batch> {
    let slots: Box<[Slot]> = pending
        .drain(..)
        .map(|(job, client)| {
            // SeqCst: the timestamp counter (module doc), shared with closures
            // (`Runner::try_run`): one total order of timestamps.
            let ts = s.next_ts.fetch_add(1, Ordering::SeqCst);
            let inputs = job
                .declared()
                .iter()
                .map(|(_, _, write)| Arg {
                    v: AtomicPtr::default(),
                    write,
                    alias: AtomicBool::new(false),
                })
                .collect();
            Slot {
                ts,
                state: AtomicU8::new(UNPROCESSED),
                job: UnsafeCell::new(Some(job)),
                inputs,
                client,
            }
        })
        .collect();
    // SeqCst: the batch counter (module doc); only this thread stores it.
    let number = s.next_batch.load(Ordering::SeqCst);
    let batch = Arc::new(Batch {
        number,
        slots,
        planned: AtomicUsize::new(0),
    });
    s.batches
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push_back(Arc::clone(&batch));
    // SeqCst: publishes the batch, queued above, to the threads that wait for
    // its number (`batch`).
    s.next_batch.store(number + 1, Ordering::SeqCst);
    batch
}

/// Batch `number`, once cut (`None` if stopping first).
pub(super) fn batch(s: &Shared, number: u64, idle: &mut impl FnMut()) -> Option<Arc<Batch>> {
    let mut spins = 0;
    loop {
        // SeqCst: pairs with `cut_batch`'s store: a batch whose number is seen
        // is in the queue.
        if s.next_batch.load(Ordering::SeqCst) > number {
            let q = s.batches.lock().unwrap_or_else(|p| p.into_inner());
            let front = q.front().map_or(number, |b| b.number);
            // A thread asks only for batches not yet retired (a batch is
            // retired once every execution thread, hence every CC thread,
            // is past it).
            debug_assert!(front <= number);
            return q.get(number.saturating_sub(front) as usize).cloned();
        }
        // SeqCst: a progress word (module doc).
        if s.stop.load(Ordering::SeqCst) {
            return None;
        }
        idle();
        pause(&mut spins);
    }
}
