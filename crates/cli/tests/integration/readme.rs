//! README.md's quick start runs as written: every fenced block whose info
//! string is `sh quick` is run, in a fresh directory, by `sh -e` with the
//! `granary` built for these tests first on `PATH`. A command that drifts
//! from the binary (a renamed flag, a verb that moved) fails here.
//! `granary --version` must name the commit and the profile.

use crate::common;
use crate::common::{granary, text};

use std::path::Path;
use std::process::Command;

/// The `sh quick` blocks of `markdown`, in order, each as one script.
fn quick_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None => {
                let fence = line.trim_start();
                if let Some(info) = fence.strip_prefix("```") {
                    let mut words = info.split_whitespace();
                    if words.next() == Some("sh") && words.any(|w| w == "quick") {
                        current = Some(String::new());
                    }
                }
            }
            Some(block) => {
                if line.trim_start().starts_with("```") {
                    blocks.push(current.take().unwrap());
                } else {
                    block.push_str(line);
                    block.push('\n');
                }
            }
        }
    }
    assert!(current.is_none(), "an unclosed `sh quick` block");
    blocks
}

#[test]
fn the_quick_start_runs_as_written() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&readme).expect("README.md");
    let blocks = quick_blocks(&readme);
    assert!(
        blocks.len() >= 3,
        "README.md has {} `sh quick` blocks; the quick start is expected to have several",
        blocks.len()
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_granary"));
    let path = std::env::join_paths(std::iter::once(bin.parent().unwrap().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let dir = common::scratch("readme", "quick");
    for (i, block) in blocks.iter().enumerate() {
        let o = Command::new("sh")
            .args(["-e", "-c", block])
            .current_dir(&dir)
            .env("PATH", &path)
            .output()
            .expect("run sh");
        assert!(
            o.status.success(),
            "README.md's quick block {} failed ({}):\n{block}\nstdout:\n{}\nstderr:\n{}",
            i + 1,
            o.status,
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quick_blocks_are_found_and_others_are_not() {
    let md =
        "text\n```sh quick\na\nb\n```\n```sh\nc\n```\n```rust\nd\n```\n  ```sh quick\ne\n  ```\n";
    assert_eq!(
        quick_blocks(md),
        vec!["a\nb\n".to_string(), "e\n".to_string()]
    );
}

#[test]
fn version_names_the_commit_and_the_profile() {
    let o = granary(&["--version"]);
    assert!(o.status.success());
    let v = text(&o.stdout);
    assert!(
        v.starts_with(&format!("granary {} (git ", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    // This test binary is built by `cargo test`: dev, release or dist.
    assert!(
        ["dev profile)", "release profile)", "dist profile)"]
            .iter()
            .any(|p| v.trim_end().ends_with(p)),
        "{v}"
    );
}
