use super::shape::check;
use super::*;
use crate::sync::AtomicU64;

/// `count_below` against a plain count, for every node size up to the
/// widest, every probe on and between the slices, with runs of equal
/// slices.
#[test]
fn count_below_is_a_lower_bound() {
    fn check<const W: usize>() {
        for n in 0..=W {
            for dup in [1u64, 2, 3] {
                // A node's first `n` slots in use, the rest unused;
                // the last used slice may be UNUSED_SLICE itself.
                for top in [false, true] {
                    let mut v: Vec<u64> = (0..n as u64).map(|i| 10 + 10 * (i / dup)).collect();
                    if top && n > 0 {
                        v[n - 1] = UNUSED_SLICE;
                    }
                    let a: [AtomicU64; W] = std::array::from_fn(|i| {
                        AtomicU64::new(v.get(i).copied().unwrap_or(UNUSED_SLICE))
                    });
                    let probes = (0..20 + 10 * n as u64).chain([UNUSED_SLICE - 1, UNUSED_SLICE]);
                    for probe in probes {
                        let below = v.iter().filter(|&&x| x < probe).count();
                        let want = if v.contains(&probe) {
                            Err(below)
                        } else {
                            Ok(below)
                        };
                        assert_eq!(
                            count_below(&a, n, probe),
                            want,
                            "W={W} n={n} dup={dup} top={top} probe={probe}"
                        );
                    }
                }
            }
        }
    }
    check::<LEAF_WIDTH>();
    check::<INNER_WIDTH>();
    check::<1>();
    check::<7>();
    check::<16>();
}

/// An unlink whose leaf's subtree is the first child of `pm`, where
/// `pm` hangs two or more levels below `pj` (the ancestor that keeps
/// `pm`'s lower bound), moves `pj`'s separator up to the fence of
/// `pm`'s next child. A descent for a key of the leaf's old range that
/// passed `pj` before the unlink and goes on down through the first
/// children after it must not land in `pm`'s new first leaf, whose
/// fence lies above the key: an insert there would be unreachable.
/// The unlink runs inside the descent, right after `pj`.
#[test]
fn a_descent_below_a_moved_separator_sees_the_unlink() {
    let t = RawTree::new();
    // SAFETY: only LeakGuards on this tree.
    let mut g = unsafe { LeakGuard::new() };
    let n = 4000u64;
    for i in 1..=n {
        t.insert(&(10 * i).to_be_bytes(), i, &mut g);
    }
    // A leaf whose path ends in two or more first children below a
    // later child, with its first key as its fence.
    let pick = (1..=n).find_map(|i| {
        let k = (10 * i).to_be_bytes();
        let mut path: Vec<(usize, usize)> = Vec::new();
        let (leaf, _) = t.descend(Target::At(SearchKey::new(&k)), &g, |d, s| {
            path.truncate(d);
            path.push((s.2, s.3));
        });
        // SAFETY: nothing is freed (LeakGuard).
        let l = unsafe { &*leaf };
        let m = path.len().checked_sub(1)?;
        let j = path[..m].iter().rposition(|&(c, _)| c > 0)?;
        let fits = l.low().map(|f| f.0) == Some(10 * i)
            && path[m] == (0, path[m].1)
            && path[m].1 >= 1
            && m >= j + 2;
        fits.then(|| (i, j, l.header.count.load(R) as u64))
    });
    let (i, j, count) = pick.expect("a 4-level tree has such a leaf");
    for q in i + 1..i + count {
        assert_eq!(
            t.remove(&(10 * q).to_be_bytes(), &mut g).map(|x| x.0),
            Some(q)
        );
    }
    let unlinks = t.unlinks();
    let probe = (10 * i + 5).to_be_bytes();
    let mut fired = false;
    let (leaf, v) = t.descend(Target::At(SearchKey::new(&probe)), &g, |d, _| {
        if d == j && !fired {
            fired = true;
            // SAFETY: only LeakGuards on this tree.
            let mut g2 = unsafe { LeakGuard::new() };
            assert!(t.remove(&(10 * i).to_be_bytes(), &mut g2).is_some());
        }
    });
    assert_eq!(t.unlinks(), unlinks + 1, "the leaf was unlinked");
    // SAFETY: nothing is freed (LeakGuard).
    let covered = unsafe { covers(&*leaf, v, &SearchKey::new(&probe)) };
    assert!(
        matches!(covered, Covers::Yes),
        "the descent landed in a leaf that does not cover its key"
    );
    // And an insert of that key is found again.
    t.insert(&probe, 7, &mut g);
    assert_eq!(t.find(&probe, &g), Some(7));
    check(&t);
}

// ---- Cursor inserts (ascending runs) ----

/// The seed of a randomized test: `GRANARY_SEED` if set, else the clock.
fn seed(name: &str) -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos() as u64
        });
    eprintln!("{name}: seed {s} (replay with GRANARY_SEED={s})");
    s
}

