//! `granary bench recover DIR`: time recovery (SiloR §6.5) and compare it
//! with the time to just read the same files.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::Args;
use granary::durable;
use granary::{Database, Options};
use serde::Serialize;

use crate::report::{machine, write_json, Machine};

#[derive(Args, Debug, Serialize)]
pub struct BenchRecoverArgs {
    /// A database directory (e.g. left by `granary bench … --durable DIR`,
    /// or by a process killed with -9).
    pub dir: PathBuf,
    /// Recovery threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Recover DIR itself, as a restart would: that changes it (the
    /// current log files are closed into a new generation and the durable
    /// epoch advances). By default DIR is left untouched: it is copied
    /// beside itself (DIR.recovering-PID, removed afterwards; as much disk
    /// again) and the copy is recovered.
    #[arg(long)]
    pub in_place: bool,
}

#[derive(Serialize)]
struct Output {
    benchmark: &'static str,
    dir: PathBuf,
    threads: usize,
    pepoch: u64,
    checkpoint_bytes: u64,
    checkpoint_records: u64,
    checkpoint_seconds: f64,
    checkpoint_gb_per_s: f64,
    log_bytes: u64,
    log_records_applied: u64,
    log_seconds: f64,
    log_gb_per_s: f64,
    /// `Database::open` end to end (scan, load, replay, sweep, tidy).
    recovery_seconds: f64,
    /// Bytes recovery reads (checkpoint files, replayed log blocks).
    read_bytes: u64,
    /// User plus system CPU time the process spent in `Database::open`.
    recovery_cpu_seconds: f64,
    /// Reading the same bytes with as many threads.
    read_seconds: f64,
    recovery_over_read: f64,
    machine: Machine,
}

pub fn run(a: &BenchRecoverArgs) -> Result<(), String> {
    if let Some(why) = crate::report::not_a_silo_dir(&a.dir) {
        return Err(why);
    }
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    if a.in_place {
        return timed(a, &a.dir, threads);
    }
    let name = a
        .dir
        .file_name()
        .map_or_else(|| "db".into(), |n| n.to_string_lossy().into_owned());
    let copy = a
        .dir
        .with_file_name(format!("{name}.recovering-{}", std::process::id()));
    {
        // A database open in another process holds LOCK: do not copy
        // files that are being written.
        let _lock = crate::recover::lock_shared(&a.dir)?;
        crate::recover::copy_dir(&a.dir, &copy).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&copy);
        })?;
    }
    let r = timed(a, &copy, threads);
    let _ = std::fs::remove_dir_all(&copy);
    r
}

