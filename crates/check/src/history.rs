//! The recorded history: transactions, their outcome and their operations.
//!
//! A history is what a test harness writes down while it runs a workload:
//! one [`Txn`] per transaction *attempt* (committed or aborted), each with
//! its operations in program order. Values are not recorded, only which
//! version a read saw; writers make that possible by writing unique
//! [`VersionId`]s (or unique list elements) into the values they store.

use serde::{Deserialize, Serialize};

/// Identifies one transaction attempt; unique across the history.
pub type TxnId = u64;

/// A key. Callers map their `(table, key)` pairs into one ordered `u64`
/// space, so that range scans stay ranges.
pub type Key = u64;

/// Identifies one write: unique per [`Op::Write`] in the whole history.
/// Writers encode it in the value they write, so readers can report it.
pub type VersionId = u64;

/// How a transaction attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Status {
    /// The transaction committed; its writes are part of the database.
    Committed,
    /// The transaction aborted; nothing may ever observe its writes.
    Aborted,
}

/// One operation, as observed by the transaction that issued it.
///
/// A key is used either as a *register* ([`Op::Read`], [`Op::Write`],
/// [`Op::Scan`]) or as a *list* ([`Op::Append`], [`Op::ReadList`]); using
/// one key both ways is reported as
/// [`AnomalyKind::InvalidHistory`](crate::AnomalyKind::InvalidHistory).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// Read of a register. `version: None` = the key's initial state
    /// (never written; absent).
    Read {
        /// The key read.
        key: Key,
        /// The version returned, or `None` for absent.
        version: Option<VersionId>,
    },
    /// Write (put/insert) of a register, creating version `version`.
    Write {
        /// The key written.
        key: Key,
        /// The new version; unique in the history.
        version: VersionId,
    },
    /// Ordered range read `[lo, hi)` (`hi = None` means unbounded) that
    /// returned these rows, each with the version it saw, in ascending key
    /// order. Keys in range *not* returned were observed in their initial
    /// (absent) state.
    Scan {
        /// Inclusive lower bound.
        lo: Key,
        /// Exclusive upper bound; `None` = unbounded.
        hi: Option<Key>,
        /// The rows returned: `(key, version seen)`, ascending by key.
        rows: Vec<(Key, VersionId)>,
    },
    /// List-append: append the unique element `elem` to the list at `key`
    /// (absent key = empty list). Elements are unique per key.
    Append {
        /// The list's key.
        key: Key,
        /// The element appended; unique among appends to `key`.
        elem: u64,
    },
    /// Read of a whole list at `key`.
    ReadList {
        /// The list's key.
        key: Key,
        /// The elements returned, in list order.
        elems: Vec<u64>,
    },
}

impl Op {
    /// Whether this operation writes (a register write or a list append).
    pub fn is_write(&self) -> bool {
        matches!(self, Op::Write { .. } | Op::Append { .. })
    }
}

/// One transaction attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Txn {
    /// Unique id of this attempt.
    pub id: TxnId,
    /// Whether it committed.
    pub status: Status,
    /// The protocol's commit order key (Silo: the commit TID; others: a
    /// timestamp or batch position). Used *only* to order the committed
    /// versions of each register key; ignored for aborted transactions and
    /// for lists.
    pub commit_key: u64,
    /// The operations, in program order.
    pub ops: Vec<Op>,
}

impl Txn {
    /// A committed transaction.
    pub fn committed(id: TxnId, commit_key: u64, ops: Vec<Op>) -> Txn {
        Txn {
            id,
            status: Status::Committed,
            commit_key,
            ops,
        }
    }

    /// An aborted transaction (its `commit_key` is 0 and unused).
    pub fn aborted(id: TxnId, ops: Vec<Op>) -> Txn {
        Txn {
            id,
            status: Status::Aborted,
            commit_key: 0,
            ops,
        }
    }

    /// Whether the transaction committed.
    pub fn is_committed(&self) -> bool {
        self.status == Status::Committed
    }
}

/// A recorded history: every transaction attempt, in any order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// The transaction attempts. Their order does not matter to the checker.
    pub txns: Vec<Txn>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// Appends one transaction attempt.
    pub fn push(&mut self, txn: Txn) {
        self.txns.push(txn);
    }

    /// Number of transaction attempts (committed and aborted).
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether the history has no transactions.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }
}

impl FromIterator<Txn> for History {
    fn from_iter<I: IntoIterator<Item = Txn>>(iter: I) -> History {
        History {
            txns: iter.into_iter().collect(),
        }
    }
}

impl std::fmt::Display for Op {
    /// Compact form used in reports: `r(5)=v12`, `r(5)=absent`, `w(5)=v13`,
    /// `scan[3,9)={3:v1 5:v2}`, `append(7,4)`, `read-list(7)=[1 2]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Read { key, version: None } => write!(f, "r({key})=absent"),
            Op::Read {
                key,
                version: Some(v),
            } => write!(f, "r({key})=v{v}"),
            Op::Write { key, version } => write!(f, "w({key})=v{version}"),
            Op::Scan { lo, hi, rows } => {
                match hi {
                    Some(hi) => write!(f, "scan[{lo},{hi})={{")?,
                    None => write!(f, "scan[{lo},..)={{")?,
                }
                for (i, (k, v)) in rows.iter().enumerate() {
                    let sep = if i == 0 { "" } else { " " };
                    write!(f, "{sep}{k}:v{v}")?;
                }
                write!(f, "}}")
            }
            Op::Append { key, elem } => write!(f, "append({key},{elem})"),
            Op::ReadList { key, elems } => {
                write!(f, "read-list({key})=[")?;
                for (i, e) in elems.iter().enumerate() {
                    let sep = if i == 0 { "" } else { " " };
                    write!(f, "{sep}{e}")?;
                }
                write!(f, "]")
            }
        }
    }
}
