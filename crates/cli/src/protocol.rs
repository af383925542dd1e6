//! The registry of concurrency-control protocols the command runs: their
//! names (`--protocol`), what each claims and needs, and how each one's
//! engine is built ([`with_engine!`](crate::designs::with_engine)).
//!
//! A design joins in this file alone:
//!
//! 1. a variant of [`Protocol`], its doc comment the one-line help
//!    (`#[value(name = "2pl-nowait")]` and `#[serde(rename = "2pl-nowait")]`
//!    where the kebab-case of the variant's name is not the name wanted);
//! 2. a line in [`Protocol::traits`]: the isolation level it claims and
//!    what it needs of a workload ([`Traits`]);
//! 3. a line in [`with_engine!`](crate::designs::with_engine) building its engine from
//!    [`EngineOptions`](crate::designs::EngineOptions).
//!
//! The compiler points at 2 and 3 once 1 is written. A design with flags
//! of its own adds a file in `designs/`: its flag group, what the group
//! applies to ([`DesignFlags`](crate::flags::DesignFlags)), and how its
//! engine is built from it.

use clap::ValueEnum;
use granary_api::Partitioning;
use serde::Serialize;

/// A concurrency-control protocol `--protocol` can name.
#[derive(Clone, Copy, Debug, ValueEnum, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Silo's serializable OCC (MemSilo): the default.
    Silo,
    /// Silo's bare index, no transactions (the paper's Key-Value baseline):
    /// bench ycsb only; not serializable, so its invariants go unchecked.
    Kv,
    /// Strict 2PL, locks taken up front in key order from the declared
    /// sets, waiting (BOHM's baseline); undeclared accesses are no-wait.
    #[value(name = "2pl-ordered")]
    #[serde(rename = "2pl-ordered")]
    TwoPlOrdered,
    /// Strict 2PL, no-wait: a conflicting lock aborts the requester,
    /// which backs off and retries (CCBench's ss2pl).
    #[value(name = "2pl-nowait")]
    #[serde(rename = "2pl-nowait")]
    TwoPlNoWait,
    /// Partitioned-Store (Silo §5.4): a spinlock per partition of the
    /// workload's partition key, no other concurrency control.
    Partitioned,
    /// Hekaton's multiversion OCC: a global timestamp counter, commit
    /// dependencies, read validation at commit.
    Hekaton,
    /// Snapshot isolation on Hekaton's version store: first updater wins,
    /// no read validation (write skew commits).
    Si,
    /// ERMIA: snapshot isolation on the same store, made serializable by
    /// the Serial Safety Net's exclusion window test at commit (commits
    /// one at a time under a latch).
    Ermia,
    /// BOHM: procedures planned in batches by CC threads, run by
    /// execution threads (--bohm-cc, --bohm-exec or --bohm-threads,
    /// --bohm-batch); runs ycsb-mix (without snapshot long reads),
    /// smallbank, tpcc (write sets that depend on reads predicted by
    /// reconnaissance) and the check workloads.
    Bohm,
    /// Deuteronomy's transaction component: timestamp-order
    /// MVCC, versions kept in its recovery log's buffers and a read
    /// cache, a TC Proxy applying committed writes to a data component
    /// (`--dc memory|disk|etcd`), durable with `--durable DIR`. Runs
    /// every workload.
    Deuteronomy,
    /// Silo with read-set validation turned off: NOT serializable. Exists
    /// only in builds with the test-only `mutant` feature, to show the
    /// checker catching a broken engine.
    #[cfg(feature = "mutant")]
    SiloMutant,
    /// No-wait 2PL whose reads drop their locks at once: NOT
    /// serializable; test-only `mutant` builds.
    #[cfg(feature = "mutant")]
    #[value(name = "2pl-mutant")]
    #[serde(rename = "2pl-mutant")]
    TwoPlMutant,
    /// BOHM whose reads skip placeholders not yet produced (stale reads):
    /// NOT serializable; test-only `mutant` builds.
    #[cfg(feature = "mutant")]
    BohmMutant,
    /// Deuteronomy's TC with writers that ignore read timestamps: NOT
    /// serializable. Test-only `mutant` builds, for the checker to catch.
    #[cfg(feature = "mutant")]
    #[value(name = "deuteronomy-mutant")]
    #[serde(rename = "deuteronomy-mutant")]
    DeuteronomyMutant,
}

