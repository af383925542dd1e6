//! Replay (SiloR §5.1–§5.2): load what [`recover`](super::recover) found
//! in a directory into a new engine — the checkpoint's files and the log
//! blocks of epochs e_l ≤ e ≤ e_p, on parallel workers, each record
//! installed directly in its table's tree, newest TID winning — then sweep
//! the tombstones log deletes left. The policy (what is replayed, and what
//! is an error) is `recover`'s; this is the part that drives the engine,
//! so it sits above it (see ARCHITECTURE.md, "Module layers").

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use granary_api::TableId;
use granary_index::{Cursor, LeafRef};

use super::abuf::{open_aligned, AlignedBuf};
use super::ahead::{self, Ahead, Span, SpanReader, Window};
use super::format::{
    self, BlockHeader, BlockRead, BLOCK_HEADER, BLOCK_MAGIC_CKPT, BLOCK_MAGIC_LOG, IO_ALIGN,
};
use super::recover::{block_in, body_at, corrupt, header_at, scan_logs, DirInfo, RecoveryStats};
use crate::silo::error::Error;
use crate::silo::gc::Cleanup;
use crate::silo::install::{Locked, Unversioned};
use crate::silo::options::RecoveryMode;
use crate::silo::pin::ReadPin;
use crate::silo::record::{Record, Slabs};
use crate::silo::shared::Shared;
use crate::silo::tid::Tid;
use crate::silo::worker::{unhook, Worker};
use granary_storage::fs::fp;

/// Bytes of log read in one piece (see [`ahead::spans`]): a few blocks of
/// a log buffer (512 KB by default) each.
const LOG_SPAN: usize = 4 << 20;

/// Load the directory `info` describes into the engine `shared` (whose
/// tables exist, in catalog order) with `threads` threads, reading checkpoint files with
/// `O_DIRECT` where the file system allows it if `direct`.
///
/// `info` comes from [`scan_meta`]: its log files are scanned here, by one
/// more thread while the checkpoint loads (the scan waits on the disk for
/// one block header after another, and needs nothing the load makes),
/// and filled in before the logs are replayed. A damaged log is reported
/// before a damaged checkpoint, as when the scan came first. Nothing on
/// disk changes here: a problem fails a strict recovery before [`tidy`].
/// A salvage reads every block body in the scan, and replays only through
/// the epoch [`DirInfo::plan_salvage`] finds.
pub(crate) fn replay(
    shared: &Arc<Shared>,
    info: &mut DirInfo,
    threads: usize,
    direct: bool,
    mode: RecoveryMode,
) -> Result<RecoveryStats, Error> {
    let salvage = mode == RecoveryMode::Salvage;
    let threads = threads.max(1);
    let mut stats = RecoveryStats {
        pepoch: info.pepoch.epoch,
        threads,
        ..RecoveryStats::default()
    };
    // Tests can replay the log before loading the checkpoint, to show the
    // order does not matter (newest TID wins, SiloR §5.2).
    #[cfg(test)]
    let log_first = tests::LOG_FIRST.with(std::cell::Cell::get);
    #[cfg(not(test))]
    let log_first = false;
    let t0 = std::time::Instant::now();
    let (scanned, loaded) = std::thread::scope(|s| {
        let meta = &*info;
        let scan = s.spawn(move || scan_logs(meta, salvage));
        let loaded = if log_first {
            Ok(None)
        } else {
            load_checkpoint(shared, meta, threads, direct)
        };
        let scanned = scan
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (scanned, loaded)
    });
    let problems;
    (info.logs, info.stale_max, problems) = scanned?;
    info.problems.extend(problems);
    if salvage {
        info.plan_salvage()?;
    } else if let Some(p) = info.problems.first() {
        return Err(p.to_error());
    }
    let mut loaded = loaded?;
    stats.checkpoint_seconds = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let blocks = info.replay_blocks();
    // Which tables replayed a delete, so only they are swept of tombstones
    // (checkpoints hold no absent records).
    let deleted: Vec<AtomicBool> = info.tables.iter().map(|_| AtomicBool::new(false)).collect();
    // Blocks go newest epoch first, so mostly backwards through a file,
    // where the kernel's own readahead does not help: a helper reads them
    // in spans of neighbouring blocks, ahead of the replay threads.
    let spans = ahead::spans(&blocks, LOG_SPAN);
    let paths: Vec<&Path> = info.logs.iter().map(|l| l.path.as_path()).collect();
    let reader = SpanReader::new(threads + 2, LOG_SPAN);
    let (bytes, applied) = std::thread::scope(|s| {
        s.spawn(|| reader.read_all(&spans, &paths, direct));
        let replayed = parallel(shared, threads, spans.len(), |w, scratch, _| {
            // `None` only if the helper panicked, which the scope rethrows.
            let Some(read) = reader.next() else {
                return Ok((0, 0));
            };
            let span = &spans[read.k];
            let path = paths[span.file];
            let (buf, len) = read.got.map_err(|e| Error::storage("read", path, e))?;
            let replayed = replay_span(
                w,
                span,
                &blocks,
                &buf.as_slice()[..len],
                path,
                scratch,
                &deleted,
            );
            reader.recycle(buf);
            replayed
        });
        reader.close();
        replayed
    })?;
    stats.tables_with_deletes = deleted
        .iter()
        .enumerate()
        .filter(|(_, d)| d.load(Ordering::Relaxed))
        .map(|(t, _)| t as u32)
        .collect();
    stats.log_bytes = bytes;
    stats.log_records_applied = applied;
    stats.log_seconds = t1.elapsed().as_secs_f64();
    if log_first {
        loaded = load_checkpoint(shared, info, threads, direct)?;
    }
    if let Some((low, bytes, records)) = loaded {
        stats.checkpoint_low = Some(low);
        stats.checkpoint_bytes = bytes;
        stats.checkpoint_records = records;
    }
    stats.salvage = info.salvage.clone();
    Ok(stats)
}

