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
//! `study.rs`, `silor.rs`, `bohm.rs`, `deuteronomy.rs`) over the
//! vocabulary of `experiment.rs`; this file runs them and turns their
//! rounds into figures and verdicts, `report.rs` writes the pages.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Args;
use serde_json::Value;

use crate::plot::{self, Format, PlotArgs};
use crate::report::{machine, shell_join};

mod bohm;
mod deuteronomy;
mod experiment;
mod report;
mod silo;
mod silor;
mod study;

use experiment::*;
use report::{html, markdown};

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
