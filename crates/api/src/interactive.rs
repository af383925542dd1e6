//! Interactive transactions: opened, driven one operation at a time by
//! the caller, and committed or rolled back when the caller says so.
//!
//! A one-shot procedure ([`TxRunner::try_run`]) is the way to run work;
//! an interactive transaction exists for what a closure cannot express,
//! above all scripted interleavings: the Hermitage-style isolation tests
//! hold several transactions open at once and step them in a fixed order,
//! all on one thread, so that every design meets each anomaly in exactly
//! the same schedule.

use crate::engine::TxRunner;
use crate::error::{AbortReason, Error};
use crate::tx::Tx;

/// A runner that can also hold a transaction open across calls.
///
/// A design implements this only if it can run transactions whose
/// accesses are not known when they begin; one that plans from declared
/// sets (BOHM) does not.
///
/// # Contract: a session never waits
///
/// Callers interleave the sessions of several runners **on one thread**.
/// A step that waited for another open session would wait forever, since
/// the session it waits for cannot move until this step returns. So no
/// method here and no [`Tx`] operation of a session may block on another
/// transaction:
///
/// * a step that would wait for a lock fails with
///   [`TxError::Conflict`](crate::TxError::Conflict) instead (reason
///   [`AbortReason::LockConflict`]): a lock-based design behaves as
///   no-wait inside a session, whatever it does in [`TxRunner::try_run`];
/// * [`Interactive::begin`] takes nothing another session could be
///   waiting for, or fails rather than wait;
/// * [`InteractiveTx::commit`] that would wait for another transaction
///   (a commit dependency on an uncommitted version, Hekaton §3.2) fails
///   with the conflict instead.
///
/// Waiting for something that makes progress by itself (a spin on a
/// record mid-install, the epoch thread, a log flush) is allowed: every
/// commit finishes inside the step that started it, so no other session
/// is ever caught half-way through one.
///
/// A step that fails with a conflict dooms its session: the caller
/// drops it (which rolls it back) and issues no further step to it.
pub trait Interactive: TxRunner {
    /// An open interactive transaction, borrowing its runner.
    type Session<'a>: InteractiveTx
    where
        Self: 'a;

    /// Begin a transaction that stays open until
    /// [`InteractiveTx::commit`], [`InteractiveTx::abort`] or drop. No
    /// retries: a conflict surfaces from an operation or from `commit`.
    ///
    /// # Errors
    /// An engine error (e.g. a durable engine that stopped acknowledging
    /// commits).
    fn begin(&mut self) -> Result<Self::Session<'_>, Error>;
}

/// An open interactive transaction: the operations of a [`Tx`], then
/// commit or roll back. Dropping it without committing rolls it back.
pub trait InteractiveTx: Tx + Sized {
    /// Commit. `Ok(Ok(key))` committed, with `key` the protocol's
    /// commit-order key as [`TxRunner::last_commit_key`] gives it (a
    /// protocol that gives read-only transactions none returns 0 for
    /// them); `Ok(Err(reason))` conflicted and rolled back; `Err(e)`
    /// failed (rolled back too).
    ///
    /// # Errors
    /// An engine error.
    fn commit(self) -> Result<Result<u64, AbortReason>, Error>;

    /// Roll back explicitly (dropping the session does the same).
    fn abort(self) {
        drop(self);
    }
}
