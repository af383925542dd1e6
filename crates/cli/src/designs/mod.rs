//! Each design's own flags and how its engine is built, one file per
//! design that has flags of its own (`silo.rs`, `bohm.rs`,
//! `deuteronomy.rs`); `durable.rs` holds the durability flags that Silo
//! and Deuteronomy share. [`EngineOptions`] gathers what every engine is
//! built from (`options.rs`), and [`with_engine!`] builds the one a run
//! names. Which flags apply to which design is declared with each group
//! ([`crate::protocol::DesignFlags`]), so a flag is never silently
//! ignored.

pub mod bohm;
pub mod deuteronomy;
pub mod durable;
pub mod options;
pub mod silo;

pub use bohm::BohmArgs;
pub use deuteronomy::TcArgs;
pub(crate) use durable::print_durability;
pub use durable::DurableArgs;
pub use options::EngineOptions;
pub(crate) use silo::print_logging;
pub use silo::{Kv, SiloArgs};

/// 2PL of `variant`, with point indexes if `--point-index`.
pub fn two_pl(
    opts: &EngineOptions<'_>,
    variant: granary_protocols::two_pl::Variant,
) -> granary_protocols::two_pl::TwoPl {
    use granary_protocols::two_pl::TwoPl;
    if opts.point_index {
        TwoPl::with_point_index(variant)
    } else {
        TwoPl::new(variant)
    }
}

/// A design on the multiversion store (Hekaton or SI), with point
/// indexes if `--point-index`.
pub fn mvcc<C: granary_protocols::mvcc::Certifier>(
    opts: &EngineOptions<'_>,
) -> granary_protocols::mvcc::Mvcc<C> {
    use granary_protocols::mvcc::Mvcc;
    if opts.point_index {
        Mvcc::with_point_index()
    } else {
        Mvcc::new()
    }
}

/// Build `protocol`'s engine from `opts` (an [`EngineOptions`]) and
/// evaluate `body` with it bound, by value, to `db`: `body` is generic
/// code over `E: Engine` (an engine is not object-safe). Errors building
/// the engine return from the enclosing function, whose error type must
/// come from `String`.
///
/// ```ignore
/// let report = with_engine!(p, &opts, |db| run_on(&db, &workload)?);
/// ```
///
/// A design joins with one arm (the compiler asks for it):
///
/// ```ignore
/// Protocol::TwoPlNoWait => {
///     let $db = granary_protocols::two_pl::TwoPl::new(granary_protocols::two_pl::Variant::NoWait);
///     $body
/// }
/// ```
macro_rules! with_engine {
    ($protocol:expr, $opts:expr, |$db:ident| $body:expr) => {{
        let opts: &$crate::designs::EngineOptions<'_> = $opts;
        match $protocol {
            $crate::protocol::Protocol::Silo => {
                let $db = opts.silo()?;
                $body
            }
            $crate::protocol::Protocol::Kv => {
                let $db = $crate::designs::Kv(opts.silo()?);
                $body
            }
            $crate::protocol::Protocol::TwoPlOrdered => {
                let $db =
                    $crate::designs::two_pl(opts, granary_protocols::two_pl::Variant::Ordered);
                $body
            }
            $crate::protocol::Protocol::TwoPlNoWait => {
                let $db = $crate::designs::two_pl(opts, granary_protocols::two_pl::Variant::NoWait);
                $body
            }
            $crate::protocol::Protocol::Partitioned => {
                let n = opts
                    .partitions
                    .min(granary_protocols::partitioned::MAX_PARTITIONS);
                let $db = if opts.point_index {
                    granary_protocols::partitioned::Partitioned::with_point_index(
                        n,
                        opts.partitioning()?,
                    )
                } else {
                    granary_protocols::partitioned::Partitioned::new(n, opts.partitioning()?)
                }
                .map_err(|e| e.to_string())?;
                $body
            }
            $crate::protocol::Protocol::Hekaton => {
                let $db = $crate::designs::mvcc::<granary_protocols::hekaton::Validation>(opts);
                $body
            }
            $crate::protocol::Protocol::Si => {
                let $db = $crate::designs::mvcc::<granary_protocols::si::FirstUpdaterWins>(opts);
                $body
            }
            $crate::protocol::Protocol::Ermia => {
                let $db = $crate::designs::mvcc::<granary_protocols::ermia::SerialSafetyNet>(opts);
                $body
            }
            $crate::protocol::Protocol::Bohm => {
                let $db =
                    granary_protocols::bohm::Bohm::new(opts.bohm).map_err(|e| e.to_string())?;
                $body
            }
            $crate::protocol::Protocol::Deuteronomy => {
                let $db = opts.deuteronomy()?;
                $body
            }
            #[cfg(feature = "mutant")]
            $crate::protocol::Protocol::TwoPlMutant => {
                let $db = granary_protocols::two_pl::TwoPl::new(
                    granary_protocols::two_pl::Variant::MutantShortReads,
                );
                $body
            }
            #[cfg(feature = "mutant")]
            $crate::protocol::Protocol::BohmMutant => {
                let $db = granary_protocols::bohm::Bohm::new(granary_protocols::bohm::Config {
                    mutant_skip_unready: true,
                    ..opts.bohm
                })
                .map_err(|e| e.to_string())?;
                $body
            }
            #[cfg(feature = "mutant")]
            $crate::protocol::Protocol::DeuteronomyMutant => {
                let $db = granary_protocols::deuteronomy::tc::Tc::mutant_ignoring_reads();
                $body
            }
            #[cfg(feature = "mutant")]
            $crate::protocol::Protocol::SiloMutant => {
                let $db =
                    granary::Database::new(opts.silo.clone().mutant_skip_read_validation(true))
                        .map_err(|e| e.to_string())?;
                $body
            }
        }
    }};
}
pub(crate) use with_engine;
