//! Reading the JSON that `granary bench … --json FILE` writes.
//!
//! Three shapes exist:
//! - several protocols (or runs), from any benchmark: `protocols`, one
//!   summary per protocol (`protocol`, `throughput_txn_per_s`,
//!   `aborts_per_s` and the median run's `result`), a point each;
//! - the driver benchmarks (`bench tpcc`, `smallbank`, `ycsb-mix`, …) with
//!   one protocol: top-level `benchmark`, `protocol`,
//!   `throughput_txn_per_s`, `aborts_per_s`, a `result` (the driver's
//!   `RunReport`) and a `config` whose `common.threads` is the thread
//!   count;
//! - the older `bench ycsb`: `benchmark`, `engines` (one summary per engine
//!   run) and a flat `config` with `threads`.
//!
//! Every field a chart uses is checked when the file is read, so a bad file
//! fails up front with its name and the field, never half-way through a
//! chart. The document is kept so `--x` can name any field.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The parts of `result.breakdown[i]`, in stacking order.
pub const PARTS: [&str; 5] = ["index", "record", "commit", "aborted", "other"];

/// Files larger than this are refused: results are a few hundred KiB.
const MAX_FILE_BYTES: u64 = 256 << 20;

/// Why a file could not be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum InputError {
    Read {
        file: PathBuf,
        error: std::io::Error,
    },
    TooLarge {
        file: PathBuf,
        bytes: u64,
    },
    Json {
        file: PathBuf,
        error: serde_json::Error,
    },
    /// Neither a driver result nor a `bench ycsb` result.
    UnknownShape {
        file: PathBuf,
    },
    /// A `granary check` result (anomalies, not throughput).
    CheckResult {
        file: PathBuf,
    },
    Missing {
        file: PathBuf,
        field: String,
    },
    WrongType {
        file: PathBuf,
        field: String,
        expected: &'static str,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Read { file, error } => {
                write!(f, "{}: cannot read: {error}", file.display())
            }
            InputError::TooLarge { file, bytes } => write!(
                f,
                "{}: {bytes} bytes is too large for a benchmark result (limit {MAX_FILE_BYTES})",
                file.display()
            ),
            InputError::Json { file, error } => {
                write!(f, "{}: not valid JSON: {error}", file.display())
            }
            InputError::CheckResult { file } => write!(
                f,
                "{}: this is a `granary check` result (anomalies, not throughput); \
                 `granary plot` draws `granary bench … --json` results",
                file.display()
            ),
            InputError::UnknownShape { file } => write!(
                f,
                "{}: not a granary benchmark result: it has no `protocols`, `result` \
                 (bench tpcc/smallbank/ycsb-mix) or `engines` (older bench ycsb)",
                file.display()
            ),
            InputError::Missing { file, field } => {
                write!(f, "{}: missing field `{field}`", file.display())
            }
            InputError::WrongType {
                file,
                field,
                expected,
            } => write!(f, "{}: field `{field}` is not {expected}", file.display()),
        }
    }
}

impl std::error::Error for InputError {}

/// One measured point of a run: one per protocol (per engine in older
/// `bench ycsb` results).
#[derive(Debug, Clone)]
pub struct Point {
    /// `protocol`, or the engine for older `bench ycsb` results; a name
    /// that repeats in a file (`--protocol silo,silo`) gets ` #2`, ` #3`.
    pub protocol: String,
    pub throughput_txn_per_s: f64,
    pub aborts_per_s: f64,
    /// The run's report, where the file has one.
    pub detail: Option<Detail>,
}

/// What a run's report adds (absent from older `bench ycsb` results).
#[derive(Debug, Clone)]
pub struct Detail {
    /// `result.per_second`: completed transactions in each second.
    pub per_second: Vec<f64>,
    /// `result.latency_cdf_us` as `(quantile, µs)`; empty when the file has
    /// none (older results).
    pub latency_cdf_us: Vec<(f64, f64)>,
    /// `result.breakdown`; `None` unless run with `--breakdown`.
    pub breakdown: Option<Vec<Breakdown>>,
    /// `result.durability.checkpoints_s`: when checkpoints ran, as
    /// `(began, ended)` seconds into the measured period; empty for a run
    /// without checkpoints (and in older results).
    pub checkpoints_s: Vec<(f64, f64)>,
}

/// Where one transaction type's time went, as fractions in [`PARTS`] order.
#[derive(Debug, Clone)]
pub struct Breakdown {
    pub name: String,
    pub parts: [f64; 5],
    /// False for a design that does not split its committed work (its
    /// `index`, `record` and `commit` are null, read here as 0; that work
    /// is in `other`).
    pub split: bool,
}

