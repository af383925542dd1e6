//! Deuteronomy's transaction component under the
//! checker: the contended check workloads (bank's audits scan), recorded
//! on 4 threads, give serializable histories, and the runs contended for
//! real (timestamp order aborted some attempts); a mutant whose writers
//! ignore read timestamps is caught (`mutant` builds). Seeds print and
//! replay with GRANARY_SEED=N.

use granary_check::{check, Level};
use granary_protocols::deuteronomy::dc::MemoryDc;
use granary_protocols::deuteronomy::tc::{self, Tc};
use granary_workloads::check::{run_check, CheckConfig, CheckWorkload};

fn seed() -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000
        });
    eprintln!("seed {s} (replay with GRANARY_SEED={s})");
    s
}

#[test]
fn check_workloads_are_serializable() {
    let seed = seed();
    for w in CheckWorkload::ALL {
        let mut met = false;
        for attempt in 0..10 {
            let mut cfg = CheckConfig::new(w);
            cfg.txns = 10_000;
            cfg.seed = seed + attempt;
            let run = run_check(&Tc::new(), &cfg, &|_| {}).expect("run");
            assert!(
                run.violations(true).is_empty(),
                "{w}: {:?}",
                run.violations(true)
            );
            let report = check(&run.history, Level::Serializable);
            assert!(
                report.is_ok(),
                "{w} (seed {}):\n{report}\n{}",
                cfg.seed,
                report.explain(&run.history)
            );
            eprintln!("{w}: {} committed, {} aborted", run.committed, run.aborted);
            // write-skew's two reads and a write may run 10k without
            // meeting on 2 cores; the others must conflict.
            if run.aborted > 0 || w == CheckWorkload::WriteSkew {
                met = true;
                break;
            }
        }
        assert!(
            met,
            "{w}: no attempt ever aborted in 10 runs: nothing contended"
        );
    }
}

/// The mutant TC (writers ignore read timestamps) is caught: some run of
/// a point workload shows a cycle. The test above is not one that cannot
/// fail.
#[cfg(feature = "mutant")]
#[test]
fn the_mutant_is_caught() {
    let seed = seed();
    let caught = (0..20).find_map(|attempt| {
        [CheckWorkload::Ycsb, CheckWorkload::ListAppend]
            .into_iter()
            .find_map(|w| {
                let mut cfg = CheckConfig::new(w);
                cfg.txns = 10_000;
                cfg.seed = seed + attempt;
                let run = run_check(&Tc::mutant_ignoring_reads(), &cfg, &|_| {}).expect("run");
                let report = check(&run.history, Level::Serializable);
                (!report.is_ok()).then(|| format!("{w} (seed {}):\n{report}", cfg.seed))
            })
    });
    let caught = caught.expect("the mutant TC gave serializable histories in 20 rounds");
    eprintln!("caught: {caught}");
}

/// Garbage collection always on (versions trimmed as soon as the DC holds
/// them, cold record items evicted, buffers sealed every 20 µs and
/// recycled once applied, a 64 KiB read cache that wraps constantly):
/// the histories stay serializable while most reads go to the DC or the
/// read cache.
fn gc_config() -> tc::Config {
    tc::Config {
        buffer_bytes: 2 << 20,
        log_buffers: 4,
        soft_versions: 0,
        hard_versions: 0,
        seal_after_us: 20,
        read_cache_bytes: 64 << 10,
        ..tc::Config::default()
    }
}

#[test]
fn garbage_collected_histories_are_serializable() {
    let seed = seed();
    let mut total = (0, 0, 0, 0, 0);
    for w in CheckWorkload::ALL {
        let mut cfg = CheckConfig::new(w);
        cfg.txns = 10_000;
        cfg.seed = seed;
        let tc = Tc::with(gc_config(), Box::new(MemoryDc::new())).expect("tc");
        let run = run_check(&tc, &cfg, &|_| {}).expect("run");
        assert!(
            run.violations(true).is_empty(),
            "{w}: {:?}",
            run.violations(true)
        );
        let report = check(&run.history, Level::Serializable);
        assert!(
            report.is_ok(),
            "{w} (seed {}):\n{report}\n{}",
            cfg.seed,
            report.explain(&run.history)
        );
        let r = tc.report();
        eprintln!("{w}: {r:?}");
        total.0 += r.dc_reads;
        total.1 += r.trimmed;
        total.2 += r.recycled;
        total.3 += r.evicted;
        total.4 += r.cache_reads;
    }
    // Per workload, a short run on a busy machine may read everything
    // before the DC has it; over the four, garbage collection must run.
    assert!(
        total.0 > 0 && total.1 > 0 && total.2 > 0 && total.3 > 0 && total.4 > 0,
        "garbage collection never ran (DC reads, trimmed, recycled, evicted, \
         read cache hits): {total:?}"
    );
}

