//! Cursor inserts racing splits, unlinks racing inserts, lookups and
//! scans, and lookups racing a prefix change, model-checked on 4-wide
//! nodes (see `LEAF_WIDTH`). Both sides run in spawned threads (the main
//! thread only sets up and joins), so loom explores either finishing
//! first. With the preemption bounds each model runs in seconds, and the
//! cursor models still fail a cursor that ignores its leaf's right
//! sibling (the leaf test) or its parent's version (the parent test).

use super::shape::check;
use super::*;
use loom::sync::Arc;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// A tree holding keys `10·i` for `i` in `1..=n` (appended in order).
fn tree_of(n: u64) -> Arc<RawTree> {
    let t = Arc::new(RawTree::new());
    // SAFETY: only LeakGuards on this tree.
    let mut g = unsafe { LeakGuard::new() };
    for i in 1..=n {
        assert!(matches!(
            t.insert(&key(10 * i), i, &mut g),
            Insert::Inserted(_)
        ));
    }
    t
}

/// A thread inserting `keys` in order, through one cursor if `cursor`,
/// else with plain inserts; each must be new.
fn inserter(t: &Arc<RawTree>, keys: Vec<u64>, cursor: bool) -> loom::thread::JoinHandle<()> {
    let t = t.clone();
    loom::thread::spawn(move || {
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let mut c = t.cursor();
        for k in keys {
            let r = match cursor {
                true => c.insert(&key(k), k, &mut g),
                false => t.insert(&key(k), k, &mut g),
            };
            assert!(matches!(r, Insert::Inserted(_)));
        }
    })
}

/// The model checker with the bounds the unlink models run under.
fn bounded() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.max_branches = 100_000;
    b
}

/// Remove the keys `10·i` for `i` in `range` (set up, before threads).
fn remove_all(t: &RawTree, range: std::ops::RangeInclusive<u64>) {
    // SAFETY: only LeakGuards on this tree.
    let mut g = unsafe { LeakGuard::new() };
    for i in range {
        assert_eq!(t.remove(&key(10 * i), &mut g).map(|x| x.0), Some(i));
    }
}

/// What races an unlink in [`unlink_race`].
#[derive(Clone, Copy)]
enum Rival {
    /// A thread inserts `10·last + 5` into the leaf's range: into the
    /// leaf (which then stays), or after the unlink into its left
    /// neighbour.
    Insert,
    /// The main thread looks up a key on each side of the leaf.
    Lookups,
    /// The main thread scans from the left neighbour's key to the
    /// right one's.
    Scan,
}

/// One thread removes the last key of a leaf (`10·last`), which
/// unlinks it, against `rival`; afterwards the tree is whole and holds
/// what it must. `left` and `right` are keys of the leaves on each
/// side, `total` the keys before the race. Both sides run in spawned
/// threads (loom explores little of what the main thread does), one
/// rival at a time: two together took over ten minutes.
fn unlink_race(t: Arc<RawTree>, last: u64, (left, right): (u64, u64), total: usize, rival: Rival) {
    let remover = {
        let t = t.clone();
        loom::thread::spawn(move || {
            // SAFETY: only LeakGuards on this tree.
            let mut g = unsafe { LeakGuard::new() };
            assert_eq!(t.remove(&key(10 * last), &mut g).map(|x| x.0), Some(last));
        })
    };
    // SAFETY: only LeakGuards on this tree.
    let g = unsafe { LeakGuard::new() };
    let mut total = total - 1;
    match rival {
        Rival::Insert => {
            inserter(&t, vec![10 * last + 5], false).join().unwrap();
            total += 1;
        }
        Rival::Lookups => {
            let t = t.clone();
            loom::thread::spawn(move || {
                // SAFETY: only LeakGuards on this tree.
                let g = unsafe { LeakGuard::new() };
                assert_eq!(t.get(&key(10 * left), &g).value, Some(left));
                assert_eq!(t.get(&key(10 * right), &g).value, Some(right));
            })
            .join()
            .unwrap();
        }
        Rival::Scan => {
            let t = t.clone();
            loom::thread::spawn(move || {
                // SAFETY: only LeakGuards on this tree.
                let g = unsafe { LeakGuard::new() };
                let mut seen = Vec::new();
                t.scan(
                    Bound::Included(&key(10 * left)[..]),
                    Bound::Included(&key(10 * right)[..]),
                    false,
                    &g,
                    |_, _| {},
                    |k, _| {
                        seen.push(u64::from_be_bytes(k.try_into().unwrap()));
                        true
                    },
                );
                assert_eq!(seen.first(), Some(&(10 * left)));
                assert_eq!(seen.last(), Some(&(10 * right)));
                assert!(seen.windows(2).all(|w| w[0] < w[1]));
            })
            .join()
            .unwrap();
        }
    }
    remover.join().unwrap();
    let s = check(&t);
    assert_eq!(s.keys.len(), total);
    assert_eq!(t.get(&key(10 * last), &g).value, None);
    if let Rival::Insert = rival {
        assert_eq!(t.get(&key(10 * last + 5), &g).value, Some(10 * last + 5));
    }
}

