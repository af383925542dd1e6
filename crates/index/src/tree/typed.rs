//! The typed face of the tree: [`Tree<V>`] maps keys to values of a type
//! `V` that the tree keeps as one 64-bit word ([`Value`]), so that a design
//! storing pointers to its records writes `Tree<*const Record>` and gets
//! `*const Record`s back, instead of casting `u64`s. The tree's code is
//! written once, over words ([`RawTree`]); each method here converts at
//! the boundary and compiles to the same code.

use std::marker::PhantomData;

use super::*;

/// What a [`Tree`] maps keys to: a `Copy` type kept as one 64-bit word.
/// The tree hands back exactly the words it was given, so `from_word`
/// only ever sees what `to_word` made.
pub trait Value: Copy {
    /// The word the tree stores.
    fn to_word(self) -> u64;
    /// The value back from a word made by [`Value::to_word`].
    fn from_word(word: u64) -> Self;
}

impl Value for u64 {
    #[inline(always)]
    fn to_word(self) -> u64 {
        self
    }
    #[inline(always)]
    fn from_word(word: u64) -> u64 {
        word
    }
}

impl Value for usize {
    #[inline(always)]
    fn to_word(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn from_word(word: u64) -> usize {
        word as usize
    }
}

impl<T> Value for *const T {
    #[inline(always)]
    fn to_word(self) -> u64 {
        self as usize as u64
    }
    #[inline(always)]
    fn from_word(word: u64) -> *const T {
        word as usize as *const T
    }
}

impl<T> Value for *mut T {
    #[inline(always)]
    fn to_word(self) -> u64 {
        self as usize as u64
    }
    #[inline(always)]
    fn from_word(word: u64) -> *mut T {
        word as usize as *mut T
    }
}

/// A concurrent ordered map from byte strings to values of type `V`
/// (`u64` unless said): see the crate's documentation. A value is stored
/// and returned as is; what it points to, if it is a pointer, is the
/// caller's to keep alive and to free (see [`Tree::for_each_value`]).
pub struct Tree<V: Value = u64> {
    raw: RawTree,
    /// `fn() -> V`: the tree holds no `V` of its own, and is `Send` and
    /// `Sync` whatever `V` is (raw pointers are neither), as the words it
    /// holds are.
    _values: PhantomData<fn() -> V>,
}

impl<V: Value> Default for Tree<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Value> std::fmt::Debug for Tree<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree").finish_non_exhaustive()
    }
}

#[inline(always)]
fn typed<V: Value>(l: Lookup) -> Lookup<V> {
    Lookup {
        value: l.value.map(V::from_word),
        leaf: l.leaf,
        version: l.version,
    }
}

#[inline(always)]
fn typed_insert<V: Value>(i: Insert) -> Insert<V> {
    match i {
        Insert::Inserted(c) => Insert::Inserted(c),
        Insert::Exists { value } => Insert::Exists {
            value: V::from_word(value),
        },
    }
}

impl Tree {
    /// The most keys [`Tree::find_many`] descends for together (the same
    /// for every value type).
    pub const FIND_MANY: usize = RawTree::FIND_MANY;
}

impl<V: Value> Tree<V> {
    /// An empty tree (one empty leaf).
    pub fn new() -> Self {
        Tree {
            raw: RawTree::new(),
            _values: PhantomData,
        }
    }

    /// An empty tree with a point index: a hash table over the same keys
    /// that answers [`Tree::find`] with one bucket instead of a descent,
    /// for about 20–40 more bytes a key and a little more work per insert
    /// and remove (ARCHITECTURE.md, "The point index").
    pub fn with_point_index() -> Self {
        Tree {
            raw: RawTree::with_point_index(),
            _values: PhantomData,
        }
    }

    /// Whether the tree has a point index.
    pub fn has_point_index(&self) -> bool {
        self.raw.has_point_index()
    }

    /// How many times nodes have been unlinked from this tree so far. A
    /// caller that keeps a [`LeafRef`] from one pin to the next may read
    /// through it in a later pin only if this count, loaded (it is
    /// `SeqCst`) after that pin began, equals the one loaded before the
    /// leaf was found: then no node has been unlinked, nor freed, since.
    pub fn unlinks(&self) -> u64 {
        self.raw.unlinks()
    }

    /// Call `f` with every value, with exclusive access (for owners that
    /// must free what the values point to before dropping the tree).
    pub fn for_each_value(&mut self, mut f: impl FnMut(V)) {
        self.raw.for_each_value(|w| f(V::from_word(w)))
    }

    /// The value of `key`, if present: [`Tree::get`]'s value, from the
    /// point index if the tree has one. It reports no leaf, so a caller
    /// that must validate an absence (a phantom check) looks an absent
    /// key up again with [`Tree::get`].
    #[inline]
    pub fn find<G: Guard>(&self, key: &[u8], g: &G) -> Option<V> {
        self.raw.find(key, g).map(V::from_word)
    }

