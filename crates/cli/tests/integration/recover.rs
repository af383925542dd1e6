//! `granary inspect` and `granary recover [--salvage]` on a damaged
//! directory, end to end: inspect lists the problem in the words `open`
//! uses and fails; a strict recover refuses and leaves nothing behind; a
//! salvage recovers a copy that opens strictly, reports the epochs lost,
//! and leaves the original untouched.

use crate::common;
use crate::common::{granary, text};

use std::path::{Path, PathBuf};
use std::time::Duration;

use granary::{Database, Options};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Rows 0..100, then (after a log rotation) rows 100..200, one durable
/// transaction each, in a directory with fast epochs; then more rows until
/// the current log file holds a block (on a loaded machine the log may
/// have rotated again just before the end). Returns how many rows.
fn make(dir: &Path) -> u32 {
    let db = Database::open(
        dir,
        Options::default().epoch_interval(Duration::from_millis(2)),
    )
    .unwrap();
    let t = db.open_table("t").unwrap();
    let mut w = db.worker().unwrap();
    for i in 0u32..200 {
        if i == 100 {
            // 100 epochs of 2 ms: the log rotates.
            std::thread::sleep(Duration::from_millis(300));
        }
        w.run(|tx| tx.put(t, &i.to_be_bytes(), b"v")).unwrap();
    }
    let current = dir.join("log.0").join("data.log");
    let mut n = 200u32;
    while std::fs::metadata(&current).map_or(0, |m| m.len()) <= 4096 {
        assert!(n < 10_000, "the current log never held a block");
        w.run(|tx| tx.put(t, &n.to_be_bytes(), b"v")).unwrap();
        n += 1;
    }
    n
}

fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push((e.path(), std::fs::read(e.path()).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn inspect_and_recover_a_cut_log() {
    let base = scratch("cut");
    let db = base.join("db");
    let written = make(&db);
    let ok = granary(&["inspect", s(&db)]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(
        !text(&ok.stdout).contains("problems"),
        "{}",
        text(&ok.stdout)
    );

    // Cut the current log file (the last rows, after a rotation) back to
    // its header: the pepoch says blocks of it were durable. (Not to a
    // fixed block count: on a loaded machine the log may rotate again
    // and leave the current file a single block.)
    let victim = db.join("log.0").join("data.log");
    assert!(
        std::fs::read_dir(db.join("log.0"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("old_data.")),
        "the log did not rotate"
    );
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .unwrap();
    assert!(
        f.metadata().unwrap().len() > 4096,
        "the current log holds no block"
    );
    f.set_len(4096).unwrap();
    drop(f);
    let before = files(&db);

    let bad = granary(&["inspect", s(&db)]);
    let out = text(&bad.stdout);
    assert_eq!(bad.status.code(), Some(2), "{out}");
    assert!(out.contains("problems"), "{out}");
    assert!(out.contains("cut short"), "{out}");
    assert!(
        text(&bad.stderr).contains("--salvage"),
        "{}",
        text(&bad.stderr)
    );
    let json = granary(&["inspect", "--json", s(&db)]);
    let v: Value = serde_json::from_slice(&json.stdout).expect("inspect JSON");
    let problems = v["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 1, "{v}");
    assert!(
        problems[0]["path"]
            .as_str()
            .unwrap()
            .ends_with(&*victim.file_name().unwrap().to_string_lossy()),
        "{v}"
    );
    // The same words as a strict open.
    let e = Database::open(&db, Options::default()).unwrap_err();
    assert_eq!(problems[0]["error"].as_str().unwrap(), e.to_string());

    let out = base.join("strict");
    let r = granary(&["recover", s(&db), s(&out)]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        text(&r.stderr).contains("durable data is missing"),
        "{}",
        text(&r.stderr)
    );
    // The missing data is missing in DIR: the message names DIR's file,
    // not the copy's (which is gone).
    assert!(
        text(&r.stderr).contains(&*victim.to_string_lossy())
            && !text(&r.stderr).contains(&*out.to_string_lossy()),
        "{}",
        text(&r.stderr)
    );
    assert!(!out.exists(), "a failed recover left its copy");

    let out = base.join("salvaged");
    let r = granary(&["recover", "--salvage", "--json", s(&db), s(&out)]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let v: Value = serde_json::from_slice(&r.stdout).expect("recover JSON");
    let through = v["recovered_through_epoch"].as_u64().unwrap();
    let lost = &v["lost_epochs"];
    assert_eq!(lost["first"].as_u64(), Some(through + 1), "{v}");
    assert_eq!(lost["last"].as_u64(), v["pepoch"].as_u64(), "{v}");
    assert_eq!(v["problems"].as_array().unwrap().len(), 1, "{v}");
    let problem = v["problems"][0].as_str().unwrap();
    assert!(problem.contains(&*victim.to_string_lossy()), "{v}");

    // The original is untouched; the copy opens strictly, with a prefix
    // of the rows (they were written in order, one per transaction).
    assert_eq!(files(&db), before, "recover changed its source");
    let copy = Database::open(&out, Options::default()).unwrap();
    let t = copy.open_table("t").unwrap();
    let rows = copy
        .worker()
        .unwrap()
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
    // The closed file holds the first 100 rows, and its end record says
    // so: salvage keeps them, and loses what the cut took.
    assert!(
        (100..written as usize).contains(&rows.len()),
        "{} rows of {written}",
        rows.len()
    );
    for (i, (k, _)) in rows.iter().enumerate() {
        assert_eq!(k[..], (i as u32).to_be_bytes(), "not a prefix");
    }
    drop(copy);
    let again = granary(&["inspect", s(&out)]);
    assert!(again.status.success(), "{}", text(&again.stdout));

    // OUT must be new.
    let r = granary(&["recover", s(&db), s(&out)]);
    assert_eq!(r.status.code(), Some(2));
    assert!(text(&r.stderr).contains("not an empty directory"));
    let _ = std::fs::remove_dir_all(&base);
}

fn scratch(test: &str) -> PathBuf {
    common::scratch("recover", test)
}
