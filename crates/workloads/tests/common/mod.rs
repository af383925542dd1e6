//! Helpers shared by the workload tests.
#![allow(dead_code)]

/// The run's seed: `GRANARY_SEED` if set, else fresh. Printed, so any
/// failure can be replayed.
pub fn seed() -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("seed = {s} (replay with GRANARY_SEED={s})");
    s
}

/// The `GRANARY_STRESS` multiplier for loop lengths (1 in CI).
pub fn stress() -> u64 {
    std::env::var("GRANARY_STRESS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}
