//! A segment log: numbered buffers ("images") written whole, in
//! sequence, to checksummed segment files, and called stable once the
//! write is synced. Deuteronomy's recovery log (deuteronomy-cidr15 §2.3,
//! §3.1) is one: the TC Proxy writes each sealed log buffer here.
//!
//! A segment file `log-<first seq, 16 hex digits>` holds buffer images
//! back to back; a new segment starts once one passes [`SEGMENT_BYTES`].
//! An image is a [`FrameHeader`] (`magic (4) | seq (8) | length (4) |
//! crc32 of seq, length and data (4)`) and its data. Checkpoints truncate
//! the log by deleting the segments wholly below a sequence number
//! (Deuteronomy §6, the redo scan start point).
//!
//! Reading back, an image that is cut short, or that fails its checksum
//! and ends exactly where the last segment ends, is a write the crash
//! interrupted: it was never synced, so nothing in it was acknowledged,
//! and it is dropped.
//! Anywhere else it is damage, and recovery stops with
//! [`Error::Corrupt`] rather than guess; a gap in the sequence, or a
//! missing first segment, is [`Error::Missing`].
//!
//! Every write, sync, creation, deletion and cut passes a failpoint
//! (`segment-write`, `segment-fsync`, `segment-create`, `segment-remove`,
//! `segment-cut`, and `dir-fsync`) and reports to the power-loss journal.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use granary_api::Error;

use crate::crashsim;
use crate::fs::fp;

/// The name every segment file starts with.
pub const PREFIX: &str = "log-";

/// A segment is closed once it passes this size.
pub const SEGMENT_BYTES: u64 = 64 << 20;

/// The header in front of each buffer image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// [`FrameHeader::MAGIC`] in a header written by this module.
    pub magic: u32,
    /// The buffer's sequence number.
    pub seq: u64,
    /// Its data's length in bytes.
    pub len: u32,
    /// crc32 of `seq`, `len` (little-endian) and the data.
    pub crc: u32,
}

impl FrameHeader {
    /// "GLDB", little-endian.
    pub const MAGIC: u32 = 0x4244_4c47;
    /// Encoded size in bytes.
    pub const SIZE: usize = 4 + 8 + 4 + 4;

    /// The header of buffer `seq` holding `data`.
    ///
    /// # Panics
    /// `data` is 4 GiB or longer.
    pub fn of(seq: u64, data: &[u8]) -> FrameHeader {
        let len = u32::try_from(data.len()).expect("a buffer fits u32");
        FrameHeader {
            magic: Self::MAGIC,
            seq,
            len,
            crc: Self::checksum(seq, len, data),
        }
    }

    fn checksum(seq: u64, len: u32, data: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&seq.to_le_bytes());
        h.update(&len.to_le_bytes());
        h.update(data);
        h.finalize()
    }

    /// The header's bytes.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.magic.to_le_bytes());
        b[4..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..20].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// Parse a header's fields (whatever they hold: [`FrameHeader::seals`]
    /// says whether they are a header).
    pub fn decode(b: &[u8; Self::SIZE]) -> FrameHeader {
        let word = |r: std::ops::Range<usize>| -> [u8; 4] { b[r].try_into().expect("4") };
        FrameHeader {
            magic: u32::from_le_bytes(word(0..4)),
            seq: u64::from_le_bytes(b[4..12].try_into().expect("8")),
            len: u32::from_le_bytes(word(12..16)),
            crc: u32::from_le_bytes(word(16..20)),
        }
    }

    /// Whether this is a header sealed over `data`: the magic, the length
    /// and the checksum all agree.
    pub fn seals(&self, data: &[u8]) -> bool {
        self.magic == Self::MAGIC
            && data.len() == self.len as usize
            && Self::checksum(self.seq, self.len, data) == self.crc
    }
}

/// `map_err` to [`Error::storage`]: `what` failed on `path`.
fn storage<'p>(what: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> Error + 'p {
    move |source| Error::storage(what, path, source)
}

fn segment_name(first: u64) -> String {
    format!("{PREFIX}{first:016x}")
}

/// The segments in `dir`, by first sequence number.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, Error> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(storage("list the log", dir))? {
        let e = e.map_err(storage("list the log", dir))?;
        let name = e.file_name();
        let Some(hex) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        if let Ok(first) = u64::from_str_radix(hex, 16) {
            out.push((first, e.path()));
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    fp("dir-fsync")
        .and_then(|()| File::open(dir))
        .and_then(|d| d.sync_all())
        .map_err(storage("sync the log directory", dir))?;
    crashsim::synced_log_dir(dir);
    Ok(())
}

/// A segment log's writer.
pub struct SegmentLog {
    dir: PathBuf,
    file: Option<(File, PathBuf, u64)>,
    /// Segments written, by first sequence number (the open one last).
    segments: Vec<(u64, PathBuf)>,
}

