//! How a design runs transactions: [`TxRunner`] (a worker thread's handle
//! that runs one-shot procedures, or hands them to a pipeline) and
//! [`Engine`] (the design itself: tables, runners, durability), over the
//! [`Tx`] operations of `tx.rs`.

use crate::error::{AbortReason, Error, TxError};
use crate::procedure::{Body, Done, Procedure};
use crate::stats::{Profile, Stats};
use crate::tx::{Declared, ReadOnly, Tx};
use crate::TableId;

/// A worker thread's handle for running one-shot procedures under some
/// concurrency-control protocol.
pub trait TxRunner {
    /// The transaction type procedures are handed.
    type Tx<'a>: Tx
    where
        Self: 'a;

    /// Run `body` once: `Ok(Ok(v))` committed, `Ok(Err(reason))` conflicted
    /// and rolled back (the caller may retry), `Err(e)` failed.
    ///
    /// # Errors
    /// Whatever the body failed with, checked to come from a consistent
    /// state.
    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Self::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error>;

    /// As [`try_run`](TxRunner::try_run), for a procedure whose read and
    /// write sets are declared up front. The body must stay within them.
    /// The default (Silo's) ignores the declaration.
    ///
    /// # Errors
    /// As for `try_run`.
    fn try_run_declared<T>(
        &mut self,
        declared: &Declared,
        body: impl FnOnce(&mut Self::Tx<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let _ = declared;
        self.try_run(body)
    }

    /// Whether this protocol reads declarations at all. Workloads build a
    /// [`Declared`] only when it does, so that protocols which execute
    /// optimistically (Silo) never pay for planning. Default: no.
    fn uses_declared(&self) -> bool {
        false
    }

    /// Whether the design must know every key a procedure writes before
    /// it runs (BOHM plans placeholders from the write set, bohm-vldb15
    /// §3.2). A workload whose write set depends on what it reads (TPC-C's
    /// new-order order id) then predicts it by reconnaissance on a
    /// [`snapshot_read`](TxRunner::snapshot_read), declares the
    /// prediction, and has the body check it: a mismatch fails with
    /// [`Error::StalePlan`](crate::Error::StalePlan) and the workload
    /// predicts again. Designs that only lock or partition by the
    /// declaration (false, the default) never pay for reconnaissance.
    fn needs_write_sets(&self) -> bool {
        false
    }

    /// How many submitted procedures a client keeps in flight. 1 (the
    /// default): the design runs each procedure in place, on the client's
    /// thread, as [`try_run_declared`](TxRunner::try_run_declared) — every
    /// design of the runner shape. More: a pipelined design (BOHM), whose
    /// clients hand procedures over with [`submit`](TxRunner::submit)
    /// and collect them with [`poll`](TxRunner::poll).
    fn window(&self) -> usize {
        1
    }

    /// Hand `p` over to a pipelined design ([`window`](TxRunner::window)
    /// above 1); it comes back through [`poll`](TxRunner::poll) once it
    /// has committed, rolled back or failed (conflicts are retried by the
    /// design). Designs of the runner shape refuse it: their clients run
    /// procedures in place.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] from a design that runs procedures in
    /// place; a pipelined design's own failure.
    #[allow(clippy::boxed_local)] // the box is what a pipelined design queues
    fn submit<B: Body>(&mut self, p: Box<Procedure<B>>) -> Result<(), Error> {
        let _ = p;
        Err(Error::InvalidOption(
            "this design runs procedures in place (window 1); submit is for pipelined designs"
                .into(),
        ))
    }

    /// Move the procedures submitted through this runner that have
    /// finished into `done`; with `wait`, first block until at least one
    /// has, if any is in flight. The default has none in flight.
    ///
    /// # Errors
    /// A pipelined design's failure.
    fn poll<B: Body>(&mut self, wait: bool, done: &mut Vec<Done<B>>) -> Result<(), Error> {
        let _ = (wait, done);
        Ok(())
    }

    /// The protocol's commit-order key of this worker's last committed
    /// transaction that wrote something: for Silo, its TID. For any one
    /// key, the commit keys of its successive writers increase.
    fn last_commit_key(&self) -> u64;

    /// Counters since the runner was created (or last reset).
    fn stats(&self) -> &Stats;

    /// Start (or stop) collecting a cost breakdown. Protocols without
    /// instrumentation ignore it.
    fn set_profiling(&mut self, _on: bool) {}

    /// The breakdown since the last call, reset; `None` if the protocol
    /// does not collect one.
    fn take_profile(&mut self) -> Option<Profile> {
        None
    }

    /// For a durable engine that does not wait at commit: the persistent
    /// epoch that acknowledges the last committed transaction (see
    /// [`Engine::durable_epoch`]). 0 when there is nothing to wait for.
    fn durable_token(&self) -> u64 {
        0
    }

    /// Run a read-only body against a consistent snapshot (Silo §4.9: it
    /// never aborts). Protocols without snapshots run it as a regular
    /// transaction, retried on conflict with a backoff
    /// ([`retry::until_committed`](crate::retry::until_committed)).
    ///
    /// # Errors
    /// Whatever the body failed with; [`Error::RetriesExhausted`] if it
    /// conflicted [`retry::MAX_ATTEMPTS`](crate::retry::MAX_ATTEMPTS)
    /// times in a row.
    fn snapshot_read<T>(
        &mut self,
        body: &mut dyn FnMut(&mut dyn ReadOnly) -> Result<T, TxError>,
    ) -> Result<T, Error> {
        // No snapshots: a regular read-only transaction, retried until it
        // commits (every `Tx` is a `ReadOnly`), within the shared bound.
        crate::retry::until_committed(crate::retry::MAX_ATTEMPTS, || self.try_run(|tx| body(tx)))
    }
}

/// How a table will be used: hints a protocol may act on to make it
/// faster. A hint never changes what the table means or holds, and a
/// protocol that has no use for one ignores it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// Most accesses look up one key that is present (not scans, and not
    /// a stream of inserts of new keys): a protocol with a point index (a
    /// hash table over the keys, beside the ordered index) keeps one for
    /// the table, if its own options allow it.
    pub point_lookups: bool,
    /// Most keys are 8-byte big-endian integers below this bound (0: no
    /// such bound), as the ids of a table numbered from 0 are: a protocol
    /// may then find such a key's entry by its number, in an array of
    /// this many entries made with the table, without an index probe.
    /// Other keys are still allowed, and are indexed as usual. The array
    /// costs memory for every number below the bound from the start, so
    /// give it only for ids that are dense (a protocol may refuse a bound
    /// it cannot allocate, with [`Error::InvalidOption`]).
    pub dense_keys: u64,
}