/// The `GRANARY_STRESS` multiplier of a stress test's length (1 if
/// unset: CI's setting).
fn stress() -> u64 {
    std::env::var("GRANARY_STRESS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1)
}

/// Sets its flag when dropped: a stress test's writer stops its
/// readers however it ends (a failed check included).
struct SetOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// splitmix64: any seed (even 0) gives a good stream.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Keys mixing every stored form: 8-byte integers, short keys, and
/// long keys (stored out of line) sharing their first 8 bytes, so
/// slices tie and fences are long keys too. Sorted, distinct.
fn mixed_keys(rng: &mut u64, n: usize) -> Vec<Vec<u8>> {
    let mut set = std::collections::BTreeSet::new();
    while set.len() < n {
        let r = next(rng);
        let k = match r % 4 {
            0 => (r >> 8).to_be_bytes().to_vec(),
            1 => (r >> 40).to_be_bytes()[..(r >> 2) as usize % 9].to_vec(),
            _ => {
                // A few 8-byte prefixes, tails of 0..24 bytes.
                let mut k = format!("prefix-{}", (r >> 8) % 3).into_bytes();
                let tail = (r >> 16) as usize % 24;
                let mut x = next(rng);
                for _ in 0..tail {
                    k.push(b"ab\0z"[(x & 3) as usize]);
                    x >>= 2;
                }
                k
            }
        };
        set.insert(k);
    }
    set.into_iter().collect()
}

fn inserted(r: Insert) -> bool {
    matches!(r, Insert::Inserted(_))
}

#[test]
fn cursor_ascending_run_fills_leaves() {
    let t = RawTree::new();
    // SAFETY: only LeakGuards on this tree.
    let mut g = unsafe { LeakGuard::new() };
    let n = 20_000u64;
    let mut c = t.cursor();
    for i in 0..n {
        assert!(inserted(c.insert(&(3 * i).to_be_bytes(), i, &mut g)));
    }
    let s = check(&t);
    let want: Vec<_> = (0..n)
        .map(|i| ((3 * i).to_be_bytes().to_vec(), i))
        .collect();
    assert!(s.keys == want);
    // Appends leave every leaf but the last full.
    assert_eq!(s.leaves, (n as usize).div_ceil(LEAF_WIDTH));
    // Again, over keys all present, and in between (new keys).
    let mut c = t.cursor();
    for i in 0..n {
        match c.insert(&(3 * i).to_be_bytes(), 0, &mut g) {
            Insert::Exists { value } => assert_eq!(value, i),
            Insert::Inserted(_) => panic!("key {i} inserted twice"),
        }
        assert!(inserted(c.insert(
            &(3 * i + 1).to_be_bytes(),
            n + i,
            &mut g
        )));
    }
    assert_eq!(check(&t).keys.len(), 2 * n as usize);
}

fn ycsb_key(i: u64, len: usize) -> Vec<u8> {
    let d = i.to_string();
    let mut k = b"user".to_vec();
    k.resize(len - d.len(), b'0');
    k.extend_from_slice(d.as_bytes());
    k
}

/// The longest prefix, in words, of any node of a quiescent tree.
fn widest_prefix(t: &RawTree) -> usize {
    fn walk(p: *const Header) -> usize {
        // SAFETY: a live node of a quiescent tree.
        let h = unsafe { hdr(p) };
        let own = h.pw.load(R) as usize;
        if h.is_leaf {
            return own;
        }
        // SAFETY: an inner node.
        let inner = unsafe { &*(p as *const Inner) };
        (0..=inner.header.count.load(R))
            .map(|i| walk(inner.children[i].load(R)))
            .fold(own, usize::max)
    }
    walk(t.root.load(R))
}

/// YCSB's keys (`user` and zero-padded digits: every key shares its
/// first 8 bytes and more), loaded in order by a cursor and at random
/// by inserts, then thinned out and refilled with keys that break the
/// prefixes: the nodes take prefixes (so their slices tell the keys
/// apart), and shrink them when a key that does not share them comes.
#[test]
fn long_shared_prefixes() {
    let mut rng = seed("long_shared_prefixes");
    for len in [24usize, 64] {
        // SAFETY: only LeakGuards on these trees.
        let mut g = unsafe { LeakGuard::new() };
        let sorted = RawTree::new();
        let mut c = sorted.cursor();
        for i in 0..5_000u64 {
            assert!(inserted(c.insert(&ycsb_key(i, len), i, &mut g)));
        }
        check(&sorted);
        let want_pw = if len == 24 { 2 } else { PREFIX_WORDS };
        assert_eq!(widest_prefix(&sorted), want_pw, "{len}-byte keys");
        let t = RawTree::new();
        let mut model = std::collections::BTreeMap::new();
        for _ in 0..5_000 {
            let i = next(&mut rng) % 20_000;
            let k = ycsb_key(i, len);
            let fresh = !model.contains_key(&k);
            assert_eq!(inserted(t.insert(&k, i, &mut g)), fresh);
            model.insert(k, i);
        }
        check(&t);
        assert!(widest_prefix(&t) > 0);
        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
        for k in keys.iter().step_by(3) {
            assert!(t.remove(k, &mut g).is_some());
            model.remove(k);
        }
        // Keys that share less: other digits, shorter, a prefix of the
        // others, a word's worth of them exactly.
        let mut odd = vec![b"user".to_vec(), b"user0000".to_vec(), b"usez".to_vec()];
        for i in 0..300u64 {
            let mut k = ycsb_key(next(&mut rng) % 20_000, len);
            let at = 4 + (i as usize % (len - 4));
            k[at] = b"19a\0"[(i % 4) as usize];
            k.truncate(len - (i as usize % 9));
            odd.push(k);
        }
        odd.push(ycsb_key(0, len)[..16].to_vec());
        for (j, k) in odd.into_iter().enumerate() {
            let fresh = !model.contains_key(&k);
            assert_eq!(inserted(t.insert(&k, j as u64, &mut g)), fresh);
            model.entry(k).or_insert(j as u64);
        }
        let got = check(&t).keys;
        let want: Vec<_> = model.into_iter().collect();
        assert!(
            got == want,
            "{len}-byte keys: the tree differs from the model"
        );
    }
}

/// A checkpoint loaded by one thread: blocks of consecutive keys dealt
/// round-robin into files, the files loaded one after another, so
/// every file after the first fills gaps between keys already there.
#[test]
fn cursor_runs_into_gaps() {
    let mut rng = seed("cursor_runs_into_gaps");
    let keys = mixed_keys(&mut rng, 30_000);
    let (block, files) = (1 + next(&mut rng) as usize % 400, 4);
    eprintln!("block {block}");
    let t = RawTree::new();
    // SAFETY: only LeakGuards on this tree.
    let mut g = unsafe { LeakGuard::new() };
    for f in 0..files {
        let mut c = t.cursor();
        for (b, run) in keys.chunks(block).enumerate() {
            if b % files == f {
                for k in run {
                    assert!(inserted(c.insert(k, k.len() as u64, &mut g)));
                }
            }
        }
    }
    let s = check(&t);
    let want: Vec<_> = keys.iter().map(|k| (k.clone(), k.len() as u64)).collect();
    assert!(s.keys == want);
    // Splitting at the key leaves few partly filled leaves per gap
    // (a plain insert's even splits would leave them all half full).
    let fill = keys.len() as f64 / (s.leaves * LEAF_WIDTH) as f64;
    eprintln!("{} leaves, fill {fill:.2}", s.leaves);
    if block >= 100 {
        assert!(fill > 0.8, "fill {fill:.2}");
    }
}

/// A cursor stays correct when its remembered leaf and parent are
/// split by other inserts between its own, and for keys in any order.
#[test]
fn cursor_with_other_inserts_and_any_order() {
    let mut rng = seed("cursor_with_other_inserts_and_any_order");
    for round in 0..20 {
        let keys = mixed_keys(&mut rng, 3_000);
        let t = RawTree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let mut model = std::collections::BTreeMap::new();
        let mut c = t.cursor();
        let mut i = next(&mut rng) as usize % keys.len();
        for step in 0..6_000u64 {
            let r = next(&mut rng);
            // Mostly the cursor's ascending run, sometimes a jump;
            // plain inserts anywhere; now and then a remove.
            let (k, by_cursor) = match r % 8 {
                0..=3 => {
                    i = (i + 1 + (r >> 8) as usize % 3) % keys.len();
                    (&keys[i], true)
                }
                4 => {
                    i = (r >> 8) as usize % keys.len();
                    (&keys[i], true)
                }
                5 | 6 => (&keys[(r >> 8) as usize % keys.len()], false),
                _ => {
                    let k = &keys[(r >> 8) as usize % keys.len()];
                    assert_eq!(t.remove(k, &mut g).map(|x| x.0), model.remove(k));
                    continue;
                }
            };
            let got = if by_cursor {
                c.insert(k, step, &mut g)
            } else {
                t.insert(k, step, &mut g)
            };
            follow(&mut model, k, step, got, round);
        }
        matches_model(&t, model, round);
    }
}

/// Check an insert-if-absent of `k → step` against `model`, and apply
/// it there.
fn follow(
    model: &mut std::collections::BTreeMap<Vec<u8>, u64>,
    k: &[u8],
    step: u64,
    got: Insert,
    round: usize,
) {
    match (got, model.get(k)) {
        (Insert::Exists { value }, Some(&v)) => assert_eq!(value, v),
        (Insert::Inserted(_), None) => {
            model.insert(k.to_vec(), step);
        }
        (got, want) => panic!("round {round} step {step}: {got:?}, model {want:?}"),
    }
}

/// The tree is whole and holds exactly `model`.
fn matches_model(t: &RawTree, model: std::collections::BTreeMap<Vec<u8>, u64>, round: usize) {
    let s = check(t);
    let want: Vec<_> = model.into_iter().collect();
    assert!(s.keys == want, "round {round}");
}

/// Nodes reachable from the root: (leaves, inner nodes).
fn reachable(t: &RawTree) -> (usize, usize) {
    fn walk(p: *const Header, n: &mut (usize, usize)) {
        // SAFETY: a quiescent test tree.
        let h = unsafe { hdr(p) };
        if h.is_leaf {
            n.0 += 1;
            return;
        }
        n.1 += 1;
        // SAFETY: an inner node.
        let inner = unsafe { &*(p as *const Inner) };
        for i in 0..=inner.header.count.load(R) {
            walk(inner.children[i].load(R), n);
        }
    }
    let mut n = (0, 0);
    walk(t.root.load(R), &mut n);
    n
}

/// A queue (insert at the tail, remove at the head) leaves empty
/// leaves behind it; each is unlinked, with the inner nodes emptied
/// with them, so the tree stays the size of what it holds. Keys of 8, 24 and 64 bytes (fences on the heap, node
/// prefixes); the live length wanders so heads empty leaves at every
/// position of their parents.
#[test]
fn a_queue_keeps_the_tree_small() {
    let mut rng = seed("a_queue_keeps_the_tree_small");
    for len in [8, 24, 64] {
        let t = RawTree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let key = |i: u64| match len {
            8 => i.to_be_bytes().to_vec(),
            _ => ycsb_key(i, len),
        };
        let (mut head, mut tail) = (0u64, 0u64);
        let mut most = 0;
        for step in 0..60_000u64 {
            let r = next(&mut rng);
            // Pushes outnumber pops while the queue is short.
            let push = tail - head < 50 || (r % 100) < 48 + (tail - head < 2_000) as u64 * 4;
            if push {
                assert!(matches!(
                    t.insert(&key(tail), tail, &mut g),
                    Insert::Inserted(_)
                ));
                tail += 1;
            } else {
                assert_eq!(
                    t.remove(&key(head), &mut g).map(|x| x.0),
                    Some(head),
                    "step {step}"
                );
                head += 1;
            }
            most = most.max(tail - head);
            if step % 10_000 == 0 {
                check(&t);
            }
        }
        // Drain to a few keys: the tree shrinks to them.
        while tail - head > 30 {
            assert_eq!(t.remove(&key(head), &mut g).map(|x| x.0), Some(head));
            head += 1;
        }
        let s = check(&t);
        assert!(s.keys.iter().map(|(_, v)| *v).eq(head..tail), "len {len}");
        let (leaves, inners) = reachable(&t);
        // 30 keys: at most 3 leaves of them, the leftmost (empty,
        // never unlinked) and a path of inner nodes.
        assert!(leaves <= 5, "len {len}: {leaves} leaves for 30 keys");
        assert!(
            inners <= 8,
            "len {len}: {inners} inner nodes (most live {most})"
        );
        assert!(t.unlinks() > 0);
    }
}

/// Removing every key, in random order, leaves the leftmost leaf alone
/// under a path of inner nodes with one child each; the shape checker
/// (fences, separators, the sibling chain) passes all along.
#[test]
fn removing_every_key_unlinks_every_other_leaf() {
    let mut rng = seed("removing_every_key_unlinks_every_other_leaf");
    for round in 0..6 {
        let t = RawTree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let mut keys = mixed_keys(&mut rng, 3_000);
        keys.sort();
        keys.dedup();
        let n = keys.len();
        // Shuffle, insert, shuffle, remove.
        for pass in 0..2 {
            for i in (1..n).rev() {
                keys.swap(i, next(&mut rng) as usize % (i + 1));
            }
            for (i, k) in keys.iter().enumerate() {
                match pass {
                    0 => assert!(matches!(t.insert(k, 1, &mut g), Insert::Inserted(_))),
                    _ => assert_eq!(t.remove(k, &mut g).map(|x| x.0), Some(1), "round {round}"),
                }
                if i % 500 == 0 {
                    check(&t);
                }
            }
        }
        let s = check(&t);
        assert!(s.keys.is_empty());
        let (leaves, inners) = reachable(&t);
        assert_eq!(leaves, 1, "round {round}");
        let mut p = t.root.load(R) as *const Header;
        for _ in 0..inners {
            // SAFETY: a quiescent test tree.
            let inner = unsafe { &*(p as *const Inner) };
            assert_eq!(inner.header.count.load(R), 0, "round {round}");
            p = inner.children[0].load(R);
        }
        // The tree still works.
        for (i, k) in keys.iter().enumerate().take(500) {
            assert!(matches!(t.insert(k, i as u64, &mut g), Insert::Inserted(_)));
        }
        assert_eq!(check(&t).keys.len(), 500.min(n));
    }
}

/// A guard that never frees an unlinked leaf but makes it look like a
/// fresh, unlocked, empty leaf, as if its memory had been freed and
/// reused for a new node: what a reference kept past its pin would
/// then find.
struct Reuse;

// SAFETY: nothing is freed.
unsafe impl Guard for Reuse {
    fn retire(&mut self, garbage: Retired) {
        if let Some(leaf) = garbage.as_leaf() {
            // SAFETY: never freed (leaked below).
            let leaf = unsafe { &*leaf };
            leaf.header.version.reset();
            leaf.next.store(std::ptr::null_mut(), R);
        }
        let _ = garbage; // leaked: `Retired` frees nothing unless reclaimed
    }
}

/// A cursor remembers the leaf its last key went into, from one call
/// (one pin) to the next. If that leaf is unlinked and its memory
/// reused meanwhile, the cursor must not insert into it: it drops its
/// spot when the tree's unlink count has moved, and descends.
#[test]
fn a_cursor_forgets_a_leaf_unlinked_since() {
    let t = RawTree::new();
    let mut g = Reuse;
    // Two full leaves (appends keep the left one full).
    for i in 0..2 * LEAF_WIDTH as u64 {
        assert!(matches!(
            t.insert(&i.to_be_bytes(), i, &mut g),
            Insert::Inserted(_)
        ));
    }
    let mut c = t.cursor();
    let k = |i: u64| (100 + i).to_be_bytes();
    // Splits off a third leaf holding just this key: the cursor's spot.
    assert!(matches!(c.insert(&k(0), 0, &mut g), Insert::Inserted(_)));
    // Empty it: it is unlinked, and "reused".
    assert_eq!(t.remove(&k(0), &mut g).map(|x| x.0), Some(0));
    assert_eq!(t.unlinks(), 1);
    assert!(matches!(c.insert(&k(1), 1, &mut g), Insert::Inserted(_)));
    // SAFETY: only this thread's Reuse guard on this tree, which frees nothing.
    let lg = unsafe { LeakGuard::new() };
    assert_eq!(
        t.get(&k(1), &lg).value,
        Some(1),
        "inserted into a leaf no longer in the tree"
    );
    assert_eq!(check(&t).keys.len(), 2 * LEAF_WIDTH + 1);
}

/// A guard that frees retired memory after crossbeam-epoch's grace
/// period, so a use after free shows (under a sanitizer, or as
/// garbage) rather than reading leaked memory.
struct Ebr<'a>(&'a crossbeam_epoch::Guard);

