//! Races in the durable engine that need no failpoints:
//! * log buffer backpressure must not deadlock: a worker whose buffers are
//!   all in flight waits for its logger to recycle one, and the logger
//!   must be able to make progress meanwhile;
//! * a reopened database must start its epochs after everything it
//!   recovered, even while the epoch thread is ticking.

use std::sync::mpsc;
use std::time::Duration;

use granary::{Database, Options};

use crate::common::TempDir;

/// Run `f` on a thread; fail (instead of hanging) if it takes too long.
fn within(limit: Duration, what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: no progress in {limit:?} (deadlock?)")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the thread panicked"),
    }
}

fn commit_many(buffers: usize, loggers: usize, wait: bool) {
    let dir = TempDir::new(&format!("backpressure-{buffers}-{loggers}-{wait}"));
    let opts = Options::default()
        .epoch_interval(Duration::from_millis(1))
        .loggers(loggers)
        .log_buffers_per_worker(buffers)
        .wait_for_durable(wait);
    let db = Database::open(dir.path(), opts.clone()).unwrap();
    let t = db.open_table("t").unwrap();
    std::thread::scope(|s| {
        for k in 0..2u64 {
            let db = &db;
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let start = std::time::Instant::now();
                let mut i = 0u64;
                while start.elapsed() < Duration::from_millis(300) {
                    w.run(|tx| tx.put(t, &(k << 32 | i).to_be_bytes(), &[7u8; 100]))
                        .unwrap();
                    i += 1;
                }
                db.wait_durable(w.commit_token()).unwrap();
            });
        }
    });
    drop(db);
    drop(Database::open(dir.path(), opts).unwrap());
}

#[test]
fn two_buffers_without_waiting() {
    within(Duration::from_secs(30), "2 buffers, no wait", || {
        commit_many(2, 1, false)
    });
}

#[test]
fn two_buffers_two_loggers_without_waiting() {
    within(
        Duration::from_secs(30),
        "2 buffers, 2 loggers, no wait",
        || commit_many(2, 2, false),
    );
}

#[test]
fn two_buffers_waiting() {
    within(Duration::from_secs(30), "2 buffers, wait", || {
        commit_many(2, 1, true)
    });
}

#[test]
fn default_buffers_without_waiting() {
    within(Duration::from_secs(30), "8 buffers, no wait", || {
        commit_many(8, 1, false)
    });
}

/// After recovery the global epoch is raised past e_p (and past every
/// epoch found on disk). If the epoch thread's tick overwrites that raise,
/// new commits land in old epochs: at or below e_p (acknowledged before
/// they are written) and below the checkpoint's e_l (skipped by the next
/// recovery). Many worker slots make each tick slow, so the raise almost
/// always races with one.
#[test]
fn reopen_starts_after_the_durable_epoch() {
    within(Duration::from_secs(120), "reopen epochs", || {
        let dir = TempDir::new("reopen-epoch");
        let opts = Options::default()
            .epoch_interval(Duration::from_millis(1))
            .max_workers(1 << 16);
        {
            let db = Database::open(dir.path(), opts.clone()).unwrap();
            let t = db.open_table("t").unwrap();
            let mut w = db.worker().unwrap();
            let start = std::time::Instant::now();
            let mut i = 0u32;
            while start.elapsed() < Duration::from_millis(400) {
                w.run(|tx| tx.put(t, &i.to_be_bytes(), b"old")).unwrap();
                i += 1;
            }
            db.checkpoint().unwrap();
        }
        for round in 0..5u32 {
            let db = Database::open(dir.path(), opts.clone()).unwrap();
            let (e, ep) = (db.epoch(), db.durable_epoch().unwrap());
            let t = db.table("t").unwrap();
            let key = format!("new-{round}");
            db.worker()
                .unwrap()
                .run(|tx| tx.put(t, key.as_bytes(), b"v"))
                .unwrap();
            drop(db);
            let db = Database::open(dir.path(), opts.clone()).unwrap();
            let got = db
                .worker()
                .unwrap()
                .run(|tx| Ok(tx.get(t, key.as_bytes())?.is_some()))
                .unwrap();
            assert!(
                e > ep,
                "round {round}: after reopening, the global epoch {e} is not past e_p {ep} \
                 (acknowledged write recovered: {got})"
            );
            assert!(got, "round {round}: an acknowledged write was lost");
        }
    });
}
