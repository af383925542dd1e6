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
//! reaches it restarts from the root. See `Tree::unlink_empty`.
//!
//! Every operation can tell its caller which leaf versions it depended on
//! ([`Lookup`], the `on_leaf` callback of [`Tree::scan`]) and, for a change,
//! the leaf's version before and after it ([`NodeChange`]): what Silo's
//! node-set validation needs (§4.6), without the tree knowing anything of
//! transactions.

use std::cmp::Ordering as Cmp;
use std::ops::Bound;
use std::ptr::NonNull;

use crate::key::{compare, compare_tie, make_stored, stored_bytes, word_of, Retired, SearchKey};
use crate::node::{
    prefetch, Header, Inner, Leaf, INNER_WIDTH, LEAF_WIDTH, PREFIX_WORDS, UNUSED_SLICE,
};
use crate::point::PointIndex;
use crate::sync::{spin, AtomicPtr, AtomicU64, Ordering};
use crate::version::{is_deleted, NodeVersion};

const R: Ordering = Ordering::Relaxed;

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
pub struct Lookup {
    pub value: Option<u64>,
    pub leaf: LeafRef,
    pub version: u64,
}

/// The result of an insert-if-absent.
#[derive(Clone, Copy, Debug)]
pub enum Insert {
    Inserted(NodeChange),
    /// The key was present; nothing changed.
    Exists {
        value: u64,
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

/// Inserts keys that arrive in ascending runs, such as a checkpoint file's
/// (SiloR §5.1: each recovery thread loads key ranges of a table and
/// "benefit\[s\] from locality"), without descending from the root for each.
///
/// The cursor remembers the leaf its last key went into and, when known,
/// that leaf's parent with a version at which it was the leaf's parent. A
/// key the remembered leaf covers — at least its lower fence and below its
/// right sibling's, read under the leaf's version — is inserted there by
/// the same steps as after a descent: the version read first is validated
/// and upgraded to the lock (Masstree's protocol, Silo §4.6: a reader or a
/// node-set that saw the leaf before sees its version change). A key past
/// the leaf is tried in the right sibling (Lehman and Yao's move right).
/// A full leaf splits with the remembered parent locked, if that parent
/// still has the remembered version; otherwise, and for any key the
/// remembered leaves do not cover, the insert descends from the root as
/// [`Tree::insert`] does. So other threads may insert, remove or split
/// concurrently, each cursor's keys may interleave with theirs, and keys
/// may arrive in any order: a cursor is only slower then, never wrong.
///
/// A cursor's split keeps the keys below the new one in the left leaf and
/// moves the rest right (a plain insert moves half), so an ascending run
/// into a gap between keys already present fills whole leaves.
///
/// ```
/// use granary_index::{Insert, LeakGuard, Tree};
///
/// let tree = Tree::new();
/// // SAFETY: every guard used on this tree is a LeakGuard.
/// let mut g = unsafe { LeakGuard::new() };
/// let mut c = tree.cursor();
/// for i in 0..1000u64 {
///     assert!(matches!(c.insert(&i.to_be_bytes(), i, &mut g), Insert::Inserted(_)));
/// }
/// assert_eq!(tree.get(&500u64.to_be_bytes(), &g).value, Some(500));
/// ```
///
/// The remembered spot is dropped when any node of the tree has been
/// unlinked since it was found (a remove that empties a leaf unlinks it): a cursor is
/// kept from one pin to the next, and its nodes could have been freed.
#[derive(Debug)]
pub struct Cursor<'t> {
    tree: &'t Tree,
    at: Option<Spot>,
    /// The tree's unlink count when the current call began (see
    /// [`Tree::unlinks`]).
    unlinks: u64,
}

/// Where a key lies relative to a leaf.
enum Covers {
    Yes,
    /// Past the leaf: try its right sibling.
    Right(NonNull<Leaf>),
    /// Below the leaf, or the leaf changed.
    No,
}

/// Whether leaf `l`, read at version `v`, covers `k`: its low fence ≤ `k`
/// < its right sibling's low fence (a leaf's range only shrinks from the
/// right, and its fence is immutable).
///
/// # Safety
/// The caller is pinned, since before `l` was found.
#[inline]
unsafe fn covers(l: &Leaf, v: u64, k: &SearchKey<'_>) -> Covers {
    if let Some((s, i)) = l.low() {
        // SAFETY: a fence lives as long as its leaf; pinned.
        if unsafe { compare(s, i, k) } == Cmp::Greater {
            return Covers::No;
        }
    }
    let next = l.next.load(R);
    // Validate before following `next` (the sibling is only known to be
    // initialized once the split that linked it has unlocked the leaf).
    if l.header.version.has_changed(v) {
        return Covers::No;
    }
    let Some(next) = NonNull::new(next) else {
        return Covers::Yes;
    };
    // SAFETY: a validated sibling pointer, read while pinned (an unlinked
    // sibling is still readable, and its fence with it).
    let (s, i) = unsafe { next.as_ref() }
        .low()
        .expect("a right sibling has a low fence");
    // SAFETY: as above.
    match unsafe { compare(s, i, k) } {
        Cmp::Greater => Covers::Yes,
        _ => Covers::Right(next),
    }
}

impl<'t> Cursor<'t> {
    /// The tree this cursor inserts into.
    pub fn tree(&self) -> &'t Tree {
        self.tree
    }

    /// Insert `key → value` if the key is absent, as [`Tree::insert`] does,
    /// starting from where the previous key went.
    pub fn insert<G: Guard>(&mut self, key: &[u8], value: u64, g: &mut G) -> Insert {
        let k = SearchKey::new(key);
        // SeqCst: ordered after the caller's pin. A node unlinked before
        // this load counted before it (and the spot goes); one unlinked
        // after it is retired after the pin began, so it is not freed
        // while this call runs.
        let unlinks = self.tree.unlinks.load(Ordering::SeqCst);
        if unlinks != self.unlinks {
            self.at = None;
            self.unlinks = unlinks;
        }
        // SAFETY: pinned by the caller's guard, and no node was unlinked
        // since the spot was found in an earlier call (just checked).
        let done = match unsafe { self.insert_near(&k, value) } {
            Some(done) => done,
            None => self
                .tree
                .insert_impl::<G, true>(key, value, false, &mut self.at, g),
        };
        self.tree.grow_points(g);
        into_insert(done)
    }

    /// Insert into the remembered leaf, or its right sibling, if it covers
    /// `k`; `None` (nothing changed) if neither does or either changed.
    ///
    /// # Safety
    /// The caller is pinned, and the remembered nodes have not been freed.
    #[inline]
    unsafe fn insert_near(&mut self, k: &SearchKey<'_>, value: u64) -> Option<Outcome> {
        let (mut leaf, mut parent) = self.at?;
        debug_assert!(
            !matches!(parent, Parent::Root),
            "a kept spot is never the root"
        );
        for _ in 0..2 {
            // SAFETY: not freed (caller's contract).
            let l = unsafe { leaf.as_ref() };
            let v = l.header.version.stable();
            // SAFETY: pinned (caller's contract).
            match unsafe { covers(l, v, k) } {
                Covers::Yes => {
                    // SAFETY: `l` covered `k` at `v`; pinned.
                    let done = unsafe {
                        self.tree
                            .insert_into::<true>(l, v, parent, k, value, false, &mut self.at)
                    };
                    return done;
                }
                Covers::Right(next) => {
                    leaf = next;
                    parent = Parent::Unknown;
                }
                Covers::No => return None,
            }
        }
        None
    }
}

/// A concurrent ordered map from byte strings to `u64` values.
pub struct Tree {
    root: AtomicPtr<Header>,
    /// How many times nodes were unlinked (see [`Tree::unlinks`]).
    unlinks: AtomicU64,
    /// The hash table over the same keys, if the tree has one
    /// ([`Tree::with_point_index`]).
    points: Option<PointIndex>,
}

/// How often an unlink is tried again after losing a race (a lock
/// another writer held, a node that changed under the descent) before
/// the empty leaf is left in place. A leaf left behind costs memory,
/// never correctness: it is unlinked if a later remove empties it again.
const UNLINK_TRIES: usize = 16;

/// An inner node a descent passed: the node, the version it was read at,
/// the child taken and its separator count.
type Step<'a> = (&'a Inner, u64, usize, usize);

/// What one try of [`Tree::try_unlink`] did.
enum Unlink {
    Done,
    /// Nothing to do: the leaf is not empty, is the leftmost, or is gone.
    Not,
    /// A race was lost; nothing changed.
    Retry,
}

// SAFETY: all shared state is atomics behind the version protocol.
unsafe impl Send for Tree {}
// SAFETY: as above.
unsafe impl Sync for Tree {}

impl Default for Tree {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree").finish_non_exhaustive()
    }
}

/// Where a search key falls in a node, given the node's prefix.
#[derive(Clone, Copy)]
enum Probe {
    /// Below every key stored in the node.
    Below,
    /// Above every key stored in the node.
    Above,
    /// Shares the prefix of `p` bytes; its slice at `p` is this.
    At(u64, usize),
}

/// Place `k` against node `h`'s prefix (the key module's docs). A node
/// without one (`pw = 0`, most nodes) costs one load and a branch.
#[inline(always)]
fn probe(h: &Header, k: &SearchKey<'_>) -> Probe {
    let pw = h.pw.load(R) as usize;
    if pw == 0 {
        return Probe::At(k.slice, 0);
    }
    probe_prefix(h, pw.min(PREFIX_WORDS), k)
}

// Out of line: only nodes with a prefix need it, and inlined at every
// search site it more than doubled the descent's code.
#[inline(never)]
fn probe_prefix(h: &Header, pw: usize, k: &SearchKey<'_>) -> Probe {
    for (w, word) in h.prefix[..pw].iter().enumerate() {
        let (kw, nw) = (word_of(k.bytes, w), word.load(R));
        if kw != nw {
            // Padding sorts like the absent bytes it stands for: a key
            // shorter than the prefix that differs only in its padding is
            // a prefix of every stored key, and below them.
            return if kw < nw { Probe::Below } else { Probe::Above };
        }
    }
    if k.bytes.len() < 8 * pw {
        // Equal up to the padding: `k` is a proper prefix of every key.
        return Probe::Below;
    }
    Probe::At(word_of(k.bytes, pw), 8 * pw)
}

/// Compare the stored entry `i` of a node's key arrays with `k`, whose
/// slice in the node's encoding (prefix `p` bytes) is `s`, loading the info
/// word only when the slices tie.
///
/// # Safety
/// As for [`compare`].
#[inline(always)]
unsafe fn compare_at(
    slices: &[crate::sync::AtomicU64],
    infos: &[crate::sync::AtomicU64],
    i: usize,
    (s, p): (u64, usize),
    k: &SearchKey<'_>,
) -> Cmp {
    let x = slices[i].load(R);
    if x != s {
        return x.cmp(&s);
    }
    // SAFETY: forwarded contract.
    unsafe { compare_tie(infos[i].load(R), k.bytes, p) }
}

/// Shrink a locked node's prefix, if need be, so that it admits `k`: to
/// the words `k` shares with it, keeping `k` longer than the prefix.
/// Returns `k`'s slice in the node's (new) encoding.
///
/// # Safety
/// The node is locked (its version changes before it is unlocked); the
/// caller is pinned; `n` is its entry count.
unsafe fn fit_prefix(
    h: &Header,
    slices: &[crate::sync::AtomicU64],
    infos: &[crate::sync::AtomicU64],
    n: usize,
    k: &[u8],
) -> u64 {
    let pw = h.pw.load(R) as usize;
    let mut w = 0;
    while w < pw && k.len() > 8 * (w + 1) && word_of(k, w) == h.prefix[w].load(R) {
        w += 1;
    }
    if w < pw {
        // SAFETY: forwarded contract.
        unsafe { set_prefix(h, slices, infos, n, w, k) };
    }
    word_of(k, w)
}

/// Grow (or keep) a locked node's prefix to the longest its `n` keys
/// allow: the words its first and last key share (every key between them
/// shares them too), with every key longer than the prefix.
///
/// # Safety
/// As for [`fit_prefix`].
unsafe fn repack(
    h: &Header,
    slices: &[crate::sync::AtomicU64],
    infos: &[crate::sync::AtomicU64],
    n: usize,
) {
    if n == 0 {
        return;
    }
    let (mut t0, mut t1) = ([0u8; 8], [0u8; 8]);
    // SAFETY: live entries of a locked node (inline keys only where the
    // prefix is empty, so their slice is their first word).
    let first = unsafe { stored_bytes(slices[0].load(R), infos[0].load(R), &mut t0) };
    // SAFETY: as above.
    let last = unsafe { stored_bytes(slices[n - 1].load(R), infos[n - 1].load(R), &mut t1) };
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let mut pw = (common / 8).min(PREFIX_WORDS);
    // The smallest key is the only one that can be as short as the prefix.
    if pw > 0 && first.len() <= 8 * pw {
        pw -= 1;
    }
    if pw != h.pw.load(R) as usize {
        // `first` is a copy in `t0` or an immutable heap copy: re-encoding
        // the slices does not touch it.
        // SAFETY: forwarded contract.
        unsafe { set_prefix(h, slices, infos, n, pw, first) };
    }
}

/// Re-encode a locked node's `n` slices for a prefix of `pw` words, taken
/// from `model` (which every key of the node shares that far).
///
/// # Safety
/// As for [`fit_prefix`].
unsafe fn set_prefix(
    h: &Header,
    slices: &[crate::sync::AtomicU64],
    infos: &[crate::sync::AtomicU64],
    n: usize,
    pw: usize,
    model: &[u8],
) {
    for i in 0..n {
        let mut t = [0u8; 8];
        // SAFETY: as in `repack`.
        let b = unsafe { stored_bytes(slices[i].load(R), infos[i].load(R), &mut t) };
        let w = word_of(b, pw);
        slices[i].store(w, R);
    }
    for (w, word) in h.prefix.iter().enumerate() {
        word.store(if w < pw { word_of(model, w) } else { 0 }, R);
    }
    h.pw.store(pw as u8, R);
}

/// The (slice, info) words of a new key for locked leaf `l` of `n`
/// entries: its heap copy (if long), and its slice in the leaf's encoding,
/// the leaf's prefix shrunk first if the key does not share it.
///
/// # Safety
/// As for [`fit_prefix`].
unsafe fn stored_in(l: &Leaf, n: usize, k: &SearchKey<'_>) -> (u64, u64) {
    let (_, info) = make_stored(k.bytes);
    // SAFETY: forwarded contract.
    let s = unsafe { fit_prefix(&l.header, &l.slices, &l.infos, n, k.bytes) };
    (s, info)
}

/// Give a new (locked, unpublished) node `to` the prefix of `from`, whose
/// entries it is about to receive as they are encoded.
fn copy_prefix(from: &Header, to: &Header) {
    for (a, b) in from.prefix.iter().zip(&to.prefix) {
        b.store(a.load(R), R);
    }
    to.pw.store(from.pw.load(R), R);
}

/// First position in the leaf whose key is ≥ `k`, and whether it equals `k`.
///
/// # Safety
/// The caller is pinned (KeyBoxes stay valid); `n ≤ LEAF_WIDTH`.
#[inline(always)]
unsafe fn leaf_lower_bound(leaf: &Leaf, n: usize, k: &SearchKey<'_>) -> (usize, bool) {
    let at = match probe(&leaf.header, k) {
        Probe::Below => return (0, false),
        Probe::Above => return (n, false),
        Probe::At(s, p) => (s, p),
    };
    // Fast path: count slices below the key without branches; if no slice
    // ties the key's, that count is the answer.
    let pos = match count_below(&leaf.slices, n, at.0) {
        Ok(pos) => return (pos, false),
        Err(pos) => pos,
    };
    // Every key before `pos` is below `k`. The first tie usually decides
    // (a key of at most 8 bytes that is present); else search the rest.
    // SAFETY: forwarded contract.
    match unsafe { compare_at(&leaf.slices, &leaf.infos, pos, at, k) } {
        Cmp::Less => {}
        Cmp::Equal => return (pos, true),
        Cmp::Greater => return (pos, false),
    }
    let (mut lo, mut hi) = (pos + 1, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        // SAFETY: forwarded contract.
        match unsafe { compare_at(&leaf.slices, &leaf.infos, mid, at, k) } {
            Cmp::Less => lo = mid + 1,
            Cmp::Equal => return (mid, true),
            Cmp::Greater => hi = mid,
        }
    }
    (lo, false)
}

