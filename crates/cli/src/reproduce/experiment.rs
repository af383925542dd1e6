//! What an experiment is, and the arithmetic its verdicts share: its
//! scale, steps and verdict ([`Experiment`]), what a run of it produced
//! ([`Done`]), and reading figures out of the steps' JSON (medians,
//! ratios, spreads). Each paper's file builds its experiments from these;
//! `mod.rs` runs them, `report.rs` writes them up.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::plot::{self, Kind};

/// The cargo profile this binary was built with (`crates/cli/build.rs`).
pub(super) const PROFILE: &str = env!("GRANARY_PROFILE");

/// The scale an experiment runs at.
pub(super) struct Scale {
    pub(super) quick: bool,
    pub(super) seconds: f64,
    pub(super) warmup: f64,
    pub(super) threads: Vec<usize>,
    pub(super) max: usize,
    /// Runs of each step.
    pub(super) rounds: usize,
    /// Scratch directory for durable runs (removed after each step).
    pub(super) tmp: PathBuf,
}

impl Scale {
    /// `--seconds` and `--warmup` at this scale.
    pub(super) fn run(&self) -> [String; 4] {
        self.run_at_least(0.0, 0.0)
    }

    /// As [`Scale::run`], with runs and warm-ups no shorter than these
    /// (for experiments that need time to reach their steady state).
    pub(super) fn run_at_least(&self, seconds: f64, warmup: f64) -> [String; 4] {
        [
            "--seconds".into(),
            fmt_num(self.seconds.max(seconds)),
            "--warmup".into(),
            fmt_num(self.warmup.max(warmup)),
        ]
    }

