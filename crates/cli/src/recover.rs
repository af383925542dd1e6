//! `granary recover [--salvage] DIR OUT`: recover a copy of a database
//! directory, leaving the original untouched.
//!
//! DIR is copied to OUT (a new directory), and OUT is opened: strictly by
//! default, so the command fails, naming the file, if anything the durable
//! state needs is missing or damaged (what `granary inspect DIR` lists as
//! problems); with `--salvage`, recovering the longest consistent prefix
//! that survives (`RecoveryMode::Salvage`) and reporting what was lost.
//! Either way OUT is then a directory that opens strictly.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use clap::Args;
use granary::durable::format::{self, Pepoch};
use granary::{Database, Options, RecoveryMode};
use serde_json::json;

use crate::report::progress;

#[derive(Args, Debug)]
pub struct RecoverArgs {
    /// The damaged (or any) database directory. It is only read.
    pub dir: PathBuf,
    /// Where the recovered copy goes: a new (or empty) directory.
    pub out: PathBuf,
    /// Recover the longest consistent prefix that survives, instead of
    /// failing on missing or damaged data: the state as of the last epoch
    /// every logger still holds completely. Prints the epochs lost.
    #[arg(long)]
    pub salvage: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &RecoverArgs) -> Result<(), String> {
    if let Some(why) = crate::report::not_a_silo_dir(&a.dir) {
        return Err(why);
    }
    let pe_path = a.dir.join(format::PEPOCH_FILE);
    let pe = fs::read(&pe_path)
        .ok()
        .and_then(|b| Pepoch::decode_file(&b))
        .ok_or_else(|| {
            format!(
                "{} is not a granary database directory (no valid pepoch file)",
                a.dir.display()
            )
        })?;
    let nonempty = fs::read_dir(&a.out).is_ok_and(|mut d| d.next().is_some());
    if nonempty || (a.out.exists() && !a.out.is_dir()) {
        return Err(format!(
            "{} exists and is not an empty directory; recover writes a new one",
            a.out.display()
        ));
    }
    // A database that is open holds LOCK exclusively: do not copy files
    // that are being written.
    let _lock = lock_shared(&a.dir)?;
    copy_dir(&a.dir, &a.out).inspect_err(|_| {
        let _ = fs::remove_dir_all(&a.out);
    })?;
    let mode = if a.salvage {
        RecoveryMode::Salvage
    } else {
        RecoveryMode::Strict
    };
    let o = Options::default()
        .loggers(pe.positions.len())
        .recovery_mode(mode);
    let db = match Database::open(&a.out, o) {
        Ok(db) => db,
        Err(e) => {
            let _ = fs::remove_dir_all(&a.out);
            let hint = if a.salvage {
                ""
            } else {
                " (granary recover --salvage recovers what survives)"
            };
            return Err(format!(
                "cannot recover {}: {}{hint}",
                a.dir.display(),
                in_dir(a, &e.to_string())
            ));
        }
    };
    let stats = db.durability_stats().expect("a durable database");
    let r = &stats.recovery;
    let tables = db.tables().len();
    drop(db);
    let salvage = r.salvage.as_ref();
    if a.json {
        let v = json!({
            "dir": a.dir, "out": a.out, "salvage": a.salvage,
            "pepoch": r.pepoch,
            "recovered_through_epoch": salvage.map_or(r.pepoch, |s| s.epoch),
            "lost_epochs": salvage.and_then(|s| s.lost).map(|(lo, hi)| json!({"first": lo, "last": hi})),
            "problems": salvage.map_or(Vec::new(), |s| s.problems.iter().map(|p| in_dir(a, &p.to_string())).collect::<Vec<_>>()),
            "tables": tables,
            "checkpoint_records": r.checkpoint_records,
            "log_records_applied": r.log_records_applied,
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return Ok(());
    }
    match salvage {
        None => println!(
            "recovered {} into {}: complete, through epoch {} ({} tables)",
            a.dir.display(),
            a.out.display(),
            r.pepoch,
            tables
        ),
        Some(s) => {
            println!(
                "salvaged {} into {}: the state as of epoch {} ({} tables)",
                a.dir.display(),
                a.out.display(),
                s.epoch,
                tables
            );
            match s.lost {
                Some((lo, hi)) => println!(
                    "lost: every transaction of epochs {lo} to {hi} (acknowledged through epoch {})",
                    s.pepoch
                ),
                None => println!("lost: no acknowledged transaction"),
            }
            println!("what was gone or damaged:");
            for p in &s.problems {
                println!("  {}", in_dir(a, &p.to_string()));
            }
        }
    }
    Ok(())
}

/// `message` about the copy in OUT, told of DIR: recovery opens the copy,
/// but what is missing or damaged is missing or damaged in DIR (the copy
/// has the same files at the same places; OUT is removed on failure).
fn in_dir(a: &RecoverArgs, message: &str) -> String {
    let sep = std::path::MAIN_SEPARATOR;
    message.replace(
        &format!("{}{sep}", a.out.display()),
        &format!("{}{sep}", a.dir.display()),
    )
}

/// A shared lock on `dir/LOCK` (if it exists), so an open database is
/// refused.
pub(crate) fn lock_shared(dir: &Path) -> Result<Option<File>, String> {
    let path = dir.join(format::LOCK_FILE);
    let Ok(f) = File::open(&path) else {
        return Ok(None);
    };
    match f.try_lock_shared() {
        Ok(()) => Ok(Some(f)),
        Err(fs::TryLockError::WouldBlock) => Err(format!(
            "{} is open in another process; close it first",
            dir.display()
        )),
        Err(fs::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

/// Copy every file and directory under `from` (but `LOCK`) to `to`, with
/// a progress bar in bytes.
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    let mut total = 0;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let src = from.join(&rel);
        let err = |e: std::io::Error| format!("cannot read {}: {e}", src.display());
        fs::create_dir_all(to.join(&rel))
            .map_err(|e| format!("cannot create {}: {e}", to.join(&rel).display()))?;
        for ent in fs::read_dir(&src).map_err(err)? {
            let ent = ent.map_err(err)?;
            let name = ent.file_name();
            if rel.as_os_str().is_empty() && name == format::LOCK_FILE {
                continue;
            }
            let meta = ent.metadata().map_err(err)?;
            if meta.is_dir() {
                stack.push(rel.join(&name));
            } else {
                total += meta.len();
                files.push(rel.join(&name));
            }
        }
    }
    let pb = progress(total, "copying");
    for f in files {
        let n = fs::copy(from.join(&f), to.join(&f))
            .map_err(|e| format!("cannot copy {}: {e}", from.join(&f).display()))?;
        pb.inc(n);
    }
    pb.finish_and_clear();
    Ok(())
}
