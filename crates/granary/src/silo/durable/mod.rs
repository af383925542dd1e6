//! Durability (SiloR, OSDI'14): value logging with epoch group commit,
//! fuzzy checkpoints, and parallel recovery. See `log`, `checkpoint` and
//! `recover`; `docs/FORMAT.md` for the bytes.
//!
//! A database directory holds:
//!
//! ```text
//! LOCK                     held (flock) while a process has it open
//! pepoch                   the persistent epoch e_p, two 512-byte slots
//! tables                   the table catalog
//! log.<i>/data.log         logger i's current file
//! log.<i>/old_data.<e>.g<n> its finished files (max epoch e, generation n)
//! ckpt.<e_l>/part.<j>      a checkpoint's files
//! ckpt.<e_l>/MANIFEST      present once the checkpoint is complete
//! ```

mod abuf;
mod ahead;
pub mod checkpoint;
mod files;
pub mod format;
pub(crate) mod log;
pub mod recover;
pub(crate) mod replay;

pub use checkpoint::CheckpointStats;
pub use granary_storage::crashsim;
pub use granary_storage::fs::DELETING_SUFFIX;
pub use log::DurabilityStats;
pub use recover::{
    scan, CheckpointInfo, DirInfo, LogFileInfo, Problem, RecoveryStats, SalvageReport,
};
