//! The transaction component (§2): transactions in timestamp order over
//! the MVCC hash table, their versions written straight into the recovery
//! log's buffers (§3.1: the redo record is the version), over a data
//! component (`dc`) that the TC Proxy (`proxy`) keeps up to date.
//!
//! A TC made by [`Tc::open`] is durable: its log is written and synced
//! (see `proxy`), commits are acknowledged through durable tokens once
//! their commit record is stable (§2.3.1), and opening recovers. One made
//! by [`Tc::with`] keeps its log in memory.
//!
//! **The read cache** (§3.3) keeps versions read from the DC once their
//! log buffer was recycled, keyed by the LSN of the redo record that
//! wrote them: a hit is that version's value, whatever the DC holds by
//! then.
//!
//! **Garbage collection** (§2.4, §6.5) counts MVCC entries: record items
//! and versions. Past the soft watermark a transaction trims the version
//! lists it touches; past the hard one it also sweeps a slice of the
//! table, trimming every version the DC holds and evicting the record
//! items left empty and cold (see `record::Record::evict`).
//!
//! **The transaction table** (§2.1) is one cache line per runner holding
//! the timestamp of its running transaction; the oldest active
//! transaction (OAT) is the least of them and of the next timestamp. A
//! runner publishes a lower bound (the next timestamp, read) before it
//! takes its timestamp, so an OAT computed meanwhile is never above it.
//!
//! **Versions leave the TC only once the DC holds them.** The TC Proxy
//! applies a committed transaction to the DC only once every older
//! transaction has finished (its timestamp is below the OAT). So every
//! version the DC holds is older than every running transaction, and:
//! a reader that finds no version at its timestamp in the MVCC table (or
//! finds one whose log buffer was recycled) reads the DC, which holds
//! exactly the newest version it should see (garbage collection cuts a
//! version list only from the newest applied version down; see
//! `record::Record::trim`). **Deviation:** §4.3 applies committed
//! operations at once, and its garbage collection rule (§2.4 case 2)
//! keeps only the version the OAT sees; a reader older than a later,
//! already applied write would then read that write from the DC. Holding
//! application back to the OAT closes that window at the price of a
//! delay of one transaction's length.
//!
//! **Aborts are logged** (an abort record, for a transaction that wrote),
//! so the TC Proxy learns every outcome from the log alone.
//!
//! **Shedding load** (§6.5): a writer that finds the log at its budget
//! waits briefly for the TC Proxy to recycle a buffer, then aborts with
//! [`AbortReason::Overloaded`]. Outcome records are always appended.
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
//! aborts, wherever the key is. A key with no item (never used, or its
//! item evicted) is read from the DC's range: its item was evicted only
//! with every version at the DC, and a new item, made after the scan's
//! index walk, is held off from writers older than the scan.
//!
//! A log record is `kind (1) | ts (8) | table (4) | key length (4) |
//! value length (4, u32::MAX for a deletion) | key | value` for a version,
//! `kind (1) | ts (8)` for a commit or an abort. A version item's payload
//! is its record's LSN.

use std::cell::{Cell, UnsafeCell};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64 as StdAtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;
use granary_api::{AbortReason, Engine, Error, Stats, TableId, Tx, TxError, TxRunner};

use super::dc::{DataComponent, MemoryDc};
use super::log::{Log, Lsn};
use super::logrec::{self, VersionHeader, HEADER};
use super::read_cache::ReadCache;
use super::record::{Seen, Version, ABORTED, COMMITTED};
pub use super::recover::Recovery;
pub use super::shared::{Config, Metrics, Report};
use super::shared::{Flaw, Shared, Table, TxSlot, IDLE, MAX_RUNNERS, SWEEP};
use granary_storage::crashsim;
use granary_storage::fs::{fp, sync_dir, DirLock};
use granary_storage::segments::SegmentLog;

mod merge_scan;
use super::table::{Item, MvccTable, Retire};
use crate::catalog::Catalog;
use crate::reclaim::{retire_all, Pin};
use crate::sync::{backoff, AtomicU64, Ordering};
use granary_api::limits::{check_bounds, check_key, check_value};
use granary_index::Tree;

/// A durable TC's directory, opened and recovered.
struct Opened {
    dir: PathBuf,
    logfile: SegmentLog,
    /// The first log buffer it writes.
    start_seq: u64,
    lock: DirLock,
}

const TABLES: &str = "tables";

/// The table names of a durable TC, in id order: one per line, in hex.
fn read_tables(dir: &Path) -> Result<Vec<String>, Error> {
    let path = dir.join(TABLES);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Storage {
                what: "read the table names".into(),
                path,
                source,
            })
        }
    };
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let bytes: Option<Vec<u8>> = (0..l.len())
                .step_by(2)
                .map(|j| l.get(j..j + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect();
            bytes
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| Error::Corrupt {
                    path: path.clone(),
                    offset: i as u64,
                    what: format!("table name {i} is not valid hex UTF-8"),
                })
        })
        .collect()
}

