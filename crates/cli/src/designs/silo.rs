//! Silo's own flags (its factor-analysis switches, silo-sosp13 §5.7) and
//! its database; `kv`, Silo's bare index, as an engine.

use clap::Args;
use granary::kv::{KvEngine, KvRunner};
use granary::{Database, Options};
use granary_api::{Engine, Error, TableId};
use serde::Serialize;

use super::options::EngineOptions;
use crate::protocol::{DesignFlags, Protocol, SILO};

/// Silo's factor-analysis switches (silo-sosp13 §5.7, Fig. 11): each turns
/// off one of Silo's mechanisms so its worth can be measured. Silo only;
/// every one keeps Silo serializable.
#[derive(Args, Debug, Clone, Default, Serialize)]
pub struct SiloArgs {
    /// Silo: a new record for every write, never an overwrite in place
    /// (Fig. 11's *Simple*).
    #[arg(long)]
    pub no_overwrites: bool,
    /// Silo: take every record from the global allocator, with no
    /// per-worker recycling or chunks for old versions (Fig. 11 without
    /// *+Allocator*).
    #[arg(long)]
    pub no_record_pool: bool,
    /// Silo: keep no old versions for snapshot transactions
    /// (*+NoSnapshots*); snapshot transactions are then refused.
    #[arg(long)]
    pub no_snapshots: bool,
    /// Silo: keep an old version on every write that crosses a snapshot
    /// epoch, as Silo does, even while no snapshot transaction runs
    /// (granary's default keeps them only while snapshots are in use).
    #[arg(long, conflicts_with = "no_snapshots")]
    pub always_versions: bool,
    /// Silo: free nothing while running (*+NoGC*): retired records and
    /// old versions stay allocated until the database is dropped, so
    /// memory grows with the run.
    #[arg(long)]
    pub no_gc: bool,
}

impl SiloArgs {
    /// `o` with these switches applied.
    pub fn apply(&self, o: Options) -> Options {
        let o = o
            .overwrites(!self.no_overwrites)
            .record_pool(!self.no_record_pool)
            .snapshots(!self.no_snapshots)
            .gc(!self.no_gc);
        if self.always_versions {
            o.snapshot_versions_idle_epochs(None)
        } else {
            o
        }
    }
}

impl DesignFlags for SiloArgs {
    const DESIGNS: &'static [Protocol] = SILO;
}

impl EngineOptions<'_> {
    /// Silo's database: in memory, or durable in a fresh directory.
    ///
    /// # Errors
    /// Silo's, or a directory that already holds a database.
    pub fn silo(&self) -> Result<Database, String> {
        match self.durable {
            Some(d) => d.open(self.silo.clone()),
            None => Database::new(self.silo.clone()).map_err(|e| e.to_string()),
        }
    }
}

/// Print a durable database's logging counters (load and run together):
/// waits for a free log buffer mean the loggers did not keep up.
pub(crate) fn print_logging(db: &Database) {
    if let Some(s) = db.durability_stats() {
        println!(
            "  logging (load and run): {} blocks, {} fsyncs, {} waits for a free log buffer, {} checkpoints",
            s.log_blocks, s.log_syncs, s.buffer_waits, s.checkpoints
        );
    }
}

/// Silo's bare index, owning its database (the kv protocol).
pub struct Kv(pub Database);

impl Engine for Kv {
    type Runner = KvRunner;

    fn create_table(&self, name: &str) -> Result<TableId, Error> {
        KvEngine(&self.0).create_table(name)
    }

    fn create_table_with(&self, name: &str, o: granary::TableOptions) -> Result<TableId, Error> {
        KvEngine(&self.0).create_table_with(name, o)
    }

    fn table(&self, name: &str) -> Result<TableId, Error> {
        KvEngine(&self.0).table(name)
    }

    fn runner(&self) -> Result<KvRunner, Error> {
        KvEngine(&self.0).runner()
    }
}
