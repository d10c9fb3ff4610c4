//! The client side of a connection: [`Peer`] sends requests to one server address, many in
//! flight on one TCP connection, matched to replies by xid.
//!
//! Recovery is Lustre's: when the connection fails, the peer reconnects and resends every
//! unanswered request with its original request id, until `request_timeout` has passed. The
//! MDS reply cache makes resent mutations safe; OST writes and punches are idempotent.
//!
//! Each attempt goes through a transport that the Peer's [`Network`] picks (see
//! [`crate::network`]): TCP; or, when a [`Server`](crate::Server) of that network registered
//! the peer's address, a direct call of that server's pipeline (the same request and reply
//! values, no encoding, no framing, no checksums, the bulk not copied); or a simulation's
//! [`Wire`](crate::Wire). The choice is made per attempt, so retries, the deadline, the
//! backoff and the errors are the same code for all three.
//!
//! Callbacks: a Peer whose [`PeerOptions::callbacks`] is set serves the server's callbacks.
//! Right after opening each TCP connection it pings with [`PeerOptions::client_id`] in the
//! header, so that the server knows the connection as the way to this client (see
//! [`crate::Exports`]) even if the client sends nothing else on it; the connection's reader
//! runs each Callback frame through the handler as a task of its own and writes the answer
//! (`Result<CallbackAnswer, WeftError>`) in a CallbackReply frame with the callback's xid. A
//! Peer without callbacks answers a Callback frame with an error and keeps the connection.
//! Requests that go in-process open no connection: for servers of its network the client
//! registers its handler with [`Network::register_client`] instead.
//!
//! The server learns a route only from a connection the client opened, and a Peer opens one
//! only to send a request: when a connection breaks, the reader tells the handler
//! ([`CallbackHandler::disconnected`]), and a client that holds locks there connects again
//! at once, so it stays reachable without pinging its servers now and then (Lustre's
//! pinger, which costs a message per client per server per interval).

use crate::callback::CallbackHandler;
use crate::frame::{read_frame, write_frame};
use crate::limits::{
    CONNECT_TIMEOUT_MS_DEFAULT, RECONNECT_BACKOFF_MS_MAX, RECONNECT_BACKOFF_MS_MIN, REQUEST_TIMEOUT_S_DEFAULT,
};
use crate::network::{Network, Transport};
use crate::secure::{handshake, ConnWriter, Protection, SharedKey};
use bytes::Bytes;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Semaphore};
use weft_proto::limits::{BULK_BYTES_MAX, CONNECTION_IN_FLIGHT_MAX};
use weft_proto::lock::{CallbackAnswer, CallbackRequest};
use weft_proto::msg::ops::{service_answer, take_reply, Op, Payload, Variant};
use weft_proto::msg::{Reply, ReplyBody, Request, RequestBody, RequestHeader, ServiceRequest};
use weft_proto::wire::{decode_message, encode_message, FrameKind};
use weft_proto::{ErrorCode, WeftError, WeftResult};

#[derive(Clone)]
pub struct PeerOptions {
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
    /// How long a request may wait and resend, across reconnects, before it fails.
    pub request_timeout: Duration,
    /// The client instance this peer speaks for, in the ping that opens each connection when
    /// `callbacks` is set (0 = anonymous). Requests carry the id of their own headers.
    pub client_id: u64,
    /// Serves the server's callbacks to `client_id`; None for a peer that takes none (a
    /// server talking to another server, a tool).
    pub callbacks: Option<Arc<dyn CallbackHandler>>,
    /// The network of the process's servers and clients: servers registered in it are
    /// reached without TCP (in-process, or through its wire). None: TCP only.
    pub network: Option<Arc<Network>>,
    /// The shared key this peer proves at connect ([`crate::secure`]); by default the
    /// process's ([`crate::secure::process_key`]). None: it connects without a key.
    pub key: Option<Arc<SharedKey>>,
    /// The local address TCP connections are made from (Lustre's client NID; a nodemap
    /// tells clients apart by it); None: the one the kernel picks.
    pub local_address: Option<std::net::IpAddr>,
}