/// Leaves of keys 1..=w, w+1..=2w and 2w+1 under the root (w =
/// LEAF_WIDTH); the middle one keeps only w+1, and its unlink drops it
/// from the root.
fn middle_child_race(rival: Rival) {
    bounded().check(move || {
        let w = LEAF_WIDTH as u64;
        let t = tree_of(2 * w + 1);
        remove_all(&t, w + 2..=2 * w);
        unlink_race(t, w + 1, (w, 2 * w + 1), w as usize + 2, rival);
    });
}

/// An unlink of a middle child races an insert into its range.
#[test]
fn unlink_of_a_middle_child_races_an_insert() {
    middle_child_race(Rival::Insert);
}

/// An unlink of a middle child races lookups on both sides.
#[test]
fn unlink_of_a_middle_child_races_lookups() {
    middle_child_race(Rival::Lookups);
}

/// An unlink of a middle child races a scan across it.
#[test]
fn unlink_of_a_middle_child_races_a_scan() {
    middle_child_race(Rival::Scan);
}

/// An unlink of a first child against `rival`: the unlink also
/// replaces the root's separator (the parent's lower bound) with the
/// fence of the parent's next child.
fn first_child_race(rival: Rival) {
    bounded().check(move || {
        // INNER_WIDTH + 2 leaves: the root splits, and the right
        // inner node holds the last two (at width 12, keys 145..=156
        // and 157..=158).
        let w = LEAF_WIDTH as u64;
        let n = (INNER_WIDTH as u64 + 1) * w + 2;
        let t = tree_of(n);
        let first = (INNER_WIDTH as u64) * w + 1;
        remove_all(&t, first + 1..=first + w - 1);
        // SAFETY: set up, no thread running yet.
        let (root, right) = unsafe {
            let root = &*(t.root.load(R) as *const Inner);
            (root, &*(root.children[1].load(R) as *const Inner))
        };
        assert!(!right.header.is_leaf);
        assert_eq!(
            (root.header.count.load(R), right.header.count.load(R)),
            (1, 1)
        );
        // SAFETY: as above.
        let l = unsafe { &*(right.children[0].load(R) as *const Leaf) };
        assert_eq!(l.header.count.load(R), 1);
        assert_eq!(l.slices[0].load(R), 10 * first);
        let total = n as usize - (w as usize - 1);
        unlink_race(t, first, (first - 1, n), total, rival);
    });
}

/// An unlink of a first child races an insert into its range.
#[test]
fn unlink_of_a_first_child_races_an_insert() {
    first_child_race(Rival::Insert);
}

/// An unlink of a first child races lookups on both sides.
#[test]
fn unlink_of_a_first_child_races_lookups() {
    first_child_race(Rival::Lookups);
}

