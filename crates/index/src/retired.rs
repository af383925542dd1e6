//! [`Retired`]: index memory unlinked from a tree (a key's heap copy, a
//! leaf, an inner node, a point index's table), waiting for its grace
//! period before it is freed.

use std::alloc::dealloc;
use std::ptr::NonNull;

use crate::key::{box_of, free_stored, keybox_layout, KeyBox, INLINE_MAX};
use crate::node::{Inner, Leaf};
use crate::point::Table;
use crate::sync::Ordering::Relaxed;

/// An opaque piece of index memory unlinked from a tree — a removed key's
/// heap copy, or an emptied leaf or childless inner node — handed to a
/// [`Guard`](crate::Guard) to be freed once no reader can still see it.
/// One word: the address, with what it is in its low bits (every kind is
/// at least 8-aligned).
#[derive(Debug)]
#[must_use = "retired index memory leaks unless it is reclaimed"]
pub struct Retired(NonNull<u8>);

// SAFETY: a Retired is an owned allocation no thread may use any more;
// any thread may free it.
unsafe impl Send for Retired {}

const KIND: usize = 7;
const KEY: usize = 0;
const LEAF: usize = 1;
const INNER: usize = 2;
const TABLE: usize = 3;
const _: () = assert!(
    std::mem::align_of::<KeyBox>() > KIND
        && std::mem::align_of::<Leaf>() > KIND
        && std::mem::align_of::<Inner>() > KIND
        && std::mem::align_of::<Table>() > KIND
);

impl Retired {
    pub(crate) fn new(info: u64) -> Option<Retired> {
        (info > INLINE_MAX)
            .then(|| Retired(NonNull::new(box_of(info) as *mut u8).expect("non-null")))
    }

    /// An unlinked leaf (entries empty; its fence key goes with it).
    pub(crate) fn leaf(p: NonNull<Leaf>) -> Retired {
        Retired(p.cast::<u8>().map_addr(|a| a | LEAF))
    }

    /// An unlinked inner node (its children are not freed with it).
    pub(crate) fn inner(p: NonNull<Inner>) -> Retired {
        Retired(p.cast::<u8>().map_addr(|a| a | INNER))
    }

    /// A point index's table, replaced by one twice its size (its
    /// overflow buckets go with it; the keys they name do not).
    pub(crate) fn table(p: *mut Table) -> Retired {
        Retired(
            NonNull::new(p)
                .expect("non-null")
                .cast::<u8>()
                .map_addr(|a| a | TABLE),
        )
    }

    /// The leaf, if this is one (for tests that mimic reuse).
    #[cfg(all(test, not(feature = "loom")))]
    pub(crate) fn as_leaf(&self) -> Option<*const Leaf> {
        (self.0.addr().get() & KIND == LEAF)
            .then(|| self.0.as_ptr().map_addr(|a| a & !KIND) as *const Leaf)
    }

    /// Free the memory.
    ///
    /// # Safety
    /// No thread may still be inside an operation that started before this
    /// value was retired (the epoch grace period has passed).
    pub unsafe fn reclaim(self) {
        let kind = self.0.addr().get() & KIND;
        let p = self.0.as_ptr().map_addr(|a| a & !KIND);
        // SAFETY: each pointer came from `make_stored` or a node's `Box`,
        // was unlinked before it was retired, and is retired once; the
        // caller vouches for the grace period.
        unsafe {
            match kind {
                KEY => {
                    let b = p as *mut KeyBox;
                    dealloc(p, keybox_layout((*b).len))
                }
                LEAF => {
                    let leaf = Box::from_raw(p as *mut Leaf);
                    debug_assert_eq!(leaf.header.count.load(Relaxed), 0);
                    if let Some((_, info)) = leaf.low() {
                        free_stored(info);
                    }
                }
                INNER => drop(Box::from_raw(p as *mut Inner)),
                _ => {
                    debug_assert_eq!(kind, TABLE);
                    drop(Box::from_raw(p as *mut Table));
                }
            }
        }
    }
}