impl Default for PeerOptions {
    fn default() -> Self {
        PeerOptions {
            connect_timeout: Duration::from_millis(CONNECT_TIMEOUT_MS_DEFAULT),
            request_timeout: Duration::from_secs(REQUEST_TIMEOUT_S_DEFAULT),
            client_id: 0,
            callbacks: None,
            network: None,
            key: crate::secure::process_key(),
            local_address: None,
        }
    }
}

impl std::fmt::Debug for PeerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerOptions")
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("client_id", &format_args!("{:016x}", self.client_id))
            .field("callbacks", &self.callbacks.as_ref().map(|_| "set"))
            .field("network", &self.network)
            .field("key", &self.key)
            .field("local_address", &self.local_address)
            .finish()
    }
}

/// A TCP connection to `address`, from `local` when given.
async fn connect_from(address: &str, local: Option<std::net::IpAddr>) -> std::io::Result<TcpStream> {
    let Some(local) = local else { return TcpStream::connect(address).await };
    let mut last = None;
    for remote in tokio::net::lookup_host(address).await? {
        let socket = if remote.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.bind(std::net::SocketAddr::new(local, 0))?;
        match socket.connect(remote).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address")))
}

type Waiter = oneshot::Sender<WeftResult<(Vec<u8>, Bytes, bool)>>;

/// Set when the server says a request is held by a scheduling policy (a Held frame).
#[derive(Default)]
struct HeldSignal {
    held: AtomicBool,
    waker: futures::task::AtomicWaker,
}

struct Pending {
    waiter: Waiter,
    held: Arc<HeldSignal>,
}

struct Connection {
    writer: tokio::sync::Mutex<ConnWriter>,
    pending: Mutex<HashMap<u64, Pending>>,
    next_xid: AtomicU64,
    dead: AtomicBool,
    in_flight: Semaphore,
}

impl Connection {
    async fn open(address: &str, timeout: Duration, opts: &PeerOptions) -> WeftResult<Arc<Connection>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut stream = match tokio::time::timeout_at(deadline, connect_from(address, opts.local_address)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(WeftError::new(ErrorCode::Io, format!("cannot connect to {address}: {e}"))),
            Err(_) => {
                return Err(WeftError::new(
                    ErrorCode::TimedOut,
                    format!("cannot connect to {address}: no answer within {} ms", timeout.as_millis()),
                ))
            }
        };
        stream.set_nodelay(true).ok();
        let protection = match &opts.key {
            None => Protection::Plain,
            Some(key) => match tokio::time::timeout_at(deadline, handshake::client(&mut stream, key, address)).await {
                Ok(p) => p?,
                Err(_) => {
                    return Err(WeftError::new(
                        ErrorCode::TimedOut,
                        format!("no key handshake from {address} within {} ms", timeout.as_millis()),
                    ))
                }
            },
        };
        let (mut reader, writer) = crate::secure::split(stream, protection);
        let conn = Arc::new(Connection {
            writer: tokio::sync::Mutex::new(writer),
            pending: Mutex::new(HashMap::new()),
            next_xid: AtomicU64::new(1),
            dead: AtomicBool::new(false),
            in_flight: Semaphore::new(CONNECTION_IN_FLIGHT_MAX),
        });
        let weak = Arc::downgrade(&conn);
        let name = address.to_string();
        let callbacks = opts.callbacks.clone();
        tokio::spawn(async move {
            let address = name;
            let failure = loop {
                let frame = match read_frame(&mut reader).await {
                    Ok(Some(f)) => f,
                    Ok(None) => break WeftError::new(ErrorCode::Io, format!("{address} closed the connection")),
                    Err(e) => {
                        let mut e = WeftError::from(e);
                        e.message = format!("{address}: {}", e.message);
                        break e;
                    }
                };
                let Some(conn) = weak.upgrade() else { return };
                match frame.header.kind {
                    FrameKind::Reply => {
                        let waiter = conn.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&frame.header.xid);
                        if let Some(p) = waiter {
                            let _ = p.waiter.send(Ok((frame.msg, frame.bulk, frame.bulk_ok)));
                        }
                    }
                    FrameKind::Held => {
                        let pending = conn.pending.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(p) = pending.get(&frame.header.xid) {
                            p.held.held.store(true, Ordering::Release);
                            p.held.waker.wake();
                        }
                    }
                    FrameKind::Callback => {
                        drop(conn);
                        let answer = answer_callback(callbacks.clone(), &frame.msg);
                        let xid = frame.header.xid;
                        let weak = weak.clone();
                        tokio::spawn(async move {
                            let answer = tokio::spawn(answer)
                                .await
                                .unwrap_or_else(|e| Err(WeftError::io(format!("the callback handler failed: {e}"))));
                            // A handler at work does not keep the connection of a dropped Peer.
                            let Some(conn) = weak.upgrade() else { return };
                            let msg = match encode_message(&answer) {
                                Ok(m) => m,
                                Err(e) => encode_message::<WeftResult<CallbackAnswer>>(&Err(e)).unwrap_or_default(),
                            };
                            let sent = {
                                let mut w = conn.writer.lock().await;
                                write_frame(&mut *w, FrameKind::CallbackReply, xid, &msg, &Bytes::new()).await
                            };
                            if let Err(e) = sent {
                                conn.fail_all(e);
                            }
                        });
                    }
                    kind => break WeftError::protocol(format!("unexpected frame kind {kind:?} from {address}")),
                }
            };
            if let Some(conn) = weak.upgrade() {
                conn.fail_all(failure);
                // Only for a connection its Peer still held: one it dropped is no loss.
                if let Some(handler) = &callbacks {
                    handler.disconnected(&address);
                }
            }
        });
        if opts.callbacks.is_some() {
            // Tells the server at once that this connection reaches `client_id`. The pong is
            // not waited for: a reply nobody expects is dropped by the reader.
            let ping = Request {
                header: RequestHeader { client_id: opts.client_id, ..Default::default() },
                body: RequestBody::Ping,
            };
            let msg = encode_message(&ping)?;
            let xid = conn.next_xid.fetch_add(1, Ordering::Relaxed);
            let sent = {
                let mut w = conn.writer.lock().await;
                write_frame(&mut *w, FrameKind::Request, xid, &msg, &Bytes::new()).await
            };
            if let Err(e) = sent {
                conn.fail_all(e.clone());
                return Err(e);
            }
        }
        Ok(conn)
    }

    fn fail_all(&self, e: WeftError) {
        self.dead.store(true, Ordering::SeqCst);
        let waiters: Vec<Waiter> =
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, p)| p.waiter).collect();
        for w in waiters {
            let _ = w.send(Err(e.clone()));
        }
    }

    async fn exchange(&self, msg: &[u8], bulk: &Bytes) -> WeftResult<(Vec<u8>, Bytes, bool)> {
        let _permit = self.in_flight.acquire().await.map_err(|_| WeftError::io("connection closed"))?;
        let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        let held = Arc::new(HeldSignal::default());
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(xid, Pending { waiter: tx, held: held.clone() });
        if self.dead.load(Ordering::SeqCst) {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&xid);
            return Err(WeftError::io("connection is closed"));
        }
        let sent = {
            let mut w = self.writer.lock().await;
            write_frame(&mut *w, FrameKind::Request, xid, msg, bulk).await
        };
        if let Err(e) = sent {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&xid);
            self.fail_all(e.clone());
            return Err(e);
        }
        // While the reply is awaited: a server that says the request is held gets it noted
        // on the polling thread, so a mount's FUSE thread lets it go on elsewhere (see
        // `crate::held::take_held`) instead of waiting out the rate limit.
        let mut noted = false;
        let answer = std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(r) = std::pin::Pin::new(&mut rx).poll(cx) {
                return std::task::Poll::Ready(r);
            }
            held.waker.register(cx.waker());
            if !noted && held.held.load(Ordering::Acquire) {
                noted = true;
                crate::held::note_held();
            }
            std::task::Poll::Pending
        })
        .await;
        answer.map_err(|_| WeftError::io("connection dropped the request"))?
    }
}

