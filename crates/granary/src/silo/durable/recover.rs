//! Recovery (SiloR §5) and the directory scan shared with `granary
//! inspect`.
//!
//! Policy, exactly:
//! * The `pepoch` file names e_p and, per logger, the log file generation
//!   g and length n that were fsynced when that logger reached e_p.
//!   Files of generation < g were fsynced whole before they were retired;
//!   the first n bytes of generation g were fsynced. That is the *durable
//!   prefix*. Every block header in it is checked; so is the body of every
//!   block replayed (epoch e_l ≤ e ≤ e_p, not void). Damage there is
//!   [`Error::Corrupt`], never skipped. Bodies of blocks recovery does not
//!   need (superseded by the checkpoint, or never acknowledged) are not
//!   read; `granary inspect` ([`scan`]) checks them too.
//! * Anything past the prefix (the rest of generation g, newer files) was
//!   never acknowledged: it is the *tail*, discarded whatever its state —
//!   torn, truncated or intact.
//! * Blocks in the prefix with epoch > e_p are not durable either (their
//!   epoch was never complete on every logger): they are skipped, and
//!   their epochs are recorded as void in `voids` before new epochs start
//!   after them, so no later recovery replays them.
//! * A checkpoint counts only with a valid `MANIFEST`; a checkpoint
//!   directory without one is an interrupted checkpoint and is deleted. A
//!   damaged manifest or checkpoint file is [`Error::Corrupt`].
//! * Completeness: before anything changes on disk, recovery proves it
//!   holds everything the durable state needs, from what the pepoch
//!   records (version 3): the checkpoint it names (or a newer complete
//!   one), and for each logger every log file generation from its `low`
//!   to its durable generation g, each closed (v03) one ending with its
//!   end record. Whatever is gone is a [`Problem`]; in the default
//!   [`RecoveryMode::Strict`](crate::RecoveryMode::Strict) the first one
//!   is the error ([`Error::Missing`], or [`Error::Corrupt`] for damaged
//!   bytes), and `granary inspect` lists them all.
//!   [`RecoveryMode::Salvage`](crate::RecoveryMode::Salvage) instead
//!   replays the longest prefix every logger still holds completely.
//! * Replay (`replay`) applies checkpoint records, then log records with
//!   e_l ≤ epoch ≤ e_p, newest TID winning; the result is the state at the
//!   end of epoch e_p. This module decides what is replayed; `replay`
//!   loads it into the engine; `tidy` then leaves the directory ready
//!   for new logs.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::ahead::Window;
use super::files::write_end;
use super::format::{
    self, BlockHeader, BlockRead, Ledger, LogEnd, Manifest, Pepoch, BLOCK_HEADER, BLOCK_MAGIC_END,
    BLOCK_MAGIC_LOG, CURRENT_LOG, LOG_FILE_HEADER,
};
use crate::silo::error::Error;
use granary_storage::crashsim;
use granary_storage::fs::{fp, sync_dir, DELETING_SUFFIX};

/// One log file, as found on disk.
#[derive(Clone, Debug)]
pub struct LogFileInfo {
    pub path: PathBuf,
    pub logger: usize,
    /// `None` if the file header is damaged (only allowed in the tail).
    pub generation: Option<u64>,
    pub bytes: u64,
    /// Length of the durable prefix (0 for a tail file).
    pub durable_len: u64,
    /// Valid blocks in the durable prefix, and their epoch range.
    pub blocks: u64,
    pub records: u64,
    pub min_epoch: Option<u64>,
    pub max_epoch: Option<u64>,
    /// Blocks in the prefix whose epoch is beyond e_p.
    pub blocks_beyond_pepoch: u64,
    /// What lies past the durable prefix, if anything.
    pub tail: Option<String>,
    /// v03: the file's end record, if it has one (closed files must).
    pub end: Option<LogEnd>,
    /// v03 (closed files end with an end record).
    pub ends: bool,
    /// Older than the oldest generation recovery needs (the checkpoint
    /// holds what it wrote): not read past its header.
    pub superseded: bool,
    /// A [`Problem`] was found in it; only the blocks before the damage
    /// are in `blocks` and the index.
    pub damaged: bool,
    /// Offset and header of every block of the durable prefix.
    pub(crate) index: Vec<(u64, BlockHeader)>,
}

/// Something the durable state needs that recovery found gone or damaged.
/// In [`RecoveryMode::Strict`](crate::RecoveryMode::Strict) the first one
/// fails the open, as [`Problem::to_error`]; `granary inspect` lists them
/// all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file, or the directory a missing file belongs in.
    pub path: PathBuf,
    /// `Some`: damaged bytes at this offset ([`Error::Corrupt`]); `None`:
    /// something is gone ([`Error::Missing`]).
    pub offset: Option<u64>,
    pub what: String,
    /// The logger and log file generation it concerns, if a log file.
    pub log: Option<(usize, u64)>,
}

impl Problem {
    fn missing(path: PathBuf, what: impl Into<String>, log: Option<(usize, u64)>) -> Problem {
        Problem {
            path,
            offset: None,
            what: what.into(),
            log,
        }
    }

