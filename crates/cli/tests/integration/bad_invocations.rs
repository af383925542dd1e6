//! Bad and edge-case invocations: each is refused before anything runs,
//! with exit status 2 and a first line of error output that names what is
//! wrong in the words a user typed. One row per invocation; a changed
//! message or a flag that starts being ignored fails here.

use crate::common;
use crate::common::text;

use std::process::Command;

/// (arguments, what the first line of standard error contains).
const CASES: &[(&str, &str)] = &[
    // Ranges, each naming its flag and the value given.
    (
        "bench ycsb --threads 0",
        "--threads must be at least 1, got 0",
    ),
    ("bench ycsb --keys 0", "--keys must be at least 1, got 0"),
    (
        "bench ycsb --read-pct 101",
        "--read-pct is a percentage, at most 100, got 101",
    ),
    (
        "bench ycsb --seconds 0",
        "--seconds must be positive, got 0",
    ),
    (
        "bench ycsb --seconds nan",
        "--seconds must be positive, got NaN",
    ),
    (
        "bench ycsb --warmup -1",
        "--warmup must be at least 0, got -1",
    ),
    (
        "bench ycsb --latency-every 0",
        "--latency-every must be at least 1, got 0",
    ),
    (
        "bench ycsb --epoch-ms 0",
        "--epoch-ms must be at least 1, got 0",
    ),
    (
        "bench ycsb --value-bytes 4",
        "--value-bytes must be between 8 and 1048576, got 4",
    ),
    (
        "bench tpcc --threads 0",
        "--threads must be at least 1, got 0",
    ),
    (
        "bench tpcc --warehouses 0",
        "--warehouses must be between 1 and 10000, got 0",
    ),
    (
        "bench tpcc --warehouses 10001",
        "--warehouses must be between 1 and 10000, got 10001",
    ),
    // What cannot fit in memory (over a TB here), with the estimate.
    (
        "bench tpcc --warehouses 10000",
        "--warehouses 10000 needs about 1562.5 GiB of memory",
    ),
    (
        "bench ycsb --keys 10000000000",
        "--keys 10000000000 of --value-bytes 100 needs about",
    ),
    (
        "bench ycsb-mix --preset silo --keys 10000000000",
        "--keys 10000000000 of --key-bytes 8 and --value-bytes 100 needs about",
    ),
    (
        "bench tpcc --threads 10001",
        "--threads 10001 needs --warehouses",
    ),
    (
        "bench tpcc --seconds -1",
        "--seconds must be positive, got -1",
    ),
    (
        "bench tpcc --epoch-ms 0",
        "--epoch-ms must be at least 1, got 0",
    ),
    (
        "bench tpcc --durable x --checkpoint-interval 0",
        "--checkpoint-interval must be positive, got 0",
    ),
    (
        "bench tpcc --protocol bohm --bohm-batch 0",
        "--bohm-batch must be at least 1, got 0",
    ),
    (
        "bench tpcc --protocol bohm --bohm-threads 0",
        "--bohm-threads must be at least 1, got 0",
    ),
    (
        "bench tpcc --protocol bohm --bohm-threads 4096",
        "--bohm-threads 4096 threads exceed this machine's",
    ),
    (
        "bench tpcc --protocol deuteronomy --tc-log-mb 1",
        "--tc-log-mb 1: the log needs at least 2 buffers",
    ),
    ("bench smallbank --customers 0", "need at least 2 customers"),
    (
        "bench smallbank --spin-us -1",
        "must be between 0 and 1000000 microseconds, got -1",
    ),
    (
        "bench ycsb-mix --preset nosuch",
        "unknown YCSB preset \"nosuch\"; known presets: silo",
    ),
    (
        "bench ycsb-mix --preset silo --theta 1.5",
        "--theta is a Zipfian skew, at least 0 and below 1, got 1.5",
    ),
    (
        "bench ycsb-mix --preset silo --theta -0.5",
        "--theta is a Zipfian skew, at least 0 and below 1, got -0.5",
    ),
    (
        "bench ycsb-mix --preset silo --read-pct 150",
        "read percentage must be in [0, 100], got 150",
    ),
    (
        "bench ycsb-mix --preset silo --key-bytes 4",
        "key length must be 8 (binary) or between 11 and 256",
    ),
    (
        "bench queue --live 0",
        "--live: live items per queue must be between 1 and 2^40 - 1, got 0",
    ),
    ("bench index --keys 0", "--keys must be at least 1, got 0"),
    (
        "bench index --threads 0",
        "--threads: every thread count must be at least 1",
    ),
    ("check bank --txns 0", "--txns must be at least 1, got 0"),
    (
        "check bank --threads 0",
        "--threads must be at least 1, got 0",
    ),
    (
        "check bank --theta 1",
        "--theta is a Zipfian skew, at least 0 and below 1, got 1",
    ),
    (
        "check bank --theta -0.5",
        "--theta is a Zipfian skew, at least 0 and below 1, got -0.5",
    ),
    (
        "check bank --epoch-ms 0",
        "--epoch-ms must be at least 1, got 0",
    ),
    (
        "reproduce --max-threads 0 --out r",
        "--max-threads must be at least 1",
    ),
    // A flag no protocol of the run takes.
    (
        "bench ycsb --protocol hekaton --global-tid",
        "--global-tid applies to silo only, and --protocol is hekaton",
    ),
    (
        "bench ycsb --protocol kv --no-snapshots",
        "--no-snapshots applies to silo only, and --protocol is kv",
    ),
    (
        "bench tpcc --protocol hekaton --no-gc",
        "--no-gc applies to silo only, and --protocol is hekaton: add silo",
    ),
    (
        "bench tpcc --protocol hekaton --durable x",
        "--durable applies to silo and deuteronomy only, and --protocol is hekaton",
    ),
    (
        "bench tpcc --protocol hekaton,si --durable x",
        "--protocol is hekaton and si: add silo or deuteronomy",
    ),
    (
        "bench tpcc --protocol deuteronomy --durable x --loggers 2",
        "--loggers applies to silo only, and --protocol is deuteronomy",
    ),
    (
        "bench tpcc --protocol deuteronomy --durable x --checkpoint-threads 3",
        "--checkpoint-threads applies to silo only",
    ),
    (
        "bench tpcc --protocol deuteronomy --durable x --buffered-io",
        "--buffered-io applies to silo only",
    ),
    (
        "bench tpcc --point-index --protocol deuteronomy",
        "--point-index applies to silo, kv, 2pl-ordered",
    ),
    (
        "bench tpcc --bohm-batch 10",
        "--bohm-batch applies to bohm only, and --protocol is silo",
    ),
    (
        "bench smallbank --bohm-threads 1",
        "--bohm-threads applies to bohm only",
    ),
    (
        "bench tpcc --dc disk",
        "--dc applies to deuteronomy only, and --protocol is silo",
    ),
    (
        "bench tpcc --tc-log-mb 64",
        "--tc-log-mb applies to deuteronomy only",
    ),
    (
        "bench ycsb-mix --preset silo --tc-soft-versions 10",
        "--tc-soft-versions applies to deuteronomy only",
    ),
    (
        "check bank --bohm-batch 10",
        "--bohm-batch applies to bohm only, and --protocol is silo",
    ),
    (
        "check bank --dense-keys",
        "--dense-keys applies to hekaton, si and ermia only",
    ),
    ("check bank --dc disk", "--dc applies to deuteronomy only"),
    (
        "check bank --protocol hekaton --epoch-ms 3",
        "--epoch-ms applies to silo only, and --protocol is hekaton",
    ),
    (
        "bench tpcc --protocol deuteronomy --etcd-endpoints http://127.0.0.1:1",
        "--etcd-endpoints is for --dc etcd",
    ),
    (
        "bench tpcc --snapshot-stock-level --no-snapshots",
        "--snapshot-stock-level needs snapshots: drop --no-snapshots",
    ),
    // A protocol that cannot run the workload, with the reason.
    (
        "bench ycsb --protocol bohm",
        "protocol `bohm` cannot run `bench ycsb`",
    ),
    (
        "bench tpcc --protocol kv",
        "protocol `kv` cannot run `bench tpcc`",
    ),
    (
        "bench smallbank --protocol kv",
        "protocol `kv` cannot run `bench smallbank`",
    ),
    (
        "bench queue --protocol bohm",
        "protocol `bohm` cannot run `bench queue`",
    ),
    (
        "check bank --protocol kv",
        "protocol `kv` cannot run `check bank`",
    ),
    (
        "check bank --protocol partitioned",
        "protocol `partitioned` cannot run `check bank`",
    ),
    // Paths, checked before the run.
    (
        "bench ycsb --json /nonexistent/dir/out.json",
        "--json /nonexistent/dir/out.json: the directory /nonexistent/dir does not exist",
    ),
    ("bench tpcc --json /", "--json / is a directory, not a file"),
    (
        "check bank --save-history /nonexistent/h.json",
        "--save-history /nonexistent/h.json: the directory /nonexistent does not exist",
    ),
    (
        "bench tpcc --durable /etc/passwd",
        "--durable /etc/passwd is a file, not a directory",
    ),
    (
        "inspect /nonexistent/dir",
        "/nonexistent/dir does not exist",
    ),
    (
        "inspect /etc/passwd",
        "/etc/passwd is a file, not a database directory",
    ),
    (
        "inspect /",
        "/ is not a granary database directory (no pepoch file)",
    ),
    (
        "recover /nonexistent/dir out",
        "/nonexistent/dir does not exist",
    ),
    (
        "bench recover /nonexistent/dir",
        "/nonexistent/dir does not exist",
    ),
    (
        "plot /nonexistent.json --out p",
        "/nonexistent.json: cannot read",
    ),
    (
        "reproduce --only nosuch --out r",
        "no experiment named \"nosuch\"",
    ),
    // Parsing (clap): unknown names and missing arguments.
    (
        "bench ycsb --protocol nosuch",
        "invalid value 'nosuch' for '--protocol <PROTOCOL>'",
    ),
    ("check nosuch", "unknown check workload \"nosuch\""),
    (
        "check bank --level nosuch",
        "invalid value 'nosuch' for '--level <LEVEL>'",
    ),
    (
        "bench smallbank --dense-keys",
        "unexpected argument '--dense-keys'",
    ),
    (
        "reproduce --quick --full --out r",
        "the argument '--quick' cannot be used with '--full'",
    ),
    (
        "reproduce --seconds 3 --out r",
        "the following required arguments were not provided",
    ),
    (
        "bench tpcc --loggers 2",
        "the following required arguments were not provided",
    ),
    (
        "bench ycsb-mix",
        "the following required arguments were not provided",
    ),
    ("nosuch", "unrecognized subcommand 'nosuch'"),
    ("bench nosuch", "unrecognized subcommand 'nosuch'"),
];

