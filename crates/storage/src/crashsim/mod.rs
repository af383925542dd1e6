//! A journal of every file operation on a durable directory, for
//! power-loss tests (test-only feature `crashsim`; without it every hook
//! is an empty inline function), and the model disk that replays one
//! (`model::Disk`, with the feature).
//!
//! A process killed with `kill -9` keeps every byte it wrote: the page
//! cache survives it. A power cut does not: only what a completed `fsync`
//! (or `fdatasync`) made durable survives, and a file created, renamed or
//! removed survives only once its directory was fsynced. To test that, as
//! redb's crash tests and the fault-injection environments of SQLite and
//! LevelDB do, each file operation of a durable design calls a hook here
//! after it succeeds. While the journal is armed for a root directory, the hooks
//! record every operation under it, in order, with the bytes written. A
//! test then replays the journal against a model disk that keeps two
//! images, written and durable, and "crashes" at every sync point: it
//! materializes only the durable image and recovers it (Silo's
//! `granary/tests/powerloss.rs`, Deuteronomy's
//! `protocols/tests/deuteronomy_powerloss.rs`).
//!
//! Operations on one file come from one thread at a time (a logger, a
//! checkpoint thread, the pepoch writer under its lock, the TC's log
//! writer), so their order in the journal is the order they took effect.

use std::fs::File;
use std::path::{Path, PathBuf};

/// One recorded file operation (paths are absolute).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A file was opened with `O_CREAT`: a new empty file if there was
    /// none, else, with `truncate`, the existing one cut to 0 bytes.
    Create {
        path: PathBuf,
        truncate: bool,
    },
    /// `bytes` were written at offset `at`.
    Write {
        path: PathBuf,
        at: u64,
        bytes: Vec<u8>,
    },
    /// The file was truncated or extended to `len`.
    SetLen {
        path: PathBuf,
        len: u64,
    },
    /// `fsync` or `fdatasync` of the file completed: its bytes are durable.
    Sync {
        path: PathBuf,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
    },
    /// A file was unlinked.
    Remove {
        path: PathBuf,
    },
    /// A directory and everything under it was removed.
    RemoveAll {
        path: PathBuf,
    },
    MakeDir {
        path: PathBuf,
    },
    /// `fsync` of a directory completed: its entries are durable.
    SyncDir {
        path: PathBuf,
    },
    /// A test's own mark (e.g. "this transaction was acknowledged").
    Mark(u64),
}

/// A deliberate bug for the power-loss test to catch: the journal leaves
/// out one kind of sync, as if the engine never made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mutant {
    /// The engine as it is.
    None = 0,
    /// No `fsync` of a log's directory (so a new log file's name, or a
    /// rotation's rename, is never durable): a SiloR logger's `log.<i>`,
    /// or the directory of a segment log ([`crate::segments`]).
    LogDirSync = 1,
    /// No `fdatasync` of a log file (so the pepoch can name bytes that
    /// are not durable, or a segment log acknowledges unsynced buffers).
    LogFileSync = 2,
    /// No `fsync` of the parent of a directory just created (so a new
    /// database directory, and everything acknowledged in it, can vanish).
    NewDirSync = 3,
}

#[cfg(feature = "crashsim")]
mod journal {
    use super::Op;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
    use std::sync::Mutex;

    pub static MUTANT: AtomicU8 = AtomicU8::new(0);
    static ARMED: AtomicBool = AtomicBool::new(false);
    static JOURNAL: Mutex<Option<(PathBuf, Vec<Op>)>> = Mutex::new(None);

    pub fn arm(root: &Path) {
        *JOURNAL.lock().expect("journal") = Some((root.to_path_buf(), Vec::new()));
        // SeqCst: a test arms, then starts the engine's threads; plain
        // test setup, so the strongest order costs nothing here.
        ARMED.store(true, Ordering::SeqCst);
    }

    pub fn disarm() -> Vec<Op> {
        // SeqCst: as in `arm` (the journal itself is behind its mutex).
        ARMED.store(false, Ordering::SeqCst);
        JOURNAL
            .lock()
            .expect("journal")
            .take()
            .map_or_else(Vec::new, |j| j.1)
    }

    pub fn armed() -> bool {
        ARMED.load(Ordering::Relaxed)
    }

    /// Record `op` if `path` is under the armed root (`None`: always).
    pub fn record(path: Option<&Path>, op: impl FnOnce() -> Op) {
        if !armed() {
            return;
        }
        let mut j = JOURNAL.lock().expect("journal");
        if let Some((root, ops)) = j.as_mut() {
            if path.is_none_or(|p| p.starts_with(root.as_path())) {
                ops.push(op());
            }
        }
    }
}

/// Start recording every operation under `root` (an absolute, canonical
/// path), dropping any earlier journal.
#[cfg(feature = "crashsim")]
pub fn arm(root: &Path) {
    journal::arm(root);
}

/// Stop recording; returns the journal.
#[cfg(feature = "crashsim")]
pub fn disarm() -> Vec<Op> {
    journal::disarm()
}

