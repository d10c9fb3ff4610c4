//! The server's view of its clients (Lustre's exports): how to reach each client for a
//! callback, and which clients were evicted.
//!
//! * **Routes.** A client is known by the `client_id` of its requests (random per client
//!   instance; 0 is anonymous and never routed). The TCP connection that most recently carried
//!   a request with that id is the client's route, until that connection closes. A
//!   [`Peer`](crate::Peer) with callbacks pings right after connecting, so a client that sends
//!   nothing else is reachable too. A client of the server's [`Network`](crate::Network) that
//!   registered its handler there ([`crate::Network::register_client`]) is reached by a direct
//!   call, or through the network's [`Wire`](crate::Wire), when it has no TCP route.
//! * **Callbacks.** [`Exports::callback`] sends a [`CallbackRequest`] in a Callback frame
//!   (xids of the server's own, matched to CallbackReply frames by the connection loop) and
//!   waits for the answer. It waits for a route when there is none yet, and sends again on a
//!   new route when the connection dies before the answer, all within one timeout: the lock
//!   manager evicts a client that does not answer in time.
//! * **Eviction.** [`Exports::evict`] remembers the client id (the most recent
//!   [`EVICTED_REMEMBERED_MAX`]) and forgets its route. The server pipeline then answers every
//!   request of that client except Ping with [`ErrorCode::Evicted`], without executing it; the
//!   client must come back as a new client instance (a new id).

use crate::callback::CallbackHandler;
use crate::clients::Clients;
use crate::frame::write_frame;
use crate::limits::{EVICTED_REMEMBERED_MAX, ROUTE_POLL_MS};
use crate::secure::{AuthCounters, ConnWriter};
use bytes::Bytes;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use weft_proto::lock::{CallbackAnswer, CallbackRequest};
use weft_proto::wire::{encode_message, FrameKind};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The link id of in-process callbacks.
const LOCAL_LINK: u64 = 0;

/// The write half of a server connection, shared by the replies and the callbacks on it.
pub(crate) type ConnectionWriter = Arc<tokio::sync::Mutex<ConnWriter>>;

/// One TCP connection of the server, as a way to reach the clients whose requests it carries.
pub(crate) struct Link {
    id: u64,
    writer: ConnectionWriter,
    closed: AtomicBool,
    /// The client ids this link was the route of at some point.
    clients: Mutex<HashSet<u64>>,
}

impl Link {
    async fn send(&self, xid: u64, msg: &[u8]) -> WeftResult<()> {
        let mut w = self.writer.lock().await;
        write_frame(&mut *w, FrameKind::Callback, xid, msg, &Bytes::new()).await
    }
}

/// How one attempt to deliver a callback ended.
enum Outcome {
    /// The client answered (an `Err` is the client's own).
    Answer(WeftResult<CallbackAnswer>),
    /// The connection died before the answer: send again on the next route.
    Lost,
    /// The client was evicted meanwhile.
    Evicted(WeftError),
}

struct Pending {
    client_id: u64,
    link: u64,
    tx: oneshot::Sender<Outcome>,
}

#[derive(Default)]
struct State {
    routes: HashMap<u64, Arc<Link>>,
    /// Evicted client ids and why, with their order of eviction to forget the oldest.
    evicted: HashMap<u64, String>,
    evicted_order: VecDeque<u64>,
}

enum Route {
    Tcp(Arc<Link>),
    Local(Arc<dyn CallbackHandler>, Arc<Clients>),
}

/// The clients of one server: routes for callbacks, and evictions. Shared by the
/// [`Server`](crate::Server) (which maintains the routes and enforces evictions) and whatever
/// calls clients back (the lock manager); see the [module docs](self).
pub struct Exports {
    state: RwLock<State>,
    /// Set at the first eviction: until then the pipeline's check costs one load.
    any_evicted: AtomicBool,
    /// Callbacks sent and not answered yet, by xid.
    pending: Mutex<HashMap<u64, Pending>>,
    next_xid: AtomicU64,
    next_link: AtomicU64,
    /// Woken when a route appears or a client is evicted.
    changed: Notify,
    /// Clients evicted since the server started (for metrics).
    /// Clients evicted since the server started; watched by [`Exports::watch_evictions`].
    evicted_count: tokio::sync::watch::Sender<u64>,
    /// The clients of the server's network, called back when no TCP connection reaches
    /// them; None for a server that reaches its clients over TCP only.
    clients: Option<Arc<Clients>>,
    /// Connections and frames refused for want of the shared key's proof.
    auth: AuthCounters,
}