/// The isolation level a protocol claims (`granary check` checks against
/// it unless `--level` says otherwise).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// No cycle in the dependency graph (Adya PL-3).
    Serializable,
    /// Snapshot isolation.
    #[serde(rename = "snapshot-isolation")]
    Snapshot,
    /// Not transactional (kv).
    None,
}

/// What a protocol claims and needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traits {
    /// The isolation level it claims.
    pub isolation: Isolation,
    /// It splits data by a partition key, so it runs only workloads that
    /// have one for every table ([`WorkloadInfo::partitioned`]).
    pub needs_partition_key: bool,
    /// It runs only single-key gets and puts ([`WorkloadInfo::single_key`]).
    pub single_key_only: bool,
    /// It logs and checkpoints (`--durable`).
    pub durable: bool,
    /// It runs transactions handed over as procedures, not closures on
    /// the client's thread ([`WorkloadInfo::procedures`]).
    pub pipelined: bool,
    /// It runs `granary check` only, for this reason (a design in
    /// progress).
    pub check_only: Option<&'static str>,
}

impl Traits {
    /// A serializable in-memory design that runs every workload.
    pub const SERIALIZABLE: Traits = Traits {
        isolation: Isolation::Serializable,
        needs_partition_key: false,
        single_key_only: false,
        durable: false,
        pipelined: false,
        check_only: None,
    };
}

impl Protocol {
    /// What it claims and needs: one line per protocol.
    pub fn traits(self) -> Traits {
        match self {
            Protocol::Silo => Traits {
                durable: true,
                ..Traits::SERIALIZABLE
            },
            Protocol::Kv => Traits {
                isolation: Isolation::None,
                single_key_only: true,
                ..Traits::SERIALIZABLE
            },
            Protocol::TwoPlOrdered
            | Protocol::TwoPlNoWait
            | Protocol::Hekaton
            | Protocol::Ermia => Traits::SERIALIZABLE,
            Protocol::Partitioned => Traits {
                needs_partition_key: true,
                ..Traits::SERIALIZABLE
            },
            Protocol::Si => Traits {
                isolation: Isolation::Snapshot,
                ..Traits::SERIALIZABLE
            },
            Protocol::Bohm => Traits {
                pipelined: true,
                ..Traits::SERIALIZABLE
            },
            Protocol::Deuteronomy => Traits {
                durable: true,
                ..Traits::SERIALIZABLE
            },
            // They claim serializability, and the checker must refute it.
            #[cfg(feature = "mutant")]
            Protocol::SiloMutant | Protocol::TwoPlMutant => Traits::SERIALIZABLE,
            #[cfg(feature = "mutant")]
            Protocol::BohmMutant => Protocol::Bohm.traits(),
            #[cfg(feature = "mutant")]
            Protocol::DeuteronomyMutant => Protocol::Deuteronomy.traits(),
        }
    }

    /// The name `--protocol` takes (and the JSON writes).
    pub fn name(self) -> String {
        self.to_string()
    }

    /// The isolation level it claims.
    pub fn isolation(self) -> Isolation {
        self.traits().isolation
    }

    /// Whether it can run workload `w`: a [`Refusal`] says why not.
    ///
    /// # Errors
    /// A refusal naming the protocol, the workload and the reason.
    pub fn supports(self, w: &WorkloadInfo) -> Result<(), Refusal> {
        match refusal(&self.name(), self.traits(), w) {
            None => Ok(()),
            Some(why) => Err(Refusal {
                protocol: self,
                workload: w.name.clone(),
                why,
            }),
        }
    }
}