/// A TC Proxy that applies committed transactions without waiting for
/// older ones lets a reader find a younger write in the DC once its
/// version is trimmed: the checker catches it, so the test above can
/// fail.
#[cfg(feature = "mutant")]
#[test]
fn the_garbage_collection_mutant_is_caught() {
    let seed = seed();
    let caught = (0..30).find_map(|attempt| {
        [
            CheckWorkload::Bank,
            CheckWorkload::Ycsb,
            CheckWorkload::ListAppend,
        ]
        .into_iter()
        .find_map(|w| {
            let mut cfg = CheckConfig::new(w);
            cfg.txns = 10_000;
            cfg.seed = seed + attempt;
            let tc = Tc::mutant_applying_at_once(gc_config()).expect("tc");
            let run = run_check(&tc, &cfg, &|_| {}).expect("run");
            let report = check(&run.history, Level::Serializable);
            (!report.is_ok() || !run.violations(true).is_empty())
                .then(|| format!("{w} (seed {}):\n{report}", cfg.seed))
        })
    });
    let caught = caught.expect("the mutant TC gave serializable histories in 30 rounds");
    eprintln!("caught: {caught}");
}

/// A hard watermark that evicts record items a running transaction has
/// read lets an older writer slip in under that read: the checker
/// catches it, so eviction's read-timestamp check is tested.
#[cfg(feature = "mutant")]
#[test]
fn the_eviction_mutant_is_caught() {
    let seed = seed();
    let caught = (0..30).find_map(|attempt| {
        [
            CheckWorkload::Ycsb,
            CheckWorkload::ListAppend,
            CheckWorkload::Bank,
        ]
        .into_iter()
        .find_map(|w| {
            let mut cfg = CheckConfig::new(w);
            cfg.txns = 10_000;
            cfg.seed = seed + attempt;
            let tc = Tc::mutant_evicting_read_items(gc_config()).expect("tc");
            let run = run_check(&tc, &cfg, &|_| {}).expect("run");
            let report = check(&run.history, Level::Serializable);
            (!report.is_ok() || !run.violations(true).is_empty())
                .then(|| format!("{w} (seed {}):\n{report}", cfg.seed))
        })
    });
    let caught = caught.expect("the eviction mutant gave serializable histories in 30 rounds");
    eprintln!("caught: {caught}");
}