    /// The error a strict open fails with.
    pub fn to_error(&self) -> Error {
        match self.offset {
            Some(offset) => Error::Corrupt {
                path: self.path.clone(),
                offset,
                what: self.what.clone(),
            },
            None => Error::Missing {
                path: self.path.clone(),
                what: self.what.clone(),
            },
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.to_error().fmt(f)
    }
}

/// What a [`RecoveryMode::Salvage`](crate::RecoveryMode::Salvage)
/// recovery kept and lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// The state recovered is the durable state as of the end of this
    /// epoch.
    pub epoch: u64,
    /// e_p: what had been acknowledged.
    pub pepoch: u64,
    /// The acknowledged epochs lost, `lo..=hi` (none if nothing was).
    pub lost: Option<(u64, u64)>,
    /// Everything found gone or damaged.
    pub problems: Vec<Problem>,
}

/// A checkpoint directory, as found on disk.
#[derive(Clone, Debug)]
pub struct CheckpointInfo {
    pub path: PathBuf,
    /// `None`: no manifest, an interrupted checkpoint.
    pub manifest: Option<Manifest>,
}

/// Everything `granary inspect` prints, and what recovery acts on.
#[derive(Clone, Debug)]
pub struct DirInfo {
    pub dir: PathBuf,
    pub pepoch: Pepoch,
    pub tables: Vec<(u32, String)>,
    pub catalog_len: u64,
    pub checkpoints: Vec<CheckpointInfo>,
    pub logs: Vec<LogFileInfo>,
    /// Epoch ranges voided by earlier recoveries (never replayed).
    pub voids: Vec<(u64, u64)>,
    /// The newest epoch of a block in a durable prefix that is beyond e_p
    /// and not already void: what this recovery must void.
    pub stale_max: Option<u64>,
    /// What the durable state needs and is gone or damaged.
    pub problems: Vec<Problem>,
    /// The last epoch replayed: e_p, or less after a salvage.
    pub replay_to: u64,
    /// Set by a salvage that had something to salvage.
    pub salvage: Option<SalvageReport>,
}

/// Whether `e` lies in a voided range.
pub fn is_void(voids: &[(u64, u64)], e: u64) -> bool {
    voids.iter().any(|&(lo, hi)| lo <= e && e <= hi)
}

impl DirInfo {
    /// The checkpoint recovery uses: the newest complete one.
    pub fn checkpoint(&self) -> Option<(&Path, &Manifest)> {
        self.checkpoints
            .iter()
            .filter_map(|c| c.manifest.as_ref().map(|m| (c.path.as_path(), m)))
            .max_by_key(|(_, m)| m.low)
    }
}

pub(crate) fn corrupt(path: &Path, offset: u64, what: impl Into<String>) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        offset,
        what: what.into(),
    }
}

/// Whether `dir` holds a granary database (its `pepoch` file exists).
pub fn exists(dir: &Path) -> bool {
    dir.join(format::PEPOCH_FILE).exists()
}

/// Read and check a database directory without changing it, verifying
/// every checksum of every durable log block (`granary inspect`). Damaged
/// or missing log files and a missing checkpoint are listed in
/// [`DirInfo::problems`], with the words a strict open would fail with.
///
/// # Errors
/// [`Error::Corrupt`] for damage in the pepoch, the catalog, the voids
/// or a manifest, and a log file in the wrong directory or two of one
/// generation; [`Error::Missing`] for a missing catalog;
/// [`Error::Storage`] if it cannot be read.
pub fn scan(dir: &Path) -> Result<DirInfo, Error> {
    scan_with(dir, true)
}

/// As [`scan`]; with `bodies == false` only block headers (and their
/// checksums) are read: recovery checks the bodies it replays itself, and
/// never reads blocks a checkpoint supersedes (SiloR §5.2).
pub(crate) fn scan_with(dir: &Path, bodies: bool) -> Result<DirInfo, Error> {
    let mut info = scan_meta(dir)?;
    let problems;
    (info.logs, info.stale_max, problems) = scan_logs(&info, bodies)?;
    info.problems.extend(problems);
    Ok(info)
}