/// Time the recovery of `dir` (DIR or its copy) against reading its bytes.
fn timed(a: &BenchRecoverArgs, dir: &std::path::Path, threads: usize) -> Result<(), String> {
    let info = durable::scan(dir).map_err(|e| e.to_string())?;
    // The bytes recovery reads: checkpoint files whole, and the log blocks
    // it replays (blocks a checkpoint supersedes are skipped unread).
    let ranges = info.recovery_reads();
    let read_bytes: u64 = ranges.iter().map(|r| r.2).sum();
    // Baseline: read them, from the disk: the files are evicted from the
    // page cache first, and again before recovery, so neither reads from
    // memory what the other (or an earlier run) brought in.
    evict(&info, &ranges)?;
    let t = Instant::now();
    read_all(&ranges, threads)?;
    let read_seconds = t.elapsed().as_secs_f64();
    evict(&info, &ranges)?;

    let opts = Options::default()
        .loggers(info.pepoch.positions.len())
        .recovery_threads(threads);
    let cpu = cpu_seconds();
    let t = Instant::now();
    let db = Database::open(dir, opts).map_err(|e| e.to_string())?;
    let recovery_seconds = t.elapsed().as_secs_f64();
    let recovery_cpu_seconds = cpu_seconds() - cpu;
    let s = db
        .durability_stats()
        .expect("a durable database has stats")
        .recovery;
    drop(db);
    let gbs = |b: u64, s: f64| if s > 0.0 { b as f64 / 1e9 / s } else { 0.0 };
    let out = Output {
        benchmark: "recover",
        dir: a.dir.clone(),
        threads,
        pepoch: s.pepoch,
        checkpoint_bytes: s.checkpoint_bytes,
        checkpoint_records: s.checkpoint_records,
        checkpoint_seconds: s.checkpoint_seconds,
        checkpoint_gb_per_s: gbs(s.checkpoint_bytes, s.checkpoint_seconds),
        log_bytes: s.log_bytes,
        log_records_applied: s.log_records_applied,
        log_seconds: s.log_seconds,
        log_gb_per_s: gbs(s.log_bytes, s.log_seconds),
        recovery_seconds,
        recovery_cpu_seconds,
        read_bytes,
        read_seconds,
        recovery_over_read: recovery_seconds / read_seconds.max(1e-9),
        machine: machine(),
    };
    println!(
        "recovered {}{} to e_p = {} with {} threads in {:.3} s",
        if a.in_place { "" } else { "a copy of " },
        a.dir.display(),
        out.pepoch,
        threads,
        recovery_seconds
    );
    println!(
        "  CPU {:.3} s: {:.2} of {} threads busy on average",
        recovery_cpu_seconds,
        recovery_cpu_seconds / recovery_seconds.max(1e-9),
        threads
    );
    println!(
        "  checkpoint {:>10.1} MB  {:>9} records  {:.3} s  {:.2} GB/s",
        out.checkpoint_bytes as f64 / 1e6,
        out.checkpoint_records,
        out.checkpoint_seconds,
        out.checkpoint_gb_per_s
    );
    println!(
        "  log        {:>10.1} MB  {:>9} writes   {:.3} s  {:.2} GB/s",
        out.log_bytes as f64 / 1e6,
        out.log_records_applied,
        out.log_seconds,
        out.log_gb_per_s
    );
    println!(
        "  reading the same {:.1} MB: {:.3} s  → recovery / read = {:.2}×",
        read_bytes as f64 / 1e6,
        read_seconds,
        out.recovery_over_read
    );
    if let Some(p) = &a.json {
        write_json(p, &out)?;
    }
    Ok(())
}

/// User plus system CPU time of the whole process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: `rusage` is plain integers, for which zeros are valid.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `getrusage` fills the struct it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// Drop the cached pages of every file recovery reads (and of the logs it
/// scans), so the next read of them goes to the disk. Needs no privilege,
/// unlike `echo 3 > /proc/sys/vm/drop_caches`; the files are synced first,
/// as only clean pages can be dropped.
fn evict(info: &durable::recover::DirInfo, ranges: &[(PathBuf, u64, u64)]) -> Result<(), String> {
    let files = ranges
        .iter()
        .map(|r| &r.0)
        .chain(info.logs.iter().map(|l| &l.path));
    for p in files {
        let err = |e: std::io::Error| format!("{}: {e}", p.display());
        let f = File::open(p).map_err(err)?;
        f.sync_data().map_err(err)?;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid open descriptor; no memory is passed.
            let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            if r != 0 {
                return Err(err(std::io::Error::from_raw_os_error(r)));
            }
        }
    }
    Ok(())
}

/// Read every `(file, offset, length)` range on `threads` threads, in
/// 1 MiB reads into a reused buffer (as recovery reads its blocks).
fn read_all(ranges: &[(PathBuf, u64, u64)], threads: usize) -> Result<(), String> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads.min(ranges.len()).max(1))
            .map(|_| {
                s.spawn(|| -> Result<u64, String> {
                    let mut sum = 0u64;
                    let mut buf = vec![0u8; 1 << 20];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((p, off, len)) = ranges.get(i) else {
                            return Ok(sum);
                        };
                        let err = |e: std::io::Error| format!("{}: {e}", p.display());
                        let f = File::open(p).map_err(err)?;
                        let mut at = *off;
                        while at < off + len {
                            let n = ((off + len - at) as usize).min(buf.len());
                            f.read_exact_at(&mut buf[..n], at).map_err(err)?;
                            // Touch the bytes so the read cannot be elided.
                            sum = sum.wrapping_add(
                                buf[..n]
                                    .iter()
                                    .step_by(4096)
                                    .map(|&x| u64::from(x))
                                    .sum::<u64>(),
                            );
                            at += n as u64;
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("reader thread")?;
        }
        Ok(())
    })
}
