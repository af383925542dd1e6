//! From result files to figures: which numbers each chart shows, how runs
//! are grouped into series and what the series are called.
//!
//! A series is one line: the runs that share a benchmark, a protocol and
//! every configuration field that varies among the files, other than the
//! chart's x axis and fields that only say how long or with which seed a
//! run was measured. `warehouses` set equal to the thread count (or left to
//! default to it) does not split series either.

use std::collections::{BTreeMap, BTreeSet};

use super::input::{InputError, Point, Run, PARTS};
use super::render::{BarChart, Corner, Figure, LineChart, Series, Spans, Ticks};

/// Config fields that say how a run was measured, not what ran: they never
/// split series or serve as a contention axis.
const NOISE: [&str; 6] = ["seconds", "warmup", "seed", "json", "latency_every", "runs"];

/// Most panels a figure stacks (breakdown draws one per file).
const MAX_PANELS: usize = 8;

/// A figure and what was left out of it, for stderr.
#[derive(Debug)]
pub struct Built {
    pub figure: Figure,
    pub notes: Vec<String>,
}

/// Why a chart was not drawn.
#[derive(Debug)]
pub enum Unbuilt {
    /// The files do not have what this chart needs (with `--kind all`, the
    /// chart is skipped).
    Unsupported(String),
    /// A file lacks what was asked for by name (`--x`).
    Input(InputError),
}

impl From<InputError> for Unbuilt {
    fn from(e: InputError) -> Self {
        Unbuilt::Input(e)
    }
}

/// Throughput against thread count, a line per series. With `explicit`
/// false it is skipped when every file has the same thread count.
pub fn throughput(runs: &[Run], explicit: bool) -> Result<Built, Unbuilt> {
    let all: Vec<&Run> = runs.iter().collect();
    let threads: BTreeSet<u64> = runs.iter().map(|r| r.threads.to_bits()).collect();
    if threads.len() < 2 && !explicit {
        return Err(Unbuilt::Unsupported(format!(
            "every file has threads={}; nothing to plot against threads",
            runs[0].threads
        )));
    }
    let labels = Labels::new(&all, Axis::Threads);
    let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in runs {
        for p in &r.points {
            groups
                .entry(labels.of(r, &p.protocol))
                .or_default()
                .push((r.threads, p.throughput_txn_per_s));
        }
    }
    let chart = LineChart {
        title: format!("{}: throughput vs threads", benchmarks(&all)),
        x_desc: "threads".into(),
        y_desc: "throughput (txn/s)".into(),
        x_log: false,
        x_ticks: Ticks::Integer,
        y_range: None,
        legend: Corner::UpperLeft,
        series: series(groups),
    };
    Ok(Built {
        figure: Figure::Lines(vec![chart]),
        notes: Vec::new(),
    })
}

