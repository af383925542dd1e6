//! The tree: a B+-tree with optimistic lock coupling (Leis et al., and
//! Masstree's node-version protocol, Silo §4.6).
//!
//! Readers descend without storing anything: at each node they take a
//! stable version, read, and re-check the version before trusting what they
//! read, restarting from the root on a change. Writers lock only the nodes
//! they change, upgrading from the version they read. A full inner node met
//! on the way down is split at once (top-down), so a leaf split never has to
//! climb more than one level: it locks just the leaf and its parent.
//!
//! A remove that empties a leaf unlinks it (and any inner node left with
//! no child), and memory unlinked from the tree — those nodes, the heap
//! copy of a removed key longer than 8 bytes — goes through the caller's
//! [`Guard`], so a stale child or sibling pointer read while pinned still
//! points at readable memory. An unlinked node's version carries a
//! deleted mark that never validates ([`NodeVersion`]): a reader that
//! reaches it restarts from the root. See `RawTree::unlink_empty`.
//!
//! Every operation can tell its caller which leaf versions it depended on
//! ([`Lookup`], the `on_leaf` callback of [`RawTree::scan`]) and, for a change,
//! the leaf's version before and after it ([`NodeChange`]): what Silo's
//! node-set validation needs (§4.6), without the tree knowing anything of
//! transactions.
//!
//! The tree's code by role: `search` (one node), `layout` (a node's prefix
//! and entries), `descend` (lookups), `insert`, `cursor`, `remove`
//! (with unlinking), `scan`; `shape` checks a tree's invariants in tests.

use std::cmp::Ordering as Cmp;
use std::ops::Bound;
use std::ptr::NonNull;

use crate::key::{compare, compare_tie, make_stored, stored_bytes, word_of, SearchKey};
use crate::node::{
    prefetch, Header, Inner, Leaf, INNER_WIDTH, LEAF_WIDTH, PREFIX_WORDS, UNUSED_SLICE,
};
use crate::point::PointIndex;
use crate::retired::Retired;
use crate::sync::{spin, AtomicPtr, AtomicU64, Ordering};
use crate::version::{is_deleted, NodeVersion};

const R: Ordering = Ordering::Relaxed;

mod cursor;
mod descend;
mod insert;
mod layout;
mod remove;
mod scan;
mod search;
mod typed;

pub use cursor::RawCursor;
use cursor::*;
use layout::*;
use search::*;
pub use typed::{Cursor, Tree, Value};

/// Proof that the calling thread is inside an epoch-protected region, and
/// the sink for memory the tree unlinks.
///
/// # Safety
/// An implementation promises that memory passed to [`Guard::retire`] is
/// not reclaimed while any thread that might have seen it — any thread
/// holding a guard of the same reclamation domain that it obtained before
/// the retirement — still holds that guard. Every guard used with one tree
/// must belong to one domain.
pub unsafe trait Guard {
    /// Hand over unlinked memory, to be freed after the grace period.
    fn retire(&mut self, garbage: Retired);
}

/// A guard that never frees retired memory (it leaks it). Useful for
/// read-mostly benchmarks and tests.
#[derive(Debug)]
pub struct LeakGuard(());

impl LeakGuard {
    /// # Safety
    /// Every guard used on the same tree must also be a `LeakGuard` (a
    /// reclaiming guard elsewhere could free memory this one still reads).
    pub unsafe fn new() -> Self {
        LeakGuard(())
    }
}

// SAFETY: it never frees anything, so no reader can see freed memory.
unsafe impl Guard for LeakGuard {
    fn retire(&mut self, garbage: Retired) {
        let _ = garbage; // leaked: `Retired` frees nothing unless reclaimed
    }
}

/// A leaf a reader depended on. A leaf can be unlinked and freed once it
/// is empty (after the grace period of the guard it was retired to), so
/// read through a `LeafRef` only while still pinned since it was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeafRef(NonNull<Leaf>);

// SAFETY: a LeafRef is an address; reading through it is `unsafe`.
unsafe impl Send for LeafRef {}
// SAFETY: as above.
unsafe impl Sync for LeafRef {}

impl LeafRef {
    /// The leaf's current version word (with its lock bit).
    ///
    /// # Safety
    /// The caller has been pinned (in the guard domain of the leaf's tree)
    /// since the operation that returned this `LeafRef`: the leaf may
    /// have been unlinked since, but not freed.
    #[inline]
    pub unsafe fn version(self) -> u64 {
        // SAFETY: not freed while the caller is pinned (its contract).
        unsafe { self.0.as_ref().header.version.load() }
    }

    /// The leaf's address: an identity while the caller stays pinned (a
    /// freed leaf's address can be reused).
    pub fn addr(self) -> usize {
        self.0.as_ptr() as usize
    }
}

/// A change to one leaf made by an insert or remove: its version just
/// before and just after. If the insert split the leaf, `split` is the new
/// right sibling and its version; keys that were in `leaf` may now be there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeChange {
    pub leaf: LeafRef,
    pub old_version: u64,
    pub new_version: u64,
    pub split: Option<(LeafRef, u64)>,
}

/// The result of a point lookup: the value, and the leaf (with the version
/// that was read) that holds the key or would hold it.
#[derive(Clone, Copy, Debug)]
pub struct Lookup<V = u64> {
    pub value: Option<V>,
    pub leaf: LeafRef,
    pub version: u64,
}

