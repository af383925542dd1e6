//! Deuteronomy §2.1–2.2: timestamp-order MVCC on one record item — its
//! last read timestamp and its version list, newest first.
//!
//! A transaction's timestamp is also its id. A read at timestamp `t` sees
//! the newest version created at or before `t` that did not abort; if
//! that version's creator is still running, the reader waits for its
//! outcome ([`Seen::Pending`]: waits only go from younger to older
//! transactions, so they cannot form a cycle). A read of the record's
//! youngest version raises the record's read timestamp to `t` (§2.2: only
//! the youngest needs it, and only when `t` is later). **Deviation:** so
//! does a read below a younger version still running — §2.2 says older
//! versions are protected by the younger ones, but one that aborts
//! protects nothing, and an older writer could then slip in under the
//! read. A write at `t`
//! prepends a version, unless the youngest is another transaction's
//! uncommitted version, or was created or read by a younger transaction:
//! then the writer aborts (§2.1: timestamp order cannot be kept). There
//! is no validation at commit.
//!
//! The race between a reader raising the read timestamp and a writer
//! prepending is settled on the read timestamp itself: the reader raises
//! it with a read-modify-write (if it is lower), then looks at the head
//! again; the writer prepends, then reads the read timestamp with a
//! read-modify-write (adding nothing). The two RMWs are ordered on that
//! word: if the writer's comes first, the reader's acquires it and so
//! sees the writer's version at the head (it waits for it, and reads it if
//! it commits); if the reader's comes first, the writer sees its
//! timestamp and aborts. (Plain SeqCst loads, Dekker-style, would need a
//! store-load order that loom cannot model; RMWs need only
//! acquire/release.) A loom model checks both orders. A version's fields
//! are written before the CAS that prepends it (AcqRel) and read after
//! an Acquire load of the head; its state moves with Release stores
//! (committed, aborted) that readers load with Acquire.
//!
//! Eviction (§6.5's hard watermark: cold record entries leave the TC) is
//! settled the same way. A record may go only when it lists no version
//! (every one is at the data component) and its read timestamp is below
//! the oldest active transaction: then no transaction, running or to
//! come, is old enough to be refused by it, and a fresh record in its
//! place (read timestamp 0, reads going to the DC) behaves exactly alike.
//! The evictor swaps the empty head for the [`DEAD`] mark by CAS (a
//! writer's prepend then fails and it finds the mark), then reads the
//! read timestamp with an RMW: a reader whose raise came first is seen
//! (the evictor puts the empty head back and the record stays); one whose
//! raise came after sees the mark when it checks the head, and reads
//! again through a fresh record. Only its evictor unmarks a marked head,
//! at once; a record that stays marked is removed from the table by its
//! evictor. A loom model checks both races.

use granary_api::AbortReason;

use crate::sync::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// The head of an evicted record (never dereferenced).
const DEAD: *mut Version = std::ptr::dangling_mut();

/// Version states.
pub(crate) const ACTIVE: u8 = 0;
pub(crate) const COMMITTED: u8 = 1;
pub(crate) const ABORTED: u8 = 2;

/// A version item (§2.2): its creator, where its payload is, and whether
/// the creator aborted.
pub(crate) struct Version {
    /// The creating transaction's timestamp (its id).
    pub creator: u64,
    pub state: AtomicU8,
    /// The payload's offset in the version manager (the creator may
    /// replace it while it runs: a second write of the same key).
    pub payload: AtomicU64,
    /// Where the creator's commit record is (set before the version is
    /// marked committed): a reader is durable once that is (§2.3.1).
    pub commit: AtomicU64,
    next: AtomicPtr<Version>,
}

/// A record item (§2.2), less its key and hash (the table's).
pub(crate) struct Record {
    /// The timestamp of the youngest transaction that read the youngest
    /// version.
    read_ts: AtomicU64,
    head: AtomicPtr<Version>,
    /// Held by the one thread trimming the version list.
    trimming: AtomicBool,
}

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen<'a> {
    /// Nothing visible at the reader's timestamp.
    Nothing,
    /// This committed version (or the reader's own).
    Version(&'a Version),
    /// The visible version's creator (this timestamp) has not finished:
    /// wait for it, then read again.
    Pending(u64),
    /// The record was evicted: read its key again through a fresh one.
    Gone,
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Version(creator {})", self.creator)
    }
}

