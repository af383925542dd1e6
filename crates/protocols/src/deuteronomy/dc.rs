//! The data component (deuteronomy-cidr15 §1, §4): where records live,
//! behind the transaction component. The TC reads a record from its DC
//! when no version of it is cached, and the TC Proxy applies committed
//! operations to it as blind upserts and deletes (§4.3.2), in log order.
//!
//! The interface is batched (`apply` takes a whole batch), so that a
//! remote back end needs one round trip per batch, not per operation.
//! Every value carries the LSN of the redo record that wrote it (0 for
//! one that was never written through a TC), which makes application
//! idempotent when recovery replays the log (§4.3.2).
//!
//! [`MemoryDc`] is the in-memory back end: granary's own index.

use std::ops::Bound;

use granary_api::Error;
use std::sync::OnceLock;

use super::log::Lsn;
use crate::reclaim::Pin;
use crate::sync::{AtomicU64, Ordering};
use crate::value::Tail;
use granary_index::Tree;

/// One operation for the DC: a blind upsert (`Some`) or delete (`None`)
/// of `key` in table `table`, written by the redo record at `lsn`.
#[derive(Clone, Copy, Debug)]
pub struct Op<'a> {
    pub table: u32,
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
    pub lsn: Lsn,
}

/// A data component.
pub trait DataComponent: Send + Sync + 'static {
    /// The back end's name (`memory`, `disk`, `etcd`).
    fn name(&self) -> &'static str;

    /// Read `key` of `table`: its value into `out` (replacing what was
    /// there) and the LSN that wrote it, or `None` if it is absent.
    ///
    /// # Errors
    /// The back end failed.
    fn get(&self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<Option<Lsn>, Error>;

    /// Apply `ops` in order, as blind writes (§4.3.2).
    ///
    /// # Errors
    /// The back end failed; some prefix of the batch may have applied
    /// (application is idempotent: the TC Proxy may apply it again).
    fn apply(&self, ops: &[Op<'_>]) -> Result<(), Error>;

    /// Visit the keys of `table` in `lo..hi` in order (descending if
    /// `reverse`), at most `limit`, until `f` returns false.
    ///
    /// # Errors
    /// [`Error::Unsupported`] if the back end has no ordered reads, or it
    /// failed.
    fn range(
        &self,
        table: u32,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error>;

    /// §6 (RSSP): make every operation applied so far stable, and
    /// remember `rssp` as the LSN from which recovery replays the log.
    /// The in-memory back end has nothing to make stable.
    ///
    /// # Errors
    /// The back end failed.
    fn checkpoint(&self, rssp: Lsn) -> Result<(), Error>;

    /// The LSN of the last completed checkpoint (0: none).
    fn checkpointed(&self) -> Lsn;

    /// Whether what it holds survives the process (then a checkpoint lets
    /// the TC truncate its log; otherwise recovery replays the whole log).
    fn persistent(&self) -> bool;
}

/// A value in the memory DC: the LSN that wrote it, then its bytes, in
/// one allocation (one cache miss to read).
type Entry = Tail<Lsn>;

/// Free an entry once no pinned thread can see it.
///
/// # Safety
/// `p` came from [`Tail::alloc`], is unreachable for threads that pin
/// from now on, and is retired once.
unsafe fn retire(g: &crossbeam_epoch::Guard, p: *mut Entry) {
    let p = p as usize;
    // SAFETY: the caller's contract; crossbeam delays the free past the
    // grace period.
    unsafe { g.defer_unchecked(move || Tail::free(p as *mut Entry)) };
}

/// The in-memory DC: a tree per table, of keys to boxed entries,
/// replaced under crossbeam's epochs. (One tree of `table | key` would
/// make every key longer than 8 bytes, which the index keeps out of
/// line: a pointer chase and a `memcmp` per comparison.)
pub struct MemoryDc {
    tables: Box<[OnceLock<Tree<*const Entry>>]>,
    rssp: AtomicU64,
}

impl Default for MemoryDc {
    fn default() -> MemoryDc {
        MemoryDc {
            tables: (0..crate::catalog::MAX_TABLES)
                .map(|_| OnceLock::new())
                .collect(),
            rssp: AtomicU64::new(0),
        }
    }
}

impl MemoryDc {
    /// An empty memory DC.
    pub fn new() -> MemoryDc {
        MemoryDc::default()
    }

    /// Table `t`'s tree, made on first use.
    fn tree(&self, t: u32) -> Result<&Tree<*const Entry>, Error> {
        let slot = self
            .tables
            .get(t as usize)
            .ok_or(Error::UnknownTableId(t))?;
        Ok(slot.get_or_init(Tree::new))
    }
}

impl DataComponent for MemoryDc {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn get(&self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<Option<Lsn>, Error> {
        let tree = self.tree(table)?;
        let g = crossbeam_epoch::pin();
        match tree.get(key, &Pin(&g)).value {
            Some(value) => {
                // SAFETY: entries are freed only after a grace period, and
                // we are pinned.
                let e = unsafe { &*value };
                out.clear();
                // SAFETY: an entry is never written after it is published.
                out.extend_from_slice(unsafe { e.value() }.unwrap_or_default());
                Ok(Some(**e))
            }
            None => Ok(None),
        }
    }

    fn apply(&self, ops: &[Op<'_>]) -> Result<(), Error> {
        let g = crossbeam_epoch::pin();
        for op in ops {
            let (tree, k) = (self.tree(op.table)?, op.key);
            let old = match op.value {
                Some(v) => {
                    let e = Entry::alloc(op.lsn, Some(v), 0);
                    tree.upsert(k, e.cast_const(), &mut Pin(&g)).0
                }
                None => tree.remove(k, &mut Pin(&g)).map(|(v, _)| v),
            };
            if let Some(old) = old {
                // SAFETY: replaced or removed above: unreachable for
                // threads that pin from now on; retired once.
                unsafe { retire(&g, old.cast_mut()) };
            }
        }
        Ok(())
    }

    fn range(
        &self,
        table: u32,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let tree = self.tree(table)?;
        let g = crossbeam_epoch::pin();
        let mut n = 0;
        tree.scan(
            lo,
            hi,
            reverse,
            &Pin(&g),
            |_, _| {},
            |k, v| {
                if n == limit {
                    return false;
                }
                n += 1;
                // SAFETY: as in `get`.
                let e = unsafe { &*v };
                // SAFETY: as in `get`.
                f(k, unsafe { e.value() }.unwrap_or_default())
            },
        );
        Ok(())
    }

    fn checkpoint(&self, rssp: Lsn) -> Result<(), Error> {
        // AcqRel: the RSSP (§4.4) rises after the checkpoint: whoever loads it
        // with Acquire sees it complete.
        self.rssp.fetch_max(rssp, Ordering::AcqRel);
        Ok(())
    }

    fn checkpointed(&self) -> Lsn {
        // Acquire: pairs with `checkpoint`'s raise of the RSSP.
        self.rssp.load(Ordering::Acquire)
    }

    fn persistent(&self) -> bool {
        false
    }
}

impl Drop for MemoryDc {
    fn drop(&mut self) {
        for t in self.tables.iter_mut().filter_map(OnceLock::get_mut) {
            t.for_each_value(|v| {
                // SAFETY: the DC is going: its entries are its own.
                unsafe { Tail::free(v.cast_mut()) };
            });
        }
    }
}

/// The contract every DC meets, checked on an empty one: for the tests
/// of each back end, here or in another crate.
///
/// # Panics
/// Where `dc` breaks the contract.
pub fn check_contract(dc: &dyn DataComponent) {
    let op = |table, key, value, lsn| Op {
        table,
        key,
        value,
        lsn,
    };
    dc.apply(&[
        op(1, &b"a"[..], Some(&b"1"[..]), 10),
        op(1, b"b", Some(b"2"), 11),
        op(2, b"a", Some(b"x"), 12),
        op(1, b"a", Some(b"3"), 13),
        op(1, b"c", Some(b"4"), 14),
        op(1, b"b", None, 15),
    ])
    .unwrap();
    let mut out = Vec::new();
    assert_eq!(dc.get(1, b"a", &mut out).unwrap(), Some(13));
    assert_eq!(out, b"3");
    assert_eq!(dc.get(1, b"b", &mut out).unwrap(), None);
    assert_eq!(dc.get(2, b"a", &mut out).unwrap(), Some(12));
    assert_eq!(out, b"x");
    let range = |limit, reverse| {
        let mut seen = Vec::new();
        dc.range(
            1,
            Bound::Unbounded,
            Bound::Unbounded,
            limit,
            reverse,
            &mut |k, v| {
                seen.push((k.to_vec(), v.to_vec()));
                true
            },
        )
        .unwrap();
        seen
    };
    let (a, c) = (
        (b"a".to_vec(), b"3".to_vec()),
        (b"c".to_vec(), b"4".to_vec()),
    );
    assert_eq!(range(10, false), vec![a.clone(), c.clone()], "table 1 only");
    assert_eq!(range(10, true), vec![c.clone(), a], "reverse");
    assert_eq!(range(1, true), vec![c], "reverse, limit 1");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_dc_upserts_deletes_and_ranges_per_table() {
        check_contract(&MemoryDc::new());
    }
}
