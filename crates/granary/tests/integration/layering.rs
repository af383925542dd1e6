//! The modules of every crate depend on each other as a DAG
//! (ARCHITECTURE.md, "Module layers"): every `crate::`, `super::` and
//! child-module path in a crate's `src/` (test modules left out) is an
//! edge from the file it is in to the file that defines what it names,
//! and the crate's test fails on the first cycle. The crate root
//! (`lib.rs` or `main.rs`) is not a node. A path through a module's
//! re-export (`crate::Database` when `lib.rs` has `pub use
//! db::Database`; `super::EngineOptions` when `designs/mod.rs` has `pub
//! use options::EngineOptions`) counts as a path to the file that defines
//! the item, and a module's re-export of its own child's item is no edge
//! of its own: so a directory's `mod.rs` may name its children's items,
//! but not use them while they use it.
//!
//! `cargo test -p granary --test integration layering:: -- --nocapture`
//! prints each crate's graph, top layer first (Silo's is the table in
//! ARCHITECTURE.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path from the crate root: `[]` is `lib.rs`, `["durable"]` is
/// `durable/mod.rs`, `["durable", "log"]` is `durable/log.rs`.
type ModPath = Vec<String>;

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "lib".into()
    } else {
        m.join("/")
    }
}

/// Every `.rs` file under `dir`, by module path.
fn files(dir: &Path, prefix: &ModPath, out: &mut BTreeMap<ModPath, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let stem = p.file_stem().expect("stem").to_string_lossy().into_owned();
        if p.is_dir() {
            let mut sub = prefix.clone();
            sub.push(stem);
            files(&p, &sub, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let mut m = prefix.clone();
            if stem != "mod" && !(prefix.is_empty() && (stem == "lib" || stem == "main")) {
                m.push(stem);
            }
            out.insert(m, std::fs::read_to_string(&p).expect("read"));
        }
    }
}

