//! On-disk formats: log blocks, log file headers, the `pepoch` file,
//! checkpoint blocks and manifests, the table catalog. Every integer is
//! little-endian; every checksum is CRC-32 (IEEE, as computed by the
//! `crc32fast` crate). `docs/FORMAT.md` describes every byte.

use std::path::{Path, PathBuf};

/// The CRC-32 (IEEE) of `bytes`.
#[inline]
pub fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[inline]
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[inline]
pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

// ---------------------------------------------------------------- blocks

/// A block: the unit of checksumming in log and checkpoint files.
///
/// ```text
/// 0   magic      u32   BLOCK_MAGIC_LOG, BLOCK_MAGIC_END or BLOCK_MAGIC_CKPT
/// 4   len        u32   payload bytes
/// 8   epoch      u64   log: the epoch of every record; end: the closing
///                      logger's durable epoch d; checkpoint: 0
/// 16  source     u32   log: the worker slot; end: the logger; checkpoint:
///                      the thread
/// 20  count      u32   records in the payload (end: log blocks in the file)
/// 24  body_crc   u32   CRC of the payload
/// 28  head_crc   u32   CRC of bytes 0..28
/// 32  payload
/// ```
pub const BLOCK_HEADER: usize = 32;
pub const BLOCK_MAGIC_LOG: u32 = u32::from_le_bytes(*b"GRLB");
pub const BLOCK_MAGIC_CKPT: u32 = u32::from_le_bytes(*b"GRCB");
/// The end record of a closed (v03) log file: see [`LogEnd`].
pub const BLOCK_MAGIC_END: u32 = u32::from_le_bytes(*b"GRLE");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    pub magic: u32,
    pub len: u32,
    pub epoch: u64,
    pub source: u32,
    pub count: u32,
    pub body_crc: u32,
}

impl BlockHeader {
    pub fn encode(&self) -> [u8; BLOCK_HEADER] {
        let mut h = [0u8; BLOCK_HEADER];
        h[0..4].copy_from_slice(&self.magic.to_le_bytes());
        h[4..8].copy_from_slice(&self.len.to_le_bytes());
        h[8..16].copy_from_slice(&self.epoch.to_le_bytes());
        h[16..20].copy_from_slice(&self.source.to_le_bytes());
        h[20..24].copy_from_slice(&self.count.to_le_bytes());
        h[24..28].copy_from_slice(&self.body_crc.to_le_bytes());
        let c = crc(&h[0..28]);
        h[28..32].copy_from_slice(&c.to_le_bytes());
        h
    }

    /// Decode and check the header's own checksum and magic.
    pub fn decode(h: &[u8], magic: u32) -> Option<BlockHeader> {
        if h.len() < BLOCK_HEADER || u32_at(h, 0) != magic || crc(&h[0..28]) != u32_at(h, 28) {
            return None;
        }
        Some(BlockHeader {
            magic,
            len: u32_at(h, 4),
            epoch: u64_at(h, 8),
            source: u32_at(h, 16),
            count: u32_at(h, 20),
            body_crc: u32_at(h, 24),
        })
    }
}

/// What reading one block from a byte slice found.
#[derive(Debug)]
pub enum BlockRead<'a> {
    /// A whole, checksummed block.
    Block(BlockHeader, &'a [u8]),
    /// No more bytes.
    End,
    /// Bytes that are not a valid block (torn, truncated or damaged), and
    /// what is wrong with them.
    Bad(&'static str),
}

/// Read the block starting at `at`.
pub fn read_block(buf: &[u8], at: usize, magic: u32) -> BlockRead<'_> {
    read_block_checked(buf, at, magic, true)
}

/// Read the block starting at `at`; `check_body: false` skips the payload
/// checksum (for bytes already verified, e.g. by the recovery scan).
pub fn read_block_checked(buf: &[u8], at: usize, magic: u32, check_body: bool) -> BlockRead<'_> {
    let rest = &buf[at.min(buf.len())..];
    if rest.is_empty() {
        return BlockRead::End;
    }
    if rest.len() < BLOCK_HEADER {
        return BlockRead::Bad("truncated block header");
    }
    let Some(h) = BlockHeader::decode(rest, magic) else {
        return BlockRead::Bad("bad block header (magic or checksum)");
    };
    let end = BLOCK_HEADER + h.len as usize;
    if rest.len() < end {
        return BlockRead::Bad("truncated block payload");
    }
    let body = &rest[BLOCK_HEADER..end];
    if check_body && crc(body) != h.body_crc {
        return BlockRead::Bad("block payload checksum mismatch");
    }
    BlockRead::Block(h, body)
}

// ----------------------------------------------------------- log records

/// Bytes of a logged transaction's header (tid, writes).
pub const LOG_TXN_HEADER: usize = 12;

/// Length marking a delete in a log write entry.
pub const DELETE: u32 = u32::MAX;

