//! File-system operations every durable design shares: the failpoints
//! each write, fsync and rename passes ([`fp`]), durable directory
//! entries ([`sync_dir`], [`create_dir_all`]), the directory lock
//! ([`DirLock`]) and paced deletion ([`remove_paced`]). Each one reports
//! to the power-loss journal ([`crate::crashsim`]) once it succeeded.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use granary_api::Error;

use crate::crashsim;

/// Check a failpoint (compiled to nothing without the `failpoints`
/// feature): an injected failure surfaces as an I/O error.
///
/// # Errors
/// The failpoint `name` is configured to fail.
#[inline]
pub fn fp(name: &str) -> io::Result<()> {
    fail::fail_point!(name, |_| Err(io::Error::other(format!(
        "injected failure at {name}"
    ))));
    let _ = name;
    Ok(())
}

/// fsync a directory, so entries created or renamed in it are durable.
///
/// # Errors
/// The directory cannot be opened or synced (or the `dir-fsync`
/// failpoint fires).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fp("dir-fsync")?;
    File::open(dir)?.sync_all()?;
    crashsim::synced_dir(dir);
    Ok(())
}

/// Create `dir` and any missing ancestors, durably: each directory
/// created is made durable by an fsync of its parent, so a power cut
/// after this returns cannot lose the directory (and with it everything
/// later acknowledged in it). If `dir` exists, its parent is still
/// synced (an earlier attempt may have failed between the two); its
/// existing ancestors are left alone.
///
/// # Errors
/// A directory cannot be created or its parent synced.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    make_dirs(dir)?;
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.unwrap_or(Path::new("."));
    fp("dir-create-fsync")?;
    File::open(parent)?.sync_all()?;
    crashsim::synced_new_dir(&absolute(parent));
    Ok(())
}

/// Create `dir` and its missing ancestors, syncing the parent of each
/// ancestor created (`dir`'s own parent is the caller's to sync).
fn make_dirs(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(p) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !p.is_dir() {
            create_dir_all(p)?;
        }
    }
    fp("dir-create")?;
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        // Another thread or process made it first.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
        Err(e) => return Err(e),
    }
    crashsim::made_dir(&absolute(dir));
    Ok(())
}

/// `p` made absolute against the working directory (the journal records
/// absolute paths), without resolving links.
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The lock file's name in a locked directory.
pub const LOCK_FILE: &str = "LOCK";

/// An exclusive lock on a durable directory, held (as an `flock` on its
/// `LOCK` file) until dropped: a second process, or a second handle in
/// this one, gets [`Error::Locked`] instead of sharing the files.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Lock `dir` (which must exist).
    ///
    /// # Errors
    /// [`Error::Locked`] if another process or handle holds it;
    /// [`Error::Storage`] if the lock file cannot be opened or locked.
    pub fn acquire(dir: &Path) -> Result<DirLock, Error> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::storage("open", &path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(DirLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(dir.to_path_buf())),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::storage("lock", &path, e)),
        }
    }
}

/// What a file or directory being deleted is renamed to first (its name
/// plus this), so no reader ever sees a half-deleted file under a live
/// name. Recovery removes any it finds.
pub const DELETING_SUFFIX: &str = ".deleting";

/// Bytes freed per step of [`remove_paced`].
const FREE_STEP: u64 = 16 << 20;

/// Delete a file, or a directory of files (an old checkpoint), without
/// stalling the log. On a file system mounted with online `discard`
/// (ext4 `-o discard`, as on the VMs we measure on), freeing blocks
/// discards them inside the next journal commit, and every `fdatasync`
/// of the log waits for that commit: unlinking a 700 MB log file stalled
/// log writes for 0.5–1 s, which showed as a second-long throughput dip
/// after every checkpoint. So the path is first renamed to
/// `<name>.deleting` (and its directory fsynced), then each file is cut
/// from the end `FREE_STEP` bytes at a time, `pause` apart, then
/// unlinked: every journal commit frees at most a little. `hurry()`
/// (shutting down) drops the pauses. (RocksDB paces deletions with its
/// `DeleteScheduler` for the same reason.)
///
/// # Errors
/// A rename, truncation, removal or directory sync failed.
pub fn remove_paced(path: &Path, pause: Duration, hurry: &dyn Fn() -> bool) -> io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let mut doomed = path.as_os_str().to_owned();
    doomed.push(DELETING_SUFFIX);
    let doomed = PathBuf::from(doomed);
    fp("cleanup-rename")?;
    std::fs::rename(path, &doomed)?;
    crashsim::renamed(path, &doomed);
    sync_dir(parent)?;
    let shrink = |p: &Path| -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(p)?;
        let mut len = f.metadata()?.len();
        while len > FREE_STEP && !hurry() {
            len -= FREE_STEP;
            f.set_len(len)?;
            crashsim::set_len(p, len);
            std::thread::sleep(pause);
        }
        drop(f);
        std::fs::remove_file(p)?;
        crashsim::removed(p);
        Ok(())
    };
    if doomed.is_dir() {
        for ent in std::fs::read_dir(&doomed)? {
            shrink(&ent?.path())?;
        }
        std::fs::remove_dir(&doomed)?;
        crashsim::removed_all(&doomed);
        Ok(())
    } else {
        shrink(&doomed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(name: &str) -> PathBuf {
        let b = std::env::temp_dir().join(format!("granary-storage-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&b);
        b
    }

    #[test]
    fn remove_paced_removes_files_and_directories() {
        let base = base("remove-paced");
        std::fs::create_dir_all(base.join("ckpt.5")).unwrap();
        // Sparse, but long enough to be cut in several steps.
        let big = base.join("old_data.9.g1");
        File::create(&big)
            .unwrap()
            .set_len(3 * FREE_STEP + 5)
            .unwrap();
        File::create(base.join("ckpt.5/part.0"))
            .unwrap()
            .set_len(FREE_STEP + 1)
            .unwrap();
        std::fs::write(base.join("ckpt.5/part.1"), b"x").unwrap();
        let pauses = std::cell::Cell::new(0);
        let count = || {
            pauses.set(pauses.get() + 1);
            false
        };
        remove_paced(&big, Duration::ZERO, &count).unwrap();
        remove_paced(&base.join("ckpt.5"), Duration::ZERO, &count).unwrap();
        // 3 steps for the big file, 1 for part.0, none for part.1.
        assert_eq!(pauses.get(), 3 + 1);
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 0);
        // Hurrying skips the steps.
        File::create(&big).unwrap().set_len(3 * FREE_STEP).unwrap();
        remove_paced(&big, Duration::from_secs(3600), &|| true).unwrap();
        assert!(!big.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn create_dir_all_makes_ancestors_and_leaves_existing_ones() {
        let base = base("create-dir");
        let deep = base.join("a/b/c");
        create_dir_all(&deep).unwrap();
        assert!(deep.is_dir());
        std::fs::write(deep.join("f"), b"x").unwrap();
        create_dir_all(&deep).unwrap();
        assert!(
            deep.join("f").exists(),
            "an existing directory is left alone"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_locked_directory_refuses_a_second_lock_until_released() {
        let base = base("lock");
        create_dir_all(&base).unwrap();
        let held = DirLock::acquire(&base).unwrap();
        assert!(matches!(DirLock::acquire(&base), Err(Error::Locked(_))));
        drop(held);
        DirLock::acquire(&base).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
