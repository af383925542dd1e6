//! A ledger of transfers, for durability tests: accounts with balances,
//! and one receipt row per transfer, written in the transfer's own
//! transaction. After a crash, a recovered database is audited against
//! what was acknowledged ([`State::audit`]): every acknowledged receipt
//! is present, and each balance is its initial amount plus what the
//! present receipts moved, so a transfer there in part (a debit without
//! its credit or its receipt) shows.
//!
//! Layout: table `accounts`, key the account (`u32`, big-endian), value
//! its balance (`i64`, little-endian), plus the key `loaded` once the
//! accounts are in; table `transfers`, key the transfer's id (`u64`,
//! big-endian), value `from (u32) | to (u32) | amount (i64)`,
//! little-endian.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use granary_api::{Engine, Error, TableId, Tx, TxError};

/// The marker key written with the accounts.
const LOADED: &[u8] = b"loaded";

/// A ledger's tables and shape.
#[derive(Clone, Copy, Debug)]
pub struct Ledger {
    pub accounts: TableId,
    pub transfers: TableId,
    /// How many accounts, each starting at `initial`.
    pub count: u32,
    pub initial: i64,
}

/// One transfer's receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receipt {
    pub id: u64,
    pub from: u32,
    pub to: u32,
    pub amount: i64,
}

/// What a ledger holds.
#[derive(Clone, Debug, Default)]
pub struct State {
    pub loaded: bool,
    pub balances: BTreeMap<u32, i64>,
    pub receipts: Vec<Receipt>,
}

fn int(v: &[u8]) -> Result<i64, TxError> {
    v.try_into()
        .map(i64::from_le_bytes)
        .map_err(|_| TxError::Failed(Error::InvalidOption("a balance is not 8 bytes".into())))
}

impl Ledger {
    /// The ledger's tables in `db` (made if missing), with `count`
    /// accounts of `initial` each.
    ///
    /// # Errors
    /// The tables cannot be made.
    pub fn open<E: Engine>(db: &E, count: u32, initial: i64) -> Result<Ledger, Error> {
        Ok(Ledger {
            accounts: db.open_table("accounts")?,
            transfers: db.open_table("transfers")?,
            count,
            initial,
        })
    }

    /// Put the accounts in, unless they are (so a reopened database keeps
    /// its balances).
    ///
    /// # Errors
    /// As the transaction's operations.
    pub fn load<T: Tx>(&self, tx: &mut T) -> Result<(), TxError> {
        if tx.get(self.accounts, LOADED)?.is_some() {
            return Ok(());
        }
        for a in 0..self.count {
            tx.put(self.accounts, &a.to_be_bytes(), &self.initial.to_le_bytes())?;
        }
        tx.put(self.accounts, LOADED, b"1")
    }

    /// Move `amount` from account `from` to `to`, with receipt `id`.
    ///
    /// # Errors
    /// As the transaction's operations; [`TxError::Failed`] if the
    /// accounts are not loaded or `id` was used.
    pub fn transfer<T: Tx>(
        &self,
        tx: &mut T,
        id: u64,
        from: u32,
        to: u32,
        amount: i64,
    ) -> Result<(), TxError> {
        let missing = || TxError::Failed(Error::InvalidOption("the ledger is not loaded".into()));
        let x = int(tx
            .get(self.accounts, &from.to_be_bytes())?
            .ok_or_else(missing)?)?;
        tx.put(
            self.accounts,
            &from.to_be_bytes(),
            &(x - amount).to_le_bytes(),
        )?;
        let y = int(tx
            .get(self.accounts, &to.to_be_bytes())?
            .ok_or_else(missing)?)?;
        tx.put(
            self.accounts,
            &to.to_be_bytes(),
            &(y + amount).to_le_bytes(),
        )?;
        let mut row = [0u8; 16];
        row[0..4].copy_from_slice(&from.to_le_bytes());
        row[4..8].copy_from_slice(&to.to_le_bytes());
        row[8..16].copy_from_slice(&amount.to_le_bytes());
        tx.insert(self.transfers, &id.to_be_bytes(), &row)
    }