/// Append one committed transaction to a log payload:
///
/// ```text
/// tid u64 | writes u32 | per write: table u32, key_len u16, value_len u32
///                                   (DELETE for a delete), key, value
/// ```
pub fn log_record_len<'a>(writes: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>) -> usize {
    LOG_TXN_HEADER + writes.map(|(k, v)| log_write_len(k, v)).sum::<usize>()
}

/// The bytes one write takes in a logged transaction.
#[inline]
pub fn log_write_len(key: &[u8], value: Option<&[u8]>) -> usize {
    10 + key.len() + value.map_or(0, <[u8]>::len)
}

pub fn put_log_header(out: &mut impl Sink, tid: u64, writes: u32) {
    // Fixed fields are gathered and appended at once (one length update
    // instead of one per field: this runs at every commit).
    let mut h = [0u8; LOG_TXN_HEADER];
    h[0..8].copy_from_slice(&tid.to_le_bytes());
    h[8..12].copy_from_slice(&writes.to_le_bytes());
    out.put(&h);
}

pub fn put_log_write(out: &mut impl Sink, table: u32, key: &[u8], value: Option<&[u8]>) {
    let mut h = [0u8; 10];
    h[0..4].copy_from_slice(&table.to_le_bytes());
    h[4..6].copy_from_slice(&(key.len() as u16).to_le_bytes());
    h[6..10].copy_from_slice(&value.map_or(DELETE, |v| v.len() as u32).to_le_bytes());
    out.put(&h);
    out.put(key);
    if let Some(v) = value {
        out.put(v);
    }
}

/// Where log records are appended: a `Vec`, or a log buffer.
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// One write of a logged transaction.
#[derive(Debug, PartialEq, Eq)]
pub struct LogWrite<'a> {
    pub table: u32,
    pub key: &'a [u8],
    /// `None`: a delete.
    pub value: Option<&'a [u8]>,
}

/// Decode a log payload, calling `f(tid, write)` for every write of every
/// transaction. A malformed payload (whose checksum passed) is a format
/// error.
pub fn decode_log_payload<'a>(
    mut p: &'a [u8],
    mut f: impl FnMut(u64, LogWrite<'a>),
) -> Result<u32, &'static str> {
    let mut txns = 0;
    while !p.is_empty() {
        if p.len() < 12 {
            return Err("short transaction header");
        }
        let tid = u64_at(p, 0);
        let n = u32_at(p, 8);
        p = &p[12..];
        for _ in 0..n {
            if p.len() < 10 {
                return Err("short write header");
            }
            let table = u32_at(p, 0);
            let kl = u16_at(p, 4) as usize;
            let vl = u32_at(p, 6);
            let vn = if vl == DELETE { 0 } else { vl as usize };
            if p.len() < 10 + kl + vn {
                return Err("write longer than its block");
            }
            let key = &p[10..10 + kl];
            let value = (vl != DELETE).then(|| &p[10 + kl..10 + kl + vn]);
            f(tid, LogWrite { table, key, value });
            p = &p[10 + kl + vn..];
        }
        txns += 1;
    }
    Ok(txns)
}

// ---------------------------------------------------- checkpoint records

/// Append one checkpointed record: `table u32 | key_len u16 | value_len u32
/// | tid u64 | key | value`.
pub fn put_ckpt_record(out: &mut impl Sink, table: u32, key: &[u8], tid: u64, value: &[u8]) {
    out.put(&table.to_le_bytes());
    out.put(&(key.len() as u16).to_le_bytes());
    out.put(&(value.len() as u32).to_le_bytes());
    out.put(&tid.to_le_bytes());
    out.put(key);
    out.put(value);
}

pub fn decode_ckpt_payload<'a>(
    mut p: &'a [u8],
    mut f: impl FnMut(u32, &'a [u8], u64, &'a [u8]),
) -> Result<(), &'static str> {
    while !p.is_empty() {
        if p.len() < 18 {
            return Err("short checkpoint record header");
        }
        let table = u32_at(p, 0);
        let kl = u16_at(p, 4) as usize;
        let vl = u32_at(p, 6) as usize;
        let tid = u64_at(p, 10);
        if p.len() < 18 + kl + vl {
            return Err("checkpoint record longer than its block");
        }
        f(table, &p[18..18 + kl], tid, &p[18 + kl..18 + kl + vl]);
        p = &p[18 + kl + vl..];
    }
    Ok(())
}

// ------------------------------------------------------ log file header

/// The alignment of every write to a log file (`O_DIRECT` needs the file
/// offset, the length and the memory of each write aligned).
pub const IO_ALIGN: usize = 4096;

