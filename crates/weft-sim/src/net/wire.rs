//! The simulated network: a [`weft_rpc::Wire`] that carries every request of the faulted
//! clients to the servers, and every callback back, with the faults a seed chooses.
//!
//! Per attempt of a request of a faulted client (the third, checking client and the
//! servers' own requests to each other go through untouched, on connections that never
//! break), in this order:
//!
//! * **paused**: the client is stopped (a process stopped, a VM frozen): the message waits
//!   at the client until the pause ends, callbacks to it too;
//! * **partitioned**: no connection can be made: the attempt fails after a moment (the Peer
//!   resends with its backoff until the partition heals or its deadline passes); callbacks
//!   to it are lost;
//! * then one fault, or none: the request **dropped** (its connection breaks before the
//!   server sees it); the **reply lost** after the request ran (the connection breaks
//!   after); **duplicated** (the server gets it twice on the same connection); **held at
//!   the server while its connection breaks** (the sender resends on a new connection, the
//!   held copy arrives up to [`HELD_MS_MAX`] later on the old one); each message is also
//!   delayed by up to [`DELAY_MS_MAX`], which reorders concurrent ones.
//!
//! Between the servers, a replica's Raft messages ([`SimWire::isolate`]) are cut both ways
//! while it is partitioned from the others or killed: the wire reads the sender of each from
//! the vote it carries (`weft_raft::network::sender`), since a request between servers names
//! no sender of its own. Other server-to-server requests (registration with the MGS, object
//! creation on the OSTs) go through untouched.
//!
//! Every delivery runs as a task of its own, so a Peer that gives up never cancels a request
//! halfway through the server, as over TCP.
//!
//! The clock is tokio's, paused: it jumps to the next timer whenever the runtime has nothing
//! to do. The MDS commits on a thread of its own, which that rule does not see, so a delivery
//! waiting for a commit would let time jump (to a callback's timeout, say). Each delivery is
//! therefore kept busy ([`Busy`]) for up to [`BUSY_REAL_MS_MAX`] of real time per step, long
//! enough for a commit: time stands still meanwhile. A delivery that waits longer waits for
//! time itself (a lock held by a paused client), and lets it move. On a real clock
//! ([`SimWire::on_real_clock`]) nothing needs holding still, and deliveries are not kept busy.

use crate::rng::Rng;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use weft_proto::lock::{CallbackAnswer, CallbackRequest};
use weft_proto::msg::{Reply, Request, RequestBody};
use weft_proto::{WeftError, WeftResult};
use weft_rpc::{CallbackHandler, ConnectionState, Endpoint, Wire};

/// Longest delay of one message on its way.
pub const DELAY_MS_MAX: u64 = 5;
/// Longest a held copy of a request arrives after its connection broke.
pub const HELD_MS_MAX: u64 = 3_000;
/// How long an attempt to reach a partitioned client or server takes to fail.
pub const PARTITION_REFUSE_MS: u64 = 50;
/// Real time a delivery keeps the clock still while it waits, per step (see the module docs).
pub const BUSY_REAL_MS_MAX: u64 = 2;
/// Per attempt, the chance (in thousandths) of each fault.
const DROP_PER_MILLE: u64 = 25;
const REPLY_LOST_PER_MILLE: u64 = 25;
const DUPLICATE_PER_MILLE: u64 = 25;
const HELD_PER_MILLE: u64 = 25;

/// What the wire did, for the summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub requests: u64,
    pub resends: u64,
    pub callbacks: u64,
    pub dropped: u64,
    pub replies_lost: u64,
    pub duplicated: u64,
    pub held: u64,
    /// Held copies that ran when they arrived (the connection check let them through).
    pub held_executed_late: u64,
    pub partitions: u64,
    pub refused_by_partition: u64,
    pub pauses: u64,
    pub held_by_pause: u64,
    /// Raft messages cut because their sender or receiver was isolated.
    pub raft_cut: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.requests += o.requests;
        self.resends += o.resends;
        self.callbacks += o.callbacks;
        self.dropped += o.dropped;
        self.replies_lost += o.replies_lost;
        self.duplicated += o.duplicated;
        self.held += o.held;
        self.held_executed_late += o.held_executed_late;
        self.partitions += o.partitions;
        self.refused_by_partition += o.refused_by_partition;
        self.pauses += o.pauses;
        self.held_by_pause += o.held_by_pause;
        self.raft_cut += o.raft_cut;
    }
}

