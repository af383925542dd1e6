//! File operations that logging, checkpoints and recovery share: the
//! failpoints every write, fsync and rename passes ([`fp`]), durable
//! directory entries ([`sync_dir`]), paced deletion ([`remove_paced`]),
//! and a log file's end record ([`write_end`]).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::abuf::{seal_block, AlignedBuf};
use super::crashsim;
use super::format::{LogEnd, BLOCK_HEADER, BLOCK_MAGIC_END, IO_ALIGN};

/// Check a failpoint (compiled to nothing without the `failpoints`
/// feature): an injected failure surfaces as an I/O error.
#[inline]
pub(crate) fn fp(name: &str) -> io::Result<()> {
    fail::fail_point!(name, |_| Err(io::Error::other(format!(
        "injected failure at {name}"
    ))));
    let _ = name;
    Ok(())
}

/// fsync a directory, so entries created or renamed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    fp("dir-fsync")?;
    File::open(dir)?.sync_all()?;
    crashsim::synced_dir(dir);
    Ok(())
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
pub(crate) fn remove_paced(
    path: &Path,
    pause: Duration,
    hurry: &dyn Fn() -> bool,
) -> io::Result<()> {
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

/// Write end record `end` at `at` (an [`IO_ALIGN`] multiple, the end of
/// the file's blocks) of `file` (at `path`), padded as a block, and sync
/// the file. Returns the file's new length. The file may be open with
/// `O_DIRECT`.
pub(crate) fn write_end(file: &File, path: &Path, at: u64, end: &LogEnd) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut b = AlignedBuf::with_capacity(IO_ALIGN);
    b.resize_zeroed(BLOCK_HEADER);
    b.extend_from_slice(&end.payload());
    seal_block(
        &mut b,
        BLOCK_MAGIC_END,
        end.durable_epoch,
        end.logger,
        end.blocks,
    );
    fp("log-end-write")?;
    file.write_all_at(b.as_slice(), at)?;
    crashsim::wrote(path, at, b.as_slice());
    fp("log-end-fsync")?;
    file.sync_data()?;
    crashsim::synced(path);
    Ok(at + b.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_paced_removes_files_and_directories() {
        let base =
            std::env::temp_dir().join(format!("granary-remove-paced-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
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
}