/// Every log file starts with this 32-byte header:
///
/// ```text
/// 0   magic       8 bytes  "GRLOGv03" (or "GRLOGv02", "GRLOGv01")
/// 8   logger      u32
/// 12  align       u32      v02, v03: blocks start at multiples of this; v01: 0
/// 16  generation  u64      per logger, +1 for each new file
/// 24  reserved    u32      0
/// 28  crc         u32      CRC of bytes 0..28
/// ```
///
/// A v02 file's header is followed by zeros up to `align`, where its first
/// block starts; each block is followed by zeros up to the next multiple
/// of `align`. A v03 file has the v02 layout, and once closed it ends with
/// an end record ([`LogEnd`]), so a closed file that lost its end is
/// known to be short. A v01 file (written before granary used
/// `O_DIRECT`) has its blocks back to back from byte 32. Readers accept
/// all three.
pub const LOG_FILE_HEADER: usize = 32;
pub const LOG_FILE_MAGIC: &[u8; 8] = b"GRLOGv03";
pub const LOG_FILE_MAGIC_V2: &[u8; 8] = b"GRLOGv02";
pub const LOG_FILE_MAGIC_V1: &[u8; 8] = b"GRLOGv01";

/// A v03 header with alignment [`IO_ALIGN`].
pub fn encode_log_file_header(logger: u32, generation: u64) -> [u8; LOG_FILE_HEADER] {
    let mut h = [0u8; LOG_FILE_HEADER];
    h[0..8].copy_from_slice(LOG_FILE_MAGIC);
    h[8..12].copy_from_slice(&logger.to_le_bytes());
    h[12..16].copy_from_slice(&(IO_ALIGN as u32).to_le_bytes());
    h[16..24].copy_from_slice(&generation.to_le_bytes());
    let c = crc(&h[0..28]);
    h[28..32].copy_from_slice(&c.to_le_bytes());
    h
}

/// A decoded log file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFileHeader {
    pub logger: u32,
    pub generation: u64,
    /// Blocks start at multiples of this (v02, v03), or directly after
    /// each other from byte 32 (v01: 0).
    pub align: u32,
    /// v03: once closed, the file ends with an end record.
    pub ends: bool,
}

impl LogFileHeader {
    /// Where the first block starts.
    pub fn first_block(&self) -> u64 {
        if self.align == 0 {
            LOG_FILE_HEADER as u64
        } else {
            u64::from(self.align)
        }
    }

    /// Where the block after one ending at `end` starts.
    pub fn next_block(&self, end: u64) -> u64 {
        next_block(end, self.align)
    }
}

/// Where a block starts that follows one ending at `end`, in a file whose
/// blocks are aligned to `align` (0: not aligned, blocks back to back).
pub fn next_block(end: u64, align: u32) -> u64 {
    if align == 0 {
        end
    } else {
        end.div_ceil(u64::from(align)) * u64::from(align)
    }
}

/// The header, or `None` if it is damaged (or of an unknown version).
pub fn decode_log_file_header(h: &[u8]) -> Option<LogFileHeader> {
    if h.len() < LOG_FILE_HEADER || crc(&h[0..28]) != u32_at(h, 28) {
        return None;
    }
    let (align, ends) = match &h[0..8] {
        m if m == LOG_FILE_MAGIC || m == LOG_FILE_MAGIC_V2 => {
            let a = u32_at(h, 12);
            // A power of two from 512 B to 1 MiB.
            if !a.is_power_of_two() || !(512..=1 << 20).contains(&a) {
                return None;
            }
            (a, m == LOG_FILE_MAGIC)
        }
        m if m == LOG_FILE_MAGIC_V1 => (0, false),
        _ => return None,
    };
    Some(LogFileHeader {
        logger: u32_at(h, 8),
        generation: u64_at(h, 16),
        align,
        ends,
    })
}

// ---------------------------------------------------- log file end record

/// The end record of a closed v03 log file: a block with magic
/// [`BLOCK_MAGIC_END`], the last thing in the file. A logger appends it
/// (and syncs it) before it renames `data.log` to its closed name;
/// recovery appends one when it retires a `data.log`. A closed v03 file
/// that does not end with one was cut short.
///
/// ```text
/// header  epoch   d: every block of epoch ≤ d from this logger's workers
///                 is in this file or an older generation
///         source  the logger
///         count   the log blocks before this record
/// payload 0   generation  u64  the file header's
///         8   min_epoch   u64  of the log blocks (0 if none)
///         16  max_epoch   u64  of the log blocks (0 if none)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogEnd {
    pub durable_epoch: u64,
    pub logger: u32,
    pub blocks: u32,
    pub generation: u64,
    pub min_epoch: u64,
    pub max_epoch: u64,
}

/// Bytes of an end record's payload.
pub const LOG_END_PAYLOAD: usize = 24;

impl LogEnd {
    /// The payload; the header is [`LogEnd::header`] of it.
    pub fn payload(&self) -> [u8; LOG_END_PAYLOAD] {
        let mut p = [0u8; LOG_END_PAYLOAD];
        p[0..8].copy_from_slice(&self.generation.to_le_bytes());
        p[8..16].copy_from_slice(&self.min_epoch.to_le_bytes());
        p[16..24].copy_from_slice(&self.max_epoch.to_le_bytes());
        p
    }