/// Throughput and aborts against the config field `x` (a dotted path such
/// as `config.theta`, a bare field name, or `remote` for
/// `config.remote_item_pct`); without `x`, the one numeric config field
/// that varies among the files.
pub fn contention(runs: &[Run], x: Option<&str>) -> Result<Built, Unbuilt> {
    let all: Vec<&Run> = runs.iter().collect();
    let mut notes = Vec::new();
    let path = match x {
        Some(x) => resolve(&all, x),
        None => {
            let p = contention_field(&all)?;
            notes.push(format!(
                "contention: x axis is `{p}`, the one config field that varies (choose another with --x)"
            ));
            p
        }
    };
    let xs = runs
        .iter()
        .map(|r| r.number(&path))
        .collect::<Result<Vec<_>, _>>()?;
    let labels = Labels::new(&all, Axis::Field(&path));
    let mut tput: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut aborts: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (r, &x) in runs.iter().zip(&xs) {
        for p in &r.points {
            let l = labels.of(r, &p.protocol);
            tput.entry(l.clone())
                .or_default()
                .push((x, p.throughput_txn_per_s));
            aborts.entry(l).or_default().push((x, p.aborts_per_s));
        }
    }
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    // Knobs swept over decades (customers, keys) read better on a log axis.
    let x_log = lo > 0.0 && hi / lo >= 100.0;
    let short = flag_name(&path);
    let x_desc = if short.ends_with("-pct") {
        format!("{short} (%)")
    } else {
        short.clone()
    };
    // Two values of the knob are two points, not a trend: grouped bars,
    // a group per value, a bar per series.
    let mut values: Vec<f64> = xs.clone();
    values.sort_by(f64::total_cmp);
    values.dedup();
    if values.len() < 3 {
        let title = benchmarks(&all);
        let bars = |what: &str, y_desc: &str, groups: &BTreeMap<String, Vec<(f64, f64)>>| {
            let keys: Vec<String> = groups.keys().cloned().collect();
            // The title names the benchmark: the legend need not.
            let prefix = format!("{title} ");
            let layers: Vec<String> = if keys.iter().all(|k| k.starts_with(&prefix)) {
                keys.iter().map(|k| k[prefix.len()..].to_string()).collect()
            } else {
                keys.clone()
            };
            let stacks = values
                .iter()
                .map(|&x| {
                    keys.iter()
                        .map(|l| {
                            let at: Vec<f64> =
                                groups[l].iter().filter(|p| p.0 == x).map(|p| p.1).collect();
                            if at.is_empty() {
                                0.0
                            } else {
                                at.iter().sum::<f64>() / at.len() as f64
                            }
                        })
                        .collect()
                })
                .collect();
            BarChart {
                title: format!("{title}: {what} at each {short}"),
                x_desc: x_desc.clone(),
                y_desc: y_desc.into(),
                categories: values.iter().map(|&x| format!("{short} = {x}")).collect(),
                layers,
                stacks,
                grouped: true,
            }
        };
        return Ok(Built {
            figure: Figure::Bars(vec![
                bars("throughput", "throughput (txn/s)", &tput),
                bars("aborts", "aborts (aborts/s)", &aborts),
            ]),
            notes,
        });
    }
    let panel = |what: &str, y_desc: &str, groups: BTreeMap<String, Vec<(f64, f64)>>| LineChart {
        title: format!("{}: {what} vs {short}", benchmarks(&all)),
        x_desc: x_desc.clone(),
        y_desc: y_desc.into(),
        x_log,
        x_ticks: Ticks::Number,
        y_range: None,
        legend: Corner::UpperRight,
        series: series(groups),
    };
    Ok(Built {
        figure: Figure::Lines(vec![
            panel("throughput", "throughput (txn/s)", tput),
            panel("aborts", "aborts (aborts/s)", aborts),
        ]),
        notes,
    })
}

/// Completed transactions in each second, a line per file (and protocol).
pub fn timeseries(runs: &[Run]) -> Result<Built, Unbuilt> {
    let mut notes = Vec::new();
    let used: Vec<Measured<'_>> = measured(runs)
        .filter(|&(r, p)| match &p.detail {
            Some(d) if !d.per_second.is_empty() => true,
            Some(_) => {
                notes.push(format!(
                    "timeseries: skipping {}: `result.per_second` is empty",
                    name(r, p)
                ));
                false
            }
            None => {
                notes.push(format!(
                    "timeseries: skipping {}: bench {} results have no per-second counts",
                    name(r, p),
                    r.benchmark
                ));
                false
            }
        })
        .collect();
    if used.is_empty() {
        return Err(Unbuilt::Unsupported(
            "no file has per-second counts (`result.per_second`)".into(),
        ));
    }
    let series = per_point(&used)
        .into_iter()
        .map(|(label, p)| {
            let per_second = p.detail.as_ref().map_or(&[][..], |d| &d.per_second);
            let line: Vec<(f64, f64)> = (1..)
                .zip(per_second)
                .map(|(s, &n)| (f64::from(s), n))
                .collect();
            let checkpoints = p.detail.as_ref().map_or(&[][..], |d| &d.checkpoints_s);
            // A line of one point draws nothing: mark short series' points.
            let markers = if line.len() < 3 {
                line.clone()
            } else {
                Vec::new()
            };
            Series {
                label,
                line,
                markers,
                spans: Some(Spans {
                    what: "checkpoints".into(),
                    ranges: checkpoints.to_vec(),
                }),
            }
        })
        .collect();
    let used = files(&used);
    let chart = LineChart {
        title: format!("{}: throughput per second", benchmarks(&used)),
        x_desc: "time (s)".into(),
        y_desc: "throughput (txn/s)".into(),
        x_log: false,
        x_ticks: Ticks::Integer,
        y_range: None,
        legend: Corner::UpperRight,
        series,
    };
    Ok(Built {
        figure: Figure::Lines(vec![chart]),
        notes,
    })
}

