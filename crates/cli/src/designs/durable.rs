//! `--durable` and its flags, shared by the designs that log (Silo's
//! SiloR and Deuteronomy's recovery log), and what a durable run prints.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use granary::{Database, Options};
use granary_workloads::driver::RunReport;
use serde::Serialize;

/// Durability flags (SiloR), shared by every driver benchmark.
#[derive(Args, Debug, Clone, Serialize)]
pub struct DurableArgs {
    /// Log and checkpoint into this new directory (SiloR; Deuteronomy's
    /// recovery log and disk data component): reports commit-to-durable
    /// latency besides throughput. It must not already hold a database;
    /// afterwards (Silo) `granary inspect DIR` and `granary bench recover
    /// DIR` work on it. Silo and deuteronomy, one protocol at a time.
    #[arg(long, value_name = "DIR")]
    pub durable: Option<PathBuf>,
    /// Logger threads (each with its own directory: log.0, log.1, …).
    #[arg(long, default_value_t = 1, requires = "durable")]
    pub loggers: usize,
    /// Take a checkpoint every this many seconds (the dip shows in the
    /// per-second series, SiloR Fig. 1 and 5).
    #[arg(long, value_name = "SECONDS", requires = "durable")]
    pub checkpoint_interval: Option<f64>,
    /// Checkpointer threads (each writes 2 files, so recovery can load
    /// them in parallel).
    #[arg(long, default_value_t = 2, requires = "durable")]
    pub checkpoint_threads: usize,
    /// Write log and checkpoint files through the page cache instead of
    /// with O_DIRECT (for comparison; O_DIRECT is used only where the file
    /// system supports it anyway).
    #[arg(long, requires = "durable")]
    pub buffered_io: bool,
}

impl DurableArgs {
    /// Open the benchmark's database: in memory, or durable in a fresh
    /// directory (commits do not wait for durability; the driver measures
    /// when they become durable).
    pub(crate) fn open(&self, o: Options) -> Result<Database, String> {
        let Some(dir) = &self.durable else {
            return Database::new(o).map_err(|e| e.to_string());
        };
        if granary::durable::recover::exists(dir) {
            return Err(format!(
                "{} already holds a granary database; --durable needs a new or empty directory \
                 (remove it, or time its recovery with `granary bench recover {}`)",
                dir.display(),
                dir.display()
            ));
        }
        let every = match self.checkpoint_interval {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => return Err(format!("--checkpoint-interval must be positive, not {s}")),
        };
        let o = o
            .loggers(self.loggers)
            .wait_for_durable(false)
            .checkpoint_interval(every)
            .checkpoint_threads(self.checkpoint_threads)
            .direct_io(!self.buffered_io);
        Database::open(dir, o).map_err(|e| e.to_string())
    }
}

/// Print what a durable run measured.
pub(crate) fn print_durability(r: &RunReport) {
    if let Some(d) = &r.durability {
        let l = &d.durable_latency_us;
        println!(
            "  durable commit latency µs: p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0}  ({} samples)",
            l.p50, l.p90, l.p99, l.p999, l.max, l.samples
        );
        println!(
            "  log: {:.1} MB/s ({:.1} MB over the measured period)",
            d.log_mb_per_s,
            d.log_bytes as f64 / 1e6
        );
        if let Some(line) = checkpoint_line(&d.checkpoints_s) {
            println!("  {line}");
        }
    }
}

/// When checkpoints ran in the measured period, in seconds from its
/// start; `None` if none did.
fn checkpoint_line(spans: &[[f64; 2]]) -> Option<String> {
    const SHOWN: usize = 8;
    if spans.is_empty() {
        return None;
    }
    let mut at: Vec<String> = spans
        .iter()
        .take(SHOWN)
        .map(|[b, e]| format!("{b:.1}–{e:.1}"))
        .collect();
    if spans.len() > SHOWN {
        at.push(format!("and {} more", spans.len() - SHOWN));
    }
    Some(format!(
        "checkpoints in the measured period (s from its start): {}",
        at.join(", ")
    ))
}
