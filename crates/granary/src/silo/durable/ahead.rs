//! Read-ahead for recovery: a helper thread reads a checkpoint file in
//! large aligned windows (with `O_DIRECT` where the file system takes it)
//! while the loading thread decodes the previous window.
//!
//! With buffered `pread`s of each block, the kernel's copy out of the page
//! cache took about a tenth of a checkpoint load's CPU; with `O_DIRECT`
//! the disk writes straight into the window, and the loading thread does
//! not wait on the disk while the helper stays a window ahead. v02 files
//! allow this: every block starts on an [`IO_ALIGN`] boundary and the
//! file's length is a multiple of it (docs/FORMAT.md).
//!
//! The helper only finds block boundaries. Each window it hands over
//! holds whole blocks whose headers decode; the loading thread checks
//! every header, length and checksum again, exactly as without it. At the
//! first thing the helper cannot make sense of (a bad header, a block
//! running past the end, a read error) it stops, and the loading thread
//! falls back to reading block by block from that offset, which reports
//! the damage or the error as it always did.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;
use std::thread::{Scope, ScopedJoinHandle};

use super::abuf::{open_aligned, round_up, AlignedBuf};
use super::format::{
    next_block, read_block_checked, BlockHeader, BlockRead, BLOCK_HEADER, IO_ALIGN,
};
use granary_storage::fs::fp;

/// Bytes read per window (more for a block larger than this).
const WINDOW: usize = 4 << 20;
/// Windows per file: one being read, one being decoded, one spare.
const WINDOWS: usize = 3;

/// Whole blocks of a file: `buf[..len]` is the file from offset `at`.
pub(crate) struct Window {
    pub buf: AlignedBuf,
    pub at: u64,
    pub len: usize,
}

impl Window {
    /// The whole blocks it holds.
    pub fn bytes(&self) -> &[u8] {
        &self.buf.as_slice()[..self.len]
    }

    /// Whether the window ends at or before `at`.
    pub fn done_by(&self, at: u64) -> bool {
        self.at + self.len as u64 <= at
    }
}

/// The loading thread's end of a read-ahead.
pub(crate) struct Ahead<'scope> {
    full: Receiver<Window>,
    empty: SyncSender<AlignedBuf>,
    /// Returns the buffers handed back to it, for the next file.
    helper: ScopedJoinHandle<'scope, Vec<AlignedBuf>>,
}

impl<'scope> Ahead<'scope> {
    /// Start reading `f` (`size` bytes, blocks with magic `magic` padded
    /// to [`IO_ALIGN`]) on a thread of `scope`, into buffers taken from
    /// `spare` (or new ones).
    pub fn start(
        scope: &'scope Scope<'scope, '_>,
        f: &'scope File,
        size: u64,
        magic: u32,
        spare: &mut Vec<AlignedBuf>,
    ) -> Ahead<'scope> {
        Ahead::with_window(scope, f, size, magic, WINDOW, spare)
    }

    /// As [`Ahead::start`], with windows of `window` bytes (a multiple of
    /// [`IO_ALIGN`]).
    fn with_window(
        scope: &'scope Scope<'scope, '_>,
        f: &'scope File,
        size: u64,
        magic: u32,
        window: usize,
        spare: &mut Vec<AlignedBuf>,
    ) -> Ahead<'scope> {
        let (full_tx, full) = sync_channel(WINDOWS);
        let (empty, empty_rx) = sync_channel(WINDOWS);
        for _ in 0..WINDOWS {
            let b = spare.pop().unwrap_or_else(|| {
                let mut b = AlignedBuf::with_capacity(window);
                b.resize_zeroed(window);
                b
            });
            empty.send(b).expect("the receiver is here");
        }
        let helper = scope.spawn(move || {
            read_windows(f, size, magic, window, full_tx, &empty_rx);
            // Done, or stopped: keep what the loader hands back until it
            // finishes, so its next file reuses the (already faulted-in)
            // memory.
            empty_rx.iter().collect()
        });
        Ahead {
            full,
            empty,
            helper,
        }
    }

    /// The next window, or `None` once the helper has stopped (at the end
    /// of the file or at something it could not read or parse).
    pub fn next(&self) -> Option<Window> {
        self.full.recv().ok()
    }

    /// Hand a decoded window's buffer back for reuse.
    pub fn recycle(&self, w: Window) {
        // The helper takes it, reading or not; if it has panicked, the
        // buffer just goes.
        let _ = self.empty.send(w.buf);
    }

    /// End the read-ahead once the file is loaded (`last`: the window in
    /// hand, if any); returns every buffer, for the next file.
    pub fn finish(self, last: Option<Window>) -> Vec<AlignedBuf> {
        let Ahead {
            full,
            empty,
            helper,
        } = self;
        if let Some(w) = last {
            let _ = empty.send(w.buf);
        }
        drop(empty);
        let mut bufs = match helper.join() {
            Ok(b) => b,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        bufs.extend(full.try_iter().map(|w| w.buf));
        bufs
    }
}

