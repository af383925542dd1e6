//! A transaction: reads and in-place writes inside the partitions it
//! holds, each change kept in an undo log for a rollback.

use std::ops::Bound;

use granary_api::{Error, PartitionRule, TableId, Tx, TxError};

use granary_index::Insert;

use granary_api::limits::{check_bounds, check_key, check_value};

use super::{row, row_value, Owner, Row, Shared, Table};

/// What a transaction changed, undone in reverse on rollback. Old values
/// and keys are copied into one byte arena, kept from one transaction to
/// the next.
#[derive(Default)]
pub(super) struct Undo {
    steps: Vec<Step>,
    bytes: Vec<u8>,
}

// SAFETY: the rows its steps point to are reached only by the
// transaction that holds their partitions, on its thread; between
// transactions the log is empty (commit and rollback drain it), so a
// runner that moves to another thread takes no row pointer with it.
unsafe impl Send for Undo {}

/// One change; `at..at + len` is a range of [`Undo::bytes`].
enum Step {
    /// A row's value overwritten in place: its old bytes.
    Overwrite { row: *const Row, at: u32, len: u32 },
    /// A field of a row's value changed in place: its old bytes, which
    /// start at byte `off` of the value.
    Field {
        row: *const Row,
        off: u32,
        at: u32,
        len: u32,
    },
    /// A key added to table `t`'s partition `p`: the key.
    Added {
        t: TableId,
        p: u32,
        at: u32,
        len: u32,
    },
    /// A key removed from table `t`'s partition `p`, with its row (freed
    /// at commit).
    Removed {
        t: TableId,
        p: u32,
        at: u32,
        len: u32,
        row: *const Row,
    },
    /// A key's row replaced by a larger one, `new`: `old` is freed at
    /// commit, `new` on rollback.
    Replaced {
        t: TableId,
        p: u32,
        at: u32,
        len: u32,
        old: *const Row,
        new: *const Row,
    },
}

impl Undo {
    /// Copy `b` into the arena: where it starts.
    fn keep(&mut self, b: &[u8]) -> (u32, u32) {
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(b);
        (at, b.len() as u32)
    }

    fn clear(&mut self) {
        self.steps.clear();
        self.bytes.clear();
    }
}

/// A transaction holding its partitions.
pub struct Txn<'r> {
    db: &'r Shared,
    mask: &'r [u64],
    all: bool,
    undo: &'r mut Undo,
}

impl<'r> Txn<'r> {
    /// A transaction holding the partitions set in `mask` (every
    /// partition if `all`).
    pub(super) fn begin(db: &'r Shared, mask: &'r [u64], all: bool, undo: &'r mut Undo) -> Txn<'r> {
        Txn {
            db,
            mask,
            all,
            undo,
        }
    }
}

impl<'r> Txn<'r> {
    /// The tree holding `key` of table `t`, checked to be locked (for a
    /// write to a shared table: every partition locked).
    fn map(&self, t: TableId, key: &[u8], write: bool) -> Result<(&'r Table, u32), TxError> {
        check_key(key)?;
        let db: &'r Shared = self.db;
        let table = db.tables.get(t)?;
        match db.partition_of(table, key) {
            None if write && !self.all => Err(Error::Undeclared(format!(
                "a write to shared table {:?} needs every partition locked (declare none)",
                table.name
            ))
            .into()),
            None => Ok((table, 0)),
            Some(p) if self.mask[p as usize / 64] & (1 << (p % 64)) != 0 => Ok((table, p)),
            Some(p) => Err(Error::Undeclared(format!(
                "table {:?}: partition {p} was not declared",
                table.name
            ))
            .into()),
        }
    }