/// Load the checkpoint `info` names, if any, with `threads` threads;
/// returns its e_l, bytes and records.
fn load_checkpoint(
    shared: &Arc<Shared>,
    info: &DirInfo,
    threads: usize,
    direct: bool,
) -> Result<Option<(u64, u64, u64)>, Error> {
    let Some((path, m)) = info.checkpoint() else {
        return Ok(None);
    };
    let parts: Vec<PathBuf> = (0..m.files.len())
        .map(|i| path.join(format::ckpt_part_name(i)))
        .collect();
    let (bytes, records) = parallel(shared, threads, parts.len(), |w, scratch, i| {
        load_part(w, &parts[i], m.files[i], m.align, direct, scratch)
    })?;
    Ok(Some((m.low, bytes, records)))
}

/// A recovery thread's own state: a read buffer, read-ahead windows kept
/// from one checkpoint file to the next, the slabs its records are carved
/// from, and, by table, the leaf its last log write went to (see
/// [`Near::Leaf`]).
#[derive(Default)]
struct Scratch {
    buf: Vec<u8>,
    windows: Vec<AlignedBuf>,
    slabs: Slabs,
    hints: Vec<Option<LeafRef>>,
}

/// Run `f(worker, scratch, i)` for every `i < n` on `threads` threads,
/// each with its own worker and [`Scratch`]; sums the `(bytes, records)`
/// they return.
fn parallel(
    shared: &Arc<Shared>,
    threads: usize,
    n: usize,
    f: impl Fn(&mut Worker, &mut Scratch, usize) -> Result<(u64, u64), Error> + Sync,
) -> Result<(u64, u64), Error> {
    let next = AtomicUsize::new(0);
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    let totals = Mutex::new((0u64, 0u64));
    std::thread::scope(|s| {
        for _ in 0..threads.min(n) {
            s.spawn(|| {
                let mut w = match Worker::new(shared.clone(), None) {
                    Ok(w) => w,
                    Err(e) => {
                        first_err.lock().expect("lock").get_or_insert(e);
                        return;
                    }
                };
                let mut scratch = Scratch::default();
                let mut sum = (0, 0);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || first_err.lock().expect("lock").is_some() {
                        break;
                    }
                    match f(&mut w, &mut scratch, i) {
                        Ok((b, r)) => {
                            sum.0 += b;
                            sum.1 += r;
                        }
                        Err(e) => {
                            first_err.lock().expect("lock").get_or_insert(e);
                            break;
                        }
                    }
                }
                let mut t = totals.lock().expect("lock");
                t.0 += sum.0;
                t.1 += sum.1;
            });
        }
    });
    if let Some(e) = first_err.into_inner().expect("lock") {
        return Err(e);
    }
    Ok(totals.into_inner().expect("lock"))
}