    pub fn header(&self) -> BlockHeader {
        BlockHeader {
            magic: BLOCK_MAGIC_END,
            len: LOG_END_PAYLOAD as u32,
            epoch: self.durable_epoch,
            source: self.logger,
            count: self.blocks,
            body_crc: crc(&self.payload()),
        }
    }

    /// The whole record, header then payload (unpadded).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = self.header().encode().to_vec();
        b.extend_from_slice(&self.payload());
        b
    }

    /// From a checked end block: `None` if its payload is not an end
    /// record's.
    pub fn decode(h: &BlockHeader, body: &[u8]) -> Option<LogEnd> {
        if h.magic != BLOCK_MAGIC_END || body.len() != LOG_END_PAYLOAD {
            return None;
        }
        Some(LogEnd {
            durable_epoch: h.epoch,
            logger: h.source,
            blocks: h.count,
            generation: u64_at(body, 0),
            min_epoch: u64_at(body, 8),
            max_epoch: u64_at(body, 16),
        })
    }
}

// ---------------------------------------------------------------- pepoch

/// The `pepoch` file: two 512-byte slots written alternately, so a torn
/// write of one leaves the other. The valid slot with the larger sequence
/// number wins. It is the root of what recovery must find (version 3):
///
/// ```text
/// 0   magic       u32  "GRPE"
/// 4   version     u32  3 (2 and 1: see below)
/// 8   seq         u64  write counter
/// 16  epoch       u64  e_p: every transaction of epoch ≤ e_p is durable
/// 24  loggers     u32  n
/// 28  voids       u32  entries the `voids` file holds (at least)
/// 32  checkpoint  u64  e_l of the checkpoint the durable state needs
///                      (its logs before e_l may be deleted); 0: none
/// 40  n × (generation u64, length u64, low u64): per logger, the log file
///     and its length that were fsynced when that logger reached e_p, and
///     the oldest generation recovery needs: every generation from low to
///     generation must exist
/// 40+24n  crc     u32  CRC of bytes 0..40+24n
/// ```
///
/// Versions 1 and 2 (written before 2026-11-25) have no `voids`,
/// `checkpoint` or `low`: bytes 28..32 are 0, and the n × (generation,
/// length) pairs start at 32, with the CRC at 32+16n. Version 1's
/// positions name v01 log files.
pub const PEPOCH_SLOT: usize = 512;
pub const PEPOCH_MAGIC: u32 = u32::from_le_bytes(*b"GRPE");
/// The most loggers whose positions fit in one version 3 pepoch slot.
pub const MAX_LOGGERS: usize = (PEPOCH_SLOT - 44) / 24;
/// The most loggers a version 1 or 2 slot can hold.
const MAX_LOGGERS_V2: usize = (PEPOCH_SLOT - 36) / 16;
/// The version granary writes.
pub const PEPOCH_VERSION: u32 = 3;
/// A `low` that is not known: the directory was last recovered from an
/// older version, and has not been checkpointed since. Recovery then
/// checks that logger as before version 3 (its generation g only).
pub const LOW_UNKNOWN: u64 = u64::MAX;

/// One pepoch slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pepoch {
    /// 3; or 2, 1 if written by an older granary (then `voids` and
    /// `checkpoint` are 0 and `lows` is empty).
    pub version: u32,
    pub seq: u64,
    pub epoch: u64,
    /// Per logger: (generation, durable length) of its log file.
    pub positions: Vec<(u64, u64)>,
    /// The number of entries `voids` holds (at least).
    pub voids: u32,
    /// e_l of the checkpoint the durable state needs; 0: none.
    pub checkpoint: u64,
    /// Per logger: the oldest log file generation recovery needs (empty
    /// before version 3: unknown).
    pub lows: Vec<u64>,
}

