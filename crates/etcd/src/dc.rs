//! [`EtcdDc`]: Deuteronomy's data component over an etcd cluster.
//!
//! **Calls.** The [`DataComponent`] trait is synchronous and called from
//! many threads at once (runners read; the TC Proxy applies and
//! checkpoints). Each call borrows a *lane* — a current-thread tokio
//! runtime with its own connection to etcd — from a pool, drives its
//! request on the calling thread, and gives it back. Measured here (2
//! cores, etcd on the same machine, 2 threads calling `get`): about 6.3–6.9k
//! gets/s this way, against 4.3–4.5k/s through one shared multi-thread
//! runtime, whose I/O threads add a hop each way (`examples/get_runtimes`).
//!
//! **Apply** (§4.3.2's blind upserts and deletes, in order): only the
//! last operation of a batch on each key is kept (blind writes: the last
//! wins; etcd also refuses a transaction that writes a key twice). The
//! rest are cut into etcd transactions of at most `max_txn_ops`
//! operations and `max_request_bytes` (etcd's `--max-txn-ops`, default
//! 128, and `--max-request-bytes`, default 1.5 MiB), of which up to
//! `max_in_flight` are outstanding at once: after the de-duplication
//! they write disjoint keys, so their order does not matter. `apply`
//! returns once etcd has acknowledged every one (and etcd acknowledges
//! a write once its Raft log entry is committed, which on every member
//! in the quorum means written and fsynced): so a checkpoint needs only
//! record the RSSP.
//!
//! **Failures.** A request etcd did not take (unavailable, no leader,
//! connection refused or reset, too many requests) is tried again with
//! exponential backoff, for up to `retry_for_ms`; then the call fails
//! with [`Error::Remote`], saying for how long and what etcd last said.
//! A request etcd refused (too many operations, too large, out of space)
//! fails at once. A write that gets no answer within `request_timeout_ms`
//! fails at once too, and is not retried: it may still be waiting inside
//! etcd to be proposed, and a retry followed by a newer write of the same
//! key could be overtaken by it. Nothing is reported applied that etcd
//! has not acknowledged, and no read answers from anything but etcd's
//! reply. Reads are linearizable (etcd's default; a serializable read
//! may be stale on a follower).

use std::collections::HashSet;
use std::future::Future;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{
    Client, ConnectOptions, GetOptions, KvClient, SortOrder, SortTarget, Txn, TxnOp,
};
use granary_api::Error;
use granary_protocols::deuteronomy::dc::{DataComponent, Op};
use tokio::runtime::Runtime;

use crate::keys::{decode_value, encode_value, prefix_end, Keys};
use crate::server::EtcdServer;

/// Keys per range request (with values of up to 1 MiB, a page stays
/// under [`DECODE_LIMIT`]).
const RANGE_PAGE: usize = 64;
/// The largest response a lane decodes (tonic's default is 4 MiB; a
/// range page of [`RANGE_PAGE`] values of up to 1 MiB needs more).
const DECODE_LIMIT: usize = 96 << 20;
/// Bytes a transaction's operation costs beyond its key and value
/// (protobuf tags and lengths; generous), and the request's own.
const OP_OVERHEAD: usize = 32;
const TXN_OVERHEAD: usize = 4096;
/// Backoff between attempts: from the first to the cap.
const BACKOFF_FIRST: Duration = Duration::from_millis(5);
const BACKOFF_CAP: Duration = Duration::from_millis(500);

