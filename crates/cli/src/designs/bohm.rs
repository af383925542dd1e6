//! BOHM's own flags: its thread arrangement and batch size.

use clap::Args;
use serde::Serialize;

use crate::protocol::{DesignFlags, Protocol};

/// BOHM's thread arrangement (`--protocol bohm`).
#[derive(Args, Debug, Clone, Serialize)]
pub struct BohmArgs {
    /// BOHM's concurrency-control threads (m): each owns a hash partition
    /// of the keys and plans the writes to it, batch by batch.
    #[arg(long, default_value_t = 1)]
    pub bohm_cc: usize,
    /// BOHM's execution threads (n): they run the planned procedures.
    /// `--threads` are the clients that submit them.
    #[arg(long, default_value_t = 1)]
    pub bohm_exec: usize,
    /// Instead of separate CC and execution threads: T threads that each
    /// plan their partition of a batch, then run their share of it
    /// (m = n = T; the stages no longer overlap, but no thread idles while
    /// the other stage has work). `--bohm-threads 1` is BOHM on one thread.
    #[arg(long, value_name = "T", conflicts_with_all = ["bohm_cc", "bohm_exec"])]
    pub bohm_threads: Option<usize>,
    /// Procedures per BOHM batch (each client keeps this many in flight).
    #[arg(long, default_value_t = 1000)]
    pub bohm_batch: usize,
}

impl BohmArgs {
    /// The engine's configuration, refused if the machine cannot run it:
    /// BOHM's threads spin while they wait, so more of them than cores
    /// would only take turns.
    ///
    /// # Errors
    /// A count of 0, or more BOHM threads than cores.
    // Test-only `mutant` builds give the config one more field.
    #[allow(clippy::needless_update)]
    pub fn config(&self) -> Result<granary_protocols::bohm::Config, String> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for (flag, n) in [
            ("--bohm-cc", self.bohm_cc),
            ("--bohm-exec", self.bohm_exec),
            ("--bohm-batch", self.bohm_batch),
            ("--bohm-threads", self.bohm_threads.unwrap_or(1)),
        ] {
            if n == 0 {
                return Err(format!("{flag} must be at least 1, got 0"));
            }
        }
        let (cc, exec, both) = match self.bohm_threads {
            Some(t) => (t, t, true),
            None => (self.bohm_cc, self.bohm_exec, false),
        };
        let threads = if both { cc } else { cc + exec };
        if threads > cores {
            let asked = match self.bohm_threads {
                Some(t) => format!("--bohm-threads {t}"),
                None => format!("--bohm-cc {cc} + --bohm-exec {exec}"),
            };
            return Err(format!(
                "{asked} threads exceed this machine's {cores} cores \
                 (BOHM's threads wait by spinning; more of them than cores only take turns)"
            ));
        }
        Ok(granary_protocols::bohm::Config {
            cc_threads: cc,
            exec_threads: exec,
            batch: self.bohm_batch,
            both,
            ..Default::default()
        })
    }
}

impl DesignFlags for BohmArgs {
    const DESIGNS: &'static [Protocol] = &[Protocol::Bohm];
}
