//! BOHM: serializable multiversion concurrency control planned in batches
//! (Faleiro and Abadi, VLDB'15, §3). The pipeline runs procedures (YCSB, SmallBank, TPC-C, the check
//! workloads), scans included, with the read-set annotation; clients read
//! snapshots at the completed prefix of the log without the pipeline,
//! which is where reconnaissance predicts write sets that depend on
//! reads.
//!
//! * **Sequencer** (§3.2.1): one thread takes submitted procedures in
//!   arrival order; a procedure's position in that log is its timestamp.
//!   The log is cut into batches of up to `batch` procedures (a batch is
//!   cut early when no more procedures are waiting, so that a client with
//!   a small window is not starved).
//! * **Concurrency control** (§3.2.2–3.2.4): `m` threads, each owning a
//!   hash partition of the keys. For each procedure of a batch, in
//!   timestamp order, each thread scans the declared write set and, for
//!   each key it owns, installs a placeholder version (begin = ts, end =
//!   ∞, the producing procedure, no data yet, prev = the old version) and
//!   sets the old version's end to ts. Only the owner ever changes a key's
//!   chain, so no latch is taken; the threads meet once per batch (a
//!   counter the execution threads wait on).
//! * **Execution** (§3.3.1): `n` threads; procedure `i` of a batch is
//!   thread `i mod n`'s to see done. A procedure moves Unprocessed →
//!   Executing → Complete by compare-and-swap. A read of a placeholder not
//!   yet produced evaluates its producer recursively, or, if another
//!   thread is running it, puts the reader back to Unprocessed. Reads
//!   write nothing to shared memory. Writes are buffered and published
//!   when the procedure completes; a procedure that rolls back (or leaves
//!   a declared key unwritten) gives its placeholders the previous
//!   version's value.
//! * **Garbage** (§3.3.2, Condition 3): each execution thread publishes
//!   the last batch it finished; below the minimum, no procedure will read
//!   a version that a later batch superseded, and the owning CC thread
//!   cuts the chain there.
//!
//! With [`Config::both`], each CC thread is also an execution thread: it
//! plans its partition of a batch, meets the others, and runs its share.
//!
//! Closures (`TxRunner::try_run`: loading, verification, the conformance
//! tests) cannot be planned: they run alone, after every procedure
//! submitted before them has completed, with the pipeline held.
//!
//! Memory ordering. A version's fields are written before its chain's
//! head (or a procedure's placeholder slot) is stored with Release, and
//! loaded after an Acquire load of it; a placeholder's data is stored
//! before its state becomes READY (Release), and read after an Acquire
//! load of the state. The progress words that order the stages (the
//! batch counter `next_batch`, a batch's `planned` count, each execution
//! thread's `finished` batch, `stop`, the timestamp counter) are SeqCst:
//! a stage that sees another's progress must also see everything that
//! stage wrote before it (placeholders before `planned`, published
//! versions before `finished`), across threads that each read several of
//! them, and they are touched once per batch, not per access.

use std::any::Any;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crossbeam_utils::CachePadded;
use granary_api::{
    AbortReason, Body, Declared, Done, Engine, Error, Procedure, ReadOnly, Stats, TableId,
    TableOptions, Tx, TxError, TxRunner,
};
use granary_index::{Insert, Tree};

mod pin;

use crate::catalog::Catalog;
use crate::limits::{check_bounds, check_key, check_value};
use crate::reclaim::Pin;
use crate::scan::{visit, Batch as ScanBatch};
use crate::sync::{backoff, prefetch};
use crate::value::Tail;

/// How BOHM's threads are arranged.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Concurrency-control threads (`m`).
    pub cc_threads: usize,
    /// Execution threads (`n`).
    pub exec_threads: usize,
    /// The most procedures in a batch.
    pub batch: usize,
    /// Each CC thread is also an execution thread (`exec_threads` must
    /// equal `cc_threads`): it plans its partition of a batch, meets the
    /// others, then runs its share of the batch — no pipelining between
    /// the stages, but no thread idles while another stage has work, which
    /// is what a machine with few cores needs (one thread can run BOHM
    /// alone).
    pub both: bool,
    /// Tables hinted [`TableOptions::point_lookups`] keep a point index
    /// (`granary_index::Tree::with_point_index`): planning and reads find
    /// a key's chain with one hash probe instead of a descent.
    pub point_index: bool,
    /// Test-only mutant (NOT serializable): a read that finds a
    /// placeholder not yet produced reads the version below it instead of
    /// waiting for (or evaluating) its producer. The checker must catch it.
    #[cfg(feature = "mutant")]
    pub mutant_skip_unready: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cc_threads: 1,
            exec_threads: 1,
            batch: 1000,
            both: false,
            point_index: false,
            #[cfg(feature = "mutant")]
            mutant_skip_unready: false,
        }
    }
}

/// The most threads of each kind.
pub const MAX_THREADS: usize = 64;

/// A value's bytes (`None`: a deletion).
type Data = Tail<()>;

/// Placeholder states.
const UNREADY: u8 = 0;
const READY: u8 = 1;

/// A version of a key (bohm-vldb15 §3.2.3, Figure 3). **Deviation:** no
/// end timestamp. A chain is ordered by begin, and a reader takes the
/// first version that began before it (or, declared, the one its CC
/// thread annotated), so an end would be written and never read; writing
/// it cost the CC thread a miss on the old version and moved that line
/// away from the execution thread about to read it.
struct Version {
    /// The producing procedure's timestamp.
    begin: u64,
    /// The procedure that produces the data (valid while UNREADY).
    producer: *const Slot,
    state: AtomicU8,
    /// The value, once READY (null: absent).
    data: AtomicPtr<Data>,
    prev: AtomicPtr<Version>,
}

// SAFETY: fields are atomics, or written once before the version is
// published (`begin`, `producer`); `producer` is dereferenced only while
// its batch is alive (see `Slot`).
unsafe impl Send for Version {}
// SAFETY: as above.
unsafe impl Sync for Version {}

/// A key's chain, newest version first; what the index maps a key to.
/// Only the CC thread that owns the key changes it. The key's bytes
/// follow it (a [`Tail`]), for the CC thread's own map to compare.
type Chain = Tail<ChainHead>;

