//! `granary inspect DIR`: what a database directory holds — the persistent
//! epoch, the checkpoint, every log file with its epoch range and durable
//! prefix — and what it should hold but does not (missing files, short
//! files, damage: the problems a strict open would fail with, in the same
//! words). Read-only: it works on a directory left by `kill -9`, and
//! while another process has it open. It exits with an error if it finds
//! a problem.

use std::path::{Path, PathBuf};

use clap::Args;
use granary::durable::{self, DirInfo};
use serde_json::json;

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The database directory (as given to `--durable` or `Database::open`).
    pub dir: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn mb(b: u64) -> String {
    format!("{:.2} MB", b as f64 / 1e6)
}

fn name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn epochs(lo: Option<u64>, hi: Option<u64>) -> String {
    match (lo, hi) {
        (Some(a), Some(b)) => format!("epochs {a}..={b}"),
        _ => "no blocks".into(),
    }
}

pub fn run(a: &InspectArgs) -> Result<(), String> {
    if let Some(why) = crate::report::not_a_silo_dir(&a.dir) {
        return Err(why);
    }
    let info = durable::scan(&a.dir).map_err(|e| e.to_string())?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&info)).expect("json")
        );
    } else {
        print_text(&info);
    }
    match info.problems.len() {
        0 => Ok(()),
        n => Err(format!(
            "{n} problem(s) found: opening {} fails (granary recover --salvage recovers what survives)",
            a.dir.display()
        )),
    }
}

fn to_json(i: &DirInfo) -> serde_json::Value {
    let ckpt = i.checkpoint().map(|(p, m)| {
        json!({
            "path": p, "low": m.low, "high": m.high,
            "files": m.files.iter().map(|f| json!({"bytes": f.0, "blocks": f.1, "records": f.2})).collect::<Vec<_>>(),
        })
    });
    json!({
        "dir": i.dir,
        "pepoch": i.pepoch.epoch,
        "pepoch_seq": i.pepoch.seq,
        "tables": i.tables.iter().map(|(id, n)| json!({"id": id, "name": n})).collect::<Vec<_>>(),
        "checkpoint": ckpt,
        "interrupted_checkpoints": i.checkpoints.iter().filter(|c| c.manifest.is_none()).map(|c| c.path.clone()).collect::<Vec<_>>(),
        "voids": i.voids,
        "stale_max": i.stale_max,
        "needs_checkpoint": (i.pepoch.checkpoint != 0).then_some(i.pepoch.checkpoint),
        "needs_generations": (0..i.pepoch.positions.len()).map(|k| i.pepoch.low(k)).collect::<Vec<_>>(),
        "problems": i.problems.iter().map(|p| json!({
            "path": p.path, "offset": p.offset, "what": p.what,
            "logger": p.log.map(|l| l.0), "generation": p.log.map(|l| l.1),
            "error": p.to_string(),
        })).collect::<Vec<_>>(),
        "logs": i.logs.iter().map(|f| json!({
            "path": f.path, "logger": f.logger, "generation": f.generation,
            "bytes": f.bytes, "durable_len": f.durable_len, "blocks": f.blocks,
            "transactions": f.records, "min_epoch": f.min_epoch, "max_epoch": f.max_epoch,
            "blocks_beyond_pepoch": f.blocks_beyond_pepoch, "tail": f.tail,
            "end_record": f.end.map(|e| json!({"durable_epoch": e.durable_epoch, "blocks": e.blocks})),
            "superseded": f.superseded, "damaged": f.damaged,
        })).collect::<Vec<_>>(),
    })
}

fn print_text(i: &DirInfo) {
    println!("directory   {}", i.dir.display());
    println!(
        "pepoch      e_p = {}  (every transaction of epoch ≤ {} is durable; slot write #{})",
        i.pepoch.epoch, i.pepoch.epoch, i.pepoch.seq
    );
    let names: Vec<&str> = i.tables.iter().map(|(_, n)| n.as_str()).collect();
    println!("tables      {}: {}", names.len(), names.join(", "));
    match i.checkpoint() {
        Some((p, m)) => {
            let bytes: u64 = m.files.iter().map(|f| f.0).sum();
            let recs: u64 = m.files.iter().map(|f| f.2).sum();
            println!(
                "checkpoint  {}  e_l = {}  e_h = {}  {} files  {}  {} records",
                name(p),
                m.low,
                m.high,
                m.files.len(),
                mb(bytes),
                recs
            );
        }
        None => println!("checkpoint  none"),
    }
    if i.pepoch.checkpoint != 0 {
        println!(
            "            the durable state needs the checkpoint of epoch {} (or a newer one)",
            i.pepoch.checkpoint
        );
    }
    for c in i.checkpoints.iter().filter(|c| c.manifest.is_none()) {
        println!(
            "            {} has no MANIFEST: an interrupted checkpoint (removed at the next open)",
            name(&c.path)
        );
    }
    if !i.voids.is_empty() {
        let v: Vec<String> = i.voids.iter().map(|(a, b)| format!("{a}..={b}")).collect();
        println!("void epochs {}", v.join(", "));
    }
    println!("logs");
    for (g, n) in i.pepoch.positions.iter().enumerate() {
        let needs = match i.pepoch.low(g) {
            Some(low) => format!("; needs generations {low} to {}", n.0),
            None => String::new(),
        };
        println!(
            "  logger {g}: durable through generation {} at byte {}{needs}",
            n.0, n.1
        );
        for f in i.logs.iter().filter(|f| f.logger == g) {
            let gen = f.generation.map_or("?".into(), |x| x.to_string());
            let mut line = format!(
                "    {:<28} gen {:<4} {:>10}  durable {:>10}  {:>6} blocks  {:>8} txns  {}",
                name(&f.path),
                gen,
                mb(f.bytes),
                mb(f.durable_len),
                f.blocks,
                f.records,
                epochs(f.min_epoch, f.max_epoch)
            );
            if f.blocks_beyond_pepoch > 0 {
                line += &format!(
                    "  ({} blocks beyond e_p: not durable)",
                    f.blocks_beyond_pepoch
                );
            }
            println!("{line}");
            if let Some(e) = &f.end {
                println!(
                    "      closed: its end record says everything of epoch ≤ {} from this logger is in it or older files",
                    e.durable_epoch
                );
            }
            if f.superseded {
                println!("      superseded by the checkpoint: not needed, not read");
            }
            if let Some(t) = &f.tail {
                println!("      tail: {t} (discarded at the next open)");
            }
        }
    }
    if !i.problems.is_empty() {
        println!("problems    (a strict open fails with the first)");
        for p in &i.problems {
            println!("  {p}");
        }
    }
}
