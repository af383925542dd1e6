//! Durability: open/recover round trips, checkpoints, the directory lock,
//! damaged files and poisoning. Crash loops (kill -9) live in the
//! workloads crate; failpoint tests in `failpoints.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use granary::{Database, Error, Options};

use crate::common::TempDir;

fn opts() -> Options {
    Options::default()
        .epoch_interval(Duration::from_millis(2))
        .recovery_threads(2)
}

fn dump(db: &Database) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut w = db.worker().unwrap();
    for (name, t) in db.tables() {
        let rows = w
            .run(|tx| {
                tx.scan_collect(
                    t,
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                    usize::MAX,
                    false,
                )
            })
            .unwrap();
        for (k, v) in rows {
            out.push((name.clone(), k, v));
        }
    }
    out
}

#[test]
fn round_trip_puts_deletes_and_big_values() {
    let dir = TempDir::new("roundtrip");
    let before;
    {
        let db = Database::open(dir.path(), opts()).unwrap();
        let a = db.open_table("a").unwrap();
        let b = db.open_table("b").unwrap();
        let mut w = db.worker().unwrap();
        for i in 0u32..500 {
            w.run(|tx| {
                tx.put(a, &i.to_be_bytes(), &[i as u8; 40])?;
                tx.put(b, &i.to_be_bytes(), b"x")
            })
            .unwrap();
        }
        // Overwrite with bigger values (new records), delete some.
        w.run(|tx| {
            for i in 0u32..100 {
                tx.put(a, &i.to_be_bytes(), &vec![7u8; 300])?;
            }
            for i in 200u32..300 {
                tx.delete(b, &i.to_be_bytes())?;
            }
            Ok(())
        })
        .unwrap();
        before = dump(&db);
        assert_eq!(before.len(), 900);
    }
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(db.tables().len(), 2);
    assert_eq!(dump(&db), before);
    let s = db.durability_stats().unwrap();
    assert!(s.recovery.log_records_applied >= 1100, "{s:?}");
    // And it keeps working, and recovers again.
    let a = db.table("a").unwrap();
    db.worker()
        .unwrap()
        .run(|tx| tx.put(a, b"zz", b"after"))
        .unwrap();
    let mut again = before.clone();
    again.push(("a".into(), b"zz".to_vec(), b"after".to_vec()));
    again.sort();
    drop(db);
    let db = Database::open(dir.path(), opts()).unwrap();
    let mut got = dump(&db);
    got.sort();
    assert_eq!(got, again);
}

/// Field updates (`Tx::update_field`) are logged as whole values (SiloR
/// §3.1): recovery rebuilds each value with the new bytes over the rest.
/// Most keys have one field changed in their transaction, some two, some
/// are read back after the change, and some have a field that runs past
/// their value's end.
#[test]
fn field_updates_recover_whole() {
    let dir = TempDir::new("fields");
    let before;
    {
        let db = Database::open(dir.path(), opts()).unwrap();
        let a = db.open_table("a").unwrap();
        let mut w = db.worker().unwrap();
        for i in 0u32..200 {
            let v: Vec<u8> = (0..100).map(|j| (i as u8).wrapping_add(j)).collect();
            w.run(|tx| tx.put(a, &i.to_be_bytes(), &v)).unwrap();
        }
        for i in (0u32..200).step_by(3) {
            w.run(|tx| {
                let k = i.to_be_bytes();
                tx.update_field(a, &k, 5..11, |f| f.fill(0xaa))?;
                if i % 2 == 0 {
                    tx.update_field(a, &k, 60..64, |f| f.fill(0xbb))?;
                }
                if i % 5 == 0 {
                    let v = tx.get(a, &k)?.expect("present").to_vec();
                    assert_eq!(&v[5..11], &[0xaa; 6]);
                }
                if i % 7 == 0 {
                    let n = tx.update_field(a, &k, 96..200, |f| {
                        f.fill(0xcc);
                        f.len()
                    })?;
                    assert_eq!(n, Some(4));
                }
                Ok(())
            })
            .unwrap();
        }
        before = dump(&db);
        let changed = before.iter().filter(|r| r.2[96..] == [0xcc; 4]).count();
        assert_eq!(changed, 10);
    }
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(dump(&db), before);
}