/// [`scan_with`] without the log files (`logs` empty, `stale_max` none):
/// the pepoch, the catalog, the voids and the checkpoints.
pub(crate) fn scan_meta(dir: &Path) -> Result<DirInfo, Error> {
    let io = |what: &str, p: &Path, e: std::io::Error| Error::storage(what, p, e);
    let pe_path = dir.join(format::PEPOCH_FILE);
    let pe_bytes = fs::read(&pe_path).map_err(|e| io("read pepoch", &pe_path, e))?;
    let pepoch = Pepoch::decode_file(&pe_bytes)
        .ok_or_else(|| corrupt(&pe_path, 0, "neither pepoch slot is valid"))?;
    let cat_path = dir.join(format::CATALOG_FILE);
    let cat = match fs::read(&cat_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Missing {
                path: cat_path,
                what: "the table catalog is gone".into(),
            })
        }
        Err(e) => return Err(io("read the table catalog", &cat_path, e)),
    };
    let (tables, catalog_len) =
        format::decode_catalog(&cat).map_err(|w| corrupt(&cat_path, 0, w))?;
    for (i, (id, _)) in tables.iter().enumerate() {
        if *id as usize != i {
            return Err(corrupt(
                &cat_path,
                0,
                format!("table ids out of order at entry {i}"),
            ));
        }
    }

    let vpath = dir.join(format::VOIDS_FILE);
    let voids = match fs::read(&vpath) {
        Ok(b) => format::decode_voids(&b).map_err(|w| corrupt(&vpath, 0, w))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io("read", &vpath, e)),
    };
    let mut checkpoints = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| io("list", dir, e))?;
    for ent in entries {
        let ent = ent.map_err(|e| io("list", dir, e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        if format::parse_ckpt_dir_name(&name).is_none() {
            continue;
        }
        let path = ent.path();
        let mpath = path.join(format::MANIFEST_FILE);
        let manifest = match fs::read(&mpath) {
            Ok(b) => Some(
                Manifest::decode(&b)
                    .ok_or_else(|| corrupt(&mpath, 0, "damaged checkpoint manifest"))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("read", &mpath, e)),
        };
        checkpoints.push(CheckpointInfo { path, manifest });
    }
    checkpoints.sort_by(|a, b| a.path.cmp(&b.path));
    let mut problems = Vec::new();
    // The pepoch names the checkpoint the durable state needs once its
    // cleanup may have deleted the logs before its e_l: it, or a newer
    // complete one, must be here.
    let need = pepoch.checkpoint;
    let have = checkpoints
        .iter()
        .filter_map(|c| c.manifest.as_ref())
        .any(|m| m.low >= need);
    if need != 0 && !have {
        let cdir = dir.join(format::ckpt_dir_name(need));
        let (path, gone) = if cdir.is_dir() {
            (cdir.join(format::MANIFEST_FILE), "its MANIFEST is gone")
        } else {
            (cdir, "its directory is gone")
        };
        problems.push(Problem::missing(
            path,
            format!(
                "the checkpoint of epoch {need} that the durable state needs ({gone}; \
                 the logs before epoch {need} may have been deleted)"
            ),
            None,
        ));
    }
    if (voids.len() as u64) < u64::from(pepoch.voids) {
        problems.push(Problem::missing(
            vpath.clone(),
            format!(
                "the voids file holds {} entries but {} were written: epochs that must \
                 never be replayed would be",
                voids.len(),
                pepoch.voids
            ),
            None,
        ));
    }
    let replay_to = pepoch.epoch;
    Ok(DirInfo {
        dir: dir.to_path_buf(),
        pepoch,
        tables,
        catalog_len: catalog_len as u64,
        checkpoints,
        logs: Vec::new(),
        voids,
        stale_max: None,
        problems,
        replay_to,
        salvage: None,
    })
}

/// What [`scan_logs`] finds: the log files, the `stale_max` they give,
/// and the problems.
type LogScan = (Vec<LogFileInfo>, Option<u64>, Vec<Problem>);

/// The log files of every logger of `meta` (from [`scan_meta`]), the
/// `stale_max` they give, and what is gone or damaged in them.
pub(crate) fn scan_logs(meta: &DirInfo, bodies: bool) -> Result<LogScan, Error> {
    let io = |what: &str, p: &Path, e: std::io::Error| Error::storage(what, p, e);
    let (dir, pepoch, voids) = (&meta.dir, &meta.pepoch, &meta.voids);
    // Each logger's files, sorted (or the error listing them).
    let listed: Vec<Result<Vec<PathBuf>, Error>> = (0..pepoch.positions.len())
        .map(|i| {
            let ldir = format::logger_dir(dir, i);
            let mut files = Vec::new();
            match fs::read_dir(&ldir) {
                Ok(entries) => {
                    for ent in entries {
                        let ent = ent.map_err(|e| io("list", &ldir, e))?;
                        let name = ent.file_name().to_string_lossy().into_owned();
                        if name == CURRENT_LOG || format::parse_old_log_name(&name).is_some() {
                            files.push(ent.path());
                        }
                    }
                }
                // Every file in it is gone: the generations below say which
                // mattered.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("list", &ldir, e)),
            }
            files.sort();
            Ok(files)
        })
        .collect();
    // Scan the files on a few threads at once: the scan waits on the disk
    // for one block header after another, so files scanned side by side
    // overlap their waits (a directory without a checkpoint has nothing
    // else to overlap them with).
    let jobs: Vec<(usize, &Path)> = listed
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.iter().flatten().map(move |p| (i, p.as_path())))
        .collect();
    let scanned = parallel_map(jobs.len(), SCAN_THREADS, |j| {
        let (i, path) = jobs[j];
        let at = Place {
            logger: i,
            durable: pepoch.positions[i],
            low: pepoch.low(i),
            ep: pepoch.epoch,
        };
        let mut stale = None;
        let mut found = Vec::new();
        let info = scan_log_file(path, &at, voids, &mut stale, bodies, &mut found)?;
        Ok((info, stale, found))
    });
    let mut scanned = scanned.into_iter();
    let mut logs = Vec::new();
    let mut stale_max: Option<u64> = None;
    let mut problems = Vec::new();
    for (i, (&(g, n), files)) in pepoch.positions.iter().zip(listed).enumerate() {
        let low = pepoch.low(i);
        let ldir = format::logger_dir(dir, i);
        let mut gens = std::collections::HashSet::new();
        for path in files? {
            let (info, stale, found) = scanned.next().expect("one result a file")?;
            stale_max = stale_max.max(stale);
            problems.extend(found);
            if let Some(gen) = info.generation {
                if !gens.insert(gen) {
                    return Err(corrupt(
                        &path,
                        0,
                        format!("two log files of generation {gen}"),
                    ));
                }
            }
            logs.push(info);
        }
        // Every generation from `low` to g must be here (g itself may be
        // gone if nothing in it was durable). Unknown `low`: only g.
        let empty_ok = n <= pepoch.empty_log_len();
        let mut gone: Option<(u64, u64)> = None;
        let mut report = |(a, b): (u64, u64)| {
            let which = if a == b {
                format!("generation {a}")
            } else {
                format!("generations {a} to {b}")
            };
            problems.push(Problem::missing(
                ldir.clone(),
                format!(
                    "logger {i}'s log file of {which} is gone; the durable state needs \
                     every generation from {} to {g}",
                    low.unwrap_or(g)
                ),
                Some((i, a)),
            ));
        };
        for j in low.unwrap_or(g).min(g)..=g {
            if gens.contains(&j) || (j == g && empty_ok) {
                if let Some(r) = gone.take() {
                    report(r);
                }
            } else {
                gone = Some(gone.map_or((j, j), |(a, _)| (a, j)));
            }
        }
        if let Some(r) = gone {
            report(r);
        }
    }
    Ok((logs, stale_max, problems))
}

