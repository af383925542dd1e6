//! Every atomic operation in this crate's code that is stronger than
//! Relaxed says why: each `Ordering::SeqCst`, `Acquire`, `Release` or
//! `AcqRel` under `src/` has a comment that names that ordering within
//! the three lines above it (or on its line). "Above it" is above the
//! call it is an argument of, so a call that rustfmt spreads over several
//! lines counts from its first line; comments inside the call count too.
//! A comment block counts if it reaches into those three lines, and a
//! comment over a run of consecutive operations covers each one of the
//! run that has the ordering it names. The two orderings of a
//! `compare_exchange` (or `fetch_update`) are covered by a comment naming
//! either. A module's "Memory ordering" paragraph does not count.
//!
//! Test code is left out: files named `tests.rs`, and any item under a
//! `#[cfg(...)]` that needs `test` (`mod tests`, the loom models,
//! test-only statics and counters). An alias of `Ordering` (`as O`) would
//! hide operations from this check, so the check fails on one.
//!
//! `cargo test -p granary-protocols --test integration atomics::`

use std::path::{Path, PathBuf};

/// The orderings that must say why.
const STRONG: [&str; 4] = ["SeqCst", "AcqRel", "Acquire", "Release"];

/// How many lines above an operation its comment may end.
const WINDOW: usize = 3;

/// Calls whose two orderings one comment covers.
const PAIRED: [&str; 3] = ["compare_exchange", "compare_exchange_weak", "fetch_update"];

/// Every `.rs` file under `dir` but those named `tests.rs`, sorted.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs")
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

/// A line split into its code and its comment (after `//` outside a
/// string literal).
fn split(line: &str) -> (&str, Option<&str>) {
    let b = line.as_bytes();
    let (mut in_str, mut i) = (false, 0);
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => {
                return (&line[..i], Some(&line[i + 2..]));
            }
            _ => {}
        }
        i += 1;
    }
    (line, None)
}

/// Whether `word` occurs in `text` as a whole word.
fn names(text: &str, word: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(word).any(|(i, _)| {
        !ident(text[..i].chars().next_back()) && !ident(text[i + word.len()..].chars().next())
    })
}

/// Whether an attribute line is a `cfg` that holds only in tests.
fn test_only(line: &str) -> bool {
    let t = line.trim();
    t.starts_with("#[cfg(") && names(t, "test") && !t.contains("not(test") && !t.contains("any(")
}

/// Per line of `src`: whether it is test code (see the module doc).
fn test_lines(lines: &[&str]) -> Vec<bool> {
    let mut skip = vec![false; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        if !test_only(lines[i]) {
            i += 1;
            continue;
        }
        // The item: past its other attributes and comments.
        let mut j = i + 1;
        while j < lines.len() && {
            let t = lines[j].trim_start();
            t.starts_with("#[") || t.starts_with("//")
        } {
            j += 1;
        }
        let indent = lines.get(j).map_or(0, |l| l.len() - l.trim_start().len());
        // Its end: the `;` or `,` that ends it (a statement, a field), or
        // the `}` that closes its body at its own indentation (rustfmt's
        // layout), outside any parentheses of its signature.
        let (mut end, mut depth) = (j, 0i32);
        while end < lines.len() {
            let code = split(lines[end]).0.trim_end();
            depth += code.matches(['(', '[']).count() as i32;
            depth -= code.matches([')', ']']).count() as i32;
            if depth == 0 && (code.ends_with(';') || code.ends_with(',')) {
                break;
            }
            if depth == 0 && code.ends_with('{') {
                end += 1;
                while end < lines.len() && {
                    let l = lines[end];
                    let closes =
                        l.len() - l.trim_start().len() == indent && l.trim_start().starts_with('}');
                    !closes
                } {
                    end += 1;
                }
                break;
            }
            end += 1;
        }
        let end = end.min(lines.len() - 1);
        skip[i..=end].iter_mut().for_each(|s| *s = true);
        i = end + 1;
    }
    skip
}