/// Rows written by a database, for the format tests below; with
/// `checkpoint`, half of them before a checkpoint, half after.
fn write_rows(dir: &Path, o: Options, checkpoint: bool) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let db = Database::open(dir, o).unwrap();
    let t = db.open_table("t").unwrap();
    let mut w = db.worker().unwrap();
    for i in 0u32..300 {
        if i == 150 && checkpoint {
            db.checkpoint().unwrap();
        }
        // Values up to 9 KiB: a checkpoint thread fills several blocks.
        w.run(|tx| tx.put(t, &i.to_be_bytes(), &vec![i as u8; (i as usize % 97) * 97]))
            .unwrap();
    }
    w.run(|tx| tx.delete(t, &7u32.to_be_bytes())).unwrap();
    dump(&db)
}

/// Rewrite the blocks of an aligned (v02) file back to back (v01 layout)
/// after `head`, up to `end`; returns the new bytes.
fn unpad(b: &[u8], mut head: Vec<u8>, first: u64, end: u64, magic: u32) -> Vec<u8> {
    use granary::durable::format::{self, BlockRead};
    let mut at = first;
    while at < end {
        if let BlockRead::Block(..) = format::read_block(b, at as usize, format::BLOCK_MAGIC_END) {
            // v01 files have no end record.
            break;
        }
        let BlockRead::Block(bh, body) = format::read_block(b, at as usize, magic) else {
            panic!("a bad block at {at}");
        };
        head.extend_from_slice(&bh.encode());
        head.extend_from_slice(body);
        at = format::next_block(at + 32 + body.len() as u64, format::IO_ALIGN as u32);
    }
    head
}

/// Buffered and O_DIRECT log files are the same format: a directory
/// written one way recovers the other way, and keeps going.
#[test]
fn buffered_and_direct_logs_recover_alike() {
    let dir = TempDir::new("bufdirect");
    let before = write_rows(dir.path(), opts().direct_io(false), true);
    assert_eq!(before.len(), 299);
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(dump(&db), before);
    let t = db.table("t").unwrap();
    db.worker()
        .unwrap()
        .run(|tx| tx.put(t, b"z", b"direct"))
        .unwrap();
    drop(db);
    let db = Database::open(dir.path(), opts().direct_io(false)).unwrap();
    assert_eq!(dump(&db).len(), 300);
}