// SAFETY: memory is freed only after every thread pinned at the
// retirement has unpinned; every guard on the tree is one of these.
unsafe impl Guard for Ebr<'_> {
    fn retire(&mut self, garbage: Retired) {
        // SAFETY: as above (Retired is Send).
        unsafe { self.0.defer_unchecked(move || garbage.reclaim()) };
    }
}

/// A deep tree (four levels) whose leaves are emptied (and unlinked)
/// and filled again by one thread while others insert keys into the
/// gaps between its keys and look each one up at once: an insert that
/// lands in a leaf that does not cover its key (an unlink's routing
/// race, see `a_descent_below_a_moved_separator_sees_the_unlink`) is
/// lost to lookups. Memory is freed for real after the grace period.
#[test]
fn gap_inserts_race_unlinks_in_a_deep_tree() {
    let base = seed("gap_inserts_race_unlinks_in_a_deep_tree");
    let stress = stress();
    let blocks = 400u64; // of LEAF_WIDTH keys: 4,800 keys, 4 levels
    let w = LEAF_WIDTH as u64;
    let key = |i: u64| (10 * i).to_be_bytes();
    let t = RawTree::new();
    {
        let g = crossbeam_epoch::pin();
        for i in 0..blocks * w {
            t.insert(&key(i), i, &mut Ebr(&g));
        }
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    // The block being emptied: the gap inserts aim at it.
    let block = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let (t, done, block) = (&t, &done, &block);
        s.spawn(move || {
            // Stops the gap inserts however this thread ends.
            let _done = SetOnDrop(done);
            let mut rng = base;
            for _ in 0..100_000 * stress {
                let b = next(&mut rng) % blocks;
                block.store(b, std::sync::atomic::Ordering::Relaxed);
                for i in b * w..(b + 1) * w {
                    let g = crossbeam_epoch::pin();
                    assert_eq!(t.remove(&key(i), &mut Ebr(&g)).map(|x| x.0), Some(i));
                }
                for i in b * w..(b + 1) * w {
                    let g = crossbeam_epoch::pin();
                    t.insert(&key(i), i, &mut Ebr(&g));
                }
            }
        });
        s.spawn(move || {
            let mut rng = base ^ 0x9a9;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let b = block.load(std::sync::atomic::Ordering::Relaxed);
                let i = b * w + next(&mut rng) % w;
                let k = (10 * i + 5).to_be_bytes();
                let g = crossbeam_epoch::pin();
                let mut g = Ebr(&g);
                assert!(matches!(t.insert(&k, i, &mut g), Insert::Inserted(_)));
                assert_eq!(
                    t.get(&k, &g).value,
                    Some(i),
                    "seed {base}: gap key {i} lost"
                );
                assert_eq!(t.remove(&k, &mut g).map(|x| x.0), Some(i), "seed {base}");
            }
        });
    });
    let s = check(&t);
    assert_eq!(s.keys.len() as u64, blocks * w);
    assert!(t.unlinks() > 0);
}