impl PartialEq for Version {
    fn eq(&self, o: &Version) -> bool {
        std::ptr::eq(self, o)
    }
}

impl Eq for Version {}

impl Default for Record {
    fn default() -> Record {
        Record::new()
    }
}

impl Record {
    /// A record with no version.
    pub fn new() -> Record {
        Record {
            read_ts: AtomicU64::new(0),
            head: AtomicPtr::default(),
            trimming: AtomicBool::new(false),
        }
    }

    /// The newest version that did not abort, at or below `v`.
    fn live(&self, mut v: *mut Version) -> Option<&Version> {
        // SAFETY: versions stay allocated while the record lives (garbage
        // collection, later, unlinks them under the epoch).
        while let Some(ver) = unsafe { v.as_ref() } {
            // Acquire: as every state load (module doc): pairs with the
            // creator's Release of its outcome.
            if ver.state.load(Ordering::Acquire) != ABORTED {
                return Some(ver);
            }
            // Acquire: a list link: the older version's fields, written before
            // it was prepended, are seen.
            v = ver.next.load(Ordering::Acquire);
        }
        None
    }

    /// Read at timestamp `ts` (§2.1).
    pub fn read(&self, ts: u64) -> Seen<'_> {
        loop {
            // Acquire: pairs with the prepending CAS (module doc): the
            // versions' fields are seen.
            let head = self.head.load(Ordering::Acquire);
            if head == DEAD {
                return Seen::Gone;
            }
            let youngest = self.live(head);
            // Whether the versions younger than the one we read hold off
            // older writers for us: only committed ones do (§2.2: "older
            // versions are protected by the younger versions"), as one
            // still running may abort and leave ours the youngest.
            let mut covered = youngest.is_some();
            let mut v = youngest;
            while let Some(ver) = v {
                if ver.creator <= ts {
                    break;
                }
                // Acquire: as every state load (module doc): the outcome.
                covered &= ver.state.load(Ordering::Acquire) == COMMITTED;
                // Acquire: a list link, as in `live`.
                v = self.live(ver.next.load(Ordering::Acquire));
            }
            let is_youngest = match (v, youngest) {
                (Some(a), Some(b)) => std::ptr::eq(a, b),
                _ => false,
            };
            if let Some(ver) = v {
                // One load: a version seen running may abort since `live`
                // passed it.
                // Acquire: as every state load (module doc): the outcome.
                match ver.state.load(Ordering::Acquire) {
                    ABORTED => continue,
                    ACTIVE if ver.creator != ts => return Seen::Pending(ver.creator),
                    _ => {}
                }
            }
            if (is_youngest || !covered) && !self.raise(ts, head) {
                continue;
            }
            return match v {
                Some(ver) => Seen::Version(ver),
                None => Seen::Nothing,
            };
        }
    }

    /// Hold off writers older than `ts`, as if a transaction at `ts` had
    /// read the record (a new record made after a scan at `ts` passed
    /// where it goes).
    pub fn hold_reads_below(&self, ts: u64) {
        if ts > 0 {
            // AcqRel: an RMW on the read timestamp, as a reader's raise (module
            // doc), ordered with the writers' RMWs on it.
            self.read_ts.fetch_max(ts, Ordering::AcqRel);
        }
    }

    /// Raise the read timestamp to `ts` (if lower), then check that the
    /// head is still `head`: false if a writer got in (read again).
    fn raise(&self, ts: u64, head: *mut Version) -> bool {
        // Acquire: a value seen here came through the RMWs on the read
        // timestamp (a release sequence), so a writer's prepend before them is
        // seen at the head below.
        if self.read_ts.load(Ordering::Acquire) < ts {
            // AcqRel: the reader's RMW (module doc): it acquires a writer's
            // earlier RMW (and its prepend) and releases our raise to a later
            // one.
            self.read_ts.fetch_max(ts, Ordering::AcqRel);
        }
        // Acquire: the head again, after the RMW: a writer that got in first is
        // seen.
        self.head.load(Ordering::Acquire) == head
    }

    /// Write a version at timestamp `ts` whose payload is at `payload`.
    /// The version it made (or its own earlier one, its payload replaced),
    /// which it must mark committed or aborted when it ends; or why it
    /// must abort.
    ///
    /// # Panics
    /// If the record was evicted (tests only: the TC uses
    /// [`Record::write_checked`]).
    pub fn write(&self, ts: u64, payload: u64) -> Result<&Version, AbortReason> {
        self.write_checked(ts, payload, true)
            .map(|v| v.expect("a record that is not evicted"))
    }

    /// [`Record::write`], which with `check_reads` false (the test-only
    /// mutant, NOT serializable) ignores the read timestamp. `Ok(None)`:
    /// the record was evicted; write through a fresh one.
    pub fn write_checked(
        &self,
        ts: u64,
        payload: u64,
        check_reads: bool,
    ) -> Result<Option<&Version>, AbortReason> {
        loop {
            // Acquire: pairs with the prepending CAS (module doc): the
            // versions' fields are seen.
            let head = self.head.load(Ordering::Acquire);
            if head == DEAD {
                return Ok(None);
            }
            if let Some(y) = self.live(head) {
                if y.creator == ts {
                    // Release: a second write's payload: a reader that loads it
                    // with Acquire sees the bytes it locates.
                    y.payload.store(payload, Ordering::Release);
                    return Ok(Some(y));
                }
                // Acquire: as every state load (module doc): the outcome.
                match y.state.load(Ordering::Acquire) {
                    // Aborted since `live` passed it: look again.
                    ABORTED => continue,
                    // Another's uncommitted version.
                    ACTIVE => return Err(AbortReason::WriteConflict),
                    // A younger one.
                    _ if y.creator > ts => return Err(AbortReason::WriteConflict),
                    _ => {}
                }
            }
            let v = Box::into_raw(Box::new(Version {
                creator: ts,
                state: AtomicU8::new(ACTIVE),
                payload: AtomicU64::new(payload),
                commit: AtomicU64::new(0),
                next: AtomicPtr::new(head),
            }));
            // AcqRel: the prepend (module doc): Release publishes the new
            // version's fields; Acquire sees the head another writer prepended.
            if self
                .head
                .compare_exchange(head, v, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                // SAFETY: never published.
                drop(unsafe { Box::from_raw(v) });
                continue;
            }
            // SAFETY: published; versions live as long as the record.
            let v = unsafe { &*v };
            // AcqRel: the writer's RMW (module doc): it releases our prepend to
            // a later reader's raise and acquires an earlier one.
            // An RMW: it reads the latest read timestamp (see above).
            if self.read_ts.fetch_add(0, Ordering::AcqRel) > ts && check_reads {
                // A younger transaction read what we would supersede.
                // Release: the outcome, as every state store (module doc):
                // readers that see ABORTED skip the version.
                v.state.store(ABORTED, Ordering::Release);
                return Err(AbortReason::ReadValidation);
            }
            return Ok(Some(v));
        }
    }

    /// Evict the record if it lists no version and no transaction at or
    /// after `oat` (the oldest active one) has read it: true if it is now
    /// marked [`DEAD`], for good (the caller removes it from the table).
    /// See the module's notes.
    pub fn evict(&self, oat: u64) -> bool {
        // Acquire (both): a first look, as in `read`; the CAS and the RMW below
        // settle the race.
        if !self.head.load(Ordering::Acquire).is_null()
            || self.read_ts.load(Ordering::Acquire) >= oat
        {
            return false;
        }
        // AcqRel: the eviction mark is a head CAS, as a prepend (module doc),
        // so the two are ordered; Acquire on failure sees the writer's version.
        if self
            .head
            .compare_exchange(
                std::ptr::null_mut(),
                DEAD,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return false; // A writer got in.
        }
        // An RMW: it reads the latest read timestamp (see above).
        // AcqRel: the evictor's RMW (module doc): a reader's raise before it is
        // seen; a reader after it sees the mark.
        if self.read_ts.fetch_add(0, Ordering::AcqRel) >= oat {
            // A reader got in first: it stays. Only we change a DEAD head.
            // Release: as every head store: readers that see the empty head
            // again see the record as it was.
            self.head.store(std::ptr::null_mut(), Ordering::Release);
            return false;
        }
        true
    }
}