/// Write the table names (atomically: a new file renamed over the old).
fn write_tables(dir: &Path, names: &[String]) -> Result<(), Error> {
    use std::io::Write;
    let path = dir.join(TABLES);
    let tmp = dir.join("tables.tmp");
    let io = |what: &str, source| Error::Storage {
        what: what.to_string(),
        path: path.clone(),
        source,
    };
    let mut text = String::new();
    for n in names {
        for b in n.as_bytes() {
            text.push_str(&format!("{b:02x}"));
        }
        text.push('\n');
    }
    let write = || -> std::io::Result<()> {
        fp("tables-write")?;
        let mut f = std::fs::File::create(&tmp)?;
        crashsim::created(&tmp, true);
        f.write_all(text.as_bytes())?;
        crashsim::wrote(&tmp, 0, text.as_bytes());
        f.sync_all()?;
        crashsim::synced(&tmp);
        Ok(())
    };
    write().map_err(|e| io("write the table names", e))?;
    fp("tables-rename")
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| io("rename the table names", e))?;
    crashsim::renamed(&tmp, &path);
    sync_dir(dir).map_err(|e| io("sync the directory", e))
}

fn new_table() -> Table {
    Table {
        index: Tree::new(),
        scan_ts: AtomicU64::new(0),
    }
}

/// A Deuteronomy TC over a data component (see the module's notes).
pub struct Tc {
    s: Arc<Shared>,
    /// The log flusher and the TC Proxy.
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Remove the directory when dropped ([`Tc::scratch`]).
    scratch: bool,
}

impl Default for Tc {
    fn default() -> Tc {
        Tc::new()
    }
}

impl Tc {
    /// A TC with the default sizes, over an empty memory DC.
    pub fn new() -> Tc {
        Tc::with(Config::default(), Box::new(MemoryDc::new())).expect("the default config is valid")
    }

    /// A TC sized by `config` over `dc`.
    ///
    /// # Errors
    /// An invalid config, or the TC Proxy's thread could not start.
    pub fn with(config: Config, dc: Box<dyn DataComponent>) -> Result<Tc, Error> {
        Tc::make(config, dc, Flaw::None, None)
    }

    /// A broken TC whose writers ignore read timestamps (NOT
    /// serializable; test-only `mutant` builds), for the checker to
    /// catch.
    #[cfg(feature = "mutant")]
    pub fn mutant_ignoring_reads() -> Tc {
        Tc::make(
            Config::default(),
            Box::new(MemoryDc::new()),
            Flaw::IgnoreReads,
            None,
        )
        .expect("valid")
    }

    /// A broken TC whose TC Proxy applies committed transactions without
    /// waiting for older ones to finish, so readers may find a younger
    /// transaction's write in the DC (NOT serializable; test-only
    /// `mutant` builds).
    #[cfg(feature = "mutant")]
    pub fn mutant_applying_at_once(config: Config) -> Result<Tc, Error> {
        Tc::make(config, Box::new(MemoryDc::new()), Flaw::ApplyAtOnce, None)
    }

    /// A broken TC whose hard watermark evicts record items even when a
    /// running transaction has read them, so an older writer may slip in
    /// under that read (NOT serializable; test-only `mutant` builds).
    #[cfg(feature = "mutant")]
    pub fn mutant_evicting_read_items(config: Config) -> Result<Tc, Error> {
        Tc::make(config, Box::new(MemoryDc::new()), Flaw::EvictRead, None)
    }

    /// A durable TC in `dir` over `dc`: recovery first replays the log
    /// from the DC's last checkpoint (§6), applying committed
    /// transactions only, then the TC runs, writing its log there.
    ///
    /// # Errors
    /// An invalid config; another process has `dir` open
    /// ([`Error::Locked`]); the log is damaged ([`Error::Corrupt`]) or a
    /// part recovery needs is gone ([`Error::Missing`]); a file operation
    /// failed.
    pub fn open(
        config: Config,
        dir: &Path,
        dc: Box<dyn DataComponent>,
    ) -> Result<(Tc, Recovery), Error> {
        Tc::open_with(config, dir, dc, false)
    }

    /// A broken [`Tc::open`] whose recovery applies every operation in
    /// the log, committed or not (NOT correct; test-only `mutant`
    /// builds), for the crash loop to catch.
    ///
    /// # Errors
    /// As [`Tc::open`].
    #[cfg(feature = "mutant")]
    pub fn mutant_open_replaying_uncommitted(
        config: Config,
        dir: &Path,
        dc: Box<dyn DataComponent>,
    ) -> Result<(Tc, Recovery), Error> {
        Tc::open_with(config, dir, dc, true)
    }