/// `find_many` answers as `find` does, key by key, on a deep tree,
/// for present and absent keys, and leaves keys past its limit alone.
#[test]
fn find_many_answers_as_find() {
    let t = RawTree::new();
    let g = crossbeam_epoch::pin();
    for i in 0..5000u64 {
        t.insert(&(10 * i).to_be_bytes(), i, &mut Ebr(&g));
    }
    let mut rng = seed("find_many_answers_as_find");
    for _ in 0..2000 {
        let keys: Vec<[u8; 8]> = (0..20)
            .map(|_| (next(&mut rng) % 50_010).to_be_bytes())
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let mut out = [Some(u64::MAX); 20];
        t.find_many(&refs, &mut out, &Ebr(&g));
        for (i, k) in refs.iter().enumerate() {
            let want = if i < RawTree::FIND_MANY {
                t.find(k, &Ebr(&g))
            } else {
                Some(u64::MAX)
            };
            assert_eq!(out[i], want, "key {k:?}");
        }
    }
}

/// `find_many` racing leaf splits and unlinks: keys that stay in the
/// tree are always found with their values, keys never inserted never
/// are, and keys coming and going are found with their own value or
/// not at all. Memory is freed for real after the grace period.
#[test]
fn find_many_races_splits_and_unlinks() {
    let base = seed("find_many_races_splits_and_unlinks");
    let stress = stress();
    let blocks = 400u64;
    let w = LEAF_WIDTH as u64;
    let t = RawTree::new();
    {
        let g = crossbeam_epoch::pin();
        for i in 0..blocks * w {
            t.insert(&(10 * i).to_be_bytes(), i, &mut Ebr(&g));
            if !(i / w).is_multiple_of(4) {
                // Stays, and moves as its leaf splits; every fourth
                // block has none, so its leaves empty and go.
                t.insert(&(10 * i + 3).to_be_bytes(), i, &mut Ebr(&g));
            }
        }
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let (t, done) = (&t, &done);
        s.spawn(move || {
            let _done = SetOnDrop(done);
            let mut rng = base;
            for _ in 0..20_000 * stress {
                let b = next(&mut rng) % blocks;
                for i in b * w..(b + 1) * w {
                    let g = crossbeam_epoch::pin();
                    t.remove(&(10 * i).to_be_bytes(), &mut Ebr(&g));
                }
                for i in b * w..(b + 1) * w {
                    let g = crossbeam_epoch::pin();
                    t.insert(&(10 * i).to_be_bytes(), i, &mut Ebr(&g));
                    // A gap key: splits the refilled leaves.
                    t.insert(&(10 * i + 5).to_be_bytes(), i, &mut Ebr(&g));
                }
                for i in b * w..(b + 1) * w {
                    let g = crossbeam_epoch::pin();
                    t.remove(&(10 * i + 5).to_be_bytes(), &mut Ebr(&g));
                }
            }
        });
        s.spawn(move || {
            let mut rng = base ^ 0x5eed;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let mut keys = [[0u8; 8]; RawTree::FIND_MANY];
                let mut want = [(0u64, 0u8); RawTree::FIND_MANY];
                for (k, w) in keys.iter_mut().zip(&mut want) {
                    let b = next(&mut rng) % blocks;
                    let i = b * LEAF_WIDTH as u64 + next(&mut rng) % LEAF_WIDTH as u64;
                    // 3: stays (but in every fourth block), 7: never
                    // there, 0 and 5: come and go.
                    let off = [0, 3, 5, 7][next(&mut rng) as usize % 4];
                    let off = if off == 3 && b.is_multiple_of(4) {
                        7
                    } else {
                        off
                    };
                    *k = (10 * i + off).to_be_bytes();
                    *w = (i, off as u8);
                }
                let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                let mut out = [None; RawTree::FIND_MANY];
                let g = crossbeam_epoch::pin();
                t.find_many(&refs, &mut out, &Ebr(&g));
                for (o, (i, off)) in out.iter().zip(want) {
                    match off {
                        3 => assert_eq!(*o, Some(i), "seed {base}: key {} lost", 10 * i + 3),
                        7 => assert_eq!(*o, None, "seed {base}"),
                        _ => {
                            assert!(o.is_none() || *o == Some(i), "seed {base}: {o:?} for {i}")
                        }
                    }
                }
            }
        });
    });
    check(&t);
    assert!(t.unlinks() > 0);
}