/// The latency CDF of each file (and protocol), on a log µs axis.
pub fn latency(runs: &[Run]) -> Result<Built, Unbuilt> {
    let mut notes = Vec::new();
    let used: Vec<Measured<'_>> = measured(runs)
        .filter(|&(r, p)| {
            let why = match &p.detail {
                None => format!("bench {} results have no latency CDF", r.benchmark),
                Some(d) if !d.latency_cdf_us.iter().any(|&(_, us)| us > 0.0) => {
                    "no `result.latency_cdf_us` points".into()
                }
                Some(_) => return true,
            };
            notes.push(format!("latency: skipping {}: {why}", name(r, p)));
            false
        })
        .collect();
    if used.is_empty() {
        return Err(Unbuilt::Unsupported(
            "no file has latency CDF points (`result.latency_cdf_us`)".into(),
        ));
    }
    let series = per_point(&used)
        .into_iter()
        .map(|(label, p)| {
            let cdf = p.detail.as_ref().map_or(&[][..], |d| &d.latency_cdf_us);
            let mut line: Vec<(f64, f64)> = cdf
                .iter()
                .filter(|&&(_, us)| us > 0.0)
                .map(|&(q, us)| (us, q * 100.0))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            Series {
                label,
                line,
                markers: Vec::new(),
                spans: None,
            }
        })
        .collect();
    let used = files(&used);
    let chart = LineChart {
        title: format!("{}: latency CDF, all transaction types", benchmarks(&used)),
        x_desc: "latency (µs, log scale)".into(),
        y_desc: "transactions at or below (%)".into(),
        x_log: true,
        x_ticks: Ticks::Number,
        y_range: Some((0.0, 100.0)),
        legend: Corner::LowerRight,
        series,
    };
    Ok(Built {
        figure: Figure::Lines(vec![chart]),
        notes,
    })
}

/// Where each transaction type's time went: stacked bars, a panel per
/// file (and protocol).
pub fn breakdown(runs: &[Run]) -> Result<Built, Unbuilt> {
    let mut notes = Vec::new();
    let mut used: Vec<Measured<'_>> = measured(runs)
        .filter(|&(r, p)| {
            let has = p
                .detail
                .as_ref()
                .and_then(|d| d.breakdown.as_ref())
                .is_some_and(|b| !b.is_empty());
            if !has {
                notes.push(format!(
                    "breakdown: skipping {}: no `result.breakdown` (run with --breakdown)",
                    name(r, p)
                ));
            }
            has
        })
        .collect();
    if used.is_empty() {
        return Err(Unbuilt::Unsupported(
            "no file has `result.breakdown`: run the benchmark with --breakdown".into(),
        ));
    }
    if used.len() > MAX_PANELS {
        for &(r, p) in &used[MAX_PANELS..] {
            notes.push(format!(
                "breakdown: skipping {}: at most {MAX_PANELS} panels per figure",
                name(r, p)
            ));
        }
        used.truncate(MAX_PANELS);
    }
    let panels = per_point(&used)
        .into_iter()
        .map(|(label, p)| {
            let types = p
                .detail
                .as_ref()
                .and_then(|d| d.breakdown.as_deref())
                .unwrap_or_default();
            let unsplit = if types.iter().any(|t| !t.split) {
                " (not instrumented: index, record and commit are in `other`)"
            } else {
                ""
            };
            BarChart {
                title: format!("{label}: where each transaction type's time goes{unsplit}"),
                x_desc: "transaction type".into(),
                y_desc: "share of time (%)".into(),
                categories: types.iter().map(|t| t.name.clone()).collect(),
                layers: PARTS.iter().map(|p| p.to_string()).collect(),
                stacks: types
                    .iter()
                    .map(|t| t.parts.iter().map(|f| f * 100.0).collect())
                    .collect(),
                grouped: false,
            }
        })
        .collect();
    Ok(Built {
        figure: Figure::Bars(panels),
        notes,
    })
}

