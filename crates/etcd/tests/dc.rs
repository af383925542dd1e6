//! The etcd data component on a local etcd: the shared DC contract; its
//! batches against the memory DC as a model (random batches with repeated
//! keys, cut into many small transactions; ranges paged both ways); its
//! limits; a checkpoint surviving a SIGKILL of etcd; and typed errors,
//! not hangs or wrong answers, while etcd is down. Seeds print and
//! replay with GRANARY_SEED=N.

mod common;

use std::ops::Bound;
use std::time::{Duration, Instant};

use granary_api::Error;
use granary_etcd::{EtcdDc, EtcdOptions};
use granary_protocols::deuteronomy::dc::{check_contract, DataComponent, MemoryDc, Op};
use granary_workloads::replay::seed;
use granary_workloads::rng::Rng;

#[test]
fn meets_the_dc_contract_and_keeps_its_checkpoint_across_a_kill() {
    let mut server = common::server("contract");
    {
        let dc = EtcdDc::connect(common::options(&server, 10_000)).unwrap();
        assert_eq!((dc.name(), dc.persistent()), ("etcd", true));
        assert_eq!(dc.checkpointed(), 0);
        check_contract(&dc);
        dc.checkpoint(99).unwrap();
        assert_eq!(dc.checkpointed(), 99);
    }
    server.kill();
    server.restart().unwrap();
    let dc = EtcdDc::connect(common::options(&server, 10_000)).unwrap();
    assert_eq!(dc.checkpointed(), 99, "the RSSP survived");
    let mut out = Vec::new();
    assert_eq!(dc.get(1, b"a", &mut out).unwrap(), Some(13));
    assert_eq!(out, b"3");
    assert_eq!(dc.get(2, b"a", &mut out).unwrap(), Some(12));
    assert!(!dc.is_empty().unwrap());
    // The last table's range ends before the meta key (the RSSP).
    dc.apply(&[Op {
        table: u32::MAX,
        key: &[0xff; 3],
        value: Some(b"last"),
        lsn: 20,
    }])
    .unwrap();
    let all = (Bound::Unbounded, Bound::Unbounded);
    for reverse in [false, true] {
        let got = scan(&dc, u32::MAX, all, usize::MAX, reverse);
        assert_eq!(got, vec![(vec![0xff; 3], b"last".to_vec())]);
    }
    let other = EtcdDc::connect(EtcdOptions {
        namespace: b"other/".to_vec(),
        ..common::options(&server, 10_000)
    })
    .unwrap();
    assert!(other.is_empty().unwrap(), "namespaces are apart");
    assert_eq!(other.get(1, b"a", &mut out).unwrap(), None);
}

