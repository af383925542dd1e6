//! What the suite's tests share: seeds that replay, the stress factor,
//! value encoding, and running a body until it commits.

use std::ops::Bound;

use granary_api::{TableId, Tx, TxError};

pub use granary_workloads::driver::run_until_committed as run;
pub use granary_workloads::rng::Rng;

/// The test's seed: `GRANARY_SEED` if set, else fresh; always printed
/// (with the test's name) so a failure can be replayed.
pub fn seed(name: &str) -> u64 {
    let s = std::env::var("GRANARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("{name}: seed {s} (replay with GRANARY_SEED={s})");
    s
}

/// Scale factor for stress loops: `GRANARY_STRESS=N` multiplies them (1
/// in CI).
pub fn stress() -> u64 {
    std::env::var("GRANARY_STRESS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// A counter as a value (8 bytes, big-endian).
pub fn enc(x: u64) -> [u8; 8] {
    x.to_be_bytes()
}

/// A value written by [`enc`].
pub fn dec(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().expect("8-byte value"))
}

/// A row copied out of a table: key and value.
pub type Row = (Vec<u8>, Vec<u8>);

/// Up to `limit` rows of a scan, copied out.
///
/// # Errors
/// As [`Tx::scan`].
pub fn collect<T: Tx>(
    tx: &mut T,
    t: TableId,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    limit: usize,
    reverse: bool,
) -> Result<Vec<Row>, TxError> {
    let mut out = Vec::new();
    tx.scan(t, lo, hi, limit, reverse, |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })?;
    Ok(out)
}
