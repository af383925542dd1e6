//! Declared read/write sets must cover what the procedures do: protocols
//! that plan from declarations (BOHM) would lose an undeclared write. Every
//! SmallBank transaction runs once through `Fenced` with its own
//! declaration; and the fence must catch a declaration that is too small.

use std::time::Duration;

use granary::{Database, Declared, Options, TxError};
use granary_workloads::driver::Workload;
use granary_workloads::fence::Fenced;
use granary_workloads::smallbank::{SmallBank, SmallBankConfig, TxType};

fn loaded() -> (Database, SmallBank) {
    let db =
        Database::new(Options::default().epoch_interval(Duration::from_millis(2))).expect("db");
    let mut w = SmallBank::new(SmallBankConfig::new(100)).expect("config");
    w.load(&db, &|_, _| {}).expect("load");
    (db, w)
}

/// Run transaction `ty` on customers 3 and 7 through a fence; returns the
/// undeclared accesses.
fn outside(w: &SmallBank, db: &Database, ty: TxType, d: &Declared) -> Vec<String> {
    let mut wk = db.worker().expect("worker");
    let (a, b) = (3, 7);
    let r = wk.run(|tx| {
        let mut f = Fenced::new(tx, d);
        let r = match ty {
            TxType::Amalgamate => w.amalgamate(&mut f, a, b).map(|_| ()),
            TxType::Balance => w.balance(&mut f, a).map(|_| ()),
            TxType::DepositChecking => w.deposit_checking(&mut f, a, 5).map(|_| ()),
            TxType::SendPayment => w.send_payment(&mut f, a, b, 5).map(|_| ()),
            TxType::TransactSavings => w.transact_savings(&mut f, a, 5).map(|_| ()),
            TxType::WriteCheck => w.write_check(&mut f, a, 5).map(|_| ()),
        };
        r?;
        Ok::<_, TxError>(
            f.outside
                .iter()
                .map(|o| format!("{o:?}"))
                .collect::<Vec<_>>(),
        )
    });
    r.expect("transaction")
}

#[test]
fn smallbank_stays_within_its_declarations() {
    let (db, w) = loaded();
    let mut d = Declared::new();
    for ty in TxType::ALL {
        w.declare(&mut d, ty, 3, 7).expect("declare");
        let out = outside(&w, &db, ty, &d);
        assert!(
            out.is_empty(),
            "{} goes outside its declaration: {out:?}",
            ty.name()
        );
    }
}

#[test]
fn the_fence_catches_an_undeclared_write() {
    let (db, w) = loaded();
    let mut d = Declared::new();
    // Declare a deposit's set, then run an amalgamate under it: its writes
    // to savings(3) and checking(7) are undeclared.
    w.declare(&mut d, TxType::DepositChecking, 3, 3)
        .expect("declare");
    let out = outside(&w, &db, TxType::Amalgamate, &d);
    assert!(out.iter().any(|o| o.ends_with("true)")), "{out:?}");
}