/// Queues emptying and unlinking leaves concurrently, with lookups
/// and scans racing them, memory freed for real after the grace
/// period. Each queue's keys lie between two sentinels that are never
/// removed: every scan must see every sentinel (an unlink must never
/// hide a leaf's neighbours) in ascending order, every lookup of a
/// sentinel must find it, and each writer checks its own queue.
#[test]
fn unlinks_race_lookups_scans_and_writers() {
    let base = seed("unlinks_race_lookups_scans_and_writers");
    let rounds = 2 * std::env::var("GRANARY_STRESS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(1);
    const QUEUES: u64 = 3;
    fn qkey(q: u64, seq: u64) -> Vec<u8> {
        let mut k = format!("queue-{q:03}-").into_bytes();
        k.extend_from_slice(&seq.to_be_bytes());
        k
    }
    let sentinel = |q: u64| qkey(q, u64::MAX);
    for round in 0..rounds {
        let t = RawTree::new();
        {
            let g = crossbeam_epoch::pin();
            for q in 0..=QUEUES {
                assert!(matches!(
                    t.insert(&sentinel(q), q, &mut Ebr(&g)),
                    Insert::Inserted(_)
                ));
                assert!(matches!(
                    t.insert(&qkey(q, 0), 0, &mut Ebr(&g)),
                    Insert::Inserted(_)
                ));
            }
        }
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for q in 1..=QUEUES {
                let (t, done) = (&t, &done);
                s.spawn(move || {
                    let mut rng = base ^ (round as u64 * 131 + q);
                    let (mut head, mut tail) = (1u64, 1u64);
                    for step in 0..20_000u64 {
                        let g = crossbeam_epoch::pin();
                        let mut g = Ebr(&g);
                        let r = next(&mut rng);
                        if tail == head || r % 100 < 50 + 10 * (tail - head < 100) as u64 {
                            let ins = t.insert(&qkey(q, tail), tail, &mut g);
                            assert!(matches!(ins, Insert::Inserted(_)), "round {round} q {q}");
                            tail += 1;
                        } else {
                            let got = t.remove(&qkey(q, head), &mut g).map(|x| x.0);
                            assert_eq!(got, Some(head), "round {round} q {q} step {step}");
                            head += 1;
                            assert_eq!(t.get(&qkey(q, head - 1), &g).value, None);
                        }
                        if tail > head {
                            let probe = head + r % (tail - head);
                            assert_eq!(t.get(&qkey(q, probe), &g).value, Some(probe));
                        }
                    }
                    done.store(true, std::sync::atomic::Ordering::Relaxed);
                });
            }
            let (t, done) = (&t, &done);
            s.spawn(move || {
                let mut rng = base ^ 0x5ca7;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let g = crossbeam_epoch::pin();
                    let g = Ebr(&g);
                    let rev = next(&mut rng).is_multiple_of(2);
                    let mut seen: Vec<Vec<u8>> = Vec::new();
                    t.scan(
                        Bound::Unbounded,
                        Bound::Unbounded,
                        rev,
                        &g,
                        |_, _| {},
                        |k, _| {
                            seen.push(k.to_vec());
                            true
                        },
                    );
                    if rev {
                        seen.reverse();
                    }
                    assert!(
                        seen.windows(2).all(|w| w[0] < w[1]),
                        "round {round}: scan out of order"
                    );
                    for q in 0..=QUEUES {
                        assert!(
                            seen.contains(&sentinel(q)),
                            "round {round}: a scan missed sentinel {q}"
                        );
                        assert_eq!(t.get(&sentinel(q), &g).value, Some(q));
                    }
                }
            });
        });
        let s = check(&t);
        assert!(t.unlinks() > 0, "round {round}: nothing was unlinked");
        let (leaves, _) = reachable(&t);
        // Without unlinks: 60,000 pushes, about 5,000 leaves. A leaf
        // is left behind only when its unlink lost 16 races in a row.
        eprintln!("round {round}: {leaves} leaves for {} keys", s.keys.len());
        assert!(
            leaves <= 50 + s.keys.len() / 4,
            "round {round}: {leaves} leaves for {} keys",
            s.keys.len()
        );
    }
}

