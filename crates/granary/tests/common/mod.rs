//! Shared helpers for the scenario tests: seeds, a small PRNG and
//! scratch directories.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use granary::{Database, Options};

/// The test seed: `GRANARY_SEED` if set, else fresh; always printed so a
/// failure can be replayed.
pub fn seed(name: &str) -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{name}: seed {s} (replay with GRANARY_SEED={s})");
    s
}

/// Scale factor for stress loops: `GRANARY_STRESS=N` multiplies them.
pub fn stress() -> u64 {
    std::env::var("GRANARY_STRESS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng(seed ^ (stream + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A database with fast epochs, so snapshot and GC tests run quickly.
pub fn fast_db() -> Database {
    Database::new(Options::default().epoch_interval(Duration::from_millis(1))).unwrap()
}

pub fn enc(x: u64) -> [u8; 8] {
    x.to_be_bytes()
}

pub fn dec(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().expect("8-byte value"))
}

/// A scratch directory under the system temp dir, unique per process and
/// thread, removed (with its contents) when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "granary-test-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