enum Fault {
    None,
    Drop,
    ReplyLost,
    Duplicate,
    Held(Duration),
}

#[derive(Default)]
struct State {
    counts: Counts,
    /// The current connection of each (client id, server address).
    connections: HashMap<(u64, String), Arc<ConnectionState>>,
    /// Requests seen, by (client id, request id): a second attempt is a resend.
    seen: HashSet<(u64, u64, &'static str)>,
    partitioned_until: HashMap<u64, Instant>,
    paused_until: HashMap<u64, Instant>,
    /// Client ids no fault touches (the checking client).
    quiet: HashSet<u64>,
    /// Names of client ids, for the log.
    names: HashMap<u64, String>,
    /// The address of each replica of the replicated groups, by its id in its group.
    replicas: HashMap<u64, String>,
    /// Server addresses whose Raft messages are cut both ways (partitioned or killed).
    isolated: HashSet<String>,
}

pub struct Inner {
    rng: Mutex<Rng>,
    state: Mutex<State>,
    /// Deliveries of the faulted clients at a server now, held copies not counted.
    in_flight: AtomicUsize,
    held_in_flight: AtomicUsize,
    log: Mutex<String>,
    started: Instant,
    next_event: AtomicU64,
    /// Whether deliveries are kept busy to hold the paused clock still (module docs).
    keep_busy: bool,
}

/// The simulated network; clone it to hand it to a [`weft_rpc::Network`] and keep driving it.
#[derive(Clone)]
pub struct SimWire {
    inner: Arc<Inner>,
}

impl SimWire {
    /// A wire on tokio's paused clock: deliveries hold it still while they wait (module docs).
    pub fn new(seed: u64) -> SimWire {
        SimWire::make(seed, true)
    }

    /// A wire on a real clock (a simulation whose servers measure time with both clocks,
    /// as a replicated MDT's lease does): deliveries are not kept busy.
    pub fn on_real_clock(seed: u64) -> SimWire {
        SimWire::make(seed, false)
    }

    fn make(seed: u64, keep_busy: bool) -> SimWire {
        SimWire {
            inner: Arc::new(Inner {
                rng: Mutex::new(Rng(seed ^ 0x5eed_0fe7)),
                state: Mutex::default(),
                in_flight: AtomicUsize::new(0),
                held_in_flight: AtomicUsize::new(0),
                log: Mutex::default(),
                started: Instant::now(),
                next_event: AtomicU64::new(0),
                keep_busy,
            }),
        }
    }

    /// The checking client (and any other `id` given): no fault touches it.
    pub fn quiet(&self, id: u64) {
        self.inner.state().quiet.insert(id);
    }

    pub fn name(&self, id: u64, name: &str) {
        self.inner.state().names.insert(id, name.to_string());
    }

    /// Cuts `id` off every server for `period`.
    pub fn partition(&self, id: u64, period: Duration) {
        let mut st = self.inner.state();
        st.counts.partitions += 1;
        st.partitioned_until.insert(id, Instant::now() + period);
        drop(st);
        self.inner.note(format!("partition {} for {} ms", self.inner.who(id), period.as_millis()));
    }

    /// Stops `id` for `period`: its messages, both ways, wait until then.
    pub fn pause(&self, id: u64, period: Duration) {
        let mut st = self.inner.state();
        st.counts.pauses += 1;
        st.paused_until.insert(id, Instant::now() + period);
        drop(st);
        self.inner.note(format!("pause {} for {} ms", self.inner.who(id), period.as_millis()));
    }