/// Throughput of each configuration, a bar each, in the order the files
/// first show it. A file's configuration is its `--label` where it has one,
/// else what varies in its configuration; files of one configuration (and
/// protocol) are rounds of the same measurement, and the bar is their
/// median. With `explicit` false it is drawn only when some file has a
/// label or several protocols: the other charts show single-protocol
/// unlabelled files better.
pub fn configs(runs: &[Run], explicit: bool) -> Result<Built, Unbuilt> {
    let all: Vec<&Run> = runs.iter().collect();
    // By default for labelled files and for results of several protocols.
    if !explicit
        && !runs
            .iter()
            .any(|r| r.label().is_some() || r.points.len() > 1)
    {
        return Err(Unbuilt::Unsupported(
            "no file has a label (bench --label) or several protocols; ask for it with --kind \
             configs"
                .into(),
        ));
    }
    let labels = Labels::new(&all, Axis::None);
    if runs.iter().any(|r| r.points.len() > 1) {
        return Ok(Built {
            figure: Figure::Bars(vec![protocols_per_config(runs, &labels, &all)]),
            notes: Vec::new(),
        });
    }
    let mut order: Vec<String> = Vec::new();
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in runs {
        for p in &r.points {
            let name = match r.label() {
                Some(l) if r.points.len() > 1 => format!("{l} ({})", p.protocol),
                Some(l) => l,
                None => labels.of(r, &p.protocol),
            };
            if !values.contains_key(&name) {
                order.push(name.clone());
            }
            values.entry(name).or_default().push(p.throughput_txn_per_s);
        }
    }
    let stacks = order.iter().map(|n| vec![median(&values[n])]).collect();
    let chart = BarChart {
        title: format!("{}: throughput per configuration", benchmarks(&all)),
        x_desc: "configuration".into(),
        y_desc: "throughput (txn/s)".into(),
        categories: order,
        layers: vec!["median txn/s".into()],
        stacks,
        grouped: false,
    };
    Ok(Built {
        figure: Figure::Bars(vec![chart]),
        notes: Vec::new(),
    })
}

/// Results of several protocols: a group of bars per configuration, a
/// bar per protocol (each the median of its files), in the order the
/// files first show them.
fn protocols_per_config(runs: &[Run], labels: &Labels, all: &[&Run]) -> BarChart {
    let (mut configs, mut protocols): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let mut values: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for r in runs {
        let c = labels.config_of(r);
        if !configs.contains(&c) {
            configs.push(c.clone());
        }
        for p in &r.points {
            if !protocols.contains(&p.protocol) {
                protocols.push(p.protocol.clone());
            }
            values
                .entry((c.clone(), p.protocol.clone()))
                .or_default()
                .push(p.throughput_txn_per_s);
        }
    }
    let stacks = configs
        .iter()
        .map(|c| {
            protocols
                .iter()
                .map(|p| {
                    values
                        .get(&(c.clone(), p.clone()))
                        .map_or(0.0, |v| median(v))
                })
                .collect()
        })
        .collect();
    BarChart {
        title: format!("{}: throughput of each protocol", benchmarks(all)),
        x_desc: "configuration".into(),
        y_desc: "throughput (txn/s)".into(),
        categories: configs,
        layers: protocols,
        stacks,
        grouped: true,
    }
}

/// The median of `v` (not empty; the mean of the middle two of an even
/// count).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// A config field as its flag is typed, without the dashes
/// (`remote_item_pct` -> `remote-item-pct`), for series names.
fn flag_name(path: &str) -> String {
    short_name(path).replace('_', "-")
}

/// The last segment of a dotted path.
fn short_name(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// The distinct benchmark names, for titles.
fn benchmarks(runs: &[&Run]) -> String {
    let names: BTreeSet<&str> = runs.iter().map(|r| r.benchmark.as_str()).collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

/// `x` as a dotted path: `remote` is `config.remote_item_pct`, `threads`
/// the thread count, and a name not found at the top is looked up under
/// `config` and `config.common`.
fn resolve(runs: &[&Run], x: &str) -> String {
    let x = match x {
        "remote" => "config.remote_item_pct",
        "threads" => return runs[0].threads_field.clone(),
        x => x,
    };
    [
        x.to_string(),
        format!("config.{x}"),
        format!("config.common.{x}"),
    ]
    .into_iter()
    .find(|p| runs.iter().any(|r| r.has(p)))
    // Found nowhere: the error names the field as `config.x`, where it was
    // expected, unless a path was given.
    .unwrap_or_else(|| {
        if x.contains('.') {
            x.to_string()
        } else {
            format!("config.{x}")
        }
    })
}

/// The one numeric config field that varies among the files.
fn contention_field(runs: &[&Run]) -> Result<String, Unbuilt> {
    let numeric: Vec<String> = varying(runs, Axis::Threads)
        .into_iter()
        .filter(|p| runs.iter().all(|r| r.number(p).is_ok()))
        .collect();
    match numeric.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Unbuilt::Unsupported(
            "no numeric config field other than threads varies across the files; \
             name one with --x FIELD"
                .into(),
        )),
        many => Err(Unbuilt::Unsupported(format!(
            "several config fields vary ({}); choose one with --x FIELD",
            many.join(", ")
        ))),
    }
}