struct ChainHead {
    head: AtomicPtr<Version>,
    table: TableId,
}

/// A new chain for `key` of table `t`, with no version yet.
fn new_chain(t: TableId, key: &[u8]) -> *mut Chain {
    Chain::alloc(
        ChainHead {
            head: AtomicPtr::default(),
            table: t,
        },
        Some(key),
        0,
    )
}

/// A CC thread's own map from the keys of its partition to their chains:
/// the paper's per-thread hash table (§3.2.2), in front of the shared
/// ordered index (which scans and closures use, and where every chain is
/// too). Open addressing, linear probing, never shrinks (chains live as
/// long as the database).
#[derive(Default)]
struct ChainMap {
    /// (hash, chain); a null chain is an empty slot.
    slots: Vec<(u64, *const Chain)>,
    len: usize,
}

impl ChainMap {
    fn slot(&self, h: u64) -> usize {
        // The hash's low bits pick the CC thread: mix before using them.
        let x = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (x >> 20) as usize & (self.slots.len() - 1)
    }

    /// The chain of `key` (hashed to `h`) in table `t`, if mapped.
    fn get(&self, h: u64, t: TableId, key: &[u8]) -> Option<*const Chain> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = self.slot(h);
        loop {
            let (sh, c) = self.slots[i];
            if c.is_null() {
                return None;
            }
            // SAFETY: chains live as long as the database; their keys
            // never change.
            if sh == h {
                // SAFETY: as above.
                let chain = unsafe { &*c };
                // SAFETY: as above.
                if chain.table == t && unsafe { chain.value() } == Some(key) {
                    return Some(c);
                }
            }
            i = (i + 1) & (self.slots.len() - 1);
        }
    }

    /// Start fetching the slot `h` hashes to.
    fn prefetch(&self, h: u64) {
        if !self.slots.is_empty() {
            prefetch(&self.slots[self.slot(h)]);
        }
    }

    /// Start fetching the chain in the slot `h` hashes to (its first
    /// probe; the slot should be in cache by now).
    fn prefetch_chain(&self, h: u64) {
        if !self.slots.is_empty() {
            prefetch(self.slots[self.slot(h)].1);
        }
    }

    /// Start fetching the newest version of the chain in the slot `h`
    /// hashes to (the slot and the chain should be in cache by now).
    fn prefetch_head(&self, h: u64) {
        if !self.slots.is_empty() {
            let c = self.slots[self.slot(h)].1;
            if !c.is_null() {
                // SAFETY: chains live as long as the database; only the
                // pointer to the newest version is read. Acquire: as
                // planning's own load of the head (a hint either way).
                prefetch(unsafe { &*c }.head.load(Ordering::Acquire));
            }
        }
    }

    /// Map a chain not yet mapped.
    fn insert(&mut self, h: u64, c: *const Chain) {
        if 2 * (self.len + 1) > self.slots.len() {
            let size = (2 * self.slots.len()).max(1024);
            let old = std::mem::replace(&mut self.slots, vec![(0, std::ptr::null()); size]);
            for (oh, oc) in old {
                if !oc.is_null() {
                    self.place(oh, oc);
                }
            }
        }
        self.place(h, c);
        self.len += 1;
    }

    fn place(&mut self, h: u64, c: *const Chain) {
        let mut i = self.slot(h);
        while !self.slots[i].1.is_null() {
            i = (i + 1) & (self.slots.len() - 1);
        }
        self.slots[i] = (h, c);
    }
}

/// Procedure states (§3.3.1).
const UNPROCESSED: u8 = 0;
const EXECUTING: u8 = 1;
const COMPLETE: u8 = 2;

