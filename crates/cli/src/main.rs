//! The `granary` command.

mod bench;
mod bench_recover;
mod check;
mod designs;
mod flags;
mod guard;
mod index_bench;
mod inspect;
mod interleave;
mod plot;
mod protocol;
mod queue;
mod recover;
mod report;
mod reproduce;
mod smallbank;
mod ycsb;
mod ycsb_mix;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Records, tree nodes and versions are small, short-lived allocations
/// from every worker thread: mimalloc's per-thread free lists serve them
/// far faster than glibc's malloc (see docs/BENCHMARKS.md). Only the
/// binary chooses; the library leaves the allocator to its user.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `granary --version`: the crate version, the commit and the profile
/// the binary was built from (figures are only comparable within one).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GRANARY_BUILD"), ")");

/// granary: a multicore in-memory serializable transaction engine (Silo),
/// with the papers' workloads and benchmarks.
#[derive(Parser, Debug)]
#[command(name = "granary", version = VERSION)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a benchmark and report throughput (and optionally JSON).
    #[command(subcommand)]
    Bench(Bench),
    /// Run a contended workload with history recording on and check the
    /// history for serializability anomalies (Adya/Elle). Prints
    /// "0 anomalies in N transactions" or the smallest anomaly found, and
    /// exits 1 if any was found. Example:
    /// granary check ycsb --protocol silo --threads 4 --txns 100000
    Check(check::CheckArgs),
    /// Draw PNG and SVG charts from `granary bench ... --json` results:
    /// throughput vs threads, throughput and aborts vs a contention knob,
    /// throughput per second, latency CDFs and time breakdowns. Example:
    /// granary plot tpcc-*.json --out plots --kind throughput,latency
    Plot(plot::PlotArgs),
    /// Rerun the papers' experiments on this machine and write one report:
    /// DIR/report.md and a standalone DIR/report.html (plots embedded), PNG
    /// and SVG charts, the raw JSON, and the paper's figures beside ours with
    /// a verdict on whether each shape holds. Every run is a `granary bench`
    /// command the report prints, so any figure can be regenerated alone.
    /// `--list` names the experiments. Example:
    /// granary reproduce --quick --out repro
    Reproduce(reproduce::ReproduceArgs),
    /// Show what a durable database directory holds: the persistent epoch
    /// e_p, the checkpoint, every log file with its epoch range and durable
    /// prefix, and any tail the next open will discard. Lists as problems
    /// what a strict open would fail with (a missing manifest or log
    /// generation, a short file, damaged bytes), in open's words, and then
    /// exits with status 2. Read-only; works on a directory left by kill -9.
    /// Example: granary inspect /tmp/db
    Inspect(inspect::InspectArgs),
    /// Recover a copy of a durable database directory into OUT, leaving
    /// DIR untouched. Strict by default: fails, naming the file, if data
    /// the durable state needs is missing or damaged. With --salvage,
    /// recovers the longest consistent prefix that survives (the state as
    /// of the last epoch every logger still holds completely) and prints
    /// the epochs and files lost. OUT then opens normally. Example:
    /// granary recover --salvage /tmp/db /tmp/db-salvaged
    Recover(recover::RecoverArgs),
}

#[derive(Subcommand, Debug)]
enum Bench {
    /// Silo §5.2's YCSB variant: 80% reads, 20% read-modify-writes, 100-byte
    /// values, uniform keys. Example:
    /// granary bench ycsb --threads 2 --seconds 10 --keys 1000000 --json out.json
    Ycsb(ycsb::YcsbArgs),
    /// Point lookups on the bare index vs crossbeam-skiplist, same process.
    /// Example: granary bench index --keys 10000000 --threads 1,2
    Index(index_bench::IndexArgs),
    /// TPC-C (all nine tables, five transactions, standard mix; Silo §5.3),
    /// each thread bound to a home warehouse. Checks the consistency
    /// conditions afterwards. Example:
    /// granary bench tpcc --threads 2 --warehouses 2 --seconds 10 --json out.json
    Tpcc(bench::TpccArgs),
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
    Recover(bench_recover::BenchRecoverArgs),
}

/// Every value may be a negative number (`--theta -0.5` is then refused
/// by the flag's own range check, naming it, rather than read as a flag).
fn negative_numbers(cmd: clap::Command) -> clap::Command {
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut cmd = cmd.mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    });
    for s in subs {
        cmd = cmd.mut_subcommand(s, negative_numbers);
    }
    cmd
}

fn main() {
    // Stop quietly when stdout is a closed pipe (`granary inspect DIR |
    // head`), as Unix tools do, instead of panicking in `println!`.
    // SAFETY: restoring the default disposition of a signal, before any
    // thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let matches = negative_numbers(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // A flag no protocol of the run takes, and an output or directory
    // that could not be used, are refused before anything runs.
    if let Err(e) = flags::before_run(flags::leaf(&matches)) {
        eprintln!("granary: {e}");
        std::process::exit(2);
    }
    let r = match cli.cmd {
        Cmd::Bench(Bench::Ycsb(a)) => ycsb::run(a).map(|_| ()),
        Cmd::Bench(Bench::Index(a)) => index_bench::run(a).map(|_| ()),
        Cmd::Bench(Bench::Tpcc(a)) => bench::tpcc(a).map(|_| ()),
        Cmd::Bench(Bench::Smallbank(a)) => smallbank::run(a).map(|_| ()),
        Cmd::Bench(Bench::YcsbMix(a)) => ycsb_mix::run(a).map(|_| ()),
        Cmd::Bench(Bench::Queue(a)) => queue::run(a).map(|_| ()),
        Cmd::Check(a) => match check::run(a) {
            Ok(0) => Ok(()),
            Ok(_) => std::process::exit(1),
            Err(e) => Err(e),
        },
        Cmd::Plot(a) => plot::run(a),
        Cmd::Reproduce(a) => reproduce::run(a),
        Cmd::Inspect(a) => inspect::run(&a),
        Cmd::Recover(a) => recover::run(&a),
        Cmd::Bench(Bench::Recover(a)) => bench_recover::run(&a),
    };
    if let Err(e) = r {
        eprintln!("granary: {e}");
        std::process::exit(2);
    }
}
