//! Deuteronomy's crash loop (kill -9), with the disk data component: the
//! loop every durable design runs (`granary_conformance::crash`): an
//! acknowledged transfer is always there after recovery, and nothing is
//! there in part. The TC checkpoints every 50 ms, so checkpoints truncate
//! its log between and during cycles. `GRANARY_SEED` replays a run's
//! choices; `GRANARY_STRESS=n` runs n × 20 cycles.

use std::path::Path;

use granary_protocols::deuteronomy::disk::DiskDc;
use granary_protocols::deuteronomy::tc::{self, Tc};

/// Open the TC in `dir` over a disk DC (with the recovery mutant that
/// replays uncommitted transactions too, if `mutant`: `mutant` builds).
fn open(dir: &Path, mutant: bool) -> Tc {
    let config = tc::Config {
        checkpoint_ms: 50,
        ..tc::Config::default()
    };
    let dc = DiskDc::open(&dir.join("dc.redb"), 1 << 20).expect("disk dc");
    #[cfg(feature = "mutant")]
    if mutant {
        return Tc::mutant_open_replaying_uncommitted(config, dir, Box::new(dc))
            .expect("open")
            .0;
    }
    assert!(!mutant, "the mutant exists in `mutant` builds only");
    Tc::open(config, dir, Box::new(dc)).expect("open").0
}

granary_conformance::crash_tests!(disk_dc, open);

/// The recovery mutant that applies uncommitted transactions is caught:
/// a transfer killed halfway shows in part. The loop can fail.
#[cfg(feature = "mutant")]
#[test]
fn crash_loop_catches_the_recovery_mutant() {
    use granary_conformance::crash;
    if crash::in_child() {
        return;
    }
    let test = crash::child_test(&format!("{}::disk_dc", module_path!()));
    let seed = granary_workloads::replay::seed("deuteronomy recovery mutant");
    let e = crash::cycles(&test, open, seed, 40, true)
        .expect_err("the mutant recovered correctly for 40 cycles");
    eprintln!("caught: {e}");
}
