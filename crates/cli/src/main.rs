//! The `granary` command.

mod bench;
mod check;
mod designs;
mod flags;
mod guard;
mod inspect;
mod interleave;
mod plot;
mod protocol;
mod recover;
mod report;
mod reproduce;

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
    Bench(bench::Bench),
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
        Cmd::Bench(b) => bench::run(b),
        Cmd::Check(a) => match check::run(a) {
            Ok(0) => Ok(()),
            Ok(_) => std::process::exit(1),
            Err(e) => Err(e),
        },
        Cmd::Plot(a) => plot::run(a),
        Cmd::Reproduce(a) => reproduce::run(a),
        Cmd::Inspect(a) => inspect::run(&a),
        Cmd::Recover(a) => recover::run(&a),
    };
    if let Err(e) = r {
        eprintln!("granary: {e}");
        std::process::exit(2);
    }
}