/// Files of the first formats (v01: no alignment, blocks back to back;
/// pepoch version 1, manifest v01) still recover: rewrite a directory's
/// logs and checkpoint that way and compare.
#[test]
fn v01_files_still_recover() {
    use granary::durable::format::{self, Manifest, Pepoch, BLOCK_MAGIC_CKPT, BLOCK_MAGIC_LOG};
    let dir = TempDir::new("v01");
    // One checkpoint file, so it holds several blocks.
    let o = opts().checkpoint_threads(1).checkpoint_files_per_thread(1);
    let before = write_rows(dir.path(), o, true);
    let info = granary::durable::scan(dir.path()).unwrap();
    let (cdir, m) = info.checkpoint().expect("a checkpoint");
    let mut m: Manifest = m.clone();
    let cdir = cdir.to_path_buf();
    let pe_path = dir.path().join(format::PEPOCH_FILE);
    let mut pe = Pepoch::decode_file(&std::fs::read(&pe_path).unwrap()).unwrap();
    let ldir = dir.path().join("log.0");
    let mut converted = 0;
    for ent in std::fs::read_dir(&ldir).unwrap() {
        let path = ent.unwrap().path();
        let b = std::fs::read(&path).unwrap();
        let h = format::decode_log_file_header(&b).unwrap();
        assert_eq!(h.align as usize, format::IO_ALIGN);
        let mut v1 = b[..32].to_vec();
        v1[0..8].copy_from_slice(format::LOG_FILE_MAGIC_V1);
        v1[12..16].fill(0);
        let c = format::crc(&v1[0..28]);
        v1[28..32].copy_from_slice(&c.to_le_bytes());
        let durable = if h.generation == pe.positions[0].0 {
            pe.positions[0].1
        } else {
            b.len() as u64
        };
        let v1 = unpad(&b, v1, h.first_block(), durable, BLOCK_MAGIC_LOG);
        converted += usize::from(v1.len() > 32);
        if h.generation == pe.positions[0].0 {
            pe.positions[0].1 = v1.len() as u64;
        }
        std::fs::write(&path, &v1).unwrap();
    }
    assert!(converted > 0);
    assert_eq!(m.align as usize, format::IO_ALIGN);
    for (i, f) in m.files.iter_mut().enumerate() {
        let path = cdir.join(format::ckpt_part_name(i));
        let b = std::fs::read(&path).unwrap();
        let v1 = unpad(&b, Vec::new(), 0, b.len() as u64, BLOCK_MAGIC_CKPT);
        f.0 = v1.len() as u64;
        std::fs::write(&path, &v1).unwrap();
    }
    assert!(m.files[0].1 >= 2, "{m:?}");
    m.align = 0;
    std::fs::write(cdir.join(format::MANIFEST_FILE), m.encode()).unwrap();
    pe.version = 1;
    pe.seq += 1;
    let mut slots = pe.encode().to_vec();
    slots.extend_from_slice(&pe.encode());
    std::fs::write(&pe_path, &slots).unwrap();
    let info = granary::durable::scan(dir.path()).unwrap();
    assert_eq!(info.pepoch.empty_log_len(), 32);
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(dump(&db), before);
    // Once reopened, it writes v02 files and a version 2 pepoch.
    drop(db);
    let info = granary::durable::scan(dir.path()).unwrap();
    assert_eq!(info.pepoch.version, format::PEPOCH_VERSION);
}

#[test]
fn second_open_is_locked() {
    let dir = TempDir::new("lock");
    let db = Database::open(dir.path(), opts()).unwrap();
    match Database::open(dir.path(), opts()) {
        Err(Error::Locked(_)) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(db);
    Database::open(dir.path(), opts()).unwrap();
}

#[test]
fn logger_count_must_match() {
    let dir = TempDir::new("loggers");
    drop(Database::open(dir.path(), opts().loggers(2)).unwrap());
    let e = Database::open(dir.path(), opts()).unwrap_err();
    assert!(matches!(e, Error::InvalidOption(_)), "{e}");
    drop(Database::open(dir.path(), opts().loggers(2)).unwrap());
}

#[test]
fn checkpoint_then_more_log_recovers_exactly() {
    let dir = TempDir::new("ckpt");
    let before;
    {
        let db = Database::open(dir.path(), opts().wait_for_durable(false)).unwrap();
        let t = db.open_table("t").unwrap();
        let mut w = db.worker().unwrap();
        for i in 0u32..3000 {
            w.run(|tx| tx.put(t, &i.to_be_bytes(), &i.to_le_bytes()))
                .unwrap();
        }
        // Let the epoch move past the writes, so the checkpoint has them
        // (it skips records of its own epoch or later).
        let e = db.epoch();
        while db.epoch() < e + 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let c = db.checkpoint().unwrap();
        assert!(c.records == 3000, "{c:?}");
        for i in 0u32..3000 {
            if i % 3 == 0 {
                w.run(|tx| tx.delete(t, &i.to_be_bytes()).map(|_| ()))
                    .unwrap();
            } else if i % 3 == 1 {
                w.run(|tx| tx.put(t, &i.to_be_bytes(), b"new")).unwrap();
            }
        }
        db.wait_durable(w.commit_token()).unwrap();
        before = dump(&db);
        // A second checkpoint replaces the first.
        db.checkpoint().unwrap();
        let n = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("ckpt."))
            .count();
        assert_eq!(n, 1);
    }
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(dump(&db), before);
    assert!(db
        .durability_stats()
        .unwrap()
        .recovery
        .checkpoint_low
        .is_some());
}