/// The result of an insert-if-absent.
#[derive(Clone, Copy, Debug)]
pub enum Insert<V = u64> {
    Inserted(NodeChange),
    /// The key was present; nothing changed.
    Exists {
        value: V,
    },
}

/// Where a descent should end.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// The leaf whose range holds this key.
    At(SearchKey<'a>),
    /// The leaf holding the keys just below this key.
    Before(SearchKey<'a>),
    Rightmost,
}

/// Where a leaf hangs in the tree, as far as a writer knows: a full leaf's
/// split locks its parent to add the new separator.
#[derive(Clone, Copy, Debug)]
enum Parent {
    /// The leaf was the root at the version it was read with (a leaf stops
    /// being the root only by splitting, which changes that version).
    Root,
    /// The leaf was a child of this inner node while the node had this
    /// (unlocked) version. Every change to an inner node's children
    /// advances its version, so while it still has that version the leaf
    /// is still its child.
    Node(*const Inner, u64),
    /// Not known: a split must descend from the root to find it.
    Unknown,
}

/// What an insert did: the value already stored under the key, if it was
/// present, and the leaf change, if the key was added.
type Outcome = (Option<u64>, Option<NodeChange>);

fn into_insert((old, change): Outcome) -> Insert {
    match old {
        Some(value) => Insert::Exists { value },
        None => Insert::Inserted(change.expect("inserted")),
    }
}

/// Where a key went: its leaf, and what is known of the leaf's parent
/// (never [`Parent::Root`]: that is tied to a version that may have
/// changed).
type Spot = (NonNull<Leaf>, Parent);

/// The tree over 64-bit words, which [`Tree`] types.
pub struct RawTree {
    root: AtomicPtr<Header>,
    /// How many times nodes were unlinked (see [`RawTree::unlinks`]).
    unlinks: AtomicU64,
    /// The hash table over the same keys, if the tree has one
    /// ([`RawTree::with_point_index`]).
    points: Option<PointIndex>,
}

/// An inner node a descent passed: the node, the version it was read at,
/// the child taken and its separator count.
type Step<'a> = (&'a Inner, u64, usize, usize);

// SAFETY: all shared state is atomics behind the version protocol.
unsafe impl Send for RawTree {}
// SAFETY: as above.
unsafe impl Sync for RawTree {}

impl Default for RawTree {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for RawTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawTree").finish_non_exhaustive()
    }
}

/// # Safety
/// `p` must point at a live node.
#[inline(always)]
unsafe fn hdr<'a>(p: *const Header) -> &'a Header {
    // SAFETY: caller's contract.
    unsafe { &*p }
}

impl RawTree {
    /// An empty tree (one empty leaf).
    pub fn new() -> RawTree {
        let leaf = Box::into_raw(Leaf::new(None, false));
        RawTree {
            root: AtomicPtr::new(leaf as *mut Header),
            unlinks: AtomicU64::new(0),
            points: None,
        }
    }

    /// An empty tree with a point index: a hash table over the same keys
    /// that answers [`RawTree::find`] with one bucket instead of a descent,
    /// for about 20–40 more bytes a key and a little more work per insert
    /// and remove (ARCHITECTURE.md, "The point index").
    pub fn with_point_index() -> RawTree {
        let mut t = RawTree::new();
        t.points = Some(PointIndex::new());
        t
    }

    /// Whether the tree has a point index.
    pub fn has_point_index(&self) -> bool {
        self.points.is_some()
    }

    /// How many times nodes have been unlinked from this tree so far. A
    /// caller that keeps a [`LeafRef`] from one pin to the next may read
    /// through it in a later pin only if this count, loaded (it is
    /// `SeqCst`) after that pin began, equals the one loaded before the
    /// leaf was found: then no node has been unlinked, nor freed, since.
    pub fn unlinks(&self) -> u64 {
        self.unlinks.load(Ordering::SeqCst)
    }

    /// Call `f` with every value, with exclusive access (for owners that
    /// must free what the values point to before dropping the tree).
    pub fn for_each_value(&mut self, mut f: impl FnMut(u64)) {
        let mut node = self.root.load(R) as *const Header;
        // SAFETY: exclusive access; nodes are live.
        unsafe {
            while !hdr(node).is_leaf {
                node = (*(node as *const Inner)).children[0].load(R);
            }
            let mut leaf = node as *const Leaf;
            while !leaf.is_null() {
                let l = &*leaf;
                for i in 0..l.header.count.load(R) {
                    f(l.values[i].load(R));
                }
                leaf = l.next.load(R);
            }
        }
    }
}

/// # Safety
/// Exclusive access; `p` is a live node not reachable from elsewhere.
unsafe fn free_node(p: *mut Header) {
    // SAFETY: caller's contract.
    unsafe {
        if (*p).is_leaf {
            let leaf = Box::from_raw(p as *mut Leaf);
            for i in 0..leaf.header.count.load(R) {
                crate::key::free_stored(leaf.infos[i].load(R));
            }
            if let Some((_, info)) = leaf.low() {
                crate::key::free_stored(info);
            }
        } else {
            let inner = Box::from_raw(p as *mut Inner);
            for i in 0..=inner.header.count.load(R) {
                free_node(inner.children[i].load(R));
            }
        }
    }
}

impl Drop for RawTree {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader remains.
        unsafe { free_node(self.root.load(R)) }
    }
}

#[cfg(test)]
mod shape;

#[cfg(all(test, not(feature = "loom")))]
mod tests;

#[cfg(all(test, feature = "loom"))]
mod loom_tests;
