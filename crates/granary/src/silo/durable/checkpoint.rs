//! Fuzzy parallel checkpoints (SiloR §4.1–§4.3).
//!
//! A checkpoint starts at epoch e_l = E and first waits until no worker can
//! still commit in an epoch below e_l. Then n threads each walk one
//! key-range slice of every table, writing each record's latest version
//! (key, TID, value) in checksummed blocks round-robin into m files, and
//! fsync every 32 MB. Records of epoch ≥ e_l are skipped: the log from e_l
//! on has them (and any later change), so the checkpoint need not be a
//! consistent snapshot. When every file is synced at epoch e_h, the
//! checkpoint waits until e_h ≤ e_p and only then writes its `MANIFEST`;
//! afterwards older checkpoints and the log files wholly below e_l are
//! deleted. Recovery = checkpoint + log epochs [e_l, e_p].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use granary_api::TableId;

use super::abuf::{open_aligned, seal_block, AlignedBuf};
use super::format::{self, Ledger, Manifest, BLOCK_HEADER, BLOCK_MAGIC_CKPT, IO_ALIGN};
use crate::silo::error::Error;
use crate::silo::pin::ReadPin;
use crate::silo::record::Record;
use crate::silo::shared::Shared;
use crate::silo::worker::Worker;
use granary_storage::crashsim;
use granary_storage::fs::{fp, remove_paced, sync_dir};

/// fsync a checkpoint file after this many bytes (SiloR §4.2).
const SYNC_EVERY: u64 = 32 << 20;
/// Checkpoint block payload size.
const BLOCK_BYTES: usize = 256 << 10;
/// Keys visited per pin (the checkpointer must not hold the epoch back).
const CHUNK: usize = 1024;

/// Per checkpoint file: (bytes, blocks, records).
type FileStats = (u64, u64, u64);

/// What a finished checkpoint wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    pub low: u64,
    pub high: u64,
    pub bytes: u64,
    pub records: u64,
    pub files: usize,
    /// Until the checkpoint was complete (its manifest installed), not
    /// counting the paced deletion of what it superseded.
    pub millis: u64,
}

/// Start the periodic checkpointer, if an interval is configured.
pub(crate) fn spawn_periodic(shared: &Arc<Shared>) -> io::Result<()> {
    let d = shared.durable.get().expect("durable");
    let Some(every) = d.checkpoints.interval else {
        return Ok(());
    };
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let h = std::thread::Builder::new()
        .name("granary-checkpoint".into())
        .spawn(move || {
            let mut next = Instant::now() + every;
            loop {
                std::thread::sleep(Duration::from_millis(20).min(every));
                let Some(s) = weak.upgrade() else { return };
                let d = s.durable.get().expect("durable").clone();
                if d.checkpoints.stopped() || d.is_poisoned() {
                    return;
                }
                if Instant::now() < next {
                    continue;
                }
                // Its workers hold no `Owner`: it does not keep the
                // database open.
                if let Err(e) = run(&s) {
                    if !d.checkpoints.stopped() {
                        d.poison(format!("checkpoint: {e}"));
                    }
                    return;
                }
                next = Instant::now() + every;
            }
        })?;
    *d.checkpoints.periodic.lock() = Some(h);
    Ok(())
}

/// Take a checkpoint now (waits for a running one to finish first). A
/// storage failure poisons the database, as in logging.
pub(crate) fn run(shared: &Arc<Shared>) -> Result<CheckpointStats, Error> {
    run_with(shared, false)
}

/// As [`run`]. With `rebase` (recovery's checkpoint after a salvage or of
/// a directory from before the ledger, taken before anything new is
/// acknowledged), its cleanup may pass over log generations that are
/// missing: everything before the new e_l is in this checkpoint, and what
/// a missing file held was lost or salvaged already. Otherwise a missing
/// generation stops the lows from rising past it, so the next recovery
/// reports it.
pub(crate) fn run_with(shared: &Arc<Shared>, rebase: bool) -> Result<CheckpointStats, Error> {
    let r = run_once(shared, rebase);
    if let (Err(e @ Error::Storage { .. }), Some(d)) = (&r, shared.durable.get()) {
        d.poison(format!("checkpoint: {e}"));
    }
    r
}

