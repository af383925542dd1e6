//! The one rule for flags that configure some designs only: given on the
//! command line while none of those designs is in `--protocol`, such a
//! flag is an error that names it and the designs it applies to, before
//! anything runs. A flag is never silently ignored.
//!
//! Each design's flags are declared here once: a design's own group of
//! flags ([`SiloArgs`](crate::designs::SiloArgs),
//! [`BohmArgs`](crate::designs::BohmArgs), [`TcArgs`](crate::designs::TcArgs))
//! by the group, every other flag by name in [`SCOPED`] or [`GENERAL`].
//! A test walks every verb that takes `--protocol` and fails on a flag in
//! none of them, so a new flag cannot be forgotten.

use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

use crate::protocol::{DesignFlags, Protocol, SILO};

/// Flags outside a design's group that configure some designs only, by
/// their long name.
pub const SCOPED: &[(&str, &[Protocol])] = &[
    // Durability: Silo's (SiloR) and Deuteronomy's recovery log.
    ("durable", &[Protocol::Silo, Protocol::Deuteronomy]),
    // Deuteronomy's TC checkpoints (its RSSP) on the same interval.
    (
        "checkpoint-interval",
        &[Protocol::Silo, Protocol::Deuteronomy],
    ),
    // SiloR's loggers and checkpointers; Deuteronomy has one log.
    ("loggers", SILO),
    ("checkpoint-threads", SILO),
    ("buffered-io", SILO),
    // Silo's epochs, its GlobalTID variant and its snapshot versions
    // (`bench ycsb` has its own copies of two Fig. 11 switches).
    ("epoch-ms", SILO),
    ("global-tid", SILO),
    ("no-snapshots", SILO),
    ("always-versions", SILO),
    // A hash table beside the tree: every design but Deuteronomy.
    (
        "point-index",
        &[
            Protocol::Silo,
            Protocol::Kv,
            Protocol::TwoPlOrdered,
            Protocol::TwoPlNoWait,
            Protocol::Partitioned,
            Protocol::Hekaton,
            Protocol::Si,
            Protocol::Ermia,
            Protocol::Bohm,
        ],
    ),
    // Version chains in an array by key.
    (
        "dense-keys",
        &[Protocol::Hekaton, Protocol::Si, Protocol::Ermia],
    ),
];

/// Flags that apply to every design: the workload, the run and the
/// output.
pub const GENERAL: &[&str] = &[
    "protocol",
    "runs",
    "threads",
    "seconds",
    "warmup",
    "seed",
    "latency-every",
    "breakdown",
    "json",
    "label",
    "help",
    // Workload shapes.
    "keys",
    "value-bytes",
    "read-pct",
    "theta",
    "workload",
    "txns",
    "level",
    "save-history",
    "warehouses",
    "mix",
    "split-stock",
    "remote-item-pct",
    "remote-payment-pct",
    "snapshot-stock-level",
    "no-bind",
    "fast-ids",
    "customers",
    "spin-us",
    "hotspot",
    "hotspot-pct",
    "by-id",
    "preset",
    "placement",
    "key-bytes",
    "writes-per-txn",
    "ops-per-txn",
    "long-read-fraction",
    "long-read-keys",
    "write-kind",
    "snapshot-long-reads",
    "live",
];

/// Where one flag applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every design.
    All,
    /// These designs only.
    Only(&'static [Protocol]),
}

/// The flags of each design group, by long name, with their designs.
fn groups() -> Vec<(String, &'static [Protocol])> {
    fn of<G: DesignFlags>(out: &mut Vec<(String, &'static [Protocol])>) {
        let cmd = G::augment_args(Command::new("group"));
        for a in cmd.get_arguments() {
            let long = a
                .get_long()
                .map_or_else(|| a.get_id().to_string(), str::to_string);
            out.push((long, G::DESIGNS));
        }
    }
    let mut out = Vec::new();
    of::<crate::designs::SiloArgs>(&mut out);
    of::<crate::designs::BohmArgs>(&mut out);
    of::<crate::designs::TcArgs>(&mut out);
    out
}

/// Where the flag `--long` applies, or `None` if it is not declared.
pub fn scope(long: &str) -> Option<Scope> {
    if let Some((_, d)) = groups().into_iter().find(|(l, _)| l == long) {
        return Some(Scope::Only(d));
    }
    if let Some((_, d)) = SCOPED.iter().find(|(l, _)| *l == long) {
        return Some(Scope::Only(d));
    }
    GENERAL.contains(&long).then_some(Scope::All)
}

/// The design whose flags a protocol takes: a test-only mutant takes its
/// design's.
fn design(p: Protocol) -> Protocol {
    match p {
        #[cfg(feature = "mutant")]
        Protocol::SiloMutant => Protocol::Silo,
        #[cfg(feature = "mutant")]
        Protocol::TwoPlMutant => Protocol::TwoPlNoWait,
        #[cfg(feature = "mutant")]
        Protocol::BohmMutant => Protocol::Bohm,
        #[cfg(feature = "mutant")]
        Protocol::DeuteronomyMutant => Protocol::Deuteronomy,
        p => p,
    }
}

/// `a, b and c` (or `a, b or c`).
fn names(ps: &[Protocol], and: &str) -> String {
    let names: Vec<String> = ps.iter().map(|p| p.name()).collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {and} {last}", init.join(", ")),
    }
}