/// Log files scanned at once.
const SCAN_THREADS: usize = 4;

/// `f(0..n)` on up to `threads` threads, results in order.
fn parallel_map<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    if n <= 1 || threads <= 1 {
        return (0..n).map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, T)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.min(n))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if j >= n {
                            return mine;
                        }
                        mine.push((j, f(j)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    out.sort_by_key(|&(j, _)| j);
    out.into_iter().map(|(_, t)| t).collect()
}

/// Where a log file sits: its logger, the logger's durable position
/// (generation g, length n), its oldest needed generation, and e_p.
struct Place {
    logger: usize,
    durable: (u64, u64),
    low: Option<u64>,
    ep: u64,
}

/// Read and check the header of the block at `at`, which must end by
/// `limit` and have one of `magics`. The outer error is I/O; the inner one
/// names the damage.
pub(crate) fn header_at(
    f: &File,
    at: u64,
    limit: u64,
    magics: &[u32],
) -> io::Result<Result<BlockHeader, &'static str>> {
    if limit - at < BLOCK_HEADER as u64 {
        return Ok(Err("truncated block header"));
    }
    let mut h = [0u8; BLOCK_HEADER];
    f.read_exact_at(&mut h, at)?;
    let Some(h) = magics.iter().find_map(|&m| BlockHeader::decode(&h, m)) else {
        return Ok(Err("bad block header (magic or checksum)"));
    };
    if limit - at - (BLOCK_HEADER as u64) < u64::from(h.len) {
        return Ok(Err("truncated block payload"));
    }
    Ok(Ok(h))
}

/// Read the body of the block at `at` (whose header is `h`) into `buf`
/// and check it against the header's checksum.
pub(crate) fn body_at<'b>(
    f: &File,
    at: u64,
    h: &BlockHeader,
    buf: &'b mut Vec<u8>,
) -> io::Result<Result<&'b [u8], &'static str>> {
    let n = h.len as usize;
    if buf.len() < n {
        buf.resize(n, 0);
    }
    let body = &mut buf[..n];
    f.read_exact_at(body, at + BLOCK_HEADER as u64)?;
    if format::crc(body) != h.body_crc {
        return Ok(Err("block payload checksum mismatch"));
    }
    Ok(Ok(body))
}

/// The block at `at`, checked as by [`header_at`] and [`body_at`], if
/// read-ahead window `w` holds it (a window holds only whole blocks, so
/// one that starts in it ends in it).
pub(crate) fn block_in(
    w: &Window,
    at: u64,
    magic: u32,
) -> Option<Result<(BlockHeader, &[u8]), &'static str>> {
    let off = usize::try_from(at.checked_sub(w.at)?).ok()?;
    match format::read_block_checked(w.bytes(), off, magic, true) {
        BlockRead::Block(h, body) => Some(Ok((h, body))),
        BlockRead::Bad(m) => Some(Err(m)),
        BlockRead::End => None,
    }
}

