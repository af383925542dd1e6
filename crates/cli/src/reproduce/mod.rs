//! `granary reproduce`: the papers' experiments rerun on this machine, as
//! one report (Markdown and a standalone HTML page) with plots, the raw
//! JSON, and the papers' figures beside ours.
//!
//! Each experiment is a list of `granary bench` invocations of this same
//! binary, each in its own process (the report prints the exact command,
//! so any figure can be regenerated alone), then charts drawn by
//! `granary plot` from their JSON, and a verdict computed from the numbers.
//!
//! Each experiment is a function in its paper's file (`silo.rs`,
//! `study.rs`, `silor.rs`, `bohm.rs`, `deuteronomy.rs`); this file runs
//! them and turns their rounds into figures and verdicts, `report.rs`
//! writes the pages.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Args;
use serde_json::Value;

use crate::plot::{self, Format, Kind, PlotArgs};
use crate::report::{machine, shell_join};

mod bohm;
mod deuteronomy;
mod report;
mod silo;
mod silor;
mod study;

use report::{html, markdown};

/// The cargo profile this binary was built with (`crates/cli/build.rs`).
const PROFILE: &str = env!("GRANARY_PROFILE");

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Small scale: every experiment on small tables with 1-second runs
    /// (about 10 minutes in all on 2 cores, at 3 rounds).
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// The papers' table sizes where memory allows, with runs of
    /// `--seconds` each (the run's length is bounded by it, and estimated
    /// before it starts).
    #[arg(long)]
    pub full: bool,
    /// Seconds per measured run with --full (`--quick` runs are 1 s).
    #[arg(long, default_value_t = 10.0, value_name = "S", requires = "full")]
    pub seconds: f64,
    /// Run only these experiments (comma-separated); `--list` names them.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub only: Vec<String>,
    /// List the experiments and exit.
    #[arg(long)]
    pub list: bool,
    /// Runs of every step, interleaved step by step (round 1 of every step
    /// of an experiment, then round 2, …): each figure is their median,
    /// and a comparison smaller than their spread is marked as within
    /// noise. At least 3 for a verdict; 1 or 2 only to try the commands.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub rounds: usize,
    /// Most worker threads (default: every core).
    #[arg(long, value_name = "N")]
    pub max_threads: Option<usize>,
    /// Directory for report.md, report.html, plots/ and raw/ (created; an
    /// existing report there is replaced).
    #[arg(long, value_name = "DIR", required_unless_present = "list")]
    pub out: Option<PathBuf>,
}

/// The scale an experiment runs at.
struct Scale {
    quick: bool,
    seconds: f64,
    warmup: f64,
    threads: Vec<usize>,
    max: usize,
    /// Runs of each step.
    rounds: usize,
    /// Scratch directory for durable runs (removed after each step).
    tmp: PathBuf,
}

impl Scale {
    /// `--seconds` and `--warmup` at this scale.
    fn run(&self) -> [String; 4] {
        self.run_at_least(0.0, 0.0)
    }

    /// As [`Scale::run`], with runs and warm-ups no shorter than these
    /// (for experiments that need time to reach their steady state).
    fn run_at_least(&self, seconds: f64, warmup: f64) -> [String; 4] {
        [
            "--seconds".into(),
            fmt_num(self.seconds.max(seconds)),
            "--warmup".into(),
            fmt_num(self.warmup.max(warmup)),
        ]
    }