/// An unlink of a first child races a scan across it.
#[test]
fn unlink_of_a_first_child_races_a_scan() {
    first_child_race(Rival::Scan);
}

/// A cursor splits its leaf under the parent it remembers, while
/// another thread splits a sibling leaf into that parent, filling it,
/// and then splits the parent, moving the cursor's leaf to a new inner
/// node. The cursor must see the parent's version change and descend.
#[test]
fn cursor_split_races_a_split_of_its_parent() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.max_branches = 100_000;
    b.check(|| {
        // Appends: a root with 11 separators over 11 full leaves and a
        // last one of 11 keys.
        let n = (INNER_WIDTH as u64 - 1) * LEAF_WIDTH as u64 + LEAF_WIDTH as u64 - 1;
        let t = tree_of(n);
        // Fills the last leaf (a descent: the cursor learns the root as
        // its parent), then splits it.
        let loader = inserter(&t, vec![10 * (n + 1), 10 * (n + 2)], true);
        // Splits a full leaf (the root fills up), then splits the root
        // on the way down.
        let other = inserter(&t, vec![15, 25], false);
        loader.join().unwrap();
        other.join().unwrap();
        let s = check(&t);
        assert_eq!(s.keys.len(), n as usize + 4);
    });
}

/// A reader looks up `key` in a leaf whose prefix an insert shrinks
/// (re-encoding every slice under the lock): it must find a key that
/// is there and not one that is not, whatever mix of old and new
/// slices it reads before validating. One lookup per model: a node
/// search reads every slot (the unused ones too), and two lookups in
/// one model multiplied their interleavings (18 minutes of CI).
fn prefix_shrink_race(key: u64, want: Option<u64>) {
    fn long(i: u64) -> Vec<u8> {
        format!("user{i:020}").into_bytes()
    }
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.max_branches = 100_000;
    b.check(move || {
        let t = Arc::new(RawTree::new());
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        // A full leaf of 24-byte keys and one more: the split gives
        // both halves a prefix of two words.
        for i in 1..=LEAF_WIDTH as u64 + 1 {
            assert!(matches!(
                t.insert(&long(10 * i), i, &mut g),
                Insert::Inserted(_)
            ));
        }
        let writer = {
            let t = t.clone();
            loom::thread::spawn(move || {
                // SAFETY: only LeakGuards on this tree.
                let mut g = unsafe { LeakGuard::new() };
                // Shares no whole word with the left leaf's prefix.
                assert!(matches!(t.insert(b"user", 0, &mut g), Insert::Inserted(_)));
            })
        };
        // SAFETY: only LeakGuards on this tree.
        let g2 = unsafe { LeakGuard::new() };
        assert_eq!(t.get(&long(key), &g2).value, want);
        writer.join().unwrap();
        let s = check(&t);
        assert_eq!(s.keys.len(), LEAF_WIDTH + 2);
    });
}

#[test]
fn lookup_of_a_present_key_races_a_prefix_shrink() {
    prefix_shrink_race(30, Some(3));
}

#[test]
fn lookup_of_an_absent_key_races_a_prefix_shrink() {
    prefix_shrink_race(35, None);
}

/// A cursor inserts into the leaf it remembers while another thread
/// splits that leaf: the cursor must notice (version or fence) and
/// put its key in the right half.
#[test]
fn cursor_insert_races_a_split_of_its_leaf() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.max_branches = 100_000;
    b.check(|| {
        // One leaf, one slot short of full.
        let n = LEAF_WIDTH as u64 - 1;
        let t = tree_of(n);
        let loader = inserter(&t, vec![10 * n + 1, 10 * n + 2], true);
        // Splits the leaf once it is full.
        let other = inserter(&t, vec![1], false);
        loader.join().unwrap();
        other.join().unwrap();
        let s = check(&t);
        assert_eq!(s.keys.len(), n as usize + 3);
    });
}