/// Scan one log file: its header, then the blocks of its durable prefix
/// (`at.durable` is the logger's pepoch position: generation g, length
/// n). Blocks are read header by header; with `bodies`, every body is read
/// and checked too. Damage inside the prefix, and a closed v03 file
/// without its end record, go to `problems`; the scan of the file stops
/// at the damage.
fn scan_log_file(
    path: &Path,
    at: &Place,
    voids: &[(u64, u64)],
    stale_max: &mut Option<u64>,
    bodies: bool,
    problems: &mut Vec<Problem>,
) -> Result<LogFileInfo, Error> {
    let io = |what: &str, e: io::Error| Error::storage(what, path, e);
    let (logger, (g, n), ep) = (at.logger, at.durable, at.ep);
    let f = File::open(path).map_err(|e| io("open", e))?;
    let size = f.metadata().map_err(|e| io("stat", e))?.len();
    let mut head = [0u8; LOG_FILE_HEADER];
    let head_len = (size as usize).min(LOG_FILE_HEADER);
    f.read_exact_at(&mut head[..head_len], 0)
        .map_err(|e| io("read", e))?;
    let name = path.file_name().map(|f| f.to_string_lossy().into_owned());
    let is_current = name.as_deref() == Some(CURRENT_LOG);
    let mut info = LogFileInfo {
        path: path.to_path_buf(),
        logger,
        generation: None,
        bytes: size,
        durable_len: 0,
        blocks: 0,
        records: 0,
        min_epoch: None,
        max_epoch: None,
        blocks_beyond_pepoch: 0,
        tail: None,
        end: None,
        ends: false,
        superseded: false,
        damaged: false,
        index: Vec::new(),
    };
    let superseded = |gen: u64| at.low.is_some_and(|l| gen < l);
    let Some(fh) = format::decode_log_file_header(&head[..head_len]) else {
        if is_current {
            // A file whose creation did not finish: never referenced.
            info.tail = Some("damaged or unfinished file header (whole file is tail)".into());
            return Ok(info);
        }
        // A closed file: its name says which generation was damaged.
        let gen = name
            .as_deref()
            .and_then(format::parse_old_log_name)
            .map(|n| n.1);
        info.generation = gen;
        if gen.is_some_and(superseded) {
            info.superseded = true;
            return Ok(info);
        }
        info.damaged = true;
        problems.push(Problem {
            path: path.to_path_buf(),
            offset: Some(0),
            what: "damaged log file header".into(),
            log: gen.map(|gen| (logger, gen)),
        });
        return Ok(info);
    };
    let (lg, gen) = (fh.logger, fh.generation);
    if lg as usize != logger {
        return Err(corrupt(
            path,
            8,
            format!("file of logger {lg} in logger {logger}'s directory"),
        ));
    }
    info.generation = Some(gen);
    info.ends = fh.ends;
    if superseded(gen) {
        info.superseded = true;
        return Ok(info);
    }
    let mut damage = |info: &mut LogFileInfo, offset: Option<u64>, what: String| {
        info.damaged = true;
        problems.push(Problem {
            path: path.to_path_buf(),
            offset,
            what,
            log: Some((logger, gen)),
        });
    };
    let prefix = match gen.cmp(&g) {
        std::cmp::Ordering::Less => size,
        std::cmp::Ordering::Equal => {
            if size < n {
                damage(
                    &mut info,
                    None,
                    format!(
                        "the file is cut short: it has {size} bytes, but its first {n} \
                         were made durable (pepoch)"
                    ),
                );
            }
            n.min(size)
        }
        std::cmp::Ordering::Greater => {
            info.tail = Some(format!(
                "newer than the durable generation {g} (whole file is tail)"
            ));
            return Ok(info);
        }
    };
    let mut buf = Vec::new();
    let mut pos = fh.first_block();
    while pos < prefix {
        let h = match header_at(&f, pos, prefix, &[BLOCK_MAGIC_LOG, BLOCK_MAGIC_END])
            .map_err(|e| io("read", e))?
        {
            Ok(h) => h,
            Err(w) => {
                if !info.damaged {
                    let what = if prefix == size && w.starts_with("truncated") {
                        format!(
                            "the file is cut short at byte {size}, inside the block at \
                             {pos} ({w})"
                        )
                    } else {
                        format!("{w} inside the durable prefix")
                    };
                    let cut = prefix == size && w.starts_with("truncated");
                    damage(&mut info, (!cut).then_some(pos), what);
                }
                break;
            }
        };
        let end_of_block = pos + (BLOCK_HEADER as u64) + u64::from(h.len);
        if h.magic == BLOCK_MAGIC_END {
            let body = body_at(&f, pos, &h, &mut buf).map_err(|e| io("read", e))?;
            let end = body.ok().and_then(|b| LogEnd::decode(&h, b));
            match end {
                Some(e) if e.generation == gen && u64::from(e.blocks) == info.blocks => {
                    info.end = Some(e);
                    if fh.next_block(end_of_block) < prefix {
                        damage(
                            &mut info,
                            Some(fh.next_block(end_of_block)),
                            "bytes after the end record".into(),
                        );
                    }
                }
                _ => damage(
                    &mut info,
                    Some(pos),
                    "an end record that does not match its file".into(),
                ),
            }
            break;
        }
        if bodies {
            let checked = body_at(&f, pos, &h, &mut buf)
                .map_err(|e| io("read", e))?
                .and_then(|body| format::decode_log_payload(body, |_, _| {}));
            let bad = match checked {
                Ok(txns) if txns == h.count => None,
                Ok(_) => Some("block transaction count mismatch".to_string()),
                Err(w) => Some(format!("{w} inside the durable prefix")),
            };
            if let Some(what) = bad {
                damage(&mut info, Some(pos), what);
                break;
            }
        }
        info.blocks += 1;
        info.records += u64::from(h.count);
        info.min_epoch = Some(info.min_epoch.map_or(h.epoch, |m| m.min(h.epoch)));
        info.max_epoch = Some(info.max_epoch.map_or(h.epoch, |m| m.max(h.epoch)));
        if h.epoch > ep && !is_void(voids, h.epoch) {
            info.blocks_beyond_pepoch += 1;
            *stale_max = Some(stale_max.map_or(h.epoch, |m: u64| m.max(h.epoch)));
        }
        info.index.push((pos, h));
        // v02, v03: zeros pad each block to the file's alignment.
        pos = fh.next_block(end_of_block);
    }
    // A closed v03 file ends with its end record; without it, it was cut
    // short at a block boundary (or before its first block).
    if fh.ends && gen < g && info.end.is_none() && !info.damaged {
        damage(
            &mut info,
            None,
            format!(
                "the closed log file is cut short: it ends at byte {size} without its \
                 end record"
            ),
        );
    }
    info.durable_len = prefix;
    if size > prefix {
        info.tail = Some(format!("{} bytes past the durable prefix", size - prefix));
    }
    Ok(info)
}