impl SegmentLog {
    /// A writer appending to the log in `dir` (whose segments were read
    /// back by [`replay`]); the next buffer it writes starts a segment.
    ///
    /// # Errors
    /// The directory cannot be listed.
    pub fn open(dir: &Path) -> Result<SegmentLog, Error> {
        Ok(SegmentLog {
            dir: dir.to_path_buf(),
            file: None,
            segments: segments(dir)?,
        })
    }

    /// Write buffer `seq`'s `data` (not yet synced).
    ///
    /// # Errors
    /// The write failed.
    pub fn write(&mut self, seq: u64, data: &[u8]) -> Result<(), Error> {
        let full = match &self.file {
            Some((_, _, size)) => *size >= SEGMENT_BYTES,
            None => true,
        };
        if full {
            self.sync()?;
            let path = self.dir.join(segment_name(seq));
            let f = fp("segment-create")
                .and_then(|()| OpenOptions::new().create(true).append(true).open(&path))
                .map_err(storage("create a log segment", &path))?;
            crashsim::created(&path, false);
            sync_dir(&self.dir)?;
            self.segments.push((seq, path.clone()));
            self.file = Some((f, path, 0));
        }
        let (f, path, size) = self.file.as_mut().expect("open");
        let head = FrameHeader::of(seq, data).encode();
        let at = *size;
        fp("segment-write")
            .and_then(|()| f.write_all(&head))
            .and_then(|()| f.write_all(data))
            .map_err(storage("write the log", path))?;
        crashsim::wrote(path, at, &head);
        crashsim::wrote(path, at + head.len() as u64, data);
        *size += (FrameHeader::SIZE + data.len()) as u64;
        Ok(())
    }

