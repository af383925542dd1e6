//! A SiloR log file's end record ([`write_end`]). The file operations
//! every durable design shares (failpoints, `sync_dir`, paced deletion)
//! are `granary_storage::fs`.

use std::fs::File;
use std::io;
use std::path::Path;

use granary_storage::crashsim;
use granary_storage::fs::fp;

use super::abuf::{seal_block, AlignedBuf};
use super::format::{LogEnd, BLOCK_HEADER, BLOCK_MAGIC_END, IO_ALIGN};

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