/// A chart's x axis, which never splits series.
#[derive(Clone, Copy)]
enum Axis<'a> {
    Threads,
    Field(&'a str),
    /// Charts with a line per file.
    None,
}

/// A config value for comparisons: numbers by value (`1` = `1.0`), null
/// and absent alike.
fn norm(v: Option<&String>) -> String {
    match v.map(String::as_str) {
        None | Some("null") => "none".into(),
        Some(v) => v
            .parse::<f64>()
            .map_or_else(|_| v.to_string(), |n| n.to_string()),
    }
}

/// Config fields (dotted paths) whose values differ among `runs`, leaving
/// out the `axis` and copies of it, [`NOISE`], fields that are always the
/// thread count or null (TPC-C's `warehouses` defaults to one per thread),
/// and copies of another such field (a benchmark that echoes its resolved
/// settings has `config.theta` and `config.resolved.skew.theta`): the
/// shortest path stands for them all.
fn varying(runs: &[&Run], axis: Axis<'_>) -> Vec<String> {
    let leaves: Vec<BTreeMap<String, String>> = runs.iter().map(|r| r.config_leaves()).collect();
    let column = |k: &str| -> Vec<String> { leaves.iter().map(|l| norm(l.get(k))).collect() };
    let threads_fields: BTreeSet<&str> = runs.iter().map(|r| r.threads_field.as_str()).collect();
    let threads: Vec<String> = runs.iter().map(|r| r.threads.to_string()).collect();
    let axis_column = match axis {
        Axis::Threads => Some(threads.clone()),
        Axis::Field(p) => Some(column(p)),
        Axis::None => None,
    };
    let mut keys: Vec<&String> = leaves
        .iter()
        .flat_map(|l| l.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    keys.sort_by_key(|k| (k.matches('.').count(), k.as_str()));
    let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut out = Vec::new();
    for k in keys {
        let col = column(k);
        let is_threads = threads_fields.contains(k.as_str());
        let skip = NOISE.contains(&short_name(k))
            || matches!(axis, Axis::Field(p) if p == k)
            || (is_threads && matches!(axis, Axis::Threads))
            || axis_column.as_ref() == Some(&col)
            || col.iter().all(|v| *v == col[0])
            || (!is_threads && col.iter().zip(&threads).all(|(v, t)| v == "none" || v == t));
        if !skip && seen.insert(col) {
            out.push(k.clone());
        }
    }
    out.sort();
    out
}

/// Series names: `benchmark protocol field=value …` with the fields that
/// vary among that benchmark's files.
struct Labels {
    fields: BTreeMap<String, Vec<String>>,
}

impl Labels {
    fn new(runs: &[&Run], axis: Axis<'_>) -> Labels {
        let mut by_benchmark: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
        for r in runs {
            by_benchmark.entry(&r.benchmark).or_default().push(r);
        }
        let fields = by_benchmark
            .into_iter()
            .map(|(b, rs)| (b.to_string(), varying(&rs, axis)))
            .collect();
        Labels { fields }
    }

    /// A file's configuration without its benchmark or protocol: its
    /// `--label`, else the fields that vary (`theta=0.9`), else the
    /// benchmark.
    fn config_of(&self, r: &Run) -> String {
        if let Some(l) = r.label() {
            return l;
        }
        let leaves = r.config_leaves();
        let parts: Vec<String> = self
            .fields
            .get(&r.benchmark)
            .into_iter()
            .flatten()
            .map(|f| {
                let v = leaves.get(f).map_or("none", String::as_str);
                let v = if v == "null" { "none" } else { v };
                format!("{}={v}", flag_name(f))
            })
            .collect();
        if parts.is_empty() {
            r.benchmark.clone()
        } else {
            parts.join(" ")
        }
    }

    fn of(&self, r: &Run, protocol: &str) -> String {
        let leaves = r.config_leaves();
        let mut s = format!("{} {protocol}", r.benchmark);
        for f in self.fields.get(&r.benchmark).into_iter().flatten() {
            let v = leaves.get(f).map_or("none", String::as_str);
            let v = if v == "null" { "none" } else { v };
            s.push_str(&format!(" {}={v}", flag_name(f)));
        }
        s
    }
}

/// A file's measured point: the file and one protocol's figures.
type Measured<'r> = (&'r Run, &'r Point);

/// Every point of every file, in order.
fn measured(runs: &[Run]) -> impl Iterator<Item = Measured<'_>> {
    runs.iter()
        .flat_map(|r| r.points.iter().map(move |p| (r, p)))
}