fn run_once(shared: &Arc<Shared>, rebase: bool) -> Result<CheckpointStats, Error> {
    let d = shared.durable.get().ok_or_else(|| {
        Error::InvalidOption("checkpoint() needs a durable database (Database::open)".into())
    })?;
    let st = &d.checkpoints;
    let _one = st.running.lock();
    d.check()?;
    let started = Instant::now();
    let epochs = &shared.epochs;
    // e_l, and wait until no commit can land below it.
    let low = epochs.global();
    while epochs.safe().0 < low {
        if st.stopped() {
            return Err(Error::Poisoned("the database is shutting down".into()));
        }
        std::thread::sleep(d.epoch_interval / 4);
    }
    let dir = d.dir.join(format::ckpt_dir_name(low));
    let io = |what: &str, p: &Path, e: io::Error| Error::storage(what, p, e);
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|e| io("remove", &dir, e))?;
        crashsim::removed_all(&dir);
    }
    fp("ckpt-mkdir").map_err(|e| io("create", &dir, e))?;
    fs::create_dir(&dir).map_err(|e| io("create", &dir, e))?;
    crashsim::made_dir(&dir);
    sync_dir(&d.dir).map_err(|e| io("sync", &d.dir, e))?;

    let tables = shared.tables();
    let n = st.threads;
    let m = st.files_per_thread;
    // Slice boundaries per table, from a sample of its keys.
    let mut slices: Vec<(TableId, Vec<Vec<u8>>)> = Vec::new();
    {
        let mut w = Worker::new(shared.clone(), None)?;
        for (_, t) in &tables {
            slices.push((*t, boundaries(&mut w, *t, n)));
        }
    }
    let results: Vec<Result<Vec<FileStats>, Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let slices = &slices;
                let dir = &dir;
                s.spawn(move || write_slice(shared, i, m, dir, slices, low))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Poisoned("checkpoint thread panicked".into())))
            })
            .collect()
    });
    let mut files = Vec::new();
    for r in results {
        match r {
            Ok(f) => files.extend(f),
            Err(e) => {
                if fs::remove_dir_all(&dir).is_ok() {
                    crashsim::removed_all(&dir);
                }
                return Err(e);
            }
        }
    }
    let high = epochs.global();
    // The manifest only once everything up to e_h is durable (§4.2).
    d.wait_durable(high)?;
    let manifest = Manifest {
        align: IO_ALIGN as u32,
        low,
        high,
        files: files.clone(),
        tables: tables.iter().map(|(n, t)| (t.0, n.clone())).collect(),
    };
    let tmp = dir.join("MANIFEST.tmp");
    let write = || -> io::Result<()> {
        fp("manifest-write")?;
        let mut f = File::create(&tmp)?;
        crashsim::created(&tmp, true);
        let bytes = manifest.encode();
        f.write_all(&bytes)?;
        crashsim::wrote(&tmp, 0, &bytes);
        fp("manifest-fsync")?;
        f.sync_all()?;
        crashsim::synced(&tmp);
        fp("manifest-rename")?;
        let to = dir.join(format::MANIFEST_FILE);
        fs::rename(&tmp, &to)?;
        crashsim::renamed(&tmp, &to);
        sync_dir(&dir)
    };
    write().map_err(|e| io("write the checkpoint manifest", &dir, e))?;
    let ended = Instant::now();
    let millis = (ended - started).as_millis() as u64;
    let previous = st.last.lock().replace(manifest);
    // Now the older checkpoint and the logs wholly below e_l can go
    // (§4.3). First the pepoch records that the durable state needs this
    // checkpoint, and each logger's log from the generation that has a
    // block of e_l or later, so a recovery can tell a file deleted here
    // from one lost.
    let old = d.ledger.lock().clone();
    let mut lows = Vec::with_capacity(d.loggers.len());
    let mut doomed = Vec::new();
    for i in 0..d.loggers.len() {
        // Files of older generations than the current one are closed (a
        // logger renames its file before it moves its position on).
        let current = d.loggers[i].position.lock().generation;
        let ldir = format::logger_dir(&d.dir, i);
        let (low, delete) = superseded_logs(&ldir, current, old.low(i), low, rebase)
            .map_err(|e| io("list", &ldir, e))?;
        lows.push(low);
        doomed.push((ldir, delete));
    }
    *d.ledger.lock() = Ledger {
        checkpoint: low,
        lows,
        voids: old.voids,
    };
    d.publish_pepoch()
        .map_err(|e| io("write pepoch", &d.dir.join(format::PEPOCH_FILE), e))?;
    if let Some(p) = previous {
        if p.low != low {
            let pd = d.dir.join(format::ckpt_dir_name(p.low));
            remove_paced(&pd, d.epoch_interval, &|| st.stopped())
                .map_err(|e| io("remove an old checkpoint", &pd, e))?;
        }
    }
    for (ldir, delete) in doomed {
        for path in delete {
            remove_paced(&path, d.epoch_interval, &|| st.stopped())
                .map_err(|e| io("remove", &path, e))?;
        }
        sync_dir(&ldir).map_err(|e| io("sync", &ldir, e))?;
    }
    st.finished(granary_api::CheckpointSpan {
        began: started,
        ended,
    });
    Ok(CheckpointStats {
        low,
        high,
        bytes: files.iter().map(|f| f.0).sum(),
        records: files.iter().map(|f| f.2).sum(),
        files: files.len(),
        millis,
    })
}

