//! What the pipeline's stages share: procedures as jobs, their slots in
//! a batch, the clients' inboxes, and the state every thread sees.

use super::*;

/// Procedure states (§3.3.1).
pub(super) const UNPROCESSED: u8 = 0;
pub(super) const EXECUTING: u8 = 1;
pub(super) const COMPLETE: u8 = 2;

/// A procedure, type-erased, as the pipeline holds it.
pub(super) trait Job: Send {
    fn declared(&self) -> &Declared;
    /// Run once in `env`: `Ok(true)` committed, `Ok(false)` rolled back;
    /// the run's buffered writes, and whether it was abandoned (an input
    /// is being produced elsewhere).
    fn run(&mut self, env: Env<'_>) -> (Result<bool, TxError>, WriteBuf, bool);
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// What a run needs besides its procedure.
pub(super) struct Env<'a> {
    pub(super) s: &'a Shared,
    pub(super) slot: &'a Slot,
    pub(super) g: &'a crossbeam_epoch::Guard,
    pub(super) writes: WriteBuf,
    pub(super) depth: u32,
}

pub(super) struct Boxed<B: Body> {
    pub(super) p: Box<Procedure<B>>,
    pub(super) out: Option<Result<Option<B::Output>, Error>>,
    /// The timestamp it ran at.
    pub(super) ts: u64,
}

impl<B: Body> Job for Boxed<B> {
    fn declared(&self) -> &Declared {
        &self.p.declared
    }

    fn run(&mut self, env: Env<'_>) -> (Result<bool, TxError>, WriteBuf, bool) {
        self.ts = env.slot.ts;
        // The declared sets and the body, borrowed apart: the run reads
        // the one while the body runs.
        let p = &mut *self.p;
        let mut tx = Txn {
            s: env.s,
            slot: env.slot,
            g: env.g,
            declared: &p.declared,
            cursor: 0,
            writes: env.writes,
            depth: env.depth,
            blocked: false,
            reads: 0,
        };
        let r = p.body.run(&mut tx);
        let r = match r {
            Ok(v) => {
                self.out = Some(Ok(Some(v)));
                Ok(true)
            }
            Err(TxError::Failed(Error::RolledBack)) => {
                self.out = Some(Ok(None));
                Ok(false)
            }
            Err(TxError::Failed(e)) => {
                // A failure is final: the procedure's writes are undone,
                // as for a rollback, and the client hears the error.
                self.out = Some(Err(e));
                Ok(false)
            }
            Err(c @ TxError::Conflict(_)) => Err(c),
        };
        (r, tx.writes, tx.blocked)
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// A declared key's version pointer in a slot.
pub(super) struct Arg {
    pub(super) v: AtomicPtr<Version>,
    /// A write (`v` is its placeholder), or a read (`v` is what it sees).
    pub(super) write: bool,
    /// A write of a key the procedure declared as a write earlier: `v` is
    /// that earlier entry's placeholder, which the run writes and
    /// publishes through the earlier entry (one placeholder per key and
    /// procedure; set while planning, before execution starts).
    pub(super) alias: AtomicBool,
}

/// A procedure's place in a batch.
pub(super) struct Slot {
    pub(super) ts: u64,
    pub(super) state: AtomicU8,
    pub(super) job: UnsafeCell<Option<Box<dyn Job>>>,
    /// Per declared key, in declaration order, set by the CC thread that
    /// owns the key: for a write, its placeholder (null: an unknown
    /// table); for a read, the version it must see (null: the key is
    /// absent; §3.2.3's read-set annotation).
    pub(super) inputs: Box<[Arg]>,
    /// Where the finished procedure goes back to.
    pub(super) client: Arc<Client>,
}

// SAFETY: `job` is touched only by the thread that moved the slot to
// EXECUTING (and by the one that hands it back after COMPLETE).
unsafe impl Sync for Slot {}

pub(super) struct Batch {
    pub(super) number: u64,
    pub(super) slots: Box<[Slot]>,
    /// CC threads done with this batch (execution starts at `m`).
    pub(super) planned: AtomicUsize,
}

/// A finished procedure, type-erased (its client knows the type).
pub(super) type Finished = Box<dyn Any + Send>;

/// A client's finished procedures.
#[derive(Default)]
pub(super) struct Client {
    pub(super) done: Mutex<Vec<Finished>>,
    pub(super) ready: Condvar,
    /// Set (under `done`'s lock) while the client waits on `ready`.
    pub(super) waiting: AtomicBool,
}

/// The sequencer's input queue.
#[derive(Default)]
pub(super) struct Inbox {
    pub(super) queue: VecDeque<Input>,
    /// The sequencer waits on `input_ready` (wake it).
    pub(super) sleeping: bool,
}

/// Work for the sequencer.
pub(super) enum Input {
    Job(Box<dyn Job>, Arc<Client>),
    /// A closure wants to run alone: answer once everything before it has
    /// completed, and hold the pipeline until the guard is dropped.
    Exclusive(Arc<(Mutex<u8>, Condvar)>),
}

pub(super) struct Shared {
    pub(super) cfg: Config,
    pub(super) tables: Catalog<Tree<*const Chain>>,
    pub(super) input: Mutex<Inbox>,
    pub(super) input_ready: Condvar,
    /// Batches cut and not yet collected (oldest first).
    pub(super) batches: Mutex<VecDeque<Arc<Batch>>>,
    /// The next batch number to cut.
    pub(super) next_batch: AtomicU64,
    /// Per execution thread: the last batch it finished (+1).
    pub(super) finished: Box<[CachePadded<AtomicU64>]>,
    /// Per execution thread: every timestamp below this one is complete
    /// as far as it knows (raised before `finished`, and by closures run
    /// alone): snapshot reads read below the minimum.
    pub(super) done_ts: Box<[CachePadded<AtomicU64>]>,
    /// Per snapshot reader: the batch it holds garbage collection at
    /// (`u64::MAX`: not reading). See [`Runner::snapshot_read`].
    pub(super) pins: Box<[CachePadded<AtomicU64>]>,
    /// The pin slots no runner holds.
    pub(super) free_pins: Mutex<Vec<usize>>,
    pub(super) stop: AtomicBool,
    /// The timestamp of the next procedure (or exclusive closure).
    pub(super) next_ts: AtomicU64,
    /// Values of versions the CC threads cut, for the execution threads
    /// to reuse: they then free (or refill) blocks they mostly allocated
    /// themselves, instead of the CC threads freeing blocks of another
    /// thread's heap, which costs both.
    pub(super) spare: Mutex<Vec<usize>>,
}