/// The number of a node's first `n` slices below `slice`, or `Err` with
/// the position of the first slice that equals it (then the tie must be
/// broken by the full keys). Slices are sorted (a torn read's garbage is
/// caught by the caller's version check) and the slots from `n` on hold
/// [`UNUSED_SLICE`], which is never below a slice, so this is a lower
/// bound over all `W` slots: a binary search with a fixed number of steps
/// (5 at width 12), no data-dependent branch and no clamping to `n`. Each
/// step is a conditional move, so a mispredicted branch never costs more
/// than the compares saved. That is about a third of the instructions of
/// counting every slice (which this replaced: a quarter of TPC-C's
/// instructions went to node searches), and the padding took another
/// third of each step.
#[inline(always)]
fn count_below<const W: usize>(
    slices: &[crate::sync::AtomicU64; W],
    n: usize,
    slice: u64,
) -> Result<usize, usize> {
    let (mut base, mut size) = (0usize, W);
    while size > 1 {
        let half = size / 2;
        let below = slices[base + half].load(R) < slice;
        base += half * below as usize;
        size -= half;
    }
    let pos = base + (slices[base].load(R) < slice) as usize;
    // The first slice not below `slice` is the only one that can equal it.
    if pos < n && slices[pos].load(R) == slice {
        Err(pos)
    } else {
        Ok(pos.min(n))
    }
}

