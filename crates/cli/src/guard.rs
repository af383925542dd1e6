//! Guardrails before a benchmark loads anything: a configuration whose
//! databases cannot fit in this machine's memory is refused with the
//! estimate, and far more threads than cores is pointed out.
//!
//! The estimates are measured, not derived: each design's resident memory
//! per warehouse, per YCSB key and per SmallBank customer after a load and
//! a short run on this build (the per-run memory line reports the same
//! figure), rounded up. They exist to stop a run that would swap or be
//! killed, not to size a machine.

use crate::protocol::Protocol;

const MIB: u64 = 1 << 20;

/// A design's memory: a fixed part and a factor on the bytes it stores.
struct Footprint {
    /// Bytes the design holds whatever the data (Deuteronomy's log
    /// buffers).
    fixed: u64,
    /// Resident bytes per byte of keys and values stored, in percent.
    per_byte_pct: u64,
    /// Resident bytes per TPC-C warehouse after loading it.
    warehouse: u64,
}

fn footprint(p: Protocol) -> Footprint {
    match p {
        Protocol::Bohm => Footprint {
            fixed: 0,
            per_byte_pct: 170,
            warehouse: 260 * MIB,
        },
        Protocol::Deuteronomy => Footprint {
            fixed: 200 * MIB,
            per_byte_pct: 200,
            warehouse: 280 * MIB,
        },
        Protocol::Hekaton | Protocol::Si | Protocol::Ermia => Footprint {
            fixed: 0,
            per_byte_pct: 110,
            warehouse: 200 * MIB,
        },
        Protocol::TwoPlOrdered | Protocol::TwoPlNoWait => Footprint {
            fixed: 0,
            per_byte_pct: 105,
            warehouse: 180 * MIB,
        },
        _ => Footprint {
            fixed: 0,
            per_byte_pct: 100,
            warehouse: 160 * MIB,
        },
    }
}

/// What a benchmark will store, for the estimate.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Data {
    /// TPC-C's warehouses.
    Warehouses(u64),
    /// Records of about `bytes` each (key, value and the index's and
    /// record's headers).
    Records { count: u64, bytes: u64 },
}

/// Bytes one protocol's database of `data` is estimated to take.
fn estimate(p: Protocol, data: Data) -> u64 {
    let f = footprint(p);
    let stored = match data {
        Data::Warehouses(w) => w.saturating_mul(f.warehouse),
        Data::Records { count, bytes } => {
            count.saturating_mul(bytes).saturating_mul(f.per_byte_pct) / 100
        }
    };
    f.fixed.saturating_add(stored)
}

/// Memory this machine has available now (Linux's `MemAvailable`).
fn available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn gib(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.0} MiB", b as f64 / MIB as f64)
    }
}

/// Refuse a run whose databases (one per protocol, all loaded at once)
/// are estimated to need more memory than is available; `flags` names
/// the flags that set `data`, for the message.
///
/// # Errors
/// The estimate, what is available, and what would fit.
pub(crate) fn fits(protocols: &[Protocol], data: Data, flags: &str) -> Result<(), String> {
    let Some(have) = available() else {
        return Ok(());
    };
    fits_in(protocols, data, flags, have)
}

fn fits_in(protocols: &[Protocol], data: Data, flags: &str, have: u64) -> Result<(), String> {
    let need: u64 = protocols
        .iter()
        .map(|&p| estimate(p, data))
        .fold(0, u64::saturating_add);
    if need <= have {
        return Ok(());
    }
    let each = match protocols {
        [_] => String::new(),
        _ => format!(" ({} databases, one per protocol)", protocols.len()),
    };
    let hint = match data {
        Data::Warehouses(w) => {
            // The largest count that fits, by the same estimate.
            let per_wh: u64 = protocols.iter().map(|&p| footprint(p).warehouse).sum();
            let fixed: u64 = protocols.iter().map(|&p| footprint(p).fixed).sum();
            let most = have.saturating_sub(fixed) / per_wh.max(1);
            format!("; at most about {} warehouses fit", most.min(w))
        }
        Data::Records { .. } => String::new(),
    };
    Err(format!(
        "{flags} needs about {} of memory{each}, and this machine has {} available{hint} \
         (estimates measured per design)",
        gib(need),
        gib(have)
    ))
}

/// Warn when workers outnumber cores by far: the figures then measure the
/// scheduler's time slices more than the design.
pub(crate) fn warn_threads(threads: usize) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads > 8 * cores {
        eprintln!(
            "granary: warning: --threads {threads} on {cores} cores ({} workers a core): \
             throughput and latency will reflect time slicing more than the design",
            threads / cores
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_thousand_warehouses_do_not_fit_in_twenty_gib() {
        let e = fits_in(
            &[Protocol::Silo],
            Data::Warehouses(10_000),
            "--warehouses 10000",
            20 << 30,
        )
        .unwrap_err();
        assert!(
            e.starts_with("--warehouses 10000 needs about 1562.5 GiB"),
            "{e}"
        );
        assert!(e.contains("at most about 128 warehouses fit"), "{e}");
        assert!(fits_in(&[Protocol::Silo], Data::Warehouses(100), "", 20 << 30).is_ok());
    }

    #[test]
    fn every_protocol_counts() {
        let two = [Protocol::Silo, Protocol::Deuteronomy];
        let e = fits_in(&two, Data::Warehouses(40), "--warehouses 40", 16 << 30).unwrap_err();
        assert!(e.contains("(2 databases, one per protocol)"), "{e}");
        let keys = Data::Records {
            count: 1 << 30,
            bytes: 200,
        };
        assert!(fits_in(&[Protocol::Silo], keys, "--keys", 20 << 30).is_err());
    }
}