#[cfg(not(feature = "etcd"))]
const WITHOUT_ETCD: &[(&str, &str)] = &[
    (
        "bench tpcc --protocol deuteronomy --dc etcd",
        "--dc etcd: this granary was built without the etcd data component",
    ),
    (
        "check bank --protocol deuteronomy --dc etcd",
        "--dc etcd: this granary was built without the etcd data component",
    ),
];
#[cfg(feature = "etcd")]
const WITHOUT_ETCD: &[(&str, &str)] = &[];

#[test]
fn bad_invocations_are_refused_before_anything_runs() {
    let dir = common::scratch("bad", "invocations");
    let mut wrong = Vec::new();
    for (args, want) in CASES.iter().chain(WITHOUT_ETCD) {
        let o = Command::new(env!("CARGO_BIN_EXE_granary"))
            .args(args.split_whitespace())
            .current_dir(&dir)
            .output()
            .expect("run granary");
        let err = text(&o.stderr);
        let first = err.lines().next().unwrap_or("");
        if o.status.code() != Some(2) || !first.contains(want) {
            wrong.push(format!(
                "granary {args}: exit {:?}, first line {first:?}; expected exit 2 and {want:?}",
                o.status.code()
            ));
        }
        // Nothing ran: no output on stdout, no directory made.
        if !o.stdout.is_empty() {
            wrong.push(format!(
                "granary {args}: wrote to stdout: {}",
                text(&o.stdout)
            ));
        }
    }
    assert!(
        !dir.join("x").exists() && !dir.join("r").exists() && !dir.join("p").exists(),
        "a refused run created its directory"
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(CASES.len() >= 60, "{} cases", CASES.len());
    assert!(
        wrong.is_empty(),
        "{} of {} wrong:\n{}",
        wrong.len(),
        CASES.len(),
        wrong.join("\n")
    );
}

/// `inspect`, `recover` and `bench recover` read Silo's directories; on
/// Deuteronomy's they say so, rather than "not a granary directory".
#[test]
fn silo_tools_name_a_deuteronomy_directory() {
    let dir = common::scratch("bad", "deuteronomy");
    let deut = dir.join("deut");
    std::fs::create_dir_all(&deut).unwrap();
    std::fs::write(deut.join("log-0000000000000000"), b"").unwrap();
    std::fs::write(deut.join("tables"), b"").unwrap();
    let d = deut.to_str().unwrap();
    let out = dir.join("out");
    for args in [
        vec!["inspect", d],
        vec!["recover", d, out.to_str().unwrap()],
        vec!["bench", "recover", d],
    ] {
        let o = common::granary(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("is a Deuteronomy directory"),
            "{args:?}: {err}"
        );
    }
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