/// Runs one callback through `handler`: the answer to write back. Malformed, or without a
/// handler, it is answered with an error and the connection stays.
fn answer_callback(
    handler: Option<Arc<dyn CallbackHandler>>,
    msg: &[u8],
) -> futures::future::BoxFuture<'static, WeftResult<CallbackAnswer>> {
    let callback = match decode_message::<CallbackRequest>(msg) {
        Ok(c) => c,
        Err(e) => return Box::pin(std::future::ready(Err(e))),
    };
    match handler {
        Some(h) => h.handle(callback),
        None => Box::pin(std::future::ready(Err(WeftError::new(
            ErrorCode::NotSupported,
            "this client takes no callbacks on this connection",
        )))),
    }
}

/// One server, as seen from a client or another server.
pub struct Peer {
    address: String,
    opts: PeerOptions,
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Requests in flight in-process, bounded as on one TCP connection.
    local_in_flight: Semaphore,
    /// TCP connections opened so far.
    connections: AtomicU64,
}

impl Peer {
    pub fn new(address: impl Into<String>, opts: PeerOptions) -> Peer {
        Peer {
            address: address.into(),
            opts,
            conn: tokio::sync::Mutex::new(None),
            local_in_flight: Semaphore::new(CONNECTION_IN_FLIGHT_MAX),
            connections: AtomicU64::new(0),
        }
    }

