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
//! [`AbortReason::Overloaded`](granary_api::AbortReason::Overloaded). Outcome records are always appended.
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

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;
use granary_api::{Engine, Error, TableId};

use super::dc::{DataComponent, MemoryDc};
use super::log::Log;
use super::read_cache::ReadCache;
pub use super::recover::Recovery;
pub use super::shared::{Config, Metrics, Report};
use super::shared::{Flaw, Shared, Table, TxSlot, IDLE, MAX_RUNNERS};
use granary_storage::crashsim;
use granary_storage::fs::{fp, sync_dir, DirLock};
use granary_storage::segments::SegmentLog;

mod merge_scan;
mod runner;
mod session;
mod txn;

use super::table::{Item, MvccTable, Retire};
use crate::catalog::Catalog;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use granary_index::Tree;
pub use runner::Runner;
pub use session::Session;
pub use txn::Txn;

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
            next_ts: AtomicU64::new(1),
            slots: (0..MAX_RUNNERS)
                .map(|_| {
                    CachePadded::new(TxSlot {
                        ts: AtomicU64::new(IDLE),
                        ..TxSlot::default()
                    })
                })
                .collect(),
            claimed: Mutex::new(vec![false; MAX_RUNNERS]),
            o_lsn: AtomicU64::new(0),
            oat_seen: AtomicU64::new(0),
            runners: AtomicUsize::new(0),
            over_soft: AtomicBool::new(false),
            over_hard: AtomicBool::new(false),
            sweep: AtomicUsize::new(0),
            broken: Mutex::new(None),
            is_broken: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            metrics: Metrics::default(),
            durable_lsn: AtomicU64::new(start_seq << 32),
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
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
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
        // Release: the TC Proxy's threads load `stop` with Acquire: they see
        // everything this handle did before, then exit.
        self.s.stop.store(true, Ordering::Release);
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
        self.s
            .dir
            .is_some()
            // Acquire: pairs with the flusher's Release of the durable LSN:
            // what is below it is stable.
            .then(|| self.s.durable_lsn.load(Ordering::Acquire))
    }

    fn log_bytes(&self) -> Option<u64> {
        self.s
            .dir
            .is_some()
            .then(|| self.s.metrics.logged.load(Ordering::Relaxed))
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
            self.s.runners.fetch_max(i + 1, Ordering::SeqCst);
            i
        };
        Ok(Runner::new(Arc::clone(&self.s), slot))
    }
}