/// How an [`EtcdDc`] reaches etcd and sizes its requests.
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// Client URLs of the cluster's members (`http://host:port`).
    pub endpoints: Vec<String>,
    /// Every key of this DC starts with it (several DCs can share a
    /// cluster under different ones). Must not be empty.
    pub namespace: Vec<u8>,
    /// Operations per etcd transaction: at most the cluster's
    /// `--max-txn-ops` (etcd's default: 128).
    pub max_txn_ops: usize,
    /// Bytes per etcd request: at most the cluster's
    /// `--max-request-bytes` (etcd's default: 1.5 MiB). Keys, values and
    /// their LSNs count, with a margin for framing.
    pub max_request_bytes: usize,
    /// Transactions of one `apply` outstanding at once.
    pub max_in_flight: usize,
    /// How long a call keeps retrying while etcd is unavailable.
    pub retry_for_ms: u64,
    /// How long one request may wait for its answer (a write that waits
    /// longer fails: see the module's notes).
    pub request_timeout_ms: u64,
    /// How long opening a connection may take.
    pub connect_timeout_ms: u64,
    /// Lanes (connections with their runtimes) at most: callers beyond
    /// wait for one.
    pub max_lanes: usize,
    /// Compact etcd's history at each checkpoint (the DC reads only the
    /// newest revision). Turn off on a cluster whose other users read
    /// old revisions.
    pub compact: bool,
}

impl EtcdOptions {
    /// The defaults, for a cluster at `endpoints`.
    pub fn new(endpoints: Vec<String>) -> EtcdOptions {
        EtcdOptions {
            endpoints,
            namespace: b"granary/".to_vec(),
            max_txn_ops: 128,
            max_request_bytes: 1536 << 10,
            max_in_flight: 8,
            retry_for_ms: 10_000,
            request_timeout_ms: 10_000,
            connect_timeout_ms: 1000,
            max_lanes: 64,
            compact: true,
        }
    }

    /// Whether the options make sense.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] saying which does not.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::InvalidOption(m));
        if self.endpoints.is_empty() {
            return bad("etcd: no endpoints".into());
        }
        if let Some(e) = self.endpoints.iter().find(|e| !e.starts_with("http://")) {
            return bad(format!(
                "etcd endpoint {e:?}: expected http://host:port (TLS is not built)"
            ));
        }
        if !self.namespace.iter().any(|&b| b < 0xff) {
            return bad("etcd: the namespace must hold a byte below 0xff".into());
        }
        let largest = granary_api::MAX_KEY_BYTES
            + granary_api::MAX_VALUE_BYTES
            + self.namespace.len()
            + 5
            + 8
            + OP_OVERHEAD
            + TXN_OVERHEAD;
        if self.max_request_bytes < largest {
            return bad(format!(
                "etcd: requests of {} bytes cannot hold the largest record ({largest} bytes \
                 with framing); etcd's --max-request-bytes must allow it too",
                self.max_request_bytes
            ));
        }
        for (n, what) in [
            (self.max_txn_ops, "max_txn_ops"),
            (self.max_in_flight, "max_in_flight"),
            (self.max_lanes, "max_lanes"),
            (self.request_timeout_ms as usize, "request_timeout_ms"),
        ] {
            if n == 0 {
                return bad(format!("etcd: {what} must be at least 1"));
            }
        }
        Ok(())
    }
}

/// A connection to etcd with the runtime that drives it (its background
/// tasks were spawned there, so only `block_on` on it moves them).
struct Lane {
    rt: Runtime,
    kv: KvClient,
    /// Holds the channel's endpoint list open.
    _client: Client,
}

/// The pool of lanes.
struct Lanes {
    idle: Mutex<(Vec<Lane>, usize)>,
    freed: Condvar,
}

/// A borrowed lane, returned to the pool when dropped.
struct Borrowed<'a> {
    lanes: &'a Lanes,
    lane: Option<Lane>,
}

impl std::ops::Deref for Borrowed<'_> {
    type Target = Lane;
    fn deref(&self) -> &Lane {
        self.lane.as_ref().expect("held until dropped")
    }
}

impl Drop for Borrowed<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.lane.take() {
            self.lanes.idle.lock().expect("lanes").0.push(l);
            self.lanes.freed.notify_one();
        }
    }
}

/// What a request's failure means.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// etcd did not take it (or died holding it): try again.
    Unavailable,
    /// etcd refused it: trying again will not help.
    Refused,
}