/// Fill windows until the end of the file or the first thing that cannot
/// be read or parsed; `full` is dropped on return, which tells the loader.
fn read_windows(
    f: &File,
    size: u64,
    magic: u32,
    window: usize,
    full: SyncSender<Window>,
    empty: &Receiver<AlignedBuf>,
) {
    let mut at = 0u64;
    while at < size {
        // The loading thread is gone (done early, or failed): stop.
        let Ok(mut buf) = empty.recv() else { return };
        let want = round_up(usize::try_from(size - at).unwrap_or(usize::MAX).min(window));
        let Ok(got) = read_window(f, &mut buf, at, want) else {
            return;
        };
        let mut len = whole_blocks(&buf.as_slice()[..got], magic);
        if len == 0 {
            // A block bigger than the window: read it whole, if its header
            // makes sense and the file holds it.
            let Some(h) = BlockHeader::decode(&buf.as_slice()[..got.min(BLOCK_HEADER)], magic)
            else {
                return;
            };
            let need = round_up(BLOCK_HEADER + h.len as usize);
            if need as u64 > size - at || need <= got {
                return;
            }
            let mut big = AlignedBuf::with_capacity(need);
            big.resize_zeroed(need);
            match read_window(f, &mut big, at, need) {
                Ok(n) if n == need => {}
                _ => return,
            }
            buf = big;
            len = whole_blocks(&buf.as_slice()[..need], magic);
            if len == 0 {
                return;
            }
        }
        if full.send(Window { buf, at, len }).is_err() {
            return;
        }
        at += len as u64;
    }
}

