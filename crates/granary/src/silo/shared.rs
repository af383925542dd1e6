//! The engine state of one database ([`Shared`]) and what keeps a durable
//! one open ([`Owner`]). Below the workers, transactions and snapshots
//! that run on it and the handle ([`Database`](crate::Database)) that
//! makes it; above durability, which it holds.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;
use granary_api::TableId;
use granary_index::Tree;
use parking_lot::Mutex;

use crate::silo::epoch::{Epochs, Tick};
use crate::silo::error::Error;
use crate::silo::gc::GcLists;
use crate::silo::options::Options;
use crate::silo::record::Record;
use crate::silo::sync::{AtomicU32, AtomicU64, Ordering};

/// The most tables one database can hold.
pub const MAX_TABLES: usize = 4096;

pub(crate) struct Table {
    pub name: String,
    pub tree: Tree<*const Record>,
    /// The largest capacity of any record ever linked into `tree`: a
    /// bound for prefetching. A lookup of a table whose records all fit
    /// in their first line need not read a record's capacity to learn
    /// that nothing more is worth fetching (that read waits for the
    /// record's first miss).
    widest: AtomicU32,
}

impl Table {
    pub fn new(name: &str, tree: Tree<*const Record>) -> Table {
        Table {
            name: name.to_string(),
            tree,
            widest: AtomicU32::new(0),
        }
    }

    /// Note that a record of capacity `cap` is (about to be) linked into
    /// the tree. Before the link: a lookup that finds the record then
    /// also finds the bound covering it (the link's Release, the
    /// lookup's Acquire).
    #[inline]
    pub fn widen(&self, cap: usize) {
        let cap = cap.min(u32::MAX as usize) as u32;
        // Read first: the line stays shared once the table's widest
        // record is known.
        if cap > self.widest.load(Ordering::Relaxed) {
            self.widest.fetch_max(cap, Ordering::Relaxed);
        }
    }

    /// An upper bound on every linked record's capacity.
    #[inline]
    pub fn widest(&self) -> usize {
        self.widest.load(Ordering::Relaxed) as usize
    }
}

/// One database's engine state, shared by its handles, its workers and
/// its internal threads.
pub(crate) struct Shared {
    pub epochs: Arc<Epochs>,
    /// Set (once) for a database opened on a directory.
    pub durable: OnceLock<Arc<crate::silo::durable::log::Durable>>,
    pub tables: Box<[OnceLock<Table>]>,
    pub names: Mutex<HashMap<String, TableId>>,
    pub options: Options,
    /// Only used with `Options::global_tid`.
    pub global_tid: CachePadded<AtomicU64>,
    /// Garbage left by dropped workers, adopted by the next worker that
    /// starts a transaction.
    pub orphans: Mutex<GcLists>,
    pub orphan_count: AtomicU64,
}

impl Shared {
    #[inline]
    pub fn table(&self, t: TableId) -> Result<&Table, Error> {
        self.tables
            .get(t.0 as usize)
            .and_then(|c| c.get())
            .ok_or_else(|| Error::UnknownTableId(t.0))
    }

    /// Every table, in creation order.
    pub fn tables(&self) -> Vec<(String, TableId)> {
        let mut v: Vec<_> = self
            .names
            .lock()
            .iter()
            .map(|(n, t)| (n.clone(), *t))
            .collect();
        v.sort_by_key(|(_, t)| *t);
        v
    }
}

impl Tick for Shared {
    fn tick(&self) {
        self.epochs.advance();
        if let Some(d) = self.durable.get() {
            d.on_tick();
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone: no worker, no reader.
        unsafe { self.orphans.get_mut().free_all() };
        for t in self.tables.iter_mut() {
            if let Some(t) = t.get_mut() {
                t.tree.for_each_value(|v| {
                    // SAFETY: every value is a live record owned by the tree;
                    // superseded versions were freed with the garbage above.
                    unsafe { Record::free(std::ptr::NonNull::new_unchecked(v.cast_mut())) }
                });
            }
        }
    }
}

/// Held by every user [`Database`](crate::Database) handle and
/// [`Worker`](crate::Worker) (not by granary's own threads): when the last
/// one goes, a durable database flushes, stops its threads and unlocks
/// its directory.
pub(crate) struct Owner {
    pub shared: Arc<Shared>,
    /// The directory lock, released last.
    pub lock: Mutex<Option<granary_storage::fs::DirLock>>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(d) = self.shared.durable.get() {
            d.checkpoints.stop();
            d.checkpoints.join();
            // No user worker is left and the checkpointer has stopped:
            // two ticks put every commit below the bound the loggers
            // flush up to.
            self.shared.epochs.advance();
            self.shared.epochs.advance();
            d.shutdown();
        }
        drop(self.lock.lock().take());
    }
}