/// The child to follow: the number of separators ≤ `k` (or < `k` when
/// `before`). Child `i` holds the keys in `[sep[i-1], sep[i])`.
///
/// # Safety
/// The caller is pinned; `n ≤ INNER_WIDTH`.
#[inline(always)]
unsafe fn child_index(inner: &Inner, n: usize, k: &SearchKey<'_>, before: bool) -> usize {
    let at = match probe(&inner.header, k) {
        Probe::Below => return 0,
        Probe::Above => return n,
        Probe::At(s, p) => (s, p),
    };
    // Without a tie, "separators ≤ k" and "separators < k" agree.
    let pos = match count_below(&inner.slices, n, at.0) {
        Ok(i) => return i,
        // Every separator before `pos` is below `k`.
        Err(pos) => pos,
    };
    let (mut lo, mut hi) = (pos, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        // SAFETY: forwarded contract.
        let c = unsafe { compare_at(&inner.slices, &inner.infos, mid, at, k) };
        let right = if before {
            c == Cmp::Less
        } else {
            c != Cmp::Greater
        };
        if right {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[inline]
fn copy_entry(leaf: &Leaf, from: usize, to: &Leaf, at: usize) {
    to.slices[at].store(leaf.slices[from].load(R), R);
    to.infos[at].store(leaf.infos[from].load(R), R);
    to.values[at].store(leaf.values[from].load(R), R);
}

#[inline]
fn clear_entry(leaf: &Leaf, i: usize) {
    leaf.slices[i].store(UNUSED_SLICE, R);
    leaf.infos[i].store(0, R);
    leaf.values[i].store(0, R);
}

/// Insert an entry at `pos` into a locked leaf holding `n < LEAF_WIDTH`.
fn leaf_insert_at(leaf: &Leaf, n: usize, pos: usize, e: (u64, u64, u64)) {
    debug_assert!(n < LEAF_WIDTH && pos <= n);
    for i in (pos..n).rev() {
        copy_entry(leaf, i, leaf, i + 1);
    }
    leaf.slices[pos].store(e.0, R);
    leaf.infos[pos].store(e.1, R);
    leaf.values[pos].store(e.2, R);
    leaf.header.count.store(n + 1, R);
}

/// Look `k` up in leaf `l`, which covers it at version `v`: the lookup,
/// or `None` if the leaf changed since `v` (then nothing read is trusted).
///
/// # Safety
/// The caller is pinned.
#[inline(always)]
unsafe fn lookup_in(l: &Leaf, v: u64, k: &SearchKey<'_>) -> Option<Lookup> {
    let n = l.header.count.load(R).min(LEAF_WIDTH);
    // SAFETY: pinned (caller's contract); `n` clamped.
    let (pos, found) = unsafe { leaf_lower_bound(l, n, k) };
    let value = if found { l.values[pos].load(R) } else { 0 };
    if l.header.version.has_changed(v) {
        return None;
    }
    Some(Lookup {
        value: found.then_some(value),
        leaf: LeafRef(NonNull::from(l)),
        version: v,
    })
}

/// # Safety
/// `p` must point at a live node.
#[inline(always)]
unsafe fn hdr<'a>(p: *const Header) -> &'a Header {
    // SAFETY: caller's contract.
    unsafe { &*p }
}

impl Tree {
    /// An empty tree (one empty leaf).
    pub fn new() -> Tree {
        let leaf = Box::into_raw(Leaf::new(None, false));
        Tree {
            root: AtomicPtr::new(leaf as *mut Header),
            unlinks: AtomicU64::new(0),
            points: None,
        }
    }

    /// An empty tree with a point index: a hash table over the same keys
    /// that answers [`Tree::find`] with one bucket instead of a descent,
    /// for about 20–40 more bytes a key and a little more work per insert
    /// and remove (ARCHITECTURE.md, "The point index").
    pub fn with_point_index() -> Tree {
        let mut t = Tree::new();
        t.points = Some(PointIndex::new());
        t
    }

    /// Whether the tree has a point index.
    pub fn has_point_index(&self) -> bool {
        self.points.is_some()
    }

    /// The value of `key`, if present: [`Tree::get`]'s value, from the
    /// point index if the tree has one. It reports no leaf, so a caller
    /// that must validate an absence (a phantom check) looks an absent
    /// key up again with [`Tree::get`].
    #[inline]
    pub fn find<G: Guard>(&self, key: &[u8], g: &G) -> Option<u64> {
        match &self.points {
            // SAFETY: pinned by `g`, a guard of the tree's domain.
            Some(p) => unsafe { p.get(&p.probe(&SearchKey::new(key))) },
            None => self.get(key, g).value,
        }
    }

    /// The most keys [`Tree::find_many`] descends for together.
    pub const FIND_MANY: usize = 16;

    /// [`Tree::find`] for each of `keys` (at most [`Tree::FIND_MANY`]; the
    /// rest are left `None`), into `out`, with their cache misses
    /// overlapped: without a point index the descents go down together,
    /// a level at a time, each node fetched a round before it is read, so
    /// a level's misses are waited for once for all keys instead of once
    /// per key. Each descent makes the checks [`Tree::get`]'s does, in the
    /// same order (a round apart), so it ends at the same leaf; one that
    /// fails a check looks its key up alone.
    pub fn find_many<G: Guard>(&self, keys: &[&[u8]], out: &mut [Option<u64>], g: &G) {
        const N: usize = Tree::FIND_MANY;
        let n = keys.len().min(N).min(out.len());
        if self.points.is_some() {
            for (o, k) in out.iter_mut().zip(&keys[..n]) {
                *o = self.find(k, g);
            }
            return;
        }
        /// One key's descent: the node to read next (null once at its
        /// leaf or given up), its parent and the parent's version.
        #[derive(Clone, Copy)]
        struct Walk {
            node: *const Header,
            parent: *const Header,
            pv: u64,
            leaf: *const Leaf,
            v: u64,
        }
        let none = SearchKey {
            slice: 0,
            bytes: &[],
        };
        let sk: [SearchKey<'_>; N] =
            std::array::from_fn(|i| keys[..n].get(i).map_or(none, |k| SearchKey::new(k)));
        // Acquire: pairs with the Release store of a new root.
        let root = self.root.load(Ordering::Acquire) as *const Header;
        prefetch(root);
        let mut walks = [Walk {
            node: root,
            parent: std::ptr::null(),
            pv: 0,
            leaf: std::ptr::null(),
            v: 0,
        }; N];
        let mut going = true;
        while going {
            going = false;
            for (w, k) in walks.iter_mut().zip(&sk).take(n) {
                if w.node.is_null() {
                    continue;
                }
                // SAFETY: the root, never unlinked, or a child read from a
                // validated parent while pinned (as in `descend`).
                let h = unsafe { hdr(w.node) };
                let v = h.version.stable();
                // SAFETY: null, or a node this descent read while pinned.
                let parent = unsafe { w.parent.as_ref() };
                let moved = match parent {
                    // A root split leaves the old root covering only its
                    // left half (Acquire: as the root load above).
                    None => !std::ptr::eq(self.root.load(Ordering::Acquire), w.node),
                    // The child could have split between reading the
                    // pointer and its version; a split changes the parent.
                    Some(p) => p.version.has_changed(w.pv),
                };
                if moved {
                    w.node = std::ptr::null();
                    continue;
                }
                if h.is_leaf {
                    (w.leaf, w.v) = (w.node as *const Leaf, v);
                    w.node = std::ptr::null();
                    continue;
                }
                // SAFETY: `is_leaf` is false, so this is an Inner.
                let inner = unsafe { &*(w.node as *const Inner) };
                let c = inner.header.count.load(R).min(INNER_WIDTH);
                // SAFETY: pinned by the caller's guard.
                let idx = unsafe { child_index(inner, c, k, false) };
                let child = inner.children[idx].load(R) as *const Header;
                prefetch(child);
                if h.version.has_changed(v) || child.is_null() {
                    w.node = std::ptr::null();
                    continue;
                }
                (w.parent, w.pv, w.node) = (w.node, v, child);
                going = true;
            }
        }
        for ((o, w), (k, key)) in out.iter_mut().zip(&walks).zip(sk.iter().zip(keys)).take(n) {
            // SAFETY: a leaf reached as `descend` reaches one, covering `k`
            // at `w.v`; pinned by `g`.
            let found = (!w.leaf.is_null())
                .then(|| unsafe { lookup_in(&*w.leaf, w.v, k) })
                .flatten();
            *o = match found {
                Some(look) => look.value,
                None => self.get(key, g).value,
            };
        }
    }

    /// Start fetching what a lookup of `key` will read first (its point
    /// index bucket; nothing for a tree without one), so that lookups of
    /// several keys known in advance wait for their misses together.
    #[inline]
    pub fn prefetch<G: Guard>(&self, key: &[u8], _g: &G) {
        if let Some(p) = &self.points {
            // SAFETY: pinned by `_g`, a guard of the tree's domain.
            unsafe { p.prefetch(&p.probe(&SearchKey::new(key))) }
        }
    }

    /// Grow the point index if an insert found it crowded (with no leaf
    /// locked: moving it takes every bucket's lock in turn).
    #[inline(always)]
    fn grow_points<G: Guard>(&self, g: &mut G) {
        if let Some(p) = &self.points {
            if p.crowded() {
                if let Some(old) = p.grow() {
                    g.retire(Retired::table(old));
                }
            }
        }
    }

    /// How many times nodes have been unlinked from this tree so far. A
    /// caller that keeps a [`LeafRef`] from one pin to the next may read
    /// through it in a later pin only if this count, loaded (it is
    /// `SeqCst`) after that pin began, equals the one loaded before the
    /// leaf was found: then no node has been unlinked, nor freed, since.
    pub fn unlinks(&self) -> u64 {
        self.unlinks.load(Ordering::SeqCst)
    }

    /// Descend (read-only) to the leaf for `t`; returns it with the stable
    /// version under which it covers `t`.
    #[inline(always)]
    fn find_leaf<G: Guard>(&self, t: Target<'_>, g: &G) -> (*const Leaf, u64) {
        self.descend(t, g, |_, _| {})
    }

    /// [`Tree::find_leaf`], telling `on_inner(depth, (node, version,
    /// child, separators))` each inner node it passes, whose child pointer
    /// it then validated; a restart from the root passes depth 0 again.
    #[inline(always)]
    fn descend<'s, G: Guard>(
        &'s self,
        t: Target<'_>,
        _g: &G,
        mut on_inner: impl FnMut(usize, Step<'s>),
    ) -> (*const Leaf, u64) {
        'restart: loop {
            // Acquire: pairs with the Release store of a new root.
            let mut node = self.root.load(Ordering::Acquire) as *const Header;
            prefetch(node);
            // SAFETY: pinned; the root is never unlinked.
            let mut v = unsafe { hdr(node) }.version.stable();
            // A root split leaves the old root covering only its left half.
            if !std::ptr::eq(self.root.load(Ordering::Acquire), node) {
                continue 'restart;
            }
            let mut depth = 0;
            loop {
                // SAFETY: read while pinned through validated pointers.
                let h = unsafe { hdr(node) };
                if h.is_leaf {
                    return (node as *const Leaf, v);
                }
                // SAFETY: `is_leaf` is false, so this is an Inner.
                let inner = unsafe { &*(node as *const Inner) };
                let n = inner.header.count.load(R).min(INNER_WIDTH);
                let idx = match t {
                    // SAFETY: pinned by the caller's guard.
                    Target::At(k) => unsafe { child_index(inner, n, &k, false) },
                    // SAFETY: as above.
                    Target::Before(k) => unsafe { child_index(inner, n, &k, true) },
                    Target::Rightmost => n,
                };
                let child = inner.children[idx].load(R) as *const Header;
                prefetch(child);
                if h.version.has_changed(v) || child.is_null() {
                    continue 'restart;
                }
                // SAFETY: validated pointer to a live node.
                let cv = unsafe { hdr(child) }.version.stable();
                // The child could have split between reading the pointer and
                // its version; a split changes the parent too.
                if h.version.has_changed(v) {
                    continue 'restart;
                }
                on_inner(depth, (inner, v, idx, n));
                depth += 1;
                node = child;
                v = cv;
            }
        }
    }

    /// Descend for a write to `k`, splitting any full inner node on the
    /// way. Returns the leaf and its version, and the parent (null if the
    /// leaf is the root) and its version.
    fn find_leaf_for_write(&self, k: &SearchKey<'_>) -> (*const Leaf, u64, *const Inner, u64) {
        'restart: loop {
            // Acquire: pairs with the Release store of a new root.
            let mut node = self.root.load(Ordering::Acquire) as *const Header;
            prefetch(node);
            // SAFETY: pinned; the root is never unlinked.
            let mut v = unsafe { hdr(node) }.version.stable();
            if !std::ptr::eq(self.root.load(Ordering::Acquire), node) {
                continue 'restart;
            }
            let mut parent: *const Inner = std::ptr::null();
            let mut pv = 0;
            loop {
                // SAFETY: live node.
                let h = unsafe { hdr(node) };
                if h.is_leaf {
                    return (node as *const Leaf, v, parent, pv);
                }
                // SAFETY: not a leaf.
                let inner = unsafe { &*(node as *const Inner) };
                let n = inner.header.count.load(R).min(INNER_WIDTH);
                if n == INNER_WIDTH {
                    // SAFETY: parent (if any) is live.
                    let p = unsafe { parent.as_ref() };
                    if let Some(p) = p {
                        if !p.header.version.try_lock(pv) {
                            continue 'restart;
                        }
                    }
                    if !h.version.try_lock(v) {
                        if let Some(p) = p {
                            p.header.version.unlock_unchanged();
                        }
                        continue 'restart;
                    }
                    // SAFETY: pinned; locked.
                    let at = unsafe { child_index(inner, n, k, false) };
                    // SAFETY: both locked at the versions we validated.
                    unsafe { self.split_inner(inner, p, at) };
                    h.version.unlock();
                    if let Some(p) = p {
                        p.header.version.unlock();
                    }
                    continue 'restart;
                }
                // SAFETY: pinned by the caller.
                let idx = unsafe { child_index(inner, n, k, false) };
                let child = inner.children[idx].load(R) as *const Header;
                prefetch(child);
                if h.version.has_changed(v) || child.is_null() {
                    continue 'restart;
                }
                // SAFETY: validated pointer to a live node.
                let cv = unsafe { hdr(child) }.version.stable();
                if h.version.has_changed(v) {
                    continue 'restart;
                }
                parent = inner;
                pv = v;
                node = child;
                v = cv;
            }
        }
    }

    /// Split a full, locked inner node at child `at` (where the key being
    /// inserted goes); `parent` (locked, not full) or a new root receives
    /// the separator between the halves.
    ///
    /// # Safety
    /// `inner` and `parent` are locked by the caller.
    unsafe fn split_inner(&self, inner: &Inner, parent: Option<&Inner>, at: usize) {
        let n = inner.header.count.load(R);
        // Split where the key goes: its child ends the left node. A run
        // of ascending keys — a sequential load, one loader thread's range
        // below another's, TPC-C's orders of one district — then keeps
        // adding separators at the left node's end and fills it, where a
        // split in the middle would leave half-full nodes behind it for
        // good (a taller tree: docs/BENCHMARKS.md). Past the last
        // separator this is the append split (the left node stays full).
        let m = at.min(n - 1);
        let right = Inner::new_locked();
        copy_prefix(&inner.header, &right.header);
        let (ss, si) = (inner.slices[m].load(R), inner.infos[m].load(R));
        let mut tmp = [0u8; 8];
        // SAFETY: a live separator of a locked node (separators are leaf
        // fences; a locked node's are not unlinked).
        let sep_bytes = unsafe { stored_bytes(ss, si, &mut tmp) };
        for i in m + 1..n {
            right.slices[i - m - 1].store(inner.slices[i].load(R), R);
            right.infos[i - m - 1].store(inner.infos[i].load(R), R);
        }
        for i in m + 1..=n {
            right.children[i - m - 1].store(inner.children[i].load(R), R);
        }
        right.header.count.store(n - m - 1, R);
        // The separator moves up: clear its slot, as a leaf clears moved
        // entries.
        for i in m..n {
            inner.slices[i].store(UNUSED_SLICE, R);
            inner.infos[i].store(0, R);
        }
        inner.header.count.store(m, R);
        // SAFETY: both locked, so their separators stay; pinned.
        unsafe {
            repack(&inner.header, &inner.slices, &inner.infos, m);
            repack(&right.header, &right.slices, &right.infos, n - m - 1);
        }
        let right = Box::into_raw(right);
        // SAFETY: caller holds the locks `attach` needs.
        unsafe {
            self.attach(
                parent,
                inner as *const Inner as *mut Header,
                (si, sep_bytes),
                right as *mut Header,
            )
        };
        // SAFETY: just allocated, now linked.
        unsafe { (*right).header.version.unlock() };
    }

    /// Link `right` (split off `left`, separated by `sep`) into `parent`,
    /// or grow a new root.
    ///
    /// # Safety
    /// `parent`, if any, is locked and not full; `left` is locked.
    unsafe fn attach(
        &self,
        parent: Option<&Inner>,
        left: *mut Header,
        (sep_info, sep_bytes): (u64, &[u8]),
        right: *mut Header,
    ) {
        match parent {
            Some(p) => {
                let n = p.header.count.load(R);
                debug_assert!(n < INNER_WIDTH);
                // SAFETY: locked (caller's contract); pinned.
                let sep = unsafe { fit_prefix(&p.header, &p.slices, &p.infos, n, sep_bytes) };
                let idx = (0..=n)
                    .find(|&i| p.children[i].load(R) == left)
                    .expect("split node is a child of its locked parent");
                for i in (idx..n).rev() {
                    p.slices[i + 1].store(p.slices[i].load(R), R);
                    p.infos[i + 1].store(p.infos[i].load(R), R);
                }
                for i in (idx + 1..=n).rev() {
                    p.children[i + 1].store(p.children[i].load(R), R);
                }
                p.slices[idx].store(sep, R);
                p.infos[idx].store(sep_info, R);
                p.children[idx + 1].store(right, R);
                p.header.count.store(n + 1, R);
            }
            None => {
                let root = Inner::new_locked();
                root.slices[0].store(word_of(sep_bytes, 0), R);
                root.infos[0].store(sep_info, R);
                root.children[0].store(left, R);
                root.children[1].store(right, R);
                root.header.count.store(1, R);
                // SAFETY: new and locked.
                unsafe { repack(&root.header, &root.slices, &root.infos, 1) };
                root.header.version.unlock();
                // Release: pairs with the Acquire root loads in descents.
                self.root
                    .store(Box::into_raw(root) as *mut Header, Ordering::Release);
            }
        }
    }

    /// Point lookup.
    pub fn get<G: Guard>(&self, key: &[u8], g: &G) -> Lookup {
        let k = SearchKey::new(key);
        loop {
            let (leaf, v) = self.find_leaf(Target::At(k), g);
            // SAFETY: found while pinned by `g`; `leaf`
            // covers `k` at `v`; pinned by `g`.
            if let Some(look) = unsafe { lookup_in(&*leaf, v, &k) } {
                return look;
            }
        }
    }

    /// Point lookup, as [`Tree::get`], trying first the leaf `hint` — the
    /// [`Lookup::leaf`] of an earlier lookup in this tree, typically of a
    /// nearby key — and its right sibling. A leaf is used only if, read
    /// under its version, it covers the key (the same check as a
    /// [`Cursor`]'s); otherwise the lookup descends from the root. Keys
    /// that arrive in runs (a transaction's order lines, say) then mostly
    /// skip the descent. A stale or distant hint makes the lookup slower,
    /// never wrong.
    ///
    /// # Safety
    /// `hint` is a leaf of this tree that is not freed: found while the
    /// caller was pinned as it still is, or in an earlier pin with no
    /// node unlinked since ([`Tree::unlinks`]). A leaf of another tree
    /// could cover the key and answer for the wrong tree.
    pub unsafe fn get_hinted<G: Guard>(&self, hint: LeafRef, key: &[u8], g: &G) -> Lookup {
        let k = SearchKey::new(key);
        let mut leaf = hint.0;
        for _ in 0..2 {
            // SAFETY: not freed (caller's contract), or a sibling read
            // from such a leaf while pinned.
            let l = unsafe { leaf.as_ref() };
            let v = l.header.version.stable();
            // SAFETY: pinned by the caller's guard.
            match unsafe { covers(l, v, &k) } {
                Covers::Yes => {
                    // SAFETY: `l` covers `k` at `v`; pinned by `g`.
                    match unsafe { lookup_in(l, v, &k) } {
                        Some(look) => return look,
                        None => break,
                    }
                }
                Covers::Right(next) => leaf = next,
                Covers::No => break,
            }
        }
        self.get(key, g)
    }

    /// Insert `key → value` if the key is absent.
    pub fn insert<G: Guard>(&self, key: &[u8], value: u64, g: &mut G) -> Insert {
        let r = into_insert(self.insert_impl::<G, false>(key, value, false, &mut None, g));
        self.grow_points(g);
        r
    }

    /// Insert `key → value` if the key is absent, as [`Tree::insert`]
    /// does, trying first the leaf `hint` — the [`Lookup::leaf`] of a
    /// lookup of the same key that found it absent — so the insert needs
    /// no second descent. The leaf is used only if, read under its version,
    /// it still covers the key and has room (the same checks as a
    /// [`Cursor`]'s); otherwise the insert descends from the root. A stale
    /// hint makes the insert slower, never wrong.
    ///
    /// # Safety
    /// As for [`Tree::get_hinted`].
    pub unsafe fn insert_hinted<G: Guard>(
        &self,
        hint: LeafRef,
        key: &[u8],
        value: u64,
        g: &mut G,
    ) -> Insert {
        let k = SearchKey::new(key);
        // SAFETY: not freed (caller's contract).
        let l = unsafe { hint.0.as_ref() };
        let v = l.header.version.stable();
        // SAFETY: pinned by the caller's guard.
        if let Covers::Yes = unsafe { covers(l, v, &k) } {
            // SAFETY: `l` covered `k` at `v`; pinned. With the parent
            // unknown, a full leaf returns `None` rather than splitting.
            let done = unsafe {
                self.insert_into::<false>(l, v, Parent::Unknown, &k, value, false, &mut None)
            };
            if let Some(done) = done {
                self.grow_points(g);
                return into_insert(done);
            }
        }
        let r = into_insert(self.insert_impl::<G, false>(key, value, false, &mut None, g));
        self.grow_points(g);
        r
    }

    /// Insert or overwrite; returns the old value if there was one, and the
    /// leaf change if a key was added.
    pub fn upsert<G: Guard>(
        &self,
        key: &[u8],
        value: u64,
        g: &mut G,
    ) -> (Option<u64>, Option<NodeChange>) {
        let r = self.insert_impl::<G, false>(key, value, true, &mut None, g);
        self.grow_points(g);
        r
    }

    /// A cursor for inserting keys that arrive in ascending runs; see
    /// [`Cursor`].
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor {
            tree: self,
            at: None,
            unlinks: self.unlinks(),
        }
    }

    /// Insert by descending from the root, as often as it takes (`CURSOR`
    /// and `spot` as for [`Tree::insert_into`]).
    fn insert_impl<G: Guard, const CURSOR: bool>(
        &self,
        key: &[u8],
        value: u64,
        overwrite: bool,
        spot: &mut Option<Spot>,
        _g: &mut G,
    ) -> Outcome {
        let k = &SearchKey::new(key);
        loop {
            let (leaf, v, parent, pv) = self.find_leaf_for_write(k);
            let parent = match parent.is_null() {
                true => Parent::Root,
                false => Parent::Node(parent, pv),
            };
            // SAFETY: a live leaf that covered `k` at `v`; pinned by the
            // caller's guard.
            let done =
                unsafe { self.insert_into::<CURSOR>(&*leaf, v, parent, k, value, overwrite, spot) };
            if let Some(done) = done {
                return done;
            }
        }
    }

    /// Insert `k → value` into leaf `l` (or find `k` there), where `l`
    /// covered `k` when its version was `v`, and `parent` is what is known
    /// of where `l` hangs. A full leaf is split, with its parent locked too.
    /// Returns `None`, having changed nothing, if `l` changed since `v`, a
    /// lock was taken, or a split is needed and the parent is unknown or
    /// has no room: the caller descends and tries again. For a `CURSOR`,
    /// a full leaf splits at the key ([`Tree::split_leaf`]) and `spot` is
    /// set to where the key is; plain inserts leave `spot` alone (so they
    /// pay nothing for it).
    ///
    /// # Safety
    /// The caller is pinned; `l` covered `k` at version `v` (or `v` is
    /// stale, which the version checks here catch).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn insert_into<const CURSOR: bool>(
        &self,
        l: &Leaf,
        v: u64,
        parent: Parent,
        k: &SearchKey<'_>,
        value: u64,
        overwrite: bool,
        spot: &mut Option<Spot>,
    ) -> Option<Outcome> {
        let here = NonNull::from(l);
        // "The leaf is the root" holds only at version `v`: after this call
        // the leaf's parent is unknown.
        let kept = match parent {
            Parent::Root => Parent::Unknown,
            p => p,
        };
        let n = l.header.count.load(R).min(LEAF_WIDTH);
        // SAFETY: pinned (caller's contract).
        let (pos, found) = unsafe { leaf_lower_bound(l, n, k) };
        if found {
            let old = l.values[pos].load(R);
            if l.header.version.has_changed(v) {
                return None;
            }
            if overwrite {
                if !l.header.version.try_lock(v) {
                    return None;
                }
                l.values[pos].store(value, R);
                if let Some(p) = &self.points {
                    p.set(&p.probe(k), l.infos[pos].load(R), value);
                }
                l.header.version.unlock_unchanged();
            }
            if CURSOR {
                *spot = Some((here, kept));
            }
            return Some((Some(old), None));
        }
        if l.header.version.has_changed(v) {
            return None;
        }
        let lref = LeafRef(here);
        if n < LEAF_WIDTH {
            if !l.header.version.try_lock(v) {
                return None;
            }
            // SAFETY: locked at `v` (so `n` and `pos` hold); pinned.
            let (s, info) = unsafe { stored_in(l, n, k) };
            leaf_insert_at(l, n, pos, (s, info, value));
            if let Some(p) = &self.points {
                p.insert(&p.probe(k), info, value);
            }
            let nv = l.header.version.unlock();
            if CURSOR {
                *spot = Some((here, kept));
            }
            let change = NodeChange {
                leaf: lref,
                old_version: v,
                new_version: nv,
                split: None,
            };
            return Some((None, Some(change)));
        }
        // Full leaf: lock parent and leaf, split, insert, in one step.
        let p = match parent {
            Parent::Root => None,
            Parent::Node(p, pv) => {
                // SAFETY: found while pinned (caller's contract).
                let p = unsafe { &*p };
                if !p.header.version.try_lock(pv) {
                    return None;
                }
                // A parent met on a descent has room (full inner nodes are
                // split on the way down); one a cursor kept may have filled.
                if p.header.count.load(R) >= INNER_WIDTH {
                    p.header.version.unlock_unchanged();
                    return None;
                }
                Some(p)
            }
            Parent::Unknown => return None,
        };
        if !l.header.version.try_lock(v) {
            if let Some(p) = p {
                p.header.version.unlock_unchanged();
            }
            return None;
        }
        // SAFETY: locked at `v` (so `n` and `pos` hold); pinned.
        let (s, info) = unsafe { stored_in(l, n, k) };
        // SAFETY: leaf and parent are locked at validated versions, and the
        // parent has room.
        let (right, in_left) = unsafe { self.split_leaf(l, p, pos, (s, info, value), CURSOR) };
        if let Some(pi) = &self.points {
            pi.insert(&pi.probe(k), info, value);
        }
        let nv = l.header.version.unlock();
        // SAFETY: `right` was just linked and is live.
        let rv = unsafe { (*right).header.version.unlock() };
        let right = NonNull::new(right).expect("non-null");
        // Both halves are children of the parent at the version it unlocks
        // with; a new root is not known here.
        let parent = match p {
            Some(p) => Parent::Node(p, p.header.version.unlock()),
            None => Parent::Unknown,
        };
        if CURSOR {
            *spot = Some((if in_left { here } else { right }, parent));
        }
        let change = NodeChange {
            leaf: lref,
            old_version: v,
            new_version: nv,
            split: Some((LeafRef(right), rv)),
        };
        Some((None, Some(change)))
    }

    /// Split a full locked leaf, inserting entry `e` at position `pos`.
    /// Returns the new right leaf, still locked, and whether the new entry
    /// went into the left leaf.
    ///
    /// # Safety
    /// `leaf` and `parent` are locked, `parent` has room; the caller is
    /// pinned.
    unsafe fn split_leaf(
        &self,
        leaf: &Leaf,
        parent: Option<&Inner>,
        pos: usize,
        e: (u64, u64, u64),
        at_key: bool,
    ) -> (*mut Leaf, bool) {
        let n = LEAF_WIDTH;
        // Appending at the end (a sequential load) leaves the left leaf
        // full and starts the right one with just the new key. Inside a
        // leaf, a split moves the upper half right, or, for a cursor's
        // ascending run, every key above the new one: the run then goes on
        // filling the left leaf (the new key is its last) instead of
        // splitting again every few keys and leaving half-full leaves
        // behind, as it would when loaded into a gap between keys already
        // there (another checkpoint file's).
        let append = pos == n;
        let m = match (append, at_key) {
            (true, _) => n,
            (false, false) => n / 2,
            (false, true) => pos,
        };
        let in_left = pos < m || (pos == m && !append);
        let mut tmp = [0u8; 8];
        // The separator is the right leaf's first key: entry m, or the new
        // key when appending. The fence gets its own copy.
        let (ss, si) = if append {
            (e.0, e.1)
        } else {
            (leaf.slices[m].load(R), leaf.infos[m].load(R))
        };
        // SAFETY: a live entry (or the new key) while we hold the lock.
        let sep_bytes = unsafe { stored_bytes(ss, si, &mut tmp) };
        let low = make_stored(sep_bytes);
        let right = Leaf::new(Some(low), true);
        copy_prefix(&leaf.header, &right.header);
        for i in m..n {
            copy_entry(leaf, i, &right, i - m);
        }
        right.header.count.store(n - m, R);
        // Clear moved slots: a stale key pointer left here could later be
        // freed through the right leaf while optimistic readers of this one
        // still load it.
        for i in m..n {
            clear_entry(leaf, i);
        }
        leaf.header.count.store(m, R);
        if in_left {
            leaf_insert_at(leaf, m, pos, e);
        } else {
            leaf_insert_at(&right, n - m, pos - m, e);
        }
        // SAFETY: both locked; pinned.
        unsafe {
            repack(
                &leaf.header,
                &leaf.slices,
                &leaf.infos,
                leaf.header.count.load(R),
            );
            repack(
                &right.header,
                &right.slices,
                &right.infos,
                right.header.count.load(R),
            );
        }
        right.next.store(leaf.next.load(R), R);
        let right = Box::into_raw(right);
        leaf.next.store(right, R);
        // SAFETY: caller holds the locks.
        unsafe {
            self.attach(
                parent,
                leaf as *const Leaf as *mut Header,
                (low.1, sep_bytes),
                right as *mut Header,
            )
        };
        (right, in_left)
    }

    /// Find `key` and lock its leaf. Returns the leaf (locked), the version
    /// it had, its entry count and the key's position; `None` (nothing
    /// locked) if the key is absent.
    fn lock_entry<G: Guard>(&self, k: &SearchKey<'_>, g: &G) -> Option<(&Leaf, u64, usize, usize)> {
        loop {
            let (leaf, v) = self.find_leaf(Target::At(*k), g);
            // SAFETY: live leaf.
            let l = unsafe { &*leaf };
            let n = l.header.count.load(R).min(LEAF_WIDTH);
            // SAFETY: pinned by the caller's guard.
            let (pos, found) = unsafe { leaf_lower_bound(l, n, k) };
            if l.header.version.has_changed(v) {
                continue;
            }
            if !found {
                return None;
            }
            if l.header.version.try_lock(v) {
                return Some((l, v, n, pos));
            }
        }
    }

    /// Swap the value of `key` from `expected` to `new`. The key set is
    /// unchanged, so the leaf version is left as it was. Returns false if
    /// the key is absent or holds another value.
    pub fn replace<G: Guard>(&self, key: &[u8], expected: u64, new: u64, g: &mut G) -> bool {
        let k = SearchKey::new(key);
        let Some((l, _, _, pos)) = self.lock_entry(&k, g) else {
            return false;
        };
        let ok = l.values[pos].load(R) == expected;
        if ok {
            l.values[pos].store(new, R);
            if let Some(p) = &self.points {
                p.set(&p.probe(&k), l.infos[pos].load(R), new);
            }
        }
        l.header.version.unlock_unchanged();
        ok
    }

    /// Remove `key`; returns its value and the leaf change. A remove that
    /// empties its leaf unlinks it and hands it to `g`, so the change's
    /// `leaf` may already be unlinked (its version then carries the
    /// deleted bit): read it only while pinned, as any `LeafRef`.
    pub fn remove<G: Guard>(&self, key: &[u8], g: &mut G) -> Option<(u64, NodeChange)> {
        self.remove_impl(key, None, g)
    }

    /// Remove `key` only if it maps to `expected`.
    pub fn remove_if<G: Guard>(&self, key: &[u8], expected: u64, g: &mut G) -> Option<NodeChange> {
        self.remove_impl(key, Some(expected), g).map(|(_, c)| c)
    }

    fn remove_impl<G: Guard>(
        &self,
        key: &[u8],
        expected: Option<u64>,
        g: &mut G,
    ) -> Option<(u64, NodeChange)> {
        let k = SearchKey::new(key);
        let (l, v, n, pos) = self.lock_entry(&k, g)?;
        let value = l.values[pos].load(R);
        if expected.is_some_and(|e| e != value) {
            l.header.version.unlock_unchanged();
            return None;
        }
        let info = l.infos[pos].load(R);
        if let Some(p) = &self.points {
            p.remove(&p.probe(&k), info);
        }
        for i in pos + 1..n {
            copy_entry(l, i, l, i - 1);
        }
        clear_entry(l, n - 1);
        l.header.count.store(n - 1, R);
        let nv = l.header.version.unlock();
        if let Some(r) = Retired::new(info) {
            g.retire(r);
        }
        let change = NodeChange {
            leaf: LeafRef(NonNull::from(l)),
            old_version: v,
            new_version: nv,
            split: None,
        };
        if n == 1 && l.low().is_some() {
            // SAFETY: pinned by `g`, since before `l` was found.
            unsafe { self.unlink_empty(l, g) };
        }
        Some((value, change))
    }

    /// Unlink leaf `l`, which a remove just emptied, unless a key came
    /// back meanwhile. Masstree (Mao et al., EuroSys'12) removes empty
    /// leaves too; this
    /// is the B+-tree form, written out in ARCHITECTURE.md ("Freeing
    /// empty leaves"):
    ///
    /// * The leaf's left neighbour (the leaf whose `next` it is) takes
    ///   over its key range: its `next` skips the leaf.
    /// * The leaf leaves its parent, with the separator that is its
    ///   fence. A parent left with no child leaves its own parent the same
    ///   way, up to the lowest ancestor `pm` with two children or more.
    /// * If the leaf's subtree was `pm`'s first child, `pm`'s lower bound
    ///   — the separator at the lowest ancestor above where the path
    ///   does not take the first child, which is also the leaf's fence —
    ///   becomes the fence of `pm`'s new first child. So every separator
    ///   stays the fence of the leftmost leaf to its right (a leaf split
    ///   makes it so; inner splits move separators, never copy them), and
    ///   the leaf's fence can go with it.
    ///
    /// Every node involved is locked with `try_lock` at the version its
    /// descent read (so the path is exactly as read, and no lock order is
    /// needed: a lost race releases everything and tries again), changed,
    /// and unlocked; the unlinked nodes get the deleted mark and go to
    /// `g`. That includes the first children between `pj` and `pm`: their
    /// contents stay, but their lower bound moves up with `pm`'s, and a
    /// descent that passed `pj` before the unlink must see them change.
    /// The leftmost leaf stays (it has no left neighbour), so the root
    /// never goes and the tree keeps its height.
    ///
    /// # Safety
    /// The caller is pinned by `g`, since before `l` was found.
    unsafe fn unlink_empty<G: Guard>(&self, l: &Leaf, g: &mut G) {
        for _ in 0..UNLINK_TRIES {
            // SAFETY: forwarded contract.
            match unsafe { self.try_unlink(l, g) } {
                Unlink::Done | Unlink::Not => return,
                Unlink::Retry => spin(),
            }
        }
    }

    /// One try of [`Tree::unlink_empty`].
    ///
    /// # Safety
    /// As for [`Tree::unlink_empty`].
    unsafe fn try_unlink<G: Guard>(&self, l: &Leaf, g: &mut G) -> Unlink {
        let v = l.header.version.stable();
        if is_deleted(v) || l.header.count.load(R) != 0 {
            return Unlink::Not;
        }
        let Some((fs, fi)) = l.low() else {
            return Unlink::Not;
        };
        let mut tmp = [0u8; 8];
        // SAFETY: the fence is immutable and lives with the leaf; pinned.
        let fence = unsafe { stored_bytes(fs, fi, &mut tmp) };
        let k = SearchKey::new(fence);
        // The path from the root to the leaf, by its fence.
        let mut path: Vec<Step<'_>> = Vec::with_capacity(8);
        let (node, nv) = self.descend(Target::At(k), &*g, |depth, step| {
            path.truncate(depth);
            path.push(step);
        });
        if !std::ptr::eq(node, l) || nv != v {
            return Unlink::Retry;
        }
        // `pm`: the lowest ancestor with a second child; the ones below it
        // have only the child on the path and go with the leaf.
        let Some(m) = path.iter().rposition(|&(_, _, _, n)| n >= 1) else {
            return Unlink::Not;
        };
        let (pm, pmv, cm, nm) = path[m];
        // `pj`: where `pm`'s lower bound is kept, if the path enters `pm`'s
        // first child.
        let j = match cm {
            0 => match path[..m].iter().rposition(|&(_, _, c, _)| c > 0) {
                Some(j) => Some(j),
                None => return Unlink::Not,
            },
            _ => None,
        };
        let (ls, lsv) = self.find_leaf(Target::Before(k), &*g);
        // SAFETY: found while pinned.
        let ls = unsafe { &*ls };
        if std::ptr::eq(ls, l) {
            return Unlink::Retry;
        }
        // The first children between `pj` and `pm`: their lower bound
        // moves up with `pm`'s, so they change version too. A descent for
        // a key of the leaf's old range that passed `pj` before the unlink
        // would otherwise go on down through them unchallenged and reach
        // `pm` after it, whose new first child starts above the key: a
        // leaf that does not cover it (an insert there is lost).
        let between = j.map_or(&path[..0], |j| &path[j + 1..m]);
        let mut held: Vec<&NodeVersion> = Vec::with_capacity(path.len() + 3);
        let h = &mut held;
        let locked = lock_at(h, &ls.header.version, lsv)
            && lock_at(h, &l.header.version, v)
            && path[m + 1..]
                .iter()
                .all(|&(n, nv, _, _)| lock_at(h, &n.header.version, nv))
            && lock_at(h, &pm.header.version, pmv)
            && between
                .iter()
                .all(|&(n, nv, _, _)| lock_at(h, &n.header.version, nv))
            && j.is_none_or(|j| lock_at(h, &path[j].0.header.version, path[j].1));
        // Under its lock the left neighbour cannot split, so a `next` that
        // is the leaf stays so.
        let linked = locked && std::ptr::eq(ls.next.load(R), l);
        // Every separator is the fence of the leftmost leaf to its right:
        // the one left of the path at `pm` (or `pj`) is the leaf's.
        let (sn, sc) = match j {
            None => (pm, cm - 1),
            Some(j) => (path[j].0, path[j].2 - 1),
        };
        // SAFETY: locked (or just read; only used if locked); pinned.
        let fenced = linked
            && sn.infos[sc].load(R) == fi
            && unsafe { stored_bytes(sn.slices[sc].load(R), fi, &mut [0u8; 8]) } == fence;
        if !fenced {
            debug_assert!(!linked, "a separator is not its leaf's fence");
            for h in held {
                h.unlock_unchanged();
            }
            return Unlink::Retry;
        }
        // The left neighbour's range grows over the leaf's (B-link: a
        // reader that moves right from it now skips the leaf).
        ls.next.store(l.next.load(R), R);
        match j {
            None => inner_remove(pm, nm, cm - 1, cm),
            Some(j) => {
                let (pj, _, cj, nj) = path[j];
                // `pm`'s second child's fence becomes `pm`'s lower bound.
                let (ns, ni) = (pm.slices[0].load(R), pm.infos[0].load(R));
                let mut t = [0u8; 8];
                // SAFETY: a separator of a locked node; pinned.
                let nb = unsafe { stored_bytes(ns, ni, &mut t) };
                // SAFETY: `pj` is locked; pinned. The new separator lies
                // between `pj`'s neighbours of the old one.
                let s = unsafe { fit_prefix(&pj.header, &pj.slices, &pj.infos, nj, nb) };
                pj.slices[cj - 1].store(s, R);
                pj.infos[cj - 1].store(ni, R);
                inner_remove(pm, nm, 0, 0);
            }
        }
        // SeqCst: before the retirements (see `Tree::unlinks`).
        self.unlinks.fetch_add(1, Ordering::SeqCst);
        l.header.version.unlock_deleted();
        for &(n, ..) in &path[m + 1..] {
            n.header.version.unlock_deleted();
        }
        // Bottom up: a descent that read a node's new version finds its
        // parent's changed too, or still locked.
        pm.header.version.unlock();
        for &(n, ..) in between.iter().rev() {
            n.header.version.unlock();
        }
        if let Some(j) = j {
            path[j].0.header.version.unlock();
        }
        ls.header.version.unlock();
        g.retire(Retired::leaf(NonNull::from(l)));
        for &(n, ..) in &path[m + 1..] {
            g.retire(Retired::inner(NonNull::from(n)));
        }
        Unlink::Done
    }

    /// Visit the keys in `(lo, hi)` in order (descending if `reverse`).
    ///
    /// `on_leaf` is told each leaf whose validated contents were used, with
    /// its version, before `visit` sees that leaf's keys; together those
    /// leaves cover the whole range scanned so far. `visit` returns false
    /// to stop. Keys are passed as slices valid for the call.
    pub fn scan<G: Guard>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        g: &G,
        mut on_leaf: impl FnMut(LeafRef, u64),
        mut visit: impl FnMut(&[u8], u64) -> bool,
    ) {
        if reverse {
            self.scan_rev(lo, hi, g, &mut on_leaf, &mut visit)
        } else {
            self.scan_fwd(lo, hi, g, &mut on_leaf, &mut visit)
        }
    }

    fn scan_fwd<G: Guard>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        g: &G,
        on_leaf: &mut dyn FnMut(LeafRef, u64),
        visit: &mut dyn FnMut(&[u8], u64) -> bool,
    ) {
        // The lowest key still wanted: `lo`, or just past the last key
        // visited (a stored pair, valid while we are pinned).
        let mut last: Option<(u64, u64)> = None;
        let mut ents = [(0u64, 0u64, 0u64); LEAF_WIDTH];
        let (mut leaf, mut v) = self.find_leaf(Target::At(SearchKey::new(bound_key(lo))), g);
        let mut check_lo = true;
        loop {
            // SAFETY: live leaf.
            let l = unsafe { &*leaf };
            let n = l.header.count.load(R).min(LEAF_WIDTH);
            for (i, e) in ents.iter_mut().enumerate().take(n) {
                *e = (l.slices[i].load(R), l.infos[i].load(R), l.values[i].load(R));
            }
            let next = l.next.load(R);
            if l.header.version.has_changed(v) {
                let mut tmp = [0u8; 8];
                let cur = match last {
                    // SAFETY: a key we visited; pinned.
                    Some((s, i)) => unsafe { stored_bytes(s, i, &mut tmp) },
                    None => bound_key(lo),
                };
                (leaf, v) = self.find_leaf(Target::At(SearchKey::new(cur)), g);
                check_lo = true;
                continue;
            }
            on_leaf(LeafRef(NonNull::from(l)), v);
            for &(s, info, val) in &ents[..n] {
                let mut tmp = [0u8; 8];
                // SAFETY: validated entry; pinned.
                let kb = unsafe { stored_bytes(s, info, &mut tmp) };
                if check_lo {
                    let below = match last {
                        Some((ls, li)) => {
                            let mut t2 = [0u8; 8];
                            // SAFETY: as above.
                            kb <= unsafe { stored_bytes(ls, li, &mut t2) }
                        }
                        None => match lo {
                            Bound::Included(b) => kb < b,
                            Bound::Excluded(b) => kb <= b,
                            Bound::Unbounded => false,
                        },
                    };
                    if below {
                        continue;
                    }
                    check_lo = false;
                }
                let above = match hi {
                    Bound::Included(b) => kb > b,
                    Bound::Excluded(b) => kb >= b,
                    Bound::Unbounded => false,
                };
                if above || !visit(kb, val) {
                    return;
                }
                last = Some((s, info));
            }
            if next.is_null() {
                return;
            }
            leaf = next;
            // SAFETY: live leaf.
            v = unsafe { &*next }.header.version.stable();
        }
    }

    fn scan_rev<G: Guard>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        g: &G,
        on_leaf: &mut dyn FnMut(LeafRef, u64),
        visit: &mut dyn FnMut(&[u8], u64) -> bool,
    ) {
        // The highest key still wanted: `hi`, or just below `upper` (the
        // last key visited or the low fence of the last leaf).
        let mut upper: Option<(u64, u64)> = None;
        let mut ents = [(0u64, 0u64, 0u64); LEAF_WIDTH];
        let target = |upper: Option<(u64, u64)>, tmp: &mut [u8; 8]| -> (*const Leaf, u64) {
            match upper {
                // SAFETY: a visited key or a fence; pinned.
                Some((s, i)) => self.find_leaf(
                    Target::Before(SearchKey::new(unsafe { stored_bytes(s, i, tmp) })),
                    g,
                ),
                None => match hi {
                    Bound::Included(b) => self.find_leaf(Target::At(SearchKey::new(b)), g),
                    Bound::Excluded(b) => self.find_leaf(Target::Before(SearchKey::new(b)), g),
                    Bound::Unbounded => self.find_leaf(Target::Rightmost, g),
                },
            }
        };
        let mut tmp = [0u8; 8];
        let (mut leaf, mut v) = target(upper, &mut tmp);
        loop {
            // SAFETY: live leaf.
            let l = unsafe { &*leaf };
            let n = l.header.count.load(R).min(LEAF_WIDTH);
            for (i, e) in ents.iter_mut().enumerate().take(n) {
                *e = (l.slices[i].load(R), l.infos[i].load(R), l.values[i].load(R));
            }
            if l.header.version.has_changed(v) {
                (leaf, v) = target(upper, &mut tmp);
                continue;
            }
            on_leaf(LeafRef(NonNull::from(l)), v);
            for &(s, info, val) in ents[..n].iter().rev() {
                let mut t = [0u8; 8];
                // SAFETY: validated entry; pinned.
                let kb = unsafe { stored_bytes(s, info, &mut t) };
                let too_high = match upper {
                    Some((us, ui)) => {
                        let mut t2 = [0u8; 8];
                        // SAFETY: as above.
                        kb >= unsafe { stored_bytes(us, ui, &mut t2) }
                    }
                    None => match hi {
                        Bound::Included(b) => kb > b,
                        Bound::Excluded(b) => kb >= b,
                        Bound::Unbounded => false,
                    },
                };
                if too_high {
                    continue;
                }
                if below_lo(kb, lo) || !visit(kb, val) {
                    return;
                }
                upper = Some((s, info));
            }
            let Some(low) = l.low() else { return };
            let mut t = [0u8; 8];
            // SAFETY: a fence lives as long as its leaf; pinned.
            if below_lo(unsafe { stored_bytes(low.0, low.1, &mut t) }, lo) {
                return;
            }
            upper = Some(low);
            (leaf, v) = target(upper, &mut tmp);
        }
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

/// `try_lock` `nv` at `v`, noting it in `held` if that worked.
fn lock_at<'a>(held: &mut Vec<&'a NodeVersion>, nv: &'a NodeVersion, v: u64) -> bool {
    let ok = nv.try_lock(v);
    if ok {
        held.push(nv);
    }
    ok
}

