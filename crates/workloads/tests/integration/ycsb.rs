//! The YCSB presets: each parses and runs briefly on Silo (scaled down);
//! keys within a transaction are distinct; bad names and overrides are
//! refused with a clear message.

use crate::common::seed;

use std::ops::Bound;
use std::time::Duration;

use granary::{Database, Options};
use granary_workloads::driver::{run, DriverConfig, RunReport, Workload};
use granary_workloads::ycsb::{OpMix, Skew, WriteKind, Ycsb, YcsbConfig, PRESETS};

fn db() -> Database {
    Database::new(Options::default().epoch_interval(Duration::from_millis(2))).expect("db")
}

fn run_briefly(cfg: YcsbConfig, seed: u64, secs: f64) -> (Database, Ycsb, RunReport) {
    let db = db();
    let mut w = Ycsb::new(cfg).expect("config");
    w.load(&db, &|_, _| {}).expect("load");
    let dc = DriverConfig {
        threads: 2,
        warmup: Duration::ZERO,
        duration: Duration::from_secs_f64(secs),
        seed,
        latency_every: 1,
        breakdown: false,
    };
    let r = run(&w, &db, &dc, &|_, _, _| {}).expect("run");
    assert!(
        r.invariant_violations.is_empty(),
        "{} (seed {seed}): {:?}",
        w.cfg.preset,
        r.invariant_violations
    );
    (db, w, r)
}

fn commits(r: &RunReport, ty: &str) -> u64 {
    r.types
        .iter()
        .find(|t| t.name == ty)
        .map_or(0, |t| t.commits)
}

#[test]
fn every_preset_runs() {
    let s = seed();
    for (name, _) in PRESETS {
        let mut cfg = YcsbConfig::preset(name).unwrap().keys(10_000);
        if name == "bohm-longread" {
            // Enough long reads to see in a short run, and shorter ones.
            cfg = cfg.long_read_fraction(0.05).long_read_keys(2_000);
        }
        let (_, w, r) = run_briefly(cfg, s, 0.25);
        eprintln!(
            "{name}: θ {:.3}, {:.0} txn/s, read_only {} update {} long_read {}, {} aborts",
            w.theta(),
            r.throughput_txn_per_s,
            commits(&r, "read_only"),
            commits(&r, "update"),
            commits(&r, "long_read"),
            r.aborts
        );
        assert!(r.commits > 0, "{name}: nothing committed (seed {s})");
        assert!(
            commits(&r, "update") > 0,
            "{name}: no update committed (seed {s})"
        );
        match name {
            "bohm-10rmw" | "bohm-2rmw8r" | "bohm-longread" => {
                assert_eq!(commits(&r, "read_only"), 0, "{name}: every txn writes")
            }
            _ => assert!(commits(&r, "read_only") > 0, "{name}: no read-only txn"),
        }
        assert_eq!(
            commits(&r, "long_read") > 0,
            name == "bohm-longread",
            "{name}: long reads (seed {s})"
        );
    }
}

#[test]
fn snapshot_long_reads_run() {
    let s = seed();
    let cfg = YcsbConfig::preset("bohm-longread")
        .unwrap()
        .keys(5_000)
        .long_read_fraction(0.2)
        .long_read_keys(1_000)
        .snapshot_long_reads(true);
    let (_, _, r) = run_briefly(cfg, s, 0.5);
    assert!(commits(&r, "long_read") > 0 && commits(&r, "update") > 0);
}

#[test]
fn presets_match_the_papers() {
    let p = |n| YcsbConfig::preset(n).unwrap();
    let silo = p("silo");
    assert_eq!(
        (
            silo.ops_per_txn,
            silo.value_bytes,
            silo.mix,
            silo.write_kind,
            silo.skew
        ),
        (
            1,
            100,
            OpMix::PerOp { read_pct: 80.0 },
            WriteKind::Rmw,
            Skew::Theta(0.0)
        )
    );
    assert_eq!(p("silor").mix, OpMix::PerOp { read_pct: 70.0 });
    let b = p("bohm-10rmw");
    assert_eq!(
        (b.keys, b.value_bytes, b.ops_per_txn, b.mix, b.skew),
        (
            1_000_000,
            1000,
            10,
            OpMix::Fixed { writes: 10 },
            Skew::Theta(0.9)
        )
    );
    assert_eq!(p("bohm-2rmw8r").mix, OpMix::Fixed { writes: 2 });
    let l = p("bohm-longread");
    assert_eq!(
        (l.long_read_fraction, l.long_read_keys, l.skew),
        (0.01, 10_000, Skew::Theta(0.0))
    );
    let d = p("deuteronomy");
    assert_eq!(
        (d.ops_per_txn, d.value_bytes, d.mix, d.write_kind),
        (4, 100, OpMix::PerOp { read_pct: 84.0 }, WriteKind::Blind)
    );
    // 80% of accesses to 20% of 1M keys.
    let theta = Ycsb::new(d).unwrap().theta();
    assert!((theta - 0.8944).abs() < 0.001, "θ {theta}");
    let st = p("study");
    assert_eq!((st.keys, st.mix), (2000, OpMix::PerOp { read_pct: 50.0 }));
}

