//! The report: its header, and the Markdown and standalone HTML pages.

use std::fmt::Write as _;
use std::path::Path;

use super::experiment::*;
use crate::report::machine;

pub(super) fn header(scale: &Scale, elapsed: f64) -> Vec<String> {
    let m = machine();
    vec![
        format!(
            "Machine: {} cores, {} ({} {}); granary {} ({}).",
            m.cpus, m.cpu_model, m.os, m.arch, m.granary_version, m.build
        ),
        if PROFILE == "dist" {
            "Build: the `dist` profile, as docs/BENCHMARKS.md's figures.".into()
        } else {
            format!(
                "Build: the `{}` profile. docs/BENCHMARKS.md's figures are from the \
                 `dist` profile (thin LTO, one codegen unit), which is faster; build it \
                 with `cargo install --path crates/cli --locked --profile dist` to compare.",
                PROFILE
            )
        },
        format!(
            "Scale: {} ({} s measured per run after {} s of warm-up; {} workers at most). \
             Total time {:.1} min.",
            if scale.quick { "--quick" } else { "--full" },
            fmt_num(scale.seconds),
            fmt_num(scale.warmup),
            scale.max,
            elapsed / 60.0
        ),
        format!(
            "Each step is one `granary bench` command, printed under its experiment, run {} \
             time{}, the steps of an experiment interleaved round by round; a figure is the \
             median of its step's runs. Raw JSON of every run (I.roundR.json), each step's \
             median (I.json) and each run's output are in raw/.",
            scale.rounds,
            if scale.rounds == 1 { "" } else { "s" }
        ),
    ]
}

pub(super) fn markdown(
    results: &[(&Experiment, Done)],
    scale: &Scale,
    elapsed: f64,
    out: &Path,
) -> String {
    let mut s = String::from("# granary reproduce\n\n");
    for l in header(scale, elapsed) {
        let _ = writeln!(s, "{l}\n");
    }
    for (e, d) in results {
        let _ = writeln!(s, "## {} (`{}`)\n", e.title, e.name);
        let _ = writeln!(s, "**The paper:** {}\n", e.paper);
        let _ = writeln!(s, "**Here:** {}.\n", (e.scale)(scale));
        if let Some(f) = &d.failed {
            let _ = writeln!(s, "**Failed:** {f}\n");
        }
        if let Some(v) = &d.verdict {
            let _ = writeln!(s, "| | here | the paper |\n|---|---|---|");
            for r in &v.rows {
                let _ = writeln!(s, "| {} | {} | {} |", r[0], r[1], r[2]);
            }
            let _ = writeln!(s, "\n**Verdict:** {}\n", v.sentence);
        }
        if let Some(n) = &d.noise {
            let _ = writeln!(s, "{n}\n");
        }
        for (k, png) in &d.charts {
            let rel = png.strip_prefix(out).unwrap_or(png);
            let _ = writeln!(s, "![{} {k}]({})\n", e.name, rel.display());
        }
        let _ = writeln!(s, "Commands ({:.0} s):\n\n```", d.seconds);
        for c in &d.commands {
            let _ = writeln!(s, "{c}");
        }
        let _ = writeln!(s, "```\n");
    }
    s
}

pub(super) fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Inline `code` spans of `t` (escaped) as `<code>`.
pub(super) fn inline(t: &str) -> String {
    esc(t)
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{part}</code>")
            } else {
                part.to_string()
            }
        })
        .collect()
}

pub(super) fn html(
    results: &[(&Experiment, Done)],
    scale: &Scale,
    elapsed: f64,
) -> Result<String, String> {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>granary reproduce</title><style>\
         body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}\
         table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2em .6em}\
         pre{background:#f4f4f4;padding:.6em;overflow-x:auto}img{max-width:100%}\
         .failed{color:#a00}</style></head><body>\n<h1>granary reproduce</h1>\n",
    );
    for l in header(scale, elapsed) {
        let _ = writeln!(s, "<p>{}</p>", inline(&l));
    }
    for (e, d) in results {
        let _ = writeln!(
            s,
            "<h2 id=\"{}\">{} (<code>{}</code>)</h2>",
            e.name,
            esc(e.title),
            e.name
        );
        let _ = writeln!(s, "<p><b>The paper:</b> {}</p>", inline(e.paper));
        let _ = writeln!(s, "<p><b>Here:</b> {}.</p>", inline(&(e.scale)(scale)));
        if let Some(f) = &d.failed {
            let _ = writeln!(s, "<p class=\"failed\"><b>Failed:</b> {}</p>", esc(f));
        }
        if let Some(v) = &d.verdict {
            let _ = writeln!(
                s,
                "<table><tr><th></th><th>here</th><th>the paper</th></tr>"
            );
            for r in &v.rows {
                let _ = writeln!(
                    s,
                    "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&r[0]),
                    esc(&r[1]),
                    esc(&r[2])
                );
            }
            let _ = writeln!(s, "</table><p><b>Verdict:</b> {}</p>", inline(&v.sentence));
        }
        if let Some(n) = &d.noise {
            let _ = writeln!(s, "<p>{}</p>", inline(n));
        }
        for (k, png) in &d.charts {
            let bytes =
                std::fs::read(png).map_err(|e| format!("cannot read {}: {e}", png.display()))?;
            let _ = writeln!(
                s,
                "<p><img alt=\"{} {k}\" src=\"data:image/png;base64,{}\"></p>",
                e.name,
                base64(&bytes)
            );
        }
        let _ = writeln!(s, "<p>Commands ({:.0} s):</p><pre>", d.seconds);
        for c in &d.commands {
            let _ = writeln!(s, "{}", esc(c));
        }
        let _ = writeln!(s, "</pre>");
    }
    let _ = writeln!(s, "</body></html>");
    Ok(s)
}

/// Standard base64 (RFC 4648, with padding), for images embedded in the
/// HTML report.
pub(super) fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}
