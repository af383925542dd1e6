//! The classic anomalies again, with every transaction a [`Procedure`]
//! with declared read and write sets, run the way a design's clients run
//! procedures: in place on a design of the runner shape (window 1, through
//! [`TxRunner::try_run_declared`]), and handed over with
//! [`TxRunner::submit`] and collected with [`TxRunner::poll`] on a
//! pipelined one (BOHM, bohm-vldb15 §3: sequenced into batches, planned by
//! the concurrency-control threads, run by the execution threads). So the
//! anomaly tests reach a pipelined design's planner and executor, which a
//! closure (run alone, with the pipeline held) never does; and they reach
//! the declared paths of the other designs (ordered 2PL's locks taken up
//! front, Partitioned-Store's partitions).

use std::sync::Barrier;

use granary_api::{Body, Engine, Error, Procedure, TableId, TableOptions, Tx, TxError, TxRunner};

use crate::support::{dec, enc, stress};

/// Run the procedures in `ps` through `w` and return each one's output,
/// in order. On a pipelined design all are in flight at once (so they
/// may share a batch); on any other, each runs in place, retried until it
/// commits.
///
/// # Panics
/// If a procedure fails or rolls itself back, or the design gives up
/// retrying it.
pub fn run_all<R: TxRunner, B: Body>(w: &mut R, ps: Vec<Box<Procedure<B>>>) -> Vec<B::Output> {
    let n = ps.len();
    let mut out: Vec<Option<B::Output>> = (0..n).map(|_| None).collect();
    if w.window() > 1 {
        for (i, mut p) in ps.into_iter().enumerate() {
            // The kind carries the position: procedures come back in any order.
            p.kind = i;
            w.submit(p).expect("submit");
        }
        let mut done: Vec<granary_api::Done<B>> = Vec::new();
        let mut left = n;
        while left > 0 {
            w.poll(true, &mut done).expect("poll");
            for d in done.drain(..) {
                let v = d
                    .outcome
                    .expect("a procedure failed")
                    .expect("a procedure rolled itself back");
                out[d.procedure.kind] = Some(v);
                left -= 1;
            }
        }
    } else {
        for (i, mut p) in ps.into_iter().enumerate() {
            let (d, body) = p.parts();
            let v =
                granary_workloads::driver::run_until_committed_declared(w, d, |tx| body.run(tx))
                    .expect("a procedure did not commit");
            out[i] = Some(v);
        }
    }
    out.into_iter()
        .map(|v| v.expect("every procedure came back"))
        .collect()
}

/// A procedure over `body`, with `reads` and `writes` declared in table `t`.
fn procedure<B: Body>(t: TableId, reads: &[&[u8]], writes: &[&[u8]], body: B) -> Box<Procedure<B>> {
    let mut p = Procedure::new(0, body);
    for k in reads {
        p.declared.read(t, k);
    }
    for k in writes {
        p.declared.write(t, k);
    }
    p.planned = true;
    p
}

/// Silo Fig. 3's transactions: read `from`, write `to` = `from` + 1; or
/// (`check`) read both, reset both to 0 and return what was read.
struct Fig3 {
    t: TableId,
    from: &'static [u8],
    to: &'static [u8],
    check: bool,
}

impl Body for Fig3 {
    type Output = (u64, u64);

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<(u64, u64), TxError> {
        if self.check {
            let x = tx.get(self.t, b"x")?.map_or(0, dec);
            let y = tx.get(self.t, b"y")?.map_or(0, dec);
            tx.put(self.t, b"x", &enc(0))?;
            tx.put(self.t, b"y", &enc(0))?;
            return Ok((x, y));
        }
        let v = tx.get(self.t, self.from)?.map_or(0, dec);
        tx.put(self.t, self.to, &enc(v + 1))?;
        Ok((v, 0))
    }
}

/// [`crate::anomalies::fig3_never_both_one`] with procedures: each round,
/// two clients each run one of T1 (x → y) and T2 (y → x), at the same
/// time; and a third client runs T1 and T2 together (on a pipelined
/// design, in one batch). x = y = 1 must never follow.
pub fn fig3_never_both_one<E: Engine>(make: impl Fn() -> E) {
    let db = make();
    let t = db
        .create_table_with("t", TableOptions::point_lookups())
        .unwrap();
    let rounds = 300 * stress();
    let barrier = Barrier::new(3);
    let fig3 = |from, to| {
        procedure(
            t,
            &[from],
            &[to],
            Fig3 {
                t,
                from,
                to,
                check: false,
            },
        )
    };
    let check = || {
        procedure(
            t,
            &[b"x", b"y"],
            &[b"x", b"y"],
            Fig3 {
                t,
                from: b"x",
                to: b"y",
                check: true,
            },
        )
    };
    std::thread::scope(|s| {
        for (from, to) in [(&b"x"[..], &b"y"[..]), (b"y", b"x")] {
            let (db, barrier) = (&db, &barrier);
            s.spawn(move || {
                let mut w = db.runner().unwrap();
                for _ in 0..rounds {
                    barrier.wait();
                    run_all(&mut w, vec![fig3(from, to)]);
                    barrier.wait();
                    barrier.wait();
                }
            });
        }
        // Rounds run to the end whatever they find, so that no client is
        // left waiting at the barrier; the anomaly fails the test after.
        let mut w = db.runner().unwrap();
        let mut both_one = 0;
        for _ in 0..rounds {
            barrier.wait();
            barrier.wait();
            both_one += (run_all(&mut w, vec![check()])[0] == (1, 1)) as u64;
            barrier.wait();
        }
        assert_eq!(both_one, 0, "Fig. 3 anomaly: x = y = 1 (two clients)");
        for _ in 0..rounds {
            run_all(&mut w, vec![fig3(b"x", b"y"), fig3(b"y", b"x")]);
            let (x, y) = run_all(&mut w, vec![check()])[0];
            assert_ne!(
                (x, y),
                (1, 1),
                "Fig. 3 anomaly: x = y = 1 (one client, together)"
            );
        }
    });
}

