//! Deuteronomy (Levandoski, Lomet, Sengupta, Stutsman, Wang; CIDR'15): a
//! transaction component (TC) over pluggable data components: the pieces
//! below, each tested on its own, and the TC joining them, which
//! `--protocol deuteronomy` runs in every benchmark and `granary check`
//! (docs/ARCHITECTURE.md says where it departs from the paper).
//!
//! * `log`: §5.1's recovery log buffers, reserved latch-free with one
//!   atomic add on an `OFFSET | USERS` word, sealed by the reservation
//!   that crosses the end.
//! * `record`: §2.1–2.2's timestamp-order MVCC on one record item (its
//!   read timestamp and version list).
//! * `table`: §2.2's latch-free MVCC hash table of record items
//!   (prepend by CAS; removal marks, then unlinks).
//! * [`tc`]: the transaction component joining them: timestamp-order
//!   transactions whose versions are their redo records in the log, and
//!   scans over an ordered index per table (see its notes for what is
//!   not built yet).
//! * `shared`: the state the TC shares with its threads (tables, the
//!   MVCC hash table, the log, the DC, the transaction table), its
//!   configuration and counters: below both `tc` and `proxy`.
//! * `proxy`: §4's TC Proxy, which applies committed operations to the
//!   data component and recycles log buffers.
//! * [`dc`]: the data component interface, and its in-memory back end;
//!   [`disk`]: the redb back end.
//! * `recover`: recovery from the log on disk (a `granary_storage`
//!   segment log: checksummed segment files).
//! * `read_cache`: §3.3's read cache, of versions read from the DC.

// Parts the TC does not use yet (whole-buffer reads, for the flusher)
// are built and tested ahead of it.
#[allow(dead_code)]
pub(crate) mod log;

// As `log` (the TC writes through `write_checked`, for its mutant; the
// plain `write` serves the tests).
#[allow(dead_code)]
pub(crate) mod record;

// As `log` (removal waits for garbage collection).
#[allow(dead_code)]
pub(crate) mod table;

pub(crate) mod read_cache;

pub mod dc;
pub mod disk;
/// The recovery log's record layout.
mod logrec;
mod proxy;
mod recover;
mod shared;
pub mod tc;
