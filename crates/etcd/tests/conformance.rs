//! The conformance suite (`granary-conformance`) on Deuteronomy's TC over
//! the etcd data component: every test's database is a fresh TC whose DC
//! is a namespace of its own in one local etcd (deleted when the TC
//! drops). The TC keeps its versions and read cache small, so that most
//! reads miss the TC and are served by etcd, and the proxy applies and
//! trims within milliseconds: the DC is then on the path of nearly every
//! read. (With the TC's defaults most reads never leave the TC, which the
//! suite already runs over the memory DC; the durable TC's tests over
//! etcd, `tc.rs`, keep more versions.)

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use granary_etcd::{EtcdDc, EtcdOptions, EtcdServer};
use granary_protocols::deuteronomy::tc::{Config, Tc};

/// The endpoint of the one local etcd this test binary's databases share,
/// each under a namespace of its own. A thread that lives as long as the
/// process starts it and holds it: etcd is started to die with the thread
/// that started it (`PR_SET_PDEATHSIG`), so it goes when the tests end.
fn endpoint() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        // Directories left by earlier runs whose process is gone.
        if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("granary-etcd-conformance-") {
                    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let server = EtcdServer::start(&common::temp_dir("conformance"))
                .expect("start etcd (Debian's etcd-server)");
            tx.send(server.endpoint()).unwrap();
            let _held = server;
            loop {
                std::thread::park();
            }
        });
        rx.recv().expect("etcd started")
    })
}

/// A TC with `config` over the shared etcd, in a fresh namespace that is
/// deleted when the TC (and so its DC) drops.
fn tc_over_etcd(config: Config) -> Tc {
    // Relaxed: only distinctness matters.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dc = EtcdDc::connect(EtcdOptions {
        namespace: format!("conformance/{n}/").into_bytes(),
        retry_for_ms: 10_000,
        ..EtcdOptions::new(vec![endpoint().to_string()])
    })
    .expect("connect")
    .scratch();
    Tc::with(config, Box::new(dc)).expect("tc")
}

/// Versions trimmed early and a small read cache: reads go to etcd.
fn tc_reading_etcd() -> Tc {
    tc_over_etcd(Config {
        soft_versions: 64,
        hard_versions: 256,
        read_cache_bytes: 0,
        ..Config::default()
    })
}

// The suite's tests one by one rather than through `conformance_tests!`,
// leaving out two that take minutes over etcd: the model check (hundreds
// of fresh databases, each a namespace to make and delete) and the phantom
// test (its scans go to etcd a chunk at a time on every round; it ran past
// 15 minutes). The TC's own suite runs both over the memory DC.
macro_rules! suite {
    ($name:ident, $make:expr) => {
        mod $name {
            use granary_conformance::{
                anomalies, bank, churn, hermitage, histories, procedures, secondary, CheckWorkload,
                Level,
            };

            #[test]
            fn counter_increments_add_up() {
                anomalies::counter_increments_add_up($make);
            }

            #[test]
            fn field_updates_keep_the_rest() {
                anomalies::field_updates_keep_the_rest($make);
            }

            #[test]
            fn fig3_never_both_one() {
                anomalies::fig3_never_both_one($make);
            }

            #[test]
            fn write_skew_never_commits() {
                anomalies::write_skew_never_commits($make);
            }

            #[test]
            fn procedures_counter_increments_add_up() {
                procedures::counter_increments_add_up($make).unwrap();
            }

            #[test]
            fn procedures_fig3_never_both_one() {
                procedures::fig3_never_both_one($make);
            }

            #[test]
            fn procedures_write_skew_never_commits() {
                procedures::write_skew_never_commits($make);
            }

            #[test]
            fn hermitage() {
                hermitage::scenarios($make, Level::Serializable, &hermitage::SERIALIZABLE);
            }

            #[test]
            fn bank_audits_see_the_total() {
                bank::transfers_keep_total_under_scan_and_snapshot_audits($make);
            }

            #[test]
            fn secondary_lookups() {
                secondary::lookup_insert_remove($make);
            }

            #[test]
            fn secondary_index_stays_in_step() {
                secondary::index_stays_in_step($make, true);
            }

            #[test]
            fn delete_reinsert_churn() {
                churn::delete_reinsert_churn($make);
            }

            #[test]
            fn history_ycsb() {
                histories::history_is_within_level(
                    $make,
                    CheckWorkload::Ycsb,
                    Level::Serializable,
                    histories::MIN_ABORTED,
                );
            }

            #[test]
            fn history_list_append() {
                histories::history_is_within_level(
                    $make,
                    CheckWorkload::ListAppend,
                    Level::Serializable,
                    histories::MIN_ABORTED,
                );
            }

            #[test]
            fn history_bank() {
                histories::history_is_within_level(
                    $make,
                    CheckWorkload::Bank,
                    Level::Serializable,
                    histories::MIN_ABORTED,
                );
            }
        }
    };
}

suite!(tc_reading_etcd, super::tc_reading_etcd);