/// What recovery did, for reports (`granary bench recover`).
#[derive(Clone, Debug, Default)]
pub struct RecoveryStats {
    pub pepoch: u64,
    pub checkpoint_low: Option<u64>,
    pub checkpoint_bytes: u64,
    pub checkpoint_records: u64,
    pub log_bytes: u64,
    pub log_records_applied: u64,
    /// Loading the checkpoint, with the log files scanned alongside (until
    /// both are done).
    pub checkpoint_seconds: f64,
    pub log_seconds: f64,
    pub threads: usize,
    /// Tables a replayed log record deleted from (swept of tombstones).
    pub tables_with_deletes: Vec<u32>,
    /// [`RecoveryMode::Salvage`](crate::RecoveryMode::Salvage) found
    /// damage: what it kept and lost.
    pub salvage: Option<SalvageReport>,
}

impl DirInfo {
    /// The log blocks recovery replays, as (index into `logs`, offset,
    /// header): those of epoch e_l ≤ e ≤ e_p that are not void, newest
    /// epoch first (SiloR §5.2: most keys' final versions then arrive
    /// first, and older ones are skipped without being copied).
    pub(crate) fn replay_blocks(&self) -> Vec<(usize, u64, BlockHeader)> {
        let logs = &self.logs;
        let low = self.checkpoint().map_or(0, |(_, m)| m.low);
        let ep = self.replay_to;
        let mut v: Vec<(usize, u64, BlockHeader)> = logs
            .iter()
            .enumerate()
            .flat_map(|(i, f)| f.index.iter().map(move |&(at, h)| (i, at, h)))
            .filter(|(_, _, h)| h.epoch >= low && h.epoch <= ep && !is_void(&self.voids, h.epoch))
            .collect();
        v.sort_by_key(|&(i, at, h)| (std::cmp::Reverse(h.epoch), i, at));
        v
    }

    /// The byte ranges recovery reads, as (file, offset, length): every
    /// checkpoint file whole, and each replayed run of log blocks. (Block
    /// headers of the durable prefix are read too: 32 bytes a block.)
    pub fn recovery_reads(&self) -> Vec<(PathBuf, u64, u64)> {
        let mut out = Vec::new();
        if let Some((path, m)) = self.checkpoint() {
            for (i, f) in m.files.iter().enumerate() {
                out.push((path.join(format::ckpt_part_name(i)), 0, f.0));
            }
        }
        let mut blocks = self.replay_blocks();
        blocks.sort_by_key(|&(i, at, _)| (i, at));
        let mut run: Option<(usize, u64, u64)> = None;
        for (i, at, h) in blocks {
            let len = BLOCK_HEADER as u64 + u64::from(h.len);
            run = match run {
                Some((ri, start, end)) if ri == i && end == at => Some((ri, start, at + len)),
                Some((ri, start, end)) => {
                    out.push((self.logs[ri].path.clone(), start, end - start));
                    Some((i, at, at + len))
                }
                None => Some((i, at, at + len)),
            };
        }
        if let Some((ri, start, end)) = run {
            out.push((self.logs[ri].path.clone(), start, end - start));
        }
        out
    }
}