/// A logger's oldest needed log generation once a checkpoint of e_l `low`
/// is complete, and its closed files a cleanup may delete. `ldir` holds
/// its files; those of generations below `current` are closed; `old_low`
/// is its oldest needed generation so far, if known.
///
/// The new one is the first closed generation (from `old_low` on) with a
/// block of epoch ≥ e_l (its name's epoch is its newest block's), else
/// `current`; never below `old_low`; and, unless `skip_gaps`, never past a
/// generation that is missing (whether it held a block of e_l or later
/// cannot be known: it stays needed, and recovery reports it). Only files
/// below it whose newest block is older than e_l go, so the generations
/// from it on stay contiguous even though files can hold epochs out of
/// order (§3.5).
fn superseded_logs(
    ldir: &Path,
    current: u64,
    old_low: Option<u64>,
    low: u64,
    skip_gaps: bool,
) -> io::Result<(u64, Vec<PathBuf>)> {
    let mut closed: Vec<(u64, u64, PathBuf)> = Vec::new();
    for ent in fs::read_dir(ldir)? {
        let ent = ent?;
        let name = ent.file_name().to_string_lossy().into_owned();
        if let Some((max, gen)) = format::parse_old_log_name(&name) {
            if gen < current {
                closed.push((gen, max, ent.path()));
            }
        }
    }
    closed.sort();
    let from = old_low.unwrap_or(0);
    let mut new_low = current;
    let mut expect = from;
    for &(gen, max, _) in closed.iter().filter(|c| c.0 >= from) {
        if gen != expect && !skip_gaps {
            new_low = expect;
            break;
        }
        if max >= low {
            new_low = gen;
            break;
        }
        expect = gen + 1;
    }
    if new_low == current && expect < current && !skip_gaps {
        new_low = expect;
    }
    let new_low = new_low.max(from);
    let delete = closed
        .into_iter()
        .filter(|c| c.0 < new_low && c.1 < low)
        .map(|c| c.2)
        .collect();
    Ok((new_low, delete))
}

/// Up to `n − 1` keys splitting table `t` into `n` slices of about equal
/// key counts (every key is visited, without its value).
fn boundaries(w: &mut Worker, t: TableId, n: usize) -> Vec<Vec<u8>> {
    if n <= 1 {
        return Vec::new();
    }
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut count = 0usize;
    let mut stride = 1usize;
    each_chunk(w, t, Bound::Unbounded, Bound::Unbounded, &mut |k, _| {
        if count.is_multiple_of(stride) {
            keys.push(k.to_vec());
            if keys.len() >= 4096 {
                // Keep every other sample and halve the rate.
                let kept: Vec<Vec<u8>> = std::mem::take(&mut keys).into_iter().step_by(2).collect();
                keys = kept;
                stride *= 2;
            }
        }
        count += 1;
        true
    });
    (1..n)
        .filter_map(|i| keys.get(i * keys.len() / n).cloned())
        .collect::<Vec<_>>()
        .into_iter()
        .fold(Vec::new(), |mut v, k| {
            if v.last() != Some(&k) {
                v.push(k);
            }
            v
        })
}