/// Take separator `sep` and child `child` out of locked inner node `p`
/// of `n` separators, closing the gaps and clearing the freed slots.
fn inner_remove(p: &Inner, n: usize, sep: usize, child: usize) {
    debug_assert!(n >= 1 && sep < n && child <= n);
    for i in sep..n - 1 {
        p.slices[i].store(p.slices[i + 1].load(R), R);
        p.infos[i].store(p.infos[i + 1].load(R), R);
    }
    p.slices[n - 1].store(UNUSED_SLICE, R);
    p.infos[n - 1].store(0, R);
    for i in child..n {
        p.children[i].store(p.children[i + 1].load(R), R);
    }
    p.children[n].store(std::ptr::null_mut(), R);
    p.header.count.store(n - 1, R);
}

/// Is `k` below the lower bound?
fn below_lo(k: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Included(b) => k < b,
        Bound::Excluded(b) => k <= b,
        Bound::Unbounded => false,
    }
}

fn bound_key(b: Bound<&[u8]>) -> &[u8] {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => k,
        Bound::Unbounded => &[],
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

impl Drop for Tree {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader remains.
        unsafe { free_node(self.root.load(R)) }
    }
}

/// A structural check of a quiescent tree, for the unit and loom tests.
#[cfg(test)]
mod shape {
    use super::*;