/// A non-Relaxed ordering in the code.
#[derive(Debug)]
struct Op {
    /// Its line (0-based).
    line: usize,
    ordering: &'static str,
    /// The line of the call it is an argument of.
    anchor: usize,
    /// The orderings a comment may name to cover it: its own, and with
    /// [`PAIRED`] calls the call's other one.
    names: Vec<&'static str>,
}

/// The orderings (`Ordering::X`, any X) in `code`, by byte offset.
fn orderings(code: &str) -> impl Iterator<Item = (usize, &str)> {
    code.match_indices("Ordering::").map(move |(i, m)| {
        let rest = &code[i + m.len()..];
        let n = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        (i, &rest[..n])
    })
}

/// The position (line, byte) of the unmatched `(` before `(line, at)`,
/// looking back at most a few lines of `code`.
fn open_paren(code: &[&str], line: usize, at: usize) -> Option<(usize, usize)> {
    let mut depth = 0;
    for l in (line.saturating_sub(12)..=line).rev() {
        let text = if l == line { &code[l][..at] } else { code[l] };
        for (i, c) in text.char_indices().rev() {
            match c {
                ')' => depth += 1,
                '(' if depth == 0 => return Some((l, i)),
                '(' => depth -= 1,
                _ => {}
            }
        }
    }
    None
}

/// The text from `(line, at)` (an opening parenthesis) to its match.
fn call_args(code: &[&str], line: usize, at: usize) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for (l, text) in code.iter().enumerate().skip(line) {
        let text = if l == line { &text[at..] } else { text };
        for c in text.chars() {
            out.push(c);
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return out;
                    }
                }
                _ => {}
            }
        }
        out.push('\n');
    }
    out
}

/// The non-Relaxed operations of a file's lines, with what their
/// comments may name; and the lines that alias `Ordering`.
fn ops(code: &[&str]) -> (Vec<Op>, Vec<usize>) {
    let (mut out, mut aliases) = (Vec::new(), Vec::new());
    for (line, text) in code.iter().enumerate() {
        if text.contains("Ordering as ") || text.contains("Ordering::{") {
            aliases.push(line);
        }
        for (at, name) in orderings(text) {
            let Some(&ordering) = STRONG.iter().find(|s| **s == name) else {
                continue;
            };
            let (anchor, open) = open_paren(code, line, at).unwrap_or((line, at));
            let method: String = {
                let before = code[anchor][..open].trim_end();
                let n = before
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(0, |i| i + 1);
                before[n..].into()
            };
            let mut names = vec![ordering];
            if PAIRED.contains(&method.as_str()) {
                let args = call_args(code, anchor, open);
                for (_, other) in orderings(&args) {
                    if let Some(&o) = STRONG.iter().find(|s| **s == other) {
                        if !names.contains(&o) {
                            names.push(o);
                        }
                    }
                }
            }
            out.push(Op {
                line,
                ordering,
                anchor,
                names,
            });
        }
    }
    (out, aliases)
}

/// The comment block that line `k` ends (its comment and the full-line
/// comments right above it), if it has a comment.
fn block(lines: &[&str], k: usize) -> Option<String> {
    let mut text = split(lines[k]).1?.to_string();
    let mut j = k;
    while j > 0 && lines[j - 1].trim_start().starts_with("//") {
        j -= 1;
        text = format!("{} {text}", split(lines[j]).1.unwrap_or(""));
    }
    Some(text)
}

/// Whether a comment block names one of `names` and says something more.
fn explains(text: &str, names: &[&str]) -> bool {
    names.iter().any(|n| self::names(text, n)) && text.split_whitespace().count() >= 4
}

