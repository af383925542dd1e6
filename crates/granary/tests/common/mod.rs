//! Shared helpers for the scenario tests: seeds, a small PRNG and
//! scratch directories.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use granary::{Database, Options};

// Not every test that includes this module uses them.
#[allow(unused_imports)]
pub use granary_workloads::replay::{seed, stress};

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng(seed ^ (stream + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A database with fast epochs, so snapshot and GC tests run quickly.
pub fn fast_db() -> Database {
    Database::new(Options::default().epoch_interval(Duration::from_millis(1))).unwrap()
}

pub fn enc(x: u64) -> [u8; 8] {
    x.to_be_bytes()
}

pub fn dec(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().expect("8-byte value"))
}

/// A scratch directory under the system temp dir, unique per process and
/// thread, removed (with its contents) when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "granary-test-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every row of table `t`, in key order, read in one transaction.
pub fn rows(w: &mut granary::Worker, t: granary::TableId) -> Vec<(Vec<u8>, Vec<u8>)> {
    w.run(|tx| {
        tx.scan_collect(
            t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            usize::MAX,
            false,
        )
    })
    .unwrap()
}

/// A bank of the durability tests: `accounts` (8-byte big-endian account
/// → u64 balance) and `receipts` (worker ++ sequence, both u64
/// big-endian → "r"), one receipt per acknowledged transfer.
pub mod bank {
    use std::collections::BTreeMap;

    use granary::{Database, TableId, Tx, TxError};

    use super::{dec, enc};

    /// The bank's (accounts, receipts) tables, created if new.
    pub fn tables(db: &Database) -> (TableId, TableId) {
        (
            db.open_table("accounts").unwrap(),
            db.open_table("receipts").unwrap(),
        )
    }

    /// Move `amount` from `a` to `b` if `a` has it, and write receipt `n`
    /// of worker `id` either way.
    #[allow(clippy::too_many_arguments)]
    pub fn transfer<T: Tx>(
        tx: &mut T,
        (acc, rec): (TableId, TableId),
        id: u64,
        n: u64,
        a: u64,
        b: u64,
        amount: u64,
    ) -> Result<(), TxError> {
        let va = dec(tx.get(acc, &enc(a))?.expect("account"));
        let vb = dec(tx.get(acc, &enc(b))?.expect("account"));
        if a != b && va >= amount {
            tx.put(acc, &enc(a), &enc(va - amount))?;
            tx.put(acc, &enc(b), &enc(vb + amount))?;
        }
        let mut k = enc(id).to_vec();
        k.extend_from_slice(&enc(n));
        tx.put(rec, &k, b"r")
    }

    /// What the bank holds: the accounts' count and balance total, and
    /// per worker the receipt numbers present, ascending.
    pub fn state(db: &Database) -> (usize, u64, BTreeMap<u64, Vec<u64>>) {
        let (acc, rec) = tables(db);
        let mut w = db.worker().unwrap();
        let accounts = super::rows(&mut w, acc);
        let total = accounts.iter().map(|(_, v)| dec(v)).sum();
        let mut receipts: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (k, _) in super::rows(&mut w, rec) {
            receipts.entry(dec(&k[..8])).or_default().push(dec(&k[8..]));
        }
        (accounts.len(), total, receipts)
    }
}