    fn bytes_of(s: u64, i: u64) -> Vec<u8> {
        let mut t = [0u8; 8];
        // SAFETY: tests never free keys while the tree lives.
        unsafe { stored_bytes(s, i, &mut t) }.to_vec()
    }

    /// What [`check`] found.
    pub(super) struct Shape {
        pub keys: Vec<(Vec<u8>, u64)>,
        #[cfg_attr(feature = "loom", allow(dead_code))]
        pub leaves: usize,
    }

    /// Check every structural invariant of a quiescent tree: nodes
    /// unlocked; leaves at one depth; keys sorted within each node and
    /// inside the bounds their parents give them; each leaf's fence equal
    /// to its lower bound and its right sibling's fence to its upper
    /// bound; the sibling chain visiting the same leaves in order; unused
    /// slots cleared; every key found by a lookup.
    pub(super) fn check(t: &Tree) -> Shape {
        let mut leaves = Vec::new();
        let mut keys = Vec::new();
        let mut depth = None;
        walk(
            t.root.load(R),
            (None, None),
            0,
            &mut depth,
            &mut leaves,
            &mut keys,
        );
        let mut chain = Vec::new();
        let mut p = leaves[0];
        while !p.is_null() {
            chain.push(p);
            // SAFETY: live leaf.
            p = unsafe { &*p }.next.load(R);
        }
        assert!(chain == leaves, "the sibling chain differs from the tree");
        for w in keys.windows(2) {
            assert!(w[0].0 < w[1].0, "keys out of order across leaves");
        }
        // SAFETY: only LeakGuards on these trees.
        let g = unsafe { LeakGuard::new() };
        for (k, v) in &keys {
            assert_eq!(t.get(k, &g).value, Some(*v), "lookup of {k:?}");
        }
        Shape {
            keys,
            leaves: leaves.len(),
        }
    }

    type Bounds = (Option<Vec<u8>>, Option<Vec<u8>>);

    /// A key stored in node `h` shares its prefix, is longer than it, and
    /// is stored as its word after the prefix.
    fn check_prefix(h: &Header, k: &[u8], slice: u64) {
        let pw = h.pw.load(R) as usize;
        assert!(pw <= PREFIX_WORDS);
        assert!(
            pw == 0 || k.len() > 8 * pw,
            "key {k:?} not longer than its node's prefix"
        );
        for w in 0..pw {
            assert_eq!(
                word_of(k, w),
                h.prefix[w].load(R),
                "key {k:?} outside its node's prefix"
            );
        }
        assert_eq!(
            word_of(k, pw),
            slice,
            "key {k:?} stored with the wrong slice"
        );
    }

    fn walk(
        node: *const Header,
        (lo, hi): Bounds,
        d: usize,
        depth: &mut Option<usize>,
        leaves: &mut Vec<*const Leaf>,
        keys: &mut Vec<(Vec<u8>, u64)>,
    ) {
        // SAFETY: a live node of a quiescent tree.
        let h = unsafe { hdr(node) };
        assert_eq!(h.version.load() & 1, 0, "node left locked");
        let in_bounds = |k: &Vec<u8>| {
            lo.as_ref().is_none_or(|lo| k >= lo) && hi.as_ref().is_none_or(|hi| k < hi)
        };
        if h.is_leaf {
            assert_eq!(*depth.get_or_insert(d), d, "leaves at different depths");
            // SAFETY: a leaf.
            let l = unsafe { &*(node as *const Leaf) };
            let n = l.header.count.load(R);
            assert!(n <= LEAF_WIDTH);
            assert!(
                l.low().map(|(s, i)| bytes_of(s, i)) == lo,
                "leaf fence is not its lower bound"
            );
            let next = l.next.load(R);
            let next_low = (!next.is_null()).then(|| {
                // SAFETY: live leaf.
                let (s, i) = unsafe { &*next }.low().expect("sibling fence");
                bytes_of(s, i)
            });
            assert!(
                next_low == hi,
                "sibling fence is not the leaf's upper bound"
            );
            let mut prev: Option<Vec<u8>> = None;
            for i in 0..n {
                let k = bytes_of(l.slices[i].load(R), l.infos[i].load(R));
                check_prefix(h, &k, l.slices[i].load(R));
                assert!(in_bounds(&k), "key {k:?} outside its leaf's bounds");
                assert!(
                    prev.as_ref().is_none_or(|p| &k > p),
                    "leaf keys out of order"
                );
                keys.push((k.clone(), l.values[i].load(R)));
                prev = Some(k);
            }
            for i in n..LEAF_WIDTH {
                let e = (l.slices[i].load(R), l.infos[i].load(R), l.values[i].load(R));
                assert_eq!(e, (UNUSED_SLICE, 0, 0), "unused slot {i} not cleared");
            }
            leaves.push(node as *const Leaf);
            return;
        }
        // SAFETY: an inner node.
        let inner = unsafe { &*(node as *const Inner) };
        let n = inner.header.count.load(R);
        // An append split leaves the right inner node one child and no
        // separator.
        assert!(n <= INNER_WIDTH);
        let seps: Vec<Vec<u8>> = (0..n)
            .map(|i| bytes_of(inner.slices[i].load(R), inner.infos[i].load(R)))
            .collect();
        for (i, k) in seps.iter().enumerate() {
            check_prefix(h, k, inner.slices[i].load(R));
        }
        for i in n..INNER_WIDTH {
            let e = (inner.slices[i].load(R), inner.infos[i].load(R));
            assert_eq!(
                e,
                (UNUSED_SLICE, 0),
                "unused separator slot {i} not cleared"
            );
        }
        for (i, s) in seps.iter().enumerate() {
            assert!(
                in_bounds(s) && lo.as_ref() != Some(s),
                "separator out of bounds"
            );
            assert!(i == 0 || seps[i - 1] < *s, "separators out of order");
        }
        for i in 0..=n {
            let clo = if i == 0 {
                lo.clone()
            } else {
                Some(seps[i - 1].clone())
            };
            let chi = if i == n {
                hi.clone()
            } else {
                Some(seps[i].clone())
            };
            walk(
                inner.children[i].load(R),
                (clo, chi),
                d + 1,
                depth,
                leaves,
                keys,
            );
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::shape::check;
    use super::*;
    use crate::sync::AtomicU64;

    /// `count_below` against a plain count, for every node size up to the
    /// widest, every probe on and between the slices, with runs of equal
    /// slices.
    #[test]
    fn count_below_is_a_lower_bound() {
        fn check<const W: usize>() {
            for n in 0..=W {
                for dup in [1u64, 2, 3] {
                    // A node's first `n` slots in use, the rest unused;
                    // the last used slice may be UNUSED_SLICE itself.
                    for top in [false, true] {
                        let mut v: Vec<u64> = (0..n as u64).map(|i| 10 + 10 * (i / dup)).collect();
                        if top && n > 0 {
                            v[n - 1] = UNUSED_SLICE;
                        }
                        let a: [AtomicU64; W] = std::array::from_fn(|i| {
                            AtomicU64::new(v.get(i).copied().unwrap_or(UNUSED_SLICE))
                        });
                        let probes =
                            (0..20 + 10 * n as u64).chain([UNUSED_SLICE - 1, UNUSED_SLICE]);
                        for probe in probes {
                            let below = v.iter().filter(|&&x| x < probe).count();
                            let want = if v.contains(&probe) {
                                Err(below)
                            } else {
                                Ok(below)
                            };
                            assert_eq!(
                                count_below(&a, n, probe),
                                want,
                                "W={W} n={n} dup={dup} top={top} probe={probe}"
                            );
                        }
                    }
                }
            }
        }
        check::<LEAF_WIDTH>();
        check::<INNER_WIDTH>();
        check::<1>();
        check::<7>();
        check::<16>();
    }

    /// An unlink whose leaf's subtree is the first child of `pm`, where
    /// `pm` hangs two or more levels below `pj` (the ancestor that keeps
    /// `pm`'s lower bound), moves `pj`'s separator up to the fence of
    /// `pm`'s next child. A descent for a key of the leaf's old range that
    /// passed `pj` before the unlink and goes on down through the first
    /// children after it must not land in `pm`'s new first leaf, whose
    /// fence lies above the key: an insert there would be unreachable.
    /// The unlink runs inside the descent, right after `pj`.
    #[test]
    fn a_descent_below_a_moved_separator_sees_the_unlink() {
        let t = Tree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let n = 4000u64;
        for i in 1..=n {
            t.insert(&(10 * i).to_be_bytes(), i, &mut g);
        }
        // A leaf whose path ends in two or more first children below a
        // later child, with its first key as its fence.
        let pick = (1..=n).find_map(|i| {
            let k = (10 * i).to_be_bytes();
            let mut path: Vec<(usize, usize)> = Vec::new();
            let (leaf, _) = t.descend(Target::At(SearchKey::new(&k)), &g, |d, s| {
                path.truncate(d);
                path.push((s.2, s.3));
            });
            // SAFETY: nothing is freed (LeakGuard).
            let l = unsafe { &*leaf };
            let m = path.len().checked_sub(1)?;
            let j = path[..m].iter().rposition(|&(c, _)| c > 0)?;
            let fits = l.low().map(|f| f.0) == Some(10 * i)
                && path[m] == (0, path[m].1)
                && path[m].1 >= 1
                && m >= j + 2;
            fits.then(|| (i, j, l.header.count.load(R) as u64))
        });
        let (i, j, count) = pick.expect("a 4-level tree has such a leaf");
        for q in i + 1..i + count {
            assert_eq!(
                t.remove(&(10 * q).to_be_bytes(), &mut g).map(|x| x.0),
                Some(q)
            );
        }
        let unlinks = t.unlinks();
        let probe = (10 * i + 5).to_be_bytes();
        let mut fired = false;
        let (leaf, v) = t.descend(Target::At(SearchKey::new(&probe)), &g, |d, _| {
            if d == j && !fired {
                fired = true;
                // SAFETY: only LeakGuards on this tree.
                let mut g2 = unsafe { LeakGuard::new() };
                assert!(t.remove(&(10 * i).to_be_bytes(), &mut g2).is_some());
            }
        });
        assert_eq!(t.unlinks(), unlinks + 1, "the leaf was unlinked");
        // SAFETY: nothing is freed (LeakGuard).
        let covered = unsafe { covers(&*leaf, v, &SearchKey::new(&probe)) };
        assert!(
            matches!(covered, Covers::Yes),
            "the descent landed in a leaf that does not cover its key"
        );
        // And an insert of that key is found again.
        t.insert(&probe, 7, &mut g);
        assert_eq!(t.find(&probe, &g), Some(7));
        check(&t);
    }

    // ---- Cursor inserts (ascending runs) ----

    /// The seed of a randomized test: `GRANARY_SEED` if set, else the clock.
    fn seed(name: &str) -> u64 {
        let s = std::env::var("GRANARY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("clock")
                    .as_nanos() as u64
            });
        eprintln!("{name}: seed {s} (replay with GRANARY_SEED={s})");
        s
    }

    /// The `GRANARY_STRESS` multiplier of a stress test's length (1 if
    /// unset: CI's setting).
    fn stress() -> u64 {
        std::env::var("GRANARY_STRESS")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(1)
    }

    /// Sets its flag when dropped: a stress test's writer stops its
    /// readers however it ends (a failed check included).
    struct SetOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

    impl Drop for SetOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// splitmix64: any seed (even 0) gives a good stream.
    fn next(s: &mut u64) -> u64 {
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Keys mixing every stored form: 8-byte integers, short keys, and
    /// long keys (stored out of line) sharing their first 8 bytes, so
    /// slices tie and fences are long keys too. Sorted, distinct.
    fn mixed_keys(rng: &mut u64, n: usize) -> Vec<Vec<u8>> {
        let mut set = std::collections::BTreeSet::new();
        while set.len() < n {
            let r = next(rng);
            let k = match r % 4 {
                0 => (r >> 8).to_be_bytes().to_vec(),
                1 => (r >> 40).to_be_bytes()[..(r >> 2) as usize % 9].to_vec(),
                _ => {
                    // A few 8-byte prefixes, tails of 0..24 bytes.
                    let mut k = format!("prefix-{}", (r >> 8) % 3).into_bytes();
                    let tail = (r >> 16) as usize % 24;
                    let mut x = next(rng);
                    for _ in 0..tail {
                        k.push(b"ab\0z"[(x & 3) as usize]);
                        x >>= 2;
                    }
                    k
                }
            };
            set.insert(k);
        }
        set.into_iter().collect()
    }

    fn inserted(r: Insert) -> bool {
        matches!(r, Insert::Inserted(_))
    }

    #[test]
    fn cursor_ascending_run_fills_leaves() {
        let t = Tree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let n = 20_000u64;
        let mut c = t.cursor();
        for i in 0..n {
            assert!(inserted(c.insert(&(3 * i).to_be_bytes(), i, &mut g)));
        }
        let s = check(&t);
        let want: Vec<_> = (0..n)
            .map(|i| ((3 * i).to_be_bytes().to_vec(), i))
            .collect();
        assert!(s.keys == want);
        // Appends leave every leaf but the last full.
        assert_eq!(s.leaves, (n as usize).div_ceil(LEAF_WIDTH));
        // Again, over keys all present, and in between (new keys).
        let mut c = t.cursor();
        for i in 0..n {
            match c.insert(&(3 * i).to_be_bytes(), 0, &mut g) {
                Insert::Exists { value } => assert_eq!(value, i),
                Insert::Inserted(_) => panic!("key {i} inserted twice"),
            }
            assert!(inserted(c.insert(
                &(3 * i + 1).to_be_bytes(),
                n + i,
                &mut g
            )));
        }
        assert_eq!(check(&t).keys.len(), 2 * n as usize);
    }

    fn ycsb_key(i: u64, len: usize) -> Vec<u8> {
        let d = i.to_string();
        let mut k = b"user".to_vec();
        k.resize(len - d.len(), b'0');
        k.extend_from_slice(d.as_bytes());
        k
    }

    /// The longest prefix, in words, of any node of a quiescent tree.
    fn widest_prefix(t: &Tree) -> usize {
        fn walk(p: *const Header) -> usize {
            // SAFETY: a live node of a quiescent tree.
            let h = unsafe { hdr(p) };
            let own = h.pw.load(R) as usize;
            if h.is_leaf {
                return own;
            }
            // SAFETY: an inner node.
            let inner = unsafe { &*(p as *const Inner) };
            (0..=inner.header.count.load(R))
                .map(|i| walk(inner.children[i].load(R)))
                .fold(own, usize::max)
        }
        walk(t.root.load(R))
    }

    /// YCSB's keys (`user` and zero-padded digits: every key shares its
    /// first 8 bytes and more), loaded in order by a cursor and at random
    /// by inserts, then thinned out and refilled with keys that break the
    /// prefixes: the nodes take prefixes (so their slices tell the keys
    /// apart), and shrink them when a key that does not share them comes.
    #[test]
    fn long_shared_prefixes() {
        let mut rng = seed("long_shared_prefixes");
        for len in [24usize, 64] {
            // SAFETY: only LeakGuards on these trees.
            let mut g = unsafe { LeakGuard::new() };
            let sorted = Tree::new();
            let mut c = sorted.cursor();
            for i in 0..5_000u64 {
                assert!(inserted(c.insert(&ycsb_key(i, len), i, &mut g)));
            }
            check(&sorted);
            let want_pw = if len == 24 { 2 } else { PREFIX_WORDS };
            assert_eq!(widest_prefix(&sorted), want_pw, "{len}-byte keys");
            let t = Tree::new();
            let mut model = std::collections::BTreeMap::new();
            for _ in 0..5_000 {
                let i = next(&mut rng) % 20_000;
                let k = ycsb_key(i, len);
                let fresh = !model.contains_key(&k);
                assert_eq!(inserted(t.insert(&k, i, &mut g)), fresh);
                model.insert(k, i);
            }
            check(&t);
            assert!(widest_prefix(&t) > 0);
            let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
            for k in keys.iter().step_by(3) {
                assert!(t.remove(k, &mut g).is_some());
                model.remove(k);
            }
            // Keys that share less: other digits, shorter, a prefix of the
            // others, a word's worth of them exactly.
            let mut odd = vec![b"user".to_vec(), b"user0000".to_vec(), b"usez".to_vec()];
            for i in 0..300u64 {
                let mut k = ycsb_key(next(&mut rng) % 20_000, len);
                let at = 4 + (i as usize % (len - 4));
                k[at] = b"19a\0"[(i % 4) as usize];
                k.truncate(len - (i as usize % 9));
                odd.push(k);
            }
            odd.push(ycsb_key(0, len)[..16].to_vec());
            for (j, k) in odd.into_iter().enumerate() {
                let fresh = !model.contains_key(&k);
                assert_eq!(inserted(t.insert(&k, j as u64, &mut g)), fresh);
                model.entry(k).or_insert(j as u64);
            }
            let got = check(&t).keys;
            let want: Vec<_> = model.into_iter().collect();
            assert!(
                got == want,
                "{len}-byte keys: the tree differs from the model"
            );
        }
    }

    /// A checkpoint loaded by one thread: blocks of consecutive keys dealt
    /// round-robin into files, the files loaded one after another, so
    /// every file after the first fills gaps between keys already there.
    #[test]
    fn cursor_runs_into_gaps() {
        let mut rng = seed("cursor_runs_into_gaps");
        let keys = mixed_keys(&mut rng, 30_000);
        let (block, files) = (1 + next(&mut rng) as usize % 400, 4);
        eprintln!("block {block}");
        let t = Tree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        for f in 0..files {
            let mut c = t.cursor();
            for (b, run) in keys.chunks(block).enumerate() {
                if b % files == f {
                    for k in run {
                        assert!(inserted(c.insert(k, k.len() as u64, &mut g)));
                    }
                }
            }
        }
        let s = check(&t);
        let want: Vec<_> = keys.iter().map(|k| (k.clone(), k.len() as u64)).collect();
        assert!(s.keys == want);
        // Splitting at the key leaves few partly filled leaves per gap
        // (a plain insert's even splits would leave them all half full).
        let fill = keys.len() as f64 / (s.leaves * LEAF_WIDTH) as f64;
        eprintln!("{} leaves, fill {fill:.2}", s.leaves);
        if block >= 100 {
            assert!(fill > 0.8, "fill {fill:.2}");
        }
    }

    /// A cursor stays correct when its remembered leaf and parent are
    /// split by other inserts between its own, and for keys in any order.
    #[test]
    fn cursor_with_other_inserts_and_any_order() {
        let mut rng = seed("cursor_with_other_inserts_and_any_order");
        for round in 0..20 {
            let keys = mixed_keys(&mut rng, 3_000);
            let t = Tree::new();
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            let mut model = std::collections::BTreeMap::new();
            let mut c = t.cursor();
            let mut i = next(&mut rng) as usize % keys.len();
            for step in 0..6_000u64 {
                let r = next(&mut rng);
                // Mostly the cursor's ascending run, sometimes a jump;
                // plain inserts anywhere; now and then a remove.
                let (k, by_cursor) = match r % 8 {
                    0..=3 => {
                        i = (i + 1 + (r >> 8) as usize % 3) % keys.len();
                        (&keys[i], true)
                    }
                    4 => {
                        i = (r >> 8) as usize % keys.len();
                        (&keys[i], true)
                    }
                    5 | 6 => (&keys[(r >> 8) as usize % keys.len()], false),
                    _ => {
                        let k = &keys[(r >> 8) as usize % keys.len()];
                        assert_eq!(t.remove(k, &mut g).map(|x| x.0), model.remove(k));
                        continue;
                    }
                };
                let got = if by_cursor {
                    c.insert(k, step, &mut g)
                } else {
                    t.insert(k, step, &mut g)
                };
                follow(&mut model, k, step, got, round);
            }
            matches_model(&t, model, round);
        }
    }

    /// Check an insert-if-absent of `k → step` against `model`, and apply
    /// it there.
    fn follow(
        model: &mut std::collections::BTreeMap<Vec<u8>, u64>,
        k: &[u8],
        step: u64,
        got: Insert,
        round: usize,
    ) {
        match (got, model.get(k)) {
            (Insert::Exists { value }, Some(&v)) => assert_eq!(value, v),
            (Insert::Inserted(_), None) => {
                model.insert(k.to_vec(), step);
            }
            (got, want) => panic!("round {round} step {step}: {got:?}, model {want:?}"),
        }
    }

    /// The tree is whole and holds exactly `model`.
    fn matches_model(t: &Tree, model: std::collections::BTreeMap<Vec<u8>, u64>, round: usize) {
        let s = check(t);
        let want: Vec<_> = model.into_iter().collect();
        assert!(s.keys == want, "round {round}");
    }

    /// Nodes reachable from the root: (leaves, inner nodes).
    fn reachable(t: &Tree) -> (usize, usize) {
        fn walk(p: *const Header, n: &mut (usize, usize)) {
            // SAFETY: a quiescent test tree.
            let h = unsafe { hdr(p) };
            if h.is_leaf {
                n.0 += 1;
                return;
            }
            n.1 += 1;
            // SAFETY: an inner node.
            let inner = unsafe { &*(p as *const Inner) };
            for i in 0..=inner.header.count.load(R) {
                walk(inner.children[i].load(R), n);
            }
        }
        let mut n = (0, 0);
        walk(t.root.load(R), &mut n);
        n
    }

    /// A queue (insert at the tail, remove at the head) leaves empty
    /// leaves behind it; each is unlinked, with the inner nodes emptied
    /// with them, so the tree stays the size of what it holds. Keys of 8, 24 and 64 bytes (fences on the heap, node
    /// prefixes); the live length wanders so heads empty leaves at every
    /// position of their parents.
    #[test]
    fn a_queue_keeps_the_tree_small() {
        let mut rng = seed("a_queue_keeps_the_tree_small");
        for len in [8, 24, 64] {
            let t = Tree::new();
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            let key = |i: u64| match len {
                8 => i.to_be_bytes().to_vec(),
                _ => ycsb_key(i, len),
            };
            let (mut head, mut tail) = (0u64, 0u64);
            let mut most = 0;
            for step in 0..60_000u64 {
                let r = next(&mut rng);
                // Pushes outnumber pops while the queue is short.
                let push = tail - head < 50 || (r % 100) < 48 + (tail - head < 2_000) as u64 * 4;
                if push {
                    assert!(matches!(
                        t.insert(&key(tail), tail, &mut g),
                        Insert::Inserted(_)
                    ));
                    tail += 1;
                } else {
                    assert_eq!(
                        t.remove(&key(head), &mut g).map(|x| x.0),
                        Some(head),
                        "step {step}"
                    );
                    head += 1;
                }
                most = most.max(tail - head);
                if step % 10_000 == 0 {
                    check(&t);
                }
            }
            // Drain to a few keys: the tree shrinks to them.
            while tail - head > 30 {
                assert_eq!(t.remove(&key(head), &mut g).map(|x| x.0), Some(head));
                head += 1;
            }
            let s = check(&t);
            assert!(s.keys.iter().map(|(_, v)| *v).eq(head..tail), "len {len}");
            let (leaves, inners) = reachable(&t);
            // 30 keys: at most 3 leaves of them, the leftmost (empty,
            // never unlinked) and a path of inner nodes.
            assert!(leaves <= 5, "len {len}: {leaves} leaves for 30 keys");
            assert!(
                inners <= 8,
                "len {len}: {inners} inner nodes (most live {most})"
            );
            assert!(t.unlinks() > 0);
        }
    }

    /// Removing every key, in random order, leaves the leftmost leaf alone
    /// under a path of inner nodes with one child each; the shape checker
    /// (fences, separators, the sibling chain) passes all along.
    #[test]
    fn removing_every_key_unlinks_every_other_leaf() {
        let mut rng = seed("removing_every_key_unlinks_every_other_leaf");
        for round in 0..6 {
            let t = Tree::new();
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            let mut keys = mixed_keys(&mut rng, 3_000);
            keys.sort();
            keys.dedup();
            let n = keys.len();
            // Shuffle, insert, shuffle, remove.
            for pass in 0..2 {
                for i in (1..n).rev() {
                    keys.swap(i, next(&mut rng) as usize % (i + 1));
                }
                for (i, k) in keys.iter().enumerate() {
                    match pass {
                        0 => assert!(matches!(t.insert(k, 1, &mut g), Insert::Inserted(_))),
                        _ => assert_eq!(t.remove(k, &mut g).map(|x| x.0), Some(1), "round {round}"),
                    }
                    if i % 500 == 0 {
                        check(&t);
                    }
                }
            }
            let s = check(&t);
            assert!(s.keys.is_empty());
            let (leaves, inners) = reachable(&t);
            assert_eq!(leaves, 1, "round {round}");
            let mut p = t.root.load(R) as *const Header;
            for _ in 0..inners {
                // SAFETY: a quiescent test tree.
                let inner = unsafe { &*(p as *const Inner) };
                assert_eq!(inner.header.count.load(R), 0, "round {round}");
                p = inner.children[0].load(R);
            }
            // The tree still works.
            for (i, k) in keys.iter().enumerate().take(500) {
                assert!(matches!(t.insert(k, i as u64, &mut g), Insert::Inserted(_)));
            }
            assert_eq!(check(&t).keys.len(), 500.min(n));
        }
    }

    /// A guard that never frees an unlinked leaf but makes it look like a
    /// fresh, unlocked, empty leaf, as if its memory had been freed and
    /// reused for a new node: what a reference kept past its pin would
    /// then find.
    struct Reuse;

    // SAFETY: nothing is freed.
    unsafe impl Guard for Reuse {
        fn retire(&mut self, garbage: Retired) {
            if let Some(leaf) = garbage.as_leaf() {
                // SAFETY: never freed (leaked below).
                let leaf = unsafe { &*leaf };
                leaf.header.version.reset();
                leaf.next.store(std::ptr::null_mut(), R);
            }
            let _ = garbage; // leaked: `Retired` frees nothing unless reclaimed
        }
    }

    /// A cursor remembers the leaf its last key went into, from one call
    /// (one pin) to the next. If that leaf is unlinked and its memory
    /// reused meanwhile, the cursor must not insert into it: it drops its
    /// spot when the tree's unlink count has moved, and descends.
    #[test]
    fn a_cursor_forgets_a_leaf_unlinked_since() {
        let t = Tree::new();
        let mut g = Reuse;
        // Two full leaves (appends keep the left one full).
        for i in 0..2 * LEAF_WIDTH as u64 {
            assert!(matches!(
                t.insert(&i.to_be_bytes(), i, &mut g),
                Insert::Inserted(_)
            ));
        }
        let mut c = t.cursor();
        let k = |i: u64| (100 + i).to_be_bytes();
        // Splits off a third leaf holding just this key: the cursor's spot.
        assert!(matches!(c.insert(&k(0), 0, &mut g), Insert::Inserted(_)));
        // Empty it: it is unlinked, and "reused".
        assert_eq!(t.remove(&k(0), &mut g).map(|x| x.0), Some(0));
        assert_eq!(t.unlinks(), 1);
        assert!(matches!(c.insert(&k(1), 1, &mut g), Insert::Inserted(_)));
        // SAFETY: only this thread's Reuse guard on this tree, which frees nothing.
        let lg = unsafe { LeakGuard::new() };
        assert_eq!(
            t.get(&k(1), &lg).value,
            Some(1),
            "inserted into a leaf no longer in the tree"
        );
        assert_eq!(check(&t).keys.len(), 2 * LEAF_WIDTH + 1);
    }

    /// A guard that frees retired memory after crossbeam-epoch's grace
    /// period, so a use after free shows (under a sanitizer, or as
    /// garbage) rather than reading leaked memory.
    struct Ebr<'a>(&'a crossbeam_epoch::Guard);

    // SAFETY: memory is freed only after every thread pinned at the
    // retirement has unpinned; every guard on the tree is one of these.
    unsafe impl Guard for Ebr<'_> {
        fn retire(&mut self, garbage: Retired) {
            // SAFETY: as above (Retired is Send).
            unsafe { self.0.defer_unchecked(move || garbage.reclaim()) };
        }
    }