/// One result file.
#[derive(Debug, Clone)]
pub struct Run {
    pub file: PathBuf,
    pub benchmark: String,
    pub threads: f64,
    /// Where `threads` came from (e.g. `config.common.threads`).
    pub threads_field: String,
    pub points: Vec<Point>,
    pub(super) doc: Value,
}

impl Run {
    /// Read and check `file`.
    pub fn load(file: &Path) -> Result<Run, InputError> {
        let read = |error| InputError::Read {
            file: file.to_path_buf(),
            error,
        };
        let bytes = std::fs::metadata(file).map_err(read)?.len();
        if bytes > MAX_FILE_BYTES {
            return Err(InputError::TooLarge {
                file: file.to_path_buf(),
                bytes,
            });
        }
        let text = std::fs::read_to_string(file).map_err(read)?;
        let doc: Value = serde_json::from_str(&text).map_err(|error| InputError::Json {
            file: file.to_path_buf(),
            error,
        })?;
        Run::from_value(file, doc)
    }

    /// Check an already parsed document (`file` names it in errors).
    pub fn from_value(file: &Path, doc: Value) -> Result<Run, InputError> {
        let d = Doc { file, root: &doc };
        if !doc.is_object() {
            return Err(d.wrong("(top level)", "an object"));
        }
        if lookup(&doc, "anomalies").is_some() && lookup(&doc, "benchmark").is_none() {
            return Err(InputError::CheckResult {
                file: file.to_path_buf(),
            });
        }
        let benchmark = d.str_at("benchmark")?.to_string();
        let (threads_field, threads) = d.threads()?;
        let points = if lookup(&doc, "protocols").is_some() {
            d.protocols()?
        } else if lookup(&doc, "result").is_some() {
            d.driver()?
        } else if lookup(&doc, "engines").is_some() {
            d.legacy_ycsb()?
        } else {
            return Err(InputError::UnknownShape {
                file: file.to_path_buf(),
            });
        };
        Ok(Run {
            file: file.to_path_buf(),
            benchmark,
            threads,
            threads_field,
            points,
            doc,
        })
    }

    /// The number at dotted `path` (e.g. `config.theta`).
    pub fn number(&self, path: &str) -> Result<f64, InputError> {
        Doc {
            file: &self.file,
            root: &self.doc,
        }
        .f64_at(path)
    }

    /// Whether dotted `path` exists.
    pub fn has(&self, path: &str) -> bool {
        lookup(&self.doc, path).is_some()
    }

    /// Every scalar under `config`, by dotted path (`config.common.seconds`),
    /// rendered as text. Arrays are left out: they list choices (e.g. `bench
    /// ycsb --engine silo,kv`), which [`Point::protocol`] already tells apart.
    ///
    /// A durable directory's path (`durable`) is given as `yes`: where a
    /// run logged says nothing about it, and each durable run logs to a
    /// directory of its own.
    pub fn config_leaves(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Some(c) = self.doc.get("config") {
            leaves("config", c, &mut out);
        }
        for (k, v) in out.iter_mut() {
            if (k == "durable" || k.ends_with(".durable")) && v != "null" {
                *v = "yes".into();
            }
        }
        out
    }

    /// The run's `--label` (`config.common.label` or `config.label`), if
    /// it has one.
    pub fn label(&self) -> Option<String> {
        ["config.common.label", "config.label"]
            .iter()
            .find_map(|p| lookup(&self.doc, p).and_then(Value::as_str))
            .map(str::to_string)
    }

    /// The file name without directories, for messages and labels.
    pub fn name(&self) -> String {
        self.file.file_name().map_or_else(
            || self.file.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }
}

/// Where the thread count usually is: the driver benchmarks' common flags,
/// `bench ycsb`'s flat config. Elsewhere, the shallowest `threads` under
/// `config` is taken (e.g. `config.args.common.threads`).
const THREADS_FIELDS: [&str; 2] = ["config.common.threads", "config.threads"];

/// The value at a dotted path; numeric segments index arrays.
pub fn lookup<'v>(root: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(root, |v, seg| match v {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn leaves(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                leaves(&format!("{prefix}.{k}"), v, out);
            }
        }
        Value::Array(_) => {}
        Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// A document being checked, with its file name for errors.
struct Doc<'a> {
    file: &'a Path,
    root: &'a Value,
}

