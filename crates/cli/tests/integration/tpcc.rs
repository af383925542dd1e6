//! `granary bench tpcc` end to end: what its errors name, and its loading
//! progress.

use crate::common;
use crate::common::granary;

use std::process::Output;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn zero_threads_is_an_error_about_threads() {
    let o = granary(&["bench", "tpcc", "--threads", "0"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("--threads must be at least 1, got 0"), "{err}");
    // The warehouse count defaults to the thread count, but the user set
    // threads.
    assert!(!err.contains("warehouses"), "{err}");
}

#[test]
fn too_many_threads_for_the_default_warehouses_names_both_flags() {
    let o = granary(&["bench", "tpcc", "--threads", "10001"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("--threads 10001 needs --warehouses"), "{err}");
}

#[test]
fn a_bad_warehouse_count_is_an_error_about_warehouses() {
    let o = granary(&["bench", "tpcc", "--threads", "1", "--warehouses", "0"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("--warehouses must be between 1 and 10000, got 0"),
        "{err}"
    );
}

#[test]
fn silo_switches_are_refused_where_they_cannot_apply() {
    let o = granary(&["bench", "tpcc", "--protocol", "hekaton", "--no-gc"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("--no-gc applies to silo only, and --protocol is hekaton: add silo"),
        "{err}"
    );
    let o = granary(&["bench", "tpcc", "--snapshot-stock-level", "--no-snapshots"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("--snapshot-stock-level needs snapshots"),
        "{err}"
    );
}

#[test]
fn a_labelled_factor_run_records_its_label_and_switches() {
    let dir = common::scratch("tpcc", "label");
    let json = dir.join("r.json");
    let o = granary(&[
        "bench",
        "tpcc",
        "--threads",
        "1",
        "--warehouses",
        "1",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
        "--seed",
        "1",
        "--label",
        "Simple",
        "--no-overwrites",
        "--no-record-pool",
        "--no-gc",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let c = &v["config"]["common"];
    assert_eq!(c["label"], "Simple");
    assert_eq!(c["silo"]["no_overwrites"], true);
    assert_eq!(c["silo"]["no_gc"], true);
    assert_eq!(c["silo"]["no_snapshots"], false);
    assert!(v["throughput_txn_per_s"].as_f64().unwrap() > 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn loading_reaches_the_total_it_announces() {
    let o = granary(&[
        "bench",
        "tpcc",
        "--threads",
        "1",
        "--warehouses",
        "1",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
        "--seed",
        "1",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    // "tpcc: loaded in S s (progress DONE/TOTAL)": the loading bar's last
    // position and its length.
    let line = err
        .lines()
        .find(|l| l.starts_with("tpcc: loaded in "))
        .unwrap_or_else(|| panic!("no loaded line: {err}"));
    let figures = line
        .split_once("(progress ")
        .and_then(|(_, f)| f.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no progress figures: {line}"));
    let (done, total) = figures.split_once('/').expect("DONE/TOTAL");
    let (done, total): (u64, u64) = (done.parse().unwrap(), total.parse().unwrap());
    assert!(total > 0, "{line}");
    assert_eq!(done, total, "{line}");
}

/// Several runs on one database (`--runs`, several protocols) each insert
/// history rows of their own: a later run's keys never collide with an
/// earlier run's. BOHM runs TPC-C too, its write sets predicted by
/// reconnaissance.
#[test]
fn runs_follow_each_other_on_each_protocol_bohm_included() {
    let o = granary(&[
        "bench",
        "tpcc",
        "--protocol",
        "silo,bohm",
        "--threads",
        "1",
        "--warehouses",
        "1",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--runs",
        "2",
        "--seed",
        "3",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let err = format!("{}{err}", String::from_utf8_lossy(&o.stdout));
    for p in ["silo", "bohm"] {
        for run in 0..2 {
            let head = format!("tpcc run {run} protocol={p} ");
            assert!(err.contains(&head), "no `{head}`: {err}");
        }
    }
    assert!(!err.contains("violat"), "{err}");
}

/// The header is the run's configuration in flag words on stdout; a
/// transaction type the mix never runs gets no row of zeros; the columns
/// line up whatever the longest type name.
#[test]
fn the_report_reads_as_a_table_of_what_ran() {
    let o = granary(&[
        "bench",
        "tpcc",
        "--mix",
        "new-order",
        "--threads",
        "1",
        "--warehouses",
        "1",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--seed",
        "5",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.starts_with("tpcc: --warehouses 1 --mix new-order "),
        "{out}"
    );
    assert!(out.contains(" --seed 5\n"), "{out}");
    assert!(out.contains("tpcc protocol=silo threads=1: "), "{out}");
    assert!(
        out.contains("  no transactions of: payment, order_status, delivery, stock_level\n"),
        "{out}"
    );
    assert!(!out.contains("\n  payment "), "{out}");
    let o = granary(&[
        "bench",
        "smallbank",
        "--mix",
        "oltpbench",
        "--threads",
        "1",
        "--customers",
        "100",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", stderr(&o));
    let header = out
        .lines()
        .find(|l| l.trim_start().starts_with("type "))
        .expect("table");
    let end = header.find("commits").unwrap() + "commits".len();
    for row in ["deposit_checking", "amalgamate", "send_payment"] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(row))
            .unwrap_or_else(|| panic!("no {row} row: {out}"));
        // The commit count ends where its heading does.
        let digits = line[..end].trim_end();
        assert_eq!(digits.len(), end, "{row} misaligned:\n{header}\n{line}");
    }
}
