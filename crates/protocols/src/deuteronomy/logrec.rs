//! The recovery log's records (deuteronomy-cidr15 §3.1, §4.3): written by
//! the TC, read back by the TC Proxy (to apply committed writes to the
//! DC) and by recovery. The one place that knows their layout.
//!
//! All integers are little-endian:
//!
//! * a version record: kind ([`VERSION`], 1 byte), the writer's timestamp
//!   (8), the table (4), the key's length (4), the value's length (4,
//!   [`DELETED`] for a deletion), then the key and the value;
//! * an outcome record: kind ([`COMMIT`] or [`ABORT`], 1 byte), the
//!   transaction's timestamp (8).

/// Record kinds.
pub(super) const VERSION: u8 = 1;
pub(super) const COMMIT: u8 = 2;
pub(super) const ABORT: u8 = 3;
/// A version record's header: kind, ts, table, key length, value length.
pub(super) const HEADER: usize = 1 + 8 + 4 + 4 + 4;
/// An outcome record: kind, ts (also the prefix every record starts with).
pub(super) const OUTCOME: usize = 1 + 8;
/// The value length of a deletion.
pub(super) const DELETED: u32 = u32::MAX;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// A record's kind and timestamp, from its first [`OUTCOME`] bytes.
pub(super) fn kind_and_ts(b: &[u8]) -> (u8, u64) {
    (
        b[0],
        u64::from_le_bytes(b[1..9].try_into().expect("8 bytes")),
    )
}

/// A version record's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct VersionHeader {
    pub table: u32,
    pub klen: u32,
    /// [`DELETED`] for a deletion.
    pub vlen: u32,
}

impl VersionHeader {
    /// From the first [`HEADER`] bytes of a version record.
    pub fn parse(h: &[u8]) -> VersionHeader {
        VersionHeader {
            table: u32_at(h, 9),
            klen: u32_at(h, 13),
            vlen: u32_at(h, 17),
        }
    }

    /// Whether the record is a deletion.
    pub fn deleted(&self) -> bool {
        self.vlen == DELETED
    }

    /// The value's bytes in the record (0 for a deletion).
    pub fn value_len(&self) -> usize {
        if self.deleted() {
            0
        } else {
            self.vlen as usize
        }
    }

    /// The whole record's length.
    pub fn record_len(&self) -> usize {
        HEADER + self.klen as usize + self.value_len()
    }
}

/// Append a version record of `key` (`value` `None`: a deletion) to `r`.
pub(super) fn push_version(r: &mut Vec<u8>, ts: u64, table: u32, key: &[u8], value: Option<&[u8]>) {
    r.push(VERSION);
    r.extend_from_slice(&ts.to_le_bytes());
    r.extend_from_slice(&table.to_le_bytes());
    r.extend_from_slice(&(key.len() as u32).to_le_bytes());
    r.extend_from_slice(&value.map_or(DELETED, |v| v.len() as u32).to_le_bytes());
    r.extend_from_slice(key);
    r.extend_from_slice(value.unwrap_or_default());
}

/// Append an outcome record to `r`.
pub(super) fn push_outcome(r: &mut Vec<u8>, committed: bool, ts: u64) {
    r.push(if committed { COMMIT } else { ABORT });
    r.extend_from_slice(&ts.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written() {
        let mut r = Vec::new();
        push_version(&mut r, 7, 3, b"key", Some(b"value"));
        push_version(&mut r, 8, 4, b"gone", None);
        push_outcome(&mut r, true, 7);
        push_outcome(&mut r, false, 8);
        let h = VersionHeader::parse(&r);
        assert_eq!(kind_and_ts(&r), (VERSION, 7));
        assert_eq!(
            h,
            VersionHeader {
                table: 3,
                klen: 3,
                vlen: 5
            }
        );
        assert_eq!(&r[HEADER..HEADER + 3], b"key");
        assert_eq!(&r[HEADER + 3..h.record_len()], b"value");
        let at = h.record_len();
        let h = VersionHeader::parse(&r[at..]);
        assert_eq!(kind_and_ts(&r[at..]), (VERSION, 8));
        assert!(h.deleted() && h.value_len() == 0 && h.record_len() == HEADER + 4);
        let at = at + h.record_len();
        assert_eq!(kind_and_ts(&r[at..]), (COMMIT, 7));
        assert_eq!(kind_and_ts(&r[at + OUTCOME..]), (ABORT, 8));
        assert_eq!(r.len(), at + 2 * OUTCOME);
    }
}