    /// A deep tree (four levels) whose leaves are emptied (and unlinked)
    /// and filled again by one thread while others insert keys into the
    /// gaps between its keys and look each one up at once: an insert that
    /// lands in a leaf that does not cover its key (an unlink's routing
    /// race, see `a_descent_below_a_moved_separator_sees_the_unlink`) is
    /// lost to lookups. Memory is freed for real after the grace period.
    #[test]
    fn gap_inserts_race_unlinks_in_a_deep_tree() {
        let base = seed("gap_inserts_race_unlinks_in_a_deep_tree");
        let stress = stress();
        let blocks = 400u64; // of LEAF_WIDTH keys: 4,800 keys, 4 levels
        let w = LEAF_WIDTH as u64;
        let key = |i: u64| (10 * i).to_be_bytes();
        let t = Tree::new();
        {
            let g = crossbeam_epoch::pin();
            for i in 0..blocks * w {
                t.insert(&key(i), i, &mut Ebr(&g));
            }
        }
        let done = std::sync::atomic::AtomicBool::new(false);
        // The block being emptied: the gap inserts aim at it.
        let block = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            let (t, done, block) = (&t, &done, &block);
            s.spawn(move || {
                // Stops the gap inserts however this thread ends.
                let _done = SetOnDrop(done);
                let mut rng = base;
                for _ in 0..100_000 * stress {
                    let b = next(&mut rng) % blocks;
                    block.store(b, std::sync::atomic::Ordering::Relaxed);
                    for i in b * w..(b + 1) * w {
                        let g = crossbeam_epoch::pin();
                        assert_eq!(t.remove(&key(i), &mut Ebr(&g)).map(|x| x.0), Some(i));
                    }
                    for i in b * w..(b + 1) * w {
                        let g = crossbeam_epoch::pin();
                        t.insert(&key(i), i, &mut Ebr(&g));
                    }
                }
            });
            s.spawn(move || {
                let mut rng = base ^ 0x9a9;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let b = block.load(std::sync::atomic::Ordering::Relaxed);
                    let i = b * w + next(&mut rng) % w;
                    let k = (10 * i + 5).to_be_bytes();
                    let g = crossbeam_epoch::pin();
                    let mut g = Ebr(&g);
                    assert!(matches!(t.insert(&k, i, &mut g), Insert::Inserted(_)));
                    assert_eq!(
                        t.get(&k, &g).value,
                        Some(i),
                        "seed {base}: gap key {i} lost"
                    );
                    assert_eq!(t.remove(&k, &mut g).map(|x| x.0), Some(i), "seed {base}");
                }
            });
        });
        let s = check(&t);
        assert_eq!(s.keys.len() as u64, blocks * w);
        assert!(t.unlinks() > 0);
    }

    /// `find_many` answers as `find` does, key by key, on a deep tree,
    /// for present and absent keys, and leaves keys past its limit alone.
    #[test]
    fn find_many_answers_as_find() {
        let t = Tree::new();
        let g = crossbeam_epoch::pin();
        for i in 0..5000u64 {
            t.insert(&(10 * i).to_be_bytes(), i, &mut Ebr(&g));
        }
        let mut rng = seed("find_many_answers_as_find");
        for _ in 0..2000 {
            let keys: Vec<[u8; 8]> = (0..20)
                .map(|_| (next(&mut rng) % 50_010).to_be_bytes())
                .collect();
            let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            let mut out = [Some(u64::MAX); 20];
            t.find_many(&refs, &mut out, &Ebr(&g));
            for (i, k) in refs.iter().enumerate() {
                let want = if i < Tree::FIND_MANY {
                    t.find(k, &Ebr(&g))
                } else {
                    Some(u64::MAX)
                };
                assert_eq!(out[i], want, "key {k:?}");
            }
        }
    }

    /// `find_many` racing leaf splits and unlinks: keys that stay in the
    /// tree are always found with their values, keys never inserted never
    /// are, and keys coming and going are found with their own value or
    /// not at all. Memory is freed for real after the grace period.
    #[test]
    fn find_many_races_splits_and_unlinks() {
        let base = seed("find_many_races_splits_and_unlinks");
        let stress = stress();
        let blocks = 400u64;
        let w = LEAF_WIDTH as u64;
        let t = Tree::new();
        {
            let g = crossbeam_epoch::pin();
            for i in 0..blocks * w {
                t.insert(&(10 * i).to_be_bytes(), i, &mut Ebr(&g));
                if !(i / w).is_multiple_of(4) {
                    // Stays, and moves as its leaf splits; every fourth
                    // block has none, so its leaves empty and go.
                    t.insert(&(10 * i + 3).to_be_bytes(), i, &mut Ebr(&g));
                }
            }
        }
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let (t, done) = (&t, &done);
            s.spawn(move || {
                let _done = SetOnDrop(done);
                let mut rng = base;
                for _ in 0..20_000 * stress {
                    let b = next(&mut rng) % blocks;
                    for i in b * w..(b + 1) * w {
                        let g = crossbeam_epoch::pin();
                        t.remove(&(10 * i).to_be_bytes(), &mut Ebr(&g));
                    }
                    for i in b * w..(b + 1) * w {
                        let g = crossbeam_epoch::pin();
                        t.insert(&(10 * i).to_be_bytes(), i, &mut Ebr(&g));
                        // A gap key: splits the refilled leaves.
                        t.insert(&(10 * i + 5).to_be_bytes(), i, &mut Ebr(&g));
                    }
                    for i in b * w..(b + 1) * w {
                        let g = crossbeam_epoch::pin();
                        t.remove(&(10 * i + 5).to_be_bytes(), &mut Ebr(&g));
                    }
                }
            });
            s.spawn(move || {
                let mut rng = base ^ 0x5eed;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut keys = [[0u8; 8]; Tree::FIND_MANY];
                    let mut want = [(0u64, 0u8); Tree::FIND_MANY];
                    for (k, w) in keys.iter_mut().zip(&mut want) {
                        let b = next(&mut rng) % blocks;
                        let i = b * LEAF_WIDTH as u64 + next(&mut rng) % LEAF_WIDTH as u64;
                        // 3: stays (but in every fourth block), 7: never
                        // there, 0 and 5: come and go.
                        let off = [0, 3, 5, 7][next(&mut rng) as usize % 4];
                        let off = if off == 3 && b.is_multiple_of(4) {
                            7
                        } else {
                            off
                        };
                        *k = (10 * i + off).to_be_bytes();
                        *w = (i, off as u8);
                    }
                    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                    let mut out = [None; Tree::FIND_MANY];
                    let g = crossbeam_epoch::pin();
                    t.find_many(&refs, &mut out, &Ebr(&g));
                    for (o, (i, off)) in out.iter().zip(want) {
                        match off {
                            3 => assert_eq!(*o, Some(i), "seed {base}: key {} lost", 10 * i + 3),
                            7 => assert_eq!(*o, None, "seed {base}"),
                            _ => {
                                assert!(o.is_none() || *o == Some(i), "seed {base}: {o:?} for {i}")
                            }
                        }
                    }
                }
            });
        });
        check(&t);
        assert!(t.unlinks() > 0);
    }

    /// Queues emptying and unlinking leaves concurrently, with lookups
    /// and scans racing them, memory freed for real after the grace
    /// period. Each queue's keys lie between two sentinels that are never
    /// removed: every scan must see every sentinel (an unlink must never
    /// hide a leaf's neighbours) in ascending order, every lookup of a
    /// sentinel must find it, and each writer checks its own queue.
    #[test]
    fn unlinks_race_lookups_scans_and_writers() {
        let base = seed("unlinks_race_lookups_scans_and_writers");
        let rounds = 2 * std::env::var("GRANARY_STRESS")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(1);
        const QUEUES: u64 = 3;
        fn qkey(q: u64, seq: u64) -> Vec<u8> {
            let mut k = format!("queue-{q:03}-").into_bytes();
            k.extend_from_slice(&seq.to_be_bytes());
            k
        }
        let sentinel = |q: u64| qkey(q, u64::MAX);
        for round in 0..rounds {
            let t = Tree::new();
            {
                let g = crossbeam_epoch::pin();
                for q in 0..=QUEUES {
                    assert!(matches!(
                        t.insert(&sentinel(q), q, &mut Ebr(&g)),
                        Insert::Inserted(_)
                    ));
                    assert!(matches!(
                        t.insert(&qkey(q, 0), 0, &mut Ebr(&g)),
                        Insert::Inserted(_)
                    ));
                }
            }
            let done = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| {
                for q in 1..=QUEUES {
                    let (t, done) = (&t, &done);
                    s.spawn(move || {
                        let mut rng = base ^ (round as u64 * 131 + q);
                        let (mut head, mut tail) = (1u64, 1u64);
                        for step in 0..20_000u64 {
                            let g = crossbeam_epoch::pin();
                            let mut g = Ebr(&g);
                            let r = next(&mut rng);
                            if tail == head || r % 100 < 50 + 10 * (tail - head < 100) as u64 {
                                let ins = t.insert(&qkey(q, tail), tail, &mut g);
                                assert!(matches!(ins, Insert::Inserted(_)), "round {round} q {q}");
                                tail += 1;
                            } else {
                                let got = t.remove(&qkey(q, head), &mut g).map(|x| x.0);
                                assert_eq!(got, Some(head), "round {round} q {q} step {step}");
                                head += 1;
                                assert_eq!(t.get(&qkey(q, head - 1), &g).value, None);
                            }
                            if tail > head {
                                let probe = head + r % (tail - head);
                                assert_eq!(t.get(&qkey(q, probe), &g).value, Some(probe));
                            }
                        }
                        done.store(true, std::sync::atomic::Ordering::Relaxed);
                    });
                }
                let (t, done) = (&t, &done);
                s.spawn(move || {
                    let mut rng = base ^ 0x5ca7;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        let g = crossbeam_epoch::pin();
                        let g = Ebr(&g);
                        let rev = next(&mut rng).is_multiple_of(2);
                        let mut seen: Vec<Vec<u8>> = Vec::new();
                        t.scan(
                            Bound::Unbounded,
                            Bound::Unbounded,
                            rev,
                            &g,
                            |_, _| {},
                            |k, _| {
                                seen.push(k.to_vec());
                                true
                            },
                        );
                        if rev {
                            seen.reverse();
                        }
                        assert!(
                            seen.windows(2).all(|w| w[0] < w[1]),
                            "round {round}: scan out of order"
                        );
                        for q in 0..=QUEUES {
                            assert!(
                                seen.contains(&sentinel(q)),
                                "round {round}: a scan missed sentinel {q}"
                            );
                            assert_eq!(t.get(&sentinel(q), &g).value, Some(q));
                        }
                    }
                });
            });
            let s = check(&t);
            assert!(t.unlinks() > 0, "round {round}: nothing was unlinked");
            let (leaves, _) = reachable(&t);
            // Without unlinks: 60,000 pushes, about 5,000 leaves. A leaf
            // is left behind only when its unlink lost 16 races in a row.
            eprintln!("round {round}: {leaves} leaves for {} keys", s.keys.len());
            assert!(
                leaves <= 50 + s.keys.len() / 4,
                "round {round}: {leaves} leaves for {} keys",
                s.keys.len()
            );
        }
    }

    /// Lookups, then inserts of the absent keys through the lookup's leaf
    /// (sometimes a stale one: another key's, or from before other
    /// inserts and removes), against a model.
    #[test]
    fn insert_hinted_after_lookups() {
        let mut rng = seed("insert_hinted_after_lookups");
        for round in 0..20 {
            let keys = mixed_keys(&mut rng, 2_000);
            let t = Tree::new();
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            let mut model = std::collections::BTreeMap::new();
            let mut old_hint = None;
            for step in 0..6_000u64 {
                let r = next(&mut rng);
                let k = &keys[(r >> 8) as usize % keys.len()];
                if r.is_multiple_of(8) {
                    assert_eq!(t.remove(k, &mut g).map(|x| x.0), model.remove(k));
                    continue;
                }
                let look = t.get(k, &g);
                assert_eq!(
                    look.value,
                    model.get(k).copied(),
                    "round {round} step {step}"
                );
                let hint = match (r >> 4) % 4 {
                    0 => old_hint.unwrap_or(look.leaf),
                    _ => look.leaf,
                };
                old_hint = Some(look.leaf);
                // SAFETY: LeakGuards only: no leaf is freed.
                let got = unsafe { t.insert_hinted(hint, k, step, &mut g) };
                follow(&mut model, k, step, got, round);
            }
            matches_model(&t, model, round);
        }
    }

    /// Threads look keys up and insert the absent ones through the
    /// lookup's leaf, racing each other's splits: every key goes in once.
    #[test]
    fn insert_hinted_concurrent() {
        let base = seed("insert_hinted_concurrent");
        for round in 0..4u64 {
            let mut rng = base ^ round;
            let keys = mixed_keys(&mut rng, 20_000);
            let t = Tree::new();
            let won: usize = std::thread::scope(|s| {
                let hs: Vec<_> = (0..3u64)
                    .map(|th| {
                        let (t, keys) = (&t, &keys);
                        s.spawn(move || {
                            // SAFETY: only LeakGuards on this tree.
                            let mut g = unsafe { LeakGuard::new() };
                            let mut rng = base ^ (round << 8) ^ th;
                            let mut won = 0;
                            for _ in 0..keys.len() {
                                let i = next(&mut rng) as usize % keys.len();
                                let look = t.get(&keys[i], &g);
                                if look.value.is_some() {
                                    continue;
                                }
                                // SAFETY: LeakGuards only: no leaf is freed.
                                match unsafe {
                                    t.insert_hinted(look.leaf, &keys[i], i as u64, &mut g)
                                } {
                                    Insert::Inserted(_) => won += 1,
                                    Insert::Exists { value } => assert_eq!(value, i as u64),
                                }
                            }
                            won
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum()
            });
            let s = check(&t);
            assert_eq!(s.keys.len(), won, "round {round}");
            for (k, v) in &s.keys {
                assert_eq!(&keys[*v as usize], k, "round {round}");
            }
        }
    }

    /// Hinted lookups agree with the model whatever the hint: the leaf of
    /// the previous lookup (a neighbour's when keys come in runs, else
    /// anywhere), one from long before (stale after splits), or the
    /// key's own. Inserts and removes change the tree in between.
    #[test]
    fn get_hinted_matches_the_model() {
        let mut rng = seed("get_hinted_matches_the_model");
        for round in 0..20 {
            let keys = mixed_keys(&mut rng, 2_000);
            let t = Tree::new();
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            let mut model = std::collections::BTreeMap::new();
            let first = t.get(&keys[0], &g).leaf;
            let (mut last, mut old) = (first, first);
            let mut i = 0usize;
            for step in 0..8_000u64 {
                let r = next(&mut rng);
                // Half the time the next key in order (a run), else any.
                i = if r.is_multiple_of(2) {
                    (i + 1) % keys.len()
                } else {
                    (r >> 8) as usize % keys.len()
                };
                let k = &keys[i];
                match (r >> 4) % 8 {
                    0 => assert_eq!(t.remove(k, &mut g).map(|x| x.0), model.remove(k)),
                    1..=3 => {
                        let got = t.insert(k, step, &mut g);
                        follow(&mut model, k, step, got, round);
                    }
                    _ => {
                        let hint = match (r >> 12) % 8 {
                            0 => old,
                            1 => t.get(k, &g).leaf,
                            _ => last,
                        };
                        // SAFETY: LeakGuards only: no leaf is freed.
                        let look = unsafe { t.get_hinted(hint, k, &g) };
                        assert_eq!(
                            look.value,
                            model.get(k).copied(),
                            "round {round} step {step}"
                        );
                        if step % 1000 == 0 {
                            old = last;
                        }
                        last = look.leaf;
                    }
                }
            }
            matches_model(&t, model, round);
        }
    }

    /// Readers look up keys present from the start through the leaf of
    /// their previous lookup while writers split leaves all around them:
    /// every lookup finds its key with its value.
    #[test]
    fn get_hinted_concurrent_with_splits() {
        let base = seed("get_hinted_concurrent_with_splits");
        for round in 0..4u64 {
            let mut rng = base ^ round;
            let keys = mixed_keys(&mut rng, 30_000);
            let t = Tree::new();
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            // Every third key is there from the start; writers add the rest.
            for (i, k) in keys.iter().enumerate().step_by(3) {
                assert!(matches!(t.insert(k, i as u64, &mut g), Insert::Inserted(_)));
            }
            std::thread::scope(|s| {
                for th in 0..2u64 {
                    let (t, keys) = (&t, &keys);
                    s.spawn(move || {
                        // SAFETY: only LeakGuards on this tree.
                        let mut g = unsafe { LeakGuard::new() };
                        let mut rng = base ^ (round << 8) ^ th;
                        for _ in 0..keys.len() {
                            let i = next(&mut rng) as usize % keys.len();
                            if !i.is_multiple_of(3) {
                                let _ = t.insert(&keys[i], i as u64, &mut g);
                            }
                        }
                    });
                }
                for th in 0..2u64 {
                    let (t, keys) = (&t, &keys);
                    s.spawn(move || {
                        // SAFETY: only LeakGuards on this tree.
                        let g = unsafe { LeakGuard::new() };
                        let mut rng = base ^ (round << 8) ^ (th + 16);
                        let mut hint = t.get(&keys[0], &g).leaf;
                        let mut i = 0usize;
                        for _ in 0..2 * keys.len() {
                            let r = next(&mut rng);
                            // Runs of neighbours, and jumps.
                            i = if r.is_multiple_of(4) {
                                (r >> 8) as usize % keys.len()
                            } else {
                                (i + 3) % keys.len()
                            };
                            i -= i % 3;
                            // SAFETY: LeakGuards only: no leaf is freed.
                            let look = unsafe { t.get_hinted(hint, &keys[i], &g) };
                            assert_eq!(look.value, Some(i as u64), "round {round} key {i}");
                            hint = look.leaf;
                        }
                    });
                }
            });
            check(&t);
        }
    }

    /// Several threads load interleaving ascending runs into one tree (as
    /// recovery threads do with files whose key ranges interleave), while
    /// another inserts the same keys at random and a reader scans. Every
    /// key is inserted exactly once, and the tree ends up whole.
    #[test]
    fn cursor_concurrent_interleaved_runs() {
        let base = seed("cursor_concurrent_interleaved_runs");
        for round in 0..4u64 {
            let mut rng = base ^ round;
            let keys = mixed_keys(&mut rng, 40_000);
            let threads = 3usize;
            // Cut the keys into runs of 1..=max keys, each dealt to a
            // random thread: fine interleaving when max is small.
            let max = [2usize, 16, 300, 3000][round as usize];
            let mut runs = vec![Vec::new(); threads];
            let mut at = 0;
            while at < keys.len() {
                let len = (1 + next(&mut rng) as usize % max).min(keys.len() - at);
                runs[next(&mut rng) as usize % threads].push(at..at + len);
                at += len;
            }
            let t = Tree::new();
            let done = std::sync::atomic::AtomicUsize::new(0);
            let winners: Vec<Vec<usize>> = std::thread::scope(|s| {
                let loaders: Vec<_> = runs
                    .iter()
                    .map(|runs| {
                        let (t, keys, done) = (&t, &keys, &done);
                        s.spawn(move || {
                            // SAFETY: only LeakGuards on this tree.
                            let mut g = unsafe { LeakGuard::new() };
                            let mut c = t.cursor();
                            let mut won = Vec::new();
                            for run in runs {
                                for i in run.clone() {
                                    match c.insert(&keys[i], i as u64, &mut g) {
                                        Insert::Inserted(_) => won.push(i),
                                        Insert::Exists { value } => assert_eq!(value, i as u64),
                                    }
                                }
                            }
                            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            won
                        })
                    })
                    .collect();
                let random = {
                    let (t, keys) = (&t, &keys);
                    let mut rng = next(&mut rng);
                    s.spawn(move || {
                        // SAFETY: only LeakGuards on this tree.
                        let mut g = unsafe { LeakGuard::new() };
                        let mut won = Vec::new();
                        for _ in 0..keys.len() / 4 {
                            let i = next(&mut rng) as usize % keys.len();
                            if inserted(t.insert(&keys[i], i as u64, &mut g)) {
                                won.push(i);
                            }
                        }
                        won
                    })
                };
                let (t, keys, done) = (&t, &keys, &done);
                s.spawn(move || {
                    // SAFETY: only LeakGuards on this tree.
                    let g = unsafe { LeakGuard::new() };
                    while done.load(std::sync::atomic::Ordering::Relaxed) < threads {
                        let mut prev: Option<Vec<u8>> = None;
                        t.scan(
                            Bound::Unbounded,
                            Bound::Unbounded,
                            false,
                            &g,
                            |_, _| {},
                            |k, v| {
                                assert!(prev.as_deref().is_none_or(|p| k > p), "scan out of order");
                                assert_eq!(keys[v as usize], k, "value of {k:?}");
                                prev = Some(k.to_vec());
                                true
                            },
                        );
                    }
                });
                let mut w: Vec<_> = loaders
                    .into_iter()
                    .map(|h| h.join().expect("loader"))
                    .collect();
                w.push(random.join().expect("random inserter"));
                w
            });
            let mut won: Vec<usize> = winners.into_iter().flatten().collect();
            won.sort_unstable();
            assert!(
                won.iter().copied().eq(0..keys.len()),
                "round {round}: a key inserted twice or never"
            );
            let s = check(&t);
            let want: Vec<_> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.clone(), i as u64))
                .collect();
            assert!(s.keys == want, "round {round}");
        }
    }

    // ---- The point index ----

    /// Random inserts (plain, hinted, cursor), upserts, replaces and
    /// removes of mixed keys on a tree with a point index: after every
    /// step `find` agrees with a model, with the tree's own `get`, and
    /// with a tree without one; the table grows on the way.
    #[test]
    fn point_index_matches_the_model() {
        let mut rng = seed("point_index_matches_the_model");
        let mut keys = mixed_keys(&mut rng, 3000);
        // Short keys that differ only by trailing zeros share their word;
        // only their tags (lengths) tell them apart.
        for n in 0..=8 {
            for b in [0u8, 1, 2, 3] {
                let mut k = vec![0u8; n];
                if let Some(f) = k.first_mut() {
                    *f = b;
                }
                keys.push(k);
            }
        }
        keys.sort();
        keys.dedup();
        let t = Tree::with_point_index();
        let plain = Tree::new();
        // SAFETY: only LeakGuards on these trees.
        let mut g = unsafe { LeakGuard::new() };
        let mut model = std::collections::BTreeMap::new();
        let first = t.points.as_ref().expect("point index").buckets();
        for step in 0..40_000u64 {
            let r = next(&mut rng);
            let k = &keys[(r >> 8) as usize % keys.len()];
            let v = step;
            match r % 8 {
                0..=2 => {
                    let a = inserted(t.insert(k, v, &mut g));
                    assert_eq!(a, inserted(plain.insert(k, v, &mut g)));
                    assert_eq!(a, !model.contains_key(k));
                    model.entry(k.clone()).or_insert(v);
                }
                3 => {
                    let mut c = t.cursor();
                    let mut c2 = plain.cursor();
                    let i = (r >> 8) as usize % keys.len();
                    for k in &keys[i..(i + 20).min(keys.len())] {
                        let a = inserted(c.insert(k, v, &mut g));
                        assert_eq!(a, inserted(c2.insert(k, v, &mut g)));
                        assert_eq!(a, !model.contains_key(k));
                        model.entry(k.clone()).or_insert(v);
                    }
                }
                4 => {
                    let old = t.upsert(k, v, &mut g).0;
                    plain.upsert(k, v, &mut g);
                    assert_eq!(old, model.insert(k.clone(), v));
                }
                5 => {
                    let want = model.get(k).copied().unwrap_or(1);
                    let ok = t.replace(k, want, v, &mut g);
                    plain.replace(k, want, v, &mut g);
                    assert_eq!(ok, model.contains_key(k), "step {step}");
                    if ok {
                        model.insert(k.clone(), v);
                    }
                }
                _ => {
                    let got = t.remove(k, &mut g).map(|x| x.0);
                    plain.remove(k, &mut g);
                    assert_eq!(got, model.remove(k), "step {step}");
                }
            }
            let probe = &keys[(next(&mut rng) >> 8) as usize % keys.len()];
            // A prefetch reads nothing and changes nothing.
            t.prefetch(probe, &g);
            plain.prefetch(probe, &g);
            let want = model.get(probe).copied();
            assert_eq!(t.find(probe, &g), want, "step {step}");
            assert_eq!(t.get(probe, &g).value, want, "step {step}");
            assert_eq!(plain.find(probe, &g), want, "step {step}");
        }
        for k in &keys {
            assert_eq!(t.find(k, &g), model.get(k).copied());
        }
        assert_eq!(check(&t).keys.len(), model.len());
        let last = t.points.as_ref().expect("point index").buckets();
        assert!(last > first, "the table never grew ({first} buckets)");
        eprintln!("{} keys, {last} buckets", model.len());
    }

    /// Writers inserting (and growing the table) and removing their own
    /// keys while a reader looks up keys that are always present, and
    /// keys that never are, with tables and key copies freed for real
    /// after the grace period.
    #[test]
    fn point_index_races_writers_and_growth() {
        let base = seed("point_index_races_writers_and_growth");
        let rounds = 2 * std::env::var("GRANARY_STRESS")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(1);
        fn wkey(w: u64, i: u64) -> Vec<u8> {
            if i.is_multiple_of(2) {
                format!("writer-{w}-key-{i:012}").into_bytes()
            } else {
                (w << 56 | i).to_be_bytes().to_vec()
            }
        }
        for round in 0..rounds {
            let t = Tree::with_point_index();
            let stay: Vec<Vec<u8>> = (0..64).map(|i| wkey(9, i)).collect();
            {
                let g = crossbeam_epoch::pin();
                for (i, k) in stay.iter().enumerate() {
                    assert!(inserted(t.insert(k, i as u64, &mut Ebr(&g))));
                }
            }
            let done = std::sync::atomic::AtomicU64::new(0);
            std::thread::scope(|s| {
                for w in 1..=2u64 {
                    let (t, done) = (&t, &done);
                    s.spawn(move || {
                        let mut rng = base ^ (round as u64 * 131 + w);
                        let mut live = Vec::new();
                        for i in 0..30_000u64 {
                            let g = crossbeam_epoch::pin();
                            let mut g = Ebr(&g);
                            assert!(inserted(t.insert(&wkey(w, i), i, &mut g)));
                            live.push(i);
                            let r = next(&mut rng);
                            if r.is_multiple_of(3) {
                                let j = live.swap_remove((r >> 8) as usize % live.len());
                                assert_eq!(t.remove(&wkey(w, j), &mut g).map(|x| x.0), Some(j));
                                assert_eq!(t.find(&wkey(w, j), &g), None, "round {round}");
                            }
                            if !live.is_empty() {
                                let j = live[(r >> 16) as usize % live.len()];
                                assert_eq!(t.find(&wkey(w, j), &g), Some(j), "round {round}");
                            }
                        }
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    });
                }
                let (t, done, stay) = (&t, &done, &stay);
                s.spawn(move || {
                    let mut rng = base ^ 0x5ca7;
                    while done.load(std::sync::atomic::Ordering::Relaxed) < 2 {
                        let g = crossbeam_epoch::pin();
                        let g = Ebr(&g);
                        let i = next(&mut rng) % 64;
                        assert_eq!(t.find(&stay[i as usize], &g), Some(i), "round {round}");
                        assert_eq!(t.find(&wkey(7, i), &g), None, "round {round}");
                    }
                });
            });
            let n = check(&t).keys.len();
            let buckets = t.points.as_ref().expect("point index").buckets();
            eprintln!("round {round}: {n} keys, {buckets} buckets");
            assert!(
                buckets >= n / 8,
                "round {round}: {buckets} buckets for {n} keys"
            );
        }
    }
}

/// Cursor inserts racing splits, unlinks racing inserts, lookups and
/// scans, and lookups racing a prefix change, model-checked on 4-wide
/// nodes (see `LEAF_WIDTH`). Both sides run in spawned threads (the main
/// thread only sets up and joins), so loom explores either finishing
/// first. With the preemption bounds each model runs in seconds, and the
/// cursor models still fail a cursor that ignores its leaf's right
/// sibling (the leaf test) or its parent's version (the parent test).
#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::shape::check;
    use super::*;
    use loom::sync::Arc;

    fn key(i: u64) -> [u8; 8] {
        i.to_be_bytes()
    }

    /// A tree holding keys `10·i` for `i` in `1..=n` (appended in order).
    fn tree_of(n: u64) -> Arc<Tree> {
        let t = Arc::new(Tree::new());
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        for i in 1..=n {
            assert!(matches!(
                t.insert(&key(10 * i), i, &mut g),
                Insert::Inserted(_)
            ));
        }
        t
    }

    /// A thread inserting `keys` in order, through one cursor if `cursor`,
    /// else with plain inserts; each must be new.
    fn inserter(t: &Arc<Tree>, keys: Vec<u64>, cursor: bool) -> loom::thread::JoinHandle<()> {
        let t = t.clone();
        loom::thread::spawn(move || {
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            let mut c = t.cursor();
            for k in keys {
                let r = match cursor {
                    true => c.insert(&key(k), k, &mut g),
                    false => t.insert(&key(k), k, &mut g),
                };
                assert!(matches!(r, Insert::Inserted(_)));
            }
        })
    }

    /// The model checker with the bounds the unlink models run under.
    fn bounded() -> loom::model::Builder {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(1);
        b.max_branches = 100_000;
        b
    }

    /// Remove the keys `10·i` for `i` in `range` (set up, before threads).
    fn remove_all(t: &Tree, range: std::ops::RangeInclusive<u64>) {
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        for i in range {
            assert_eq!(t.remove(&key(10 * i), &mut g).map(|x| x.0), Some(i));
        }
    }

    /// What races an unlink in [`unlink_race`].
    #[derive(Clone, Copy)]
    enum Rival {
        /// A thread inserts `10·last + 5` into the leaf's range: into the
        /// leaf (which then stays), or after the unlink into its left
        /// neighbour.
        Insert,
        /// The main thread looks up a key on each side of the leaf.
        Lookups,
        /// The main thread scans from the left neighbour's key to the
        /// right one's.
        Scan,
    }

    /// One thread removes the last key of a leaf (`10·last`), which
    /// unlinks it, against `rival`; afterwards the tree is whole and holds
    /// what it must. `left` and `right` are keys of the leaves on each
    /// side, `total` the keys before the race. Both sides run in spawned
    /// threads (loom explores little of what the main thread does), one
    /// rival at a time: two together took over ten minutes.
    fn unlink_race(t: Arc<Tree>, last: u64, (left, right): (u64, u64), total: usize, rival: Rival) {
        let remover = {
            let t = t.clone();
            loom::thread::spawn(move || {
                // SAFETY: only LeakGuards on this tree.
                let mut g = unsafe { LeakGuard::new() };
                assert_eq!(t.remove(&key(10 * last), &mut g).map(|x| x.0), Some(last));
            })
        };
        // SAFETY: only LeakGuards on this tree.
        let g = unsafe { LeakGuard::new() };
        let mut total = total - 1;
        match rival {
            Rival::Insert => {
                inserter(&t, vec![10 * last + 5], false).join().unwrap();
                total += 1;
            }
            Rival::Lookups => {
                let t = t.clone();
                loom::thread::spawn(move || {
                    // SAFETY: only LeakGuards on this tree.
                    let g = unsafe { LeakGuard::new() };
                    assert_eq!(t.get(&key(10 * left), &g).value, Some(left));
                    assert_eq!(t.get(&key(10 * right), &g).value, Some(right));
                })
                .join()
                .unwrap();
            }
            Rival::Scan => {
                let t = t.clone();
                loom::thread::spawn(move || {
                    // SAFETY: only LeakGuards on this tree.
                    let g = unsafe { LeakGuard::new() };
                    let mut seen = Vec::new();
                    t.scan(
                        Bound::Included(&key(10 * left)[..]),
                        Bound::Included(&key(10 * right)[..]),
                        false,
                        &g,
                        |_, _| {},
                        |k, _| {
                            seen.push(u64::from_be_bytes(k.try_into().unwrap()));
                            true
                        },
                    );
                    assert_eq!(seen.first(), Some(&(10 * left)));
                    assert_eq!(seen.last(), Some(&(10 * right)));
                    assert!(seen.windows(2).all(|w| w[0] < w[1]));
                })
                .join()
                .unwrap();
            }
        }
        remover.join().unwrap();
        let s = check(&t);
        assert_eq!(s.keys.len(), total);
        assert_eq!(t.get(&key(10 * last), &g).value, None);
        if let Rival::Insert = rival {
            assert_eq!(t.get(&key(10 * last + 5), &g).value, Some(10 * last + 5));
        }
    }

    /// Leaves of keys 1..=w, w+1..=2w and 2w+1 under the root (w =
    /// LEAF_WIDTH); the middle one keeps only w+1, and its unlink drops it
    /// from the root.
    fn middle_child_race(rival: Rival) {
        bounded().check(move || {
            let w = LEAF_WIDTH as u64;
            let t = tree_of(2 * w + 1);
            remove_all(&t, w + 2..=2 * w);
            unlink_race(t, w + 1, (w, 2 * w + 1), w as usize + 2, rival);
        });
    }

    /// An unlink of a middle child races an insert into its range.
    #[test]
    fn unlink_of_a_middle_child_races_an_insert() {
        middle_child_race(Rival::Insert);
    }

    /// An unlink of a middle child races lookups on both sides.
    #[test]
    fn unlink_of_a_middle_child_races_lookups() {
        middle_child_race(Rival::Lookups);
    }

    /// An unlink of a middle child races a scan across it.
    #[test]
    fn unlink_of_a_middle_child_races_a_scan() {
        middle_child_race(Rival::Scan);
    }

    /// An unlink of a first child against `rival`: the unlink also
    /// replaces the root's separator (the parent's lower bound) with the
    /// fence of the parent's next child.
    fn first_child_race(rival: Rival) {
        bounded().check(move || {
            // INNER_WIDTH + 2 leaves: the root splits, and the right
            // inner node holds the last two (at width 12, keys 145..=156
            // and 157..=158).
            let w = LEAF_WIDTH as u64;
            let n = (INNER_WIDTH as u64 + 1) * w + 2;
            let t = tree_of(n);
            let first = (INNER_WIDTH as u64) * w + 1;
            remove_all(&t, first + 1..=first + w - 1);
            // SAFETY: set up, no thread running yet.
            let (root, right) = unsafe {
                let root = &*(t.root.load(R) as *const Inner);
                (root, &*(root.children[1].load(R) as *const Inner))
            };
            assert!(!right.header.is_leaf);
            assert_eq!(
                (root.header.count.load(R), right.header.count.load(R)),
                (1, 1)
            );
            // SAFETY: as above.
            let l = unsafe { &*(right.children[0].load(R) as *const Leaf) };
            assert_eq!(l.header.count.load(R), 1);
            assert_eq!(l.slices[0].load(R), 10 * first);
            let total = n as usize - (w as usize - 1);
            unlink_race(t, first, (first - 1, n), total, rival);
        });
    }

    /// An unlink of a first child races an insert into its range.
    #[test]
    fn unlink_of_a_first_child_races_an_insert() {
        first_child_race(Rival::Insert);
    }

    /// An unlink of a first child races lookups on both sides.
    #[test]
    fn unlink_of_a_first_child_races_lookups() {
        first_child_race(Rival::Lookups);
    }

    /// An unlink of a first child races a scan across it.
    #[test]
    fn unlink_of_a_first_child_races_a_scan() {
        first_child_race(Rival::Scan);
    }

    /// A cursor splits its leaf under the parent it remembers, while
    /// another thread splits a sibling leaf into that parent, filling it,
    /// and then splits the parent, moving the cursor's leaf to a new inner
    /// node. The cursor must see the parent's version change and descend.
    #[test]
    fn cursor_split_races_a_split_of_its_parent() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(1);
        b.max_branches = 100_000;
        b.check(|| {
            // Appends: a root with 11 separators over 11 full leaves and a
            // last one of 11 keys.
            let n = (INNER_WIDTH as u64 - 1) * LEAF_WIDTH as u64 + LEAF_WIDTH as u64 - 1;
            let t = tree_of(n);
            // Fills the last leaf (a descent: the cursor learns the root as
            // its parent), then splits it.
            let loader = inserter(&t, vec![10 * (n + 1), 10 * (n + 2)], true);
            // Splits a full leaf (the root fills up), then splits the root
            // on the way down.
            let other = inserter(&t, vec![15, 25], false);
            loader.join().unwrap();
            other.join().unwrap();
            let s = check(&t);
            assert_eq!(s.keys.len(), n as usize + 4);
        });
    }

    /// A reader looks up `key` in a leaf whose prefix an insert shrinks
    /// (re-encoding every slice under the lock): it must find a key that
    /// is there and not one that is not, whatever mix of old and new
    /// slices it reads before validating. One lookup per model: a node
    /// search reads every slot (the unused ones too), and two lookups in
    /// one model multiplied their interleavings (18 minutes of CI).
    fn prefix_shrink_race(key: u64, want: Option<u64>) {
        fn long(i: u64) -> Vec<u8> {
            format!("user{i:020}").into_bytes()
        }
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(1);
        b.max_branches = 100_000;
        b.check(move || {
            let t = Arc::new(Tree::new());
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            // A full leaf of 24-byte keys and one more: the split gives
            // both halves a prefix of two words.
            for i in 1..=LEAF_WIDTH as u64 + 1 {
                assert!(matches!(
                    t.insert(&long(10 * i), i, &mut g),
                    Insert::Inserted(_)
                ));
            }
            let writer = {
                let t = t.clone();
                loom::thread::spawn(move || {
                    // SAFETY: only LeakGuards on this tree.
                    let mut g = unsafe { LeakGuard::new() };
                    // Shares no whole word with the left leaf's prefix.
                    assert!(matches!(t.insert(b"user", 0, &mut g), Insert::Inserted(_)));
                })
            };
            // SAFETY: only LeakGuards on this tree.
            let g2 = unsafe { LeakGuard::new() };
            assert_eq!(t.get(&long(key), &g2).value, want);
            writer.join().unwrap();
            let s = check(&t);
            assert_eq!(s.keys.len(), LEAF_WIDTH + 2);
        });
    }

    #[test]
    fn lookup_of_a_present_key_races_a_prefix_shrink() {
        prefix_shrink_race(30, Some(3));
    }

    #[test]
    fn lookup_of_an_absent_key_races_a_prefix_shrink() {
        prefix_shrink_race(35, None);
    }

    /// A cursor inserts into the leaf it remembers while another thread
    /// splits that leaf: the cursor must notice (version or fence) and
    /// put its key in the right half.
    #[test]
    fn cursor_insert_races_a_split_of_its_leaf() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b.max_branches = 100_000;
        b.check(|| {
            // One leaf, one slot short of full.
            let n = LEAF_WIDTH as u64 - 1;
            let t = tree_of(n);
            let loader = inserter(&t, vec![10 * n + 1, 10 * n + 2], true);
            // Splits the leaf once it is full.
            let other = inserter(&t, vec![1], false);
            loader.join().unwrap();
            other.join().unwrap();
            let s = check(&t);
            assert_eq!(s.keys.len(), n as usize + 3);
        });
    }
}