    /// The replicas of the replicated groups: id in the group -> server address (every group
    /// of the simulation numbers its replicas alike, as the config does).
    pub fn replicas(&self, replicas: &[String]) {
        self.inner.state().replicas = replicas.iter().enumerate().map(|(i, a)| (i as u64 + 1, a.clone())).collect();
    }

    /// Cuts every Raft message from and to the server at `address` (a partition of it from
    /// the other replicas, or its death), until [`SimWire::rejoin`].
    pub fn isolate(&self, address: &str) {
        self.inner.state().isolated.insert(address.to_string());
    }

    pub fn rejoin(&self, address: &str) {
        self.inner.state().isolated.remove(address);
    }

    pub fn counts(&self) -> Counts {
        self.inner.state().counts
    }

    /// Deliveries of the faulted clients at the servers now (held copies not counted).
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::Acquire)
    }

    /// Held copies not yet arrived.
    pub fn held_in_flight(&self) -> usize {
        self.inner.held_in_flight.load(Ordering::Acquire)
    }

    /// Notes a line in the log (with the time since the start).
    pub fn note(&self, line: String) {
        self.inner.note(line);
    }

    pub fn log(&self) -> String {
        self.inner.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, line: String) {
        let at = self.started.elapsed().as_millis();
        let n = self.next_event.fetch_add(1, Ordering::Relaxed);
        let _ = writeln!(self.log.lock().unwrap_or_else(|p| p.into_inner()), "{n:5} {at:7} ms  {line}");
    }

    fn who(&self, id: u64) -> String {
        match self.state().names.get(&id) {
            Some(n) => n.clone(),
            None => format!("{id:016x}"),
        }
    }

    fn faulted(&self, id: u64) -> bool {
        id != 0 && !self.state().quiet.contains(&id)
    }

    fn paused_until(&self, id: u64) -> Option<Instant> {
        self.state().paused_until.get(&id).copied().filter(|t| *t > Instant::now())
    }

    fn partitioned(&self, id: u64) -> bool {
        self.state().partitioned_until.get(&id).is_some_and(|t| *t > Instant::now())
    }

    /// Whether `request` to `address` is a Raft message cut by an isolation.
    fn raft_cut(&self, address: &str, request: &Request) -> bool {
        let RequestBody::Raft { op, .. } = &request.body else { return false };
        let st = self.state();
        if st.isolated.is_empty() {
            return false;
        }
        if st.isolated.contains(address) {
            return true;
        }
        weft_raft::network::sender(op).and_then(|id| st.replicas.get(&id)).is_some_and(|a| st.isolated.contains(a))
    }

    fn delay(&self) -> Duration {
        Duration::from_millis(self.rng.lock().unwrap_or_else(|p| p.into_inner()).between(0, DELAY_MS_MAX))
    }

    fn roll(&self) -> Fault {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let r = rng.below(1000) as u64;
        let mut edge = DROP_PER_MILLE;
        if r < edge {
            return Fault::Drop;
        }
        edge += REPLY_LOST_PER_MILLE;
        if r < edge {
            return Fault::ReplyLost;
        }
        edge += DUPLICATE_PER_MILLE;
        if r < edge {
            return Fault::Duplicate;
        }
        edge += HELD_PER_MILLE;
        if r < edge {
            return Fault::Held(Duration::from_millis(rng.between(100, HELD_MS_MAX)));
        }
        Fault::None
    }

    fn connection(&self, id: u64, address: &str) -> Arc<ConnectionState> {
        self.state().connections.entry((id, address.to_string())).or_default().clone()
    }

    /// Breaks `conn` (if it is still the current one, a new one replaces it).
    fn break_connection(&self, id: u64, address: &str, conn: &Arc<ConnectionState>) {
        conn.close();
        let mut st = self.state();
        let key = (id, address.to_string());
        if st.connections.get(&key).is_some_and(|c| Arc::ptr_eq(c, conn)) {
            st.connections.remove(&key);
        }
    }

    /// Runs `request` at `server` as a task of its own (a Peer giving up does not cancel it).
    fn deliver(
        self: &Arc<Self>,
        server: &Arc<dyn Endpoint>,
        request: Request,
        bulk: Bytes,
        conn: Arc<ConnectionState>,
    ) -> tokio::task::JoinHandle<Option<(Reply, Bytes)>> {
        let counted = self.faulted(request.header.client_id);
        if counted {
            self.in_flight.fetch_add(1, Ordering::AcqRel);
        }
        let inner = self.clone();
        let server = server.clone();
        let keep_busy = self.keep_busy;
        tokio::spawn(async move {
            let answer = Busy::new(server.deliver(request, bulk, conn), keep_busy).await;
            if counted {
                inner.in_flight.fetch_sub(1, Ordering::AcqRel);
            }
            answer
        })
    }

    async fn request(
        self: Arc<Self>,
        address: String,
        request: Request,
        bulk: Bytes,
        server: Arc<dyn Endpoint>,
    ) -> WeftResult<(Reply, Bytes)> {
        let id = request.header.client_id;
        if !self.faulted(id) {
            if self.raft_cut(&address, &request) {
                self.state().counts.raft_cut += 1;
                tokio::time::sleep(Duration::from_millis(PARTITION_REFUSE_MS)).await;
                return Err(WeftError::io(format!("cannot connect to {address}: partitioned")));
            }
            let cut_after = matches!(request.body, RequestBody::Raft { .. }).then(|| request.clone());
            let conn = self.connection(id, &address);
            let answer = self.deliver(&server, request, bulk, conn).await;
            // An isolation that began meanwhile loses the answer on its way back.
            if cut_after.is_some_and(|r| self.raft_cut(&address, &r)) {
                self.state().counts.raft_cut += 1;
                return Err(WeftError::io(format!("{address}: connection reset (partitioned)")));
            }
            return answer.ok().flatten().ok_or_else(|| WeftError::io("the server dropped the request"));
        }
        let opcode = request.body.opcode_name();
        {
            let mut st = self.state();
            st.counts.requests += 1;
            if request.header.request_id != 0 && !st.seen.insert((id, request.header.request_id, opcode)) {
                st.counts.resends += 1;
            }
        }
        if let Some(until) = self.paused_until(id) {
            self.state().counts.held_by_pause += 1;
            tokio::time::sleep_until(until).await;
        }
        if self.partitioned(id) {
            self.state().counts.refused_by_partition += 1;
            tokio::time::sleep(Duration::from_millis(PARTITION_REFUSE_MS)).await;
            return Err(WeftError::io(format!("cannot connect to {address}: partitioned")));
        }
        let conn = self.connection(id, &address);
        let fault = self.roll();
        tokio::time::sleep(self.delay()).await;
        let request_id = request.header.request_id;
        let who = || format!("{} {opcode} #{request_id}", self.who(id));
        match fault {
            Fault::None => {
                let answer = self.deliver(&server, request, bulk, conn).await.ok().flatten();
                tokio::time::sleep(self.delay()).await;
                answer.ok_or_else(|| WeftError::io(format!("{address}: connection closed before the reply")))
            }
            Fault::Drop => {
                self.state().counts.dropped += 1;
                self.note(format!("drop {}", who()));
                self.break_connection(id, &address, &conn);
                Err(WeftError::io(format!("{address}: connection reset (request lost)")))
            }
            Fault::ReplyLost => {
                self.state().counts.replies_lost += 1;
                let ran = self.deliver(&server, request.clone(), bulk, conn.clone()).await.ok().flatten().is_some();
                self.note(format!("lose the reply of {} (ran: {ran})", who()));
                self.break_connection(id, &address, &conn);
                Err(WeftError::io(format!("{address}: connection reset (reply lost)")))
            }
            Fault::Duplicate => {
                self.state().counts.duplicated += 1;
                self.note(format!("duplicate {}", who()));
                let first = self.deliver(&server, request.clone(), bulk.clone(), conn.clone());
                tokio::time::sleep(self.delay()).await;
                let second = self.deliver(&server, request, bulk, conn);
                let answer = first.await.ok().flatten();
                // The second answer is read and dropped, as a client drops a reply nobody waits for.
                drop(second);
                answer.ok_or_else(|| WeftError::io(format!("{address}: connection closed before the reply")))
            }
            Fault::Held(after) => {
                self.state().counts.held += 1;
                self.note(format!("hold {} at the server for {} ms; its connection breaks", who(), after.as_millis()));
                self.held_in_flight.fetch_add(1, Ordering::AcqRel);
                let inner = self.clone();
                let (held_conn, held_server) = (conn.clone(), server.clone());
                let (held_request, held_bulk) = (request, bulk);
                let name = who();
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let ran = Busy::new(held_server.deliver(held_request, held_bulk, held_conn), inner.keep_busy)
                        .await
                        .is_some();
                    if ran {
                        inner.state().counts.held_executed_late += 1;
                    }
                    inner.note(format!("the held copy of {name} arrives: {}", if ran { "RAN" } else { "dropped" }));
                    inner.held_in_flight.fetch_sub(1, Ordering::AcqRel);
                });
                tokio::time::sleep(self.delay()).await;
                self.break_connection(id, &address, &conn);
                Err(WeftError::io(format!("{address}: connection reset (request held)")))
            }
        }
    }

    async fn callback(
        self: Arc<Self>,
        client_id: u64,
        callback: CallbackRequest,
        handler: Arc<dyn CallbackHandler>,
    ) -> Option<WeftResult<CallbackAnswer>> {
        if self.faulted(client_id) {
            self.state().counts.callbacks += 1;
            if let Some(until) = self.paused_until(client_id) {
                self.state().counts.held_by_pause += 1;
                tokio::time::sleep_until(until).await;
            }
            if self.partitioned(client_id) {
                self.state().counts.refused_by_partition += 1;
                tokio::time::sleep(Duration::from_millis(PARTITION_REFUSE_MS)).await;
                return None;
            }
        }
        tokio::time::sleep(self.delay()).await;
        let answer = handler.handle(callback).await;
        tokio::time::sleep(self.delay()).await;
        Some(answer)
    }
}