impl Default for Exports {
    fn default() -> Self {
        Exports::new()
    }
}

impl std::fmt::Debug for Exports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("Exports")
            .field("routes", &state.routes.len())
            .field("evicted", &state.evicted.len())
            .field("pending", &self.pending.lock().unwrap_or_else(|p| p.into_inner()).len())
            .finish()
    }
}

/// Removes a callback's pending entry when its waiter stops waiting, however it stops.
struct PendingGuard<'a> {
    exports: &'a Exports,
    xid: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.exports.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.xid);
    }
}

impl Exports {
    /// The clients of a server that reaches them over TCP only.
    pub fn new() -> Exports {
        Exports::make(None)
    }

    /// The clients of a server of a [`Network`](crate::Network): those registered in its
    /// `clients` ([`Network::clients`](crate::Network::clients)) are called back without TCP.
    pub fn with_clients(clients: Arc<Clients>) -> Exports {
        Exports::make(Some(clients))
    }

    fn make(clients: Option<Arc<Clients>>) -> Exports {
        Exports {
            state: RwLock::new(State::default()),
            any_evicted: AtomicBool::new(false),
            pending: Mutex::new(HashMap::new()),
            next_xid: AtomicU64::new(1),
            next_link: AtomicU64::new(LOCAL_LINK + 1),
            changed: Notify::new(),
            evicted_count: tokio::sync::watch::Sender::new(0),
            clients,
            auth: AuthCounters::default(),
        }
    }

    /// Connections and frames this server refused for want of the shared key's proof.
    pub fn auth(&self) -> &AuthCounters {
        &self.auth
    }

    /// Clients evicted since the server started.
    pub fn evictions(&self) -> u64 {
        *self.evicted_count.borrow()
    }

    /// Learns each eviction: the count of clients evicted since the start moves (see
    /// [`Exports::evicted_last`] for which).
    pub fn watch_evictions(&self) -> tokio::sync::watch::Receiver<u64> {
        self.evicted_count.subscribe()
    }

