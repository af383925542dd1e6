//! What a design's [`Tx::prefetch_many`](crate::Tx::prefetch_many) found,
//! kept for the lookups that follow; and the hint that fetches lines for
//! writing.

use crate::TableId;

/// The entries `prefetch_many` found, in the order hinted: `P` is what a
/// design's lookup finds (its record, its version chain). The next lookup
/// takes the next entry if its table and key match, so a hinted key is
/// found once; a hint never used, or used out of order, is passed over.
/// What an entry points at may have changed since: the design checks it
/// as it checks anything its lookup found.
#[derive(Debug)]
pub struct Hints<P> {
    /// (table, the key's span in `keys`, what was found).
    found: Vec<(TableId, (u32, u32), P)>,
    keys: Vec<u8>,
    next: usize,
}

impl<P> Default for Hints<P> {
    fn default() -> Self {
        Hints {
            found: Vec::new(),
            keys: Vec::new(),
            next: 0,
        }
    }
}

impl<P: Copy> Hints<P> {
    /// Keep `p`, found for `key` of table `t`, after the entries kept so far.
    pub fn push(&mut self, t: TableId, key: &[u8], p: P) {
        let at = self.keys.len() as u32;
        append_bytes(&mut self.keys, key);
        self.found.push((t, (at, key.len() as u32), p));
    }

    /// What was found for `key`, if it is the next key hinted.
    pub fn take(&mut self, t: TableId, key: &[u8]) -> Option<P> {
        let &(ht, (s, n), p) = self.found.get(self.next)?;
        if ht == t && same_key(&self.keys[s as usize..(s + n) as usize], key) {
            self.next += 1;
            return Some(p);
        }
        None
    }

    /// Forget every entry (at the end of a transaction).
    pub fn clear(&mut self) {
        self.found.clear();
        self.keys.clear();
        self.next = 0;
    }
}

/// `out.extend_from_slice(b)`, without a call to `memcpy` for up to 16
/// bytes (keys, mostly): two overlapping loads and stores. A call costs
/// more than a short copy itself, and a transaction copies each key it
/// uses two or three times (its hint, its write-set entry, the key of its
/// last read).
#[inline(always)]
#[allow(unsafe_code)]
pub fn append_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    if !(4..=16).contains(&n) {
        out.extend_from_slice(b);
        return;
    }
    out.reserve(n);
    let at = out.len();
    let (src, half) = (b.as_ptr(), n / 2);
    // SAFETY: `reserve` made room for `n` bytes after `at`, `b` holds `n`
    // bytes and does not overlap `out`'s spare room. Each pair of
    // accesses covers `0..w` and `n - w..n` with `w <= n <= 2w`: every
    // byte, the middle ones twice. Unaligned accesses throughout.
    unsafe {
        let dst = out.as_mut_ptr().add(at);
        if half >= 4 {
            let (lo, hi) = (
                (src as *const u64).read_unaligned(),
                (src.add(n - 8) as *const u64).read_unaligned(),
            );
            (dst as *mut u64).write_unaligned(lo);
            (dst.add(n - 8) as *mut u64).write_unaligned(hi);
        } else {
            let (lo, hi) = (
                (src as *const u32).read_unaligned(),
                (src.add(n - 4) as *const u32).read_unaligned(),
            );
            (dst as *mut u32).write_unaligned(lo);
            (dst.add(n - 4) as *mut u32).write_unaligned(hi);
        }
        out.set_len(at + n);
    }
}

/// Key equality, one compare for the common 8-byte keys.
fn same_key(a: &[u8], b: &[u8]) -> bool {
    match (<&[u8; 8]>::try_from(a), <&[u8; 8]>::try_from(b)) {
        (Ok(x), Ok(y)) => u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y),
        _ => a == b,
    }
}

/// Start fetching `lines` cache lines from `p` for writing (`prefetchw`:
/// they arrive owned, so the stores that come later do not each wait for
/// ownership). A hint: it never faults, even on a bad or null address,
/// and changes no memory, so any pointer may be passed.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch_for_write(p: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for i in 0..lines {
        // SAFETY: a prefetch never faults and changes no memory; CPUs
        // without PREFETCHW run it as a no-op.
        unsafe {
            std::arch::asm!("prefetchw [{}]", in(reg) p.wrapping_add(64 * i),
                options(nostack, preserves_flags, readonly))
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, lines);
}

/// The runs of `keys` that name one table, in order, as index ranges: a
/// design's `prefetch_many` looks each run up in its table's index at once
/// (`Tree::find_many`).
pub fn table_runs<'k>(
    keys: &'k [(TableId, &[u8])],
) -> impl Iterator<Item = std::ops::Range<usize>> + 'k {
    let mut at = 0;
    std::iter::from_fn(move || {
        let t = keys.get(at)?.0;
        let end = at + keys[at..].iter().take_while(|e| e.0 == t).count();
        let run = at..end;
        at = end;
        Some(run)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_taken_in_order_and_only_for_their_key() {
        let (a, b) = (TableId::new(0), TableId::new(1));
        let mut h = Hints::default();
        h.push(a, b"k1", 1);
        h.push(b, b"key-two-long", 2);
        assert_eq!(h.take(b, b"key-two-long"), None, "not the next one");
        assert_eq!(h.take(b, b"k1"), None, "another table");
        assert_eq!(h.take(a, b"k1"), Some(1));
        assert_eq!(h.take(a, b"k1"), None, "taken once");
        assert_eq!(h.take(b, b"key-two-long"), Some(2));
        h.clear();
        assert_eq!(h.take(a, b"k1"), None);
    }

    #[test]
    fn append_bytes_appends_every_length() {
        let src: Vec<u8> = (1..=40).collect();
        for before in [0, 3, 8] {
            for n in 0..=src.len() {
                let mut out = vec![0xee; before];
                append_bytes(&mut out, &src[..n]);
                let mut want = vec![0xee; before];
                want.extend_from_slice(&src[..n]);
                assert_eq!(out, want, "{before} bytes before, {n} appended");
            }
        }
    }

    #[test]
    fn runs_split_where_the_table_changes() {
        let (a, b) = (TableId::new(0), TableId::new(1));
        let keys: [(TableId, &[u8]); 5] = [(a, b"1"), (a, b"2"), (b, b"3"), (a, b"4"), (a, b"5")];
        assert_eq!(table_runs(&keys).collect::<Vec<_>>(), [0..2, 2..3, 3..5]);
        assert_eq!(table_runs(&[]).count(), 0);
    }
}