/// Whether etcd may take `e`'s request if it is sent again.
fn classify(e: &etcd_client::Error) -> Failure {
    use etcd_client::Error as E;
    use tonic::Code;
    match e {
        E::TransportError(_) | E::IoError(_) => Failure::Unavailable,
        E::GRpcStatus(s) => match s.code() {
            // Connection refused or reset, no leader, leader changed, a
            // proposal that timed out inside etcd (it is in the Raft log
            // or dropped: a retry lands after it either way).
            Code::Unavailable => Failure::Unavailable,
            Code::ResourceExhausted if s.message().contains("too many requests") => {
                Failure::Unavailable
            }
            // A connection that broke under a request (the server died):
            // made here from a transport error, which it carries; a status
            // etcd sent carries none.
            Code::Unknown | Code::Cancelled | Code::Internal
                if std::error::Error::source(s).is_some() =>
            {
                Failure::Unavailable
            }
            _ => Failure::Refused,
        },
        _ => Failure::Refused,
    }
}

/// `e` in a line: etcd's code and message, and the cause under a
/// transport failure (tonic's own text repeats itself).
fn describe(e: &etcd_client::Error) -> String {
    let etcd_client::Error::GRpcStatus(s) = e else {
        return e.to_string();
    };
    let mut d = format!("{:?}: {}", s.code(), s.message());
    let mut cause = std::error::Error::source(s);
    let mut root = None;
    while let Some(c) = cause {
        root = Some(c);
        cause = c.source();
    }
    if let Some(r) = root {
        d.push_str(&format!(" ({r})"));
    }
    d
}

/// How calls retry, and what they say when they give up.
#[derive(Clone)]
struct Policy {
    retry_for: Duration,
    request_timeout: Duration,
    endpoints: String,
    retries: Arc<AtomicU64>,
}

impl Policy {
    /// Run `attempt` until it succeeds, etcd refuses it, or etcd has been
    /// unavailable for `retry_for` (see the module's notes). A `write`
    /// that times out is not retried.
    async fn call<T, F, Fut>(&self, what: &str, write: bool, mut attempt: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let t0 = Instant::now();
        let mut delay = BACKOFF_FIRST;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let last = match tokio::time::timeout(self.request_timeout, attempt()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if classify(&e) == Failure::Refused => {
                    return Err(Error::Remote {
                        what: what.into(),
                        detail: format!("etcd at {} refused it: {}", self.endpoints, describe(&e)),
                    })
                }
                Ok(Err(e)) => describe(&e),
                Err(_) if write => {
                    return Err(Error::Remote {
                        what: what.into(),
                        detail: format!(
                            "etcd at {} did not answer within {:.1} s; the write's outcome \
                             is unknown, and it is not retried (a retry could be overtaken \
                             by it)",
                            self.endpoints,
                            self.request_timeout.as_secs_f64()
                        ),
                    })
                }
                Err(_) => format!(
                    "no answer within {:.1} s",
                    self.request_timeout.as_secs_f64()
                ),
            };
            let Some(left) = self
                .retry_for
                .checked_sub(t0.elapsed())
                .filter(|l| !l.is_zero())
            else {
                return Err(Error::Remote {
                    what: what.into(),
                    detail: format!(
                        "etcd at {} was unavailable for {:.1} s ({attempts} attempts); \
                         last: {last}",
                        self.endpoints,
                        t0.elapsed().as_secs_f64(),
                    ),
                });
            };
            self.retries.fetch_add(1, Ordering::Relaxed);
            // The last attempt comes at the end of the budget.
            tokio::time::sleep(delay.min(left)).await;
            delay = (delay * 2).min(BACKOFF_CAP);
        }
    }
}

/// The etcd data component (see the module's notes).
pub struct EtcdDc {
    options: EtcdOptions,
    keys: Keys,
    lanes: Lanes,
    policy: Policy,
    rssp: AtomicU64,
    /// Delete everything under the namespace when dropped.
    scratch: bool,
    /// A local server this DC owns (killed after the DC is done with it).
    server: Option<EtcdServer>,
}

const READ: &str = "read the etcd data component";
const WRITE: &str = "write the etcd data component";