    pub(super) fn pick<T>(&self, quick: T, full: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// One `granary …` invocation of an experiment.
pub(super) struct Step {
    pub(super) label: String,
    pub(super) args: Vec<String>,
    /// The step writes JSON (`--json FILE` is appended).
    pub(super) json: bool,
    /// Estimated seconds, for the progress bar.
    pub(super) est: f64,
    /// A directory to remove after the experiment.
    pub(super) scratch: Option<PathBuf>,
}

pub(super) fn step(label: impl Into<String>, args: &[&str], extra: &[String], est: f64) -> Step {
    let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    a.extend(extra.iter().cloned());
    Step {
        label: label.into(),
        args: a,
        json: true,
        est,
        scratch: None,
    }
}

/// What the numbers say, next to what the paper says.
pub(super) struct Verdict {
    /// Rows of (what, ours, paper).
    pub(super) rows: Vec<[String; 3]>,
    /// One sentence: does the shape hold, and why it may differ.
    pub(super) sentence: String,
}

impl Verdict {
    /// No numbers to judge (a step's JSON lacks them).
    pub(super) fn failed() -> Verdict {
        Verdict {
            rows: Vec::new(),
            sentence: failed_sentence(),
        }
    }
}

pub(super) struct Experiment {
    pub(super) name: &'static str,
    pub(super) title: &'static str,
    /// The paper's result, in numbers where the paper gives them.
    pub(super) paper: &'static str,
    /// What the scale is, against the paper's.
    pub(super) scale: fn(&Scale) -> String,
    pub(super) steps: fn(&Scale) -> Vec<Step>,
    /// Chart kinds drawn from all the steps' JSON, and the contention
    /// chart's x field.
    pub(super) charts: &'static [Kind],
    pub(super) x: Option<&'static str>,
    pub(super) verdict: fn(&[Value], &Scale) -> Verdict,
}

/// What one experiment produced.
pub(super) struct Done {
    /// Each step's command, as run in its first round.
    pub(super) commands: Vec<String>,
    pub(super) jsons: Vec<Value>,
    pub(super) charts: Vec<(String, PathBuf)>,
    pub(super) verdict: Option<Verdict>,
    /// How the figures were taken: rounds, and their spread.
    pub(super) noise: Option<String>,
    pub(super) failed: Option<String>,
    pub(super) seconds: f64,
}

/// Worker counts to measure: every one up to 4, then powers of two and
/// the maximum.
pub(super) fn thread_points(max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (1..=max.min(4)).collect();
    let mut t = 8;
    while t < max {
        v.push(t);
        t *= 2;
    }
    if !v.contains(&max) {
        v.push(max);
    }
    v
}

pub(super) fn read_json(p: &Path) -> Result<Value, String> {
    let s = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    serde_json::from_str(&s).map_err(|e| format!("{} is not JSON: {e}", p.display()))
}

/// A number at a dotted path of `v`.
pub(super) fn num(v: &Value, path: &str) -> Option<f64> {
    plot::lookup(v, path).and_then(|x| {
        x.as_f64()
            .or_else(|| x.as_str().and_then(|s| s.parse().ok()))
    })
}

/// The overall throughput of the `i`-th run, if it has one.
pub(super) fn tput(runs: &[Value], i: usize) -> Option<f64> {
    runs.get(i).and_then(|r| num(r, "throughput_txn_per_s"))
}

/// A result's thread count (`bench tpcc` keeps it with the common flags).
pub(super) fn threads(v: &Value) -> Option<f64> {
    num(v, "config.threads").or_else(|| num(v, "config.common.threads"))
}

/// The throughput of protocol `name` in a multi-protocol result.
pub(super) fn protocol_tput(v: &Value, name: &str) -> Option<f64> {
    v.get("protocols")?
        .as_array()?
        .iter()
        .find(|p| p["protocol"].as_str() == Some(name))?["throughput_txn_per_s"]
        .as_f64()
}

/// Throughput rows for every protocol of every run, labelled by the
/// value of `knob` (a dotted JSON path) in that run, with the paper's
/// result for that protocol at that value: `paper(knob, protocol)`.
pub(super) fn protocol_rows(
    runs: &[Value],
    knob: &str,
    label: &str,
    paper: fn(f64, &str) -> String,
) -> Vec<[String; 3]> {
    let mut rows = Vec::new();
    for r in runs {
        let kv = num(r, knob).unwrap_or(f64::NAN);
        let k = num(r, knob).map_or("?".into(), |x| format!("{x}"));
        for p in r
            .get("protocols")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = p["protocol"].as_str().unwrap_or("?");
            rows.push([
                format!("{label} = {k}: {name}, txn/s"),
                format!("{:.0}", p["throughput_txn_per_s"].as_f64().unwrap_or(0.0)),
                paper(kv, name),
            ]);
        }
    }
    rows
}

/// The fastest protocol of a multi-protocol result.
pub(super) fn fastest(v: &Value) -> Option<String> {
    v.get("protocols")?.as_array()?.iter().max_by(|a, b| {
        let t = |p: &Value| p["throughput_txn_per_s"].as_f64().unwrap_or(0.0);
        t(a).total_cmp(&t(b))
    })?["protocol"]
        .as_str()
        .map(str::to_string)
}

/// The names the report uses for an experiment's chart series, by the
/// names `granary plot` would generate.
pub(super) fn series_names(experiment: &str) -> Vec<(String, String)> {
    let pairs: &[(&str, &str)] = match experiment {
        "silo-fig4" => &[
            ("ycsb kv global-tid=false", "Key-Value"),
            ("ycsb silo global-tid=false", "MemSilo"),
            ("ycsb silo global-tid=true", "MemSilo+GlobalTID"),
        ],
        "silo-fig5" => &[
            ("tpcc silo durable=none", "MemSilo"),
            ("tpcc silo durable=yes", "SiloR (logging)"),
        ],
        "silo-fig8" => &[
            ("tpcc partitioned", "Partitioned-Store"),
            ("tpcc silo", "MemSilo"),
        ],
        "silo-fig9" => &[
            ("tpcc partitioned fast-ids=false", "Partitioned-Store"),
            ("tpcc silo fast-ids=false", "MemSilo"),
            ("tpcc silo fast-ids=true", "MemSilo+FastIds"),
        ],
        "deuteronomy-fig9" => &[
            (
                "ycsb-mix deuteronomy tc-hard-versions=130000 tc-soft-versions=110000",
                "GC at watermarks 1.1× and 1.3× the keys",
            ),
            (
                "ycsb-mix deuteronomy tc-hard-versions=1300000 tc-soft-versions=1100000",
                "GC at watermarks 1.1× and 1.3× the keys",
            ),
            (
                "ycsb-mix deuteronomy tc-hard-versions=1099511627776 tc-soft-versions=1099511627776",
                "no GC",
            ),
        ],
        "silor-fig1" => &[
            ("ycsb-mix silo durable=none", "MemSilo"),
            ("ycsb-mix silo durable=yes", "SiloR (logging, checkpoints)"),
        ],
        _ => &[],
    };
    pairs
        .iter()
        .map(|&(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The median of `v` (of an even count, the mean of the middle two) and
/// the index of a value at it (of an even count, the lower middle one).
pub(super) fn median_at(v: &[f64]) -> (f64, usize) {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let n = order.len();
    if n == 0 {
        return (f64::NAN, 0);
    }
    if n % 2 == 1 {
        (v[order[n / 2]], order[n / 2])
    } else {
        let (lo, hi) = (order[n / 2 - 1], order[n / 2]);
        ((v[lo] + v[hi]) / 2.0, lo)
    }
}

/// Half the range of `v` over its median `m`: how far a round may stray.
pub(super) fn half_range(v: &[f64], m: f64) -> f64 {
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    if v.len() < 2 || m.is_nan() || m <= 0.0 {
        0.0
    } else {
        (hi - lo) / 2.0 / m
    }
}

/// One step's rounds as one result: the median round's JSON, its figure
/// (throughput, or recovery time) and each protocol's throughput replaced
/// by their medians over the rounds, each with its rounds beside it
/// (`rounds`, `rounds_txn_per_s`); and the step's spread, the largest
/// [`half_range`] among those figures.
pub(super) fn median_round(vs: &[Value]) -> (Value, f64) {
    let key = if vs.iter().any(|v| num(v, "throughput_txn_per_s").is_some()) {
        "throughput_txn_per_s"
    } else {
        "recovery_seconds"
    };
    let vals: Vec<f64> = vs.iter().map(|v| num(v, key).unwrap_or(f64::NAN)).collect();
    let (m, at) = median_at(&vals);
    let mut spread = half_range(&vals, m);
    let Some(mut out) = vs.get(at).cloned() else {
        return (Value::Null, 0.0);
    };
    out[key] = m.into();
    out["rounds"] = vals.into();
    if let Some(ps) = out.get_mut("protocols").and_then(Value::as_array_mut) {
        let mut first = None;
        for (j, p) in ps.iter_mut().enumerate() {
            let pv: Vec<f64> = vs
                .iter()
                .map(|v| {
                    v["protocols"][j]["throughput_txn_per_s"]
                        .as_f64()
                        .unwrap_or(f64::NAN)
                })
                .collect();
            let (pm, _) = median_at(&pv);
            spread = spread.max(half_range(&pv, pm));
            let base = *first.get_or_insert(pm);
            p["throughput_txn_per_s"] = pm.into();
            p["throughput_ratio"] = (pm / base).into();
            p["rounds_txn_per_s"] = pv.into();
        }
    }
    (out, spread)
}

/// The ratio a verdict row shows (`1.07×`), if it shows one.
pub(super) fn row_ratio(cell: &str) -> Option<f64> {
    cell.strip_suffix('×')?.trim().parse().ok()
}

/// Mark the verdict's ratios that the rounds' spread cannot tell from
/// 1 (a ratio of two medians, each within ±s of its rounds, can move by
/// about 2s), and say how the figures were taken. Fewer than 3 rounds
/// make the whole verdict inconclusive.
pub(super) fn judge_noise(
    v: &mut Verdict,
    spreads: &[(String, f64)],
    rounds: usize,
) -> Option<String> {
    let (worst_at, worst) = spreads
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(l, x)| (l.as_str(), *x))?;
    let mut all: Vec<f64> = spreads.iter().map(|(_, x)| *x).collect();
    all.sort_by(f64::total_cmp);
    let typical = all[all.len() / 2];
    let pct = |x: f64| format!("±{:.0}%", 100.0 * x);
    let how = format!(
        "Each figure is the median of {rounds} interleaved run{} of its step; the runs of a step \
         spread {} typically, {} at most ({worst_at}).",
        if rounds == 1 { "" } else { "s" },
        pct(typical),
        pct(worst)
    );
    if rounds < 3 {
        v.sentence = format!(
            "Inconclusive: {rounds} run{} of each step cannot tell an effect from noise \
             (run with --rounds 3 or more). {}",
            if rounds == 1 { "" } else { "s" },
            v.sentence
        );
        return Some(how);
    }
    let band = 2.0 * worst;
    let (mut ratios, mut within) = (0, 0);
    for r in &mut v.rows {
        if let Some(x) = row_ratio(&r[1]) {
            ratios += 1;
            if x > 0.0 && x.ln().abs() < band {
                r[1] += " (within noise)";
                within += 1;
            }
        }
    }
    if within > 0 && within == ratios {
        v.sentence = format!(
            "Inconclusive at this scale: every ratio below is within the runs' spread ({} at \
             most) and cannot be told from no difference; read what follows with that in \
             mind. {}",
            pct(worst),
            v.sentence
        );
    } else if within > 0 {
        v.sentence = format!(
            "{within} of the {ratios} ratios are within the runs' spread ({} at most, marked): \
             those cannot be told from no difference at this scale. {}",
            pct(worst),
            v.sentence
        );
    }
    Some(how)
}

pub(super) fn failed_sentence() -> String {
    "No numbers: a step failed.".into()
}

pub(super) fn ratio(r: f64) -> String {
    format!("{r:.2}×")
}

pub(super) fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

pub(super) fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
