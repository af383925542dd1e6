//! Transaction ids and the TID word (Silo §4.2).
//!
//! ```text
//!  63                 32 31                          3   2   1   0
//! +---------------------+-----------------------------+---+---+---+
//! |        epoch        |          sequence           | A | V | L |
//! +---------------------+-----------------------------+---+---+---+
//! ```
//!
//! * `epoch` — the global epoch at the committing transaction's
//!   serialization point; TIDs of different epochs order like the epochs.
//! * `sequence` — distinguishes transactions within an epoch; chosen by the
//!   committing worker, never from a shared counter.
//! * `L` lock, `V` latest-version, `A` absent: the status bits. Keeping
//!   them in the same word lets a committer publish a new TID and release
//!   the lock with one store.
//!
//! A *TID* is the word with the status bits cleared; the *TID word* is the
//! whole thing.

/// A TID word: a transaction id plus lock / latest / absent status bits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tid(pub(crate) u64);

impl Tid {
    pub(crate) const LOCK: u64 = 1 << 0;
    pub(crate) const LATEST: u64 = 1 << 1;
    pub(crate) const ABSENT: u64 = 1 << 2;
    pub(crate) const STATUS: u64 = Self::LOCK | Self::LATEST | Self::ABSENT;
    const SEQ_SHIFT: u32 = 3;
    const SEQ_BITS: u32 = 29;
    const EPOCH_SHIFT: u32 = Self::SEQ_SHIFT + Self::SEQ_BITS;
    /// One step of the sequence field.
    pub(crate) const SEQ_ONE: u64 = 1 << Self::SEQ_SHIFT;
    /// The largest epoch a TID can hold.
    pub const MAX_EPOCH: u64 = (1 << (64 - Self::EPOCH_SHIFT)) - 1;

    /// The TID with epoch `epoch` and sequence `seq`, no status bits.
    pub const fn new(epoch: u64, seq: u64) -> Tid {
        Tid((epoch << Self::EPOCH_SHIFT) | ((seq & ((1 << Self::SEQ_BITS) - 1)) << Self::SEQ_SHIFT))
    }

    /// The raw 64-bit word.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The epoch this TID was committed in.
    pub const fn epoch(self) -> u64 {
        self.0 >> Self::EPOCH_SHIFT
    }

    /// The within-epoch sequence number.
    pub const fn sequence(self) -> u64 {
        (self.0 >> Self::SEQ_SHIFT) & ((1 << Self::SEQ_BITS) - 1)
    }

    /// The pure TID (status bits cleared).
    pub const fn id(self) -> Tid {
        Tid(self.0 & !Self::STATUS)
    }

    pub const fn is_locked(self) -> bool {
        self.0 & Self::LOCK != 0
    }

    pub const fn is_latest(self) -> bool {
        self.0 & Self::LATEST != 0
    }

    pub const fn is_absent(self) -> bool {
        self.0 & Self::ABSENT != 0
    }

    pub(crate) const fn with(self, bits: u64) -> Tid {
        Tid(self.0 | bits)
    }

    pub(crate) const fn without(self, bits: u64) -> Tid {
        Tid(self.0 & !bits)
    }
}

impl std::fmt::Debug for Tid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tid({}.{}", self.epoch(), self.sequence())?;
        for (bit, name) in [
            (Self::LOCK, " L"),
            (Self::LATEST, " V"),
            (Self::ABSENT, " A"),
        ] {
            if self.0 & bit != 0 {
                f.write_str(name)?;
            }
        }
        f.write_str(")")
    }
}

// The fields tile the word exactly, with the status bits lowest.
const _: () = assert!(Tid::STATUS == (1 << Tid::SEQ_SHIFT) - 1);
const _: () = assert!(Tid::EPOCH_SHIFT + 32 == 64);
const _: () = assert!(Tid::new(Tid::MAX_EPOCH, 0).0 >> Tid::EPOCH_SHIFT == Tid::MAX_EPOCH);
const _: () = assert!(Tid::new(1, 0).0 > Tid::new(0, (1 << Tid::SEQ_BITS) - 1).0 | Tid::STATUS);

/// The snapshot epoch of epoch `e`: `k·⌊e/k⌋` with k = 25 (Silo §4.9).
pub const SNAPSHOT_K: u64 = 25;

pub(crate) const fn snap(e: u64) -> u64 {
    e - e % SNAPSHOT_K
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let t = Tid::new(7, 12345).with(Tid::LATEST | Tid::ABSENT);
        assert_eq!(t.epoch(), 7);
        assert_eq!(t.sequence(), 12345);
        assert!(t.is_latest() && t.is_absent() && !t.is_locked());
        assert_eq!(t.id(), Tid::new(7, 12345));
        assert!(Tid::new(8, 0) > Tid::new(7, 99).with(Tid::STATUS));
        assert_eq!(format!("{t:?}"), "Tid(7.12345 V A)");
        assert_eq!(snap(49), 25);
        assert_eq!(snap(50), 50);
    }
}