impl EtcdDc {
    /// Connect to the cluster and read the last checkpoint's RSSP.
    ///
    /// # Errors
    /// Invalid options ([`Error::InvalidOption`]); etcd unavailable for
    /// `retry_for_ms` or refusing the read ([`Error::Remote`]).
    pub fn connect(options: EtcdOptions) -> Result<EtcdDc, Error> {
        options.validate()?;
        let dc = EtcdDc {
            keys: Keys::new(&options.namespace),
            lanes: Lanes {
                idle: Mutex::new((Vec::new(), 0)),
                freed: Condvar::new(),
            },
            policy: Policy {
                retry_for: Duration::from_millis(options.retry_for_ms),
                request_timeout: Duration::from_millis(options.request_timeout_ms),
                endpoints: options.endpoints.join(","),
                retries: Arc::new(AtomicU64::new(0)),
            },
            rssp: AtomicU64::new(0),
            scratch: false,
            server: None,
            options,
        };
        let key = dc.keys.rssp();
        let lane = dc.lane()?;
        let got = lane.rt.block_on(dc.policy.call(
            "read the etcd data component's checkpoint",
            false,
            || {
                let (mut kv, key) = (lane.kv.clone(), key.clone());
                async move { kv.get(key, None).await }
            },
        ))?;
        drop(lane);
        if let Some(kv) = got.kvs().first() {
            let rssp = <[u8; 8]>::try_from(kv.value()).map_err(|_| Error::Remote {
                what: "read the etcd data component's checkpoint".into(),
                detail: format!(
                    "its key holds {} bytes, not an 8-byte LSN: not a granary DC's",
                    kv.value().len()
                ),
            })?;
            dc.rssp.store(u64::from_be_bytes(rssp), Ordering::Release);
        }
        Ok(dc)
    }

    /// This DC owns `server`: it is killed when the DC is dropped.
    pub fn owning(mut self, server: EtcdServer) -> EtcdDc {
        self.server = Some(server);
        self
    }

    /// Delete everything under the namespace when dropped (a
    /// benchmark's DC on a cluster that outlives it).
    pub fn scratch(mut self) -> EtcdDc {
        self.scratch = true;
        self
    }

    /// The server it owns, if any.
    pub fn server(&self) -> Option<&EtcdServer> {
        self.server.as_ref()
    }

    /// Whether nothing is stored under its namespace.
    ///
    /// # Errors
    /// As [`DataComponent::get`].
    pub fn is_empty(&self) -> Result<bool, Error> {
        let ns = self.keys.namespace().to_vec();
        let end = prefix_end(&ns);
        let lane = self.lane()?;
        let r = lane.rt.block_on(self.policy.call(READ, false, || {
            let (mut kv, ns) = (lane.kv.clone(), ns.clone());
            let opts = GetOptions::new().with_range(end.clone()).with_count_only();
            async move { kv.get(ns, Some(opts)).await }
        }))?;
        Ok(r.count() == 0)
    }

    /// Requests tried again so far (etcd was unavailable).
    pub fn retries(&self) -> u64 {
        self.policy.retries.load(Ordering::Relaxed)
    }

    /// Its options.
    pub fn options(&self) -> &EtcdOptions {
        &self.options
    }