impl Pepoch {
    /// Encode in the slot layout of `self.version`.
    pub fn encode(&self) -> [u8; PEPOCH_SLOT] {
        let mut s = [0u8; PEPOCH_SLOT];
        s[0..4].copy_from_slice(&PEPOCH_MAGIC.to_le_bytes());
        s[4..8].copy_from_slice(&self.version.to_le_bytes());
        s[8..16].copy_from_slice(&self.seq.to_le_bytes());
        s[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        s[24..28].copy_from_slice(&(self.positions.len() as u32).to_le_bytes());
        let v3 = self.version >= 3;
        let mut at = 32;
        if v3 {
            s[28..32].copy_from_slice(&self.voids.to_le_bytes());
            s[32..40].copy_from_slice(&self.checkpoint.to_le_bytes());
            at = 40;
        }
        for (k, &(g, l)) in self.positions.iter().enumerate() {
            s[at..at + 8].copy_from_slice(&g.to_le_bytes());
            s[at + 8..at + 16].copy_from_slice(&l.to_le_bytes());
            at += 16;
            if v3 {
                let low = self.lows.get(k).copied().unwrap_or(0);
                s[at..at + 8].copy_from_slice(&low.to_le_bytes());
                at += 8;
            }
        }
        let c = crc(&s[0..at]);
        s[at..at + 4].copy_from_slice(&c.to_le_bytes());
        s
    }

    pub fn decode(s: &[u8]) -> Option<Pepoch> {
        if s.len() < 36 || u32_at(s, 0) != PEPOCH_MAGIC {
            return None;
        }
        let version = u32_at(s, 4);
        let (first, entry, max) = match version {
            1 | 2 => (32, 16, MAX_LOGGERS_V2),
            3 => (40, 24, MAX_LOGGERS),
            _ => return None,
        };
        let n = u32_at(s, 24) as usize;
        if n > max {
            return None;
        }
        let end = first + entry * n;
        if s.len() < end + 4 || crc(&s[0..end]) != u32_at(s, end) {
            return None;
        }
        let positions = (0..n)
            .map(|i| {
                let at = first + entry * i;
                (u64_at(s, at), u64_at(s, at + 8))
            })
            .collect();
        let v3 = version == 3;
        Some(Pepoch {
            version,
            seq: u64_at(s, 8),
            epoch: u64_at(s, 16),
            positions,
            voids: if v3 { u32_at(s, 28) } else { 0 },
            checkpoint: if v3 { u64_at(s, 32) } else { 0 },
            lows: if v3 {
                (0..n).map(|i| u64_at(s, first + entry * i + 16)).collect()
            } else {
                Vec::new()
            },
        })
    }

    /// Logger `k`'s oldest needed generation, if known: not before
    /// version 3, nor while it is [`LOW_UNKNOWN`].
    pub fn low(&self, k: usize) -> Option<u64> {
        self.lows.get(k).copied().filter(|&l| l != LOW_UNKNOWN)
    }

    /// The length of a log file with no blocks, in the format of the
    /// files this pepoch names.
    pub fn empty_log_len(&self) -> u64 {
        if self.version == 1 {
            LOG_FILE_HEADER as u64
        } else {
            IO_ALIGN as u64
        }
    }

    /// The current value in a two-slot pepoch file's bytes.
    pub fn decode_file(b: &[u8]) -> Option<Pepoch> {
        let a = b.get(..PEPOCH_SLOT).and_then(Pepoch::decode);
        let c = b.get(PEPOCH_SLOT..2 * PEPOCH_SLOT).and_then(Pepoch::decode);
        match (a, c) {
            (Some(a), Some(c)) => Some(if a.seq >= c.seq { a } else { c }),
            (a, c) => a.or(c),
        }
    }
}

/// What recovery must find besides the log positions, recorded in every
/// pepoch write (see [`Pepoch`]). A checkpoint changes it (and has it
/// written) before it deletes anything it supersedes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ledger {
    /// e_l of the checkpoint the durable state needs; 0: none.
    pub checkpoint: u64,
    /// Per logger: the oldest log file generation recovery needs.
    pub lows: Vec<u64>,
    /// Entries in `voids`.
    pub voids: u32,
}

impl Ledger {
    /// Logger `k`'s oldest needed generation, if known.
    pub fn low(&self, k: usize) -> Option<u64> {
        self.lows.get(k).copied().filter(|&l| l != LOW_UNKNOWN)
    }
}

// --------------------------------------------------------------- catalog

/// The table catalog, `tables`: one entry per created table, appended and
/// fsynced before `create_table` returns:
/// `len u32 | crc u32 (of the rest) | id u32 | name (len − 4 bytes)`.
pub fn encode_catalog_entry(id: u32, name: &str) -> Vec<u8> {
    let mut body = id.to_le_bytes().to_vec();
    body.extend_from_slice(name.as_bytes());
    let mut e = (body.len() as u32).to_le_bytes().to_vec();
    e.extend_from_slice(&crc(&body).to_le_bytes());
    e.extend_from_slice(&body);
    e
}

/// Catalog entries: (table id, name).
pub type Catalog = Vec<(u32, String)>;

/// Entries, and the length of the valid prefix (a torn last entry is an
/// unacknowledged `create_table`).
pub fn decode_catalog(b: &[u8]) -> Result<(Catalog, usize), &'static str> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= b.len() {
        let len = u32_at(b, at) as usize;
        let end = at + 8 + len;
        if end > b.len() {
            // A write that did not finish: the create_table was never
            // acknowledged.
            break;
        }
        if len < 4 || crc(&b[at + 8..end]) != u32_at(b, at + 4) {
            return Err("damaged table catalog entry");
        }
        let id = u32_at(b, at + 8);
        let name = std::str::from_utf8(&b[at + 12..end]).map_err(|_| "table name is not UTF-8")?;
        out.push((id, name.to_string()));
        at = end;
    }
    Ok((out, at))
}

// ----------------------------------------------------------------- voids

