//! `granary bench queue` end to end: its memory line and series, and its
//! refusals.

use crate::common::{granary, scratch, text};

#[test]
fn a_run_reports_memory_each_second_and_keeps_its_queues() {
    let dir = scratch("queue", "memory");
    let json = dir.join("q.json");
    let o = granary(&[
        "bench",
        "queue",
        "--threads",
        "2",
        "--live",
        "2000",
        "--seconds",
        "2",
        "--warmup",
        "0",
        "--seed",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(out.contains("invariants: all hold"), "{out}");
    assert!(out.contains("queue memory: live items"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rss = v["result"]["rss_per_second"].as_array().unwrap();
    assert_eq!(rss.len(), 2, "{v}");
    assert!(rss.iter().all(|b| b.as_u64().unwrap() > 0), "{v}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bohm_and_bad_sizes_are_refused_with_reasons() {
    let o = granary(&["bench", "queue", "--protocol", "bohm"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("cannot run `bench queue`"),
        "{}",
        text(&o.stderr)
    );
    let o = granary(&["bench", "queue", "--value-bytes", "4"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--value-bytes: value bytes must be at least 8"));
}

/// With several protocols every database is loaded before any run, so the
/// process's resident set is all of them: each protocol's memory must be
/// its own database's, and the queue line each protocol's.
#[test]
fn each_protocol_reports_its_own_database_memory() {
    let dir = scratch("queue", "per-protocol");
    let json = dir.join("q.json");
    let o = granary(&[
        "bench",
        "queue",
        "--protocol",
        "silo,hekaton,silo",
        "--threads",
        "2",
        "--live",
        "100000",
        "--seconds",
        "1",
        "--warmup",
        "0",
        "--seed",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(out.contains("with 3 databases loaded"), "{out}");
    for who in ["silo (#1)", "hekaton", "silo (#3)"] {
        assert!(
            out.contains(&format!("queue memory ({who}): live items")),
            "{out}"
        );
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let each = v["protocols"].as_array().expect("protocols");
    let mut own = Vec::new();
    for s in each {
        let process = s["result"]["rss_bytes"].as_i64().unwrap();
        let mine = s["database_bytes"].as_i64().expect("database_bytes");
        assert_eq!(s["result"]["databases_loaded"], 3, "{s}");
        // 100k items of 100 bytes in each of 2 queues: about 20 MB live.
        assert!(mine > 10 << 20, "{mine} bytes for 20 MB of items: {v}");
        own.push(mine);
        assert!(mine < process, "{mine} of {process}: {v}");
    }
    // Three databases of about the same size: together, no more than the
    // process holds.
    let last = each[2]["result"]["rss_bytes"].as_i64().unwrap();
    assert!(
        own.iter().sum::<i64>() <= last,
        "{own:?} against {last}: {v}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