/// Lookups, then inserts of the absent keys through the lookup's leaf
/// (sometimes a stale one: another key's, or from before other
/// inserts and removes), against a model.
#[test]
fn insert_hinted_after_lookups() {
    let mut rng = seed("insert_hinted_after_lookups");
    for round in 0..20 {
        let keys = mixed_keys(&mut rng, 2_000);
        let t = RawTree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let mut model = std::collections::BTreeMap::new();
        let mut old_hint = None;
        for step in 0..6_000u64 {
            let r = next(&mut rng);
            let k = &keys[(r >> 8) as usize % keys.len()];
            if r.is_multiple_of(8) {
                assert_eq!(t.remove(k, &mut g).map(|x| x.0), model.remove(k));
                continue;
            }
            let look = t.get(k, &g);
            assert_eq!(
                look.value,
                model.get(k).copied(),
                "round {round} step {step}"
            );
            let hint = match (r >> 4) % 4 {
                0 => old_hint.unwrap_or(look.leaf),
                _ => look.leaf,
            };
            old_hint = Some(look.leaf);
            // SAFETY: LeakGuards only: no leaf is freed.
            let got = unsafe { t.insert_hinted(hint, k, step, &mut g) };
            follow(&mut model, k, step, got, round);
        }
        matches_model(&t, model, round);
    }
}