    /// Whether a request sent now would go to a server in this process by a direct call
    /// rather than over TCP (or a wire).
    pub fn is_local(&self) -> bool {
        self.opts.network.as_ref().is_some_and(|n| n.in_process(&self.address).is_some())
    }

    fn transport(&self) -> Transport {
        match &self.opts.network {
            Some(network) => network.transport(&self.address),
            None => Transport::Tcp,
        }
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn options(&self) -> &PeerOptions {
        &self.opts
    }

    /// Sends one op to target `index` of its service and takes its answer out of the reply
    /// (an answer of another kind is a protocol error), waiting at most `timeout`.
    pub async fn op<O>(
        &self,
        header: RequestHeader,
        index: u32,
        op: O,
        bulk: Bytes,
        timeout: Duration,
    ) -> WeftResult<(O::Reply, Bytes)>
    where
        O: Op,
        O::Request: ServiceRequest,
        O::Answer: Payload<ReplyBody> + Variant,
    {
        let (reply, bulk) = self.call_with_timeout(header, op.into().into_body(index), bulk, timeout).await?;
        let answer = service_answer(O::OPCODE, reply)?;
        Ok((take_reply::<O>(answer)?, bulk))
    }

    pub async fn call(&self, header: RequestHeader, body: RequestBody, bulk: Bytes) -> WeftResult<(ReplyBody, Bytes)> {
        self.call_with_timeout(header, body, bulk, self.opts.request_timeout).await
    }

    pub async fn call_with_timeout(
        &self,
        header: RequestHeader,
        body: RequestBody,
        bulk: Bytes,
        timeout: Duration,
    ) -> WeftResult<(ReplyBody, Bytes)> {
        let opcode = body.opcode_name();
        let request = Request { header, body };
        // Encoded once, on the first attempt that goes over TCP.
        let mut msg: Option<Vec<u8>> = None;
        let deadline = Instant::now() + timeout;
        let mut backoff_ms = RECONNECT_BACKOFF_MS_MIN;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let last_error = match self.attempt(&request, &mut msg, &bulk, remaining).await {
                Ok(answer) => return answer,
                Err(resend) => resend,
            };
            if Instant::now() + Duration::from_millis(backoff_ms) >= deadline {
                return Err(WeftError::new(
                    ErrorCode::TimedOut,
                    format!(
                        "no answer from {} for {opcode} within {} s: {}",
                        self.address,
                        timeout.as_secs_f32().round(),
                        last_error.message
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
            backoff_ms = (backoff_ms * 2).min(RECONNECT_BACKOFF_MS_MAX);
        }
    }

    /// One attempt of [`Peer::call_with_timeout`], without its resends: for a caller that
    /// has somewhere else to go when this server does not answer (a replicated MGS's next
    /// replica, `crate::mgs::MgsPeers`).
    pub async fn call_once(
        &self,
        header: RequestHeader,
        body: RequestBody,
        bulk: Bytes,
        timeout: Duration,
    ) -> WeftResult<(ReplyBody, Bytes)> {
        let request = Request { header, body };
        self.attempt(&request, &mut None, &bulk, timeout).await.unwrap_or_else(Err)
    }

    /// Sends `request` once within `remaining`: Ok(the answer to give the caller, a reply
    /// or an error a resend would meet again), or Err(an error worth a resend: the
    /// connection failed, no reply in time, the server asks to come back, a checksum).
    async fn attempt(
        &self,
        request: &Request,
        msg: &mut Option<Vec<u8>>,
        bulk: &Bytes,
        remaining: Duration,
    ) -> Result<WeftResult<(ReplyBody, Bytes)>, WeftError> {
        let transport = self.transport();
        if !matches!(transport, Transport::Tcp) && bulk.len() > BULK_BYTES_MAX as usize {
            // Over TCP the server would drop the connection for this frame.
            return Ok(Err(WeftError::protocol(format!("bulk of {} bytes exceeds {BULK_BYTES_MAX}", bulk.len()))));
        }
        let outcome: WeftResult<(Reply, Bytes, bool)> = match transport {
            Transport::InProcess(server) => {
                let attempt = async {
                    let _permit = self.local_in_flight.acquire().await.map_err(|_| WeftError::io("peer closed"))?;
                    // Nothing crossed a wire: the bulk is as good as the caller's.
                    server.call_local(request.clone(), bulk.clone()).await.map(|(r, b)| (r, b, true))
                };
                match tokio::time::timeout(remaining, attempt).await {
                    Ok(r) => r,
                    Err(_) => Err(WeftError::new(ErrorCode::TimedOut, "no reply")),
                }
            }
            Transport::Wire(wire, server) => {
                // Its own bound as on a TCP connection; the wire may lose the request, the
                // reply or the connection, which is an error to resend after.
                let attempt = async {
                    let _permit = self.local_in_flight.acquire().await.map_err(|_| WeftError::io("peer closed"))?;
                    wire.request(&self.address, request.clone(), bulk.clone(), server).await.map(|(r, b)| (r, b, true))
                };
                match tokio::time::timeout(remaining, attempt).await {
                    Ok(r) => r,
                    Err(_) => Err(WeftError::new(ErrorCode::TimedOut, "no reply")),
                }
            }
            Transport::Tcp => {
                let msg: &[u8] = match msg {
                    Some(m) => m,
                    None => msg.insert(match encode_message(request) {
                        Ok(m) => m,
                        Err(e) => return Ok(Err(e)),
                    }),
                };
                let attempt = async {
                    let conn = self.connection(remaining.min(self.opts.connect_timeout)).await?;
                    let result = conn.exchange(msg, bulk).await;
                    if result.is_err() {
                        self.forget(&conn).await;
                    }
                    result
                };
                match tokio::time::timeout(remaining, attempt).await {
                    Ok(Ok((reply_msg, reply_bulk, bulk_ok))) => match decode_message::<Reply>(&reply_msg) {
                        Ok(reply) => Ok((reply, reply_bulk, bulk_ok)),
                        Err(e) => return Ok(Err(e)),
                    },
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err(WeftError::new(ErrorCode::TimedOut, "no reply")),
                }
            }
        };
        match outcome {
            Ok((reply, reply_bulk, bulk_ok)) => match reply {
                Ok(_) if !bulk_ok => Err(WeftError::new(ErrorCode::Checksum, "reply data arrived corrupted")),
                Ok(body) => Ok(Ok((body, reply_bulk))),
                // The server could not use our data or asks us to come back: resend.
                Err(e) if matches!(e.code, ErrorCode::Checksum | ErrorCode::Again) => Err(e),
                Err(e) => Ok(Err(e)),
            },
            // The server is not Weft, speaks another version, or broke the protocol; or it
            // refused this node's key: a resend would meet the same (frame.rs's ReadError
            // says which is which).
            Err(e) if matches!(e.code, ErrorCode::Protocol | ErrorCode::NotAuthenticated) => Ok(Err(e)),
            Err(e) => Err(e),
        }
    }

    async fn connection(&self, timeout: Duration) -> WeftResult<Arc<Connection>> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.dead.load(Ordering::SeqCst) {
                return Ok(c.clone());
            }
        }
        let c = Connection::open(&self.address, timeout, &self.opts).await?;
        if self.connections.fetch_add(1, Ordering::AcqRel) > 0 {
            if let Some(handler) = &self.opts.callbacks {
                handler.reconnected(&self.address);
            }
        }
        *slot = Some(c.clone());
        Ok(c)
    }

    async fn forget(&self, conn: &Arc<Connection>) {
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            *slot = None;
        }
    }
}