/// Leave a kind of sync out of the journal from now on (see [`Mutant`]).
#[cfg(feature = "crashsim")]
pub fn set_mutant(m: Mutant) {
    // SeqCst: set between runs, before the engine starts (test setup).
    journal::MUTANT.store(m as u8, std::sync::atomic::Ordering::SeqCst);
}

/// Whether the mutant drops this sync of `path` (a log directory, if
/// `dir`, else a log file).
#[cfg(feature = "crashsim")]
fn mutant_drops(path: &Path, dir: bool) -> bool {
    let m = journal::MUTANT.load(std::sync::atomic::Ordering::Relaxed);
    let in_log = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("log."))
    };
    if dir {
        m == Mutant::LogDirSync as u8 && in_log(path)
    } else {
        m == Mutant::LogFileSync as u8 && path.parent().is_some_and(in_log)
    }
}

#[cfg(not(feature = "crashsim"))]
#[inline(always)]
fn mutant_drops(_: &Path, _: bool) -> bool {
    false
}

/// Whether the mutant `m` is on.
#[cfg(feature = "crashsim")]
fn mutant_is(m: Mutant) -> bool {
    journal::MUTANT.load(std::sync::atomic::Ordering::Relaxed) == m as u8
}

#[cfg(not(feature = "crashsim"))]
#[inline(always)]
fn mutant_is(_: Mutant) -> bool {
    false
}

/// Record a test's own mark, in order with the file operations.
#[cfg(feature = "crashsim")]
pub fn mark(tag: u64) {
    journal::record(None, || Op::Mark(tag));
}

#[cfg(feature = "crashsim")]
fn record(path: &Path, op: impl FnOnce() -> Op) {
    journal::record(Some(path), op);
}

#[cfg(not(feature = "crashsim"))]
#[inline(always)]
fn record(_: &Path, _: impl FnOnce() -> Op) {}

/// Hook: a file was opened with `O_CREAT` (`truncate`: cut to 0 bytes).
pub fn created(path: &Path, truncate: bool) {
    record(path, || Op::Create {
        path: path.to_path_buf(),
        truncate,
    });
}

/// Hook: `bytes` were written to `path` at offset `at`.
pub fn wrote(path: &Path, at: u64, bytes: &[u8]) {
    record(path, || Op::Write {
        path: path.to_path_buf(),
        at,
        bytes: bytes.to_vec(),
    });
}

/// Where an append to `f` will land: its length (only asked for while
/// recording). Call before the write.
#[cfg(feature = "crashsim")]
pub fn append_at(f: &File) -> u64 {
    if journal::armed() {
        f.metadata().map_or(0, |m| m.len())
    } else {
        0
    }
}

#[cfg(not(feature = "crashsim"))]
#[inline(always)]
pub fn append_at(_: &File) -> u64 {
    0
}

/// Hook: the file was truncated or extended to `len`.
pub fn set_len(path: &Path, len: u64) {
    record(path, || Op::SetLen {
        path: path.to_path_buf(),
        len,
    });
}

/// Hook: an `fsync` or `fdatasync` of the file completed.
pub fn synced(path: &Path) {
    if mutant_drops(path, false) {
        return;
    }
    record(path, || Op::Sync {
        path: path.to_path_buf(),
    });
}

/// Hook: `from` was renamed to `to`.
pub fn renamed(from: &Path, to: &Path) {
    record(from, || Op::Rename {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
    });
}

/// Hook: a file was unlinked.
pub fn removed(path: &Path) {
    record(path, || Op::Remove {
        path: path.to_path_buf(),
    });
}

/// Hook: a directory and everything under it was removed.
pub fn removed_all(path: &Path) {
    record(path, || Op::RemoveAll {
        path: path.to_path_buf(),
    });
}

/// Hook: a directory was created.
pub fn made_dir(path: &Path) {
    record(path, || Op::MakeDir {
        path: path.to_path_buf(),
    });
}

/// Hook: an `fsync` of a directory completed.
pub fn synced_dir(path: &Path) {
    if mutant_drops(path, true) {
        return;
    }
    record(path, || Op::SyncDir {
        path: path.to_path_buf(),
    });
}

/// Record a file (`dir` false) or directory sync of `path` unless the
/// mutant `m` is on.
fn synced_unless(m: Mutant, path: &Path, dir: bool) {
    if mutant_is(m) {
        return;
    }
    record(path, || {
        let path = path.to_path_buf();
        match dir {
            true => Op::SyncDir { path },
            false => Op::Sync { path },
        }
    });
}

/// `synced` for a segment log's file (its own mutant).
pub fn synced_log_file(path: &Path) {
    synced_unless(Mutant::LogFileSync, path, false);
}

/// `synced_dir` for a segment log's directory (its own mutant).
pub fn synced_log_dir(path: &Path) {
    synced_unless(Mutant::LogDirSync, path, true);
}

/// `synced_dir` for the parent of a directory just created.
pub fn synced_new_dir(path: &Path) {
    synced_unless(Mutant::NewDirSync, path, true);
}

#[cfg(feature = "crashsim")]
pub mod model;
