//! A client's runner: submits procedures, collects them, and runs
//! closures and snapshot reads.

use super::*;

/// A client's handle: submits procedures into the sequencer and collects
/// them, and runs closures alone.
pub struct Runner {
    pub(super) s: Arc<Shared>,
    pub(super) client: Arc<Client>,
    pub(super) in_flight: usize,
    pub(super) stats: Stats,
    pub(super) last_ts: u64,
    /// Procedures submitted and not yet handed to the sequencer (they go
    /// together: one lock per [`SEND_EVERY`], not per procedure).
    pub(super) outbox: Vec<Input>,
    /// This runner's slot in [`Shared::pins`], if it got one.
    pub(super) pin: Option<usize>,
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(p) = self.pin.take() {
            pin::unpin(&*self.s.pins[p]);
            self.s
                .free_pins
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(p);
        }
    }
}

/// Procedures a client gathers before handing them to the sequencer (it
/// hands them over sooner when it waits for its own).
pub(super) const SEND_EVERY: usize = 16;

impl Runner {
    /// Hand the procedures submitted so far, then `i` (if any), to the
    /// sequencer, waking it only if it sleeps.
    pub(super) fn send(&mut self, i: Option<Input>) {
        if self.outbox.is_empty() && i.is_none() {
            return;
        }
        let mut input = self.s.input.lock().unwrap_or_else(|p| p.into_inner());
        input.queue.extend(self.outbox.drain(..).chain(i));
        if input.sleeping {
            self.s.input_ready.notify_one();
        }
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Alone<'a>;

    /// Run a closure alone: once every procedure submitted before it has
    /// completed, with the pipeline held until it finishes. (A closure
    /// cannot be planned: its write set is unknown until it runs.)
    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Alone<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let gate = Arc::new((Mutex::new(0u8), Condvar::new()));
        // After everything this client submitted before it.
        self.send(Some(Input::Exclusive(Arc::clone(&gate))));
        let (lock, cv) = &*gate;
        let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
        while *st == 0 {
            // SeqCst: a progress word (module doc).
            if self.s.stop.load(Ordering::SeqCst) {
                return Err(Error::InvalidOption("BOHM is shutting down".into()));
            }
            st = cv
                .wait_timeout(st, std::time::Duration::from_millis(10))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(st);
        // SeqCst: the timestamp counter (module doc): the closure's timestamp
        // follows every procedure's stamped before it.
        let ts = self.s.next_ts.fetch_add(1, Ordering::SeqCst);
        let g = crossbeam_epoch::pin();
        let mut tx = Alone {
            s: &self.s,
            g: &g,
            ts,
            undo: Vec::new(),
        };
        let r = body(&mut tx);
        if r.is_err() {
            tx.rollback();
        } else {
            tx.commit();
        }
        drop(g);
        // Everything up to this closure is complete: snapshots may read
        // it (before the pipeline moves on).
        for d in self.s.done_ts.iter() {
            // SeqCst: a progress word (the pin protocol, `pin.rs`): the
            // closure's writes above are complete for the snapshot readers that
            // see the raised bound.
            d.fetch_max(ts + 1, Ordering::SeqCst);
        }
        let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
        *st = 2;
        cv.notify_all();
        drop(st);
        if r.is_ok() {
            self.last_ts = ts;
        }
        self.stats.record(r)
    }

    fn uses_declared(&self) -> bool {
        true
    }

    fn needs_write_sets(&self) -> bool {
        true
    }

    /// A client keeps a batch's worth in flight, so that batches fill.
    fn window(&self) -> usize {
        self.s.cfg.batch.max(2)
    }

    fn submit<B: Body>(&mut self, p: Box<Procedure<B>>) -> Result<(), Error> {
        if !p.planned {
            return Err(Error::Undeclared(
                "BOHM plans a procedure from its declared write set: declare it".into(),
            ));
        }
        self.in_flight += 1;
        self.outbox.push(Input::Job(
            Box::new(Boxed {
                p,
                out: None,
                ts: 0,
            }),
            Arc::clone(&self.client),
        ));
        if self.outbox.len() >= SEND_EVERY {
            self.send(None);
        }
        Ok(())
    }

    fn poll<B: Body>(&mut self, wait: bool, done: &mut Vec<Done<B>>) -> Result<(), Error> {
        if wait {
            self.send(None);
        }
        let mut q = self.client.done.lock().unwrap_or_else(|p| p.into_inner());
        while wait && q.is_empty() && self.in_flight > 0 {
            // SeqCst: a progress word (module doc).
            if self.s.stop.load(Ordering::SeqCst) {
                return Err(Error::InvalidOption("BOHM is shutting down".into()));
            }
            self.client.waiting.store(true, Ordering::Relaxed);
            q = self
                .client
                .ready
                .wait_timeout(q, std::time::Duration::from_millis(10))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            self.client.waiting.store(false, Ordering::Relaxed);
        }
        for j in q.drain(..) {
            let b = j
                .downcast::<Boxed<B>>()
                .map_err(|_| Error::InvalidOption("one client, one procedure type".into()))?;
            let Boxed { p, out, ts } = *b;
            self.in_flight -= 1;
            let outcome = out.expect("a completed procedure has an outcome");
            let mut commit_key = 0;
            if matches!(outcome, Ok(Some(_))) {
                self.stats.commits += 1;
                // §3.2.1: the log position orders every key's versions.
                commit_key = ts;
                self.last_ts = ts;
            }
            done.push(Done {
                procedure: p,
                outcome,
                commit_key,
            });
        }
        Ok(())
    }

    /// Read-only `body` on a recent consistent snapshot, without the
    /// pipeline: it sees every procedure timestamped below the point that
    /// every execution thread has completed (a prefix of the log, so
    /// serializable), and nothing after. It never waits for a procedure
    /// and writes nothing but this runner's pin, which holds garbage
    /// collection below that point while it reads. Reconnaissance
    /// (bohm-vldb15 §3, Calvin's OLLP) reads here to predict write sets
    /// that depend on reads.
    fn snapshot_read<T>(
        &mut self,
        body: &mut dyn FnMut(&mut dyn ReadOnly) -> Result<T, TxError>,
    ) -> Result<T, Error> {
        let Some(pin) = self.pin else {
            // Every pin is taken: run it alone as a transaction (correct,
            // slower), retried within the shared bound.
            return granary_api::retry::until_committed(granary_api::retry::MAX_ATTEMPTS, || {
                self.try_run(|tx| body(tx))
            });
        };
        let s = &*self.s;
        let p = &s.pins[pin];
        // The pin protocol, and why it keeps what we read: `pin.rs`
        // (model-checked by loom).
        let bound = pin::pin(&**p, &s.finished, &s.done_ts);
        let g = crossbeam_epoch::pin();
        let mut snap = Snapshot {
            s,
            g: &g,
            bound,
            batch: ScanBatch::default(),
        };
        let r = body(&mut snap);
        drop(g);
        pin::unpin(&**p);
        self.stats.commits += 1;
        r.map_err(|e| match e {
            TxError::Failed(e) => e,
            // A snapshot never conflicts; only a body that makes one up
            // gets here.
            TxError::Conflict(last) => Error::RetriesExhausted { attempts: 1, last },
        })
    }

    fn last_commit_key(&self) -> u64 {
        self.last_ts
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }
}