    /// [`Tree::find`] for each of `keys` (at most [`Tree::FIND_MANY`]; the
    /// rest are left `None`), into `out`, with their cache misses
    /// overlapped: without a point index the descents go down together,
    /// a level at a time, each node fetched a round before it is read, so
    /// a level's misses are waited for once for all keys instead of once
    /// per key. Each descent makes the checks [`Tree::get`]'s does, in the
    /// same order (a round apart), so it ends at the same leaf; one that
    /// fails a check looks its key up alone.
    #[inline]
    pub fn find_many<G: Guard>(&self, keys: &[&[u8]], out: &mut [Option<V>], g: &G) {
        self.raw.find_many(keys, out, g)
    }

    /// Start fetching what a lookup of `key` will read first (its point
    /// index bucket; nothing for a tree without one), so that lookups of
    /// several keys known in advance wait for their misses together.
    #[inline]
    pub fn prefetch<G: Guard>(&self, key: &[u8], g: &G) {
        self.raw.prefetch(key, g)
    }

    /// Point lookup: the value, and the leaf (with the version read) that
    /// holds the key or would hold it, for a caller that validates an
    /// absence later.
    #[inline]
    pub fn get<G: Guard>(&self, key: &[u8], g: &G) -> Lookup<V> {
        typed(self.raw.get(key, g))
    }

    /// Point lookup, as [`Tree::get`], trying first the leaf `hint` — the
    /// [`Lookup::leaf`] of an earlier lookup in this tree, typically of a
    /// nearby key — and its right sibling. A leaf is used only if, read
    /// under its version, it covers the key (the same check as a
    /// [`Cursor`]'s); otherwise the lookup descends from the root. A stale
    /// or distant hint makes the lookup slower, never wrong.
    ///
    /// # Safety
    /// `hint` is a leaf of this tree that is not freed: found while the
    /// caller was pinned as it still is, or in an earlier pin with no
    /// node unlinked since ([`Tree::unlinks`]). A leaf of another tree
    /// could cover the key and answer for the wrong tree.
    #[inline]
    pub unsafe fn get_hinted<G: Guard>(&self, hint: LeafRef, key: &[u8], g: &G) -> Lookup<V> {
        // SAFETY: the caller's contract is the raw tree's.
        typed(unsafe { self.raw.get_hinted(hint, key, g) })
    }

    /// Insert `key → value` if the key is absent. A present key is left as
    /// it is, and its value returned.
    #[inline]
    pub fn insert<G: Guard>(&self, key: &[u8], value: V, g: &mut G) -> Insert<V> {
        typed_insert(self.raw.insert(key, value.to_word(), g))
    }

    /// Insert `key → value` if the key is absent, as [`Tree::insert`]
    /// does, trying first the leaf `hint` — the [`Lookup::leaf`] of a
    /// lookup of the same key that found it absent — so the insert needs
    /// no second descent. A stale hint makes the insert slower, never
    /// wrong.
    ///
    /// # Safety
    /// As for [`Tree::get_hinted`].
    #[inline]
    pub unsafe fn insert_hinted<G: Guard>(
        &self,
        hint: LeafRef,
        key: &[u8],
        value: V,
        g: &mut G,
    ) -> Insert<V> {
        // SAFETY: the caller's contract is the raw tree's.
        typed_insert(unsafe { self.raw.insert_hinted(hint, key, value.to_word(), g) })
    }

    /// Insert or overwrite; returns the old value if there was one, and the
    /// leaf change if a key was added.
    #[inline]
    pub fn upsert<G: Guard>(
        &self,
        key: &[u8],
        value: V,
        g: &mut G,
    ) -> (Option<V>, Option<NodeChange>) {
        let (old, change) = self.raw.upsert(key, value.to_word(), g);
        (old.map(V::from_word), change)
    }

    /// Swap the value of `key` from `expected` to `new`. The key set is
    /// unchanged, so the leaf version is left as it was. Returns false if
    /// the key is absent or holds another value.
    #[inline]
    pub fn replace<G: Guard>(&self, key: &[u8], expected: V, new: V, g: &mut G) -> bool {
        self.raw.replace(key, expected.to_word(), new.to_word(), g)
    }

    /// Remove `key`; returns its value and the leaf change. A remove that
    /// empties its leaf unlinks it and hands it to `g`, so the change's
    /// `leaf` may already be unlinked (its version then carries the
    /// deleted bit): read it only while pinned, as any `LeafRef`.
    #[inline]
    pub fn remove<G: Guard>(&self, key: &[u8], g: &mut G) -> Option<(V, NodeChange)> {
        self.raw.remove(key, g).map(|(w, c)| (V::from_word(w), c))
    }

    /// Remove `key` only if it maps to `expected`.
    #[inline]
    pub fn remove_if<G: Guard>(&self, key: &[u8], expected: V, g: &mut G) -> Option<NodeChange> {
        self.raw.remove_if(key, expected.to_word(), g)
    }