/// Why a protocol called `name` with traits `t` cannot run `w`, if it
/// cannot.
fn refusal(name: &str, t: Traits, w: &WorkloadInfo) -> Option<String> {
    if w.durable && !t.durable {
        Some(format!(
            "--durable runs silo and deuteronomy only: {name}'s writes are not logged"
        ))
    } else if let (Some(why), false) = (t.check_only, w.check) {
        Some(format!("{name} runs `granary check` only: {why}"))
    } else if t.single_key_only && !w.single_key {
        Some(format!(
            "{name} runs single-key gets and puts only (it is the bare index, with no \
             transactions), and only `bench ycsb` is made of them"
        ))
    } else if t.pipelined && !w.procedures {
        Some(format!(
            "{name} plans whole procedures in batches on its own threads, and this workload \
             issues transactions it cannot hand over: {}",
            if w.why_not_procedures.is_empty() {
                "its transactions are closures on the client's thread (not yet converted)"
            } else {
                w.why_not_procedures
            }
        ))
    } else if t.needs_partition_key && w.partitioned.is_none() {
        Some(format!(
            "{name} needs a partition key for every table, and this workload has none: {}",
            w.unpartitioned
        ))
    } else {
        None
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.to_possible_value().expect("every protocol has a name");
        f.write_str(v.get_name())
    }
}

/// What a protocol needs to know of a workload to say whether it runs it.
#[derive(Clone, Debug)]
pub struct WorkloadInfo {
    /// As the command names it: `bench tpcc`, `check bank`.
    pub name: String,
    /// Its partitioning (a partition rule per table), `None` if it has no
    /// partition key.
    pub partitioned: Option<Partitioning>,
    /// Why it has none (for a refusal).
    pub unpartitioned: &'static str,
    /// The run logs and checkpoints (`--durable`).
    pub durable: bool,
    /// Its transactions are single-key gets and puts.
    pub single_key: bool,
    /// How many values its partition key takes, where that is small
    /// (TPC-C's warehouses).
    pub partition_values: Option<usize>,
    /// Every transaction it runs is a procedure (a value a pipelined
    /// design can take over), not a closure.
    pub procedures: bool,
    /// Why not, where that is a matter of configuration (for a refusal).
    pub why_not_procedures: &'static str,
    /// It is a `granary check` run (not a benchmark).
    pub check: bool,
}

impl WorkloadInfo {
    /// A workload partitioned by `p`.
    pub fn partitioned(name: impl Into<String>, p: Partitioning) -> WorkloadInfo {
        WorkloadInfo {
            name: name.into(),
            partitioned: Some(p),
            unpartitioned: "",
            durable: false,
            single_key: false,
            partition_values: None,
            procedures: false,
            why_not_procedures: "",
            check: false,
        }
    }

    /// A workload with no partition key, and why.
    pub fn unpartitioned(name: impl Into<String>, why: &'static str) -> WorkloadInfo {
        WorkloadInfo {
            name: name.into(),
            partitioned: None,
            unpartitioned: why,
            durable: false,
            single_key: false,
            partition_values: None,
            procedures: false,
            why_not_procedures: "",
            check: false,
        }
    }

    /// Whether every transaction is a procedure (`why` not, if not).
    pub fn procedures(mut self, on: bool, why: &'static str) -> WorkloadInfo {
        self.procedures = on;
        self.why_not_procedures = why;
        self
    }

    /// A `granary check` run.
    pub fn check(mut self) -> WorkloadInfo {
        self.check = true;
        self
    }

    /// Whether the run is durable.
    pub fn durable(mut self, on: bool) -> WorkloadInfo {
        self.durable = on;
        self
    }

    /// Its partition key takes `n` values.
    pub fn partition_values(mut self, n: usize) -> WorkloadInfo {
        self.partition_values = Some(n);
        self
    }

    /// Whether its transactions are single-key gets and puts.
    pub fn single_key(mut self, on: bool) -> WorkloadInfo {
        self.single_key = on;
        self
    }
}

/// Why a protocol cannot run a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub protocol: Protocol,
    pub workload: String,
    pub why: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "protocol `{}` cannot run `{}`: {}",
            self.protocol, self.workload, self.why
        )
    }
}

impl std::error::Error for Refusal {}

