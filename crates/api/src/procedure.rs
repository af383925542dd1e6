//! Transactions as values: the batch shape of the interface.
//!
//! Under most designs a worker thread runs its own transaction: the body is
//! a closure that borrows the thread's state, handed to
//! [`TxRunner::try_run`](crate::TxRunner::try_run). Under BOHM (bohm-vldb15 §3) a client hands the
//! whole transaction to a sequencer; other threads plan it and run it,
//! possibly after running other transactions whose outputs it reads. So a
//! transaction must also exist as a value that can cross threads: a
//! [`Procedure`], which owns its parameters, its declared sets and a
//! [`Body`] that runs against any [`Tx`].
//!
//! A client submits procedures through its runner and keeps up to
//! [`TxRunner::window`](crate::TxRunner::window) of them in flight. A design of the runner shape
//! (window 1, the default) runs each one in place, as
//! [`TxRunner::try_run_declared`](crate::TxRunner::try_run_declared), at no extra cost; a pipelined design
//! takes them with [`TxRunner::submit`](crate::TxRunner::submit) and gives them back, finished,
//! through [`TxRunner::poll`](crate::TxRunner::poll). Procedures travel boxed (a pointer moves,
//! not the procedure; a pipelined design queues the box as it is) and
//! come back with their buffers, so a client reuses them and allocates
//! nothing per transaction.

use crate::{Declared, Error, Tx, TxError};

/// What a procedure does, against any design's transaction. It may run
/// more than once (a design retries it after a conflict), so it must not
/// keep effects of a run that did not commit.
pub trait Body: Send + 'static {
    /// What a committed run returns.
    type Output: Send + 'static;

    /// Run once against `tx`.
    ///
    /// # Errors
    /// A conflict or failure from `tx`, or the procedure's own rollback
    /// ([`TxError::rollback`]).
    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<Self::Output, TxError>;
}

/// A transaction as a value: its type, its declared read and write sets
/// (for designs that plan or lock up front), and its body.
pub struct Procedure<B: Body> {
    /// The workload's transaction type (an index into its type names).
    pub kind: usize,
    /// The read and write sets; read only if [`Procedure::planned`].
    pub declared: Declared,
    /// Whether `declared` was filled in for this run. Workloads plan only
    /// for designs that read plans ([`TxRunner::uses_declared`](crate::TxRunner::uses_declared)).
    pub planned: bool,
    /// When the client submitted it, if its latency is measured.
    pub submitted: Option<crate::Stamp>,
    /// The body and its parameters.
    pub body: B,
}

impl<B: Body> Procedure<B> {
    /// A procedure of type `kind` with nothing declared.
    pub fn new(kind: usize, body: B) -> Box<Procedure<B>> {
        Box::new(Procedure {
            kind,
            declared: Declared::new(),
            planned: false,
            submitted: None,
            body,
        })
    }

    /// The declared sets, if planned.
    pub fn plan(&self) -> Option<&Declared> {
        self.planned.then_some(&self.declared)
    }

    /// Its declared sets (if planned) and its body, borrowed apart, to run
    /// it: `runner.try_run_declared(d, |tx| body.run(tx))`.
    pub fn parts(&mut self) -> (Option<&Declared>, &mut B) {
        (self.planned.then_some(&self.declared), &mut self.body)
    }
}

/// A procedure a pipelined design has finished, handed back to its client.
pub struct Done<B: Body> {
    /// The procedure, to be reused.
    pub procedure: Box<Procedure<B>>,
    /// `Ok(Some(v))`: committed with output `v`; `Ok(None)`: rolled back
    /// by its own logic; `Err(e)`: failed.
    pub outcome: Result<Option<B::Output>, Error>,
    /// The design's commit-order key of the committed run (as
    /// [`TxRunner::last_commit_key`](crate::TxRunner::last_commit_key): for any one key, its successive
    /// writers' keys increase); 0 if it did not commit.
    pub commit_key: u64,
}
