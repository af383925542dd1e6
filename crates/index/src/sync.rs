//! The atomics the index uses: `granary-sync`'s, which are loom's under the
//! `loom` feature so the node-version protocol can be model-checked.

pub(crate) use granary_sync::{fence, spin, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};
