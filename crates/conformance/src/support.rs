//! What the suite's tests share: seeds that replay and the stress factor
//! (`GRANARY_SEED`, `GRANARY_STRESS`), value encoding, and running a body
//! until it commits.

use std::ops::Bound;

use granary_api::{TableId, Tx, TxError};

pub use granary_workloads::driver::run_until_committed as run;
pub use granary_workloads::replay::{seed, stress};
pub use granary_workloads::rng::Rng;

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