    /// Undo every change, newest first.
    pub(super) fn rollback(&mut self) {
        let db: &Shared = self.db;
        let undo = &mut *self.undo;
        for step in undo.steps.drain(..).rev() {
            let tree = |t: TableId, p: u32| {
                &db.tables.get(t).expect("written tables exist").trees[p as usize]
            };
            let bytes = |at: u32, len: u32| &undo.bytes[at as usize..(at + len) as usize];
            match step {
                Step::Overwrite { row: r, at, len } => {
                    // SAFETY: our partition's row, alive (a later removal
                    // or replacement was undone first); its room held
                    // these bytes before.
                    let fits = unsafe { row(r).overwrite(Some(bytes(at, len))) };
                    debug_assert!(fits);
                }
                Step::Field {
                    row: r,
                    off,
                    at,
                    len,
                } => {
                    // SAFETY: as for `Overwrite`; the value has its length
                    // of when the field was saved (later changes were
                    // undone first), so the field lies within it.
                    let v = unsafe { row(r).value_mut() }.expect("rows in a tree hold a value");
                    v[off as usize..(off + len) as usize].copy_from_slice(bytes(at, len));
                }
                Step::Added { t, p, at, len } => {
                    let (v, _) = tree(t, p)
                        .remove(bytes(at, len), &mut Owner)
                        .expect("an added key is still there");
                    // SAFETY: made by this transaction, unlinked above.
                    unsafe { Row::free(v.cast_mut()) };
                }
                Step::Removed { t, p, at, len, row } => {
                    let r = tree(t, p).insert(bytes(at, len), row, &mut Owner);
                    debug_assert!(matches!(r, Insert::Inserted(_)));
                }
                Step::Replaced {
                    t,
                    p,
                    at,
                    len,
                    old,
                    new,
                } => {
                    let back = tree(t, p).replace(bytes(at, len), new, old, &mut Owner);
                    debug_assert!(back);
                    // SAFETY: made by this transaction, unlinked above.
                    unsafe { Row::free(new.cast_mut()) };
                }
            }
        }
        undo.bytes.clear();
    }

    /// Free the rows of the keys this transaction removed (no one else
    /// can reach them: they were unlinked under the partition's lock).
    pub(super) fn commit(&mut self) {
        for step in &self.undo.steps {
            if let &Step::Removed { row: r, .. } | &Step::Replaced { old: r, .. } = step {
                // SAFETY: unlinked, and listed once.
                unsafe { Row::free(r.cast_mut()) };
            }
        }
        self.undo.clear();
    }

    fn write(
        &mut self,
        t: TableId,
        key: &[u8],
        value: Option<&[u8]>,
        must_be_new: bool,
    ) -> Result<bool, TxError> {
        if let Some(v) = value {
            check_value(v)?;
        }
        let (table, p) = self.map(t, key, true)?;
        let tree = &table.trees[p as usize];
        let undo = &mut *self.undo;
        if must_be_new {
            // An insert: one descent (the key is new, or the insert fails).
            let r = Row::alloc((), value, 0);
            if let Insert::Exists { .. } = tree.insert(key, r.cast_const(), &mut Owner) {
                // SAFETY: never published.
                unsafe { Row::free(r) };
                return Err(Error::KeyExists.into());
            }
            let (at, len) = undo.keep(key);
            undo.steps.push(Step::Added { t, p, at, len });
            return Ok(false);
        }
        let found = tree.find(key, &Owner);
        match (found, value) {
            (Some(v), Some(new)) => {
                // SAFETY: a row of our partition.
                let (r, old) = unsafe { (row(v), row_value(v)) };
                let (at, len) = undo.keep(old);
                // SAFETY: as above; `old` is not used past this point.
                if unsafe { r.overwrite(Some(new)) } {
                    undo.steps.push(Step::Overwrite { row: v, at, len });
                } else {
                    // No room: a larger row takes its place.
                    let n = Row::alloc((), Some(new), 0).cast_const();
                    let swapped = tree.replace(key, v, n, &mut Owner);
                    debug_assert!(swapped);
                    undo.bytes.truncate(at as usize);
                    let (at, len) = undo.keep(key);
                    undo.steps.push(Step::Replaced {
                        t,
                        p,
                        at,
                        len,
                        old: v,
                        new: n,
                    });
                }
            }
            (None, Some(new)) => {
                let r = Row::alloc((), Some(new), 0).cast_const();
                let Insert::Inserted(_) = tree.insert(key, r, &mut Owner) else {
                    unreachable!("absent under our lock");
                };
                let (at, len) = undo.keep(key);
                undo.steps.push(Step::Added { t, p, at, len });
            }
            (Some(_), None) => {
                let (v, _) = tree
                    .remove(key, &mut Owner)
                    .expect("present under our lock");
                let (at, len) = undo.keep(key);
                undo.steps.push(Step::Removed {
                    t,
                    p,
                    at,
                    len,
                    row: v,
                });
            }
            (None, None) => {}
        }
        Ok(found.is_some())
    }
}

impl Tx for Txn<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> Result<Option<&[u8]>, TxError> {
        let (table, p) = self.map(t, key, false)?;
        let v = table.trees[p as usize].find(key, &Owner);
        // SAFETY: locked (checked by `map`): no one else writes it.
        Ok(v.map(|v| unsafe { row_value(v) }))
    }