impl Record {
    /// Garbage collection (§2.4, §4.4): find the newest committed
    /// version that `applied` accepts (the data component has it), and
    /// unlink every version below it — and, unless `keep_newest`, that
    /// version too — pushing them onto `out` for the caller to free after
    /// a grace period. Returns how many it unlinked.
    ///
    /// With `keep_newest` this is §2.4's first case (versions older than
    /// one every running transaction sees are never needed again; §6.5's
    /// soft watermark); without, its second (a version the DC holds may
    /// go; readers then read the DC; §6.5's hard watermark). Both are safe
    /// when the TC Proxy applies a transaction only once every transaction
    /// older than it has finished (see `tc`): then every applied version
    /// is older than every running transaction, so each reader sees the
    /// newest applied version or a newer one still listed, and a reader
    /// that finds nothing at its timestamp reads the data component, which
    /// holds exactly the newest applied version.
    ///
    /// One thread trims a record at a time (another skips it): unlinking
    /// only ever cuts the list's tail, by a CAS on the head (racing a
    /// prepend, which then retries) or a store to a `next` that no one
    /// else writes. A record with nothing to cut costs a walk, no write.
    pub fn trim(
        &self,
        applied: impl Fn(&Version) -> bool,
        keep_newest: bool,
        out: &mut Vec<*mut Version>,
    ) -> usize {
        let cut_at = |ver: &Version| {
            // Acquire (both): the outcome and the list link, as every state and
            // link load (module doc).
            ver.state.load(Ordering::Acquire) == COMMITTED
                && applied(ver)
                && (!keep_newest || !ver.next.load(Ordering::Acquire).is_null())
        };
        // A look first, without the flag: most records have nothing to cut.
        // Acquire: pairs with the prepending CAS (module doc).
        let mut v = self.head.load(Ordering::Acquire);
        if v == DEAD {
            return 0;
        }
        // SAFETY: versions stay allocated while the caller is pinned.
        while let Some(ver) = unsafe { v.as_ref() } {
            if cut_at(ver) {
                break;
            }
            // Acquire: a list link: the older version's fields are seen.
            v = ver.next.load(Ordering::Acquire);
        }
        if v.is_null()
            || self
                .trimming
                // Acquire: the flag is a lock: we see the list as the last
                // trimmer left it (its Release below).
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return 0;
        }
        let mut n = 0;
        let mut prev: Option<&Version> = None;
        // Acquire: pairs with the prepending CAS (module doc).
        let mut v = self.head.load(Ordering::Acquire);
        if v == DEAD {
            // Emptied by another trimmer and evicted since our look.
            v = std::ptr::null_mut();
        }
        // SAFETY: as above.
        while let Some(ver) = unsafe { v.as_ref() } {
            if cut_at(ver) {
                let (link, first) = match keep_newest {
                    // Acquire: a list link: the older version's fields are seen.
                    true => (Some(ver), ver.next.load(Ordering::Acquire)),
                    false => (prev, v),
                };
                let cut = match link {
                    // AcqRel: a cut at the head is a head CAS that races a
                    // prepend (which then retries): Release as every head
                    // store, Acquire as every head load.
                    None => self
                        .head
                        .compare_exchange(
                            first,
                            std::ptr::null_mut(),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok(),
                    Some(p) => {
                        // Release: as every link store: a reader that sees the
                        // cut link stops there.
                        p.next.store(std::ptr::null_mut(), Ordering::Release);
                        true
                    }
                };
                if cut {
                    let mut c = first;
                    while !c.is_null() {
                        out.push(c);
                        n += 1;
                        // Acquire: a list link: the older version's fields are seen.
                        // SAFETY: unlinked by us alone; not yet freed.
                        c = unsafe { &*c }.next.load(Ordering::Acquire);
                    }
                }
                break;
            }
            prev = Some(ver);
            // Acquire: a list link: the older version's fields are seen.
            v = ver.next.load(Ordering::Acquire);
        }
        // Release: unlocks: the next trimmer, which takes the flag with
        // Acquire, sees our cuts.
        self.trimming.store(false, Ordering::Release);
        n
    }