#[test]
fn unknown_preset_names_the_known_ones() {
    let e = YcsbConfig::preset("ycsb-z").unwrap_err().to_string();
    assert!(e.contains("ycsb-z"), "{e}");
    for (name, _) in PRESETS {
        assert!(e.contains(name), "{e} does not mention {name}");
    }
}

#[test]
fn bad_overrides_are_rejected() {
    let silo = || YcsbConfig::preset("silo").unwrap();
    let bohm = || YcsbConfig::preset("bohm-10rmw").unwrap();
    let cases = [
        (silo().theta(1.0), "theta"),
        (silo().theta(-0.1), "theta"),
        (silo().theta(f64::NAN), "theta"),
        (silo().keys(0), "key"),
        (silo().value_bytes(4), "value"),
        (silo().read_pct(101.0), "read percentage"),
        (bohm().writes_per_txn(11), "writes"),
        (bohm().ops_per_txn(0), "operations"),
        (bohm().keys(5), "operations"),
        (bohm().long_read_fraction(1.5), "fraction"),
        (bohm().long_read_fraction(0.1).keys(100), "long-read keys"),
        (YcsbConfig::preset("deuteronomy").unwrap().keys(10), "θ"),
    ];
    for (cfg, what) in cases {
        let e = Ycsb::new(cfg.clone())
            .err()
            .unwrap_or_else(|| panic!("accepted {cfg:?}"));
        assert!(
            e.to_string().contains(what),
            "{e} (expected to mention {what})"
        );
    }
}

/// With as many operations as keys, every transaction must touch each key
/// exactly once, so after a run all RMW counters are equal.
#[test]
fn keys_within_a_transaction_are_distinct() {
    let s = seed();
    for n in [8u64, 20] {
        let cfg = YcsbConfig::preset("bohm-10rmw")
            .unwrap()
            .keys(n)
            .ops_per_txn(n as usize)
            .writes_per_txn(n as usize)
            .value_bytes(16);
        let (db, w, r) = run_briefly(cfg, s, 0.2);
        assert!(commits(&r, "update") > 0);
        let t = w.table().unwrap();
        let mut wk = db.worker().unwrap();
        let counters = wk
            .run(|tx| {
                let mut c = Vec::new();
                tx.scan(
                    t,
                    Bound::Unbounded,
                    Bound::Unbounded,
                    usize::MAX,
                    false,
                    |_, v| {
                        c.push(u64::from_le_bytes(v[..8].try_into().unwrap()));
                        true
                    },
                )?;
                Ok(c)
            })
            .unwrap();
        assert_eq!(counters.len() as u64, n);
        assert!(
            counters[0] > 0 && counters.iter().all(|&c| c == counters[0]),
            "{counters:?}"
        );
    }
}

/// Every kind of read-modify-write keeps the invariant (the counters add
/// up to the RMWs committed) on large values, with a field update beside
/// whole-value ones and with a point index (whose prefetch of a leading
/// field fetches fewer lines), on Silo, with BOHM's contended 10RMW.
#[test]
fn every_read_modify_write_adds_up() {
    let s = seed();
    for kind in [WriteKind::Rmw, WriteKind::RmwGetPut, WriteKind::RmwField] {
        for point in [false, true] {
            let cfg = YcsbConfig::preset("bohm-10rmw")
                .unwrap()
                .keys(5_000)
                .write_kind(kind);
            let db = Database::new(
                Options::default()
                    .epoch_interval(Duration::from_millis(2))
                    .point_index(point),
            )
            .expect("db");
            let mut w = Ycsb::new(cfg).expect("config");
            w.load(&db, &|_, _| {}).expect("load");
            let dc = DriverConfig {
                threads: 2,
                warmup: Duration::ZERO,
                duration: Duration::from_millis(300),
                seed: s,
                latency_every: 1,
                breakdown: false,
            };
            let r = run(&w, &db, &dc, &|_, _, _| {}).expect("run");
            assert!(
                r.invariant_violations.is_empty(),
                "{kind:?} point={point} (seed {s}): {:?}",
                r.invariant_violations
            );
            assert!(commits(&r, "update") > 0, "{kind:?}: nothing committed");
        }
    }
}