impl DirInfo {
    /// For a salvage: the last epoch every logger still holds completely,
    /// e_s, which becomes [`DirInfo::replay_to`]; and the report. Nothing
    /// to do without problems.
    ///
    /// Logger k holds every epoch completely if every generation from its
    /// `low` to g is here and undamaged. If generation j is gone or
    /// damaged, it holds them through the `d` of generation j − 1's end
    /// record (everything of epoch ≤ d from its workers is in generations
    /// ≤ j − 1), and, if j is its first needed generation or j − 1 has no
    /// end record, through nothing after the checkpoint's e_l. e_s is the
    /// least over loggers, and at most e_p, so no logger is recovered
    /// further than another.
    ///
    /// # Errors
    /// [`Error::Missing`] if a problem is not a log file's (the checkpoint
    /// or the voids file is gone), or e_s falls before the checkpoint's
    /// e_h: the checkpoint is fuzzy, and only the log through e_h makes it
    /// a consistent state.
    pub fn plan_salvage(&mut self) -> Result<(), Error> {
        let Some(first) = self.problems.first() else {
            return Ok(());
        };
        if let Some(p) = self.problems.iter().find(|p| p.log.is_none()) {
            return Err(Error::Missing {
                path: p.path.clone(),
                what: format!("{}; salvage cannot recover without it", p.what),
            });
        }
        let ep = self.pepoch.epoch;
        let ck = self.checkpoint().map(|(_, m)| (m.low, m.high));
        // Nothing after the checkpoint's e_l (or at all, without one).
        let floor = ck.map_or(0, |(low, _)| low.saturating_sub(1));
        let mut es = ep;
        let mut cause = first.clone();
        let empty = self.pepoch.empty_log_len();
        for (k, &(g, n)) in self.pepoch.positions.iter().enumerate() {
            let by_gen: std::collections::HashMap<u64, &LogFileInfo> = self
                .logs
                .iter()
                .filter(|f| f.logger == k && !f.superseded)
                .filter_map(|f| f.generation.map(|gen| (gen, f)))
                .collect();
            let start = self
                .pepoch
                .low(k)
                .or_else(|| by_gen.keys().copied().filter(|&j| j <= g).min())
                .unwrap_or(g)
                .min(g);
            let mut held: Option<u64> = None;
            for j in start..=g {
                let intact = match by_gen.get(&j) {
                    None => j == g && n <= empty,
                    Some(f) => !f.damaged,
                };
                if !intact {
                    let c = held.unwrap_or(floor).min(ep);
                    if c < es {
                        es = c;
                        cause = self
                            .problems
                            .iter()
                            .find(|p| p.log == Some((k, j)))
                            .unwrap_or(first)
                            .clone();
                    }
                    break;
                }
                held = by_gen.get(&j).and_then(|f| f.end).map(|e| e.durable_epoch);
            }
        }
        if let Some((low, high)) = ck {
            if es < high {
                return Err(Error::Missing {
                    path: cause.path.clone(),
                    what: format!(
                        "salvage finds no consistent state: the checkpoint of epoch {low} \
                         needs every logger's log through epoch {high}, but what survives \
                         is complete only through epoch {es} ({})",
                        cause.what
                    ),
                });
            }
        }
        self.replay_to = es;
        self.salvage = Some(SalvageReport {
            epoch: es,
            pepoch: ep,
            lost: (es < ep).then_some((es + 1, ep)),
            problems: self.problems.clone(),
        });
        Ok(())
    }
}

/// What [`tidy`] leaves for the loggers: each one's next generation, the
/// first epoch new transactions may use, and the [`Ledger`] the first
/// pepoch write records.
pub(crate) struct Tidied {
    pub generations: Vec<u64>,
    pub first_epoch: u64,
    pub ledger: Ledger,
}