    /// Borrow a lane, making one if none is idle and the pool is not at
    /// its bound (else wait for one).
    fn lane(&self) -> Result<Borrowed<'_>, Error> {
        let mut g = self.lanes.idle.lock().expect("lanes");
        loop {
            if let Some(l) = g.0.pop() {
                return Ok(Borrowed {
                    lanes: &self.lanes,
                    lane: Some(l),
                });
            }
            if g.1 < self.options.max_lanes {
                g.1 += 1;
                drop(g);
                return match self.new_lane() {
                    Ok(l) => Ok(Borrowed {
                        lanes: &self.lanes,
                        lane: Some(l),
                    }),
                    Err(e) => {
                        self.lanes.idle.lock().expect("lanes").1 -= 1;
                        self.lanes.freed.notify_one();
                        Err(e)
                    }
                };
            }
            g = self.lanes.freed.wait(g).expect("lanes");
        }
    }

    fn new_lane(&self) -> Result<Lane, Error> {
        let fail = |detail: String| Error::Remote {
            what: "connect to etcd".into(),
            detail,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Io)?;
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_millis(self.options.connect_timeout_ms));
        // Connecting is lazy: this fails only on a malformed endpoint.
        let client = rt
            .block_on(Client::connect(&self.options.endpoints, Some(opts)))
            .map_err(|e| fail(format!("{}: {e}", self.policy.endpoints)))?;
        let kv = client.kv_client().max_decoding_message_size(DECODE_LIMIT);
        Ok(Lane {
            rt,
            kv,
            _client: client,
        })
    }

    /// Cut `ops` (one per key) into transactions within the limits.
    fn cut(&self, ops: Vec<(TxnOp, usize)>) -> Vec<Vec<TxnOp>> {
        let budget = self.options.max_request_bytes - TXN_OVERHEAD;
        let mut txns = Vec::new();
        let (mut txn, mut bytes) = (Vec::new(), 0);
        for (op, size) in ops {
            if !txn.is_empty() && (txn.len() == self.options.max_txn_ops || bytes + size > budget) {
                txns.push(std::mem::take(&mut txn));
                bytes = 0;
            }
            txn.push(op);
            bytes += size;
        }
        if !txn.is_empty() {
            txns.push(txn);
        }
        txns
    }
}

/// Send one transaction of `apply`'s, retrying as [`Policy::call`] does.
async fn send(policy: Policy, kv: KvClient, ops: Vec<TxnOp>) -> Result<(), Error> {
    let r = policy
        .call(WRITE, true, || {
            let (mut kv, txn) = (kv.clone(), Txn::new().and_then(ops.clone()));
            async move { kv.txn(txn).await }
        })
        .await?;
    match r.succeeded() {
        true => Ok(()),
        false => Err(Error::Remote {
            what: WRITE.into(),
            detail: "etcd did not apply an unconditional transaction".into(),
        }),
    }
}

impl DataComponent for EtcdDc {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn get(&self, table: u32, key: &[u8], out: &mut Vec<u8>) -> Result<Option<u64>, Error> {
        let k = self.keys.data(table, key);
        let lane = self.lane()?;
        let r = lane.rt.block_on(self.policy.call(READ, false, || {
            let (mut kv, k) = (lane.kv.clone(), k.clone());
            async move { kv.get(k, None).await }
        }))?;
        let Some(kv) = r.kvs().first() else {
            return Ok(None);
        };
        let (lsn, value) = decode_value(kv.value()).ok_or_else(|| malformed(kv.value()))?;
        out.clear();
        out.extend_from_slice(value);
        Ok(Some(lsn))
    }

