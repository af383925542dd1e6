//! A value stored with the row or version that holds it when it is short.
//!
//! At a million keys every record a transaction touches is a cache miss;
//! a value in its own heap block is a second, dependent one. A short value
//! (YCSB's and SmallBank's are 8 bytes) lives inside the record instead,
//! and a long one (TPC-C's rows) on the heap as before.

use smallvec::SmallVec;

/// Bytes kept inline up to `N`, on the heap beyond.
pub(crate) type Value<const N: usize> = SmallVec<[u8; N]>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_stay_inline_and_long_ones_spill() {
        let mut v: Value<24> = Value::new();
        v.extend_from_slice(&[7; 24]);
        assert!(!v.spilled());
        v.clear();
        v.extend_from_slice(&[9; 25]);
        assert!(v.spilled());
        assert_eq!(&v[..], &[9; 25]);
        // Sizes the records count on: the inline bytes plus one word.
        assert_eq!(std::mem::size_of::<Value<24>>(), 32);
        assert_eq!(std::mem::size_of::<Value<32>>(), 40);
    }
}