/// A procedure, type-erased, as the pipeline holds it.
trait Job: Send {
    fn declared(&self) -> &Declared;
    /// Run once in `env`: `Ok(true)` committed, `Ok(false)` rolled back;
    /// the run's buffered writes, and whether it was abandoned (an input
    /// is being produced elsewhere).
    fn run(&mut self, env: Env<'_>) -> (Result<bool, TxError>, WriteBuf, bool);
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// What a run needs besides its procedure.
struct Env<'a> {
    s: &'a Shared,
    slot: &'a Slot,
    g: &'a crossbeam_epoch::Guard,
    writes: WriteBuf,
    depth: u32,
}

struct Boxed<B: Body> {
    p: Box<Procedure<B>>,
    out: Option<Result<Option<B::Output>, Error>>,
    /// The timestamp it ran at.
    ts: u64,
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
struct Arg {
    v: AtomicPtr<Version>,
    /// A write (`v` is its placeholder), or a read (`v` is what it sees).
    write: bool,
    /// A write of a key the procedure declared as a write earlier: `v` is
    /// that earlier entry's placeholder, which the run writes and
    /// publishes through the earlier entry (one placeholder per key and
    /// procedure; set while planning, before execution starts).
    alias: AtomicBool,
}

/// A procedure's place in a batch.
struct Slot {
    ts: u64,
    state: AtomicU8,
    job: UnsafeCell<Option<Box<dyn Job>>>,
    /// Per declared key, in declaration order, set by the CC thread that
    /// owns the key: for a write, its placeholder (null: an unknown
    /// table); for a read, the version it must see (null: the key is
    /// absent; §3.2.3's read-set annotation).
    inputs: Box<[Arg]>,
    /// Where the finished procedure goes back to.
    client: Arc<Client>,
}

// SAFETY: `job` is touched only by the thread that moved the slot to
// EXECUTING (and by the one that hands it back after COMPLETE).
unsafe impl Sync for Slot {}

struct Batch {
    number: u64,
    slots: Box<[Slot]>,
    /// CC threads done with this batch (execution starts at `m`).
    planned: AtomicUsize,
}

/// A finished procedure, type-erased (its client knows the type).
type Finished = Box<dyn Any + Send>;

/// A client's finished procedures.
#[derive(Default)]
struct Client {
    done: Mutex<Vec<Finished>>,
    ready: Condvar,
    /// Set (under `done`'s lock) while the client waits on `ready`.
    waiting: AtomicBool,
}

/// The sequencer's input queue.
#[derive(Default)]
struct Inbox {
    queue: VecDeque<Input>,
    /// The sequencer waits on `input_ready` (wake it).
    sleeping: bool,
}

/// Work for the sequencer.
enum Input {
    Job(Box<dyn Job>, Arc<Client>),
    /// A closure wants to run alone: answer once everything before it has
    /// completed, and hold the pipeline until the guard is dropped.
    Exclusive(Arc<(Mutex<u8>, Condvar)>),
}

struct Shared {
    cfg: Config,
    tables: Catalog<Tree>,
    input: Mutex<Inbox>,
    input_ready: Condvar,
    /// Batches cut and not yet collected (oldest first).
    batches: Mutex<VecDeque<Arc<Batch>>>,
    /// The next batch number to cut.
    next_batch: AtomicU64,
    /// Per execution thread: the last batch it finished (+1).
    finished: Box<[CachePadded<AtomicU64>]>,
    /// Per execution thread: every timestamp below this one is complete
    /// as far as it knows (raised before `finished`, and by closures run
    /// alone): snapshot reads read below the minimum.
    done_ts: Box<[CachePadded<AtomicU64>]>,
    /// Per snapshot reader: the batch it holds garbage collection at
    /// (`u64::MAX`: not reading). See [`Runner::snapshot_read`].
    pins: Box<[CachePadded<AtomicU64>]>,
    /// The pin slots no runner holds.
    free_pins: Mutex<Vec<usize>>,
    stop: AtomicBool,
    /// The timestamp of the next procedure (or exclusive closure).
    next_ts: AtomicU64,
    /// Values of versions the CC threads cut, for the execution threads
    /// to reuse: they then free (or refill) blocks they mostly allocated
    /// themselves, instead of the CC threads freeing blocks of another
    /// thread's heap, which costs both.
    spare: Mutex<Vec<usize>>,
}

/// The most cut values kept for reuse (beyond, they are freed).
const MAX_SPARE: usize = 1 << 16;

thread_local! {
    /// Procedures this execution thread has completed and not yet handed
    /// back, by client.
    static COMPLETED: std::cell::RefCell<Vec<(Arc<Client>, Vec<Finished>)>> =
        std::cell::RefCell::default();

    /// This execution thread's values to reuse (taken from
    /// [`Shared::spare`]), freed when the thread ends.
    static SPARE: std::cell::RefCell<Spare> = std::cell::RefCell::default();
}

#[derive(Default)]
struct Spare(Vec<usize>);

impl Drop for Spare {
    fn drop(&mut self) {
        for d in self.0.drain(..) {
            // SAFETY: cut values, unreachable, listed once.
            unsafe { Data::free(d as *mut Data) };
        }
    }
}

/// Take the values the CC threads cut, if this thread has none left
/// (once per batch: not a lock per value).
fn refill_spare(s: &Shared) {
    SPARE.with_borrow_mut(|spare| {
        if spare.0.is_empty() {
            let mut shared = s.spare.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::swap(&mut spare.0, &mut shared);
        }
    });
}

/// A value holding `bytes`, in a reused block if one fits.
fn make_value(bytes: &[u8]) -> *mut Data {
    let reused = SPARE.with_borrow_mut(|spare| {
        let d = spare.0.pop()? as *mut Data;
        // The next one is likely of the same size (a workload's values
        // mostly are): its lines start coming now, owned, so that filling
        // it waits for none (reading this one's room waited for its first
        // line: a fifth of BOHM's 10RMW time).
        if let Some(&next) = spare.0.last() {
            crate::value::prefetch_for_write(next as *const u8, (bytes.len() + 64).div_ceil(64));
        }
        // SAFETY: a cut value, unreachable: ours alone.
        let room = unsafe { (*d).room() };
        // Reuse a block that fits without wasting more than half of it.
        if room >= bytes.len() && room <= 2 * bytes.len() + 64 {
            // SAFETY: as above.
            unsafe { (*d).overwrite(Some(bytes)) };
            return Some(d);
        }
        // SAFETY: as above.
        unsafe { Data::free(d) };
        None
    });
    reused.unwrap_or_else(|| Data::alloc((), Some(bytes), 0))
}

/// A BOHM database: its sequencer, CC and execution threads run until it
/// is dropped.
pub struct Bohm {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Bohm {
    /// A database with `cfg`'s threads, started.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for no thread of a kind, more than
    /// [`MAX_THREADS`], or an empty batch.
    pub fn new(cfg: Config) -> Result<Bohm, Error> {
        for (what, n) in [("CC", cfg.cc_threads), ("execution", cfg.exec_threads)] {
            if !(1..=MAX_THREADS).contains(&n) {
                return Err(Error::InvalidOption(format!(
                    "BOHM needs 1..={MAX_THREADS} {what} threads, got {n}"
                )));
            }
        }
        if cfg.both && cfg.cc_threads != cfg.exec_threads {
            return Err(Error::InvalidOption(format!(
                "BOHM threads that both plan and execute: {} CC and {} execution threads \
                 must be the same threads",
                cfg.cc_threads, cfg.exec_threads
            )));
        }
        if cfg.batch == 0 {
            return Err(Error::InvalidOption(
                "BOHM's batch size must be at least 1".into(),
            ));
        }
        let shared = Arc::new(Shared {
            cfg,
            tables: Catalog::default(),
            input: Mutex::new(Inbox::default()),
            input_ready: Condvar::new(),
            batches: Mutex::new(VecDeque::new()),
            next_batch: AtomicU64::new(0),
            finished: (0..cfg.exec_threads).map(|_| Default::default()).collect(),
            done_ts: (0..cfg.exec_threads).map(|_| Default::default()).collect(),
            pins: (0..MAX_SNAPSHOT_READERS)
                .map(|_| CachePadded::new(AtomicU64::new(pin::UNPINNED)))
                .collect(),
            free_pins: Mutex::new((0..MAX_SNAPSHOT_READERS).rev().collect()),
            stop: AtomicBool::new(false),
            next_ts: AtomicU64::new(1),
            spare: Mutex::default(),
        });
        let mut threads = Vec::new();
        let s = Arc::clone(&shared);
        threads.push(spawn("bohm-seq", move || sequencer(&s)));
        if cfg.both {
            for me in 0..cfg.cc_threads {
                let s = Arc::clone(&shared);
                threads.push(spawn(&format!("bohm-{me}"), move || both_thread(&s, me)));
            }
            return Ok(Bohm { shared, threads });
        }
        for me in 0..cfg.cc_threads {
            let s = Arc::clone(&shared);
            threads.push(spawn(&format!("bohm-cc-{me}"), move || cc_thread(&s, me)));
        }
        for me in 0..cfg.exec_threads {
            let s = Arc::clone(&shared);
            threads.push(spawn(&format!("bohm-exec-{me}"), move || {
                exec_thread(&s, me)
            }));
        }
        Ok(Bohm { shared, threads })
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawn a BOHM thread")
}

impl Drop for Bohm {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.input_ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Every thread is gone: free the chains and their versions.
        let shared = Arc::get_mut(&mut self.shared);
        if let Some(shared) = shared {
            for d in shared
                .spare
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .drain(..)
            {
                // SAFETY: cut values, unreachable, listed once.
                unsafe { Data::free(d as *mut Data) };
            }
            for t in shared.tables.tables_mut() {
                t.for_each_value(|c| {
                    // SAFETY: the index owns each chain once; no thread
                    // runs any more.
                    unsafe {
                        let chain = c as *mut Chain;
                        free_chain((&*chain).head.load(Ordering::Relaxed));
                        Chain::free(chain);
                    }
                });
            }
        }
    }
}

/// Free `v` and every version below it.
///
/// # Safety
/// No one can reach them any more.
unsafe fn free_chain(mut v: *mut Version) {
    while !v.is_null() {
        // SAFETY: the caller's contract.
        let b = unsafe { Box::from_raw(v) };
        let d = b.data.load(Ordering::Relaxed);
        if !d.is_null() {
            // SAFETY: owned by this version alone.
            unsafe { Data::free(d) };
        }
        v = b.prev.load(Ordering::Relaxed);
    }
}

/// `key` of table `t` hashed (FNV-1a over the table and the key): its
/// CC thread is `hash % m`.
fn key_hash(t: TableId, key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in t.index().to_le_bytes().iter().chain(key) {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// §3.3.2's low watermark: every batch below it has been finished by
/// every execution thread.
fn low_watermark(s: &Shared) -> u64 {
    pin::low_watermark(&s.finished)
}

/// The batch below which versions may be cut: §3.3.2's low watermark,
/// held back by snapshot readers' pins.
fn gc_watermark(s: &Shared) -> u64 {
    pin::gc_watermark(&s.finished, &s.pins)
}

/// The most runners that read snapshots at once without holding the
/// pipeline (more fall back to running alone).
const MAX_SNAPSHOT_READERS: usize = 256;

/// Wait briefly for something to change (threads outnumber cores here).
fn pause(spins: &mut u32) {
    backoff(spins);
    if *spins > 256 {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

fn sequencer(s: &Shared) {
    let mut pending: Vec<(Box<dyn Job>, Arc<Client>)> = Vec::new();
    // The batch cut last: while the CC threads are still planning it, a
    // new batch could not start anyway, so input keeps gathering into a
    // fuller one (batches grow with the load, up to `batch`).
    let mut last: Option<Arc<Batch>> = None;
    loop {
        let mut input = s.input.lock().unwrap_or_else(|p| p.into_inner());
        while input.queue.is_empty() && pending.is_empty() && !s.stop.load(Ordering::SeqCst) {
            input.sleeping = true;
            input = s
                .input_ready
                .wait_timeout(input, std::time::Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            input.sleeping = false;
        }
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
fn cut_batch(s: &Shared, pending: &mut Vec<(Box<dyn Job>, Arc<Client>)>) -> Arc<Batch> {
    let slots: Box<[Slot]> = pending
        .drain(..)
        .map(|(job, client)| {
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
    s.next_batch.store(number + 1, Ordering::SeqCst);
    batch
}

/// Batch `number`, once cut (`None` if stopping first).
fn batch(s: &Shared, number: u64, idle: &mut impl FnMut()) -> Option<Arc<Batch>> {
    let mut spins = 0;
    loop {
        if s.next_batch.load(Ordering::SeqCst) > number {
            let q = s.batches.lock().unwrap_or_else(|p| p.into_inner());
            let front = q.front().map_or(number, |b| b.number);
            // A thread asks only for batches not yet retired (a batch is
            // retired once every execution thread, hence every CC thread,
            // is past it).
            debug_assert!(front <= number);
            return q.get(number.saturating_sub(front) as usize).cloned();
        }
        if s.stop.load(Ordering::SeqCst) {
            return None;
        }
        idle();
        pause(&mut spins);
    }
}

/// A CC thread's work (§3.2.2–3.2.4), batch by batch.
struct Planner {
    me: usize,
    /// Versions this thread superseded, by batch: cut once every
    /// execution thread has finished the batch (Condition 3).
    superseded: VecDeque<(u64, *mut Version)>,
    /// Versions cut, to be reused (only this thread makes and cuts its
    /// partition's versions).
    pool: Vec<*mut Version>,
    /// Values cut, on their way to the execution threads (see
    /// [`Shared::spare`]).
    cut_values: Vec<usize>,
    /// This thread's keys and their chains.
    map: ChainMap,
    /// Hash buffers for [`Planner::plan`].
    hashes: Vec<u64>,
    starts: Vec<u32>,
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
    fn new(me: usize) -> Planner {
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
    fn chain<'s>(
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
            Some(c) => unsafe { &*(c as *const Chain) },
            None if make => chain(s, t, key, g)?,
            None => return None,
        };
        self.map.insert(h, c);
        Some(c)
    }

    /// Hash every declared key of `b` into `hashes`; procedure `k`'s are
    /// `hashes[starts[k]..starts[k + 1]]`.
    fn hash_batch(&self, b: &Batch, hashes: &mut Vec<u64>, starts: &mut Vec<u32>) {
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
    fn version(&mut self, v: Version) -> *mut Version {
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
    fn plan(&mut self, s: &Shared, b: &Batch) {
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
                        // SAFETY: as above.
                        v = unsafe { (*v).prev.load(Ordering::Acquire) };
                    }
                    slot.inputs[e].v.store(v, Ordering::Release);
                    continue;
                }
                // SAFETY: our partition's versions, alive.
                if !old.is_null() && unsafe { (*old).begin } == slot.ts {
                    // Declared twice: one placeholder serves both.
                    slot.inputs[e].alias.store(true, Ordering::Relaxed);
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
                chain.head.store(v, Ordering::Release);
                slot.inputs[e].v.store(v, Ordering::Release);
            }
        }
        self.hashes = hashes;
        self.starts = starts;
        drop(g);
        // §3.2.4: one meeting point per batch.
        b.planned.fetch_add(1, Ordering::SeqCst);
    }

    /// Cut the chains below versions written in batches every execution
    /// thread has finished: no one reads below them again (Condition 3).
    fn collect(&mut self, s: &Shared) {
        let low = gc_watermark(s);
        while let Some(&(bn, v)) = self.superseded.front() {
            if bn >= low {
                break;
            }
            self.superseded.pop_front();
            // SAFETY: our partition's version, alive (cut only here).
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

fn cc_thread(s: &Shared, me: usize) {
    let mut p = Planner::new(me);
    let mut number = 0;
    while let Some(b) = batch(s, number, &mut || {}) {
        p.plan(s, &b);
        number += 1;
        p.collect(s);
    }
}

/// `key`'s chain in table `t`, made if new (CC threads only).
fn chain<'s>(
    s: &'s Shared,
    t: TableId,
    key: &[u8],
    g: &crossbeam_epoch::Guard,
) -> Option<&'s Chain> {
    let tree = s.tables.get(t).ok()?;
    if let Some(c) = tree.find(key, &Pin(g)) {
        // SAFETY: chains live as long as the database.
        return Some(unsafe { &*(c as *const Chain) });
    }
    let fresh = new_chain(t, key);
    let c = match tree.insert(key, fresh as u64, &mut Pin(g)) {
        Insert::Inserted(_) => fresh,
        Insert::Exists { value } => {
            // SAFETY: never published.
            unsafe { Chain::free(fresh) };
            value as *mut Chain
        }
    };
    // SAFETY: as above.
    Some(unsafe { &*c })
}

/// How far ahead `warm` fetches a procedure's inputs, by stage.
#[derive(Clone, Copy, PartialEq)]
enum Warm {
    /// The versions `slot` will read (its placeholders' previous versions
    /// and its annotated reads).
    Versions,
    /// Their values' first lines (which hold the lengths).
    Heads,
    /// The rest of their values.
    Values,
}

/// Start fetching what `slot` will read, stage by stage (each stage reads
/// only what the one before fetched). The batch is planned, so the
/// pointers are set and the versions alive (Condition 3); a value not yet
/// produced is null, which prefetching ignores.
fn warm(slot: &Slot, stage: Warm) {
    /// At most this many lines of one value.
    const MOST_LINES: usize = 32;
    for arg in slot.inputs.iter() {
        let mut v = arg.v.load(Ordering::Acquire);
        if arg.write && !v.is_null() {
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
struct Executor {
    me: usize,
    buf: WriteBuf,
    /// Procedures of this thread's share, from batches it has moved past,
    /// that another thread was running when it got to them (a helper
    /// took them, or a reader evaluates them): not waited for, but this
    /// thread's `finished` stays below their batch until they complete.
    pending: Vec<(Arc<Batch>, usize)>,
    /// The batch after the last one run, and the timestamp after it.
    through: (u64, u64),
}

impl Executor {
    fn new(me: usize) -> Executor {
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
    fn run(&mut self, s: &Shared, b: &Arc<Batch>) -> bool {
        let n = s.cfg.exec_threads;
        let m = s.cfg.cc_threads;
        let mut spins = 0;
        while b.planned.load(Ordering::SeqCst) < m {
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
                match slot.state.load(Ordering::Acquire) {
                    COMPLETE => false,
                    EXECUTING => {
                        self.pending.push((Arc::clone(b), i));
                        false
                    }
                    _ => {
                        let _ = execute(s, slot, &mut self.buf, 0);
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
    fn idle(&mut self, s: &Shared) {
        if !self.pending.is_empty() {
            self.settle(s);
        }
    }

    /// Run the pending procedures put back, forget the completed ones,
    /// hand back what this thread completed, and publish how far it is:
    /// past every batch it has run, except those with a procedure of its
    /// share still pending (Condition 3: their versions must stay), and
    /// every timestamp below its oldest pending procedure complete.
    fn settle(&mut self, s: &Shared) {
        let buf = &mut self.buf;
        self.pending.retain(|(b, i)| {
            let slot = &b.slots[*i];
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
        s.done_ts[self.me].fetch_max(done, Ordering::SeqCst);
        s.finished[self.me].fetch_max(finished, Ordering::SeqCst);
    }
}

/// Give the procedures this thread completed back to their clients: one
/// lock and one wake-up per client and batch, not per procedure (and
/// sooner when a long procedure runs: see [`LONG_RUN`]).
fn hand_back() {
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
const LONG_RUN: u32 = 64;

fn exec_thread(s: &Shared, me: usize) {
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
fn both_thread(s: &Shared, me: usize) {
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
struct WriteBuf {
    /// (placeholder index in the slot's writes, the value made for it;
    /// null: a deletion). Owned by the run until published.
    entries: Vec<(usize, *mut Data)>,
    /// Per placeholder, at publication: the value it gets, if made.
    made: Vec<Option<*mut Data>>,
}

impl WriteBuf {
    /// Free every value made and forget them (a run abandoned, rolled
    /// back or failed).
    fn discard(&mut self) {
        for (_, d) in self.entries.drain(..) {
            if !d.is_null() {
                // SAFETY: made by this run, never published.
                unsafe { Data::free(d) };
            }
        }
    }

    /// Buffer `d` as the value of placeholder `i`, replacing (and
    /// freeing) an earlier one.
    fn set(&mut self, i: usize, d: *mut Data) {
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

    fn get(&self, i: usize) -> Option<*mut Data> {
        self.entries.iter().find(|e| e.0 == i).map(|e| e.1)
    }
}

/// Why a run stopped before completing.
enum Blocked {
    /// Its input is being produced by another thread: try later.
    Later,
}

/// Evaluate `slot` if no one else is (§3.3.1); `depth` bounds the
/// recursion through producers. A completed procedure stays in its slot
/// until the thread whose share it is hands it back.
fn execute(s: &Shared, slot: &Slot, buf: &mut WriteBuf, depth: u32) -> Result<(), Blocked> {
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
        let v = arg.v.load(Ordering::Acquire);
        if !arg.write || v.is_null() || m.is_some() || arg.alias.load(Ordering::Relaxed) {
            continue; // a read, written, an unknown table, or a duplicate
        }
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
        slot.state.store(UNPROCESSED, Ordering::Release);
        return Err(Blocked::Later);
    }
    for (arg, m) in slot.inputs.iter().zip(&made) {
        let v = arg.v.load(Ordering::Acquire);
        if !arg.write || v.is_null() || arg.alias.load(Ordering::Relaxed) {
            continue;
        }
        // SAFETY: our placeholder, alive until we complete.
        let ver = unsafe { &*v };
        ver.data.store(m.expect("made above"), Ordering::Release);
        ver.state.store(READY, Ordering::Release);
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
    slot.state.store(COMPLETE, Ordering::Release);
    Ok(())
}

/// The value of version `v` (null: none), evaluating its producer if it
/// is not produced yet.
fn resolve<'v>(
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
    if ver.state.load(Ordering::Acquire) != READY {
        // SAFETY: an unready placeholder's producer's batch is alive
        // (batches are retired through the epoch we are pinned in).
        let producer = unsafe { &*ver.producer };
        if (depth >= 32 || execute(s, producer, buf, depth + 1).is_err())
            && ver.state.load(Ordering::Acquire) != READY
        {
            return Err(Blocked::Later);
        }
    }
    let d = ver.data.load(Ordering::Acquire);
    // SAFETY: READY data is immutable and freed only with its version.
    Ok((!d.is_null()).then(|| unsafe { (*d).value() }).flatten())
}

/// A procedure running at its timestamp.
pub struct Txn<'a> {
    s: &'a Shared,
    slot: &'a Slot,
    g: &'a crossbeam_epoch::Guard,
    declared: &'a Declared,
    /// The declared key after the last one used: a procedure usually
    /// uses its keys in the order it declared them, and the next lookup
    /// tries it first.
    cursor: usize,
    writes: WriteBuf,
    depth: u32,
    /// A read found an input another thread is producing: the run is
    /// abandoned and retried later.
    blocked: bool,
    /// Reads so far (see [`LONG_RUN`]).
    reads: u32,
}

impl Txn<'_> {
    /// The declared key `key` of table `t`: (its index, whether a write);
    /// a write if it is declared both ways.
    fn find(&mut self, t: TableId, key: &[u8]) -> Option<(usize, bool)> {
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
    fn placeholder(&mut self, t: TableId, key: &[u8]) -> Result<(usize, *mut Version), TxError> {
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
        let v = self.slot.inputs[e].v.load(Ordering::Acquire);
        if v.is_null() {
            return Err(Error::UnknownTableId(t.index()).into());
        }
        Ok((e, v))
    }

    fn undeclared(t: TableId) -> TxError {
        Error::Undeclared(format!(
            "BOHM plans writes from the declared write set; table {} key not declared",
            t.index()
        ))
        .into()
    }

    /// This procedure's own buffered write of `key`, if any (a null
    /// value: its deletion).
    fn own(&self, t: TableId, key: &[u8]) -> Option<*mut Data> {
        self.writes.entries.iter().find_map(|&(e, d)| {
            let (dt, dk, _) = self.declared.get(e)?;
            (dt == t && dk == key).then_some(d)
        })
    }

    /// What this procedure reads at `key`: its own write, or the version
    /// visible at its timestamp. A key it declared is found without the
    /// index: below its own placeholder for a write, through the CC
    /// thread's annotation for a read (§3.2.3).
    fn read<'v>(&mut self, t: TableId, key: &[u8]) -> Result<Option<&'v [u8]>, TxError> {
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
        let v = self.slot.inputs[e].v.load(Ordering::Acquire);
        if write {
            if v.is_null() {
                return self.visible(t, key); // an unknown table: its error
            }
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
    fn visible<'v>(&mut self, t: TableId, key: &[u8]) -> Result<Option<&'v [u8]>, TxError> {
        check_key(key)?;
        let tree = self.s.tables.get(t)?;
        let Some(c) = tree.find(key, &Pin(self.g)) else {
            return Ok(None);
        };
        self.visible_in(c)
    }

    /// The value chain `c` (an index value) holds at this procedure's
    /// timestamp.
    fn visible_in<'v>(&mut self, c: u64) -> Result<Option<&'v [u8]>, TxError> {
        // SAFETY: chains live as long as the database.
        let chain = unsafe { &*(c as *const Chain) };
        let mut v = chain.head.load(Ordering::Acquire);
        // SAFETY: versions at or above the one we read are not cut while
        // our batch runs (Condition 3); pinned.
        while !v.is_null() && unsafe { (*v).begin } >= self.slot.ts {
            // SAFETY: as above.
            v = unsafe { (*v).prev.load(Ordering::Acquire) };
        }
        self.resolved(v)
    }

    /// The value of version `v` (produced first if need be), or the run
    /// is abandoned: its input is being produced elsewhere.
    fn resolved<'v>(&mut self, v: *mut Version) -> Result<Option<&'v [u8]>, TxError> {
        self.reads += 1;
        if self.reads.is_multiple_of(LONG_RUN) {
            hand_back();
        }
        #[cfg(feature = "mutant")]
        let v = {
            let mut v = v;
            let unready = |v: *mut Version| {
                // SAFETY: as in `visible_in`.
                !v.is_null() && unsafe { (*v).state.load(Ordering::Acquire) } != READY
            };
            while self.s.cfg.mutant_skip_unready && unready(v) {
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

impl Engine for Bohm {
    type Runner = Runner;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        self.create_table_with(name, TableOptions::default())
    }

    fn create_table_with(&self, name: &str, o: TableOptions) -> Result<TableId, Error> {
        if self.shared.cfg.point_index && o.point_lookups {
            self.shared.tables.create(name, Tree::with_point_index)
        } else {
            self.shared.tables.create(name, Tree::new)
        }
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.shared.tables.find(name)
    }

    fn runner(&self) -> Result<Runner, Error> {
        Ok(Runner {
            s: Arc::clone(&self.shared),
            client: Arc::default(),
            in_flight: 0,
            outbox: Vec::new(),
            stats: Stats::default(),
            last_ts: 0,
            pin: self
                .shared
                .free_pins
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop(),
        })
    }
}

/// A client's handle: submits procedures into the sequencer and collects
/// them, and runs closures alone.
pub struct Runner {
    s: Arc<Shared>,
    client: Arc<Client>,
    in_flight: usize,
    stats: Stats,
    last_ts: u64,
    /// Procedures submitted and not yet handed to the sequencer (they go
    /// together: one lock per [`SEND_EVERY`], not per procedure).
    outbox: Vec<Input>,
    /// This runner's slot in [`Shared::pins`], if it got one.
    pin: Option<usize>,
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
const SEND_EVERY: usize = 16;

impl Runner {
    /// Hand the procedures submitted so far, then `i` (if any), to the
    /// sequencer, waking it only if it sleeps.
    fn send(&mut self, i: Option<Input>) {
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
            if self.s.stop.load(Ordering::SeqCst) {
                return Err(Error::InvalidOption("BOHM is shutting down".into()));
            }
            st = cv
                .wait_timeout(st, std::time::Duration::from_millis(10))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(st);
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
            d.fetch_max(ts + 1, Ordering::SeqCst);
        }
        let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
        *st = 2;
        cv.notify_all();
        drop(st);
        match r {
            Ok(v) => {
                self.stats.commits += 1;
                self.last_ts = ts;
                Ok(Ok(v))
            }
            Err(TxError::Conflict(reason)) => Ok(Err(reason)),
            Err(TxError::Failed(e)) => {
                self.stats.failures += 1;
                Err(e)
            }
        }
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
            // Every pin is taken: run it alone (correct, slower).
            loop {
                if let Ok(v) = self.try_run(|tx| body(tx))? {
                    return Ok(v);
                }
            }
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

/// A snapshot read ([`Runner::snapshot_read`]): each key's newest
/// version timestamped below `bound`, all of them produced.
pub struct Snapshot<'a> {
    s: &'a Shared,
    g: &'a crossbeam_epoch::Guard,
    bound: u64,
    batch: ScanBatch,
}

impl Snapshot<'_> {
    /// The value of `chain` at the snapshot.
    fn visible<'v>(&self, chain: u64) -> Option<&'v [u8]> {
        // SAFETY: chains live as long as the database.
        let chain = unsafe { &*(chain as *const Chain) };
        let mut v = chain.head.load(Ordering::Acquire);
        // SAFETY: versions at or above the one visible at `bound` are not
        // cut while our pin holds (see `snapshot_read`); the ones a closure
        // unlinks are freed through the epoch we are pinned in.
        while !v.is_null() && unsafe { (*v).begin } >= self.bound {
            // SAFETY: as above.
            v = unsafe { (*v).prev.load(Ordering::Acquire) };
        }
        if v.is_null() {
            return None;
        }
        // SAFETY: as above.
        let ver = unsafe { &*v };
        debug_assert_eq!(ver.state.load(Ordering::Acquire), READY);
        let d = ver.data.load(Ordering::Acquire);
        // SAFETY: READY data is immutable while its version is alive.
        (!d.is_null()).then(|| unsafe { (*d).value() }).flatten()
    }
}

impl ReadOnly for Snapshot<'_> {
    fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        check_key(key)?;
        let tree = self.s.tables.get(t)?;
        Ok(tree.find(key, &Pin(self.g)).and_then(|c| self.visible(c)))
    }

    fn read_range(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), TxError> {
        check_bounds(lo, hi)?;
        let tree = self.s.tables.get(t)?;
        let mut batch = std::mem::take(&mut self.batch);
        let this = &*self;
        let r = visit(
            &mut batch,
            tree,
            (lo, hi),
            limit,
            reverse,
            &Pin(this.g),
            |_, c| Ok(this.visible(c)),
            f,
        );
        self.batch = batch;
        r
    }
}

/// A closure running alone (nothing else runs in the pipeline meanwhile):
/// writes install committed versions at once, undone on rollback.
pub struct Alone<'a> {
    s: &'a Shared,
    g: &'a crossbeam_epoch::Guard,
    ts: u64,
    /// (chain, the version installed, whether it replaced one of ours)
    undo: Vec<(*const Chain, *mut Version)>,
}

impl Alone<'_> {
    fn head(&self, t: TableId, key: &[u8]) -> Result<Option<&Chain>, TxError> {
        check_key(key)?;
        let tree = self.s.tables.get(t)?;
        // SAFETY: chains live as long as the database.
        Ok(tree
            .find(key, &Pin(self.g))
            .map(|c| unsafe { &*(c as *const Chain) }))
    }

    /// The newest version's value (everything has completed).
    fn latest(chain: &Chain) -> Option<&[u8]> {
        let v = chain.head.load(Ordering::Acquire);
        if v.is_null() {
            return None;
        }
        // SAFETY: alive while pinned; READY (nothing is in flight).
        let d = unsafe { (*v).data.load(Ordering::Acquire) };
        // SAFETY: READY data is immutable until its version is freed.
        (!d.is_null()).then(|| unsafe { (*d).value() }).flatten()
    }

    fn write(&mut self, t: TableId, key: &[u8], value: Option<&[u8]>) -> Result<bool, TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        check_key(key)?;
        if self.s.tables.get(t).is_err() {
            return Err(Error::UnknownTableId(t.index()).into());
        }
        let chain = chain(self.s, t, key, self.g).expect("table exists");
        let existed = Self::latest(chain).is_some();
        let head = chain.head.load(Ordering::Acquire);
        let data = value.map_or(std::ptr::null_mut(), |v| Data::alloc((), Some(v), 0));
        // SAFETY: alive while pinned.
        if !head.is_null() && unsafe { (*head).begin } == self.ts {
            // Ours already: replace its value (the old one was never seen
            // by anyone else).
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
        chain.head.store(v, Ordering::Release);
        self.undo.push((chain as *const Chain, v));
        Ok(existed)
    }

    fn commit(&mut self) {
        self.undo.clear();
    }

    fn rollback(&mut self) {
        for (chain, v) in self.undo.drain(..).rev() {
            // SAFETY: our chain and version; nothing else runs.
            unsafe {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Puts `value` at `key`, and optionally at a key it did not declare.
    struct Put {
        t: TableId,
        key: u64,
        stray: bool,
    }

    impl Body for Put {
        type Output = ();

        fn run<T: Tx>(&mut self, tx: &mut T) -> Result<(), TxError> {
            tx.put(self.t, &self.key.to_be_bytes(), b"v")?;
            if self.stray {
                tx.put(self.t, b"undeclared", b"v")?;
            }
            Ok(())
        }
    }

    fn submit(w: &mut Runner, t: TableId, key: u64, stray: bool) -> Result<Option<()>, Error> {
        let mut p = Procedure::new(0, Put { t, key, stray });
        p.declared.write(t, &key.to_be_bytes());
        p.planned = true;
        w.submit(p).unwrap();
        let mut done: Vec<Done<Put>> = Vec::new();
        w.poll(true, &mut done).unwrap();
        done.pop().unwrap().outcome
    }

    /// Adds one to each of its keys.
    struct Bump {
        t: TableId,
        keys: Vec<u64>,
    }

    impl Body for Bump {
        type Output = ();

        fn run<T: Tx>(&mut self, tx: &mut T) -> Result<(), TxError> {
            for k in &self.keys {
                let v = tx.get(self.t, &k.to_be_bytes())?.map_or(0, |v| {
                    u64::from_be_bytes(v[..8].try_into().expect("8 bytes"))
                });
                tx.put(self.t, &k.to_be_bytes(), &(v + 1).to_be_bytes())?;
            }
            Ok(())
        }
    }

    fn chain_len(db: &Bohm, t: TableId, key: u64) -> usize {
        let g = crossbeam_epoch::pin();
        let tree = db.shared.tables.get(t).unwrap();
        let c = tree.find(&key.to_be_bytes(), &Pin(&g)).unwrap() as *const Chain;
        // SAFETY: pinned; chains live as long as the database.
        let mut v = unsafe { &*c }.head.load(Ordering::Acquire);
        let mut n = 0;
        while !v.is_null() {
            n += 1;
            // SAFETY: as above.
            v = unsafe { &*v }.prev.load(Ordering::Acquire);
        }
        n
    }

    /// §3.3.2: versions are cut by the batch low watermark as the run
    /// goes, so an update-heavy run keeps every chain short (without the
    /// cut, each key would hold all 8,000 of its versions), and every
    /// update is counted once.
    #[test]
    fn garbage_is_cut_by_the_low_watermark() {
        for both in [false, true] {
            let db = Bohm::new(Config {
                batch: 50,
                both,
                ..Config::default()
            })
            .unwrap();
            let t = db.create_table("t").unwrap();
            let mut w = db.runner().unwrap();
            let (keys, txns) = (50u64, 40_000u64);
            let mut done: Vec<Done<Bump>> = Vec::new();
            let mut free: Vec<Box<Procedure<Bump>>> = Vec::new();
            let mut in_flight = 0;
            for i in 0..txns {
                let mut p = free.pop().unwrap_or_else(|| {
                    Procedure::new(
                        0,
                        Bump {
                            t,
                            keys: Vec::new(),
                        },
                    )
                });
                p.body.keys.clear();
                p.declared.clear();
                for j in 0..10 {
                    let k = (i * 7 + j * 5) % keys;
                    if !p.body.keys.contains(&k) {
                        p.body.keys.push(k);
                        p.declared.write(t, &k.to_be_bytes());
                    }
                }
                p.planned = true;
                w.submit(p).unwrap();
                in_flight += 1;
                w.poll(in_flight >= 200, &mut done).unwrap();
                for d in done.drain(..) {
                    assert!(matches!(d.outcome, Ok(Some(()))));
                    in_flight -= 1;
                    free.push(d.procedure);
                }
            }
            while in_flight > 0 {
                w.poll(true, &mut done).unwrap();
                in_flight -= done.len();
                done.clear();
            }
            let longest = (0..keys).map(|k| chain_len(&db, t, k)).max().unwrap();
            assert!(longest < 400, "both={both}: a chain of {longest} versions");
            let total: u64 = w
                .try_run(|tx| {
                    let mut sum = 0;
                    for k in 0..keys {
                        let v = tx.get(t, &k.to_be_bytes())?.unwrap();
                        sum += u64::from_be_bytes(v[..8].try_into().unwrap());
                    }
                    Ok(sum)
                })
                .unwrap()
                .unwrap();
            let writes: u64 = (0..txns)
                .map(|i| {
                    let mut ks: Vec<u64> = (0..10).map(|j| (i * 7 + j * 5) % keys).collect();
                    ks.sort_unstable();
                    ks.dedup();
                    ks.len() as u64
                })
                .sum();
            assert_eq!(total, writes, "both={both}: every update counted once");
        }
    }

    /// A write outside the declared set fails the procedure (BOHM planned
    /// no placeholder for it), and undoes its declared writes; an
    /// undeclared procedure is refused.
    #[test]
    fn undeclared_writes_fail_and_undo() {
        let db = Bohm::new(Config::default()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.runner().unwrap();
        assert_eq!(submit(&mut w, t, 1, false).unwrap(), Some(()));
        assert!(matches!(
            submit(&mut w, t, 2, true),
            Err(Error::Undeclared(_))
        ));
        let got = w
            .try_run(|tx| {
                Ok((
                    tx.get(t, &1u64.to_be_bytes())?.is_some(),
                    tx.get(t, &2u64.to_be_bytes())?.is_some(),
                ))
            })
            .unwrap()
            .unwrap();
        assert_eq!(got, (true, false), "the failed procedure's write is undone");
        let p = Procedure::new(
            0,
            Put {
                t,
                key: 3,
                stray: false,
            },
        );
        assert!(matches!(w.submit(p), Err(Error::Undeclared(_))));
        assert!(Bohm::new(Config {
            batch: 0,
            ..Config::default()
        })
        .is_err());
    }
}
