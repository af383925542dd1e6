//! Storage primitives every durable design in granary shares: the
//! directory lock and durable directory entries ([`fs`]), checksummed
//! segment files ([`segments`]), failpoints at every write, fsync and
//! rename ([`fs::fp`], feature `failpoints`), and the power-loss journal
//! with its model disk ([`crashsim`], feature `crashsim`).
//!
//! Silo's durability (SiloR) keeps its own block format for logs and
//! checkpoints (O_DIRECT-aligned blocks that carry an epoch and a logger,
//! docs/FORMAT.md) and uses the rest; Deuteronomy's recovery log is a
//! [`segments::SegmentLog`].

pub mod crashsim;
pub mod fs;
pub mod segments;