/// Tokens of Rust source that matter for paths: identifiers, `::`, and
/// single punctuation characters. Comments, strings and character
/// literals are dropped (so a path in a doc comment is no edge).
fn tokens(src: &str) -> Vec<String> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == 'r' && matches!(next, Some('"') | Some('#')) && {
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            c.get(j) == Some(&'"')
        } {
            // A raw string: r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    break;
                }
                j += 1;
            }
            i = j + 1 + hashes;
        } else if ch == '"' {
            i += 1;
            while c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if ch == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime.
            if next == Some('\\') {
                i += 2;
                while c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if ch == ':' && next == Some(':') {
            out.push("::".into());
            i += 2;
        } else {
            if !ch.is_whitespace() {
                out.push(ch.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The index just past the group that opens at `t[i]` (`{`, `(` or `[`).
fn close(t: &[String], i: usize) -> usize {
    let mut depth = 0;
    for (j, tok) in t.iter().enumerate().skip(i) {
        match tok.as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// Parse the path tree starting at `t[i]` (`a::b::{c, d::e}`) into its
/// full paths; returns them and the index after the tree.
fn path_tree(t: &[String], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    loop {
        let tok = &t[i];
        if tok == "{" {
            let end = close(t, i);
            let mut out = Vec::new();
            let mut j = i + 1;
            while j < end - 1 {
                if t[j] == "," {
                    j += 1;
                    continue;
                }
                let (subs, after) = path_tree(t, j);
                for s in subs {
                    out.push(prefix.iter().cloned().chain(s).collect());
                }
                j = after;
            }
            return (out, end);
        }
        if !(tok.chars().all(|c| c.is_alphanumeric() || c == '_') || tok == "*") {
            return (vec![prefix], i);
        }
        prefix.push(tok.clone());
        if t.get(i + 1).map(String::as_str) == Some("::") {
            i += 2;
        } else {
            return (vec![prefix], i + 1);
        }
    }
}

/// Every path (from the crate root, as written: not yet resolved to a
/// module) that `src`, the file of module `m`, names outside itself.
fn paths(m: &ModPath, src: &str) -> Vec<Vec<String>> {
    paths_marked(m, src).into_iter().map(|(p, _)| p).collect()
}

/// [`paths`], each marked if it is in a `pub use` (a re-export).
fn paths_marked(m: &ModPath, src: &str) -> Vec<(Vec<String>, bool)> {
    let t = tokens(src);
    // Child modules declared in this file (`mod log;`): `log::X` is a path
    // into `m/log`.
    let children: BTreeSet<&str> = t
        .windows(3)
        .filter(|w| w[0] == "mod" && w[2] == ";")
        .map(|w| w[1].as_str())
        .collect();
    let mut out = Vec::new();
    // Brace depths at which inline modules (`mod journal { … }`) opened:
    // within them, the first `super`s stay in this file.
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut cfg_test = false;
    let mut reexport = false;
    let mut i = 0;
    while i < t.len() {
        let tok = t[i].as_str();
        if tok == "use" && i > 0 && (t[i - 1] == "pub" || t[i - 1] == ")") {
            reexport = true;
        } else if tok == ";" {
            reexport = false;
        }
        match tok {
            "#" if t.get(i + 1).map(String::as_str) == Some("[") => {
                let end = close(&t, i + 1);
                let attr = &t[i + 2..end - 1];
                // `#[cfg(test)]`, `#[cfg(all(test, loom))]`: the item
                // after this and any further attributes is test-only.
                cfg_test |=
                    attr.first().is_some_and(|a| a == "cfg") && attr.iter().any(|a| a == "test");
                i = end;
                continue;
            }
            "mod" if t.get(i + 2).map(String::as_str) == Some("{") => {
                if cfg_test {
                    // Test modules are dev-only: no edges.
                    i = close(&t, i + 2);
                    cfg_test = false;
                    continue;
                }
                inline.push(depth);
            }
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            _ => {}
        }
        if tok != "pub" {
            cfg_test = false;
        }
        let starts = t.get(i + 1).map(String::as_str) == Some("::")
            && (i == 0 || t[i - 1] != "::")
            && (tok == "crate" || tok == "super" || children.contains(tok));
        if !starts {
            i += 1;
            continue;
        }
        let (trees, after) = path_tree(&t, i);
        for p in trees {
            let mut base: ModPath = Vec::new();
            let mut rest = &p[..];
            if p[0] == "crate" {
                rest = &p[1..];
            } else if p[0] == "super" {
                let ups = p.iter().take_while(|s| *s == "super").count();
                if ups <= inline.len() {
                    continue; // within this file
                }
                if ups - inline.len() > m.len() {
                    continue; // outside the crate's files (a macro's body)
                }
                base = m[..m.len() - (ups - inline.len())].to_vec();
                rest = &p[ups..];
            } else if inline.is_empty() {
                base = m.clone();
            } else {
                continue; // a child of an inline module: this file
            }
            let mut full = base;
            full.extend(rest.iter().cloned());
            out.push((full, reexport));
        }
        i = after;
    }
    out
}

/// The module a path names: its longest prefix that is a module file,
/// through the re-exports of the module it stops at (`crate::Database` is
/// `db`'s when `lib.rs` has `pub use db::Database`).
fn resolve(
    p: &[String],
    mods: &BTreeMap<ModPath, String>,
    reexports: &BTreeMap<(ModPath, String), ModPath>,
) -> Option<ModPath> {
    let mut cur: ModPath = Vec::new();
    for seg in p {
        let mut next = cur.clone();
        next.push(seg.clone());
        if mods.contains_key(&next) {
            cur = next;
        } else if let Some(to) = reexports.get(&(cur.clone(), seg.clone())) {
            return Some(to.clone());
        } else {
            break;
        }
    }
    (!cur.is_empty()).then_some(cur)
}

/// Module → the modules it depends on.
fn graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut mods = BTreeMap::new();
    files(src, &Vec::new(), &mut mods);
    // `pub use db::{Database, …};` in lib.rs: Database → db; likewise
    // `pub use engine::Bohm;` in bohm/mod.rs: bohm's Bohm → bohm/engine.
    let mut reexports = BTreeMap::new();
    for (m, src) in &mods {
        for p in paths(m, src) {
            let Some((last, dir)) = p.split_last() else {
                continue;
            };
            if dir.len() == m.len() + 1 && dir.starts_with(m) && mods.contains_key(dir) {
                reexports.insert((m.clone(), last.clone()), dir.to_vec());
            }
        }
    }
    let mut g = BTreeMap::new();
    for (m, src) in mods.iter().filter(|(m, _)| !m.is_empty()) {
        // A module's re-export of its own child's item only names it in
        // the module's namespace: not a use, so not an edge.
        let deps: BTreeSet<ModPath> = paths_marked(m, src)
            .iter()
            .filter(|(p, re)| !(*re && p.len() > m.len() + 1 && p.starts_with(m)))
            .filter_map(|(p, _)| resolve(p, &mods, &reexports))
            .filter(|d| d != m)
            .collect();
        g.insert(m.clone(), deps);
    }
    g
}

/// A cycle of `g`, if it has one.
fn cycle(g: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    fn visit(
        m: &ModPath,
        g: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        done: &mut BTreeSet<ModPath>,
        stack: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            let mut c = stack[at..].to_vec();
            c.push(m.clone());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.clone());
        for d in &g[m] {
            if let Some(c) = visit(d, g, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(m.clone());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(m, g, &mut done, &mut Vec::new()))
}

/// Check crate `dir` (under `crates/`): fails on a module cycle, else
/// prints the modules by layer (layer 0 depends on no other module; each
/// other module sits one layer above the highest module it uses).
fn check_crate(dir: &str, expect: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir)
        .join("src");
    let g = graph(&src);
    assert!(
        g.contains_key(&expect.split('/').map(String::from).collect::<ModPath>()),
        "found {dir}'s sources (its module {expect})"
    );
    if let Some(c) = cycle(&g) {
        for (m, deps) in &g {
            let deps: Vec<String> = deps.iter().map(|d| name(d)).collect();
            println!("{:<20} {}", name(m), deps.join(" "));
        }
        let names: Vec<String> = c.iter().map(|m| name(m)).collect();
        panic!("{dir}: module cycle: {}", names.join(" → "));
    }
    let mut layer: BTreeMap<ModPath, usize> = BTreeMap::new();
    while layer.len() < g.len() {
        for (m, deps) in &g {
            if layer.contains_key(m) {
                continue;
            }
            if let Some(l) = deps
                .iter()
                .map(|d| layer.get(d))
                .collect::<Option<Vec<_>>>()
            {
                layer.insert(m.clone(), l.into_iter().max().map_or(0, |x| x + 1));
            }
        }
    }
    let top = layer.values().copied().max().unwrap_or(0);
    println!("{dir}:\nlayer  module               depends on");
    for l in (0..=top).rev() {
        for (m, _) in layer.iter().filter(|(_, &x)| x == l) {
            let deps: Vec<String> = g[m].iter().map(|d| name(d)).collect();
            println!("{l:>5}  {:<20} {}", name(m), deps.join(" "));
        }
    }
}

/// One test per crate, each naming a module it must find (so a moved
/// source tree fails rather than passes empty).
macro_rules! crates {
    ($($test:ident: $dir:literal has $module:literal;)*) => {$(
        #[test]
        fn $test() {
            check_crate($dir, $module);
        }
    )*};
}

crates! {
    api_modules_form_a_dag: "api" has "tx";
    index_modules_form_a_dag: "index" has "tree";
    storage_modules_form_a_dag: "storage" has "segments";
    silo_modules_form_a_dag: "granary" has "silo/txn";
    protocols_modules_form_a_dag: "protocols" has "deuteronomy/tc";
    check_modules_form_a_dag: "check" has "history";
    conformance_modules_form_a_dag: "conformance" has "support";
    workloads_modules_form_a_dag: "workloads" has "tpcc";
    cli_modules_form_a_dag: "cli" has "designs";
    etcd_modules_form_a_dag: "etcd" has "dc";
}
