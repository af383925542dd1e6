//! Helpers shared by the workload tests.
#![allow(dead_code)]

// Not every test that includes this module uses it.
#[allow(unused_imports)]
pub use granary_workloads::replay::stress;

/// The run's seed: `GRANARY_SEED` if set, else fresh. Printed under the
/// test's name (the harness names each test's thread), so any failure can
/// be replayed.
pub fn seed() -> u64 {
    granary_workloads::replay::seed(std::thread::current().name().unwrap_or("test"))
}