    fn open_with(
        config: Config,
        dir: &Path,
        dc: Box<dyn DataComponent>,
        uncommitted: bool,
    ) -> Result<(Tc, Recovery), Error> {
        config.validate()?;
        let io = |what: &str, p: &Path, source| Error::Storage {
            what: what.to_string(),
            path: p.to_path_buf(),
            source,
        };
        // Durably: a power cut must not lose the directory's own entry.
        granary_storage::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
        let dir = dir.canonicalize().map_err(|e| io("resolve", dir, e))?;
        let lock = DirLock::acquire(&dir)?;
        let names = read_tables(&dir)?;
        let (rec, start_seq) = super::recover::replay(&dir, &*dc, uncommitted)?;
        let logfile = SegmentLog::open(&dir)?;
        let tc = Tc::make(
            config,
            dc,
            Flaw::None,
            Some(Opened {
                dir,
                logfile,
                start_seq,
                lock,
            }),
        )?;
        for name in names {
            tc.s.tables.create(&name, new_table)?;
        }
        Ok((tc, rec))
    }

    fn make(
        config: Config,
        dc: Box<dyn DataComponent>,
        flaw: Flaw,
        opened: Option<Opened>,
    ) -> Result<Tc, Error> {
        config.validate()?;
        let start_seq = opened.as_ref().map_or(0, |o| o.start_seq);
        let (dir, logfile, lock) = match opened {
            Some(o) => (Some(o.dir), Some(o.logfile), Some(o.lock)),
            None => (None, None, None),
        };
        let s = Arc::new(Shared {
            tables: Catalog::default(),
            mvcc: MvccTable::new(20),
            log: Log::starting_at(config.buffer_bytes, config.log_buffers, start_seq),
            cache: (config.read_cache_bytes > 0).then(|| {
                // About one entry (a header and a 100-byte value) per 128
                // ring bytes, and a slot per entry.
                let rows = (config.read_cache_bytes / 128 / super::read_cache::WAYS)
                    .max(1)
                    .next_power_of_two();
                ReadCache::new(config.read_cache_bytes, rows)
            }),
            dc,
            config,
            next_ts: StdAtomicU64::new(1),
            slots: (0..MAX_RUNNERS)
                .map(|_| {
                    CachePadded::new(TxSlot {
                        ts: StdAtomicU64::new(IDLE),
                        ..TxSlot::default()
                    })
                })
                .collect(),
            claimed: Mutex::new(vec![false; MAX_RUNNERS]),
            o_lsn: StdAtomicU64::new(0),
            oat_seen: StdAtomicU64::new(0),
            runners: AtomicUsize::new(0),
            over_soft: AtomicBool::new(false),
            over_hard: AtomicBool::new(false),
            sweep: AtomicUsize::new(0),
            broken: Mutex::new(None),
            is_broken: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            metrics: Metrics::default(),
            durable_lsn: StdAtomicU64::new(start_seq << 32),
            dir,
            catalog_file: Mutex::new(()),
            _lock: lock,
            flaw,
        });
        let file = logfile.map(|f| Arc::new(Mutex::new(f)));
        let mut tc = Tc {
            s,
            threads: Vec::new(),
            scratch: false,
        };
        // An in-memory TC's proxy flushes too (see `proxy::run`).
        let durable = file.is_some();
        for (name, flusher) in [("tc-flusher", true), ("tc-proxy", false)] {
            if flusher && !durable {
                continue;
            }
            let (s, file) = (Arc::clone(&tc.s), file.clone());
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || match flusher {
                    true => super::proxy::flush(&s, start_seq, file.as_deref()),
                    false => super::proxy::run(&s, start_seq, file.as_deref()),
                })
                .map_err(Error::Io)?;
            tc.threads.push(t);
        }
        Ok(tc)
    }

    /// This durable TC's directory is scratch: it is removed when the TC
    /// is dropped (a check's or a benchmark's disk DC).
    pub fn scratch(mut self) -> Tc {
        self.scratch = true;
        self
    }

    /// What it has done so far, and its sizes.
    pub fn report(&self) -> Report {
        let m = &self.s.metrics;
        let l = |c: &StdAtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let reads = |i: usize| self.s.slots.iter().map(|s| l(&s.reads[i])).sum();
        let (items, versions) = self.s.entries();
        Report {
            log_reads: reads(0),
            cache_reads: reads(1),
            dc_reads: reads(2),
            applied: l(&m.applied),
            batches: l(&m.batches),
            recycled: l(&m.recycled),
            trimmed: l(&m.trimmed),
            items,
            versions,
            evicted: l(&m.evicted),
            log_buffers: self.s.log.buffers(),
        }
    }

    /// What writers are waiting on now, if anything: the log at its
    /// budget, every buffer holding records the TC Proxy has not yet
    /// applied at the DC (§6.5: writers then shed load). For a progress
    /// line; `None` while the log has room.
    pub fn waiting_on(&self) -> Option<String> {
        let log = &self.s.log;
        let (used, budget) = (log.in_use(), log.budget());
        (used >= budget).then(|| {
            format!("TC log full ({used} buffers, budget {budget}): writers wait for the DC to apply them")
        })
    }

    /// Its data component.
    pub fn dc(&self) -> &dyn DataComponent {
        &*self.s.dc
    }
}