/// Everything in table `t` of `dc`, by `range` (ascending or not, with
/// `limit`, from `lo` to `hi`).
fn scan(
    dc: &dyn DataComponent,
    t: u32,
    (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
    limit: usize,
    reverse: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut seen = Vec::new();
    dc.range(t, lo, hi, limit, reverse, &mut |k, v| {
        seen.push((k.to_vec(), v.to_vec()));
        true
    })
    .unwrap();
    seen
}

/// The memory DC's last table (the etcd DC's last, `u32::MAX`, is in
/// the next test).
const LAST: u32 = 4095;

#[test]
fn random_batches_match_the_memory_dc() {
    let seed = seed("etcd random_batches_match_the_memory_dc");
    let mut rng = Rng::new(seed, 0);
    let server = common::server("model");
    // Small transactions, few in flight: many cuts and many waits.
    let dc = EtcdDc::connect(EtcdOptions {
        max_txn_ops: 7,
        max_in_flight: 3,
        ..common::options(&server, 10_000)
    })
    .unwrap();
    let model = MemoryDc::new();
    let mut lsn = 1;
    for round in 0..12 {
        // 200 keys over 3 tables (0xff keys test the prefix ends), each
        // batch writing some several times: the last must win.
        let n = 1 + rng.below(400) as usize;
        let owned: Vec<(u32, Vec<u8>, Option<Vec<u8>>)> = (0..n)
            .map(|_| {
                let t = match rng.below(3) {
                    0 => 0,
                    1 => 1,
                    _ => LAST,
                };
                let k = match rng.below(10) {
                    0 => vec![0xff; 1 + rng.below(3) as usize],
                    _ => format!("k{:03}", rng.below(200)).into_bytes(),
                };
                let v = (rng.below(4) != 0).then(|| {
                    let len = rng.below(300) as usize;
                    vec![(round * 7 + len) as u8; len]
                });
                (t, k, v)
            })
            .collect();
        let ops: Vec<Op<'_>> = owned
            .iter()
            .map(|(t, k, v)| {
                lsn += 1;
                Op {
                    table: *t,
                    key: k,
                    value: v.as_deref(),
                    lsn,
                }
            })
            .collect();
        dc.apply(&ops).unwrap();
        model.apply(&ops).unwrap();
        if rng.below(3) == 0 {
            // Idempotent: replaying a batch changes nothing.
            dc.apply(&ops).unwrap();
        }
        for t in [0, 1, LAST] {
            let keys: Vec<Vec<u8>> = scan(
                &model,
                t,
                (Bound::Unbounded, Bound::Unbounded),
                usize::MAX,
                false,
            )
            .into_iter()
            .map(|(k, _)| k)
            .collect();
            for k in keys.iter().take(20) {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                assert_eq!(
                    dc.get(t, k, &mut a).unwrap(),
                    model.get(t, k, &mut b).unwrap(),
                    "seed {seed}: lsn of {k:?}"
                );
                assert_eq!(a, b, "seed {seed}: value of {k:?}");
            }
            let pick = |rng: &mut Rng| match rng.below(3) {
                0 => Bound::Unbounded,
                1 => Bound::Included(format!("k{:03}", rng.below(200)).into_bytes()),
                _ => Bound::Excluded(format!("k{:03}", rng.below(200)).into_bytes()),
            };
            for _ in 0..4 {
                let (lo, hi) = (pick(&mut rng), pick(&mut rng));
                let (lo, hi) = (
                    lo.as_ref().map(Vec::as_slice),
                    hi.as_ref().map(Vec::as_slice),
                );
                // Past one page (64) and within one.
                let limit = [1, 10, 100, usize::MAX][rng.below(4) as usize];
                let reverse = rng.below(2) == 0;
                assert_eq!(
                    scan(&dc, t, (lo, hi), limit, reverse),
                    scan(&model, t, (lo, hi), limit, reverse),
                    "seed {seed}: table {t} range {lo:?}..{hi:?} limit {limit} reverse {reverse}"
                );
            }
        }
    }
    // `f` returning false stops the scan, across pages too.
    let mut n = 0;
    dc.range(
        0,
        Bound::Unbounded,
        Bound::Unbounded,
        usize::MAX,
        false,
        &mut |_, _| {
            n += 1;
            n < 70
        },
    )
    .unwrap();
    let all = scan(
        &dc,
        0,
        (Bound::Unbounded, Bound::Unbounded),
        usize::MAX,
        false,
    )
    .len();
    assert_eq!(n, all.min(70), "seed {seed}");
}

#[test]
fn large_values_are_cut_within_the_request_limit() {
    let server = common::server("limits");
    let dc = EtcdDc::connect(common::options(&server, 10_000)).unwrap();
    // 1 MiB (the largest value) alone, then 24 of 200 KiB (4.8 MiB: at
    // least four requests of etcd's 1.5 MiB).
    let big = vec![0xab; granary_api::MAX_VALUE_BYTES];
    let key = vec![b'k'; granary_api::MAX_KEY_BYTES];
    dc.apply(&[Op {
        table: 3,
        key: &key,
        value: Some(&big),
        lsn: 1,
    }])
    .unwrap();
    let mid = vec![0xcd; 200 << 10];
    let keys: Vec<Vec<u8>> = (0..24u8).map(|i| vec![i]).collect();
    let ops: Vec<Op<'_>> = keys
        .iter()
        .map(|k| Op {
            table: 4,
            key: k,
            value: Some(&mid),
            lsn: 2,
        })
        .collect();
    dc.apply(&ops).unwrap();
    let mut out = Vec::new();
    assert_eq!(dc.get(3, &key, &mut out).unwrap(), Some(1));
    assert!(out == big);
    let all = scan(
        &dc,
        4,
        (Bound::Unbounded, Bound::Unbounded),
        usize::MAX,
        false,
    );
    assert_eq!(all.len(), 24);
    assert!(all.iter().all(|(_, v)| *v == mid));
    // A request etcd refuses fails at once, with etcd's reason.
    let tiny = EtcdDc::connect(EtcdOptions {
        max_txn_ops: 1000,
        ..common::options(&server, 10_000)
    })
    .unwrap();
    let keys: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let ops: Vec<Op<'_>> = keys
        .iter()
        .map(|k| Op {
            table: 5,
            key: k,
            value: Some(b"x"),
            lsn: 3,
        })
        .collect();
    let t0 = Instant::now();
    match tiny.apply(&ops) {
        Err(Error::Remote { detail, .. }) => {
            assert!(detail.contains("too many operations"), "{detail}")
        }
        r => panic!("200 operations in one transaction: {r:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "not retried");
}

#[test]
fn an_unavailable_etcd_gives_typed_errors_then_works_again() {
    let mut server = common::server("down");
    let dc = EtcdDc::connect(common::options(&server, 1000)).unwrap();
    let op = |lsn, v: &'static [u8]| Op {
        table: 1,
        key: b"k",
        value: Some(v),
        lsn,
    };
    dc.apply(&[op(1, b"before")]).unwrap();
    server.kill();
    let mut out = Vec::new();
    let t0 = Instant::now();
    let unavailable = |r: Result<(), Error>, what: &str| match r {
        Err(e @ Error::Remote { .. }) => {
            let m = e.to_string();
            assert!(m.contains("unavailable for"), "{what}: {m}");
            assert!(m.contains(&server.endpoint()), "{what}: {m}");
        }
        r => panic!("{what} with etcd down: {r:?}"),
    };
    unavailable(dc.get(1, b"k", &mut out).map(|_| ()), "get");
    unavailable(dc.apply(&[op(2, b"during")]), "apply");
    unavailable(dc.checkpoint(5), "checkpoint");
    let mut visit = |_: &[u8], _: &[u8]| true;
    unavailable(
        dc.range(1, Bound::Unbounded, Bound::Unbounded, 10, false, &mut visit),
        "range",
    );
    assert!(
        t0.elapsed() < Duration::from_secs(4 * 3),
        "each call gave up after its 1 s budget: {:?}",
        t0.elapsed()
    );
    assert_eq!(dc.checkpointed(), 0, "a failed checkpoint is not recorded");
    assert!(dc.retries() > 0);
    // Back: the same DC works, with what was acknowledged.
    server.restart().unwrap();
    assert_eq!(dc.get(1, b"k", &mut out).unwrap(), Some(1));
    assert_eq!(out, b"before");
    // A call that starts while etcd is down and ends after it is back
    // retries through (with a budget longer than a restart).
    let patient = EtcdDc::connect(common::options(&server, 20_000)).unwrap();
    server.kill();
    std::thread::scope(|s| {
        let h = s.spawn(|| patient.apply(&[op(3, b"after")]));
        std::thread::sleep(Duration::from_millis(200));
        server.restart().unwrap();
        h.join().unwrap().unwrap();
    });
    assert!(patient.retries() > 0);
    assert_eq!(dc.get(1, b"k", &mut out).unwrap(), Some(3));
    assert_eq!(out, b"after");
}

#[test]
fn bad_options_are_refused() {
    let bad = |o: EtcdOptions, what: &str| match EtcdDc::connect(o) {
        Err(Error::InvalidOption(m)) => assert!(m.contains(what), "{m}"),
        r => panic!("{what}: {:?}", r.map(|_| ())),
    };
    let o = || EtcdOptions::new(vec!["http://127.0.0.1:1".into()]);
    bad(EtcdOptions::new(vec![]), "no endpoints");
    bad(EtcdOptions::new(vec!["127.0.0.1:2379".into()]), "http://");
    bad(
        EtcdOptions {
            max_request_bytes: 1 << 20,
            ..o()
        },
        "largest record",
    );
    bad(
        EtcdOptions {
            max_txn_ops: 0,
            ..o()
        },
        "max_txn_ops",
    );
    bad(
        EtcdOptions {
            namespace: vec![],
            ..o()
        },
        "namespace",
    );
}

/// Calls in flight when etcd is SIGKILLed retry through its restart: with
/// a budget longer than the outage every call succeeds (a connection
/// broken under a request is told apart from a refusal), and afterwards
/// etcd holds every acknowledged batch's values.
#[test]
fn calls_in_flight_at_a_kill_retry_through_a_restart() {
    let seed = seed("etcd calls_in_flight_at_a_kill_retry_through_a_restart");
    let mut rng = Rng::new(seed, 0);
    let mut server = common::server("inflight");
    let dc = EtcdDc::connect(common::options(&server, 30_000)).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let keys: Vec<Vec<u8>> = (0..500u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let (acked, gets) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut lsn = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                lsn += 1;
                let value = lsn.to_le_bytes();
                let ops: Vec<Op<'_>> = keys
                    .iter()
                    .map(|k| Op {
                        table: 1,
                        key: k,
                        value: Some(&value),
                        lsn,
                    })
                    .collect();
                dc.apply(&ops).expect("apply retries through");
            }
            lsn
        });
        let reader = s.spawn(|| {
            let (mut n, mut out, mut last) = (0u64, Vec::new(), 0);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let i = n as usize % keys.len();
                let k = &keys[i];
                if let Some(lsn) = dc.get(1, k, &mut out).expect("get retries through") {
                    assert_eq!(out, lsn.to_le_bytes(), "a value and its LSN");
                    // One key's LSNs only grow (batches are sequential).
                    if i == 0 {
                        assert!(lsn >= last, "key 0 went back from {last} to {lsn}");
                        last = lsn;
                    }
                }
                n += 1;
            }
            n
        });
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(100 + rng.below(400)));
            server.kill();
            std::thread::sleep(Duration::from_millis(rng.below(500)));
            server.restart().unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (writer.join().unwrap(), reader.join().unwrap())
    });
    eprintln!(
        "{acked} batches acknowledged, {gets} gets, {} retries",
        dc.retries()
    );
    assert!(dc.retries() > 0, "seed {seed}: no call met the outages");
    let mut out = Vec::new();
    for k in &keys {
        assert_eq!(dc.get(1, k, &mut out).unwrap(), Some(acked), "seed {seed}");
        assert_eq!(out, acked.to_le_bytes());
    }
}