impl Doc<'_> {
    fn missing(&self, field: &str) -> InputError {
        InputError::Missing {
            file: self.file.to_path_buf(),
            field: field.to_string(),
        }
    }

    fn wrong(&self, field: &str, expected: &'static str) -> InputError {
        InputError::WrongType {
            file: self.file.to_path_buf(),
            field: field.to_string(),
            expected,
        }
    }

    fn at(&self, path: &str) -> Result<&Value, InputError> {
        lookup(self.root, path).ok_or_else(|| self.missing(path))
    }

    fn str_at(&self, path: &str) -> Result<&str, InputError> {
        self.str_of(self.at(path)?, path)
    }

    fn f64_at(&self, path: &str) -> Result<f64, InputError> {
        self.f64_of(self.at(path)?, path)
    }

    fn str_of<'v>(&self, v: &'v Value, field: &str) -> Result<&'v str, InputError> {
        v.as_str().ok_or_else(|| self.wrong(field, "a string"))
    }

    fn f64_of(&self, v: &Value, field: &str) -> Result<f64, InputError> {
        v.as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| self.wrong(field, "a number"))
    }

    fn array_at(&self, path: &str) -> Result<&Vec<Value>, InputError> {
        self.at(path)?
            .as_array()
            .ok_or_else(|| self.wrong(path, "an array"))
    }

    /// The thread count and its path; a missing one is reported as
    /// `config.common.threads`.
    fn threads(&self) -> Result<(String, f64), InputError> {
        let path = THREADS_FIELDS
            .iter()
            .map(|p| p.to_string())
            .find(|p| lookup(self.root, p).is_some())
            .or_else(|| {
                let mut found = BTreeMap::new();
                leaves("config", self.root.get("config")?, &mut found);
                found
                    .into_keys()
                    .filter(|k| k.ends_with(".threads"))
                    .min_by_key(|k| (k.matches('.').count(), k.clone()))
            })
            .ok_or_else(|| self.missing(THREADS_FIELDS[0]))?;
        let threads = self.f64_at(&path)?;
        Ok((path, threads))
    }

    fn driver(&self) -> Result<Vec<Point>, InputError> {
        Ok(vec![Point {
            protocol: self.str_at("protocol")?.to_string(),
            throughput_txn_per_s: self.f64_at("throughput_txn_per_s")?,
            aborts_per_s: self.f64_at("aborts_per_s")?,
            detail: Some(self.detail("result")?),
        }])
    }

    /// A point per entry of `protocols`, with a detail where the entry has
    /// a `result`.
    fn protocols(&self) -> Result<Vec<Point>, InputError> {
        let all = self.array_at("protocols")?;
        if all.is_empty() {
            return Err(self.wrong("protocols", "a non-empty array"));
        }
        let mut points: Vec<Point> = Vec::new();
        for i in 0..all.len() {
            let at = |f: &str| format!("protocols.{i}.{f}");
            let name = self.str_at(&at("protocol"))?;
            let seen = points
                .iter()
                .filter(|p| p.protocol.split(" #").next() == Some(name))
                .count();
            let detail = match lookup(self.root, &at("result")) {
                None | Some(Value::Null) => None,
                Some(_) => Some(self.detail(&at("result"))?),
            };
            points.push(Point {
                protocol: if seen == 0 {
                    name.to_string()
                } else {
                    format!("{name} #{}", seen + 1)
                },
                throughput_txn_per_s: self.f64_at(&at("throughput_txn_per_s"))?,
                aborts_per_s: self.f64_at(&at("aborts_per_s"))?,
                detail,
            });
        }
        Ok(points)
    }

    /// The figures of the driver's report at `base` (`result`).
    fn detail(&self, base: &str) -> Result<Detail, InputError> {
        let path = format!("{base}.per_second");
        let per_second = self
            .array_at(&path)?
            .iter()
            .enumerate()
            .map(|(i, v)| self.f64_of(v, &format!("{path}.{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        // Both are newer than the first driver results: absent means "not
        // measured", and the charts that need them say so.
        let latency_cdf_us = match lookup(self.root, &format!("{base}.latency_cdf_us")) {
            None | Some(Value::Null) => Vec::new(),
            Some(_) => self.cdf(base)?,
        };
        let breakdown = match lookup(self.root, &format!("{base}.breakdown")) {
            None | Some(Value::Null) => None,
            Some(_) => Some(self.breakdown(base)?),
        };
        let checkpoints_s = match lookup(self.root, &format!("{base}.durability.checkpoints_s")) {
            None | Some(Value::Null) => Vec::new(),
            Some(_) => self.pairs(
                &format!("{base}.durability.checkpoints_s"),
                "a [began, ended] pair of seconds",
            )?,
        };
        Ok(Detail {
            per_second,
            latency_cdf_us,
            breakdown,
            checkpoints_s,
        })
    }

    /// The array of number pairs at `path`.
    fn pairs(&self, path: &str, what: &'static str) -> Result<Vec<(f64, f64)>, InputError> {
        self.array_at(path)?
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let field = format!("{path}.{i}");
                match p.as_array().map(Vec::as_slice) {
                    Some([a, b]) => Ok((
                        self.f64_of(a, &format!("{field}.0"))?,
                        self.f64_of(b, &format!("{field}.1"))?,
                    )),
                    _ => Err(self.wrong(&field, what)),
                }
            })
            .collect()
    }

    fn cdf(&self, base: &str) -> Result<Vec<(f64, f64)>, InputError> {
        self.pairs(
            &format!("{base}.latency_cdf_us"),
            "a [quantile, microseconds] pair",
        )
    }

    fn breakdown(&self, base: &str) -> Result<Vec<Breakdown>, InputError> {
        let path = format!("{base}.breakdown");
        self.array_at(&path)?
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let field = |f: &str| format!("{path}.{i}.{f}");
                let get = |f: &str| b.get(f).ok_or_else(|| self.missing(&field(f)));
                let mut parts = [0.0; 5];
                let mut split = true;
                for (i, (p, name)) in parts.iter_mut().zip(PARTS).enumerate() {
                    let v = get(name)?;
                    // index, record and commit are null where the design
                    // does not split its time.
                    if i < 3 && v.is_null() {
                        split = false;
                    } else {
                        *p = self.f64_of(v, &field(name))?;
                    }
                }
                Ok(Breakdown {
                    name: self.str_of(get("name")?, &field("name"))?.to_string(),
                    parts,
                    split,
                })
            })
            .collect()
    }

    fn legacy_ycsb(&self) -> Result<Vec<Point>, InputError> {
        let engines = self.array_at("engines")?;
        if engines.is_empty() {
            return Err(self.wrong("engines", "a non-empty array"));
        }
        let points = engines
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let field = |f: &str| format!("engines.{i}.{f}");
                let get = |f: &str| e.get(f).ok_or_else(|| self.missing(&field(f)));
                Ok(Point {
                    protocol: self.str_of(get("engine")?, &field("engine"))?.to_string(),
                    throughput_txn_per_s: self
                        .f64_of(get("throughput_txn_per_s")?, &field("throughput_txn_per_s"))?,
                    aborts_per_s: self.f64_of(get("aborts_per_s")?, &field("aborts_per_s"))?,
                    detail: None,
                })
            })
            .collect::<Result<Vec<_>, InputError>>()?;
        Ok(points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn driver_doc() -> Value {
        json!({
            "benchmark": "tpcc", "protocol": "silo",
            "throughput_txn_per_s": 1000.0, "aborts_per_s": 5.0,
            "result": {
                "per_second": [990, 1010],
                "latency_cdf_us": [[0.5, 10.0], [0.99, 80.0]],
                "breakdown": null
            },
            "config": {"common": {"threads": 4, "seconds": 2.0}, "warehouses": null, "mix": "standard"}
        })
    }

    #[test]
    fn driver_result_is_read() {
        let r = Run::from_value(Path::new("a.json"), driver_doc()).unwrap();
        assert_eq!(r.threads, 4.0);
        assert_eq!(r.points[0].protocol, "silo");
        let d = r.points[0].detail.clone().unwrap();
        assert_eq!(d.per_second, vec![990.0, 1010.0]);
        assert_eq!(d.latency_cdf_us[1], (0.99, 80.0));
        assert!(d.breakdown.is_none());
    }

    #[test]
    fn a_breakdown_without_a_split_reads_as_not_split() {
        let mut doc = driver_doc();
        doc["result"]["breakdown"] = json!([
            {"name": "a", "index": 0.5, "record": 0.2, "commit": 0.1, "aborted": 0.0, "other": 0.2},
            {"name": "b", "index": null, "record": null, "commit": null, "aborted": 0.25, "other": 0.75}
        ]);
        let r = Run::from_value(Path::new("a.json"), doc).unwrap();
        let b = r.points[0].detail.clone().unwrap().breakdown.unwrap();
        assert!(b[0].split);
        assert_eq!(b[0].parts, [0.5, 0.2, 0.1, 0.0, 0.2]);
        assert!(!b[1].split);
        assert_eq!(b[1].parts, [0.0, 0.0, 0.0, 0.25, 0.75]);
        // `aborted` and `other` are always numbers.
        let mut doc = driver_doc();
        doc["result"]["breakdown"] = json!([
            {"name": "b", "index": null, "record": null, "commit": null, "aborted": null, "other": 1.0}
        ]);
        assert!(Run::from_value(Path::new("a.json"), doc).is_err());
    }

    #[test]
    fn missing_and_mistyped_fields_name_file_and_field() {
        let mut doc = driver_doc();
        doc["result"].as_object_mut().unwrap().remove("per_second");
        let e = Run::from_value(Path::new("x.json"), doc).unwrap_err();
        assert_eq!(e.to_string(), "x.json: missing field `result.per_second`");

        let mut doc = driver_doc();
        doc["result"]["per_second"][1] = json!("many");
        let e = Run::from_value(Path::new("x.json"), doc).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.json: field `result.per_second.1` is not a number"
        );

        let e = Run::from_value(
            Path::new("c.json"),
            json!({"transactions": 10, "anomalies": 0, "workload": "bank"}),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("this is a `granary check` result"),
            "{e}"
        );
        let e = Run::from_value(Path::new("y.json"), json!([1, 2])).unwrap_err();
        assert!(e.to_string().starts_with("y.json: "), "{e}");
    }

    #[test]
    fn legacy_ycsb_has_a_point_per_engine() {
        let doc = json!({
            "benchmark": "ycsb", "throughput_txn_per_s": 10.0, "aborts_per_s": 0.0,
            "engines": [
                {"engine": "silo", "throughput_txn_per_s": 10.0, "aborts_per_s": 0.0},
                {"engine": "kv", "throughput_txn_per_s": 12.0, "aborts_per_s": 0.0}
            ],
            "config": {"threads": 2, "keys": 1000, "engine": ["silo", "kv"]}
        });
        let r = Run::from_value(Path::new("y.json"), doc).unwrap();
        assert_eq!(r.threads, 2.0);
        assert_eq!(r.points.len(), 2);
        assert!(r.points.iter().all(|p| p.detail.is_none()));
        let leaves = r.config_leaves();
        assert_eq!(leaves.get("config.keys").map(String::as_str), Some("1000"));
        assert!(!leaves.contains_key("config.engine"));
    }

    #[test]
    fn several_protocols_are_a_point_each_with_its_run() {
        let mut doc = driver_doc();
        let entry = |p: &str, t: f64| {
            json!({"protocol": p, "throughput_txn_per_s": t, "aborts_per_s": 1.0,
                   "throughput_ratio": t / 1000.0, "result": {"per_second": [t]}})
        };
        doc["protocols"] = json!([
            entry("silo", 1000.0),
            entry("2pl-nowait", 500.0),
            entry("silo", 900.0)
        ]);
        let r = Run::from_value(Path::new("p.json"), doc).unwrap();
        let names: Vec<&str> = r.points.iter().map(|p| p.protocol.as_str()).collect();
        assert_eq!(names, ["silo", "2pl-nowait", "silo #2"]);
        assert_eq!(r.points[1].throughput_txn_per_s, 500.0);
        let d = r.points[2].detail.as_ref().unwrap();
        assert_eq!(d.per_second, vec![900.0]);
        assert!(d.latency_cdf_us.is_empty());

        let mut doc = driver_doc();
        doc["protocols"] = json!([{"protocol": "silo", "throughput_txn_per_s": "fast"}]);
        let e = Run::from_value(Path::new("p.json"), doc).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.json: field `protocols.0.throughput_txn_per_s` is not a number"
        );
    }

    #[test]
    fn threads_found_where_the_benchmark_put_them() {
        let mut doc = driver_doc();
        doc["config"] = json!({"args": {"common": {"threads": 3}}, "theta": 0.9});
        let r = Run::from_value(Path::new("m.json"), doc.clone()).unwrap();
        assert_eq!(
            (r.threads, r.threads_field.as_str()),
            (3.0, "config.args.common.threads")
        );
        doc["config"] = json!({"theta": 0.9});
        let e = Run::from_value(Path::new("m.json"), doc).unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.json: missing field `config.common.threads`"
        );
    }

    #[test]
    fn lookup_follows_objects_and_arrays() {
        let v = json!({"a": {"b": [1, {"c": 2}]}});
        assert_eq!(lookup(&v, "a.b.1.c"), Some(&json!(2)));
        assert_eq!(lookup(&v, "a.x"), None);
    }
}