impl Drop for Tc {
    fn drop(&mut self) {
        self.s
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
        for t in self.threads.drain(..) {
            t.thread().unpark();
            let _ = t.join();
        }
        if let (true, Some(dir)) = (self.scratch, &self.s.dir) {
            // Runners still alive keep the shared state (the files stay
            // open, unlinked); nothing else uses the directory.
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Evicted items are freed past an epoch grace period: the threads that
/// may hold one are pinned.
struct Epoch;

impl Retire for Epoch {
    fn retire(&mut self, item: *mut Item) {
        let p = item as usize;
        let g = crossbeam_epoch::pin();
        // SAFETY: unlinked from its bucket (and, before, from its table's
        // index), so no thread that pins from now on finds it; retired
        // once, by the thread whose unlink succeeded.
        unsafe { g.defer_unchecked(move || drop(Box::from_raw(p as *mut Item))) };
    }
}

impl Engine for Tc {
    type Runner = Runner;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        let Some(dir) = &self.s.dir else {
            return self.s.tables.create(name, new_table);
        };
        // Durable: the name is on disk before the table exists.
        let _g = self.s.catalog_file.lock().expect("catalog");
        if self.s.tables.find(name).is_ok() {
            return Err(Error::TableExists(name.to_string()));
        }
        let mut names = self.s.tables.names();
        names.push(name.to_string());
        write_tables(dir, &names)?;
        self.s.tables.create(name, new_table)
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        self.s.tables.find(name)
    }

    fn durable_epoch(&self) -> Option<u64> {
        self.s.dir.is_some().then(|| {
            self.s
                .durable_lsn
                .load(std::sync::atomic::Ordering::Acquire)
        })
    }

    fn log_bytes(&self) -> Option<u64> {
        self.s.dir.is_some().then(|| {
            self.s
                .metrics
                .logged
                .load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    fn runner(&self) -> Result<Runner, Error> {
        let slot = {
            let mut c = self.s.claimed.lock().expect("claimed");
            let i = c
                .iter()
                .position(|&b| !b)
                .ok_or(Error::TooManyWorkers { max: MAX_RUNNERS })?;
            c[i] = true;
            // SeqCst, as `oat`'s load of it: the slot is counted before
            // the runner's first timestamp is stored in it.
            self.s
                .runners
                .fetch_max(i + 1, std::sync::atomic::Ordering::SeqCst);
            i
        };
        Ok(Runner {
            s: Arc::clone(&self.s),
            slot,
            books: Books::default(),
            parts: Parts::default(),
        })
    }
}

/// Values read from the DC, kept for the length of a transaction (the
/// body holds slices of them). Buffers are reused across transactions.
#[derive(Default)]
struct Arena {
    bufs: UnsafeCell<Vec<Vec<u8>>>,
    used: Cell<usize>,
}

impl Arena {
    fn clear(&mut self) {
        self.used.set(0);
    }

    /// Fill a fresh buffer with `f` (true: a value) and keep it.
    fn keep<E>(&self, f: impl FnOnce(&mut Vec<u8>) -> Result<bool, E>) -> Result<Option<&[u8]>, E> {
        let i = self.used.get();
        // SAFETY: one thread uses an arena; buffers before `i` are never
        // touched again until `clear` (which takes `&mut self`, so no
        // slice is alive), so the slices handed out stay valid: they
        // point into those buffers' heap blocks, which a push to the
        // outer vector does not move.
        let bufs = unsafe { &mut *self.bufs.get() };
        if i == bufs.len() {
            bufs.push(Vec::new());
        }
        let b = &mut bufs[i];
        if !f(b)? {
            return Ok(None);
        }
        self.used.set(i + 1);
        // SAFETY: as above.
        Ok(Some(unsafe {
            std::slice::from_raw_parts(b.as_ptr(), b.len())
        }))
    }
}

/// A thread's handle on the TC.
pub struct Runner {
    s: Arc<Shared>,
    /// Its slot in the transaction table.
    slot: usize,
    books: Books,
    parts: Parts,
}

/// What a runner keeps across its transactions.
#[derive(Default)]
struct Books {
    stats: Stats,
    last_ts: u64,
    /// The last transaction's durable token (an LSN past its commit).
    token: u64,
}

/// A runner's buffers, lent to each transaction and reused.
#[derive(Default)]
struct Parts {
    /// The running transaction's versions.
    writes: Vec<*const Version>,
    /// Scratch for a log record.
    record: Vec<u8>,
    arena: Arena,
    /// Versions trimmed by the running transaction, freed at its end.
    trimmed: Vec<*mut Version>,
}

// SAFETY: the version pointers refer to items of the shared table, which
// live as long as it; a runner is used by one thread at a time.
unsafe impl Send for Runner {}

impl Drop for Runner {
    fn drop(&mut self) {
        self.s.slots[self.slot]
            .ts
            .store(IDLE, std::sync::atomic::Ordering::SeqCst);
        self.s.claimed.lock().expect("claimed")[self.slot] = false;
    }
}

/// A transaction at its timestamp.
pub struct Txn<'a> {
    s: &'a Shared,
    /// Its runner's slot in the transaction table.
    slot: &'a TxSlot,
    ts: u64,
    writes: &'a mut Vec<*const Version>,
    record: &'a mut Vec<u8>,
    arena: &'a Arena,
    trimmed: &'a mut Vec<*mut Version>,
    /// O-LSN when the transaction began: versions below it are applied.
    o_lsn: u64,
    /// Trim the records it touches (past the soft watermark).
    trim: bool,
    /// It appended version records (so it owes an outcome record).
    logged: bool,
    /// The newest commit record among the versions it read from the log
    /// (§2.3.1; what it read from the DC is durable).
    read_commit: Cell<u64>,
    /// Its reads served from the log, the read cache and the DC.
    reads: Cell<[u64; 3]>,
    /// Record items it made, and evicted.
    made: Cell<i64>,
    evicted: i64,
    /// An interactive session's: it never waits on another transaction
    /// (a read that would wait for an older writer's outcome aborts).
    session: bool,
    /// Held for the whole transaction.
    g: crossbeam_epoch::Guard,
}

/// Why a read found no version to read.
enum Miss {
    /// The record item was evicted: look it up again.
    Gone,
    /// A session would wait for an older writer's outcome.
    Blocked,
}

impl From<Miss> for TxError {
    fn from(_: Miss) -> TxError {
        TxError::Conflict(AbortReason::CommitDependency)
    }
}

/// Free a trimmed version.
///
/// # Safety
/// `p` is an unlinked version, past its grace period, freed once.
unsafe fn free_version(p: usize) {
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(p as *mut Version) });
}

impl<'a> Txn<'a> {
    /// The item of `key`, made if it has none (a read of an absent key
    /// must still hold off older writers of it).
    fn item(&mut self, t: TableId, key: &[u8]) -> Result<&'a Item, TxError> {
        check_key(key)?;
        let s: &'a Shared = self.s;
        let table = s.tables.get(t)?;
        let item = s.mvcc.find_or_insert_with(t, key, &mut Epoch, |item| {
            // A new item: into the table's index, then held off from
            // writers older than the table's latest scan (see the
            // module's notes). An evicted item of this key left the
            // index before it left the hash table, so the key is free.
            let g = crossbeam_epoch::pin();
            let _ = table
                .index
                .insert(key, item as *const Item as u64, &mut Pin(&g));
            self.made.set(self.made.get() + 1);
            item.record
                .hold_reads_below(table.scan_ts.fetch_add(0, Ordering::AcqRel));
        });
        if self.trim {
            // §6.5's soft watermark: versions below one that all see.
            self.trim_item(item, true);
        }
        Ok(item)
    }

    /// Garbage-collect `item`'s versions that the DC holds (§2.4): those
    /// below the newest of them, and it too unless `keep_newest`.
    fn trim_item(&mut self, item: &Item, keep_newest: bool) {
        let o_lsn = self.o_lsn;
        item.record.trim(
            |v| v.payload.load(Ordering::Acquire) < o_lsn,
            keep_newest,
            self.trimmed,
        );
    }

    /// The version of `item` visible at our timestamp, waiting for an
    /// older creator still running (a session does not wait: it aborts).
    fn visible<'i>(&self, item: &'i Item) -> Result<Option<&'i Version>, Miss> {
        let mut spins = 0;
        loop {
            match item.record.read(self.ts) {
                Seen::Nothing => return Ok(None),
                Seen::Version(v) => return Ok(Some(v)),
                Seen::Pending(_) if self.session => return Err(Miss::Blocked),
                // Waits go from younger to older only: no cycle.
                Seen::Pending(_) => backoff(&mut spins),
                Seen::Gone => return Err(Miss::Gone),
            }
        }
    }

    /// The value of `item` as version `v` has it (`None`: nothing in the
    /// MVCC table at our timestamp), `None` for a deletion or an absent
    /// key: from the log if `v`'s buffer is still in memory, else from
    /// the DC (see the module's notes).
    fn value(&self, item: &Item, v: Option<&Version>) -> Result<Option<&'a [u8]>, TxError> {
        let s: &'a Shared = self.s;
        let mut lsn = None;
        if let Some(v) = v {
            let at = v.payload.load(Ordering::Acquire);
            if let Some(found) = from_log(&s.log, at) {
                if v.creator != self.ts {
                    // §2.3.1: acknowledged once what it read is durable.
                    let c = v.commit.load(Ordering::Acquire);
                    self.read_commit.set(self.read_commit.get().max(c));
                }
                self.count(0);
                return Ok(found);
            }
            lsn = Some(at);
        }
        let arena: &'a Arena = self.arena;
        arena
            .keep(|out| {
                // §3.3: version `lsn`, if the read cache has it. Keyed by
                // the LSN of the redo record that wrote it, a cached value
                // is that version's whatever the DC holds now.
                if let (Some(c), Some(lsn)) = (&s.cache, lsn) {
                    if c.get(lsn, out) {
                        self.count(1);
                        return Ok(true);
                    }
                }
                self.count(2);
                let got = s.dc.get(item.table().index(), item.key(), out)?;
                if let (Some(c), Some(want)) = (&s.cache, lsn) {
                    // The DC holds version `lsn` itself (see the module's
                    // notes on why what it holds is what we must read):
                    // keep it for the next reader.
                    if got == Some(want) {
                        c.insert(want, out);
                    }
                }
                Ok(got.is_some())
            })
            .map_err(TxError::Failed)
    }

    /// Evict `item` if it lists no version and no transaction at or after
    /// `oat` read it (§6.5's hard watermark; see `record`).
    fn evict(&mut self, item: &Item, oat: u64, g: &crossbeam_epoch::Guard) {
        if !item.record.evict(oat) {
            return;
        }
        // Out of the index first: a new item of this key can be made only
        // once this one leaves the hash table.
        if let Ok(table) = self.s.tables.get(item.table()) {
            let _ = table
                .index
                .remove_if(item.key(), item as *const Item as u64, &mut Pin(g));
        }
        self.s.mvcc.remove(item, &mut Epoch);
        self.evicted += 1;
    }

    /// Count a read served from the log (0), the read cache (1) or the
    /// DC (2).
    fn count(&self, at: usize) {
        let mut r = self.reads.get();
        r[at] += 1;
        self.reads.set(r);
    }

    fn read(&mut self, t: TableId, key: &[u8]) -> Result<Option<&'a [u8]>, TxError> {
        let mut spins = 0;
        loop {
            let item = self.item(t, key)?;
            match self.visible(item) {
                Ok(v) if self.s.flaw == Flaw::EvictRead => {
                    // The mutant evicts what it has just read, ignoring
                    // its own read timestamp: an older writer of the key
                    // then finds a fresh item.
                    let value = self.value(item, v);
                    self.trim_item(item, false);
                    self.evict(item, u64::MAX, &crossbeam_epoch::pin());
                    return value;
                }
                Ok(v) => return self.value(item, v),
                // Its evictor is removing it from the table: look again.
                Err(Miss::Gone) => backoff(&mut spins),
                Err(blocked) => return Err(blocked.into()),
            }
        }
    }

    /// Append `r` to the log, waiting briefly for room, then shedding
    /// load (§6.5).
    fn append(&mut self, record: &[u8]) -> Result<Lsn, TxError> {
        let mut spins = 0;
        loop {
            match self.s.log.append(record) {
                Ok(lsn) => return Ok(lsn),
                Err(_) if spins < 256 => backoff(&mut spins),
                Err(_) => return Err(TxError::Conflict(AbortReason::Overloaded)),
            }
        }
    }

    /// Write `value` (`None`: delete) as our version of `key`: its redo
    /// record goes into the log first, then the version that points at
    /// it (§3.1).
    fn write(&mut self, t: TableId, key: &[u8], value: Option<&[u8]>) -> Result<(), TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        let item = self.item(t, key)?;
        let mut r = std::mem::take(self.record);
        r.clear();
        logrec::push_version(&mut r, self.ts, t.index(), key, value);
        let lsn = self.append(&r);
        *self.record = r;
        let lsn = lsn?;
        self.logged = true;
        let mut spins = 0;
        let mut item = item;
        let v = loop {
            match item
                .record
                .write_checked(self.ts, lsn, self.s.flaw != Flaw::IgnoreReads)
                .map_err(TxError::Conflict)?
            {
                Some(v) => break v,
                // Evicted: write through the item that replaces it.
                None => {
                    backoff(&mut spins);
                    item = self.item(t, key)?;
                }
            }
        };
        let v = v as *const Version;
        if !self.writes.contains(&v) {
            self.writes.push(v);
        }
        Ok(())
    }
}