/// After replay: drop the tail, close the files the durable state ends in,
/// and void the stale epochs, so new epochs (which start after everything
/// found) can never be confused with leftovers. Every step is idempotent:
/// a crash in the middle is recovered the same way again.
///
/// Each logger's next generation is g (its durable generation) if the
/// generation-g file is gone or holds no block, and the new file takes its
/// place; otherwise g + 1. Newer files are tail, deleted first. So the
/// generations from `low` on stay contiguous.
pub(crate) fn tidy(info: &DirInfo) -> Result<Tidied, Error> {
    let io = |what: &str, p: &Path, e: std::io::Error| Error::storage(what, p, e);
    let ep = info.pepoch.epoch;
    let mut next: Vec<u64> = info.pepoch.positions.iter().map(|&(g, _)| g).collect();
    let mut first_epoch = ep + 1;
    if let Some((_, m)) = info.checkpoint() {
        first_epoch = first_epoch.max(m.high + 1);
    }
    for f in &info.logs {
        let (g, _) = info.pepoch.positions[f.logger];
        if let Some(m) = f.max_epoch {
            first_epoch = first_epoch.max(m + 1);
        }
        let dir = f.path.parent().expect("log file has a directory");
        let current = f.path.file_name().is_some_and(|n| n == CURRENT_LOG);
        let Some(gen) = f.generation.filter(|&x| x <= g) else {
            fp("recover-remove").map_err(|e| io("remove", &f.path, e))?;
            fs::remove_file(&f.path).map_err(|e| io("remove", &f.path, e))?;
            crashsim::removed(&f.path);
            sync_dir(dir).map_err(|e| io("sync", dir, e))?;
            continue;
        };
        let keep = |to: &mut u64| *to = (*to).max(gen + 1);
        if f.superseded || f.damaged {
            // Left as found (a salvage's checkpoint deletes them), but out
            // of the new logger file's way.
            keep(&mut next[f.logger]);
            if current {
                let to = dir.join(format::old_log_name(f.max_epoch.unwrap_or(0), gen));
                retire(&f.path, &to)?;
            }
            continue;
        }
        if gen == g && current && f.blocks == 0 {
            // Nothing durable in it: the new file of generation g replaces
            // it (the logger truncates it).
            continue;
        }
        keep(&mut next[f.logger]);
        if f.bytes > f.durable_len {
            fp("recover-truncate").map_err(|e| io("truncate", &f.path, e))?;
            let file = fs::OpenOptions::new()
                .write(true)
                .open(&f.path)
                .map_err(|e| io("open", &f.path, e))?;
            file.set_len(f.durable_len)
                .map(|()| crashsim::set_len(&f.path, f.durable_len))
                .and_then(|()| file.sync_all())
                .map_err(|e| io("truncate", &f.path, e))?;
            crashsim::synced(&f.path);
        }
        if f.ends && f.end.is_none() {
            // The durable state ends in this file (generation g; an older
            // one would be damaged): close it. Everything of epoch ≤ e_p
            // from this logger is in it or older files (the pepoch says
            // so).
            let end = LogEnd {
                durable_epoch: ep,
                logger: f.logger as u32,
                blocks: f.blocks as u32,
                generation: gen,
                min_epoch: f.min_epoch.unwrap_or(0),
                max_epoch: f.max_epoch.unwrap_or(0),
            };
            let file = fs::OpenOptions::new()
                .write(true)
                .open(&f.path)
                .map_err(|e| io("open", &f.path, e))?;
            fp("recover-end").map_err(|e| io("close", &f.path, e))?;
            write_end(&file, &f.path, f.durable_len, &end).map_err(|e| io("close", &f.path, e))?;
        }
        if current {
            // The new logger file takes this name: retire this one.
            let to = dir.join(format::old_log_name(f.max_epoch.unwrap_or(0), gen));
            retire(&f.path, &to)?;
        }
    }
    // Blocks of epochs after the replayed ones may sit in the durable
    // prefixes (written, but their epoch never completed on every logger;
    // or, in a salvage, lost on another logger): void those epochs for
    // good before any new epoch is used.
    let void_to = if info.salvage.is_some() {
        let seen = info.logs.iter().filter_map(|f| f.max_epoch).max();
        Some(seen.unwrap_or(0).max(ep))
    } else {
        info.stale_max
    }
    .filter(|&hi| hi > info.replay_to);
    // Cut unfinished appends off the catalog and voids files, so the next
    // append follows a whole entry.
    cut(&info.dir.join(format::CATALOG_FILE), info.catalog_len)?;
    cut(
        &info.dir.join(format::VOIDS_FILE),
        20 * info.voids.len() as u64,
    )?;
    let mut voids = info.voids.len();
    if let Some(hi) = void_to {
        let path = info.dir.join(format::VOIDS_FILE);
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        crashsim::created(&path, false);
        use std::io::Write;
        fp("voids-write").map_err(|e| io("write", &path, e))?;
        let entry = format::encode_void(info.replay_to + 1, hi);
        let at = crashsim::append_at(&f);
        f.write_all(&entry)
            .map(|()| crashsim::wrote(&path, at, &entry))
            .and_then(|()| fp("voids-fsync"))
            .and_then(|()| f.sync_data())
            .map_err(|e| io("write", &path, e))?;
        crashsim::synced(&path);
        sync_dir(&info.dir).map_err(|e| io("sync", &info.dir, e))?;
        voids += 1;
    }
    // Interrupted checkpoints, and complete ones older than the one used
    // (a crash while the newer one was deleting them).
    let keep = info.checkpoint().map(|(p, _)| p.to_path_buf());
    for c in &info.checkpoints {
        if Some(&c.path) != keep.as_ref() {
            fs::remove_dir_all(&c.path)
                .map_err(|e| io("remove an old or interrupted checkpoint", &c.path, e))?;
            crashsim::removed_all(&c.path);
        }
    }
    // Deletions a crash interrupted (`remove_paced`): nothing reads them.
    let dirs = std::iter::once(info.dir.clone())
        .chain((0..info.pepoch.positions.len()).map(|i| format::logger_dir(&info.dir, i)));
    for d in dirs {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for ent in entries.flatten() {
            let path = ent.path();
            if !ent.file_name().to_string_lossy().ends_with(DELETING_SUFFIX) {
                continue;
            }
            fp("recover-remove").map_err(|e| io("remove", &path, e))?;
            if path.is_dir() {
                fs::remove_dir_all(&path).map(|()| crashsim::removed_all(&path))
            } else {
                fs::remove_file(&path).map(|()| crashsim::removed(&path))
            }
            .map_err(|e| io("remove", &path, e))?;
        }
    }
    let n = info.pepoch.positions.len();
    let ledger = Ledger {
        checkpoint: info.checkpoint().map_or(0, |(_, m)| m.low),
        lows: (0..n)
            .map(|k| info.pepoch.low(k).unwrap_or(format::LOW_UNKNOWN))
            .collect(),
        voids: u32::try_from(voids).unwrap_or(u32::MAX),
    };
    Ok(Tidied {
        generations: next,
        first_epoch,
        ledger,
    })
}

/// Rename log file `from` to `to`, durably.
fn retire(from: &Path, to: &Path) -> Result<(), Error> {
    let io = |what: &str, e: std::io::Error| Error::storage(what, from, e);
    fp("recover-rename").map_err(|e| io("rename", e))?;
    fs::rename(from, to).map_err(|e| io("rename", e))?;
    crashsim::renamed(from, to);
    let dir = from.parent().expect("log file has a directory");
    sync_dir(dir).map_err(|e| io("sync", e))
}

/// Truncate `path` to `len` if it is longer (and exists).
fn cut(path: &Path, len: u64) -> Result<(), Error> {
    let io = |what: &str, e: std::io::Error| Error::storage(what, path, e);
    match fs::metadata(path) {
        Ok(m) if m.len() > len => {
            fp("recover-truncate").map_err(|e| io("truncate", e))?;
            let f = fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| io("open", e))?;
            f.set_len(len)
                .map(|()| crashsim::set_len(path, len))
                .and_then(|()| f.sync_all())
                .map(|()| crashsim::synced(path))
                .map_err(|e| io("truncate", e))
        }
        _ => Ok(()),
    }
}
