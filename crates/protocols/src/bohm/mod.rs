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

//!
//! The code by stage: `store` (version chains), `pipeline` (what the
//! stages share), `sequencer`, `planner` (concurrency control),
//! `executor`, `txn` (a procedure's view), `runner` (a client),
//! `snapshot` (reads without the pipeline); `pin` the snapshot pins.

use std::any::Any;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crossbeam_utils::CachePadded;
use granary_api::{
    AbortReason, Body, Declared, Done, Engine, Error, Procedure, ReadOnly, Stats, TableId,
    TableOptions, Tx, TxError, TxRunner,
};
use granary_index::{Insert, Tree};

mod executor;
mod pin;
mod pipeline;
mod planner;
mod runner;
mod sequencer;
mod snapshot;
mod store;
mod txn;

#[cfg(test)]
mod tests;

pub use runner::Runner;
pub use snapshot::Snapshot;
pub use txn::{Alone, Txn};

use executor::*;
use pipeline::*;
use planner::*;
use sequencer::*;
use store::*;

use crate::catalog::Catalog;
use crate::reclaim::Pin;
use crate::scan::{visit, Batch as ScanBatch};
use crate::sync::{
    backoff, prefetch, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use crate::value::Tail;
use granary_api::limits::{check_bounds, check_key, check_value};

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
        // SeqCst: `stop` is a progress word (module doc): every thread sees it
        // in order with the others and exits.
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
                        let chain = c.cast_mut();
                        free_chain((&*chain).head.load(Ordering::Relaxed));
                        Chain::free(chain);
                    }
                });
            }
        }
    }
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