fn unknown_table(path: &Path, at: u64, t: u32) -> Error {
    corrupt(path, at, format!("record for unknown table {t}"))
}

fn table_id(path: &Path, at: u64, t: u32, w: &Worker) -> Result<TableId, Error> {
    let id = TableId(t);
    w.shared
        .table(id)
        .map(|_| id)
        .map_err(|_| unknown_table(path, at, t))
}

/// Table `t`'s insert cursor, made on first use; `None` if there is no
/// such table.
fn cursor_for<'c, 's>(
    cursors: &'c mut Vec<Option<Cursor<'s, *const Record>>>,
    shared: &'s Shared,
    t: u32,
) -> Option<&'c mut Cursor<'s, *const Record>> {
    let i = t as usize;
    if cursors.get(i).is_none_or(Option::is_none) {
        let tree = &shared.table(TableId(t)).ok()?.tree;
        if cursors.len() <= i {
            cursors.resize_with(i + 1, || None);
        }
        cursors[i] = Some(tree.cursor());
    }
    cursors[i].as_mut()
}

/// Load one checkpoint file, block by block through `buf`.
fn load_part(
    w: &mut Worker,
    path: &Path,
    expect: (u64, u64, u64),
    align: u32,
    direct: bool,
    scratch: &mut Scratch,
) -> Result<(u64, u64), Error> {
    let Scratch {
        buf,
        slabs,
        windows,
        ..
    } = scratch;
    let io = |what: &str, e: io::Error| Error::storage(what, path, e);
    fp("recover-read").map_err(|e| io("read", e))?;
    let f = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::Missing {
            path: path.to_path_buf(),
            what: "a part file of the checkpoint recovery uses is gone".into(),
        },
        _ => io("open", e),
    })?;
    let size = f.metadata().map_err(|e| io("stat", e))?.len();
    if size != expect.0 {
        return Err(corrupt(
            path,
            size,
            format!(
                "checkpoint file is {size} bytes; its manifest says {}",
                expect.0
            ),
        ));
    }
    // v02 files are read ahead in aligned windows (`ahead`), straight from
    // the disk where `O_DIRECT` is allowed; v01 files block by block.
    let aligned = if align as usize == IO_ALIGN && size % IO_ALIGN as u64 == 0 {
        let o = fs::OpenOptions::new().read(true).clone();
        Some(open_aligned(&o, path, direct).map_err(|e| io("open", e))?)
    } else {
        None
    };
    let mut at = 0u64;
    let mut records = 0u64;
    let mut blocks = 0u64;
    // One insert cursor per table, kept across blocks: a file holds each
    // table's keys in ascending runs (a checkpointer walks its key range of
    // every table in order, SiloR §4.2), so most keys go into the leaf the
    // previous one went into, or the next (SiloR §5.1's locality).
    let shared = w.shared.clone();
    let mut cursors: Vec<Option<Cursor<'_, *const Record>>> = Vec::new();
    std::thread::scope(|scope| {
        let ahead = aligned
            .as_ref()
            .map(|a| Ahead::start(scope, a, size, BLOCK_MAGIC_CKPT, windows));
        let mut window: Option<Window> = None;
        while at < size {
            if let Some(a) = &ahead {
                // Move on to the window holding `at`, while the helper has
                // one; once it has stopped, read block by block.
                while window.as_ref().is_none_or(|wd| wd.done_by(at)) {
                    if let Some(old) = window.take() {
                        a.recycle(old);
                    }
                    match a.next() {
                        Some(next) => window = Some(next),
                        None => break,
                    }
                }
            }
            let found = window
                .as_ref()
                .and_then(|wd| block_in(wd, at, BLOCK_MAGIC_CKPT));
            let (h, body) = match found {
                Some(checked) => checked.map_err(|m| corrupt(path, at, m))?,
                None => {
                    let h = header_at(&f, at, size, &[BLOCK_MAGIC_CKPT])
                        .map_err(|e| io("read", e))?
                        .map_err(|m| corrupt(path, at, m))?;
                    let body = body_at(&f, at, &h, buf)
                        .map_err(|e| io("read", e))?
                        .map_err(|m| corrupt(path, at, m))?;
                    (h, body)
                }
            };
            let mut bad = None;
            let mut n = 0;
            w.pin();
            let decoded = format::decode_ckpt_payload(body, |t, k, tid, v| {
                if bad.is_some() {
                    return;
                }
                let Some(c) = cursor_for(&mut cursors, &shared, t) else {
                    bad = Some(unknown_table(path, at, t));
                    return;
                };
                // Checkpointed keys are new to the tree (each is in one
                // file, once); were one not, `put_recovered` keeps the newest
                // TID.
                put_recovered(
                    w,
                    TableId(t),
                    k,
                    Tid(tid).id(),
                    Some(v),
                    Near::Cursor(c),
                    slabs,
                );
                n += 1;
            });
            w.unpin();
            decoded.map_err(|m| corrupt(path, at, m))?;
            if let Some(e) = bad {
                return Err(e);
            }
            if n != h.count {
                return Err(corrupt(path, at, "block record count mismatch"));
            }
            records += u64::from(n);
            blocks += 1;
            // v02: zeros pad each block to `align`.
            at = format::next_block(at + BLOCK_HEADER as u64 + u64::from(h.len), align);
        }
        if let Some(a) = ahead {
            *windows = a.finish(window);
        }
        Ok(())
    })?;
    if (blocks, records) != (expect.1, expect.2) {
        return Err(corrupt(
            path,
            0,
            "checkpoint file holds fewer blocks or records than its manifest says",
        ));
    }
    Ok((size, records))
}

