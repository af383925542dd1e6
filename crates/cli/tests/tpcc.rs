//! `granary bench tpcc` end to end: what its errors name.

use std::process::{Command, Output};

fn granary(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(args)
        .output()
        .expect("run granary")
}

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
        err.contains("warehouses must be in 1..=10000, got 0"),
        "{err}"
    );
}
