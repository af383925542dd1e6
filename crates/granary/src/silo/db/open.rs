//! [`Database::open`]: a durable database in a directory (SiloR). It
//! creates or recovers the directory (`recover`'s scan, `replay` into a
//! new engine, `recover`'s tidy), then starts durability and the periodic checkpointer. At the
//! top of the engine: it drives everything below.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use granary_storage::crashsim;
use granary_storage::fs::{fp, sync_dir, DirLock};

use super::Database;
use crate::silo::durable::log::{Durable, Start};
use crate::silo::durable::{checkpoint, format, recover, replay};
use crate::silo::error::Error;
use crate::silo::options::Options;

/// Create the files of a new database directory. `pepoch` comes last: its
/// presence marks the directory as initialized.
fn init_dir(dir: &Path, loggers: usize) -> Result<(), Error> {
    let io = |what: &str, p: &Path, e: io::Error| Error::storage(what, p, e);
    let cat = dir.join(format::CATALOG_FILE);
    let has_data = std::fs::metadata(&cat).is_ok_and(|m| m.len() > 0)
        || dir.join(format::VOIDS_FILE).exists()
        || std::fs::read_dir(dir)
            .map_err(|e| io("list", dir, e))?
            .flatten()
            .any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                format::parse_ckpt_dir_name(&n).is_some()
                    || (n.starts_with("log.")
                        && std::fs::read_dir(e.path()).is_ok_and(|mut r| r.next().is_some()))
            });
    if has_data {
        return Err(Error::Missing {
            path: dir.join(format::PEPOCH_FILE),
            what: "pepoch is gone but the directory holds logs, checkpoints or tables".into(),
        });
    }
    for i in 0..loggers {
        let l = format::logger_dir(dir, i);
        std::fs::create_dir_all(&l).map_err(|e| io("create", &l, e))?;
        crashsim::made_dir(&l);
    }
    File::create(&cat)
        .inspect(|_| crashsim::created(&cat, true))
        .and_then(|f| f.sync_all())
        .map_err(|e| io("create", &cat, e))?;
    crashsim::synced(&cat);
    let pe = Pepoch0 { loggers };
    let tmp = dir.join("pepoch.tmp");
    let write = || -> io::Result<()> {
        fp("init-write")?;
        let mut f = File::create(&tmp)?;
        crashsim::created(&tmp, true);
        let bytes = pe.bytes();
        f.write_all(&bytes)?;
        crashsim::wrote(&tmp, 0, &bytes);
        f.sync_all()?;
        crashsim::synced(&tmp);
        let to = dir.join(format::PEPOCH_FILE);
        std::fs::rename(&tmp, &to)?;
        crashsim::renamed(&tmp, &to);
        sync_dir(dir)
    };
    write().map_err(|e| io("initialize", dir, e))
}

/// The initial pepoch: e_p = 0, every logger at generation 0, length 0,
/// needing generations from 0 on, and no checkpoint.
struct Pepoch0 {
    loggers: usize,
}

impl Pepoch0 {
    fn bytes(&self) -> Vec<u8> {
        let p = format::Pepoch {
            version: format::PEPOCH_VERSION,
            seq: 0,
            epoch: 0,
            positions: vec![(0, 0); self.loggers],
            voids: 0,
            checkpoint: 0,
            lows: vec![0; self.loggers],
        };
        let mut b = p.encode().to_vec();
        b.extend_from_slice(&[0u8; format::PEPOCH_SLOT]);
        b
    }
}

impl Database {
    /// Open (or create) a durable database in `dir` (SiloR): recover
    /// whatever the directory holds — the newest complete checkpoint plus
    /// the log up to the persistent epoch — then serve, logging every
    /// commit. Tables come back under their names and ids.
    ///
    /// With the default `wait_for_durable`, [`Worker::run`](crate::Worker::run)
    /// returns only once the transaction is durable (about one to three
    /// epochs).
    ///
    /// ```
    /// use granary::{Database, Options};
    /// let dir = std::env::temp_dir().join(format!("granary-doc-open-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let opts = Options::default().epoch_interval(std::time::Duration::from_millis(5));
    /// {
    ///     let db = Database::open(&dir, opts.clone())?;
    ///     let t = db.open_table("kv")?;
    ///     db.worker()?.run(|tx| tx.put(t, b"k", b"v"))?; // durable on return
    /// }
    /// let db = Database::open(&dir, opts)?; // recovers
    /// let t = db.table("kv")?;
    /// let v = db.worker()?.run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))?;
    /// assert_eq!(v.as_deref(), Some(&b"v"[..]));
    /// # drop(db);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), granary::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Locked`] if another process or handle has the directory
    /// open; [`Error::Corrupt`] for damage within what was durable (see
    /// `docs/FORMAT.md` for the recovery policy); [`Error::Storage`] for
    /// failed file operations; [`Error::InvalidOption`] for bad options,
    /// or a logger count different from the directory's.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Database, Error> {
        let dir = dir.as_ref();
        let io = |what: &str, p: &Path, e: io::Error| Error::storage(what, p, e);
        // Durably: a power cut must not lose the directory's own entry.
        granary_storage::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
        let dir = dir.canonicalize().map_err(|e| io("resolve", dir, e))?;
        let lock = DirLock::acquire(&dir)?;
        if !recover::exists(&dir) {
            init_dir(&dir, options.loggers)?;
        }
        // The log files are scanned during the checkpoint load (`replay`).
        let mut info = recover::scan_meta(&dir)?;
        let n = info.pepoch.positions.len();
        if n != options.loggers {
            return Err(Error::InvalidOption(format!(
                "{} was created with {n} logger(s); open it with Options::loggers({n})",
                dir.display()
            )));
        }
        // The checkpoint the durable state needs, or the voids: no salvage
        // without them.
        if let Some(p) = info.problems.first() {
            return Err(p.to_error());
        }
        let db = Database::new(options.clone())?;
        for (_, name) in &info.tables {
            db.create_table(name)?;
        }
        let recovered = replay::replay(
            &db.shared,
            &mut info,
            options.recovery_threads,
            options.direct_io,
            options.recovery_mode,
        )?;
        {
            let mut w = db.worker()?;
            for &t in &recovered.tables_with_deletes {
                replay::sweep_tombstones(&mut w, granary_api::TableId(t));
            }
        }
        let tidied = recover::tidy(&info)?;
        db.shared.epochs.raise_global(tidied.first_epoch);
        *db.owner.as_ref().expect("a user handle").lock.lock() = Some(lock);
        // A salvage leaves damaged files behind, and a directory from before
        // pepoch version 3 has no record of which log files it needs: a
        // checkpoint (before anything new is acknowledged) records that, and
        // deletes what it supersedes.
        let rebase = info.salvage.is_some() || tidied.ledger.lows.contains(&format::LOW_UNKNOWN);
        // Recovery's own threads use internal handles (no owner), so failing
        // here releases the lock with `db`.
        let d = Durable::start(Start {
            dir,
            epochs: db.shared.epochs.clone(),
            options,
            pepoch: info.pepoch.epoch,
            pepoch_seq: info.pepoch.seq,
            generations: tidied.generations,
            ledger: tidied.ledger,
            checkpoint: info.checkpoint().map(|(_, m)| m.clone()),
            recovered,
        })?;
        if db.shared.durable.set(d).is_err() {
            unreachable!("durability is set once, here");
        }
        if rebase {
            checkpoint::run_with(&db.shared, true)?;
        }
        checkpoint::spawn_periodic(&db.shared).map_err(Error::Io)?;
        Ok(db)
    }
}
