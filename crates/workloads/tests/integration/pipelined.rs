//! The batch shape of the driver: a client keeps procedures in flight
//! under a pipelined design and collects them as they finish. A test
//! engine runs every submitted procedure on Silo at once but hands it back
//! only later, when polled: YCSB's books must still balance (the value
//! counters add up to the read-modify-writes the client saw commit), so
//! every procedure must come back, including those still in flight when
//! the run stops.

use crate::common::seed;

use std::any::Any;
use std::collections::VecDeque;
use std::time::Duration;

use granary::{Database, Options};
use granary_api::{
    AbortReason, Body, Done, Engine, Error, Procedure, Stats, TableId, TxError, TxRunner,
};
use granary_workloads::driver::{run, DriverConfig, Workload};
use granary_workloads::smallbank::{SmallBank, SmallBankConfig};
use granary_workloads::ycsb::{WriteKind, Ycsb, YcsbConfig};

/// Silo, with finished procedures held back until polled, up to `WINDOW`.
struct Deferred(Database);

const WINDOW: usize = 4;

struct DeferredRunner {
    inner: <Database as Engine>::Runner,
    /// Finished procedures (each a `Done<B>` of the poller's `B`).
    queue: VecDeque<Box<dyn Any + Send>>,
}

impl Engine for Deferred {
    type Runner = DeferredRunner;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        self.0.create_table(name)
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.0.table(name)
    }

    fn runner(&self) -> Result<DeferredRunner, Error> {
        Ok(DeferredRunner {
            inner: self.0.runner()?,
            queue: VecDeque::new(),
        })
    }
}

impl TxRunner for DeferredRunner {
    type Tx<'a> = <<Database as Engine>::Runner as TxRunner>::Tx<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Self::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.inner.try_run(body)
    }

    fn window(&self) -> usize {
        WINDOW
    }

    fn submit<B: Body>(&mut self, mut p: Box<Procedure<B>>) -> Result<(), Error> {
        let (declared, body) = p.parts();
        let outcome = loop {
            let r = match declared {
                Some(d) => self.inner.try_run_declared(d, |tx| body.run(tx)),
                None => self.inner.try_run(|tx| body.run(tx)),
            };
            match r {
                Ok(Ok(v)) => break Ok(Some(v)),
                Ok(Err(_)) => continue,
                Err(Error::RolledBack) => break Ok(None),
                Err(e) => break Err(e),
            }
        };
        let commit_key = match outcome {
            Ok(Some(_)) => self.inner.last_commit_key(),
            _ => 0,
        };
        self.queue.push_back(Box::new(Done {
            procedure: p,
            outcome,
            commit_key,
        }));
        Ok(())
    }

    fn poll<B: Body>(&mut self, wait: bool, done: &mut Vec<Done<B>>) -> Result<(), Error> {
        // Hand back the oldest when asked to wait, all of them one time in
        // three otherwise (so that the client sees both).
        let n = if wait {
            1
        } else if self.queue.len().is_multiple_of(3) {
            self.queue.len()
        } else {
            0
        };
        for _ in 0..n.min(self.queue.len()) {
            let d = self.queue.pop_front().expect("queued");
            done.push(*d.downcast::<Done<B>>().expect("one body type"));
        }
        Ok(())
    }

    fn last_commit_key(&self) -> u64 {
        self.inner.last_commit_key()
    }

    fn stats(&self) -> &Stats {
        self.inner.stats()
    }
}

fn deferred() -> Deferred {
    Deferred(
        Database::new(Options::default().epoch_interval(Duration::from_millis(2))).expect("db"),
    )
}

fn config(seed: u64) -> DriverConfig {
    DriverConfig {
        threads: 2,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(300),
        seed,
        latency_every: 1,
        breakdown: false,
    }
}

#[test]
fn ycsb_runs_with_procedures_in_flight() {
    let s = seed();
    let db = deferred();
    let cfg = YcsbConfig::preset("study")
        .unwrap()
        .keys(1_000)
        .theta(0.9)
        .ops_per_txn(4)
        .read_pct(50.0)
        .write_kind(WriteKind::Rmw);
    let mut w = Ycsb::new(cfg).expect("config");
    w.load(&db, &|_, _| {}).expect("load");
    let r = run(&w, &db, &config(s), &|_, _, _| {}).expect("run");
    assert!(
        r.invariant_violations.is_empty(),
        "seed {s}: {:?}",
        r.invariant_violations
    );
    assert!(r.commits > 100, "seed {s}: {} commits", r.commits);
    let timed: u64 = r.types.iter().map(|t| t.latency_us.samples).sum();
    assert!(
        timed >= r.commits,
        "every procedure timed: {timed} < {}",
        r.commits
    );
    eprintln!(
        "pipelined ycsb: {:.0} txn/s, {} commits",
        r.throughput_txn_per_s, r.commits
    );
}

/// SmallBank's books (every customer's money is its initial balance plus
/// the committed transfers the clients saw) balance with procedures in
/// flight, rollbacks included.
#[test]
fn smallbank_runs_with_procedures_in_flight() {
    let s = seed();
    let db = deferred();
    let mut w = SmallBank::new(SmallBankConfig::new(100)).expect("config");
    w.load(&db, &|_, _| {}).expect("load");
    let r = run(&w, &db, &config(s), &|_, _, _| {}).expect("run");
    assert!(
        r.invariant_violations.is_empty(),
        "seed {s}: {:?}",
        r.invariant_violations
    );
    let rolled_back: u64 = r.types.iter().map(|t| t.user_aborts).sum();
    assert!(
        r.commits > 100 && rolled_back > 0,
        "seed {s}: {} commits, {rolled_back} rolled back",
        r.commits
    );
}