/// The `voids` file: epoch ranges a recovery found written but not
/// durable, never to be replayed. Entries of `lo u64 | hi u64 | crc u32`
/// (CRC of the 16 bytes before it); a short last entry was never relied
/// on, a whole entry with a bad CRC is damage.
pub fn encode_void(lo: u64, hi: u64) -> [u8; 20] {
    let mut e = [0u8; 20];
    e[0..8].copy_from_slice(&lo.to_le_bytes());
    e[8..16].copy_from_slice(&hi.to_le_bytes());
    let c = crc(&e[0..16]);
    e[16..20].copy_from_slice(&c.to_le_bytes());
    e
}

pub fn decode_voids(b: &[u8]) -> Result<Vec<(u64, u64)>, &'static str> {
    let mut out = Vec::new();
    for e in b.chunks_exact(20) {
        if crc(&e[0..16]) != u32_at(e, 16) {
            return Err("damaged voids entry");
        }
        out.push((u64_at(e, 0), u64_at(e, 8)));
    }
    // A short last entry is a write that did not finish (its recovery
    // started no new epoch): ignored, and cut off before the next append.
    Ok(out)
}

// -------------------------------------------------------------- manifest

/// A checkpoint's `MANIFEST`, written (then renamed into place) only when
/// the checkpoint is complete and e_h ≤ e_p:
///
/// ```text
/// 0   magic     8 bytes "GRCKPv02" (or "GRCKPv01")
/// 8   e_l       u64  records of epoch ≥ e_l were skipped (the log has them)
/// 16  e_h       u64  the epoch when the last record was written
/// 24  files     u32  n
/// 28  tables    u32  t
/// 32  n × (bytes u64, blocks u64, records u64)  per file part.<i>
///     t × (id u32, name_len u16, name)
///     crc u32 of everything before it
/// ```
///
/// v02: in the part files, every block starts at a multiple of
/// [`IO_ALIGN`], zeros padding the gap (written with `O_DIRECT`); v01:
/// blocks back to back. Readers accept both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The part files' block alignment: [`IO_ALIGN`] (v02) or 0 (v01).
    pub align: u32,
    pub low: u64,
    pub high: u64,
    /// Per file: (bytes, blocks, records).
    pub files: Vec<(u64, u64, u64)>,
    pub tables: Vec<(u32, String)>,
}

pub const MANIFEST_MAGIC: &[u8; 8] = b"GRCKPv02";
pub const MANIFEST_MAGIC_V1: &[u8; 8] = b"GRCKPv01";

impl Manifest {
    /// v02 if `align` is [`IO_ALIGN`], else v01.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = if self.align == IO_ALIGN as u32 {
            MANIFEST_MAGIC.to_vec()
        } else {
            MANIFEST_MAGIC_V1.to_vec()
        };
        b.extend_from_slice(&self.low.to_le_bytes());
        b.extend_from_slice(&self.high.to_le_bytes());
        b.extend_from_slice(&(self.files.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.tables.len() as u32).to_le_bytes());
        for &(x, y, z) in &self.files {
            for v in [x, y, z] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        for (id, name) in &self.tables {
            b.extend_from_slice(&id.to_le_bytes());
            b.extend_from_slice(&(name.len() as u16).to_le_bytes());
            b.extend_from_slice(name.as_bytes());
        }
        let c = crc(&b);
        b.extend_from_slice(&c.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<Manifest> {
        if b.len() < 36 {
            return None;
        }
        let align = match &b[0..8] {
            m if m == MANIFEST_MAGIC => IO_ALIGN as u32,
            m if m == MANIFEST_MAGIC_V1 => 0,
            _ => return None,
        };
        let end = b.len() - 4;
        if crc(&b[..end]) != u32_at(b, end) {
            return None;
        }
        let n = u32_at(b, 24) as usize;
        let t = u32_at(b, 28) as usize;
        let mut at = 32;
        let mut files = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            if at + 24 > end {
                return None;
            }
            files.push((u64_at(b, at), u64_at(b, at + 8), u64_at(b, at + 16)));
            at += 24;
        }
        let mut tables = Vec::new();
        for _ in 0..t {
            if at + 6 > end {
                return None;
            }
            let id = u32_at(b, at);
            let l = u16_at(b, at + 4) as usize;
            if at + 6 + l > end {
                return None;
            }
            let name = std::str::from_utf8(&b[at + 6..at + 6 + l]).ok()?;
            tables.push((id, name.to_string()));
            at += 6 + l;
        }
        (at == end).then_some(Manifest {
            align,
            low: u64_at(b, 8),
            high: u64_at(b, 16),
            files,
            tables,
        })
    }
}

// ----------------------------------------------------------------- names

pub const PEPOCH_FILE: &str = "pepoch";
pub const CATALOG_FILE: &str = "tables";
pub use granary_storage::fs::LOCK_FILE;
pub const CURRENT_LOG: &str = "data.log";
pub const MANIFEST_FILE: &str = "MANIFEST";
pub const VOIDS_FILE: &str = "voids";

