//! The `granary` command.

mod index_bench;
mod report;
mod rng;
mod ycsb;

use clap::{Parser, Subcommand};

/// granary: a multicore in-memory serializable transaction engine (Silo),
/// with the papers' workloads and benchmarks.
#[derive(Parser, Debug)]
#[command(name = "granary", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a benchmark and report throughput (and optionally JSON).
    #[command(subcommand)]
    Bench(Bench),
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
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Bench(Bench::Ycsb(a)) => ycsb::run(a).map(|_| ()),
        Cmd::Bench(Bench::Index(a)) => index_bench::run(a).map(|_| ()),
    };
    if let Err(e) = r {
        eprintln!("granary: {e}");
        std::process::exit(2);
    }
}