#[test]
fn parallel_and_single_threaded_recovery_agree() {
    let dir = TempDir::new("equiv");
    {
        let db = Database::open(dir.path(), opts().wait_for_durable(false)).unwrap();
        let t = db.open_table("t").unwrap();
        std::thread::scope(|s| {
            for k in 0..2u64 {
                let db = &db;
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    for i in 0..20_000u64 {
                        let key = (i % 997).to_be_bytes();
                        w.run(|tx| tx.put(t, &key, &(i * 2 + k).to_be_bytes()))
                            .unwrap();
                        if i == 10_000 && k == 0 {
                            db.checkpoint().unwrap();
                        }
                    }
                    db.wait_durable(w.commit_token()).unwrap();
                });
            }
        });
    }
    let one = dump(&Database::open(dir.path(), opts().recovery_threads(1)).unwrap());
    let many = dump(&Database::open(dir.path(), opts().recovery_threads(4)).unwrap());
    assert_eq!(one.len(), 997);
    assert_eq!(one, many);
}

/// Recovery never reads the body of a log block its checkpoint supersedes
/// (SiloR §5.2), so damage there does not stop it; `inspect`'s full scan
/// still reports it.
#[test]
fn damage_in_a_block_the_checkpoint_supersedes_is_not_read() {
    for attempt in 0..5 {
        let dir = TempDir::new(&format!("superseded{attempt}"));
        {
            // Not waiting per commit keeps the writes within a few epochs
            // (a log file is rotated every 100).
            let db = Database::open(dir.path(), opts().wait_for_durable(false)).unwrap();
            let t = db.open_table("t").unwrap();
            let mut w = db.worker().unwrap();
            for i in 0u32..200 {
                w.run(|tx| tx.put(t, &i.to_be_bytes(), b"old")).unwrap();
            }
            // Let a few epochs pass, so the checkpoint's e_l is beyond them.
            std::thread::sleep(Duration::from_millis(20));
            db.checkpoint().unwrap();
            for i in 0u32..100 {
                w.run(|tx| tx.put(t, &i.to_be_bytes(), b"new")).unwrap();
            }
            db.wait_durable(w.commit_token()).unwrap();
        }
        let info = granary::durable::scan(dir.path()).unwrap();
        let low = info.checkpoint().expect("a checkpoint").1.low;
        // The first block of the current file (docs/FORMAT.md: it starts
        // at IO_ALIGN, after the padded file header; a block header is 32
        // bytes, its epoch at byte 8).
        let first = granary::durable::format::IO_ALIGN;
        let path = dir.path().join("log.0").join("data.log");
        let mut b = std::fs::read(&path).unwrap();
        if b.len() < first + 32 + 8 {
            continue;
        }
        let epoch = u64::from_le_bytes(b[first + 8..first + 16].try_into().unwrap());
        if epoch >= low {
            // A rotation put the early blocks in a file the checkpoint
            // deleted: try again.
            continue;
        }
        b[first + 32 + 4] ^= 0x01;
        std::fs::write(&path, &b).unwrap();
        let problems = granary::durable::scan(dir.path()).unwrap().problems;
        assert!(
            matches!(&problems[..], [p] if p.path == path
                && matches!(p.to_error(), Error::Corrupt { .. })),
            "{problems:?}"
        );
        let db = Database::open(dir.path(), opts()).unwrap();
        let rows = dump(&db);
        assert_eq!(rows.len(), 200);
        let new = rows.iter().filter(|r| r.2 == b"new").count();
        assert_eq!(new, 100);
        return;
    }
    panic!("no attempt left a superseded block in the current log file");
}

