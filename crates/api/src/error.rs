//! Errors and abort reasons, shared by every design.
//!
//! A conflict is an outcome, not an error: [`TxRunner::try_run`] returns
//! `Result<Result<T, AbortReason>, Error>`, keeping "retry me" apart from
//! "something is wrong". Inside a transaction body both travel as
//! [`TxError`] so `?` works on every operation.
//!
//! [`TxRunner::try_run`]: crate::TxRunner::try_run

use std::fmt;

/// Why a transaction attempt aborted. Every abort is counted by reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AbortReason {
    /// A record read changed, was superseded, or was deleted before commit
    /// (Silo Fig. 2, Phase 2).
    ReadValidation,
    /// A read record was locked by another committing transaction.
    ReadLocked,
    /// A leaf in the node-set changed: a phantom (Silo §4.6).
    NodeValidation,
    /// A record this transaction writes was superseded before it could
    /// lock it.
    WriteValidation,
    /// A lock this transaction needed was held by another one, and the
    /// protocol does not wait (no-wait 2PL, Partitioned-Store's try).
    LockConflict,
    /// Another transaction committed a newer version of a key this one
    /// writes (first-committer-wins: Snapshot Isolation, Hekaton).
    WriteConflict,
    /// A transaction whose uncommitted version this one read (a commit
    /// dependency, Hekaton) aborted.
    CommitDependency,
    /// The write set a procedure was planned with, predicted by
    /// reconnaissance from a snapshot (bohm-vldb15 §3, Calvin's OLLP), no
    /// longer matched what it read when it ran ([`Error::StalePlan`]): the
    /// client predicts again and resubmits it.
    StalePlan,
    /// The engine shed load: a resource it cannot grow on demand (for
    /// Deuteronomy, its recovery log or its MVCC table, deuteronomy-cidr15
    /// §6.5) is past its limit, and this transaction aborted to let older
    /// ones finish.
    Overloaded,
    /// The Serial Safety Net's exclusion window test failed (ERMIA; Wang
    /// et al., VLDB Journal 2017, §3): a transaction that must follow
    /// this one committed no later than one that must precede it
    /// (π(T) ≤ η(T)), so a dependency cycle could close through it.
    Exclusion,
}

impl AbortReason {
    /// Every reason, in a fixed order (for counters and reports).
    pub const ALL: [AbortReason; 10] = [
        AbortReason::ReadValidation,
        AbortReason::ReadLocked,
        AbortReason::NodeValidation,
        AbortReason::WriteValidation,
        AbortReason::LockConflict,
        AbortReason::WriteConflict,
        AbortReason::CommitDependency,
        AbortReason::StalePlan,
        AbortReason::Overloaded,
        AbortReason::Exclusion,
    ];

    /// This reason's position in [`AbortReason::ALL`] (for counters
    /// indexed by reason).
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// A short stable name (used in reports and JSON).
    pub fn name(self) -> &'static str {
        match self {
            AbortReason::ReadValidation => "read_validation",
            AbortReason::ReadLocked => "read_locked",
            AbortReason::NodeValidation => "node_validation",
            AbortReason::WriteValidation => "write_validation",
            AbortReason::LockConflict => "lock_conflict",
            AbortReason::WriteConflict => "write_conflict",
            AbortReason::CommitDependency => "commit_dependency",
            AbortReason::StalePlan => "stale_plan",
            AbortReason::Overloaded => "overloaded",
            AbortReason::Exclusion => "exclusion",
        }
    }
}

// `index` is the position in `ALL`.
const _: () = {
    let mut i = 0;
    while i < AbortReason::ALL.len() {
        assert!(AbortReason::ALL[i] as usize == i);
        i += 1;
    }
};

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for AbortReason {}

