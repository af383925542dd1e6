//! The transaction component (§2): transactions in timestamp order over
//! the MVCC hash table, their versions written straight into the recovery
//! log's buffers (§3.1: the redo record is the version).
//!
//! **In progress** (issue 21): the log lives in memory and is never
//! written out, recycled or trimmed (no TC Proxy, no data component, no
//! garbage collection yet), so commits are acknowledged as soon as their
//! commit record is in a buffer and the log grows with every write.
//!
//! Scans (ours: the paper's TC is a key-value store) walk an ordered index
//! per table that maps each key to its MVCC item, and read every item
//! they pass at their timestamp, which holds off older writers of those
//! keys. Keys that appear later in the range are held off coarsely: a
//! scan raises its table's scan timestamp (a read-modify-write) before it
//! walks, and a new item, once in the index, takes the table's scan
//! timestamp as its read timestamp (a read-modify-write too), before any
//! other thread may use it. The two RMWs are ordered on the table's word:
//! either the scan walks after the item is in the index and reads it, or
//! the item starts with the scan's timestamp; so no transaction older
//! than a scan ever writes a key into the range it scanned. The price: a
//! new key written by a transaction older than the table's latest scan
//! aborts, wherever the key is.
//!
//! A log record is `kind (1) | ts (8) | table (4) | key length (4) |
//! value length (4, u32::MAX for a deletion) | key | value` for a version,
//! `kind (1) | ts (8)` for a commit. A version item's payload is its
//! record's LSN.

use std::ops::Bound;
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::Arc;

use granary_api::{AbortReason, Engine, Error, Stats, TableId, Tx, TxError, TxRunner};

use super::log::{Log, Lsn};
use super::record::{Seen, Version, ABORTED, COMMITTED};
use super::table::{Item, MvccTable, Retire};
use crate::catalog::Catalog;
use crate::limits::{check_bounds, check_key, check_value};
use crate::reclaim::Pin;
use crate::scan::{visit, Batch as ScanBatch};
use crate::sync::{backoff, AtomicU64, Ordering};
use granary_index::Tree;

/// Record kinds.
const VERSION: u8 = 1;
const COMMIT: u8 = 2;
/// A version record's header: kind, ts, table, key length, value length.
const HEADER: usize = 1 + 8 + 4 + 4 + 4;
/// The value length of a deletion.
const DELETED: u32 = u32::MAX;

/// Log buffers of 4 MiB: a record (1 MiB value, 1 KiB key at most) fits.
const BUFFER: u32 = 4 << 20;

/// A table: its ordered index (key → MVCC item), for scans, and the
/// timestamp of its latest scan.
struct Table {
    index: Tree,
    scan_ts: AtomicU64,
}

struct Shared {
    tables: Catalog<Table>,
    mvcc: MvccTable,
    log: Log,
    /// The next transaction's timestamp (its id).
    next_ts: StdAtomicU64,
    /// Writers ignore read timestamps: the test-only mutant (NOT
    /// serializable), which the checker must catch.
    ignore_reads: bool,
}

/// A Deuteronomy TC, in memory (see the module's notes).
pub struct Tc {
    s: Arc<Shared>,
}

impl Default for Tc {
    fn default() -> Tc {
        Tc::new()
    }
}

impl Tc {
    /// An empty TC.
    pub fn new() -> Tc {
        Tc::make(false)
    }

    /// A broken TC whose writers ignore read timestamps (NOT
    /// serializable; test-only `mutant` builds), for the checker to
    /// catch.
    #[cfg(feature = "mutant")]
    pub fn mutant_ignoring_reads() -> Tc {
        Tc::make(true)
    }

    fn make(ignore_reads: bool) -> Tc {
        Tc {
            s: Arc::new(Shared {
                tables: Catalog::default(),
                mvcc: MvccTable::new(20),
                log: Log::new(BUFFER),
                next_ts: StdAtomicU64::new(1),
                ignore_reads,
            }),
        }
    }
}

/// Items are never unlinked yet (no garbage collection): nothing to free.
struct Keep;

impl Retire for Keep {
    fn retire(&mut self, _: *mut Item) {
        unreachable!("nothing removes MVCC items yet")
    }
}

impl Engine for Tc {
    type Runner = Runner;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        self.s.tables.create(name, || Table {
            index: Tree::new(),
            scan_ts: AtomicU64::new(0),
        })
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.s.tables.find(name)
    }

    fn runner(&self) -> Result<Runner, Error> {
        Ok(Runner {
            s: Arc::clone(&self.s),
            stats: Stats::default(),
            last_ts: 0,
            writes: Vec::new(),
            record: Vec::new(),
        })
    }
}

/// A thread's handle on the TC.
pub struct Runner {
    s: Arc<Shared>,
    stats: Stats,
    last_ts: u64,
    /// The running transaction's versions (reused).
    writes: Vec<*const Version>,
    /// Scratch for a log record (reused).
    record: Vec<u8>,
}

// SAFETY: the version pointers refer to items of the shared table, which
// live as long as it; a runner is used by one thread at a time.
unsafe impl Send for Runner {}

/// A transaction at its timestamp.
pub struct Txn<'a> {
    s: &'a Shared,
    ts: u64,
    writes: &'a mut Vec<*const Version>,
    record: &'a mut Vec<u8>,
}

