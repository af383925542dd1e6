//! The disk data component: records in redb, a pure-Rust embedded B-tree
//! store, so the data can outgrow the TC's memory (deuteronomy-cidr15
//! §1).
//!
//! The TC Proxy's batches are redb write transactions that are not synced
//! (`Durability::None`): the recovery log already holds every operation
//! in them (§4.2: nothing reaches the DC before it is stable in the log),
//! so a crash loses nothing that replay will not apply again. A
//! checkpoint (§6, RSSP) is a synced write transaction that records the
//! RSSP: it makes every earlier batch stable with it, and recovery
//! replays the log from there. Reads are redb read transactions, served
//! from redb's page cache (its size is the DC's share of memory) or the
//! file.

use std::ops::Bound;
use std::path::{Path, PathBuf};

use granary_api::Error;
use redb::{Database, Durability, ReadableTable, TableDefinition};

use super::dc::{DataComponent, Op};
use super::log::Lsn;
use crate::sync::{AtomicU64, Ordering};

/// A key: `(table, key)`.
type Key<'a> = (u32, &'a [u8]);
/// A value: `(lsn, value)`.
type Val<'a> = (u64, &'a [u8]);

/// `(table, key) → (lsn, value)`.
const DATA: TableDefinition<Key, Val> = TableDefinition::new("data");
/// `"rssp" → lsn`.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// The disk DC.
pub struct DiskDc {
    db: Database,
    path: PathBuf,
    rssp: AtomicU64,
}

impl DiskDc {
    /// Open (or create) the DC in file `path`, with a page cache of
    /// `cache_bytes`.
    ///
    /// # Errors
    /// redb's, as [`Error::Storage`].
    pub fn open(path: &Path, cache_bytes: usize) -> Result<DiskDc, Error> {
        let fail = |e: redb::Error| storage("open the disk data component", path, e);
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create(path)
            .map_err(|e| fail(e.into()))?;
        let w = db.begin_write().map_err(|e| fail(e.into()))?;
        let rssp = {
            let _ = w.open_table(DATA).map_err(|e| fail(e.into()))?;
            let meta = w.open_table(META).map_err(|e| fail(e.into()))?;
            let r = meta.get("rssp").map_err(|e| fail(e.into()))?;
            r.map_or(0, |v| v.value())
        };
        w.commit().map_err(|e| fail(e.into()))?;
        Ok(DiskDc {
            db,
            path: path.to_path_buf(),
            rssp: AtomicU64::new(rssp),
        })
    }

    fn fail(&self, what: &'static str) -> impl Fn(redb::Error) -> Error + '_ {
        move |e| storage(what, &self.path, e)
    }
}

fn storage(what: &'static str, path: &Path, e: redb::Error) -> Error {
    Error::Storage {
        what: what.to_string(),
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// A bound on keys of `table`, as a bound on `(table, key)`.
fn bound(table: u32, b: Bound<&[u8]>, low: bool) -> Bound<(u32, &[u8])> {
    const NONE: &[u8] = &[];
    match b {
        Bound::Included(k) => Bound::Included((table, k)),
        Bound::Excluded(k) => Bound::Excluded((table, k)),
        Bound::Unbounded if low => Bound::Included((table, NONE)),
        Bound::Unbounded => match table.checked_add(1) {
            Some(t) => Bound::Excluded((t, NONE)),
            None => Bound::Unbounded,
        },
    }
}

impl DataComponent for DiskDc {
    fn name(&self) -> &'static str {
        "disk"
    }

    fn get(&self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<Option<Lsn>, Error> {
        let fail = self.fail("read the disk data component");
        let r = self.db.begin_read().map_err(|e| fail(e.into()))?;
        let t = r.open_table(DATA).map_err(|e| fail(e.into()))?;
        let got = t.get((table, key)).map_err(|e| fail(e.into()))?;
        Ok(got.map(|g| {
            let (lsn, v) = g.value();
            out.clear();
            out.extend_from_slice(v);
            lsn
        }))
    }

    fn apply(&self, ops: &[Op<'_>]) -> Result<(), Error> {
        let fail = self.fail("write the disk data component");
        let mut w = self.db.begin_write().map_err(|e| fail(e.into()))?;
        // Stable through the log; a checkpoint syncs it (module notes).
        w.set_durability(Durability::None);
        {
            let mut t = w.open_table(DATA).map_err(|e| fail(e.into()))?;
            for op in ops {
                match op.value {
                    Some(v) => {
                        t.insert((op.table, op.key), (op.lsn, v))
                            .map_err(|e| fail(e.into()))?;
                    }
                    None => {
                        t.remove((op.table, op.key)).map_err(|e| fail(e.into()))?;
                    }
                }
            }
        }
        w.commit().map_err(|e| fail(e.into()))
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
        let fail = self.fail("read the disk data component");
        let r = self.db.begin_read().map_err(|e| fail(e.into()))?;
        let t = r.open_table(DATA).map_err(|e| fail(e.into()))?;
        let range = t
            .range::<Key>((bound(table, lo, true), bound(table, hi, false)))
            .map_err(|e| fail(e.into()))?;
        let mut visit = |e: Result<_, redb::StorageError>| -> Result<bool, Error> {
            let (k, v): (redb::AccessGuard<Key>, redb::AccessGuard<Val>) =
                e.map_err(|e| fail(e.into()))?;
            Ok(f(k.value().1, v.value().1))
        };
        if reverse {
            for e in range.rev().take(limit) {
                if !visit(e)? {
                    break;
                }
            }
        } else {
            for e in range.take(limit) {
                if !visit(e)? {
                    break;
                }
            }
        }
        Ok(())
    }

    fn checkpoint(&self, rssp: Lsn) -> Result<(), Error> {
        let fail = self.fail("checkpoint the disk data component");
        let mut w = self.db.begin_write().map_err(|e| fail(e.into()))?;
        w.set_durability(Durability::Immediate);
        {
            let mut m = w.open_table(META).map_err(|e| fail(e.into()))?;
            m.insert("rssp", rssp).map_err(|e| fail(e.into()))?;
        }
        w.commit().map_err(|e| fail(e.into()))?;
        // AcqRel: the RSSP (§4.4) rises after the checkpoint's commit above:
        // whoever loads it with Acquire sees the checkpoint complete.
        self.rssp.fetch_max(rssp, Ordering::AcqRel);
        Ok(())
    }

    fn checkpointed(&self) -> Lsn {
        // Acquire: pairs with `checkpoint`'s raise of the RSSP.
        self.rssp.load(Ordering::Acquire)
    }

    fn persistent(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_dc_applies_reads_ranges_and_keeps_its_checkpoint() {
        let dir = std::env::temp_dir().join(format!("granary-diskdc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dc.redb");
        {
            let dc = DiskDc::open(&path, 1 << 20).unwrap();
            super::super::dc::check_contract(&dc);
            dc.checkpoint(99).unwrap();
        }
        let dc = DiskDc::open(&path, 1 << 20).unwrap();
        assert_eq!(dc.checkpointed(), 99);
        let mut out = Vec::new();
        assert_eq!(dc.get(2, b"a", &mut out).unwrap(), Some(12));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
