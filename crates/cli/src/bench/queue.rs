//! `granary bench queue`: a queue per thread, each transaction pushing an
//! item at the tail and popping the one at the head (TPC-C's new-order
//! table in miniature), with the resident set size in each second, to
//! show what deletes leave behind in memory.

use clap::Args;
use granary_workloads::queue::{self, Queue, QueueConfig, MAX_QUEUES};
use serde::Serialize;

use crate::bench::common::{drive, CommonArgs};
use crate::protocol::WorkloadInfo;

#[derive(Args, Debug, Clone, Serialize)]
pub struct QueueArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Items in each thread's queue, at load and after every transaction.
    #[arg(long, default_value_t = 100_000)]
    pub live: u64,
    /// Value size in bytes (at least 8: each value starts with its item's
    /// sequence number).
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
}

pub fn run(a: QueueArgs) -> Result<(), String> {
    let threads = a.common.threads;
    if threads > MAX_QUEUES {
        return Err(format!(
            "--threads {threads}: a queue per thread, and at most {MAX_QUEUES} queues"
        ));
    }
    let cfg = QueueConfig {
        queues: threads.max(1),
        live: a.live,
        value_bytes: a.value_bytes,
    };
    Queue::new(cfg.clone()).map_err(|e| match e {
        granary_api::Error::InvalidOption(m) if m.starts_with("live") => {
            format!("--live: {m}")
        }
        granary_api::Error::InvalidOption(m) if m.starts_with("value") => {
            format!("--value-bytes: {m}")
        }
        e => e.to_string(),
    })?;
    let info = WorkloadInfo::partitioned("bench queue", queue::partitioning())
        .partition_values(cfg.queues)
        .procedures(
            false,
            "each transaction's keys follow from its thread's committed ones; \
             submitted procedures would need the queue's head tracked in flight",
        );
    crate::guard::fits(
        &a.common.protocol,
        crate::guard::Data::Records {
            count: a.live.saturating_mul(cfg.queues as u64),
            bytes: a.value_bytes as u64 + 72,
        },
        &format!(
            "--live {} of --value-bytes {} in each of {} queues",
            a.live, a.value_bytes, cfg.queues
        ),
    )?;
    let make = |_| Queue::new(cfg.clone()).map_err(|e| e.to_string());
    let about = format!("--live {} --value-bytes {}", a.live, a.value_bytes);
    let summaries = drive("queue", &about, make, info, &a.common, &a)?;
    let live = cfg.live_bytes() as f64;
    let mib = |b: f64| b / (1u64 << 20) as f64;
    for (i, s) in summaries.iter().enumerate() {
        let r = &s.result;
        let (Some(&first), Some(&last)) = (r.rss_per_second.first(), r.rss_per_second.last())
        else {
            continue;
        };
        // The resident set's change within a run is the running
        // database's own: the others sit still meanwhile.
        let change = mib(last as f64) - mib(first as f64);
        let who = match summaries.len() {
            1 => String::new(),
            _ => format!(" ({})", crate::bench::common::named(&summaries, i)),
        };
        match r.database_bytes {
            Some(own) => println!(
                "  queue memory{who}: live items {:.1} MiB; the database holds {:.1} MiB after the \
                 run ({:.1}× the live items), {change:+.1} MiB between the first and the last \
                 measured second",
                mib(live),
                mib(own as f64),
                own as f64 / live,
            ),
            None => println!(
                "  queue memory{who}: live items {:.1} MiB; resident {:.1} MiB after the first \
                 measured second, {:.1} MiB after the last ({change:+.1} MiB)",
                mib(live),
                mib(first as f64),
                mib(last as f64),
            ),
        }
    }
    Ok(())
}
