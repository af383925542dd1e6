use super::*;

/// Puts `value` at `key`, and optionally at a key it did not declare.
struct Put {
    t: TableId,
    key: u64,
    stray: bool,
}

impl Body for Put {
    type Output = ();

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<(), TxError> {
        tx.put(self.t, &self.key.to_be_bytes(), b"v")?;
        if self.stray {
            tx.put(self.t, b"undeclared", b"v")?;
        }
        Ok(())
    }
}

fn submit(w: &mut Runner, t: TableId, key: u64, stray: bool) -> Result<Option<()>, Error> {
    let mut p = Procedure::new(0, Put { t, key, stray });
    p.declared.write(t, &key.to_be_bytes());
    p.planned = true;
    w.submit(p).unwrap();
    let mut done: Vec<Done<Put>> = Vec::new();
    w.poll(true, &mut done).unwrap();
    done.pop().unwrap().outcome
}

/// Adds one to each of its keys.
struct Bump {
    t: TableId,
    keys: Vec<u64>,
}

impl Body for Bump {
    type Output = ();

    fn run<T: Tx>(&mut self, tx: &mut T) -> Result<(), TxError> {
        for k in &self.keys {
            let v = tx.get(self.t, &k.to_be_bytes())?.map_or(0, |v| {
                u64::from_be_bytes(v[..8].try_into().expect("8 bytes"))
            });
            tx.put(self.t, &k.to_be_bytes(), &(v + 1).to_be_bytes())?;
        }
        Ok(())
    }
}

fn chain_len(db: &Bohm, t: TableId, key: u64) -> usize {
    let g = crossbeam_epoch::pin();
    let tree = db.shared.tables.get(t).unwrap();
    let c = tree.find(&key.to_be_bytes(), &Pin(&g)).unwrap() as *const Chain;
    // SAFETY: pinned; chains live as long as the database.
    let mut v = unsafe { &*c }.head.load(Ordering::Acquire);
    let mut n = 0;
    while !v.is_null() {
        n += 1;
        // SAFETY: as above.
        v = unsafe { &*v }.prev.load(Ordering::Acquire);
    }
    n
}

/// §3.3.2: versions are cut by the batch low watermark as the run
/// goes, so an update-heavy run keeps every chain short (without the
/// cut, each key would hold all 8,000 of its versions), and every
/// update is counted once.
#[test]
fn garbage_is_cut_by_the_low_watermark() {
    for both in [false, true] {
        let db = Bohm::new(Config {
            batch: 50,
            both,
            ..Config::default()
        })
        .unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.runner().unwrap();
        let (keys, txns) = (50u64, 40_000u64);
        let mut done: Vec<Done<Bump>> = Vec::new();
        let mut free: Vec<Box<Procedure<Bump>>> = Vec::new();
        let mut in_flight = 0;
        for i in 0..txns {
            let mut p = free.pop().unwrap_or_else(|| {
                Procedure::new(
                    0,
                    Bump {
                        t,
                        keys: Vec::new(),
                    },
                )
            });
            p.body.keys.clear();
            p.declared.clear();
            for j in 0..10 {
                let k = (i * 7 + j * 5) % keys;
                if !p.body.keys.contains(&k) {
                    p.body.keys.push(k);
                    p.declared.write(t, &k.to_be_bytes());
                }
            }
            p.planned = true;
            w.submit(p).unwrap();
            in_flight += 1;
            w.poll(in_flight >= 200, &mut done).unwrap();
            for d in done.drain(..) {
                assert!(matches!(d.outcome, Ok(Some(()))));
                in_flight -= 1;
                free.push(d.procedure);
            }
        }
        while in_flight > 0 {
            w.poll(true, &mut done).unwrap();
            in_flight -= done.len();
            done.clear();
        }
        let longest = (0..keys).map(|k| chain_len(&db, t, k)).max().unwrap();
        assert!(longest < 400, "both={both}: a chain of {longest} versions");
        let total: u64 = w
            .try_run(|tx| {
                let mut sum = 0;
                for k in 0..keys {
                    let v = tx.get(t, &k.to_be_bytes())?.unwrap();
                    sum += u64::from_be_bytes(v[..8].try_into().unwrap());
                }
                Ok(sum)
            })
            .unwrap()
            .unwrap();
        let writes: u64 = (0..txns)
            .map(|i| {
                let mut ks: Vec<u64> = (0..10).map(|j| (i * 7 + j * 5) % keys).collect();
                ks.sort_unstable();
                ks.dedup();
                ks.len() as u64
            })
            .sum();
        assert_eq!(total, writes, "both={both}: every update counted once");
    }
}

/// A write outside the declared set fails the procedure (BOHM planned
/// no placeholder for it), and undoes its declared writes; an
/// undeclared procedure is refused.
#[test]
fn undeclared_writes_fail_and_undo() {
    let db = Bohm::new(Config::default()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.runner().unwrap();
    assert_eq!(submit(&mut w, t, 1, false).unwrap(), Some(()));
    assert!(matches!(
        submit(&mut w, t, 2, true),
        Err(Error::Undeclared(_))
    ));
    let got = w
        .try_run(|tx| {
            Ok((
                tx.get(t, &1u64.to_be_bytes())?.is_some(),
                tx.get(t, &2u64.to_be_bytes())?.is_some(),
            ))
        })
        .unwrap()
        .unwrap();
    assert_eq!(got, (true, false), "the failed procedure's write is undone");
    let p = Procedure::new(
        0,
        Put {
            t,
            key: 3,
            stray: false,
        },
    );
    assert!(matches!(w.submit(p), Err(Error::Undeclared(_))));
    assert!(Bohm::new(Config {
        batch: 0,
        ..Config::default()
    })
    .is_err());
}
