//! `granary reproduce`: one small experiment end to end, and the report's
//! structure checked (every listed experiment present, plots real PNGs of
//! the charts' size and embedded in the HTML, numbers parseable).

use crate::common;

use crate::common::{granary, scratch, text};

/// The size `granary plot` draws a one-panel chart at.
const CHART: (u32, u32) = (1200, 680);

/// Width and height from a PNG's IHDR chunk; panics if `b` is not a PNG.
fn png_size(b: &[u8]) -> (u32, u32) {
    assert!(b.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert_eq!(&b[12..16], b"IHDR", "no IHDR chunk first");
    let be = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn quick_report_has_every_experiment_asked_for() {
    let out = scratch("reproduce", "quick");
    let o = granary(&[
        "reproduce",
        "--quick",
        "--only",
        "silo-fig4",
        "--max-threads",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    // The experiment, and only it, with the paper beside a verdict.
    assert!(md.contains("(`silo-fig4`)"), "{md}");
    assert!(!md.contains("(`silo-fig5`)"), "{md}");
    assert!(
        md.contains("**The paper:**") && md.contains("**Verdict:**"),
        "{md}"
    );
    // Its table: each "here" cell a number (a ratio).
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| Key-Value / MemSilo") || l.starts_with("| GlobalTID"))
        .collect();
    assert_eq!(rows.len(), 2, "{md}");
    for r in rows {
        let here = r.split('|').nth(2).unwrap().trim();
        let here = here
            .trim_end_matches(" (within noise)")
            .trim_end_matches('×');
        let x: f64 = here.parse().unwrap_or_else(|_| panic!("not a number: {r}"));
        assert!(x > 0.0 && x.is_finite(), "{r}");
    }
    // The commands that regenerate it, runnable as printed.
    assert!(
        md.contains("granary bench ycsb --threads 1 --keys 100000 --protocol kv,silo"),
        "{md}"
    );
    // The chart: a real PNG of the chart size, embedded in the HTML.
    let png = std::fs::read(out.join("plots/silo-fig4/throughput.png")).expect("chart");
    assert_eq!(png_size(&png), CHART);
    // Its series named as the report names them.
    let svg = std::fs::read_to_string(out.join("plots/silo-fig4/throughput.svg")).unwrap();
    for name in ["Key-Value", "MemSilo", "MemSilo+GlobalTID"] {
        assert!(svg.contains(&format!(">\n{name}\n<")), "no series {name}");
    }
    assert!(
        !svg.contains("global-tid="),
        "a generated series name is left"
    );
    assert!(md.contains("](plots/silo-fig4/throughput.png)"), "{md}");
    assert!(
        html.contains("data:image/png;base64,iVBORw0KGgo"),
        "PNG not embedded"
    );
    assert!(!html.contains("src=\"plots/"), "the HTML must stand alone");
    // Each figure from 3 interleaved runs, with their spread.
    assert!(
        md.contains("Each figure is the median of 3 interleaved runs of its step"),
        "{md}"
    );
    for i in 0..2 {
        for r in 1..=3 {
            assert!(out
                .join(format!("raw/silo-fig4/{i}.round{r}.json"))
                .exists());
        }
    }
    // Raw JSON of every step: the median of its runs.
    for i in 0..2 {
        let j = std::fs::read_to_string(out.join(format!("raw/silo-fig4/{i}.json"))).unwrap();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert!(common::number(&v, "throughput_txn_per_s") > 0.0);
        assert_eq!(v["rounds"].as_array().map(Vec::len), Some(3), "{v}");
    }
    assert!(!out.join("tmp").exists(), "scratch directories are removed");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn unknown_experiment_is_refused_by_name() {
    let out = scratch("reproduce", "unknown");
    let o = granary(&[
        "reproduce",
        "--only",
        "silo-fig99",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(e.contains("silo-fig99") && e.contains("silo-fig4"), "{e}");
    assert!(!out.join("report.md").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn list_names_the_experiments_and_what_is_missing() {
    let o = granary(&["reproduce", "--list"]);
    assert!(o.status.success());
    let s = text(&o.stdout);
    for n in [
        "silo-fig4",
        "silo-fig5",
        "study-skew",
        "silo-fig8",
        "silo-fig9",
        "silo-fig10",
        "study-fig2",
        "silor-fig1",
        "bohm-fig5",
        "bohm-fig6",
        "bohm-fig8",
        "bohm-fig10",
        "deuteronomy-fig7",
        "deuteronomy-fig9",
        "silor-recovery",
        "silo-fig11",
    ] {
        assert!(s.contains(n), "{n} missing from:\n{s}");
    }
}