impl<'a> Txn<'a> {
    /// The item of `key`, made if it has none (a read of an absent key
    /// must still hold off older writers of it).
    fn item(&self, t: TableId, key: &[u8]) -> Result<&'a Item, TxError> {
        check_key(key)?;
        let s: &'a Shared = self.s;
        let table = s.tables.get(t)?;
        Ok(s.mvcc.find_or_insert_with(t, key, &mut Keep, |item| {
            // A new item: into the table's index, then held off from
            // writers older than the table's latest scan (see the
            // module's notes).
            let g = crossbeam_epoch::pin();
            let _ = table
                .index
                .insert(key, item as *const Item as u64, &mut Pin(&g));
            item.record
                .hold_reads_below(table.scan_ts.fetch_add(0, Ordering::AcqRel));
        }))
    }

    /// The version of `item` visible at our timestamp, waiting for an
    /// older creator still running.
    fn visible<'i>(&self, item: &'i Item) -> Option<&'i Version> {
        let mut spins = 0;
        loop {
            match item.record.read(self.ts) {
                Seen::Nothing => return None,
                Seen::Version(v) => return Some(v),
                // Waits go from younger to older only: no cycle.
                Seen::Pending(_) => backoff(&mut spins),
            }
        }
    }

    /// The value in the version record at `lsn` (`None`: a deletion).
    fn value(&self, lsn: Lsn) -> Option<&'a [u8]> {
        let s: &'a Shared = self.s;
        // SAFETY: a published version's record was appended before it.
        let header = unsafe { s.log.slice(lsn, HEADER as u32) };
        let klen = u32::from_le_bytes(header[13..17].try_into().expect("4 bytes"));
        let vlen = u32::from_le_bytes(header[17..21].try_into().expect("4 bytes"));
        if vlen == DELETED {
            return None;
        }
        let at = lsn + HEADER as u64 + u64::from(klen);
        // SAFETY: as above.
        Some(unsafe { s.log.slice(at, vlen) })
    }

    fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        let item = self.item(t, key)?;
        Ok(self
            .visible(item)
            .and_then(|v| self.value(v.payload.load(Ordering::Acquire))))
    }

    /// Write `value` (`None`: delete) as our version of `key`: its redo
    /// record goes into the log first, then the version that points at
    /// it (§3.1).
    fn write(&mut self, t: TableId, key: &[u8], value: Option<&[u8]>) -> Result<(), TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        let item = self.item(t, key)?;
        let r = &mut *self.record;
        r.clear();
        r.push(VERSION);
        r.extend_from_slice(&self.ts.to_le_bytes());
        r.extend_from_slice(&t.index().to_le_bytes());
        r.extend_from_slice(&(key.len() as u32).to_le_bytes());
        r.extend_from_slice(&value.map_or(DELETED, |v| v.len() as u32).to_le_bytes());
        r.extend_from_slice(key);
        r.extend_from_slice(value.unwrap_or_default());
        let lsn = self.s.log.append(r, &mut |_| {});
        let v = item
            .record
            .write_checked(self.ts, lsn, !self.s.ignore_reads)
            .map_err(TxError::Conflict)?;
        let v = v as *const Version;
        if !self.writes.contains(&v) {
            self.writes.push(v);
        }
        Ok(())
    }
}

impl Tx for Txn<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        self.read(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value))
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        if self.read(t, key)?.is_some() {
            return Err(Error::KeyExists.into());
        }
        self.write(t, key, Some(value))
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        if self.read(t, key)?.is_none() {
            return Ok(false);
        }
        self.write(t, key, None).map(|()| true)
    }

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
        let table = self.s.tables.get(t)?;
        if limit == 0 {
            return Ok(());
        }
        // Keys that appear in the range from now on are held off from
        // older writers (see the module's notes).
        table.scan_ts.fetch_max(self.ts, Ordering::AcqRel);
        let g = crossbeam_epoch::pin();
        let this = &*self;
        visit(
            &mut ScanBatch::default(),
            &table.index,
            (lo, hi),
            limit,
            reverse,
            &Pin(&g),
            |_, c| {
                // SAFETY: items are never freed while the TC lives (no
                // garbage collection yet).
                let item = unsafe { &*(c as *const Item) };
                Ok(this
                    .visible(item)
                    .and_then(|v| this.value(v.payload.load(Ordering::Acquire))))
            },
            f,
        )
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Txn<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        let ts = self
            .s
            .next_ts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.writes.clear();
        let mut tx = Txn {
            s: &self.s,
            ts,
            writes: &mut self.writes,
            record: &mut self.record,
        };
        let r = body(&mut tx);
        let state = match r {
            Ok(_) => COMMITTED,
            Err(_) => ABORTED,
        };
        if state == COMMITTED && !self.writes.is_empty() {
            // §2.3.1 fast commit: committed once the commit record is in
            // a buffer. (Read-only transactions write none: everything
            // here is as durable as it will get, in memory.)
            self.record.clear();
            self.record.push(COMMIT);
            self.record.extend_from_slice(&ts.to_le_bytes());
            self.s.log.append(&self.record, &mut |_| {});
        }
        for &v in self.writes.iter() {
            // SAFETY: our versions, in items that live as long as the TC.
            unsafe { (*v).state.store(state, Ordering::Release) };
        }
        match r {
            Ok(v) => {
                self.stats.commits += 1;
                self.last_ts = ts;
                Ok(Ok(v))
            }
            Err(TxError::Conflict(reason)) => {
                self.stats.aborts[reason.index()] += 1;
                Ok(Err(reason))
            }
            Err(TxError::Failed(e)) => {
                self.stats.failures += 1;
                Err(e)
            }
        }
    }

    fn last_commit_key(&self) -> u64 {
        self.last_ts
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }
}