#[test]
fn damaged_files_follow_the_policy() {
    let dir = TempDir::new("damage");
    {
        let db = Database::open(dir.path(), opts()).unwrap();
        let t = db.open_table("t").unwrap();
        let mut w = db.worker().unwrap();
        for i in 0u32..200 {
            w.run(|tx| tx.put(t, &i.to_be_bytes(), b"v")).unwrap();
        }
    }
    let info = granary::durable::scan(dir.path()).unwrap();
    // The current file (an epoch boundary may have rotated the blocks
    // into an old_data file, all of which is durable prefix).
    let f = info
        .logs
        .iter()
        .find(|f| f.path.ends_with("data.log"))
        .expect("a current log file");
    let path = f.path.clone();
    let good = std::fs::read(&path).unwrap();

    // Garbage appended past the durable prefix is a tail: dropped.
    let mut tail = good.clone();
    tail.extend_from_slice(&[0xAB; 100]);
    std::fs::write(&path, &tail).unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(dump(&db).len(), 200);
    drop(db);

    // A flipped byte inside the durable prefix is an error, not a loss.
    let info = granary::durable::scan(dir.path()).unwrap();
    let f = info.logs.iter().find(|f| f.blocks > 0).unwrap();
    let mut bad = std::fs::read(&f.path).unwrap();
    // Payload byte 8 of the first block, which starts at IO_ALIGN.
    let first = granary::durable::format::IO_ALIGN;
    let at = first + 40;
    bad[at] ^= 0x01;
    std::fs::write(&f.path, &bad).unwrap();
    match Database::open(dir.path(), opts()) {
        Err(Error::Corrupt { .. }) => {}
        other => panic!("expected Corrupt, got {other:?}"),
    }
    bad[at] ^= 0x01;
    std::fs::write(&f.path, &bad).unwrap();

    // A durable prefix cut inside a block is an error too: data is
    // missing.
    std::fs::write(&f.path, &bad[..at]).unwrap();
    match Database::open(dir.path(), opts()) {
        Err(Error::Missing { path, .. }) if path == f.path => {}
        other => panic!(
            "expected Missing naming {}, got {other:?}",
            f.path.display()
        ),
    }
    std::fs::write(&f.path, &bad).unwrap();

    // A missing pepoch with logs present is an error.
    let pe = dir.path().join("pepoch");
    let pe_bytes = std::fs::read(&pe).unwrap();
    std::fs::remove_file(&pe).unwrap();
    assert!(matches!(
        Database::open(dir.path(), opts()),
        Err(Error::Missing { path, .. }) if path.ends_with("pepoch")
    ));
    // A torn newest pepoch slot (a crash while writing it: that e_p was
    // never published) falls back to the other slot's older e_p.
    std::fs::write(&pe, &pe_bytes).unwrap();
    let seq = |at: usize| u64::from_le_bytes(pe_bytes[at + 8..at + 16].try_into().unwrap());
    let newest = if seq(0) >= seq(512) { 0 } else { 512 };
    let mut torn = pe_bytes.clone();
    torn[newest + 16] ^= 0xFF;
    std::fs::write(&pe, &torn).unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    let n = dump(&db).len();
    assert!(n <= 200, "recovered {n} rows");
    drop(db);
}

/// 1000 rows in table `t`, a checkpoint, then `after` more rows.
fn checkpointed_rows(dir: &Path, after: u32) {
    let db = Database::open(dir, opts()).unwrap();
    let t = db.open_table("t").unwrap();
    let mut w = db.worker().unwrap();
    for i in 0u32..1000 {
        w.run(|tx| tx.put(t, &i.to_be_bytes(), b"v")).unwrap();
    }
    db.checkpoint().unwrap();
    for i in 1000..1000 + after {
        w.run(|tx| tx.put(t, &i.to_be_bytes(), b"w")).unwrap();
    }
}

#[test]
fn interrupted_checkpoint_is_ignored_and_damaged_one_is_an_error() {
    let dir = TempDir::new("ckptdamage");
    checkpointed_rows(dir.path(), 0);
    let ck = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("ckpt."))
        .unwrap()
        .path();
    // A half-written newer checkpoint (no manifest) is ignored and removed.
    let half = dir.path().join("ckpt.999999");
    std::fs::create_dir(&half).unwrap();
    std::fs::write(half.join("part.0"), b"partial").unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(dump(&db).len(), 1000);
    drop(db);
    assert!(!half.exists());
    // A damaged part of the complete checkpoint is an error.
    let part = ck.join("part.0");
    let mut b = std::fs::read(&part).unwrap();
    if b.len() > 50 {
        b[50] ^= 0x40;
        std::fs::write(&part, &b).unwrap();
        assert!(matches!(
            Database::open(dir.path(), opts()),
            Err(Error::Corrupt { .. })
        ));
    }
}