    fn apply(&self, ops: &[Op<'_>]) -> Result<(), Error> {
        if ops.is_empty() {
            return Ok(());
        }
        // The last operation on each key wins (see the module's notes).
        let mut seen: HashSet<(u32, &[u8])> = HashSet::with_capacity(ops.len());
        let mut last = Vec::with_capacity(ops.len());
        for op in ops.iter().rev() {
            if !seen.insert((op.table, op.key)) {
                continue;
            }
            let k = self.keys.data(op.table, op.key);
            last.push(match op.value {
                Some(v) => {
                    let size = k.len() + 8 + v.len() + OP_OVERHEAD;
                    (TxnOp::put(k, encode_value(op.lsn, v), None), size)
                }
                None => {
                    let size = k.len() + OP_OVERHEAD;
                    (TxnOp::delete(k, None), size)
                }
            });
        }
        let txns = self.cut(last);
        let lane = self.lane()?;
        let max = self.options.max_in_flight;
        lane.rt.block_on(async {
            let mut in_flight = tokio::task::JoinSet::new();
            let mut txns = txns.into_iter();
            let mut first: Option<Error> = None;
            loop {
                // After a failure nothing more is sent, but what is in
                // flight is waited for: no write of this batch outlives
                // the call.
                while in_flight.len() < max && first.is_none() {
                    let Some(t) = txns.next() else { break };
                    in_flight.spawn(send(self.policy.clone(), lane.kv.clone(), t));
                }
                match in_flight.join_next().await {
                    None => break,
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => {
                        first.get_or_insert(e);
                    }
                    Some(Err(e)) => std::panic::resume_unwind(e.into_panic()),
                }
            }
            first.map_or(Ok(()), Err)
        })
    }

    fn range(
        &self,
        table: u32,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let Some((mut start, mut end)) = self.keys.range(table, lo, hi) else {
            return Ok(());
        };
        let lane = self.lane()?;
        let mut left = limit;
        while left > 0 {
            let page = left.min(RANGE_PAGE);
            let r = lane.rt.block_on(self.policy.call(READ, false, || {
                let mut opts = GetOptions::new()
                    .with_range(end.clone())
                    .with_limit(page as i64);
                if reverse {
                    // XXX: etcd 3.4 reads the whole range to sort it,
                    // then cuts it to the limit: a reverse page costs the
                    // whole range at the server.
                    opts = opts.with_sort(SortTarget::Key, SortOrder::Descend);
                }
                let (mut kv, start) = (lane.kv.clone(), start.clone());
                async move { kv.get(start, Some(opts)).await }
            }))?;
            let kvs = r.kvs();
            for kv in kvs {
                let (_, value) = decode_value(kv.value()).ok_or_else(|| malformed(kv.value()))?;
                if !f(self.keys.user_key(kv.key()), value) {
                    return Ok(());
                }
            }
            left -= kvs.len();
            let Some(last) = kvs.last() else { break };
            if kvs.len() < page || !r.more() {
                break;
            }
            // The next page starts past the last key seen.
            match reverse {
                false => {
                    start = last.key().to_vec();
                    start.push(0);
                }
                true => end = last.key().to_vec(),
            }
            if start >= end {
                break;
            }
        }
        Ok(())
    }

    fn checkpoint(&self, rssp: u64) -> Result<(), Error> {
        // Everything applied was acknowledged, so is committed in etcd's
        // Raft log and fsynced: recording the RSSP is all there is to do.
        let key = self.keys.rssp();
        let lane = self.lane()?;
        let what = "checkpoint the etcd data component";
        let r = lane.rt.block_on(self.policy.call(what, true, || {
            let (mut kv, key) = (lane.kv.clone(), key.clone());
            async move { kv.put(key, rssp.to_be_bytes(), None).await }
        }))?;
        self.rssp.fetch_max(rssp, Ordering::AcqRel);
        if let (true, Some(h)) = (self.options.compact, r.header()) {
            // Old revisions are never read: let etcd reclaim them. A
            // failure here loses nothing (the next checkpoint compacts).
            let rev = h.revision();
            let _ = lane.rt.block_on(self.policy.call(what, false, || {
                let mut kv = lane.kv.clone();
                async move { kv.compact(rev, None).await }
            }));
        }
        Ok(())
    }

    fn checkpointed(&self) -> u64 {
        self.rssp.load(Ordering::Acquire)
    }

    fn persistent(&self) -> bool {
        true
    }
}

fn malformed(v: &[u8]) -> Error {
    Error::Remote {
        what: READ.into(),
        detail: format!(
            "a value of {} bytes is too short to hold its LSN: not written by a granary DC",
            v.len()
        ),
    }
}

impl Drop for EtcdDc {
    fn drop(&mut self) {
        if !self.scratch {
            return;
        }
        // Best effort, and briefly: a benchmark's data is of no use.
        self.policy.retry_for = Duration::from_millis(500);
        let ns = self.keys.namespace().to_vec();
        let end = prefix_end(&ns);
        if let Ok(lane) = self.lane() {
            let _ = lane.rt.block_on(self.policy.call(WRITE, true, || {
                let (mut kv, ns) = (lane.kv.clone(), ns.clone());
                let opts = etcd_client::DeleteOptions::new().with_range(end.clone());
                async move { kv.delete(ns, Some(opts)).await }
            }));
        }
    }
}
