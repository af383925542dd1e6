//! `granary-index`: a concurrent ordered map over byte-string keys, in the
//! style of Masstree ("Cache Craftiness for Fast Multicore Key-Value
//! Storage", EuroSys 2012) and optimistic lock coupling ("The ART of
//! Practical Synchronization", DaMoN 2016). It maps each key to a value the
//! tree keeps as one 64-bit word ([`Value`]): a `u64`, or typically a
//! pointer to the caller's record (`Tree<*const Record>`).
//!
//! Every design in granary uses it: Silo (`granary`) for its tables, as
//! Silo ("Speedy Transactions in Multicore In-Memory Databases", SOSP
//! 2013) uses Masstree, and the designs of `granary-protocols` for theirs
//! (Deuteronomy for its per-table ordered index and its memory data
//! component). `docs/ARCHITECTURE.md` ("The index") describes the nodes,
//! their invariants and the measurements behind them.
//!
//! * Readers never store to shared memory: they read a node's version
//!   word, read the node, and re-check the version ([`NodeVersion`]).
//! * Writers lock the nodes they change through the same word.
//! * The first 8 bytes of each key are compared as one integer.
//! * Lookups and scans report the `(leaf, version)` pairs they depended on,
//!   and inserts/removes report each changed leaf's old and new version, so
//!   a transaction layer can validate phantoms (Silo §4.6). The index knows
//!   nothing of transactions.
//! * Unlinked memory goes through an epoch [`Guard`] supplied by the caller.
//!
//! # Where to start
//!
//! [`Tree`] is the map: [`Tree::get`], [`Tree::insert`], [`Tree::upsert`],
//! [`Tree::remove`] and [`Tree::scan`]. Every operation takes a [`Guard`],
//! the caller's epoch-based reclamation ([`LeakGuard`] never frees, for
//! tests and examples). [`Lookup`], [`Insert`] and [`NodeChange`] carry the
//! node versions a transaction layer validates.
//!
//! ```
//! use granary_index::{Insert, LeakGuard, Tree};
//! use std::ops::Bound;
//!
//! let tree = Tree::new();
//! // SAFETY: every guard used on this tree is a LeakGuard.
//! let mut g = unsafe { LeakGuard::new() };
//! for (i, k) in ["pear", "apple", "fig"].iter().enumerate() {
//!     assert!(matches!(tree.insert(k.as_bytes(), i as u64, &mut g), Insert::Inserted(_)));
//! }
//! assert_eq!(tree.get(b"fig", &g).value, Some(2));
//! let mut keys = Vec::new();
//! tree.scan(Bound::Unbounded, Bound::Unbounded, false, &g, |_, _| {}, |k, _| {
//!     keys.push(k.to_vec());
//!     true
//! });
//! assert_eq!(keys, vec![b"apple".to_vec(), b"fig".to_vec(), b"pear".to_vec()]);
//! ```

mod key;
mod node;
mod point;
mod retired;
mod sync;
mod tree;
mod version;

pub use node::prefetch_lines;
pub use retired::Retired;
pub use tree::{Cursor, Guard, Insert, LeafRef, LeakGuard, Lookup, NodeChange, Tree, Value};
pub use version::NodeVersion;