#[test]
fn damaged_log_is_reported_before_a_damaged_checkpoint() {
    // Recovery scans the logs while the checkpoint loads; whichever
    // finishes first, a damaged log is the error, as when the scan came
    // first.
    let dir = TempDir::new("bothdamage");
    checkpointed_rows(dir.path(), 200);
    let info = granary::durable::scan(dir.path()).unwrap();
    let log = info
        .logs
        .iter()
        .find(|f| f.blocks > 0)
        .unwrap()
        .path
        .clone();
    let (ck, _) = info.checkpoint().expect("a complete checkpoint");
    let part = ck.join("part.0");
    let flip = |p: &Path, at: usize| {
        let mut b = std::fs::read(p).unwrap();
        b[at] ^= 0x40;
        std::fs::write(p, &b).unwrap();
    };
    // The first log block's header (its magic).
    flip(&log, granary::durable::format::IO_ALIGN + 1);
    match Database::open(dir.path(), opts()) {
        Err(Error::Corrupt { path, .. }) => assert_eq!(path, log),
        other => panic!("expected Corrupt in {}, got {other:?}", log.display()),
    }
    flip(&part, 50);
    match Database::open(dir.path(), opts()) {
        Err(Error::Corrupt { path, .. }) => assert_eq!(path, log),
        other => panic!("expected Corrupt in {}, got {other:?}", log.display()),
    }
    // With the log mended, the checkpoint's damage is the error.
    flip(&log, granary::durable::format::IO_ALIGN + 1);
    match Database::open(dir.path(), opts()) {
        Err(Error::Corrupt { path, .. }) => assert_eq!(path, part),
        other => panic!("expected Corrupt in {}, got {other:?}", part.display()),
    }
}

#[test]
fn torn_catalog_entry_is_cut_before_the_next_table() {
    let dir = TempDir::new("torncat");
    drop(Database::open(dir.path(), opts()).unwrap().open_table("a"));
    // A create_table whose catalog write did not finish.
    let cat = dir.path().join("tables");
    let mut b = std::fs::read(&cat).unwrap();
    b.extend_from_slice(&[9, 0, 0, 0, 1, 2]);
    std::fs::write(&cat, &b).unwrap();
    {
        let db = Database::open(dir.path(), opts()).unwrap();
        assert_eq!(db.tables().len(), 1);
        db.create_table("b").unwrap();
    }
    let db = Database::open(dir.path(), opts()).unwrap();
    let names: Vec<String> = db.tables().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "b"]);
    // A whole entry with a bad checksum is damage, not a torn write.
    drop(db);
    let mut b = std::fs::read(&cat).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&cat, &b).unwrap();
    assert!(matches!(
        Database::open(dir.path(), opts()),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn long_table_names_are_refused() {
    let dir = TempDir::new("longname");
    let db = Database::open(dir.path(), opts()).unwrap();
    let e = db.create_table(&"x".repeat(granary::MAX_TABLE_NAME_BYTES + 1));
    assert!(matches!(e, Err(Error::TableNameTooLong { .. })), "{e:?}");
}

#[test]
fn an_older_complete_checkpoint_left_by_a_crash_is_removed() {
    let dir = TempDir::new("oldckpt");
    {
        let db = Database::open(dir.path(), opts()).unwrap();
        let t = db.open_table("t").unwrap();
        db.worker()
            .unwrap()
            .run(|tx| tx.put(t, b"k", b"v"))
            .unwrap();
        db.checkpoint().unwrap();
    }
    let ckpts = |d: &Path| {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("ckpt.")
            })
            .collect();
        v.sort();
        v
    };
    let only = ckpts(dir.path());
    assert_eq!(only.len(), 1);
    // Pretend a crash interrupted the deletion of an older checkpoint.
    let old = dir.path().join("ckpt.0");
    std::fs::create_dir(&old).unwrap();
    for e in std::fs::read_dir(&only[0]).unwrap().flatten() {
        std::fs::copy(e.path(), old.join(e.file_name())).unwrap();
    }
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(dump(&db).len(), 1);
    drop(db);
    assert_eq!(ckpts(dir.path()), only);
}