/// Visit `(key, record)` in `[lo, hi)` a chunk at a time, re-pinning
/// between chunks. `f` returns false to stop.
fn each_chunk(
    w: &mut Worker,
    t: TableId,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    f: &mut dyn FnMut(&[u8], &Record) -> bool,
) {
    let shared = w.shared.clone();
    let Ok(table) = shared.table(t) else { return };
    let mut from: Option<Vec<u8>> = None;
    loop {
        w.pin();
        let mut seen = 0;
        let mut go = true;
        let mut last = None;
        {
            // SAFETY: pinned.
            let pin = unsafe { ReadPin::new() };
            let start = match &from {
                Some(k) => Bound::Excluded(&k[..]),
                None => lo,
            };
            table.tree.scan(
                start,
                hi,
                false,
                &pin,
                |_, _| {},
                |k, v| {
                    // SAFETY: reachable from the tree while pinned.
                    let rec = unsafe { &*v };
                    go = f(k, rec);
                    seen += 1;
                    if seen == CHUNK || !go {
                        last = Some(k.to_vec());
                        return false;
                    }
                    true
                },
            );
        }
        w.unpin();
        if seen < CHUNK || !go {
            return;
        }
        from = last;
    }
}

/// Checkpointer thread `i`: its slice of every table, into files
/// `part.<i·m + j>`. Returns per file (bytes, blocks, records).
fn write_slice(
    shared: &Arc<Shared>,
    i: usize,
    m: usize,
    dir: &Path,
    slices: &[(TableId, Vec<Vec<u8>>)],
    low: u64,
) -> Result<Vec<FileStats>, Error> {
    let d = shared.durable.get().expect("durable");
    let mut w = Worker::new(shared.clone(), None)?;
    let paths: Vec<PathBuf> = (0..m)
        .map(|j| dir.join(format::ckpt_part_name(i * m + j)))
        .collect();
    let io = |what: &str, p: &Path, e: io::Error| Error::storage(what, p, e);
    let mut out = Vec::with_capacity(m);
    for p in &paths {
        fp("ckpt-create").map_err(|e| io("create", p, e))?;
        let mut o = OpenOptions::new();
        o.create_new(true).write(true);
        let f = open_aligned(&o, p, d.direct_io).map_err(|e| io("create", p, e))?;
        crashsim::created(p, false);
        out.push(PartFile {
            f,
            path: p.clone(),
            bytes: 0,
            unsynced: 0,
            blocks: 0,
            records: 0,
        });
    }
    // The block being filled, its header's room first; aligned memory,
    // so it can be written with O_DIRECT.
    let mut block = AlignedBuf::with_capacity(BLOCK_BYTES + 2 * IO_ALIGN);
    block.resize_zeroed(BLOCK_HEADER);
    let mut count = 0u32;
    let mut next_file = 0usize;
    let mut buf = Vec::new();
    let mut failed: Option<Error> = None;
    for (t, bounds) in slices {
        let lo = if i == 0 {
            Bound::Unbounded
        } else {
            match bounds.get(i - 1) {
                Some(k) => Bound::Included(&k[..]),
                None => continue,
            }
        };
        let hi = match bounds.get(i) {
            Some(k) => Bound::Excluded(&k[..]),
            None => Bound::Unbounded,
        };
        if i > bounds.len() {
            continue;
        }
        each_chunk(&mut w, *t, lo, hi, &mut |k, rec| {
            if d.checkpoints.stopped() {
                failed.get_or_insert(Error::Poisoned("the database is shutting down".into()));
                return false;
            }
            if let Err(e) = d.check() {
                // Poisoned: write nothing more.
                failed.get_or_insert(e);
                return false;
            }
            let tid = rec.read(&mut buf);
            // Deleted, or new enough that the log has it (§4.1).
            if !tid.is_latest() || tid.is_absent() || tid.epoch() >= low {
                return true;
            }
            format::put_ckpt_record(&mut block, t.0, k, tid.id().raw(), &buf);
            count += 1;
            if block.len() - BLOCK_HEADER >= BLOCK_BYTES {
                let p = &paths[next_file];
                if let Err(e) = out[next_file].write_block(&mut block, count, i as u32) {
                    failed.get_or_insert(io("write", p, e));
                    return false;
                }
                next_file = (next_file + 1) % m;
                count = 0;
            }
            true
        });
        if let Some(e) = failed {
            return Err(e);
        }
    }
    d.check()?;
    if count > 0 {
        out[next_file]
            .write_block(&mut block, count, i as u32)
            .map_err(|e| io("write", &paths[next_file], e))?;
    }
    for (f, p) in out.iter_mut().zip(&paths) {
        fp("ckpt-fsync").map_err(|e| io("sync", p, e))?;
        f.f.sync_all().map_err(|e| io("sync", p, e))?;
        crashsim::synced(p);
    }
    Ok(out.iter().map(|f| (f.bytes, f.blocks, f.records)).collect())
}