    fn pick<T>(&self, quick: T, full: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// One `granary …` invocation of an experiment.
struct Step {
    label: String,
    args: Vec<String>,
    /// The step writes JSON (`--json FILE` is appended).
    json: bool,
    /// Estimated seconds, for the progress bar.
    est: f64,
    /// A directory to remove after the experiment.
    scratch: Option<PathBuf>,
}

fn step(label: impl Into<String>, args: &[&str], extra: &[String], est: f64) -> Step {
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
struct Verdict {
    /// Rows of (what, ours, paper).
    rows: Vec<[String; 3]>,
    /// One sentence: does the shape hold, and why it may differ.
    sentence: String,
}

impl Verdict {
    /// No numbers to judge (a step's JSON lacks them).
    fn failed() -> Verdict {
        Verdict {
            rows: Vec::new(),
            sentence: failed_sentence(),
        }
    }
}

struct Experiment {
    name: &'static str,
    title: &'static str,
    /// The paper's result, in numbers where the paper gives them.
    paper: &'static str,
    /// What the scale is, against the paper's.
    scale: fn(&Scale) -> String,
    steps: fn(&Scale) -> Vec<Step>,
    /// Chart kinds drawn from all the steps' JSON, and the contention
    /// chart's x field.
    charts: &'static [Kind],
    x: Option<&'static str>,
    verdict: fn(&[Value], &Scale) -> Verdict,
}

/// Every experiment, in the order the report runs and shows them.
fn experiments() -> Vec<Experiment> {
    vec![
        silo::fig4(),
        silo::fig5(),
        study::skew(),
        bohm::fig5(),
        silo::fig8(),
        silo::fig9(),
        silo::fig10(),
        silo::fig11(),
        study::fig2(),
        silor::fig1(),
        bohm::fig6(),
        bohm::fig10(),
        deuteronomy::fig7(),
        bohm::fig8(),
        deuteronomy::fig9(),
        silor::recovery(),
    ]
}

/// What one experiment produced.
struct Done {
    /// Each step's command, as run in its first round.
    commands: Vec<String>,
    jsons: Vec<Value>,
    charts: Vec<(String, PathBuf)>,
    verdict: Option<Verdict>,
    /// How the figures were taken: rounds, and their spread.
    noise: Option<String>,
    failed: Option<String>,
    seconds: f64,
}

pub fn run(args: ReproduceArgs) -> Result<(), String> {
    let all = experiments();
    if args.list {
        for e in &all {
            println!("{:16} {}", e.name, e.title);
        }
        return Ok(());
    }
    let out = args.out.clone().ok_or("--out DIR is required")?;
    for name in &args.only {
        if !all.iter().any(|e| e.name == name) {
            let names: Vec<&str> = all.iter().map(|e| e.name).collect();
            return Err(format!(
                "no experiment named {name:?}; the experiments are: {}",
                names.join(", ")
            ));
        }
    }
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        return Err("--seconds must be a positive number".into());
    }
    if args.rounds == 0 {
        return Err("--rounds must be at least 1, got 0".into());
    }
    let cores = machine().cpus;
    let max = args.max_threads.unwrap_or(cores);
    if max == 0 {
        return Err("--max-threads must be at least 1".into());
    }
    let quick = !args.full;
    let scale = Scale {
        quick,
        seconds: if quick { 1.0 } else { args.seconds },
        warmup: if quick { 0.3 } else { 1.0 },
        threads: thread_points(max),
        max,
        rounds: args.rounds,
        tmp: out.join("tmp"),
    };
    let chosen: Vec<&Experiment> = all
        .iter()
        .filter(|e| args.only.is_empty() || args.only.iter().any(|n| n == e.name))
        .collect();
    for d in ["raw", "plots"] {
        std::fs::create_dir_all(out.join(d))
            .map_err(|e| format!("cannot create {}: {e}", out.join(d).display()))?;
    }
    if PROFILE != "dist" {
        eprintln!(
            "note: this granary is a `{}` build; docs/BENCHMARKS.md's figures are from the \
             `dist` profile (cargo install --path crates/cli --locked --profile dist)",
            PROFILE
        );
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let plan: Vec<(&Experiment, Vec<Step>)> =
        chosen.iter().map(|e| (*e, (e.steps)(&scale))).collect();
    let rounds = args.rounds;
    let total: f64 = rounds as f64 * plan.iter().flat_map(|(_, s)| s).map(|s| s.est).sum::<f64>();
    // Each step's estimate is an upper bound: the whole `--quick` set at 3
    // rounds, estimated at 15 minutes, took 9 min 21 s on 2 cores, so the
    // range given runs from 60% of the bound to the bound.
    eprintln!(
        "granary reproduce: {} experiment(s), {} runs ({rounds} rounds of {}), about {}–{} min \
         ({} scale, {} threads at most)",
        plan.len(),
        rounds * plan.iter().map(|(_, s)| s.len()).sum::<usize>(),
        plan.iter().map(|(_, s)| s.len()).sum::<usize>(),
        (0.6 * total / 60.0).floor().max(1.0),
        (total / 60.0).ceil(),
        if quick { "quick" } else { "full" },
        max
    );
    if rounds < 3 {
        eprintln!(
            "note: --rounds {rounds}: verdicts need at least 3 runs of each step to tell an \
             effect from noise; this report will say so"
        );
    }
    let pb = progress_bar(total);
    let started = Instant::now();
    let mut results = Vec::new();
    for (e, steps) in &plan {
        let t0 = Instant::now();
        let raw = out.join("raw").join(e.name);
        std::fs::create_dir_all(&raw)
            .map_err(|err| format!("cannot create {}: {err}", raw.display()))?;
        let mut done = Done {
            commands: Vec::new(),
            jsons: Vec::new(),
            charts: Vec::new(),
            verdict: None,
            noise: None,
            failed: None,
            seconds: 0.0,
        };
        // Each step's JSON from every round, in step order.
        let mut by_step: Vec<Vec<Value>> = steps.iter().map(|_| Vec::new()).collect();
        for round in 0..rounds {
            // A durable step needs a fresh directory each round.
            for s in steps {
                if let Some(d) = &s.scratch {
                    let _ = std::fs::remove_dir_all(d);
                }
            }
            for (i, s) in steps.iter().enumerate() {
                pb.set_message(format!("{}: {} (round {})", e.name, s.label, round + 1));
                let mut a = s.args.clone();
                let json = raw.join(format!("{i}.round{}.json", round + 1));
                if s.json {
                    a.push("--json".into());
                    a.push(path_arg(&json));
                }
                if round == 0 {
                    done.commands.push(format!("granary {}", shell_join(&a)));
                }
                if done.failed.is_none() {
                    let log = raw.join(format!("{i}.round{}.log", round + 1));
                    match run_step(&exe, &a, &log) {
                        Ok(()) if s.json => match read_json(&json) {
                            Ok(v) => by_step[i].push(v),
                            Err(err) => done.failed = Some(err),
                        },
                        Ok(()) => {}
                        Err(err) => done.failed = Some(format!("{}: {err}", s.label)),
                    }
                }
                pb.inc(s.est.round() as u64);
            }
        }
        for s in steps {
            if let Some(d) = &s.scratch {
                let _ = std::fs::remove_dir_all(d);
            }
        }
        // Each step's median round (raw/I.json, which the charts read),
        // and the spread of its rounds.
        let mut spreads = Vec::new();
        if done.failed.is_none() {
            for (i, (s, vs)) in steps.iter().zip(&by_step).enumerate() {
                if !s.json {
                    continue;
                }
                let (merged, spread) = median_round(vs);
                let path = raw.join(format!("{i}.json"));
                let text = serde_json::to_string_pretty(&merged).map_err(|e| e.to_string())?;
                std::fs::write(&path, text)
                    .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
                spreads.push((s.label.clone(), spread));
                done.jsons.push(merged);
            }
        }
        if done.failed.is_none() {
            let mut v = (e.verdict)(&done.jsons, &scale);
            done.noise = judge_noise(&mut v, &spreads, rounds);
            done.verdict = Some(v);
            if !e.charts.is_empty() {
                let dir = out.join("plots").join(e.name);
                let files: Vec<PathBuf> = (0..steps.len())
                    .map(|i| raw.join(format!("{i}.json")))
                    .filter(|p| p.exists())
                    .collect();
                let drawn = plot::run(PlotArgs {
                    files,
                    out: dir.clone(),
                    kind: e.charts.to_vec(),
                    format: vec![Format::Png, Format::Svg],
                    x: e.x.map(str::to_string),
                    names: series_names(e.name),
                });
                match drawn {
                    Ok(()) => {
                        for k in e.charts {
                            let png = dir.join(format!("{}.png", k.name()));
                            if png.exists() {
                                done.charts.push((k.name().to_string(), png));
                            }
                        }
                    }
                    Err(err) => done.failed = Some(format!("charts: {err}")),
                }
            }
        }
        done.seconds = t0.elapsed().as_secs_f64();
        results.push((*e, done));
    }
    pb.finish_and_clear();
    let _ = std::fs::remove_dir_all(&scale.tmp);
    let elapsed = started.elapsed().as_secs_f64();
    let md = markdown(&results, &scale, elapsed, &out);
    let md_path = out.join("report.md");
    std::fs::write(&md_path, &md)
        .map_err(|e| format!("cannot write {}: {e}", md_path.display()))?;
    let html_path = out.join("report.html");
    std::fs::write(&html_path, html(&results, &scale, elapsed)?)
        .map_err(|e| format!("cannot write {}: {e}", html_path.display()))?;
    println!("{}", md_path.display());
    println!("{}", html_path.display());
    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, d)| d.failed.is_some())
        .map(|(e, _)| e.name)
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} experiment(s) failed: {} (the report says why; logs in {}/raw)",
            failed.len(),
            failed.join(", "),
            out.display()
        ))
    }
}