/// Write skew's doctors: go off call (`me`) if `other` is on; put both on
/// call; or count those on call.
enum Doctors {
    OffIfOtherOn {
        me: &'static [u8],
        other: &'static [u8],
    },
    BothOn,
    Count,
}

struct OnCall(TableId, Doctors);

impl Body for OnCall {
    type Output = u32;

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<u32, TxError> {
        let t = self.0;
        match self.1 {
            Doctors::OffIfOtherOn { me, other } => {
                if tx.get(t, other)?.is_some_and(|v| v == b"on") {
                    tx.put(t, me, b"off")?;
                }
                Ok(0)
            }
            Doctors::BothOn => {
                tx.put(t, b"alice", b"on")?;
                tx.put(t, b"bob__", b"on")?;
                Ok(2)
            }
            Doctors::Count => {
                let a = tx.get(t, b"alice")?.is_some_and(|v| v == b"on");
                let b = tx.get(t, b"bob__")?.is_some_and(|v| v == b"on");
                Ok(a as u32 + b as u32)
            }
        }
    }
}

/// [`crate::anomalies::write_skew_never_commits`] with procedures: the two
/// doctors' transactions from two clients at once, and from one client
/// together (one batch on a pipelined design). Both off call must never
/// follow.
pub fn write_skew_never_commits<E: Engine>(make: impl Fn() -> E) {
    let db = make();
    let t = db
        .create_table_with("oncall", TableOptions::point_lookups())
        .unwrap();
    let rounds = 300 * stress();
    let barrier = Barrier::new(3);
    let both: [&[u8]; 2] = [b"alice", b"bob__"];
    let off = |me: &'static [u8], other: &'static [u8]| {
        procedure(
            t,
            &[other],
            &[me],
            OnCall(t, Doctors::OffIfOtherOn { me, other }),
        )
    };
    let set = || procedure(t, &[], &both, OnCall(t, Doctors::BothOn));
    let count = || procedure(t, &both, &[], OnCall(t, Doctors::Count));
    std::thread::scope(|s| {
        for (me, other) in [(&b"alice"[..], &b"bob__"[..]), (b"bob__", b"alice")] {
            let (db, barrier) = (&db, &barrier);
            s.spawn(move || {
                let mut w = db.runner().unwrap();
                for _ in 0..rounds {
                    barrier.wait();
                    run_all(&mut w, vec![off(me, other)]);
                    barrier.wait();
                }
            });
        }
        // As in Fig. 3: every round runs, then the test fails.
        let mut w = db.runner().unwrap();
        let mut skewed = 0;
        for _ in 0..rounds {
            run_all(&mut w, vec![set()]);
            barrier.wait();
            barrier.wait();
            skewed += (run_all(&mut w, vec![count()])[0] == 0) as u64;
        }
        assert_eq!(
            skewed, 0,
            "write skew: both doctors went off call (two clients)"
        );
        for _ in 0..rounds {
            run_all(&mut w, vec![set()]);
            run_all(
                &mut w,
                vec![off(b"alice", b"bob__"), off(b"bob__", b"alice")],
            );
            let on = run_all(&mut w, vec![count()])[0];
            assert!(
                on >= 1,
                "write skew: both doctors went off call (one client, together)"
            );
        }
    });
}

/// Increment the counter `n` (read, then write one more).
struct Bump(TableId);

impl Body for Bump {
    type Output = ();

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<(), TxError> {
        let v = tx.get(self.0, b"n")?.map_or(0, dec);
        tx.put(self.0, b"n", &enc(v + 1))
    }
}

/// [`crate::anomalies::counter_increments_add_up`] with procedures: 4
/// clients increment one counter, each keeping up to 16 procedures in
/// flight on a pipelined design (so a batch holds chains of increments of
/// one key, each reading the one before). No increment is lost.
pub fn counter_increments_add_up<E: Engine>(make: impl Fn() -> E) -> Result<(), Error> {
    let db = make();
    let t = db.create_table_with("c", TableOptions::point_lookups())?;
    let (clients, rounds, burst) = (4u64, 200 * stress(), 16u64);
    std::thread::scope(|s| {
        for _ in 0..clients {
            let db = &db;
            s.spawn(move || {
                let mut w = db.runner().unwrap();
                for _ in 0..rounds {
                    let ps = (0..burst)
                        .map(|_| procedure(t, &[b"n"], &[b"n"], Bump(t)))
                        .collect();
                    run_all(&mut w, ps);
                }
            });
        }
    });
    let mut w = db.runner()?;
    let n = crate::support::run(&mut w, |tx| Ok(tx.get(t, b"n")?.map_or(0, dec)))?;
    assert_eq!(n, clients * rounds * burst, "lost increments");
    Ok(())
}