    /// Visit the keys in `(lo, hi)` in order (descending if `reverse`).
    ///
    /// `on_leaf` is told each leaf whose validated contents were used, with
    /// its version, before `visit` sees that leaf's keys; together those
    /// leaves cover the whole range scanned so far. `visit` returns false
    /// to stop. Keys are passed as slices valid for the call.
    #[inline]
    pub fn scan<G: Guard>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        g: &G,
        on_leaf: impl FnMut(LeafRef, u64),
        mut visit: impl FnMut(&[u8], V) -> bool,
    ) {
        self.raw.scan(lo, hi, reverse, g, on_leaf, |k, w| {
            visit(k, V::from_word(w))
        })
    }

    /// A cursor for inserting keys that arrive in ascending runs; see
    /// [`Cursor`].
    pub fn cursor(&self) -> Cursor<'_, V> {
        Cursor {
            raw: self.raw.cursor(),
            tree: self,
        }
    }
}

/// Inserts keys that arrive in ascending runs, such as a checkpoint file's
/// (SiloR §5.1: each recovery thread loads key ranges of a table and
/// "benefit\[s\] from locality"), without descending from the root for each.
///
/// The cursor remembers the leaf its last key went into and, when known,
/// that leaf's parent; a key that leaf (or its right sibling) covers is
/// inserted there by the same steps as after a descent, and any other key
/// descends from the root as [`Tree::insert`] does. So other threads may
/// insert, remove or split concurrently, and keys may arrive in any
/// order: a cursor is only slower then, never wrong. A cursor's split
/// keeps the keys below the new one in the left leaf, so an ascending run
/// fills whole leaves. (ARCHITECTURE.md, "The index", has the details.)
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
/// unlinked since it was found (a remove that empties a leaf unlinks it):
/// a cursor is kept from one pin to the next, and its nodes could have
/// been freed.
#[derive(Debug)]
pub struct Cursor<'t, V: Value = u64> {
    raw: RawCursor<'t>,
    tree: &'t Tree<V>,
}

impl<'t, V: Value> Cursor<'t, V> {
    /// The tree this cursor inserts into.
    pub fn tree(&self) -> &'t Tree<V> {
        self.tree
    }

    /// Insert `key → value` if the key is absent, as [`Tree::insert`] does,
    /// starting from where the previous key went.
    #[inline]
    pub fn insert<G: Guard>(&mut self, key: &[u8], value: V, g: &mut G) -> Insert<V> {
        typed_insert(self.raw.insert(key, value.to_word(), g))
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    /// A tree of pointers is shared between threads as a tree of words
    /// is, though raw pointers are neither `Send` nor `Sync`.
    #[test]
    fn a_tree_of_pointers_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<Tree<*const String>>();
    }

    #[test]
    fn values_come_back_as_they_went_in() {
        let tree: Tree<*const String> = Tree::new();
        // SAFETY: every guard used on this tree is a LeakGuard.
        let mut g = unsafe { LeakGuard::new() };
        let owned: Vec<*const String> = (0..100)
            .map(|i| Box::into_raw(Box::new(format!("v{i}"))).cast_const())
            .collect();
        let mut c = tree.cursor();
        for (i, &p) in owned.iter().enumerate() {
            let k = (i as u64).to_be_bytes();
            assert!(matches!(c.insert(&k, p, &mut g), Insert::Inserted(_)));
        }
        assert!(std::ptr::eq(c.tree(), &tree));
        let k7 = 7u64.to_be_bytes();
        assert_eq!(tree.find(&k7, &g), Some(owned[7]));
        assert_eq!(tree.get(&k7, &g).value, Some(owned[7]));
        match tree.insert(&k7, owned[8], &mut g) {
            Insert::Exists { value } => assert_eq!(value, owned[7]),
            Insert::Inserted(_) => panic!("7 is present"),
        }
        let mut found = [None; 2];
        let k9 = 9u64.to_be_bytes();
        tree.find_many(&[&k7, &k9], &mut found, &g);
        assert_eq!(found, [Some(owned[7]), Some(owned[9])]);
        let mut seen = Vec::new();
        tree.scan(
            Bound::Included(&k7[..]),
            Bound::Excluded(&k9[..]),
            false,
            &g,
            |_, _| {},
            |_, v| {
                // SAFETY: the values are live Strings until freed below.
                seen.push(unsafe { (*v).clone() });
                true
            },
        );
        assert_eq!(seen, ["v7", "v8"]);
        assert!(tree.replace(&k7, owned[7], owned[8], &mut g));
        assert!(!tree.replace(&k7, owned[7], owned[8], &mut g));
        assert!(tree.remove_if(&k7, owned[7], &mut g).is_none());
        assert!(tree.remove_if(&k7, owned[8], &mut g).is_some());
        assert_eq!(tree.remove(&k9, &mut g).map(|(v, _)| v), Some(owned[9]));
        let (old, change) = tree.upsert(&k9, owned[7], &mut g);
        assert!(old.is_none() && change.is_some());
        let mut tree = tree;
        let mut n = 0;
        tree.for_each_value(|_| n += 1);
        assert_eq!(n, 99);
        for p in owned {
            // SAFETY: made by Box::into_raw above; the tree is not read again.
            drop(unsafe { Box::from_raw(p.cast_mut()) });
        }
    }
}