/// Worker counts to measure: every one up to 4, then powers of two and
/// the maximum.
fn thread_points(max: usize) -> Vec<usize> {
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

fn progress_bar(total_s: f64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let pb = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(total_s.round() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "[{elapsed_precise}] [{bar:30}] {percent}% (about {eta} left) {msg}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    pb
}

/// Run `granary ARGS`, its output into `log`.
fn run_step(exe: &Path, args: &[String], log: &Path) -> Result<(), String> {
    let out = Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let mut text = out.stdout;
    text.extend_from_slice(&out.stderr);
    std::fs::write(log, &text).map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let tail: Vec<&str> = std::str::from_utf8(&text)
        .unwrap_or("")
        .lines()
        .rev()
        .take(3)
        .collect();
    Err(format!(
        "exited with {} ({})",
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
    ))
}

fn read_json(p: &Path) -> Result<Value, String> {
    let s = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    serde_json::from_str(&s).map_err(|e| format!("{} is not JSON: {e}", p.display()))
}

/// A number at a dotted path of `v`.
fn num(v: &Value, path: &str) -> Option<f64> {
    plot::lookup(v, path).and_then(|x| {
        x.as_f64()
            .or_else(|| x.as_str().and_then(|s| s.parse().ok()))
    })
}

/// The overall throughput of the `i`-th run, if it has one.
fn tput(runs: &[Value], i: usize) -> Option<f64> {
    runs.get(i).and_then(|r| num(r, "throughput_txn_per_s"))
}

/// A result's thread count (`bench tpcc` keeps it with the common flags).
fn threads(v: &Value) -> Option<f64> {
    num(v, "config.threads").or_else(|| num(v, "config.common.threads"))
}

/// The throughput of protocol `name` in a multi-protocol result.
fn protocol_tput(v: &Value, name: &str) -> Option<f64> {
    v.get("protocols")?
        .as_array()?
        .iter()
        .find(|p| p["protocol"].as_str() == Some(name))?["throughput_txn_per_s"]
        .as_f64()
}

/// Throughput rows for every protocol of every run, labelled by the
/// value of `knob` (a dotted JSON path) in that run, with the paper's
/// result for that protocol at that value: `paper(knob, protocol)`.
fn protocol_rows(
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
fn fastest(v: &Value) -> Option<String> {
    v.get("protocols")?.as_array()?.iter().max_by(|a, b| {
        let t = |p: &Value| p["throughput_txn_per_s"].as_f64().unwrap_or(0.0);
        t(a).total_cmp(&t(b))
    })?["protocol"]
        .as_str()
        .map(str::to_string)
}

/// The names the report uses for an experiment's chart series, by the
/// names `granary plot` would generate.
fn series_names(experiment: &str) -> Vec<(String, String)> {
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
fn median_at(v: &[f64]) -> (f64, usize) {
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
fn half_range(v: &[f64], m: f64) -> f64 {
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
fn median_round(vs: &[Value]) -> (Value, f64) {
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
fn row_ratio(cell: &str) -> Option<f64> {
    cell.strip_suffix('×')?.trim().parse().ok()
}

/// Mark the verdict's ratios that the rounds' spread cannot tell from
/// 1 (a ratio of two medians, each within ±s of its rounds, can move by
/// about 2s), and say how the figures were taken. Fewer than 3 rounds
/// make the whole verdict inconclusive.
fn judge_noise(v: &mut Verdict, spreads: &[(String, f64)], rounds: usize) -> Option<String> {
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

fn failed_sentence() -> String {
    "No numbers: a step failed.".into()
}

fn ratio(r: f64) -> String {
    format!("{r:.2}×")
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::report::base64;
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }

    #[test]
    fn thread_points_cover_one_to_max() {
        assert_eq!(thread_points(1), [1]);
        assert_eq!(thread_points(2), [1, 2]);
        assert_eq!(thread_points(6), [1, 2, 3, 4, 6]);
        assert_eq!(thread_points(32), [1, 2, 3, 4, 8, 16, 32]);
    }

    #[test]
    fn experiment_names_are_unique() {
        let all = experiments();
        let mut names: Vec<&str> = all.iter().map(|e| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn a_step_is_its_median_round_with_each_protocol_medianed() {
        let round = |top: f64, a: f64, b: f64| {
            serde_json::json!({
                "throughput_txn_per_s": top,
                "protocols": [
                    {"protocol": "silo", "throughput_txn_per_s": a},
                    {"protocol": "si", "throughput_txn_per_s": b},
                ],
            })
        };
        let (v, spread) = median_round(&[
            round(100.0, 100.0, 50.0),
            round(90.0, 90.0, 70.0),
            round(110.0, 110.0, 60.0),
        ]);
        assert_eq!(v["throughput_txn_per_s"], 100.0);
        assert_eq!(v["rounds"], serde_json::json!([100.0, 90.0, 110.0]));
        assert_eq!(protocol_tput(&v, "si"), Some(60.0));
        assert_eq!(v["protocols"][1]["throughput_ratio"], 0.6);
        // si's rounds spread ±10/60, the widest.
        assert!((spread - 10.0 / 60.0).abs() < 1e-9, "{spread}");
    }

    #[test]
    fn ratios_within_the_spread_are_marked_and_few_rounds_are_inconclusive() {
        let verdict = || Verdict {
            rows: vec![
                ["a / b".into(), "1.05×".into(), String::new()],
                ["c / b".into(), "1.60×".into(), String::new()],
                ["txn/s".into(), "1000".into(), String::new()],
            ],
            sentence: "The shape holds.".into(),
        };
        let spreads = [("x @ 1".to_string(), 0.04), ("y @ 2".to_string(), 0.02)];
        let mut v = verdict();
        let how = judge_noise(&mut v, &spreads, 3).unwrap();
        assert!(how.contains("±4% at most (x @ 1)"), "{how}");
        assert_eq!(v.rows[0][1], "1.05× (within noise)");
        assert_eq!(v.rows[1][1], "1.60×");
        assert_eq!(v.rows[2][1], "1000");
        assert!(
            v.sentence.starts_with("1 of the 2 ratios are within"),
            "{}",
            v.sentence
        );
        let mut v = verdict();
        judge_noise(&mut v, &spreads, 1);
        assert!(
            v.sentence.starts_with("Inconclusive: 1 run of each step"),
            "{}",
            v.sentence
        );
    }

    #[test]
    fn every_bohm_protocol_row_has_the_papers_result() {
        let scale = Scale {
            quick: true,
            seconds: 1.0,
            warmup: 0.3,
            threads: vec![1, 2],
            max: 2,
            rounds: 3,
            tmp: std::env::temp_dir(),
        };
        let protocols: Vec<Value> = ["bohm", "silo", "2pl-ordered", "hekaton", "si"]
            .iter()
            .map(|p| serde_json::json!({"protocol": p, "throughput_txn_per_s": 1000.0}))
            .collect();
        let at = |knob: &str, values: &[f64]| -> Vec<Value> {
            values
                .iter()
                .map(|&x| {
                    let mut v = serde_json::json!({
                        "throughput_txn_per_s": 1000.0,
                        "protocols": protocols,
                        "config": {"theta": 0.0, "customers": 0, "args": {"long_read_fraction": 0.0}},
                    });
                    *v.pointer_mut(knob).unwrap() = x.into();
                    v
                })
                .collect()
        };
        let cases = [
            ("bohm-fig5", at("/config/theta", &[0.0, 0.9])),
            ("bohm-fig6", at("/config/theta", &[0.0, 0.9])),
            (
                "bohm-fig8",
                at("/config/args/long_read_fraction", &[0.0, 0.01, 0.1]),
            ),
            ("bohm-fig10", at("/config/customers", &[50.0, 10000.0])),
        ];
        let all = experiments();
        for (name, runs) in cases {
            let e = all.iter().find(|e| e.name == name).expect(name);
            let v = (e.verdict)(&runs, &scale);
            let rows: Vec<_> = v.rows.iter().filter(|r| r[0].ends_with("txn/s")).collect();
            assert!(!rows.is_empty(), "{name}");
            for r in rows {
                assert!(!r[2].is_empty(), "{name}: no paper figure for {}", r[0]);
            }
        }
    }
}
