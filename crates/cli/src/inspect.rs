//! `granary inspect DIR`: what a database directory holds — the persistent
//! epoch, the checkpoint, every log file with its epoch range and durable
//! prefix — read-only (it works on a directory left by `kill -9`, and
//! while another process has it open).

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
    if !durable::recover::exists(&a.dir) {
        return Err(format!(
            "{} is not a granary database directory (no pepoch file)",
            a.dir.display()
        ));
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
    Ok(())
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
        "logs": i.logs.iter().map(|f| json!({
            "path": f.path, "logger": f.logger, "generation": f.generation,
            "bytes": f.bytes, "durable_len": f.durable_len, "blocks": f.blocks,
            "transactions": f.records, "min_epoch": f.min_epoch, "max_epoch": f.max_epoch,
            "blocks_beyond_pepoch": f.blocks_beyond_pepoch, "tail": f.tail,
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
        println!(
            "  logger {g}: durable through generation {} at byte {}",
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
            if let Some(t) = &f.tail {
                println!("      tail: {t} (discarded at the next open)");
            }
        }
    }
}