/// The operations of `src` without a comment that names their ordering,
/// as (line, 1-based, and ordering); and the lines that alias `Ordering`.
fn uncommented(src: &str) -> (Vec<(usize, &'static str)>, Vec<usize>) {
    let lines: Vec<&str> = src.lines().collect();
    let skip = test_lines(&lines);
    let code: Vec<&str> = lines
        .iter()
        .zip(&skip)
        .map(|(l, &s)| if s { "" } else { split(l).0 })
        .collect();
    let (ops, aliases) = ops(&code);
    let mut covered = vec![false; ops.len()];
    let mut bad = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        // A comment on the call's lines.
        let mut ok = (op.anchor..=op.line)
            .filter_map(|k| split(lines[k]).1)
            .any(|c| explains(c, &op.names));
        // A comment block reaching into the lines above the call, or a
        // covered operation there with the same ordering (a run).
        for k in (op.anchor.saturating_sub(WINDOW)..op.anchor).rev() {
            if ok || lines[k].trim().is_empty() {
                break;
            }
            ok = block(&lines, k).is_some_and(|b| explains(&b, &op.names))
                || ops[..i]
                    .iter()
                    .zip(&covered)
                    .any(|(o, &c)| c && o.line == k && op.names.contains(&o.ordering));
        }
        covered[i] = ok;
        if !ok {
            bad.push((op.line + 1, op.ordering));
        }
    }
    (bad, aliases.iter().map(|l| l + 1).collect())
}

#[test]
fn every_strong_ordering_says_why() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    files(&src, &mut paths);
    assert!(
        paths.len() > 20,
        "found only {} files in {src:?}",
        paths.len()
    );
    let mut failures = Vec::new();
    let mut seen = 0;
    for p in &paths {
        let text = std::fs::read_to_string(p).expect("read");
        let rel = p.strip_prefix(&src).expect("under src").display();
        let (bad, aliases) = uncommented(&text);
        seen += text.matches("Ordering::").count();
        for (line, ordering) in bad {
            failures.push(format!(
                "src/{rel}:{line}: Ordering::{ordering} without a comment naming {ordering} \
                 within {WINDOW} lines above"
            ));
        }
        for line in aliases {
            failures.push(format!(
                "src/{rel}:{line}: an alias of Ordering hides operations from this check"
            ));
        }
    }
    assert!(
        seen > 100,
        "found only {seen} orderings: is this the right tree?"
    );
    assert!(
        failures.is_empty(),
        "{} atomic operations do not say why they are not Relaxed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The scanner on a sample: it must flag exactly the operations without
/// a comment naming their ordering, and skip test code.
#[test]
fn the_scanner_flags_unexplained_orderings() {
    const SAMPLE: &str = r#"use std::sync::atomic::Ordering;
fn f(a: &AtomicU64, b: &AtomicU64) {
    // Release: publishes the value before the flag.
    a.store(1, Ordering::Release);
    a.load(Ordering::Acquire);
    // Relaxed would do here, says this comment.
    a.store(2, Ordering::SeqCst);
    let _ = a.compare_exchange(
        0,
        1,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    // SeqCst: one total order with the other flag's stores.
    a.store(3, Ordering::SeqCst);
    b.store(3, Ordering::SeqCst);
    b.fetch_add(1, Ordering::AcqRel);
    // Acquire (the failure ordering) sees the winner's writes.
    let _ = b
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_ok();
    b.load(Ordering::Relaxed); // Relaxed needs nothing.
    let _url = "a//b"; b.load(Ordering::SeqCst);
}

struct Probe {
    #[cfg(test)]
    hits: AtomicU64,
    flag: AtomicU64,
}

#[cfg(test)]
impl Probe {
    fn g(a: &AtomicU64) {
        a.load(Ordering::SeqCst);
    }
}

fn h(a: &AtomicU64) {
    a.load(Ordering::Acquire);
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    fn m(a: &AtomicU64) {
        a.load(Ordering::SeqCst);
    }
}

fn k(a: &AtomicU64) {
    use std::sync::atomic::Ordering as O;
    a.load(O::SeqCst);
}
"#;
    let (bad, aliases) = uncommented(SAMPLE);
    assert_eq!(
        bad,
        [
            (5, "Acquire"),
            (7, "SeqCst"),
            (11, "AcqRel"),
            (12, "Acquire"),
            (17, "AcqRel"),
            (23, "SeqCst"),
            (40, "Acquire"),
        ],
        "flagged the wrong operations"
    );
    assert_eq!(aliases, [51], "missed the alias");
}
