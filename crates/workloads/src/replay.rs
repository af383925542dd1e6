//! Seeds that replay and the stress factor, shared by the tests of every
//! crate that can depend on the workloads (granary's, the workloads' own,
//! the conformance suite): one environment contract for all of them.

/// The seed of a randomized test: `GRANARY_SEED` if set, else fresh.
/// Always printed, with `name`, so a failure can be replayed.
pub fn seed(name: &str) -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("{name}: seed {s} (replay with GRANARY_SEED={s})");
    s
}

/// Scale factor for stress loops: `GRANARY_STRESS=N` multiplies them (1
/// in CI).
pub fn stress() -> u64 {
    std::env::var("GRANARY_STRESS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}