impl Wire for SimWire {
    fn request(
        &self,
        address: &str,
        request: Request,
        bulk: Bytes,
        server: Arc<dyn Endpoint>,
    ) -> BoxFuture<'static, WeftResult<(Reply, Bytes)>> {
        Box::pin(self.inner.clone().request(address.to_string(), request, bulk, server))
    }

    fn callback(
        &self,
        client_id: u64,
        callback: CallbackRequest,
        handler: Arc<dyn CallbackHandler>,
    ) -> BoxFuture<'static, Option<WeftResult<CallbackAnswer>>> {
        Box::pin(self.inner.clone().callback(client_id, callback, handler))
    }
}

/// A future kept busy (woken again at once) while it waits, for up to [`BUSY_REAL_MS_MAX`] of
/// real time after each real wake-up: the paused clock stands still meanwhile (see the
/// module docs).
struct Busy<F> {
    inner: std::pin::Pin<Box<F>>,
    /// When the current step began (real time), while the future is kept busy.
    since: Option<std::time::Instant>,
    /// False on a real clock: a plain future.
    keep_busy: bool,
}

impl<F: std::future::Future> Busy<F> {
    fn new(inner: F, keep_busy: bool) -> Busy<F> {
        Busy { inner: Box::pin(inner), since: None, keep_busy }
    }
}

impl<F: std::future::Future> std::future::Future for Busy<F> {
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        if let std::task::Poll::Ready(v) = self.inner.as_mut().poll(cx) {
            return std::task::Poll::Ready(v);
        }
        if !self.keep_busy {
            return std::task::Poll::Pending;
        }
        let now = std::time::Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) < Duration::from_millis(BUSY_REAL_MS_MAX) {
            cx.waker().wake_by_ref();
        } else {
            // Waiting for time itself: the next poll comes from a real wake-up, a new step.
            self.since = None;
        }
        std::task::Poll::Pending
    }
}