    /// Read the whole ledger.
    ///
    /// # Errors
    /// As the transaction's operations; [`TxError::Failed`] for a row of
    /// the wrong shape.
    pub fn read<T: Tx>(&self, tx: &mut T) -> Result<State, TxError> {
        let mut s = State {
            loaded: tx.get(self.accounts, LOADED)?.is_some(),
            ..State::default()
        };
        for a in 0..self.count {
            if let Some(v) = tx.get(self.accounts, &a.to_be_bytes())? {
                s.balances.insert(a, int(v)?);
            }
        }
        let mut bad = false;
        tx.scan(
            self.transfers,
            Bound::Unbounded,
            Bound::Unbounded,
            usize::MAX,
            false,
            |k, v| {
                let (Ok(k), Some(v)) = (<[u8; 8]>::try_from(k), v.get(..16)) else {
                    bad = true;
                    return false;
                };
                let word =
                    |r: std::ops::Range<usize>| -> [u8; 4] { v[r].try_into().expect("4 bytes") };
                s.receipts.push(Receipt {
                    id: u64::from_be_bytes(k),
                    from: u32::from_le_bytes(word(0..4)),
                    to: u32::from_le_bytes(word(4..8)),
                    amount: i64::from_le_bytes(v[8..16].try_into().expect("8 bytes")),
                });
                true
            },
        )?;
        if bad {
            return Err(TxError::Failed(Error::InvalidOption(
                "a transfer row of the wrong shape".into(),
            )));
        }
        Ok(s)
    }
}

impl State {
    /// Check this state against the receipts acknowledged (ids; `loaded`
    /// if the load was acknowledged): every one present, and no transfer
    /// there in part. `Err` says what is wrong.
    ///
    /// # Errors
    /// A description of the first discrepancy.
    pub fn audit<'a>(
        &self,
        ledger: &Ledger,
        loaded: bool,
        acked: impl IntoIterator<Item = &'a u64>,
    ) -> Result<(), String> {
        if loaded && !self.loaded {
            return Err("the acknowledged load is gone".into());
        }
        let present: BTreeSet<u64> = self.receipts.iter().map(|r| r.id).collect();
        if let Some(gone) = acked.into_iter().find(|id| !present.contains(id)) {
            return Err(format!("acknowledged transfer {gone:#x} is gone"));
        }
        if !self.loaded {
            return match (self.balances.is_empty(), self.receipts.is_empty()) {
                (true, true) => Ok(()),
                _ => Err("accounts or transfers without a completed load".into()),
            };
        }
        let mut expect: BTreeMap<u32, i64> =
            (0..ledger.count).map(|a| (a, ledger.initial)).collect();
        for r in &self.receipts {
            match (expect.contains_key(&r.from), expect.contains_key(&r.to)) {
                (true, true) => {}
                _ => return Err(format!("receipt {:#x} names an unknown account", r.id)),
            }
            *expect.get_mut(&r.from).expect("checked") -= r.amount;
            *expect.get_mut(&r.to).expect("checked") += r.amount;
        }
        if let Some((a, want)) = expect.iter().find(|(a, w)| self.balances.get(a) != Some(w)) {
            return Err(format!(
                "account {a} holds {:?}, but the receipts say {want}: a transfer is there in part",
                self.balances.get(a)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_catches_a_lost_receipt_and_a_partial_transfer() {
        let db = granary::Database::new(granary::Options::default()).unwrap();
        let l = Ledger::open(&db, 4, 100).unwrap();
        let mut w = db.runner().unwrap();
        let state = |w: &mut granary::Worker| w.try_run(|tx| l.read(tx)).unwrap().unwrap();
        assert!(state(&mut w).audit(&l, false, &[]).is_ok(), "empty");
        assert!(
            state(&mut w).audit(&l, true, &[]).is_err(),
            "the load is gone"
        );
        w.try_run(|tx| l.load(tx)).unwrap().unwrap();
        w.try_run(|tx| l.transfer(tx, 7, 0, 1, 30))
            .unwrap()
            .unwrap();
        let s = state(&mut w);
        assert_eq!(s.balances[&0], 70);
        assert!(s.audit(&l, true, &[7]).is_ok());
        assert!(
            s.audit(&l, true, &[7, 8]).is_err(),
            "receipt 8 was acknowledged"
        );
        // A debit without its credit.
        w.try_run(|tx| tx.put(l.accounts, &2u32.to_be_bytes(), &90i64.to_le_bytes()))
            .unwrap()
            .unwrap();
        let e = state(&mut w).audit(&l, true, &[7]).unwrap_err();
        assert!(e.contains("in part"), "{e}");
        // A second load changes nothing.
        w.try_run(|tx| l.load(tx)).unwrap().unwrap();
        assert_eq!(state(&mut w).balances[&0], 70);
    }
}