struct PartFile {
    f: File,
    path: PathBuf,
    bytes: u64,
    unsynced: u64,
    blocks: u64,
    records: u64,
}

impl PartFile {
    /// Write `block` (its header's room, then the payload) as one block,
    /// padded to a multiple of `IO_ALIGN`; leaves `block` empty again.
    fn write_block(&mut self, block: &mut AlignedBuf, count: u32, source: u32) -> io::Result<()> {
        seal_block(block, BLOCK_MAGIC_CKPT, 0, source, count);
        fp("ckpt-write")?;
        self.f.write_all(block.as_slice())?;
        crashsim::wrote(&self.path, self.bytes, block.as_slice());
        let n = block.len() as u64;
        block.resize_zeroed(BLOCK_HEADER);
        self.bytes += n;
        self.unsynced += n;
        self.blocks += 1;
        self.records += count as u64;
        if self.unsynced >= SYNC_EVERY {
            fp("ckpt-fsync")?;
            self.f.sync_data()?;
            crashsim::synced(&self.path);
            self.unsynced = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::superseded_logs;

    /// A logger directory holding closed files `(max epoch, generation)`.
    fn dir_with(name: &str, files: &[(u64, u64)]) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("granary-superseded-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for &(max, gen) in files {
            std::fs::write(d.join(super::format::old_log_name(max, gen)), b"").unwrap();
        }
        std::fs::write(d.join(super::format::CURRENT_LOG), b"").unwrap();
        d
    }

    fn gens(paths: &[std::path::PathBuf]) -> Vec<u64> {
        let mut g: Vec<u64> = paths
            .iter()
            .map(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                super::format::parse_old_log_name(&n).unwrap().1
            })
            .collect();
        g.sort();
        g
    }

    #[test]
    fn lows_rise_over_a_contiguous_prefix_below_e_l() {
        // Generations 2..=5 closed, 6 current; e_l = 300. Generation 4
        // ends at 290 but 3 at 310 (epochs out of order, §3.5): the low
        // stops at 3, and 4 is kept although it is all older than e_l.
        let d = dir_with("order", &[(100, 2), (310, 3), (290, 4), (400, 5)]);
        let (low, delete) = superseded_logs(&d, 6, Some(2), 300, false).unwrap();
        assert_eq!((low, gens(&delete)), (3, vec![2]));
        // Everything older than e_l: the low is the current file's.
        let (low, delete) = superseded_logs(&d, 6, Some(2), 500, false).unwrap();
        assert_eq!((low, gens(&delete)), (6, vec![2, 3, 4, 5]));
        // Never below the old low; files below it that e_l supersedes go.
        let (low, delete) = superseded_logs(&d, 6, Some(4), 200, false).unwrap();
        assert_eq!((low, gens(&delete)), (4, vec![2]));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_generation_stops_the_low_unless_rebasing() {
        // Generation 3 is gone: whether it held a block of e_l or later is
        // unknown, so it stays needed (recovery then reports it).
        let d = dir_with("gap", &[(100, 2), (120, 4)]);
        let (low, delete) = superseded_logs(&d, 5, Some(2), 500, false).unwrap();
        assert_eq!((low, gens(&delete)), (3, vec![2]));
        // A gap just below the current file, too.
        let (low, _) = superseded_logs(&d, 6, Some(2), 500, false).unwrap();
        assert_eq!(low, 3);
        // Recovery's rebase (after a salvage) passes over it.
        let (low, delete) = superseded_logs(&d, 5, Some(2), 500, true).unwrap();
        assert_eq!((low, gens(&delete)), (5, vec![2, 4]));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