/// Read up to `want` bytes (a multiple of [`IO_ALIGN`]) at `at` into
/// `buf`, growing it if needed; fewer only at the end of the file.
fn read_window(f: &File, buf: &mut AlignedBuf, at: u64, want: usize) -> io::Result<usize> {
    if buf.len() < want {
        buf.resize_zeroed(want);
    }
    let b = &mut buf.as_mut_slice()[..want];
    let mut got = 0;
    while got < want {
        match f.read_at(&mut b[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The length of the run of whole blocks at the start of `b`: each header
/// decodes and each block, padded, ends within `b` (bodies are checked by
/// the loader).
fn whole_blocks(b: &[u8], magic: u32) -> usize {
    let mut end = 0usize;
    while let BlockRead::Block(h, _) = read_block_checked(b, end, magic, false) {
        let next = next_block(
            (end + BLOCK_HEADER + h.len as usize) as u64,
            IO_ALIGN as u32,
        );
        if next > b.len() as u64 {
            break;
        }
        end = next as usize;
    }
    end
}

/// A run of log blocks of one file that recovery reads in one piece: the
/// bytes `[at, at + len)` (both multiples of [`IO_ALIGN`]) hold the
/// blocks `members` (indices into the replay list).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub file: usize,
    pub at: u64,
    pub len: usize,
    pub members: Vec<usize>,
}

/// Cut the replay list `blocks` (file, offset, header; in replay order)
/// into [`Span`]s of at most `window` bytes (one block larger than that
/// is a span of its own). A span holds blocks of one file that touch,
/// taken in replay order: with one logger, newest epoch first, that is a
/// file read backwards a window at a time. Spans come in the replay order
/// of their first block, and list their blocks in replay order.
pub(crate) fn spans(blocks: &[(usize, u64, BlockHeader)], window: usize) -> Vec<Span> {
    let mut done: Vec<Span> = Vec::new();
    // The span being grown in each file.
    let mut open: Vec<Option<Span>> = Vec::new();
    for (j, &(i, at, h)) in blocks.iter().enumerate() {
        let lo = at / IO_ALIGN as u64 * IO_ALIGN as u64;
        let hi = (at + (BLOCK_HEADER + h.len as usize) as u64).div_ceil(IO_ALIGN as u64)
            * IO_ALIGN as u64;
        if open.len() <= i {
            open.resize_with(i + 1, || None);
        }
        if let Some(s) = &mut open[i] {
            let (s_lo, s_hi) = (s.at, s.at + s.len as u64);
            let (u_lo, u_hi) = (s_lo.min(lo), s_hi.max(hi));
            if lo <= s_hi && hi >= s_lo && u_hi - u_lo <= window as u64 {
                s.at = u_lo;
                s.len = (u_hi - u_lo) as usize;
                s.members.push(j);
                continue;
            }
            done.extend(open[i].take());
        }
        open[i] = Some(Span {
            file: i,
            at: lo,
            len: (hi - lo) as usize,
            members: vec![j],
        });
    }
    done.extend(open.into_iter().flatten());
    done.sort_by_key(|s| s.members[0]);
    done
}

/// Log spans read ahead of the replay threads: a helper thread
/// ([`SpanReader::read_all`]) reads the [`Span`]s in order into aligned
/// buffers, with `O_DIRECT` where the file system takes it, and any
/// number of replay threads take them ([`SpanReader::next`]).
///
/// As for checkpoint windows, the helper only reads: a replay thread
/// checks every block it takes from a span (header and checksum). A read
/// error is handed over in the span's place, for the replay thread to
/// report.
pub(crate) struct SpanReader {
    full: Mutex<Option<Receiver<SpanRead>>>,
    empty: Mutex<Option<SyncSender<AlignedBuf>>>,
    helper: Mutex<Option<(SyncSender<SpanRead>, Receiver<AlignedBuf>)>>,
}

/// Span `k` as read: its bytes (`buf[..len]`, fewer than the span's
/// length only at the end of the file), or the error reading it.
pub(crate) struct SpanRead {
    pub k: usize,
    pub got: io::Result<(AlignedBuf, usize)>,
}

impl SpanReader {
    /// A reader that keeps `bufs` buffers of up to `window` bytes: the
    /// spans being replayed and those read ahead of them.
    pub fn new(bufs: usize, window: usize) -> SpanReader {
        let bufs = bufs.max(1);
        let (full_tx, full) = sync_channel(bufs);
        let (empty, empty_rx) = sync_channel(bufs);
        for _ in 0..bufs {
            let mut b = AlignedBuf::with_capacity(window);
            b.resize_zeroed(b.capacity());
            empty.send(b).expect("the receiver is here");
        }
        SpanReader {
            full: Mutex::new(Some(full)),
            empty: Mutex::new(Some(empty)),
            helper: Mutex::new(Some((full_tx, empty_rx))),
        }
    }

    /// The helper's work: read each of `spans` from the files at `paths`
    /// (opened with `O_DIRECT` if `direct` and the file system allows it),
    /// in order, as buffers come back; stops early once
    /// [`SpanReader::close`] is called.
    pub fn read_all(&self, spans: &[Span], paths: &[&Path], direct: bool) {
        let Some((full, empty)) = self.helper.lock().expect("lock").take() else {
            return;
        };
        let mut files: Vec<Option<File>> = Vec::new();
        // A buffer a failed read left unused.
        let mut spare = None;
        for (k, s) in spans.iter().enumerate() {
            // The replay threads are gone (done, or failed): stop.
            let Some(mut buf) = spare.take().or_else(|| empty.recv().ok()) else {
                return;
            };
            if files.len() <= s.file {
                files.resize_with(s.file + 1, || None);
            }
            let got = fp("recover-read").and_then(|()| {
                let f = match &mut files[s.file] {
                    Some(f) => f,
                    slot => {
                        let o = OpenOptions::new().read(true).clone();
                        slot.insert(open_aligned(&o, paths[s.file], direct)?)
                    }
                };
                read_window(f, &mut buf, s.at, s.len)
            });
            let got = match got {
                Ok(n) => Ok((buf, n)),
                Err(e) => {
                    spare = Some(buf);
                    Err(e)
                }
            };
            if full.send(SpanRead { k, got }).is_err() {
                return;
            }
        }
    }

    /// The next span read, in the helper's order; `None` once the helper
    /// has stopped. Blocks until it is read.
    pub fn next(&self) -> Option<SpanRead> {
        let full = self.full.lock().expect("lock");
        full.as_ref()?.recv().ok()
    }

    /// Hand a replayed span's buffer back for the next read.
    pub fn recycle(&self, buf: AlignedBuf) {
        if let Some(e) = &*self.empty.lock().expect("lock") {
            // The helper takes it, reading or not; if it has stopped, the
            // buffer just goes.
            let _ = e.try_send(buf);
        }
    }

    /// Stop the helper (for a replay that ended early); it returns from
    /// [`SpanReader::read_all`] at its next step.
    pub fn close(&self) {
        self.full.lock().expect("lock").take();
        self.empty.lock().expect("lock").take();
        self.helper.lock().expect("lock").take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::silo::durable::abuf::seal_block;
    use crate::silo::durable::format::BLOCK_MAGIC_CKPT;
    use std::io::Write;

    /// A file of sealed blocks with the given payload sizes; returns each
    /// block's offset and padded bytes.
    fn blocks_file(path: &std::path::Path, sizes: &[usize]) -> Vec<(u64, Vec<u8>)> {
        let mut f = File::create(path).unwrap();
        let mut at = 0u64;
        let mut out = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let mut b = AlignedBuf::with_capacity(BLOCK_HEADER + n);
            b.resize_zeroed(BLOCK_HEADER);
            b.extend_from_slice(&vec![i as u8 + 1; n]);
            seal_block(&mut b, BLOCK_MAGIC_CKPT, 0, 0, 1);
            f.write_all(b.as_slice()).unwrap();
            out.push((at, b.as_slice().to_vec()));
            at += b.len() as u64;
        }
        out
    }

    /// Windows hand over every block once, in order and intact, blocks
    /// larger than a window included; a damaged header stops the helper
    /// just before it.
    #[test]
    fn windows_cover_whole_blocks() {
        let dir = std::env::temp_dir().join(format!("granary-ahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("part");
        let sizes = [100, 5000, 9000, 30_000, 10, 4064, 4065, 20_000, 7];
        let blocks = blocks_file(&path, &sizes);
        for damaged in [None, Some(5)] {
            if let Some(d) = damaged {
                let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                use std::os::unix::fs::FileExt;
                f.write_all_at(&[0xff], blocks[d].0 + 1).unwrap();
            }
            let f = File::open(&path).unwrap();
            let size = f.metadata().unwrap().len();
            let mut seen = 0;
            let mut spare = Vec::new();
            std::thread::scope(|s| {
                let a = Ahead::with_window(s, &f, size, BLOCK_MAGIC_CKPT, 2 * IO_ALIGN, &mut spare);
                while let Some(w) = a.next() {
                    assert_eq!(w.len % IO_ALIGN, 0);
                    while seen < blocks.len() && !w.done_by(blocks[seen].0) {
                        let (at, b) = &blocks[seen];
                        let off = (*at - w.at) as usize;
                        assert_eq!(
                            w.bytes().get(off..off + b.len()),
                            Some(&b[..]),
                            "block {seen}"
                        );
                        seen += 1;
                    }
                    a.recycle(w);
                }
                spare = a.finish(None);
            });
            if damaged.is_none() {
                assert_eq!(spare.len(), WINDOWS, "buffers come back for reuse");
            }
            assert_eq!(seen, damaged.unwrap_or(blocks.len()), "damaged {damaged:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn h(len: u32, epoch: u64) -> BlockHeader {
        BlockHeader {
            magic: 0,
            len,
            epoch,
            source: 0,
            count: 0,
            body_crc: 0,
        }
    }

    /// Spans group neighbouring blocks of one file in replay order, never
    /// beyond the window (a larger block alone), and list every block
    /// once.
    #[test]
    fn spans_group_neighbouring_blocks() {
        let a = IO_ALIGN as u64;
        // Blocks of 4 KiB (header + body padded), file 0 read backwards,
        // file 1 interleaved with it, then a gap, then a block larger than
        // the window.
        let body = (IO_ALIGN - BLOCK_HEADER) as u32;
        let blocks = [
            (0, 3 * a, h(body, 9)),
            (1, 0, h(body, 9)),
            (0, 2 * a, h(body, 8)),
            (1, a, h(body, 8)),
            (0, a, h(body, 7)),
            (0, 0, h(body, 6)),
            (0, 10 * a, h(body, 5)),
            (0, 20 * a, h(5 * body, 4)),
        ];
        let got = spans(&blocks, 3 * IO_ALIGN);
        let want = [
            (0, 1, 3, vec![0, 2, 4]),
            (1, 0, 2, vec![1, 3]),
            (0, 0, 1, vec![5]),
            (0, 10, 1, vec![6]),
            (0, 20, 5, vec![7]),
        ];
        let got: Vec<_> = got
            .into_iter()
            .map(|s| (s.file, s.at / a, s.len / IO_ALIGN, s.members))
            .collect();
        assert_eq!(got, want);
    }

    /// The reader hands over every span's bytes, and a read error in a
    /// span's place.
    #[test]
    fn span_reader_reads_spans_and_reports_errors() {
        let dir = std::env::temp_dir().join(format!("granary-spans-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let sizes = [100, 5000, 9000, 30_000, 10];
        let blocks = blocks_file(&path, &sizes);
        let list: Vec<(usize, u64, BlockHeader)> = blocks
            .iter()
            .rev()
            .map(|(at, b)| (0, *at, BlockHeader::decode(b, BLOCK_MAGIC_CKPT).unwrap()))
            .collect();
        let sp = spans(&list, 4 * IO_ALIGN);
        assert!(sp.len() > 1 && sp.len() < blocks.len(), "{sp:?}");
        let missing = dir.join("gone");
        for (paths, ok) in [
            (vec![path.as_path()], true),
            (vec![missing.as_path()], false),
        ] {
            let r = SpanReader::new(2, 4 * IO_ALIGN);
            let mut seen = vec![false; list.len()];
            std::thread::scope(|s| {
                s.spawn(|| r.read_all(&sp, &paths, true));
                for _ in 0..sp.len() {
                    let read = r.next().expect("one read a span");
                    let span = &sp[read.k];
                    match read.got {
                        Ok((buf, len)) => {
                            assert!(ok);
                            for &j in &span.members {
                                let (at, b) = &blocks[blocks.len() - 1 - j];
                                let off = (*at - span.at) as usize;
                                assert_eq!(&buf.as_slice()[..len][off..off + b.len()], &b[..]);
                                seen[j] = true;
                            }
                            r.recycle(buf);
                        }
                        Err(e) => {
                            assert!(!ok);
                            assert_eq!(e.kind(), io::ErrorKind::NotFound);
                            span.members.iter().for_each(|&j| seen[j] = true);
                        }
                    }
                }
                r.close();
            });
            assert!(seen.iter().all(|&s| s), "every block once");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