/// Threads look keys up and insert the absent ones through the
/// lookup's leaf, racing each other's splits: every key goes in once.
#[test]
fn insert_hinted_concurrent() {
    let base = seed("insert_hinted_concurrent");
    for round in 0..4u64 {
        let mut rng = base ^ round;
        let keys = mixed_keys(&mut rng, 20_000);
        let t = RawTree::new();
        let won: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3u64)
                .map(|th| {
                    let (t, keys) = (&t, &keys);
                    s.spawn(move || {
                        // SAFETY: only LeakGuards on this tree.
                        let mut g = unsafe { LeakGuard::new() };
                        let mut rng = base ^ (round << 8) ^ th;
                        let mut won = 0;
                        for _ in 0..keys.len() {
                            let i = next(&mut rng) as usize % keys.len();
                            let look = t.get(&keys[i], &g);
                            if look.value.is_some() {
                                continue;
                            }
                            // SAFETY: LeakGuards only: no leaf is freed.
                            match unsafe { t.insert_hinted(look.leaf, &keys[i], i as u64, &mut g) }
                            {
                                Insert::Inserted(_) => won += 1,
                                Insert::Exists { value } => assert_eq!(value, i as u64),
                            }
                        }
                        won
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let s = check(&t);
        assert_eq!(s.keys.len(), won, "round {round}");
        for (k, v) in &s.keys {
            assert_eq!(&keys[*v as usize], k, "round {round}");
        }
    }
}

/// Hinted lookups agree with the model whatever the hint: the leaf of
/// the previous lookup (a neighbour's when keys come in runs, else
/// anywhere), one from long before (stale after splits), or the
/// key's own. Inserts and removes change the tree in between.
#[test]
fn get_hinted_matches_the_model() {
    let mut rng = seed("get_hinted_matches_the_model");
    for round in 0..20 {
        let keys = mixed_keys(&mut rng, 2_000);
        let t = RawTree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        let mut model = std::collections::BTreeMap::new();
        let first = t.get(&keys[0], &g).leaf;
        let (mut last, mut old) = (first, first);
        let mut i = 0usize;
        for step in 0..8_000u64 {
            let r = next(&mut rng);
            // Half the time the next key in order (a run), else any.
            i = if r.is_multiple_of(2) {
                (i + 1) % keys.len()
            } else {
                (r >> 8) as usize % keys.len()
            };
            let k = &keys[i];
            match (r >> 4) % 8 {
                0 => assert_eq!(t.remove(k, &mut g).map(|x| x.0), model.remove(k)),
                1..=3 => {
                    let got = t.insert(k, step, &mut g);
                    follow(&mut model, k, step, got, round);
                }
                _ => {
                    let hint = match (r >> 12) % 8 {
                        0 => old,
                        1 => t.get(k, &g).leaf,
                        _ => last,
                    };
                    // SAFETY: LeakGuards only: no leaf is freed.
                    let look = unsafe { t.get_hinted(hint, k, &g) };
                    assert_eq!(
                        look.value,
                        model.get(k).copied(),
                        "round {round} step {step}"
                    );
                    if step % 1000 == 0 {
                        old = last;
                    }
                    last = look.leaf;
                }
            }
        }
        matches_model(&t, model, round);
    }
}

/// Readers look up keys present from the start through the leaf of
/// their previous lookup while writers split leaves all around them:
/// every lookup finds its key with its value.
#[test]
fn get_hinted_concurrent_with_splits() {
    let base = seed("get_hinted_concurrent_with_splits");
    for round in 0..4u64 {
        let mut rng = base ^ round;
        let keys = mixed_keys(&mut rng, 30_000);
        let t = RawTree::new();
        // SAFETY: only LeakGuards on this tree.
        let mut g = unsafe { LeakGuard::new() };
        // Every third key is there from the start; writers add the rest.
        for (i, k) in keys.iter().enumerate().step_by(3) {
            assert!(matches!(t.insert(k, i as u64, &mut g), Insert::Inserted(_)));
        }
        std::thread::scope(|s| {
            for th in 0..2u64 {
                let (t, keys) = (&t, &keys);
                s.spawn(move || {
                    // SAFETY: only LeakGuards on this tree.
                    let mut g = unsafe { LeakGuard::new() };
                    let mut rng = base ^ (round << 8) ^ th;
                    for _ in 0..keys.len() {
                        let i = next(&mut rng) as usize % keys.len();
                        if !i.is_multiple_of(3) {
                            let _ = t.insert(&keys[i], i as u64, &mut g);
                        }
                    }
                });
            }
            for th in 0..2u64 {
                let (t, keys) = (&t, &keys);
                s.spawn(move || {
                    // SAFETY: only LeakGuards on this tree.
                    let g = unsafe { LeakGuard::new() };
                    let mut rng = base ^ (round << 8) ^ (th + 16);
                    let mut hint = t.get(&keys[0], &g).leaf;
                    let mut i = 0usize;
                    for _ in 0..2 * keys.len() {
                        let r = next(&mut rng);
                        // Runs of neighbours, and jumps.
                        i = if r.is_multiple_of(4) {
                            (r >> 8) as usize % keys.len()
                        } else {
                            (i + 3) % keys.len()
                        };
                        i -= i % 3;
                        // SAFETY: LeakGuards only: no leaf is freed.
                        let look = unsafe { t.get_hinted(hint, &keys[i], &g) };
                        assert_eq!(look.value, Some(i as u64), "round {round} key {i}");
                        hint = look.leaf;
                    }
                });
            }
        });
        check(&t);
    }
}

/// Several threads load interleaving ascending runs into one tree (as
/// recovery threads do with files whose key ranges interleave), while
/// another inserts the same keys at random and a reader scans. Every
/// key is inserted exactly once, and the tree ends up whole.
#[test]
fn cursor_concurrent_interleaved_runs() {
    let base = seed("cursor_concurrent_interleaved_runs");
    for round in 0..4u64 {
        let mut rng = base ^ round;
        let keys = mixed_keys(&mut rng, 40_000);
        let threads = 3usize;
        // Cut the keys into runs of 1..=max keys, each dealt to a
        // random thread: fine interleaving when max is small.
        let max = [2usize, 16, 300, 3000][round as usize];
        let mut runs = vec![Vec::new(); threads];
        let mut at = 0;
        while at < keys.len() {
            let len = (1 + next(&mut rng) as usize % max).min(keys.len() - at);
            runs[next(&mut rng) as usize % threads].push(at..at + len);
            at += len;
        }
        let t = RawTree::new();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let winners: Vec<Vec<usize>> = std::thread::scope(|s| {
            let loaders: Vec<_> = runs
                .iter()
                .map(|runs| {
                    let (t, keys, done) = (&t, &keys, &done);
                    s.spawn(move || {
                        // SAFETY: only LeakGuards on this tree.
                        let mut g = unsafe { LeakGuard::new() };
                        let mut c = t.cursor();
                        let mut won = Vec::new();
                        for run in runs {
                            for i in run.clone() {
                                match c.insert(&keys[i], i as u64, &mut g) {
                                    Insert::Inserted(_) => won.push(i),
                                    Insert::Exists { value } => assert_eq!(value, i as u64),
                                }
                            }
                        }
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        won
                    })
                })
                .collect();
            let random = {
                let (t, keys) = (&t, &keys);
                let mut rng = next(&mut rng);
                s.spawn(move || {
                    // SAFETY: only LeakGuards on this tree.
                    let mut g = unsafe { LeakGuard::new() };
                    let mut won = Vec::new();
                    for _ in 0..keys.len() / 4 {
                        let i = next(&mut rng) as usize % keys.len();
                        if inserted(t.insert(&keys[i], i as u64, &mut g)) {
                            won.push(i);
                        }
                    }
                    won
                })
            };
            let (t, keys, done) = (&t, &keys, &done);
            s.spawn(move || {
                // SAFETY: only LeakGuards on this tree.
                let g = unsafe { LeakGuard::new() };
                while done.load(std::sync::atomic::Ordering::Relaxed) < threads {
                    let mut prev: Option<Vec<u8>> = None;
                    t.scan(
                        Bound::Unbounded,
                        Bound::Unbounded,
                        false,
                        &g,
                        |_, _| {},
                        |k, v| {
                            assert!(prev.as_deref().is_none_or(|p| k > p), "scan out of order");
                            assert_eq!(keys[v as usize], k, "value of {k:?}");
                            prev = Some(k.to_vec());
                            true
                        },
                    );
                }
            });
            let mut w: Vec<_> = loaders
                .into_iter()
                .map(|h| h.join().expect("loader"))
                .collect();
            w.push(random.join().expect("random inserter"));
            w
        });
        let mut won: Vec<usize> = winners.into_iter().flatten().collect();
        won.sort_unstable();
        assert!(
            won.iter().copied().eq(0..keys.len()),
            "round {round}: a key inserted twice or never"
        );
        let s = check(&t);
        let want: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i as u64))
            .collect();
        assert!(s.keys == want, "round {round}");
    }
}

// ---- The point index ----

/// Random inserts (plain, hinted, cursor), upserts, replaces and
/// removes of mixed keys on a tree with a point index: after every
/// step `find` agrees with a model, with the tree's own `get`, and
/// with a tree without one; the table grows on the way.
#[test]
fn point_index_matches_the_model() {
    let mut rng = seed("point_index_matches_the_model");
    let mut keys = mixed_keys(&mut rng, 3000);
    // Short keys that differ only by trailing zeros share their word;
    // only their tags (lengths) tell them apart.
    for n in 0..=8 {
        for b in [0u8, 1, 2, 3] {
            let mut k = vec![0u8; n];
            if let Some(f) = k.first_mut() {
                *f = b;
            }
            keys.push(k);
        }
    }
    keys.sort();
    keys.dedup();
    let t = RawTree::with_point_index();
    let plain = RawTree::new();
    // SAFETY: only LeakGuards on these trees.
    let mut g = unsafe { LeakGuard::new() };
    let mut model = std::collections::BTreeMap::new();
    let first = t.points.as_ref().expect("point index").buckets();
    for step in 0..40_000u64 {
        let r = next(&mut rng);
        let k = &keys[(r >> 8) as usize % keys.len()];
        let v = step;
        match r % 8 {
            0..=2 => {
                let a = inserted(t.insert(k, v, &mut g));
                assert_eq!(a, inserted(plain.insert(k, v, &mut g)));
                assert_eq!(a, !model.contains_key(k));
                model.entry(k.clone()).or_insert(v);
            }
            3 => {
                let mut c = t.cursor();
                let mut c2 = plain.cursor();
                let i = (r >> 8) as usize % keys.len();
                for k in &keys[i..(i + 20).min(keys.len())] {
                    let a = inserted(c.insert(k, v, &mut g));
                    assert_eq!(a, inserted(c2.insert(k, v, &mut g)));
                    assert_eq!(a, !model.contains_key(k));
                    model.entry(k.clone()).or_insert(v);
                }
            }
            4 => {
                let old = t.upsert(k, v, &mut g).0;
                plain.upsert(k, v, &mut g);
                assert_eq!(old, model.insert(k.clone(), v));
            }
            5 => {
                let want = model.get(k).copied().unwrap_or(1);
                let ok = t.replace(k, want, v, &mut g);
                plain.replace(k, want, v, &mut g);
                assert_eq!(ok, model.contains_key(k), "step {step}");
                if ok {
                    model.insert(k.clone(), v);
                }
            }
            _ => {
                let got = t.remove(k, &mut g).map(|x| x.0);
                plain.remove(k, &mut g);
                assert_eq!(got, model.remove(k), "step {step}");
            }
        }
        let probe = &keys[(next(&mut rng) >> 8) as usize % keys.len()];
        // A prefetch reads nothing and changes nothing.
        t.prefetch(probe, &g);
        plain.prefetch(probe, &g);
        let want = model.get(probe).copied();
        assert_eq!(t.find(probe, &g), want, "step {step}");
        assert_eq!(t.get(probe, &g).value, want, "step {step}");
        assert_eq!(plain.find(probe, &g), want, "step {step}");
    }
    for k in &keys {
        assert_eq!(t.find(k, &g), model.get(k).copied());
    }
    assert_eq!(check(&t).keys.len(), model.len());
    let last = t.points.as_ref().expect("point index").buckets();
    assert!(last > first, "the table never grew ({first} buckets)");
    eprintln!("{} keys, {last} buckets", model.len());
}

/// Writers inserting (and growing the table) and removing their own
/// keys while a reader looks up keys that are always present, and
/// keys that never are, with tables and key copies freed for real
/// after the grace period.
#[test]
fn point_index_races_writers_and_growth() {
    let base = seed("point_index_races_writers_and_growth");
    let rounds = 2 * std::env::var("GRANARY_STRESS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(1);
    fn wkey(w: u64, i: u64) -> Vec<u8> {
        if i.is_multiple_of(2) {
            format!("writer-{w}-key-{i:012}").into_bytes()
        } else {
            (w << 56 | i).to_be_bytes().to_vec()
        }
    }
    for round in 0..rounds {
        let t = RawTree::with_point_index();
        let stay: Vec<Vec<u8>> = (0..64).map(|i| wkey(9, i)).collect();
        {
            let g = crossbeam_epoch::pin();
            for (i, k) in stay.iter().enumerate() {
                assert!(inserted(t.insert(k, i as u64, &mut Ebr(&g))));
            }
        }
        let done = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for w in 1..=2u64 {
                let (t, done) = (&t, &done);
                s.spawn(move || {
                    let mut rng = base ^ (round as u64 * 131 + w);
                    let mut live = Vec::new();
                    for i in 0..30_000u64 {
                        let g = crossbeam_epoch::pin();
                        let mut g = Ebr(&g);
                        assert!(inserted(t.insert(&wkey(w, i), i, &mut g)));
                        live.push(i);
                        let r = next(&mut rng);
                        if r.is_multiple_of(3) {
                            let j = live.swap_remove((r >> 8) as usize % live.len());
                            assert_eq!(t.remove(&wkey(w, j), &mut g).map(|x| x.0), Some(j));
                            assert_eq!(t.find(&wkey(w, j), &g), None, "round {round}");
                        }
                        if !live.is_empty() {
                            let j = live[(r >> 16) as usize % live.len()];
                            assert_eq!(t.find(&wkey(w, j), &g), Some(j), "round {round}");
                        }
                    }
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                });
            }
            let (t, done, stay) = (&t, &done, &stay);
            s.spawn(move || {
                let mut rng = base ^ 0x5ca7;
                while done.load(std::sync::atomic::Ordering::Relaxed) < 2 {
                    let g = crossbeam_epoch::pin();
                    let g = Ebr(&g);
                    let i = next(&mut rng) % 64;
                    assert_eq!(t.find(&stay[i as usize], &g), Some(i), "round {round}");
                    assert_eq!(t.find(&wkey(7, i), &g), None, "round {round}");
                }
            });
        });
        let n = check(&t).keys.len();
        let buckets = t.points.as_ref().expect("point index").buckets();
        eprintln!("round {round}: {n} keys, {buckets} buckets");
        assert!(
            buckets >= n / 8,
            "round {round}: {buckets} buckets for {n} keys"
        );
    }
}
