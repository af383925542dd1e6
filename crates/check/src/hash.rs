//! A small, fast, non-cryptographic hasher for the checker's integer-keyed
//! maps.
//!
//! The std SipHash is DoS-resistant but several times slower on `u64` keys;
//! histories are trusted input, so speed wins. Each word is folded in with
//! a multiply, and `finish` does a full 64x64->128 multiply and folds the
//! halves, so keys that differ only in high bits (version ids like
//! `txn << 16 | n`) still spread over the low bits the table indexes by.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Odd constant from the golden ratio (as in Fibonacci hashing).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// Multiplicative hasher for integer keys. See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(23) ^ x).wrapping_mul(K);
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let wide = u128::from(self.0) * u128::from(K);
        (wide as u64) ^ ((wide >> 64) as u64)
    }
}

/// `HashMap` with [`FastHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// `HashSet` with [`FastHasher`].
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

/// An empty [`FastMap`] with room for `n` entries.
pub(crate) fn map_with_capacity<K, V>(n: usize) -> FastMap<K, V> {
    FastMap::with_capacity_and_hasher(n, BuildHasherDefault::default())
}

/// A per-transaction map from key to `V`: a vector searched linearly while
/// small (transactions usually touch a handful of keys), a hash map once it
/// grows past [`LocalMap::SPILL`] entries. Reused across transactions via
/// [`LocalMap::clear`], which keeps neither allocation large for long.
#[derive(Debug)]
pub(crate) struct LocalMap<V> {
    small: Vec<(u64, V)>,
    big: FastMap<u64, V>,
}

impl<V> Default for LocalMap<V> {
    fn default() -> Self {
        LocalMap {
            small: Vec::new(),
            big: FastMap::default(),
        }
    }
}

impl<V> LocalMap<V> {
    /// Entries kept in the vector before spilling into the hash map.
    pub(crate) const SPILL: usize = 16;

    pub(crate) fn get(&self, key: u64) -> Option<&V> {
        if self.big.is_empty() {
            self.small.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
        } else {
            self.big.get(&key)
        }
    }

    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if self.big.is_empty() {
            self.small
                .iter_mut()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v)
        } else {
            self.big.get_mut(&key)
        }
    }

    /// Inserts or replaces; returns the previous value.
    pub(crate) fn insert(&mut self, key: u64, value: V) -> Option<V> {
        if !self.big.is_empty() {
            return self.big.insert(key, value);
        }
        if let Some(slot) = self.small.iter_mut().find(|(k, _)| *k == key) {
            return Some(std::mem::replace(&mut slot.1, value));
        }
        self.small.push((key, value));
        if self.small.len() > Self::SPILL {
            self.big.extend(self.small.drain(..));
        }
        None
    }

    /// Visits every entry (in no particular order).
    pub(crate) fn for_each(&self, mut f: impl FnMut(u64, &V)) {
        for (k, v) in &self.small {
            f(*k, v);
        }
        for (k, v) in &self.big {
            f(*k, v);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.small.clear();
        if !self.big.is_empty() {
            // Dropping a big table is cheaper than keeping it: clearing one
            // costs its capacity on every later transaction.
            self.big = FastMap::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn local_map_spills_and_clears() {
        let mut m = LocalMap::default();
        for k in 0..100u64 {
            assert_eq!(m.insert(k, k * 2), None);
        }
        assert_eq!(m.insert(7, 1), Some(14));
        assert_eq!(m.get(7), Some(&1));
        assert_eq!(m.get(99), Some(&198));
        let mut n = 0;
        m.for_each(|_, _| n += 1);
        assert_eq!(n, 100);
        m.clear();
        assert_eq!(m.get(7), None);
        assert_eq!(m.insert(3, 3), None);
        *m.get_mut(3).unwrap() += 1;
        assert_eq!(m.get(3), Some(&4));
    }

    #[test]
    fn high_bit_keys_spread_over_low_bits() {
        let b = BuildHasherDefault::<FastHasher>::default();
        let mut low = FastSet::default();
        for i in 0..1024u64 {
            low.insert(b.hash_one(i << 40) & 0x3ff);
        }
        // A perfect spread gives 1024; a hash that ignored high bits gives 1.
        assert!(
            low.len() > 500,
            "only {} distinct low bit patterns",
            low.len()
        );
    }
}