    /// Make everything written so far stable.
    ///
    /// # Errors
    /// The sync failed.
    pub fn sync(&mut self) -> Result<(), Error> {
        match &self.file {
            Some((f, path, _)) => {
                fp("segment-fsync")
                    .and_then(|()| f.sync_data())
                    .map_err(storage("sync the log", path))?;
                crashsim::synced_log_file(path);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Delete the segments that hold only buffers below `seq` (the
    /// DC made them stable: §6's checkpoint).
    ///
    /// # Errors
    /// A deletion failed.
    pub fn truncate_below(&mut self, seq: u64) -> Result<(), Error> {
        // Segment i holds buffers from its first up to segment i+1's.
        let mut keep_from = 0;
        for i in 0..self.segments.len().saturating_sub(1) {
            if self.segments[i + 1].0 <= seq {
                keep_from = i + 1;
            }
        }
        for (_, path) in self.segments.drain(..keep_from) {
            fp("segment-remove")
                .and_then(|()| std::fs::remove_file(&path))
                .map_err(storage("delete a log segment", &path))?;
            crashsim::removed(&path);
        }
        if keep_from > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

/// What [`replay`] found.
#[derive(Debug)]
pub struct Replayed {
    /// The sequence number after the last image (at least `from`).
    pub next: u64,
    /// A torn last write: the segment, and the length to cut it to.
    pub torn: Option<(PathBuf, u64)>,
}

/// Cut the torn write [`replay`] found off its segment (and sync it), so
/// new segments can follow it.
///
/// # Errors
/// The truncation or its sync failed.
pub fn cut_torn(path: &Path, len: u64) -> Result<(), Error> {
    fp("segment-cut")
        .and_then(|()| OpenOptions::new().write(true).open(path))
        .and_then(|f| {
            f.set_len(len)?;
            crashsim::set_len(path, len);
            f.sync_all()
        })
        .map_err(storage("cut a torn write off the log", path))?;
    crashsim::synced(path);
    Ok(())
}

/// Read back every buffer image in `dir` from sequence number `from` on,
/// in order, passing each to `f`.
///
/// # Errors
/// Damage, a gap, or a missing segment (see the module's notes), or
/// what `f` fails with.
pub fn replay(
    dir: &Path,
    from: u64,
    mut f: impl FnMut(u64, &[u8]) -> Result<(), Error>,
) -> Result<Replayed, Error> {
    let segs = segments(dir)?;
    // The segment holding `from`: the last one that starts at or before it.
    let start = segs.iter().rposition(|(first, _)| *first <= from);
    let Some(start) = start else {
        if let Some((first, path)) = segs.first() {
            return Err(Error::Missing {
                path: path.clone(),
                what: format!(
                    "the log starts at buffer {first}, but recovery needs it from buffer {from}"
                ),
            });
        }
        return Ok(Replayed {
            next: from,
            torn: None,
        });
    };
    let mut next = None::<u64>;
    let mut torn = None;
    let last = segs.len() - 1;
    for (i, (_, path)) in segs.iter().enumerate().skip(start) {
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(storage("read the log", path))?;
        let mut at = 0usize;
        while at < bytes.len() {
            let corrupt = |what: String| Error::Corrupt {
                path: path.clone(),
                offset: at as u64,
                what,
            };
            let torn_tail = i == last;
            let Some(head) = bytes.get(at..at + FrameHeader::SIZE) else {
                if torn_tail {
                    torn = Some((path.clone(), at as u64));
                    break;
                }
                return Err(corrupt("a log buffer image cut short".into()));
            };
            let head = FrameHeader::decode(head.try_into().expect("a header's bytes"));
            let len = head.len as usize;
            let body = bytes.get(at + FrameHeader::SIZE..at + FrameHeader::SIZE + len);
            let ok = body.is_some_and(|b| head.seals(b));
            if !ok {
                // A torn last write (never synced, never acknowledged):
                // the last image of the last segment, cut short or ending
                // exactly at the end. Anything after it makes it damage.
                let end = at + FrameHeader::SIZE + len;
                if torn_tail && (body.is_none() || end == bytes.len()) {
                    torn = Some((path.clone(), at as u64));
                    break;
                }
                return Err(corrupt("a log buffer image fails its checksum".into()));
            }
            let seq = head.seq;
            if let Some(n) = next {
                if seq != n {
                    return Err(Error::Missing {
                        path: path.clone(),
                        what: format!("log buffer {n} (the log jumps to buffer {seq})"),
                    });
                }
            }
            next = Some(seq + 1);
            if seq >= from {
                f(seq, body.expect("checked"))?;
            }
            at += FrameHeader::SIZE + len;
        }
    }
    Ok(Replayed {
        next: next.map_or(from, |n| n.max(from)),
        torn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("granary-segments-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn read(d: &Path, from: u64) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        let mut out = Vec::new();
        replay(d, from, |s, b| {
            out.push((s, b.to_vec()));
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn images_read_back_in_order_and_truncation_drops_whole_segments() {
        let big = vec![7u8; (SEGMENT_BYTES / 2) as usize];
        let d = dir("order2");
        let mut w = SegmentLog::open(&d).unwrap();
        for seq in 0..6u64 {
            let len = if seq % 2 == 0 { big.len() } else { 10 };
            w.write(seq, &big[..len]).unwrap();
        }
        w.sync().unwrap();
        let got = read(&d, 0).unwrap();
        assert_eq!(
            got.iter().map(|g| g.0).collect::<Vec<_>>(),
            (0..6).collect::<Vec<_>>()
        );
        assert_eq!(read(&d, 4).unwrap().len(), 2);
        let before = segments(&d).unwrap().len();
        assert!(before >= 2, "{before} segments");
        w.truncate_below(4).unwrap();
        let after = segments(&d).unwrap();
        assert!(after.len() < before && after[0].0 <= 4, "{after:?}");
        assert_eq!(read(&d, 4).unwrap().len(), 2, "what is needed stays");
        assert!(matches!(read(&d, 0), Err(Error::Missing { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A failed deletion of a segment is an error (the TC Proxy poisons
    /// the TC on it), and what was not deleted still reads back.
    #[cfg(feature = "failpoints")]
    #[test]
    fn a_failed_truncation_is_an_error() {
        let big = vec![7u8; (SEGMENT_BYTES / 2) as usize];
        let d = dir("truncate-fails");
        let mut w = SegmentLog::open(&d).unwrap();
        for seq in 0..4u64 {
            w.write(seq, &big).unwrap();
        }
        w.sync().unwrap();
        let scenario = fail::FailScenario::setup();
        fail::cfg("segment-remove", "return").unwrap();
        let r = w.truncate_below(3);
        fail::remove("segment-remove");
        scenario.teardown();
        assert!(matches!(r, Err(Error::Storage { .. })), "{r:?}");
        assert_eq!(read(&d, 0).unwrap().len(), 4, "nothing was lost");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_gap_in_the_sequence_is_refused() {
        let d = dir("gap");
        let mut w = SegmentLog::open(&d).unwrap();
        for seq in [0u64, 1, 3] {
            w.write(seq, b"x").unwrap();
        }
        w.sync().unwrap();
        assert!(matches!(read(&d, 0), Err(Error::Missing { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_torn_tail_is_dropped_but_damage_before_it_is_refused() {
        let d = dir("torn");
        let mut w = SegmentLog::open(&d).unwrap();
        for seq in 0..3u64 {
            w.write(seq, &[seq as u8; 100]).unwrap();
        }
        w.sync().unwrap();
        drop(w);
        let seg = segments(&d).unwrap()[0].1.clone();
        let full = std::fs::read(&seg).unwrap();
        // Cut into the last image: a torn write.
        std::fs::write(&seg, &full[..full.len() - 30]).unwrap();
        assert_eq!(read(&d, 0).unwrap().len(), 2);
        // Damage the first image: refused.
        let mut bad = full.clone();
        bad[FrameHeader::SIZE + 5] ^= 1;
        std::fs::write(&seg, &bad).unwrap();
        assert!(matches!(read(&d, 0), Err(Error::Corrupt { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