/// A crash in the middle of deleting an old checkpoint or log file (which
/// is renamed to `<name>.deleting`, then cut down step by step) leaves
/// half-deleted files that recovery ignores and removes.
#[test]
fn half_deleted_files_left_by_a_crash_are_removed() {
    let dir = TempDir::new("deleting");
    let before = write_rows(dir.path(), opts(), true);
    // A cut-down checkpoint part and log file, as `remove_paced` leaves them.
    let ck = dir.path().join("ckpt.1.deleting");
    std::fs::create_dir(&ck).unwrap();
    std::fs::write(ck.join("part.0"), b"GRCB half a block").unwrap();
    let log = dir.path().join("log.0").join("old_data.3.g0.deleting");
    std::fs::write(&log, b"GRLOGv02 and then nothing").unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    assert_eq!(dump(&db), before);
    drop(db);
    assert!(!ck.exists() && !log.exists());
}

/// After a checkpoint, the previous checkpoint and the logs wholly below
/// its e_l are gone, with no `.deleting` leftovers.
#[test]
fn checkpoints_delete_what_they_supersede() {
    let dir = TempDir::new("supersede");
    let db = Database::open(dir.path(), opts().wait_for_durable(false)).unwrap();
    let t = db.open_table("t").unwrap();
    let mut w = db.worker().unwrap();
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    for round in 0u32..3 {
        for i in 0u32..100 {
            w.run(|tx| tx.put(t, &i.to_be_bytes(), &round.to_be_bytes()))
                .unwrap();
        }
        db.wait_durable(w.commit_token()).unwrap();
        // Let the log rotate (every 100 epochs of 2 ms).
        std::thread::sleep(Duration::from_millis(250));
        db.checkpoint().unwrap();
    }
    let top = names(dir.path());
    assert_eq!(
        top.iter().filter(|n| n.starts_with("ckpt.")).count(),
        1,
        "{top:?}"
    );
    let logs = names(&dir.path().join("log.0"));
    assert!(
        top.iter().chain(&logs).all(|n| !n.ends_with(".deleting")),
        "{top:?} {logs:?}"
    );
    let info = granary::durable::scan(dir.path()).unwrap();
    let low = info.checkpoint().unwrap().1.low;
    for f in &info.logs {
        if let Some(m) = f.max_epoch {
            if !f.path.ends_with("data.log") {
                assert!(m >= low, "{} is wholly below e_l {low}", f.path.display());
            }
        }
    }
    drop(w);
    drop(db);
    let db = Database::open(dir.path(), opts()).unwrap();
    let rows = dump(&db);
    assert_eq!(rows.len(), 100);
    assert!(rows.iter().all(|r| r.2 == 2u32.to_be_bytes()));
}

/// A closed log file deleted while the database runs (not by granary) is
/// not papered over by the next checkpoint: its generation stays needed,
/// and the next open reports it.
#[test]
fn a_log_file_deleted_while_open_is_reported_after_a_checkpoint() {
    let dir = TempDir::new("deleted-while-open");
    let db = Database::open(dir.path(), opts()).unwrap();
    let t = db.open_table("t").unwrap();
    let mut w = db.worker().unwrap();
    let ldir = dir.path().join("log.0");
    let closed = || {
        std::fs::read_dir(&ldir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("old_data.")
            })
    };
    let mut i = 0u32;
    // Write until the log rotates (every 100 epochs of 2 ms).
    let victim = loop {
        w.run(|tx| tx.put(t, &i.to_be_bytes(), b"v")).unwrap();
        i += 1;
        if let Some(p) = closed() {
            break p;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    std::fs::remove_file(&victim).unwrap();
    db.checkpoint().unwrap();
    drop(w);
    drop(db);
    match Database::open(dir.path(), opts()) {
        Err(Error::Missing { path, what }) => {
            assert!(path.ends_with("log.0"), "{}: {what}", path.display());
            assert!(what.contains("generation"), "{what}");
        }
        other => panic!("expected Missing, got {other:?}"),
    }
}
