//! The state a TC shares with its threads ([`Shared`]): its tables, the
//! MVCC hash table, the log, the read cache, the DC, the transaction table
//! and the counters; the TC's [`Config`], and what it reports. `tc/`
//! runs transactions over it; the TC Proxy (`proxy.rs`) applies, flushes
//! and checkpoints through it.

use std::path::PathBuf;
use std::sync::Mutex;

use crossbeam_utils::CachePadded;
use granary_api::Error;
use granary_index::Tree;
use granary_storage::fs::DirLock;

use super::dc::DataComponent;
use super::log::Log;
use super::logrec::HEADER;
use super::read_cache::ReadCache;
use super::table::{Item, MvccTable};
use crate::catalog::Catalog;
use crate::sync::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// The most runners at once (slots of the transaction table).
pub(super) const MAX_RUNNERS: usize = 1024;
/// A transaction-table slot with no transaction running.
pub(super) const IDLE: u64 = u64::MAX;
/// Buckets swept per transaction past the hard watermark.
pub(super) const SWEEP: usize = 64;

/// How a TC is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Bytes per log buffer (a record — 1 KiB key, 1 MiB value at most —
    /// must fit one).
    pub buffer_bytes: u32,
    /// The most log buffers in memory at once: the log's share of the
    /// version cache (§3.1).
    pub log_buffers: usize,
    /// MVCC versions past which runners trim the version lists of the
    /// records they touch (§6.5's soft watermark).
    pub soft_versions: usize,
    /// MVCC versions past which runners also sweep the table (§6.5's
    /// hard watermark).
    pub hard_versions: usize,
    /// Group commit: how long the TC Proxy lets a buffer with data wait
    /// unsealed when nothing else is sealed, in microseconds.
    pub seal_after_us: u64,
    /// A durable TC checkpoints its DC this often, in milliseconds (§6:
    /// the DC makes what it applied stable, and the log is truncated
    /// below the RSSP).
    pub checkpoint_ms: u64,
    /// The read cache (§3.3): bytes of its ring, which keeps versions read
    /// from the DC after their log buffer was recycled (0: none).
    pub read_cache_bytes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            buffer_bytes: 4 << 20,
            log_buffers: 64,
            soft_versions: 1 << 20,
            hard_versions: 4 << 20,
            seal_after_us: 1000,
            checkpoint_ms: 2000,
            read_cache_bytes: 64 << 20,
        }
    }
}

impl Config {
    /// Whether the sizes make sense together.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] saying which does not.
    pub fn validate(&self) -> Result<(), Error> {
        let min = (HEADER + granary_api::MAX_KEY_BYTES + granary_api::MAX_VALUE_BYTES) as u64;
        if u64::from(self.buffer_bytes) < min || self.buffer_bytes > super::log::MAX_BUFFER {
            return Err(Error::InvalidOption(format!(
                "log buffers of {} bytes: they must hold the largest record ({min} bytes) \
                 and be at most {} bytes",
                self.buffer_bytes,
                super::log::MAX_BUFFER
            )));
        }
        if self.log_buffers < 2 {
            return Err(Error::InvalidOption(
                "the log needs at least 2 buffers (one filling, one draining)".into(),
            ));
        }
        if self.read_cache_bytes > super::read_cache::MAX_BYTES {
            return Err(Error::InvalidOption(format!(
                "a read cache of {} bytes: at most {} bytes",
                self.read_cache_bytes,
                super::read_cache::MAX_BYTES
            )));
        }
        if self.soft_versions > self.hard_versions {
            return Err(Error::InvalidOption(format!(
                "the soft watermark ({}) is above the hard one ({})",
                self.soft_versions, self.hard_versions
            )));
        }
        Ok(())
    }
}

/// A table: its ordered index (key → MVCC item), for scans, and the
/// timestamp of its latest scan.
pub(super) struct Table {
    pub(super) index: Tree<*const Item>,
    pub(super) scan_ts: AtomicU64,
}

