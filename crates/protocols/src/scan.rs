//! Range scans in batches, shared by the designs of this crate.
//!
//! The index's scan calls back while it holds a validated leaf; a design
//! must lock rows or read versions per key, which needs its own state, so
//! keys are copied out a batch at a time and visited between batches. A
//! batch is no larger than what the caller may still use (a `limit`-1 scan
//! copies one key), and the next one starts just past the last key seen.

use std::ops::Bound;

use granary_api::TxError;
use granary_index::{Guard, LeafRef, Tree, Value};

/// Keys (and index values) of one batch, with the buffers reused.
pub(crate) struct Batch<V = u64> {
    keys: Vec<u8>,
    /// (end of the key in `keys`, the index's value)
    ends: Vec<(u32, V)>,
    /// The last key of the previous batch.
    last: Vec<u8>,
    started: bool,
    done: bool,
}

impl<V> Default for Batch<V> {
    fn default() -> Self {
        Batch {
            keys: Vec::new(),
            ends: Vec::new(),
            last: Vec::new(),
            started: false,
            done: false,
        }
    }
}

impl<V: Value> Batch<V> {
    /// Start a scan.
    pub fn start(&mut self) {
        self.keys.clear();
        self.ends.clear();
        self.last.clear();
        self.started = false;
        self.done = false;
    }

    /// Fetch the next at most `n` keys of `lo..hi` (descending if
    /// `reverse`), telling `on_leaf` each leaf read. False once the range
    /// is exhausted.
    #[allow(clippy::too_many_arguments)]
    pub fn next<G: Guard>(
        &mut self,
        tree: &Tree<V>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        n: usize,
        g: &G,
        on_leaf: impl FnMut(LeafRef, u64),
    ) -> bool {
        if self.done {
            return false;
        }
        let first = !self.started;
        self.started = true;
        if let Some(&(end, _)) = self.ends.last() {
            let start = self.ends.len().checked_sub(2).map_or(0, |i| self.ends[i].0) as usize;
            self.last.clear();
            self.last.extend_from_slice(&self.keys[start..end as usize]);
        }
        self.keys.clear();
        self.ends.clear();
        let resume = Bound::Excluded(&self.last[..]);
        let (lo, hi) = match (first, reverse) {
            (true, _) => (lo, hi),
            (false, false) => (resume, hi),
            (false, true) => (lo, resume),
        };
        let (keys, ends) = (&mut self.keys, &mut self.ends);
        tree.scan(lo, hi, reverse, g, on_leaf, |k, v| {
            keys.extend_from_slice(k);
            ends.push((keys.len() as u32, v));
            ends.len() < n
        });
        if self.ends.len() < n {
            self.done = true;
        }
        !self.ends.is_empty()
    }

    /// The keys of the batch fetched last, with their index values.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], V)> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&(end, v)| {
            let k = &self.keys[start..end as usize];
            start = end as usize;
            (k, v)
        })
    }
}

/// Visit the keys of `lo..hi` (descending if `reverse`) a batch at a time
/// (`batch` is scratch): `value(key, index value)` gives each key's value
/// for the caller's design (`None`: absent, skipped), and `f` sees the
/// present ones until it returns false or `limit` of them were seen.
/// For designs that read a version per key and need no leaf validation
/// (BOHM, Deuteronomy's TC).
///
/// # Errors
/// What `value` fails with.
#[allow(clippy::too_many_arguments)]
pub(crate) fn visit<'v, G: Guard, V: Value>(
    batch: &mut Batch<V>,
    tree: &Tree<V>,
    (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
    limit: usize,
    reverse: bool,
    g: &G,
    mut value: impl FnMut(&[u8], V) -> Result<Option<&'v [u8]>, TxError>,
    mut f: impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<(), TxError> {
    if limit == 0 {
        return Ok(());
    }
    batch.start();
    let mut n = 0;
    loop {
        let want = (limit - n).clamp(1, 64);
        if !batch.next(tree, lo, hi, reverse, want, g, |_, _| {}) {
            return Ok(());
        }
        for (k, c) in batch.iter() {
            if let Some(v) = value(k, c)? {
                n += 1;
                if !f(k, v) || n == limit {
                    return Ok(());
                }
            }
        }
    }
}
