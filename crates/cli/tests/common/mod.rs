//! Shared by the CLI's end-to-end tests: scratch directories and running
//! the `granary` binary.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// A fresh directory for one test (`suite` names the test file).
pub fn scratch(suite: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("granary-{suite}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Run the `granary` binary built with the tests.
pub fn granary(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(args)
        .output()
        .expect("run granary")
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The number at dotted `path` in `v`; panics naming the path if it is
/// missing or not a number.
pub fn number(v: &serde_json::Value, path: &str) -> f64 {
    let mut at = v;
    for seg in path.split('.') {
        at = at
            .get(seg)
            .unwrap_or_else(|| panic!("JSON lacks `{path}`: {v}"));
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("`{path}` is not a number: {at}"))
}
