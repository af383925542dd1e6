//! Garbage: the oldest active read time, and cutting chains below it.

use super::*;

/// How often a runner rescans the slots for the oldest read time.
pub(super) const SCAN_EVERY: u32 = 16;

/// The oldest read time of any active transaction (or the clock, if none
/// is active): every transaction active now or later reads at or above it.
pub(super) fn oldest_reader(db: &Shared) -> u64 {
    // Read the clock first: a transaction that publishes its bound after
    // our scan read the clock after us (SeqCst), so its bound is at least
    // this.
    let now = db.clock.load(Ordering::SeqCst);
    db.slots[..db.high.load(Ordering::SeqCst)]
        .iter()
        .map(|s| s.begin.load(Ordering::SeqCst))
        .fold(now, u64::min)
}

/// Take out of the tree the keys of the deletions in `q` that committed
/// before `oldest` (every active transaction, and every later one, sees
/// them): a deleted key otherwise keeps its chain, its tombstone and its
/// tree entry for good, and a delete-heavy run grows without bound. A
/// deletion still on top of its chain gets the end `DEAD` by the same
/// compare-and-swap a writer uses to claim it, so either a writer
/// supersedes it (and the key stays) or no writer ever can; then the key
/// leaves the tree and the chain is retired whole. A reader or writer
/// still on the chain sees the deletion (key absent); a writer's claim
/// fails and its transaction retries on a fresh chain; validation fails
/// a read of a `DEAD` deletion (see [`DEAD`]).
pub(super) fn unhook_due(db: &Shared, q: &mut VecDeque<Unhook>, oldest: u64) {
    let g = crossbeam_epoch::pin();
    let mut garbage = Vec::new();
    while q.front().is_some_and(|u| u.ts < oldest) {
        let u = q.pop_front().expect("front");
        let Ok(Table { tree, .. }) = db.tables.get(u.table) else {
            continue;
        };
        // Dereference the chain only if the tree still maps the key to it:
        // then it is reachable, hence alive, while we are pinned.
        if tree.find(&u.key, &Pin(&g)) != Some(u.chain as *const Chain) {
            continue;
        }
        // SAFETY: reachable from the tree while pinned (above).
        let chain = unsafe { &*(u.chain as *const Chain) };
        // Acquire: as every load of a chain link (module doc): the version's
        // fields are seen.
        let head = chain.head.load(Ordering::Acquire);
        if head as usize != u.version {
            // Written again since.
            continue;
        }
        // SAFETY: reachable from the chain while pinned.
        let tomb = unsafe { &*head };
        // Still the deletion, committed: the same transaction may have
        // written the key again after deleting it (its one version then
        // holds a value), and a version's begin is its commit timestamp.
        // SAFETY: committed, so its value no longer changes.
        // Acquire: as every load of a version's field (module doc).
        if unsafe { tomb.value() }.is_some()
            || tomb.begin.load(Ordering::Acquire) != u.ts
            // The same claim as a writer's (`write`), ordered against it.
            || !tomb.claim_end(DEAD)
        {
            continue;
        }
        let removed = tree.remove_if(&u.key, u.chain as *const Chain, &mut Pin(&g));
        // A real check: retiring a chain the tree still maps would be a
        // use after free.
        assert!(removed.is_some(), "only the DEAD claimant removes");
        let mut v = head;
        while !v.is_null() {
            garbage.push(v as usize);
            // SAFETY: the chain is ours alone now (no writer can claim
            // it); its versions are alive while we are pinned.
            // Acquire: as every load of a chain link (module doc).
            v = unsafe { &*v }.prev.load(Ordering::Acquire);
        }
        // SAFETY: out of the tree, so unreachable for threads that pin
        // from now on; retired once (only the DEAD claimant gets here).
        unsafe { retire_box(&g, u.chain as *mut Chain) };
    }
    // SAFETY: as for the chains.
    unsafe { retire_versions(&g, garbage) };
}

/// Cut `chain`'s versions below the first one, from `from` down, that
/// began before `oldest` (every active transaction sees it or a newer
/// one), and add them to `garbage` (to be retired together).
///
/// # Safety
/// The caller owns the chain's newest version (it is the uncommitted
/// writer on top), so no one else cuts this chain; it is pinned.
pub(super) unsafe fn truncate(from: *mut Version, oldest: u64, garbage: &mut Vec<usize>) {
    let mut v = from;
    while !v.is_null() {
        // SAFETY: reachable from the chain while pinned.
        let ver = unsafe { &*v };
        // Acquire: as every load of a version's field (module doc).
        let b = ver.begin.load(Ordering::Acquire);
        if b & REF == 0 && b < oldest {
            // AcqRel: Acquire to walk the versions cut off (as every link
            // load); Release as every link store (module doc).
            let mut cut = ver.prev.swap(std::ptr::null_mut(), Ordering::AcqRel);
            while !cut.is_null() {
                // Tagged with its size while its header is in cache: the
                // free, a grace period later, need not read it again.
                // SAFETY: alive (pinned).
                garbage.push(unsafe { Version::tagged(cut) });
                // SAFETY: unreachable now (cut off above, by the one
                // thread that may cut this chain); listed once each.
                // Acquire: as every load of a chain link (module doc).
                cut = unsafe { (&*cut).prev.load(Ordering::Acquire) };
            }
            return;
        }
        // Acquire: as every load of a chain link (module doc).
        v = ver.prev.load(Ordering::Acquire);
    }
}