    fn update<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // The whole value is one field: its length does not change, so
        // restoring its old bytes in place undoes it.
        self.update_field(t, key, 0..usize::MAX, f)
    }

    fn update_field<R>(
        &mut self,
        t: TableId,
        key: &[u8],
        field: std::ops::Range<usize>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, TxError> {
        // In place; only the field's old bytes are saved for undo.
        let (table, p) = self.map(t, key, true)?;
        let Some(v) = table.trees[p as usize].find(key, &Owner) else {
            return Ok(None);
        };
        // SAFETY: locked (checked by `map`): no one else reads or writes it.
        let bytes = unsafe { row(v).value_mut() }.expect("rows in a tree hold a value");
        let field = granary_api::field_within(&field, bytes.len());
        let (at, len) = self.undo.keep(&bytes[field.clone()]);
        let off = field.start as u32;
        self.undo.steps.push(Step::Field {
            row: v,
            off,
            at,
            len,
        });
        Ok(Some(f(&mut bytes[field])))
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value), false).map(|_| ())
    }

    fn insert(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<(), TxError> {
        self.write(t, key, Some(value), true).map(|_| ())
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool, TxError> {
        self.write(t, key, None, false)
    }

    fn scan<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: F,
    ) -> Result<(), TxError> {
        let db: &Shared = self.db;
        let table = db.tables.get(t)?;
        check_bounds(lo, hi)?;
        if limit == 0 {
            return Ok(());
        }
        if self.all && table.trees.len() > 1 {
            // Holding every partition (a procedure that declared nothing,
            // such as a verification pass), a scan may cross them: merge
            // the partitions' ranges in key order (up to `limit` from
            // each).
            let mut rows: Vec<(Vec<u8>, *const Row)> = Vec::new();
            for tree in table.trees.iter() {
                let mut n = 0;
                tree.scan(
                    lo,
                    hi,
                    reverse,
                    &Owner,
                    |_, _| {},
                    |k, v| {
                        rows.push((k.to_vec(), v));
                        n += 1;
                        n < limit
                    },
                );
            }
            rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            if reverse {
                rows.reverse();
            }
            for (k, v) in rows.into_iter().take(limit) {
                // SAFETY: every partition is locked by this transaction.
                if !f(&k, unsafe { row_value(v) }) {
                    break;
                }
            }
            return Ok(());
        }
        // A scan reads one partition: the one its low bound is in. The
        // range must not leave it (an exclusive high bound may sit at the
        // next partition key's first key).
        let (Bound::Included(l) | Bound::Excluded(l)) = lo else {
            return Err(Error::Undeclared(format!(
                "table {:?}: a scan needs a low bound inside one partition",
                table.name
            ))
            .into());
        };
        let (_, p) = self.map(t, l, false)?;
        let in_one = match (table.rule, hi) {
            (PartitionRule::Shared, _) => true,
            (PartitionRule::Hash, _) => false,
            (r, Bound::Included(h)) => r.field_value(h) == r.field_value(l),
            (r @ PartitionRule::Field { shift, bits }, Bound::Excluded(h)) => {
                let (vl, vh) = (r.field_value(l), r.field_value(h));
                let rest_zero = {
                    let mut b = [0u8; 8];
                    let n = h.len().min(8);
                    b[..n].copy_from_slice(&h[..n]);
                    let used = (shift + bits).min(64);
                    let low = if used >= 64 {
                        0
                    } else {
                        u64::from_be_bytes(b) << used
                    };
                    low == 0 && h[n..].iter().all(|&x| x == 0)
                };
                vl == vh || (vh == vl.map(|v| v + 1) && rest_zero)
            }
            (_, Bound::Unbounded) => false,
        };
        if !in_one {
            return Err(Error::Undeclared(format!(
                "table {:?}: a scan must stay within one partition",
                table.name
            ))
            .into());
        }
        let mut n = 0;
        let tree = &table.trees[p as usize];
        tree.scan(
            lo,
            hi,
            reverse,
            &Owner,
            |_, _| {},
            |k, v| {
                n += 1;
                // SAFETY: locked (checked by `map`).
                f(k, unsafe { row_value(v) }) && n < limit
            },
        );
        Ok(())
    }
}
