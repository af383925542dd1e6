//! Machine description and JSON output shared by the benchmarks.

use serde::Serialize;

#[derive(Serialize, Debug, Clone)]
pub struct Machine {
    pub cpus: usize,
    pub os: &'static str,
    pub arch: &'static str,
    pub cpu_model: String,
    pub granary_version: &'static str,
    /// The commit and cargo profile the binary was built from (figures
    /// are comparable only between builds of one profile).
    pub build: &'static str,
}

pub fn machine() -> Machine {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    Machine {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
        cpu_model,
        granary_version: env!("CARGO_PKG_VERSION"),
        build: env!("GRANARY_BUILD"),
    }
}

/// Refuse an output file that cannot be written, before the run that
/// would fill it: `path` must not be a directory, and its directory must
/// exist and be writable.
///
/// # Errors
/// What is wrong, naming `flag` and the path.
pub fn check_output_file(flag: &str, path: &std::path::Path) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!(
            "{flag} {} is a directory, not a file",
            path.display()
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        return Err(format!(
            "{flag} {}: the directory {} does not exist",
            path.display(),
            dir.display()
        ));
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{flag} {}: a path with a NUL byte", path.display()))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!(
            "{flag} {}: the directory {} is not writable",
            path.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// Why `dir` is not a Silo database directory, for `inspect`, `recover`
/// and `bench recover` (which read Silo's directories): it does not exist,
/// is a file, is Deuteronomy's, or has no pepoch file. `None` if it has one.
pub fn not_a_silo_dir(dir: &std::path::Path) -> Option<String> {
    let d = dir.display();
    if !dir.exists() {
        return Some(format!("{d} does not exist"));
    }
    if !dir.is_dir() {
        return Some(format!("{d} is a file, not a database directory"));
    }
    if dir.join(granary::durable::format::PEPOCH_FILE).exists() {
        return None;
    }
    // Deuteronomy's TC writes `tables` and log segments `log-<16 hex>`.
    let deuteronomy = std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("log-")
                .is_some_and(|h| h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()))
        })
    });
    Some(if deuteronomy {
        format!(
            "{d} is a Deuteronomy directory (its recovery log, not Silo's): this command reads \
             Silo's directories; Deuteronomy's recovers when its TC opens it \
             (docs/FORMAT.md, \"Deuteronomy: recovery\")"
        )
    } else {
        format!("{d} is not a granary database directory (no pepoch file)")
    })
}

/// `a` as one shell command line: words quoted where the shell would
/// split or expand them.
pub fn shell_join(a: &[String]) -> String {
    a.iter()
        .map(|s| {
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./,=:".contains(c))
            {
                s.clone()
            } else {
                format!("'{}'", s.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Write `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize>(path: &std::path::Path, value: &T) -> Result<(), String> {
    let s = serde_json::to_string_pretty(value).map_err(|e| format!("cannot encode JSON: {e}"))?;
    std::fs::write(path, s + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn progress(len: u64, msg: &'static str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let pb = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(len)
    } else {
        indicatif::ProgressBar::hidden()
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} ({eta})")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_message(msg);
    pb
}

/// A run's progress bar over `len` seconds, its message the throughput
/// of the last second (and what the run waits on, when it knows).
pub fn progress_with_status(len: u64) -> indicatif::ProgressBar {
    let pb = progress(len, "running");
    pb.set_style(
        indicatif::ProgressStyle::with_template("   running [{bar:40}] {pos}/{len} s  {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_message("");
    pb
}

/// Seconds-since-epoch nanos: the default seed.
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(42, |d| d.as_nanos() as u64)
}