/// `log.<i>`: logger i's directory.
pub fn logger_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("log.{i}"))
}

/// `old_data.<max epoch>.g<generation>`: a finished log file.
pub fn old_log_name(max_epoch: u64, generation: u64) -> String {
    format!("old_data.{max_epoch}.g{generation}")
}

/// `(max epoch, generation)` of a finished log file's name.
pub fn parse_old_log_name(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix("old_data.")?;
    let (e, g) = rest.split_once(".g")?;
    Some((e.parse().ok()?, g.parse().ok()?))
}

/// `ckpt.<e_l>`: a checkpoint's directory.
pub fn ckpt_dir_name(low: u64) -> String {
    format!("ckpt.{low}")
}

pub fn parse_ckpt_dir_name(name: &str) -> Option<u64> {
    name.strip_prefix("ckpt.")?.parse().ok()
}

/// `part.<i>`: checkpoint file i.
pub fn ckpt_part_name(i: usize) -> String {
    format!("part.{i}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_round_trip_and_damage() {
        let body = b"hello world".to_vec();
        let h = BlockHeader {
            magic: BLOCK_MAGIC_LOG,
            len: body.len() as u32,
            epoch: 7,
            source: 3,
            count: 1,
            body_crc: crc(&body),
        };
        let mut b = h.encode().to_vec();
        b.extend_from_slice(&body);
        match read_block(&b, 0, BLOCK_MAGIC_LOG) {
            BlockRead::Block(g, p) => {
                assert_eq!(g, h);
                assert_eq!(p, &body[..]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_block(&b, b.len(), BLOCK_MAGIC_LOG),
            BlockRead::End
        ));
        assert!(matches!(
            read_block(&b[..b.len() - 1], 0, BLOCK_MAGIC_LOG),
            BlockRead::Bad(_)
        ));
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x10;
            assert!(
                matches!(read_block(&d, 0, BLOCK_MAGIC_LOG), BlockRead::Bad(_)),
                "flip at byte {i} went unnoticed"
            );
        }
        assert!(matches!(
            read_block(&b, 0, BLOCK_MAGIC_CKPT),
            BlockRead::Bad(_)
        ));
    }

    #[test]
    fn log_payload_round_trip() {
        let mut p = Vec::new();
        put_log_header(&mut p, 99, 2);
        put_log_write(&mut p, 1, b"k1", Some(b"v1"));
        put_log_write(&mut p, 2, b"k2", None);
        assert_eq!(
            p.len(),
            log_record_len([(&b"k1"[..], Some(&b"v1"[..])), (&b"k2"[..], None)].into_iter())
        );
        let mut seen = Vec::new();
        let n = decode_log_payload(&p, |t, w| {
            seen.push((t, w.table, w.key.to_vec(), w.value.map(<[u8]>::to_vec)))
        })
        .unwrap();
        assert_eq!(n, 1);
        assert_eq!(
            seen,
            vec![
                (99, 1, b"k1".to_vec(), Some(b"v1".to_vec())),
                (99, 2, b"k2".to_vec(), None)
            ]
        );
        assert!(decode_log_payload(&p[..p.len() - 1], |_, _| {}).is_err());
    }

    #[test]
    fn pepoch_slots() {
        let a = Pepoch {
            version: 1,
            seq: 4,
            epoch: 10,
            positions: vec![(1, 100), (2, 200)],
            voids: 0,
            checkpoint: 0,
            lows: Vec::new(),
        };
        let b = Pepoch {
            version: PEPOCH_VERSION,
            seq: 5,
            epoch: 11,
            positions: vec![(1, 150), (2, 250)],
            voids: 3,
            checkpoint: 9,
            lows: vec![1, 0],
        };
        let mut f = a.encode().to_vec();
        f.extend_from_slice(&b.encode());
        assert_eq!(Pepoch::decode_file(&f), Some(b.clone()));
        // A torn newer slot leaves the older one.
        f[PEPOCH_SLOT + 20] ^= 1;
        assert_eq!(Pepoch::decode_file(&f), Some(a.clone()));
        f[20] ^= 1;
        assert_eq!(Pepoch::decode_file(&f), None);
        assert_eq!(a.empty_log_len(), LOG_FILE_HEADER as u64);
        assert_eq!(b.empty_log_len(), IO_ALIGN as u64);
        // Version 2: the pairs start at 32, and the new fields read as 0.
        let v2 = Pepoch {
            version: 2,
            ..a.clone()
        };
        let e = v2.encode();
        assert_eq!(u64_at(&e, 32), 1);
        assert_eq!(Pepoch::decode(&e), Some(v2));
        // Version 3 holds 19 loggers; version 2 held 29.
        let full = Pepoch {
            positions: vec![(7, 8); MAX_LOGGERS],
            lows: vec![6; MAX_LOGGERS],
            ..b.clone()
        };
        assert_eq!(Pepoch::decode(&full.encode()), Some(full));
        assert_eq!((MAX_LOGGERS, MAX_LOGGERS_V2), (19, 29));
        // A flip in a low generation is caught.
        let mut d = b.encode();
        d[40 + 16] ^= 1;
        assert_eq!(Pepoch::decode(&d), None);
    }

    #[test]
    fn log_end_record() {
        let e = LogEnd {
            durable_epoch: 41,
            logger: 2,
            blocks: 17,
            generation: 5,
            min_epoch: 30,
            max_epoch: 42,
        };
        let b = e.encode();
        let BlockRead::Block(h, body) = read_block(&b, 0, BLOCK_MAGIC_END) else {
            panic!("not a block");
        };
        assert_eq!(LogEnd::decode(&h, body), Some(e));
        // Not a log block, and a log block is not an end.
        assert!(matches!(
            read_block(&b, 0, BLOCK_MAGIC_LOG),
            BlockRead::Bad(_)
        ));
        let log = BlockHeader {
            magic: BLOCK_MAGIC_LOG,
            ..h
        };
        assert_eq!(LogEnd::decode(&log, body), None);
        assert_eq!(LogEnd::decode(&h, &body[..20]), None);
    }

    #[test]
    fn log_file_headers_of_every_version() {
        let h = encode_log_file_header(3, 17);
        let d = decode_log_file_header(&h).unwrap();
        assert_eq!((d.logger, d.generation, d.align), (3, 17, IO_ALIGN as u32));
        assert!(d.ends);
        // v02: the same layout, closed files without an end record.
        let mut v2 = h;
        v2[0..8].copy_from_slice(LOG_FILE_MAGIC_V2);
        let c = crc(&v2[0..28]);
        v2[28..32].copy_from_slice(&c.to_le_bytes());
        let d2 = decode_log_file_header(&v2).unwrap();
        assert_eq!((d2.align, d2.ends), (IO_ALIGN as u32, false));
        assert_eq!(d.first_block(), IO_ALIGN as u64);
        assert_eq!(d.next_block(IO_ALIGN as u64 + 1), 2 * IO_ALIGN as u64);
        assert_eq!(d.next_block(2 * IO_ALIGN as u64), 2 * IO_ALIGN as u64);
        // v01: blocks back to back from byte 32.
        let mut v1 = h;
        v1[0..8].copy_from_slice(LOG_FILE_MAGIC_V1);
        v1[12..16].fill(0);
        let c = crc(&v1[0..28]);
        v1[28..32].copy_from_slice(&c.to_le_bytes());
        let d1 = decode_log_file_header(&v1).unwrap();
        assert_eq!((d1.align, d1.first_block(), d1.next_block(77)), (0, 32, 77));
        // A v02 alignment that is not a power of two in [512, 1 MiB].
        for bad in [0u32, 100, 256, 3 << 12, 2 << 20] {
            let mut x = h;
            x[12..16].copy_from_slice(&bad.to_le_bytes());
            let c = crc(&x[0..28]);
            x[28..32].copy_from_slice(&c.to_le_bytes());
            assert_eq!(decode_log_file_header(&x), None, "align {bad}");
        }
        let mut x = h;
        x[7] = b'4';
        let c = crc(&x[0..28]);
        x[28..32].copy_from_slice(&c.to_le_bytes());
        assert_eq!(decode_log_file_header(&x), None, "unknown version");
        assert_eq!(decode_log_file_header(&h[..31]), None);
    }

    #[test]
    fn catalog_and_manifest() {
        let mut c = encode_catalog_entry(0, "a");
        c.extend(encode_catalog_entry(1, "bee"));
        let full = c.len();
        c.extend(&encode_catalog_entry(2, "torn")[..5]);
        let (t, n) = decode_catalog(&c).unwrap();
        assert_eq!(t, vec![(0, "a".into()), (1, "bee".into())]);
        assert_eq!(n, full);
        let m = Manifest {
            align: IO_ALIGN as u32,
            low: 5,
            high: 9,
            files: vec![(1, 2, 3)],
            tables: t,
        };
        assert_eq!(Manifest::decode(&m.encode()), Some(m.clone()));
        assert_eq!(&m.encode()[..8], MANIFEST_MAGIC);
        let v1 = Manifest {
            align: 0,
            ..m.clone()
        };
        assert_eq!(&v1.encode()[..8], MANIFEST_MAGIC_V1);
        assert_eq!(Manifest::decode(&v1.encode()), Some(v1));
        let mut d = m.encode();
        d[9] ^= 1;
        assert_eq!(Manifest::decode(&d), None);
        assert_eq!(parse_old_log_name(&old_log_name(12, 3)), Some((12, 3)));
        assert_eq!(parse_ckpt_dir_name(&ckpt_dir_name(77)), Some(77));
    }
}
