use super::sets::*;
use super::*;

/// A hash that `SlotIndex` files at `slot` of a 64-slot table (the
/// top six bits choose the slot).
fn at(slot: u64) -> u64 {
    slot << 58
}

/// An empty index of 64 slots.
fn index() -> SlotIndex {
    let mut s = SlotIndex::default();
    assert!(!s.fits(1), "an empty index has no room");
    assert_eq!(s.slots.len(), 64);
    s
}

#[test]
fn slot_index_finds_what_was_added() {
    let mut s = index();
    s.add(at(7), 0);
    s.add(at(7), 1);
    s.add(at(8), 2);
    // Two positions under one hash: `is` tells them apart.
    assert_eq!(s.find(at(7), |_| true), Some(0));
    assert_eq!(s.find(at(7), |p| p == 1), Some(1));
    assert_eq!(s.find(at(8), |p| p == 2), Some(2));
    assert_eq!(s.find(at(8), |p| p == 0), None);
    assert_eq!(s.find(at(30), |_| true), None);
}

#[test]
fn slot_index_probes_past_the_last_slot() {
    let mut s = index();
    s.add(at(63), 0);
    s.add(at(63), 1); // wraps to slot 0
    assert_eq!(s.find(at(63), |p| p == 1), Some(1));
    assert_eq!(s.slots[0] as u32, 1);
}

#[test]
fn slot_index_grows_past_half_full() {
    let mut s = index();
    assert!(s.fits(32));
    assert!(!s.fits(33), "more than half full");
    assert_eq!(s.slots.len(), 128);
    assert_eq!(s.shift, 64 - 7);
    assert!(s.fits(64));
}

#[test]
fn slot_index_clear_forgets_every_entry() {
    let mut s = index();
    s.add(at(5), 0);
    s.clear();
    assert_eq!(s.find(at(5), |_| true), None);
    s.add(at(5), 1);
    assert_eq!(s.find(at(5), |_| true), Some(1));
}

#[test]
fn slot_index_stamp_wraps_around_without_reviving_entries() {
    let mut s = index();
    // Filed under stamp 1, where a wrapped stamp starts again.
    s.add(at(9), 0);
    // As after 2^32 − 2 more transactions that wrote nothing here
    // (clearing that often takes seconds, so set the stamp).
    s.stamp = u32::MAX;
    s.clear();
    assert_eq!(s.stamp, 1, "stamp 0 would match every empty slot");
    assert_eq!(s.find(at(9), |_| true), None, "a stale entry revived");
    assert_eq!(s.find(at(10), |_| true), None);
    s.add(at(9), 1);
    assert_eq!(s.find(at(9), |_| true), Some(1));
}

#[test]
fn key_hash_tells_tables_lengths_and_bytes_apart() {
    let (t0, t1) = (TableId(0), TableId(1));
    assert_eq!(key_hash(t0, b"abc"), key_hash(t0, b"abc"));
    assert_ne!(key_hash(t0, b"abc"), key_hash(t1, b"abc"));
    // Trailing zero bytes count, through the length.
    assert_ne!(key_hash(t0, b""), key_hash(t0, b"\0"));
    assert_ne!(key_hash(t0, b"a"), key_hash(t0, b"a\0"));
    assert_ne!(key_hash(t0, b"12345678"), key_hash(t0, b"12345678\0"));
    // Every byte counts, in the 8-byte chunks and in the tail.
    let k = [7u8; 21];
    for i in 0..k.len() {
        let mut m = k;
        m[i] ^= 1;
        assert_ne!(key_hash(t0, &k), key_hash(t0, &m), "byte {i}");
    }
}

/// A write-set entry for a made-up record address (never
/// dereferenced: the index only hashes and compares it).
fn entry(st: &mut TxState, t: TableId, key: &[u8], rec: usize) -> WriteEntry {
    WriteEntry {
        table: t,
        rec: rec as *const Record,
        kind: WriteKind::Existing,
        key: st.push_bytes(key),
        value: None,
        locked: Tid(0),
        hash: key_hash(t, key),
    }
}

#[test]
fn write_set_indexes_survive_growth_and_clearing() {
    let mut st = TxState::default();
    let rec = |i: usize| 0x1000 + 64 * i;
    let keys: Vec<(TableId, [u8; 4])> = (0..200u32)
        .map(|i| (TableId(i % 3), i.to_be_bytes()))
        .collect();
    for (i, (t, k)) in keys.iter().enumerate() {
        let e = entry(&mut st, *t, k, rec(i));
        st.push_write(e);
        // Searched entry by entry, then through the indexes from the
        // first write past `LINEAR_WRITES` on.
        if i <= 2 * LINEAR_WRITES {
            for (j, (t, k)) in keys[..=i].iter().enumerate() {
                assert_eq!(st.find_write(*t, k), Some(j), "{i} written");
                assert_eq!(st.find_rec(rec(j) as *const Record), Some(j));
            }
            assert_eq!(st.find_write(keys[i + 1].0, &keys[i + 1].1), None);
            assert_eq!(st.find_rec(rec(i + 1) as *const Record), None);
        }
    }
    assert!(st.by_key.slots.len() >= 400, "grew past 64 slots");
    assert!(keys.len() > LINEAR_WRITES, "the indexes are used");
    for (i, (t, k)) in keys.iter().enumerate() {
        assert_eq!(st.find_write(*t, k), Some(i));
        assert_eq!(st.find_rec(rec(i) as *const Record), Some(i));
    }
    // Key 0 is table 0's.
    assert_eq!(st.find_write(TableId(1), &0u32.to_be_bytes()), None);
    assert_eq!(st.find_write(TableId(0), b"none"), None);
    assert_eq!(st.find_rec(rec(200) as *const Record), None);
    st.clear_writes();
    assert_eq!(st.find_write(keys[0].0, &keys[0].1), None);
    assert_eq!(st.find_rec(rec(0) as *const Record), None);
}

#[test]
fn a_transaction_reads_its_own_writes_past_index_growth() {
    let db = crate::Database::new(crate::Options::default()).expect("db");
    let t = db.create_table("t").expect("table");
    let mut w = db.worker().expect("worker");
    let value = |i: u32| -> &'static [u8] {
        if i % 2 == 1 {
            b"first"
        } else {
            b"second"
        }
    };
    w.run(|tx| {
        for i in 0..300u32 {
            tx.put(t, &i.to_be_bytes(), b"first")?;
        }
        for i in (0..300u32).step_by(2) {
            tx.put(t, &i.to_be_bytes(), b"second")?;
        }
        // A second put of a key updates its entry in place.
        assert_eq!(tx.c.st.write_set.len(), 300);
        for i in 0..300u32 {
            assert_eq!(tx.get(t, &i.to_be_bytes())?, Some(value(i)));
        }
        Ok(())
    })
    .expect("commit");
    w.run(|tx| {
        for i in 0..300u32 {
            assert_eq!(tx.get(t, &i.to_be_bytes())?, Some(value(i)));
        }
        Ok(())
    })
    .expect("read back");
}