    /// The last `count` clients evicted (at most the [`EVICTED_REMEMBERED_MAX`] remembered),
    /// oldest first.
    pub fn evicted_last(&self, count: usize) -> Vec<u64> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let skip = state.evicted_order.len().saturating_sub(count);
        state.evicted_order.iter().skip(skip).copied().collect()
    }

    /// Clients with a route (connected, or in this process) now.
    pub fn clients(&self) -> usize {
        self.state.read().unwrap_or_else(|p| p.into_inner()).routes.len()
    }

    /// Calls `client_id` back and returns its answer (an `Err` the client answered is
    /// returned as is). Waits for a route to the client if there is none yet, and sends again
    /// on a new route if the connection dies before the answer; after `timeout` in all, fails
    /// with [`ErrorCode::TimedOut`]. Fails at once with [`ErrorCode::Evicted`] for an evicted
    /// client (also when it is evicted while the callback waits), and with
    /// [`ErrorCode::Invalid`] for the anonymous client id 0.
    pub async fn callback(
        &self,
        client_id: u64,
        callback: CallbackRequest,
        timeout: Duration,
    ) -> WeftResult<CallbackAnswer> {
        if client_id == 0 {
            return Err(WeftError::invalid("the anonymous client (id 0) cannot be called back"));
        }
        // Counted in slices: a monotonic clock that jumps ahead does not evict every client
        // a callback waits for at once (crate::budget).
        let mut budget = crate::budget::Budget::new(timeout);
        let mut msg: Option<Bytes> = None;
        let mut attempts = 0u32;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(e) = self.eviction_error(client_id) {
                return Err(e);
            }
            let route = self.route(client_id);
            let Some(route) = route else {
                if budget.is_spent() {
                    let state = if attempts == 0 { "was never reachable" } else { "lost its connection" };
                    return Err(timed_out(client_id, timeout, state));
                }
                let poll = tokio::time::sleep(Duration::from_millis(ROUTE_POLL_MS));
                budget
                    .run(async {
                        tokio::select! {
                            _ = &mut changed => {}
                            _ = poll => {}
                        }
                    })
                    .await;
                continue;
            };
            attempts += 1;
            let (tx, mut rx) = oneshot::channel();
            let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
            let link_id = match &route {
                Route::Tcp(link) => link.id,
                Route::Local(..) => LOCAL_LINK,
            };
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(xid, Pending { client_id, link: link_id, tx });
            let _guard = PendingGuard { exports: self, xid };
            let attempt = async {
                match route {
                    Route::Tcp(link) => {
                        if link.closed.load(Ordering::SeqCst) {
                            // Closed after the route was looked up: close_link may have
                            // missed this callback's entry.
                            return Ok(Outcome::Lost);
                        }
                        let msg = match &msg {
                            Some(m) => m.clone(),
                            None => msg.insert(Bytes::from(encode_message(&callback)?)).clone(),
                        };
                        // Written by a task of its own: a waiter that times out must not
                        // leave half a frame on the connection.
                        let writer = link.clone();
                        let written = tokio::spawn(async move { writer.send(xid, &msg).await }).await;
                        if !matches!(written, Ok(Ok(()))) {
                            self.close_link(&link);
                        }
                        Ok(rx.await.unwrap_or(Outcome::Lost))
                    }
                    Route::Local(handler, clients) => {
                        // Its own task too, as on a remote client: giving up does not cancel it.
                        let task = tokio::spawn(clients.call(client_id, handler, callback.clone()));
                        let outcome = tokio::select! {
                            o = &mut rx => o.unwrap_or(Outcome::Lost),
                            r = task => match r {
                                Ok(Some(answer)) => Outcome::Answer(answer),
                                Ok(None) => Outcome::Lost,
                                Err(e) => Outcome::Answer(Err(WeftError::io(format!(
                                    "the callback handler of client {client_id:016x} failed: {e}"
                                )))),
                            },
                        };
                        if matches!(outcome, Outcome::Lost) {
                            // A wire lost it: the next route is this one again, after a pause.
                            tokio::time::sleep(Duration::from_millis(ROUTE_POLL_MS)).await;
                        }
                        Ok(outcome)
                    }
                }
            };
            match budget.run(attempt).await {
                None => return Err(timed_out(client_id, timeout, "did not answer")),
                Some(Err(e)) => return Err(e),
                Some(Ok(Outcome::Answer(answer))) => return answer,
                Some(Ok(Outcome::Evicted(e))) => return Err(e),
                Some(Ok(Outcome::Lost)) => {}
            }
        }
    }

    /// Evicts `client_id`: from now on its requests, except Ping, are answered with
    /// [`ErrorCode::Evicted`] and it cannot be called back (callbacks waiting for it fail);
    /// its route is forgotten. Only the most recent [`EVICTED_REMEMBERED_MAX`] evictions are
    /// remembered. The anonymous client id 0 cannot be evicted.
    pub fn evict(&self, client_id: u64, reason: String) {
        if client_id == 0 {
            return;
        }
        tracing::warn!("evicting client {client_id:016x}: {reason}");
        {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            if state.evicted.insert(client_id, reason).is_none() {
                self.evicted_count.send_modify(|n| *n += 1);
                state.evicted_order.push_back(client_id);
                while state.evicted_order.len() > EVICTED_REMEMBERED_MAX {
                    if let Some(old) = state.evicted_order.pop_front() {
                        state.evicted.remove(&old);
                    }
                }
            }
            state.routes.remove(&client_id);
            self.any_evicted.store(true, Ordering::Release);
        }
        let error = self.eviction_error(client_id);
        let waiters: Vec<Pending> = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let xids: Vec<u64> = pending.iter().filter(|(_, p)| p.client_id == client_id).map(|(x, _)| *x).collect();
            xids.into_iter().filter_map(|x| pending.remove(&x)).collect()
        };
        for w in waiters {
            if let Some(e) = &error {
                let _ = w.tx.send(Outcome::Evicted(e.clone()));
            }
        }
        self.changed.notify_waiters();
    }

    /// Whether `client_id` was evicted (among the most recent [`EVICTED_REMEMBERED_MAX`]).
    pub fn is_evicted(&self, client_id: u64) -> bool {
        self.any_evicted.load(Ordering::Acquire)
            && self.state.read().unwrap_or_else(|p| p.into_inner()).evicted.contains_key(&client_id)
    }

    /// The error every request of an evicted client gets, or None if it is not evicted.
    pub(crate) fn eviction_error(&self, client_id: u64) -> Option<WeftError> {
        if client_id == 0 || !self.any_evicted.load(Ordering::Acquire) {
            return None;
        }
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let reason = state.evicted.get(&client_id)?;
        Some(WeftError::new(
            ErrorCode::Evicted,
            format!("client {client_id:016x} was evicted: {reason}; reconnect to continue"),
        ))
    }

    fn route(&self, client_id: u64) -> Option<Route> {
        let link = self.state.read().unwrap_or_else(|p| p.into_inner()).routes.get(&client_id).cloned();
        match link {
            Some(l) if !l.closed.load(Ordering::SeqCst) => Some(Route::Tcp(l)),
            _ => {
                let clients = self.clients.as_ref()?;
                clients.handler(client_id).map(|h| Route::Local(h, clients.clone()))
            }
        }
    }

    /// A new server connection, as a possible route.
    pub(crate) fn open_link(&self, writer: ConnectionWriter) -> Arc<Link> {
        Arc::new(Link {
            id: self.next_link.fetch_add(1, Ordering::Relaxed),
            writer,
            closed: AtomicBool::new(false),
            clients: Mutex::new(HashSet::new()),
        })
    }

    /// `link` just carried a request of `client_id`: it is that client's route now.
    pub(crate) fn note_route(&self, client_id: u64, link: &Arc<Link>) {
        if client_id == 0 {
            return;
        }
        {
            let state = self.state.read().unwrap_or_else(|p| p.into_inner());
            if state.routes.get(&client_id).is_some_and(|l| Arc::ptr_eq(l, link)) {
                return;
            }
            if state.evicted.contains_key(&client_id) {
                return;
            }
        }
        {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            // Checked under the lock that close_link takes after marking the link closed, so
            // a closing link is never left behind as a route.
            if link.closed.load(Ordering::SeqCst) || state.evicted.contains_key(&client_id) {
                return;
            }
            state.routes.insert(client_id, link.clone());
            link.clients.lock().unwrap_or_else(|p| p.into_inner()).insert(client_id);
        }
        self.changed.notify_waiters();
    }

    /// `link`'s connection closed (or failed a write): it is nobody's route any more, and the
    /// callbacks sent on it are sent again on the clients' next routes.
    pub(crate) fn close_link(&self, link: &Link) {
        if link.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            let clients = std::mem::take(&mut *link.clients.lock().unwrap_or_else(|p| p.into_inner()));
            for c in clients {
                if state.routes.get(&c).is_some_and(|l| std::ptr::eq(Arc::as_ptr(l), link)) {
                    state.routes.remove(&c);
                }
            }
        }
        let lost: Vec<Pending> = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let xids: Vec<u64> = pending.iter().filter(|(_, p)| p.link == link.id).map(|(x, _)| *x).collect();
            xids.into_iter().filter_map(|x| pending.remove(&x)).collect()
        };
        for p in lost {
            let _ = p.tx.send(Outcome::Lost);
        }
    }

    /// A CallbackReply arrived on `link`. Answers to callbacks nobody waits for any more (or
    /// that were not sent on this link) are dropped.
    pub(crate) fn complete(&self, link: &Link, xid: u64, answer: WeftResult<CallbackAnswer>) {
        let waiter = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            match pending.get(&xid) {
                Some(p) if p.link == link.id => pending.remove(&xid),
                _ => None,
            }
        };
        if let Some(w) = waiter {
            let _ = w.tx.send(Outcome::Answer(answer));
        }
    }
}

fn timed_out(client_id: u64, timeout: Duration, state: &str) -> WeftError {
    WeftError::new(
        ErrorCode::TimedOut,
        format!("client {client_id:016x} {state}: no answer to a callback within {} ms", timeout.as_millis()),
    )
}