pub(super) struct Shared {
    pub(super) tables: Catalog<Table>,
    pub(super) mvcc: MvccTable,
    pub(super) log: Log,
    /// Versions read from the DC, by their LSN (§3.3); `None` if sized 0.
    pub(super) cache: Option<ReadCache>,
    pub(super) dc: Box<dyn DataComponent>,
    pub(super) config: Config,
    /// The next transaction's timestamp (its id).
    pub(super) next_ts: AtomicU64,
    /// The transaction table (§2.1): each runner's running timestamp, or
    /// [`IDLE`], and its counters.
    pub(super) slots: Box<[CachePadded<TxSlot>]>,
    pub(super) claimed: Mutex<Vec<bool>>,
    /// O-LSN (§4.4): every operation below it is applied at the DC or
    /// discarded. Published by the TC Proxy.
    pub(super) o_lsn: AtomicU64,
    /// The OAT as the TC Proxy last computed it (a lower bound of the
    /// OAT now): the hard watermark's sweeps evict below it.
    pub(super) oat_seen: AtomicU64,
    /// One past the highest transaction-table slot ever claimed.
    pub(super) runners: AtomicUsize,
    /// Past the soft / hard watermark (set by the TC Proxy).
    pub(super) over_soft: AtomicBool,
    pub(super) over_hard: AtomicBool,
    /// The next bucket a sweep takes.
    pub(super) sweep: AtomicUsize,
    /// Why the TC stopped (the DC failed): every later call fails.
    pub(super) broken: Mutex<Option<String>>,
    pub(super) is_broken: AtomicBool,
    pub(super) stop: AtomicBool,
    /// Counters for reports.
    pub(super) metrics: Metrics,
    /// A durable TC's directory (its log, its table names).
    pub(super) dir: Option<PathBuf>,
    /// Everything below this LSN is stable in the log file (a durable
    /// TC's; set by the TC Proxy).
    pub(super) durable_lsn: AtomicU64,
    /// Held while a table is created and the table names are written.
    pub(super) catalog_file: Mutex<()>,
    /// A durable TC's lock on its directory, held while it lives.
    pub(super) _lock: Option<DirLock>,
    /// A test-only mutant's flaw, which the checker must catch.
    pub(super) flaw: Flaw,
}

/// The deliberate flaws of the test-only mutants (NOT serializable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "mutant"), allow(dead_code))]
pub(super) enum Flaw {
    None,
    /// Writers ignore read timestamps.
    IgnoreReads,
    /// The TC Proxy applies committed transactions at once, not held
    /// back to the OAT (garbage collection's mutant).
    ApplyAtOnce,
    /// The hard watermark evicts record items whatever their read
    /// timestamp (eviction's mutant): an older writer may then slip in
    /// under a younger read.
    EvictRead,
}

/// A runner's slot in the transaction table: the timestamp it runs at,
/// and where its reads were served (§6.3). The counters are the runner's
/// alone (added once per transaction), so reads share no cache line.
#[derive(Default)]
pub(super) struct TxSlot {
    pub(super) ts: AtomicU64,
    /// Reads served from a log buffer (the version cache), from the read
    /// cache, and from the DC.
    pub(super) reads: [AtomicU64; 3],
    /// MVCC entries its transactions made less those they trimmed or
    /// evicted: record items and versions.
    pub(super) items: AtomicI64,
    pub(super) versions: AtomicI64,
}

/// What a TC has done, for reports.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Operations the TC Proxy applied at the DC, and in how many
    /// batches.
    pub applied: AtomicU64,
    pub batches: AtomicU64,
    /// Log buffers scanned and recycled by the TC Proxy.
    pub recycled: AtomicU64,
    /// Versions trimmed by garbage collection, and record items evicted.
    pub trimmed: AtomicU64,
    pub evicted: AtomicU64,
    /// Bytes written to the log file (a durable TC's).
    pub logged: AtomicU64,
}

/// A snapshot of [`Metrics`] and sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Reads served from a log buffer (the version cache, §3.1), from
    /// the read cache (§3.3), and from the DC.
    pub log_reads: u64,
    pub cache_reads: u64,
    pub dc_reads: u64,
    pub applied: u64,
    pub batches: u64,
    pub recycled: u64,
    pub trimmed: u64,
    /// MVCC record items and versions now (made less trimmed or evicted).
    pub items: i64,
    pub versions: i64,
    /// Record items evicted by the hard watermark's sweeps.
    pub evicted: u64,
    /// Log buffers in memory now.
    pub log_buffers: usize,
}

impl Shared {
    /// The oldest active transaction (§2.1): no running transaction, and
    /// none that starts from now on, has a timestamp below it.
    pub(super) fn oat(&self) -> u64 {
        // SeqCst (all three): the transaction table (`tc` module doc): loaded
        // in one total order with the runners' stores of bounds and timestamps,
        // the next timestamp first, so the OAT is never above a running
        // transaction's.
        let mut m = self.next_ts.load(Ordering::SeqCst);
        let n = self.runners.load(Ordering::SeqCst);
        for s in &self.slots[..n] {
            m = m.min(s.ts.load(Ordering::SeqCst));
        }
        m
    }

    /// MVCC record items and versions now.
    pub(super) fn entries(&self) -> (i64, i64) {
        let r = Ordering::Relaxed;
        let n = self.runners.load(r);
        self.slots[..n].iter().fold((0, 0), |(i, v), s| {
            (i + s.items.load(r), v + s.versions.load(r))
        })
    }

    pub(super) fn fail(&self, why: String) {
        self.broken.lock().expect("broken").get_or_insert(why);
        // Release: the flag follows the reason (stored under the lock above):
        // whoever sees it (Acquire) finds the reason.
        self.is_broken.store(true, Ordering::Release);
    }

    pub(super) fn check_broken(&self) -> Result<(), Error> {
        // Acquire: pairs with `fail`'s Release of the flag.
        if self.is_broken.load(Ordering::Acquire) {
            let why = self.broken.lock().expect("broken").clone();
            return Err(Error::Poisoned(why.unwrap_or_default()));
        }
        Ok(())
    }
}