    /// How many versions it lists (tests, statistics).
    pub fn len(&self) -> usize {
        let mut n = 0;
        // Acquire: pairs with the prepending CAS (module doc).
        let mut v = self.head.load(Ordering::Acquire);
        if v == DEAD {
            return 0;
        }
        // SAFETY: as in `trim`.
        while let Some(ver) = unsafe { v.as_ref() } {
            n += 1;
            // Acquire: a list link: the older version's fields are seen.
            v = ver.next.load(Ordering::Acquire);
        }
        n
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let mut v = self.head.load(Ordering::Relaxed);
        while !v.is_null() && v != DEAD {
            // SAFETY: the record is going: its versions are ours alone.
            let b = unsafe { Box::from_raw(v) };
            v = b.next.load(Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn commit(v: &Version) {
        v.state.store(COMMITTED, Ordering::Release);
    }

    fn payload(s: Seen<'_>) -> Option<u64> {
        match s {
            Seen::Version(v) => Some(v.payload.load(Ordering::Acquire)),
            Seen::Nothing => None,
            Seen::Pending(c) => panic!("pending on {c}"),
            Seen::Gone => panic!("evicted"),
        }
    }

    /// A record is evicted only empty and unread at or after the OAT;
    /// an evicted one sends readers and writers to a fresh record.
    #[test]
    fn only_empty_cold_records_are_evicted() {
        let r = Record::new();
        commit(r.write(10, 100).unwrap());
        assert!(!r.evict(100), "it lists a version");
        let mut out = Vec::new();
        assert_eq!(r.trim(|_| true, false, &mut out), 1);
        assert_eq!(payload(r.read(20)), None);
        assert!(!r.evict(20), "read at 20, the OAT");
        assert!(r.evict(21));
        assert_eq!(r.read(30), Seen::Gone);
        assert_eq!(r.write_checked(30, 1, true), Ok(None));
        assert_eq!(r.trim(|_| true, false, &mut out), 0);
        assert_eq!(r.len(), 0);
        assert!(!r.evict(u64::MAX), "once");
        for v in out {
            // SAFETY: unlinked by the trim above, and freed once.
            drop(unsafe { Box::from_raw(v) });
        }
    }

    #[test]
    fn reads_see_the_newest_version_at_their_timestamp() {
        let r = Record::new();
        commit(r.write(10, 100).unwrap());
        commit(r.write(20, 200).unwrap());
        assert_eq!(payload(r.read(5)), None);
        assert_eq!(payload(r.read(15)), Some(100));
        assert_eq!(payload(r.read(25)), Some(200));
    }

    #[test]
    fn a_write_below_a_younger_read_or_version_aborts() {
        let r = Record::new();
        commit(r.write(10, 100).unwrap());
        assert_eq!(payload(r.read(30)), Some(100));
        // Timestamp 20 would write a version 30 should have seen.
        assert_eq!(r.write(20, 1).unwrap_err(), AbortReason::ReadValidation);
        assert_eq!(
            payload(r.read(30)),
            Some(100),
            "the aborted version is skipped"
        );
        commit(r.write(40, 400).unwrap());
        // Older than the youngest version: too late.
        assert_eq!(r.write(35, 1).unwrap_err(), AbortReason::WriteConflict);
        // An absent record read at 50 refuses a write at 45 too.
        let e = Record::new();
        assert_eq!(payload(e.read(50)), None);
        assert_eq!(e.write(45, 1).unwrap_err(), AbortReason::ReadValidation);
    }

    /// A read below a younger version that is still running must hold
    /// off older writers itself: if that version aborts, nothing else
    /// would (the bank audits of the conformance suite found this).
    #[test]
    fn a_read_below_a_running_version_is_protected_when_it_aborts() {
        let r = Record::new();
        commit(r.write(10, 100).unwrap());
        let young = r.write(30, 300).unwrap();
        assert_eq!(payload(r.read(20)), Some(100));
        young.state.store(ABORTED, Ordering::Release);
        assert_eq!(r.write(15, 150).unwrap_err(), AbortReason::ReadValidation);
        // Below a committed younger version, no raise is needed: it holds
        // writers off by itself.
        let r = Record::new();
        commit(r.write(10, 100).unwrap());
        commit(r.write(30, 300).unwrap());
        assert_eq!(payload(r.read(20)), Some(100));
        assert_eq!(r.write(15, 150).unwrap_err(), AbortReason::WriteConflict);
    }

    #[test]
    fn trimming_cuts_the_newest_applied_version_and_everything_older() {
        let r = Record::new();
        for ts in [10, 20, 30] {
            commit(r.write(ts, ts * 10).unwrap());
        }
        let running = r.write(40, 400).unwrap();
        let mut out = Vec::new();
        assert_eq!(
            r.trim(|v| v.creator < 5, false, &mut out),
            0,
            "nothing applied"
        );
        assert_eq!(
            r.trim(|v| v.creator <= 20, true, &mut out),
            1,
            "below 20: 10"
        );
        assert_eq!(r.len(), 3);
        assert_eq!(
            r.trim(|v| v.creator <= 10, true, &mut out),
            0,
            "10 is the last"
        );
        assert_eq!(r.trim(|v| v.creator <= 20, false, &mut out), 1, "20 itself");
        assert_eq!(r.len(), 2);
        assert_eq!(payload(r.read(35)), Some(300));
        assert_eq!(r.read(15), Seen::Nothing, "read from the data component");
        // The running version is never cut, even if `applied` says so.
        assert_eq!(r.trim(|_| true, false, &mut out), 1, "only 30");
        assert_eq!(r.len(), 1);
        running.state.store(COMMITTED, Ordering::Release);
        assert_eq!(r.trim(|_| true, true, &mut out), 0, "kept: the newest");
        assert_eq!(r.trim(|_| true, false, &mut out), 1, "the head itself");
        assert_eq!(r.len(), 0);
        for v in out {
            // SAFETY: unlinked, single-threaded test.
            drop(unsafe { Box::from_raw(v) });
        }
    }

    #[test]
    fn uncommitted_versions_make_readers_wait_and_writers_abort() {
        let r = Record::new();
        commit(r.write(10, 100).unwrap());
        let v = r.write(20, 200).unwrap();
        assert_eq!(r.read(30), Seen::Pending(20));
        assert_eq!(payload(r.read(15)), Some(100), "older readers do not wait");
        assert_eq!(payload(r.read(20)), Some(200), "its own version");
        assert_eq!(r.write(30, 1).unwrap_err(), AbortReason::WriteConflict);
        // Its own second write replaces the payload.
        assert!(std::ptr::eq(r.write(20, 201).unwrap(), v));
        v.state.store(ABORTED, Ordering::Release);
        assert_eq!(payload(r.read(30)), Some(100));
        commit(r.write(30, 300).unwrap());
        assert_eq!(payload(r.read(31)), Some(300));
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A reader at 20 and a writer at 10 race on a record whose youngest
    /// version was made at 5: either the writer aborts (it saw the read),
    /// or the reader did not return the version at 5 (it saw the
    /// writer's version and waits for it) — never both the write
    /// succeeding and the read of 5 standing.
    #[test]
    fn loom_read_timestamp_and_prepend() {
        loom::model(|| {
            let r = Arc::new(Record::new());
            r.write(5, 50)
                .unwrap()
                .state
                .store(COMMITTED, Ordering::Release);
            let reader = {
                let r = Arc::clone(&r);
                loom::thread::spawn(move || match r.read(20) {
                    Seen::Version(v) => Some(v.creator),
                    Seen::Pending(c) => Some(c + 1000),
                    Seen::Nothing | Seen::Gone => None,
                })
            };
            let wrote = r.write(10, 100).is_ok();
            let saw = reader.join().unwrap();
            assert!(
                !(wrote && saw == Some(5)),
                "the write at 10 succeeded under a read at 20 of the version at 5"
            );
        });
    }

    /// A reader at 20 and an evictor (oldest active transaction 10) race
    /// on an empty record: a read that stands (it recorded its timestamp)
    /// keeps the record; an evicted record's reader is told to read again.
    #[test]
    fn loom_read_and_evict() {
        loom::model(|| {
            let r = Arc::new(Record::new());
            let reader = {
                let r = Arc::clone(&r);
                loom::thread::spawn(move || r.read(20) == Seen::Nothing)
            };
            let evicted = r.evict(10);
            let read = reader.join().unwrap();
            assert!(
                !(evicted && read),
                "a read at 20 stood on an evicted record"
            );
            assert_eq!(evicted, r.read(30) == Seen::Gone);
        });
    }

    /// A writer at 10 and an evictor race on an empty record: either the
    /// writer's version is listed and the record stays, or it is evicted
    /// and the writer is told to write again.
    #[test]
    fn loom_write_and_evict() {
        loom::model(|| {
            let r = Arc::new(Record::new());
            let writer = {
                let r = Arc::clone(&r);
                loom::thread::spawn(move || r.write_checked(10, 100, true).map(|v| v.is_some()))
            };
            let evicted = r.evict(5);
            let wrote = writer.join().unwrap();
            assert_eq!(wrote, Ok(!evicted), "exactly one of them wins");
        });
    }
}