/// Replay the blocks of `span` (members of the replay list `blocks`),
/// checking each in `bytes`, the span as read from the file at `path`.
fn replay_span(
    w: &mut Worker,
    span: &Span,
    blocks: &[(usize, u64, BlockHeader)],
    bytes: &[u8],
    path: &Path,
    scratch: &mut Scratch,
    deleted: &[AtomicBool],
) -> Result<(u64, u64), Error> {
    let mut sum = (0, 0);
    for &j in &span.members {
        let (_, at, h) = blocks[j];
        let off = usize::try_from(at - span.at).expect("a span is in memory");
        let body = match format::read_block_checked(bytes, off, BLOCK_MAGIC_LOG, true) {
            BlockRead::Block(got, body) if got == h => body,
            BlockRead::Block(..) => {
                return Err(corrupt(path, at, "block header changed since the scan"))
            }
            BlockRead::Bad(m) => {
                return Err(corrupt(path, at, format!("{m} inside the durable prefix")))
            }
            BlockRead::End => {
                return Err(corrupt(
                    path,
                    at,
                    "block gone since the scan (file shorter)",
                ))
            }
        };
        let (b, r) = replay_block(w, path, at, &h, body, scratch, deleted)?;
        sum.0 += b;
        sum.1 += r;
    }
    Ok(sum)
}

/// Replay the log block at `at` of the file at `path`: header `h`, body
/// `body` (checked). Marks in `deleted` the tables it deletes from.
fn replay_block(
    w: &mut Worker,
    path: &Path,
    at: u64,
    h: &BlockHeader,
    body: &[u8],
    scratch: &mut Scratch,
    deleted: &[AtomicBool],
) -> Result<(u64, u64), Error> {
    let Scratch { slabs, hints, .. } = scratch;
    let mut bad = None;
    let mut applied = 0u64;
    w.pin();
    let decoded = format::decode_log_payload(body, |tid, wr| {
        if bad.is_some() {
            return;
        }
        match table_id(path, at, wr.table, w) {
            Ok(id) => {
                if let (None, Some(d)) = (wr.value, deleted.get(wr.table as usize)) {
                    d.store(true, Ordering::Relaxed);
                }
                if hints.len() <= id.0 as usize {
                    hints.resize(id.0 as usize + 1, None);
                }
                let near = Near::Leaf(&mut hints[id.0 as usize]);
                put_recovered(w, id, wr.key, Tid(tid).id(), wr.value, near, slabs);
            }
            Err(e) => bad = Some(e),
        }
        applied += 1;
    });
    w.unpin();
    let txns = decoded.map_err(|m| corrupt(path, at, m))?;
    if let Some(e) = bad {
        return Err(e);
    }
    if txns != h.count {
        return Err(corrupt(path, at, "block transaction count mismatch"));
    }
    Ok((BLOCK_HEADER as u64 + u64::from(h.len), applied))
}

