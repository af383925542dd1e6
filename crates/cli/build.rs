//! Stamps the binary with the git commit it was built from and the cargo
//! profile, for `granary --version`.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    // The commit only: edits since it are not seen (the script reruns
    // when HEAD moves, not on every change to a source file).
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // Rebuilt when HEAD moves (a checkout, a commit on the branch).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = Path::new(&dir);
        println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={}", dir.join(head).display());
        }
    }
    // The profile is the directory above `build/` in OUT_DIR
    // (target/<profile>/build/<crate>/out): `release`, `dist`, `debug`, ….
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    let parts: Vec<&str> = out.split(std::path::MAIN_SEPARATOR).collect();
    let profile = parts
        .iter()
        .rposition(|p| *p == "build")
        .and_then(|i| i.checked_sub(1))
        .map_or("unknown", |i| parts[i]);
    let profile = if profile == "debug" { "dev" } else { profile };
    println!("cargo:rustc-env=GRANARY_PROFILE={profile}");
    println!("cargo:rustc-env=GRANARY_BUILD=git {commit}, {profile} profile");
}