/// The innermost subcommand's matches: the verb that was run.
pub fn leaf(m: &ArgMatches) -> &ArgMatches {
    let mut m = m;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    m
}

/// Refuse a flag given on the command line that configures none of the
/// protocols `m`'s `--protocol` names. Verbs without `--protocol` pass.
///
/// # Errors
/// The first such flag, named with the designs it applies to.
pub fn check(m: &ArgMatches) -> Result<(), String> {
    let Ok(Some(given)) = m.try_get_many::<Protocol>("protocol") else {
        return Ok(());
    };
    let protocols: Vec<Protocol> = given.copied().collect();
    let mut ids: Vec<&str> = m.ids().map(|id| id.as_str()).collect();
    ids.sort_unstable();
    for id in ids {
        if m.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let long = id.replace('_', "-");
        let Some(Scope::Only(designs)) = scope(&long) else {
            continue;
        };
        if !protocols.iter().any(|&p| designs.contains(&design(p))) {
            return Err(format!(
                "--{long} applies to {} only, and --protocol is {}: add {} to --protocol, or \
                 leave --{long} out",
                names(designs, "and"),
                names(&protocols, "and"),
                names(designs, "or"),
            ));
        }
    }
    Ok(())
}

/// Everything refused before a run starts, on the verb `m` ran: a flag no
/// protocol of the run takes ([`check`]), an output file that could not be
/// written after the run (`--json`, `--save-history`), and a `--durable`
/// that is a file.
///
/// # Errors
/// The first of these, in the user's words.
pub fn before_run(m: &ArgMatches) -> Result<(), String> {
    check(m)?;
    if let Ok(Some(d)) = m.try_get_one::<std::path::PathBuf>("durable") {
        if d.exists() && !d.is_dir() {
            return Err(format!(
                "--durable {} is a file, not a directory (give a new or empty directory)",
                d.display()
            ));
        }
    }
    for id in ["json", "save_history"] {
        if let Ok(Some(path)) = m.try_get_one::<std::path::PathBuf>(id) {
            crate::report::check_output_file(&format!("--{}", id.replace('_', "-")), path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every flag of every verb that takes `--protocol` is declared: a
    /// design's group, [`SCOPED`] or [`GENERAL`].
    #[test]
    fn every_flag_of_a_protocol_verb_is_declared() {
        fn walk(cmd: &Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            if cmd.get_arguments().any(|a| a.get_id() == "protocol") {
                for a in cmd.get_arguments() {
                    let long = a
                        .get_long()
                        .map_or_else(|| a.get_id().to_string(), str::to_string);
                    if scope(&long).is_none() {
                        missing.push(format!("{path}: --{long}"));
                    }
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&crate::Cli::command(), "", &mut missing);
        assert!(
            missing.is_empty(),
            "flags whose designs are not declared in flags.rs: {missing:?}"
        );
    }

    #[test]
    fn a_flag_is_refused_only_when_no_protocol_takes_it() {
        let run = |args: &[&str]| {
            let m = crate::Cli::command().try_get_matches_from(args).unwrap();
            check(leaf(&m))
        };
        let e = run(&["granary", "check", "bank", "--bohm-batch", "10"]).unwrap_err();
        assert!(
            e.starts_with("--bohm-batch applies to bohm only, and --protocol is silo"),
            "{e}"
        );
        assert!(run(&[
            "granary",
            "check",
            "bank",
            "--protocol",
            "silo,bohm",
            "--bohm-batch",
            "10"
        ])
        .is_ok());
        let e = run(&[
            "granary",
            "bench",
            "ycsb",
            "--protocol",
            "hekaton",
            "--global-tid",
        ])
        .unwrap_err();
        assert!(e.starts_with("--global-tid applies to silo only"), "{e}");
        let e = run(&["granary", "check", "bank", "--dense-keys"]).unwrap_err();
        assert!(
            e.starts_with("--dense-keys applies to hekaton, si and ermia only"),
            "{e}"
        );
        assert!(run(&["granary", "check", "bank", "--threads", "2"]).is_ok());
        assert!(run(&["granary", "inspect", "x"]).is_ok());
    }
}