/// Errors granary reports. Nothing here is retried automatically.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A key longer than [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES).
    KeyTooLarge { len: usize, max: usize },
    /// A value longer than [`MAX_VALUE_BYTES`](crate::MAX_VALUE_BYTES).
    ValueTooLarge { len: usize, max: usize },
    /// `insert` found the key present.
    KeyExists,
    /// No table has this name.
    UnknownTable(String),
    /// A [`TableId`](crate::TableId) that no table of this database has.
    UnknownTableId(u32),
    /// `create_table` with a name already taken.
    TableExists(String),
    /// The database's table limit was reached.
    TooManyTables { max: usize },
    /// More concurrent workers than `Options::max_workers`.
    TooManyWorkers { max: usize },
    /// `run` gave up after this many conflicting attempts.
    RetriesExhausted { attempts: u32, last: AbortReason },
    /// The transaction body asked to roll back.
    RolledBack,
    /// The transaction body failed with its own error.
    User(Box<dyn std::error::Error + Send + Sync>),
    /// An invalid option value.
    InvalidOption(String),
    /// The operating system refused a resource (e.g. the epoch thread).
    Io(std::io::Error),
    /// A file operation of a durable database failed.
    Storage {
        what: String,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// Another process (or handle) has this database directory open.
    Locked(std::path::PathBuf),
    /// Damage inside what the database had made durable: recovery refuses
    /// to guess. `offset` is a byte offset into `path`.
    Corrupt {
        path: std::path::PathBuf,
        offset: u64,
        what: String,
    },
    /// A log or checkpoint write or sync failed earlier (the cause is
    /// given): the database acknowledges nothing more. Reopen it to recover.
    Poisoned(String),
    /// A file (or the end of one) that the durable state needs is gone:
    /// recovery would lose acknowledged data, so it stops. `path` names the
    /// file, or the directory it belongs in; `what` says what is gone and
    /// why it is needed. granary's `RecoveryMode::Salvage` recovers what
    /// survives.
    Missing {
        path: std::path::PathBuf,
        what: String,
    },
    /// A table name longer than
    /// [`MAX_TABLE_NAME_BYTES`](crate::MAX_TABLE_NAME_BYTES).
    TableNameTooLong { len: usize, max: usize },
    /// A procedure touched data outside what it declared, where the design
    /// relies on the declaration (Partitioned-Store's partitions).
    Undeclared(String),
    /// A procedure found, when it ran, that what it read differs from
    /// what its declared write set was predicted from (reconnaissance):
    /// it wrote nothing. The workload predicts its write set again and
    /// resubmits it (counted as [`AbortReason::StalePlan`]). The text says
    /// what went stale.
    StalePlan(&'static str),
    /// The design does not offer this operation (yet); the text says
    /// what and why.
    Unsupported(&'static str),
    /// A server the database depends on (the etcd cluster under
    /// Deuteronomy's etcd data component) refused a request, stayed
    /// unreachable past its retry budget, or could not be started:
    /// `what` could not be done, `detail` says why (the server, the
    /// attempts, its last answer).
    Remote { what: String, detail: String },
}

impl Error {
    /// [`Error::Storage`]: `what` (e.g. "write pepoch") failed on `path`.
    pub fn storage(what: &str, path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Storage {
            what: what.to_string(),
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes exceeds the {max}-byte limit")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes exceeds the {max}-byte limit")
            }
            Error::KeyExists => f.write_str("key already exists"),
            Error::UnknownTable(n) => write!(f, "no table named {n:?}"),
            Error::UnknownTableId(id) => write!(f, "no table with id {id} in this database"),
            Error::TableExists(n) => write!(f, "a table named {n:?} already exists"),
            Error::TooManyTables { max } => write!(f, "table limit of {max} reached"),
            Error::TooManyWorkers { max } => write!(f, "worker limit of {max} reached"),
            Error::RetriesExhausted { attempts, last } => {
                write!(f, "transaction aborted {attempts} times (last: {last})")
            }
            Error::RolledBack => f.write_str("transaction rolled back"),
            Error::User(e) => write!(f, "transaction failed: {e}"),
            Error::InvalidOption(m) => write!(f, "invalid option: {m}"),
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Storage { what, path, source } => {
                write!(f, "cannot {what} ({}): {source}", path.display())
            }
            Error::Locked(p) => write!(
                f,
                "database directory {} is in use by another process or handle",
                p.display()
            ),
            Error::Corrupt { path, offset, what } => write!(
                f,
                "corrupt durable data in {} at byte {offset}: {what}",
                path.display()
            ),
            Error::Poisoned(cause) => write!(
                f,
                "database stopped acknowledging commits after a storage failure: {cause}"
            ),
            Error::Missing { path, what } => {
                write!(f, "durable data is missing at {}: {what}", path.display())
            }
            Error::TableNameTooLong { len, max } => {
                write!(f, "table name of {len} bytes exceeds the {max}-byte limit")
            }
            Error::Undeclared(m) => write!(f, "outside the declared sets: {m}"),
            Error::StalePlan(m) => write!(f, "the predicted write set went stale: {m}"),
            Error::Unsupported(m) => write!(f, "not supported: {m}"),
            Error::Remote { what, detail } => write!(f, "cannot {what}: {detail}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::User(e) => Some(e.as_ref()),
            Error::Io(e) => Some(e),
            Error::Storage { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What a transaction body's operations return on failure: a conflict
/// (the attempt is doomed; `run` retries it) or an error (`run` returns
/// it, after checking that the reads it was based on were consistent).
#[derive(Debug)]
pub enum TxError {
    Conflict(AbortReason),
    Failed(Error),
}

impl TxError {
    /// Wrap an application error to fail the transaction with it.
    pub fn user(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> TxError {
        TxError::Failed(Error::User(e.into()))
    }

    /// Ask to roll the transaction back without retrying.
    pub fn rollback() -> TxError {
        TxError::Failed(Error::RolledBack)
    }
}

impl From<Error> for TxError {
    fn from(e: Error) -> Self {
        TxError::Failed(e)
    }
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxError::Conflict(r) => write!(f, "conflict: {r}"),
            TxError::Failed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TxError {}
