//! Order-preserving key encoding: composite keys whose byte order is the
//! order of their fields.
//!
//! * unsigned integers: big-endian;
//! * signed integers: big-endian with the sign bit flipped;
//! * byte strings and strings: each `0x00` byte escaped as `0x00 0xFF`,
//!   then terminated by `0x00 0x00`, so a shorter string sorts before its
//!   extensions and fields after it stay aligned.
//!
//! ```
//! use granary_api::keys::{Key, KeyReader};
//! let a = Key::new().u32(1).str("smith").u64(7).finish();
//! let b = Key::new().u32(1).str("smithe").u64(0).finish();
//! assert!(a < b);
//! let mut r = KeyReader::new(&a);
//! assert_eq!((r.u32(), r.string(), r.u64()), (Some(1), Some("smith".to_string()), Some(7)));
//! ```

/// Builds a composite key field by field.
#[derive(Clone, Debug, Default)]
pub struct Key(Vec<u8>);

impl Key {
    pub fn new() -> Key {
        Key(Vec::with_capacity(32))
    }

    pub fn u8(mut self, x: u8) -> Key {
        self.0.push(x);
        self
    }

    pub fn u16(mut self, x: u16) -> Key {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }

    pub fn u32(mut self, x: u32) -> Key {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }

    pub fn u64(mut self, x: u64) -> Key {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }

    pub fn i64(self, x: i64) -> Key {
        self.u64((x as u64) ^ (1 << 63))
    }

    /// A variable-length byte string (escaped and terminated).
    pub fn bytes(mut self, b: &[u8]) -> Key {
        escape_into(&mut self.0, b);
        self
    }

    pub fn str(self, s: &str) -> Key {
        self.bytes(s.as_bytes())
    }

    /// Raw bytes, unescaped: only as the last field.
    pub fn raw(mut self, b: &[u8]) -> Key {
        self.0.extend_from_slice(b);
        self
    }

    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Append `b` as a string field: each `0x00` escaped as `0x00 0xFF`, then
/// the terminator `0x00 0x00` (what [`Key::bytes`] appends).
pub fn escape_into(out: &mut Vec<u8>, b: &[u8]) {
    for &c in b {
        out.push(c);
        if c == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Reads fields back from a key built by [`Key`]; each method returns
/// `None` if the key is too short or malformed.
#[derive(Clone, Debug)]
pub struct KeyReader<'a> {
    b: &'a [u8],
}

impl<'a> KeyReader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        KeyReader { b }
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (h, t) = self.b.split_first_chunk::<N>()?;
        self.b = t;
        Some(*h)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_be_bytes)
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_be_bytes)
    }

    pub fn i64(&mut self) -> Option<i64> {
        self.u64().map(|x| (x ^ (1 << 63)) as i64)
    }

    pub fn bytes(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            match (self.b.get(i), self.b.get(i + 1)) {
                (Some(0), Some(0)) => {
                    self.b = &self.b[i + 2..];
                    return Some(out);
                }
                (Some(0), Some(0xFF)) => {
                    out.push(0);
                    i += 2;
                }
                (Some(0), _) | (None, _) => return None,
                (Some(&c), _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
    }

    pub fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }

    /// What is left (the raw last field).
    pub fn rest(&self) -> &'a [u8] {
        self.b
    }
}

/// The first 8 bytes of `b` as a big-endian `u64` (zero padded if short).
pub fn decode_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    u64::from_be_bytes(a)
}

/// The smallest key greater than every key starting with `prefix`, or
/// `None` if there is none (the prefix is all `0xFF`): the exclusive upper
/// bound of a prefix scan.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last != 0xFF {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn order_preserved(a: (u32, Vec<u8>, i64), b: (u32, Vec<u8>, i64)) {
            let ka = Key::new().u32(a.0).bytes(&a.1).i64(a.2).finish();
            let kb = Key::new().u32(b.0).bytes(&b.1).i64(b.2).finish();
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            let mut r = KeyReader::new(&ka);
            prop_assert_eq!((r.u32(), r.bytes(), r.i64()), (Some(a.0), Some(a.1), Some(a.2)));
        }
    }

    #[test]
    fn prefix_end_bounds() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(KeyReader::new(b"\0").bytes(), None);
    }
}