/// The files of `points`, each once, in order.
fn files<'r>(points: &[Measured<'r>]) -> Vec<&'r Run> {
    let mut out: Vec<&Run> = Vec::new();
    for &(r, _) in points {
        if !out.iter().any(|o| std::ptr::eq(*o, r)) {
            out.push(r);
        }
    }
    out
}

/// A point for messages: the file, and the protocol if it has several.
fn name(r: &Run, p: &Point) -> String {
    if r.points.len() > 1 {
        format!("{} ({})", r.name(), p.protocol)
    } else {
        r.name()
    }
}

/// A label per point (charts with a line per file and protocol), in label
/// order; points that look alike get their file name added.
fn per_point<'r>(points: &[Measured<'r>]) -> Vec<(String, &'r Point)> {
    let labels = Labels::new(&files(points), Axis::None);
    let plain: Vec<String> = points
        .iter()
        .map(|(r, p)| labels.of(r, &p.protocol))
        .collect();
    let mut out: Vec<(String, &Point)> = plain
        .iter()
        .zip(points)
        .map(|(l, &(r, p))| {
            if plain.iter().filter(|m| *m == l).count() > 1 {
                (format!("{l} ({})", r.name()), p)
            } else {
                (l.clone(), p)
            }
        })
        .collect();
    out.sort_by(|a, b| natural_cmp(&a.0, &b.0));
    out
}

/// Series from `(label, points)` groups, in label order.
fn series(groups: BTreeMap<String, Vec<(f64, f64)>>) -> Vec<Series> {
    let mut v: Vec<Series> = groups.into_iter().map(|(l, p)| averaged(l, p)).collect();
    v.sort_by(|a, b| natural_cmp(&a.label, &b.label));
    v
}

/// Compare labels with their numbers by value: `customers=50` before
/// `customers=1000`.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    #[derive(PartialEq)]
    enum Part<'s> {
        Num(f64),
        Text(&'s str),
    }
    fn parts(s: &str) -> Vec<Part<'_>> {
        let mut out = Vec::new();
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            let n = if c.is_ascii_digit() {
                rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(rest.len())
            } else {
                c.len_utf8()
            };
            let (tok, tail) = rest.split_at(n);
            out.push(match tok.parse::<f64>() {
                Ok(x) if c.is_ascii_digit() => Part::Num(x),
                _ => Part::Text(tok),
            });
            rest = tail;
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(&pb) {
        let o = match (x, y) {
            (Part::Num(x), Part::Num(y)) => x.total_cmp(y),
            (Part::Text(x), Part::Text(y)) => x.cmp(y),
            (Part::Num(_), Part::Text(_)) => std::cmp::Ordering::Less,
            (Part::Text(_), Part::Num(_)) => std::cmp::Ordering::Greater,
        };
        if o.is_ne() {
            return o;
        }
    }
    pa.len().cmp(&pb.len())
}