/// The value in the version record at `lsn` (`Some(None)`: a deletion),
/// if its buffer is still in memory.
fn from_log(log: &Log, lsn: Lsn) -> Option<Option<&[u8]>> {
    // SAFETY: a published version's record was appended before it; the
    // caller is pinned, so a buffer found stays.
    let h = VersionHeader::parse(unsafe { log.slice(lsn, HEADER as u32) }?);
    if h.deleted() {
        return Some(None);
    }
    let at = lsn + HEADER as u64 + u64::from(h.klen);
    // SAFETY: as above.
    unsafe { log.slice(at, h.vlen) }.map(Some)
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
        self.merge_scan(t, table, (lo, hi), limit, reverse, f)
    }
}

/// Begin a transaction on runner slot `slot` with `parts` (`session`: an
/// interactive one, which never waits on another).
fn start<'a>(s: &'a Shared, slot: usize, parts: &'a mut Parts, session: bool) -> Txn<'a> {
    use std::sync::atomic::Ordering as O;
    // Pinned for the whole transaction: the log buffers and versions
    // it holds slices of and pointers to stay (§5.2's one epoch
    // enter/exit per operation; see ARCHITECTURE.md).
    let g = crossbeam_epoch::pin();
    let slot: &TxSlot = &s.slots[slot];
    // A lower bound first, then the timestamp (see the module's
    // notes on the transaction table).
    slot.ts.store(s.next_ts.load(O::SeqCst), O::SeqCst);
    let ts = s.next_ts.fetch_add(1, O::SeqCst);
    slot.ts.store(ts, O::SeqCst);
    parts.writes.clear();
    parts.arena.clear();
    let trim = s.over_soft.load(O::Relaxed);
    let o_lsn = s.o_lsn.load(O::Acquire);
    let mut tx = Txn {
        s,
        slot,
        ts,
        writes: &mut parts.writes,
        record: &mut parts.record,
        arena: &parts.arena,
        trimmed: &mut parts.trimmed,
        o_lsn,
        trim,
        logged: false,
        read_commit: Cell::new(0),
        reads: Cell::new([0; 3]),
        made: Cell::new(0),
        evicted: 0,
        session,
        g,
    };
    if s.over_hard.load(O::Relaxed) {
        // §6.5's hard watermark: sweep a slice of the table.
        let n = s.mvcc.buckets();
        let from = s.sweep.fetch_add(SWEEP, O::Relaxed) % n;
        // A lower bound of the OAT however stale (the OAT only grows);
        // Acquire pairs with the proxy's Release store.
        let oat = s.oat_seen.load(O::Acquire);
        let g = crossbeam_epoch::pin();
        s.mvcc.for_each_in(from, from + SWEEP, |item| {
            tx.trim_item(item, false);
            tx.evict(item, oat, &g);
        });
        // Help the collector with what we retired: a swept item's free
        // waits in the epoch collector's global queue, and a recycled log
        // buffer comes back through the same queue. The collector runs
        // a few bags per 128 pins, so sweeps retiring thousands of items
        // a second left the buffers behind them: the log stayed full and
        // writers aborted as overloaded (test
        // `evictions_do_not_hold_up_the_log`).
        if tx.evicted > 0 {
            g.flush();
        }
    }
    tx
}

