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

/// Seconds-since-epoch nanos: the default seed.
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(42, |d| d.as_nanos() as u64)
}