/// Check every protocol of `protocols` against `w` before anything runs
/// (so a refusal never follows work done for another protocol). Several
/// protocols cannot share one `--durable` directory.
///
/// # Errors
/// The first refusal, or `--durable` with several protocols.
pub fn check_all(protocols: &[Protocol], w: &WorkloadInfo) -> Result<(), String> {
    if protocols.is_empty() {
        return Err("--protocol needs at least one protocol".into());
    }
    for p in protocols {
        p.supports(w).map_err(|r| r.to_string())?;
    }
    if w.durable && protocols.len() > 1 {
        return Err(format!(
            "--durable takes one protocol, not {}: the directory holds one database \
             (run each protocol durably on its own)",
            protocols.len()
        ));
    }
    Ok(())
}

/// A group of flags that configures some designs only (each design's
/// group is in `designs/`; `flags.rs` checks a run against them).
pub trait DesignFlags: clap::Args {
    /// The designs its flags configure.
    const DESIGNS: &'static [Protocol];
}

/// Silo alone, the designs of Silo's own flags.
pub(crate) const SILO: &[Protocol] = &[Protocol::Silo];

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::PartitionRule;

    fn bank() -> WorkloadInfo {
        WorkloadInfo::unpartitioned("check bank", "its audits scan every account")
    }

    fn tpcc() -> WorkloadInfo {
        WorkloadInfo::partitioned("bench tpcc", |_| Some(PartitionRule::Shared))
    }

    #[test]
    fn names_are_the_flags() {
        assert_eq!(Protocol::Silo.name(), "silo");
        assert_eq!(Protocol::Kv.to_string(), "kv");
        assert_eq!(
            serde_json::to_value(Protocol::Kv).unwrap(),
            serde_json::json!("kv")
        );
        for p in Protocol::value_variants() {
            assert_eq!(Protocol::from_str(&p.name(), false), Ok(*p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
        assert_eq!(
            serde_json::to_value(Isolation::Snapshot).unwrap(),
            "snapshot-isolation"
        );
    }

    #[test]
    fn silo_runs_everything_and_logs() {
        for w in [
            bank(),
            tpcc(),
            tpcc().durable(true),
            bank().single_key(true),
        ] {
            assert_eq!(Protocol::Silo.supports(&w), Ok(()), "{w:?}");
        }
        assert_eq!(Protocol::Silo.isolation(), Isolation::Serializable);
    }

    #[test]
    fn kv_runs_only_single_key_work_and_never_durably() {
        let ycsb =
            WorkloadInfo::partitioned("bench ycsb", |_| Some(PartitionRule::Hash)).single_key(true);
        assert_eq!(Protocol::Kv.supports(&ycsb), Ok(()));
        let e = Protocol::Kv.supports(&tpcc()).unwrap_err();
        assert_eq!(e.protocol, Protocol::Kv);
        assert!(
            e.to_string()
                .starts_with("protocol `kv` cannot run `bench tpcc`: "),
            "{e}"
        );
        let e = Protocol::Kv.supports(&ycsb.durable(true)).unwrap_err();
        assert!(
            e.why.contains("--durable runs silo and deuteronomy only"),
            "{e}"
        );
    }

    /// The refusal a design that needs a partition key (Partitioned-Store)
    /// gets, before such a design is here.
    #[test]
    fn a_partition_key_is_required_where_needed() {
        let t = Traits {
            needs_partition_key: true,
            ..Traits::SERIALIZABLE
        };
        assert_eq!(refusal("partitioned", t, &tpcc()), None);
        assert_eq!(
            refusal("partitioned", t, &bank()).as_deref(),
            Some(
                "partitioned needs a partition key for every table, and this workload has none: \
                 its audits scan every account"
            )
        );
        assert_eq!(refusal("silo", Traits::SERIALIZABLE, &bank()), None);
    }

    #[test]
    fn several_protocols_cannot_share_a_durable_directory() {
        let w = tpcc().durable(true);
        assert_eq!(check_all(&[Protocol::Silo], &w), Ok(()));
        let e = check_all(&[Protocol::Silo, Protocol::Silo], &w).unwrap_err();
        assert!(e.contains("--durable takes one protocol"), "{e}");
        // A refusal comes first, naming the protocol.
        let e = check_all(&[Protocol::Silo, Protocol::Kv], &w).unwrap_err();
        assert!(e.contains("`kv`"), "{e}");
        assert!(check_all(&[], &tpcc()).is_err());
    }
}