/// Where [`put_recovered`] starts looking for a key's place.
pub(crate) enum Near<'a, 't> {
    /// A checkpoint's keys: each expected to be new, inserted through the
    /// cursor (on the table's tree) straight away. A file holds each
    /// table's keys in ascending runs, so most inserts need no descent
    /// (SiloR §5.1).
    Cursor(&'a mut Cursor<'t, *const Record>),
    /// A log's keys: looked up first (a key already present costs no
    /// allocation), starting from the leaf the table's previous lookup
    /// ended in, which this then holds. A transaction's writes to one
    /// table often come in runs of neighbouring keys (an order's lines),
    /// so nearly half of a TPC-C log's writes skip the descent. The leaf
    /// is kept from one pin to the next: safe only because no key is
    /// removed while logs replay, so no leaf is unlinked.
    Leaf(&'a mut Option<LeafRef>),
}

/// Install a recovered version of `key` unless the table already holds
/// a newer one (SiloR §5.2: the newest TID wins, so files may be
/// replayed in any order). `value: None` installs a tombstone (an
/// absent record), which [`sweep_tombstones`] removes afterwards. The
/// caller pins `w` (once per block of records).
///
/// `near` says where to start looking for the key's place (see
/// [`Near`]). New records are carved from `slabs`.
pub(crate) fn put_recovered(
    w: &mut Worker,
    t: TableId,
    key: &[u8],
    tid: Tid,
    value: Option<&[u8]>,
    near: Near<'_, '_>,
    slabs: &mut Slabs,
) {
    let shared = &*w.shared;
    let (mut cursor, mut hint) = match near {
        Near::Cursor(c) => (Some(c), None),
        Near::Leaf(h) => (None, Some(h)),
    };
    let table = shared.table(t).expect("recovered table exists");
    let tree = match &cursor {
        Some(c) => c.tree(),
        None => &table.tree,
    };
    debug_assert!(std::ptr::eq(tree, &table.tree));
    let word = match value {
        Some(_) => tid.id().with(Tid::LATEST),
        None => tid.id().with(Tid::LATEST | Tid::ABSENT),
    };
    let bytes = value.unwrap_or(&[]);
    loop {
        // SAFETY: pinned by the caller.
        let mut pin = unsafe { ReadPin::new() };
        // The cursor is used once: a retry looks the key up.
        let look = if let Some(c) = cursor.take() {
            let r = slabs.alloc(word, bytes);
            // SAFETY: ours, not yet published.
            table.widen(unsafe { r.as_ref() }.capacity());
            match c.insert(key, r.as_ptr(), &mut pin) {
                granary_index::Insert::Inserted(_) => break,
                granary_index::Insert::Exists { value } => {
                    // SAFETY: never published.
                    unsafe { Record::free(r) };
                    Ok(value)
                }
            }
        } else {
            let look = match hint.as_deref() {
                // SAFETY: `h` is a leaf of this table's tree (hints are
                // kept per table), and it is not freed: the tree unlinks
                // leaves only on removes, and recovery removes no key
                // until every log is replayed (`sweep_tombstones` runs
                // after `replay` returns).
                Some(&Some(h)) => unsafe { tree.get_hinted(h, key, &pin) },
                _ => tree.get(key, &pin),
            };
            if let Some(h) = hint.as_deref_mut() {
                *h = Some(look.leaf);
            }
            look.value.ok_or(look.leaf)
        };
        match look {
            // Absent: into the leaf the lookup ended in, if it still
            // covers the key and has room (no second descent).
            Err(leaf) => {
                let r = slabs.alloc(word, bytes);
                // SAFETY: ours, not yet published.
                table.widen(unsafe { r.as_ref() }.capacity());
                // SAFETY: found by the lookup just above, under `pin`.
                match unsafe { tree.insert_hinted(leaf, key, r.as_ptr(), &mut pin) } {
                    granary_index::Insert::Inserted(_) => break,
                    // SAFETY: never published.
                    granary_index::Insert::Exists { .. } => unsafe { Record::free(r) },
                }
            }
            Ok(p) => {
                // SAFETY: reachable while pinned.
                let rec = unsafe { &*p };
                let Some(locked) = Locked::latest(rec) else {
                    continue;
                };
                if locked.old().id() >= tid.id() {
                    // The table has this version or a newer one.
                    locked.release();
                    break;
                }
                let mut how =
                    Unversioned::new(&mut w.core.gc, &shared.epochs, |t, v| slabs.alloc(t, v));
                locked.install(|| (table, key), word, bytes, &mut how, &mut pin);
                break;
            }
        }
    }
}

/// Remove the tombstones recovery left in table `t`.
pub(crate) fn sweep_tombstones(w: &mut Worker, t: TableId) {
    let shared = w.shared.clone();
    let Ok(table) = shared.table(t) else { return };
    let mut from: Option<Vec<u8>> = None;
    loop {
        w.pin();
        let mut dead = Vec::new();
        let mut last = None;
        let mut seen = 0;
        {
            // SAFETY: pinned.
            let pin = unsafe { ReadPin::new() };
            let lo = match &from {
                Some(k) => std::ops::Bound::Excluded(&k[..]),
                None => std::ops::Bound::Unbounded,
            };
            table.tree.scan(
                lo,
                std::ops::Bound::Unbounded,
                false,
                &pin,
                |_, _| {},
                |k, v| {
                    // SAFETY: reachable while pinned.
                    let rec = unsafe { &*v };
                    let tid = rec.stable_tid();
                    if tid.is_absent() && tid.is_latest() {
                        dead.push((k.to_vec(), v, tid));
                    }
                    seen += 1;
                    last = Some(k.to_vec());
                    seen < 4096
                },
            );
        }
        for (key, v, tid) in dead {
            // SAFETY: v came from the tree; `unhook` re-checks it.
            let rec = unsafe { NonNull::new_unchecked(v as *mut Record) };
            unhook(
                &shared,
                &mut w.core.gc,
                Cleanup {
                    label: 0,
                    snapshot: false,
                    table: t.0,
                    key: key.into(),
                    rec,
                    tid,
                },
            );
        }
        w.unpin();
        if seen < 4096 {
            return;
        }
        from = last;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::path::PathBuf;
    use std::time::Duration;

    use crate::{Database, Options};

    thread_local! {
        /// Recovery on this thread replays the log before it loads the
        /// checkpoint.
        pub(super) static LOG_FIRST: Cell<bool> = const { Cell::new(false) };
    }

    fn dump(db: &Database) -> Vec<(Vec<u8>, Vec<u8>)> {
        let t = db.open_table("t").unwrap();
        let mut w = db.worker().unwrap();
        w.run(|tx| {
            tx.scan_collect(
                t,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                usize::MAX,
                false,
            )
        })
        .unwrap()
    }

    /// The checkpoint and the log give the same state in either order
    /// (what lets log blocks replay in any order and on any thread, SiloR
    /// §5.2): a log delete of a checkpointed key leaves a tombstone that
    /// the older checkpoint record, arriving later, does not revive; a
    /// log update is not overwritten by it.
    #[test]
    fn log_before_checkpoint_recovers_the_same_state() {
        let dir: PathBuf =
            std::env::temp_dir().join(format!("granary-logfirst-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let o = Options::default()
            .epoch_interval(Duration::from_millis(2))
            .recovery_threads(1);
        let before = {
            let db = Database::open(&dir, o.clone().wait_for_durable(false)).unwrap();
            let t = db.open_table("t").unwrap();
            let mut w = db.worker().unwrap();
            for i in 0u32..2000 {
                w.run(|tx| tx.put(t, &i.to_be_bytes(), &[7; 40])).unwrap();
            }
            let e = db.epoch();
            while db.epoch() < e + 2 {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(db.checkpoint().unwrap().records, 2000);
            for i in 0u32..2500 {
                w.run(|tx| match i % 4 {
                    0 => tx.delete(t, &i.to_be_bytes()).map(|_| ()),
                    1 => tx.put(t, &i.to_be_bytes(), b"short"),
                    2 => tx.put(t, &i.to_be_bytes(), &[9; 100]),
                    _ => Ok(()),
                })
                .unwrap();
            }
            db.wait_durable(w.commit_token()).unwrap();
            dump(&db)
        };
        let in_order = dump(&Database::open(&dir, o.clone()).unwrap());
        LOG_FIRST.with(|f| f.set(true));
        let db = Database::open(&dir, o).unwrap();
        LOG_FIRST.with(|f| f.set(false));
        let s = db.durability_stats().unwrap().recovery;
        assert!(
            s.checkpoint_records == 2000 && s.log_records_applied > 0,
            "{s:?}"
        );
        let log_first = dump(&db);
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
        for (order, got) in [("checkpoint first", &in_order), ("log first", &log_first)] {
            let diff = got.iter().zip(&before).position(|(a, b)| a != b);
            assert!(
                got == &before,
                "{order}: {} rows against {}, first difference at {diff:?}",
                got.len(),
                before.len()
            );
        }
    }
}