/// A line through the mean at each x, with a dot per measurement.
fn averaged(label: String, mut points: Vec<(f64, f64)>) -> Series {
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut line: Vec<(f64, f64)> = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let x = points[i].0;
        let same: Vec<f64> = points[i..]
            .iter()
            .take_while(|p| p.0 == x)
            .map(|p| p.1)
            .collect();
        line.push((x, same.iter().sum::<f64>() / same.len() as f64));
        i += same.len();
    }
    Series {
        label,
        line,
        markers: points,
        spans: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::path::Path;

    fn tpcc(name: &str, protocol: &str, threads: u64, remote: f64, tput: f64) -> Run {
        let doc: Value = json!({
            "benchmark": "tpcc", "protocol": protocol,
            "throughput_txn_per_s": tput, "aborts_per_s": tput / 100.0,
            "result": {"per_second": [tput, tput]},
            "config": {
                "common": {"threads": threads, "seconds": 2.0, "seed": threads},
                "warehouses": threads, "remote_item_pct": remote, "mix": "standard"
            }
        });
        Run::from_value(Path::new(name), doc).unwrap()
    }

    #[test]
    fn series_split_by_protocol_and_varying_fields_not_noise() {
        let runs = vec![
            tpcc("a", "silo", 1, 1.0, 100.0),
            tpcc("b", "silo", 2, 1.0, 190.0),
            tpcc("c", "silo", 1, 10.0, 90.0),
            tpcc("d", "silo", 2, 10.0, 150.0),
        ];
        let all: Vec<&Run> = runs.iter().collect();
        // seed and warehouses track threads; seconds is noise.
        assert_eq!(varying(&all, Axis::Threads), vec!["config.remote_item_pct"]);
        let Figure::Lines(charts) = throughput(&runs, true).unwrap().figure else {
            panic!("throughput is a line chart")
        };
        let labels: Vec<&str> = charts[0].series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "tpcc silo remote-item-pct=1.0",
                "tpcc silo remote-item-pct=10.0"
            ]
        );
        assert_eq!(charts[0].series[0].line, vec![(1.0, 100.0), (2.0, 190.0)]);
    }

    #[test]
    fn contention_axis_is_found_or_named() {
        let runs = vec![
            tpcc("a", "silo", 2, 1.0, 100.0),
            tpcc("b", "silo", 2, 50.0, 60.0),
        ];
        let all: Vec<&Run> = runs.iter().collect();
        assert_eq!(contention_field(&all).unwrap(), "config.remote_item_pct");
        assert_eq!(resolve(&all, "remote"), "config.remote_item_pct");
        assert_eq!(resolve(&all, "remote_item_pct"), "config.remote_item_pct");
        assert_eq!(resolve(&all, "threads"), "config.common.threads");
        let built = contention(&runs, None).unwrap();
        assert_eq!(built.notes.len(), 1);
        match contention(&runs, Some("config.theta")) {
            Err(Unbuilt::Input(e)) => {
                assert_eq!(e.to_string(), "a: missing field `config.theta`")
            }
            other => panic!("expected a missing-field error, got {other:?}"),
        }
    }

    #[test]
    fn repeated_measurements_are_averaged() {
        let s = averaged("x".into(), vec![(2.0, 3.0), (1.0, 1.0), (2.0, 5.0)]);
        assert_eq!(s.line, vec![(1.0, 1.0), (2.0, 4.0)]);
        assert_eq!(s.markers.len(), 3);
    }

    #[test]
    fn breakdown_without_data_says_how_to_get_it() {
        let runs = vec![tpcc("a", "silo", 1, 1.0, 1.0)];
        match breakdown(&runs) {
            Err(Unbuilt::Unsupported(m)) => assert!(m.contains("--breakdown"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn configs_are_bars_in_file_order_with_median_rounds() {
        let labelled = |name: &str, label: &str, tput: f64| {
            let mut r = tpcc(name, "silo", 2, 1.0, tput);
            r.doc["config"]["common"]["label"] = json!(label);
            r
        };
        let runs = vec![
            labelled("a", "Simple", 100.0),
            labelled("b", "+Overwrites", 300.0),
            labelled("c", "Simple", 140.0),
            labelled("d", "+Overwrites", 200.0),
            labelled("e", "Simple", 90.0),
        ];
        let Figure::Bars(b) = configs(&runs, false).unwrap().figure else {
            panic!("configs is a bar chart")
        };
        assert_eq!(b[0].categories, ["Simple", "+Overwrites"]);
        assert_eq!(b[0].stacks, vec![vec![100.0], vec![250.0]]);
        // Unlabelled files: named by what varies, and skipped under `all`.
        let plain = vec![
            tpcc("a", "silo", 2, 1.0, 1.0),
            tpcc("b", "silo", 2, 5.0, 2.0),
        ];
        assert!(matches!(
            configs(&plain, false),
            Err(Unbuilt::Unsupported(_))
        ));
        let Figure::Bars(b) = configs(&plain, true).unwrap().figure else {
            panic!("configs is a bar chart")
        };
        assert_eq!(
            b[0].categories,
            [
                "tpcc silo remote-item-pct=1.0",
                "tpcc silo remote-item-pct=5.0"
            ]
        );
    }
}