impl Books {
    /// Count how a transaction ended, with what its body returned.
    fn tally<T>(
        &mut self,
        ended: Ended,
        r: Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.token = ended.token;
        ended.error.map_or(Ok(()), Err)?;
        if r.is_ok() {
            self.last_ts = ended.ts;
        }
        self.stats.record(r)
    }
}

/// What ending a transaction left for its runner.
struct Ended {
    ts: u64,
    /// Its durable token (§2.3.1).
    token: u64,
    /// The TC stopped while it ended (no outcome record could go in).
    error: Option<Error>,
}

impl Txn<'_> {
    /// Commit (`commit`, and the body succeeded) or abort: the outcome
    /// record, the versions' states, the transaction table and counters.
    fn end(self, commit: bool) -> Ended {
        use std::sync::atomic::Ordering as O;
        let Txn {
            s,
            slot,
            ts,
            writes,
            record,
            trimmed,
            logged,
            read_commit,
            reads,
            made,
            evicted,
            g,
            ..
        } = self;
        for (c, n) in slot.reads.iter().zip(reads.get()) {
            if n > 0 {
                // Ours alone: no other writer, so no contended line.
                c.store(c.load(O::Relaxed) + n, O::Relaxed);
            }
        }
        let state = match commit {
            true => COMMITTED,
            false => ABORTED,
        };
        let mut outcome = Ok(());
        let mut commit_lsn = 0;
        if logged {
            // §2.3.1 fast commit: committed once the commit record is in
            // a buffer; acknowledged (`durable_token`) once that buffer is
            // stable.
            record.clear();
            logrec::push_outcome(record, state == COMMITTED, ts);
            outcome = s.log.append_forced(record).map(|l| commit_lsn = l);
        }
        let state = if outcome.is_err() { ABORTED } else { state };
        for &v in writes.iter() {
            // SAFETY: our versions, in items that live while we are
            // pinned (an item with versions is never evicted).
            unsafe {
                (*v).commit.store(commit_lsn, Ordering::Relaxed);
                (*v).state.store(state, Ordering::Release);
            }
        }
        // §2.3.1: a writer waits for its commit record; a reader for the
        // newest commit record it read, if that is not yet durable (ours:
        // it waits on the durable LSN instead of logging a commit record
        // of its own).
        let read_commit = read_commit.get();
        let token = match (logged, state) {
            (true, COMMITTED) => commit_lsn + 1,
            _ if read_commit != 0 && read_commit >= s.durable_lsn.load(O::Acquire) => {
                read_commit + 1
            }
            _ => 0,
        };
        slot.ts.store(IDLE, O::SeqCst);
        let created = writes.len() as i64;
        let n_trimmed = trimmed.len();
        // Ours alone: no other writer, so no contended line.
        let add = |c: &AtomicI64, n: i64| {
            if n != 0 {
                c.store(c.load(O::Relaxed) + n, O::Relaxed);
            }
        };
        add(&slot.versions, created - n_trimmed as i64);
        add(&slot.items, made.get() - evicted);
        if evicted != 0 {
            s.metrics.evicted.fetch_add(evicted as u64, O::Relaxed);
        }
        if n_trimmed != 0 {
            s.metrics.trimmed.fetch_add(n_trimmed as u64, O::Relaxed);
            let ps = trimmed.drain(..).map(|p| p as usize).collect();
            // SAFETY: unlinked by this transaction's trims, each once.
            unsafe { retire_all(&g, ps, free_version) };
        }
        let error = outcome.is_err().then(|| {
            // Every slot of the log in use: nothing can be committed.
            let why = "the recovery log has no free slot for an outcome record";
            s.fail(why.into());
            Error::Poisoned(why.into())
        });
        Ended { ts, token, error }
    }
}