impl TableOptions {
    /// A table read and written mostly by key ([`TableOptions::point_lookups`]).
    pub fn point_lookups() -> TableOptions {
        TableOptions {
            point_lookups: true,
            ..TableOptions::default()
        }
    }

    /// These options, with keys that are mostly 8-byte big-endian numbers
    /// below `n` ([`TableOptions::dense_keys`]).
    ///
    /// ```
    /// use granary_api::TableOptions;
    /// let o = TableOptions::point_lookups().with_dense_keys(100_000);
    /// assert!(o.point_lookups);
    /// assert_eq!(o.dense_keys, 100_000);
    /// ```
    pub fn with_dense_keys(self, n: u64) -> TableOptions {
        TableOptions {
            dense_keys: n,
            ..self
        }
    }
}

/// A database running some protocol: makes tables and per-thread runners.
pub trait Engine: Sync {
    /// A worker thread's runner.
    type Runner: TxRunner + Send;

    /// Create a table; [`Error::TableExists`] if the name is taken.
    ///
    /// # Errors
    /// As the protocol's own `create_table`.
    fn create_table(&self, name: &str) -> Result<TableId, Error>;

    /// Create a table, with hints on how it will be used (the default
    /// ignores them).
    ///
    /// # Errors
    /// As [`Engine::create_table`].
    fn create_table_with(&self, name: &str, options: TableOptions) -> Result<TableId, Error> {
        let _ = options;
        self.create_table(name)
    }

    /// The existing table `name`; [`Error::UnknownTable`] if there is none
    /// (a durable engine recovers its tables before it is opened).
    ///
    /// # Errors
    /// [`Error::UnknownTable`].
    fn table(&self, name: &str) -> Result<TableId, Error>;

    /// The table `name`, created if it does not exist yet.
    ///
    /// # Errors
    /// As [`Engine::create_table`].
    fn open_table(&self, name: &str) -> Result<TableId, Error> {
        self.open_table_with(name, TableOptions::default())
    }

    /// The table `name`, created with `options` if it does not exist yet
    /// (an existing table keeps the options it was made with).
    ///
    /// # Errors
    /// As [`Engine::create_table`].
    fn open_table_with(&self, name: &str, options: TableOptions) -> Result<TableId, Error> {
        match self.table(name) {
            Err(Error::UnknownTable(_)) => match self.create_table_with(name, options) {
                // Created meanwhile by another thread.
                Err(Error::TableExists(_)) => self.table(name),
                r => r,
            },
            r => r,
        }
    }

    /// A runner for the calling thread.
    ///
    /// # Errors
    /// [`Error::TooManyWorkers`] past the protocol's limit.
    fn runner(&self) -> Result<Self::Runner, Error>;

    /// For a durable engine: the persistent epoch now (a transaction is
    /// durable once this reaches its [`TxRunner::durable_token`]). `None`
    /// for an in-memory engine.
    fn durable_epoch(&self) -> Option<u64> {
        None
    }

    /// For a durable engine: log bytes written so far.
    fn log_bytes(&self) -> Option<u64> {
        None
    }

    /// For an engine that takes checkpoints: when each finished one began
    /// and ended, oldest first (the most recent [`MAX_CHECKPOINT_SPANS`]).
    /// Empty for an engine without checkpoints.
    fn checkpoint_spans(&self) -> Vec<CheckpointSpan> {
        Vec::new()
    }
}

/// How many checkpoint spans an engine keeps for
/// [`Engine::checkpoint_spans`].
pub const MAX_CHECKPOINT_SPANS: usize = 1024;

/// When one checkpoint ran: from its start until its last file was
/// installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointSpan {
    /// When it began.
    pub began: std::time::Instant,
    /// When it was complete.
    pub ended: std::time::Instant,
}
