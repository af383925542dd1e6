//! Node layouts. Every field a reader may see while a writer changes it is
//! an atomic; on x86 a Relaxed atomic load or store is a plain `mov`, so
//! optimistic reads cost what they would in C++ while staying defined.

use crate::sync::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use crate::version::NodeVersion;

/// Keys per leaf. A leaf is 96 + 24·W bytes: 384 bytes at W = 12, six
/// cache lines; a point lookup touches the header, the slice array (96
/// bytes) and one info/value pair.
///
/// Under loom the nodes are 4 wide. Nothing in the tree depends on the
/// width, but a loom model pays for every atomic access in every run: at 4
/// a model's tree needs a tenth of the keys to reach the same shape (a
/// full root, a split parent) and a node search reads a third of the
/// slots, so the tree models run in seconds instead of minutes. The unit
/// and stress tests keep the real width.
pub(crate) const LEAF_WIDTH: usize = if cfg!(feature = "loom") { 4 } else { 12 };
/// Separator keys per inner node (children = keys + 1); 4 under loom, as
/// [`LEAF_WIDTH`].
pub(crate) const INNER_WIDTH: usize = if cfg!(feature = "loom") { 4 } else { 12 };

/// Words of key prefix a node can hold (the key module's docs): 56 bytes,
/// which fit in a leaf's six cache lines once its entry count sits in the
/// header's padding and its fence needs no `Option` tag. YCSB's 64-byte
/// keys share 58 bytes.
pub(crate) const PREFIX_WORDS: usize = 7;

/// A node's entry count (at most 12), in one byte of the header's padding.
pub(crate) struct Count(AtomicU8);

impl Count {
    fn new() -> Count {
        Count(AtomicU8::new(0))
    }

    #[inline(always)]
    pub fn load(&self, o: Ordering) -> usize {
        self.0.load(o) as usize
    }

    #[inline(always)]
    pub fn store(&self, n: usize, o: Ordering) {
        debug_assert!(n <= u8::MAX as usize);
        self.0.store(n as u8, o)
    }
}

/// Common prefix of both node kinds; child pointers point at it.
#[repr(C)]
pub(crate) struct Header {
    pub version: NodeVersion,
    /// Immutable after construction.
    pub is_leaf: bool,
    /// Words of prefix every key stored in the node shares (at most
    /// [`PREFIX_WORDS`]); its slices are each key's word `pw`. Changed
    /// only under the node's lock, with its version.
    pub pw: AtomicU8,
    /// Entries (leaf) or separators (inner node) in use.
    pub count: Count,
    /// The prefix's words, `prefix[..pw]`.
    pub prefix: [AtomicU64; PREFIX_WORDS],
}

impl Header {
    fn new(version: NodeVersion, is_leaf: bool) -> Header {
        Header {
            version,
            is_leaf,
            pw: AtomicU8::new(0),
            count: Count::new(),
            prefix: zeros(),
        }
    }
}

#[repr(C, align(64))]
pub(crate) struct Leaf {
    pub header: Header,
    /// Right sibling. Leaves split to the right, and an emptied leaf is
    /// unlinked by pointing its left neighbour past it (both locked, both
    /// versions changed), so following a validated `next` never skips a
    /// key that a validated read of this leaf did not already contain.
    pub next: AtomicPtr<Leaf>,
    /// The leaf's lower fence key (slice, info), immutable; [`NO_FENCE`]
    /// for the leftmost leaf (read it through [`Leaf::low`]). A leaf's
    /// range shrinks from the right when it splits and grows to the right
    /// when its right neighbour is unlinked; its low end never moves.
    low: (u64, u64),
    // Slices and values first: a lookup of a short key never touches
    // `infos` unless two slices tie.
    pub slices: [AtomicU64; LEAF_WIDTH],
    pub values: [AtomicU64; LEAF_WIDTH],
    pub infos: [AtomicU64; LEAF_WIDTH],
}

#[repr(C, align(64))]
pub(crate) struct Inner {
    pub header: Header,
    /// Separators borrow their bytes from a leaf's lower fence: separator
    /// `i` is the fence of the leftmost leaf under child `i + 1` (a split
    /// makes it so, inner splits move it up, an unlink replaces it), so
    /// it lives while that leaf does.
    pub slices: [AtomicU64; INNER_WIDTH],
    pub children: [AtomicPtr<Header>; INNER_WIDTH + 1],
    pub infos: [AtomicU64; INNER_WIDTH],
}

/// Cache lines a node spans (both kinds fit).
const NODE_LINES: usize = {
    let l = std::mem::size_of::<Leaf>();
    let i = std::mem::size_of::<Inner>();
    (if l > i { l } else { i }).div_ceil(64)
};

/// Start fetching a whole node into cache: its lines then arrive in
/// parallel instead of one dependent miss at a time (Masstree §4.1 does the
/// same).
#[inline(always)]
pub(crate) fn prefetch(p: *const Header) {
    prefetch_lines(p as *const u8, NODE_LINES)
}

/// Start fetching `lines` cache lines from `p` into cache (a hint: never
/// faults, even on a bad or null address).
#[inline(always)]
pub fn prefetch_lines(p: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for i in 0..lines {
        // SAFETY: prefetch never faults, even on a bad address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (p as *const i8).wrapping_add(64 * i),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, lines);
}

fn zeros<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

/// What an unused slice slot holds: above or equal to every slice, so a
/// node search may compare all of a node's slots without reading its
/// count first (`count_below` in tree/search.rs). Every node keeps its slots
/// from its count on at this value whenever it is unlocked.
pub(crate) const UNUSED_SLICE: u64 = u64::MAX;

fn unused_slices<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(UNUSED_SLICE))
}

/// The leftmost leaf's fence: an info word no key has (a key box's address
/// is 8-aligned, so its low bits are never all ones).
const NO_FENCE: (u64, u64) = (0, u64::MAX);

impl Leaf {
    /// The lower fence key (slice, info); `None` for the leftmost leaf.
    #[inline]
    pub fn low(&self) -> Option<(u64, u64)> {
        (self.low != NO_FENCE).then_some(self.low)
    }

    pub fn new(low: Option<(u64, u64)>, locked: bool) -> Box<Leaf> {
        Box::new(Leaf {
            header: Header::new(
                if locked {
                    NodeVersion::new_locked()
                } else {
                    NodeVersion::new()
                },
                true,
            ),
            next: AtomicPtr::new(std::ptr::null_mut()),
            low: low.unwrap_or(NO_FENCE),
            slices: unused_slices(),
            infos: zeros(),
            values: zeros(),
        })
    }
}

impl Inner {
    pub fn new_locked() -> Box<Inner> {
        Box::new(Inner {
            header: Header::new(NodeVersion::new_locked(), false),
            slices: unused_slices(),
            infos: zeros(),
            children: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
        })
    }
}

// Loom's atomics are bigger than the hardware's: sizes mean nothing there.
#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn node_sizes() {
        // Six cache lines each (see LEAF_WIDTH and PREFIX_WORDS).
        assert!(std::mem::size_of::<Leaf>() <= 6 * 64);
        assert!(std::mem::size_of::<Inner>() <= 6 * 64);
        assert_eq!(std::mem::align_of::<Leaf>(), 64);
    }
}
