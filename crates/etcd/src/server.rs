//! A local single-node etcd, for tests and for the `granary` command when
//! it is given no cluster: started from Debian's `etcd-server` binary in
//! a data directory of ours, on free loopback ports, SIGKILLed and
//! restarted on demand, and killed when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use granary_api::Error;

/// How long a starting etcd has to answer `/health`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Fresh ports tried when etcd fails to start on the first pair (another
/// process took one between our probe and etcd's bind).
const PORT_TRIES: usize = 5;
/// The file in the directory that remembers the ports, so a restart (by
/// this process or a later one) finds etcd where its clients expect it.
const PORTS_FILE: &str = "ports";

/// A running (or killed) local etcd. Dropping it kills the process
/// (SIGKILL: etcd's WAL is fsynced, so nothing it acknowledged is lost).
/// So does the end of the thread that started (or last restarted) it,
/// and so the end of the process however it ends (Linux's parent-death
/// signal): no etcd outlives a killed benchmark.
pub struct EtcdServer {
    bin: PathBuf,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    flags: Vec<String>,
    child: Option<Child>,
    scratch: bool,
}

impl EtcdServer {
    /// Start etcd in `dir` (its data in `dir/data`, its log in
    /// `dir/etcd.log`), on the ports it used before if `dir` has run one,
    /// else on free loopback ports, and wait until it is healthy.
    ///
    /// # Errors
    /// [`Error::Remote`] if there is no `etcd` binary (Debian's
    /// `etcd-server` package), it exits or stays unhealthy for 30 s (the
    /// message holds the end of its log); [`Error::Storage`] if `dir`
    /// cannot be made.
    pub fn start(dir: &Path) -> Result<EtcdServer, Error> {
        EtcdServer::start_with(dir, &[])
    }

    /// [`EtcdServer::start`] with more etcd flags (e.g. `--max-txn-ops`,
    /// `--max-request-bytes`), kept for restarts.
    ///
    /// # Errors
    /// As [`EtcdServer::start`].
    pub fn start_with(dir: &Path, flags: &[&str]) -> Result<EtcdServer, Error> {
        let bin = find_etcd()?;
        std::fs::create_dir_all(dir).map_err(|e| Error::storage("create", dir, e))?;
        let remembered = read_ports(dir);
        let tries = if remembered.is_some() { 1 } else { PORT_TRIES };
        let mut last = None;
        for _ in 0..tries {
            let (client_port, peer_port) = match remembered {
                Some(p) => p,
                None => (free_port(dir)?, free_port(dir)?),
            };
            let mut s = EtcdServer {
                bin: bin.clone(),
                dir: dir.to_path_buf(),
                client_port,
                peer_port,
                flags: flags.iter().map(|f| f.to_string()).collect(),
                child: None,
                scratch: false,
            };
            match s.spawn_and_wait() {
                Ok(()) => {
                    let ports = format!("{client_port} {peer_port}\n");
                    let p = dir.join(PORTS_FILE);
                    std::fs::write(&p, ports).map_err(|e| Error::storage("write", &p, e))?;
                    return Ok(s);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("tried at least once"))
    }

    /// The URL clients connect to.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kill it with SIGKILL (a crash: nothing is flushed but what etcd
    /// had synced) and reap it. Nothing happens if it is not running.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kill it if it runs, then start it again on the same directory and
    /// ports, and wait until it is healthy.
    ///
    /// # Errors
    /// As [`EtcdServer::start`] (a port taken meanwhile by another
    /// process shows in the log's end).
    pub fn restart(&mut self) -> Result<(), Error> {
        self.kill();
        self.spawn_and_wait()
    }

    /// Remove its directory when dropped (a benchmark's or a test's).
    pub fn scratch(mut self) -> EtcdServer {
        self.scratch = true;
        self
    }

    fn spawn_and_wait(&mut self) -> Result<(), Error> {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log_path = self.dir.join("etcd.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| Error::storage("open", &log_path, e))?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--name")
            .arg("granary")
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("granary={peer}")])
            .args(["--initial-cluster-state", "new"])
            // One node: elect itself at once after a restart.
            .args(["--heartbeat-interval", "10", "--election-timeout", "100"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .args(["--log-level", "error"])
            .args(&self.flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        die_with_parent(&mut cmd);
        let child = cmd.spawn().map_err(|e| Error::Remote {
            what: "start a local etcd".into(),
            detail: format!("{}: {e}", self.bin.display()),
        })?;
        self.child = Some(child);
        let t0 = Instant::now();
        let failed = |s: &mut EtcdServer, why: String| {
            s.kill();
            Error::Remote {
                what: format!("start a local etcd in {}", s.dir.display()),
                detail: format!("{why}; the end of its log:\n{}", tail(&log_path)),
            }
        };
        while t0.elapsed() < READY_TIMEOUT {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                return Err(failed(self, format!("it exited ({status})")));
            }
            if healthy(self.client_port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(failed(
            self,
            format!("not healthy after {} s", READY_TIMEOUT.as_secs()),
        ))
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
        if self.scratch {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Have `cmd`'s process SIGKILLed when the thread that spawns it ends.
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec, and
    // only makes one async-signal-safe system call (prctl), allocating
    // nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `etcd` on `PATH`, else Debian's `/usr/bin/etcd`.
fn find_etcd() -> Result<PathBuf, Error> {
    find_etcd_in(std::env::var_os("PATH"), Path::new("/usr/bin/etcd"))
}

fn find_etcd_in(path: Option<std::ffi::OsString>, fallback: &Path) -> Result<PathBuf, Error> {
    let on_path: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(&p).map(|d| d.join("etcd")).collect())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([fallback.to_path_buf()])
        .find(|p| p.is_file())
        .ok_or_else(|| Error::Remote {
            what: "start a local etcd".into(),
            detail: format!(
                "no `etcd` binary on PATH or at {}: install Debian's etcd-server package \
                 (apt-get install etcd-server), or connect to a running etcd cluster",
                fallback.display()
            ),
        })
}

/// A loopback port free at the moment (etcd binds it a little later).
fn free_port(dir: &Path) -> Result<u16, Error> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::storage("find a free loopback port for etcd", dir, e))
}

fn read_ports(dir: &Path) -> Option<(u16, u16)> {
    let s = std::fs::read_to_string(dir.join(PORTS_FILE)).ok()?;
    let mut it = s.split_whitespace().map(str::parse::<u16>);
    match (it.next(), it.next()) {
        (Some(Ok(c)), Some(Ok(p))) => Some((c, p)),
        _ => None,
    }
}

/// Whether etcd on `port` answers `GET /health` with `"health":"true"`.
fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}

/// The last lines of etcd's log.
fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_etcd_names_the_package() {
        let e = find_etcd_in(
            Some("/nonexistent-a:/nonexistent-b".into()),
            Path::new("/nonexistent/etcd"),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Remote { .. }));
        assert!(e.to_string().contains("etcd-server"), "{e}");
    }
}