/// The hard watermark holds the MVCC table's size (§6.5): 50,000 keys
/// written once each through a TC that admits 5,000 entries (record items
/// and versions) leave it near that size once its sweeps have passed,
/// where without eviction it would hold 100,000; and every key still
/// reads back its value, from the DC.
#[test]
fn the_hard_watermark_holds_the_tables_size() {
    use granary_api::{Engine, Tx, TxRunner};
    const KEYS: u64 = 50_000;
    const HARD: usize = 5_000;
    let config = tc::Config {
        soft_versions: HARD / 2,
        hard_versions: HARD,
        ..tc::Config::default()
    };
    let tc = Tc::with(config, Box::new(MemoryDc::new())).expect("tc");
    let t = tc.create_table("t").unwrap();
    let mut w = tc.runner().unwrap();
    let put = |w: &mut <Tc as Engine>::Runner, k: u64| {
        w.try_run(|tx| tx.put(t, &k.to_be_bytes(), &(k * 3).to_le_bytes()))
            .unwrap()
            .unwrap();
    };
    for k in 0..KEYS {
        put(&mut w, k);
    }
    // Let the sweeps (64 of the table's 2^20 buckets per transaction) go
    // round again while the TC Proxy applies what is left: twice, or
    // more on a slow machine, for up to 30 s.
    let started = std::time::Instant::now();
    let mut n = 0u64;
    let r = loop {
        for _ in 0..40_000 {
            put(&mut w, KEYS + n % 16);
            n += 1;
            if n.is_multiple_of(4096) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        let r = tc.report();
        let entries = (r.items + r.versions) as usize;
        if entries <= 2 * HARD || started.elapsed().as_secs() >= 30 {
            break r;
        }
    };
    eprintln!("after {n} more transactions: {r:?}");
    assert!(r.evicted > 0, "nothing was evicted: {r:?}");
    assert!(
        (r.items + r.versions) as usize <= 2 * HARD,
        "the table holds {} entries past a hard watermark of {HARD}: {r:?}",
        r.items + r.versions
    );
    for k in (0..KEYS).step_by(97) {
        let got = w
            .try_run(|tx| Ok(tx.get(t, &k.to_be_bytes())?.map(<[u8]>::to_vec)))
            .unwrap()
            .unwrap();
        assert_eq!(got, Some((k * 3).to_le_bytes().to_vec()), "key {k}");
    }
}

/// Evictions do not hold up the log: with the hard
/// watermark far below the data, the sweeps retire record items by the
/// thousand through the epoch collector, and a recycled log buffer comes
/// back through the same queue. Unless the sweeping runners help drain
/// it, the buffers wait behind the items, the log stays full, and
/// writers abort as overloaded: `bench queue --live 1000000` with
/// watermarks of 300,000 and 600,000 ran 861 transactions a second with
/// 27,000 overloaded aborts, where it runs 320,000 with none. Here two
/// runners rewrite 400,000 loaded keys through a TC that admits 20,000
/// entries and 8 log buffers: nearly every attempt must commit.
#[test]
fn evictions_do_not_hold_up_the_log() {
    use granary_api::{AbortReason, Engine, Tx, TxRunner};
    const KEYS: u64 = 400_000;
    const PER_THREAD: u64 = 200_000;
    let config = tc::Config {
        log_buffers: 8,
        soft_versions: 10_000,
        hard_versions: 20_000,
        ..tc::Config::default()
    };
    let tc = Tc::with(config, Box::new(MemoryDc::new())).expect("tc");
    let t = tc.create_table("t").unwrap();
    let value = [7u8; 100];
    let mut w = tc.runner().unwrap();
    for lo in (0..KEYS).step_by(1000) {
        loop {
            let r = w.try_run(|tx| {
                for k in lo..lo + 1000 {
                    tx.put(t, &k.to_be_bytes(), &value)?;
                }
                Ok(())
            });
            if r.unwrap().is_ok() {
                break;
            }
        }
    }
    drop(w);
    let started = std::time::Instant::now();
    let overloaded: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u64)
            .map(|i| {
                let tc = &tc;
                s.spawn(move || {
                    let mut w = tc.runner().unwrap();
                    let mut overloaded = 0u64;
                    let mut n = 0u64;
                    while n < PER_THREAD {
                        assert!(
                            started.elapsed().as_secs() < 120,
                            "runner {i}: {n} of {PER_THREAD} committed in 120 s, \
                             {overloaded} overloaded aborts: {:?}",
                            tc.report()
                        );
                        let k = (i * KEYS / 2 + n * 7919 % (KEYS / 2)).to_be_bytes();
                        match w.try_run(|tx| tx.put(t, &k, &value)).unwrap() {
                            Ok(()) => n += 1,
                            Err(AbortReason::Overloaded) => overloaded += 1,
                            Err(_) => {}
                        }
                    }
                    overloaded
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let r = tc.report();
    eprintln!(
        "{} commits in {:.2} s, {overloaded} overloaded aborts: {r:?}",
        2 * PER_THREAD,
        started.elapsed().as_secs_f64()
    );
    assert!(r.evicted > KEYS / 2, "the sweeps evicted too little: {r:?}");
    assert!(
        overloaded * 20 < 2 * PER_THREAD,
        "{overloaded} overloaded aborts for {} commits: the log stayed full",
        2 * PER_THREAD
    );
}

/// A transaction left open holds the TC Proxy back (nothing at or above
/// the oldest active transaction is applied), so the log fills: writers
/// then abort as overloaded, and `Tc::waiting_on` says so (the progress
/// line shows it). Once the transaction ends, the log drains and the
/// message goes.
#[test]
fn a_full_log_says_what_writers_wait_on() {
    use granary_api::{AbortReason, Engine, Tx, TxRunner};
    let config = tc::Config {
        log_buffers: 2,
        ..tc::Config::default()
    };
    let tc = Tc::with(config, Box::new(MemoryDc::new())).expect("tc");
    let t = tc.create_table("t").unwrap();
    assert_eq!(tc.waiting_on(), None);
    let (held, release) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    // The transaction holds the log open on its first attempt only: the
    // runner may retry it (its commit can find the log full), and a retry
    // must not wait at the barriers again.
    let first = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut w = tc.runner().unwrap();
            let r = w.try_run(|tx| {
                tx.get(t, b"k")?;
                if first.swap(false, std::sync::atomic::Ordering::Relaxed) {
                    held.wait();
                    release.wait();
                }
                Ok(())
            });
            // Committed, or shed as overloaded: either way it has ended.
            r.unwrap().ok();
        });
        held.wait();
        let mut w = tc.runner().unwrap();
        let value = vec![1u8; 64 << 10];
        let mut overloaded = false;
        for i in 0..10_000u64 {
            let r = w.try_run(|tx| tx.put(t, &i.to_be_bytes(), &value));
            if let Err(AbortReason::Overloaded) = r.unwrap() {
                overloaded = true;
                break;
            }
        }
        // What a progress line would show now (polled briefly: the last
        // buffer may still be being installed).
        let started = std::time::Instant::now();
        let mut why = tc.waiting_on();
        while why.is_none() && started.elapsed().as_secs() < 2 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            why = tc.waiting_on();
        }
        let report = tc.report();
        // Let the open transaction end before any assertion can fail, so
        // that a failure is reported rather than left waiting.
        release.wait();
        assert!(overloaded, "the log never filled: {report:?}");
        let why = why.unwrap_or_else(|| panic!("a full log is not reported: {report:?}"));
        // At least its budget (records the log must take, outcomes, may go past it).
        assert!(why.starts_with("TC log full ("), "{why}");
        assert!(why.contains(" buffers, budget 2)"), "{why}");
    });
    // The TC Proxy drains the log once nothing holds it back.
    let started = std::time::Instant::now();
    while tc.waiting_on().is_some() {
        assert!(started.elapsed().as_secs() < 30, "{:?}", tc.report());
        let mut w = tc.runner().unwrap();
        let _ = w.try_run(|tx| tx.put(t, b"nudge", b"1"));
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
