//! The atomics Silo uses: `granary-sync`'s, which are loom's under the
//! `loom` feature so the TID lock word and the epoch protocol can be
//! model-checked.

pub(crate) use granary_sync::{fence, spin, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
