//! Where the DC's records live in etcd's one flat, ordered key space.
//!
//! ```text
//! data key:  namespace | 'd' | table (4 bytes, big-endian) | key
//! value:     lsn (8 bytes, big-endian) | value bytes
//! meta key:  namespace | 'm' | "rssp"      value: lsn (8 bytes, big-endian)
//! ```
//!
//! A table's keys share the prefix `namespace | 'd' | table`, and etcd
//! orders keys bytewise, so a range over one table is a range over that
//! prefix, in the table's own key order. The meta key sorts after every
//! data key (`'m' > 'd'`), outside every table's range.

use std::ops::Bound;

/// The tag byte of data keys.
const DATA: u8 = b'd';
/// The meta key's suffix (after the namespace).
const RSSP: &[u8] = b"mrssp";

/// One DC's keys under its namespace.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    namespace: Vec<u8>,
}

impl Keys {
    pub(crate) fn new(namespace: &[u8]) -> Keys {
        Keys {
            namespace: namespace.to_vec(),
        }
    }

    /// Everything this DC holds shares this prefix.
    pub(crate) fn namespace(&self) -> &[u8] {
        &self.namespace
    }

    /// `namespace | 'd' | table`.
    pub(crate) fn table_prefix(&self, table: u32) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.namespace.len() + 5);
        k.extend_from_slice(&self.namespace);
        k.push(DATA);
        k.extend_from_slice(&table.to_be_bytes());
        k
    }

    /// The etcd key of `key` in `table`.
    pub(crate) fn data(&self, table: u32, key: &[u8]) -> Vec<u8> {
        let mut k = self.table_prefix(table);
        k.extend_from_slice(key);
        k
    }

    /// The table's own key inside etcd key `k` (one of `table`'s).
    pub(crate) fn user_key<'k>(&self, k: &'k [u8]) -> &'k [u8] {
        &k[self.namespace.len() + 5..]
    }

    /// The key that holds the RSSP.
    pub(crate) fn rssp(&self) -> Vec<u8> {
        let mut k = self.namespace.clone();
        k.extend_from_slice(RSSP);
        k
    }

    /// The etcd range `[start, end)` holding `table`'s keys in `lo..hi`,
    /// or `None` if it is empty.
    pub(crate) fn range(
        &self,
        table: u32,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Option<(Vec<u8>, Vec<u8>)> {
        let prefix = self.table_prefix(table);
        let with = |k: &[u8], zero: bool| {
            let mut v = prefix.clone();
            v.extend_from_slice(k);
            if zero {
                // The least key after `k`.
                v.push(0);
            }
            v
        };
        let start = match lo {
            Bound::Included(k) => with(k, false),
            Bound::Excluded(k) => with(k, true),
            Bound::Unbounded => prefix.clone(),
        };
        let end = match hi {
            Bound::Included(k) => with(k, true),
            Bound::Excluded(k) => with(k, false),
            Bound::Unbounded => prefix_end(&prefix),
        };
        (start < end).then_some((start, end))
    }
}

/// The least key above every key that starts with `prefix` (etcd's
/// `range_end` for a prefix). `prefix` has a byte below 0xff (every
/// prefix here holds the tag byte `'d'`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(&last) = end.last() {
        if last < 0xff {
            *end.last_mut().expect("not empty") += 1;
            return end;
        }
        end.pop();
    }
    unreachable!("a prefix of only 0xff bytes")
}

/// `lsn | value`.
pub(crate) fn encode_value(lsn: u64, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + value.len());
    v.extend_from_slice(&lsn.to_be_bytes());
    v.extend_from_slice(value);
    v
}

/// `(lsn, value)` from a stored value, or `None` if it is too short to
/// be one of ours.
pub(crate) fn decode_value(v: &[u8]) -> Option<(u64, &[u8])> {
    let (lsn, value) = v.split_at_checked(8)?;
    Some((u64::from_be_bytes(lsn.try_into().ok()?), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k() -> Keys {
        Keys::new(b"ns/")
    }

    #[test]
    fn a_tables_keys_share_its_prefix_and_sort_as_its_keys() {
        let k = k();
        let (a, b, c) = (k.data(1, b"a"), k.data(1, b"ab"), k.data(2, b""));
        assert!(a.starts_with(&k.table_prefix(1)) && b.starts_with(&k.table_prefix(1)));
        assert!(a < b && b < c, "table order, then key order");
        assert_eq!(k.user_key(&b), b"ab");
        let rssp = k.rssp();
        assert!(
            rssp > k.data(u32::MAX, &[0xff; 8]),
            "meta sorts after every table"
        );
        assert!(rssp.starts_with(k.namespace()));
    }

    #[test]
    fn ranges_cover_exactly_the_bounds_asked() {
        let k = k();
        let inside = |r: &(Vec<u8>, Vec<u8>), key: &[u8]| {
            let e = k.data(7, key);
            r.0 <= e && e < r.1
        };
        let all = k.range(7, Bound::Unbounded, Bound::Unbounded).unwrap();
        assert!(inside(&all, b"") && inside(&all, &[0xff; 20]));
        assert!(all.1 <= k.data(8, b""), "not into the next table");
        assert!(k.data(6, &[0xff; 4]) < all.0, "not into the previous one");
        let r = k
            .range(7, Bound::Excluded(b"b"), Bound::Included(b"d"))
            .unwrap();
        assert!(!inside(&r, b"b") && inside(&r, b"b\0") && inside(&r, b"c"));
        assert!(inside(&r, b"d") && !inside(&r, b"d\0"));
        let r = k
            .range(7, Bound::Included(b"b"), Bound::Excluded(b"d"))
            .unwrap();
        assert!(inside(&r, b"b") && !inside(&r, b"d"));
        assert!(k
            .range(7, Bound::Included(b"d"), Bound::Excluded(b"d"))
            .is_none());
        assert!(k
            .range(7, Bound::Excluded(b"d"), Bound::Included(b"d"))
            .is_none());
        let last = k
            .range(u32::MAX, Bound::Unbounded, Bound::Unbounded)
            .unwrap();
        assert_eq!(last.1, b"ns/e".to_vec(), "the carry reaches the tag");
    }

    #[test]
    fn values_carry_their_lsn() {
        let v = encode_value(0x0102_0304_0506_0708, b"xyz");
        assert_eq!(decode_value(&v), Some((0x0102_0304_0506_0708, &b"xyz"[..])));
        assert_eq!(
            decode_value(&v[..8]),
            Some((0x0102_0304_0506_0708, &b""[..]))
        );
        assert_eq!(decode_value(&v[..7]), None);
    }
}