impl TxRunner for Runner {
    type Tx<'a> = Txn<'a>;

    fn try_run<T>(
        &mut self,
        body: impl FnOnce(&mut Txn<'_>) -> Result<T, TxError>,
    ) -> Result<Result<T, AbortReason>, Error> {
        self.s.check_broken()?;
        let mut tx = start(&self.s, self.slot, &mut self.parts, false);
        let r = body(&mut tx);
        let ended = tx.end(r.is_ok());
        self.books.tally(ended, r)
    }

    fn last_commit_key(&self) -> u64 {
        self.books.last_ts
    }

    fn stats(&self) -> &Stats {
        &self.books.stats
    }

    fn durable_token(&self) -> u64 {
        self.books.token
    }
}

/// An interactive transaction on the TC (the Hermitage-style tests step
/// several on one thread): it never waits on another transaction. A read
/// that would wait for an older writer's outcome aborts instead (reason
/// [`AbortReason::CommitDependency`]); writes never wait anyway.
pub struct Session<'a> {
    tx: Option<Txn<'a>>,
    books: &'a mut Books,
}

impl granary_api::Interactive for Runner {
    type Session<'a> = Session<'a>;

    fn begin(&mut self) -> Result<Session<'_>, Error> {
        self.s.check_broken()?;
        Ok(Session {
            tx: Some(start(&self.s, self.slot, &mut self.parts, true)),
            books: &mut self.books,
        })
    }
}

impl<'a> Session<'a> {
    fn tx(&mut self) -> &mut Txn<'a> {
        self.tx.as_mut().expect("open until commit or drop")
    }
}

impl granary_api::InteractiveTx for Session<'_> {
    fn commit(mut self) -> Result<Result<u64, AbortReason>, Error> {
        let ended = self.tx.take().expect("open").end(true);
        let ts = ended.ts;
        Ok(self.books.tally(ended, Ok(()))?.map(|()| ts))
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let ended = tx.end(false);
            // A rollback counts as a failure, as the driver counts one.
            let _ = self
                .books
                .tally::<()>(ended, Err(TxError::Failed(Error::RolledBack)));
        }
    }
}

granary_api::forward_tx!(Session<'_>, s => s.tx());
