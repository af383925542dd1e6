//! `granary bench`, one file per workload: `ycsb`, `ycsb_mix` (the
//! papers' YCSB presets), `tpcc`, `smallbank`, `queue`, each run by the
//! shared driver through `common` (the flags every driver benchmark takes,
//! the printed report and the JSON); `index` (the bare index against a
//! skiplist) and `recover` (recovery time of a durable directory) run on
//! their own.

use clap::Subcommand;

pub mod common;
pub mod index;
pub mod queue;
pub mod recover;
pub mod smallbank;
pub mod tpcc;
pub mod ycsb;
pub mod ycsb_mix;

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Silo §5.2's YCSB variant: 80% reads, 20% read-modify-writes, 100-byte
    /// values, uniform keys. Example:
    /// granary bench ycsb --threads 2 --seconds 10 --keys 1000000 --json out.json
    Ycsb(ycsb::YcsbArgs),
    /// Point lookups on the bare index vs crossbeam-skiplist, same process.
    /// Example: granary bench index --keys 10000000 --threads 1,2
    Index(index::IndexArgs),
    /// TPC-C (all nine tables, five transactions, standard mix; Silo §5.3),
    /// each thread bound to a home warehouse. Checks the consistency
    /// conditions afterwards. Example:
    /// granary bench tpcc --threads 2 --warehouses 2 --seconds 10 --json out.json
    Tpcc(tpcc::TpccArgs),
    /// SmallBank (BOHM §4.3): six banking transactions over savings and
    /// checking accounts; checks afterwards that no money appeared or
    /// vanished. Contention grows as --customers shrinks (BOHM: 50 and
    /// 100000, with --spin-us 50). Example:
    /// granary bench smallbank --threads 2 --seconds 10 --customers 50 --json out.json
    Smallbank(smallbank::SmallbankArgs),
    /// The papers' YCSB variants as presets of one generator (silo, silor,
    /// bohm-10rmw, bohm-2rmw8r, bohm-longread, deuteronomy, study), each
    /// setting overridable. Example:
    /// granary bench ycsb-mix --preset bohm-2rmw8r --theta 0 --threads 2 --seconds 10 --json out.json
    YcsbMix(ycsb_mix::YcsbMixArgs),
    /// A queue per thread: each transaction appends an item at its queue's
    /// tail and removes the one at its head (TPC-C's new-order table in
    /// miniature), so the table keeps its size while its keys move on.
    /// Reports the resident memory in each second against the live items'
    /// bytes, and checks afterwards that each queue holds exactly its
    /// items. Example:
    /// granary bench queue --threads 2 --live 100000 --seconds 10 --json out.json
    Queue(queue::QueueArgs),
    /// Time recovery of a durable database directory (SiloR §5) and
    /// compare it with just reading the bytes recovery reads; reports GB/s
    /// of checkpoint and log, and the CPU time recovery took (how many
    /// threads it kept busy on average). The files are evicted from the page cache
    /// (posix_fadvise, no privilege needed) before the read and again
    /// before recovery, so both start cold. DIR is left untouched: a copy
    /// of it is recovered (--in-place recovers DIR itself, as a restart
    /// would). Example: granary bench recover /tmp/db --threads 2
    Recover(recover::BenchRecoverArgs),
}

/// Run the benchmark `b` names.
pub fn run(b: Bench) -> Result<(), String> {
    match b {
        Bench::Ycsb(a) => ycsb::run(a).map(|_| ()),
        Bench::Index(a) => index::run(a).map(|_| ()),
        Bench::Tpcc(a) => tpcc::run(a).map(|_| ()),
        Bench::Smallbank(a) => smallbank::run(a).map(|_| ()),
        Bench::YcsbMix(a) => ycsb_mix::run(a).map(|_| ()),
        Bench::Queue(a) => queue::run(a).map(|_| ()),
        Bench::Recover(a) => recover::run(&a),
    }
}
