//! `granary bench queue` end to end: its memory line and series, and its
//! refusals.

mod common;
use common::{granary, scratch, text};

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
