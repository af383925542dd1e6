//! The queue workload on Silo: queues keep exactly their items through a
//! run (two runs, so the heads carry over), the per-second memory series
//! is recorded, and the check catches a lost or a stray item.

use std::time::Duration;

use granary::{Database, Options};
use granary_workloads::driver::{run, DriverConfig, Workload};
use granary_workloads::queue::{key, Queue, QueueConfig, TABLE};

fn config() -> QueueConfig {
    QueueConfig {
        queues: 2,
        live: 500,
        value_bytes: 16,
    }
}

fn drive(w: &Queue, db: &Database) -> granary_workloads::driver::RunReport {
    let cfg = DriverConfig {
        threads: 2,
        warmup: Duration::from_millis(50),
        duration: Duration::from_millis(1100),
        seed: 1,
        latency_every: 1,
        breakdown: false,
    };
    run(w, db, &cfg, &|_, _, _| {}).expect("run")
}

#[test]
fn queues_keep_their_items_and_the_check_catches_strays() {
    let db =
        Database::new(Options::default().epoch_interval(Duration::from_millis(5))).expect("db");
    let mut w = Queue::new(config()).expect("config");
    w.load(&db, &|_, _| {}).expect("load");
    let mut commits = 0;
    for _ in 0..2 {
        let r = drive(&w, &db);
        assert!(
            r.invariant_violations.is_empty(),
            "{:#?}",
            r.invariant_violations
        );
        assert!(r.commits > 1000, "{}", r.commits);
        assert!(!r.rss_per_second.is_empty() || !cfg!(target_os = "linux"));
        commits += r.commits;
    }
    assert!(commits > 2000);
    // A stray item past queue 1's tail, and queue 0's head removed.
    let t = db.table(TABLE).expect("table");
    let mut r = db.worker().expect("worker");
    r.run(|tx| tx.insert(t, &key(1, (1 << 47) + 3), &[0; 16]))
        .expect("insert");
    let bad = w.verify(&db).expect("verify");
    assert_eq!(bad.len(), 1, "{bad:#?}");
    assert!(
        bad[0].contains("queue 1: 1 items past its tail"),
        "{bad:#?}"
    );
    let mut head = None;
    r.run(|tx| {
        tx.scan(
            t,
            std::ops::Bound::Included(&key(0, 0)[..]),
            std::ops::Bound::Unbounded,
            1,
            false,
            |k, _| {
                head = Some(k.to_vec());
                false
            },
        )
    })
    .expect("scan");
    let head = head.expect("queue 0 has items");
    r.run(|tx| tx.delete(t, &head)).expect("delete");
    let bad = w.verify(&db).expect("verify");
    assert!(
        bad.iter().any(|b| b.starts_with("queue 0: items")),
        "{bad:#?}"
    );
}

#[test]
fn bad_parameters_are_refused() {
    for (c, what) in [
        (
            QueueConfig {
                queues: 0,
                ..config()
            },
            "queues",
        ),
        (
            QueueConfig {
                live: 0,
                ..config()
            },
            "live",
        ),
        (
            QueueConfig {
                value_bytes: 7,
                ..config()
            },
            "value bytes",
        ),
    ] {
        let e = Queue::new(c).err().expect("refused").to_string();
        assert!(e.contains(what), "{e}");
    }
}
