//! Installing a new version of a key in its record: the step a commit
//! (Silo §4.4 Phase 3), recovery (SiloR §5.2) and the Key-Value baseline
//! (Silo §5.2) share, written once here.
//!
//! The record is locked and is still its key's latest version. A value
//! that fits the record's capacity overwrites it in place, and one store
//! of the new TID word publishes it and releases the lock (§4.4). One that
//! does not fit goes into a new record that replaces the old one in the
//! tree (§4.5); the old record is unlocked as no longer latest (a reader
//! holding it sees that and looks the key up again) and retired, to be
//! freed once no reader can hold it. What differs between the three
//! callers is a parameter ([`Install`]): where a replacement comes from,
//! what happens before an overwrite, and where the old record goes.

use std::ptr::NonNull;

use granary_index::Tree;

use crate::silo::epoch::Epochs;
use crate::silo::gc::{Garbage, GcLists};
use crate::silo::pin::{ReadPin, RetirePin};
use crate::silo::record::Record;
use crate::silo::shared::Table;
use crate::silo::tid::Tid;

/// What differs between the places that install versions.
pub(crate) trait Install {
    /// A new record holding `word` and `value`, to replace `rec` (which
    /// `value` does not fit) in the tree.
    fn replacement(&mut self, rec: &Record, word: Tid, value: &[u8]) -> NonNull<Record>;

    /// Whether a value that fits may overwrite its record in place (else
    /// every install replaces the record: `Options::overwrites` off).
    #[inline]
    fn overwrites(&self) -> bool {
        true
    }

    /// Called just before `rec` is overwritten in place.
    #[inline]
    fn overwriting(&mut self, rec: &Record) {
        let _ = rec;
    }

    /// Hand over `rec`, replaced in the tree and unlocked, to be freed
    /// once no reader can hold it.
    fn retire(&mut self, rec: NonNull<Record>);
}

/// A record this thread holds the lock of, and its TID word before it was
/// locked.
pub(crate) struct Locked<'r> {
    rec: &'r Record,
    old: Tid,
}

impl<'r> Locked<'r> {
    /// `rec`, which the caller has locked; `old` is its word before.
    #[inline]
    pub fn new(rec: &'r Record, old: Tid) -> Locked<'r> {
        debug_assert!(!old.is_locked());
        Locked { rec, old }
    }

    /// Lock `rec` if it is still its key's latest version; `None` (and
    /// unlocked) if a bigger copy has replaced it: look the key up again.
    #[inline]
    pub fn latest(rec: &'r Record) -> Option<Locked<'r>> {
        let old = rec.lock();
        if !old.is_latest() {
            rec.unlock(old);
            return None;
        }
        Some(Locked { rec, old })
    }

    /// The record's TID word before it was locked.
    #[inline]
    pub fn old(&self) -> Tid {
        self.old
    }

    /// Unlock the record unchanged.
    #[inline]
    pub fn release(self) {
        self.rec.unlock(self.old);
    }

    /// Take the record out of `tree`, where it is `key`'s entry, release
    /// its lock with `word` as no longer latest (a reader holding it looks
    /// the key up again), and retire it to `gc`: an aborted insert's
    /// placeholder, or a deleted record unhooked (§4.9).
    pub fn unhook(
        self,
        tree: &Tree<*const Record>,
        key: &[u8],
        word: Tid,
        gc: &mut GcLists,
        epochs: &Epochs,
    ) {
        let rec = self.rec;
        let mut rp = RetirePin { gc, epochs };
        let removed = tree.remove_if(key, rec as *const Record, &mut rp);
        assert!(removed.is_some(), "a locked record is its key's tree entry");
        rec.unlock(word.without(Tid::LATEST));
        // Read after the removal (see `RetirePin`).
        let label = epochs.global();
        gc.tree
            .push_back((label, Garbage::record(NonNull::from(rec))));
    }

    /// Install `word` (unlocked, latest) and `value` as the record's new
    /// version, and release the lock. `place` gives the record's table
    /// and key; it is called only if the record must be replaced, so a
    /// commit looks its table up only then.
    #[inline]
    pub fn install<'p>(
        self,
        place: impl FnOnce() -> (&'p Table, &'p [u8]),
        word: Tid,
        value: &[u8],
        how: &mut impl Install,
        pin: &mut ReadPin,
    ) {
        let Locked { rec, old } = self;
        if value.len() <= rec.capacity() && how.overwrites() {
            how.overwriting(rec);
            rec.store_value(value);
            rec.unlock(word);
        } else {
            let new = how.replacement(rec, word, value);
            let (table, key) = place();
            // SAFETY: ours, not yet published.
            table.widen(unsafe { new.as_ref() }.capacity());
            let swapped = table.tree.replace(key, rec, new.as_ptr(), pin);
            assert!(swapped, "a locked record is its key's tree entry");
            rec.unlock(old.without(Tid::LATEST));
            how.retire(NonNull::from(rec));
        }
    }
}

/// An install that keeps no old version for snapshot transactions: the
/// Key-Value baseline (which is not snapshot-aware) and recovery (which
/// runs before any snapshot transaction can). Replacements come from
/// `alloc(word, value)`; a replaced record joins the worker's tree list.
pub(crate) struct Unversioned<'a, A> {
    gc: &'a mut GcLists,
    epochs: &'a Epochs,
    alloc: A,
}

impl<'a, A: FnMut(Tid, &[u8]) -> NonNull<Record>> Unversioned<'a, A> {
    /// Replaced records join `gc`'s tree list, labelled from `epochs`.
    #[inline]
    pub fn new(gc: &'a mut GcLists, epochs: &'a Epochs, alloc: A) -> Self {
        Unversioned { gc, epochs, alloc }
    }
}

impl<A: FnMut(Tid, &[u8]) -> NonNull<Record>> Install for Unversioned<'_, A> {
    #[inline]
    fn replacement(&mut self, _rec: &Record, word: Tid, value: &[u8]) -> NonNull<Record> {
        (self.alloc)(word, value)
    }

    #[inline]
    fn retire(&mut self, rec: NonNull<Record>) {
        let label = self.epochs.global();
        self.gc.tree.push_back((label, Garbage::record(rec)));
    }
}
