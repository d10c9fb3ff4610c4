//! Server-to-client callbacks and eviction, over TCP and in-process.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use weft_proto::lock::{self, *};
use weft_proto::msg::*;
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};
use weft_rpc::{
    CallbackHandler, ClientRegistration, Exports, Handler, Network, Peer, PeerOptions, RequestContext, Server,
    ServerLimits,
};

/// A server's services: `ldlm_cancel { handles: [client, timeout_ms, glimpse] }` calls
/// `client` back and answers with its answer; `ost_write` echoes.
struct Service {
    exports: Arc<Exports>,
}

fn call_back_req(client_id: u64, timeout: Duration, glimpse: bool) -> RequestBody {
    RequestBody::Ldlm {
        target: LockTarget::Ost(0),
        op: LdlmRequest::Cancel(lock::Cancel { handles: vec![client_id, timeout.as_millis() as u64, glimpse as u64] }),
    }
}

fn blocking() -> CallbackRequest {
    CallbackRequest::Blocking {
        target: LockTarget::Mdt(0),
        handle: 1,
        resource: Fid::ROOT,
        wanted: LockScope::Bits(bits::UPDATE),
    }
}

impl Handler for Service {
    fn handle<'a>(
        &'a self,
        _: &'a RequestContext,
        _: weft_rpc::Run,
        body: RequestBody,
        bulk: Bytes,
    ) -> BoxFuture<'a, (Reply, Bytes)> {
        let exports = self.exports.clone();
        Box::pin(async move {
            match body {
                RequestBody::Ldlm { target, op: LdlmRequest::Cancel(lock::Cancel { handles }) } => {
                    let callback = if handles[2] == 1 {
                        CallbackRequest::Glimpse { target, resource: Fid::new(1, 1, 0) }
                    } else {
                        blocking()
                    };
                    let answer = exports.callback(handles[0], callback, Duration::from_millis(handles[1])).await;
                    let reply = answer.map(|a| match a {
                        CallbackAnswer::Narrowed(scope) => ReplyBody::Ldlm(LdlmReply::Granted(LockGrant {
                            handle: 0,
                            resource: Fid::ROOT,
                            mode: LockMode::Pr,
                            scope,
                        })),
                        _ => ReplyBody::Ldlm(LdlmReply::Cancelled),
                    });
                    (reply, Bytes::new())
                }
                RequestBody::Ost { op: OstRequest::Write(..), .. } => {
                    (Ok(ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: bulk.len() as u32 }))), bulk)
                }
                _ => (Err(WeftError::new(ErrorCode::NotSupported, "not here")), Bytes::new()),
            }
        })
    }
}

/// A client's callback handler: answers a blocking callback by narrowing to `Bits(tag)`
/// (so a test sees which handler answered), a glimpse with an error; or never answers.
struct Answerer {
    tag: u8,
    stuck: bool,
    calls: AtomicU64,
}

impl Answerer {
    fn new(tag: u8) -> Arc<Answerer> {
        Arc::new(Answerer { tag, stuck: false, calls: AtomicU64::new(0) })
    }
    fn stuck() -> Arc<Answerer> {
        Arc::new(Answerer { tag: 0, stuck: true, calls: AtomicU64::new(0) })
    }
}

impl CallbackHandler for Answerer {
    fn handle(&self, callback: CallbackRequest) -> BoxFuture<'static, WeftResult<CallbackAnswer>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.stuck {
            return Box::pin(futures::future::pending());
        }
        let tag = self.tag;
        Box::pin(async move {
            match callback {
                CallbackRequest::Blocking { .. } => Ok(CallbackAnswer::Narrowed(LockScope::Bits(tag))),
                CallbackRequest::Glimpse { .. } => {
                    Err(WeftError::new(ErrorCode::Busy, format!("glimpse refused by {tag}")))
                }
            }
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Tcp,
    InProcess,
}

struct Cluster {
    mode: Mode,
    network: Arc<Network>,
    server: Arc<Server>,
    exports: Arc<Exports>,
    addr: String,
}

async fn start(mode: Mode) -> Cluster {
    let network = Network::new();
    let exports = Arc::new(Exports::with_clients(network.clients().clone()));
    let server = Server::with_exports(Arc::new(Service { exports: exports.clone() }), ServerLimits::default(), exports);
    let exports = server.exports();
    let addr = match mode {
        Mode::Tcp => {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            server.serve(listener);
            addr
        }
        Mode::InProcess => {
            static N: AtomicU64 = AtomicU64::new(0);
            let addr = format!("in-process-callbacks-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
            network.register_server(&addr, &server);
            addr
        }
    };
    Cluster { mode, network, server, exports, addr }
}

/// A client id no other test uses (the in-process registry is shared by the whole binary).
fn fresh_id() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0x00c1_1e47_0000_0001);
    N.fetch_add(1, Ordering::SeqCst)
}

fn header(client_id: u64) -> RequestHeader {
    static N: AtomicU64 = AtomicU64::new(1);
    RequestHeader { client_id, request_id: N.fetch_add(1, Ordering::SeqCst), ..Default::default() }
}

fn write_req() -> RequestBody {
    RequestBody::Ost {
        ost: 0,
        op: OstRequest::Write(ost::Write {
            fid: Fid::new(1, 2, 0),
            offset: 0,
            sync: false,
            owner: None,
            extents: Vec::new(),
        }),
    }
}

/// One client instance: its peer to the cluster's server and, in-process, its registration.
struct Client {
    id: u64,
    peer: Peer,
    _registration: Option<ClientRegistration>,
}

impl Client {
    /// Connects and pings, so that the server knows the client.
    async fn connect(cluster: &Cluster, id: u64, handler: Option<Arc<Answerer>>) -> Client {
        let callbacks = handler.map(|h| h as Arc<dyn CallbackHandler>);
        let registration = match cluster.mode {
            Mode::InProcess => callbacks.clone().map(|h| cluster.network.register_client(id, h)),
            Mode::Tcp => None,
        };
        let opts = PeerOptions {
            client_id: id,
            callbacks,
            request_timeout: Duration::from_secs(10),
            network: Some(cluster.network.clone()),
            ..Default::default()
        };
        let peer = Peer::new(cluster.addr.clone(), opts);
        assert_eq!(peer.is_local(), cluster.mode == Mode::InProcess);
        let (body, _) = peer.call(header(id), RequestBody::Ping, Bytes::new()).await.unwrap();
        assert_eq!(body, ReplyBody::Pong);
        Client { id, peer, _registration: registration }
    }

    async fn call(&self, body: RequestBody) -> WeftResult<ReplyBody> {
        self.peer.call(header(self.id), body, Bytes::from_static(b"data")).await.map(|(b, _)| b)
    }
}

fn narrowed(tag: u8) -> ReplyBody {
    ReplyBody::Ldlm(LdlmReply::Granted(LockGrant {
        handle: 0,
        resource: Fid::ROOT,
        mode: LockMode::Pr,
        scope: LockScope::Bits(tag),
    }))
}

// ---- Scenarios, each run over TCP and in-process ----

async fn a_request_calls_another_client_back(mode: Mode) {
    let cluster = start(mode).await;
    let b_handler = Answerer::new(7);
    let b = Client::connect(&cluster, fresh_id(), Some(b_handler.clone())).await;
    let a = Client::connect(&cluster, fresh_id(), None).await;

    let reply = a.call(call_back_req(b.id, Duration::from_secs(5), false)).await.unwrap();
    assert_eq!(reply, narrowed(7));
    // The client's error travels back as the answer.
    let err = a.call(call_back_req(b.id, Duration::from_secs(5), true)).await.unwrap_err();
    assert_eq!((err.code, err.message.as_str()), (ErrorCode::Busy, "glimpse refused by 7"));
    assert_eq!(b_handler.calls.load(Ordering::SeqCst), 2);
    // B's peer is still usable.
    assert_eq!(b.call(write_req()).await.unwrap(), ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: 4 })));
}

async fn a_callback_to_an_unknown_client_times_out(mode: Mode) {
    let cluster = start(mode).await;
    let unknown = fresh_id();
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let err = cluster.exports.callback(unknown, blocking(), timeout).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(elapsed >= timeout && elapsed < timeout + Duration::from_secs(1), "took {elapsed:?}");
    assert_eq!(err.code, ErrorCode::TimedOut);
    assert!(err.message.contains(&format!("{unknown:016x}")) && err.message.contains("500 ms"), "{}", err.message);
    // And through a request, as the lock manager would.
    let a = Client::connect(&cluster, fresh_id(), None).await;
    let err = a.call(call_back_req(unknown, timeout, false)).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::TimedOut);
}

async fn a_client_gone_times_out_and_one_back_in_time_is_called(mode: Mode) {
    let cluster = start(mode).await;
    let id = fresh_id();
    let b = Client::connect(&cluster, id, Some(Answerer::new(1))).await;
    assert_eq!(cluster.exports.callback(id, blocking(), Duration::from_secs(5)).await.unwrap(), narrowed_answer(1));
    drop(b);

    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let err = cluster.exports.callback(id, blocking(), timeout).await.unwrap_err();
    assert!(started.elapsed() < timeout + Duration::from_secs(1), "took {:?}", started.elapsed());
    assert_eq!(err.code, ErrorCode::TimedOut, "{}", err.message);

    // The callback waits; the client comes back (a new peer, the same id) within its timeout.
    let pending = {
        let exports = cluster.exports.clone();
        tokio::spawn(async move { exports.callback(id, blocking(), Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let handler = Answerer::new(2);
    let _b = Client::connect(&cluster, id, Some(handler.clone())).await;
    assert_eq!(pending.await.unwrap().unwrap(), narrowed_answer(2));
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1);
}

fn narrowed_answer(tag: u8) -> CallbackAnswer {
    CallbackAnswer::Narrowed(LockScope::Bits(tag))
}

async fn an_evicted_client_is_refused_everything_but_ping(mode: Mode) {
    let cluster = start(mode).await;
    let a = Client::connect(&cluster, fresh_id(), Some(Answerer::new(1))).await;
    let stuck = Answerer::stuck();
    let b = Client::connect(&cluster, fresh_id(), Some(stuck.clone())).await;
    assert_eq!(b.call(write_req()).await.unwrap(), ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: 4 })));

    // A callback waiting for B's answer fails as soon as B is evicted.
    let pending = {
        let exports = cluster.exports.clone();
        let id = b.id;
        tokio::spawn(async move { exports.callback(id, blocking(), Duration::from_secs(30)).await })
    };
    while stuck.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    cluster.exports.evict(b.id, "it did not answer a blocking callback".into());
    let err = pending.await.unwrap().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert_eq!(err.code, ErrorCode::Evicted);
    assert!(cluster.exports.is_evicted(b.id) && !cluster.exports.is_evicted(a.id));

    let err = b.call(write_req()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Evicted);
    let expected =
        format!("client {:016x} was evicted: it did not answer a blocking callback; reconnect to continue", b.id);
    assert_eq!(err.message, expected);
    assert_eq!(b.call(RequestBody::Ping).await.unwrap(), ReplyBody::Pong);
    let err = cluster.exports.callback(b.id, blocking(), Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Evicted);

    // Another client is unaffected, requests and callbacks alike.
    assert_eq!(a.call(write_req()).await.unwrap(), ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: 4 })));
    assert_eq!(cluster.exports.callback(a.id, blocking(), Duration::from_secs(5)).await.unwrap(), narrowed_answer(1));
    // The refused request counts as an error of its opcode, as any other refusal.
    let stats = cluster.server.stats().snapshot();
    assert_eq!((stats["ost_write"].samples, stats["ost_write"].errors), (3, 1));
}

#[tokio::test]
async fn a_request_calls_another_client_back_over_tcp() {
    a_request_calls_another_client_back(Mode::Tcp).await;
}

#[tokio::test]
async fn a_request_calls_another_client_back_in_process() {
    a_request_calls_another_client_back(Mode::InProcess).await;
}

#[tokio::test]
async fn a_callback_to_an_unknown_client_times_out_over_tcp() {
    a_callback_to_an_unknown_client_times_out(Mode::Tcp).await;
}

#[tokio::test]
async fn a_callback_to_an_unknown_client_times_out_in_process() {
    a_callback_to_an_unknown_client_times_out(Mode::InProcess).await;
}

#[tokio::test]
async fn a_client_gone_times_out_and_one_back_in_time_is_called_over_tcp() {
    a_client_gone_times_out_and_one_back_in_time_is_called(Mode::Tcp).await;
}

#[tokio::test]
async fn a_client_gone_times_out_and_one_back_in_time_is_called_in_process() {
    a_client_gone_times_out_and_one_back_in_time_is_called(Mode::InProcess).await;
}

#[tokio::test]
async fn an_evicted_client_is_refused_everything_but_ping_over_tcp() {
    an_evicted_client_is_refused_everything_but_ping(Mode::Tcp).await;
}

#[tokio::test]
async fn an_evicted_client_is_refused_everything_but_ping_in_process() {
    an_evicted_client_is_refused_everything_but_ping(Mode::InProcess).await;
}

// ---- TCP only ----

#[tokio::test]
async fn a_peer_without_a_handler_answers_a_callback_with_an_error_and_stays_usable() {
    let cluster = start(Mode::Tcp).await;
    let c = Client::connect(&cluster, fresh_id(), None).await;
    let started = Instant::now();
    let err = cluster.exports.callback(c.id, blocking(), Duration::from_secs(5)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert_eq!(err.code, ErrorCode::NotSupported, "{}", err.message);
    assert_eq!(c.call(write_req()).await.unwrap(), ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: 4 })));
    assert_eq!(cluster.exports.callback(c.id, blocking(), Duration::from_secs(5)).await.unwrap_err().code, err.code);
}

#[tokio::test]
async fn the_route_is_the_connection_that_carried_the_latest_request() {
    let cluster = start(Mode::Tcp).await;
    let id = fresh_id();
    let first = Client::connect(&cluster, id, Some(Answerer::new(1))).await;
    let second = Client::connect(&cluster, id, Some(Answerer::new(2))).await;
    assert_eq!(cluster.exports.callback(id, blocking(), Duration::from_secs(5)).await.unwrap(), narrowed_answer(2));
    first.call(RequestBody::Ping).await.unwrap();
    assert_eq!(cluster.exports.callback(id, blocking(), Duration::from_secs(5)).await.unwrap(), narrowed_answer(1));
    // The first connection closes: the second is the route only once it carries a request.
    drop(first);
    let err = cluster.exports.callback(id, blocking(), Duration::from_millis(300)).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::TimedOut);
    second.call(write_req()).await.unwrap();
    assert_eq!(cluster.exports.callback(id, blocking(), Duration::from_secs(5)).await.unwrap(), narrowed_answer(2));
}

#[tokio::test]
async fn a_callback_lost_with_its_connection_is_sent_again_on_the_next() {
    let cluster = start(Mode::Tcp).await;
    let id = fresh_id();
    let stuck = Answerer::stuck();
    let first = Client::connect(&cluster, id, Some(stuck.clone())).await;
    let pending = {
        let exports = cluster.exports.clone();
        tokio::spawn(async move { exports.callback(id, blocking(), Duration::from_secs(10)).await })
    };
    while stuck.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The connection dies with the callback unanswered; the client comes back.
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let handler = Answerer::new(3);
    let _second = Client::connect(&cluster, id, Some(handler.clone())).await;
    assert_eq!(pending.await.unwrap().unwrap(), narrowed_answer(3));
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_new_connection_of_a_peer_with_callbacks_announces_the_client() {
    let cluster = start(Mode::Tcp).await;
    let id = fresh_id();
    let peer = Peer::new(
        cluster.addr.clone(),
        PeerOptions { client_id: id, callbacks: Some(Answerer::new(4)), ..Default::default() },
    );
    // An anonymous request opens the connection; the peer's own ping names the client.
    peer.call(RequestHeader::default(), write_req(), Bytes::new()).await.unwrap();
    assert_eq!(cluster.exports.callback(id, blocking(), Duration::from_secs(5)).await.unwrap(), narrowed_answer(4));
}

#[tokio::test]
async fn a_server_takes_callback_replies_and_drops_other_unasked_frames() {
    use tokio::io::AsyncWriteExt;
    use weft_proto::wire::{encode_message, FrameKind};
    let cluster = start(Mode::Tcp).await;
    let frame = |kind: FrameKind, xid: u64, msg: &[u8]| {
        let h = weft_proto::wire::FrameHeader {
            kind,
            xid,
            msg_len: msg.len() as u32,
            bulk_len: 0,
            msg_crc: weft_proto::wire::checksum(msg),
            bulk_crc: 0,
        };
        [&h.encode()[..], msg].concat()
    };
    // An answer to a callback nobody sent is dropped; the connection keeps being served.
    let mut s = tokio::net::TcpStream::connect(&cluster.addr).await.unwrap();
    let answer = encode_message::<WeftResult<CallbackAnswer>>(&Ok(CallbackAnswer::Released)).unwrap();
    s.write_all(&frame(FrameKind::CallbackReply, 99, &answer)).await.unwrap();
    let ping = encode_message(&Request { header: header(0), body: RequestBody::Ping }).unwrap();
    s.write_all(&frame(FrameKind::Request, 1, &ping)).await.unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(5), weft_rpc::frame::read_frame(&mut s))
        .await
        .unwrap()
        .unwrap()
        .expect("a reply");
    assert_eq!((reply.header.kind, reply.header.xid), (FrameKind::Reply, 1));
    assert_eq!(weft_proto::wire::decode_message::<Reply>(&reply.msg).unwrap(), Ok(ReplyBody::Pong));

    // A malformed answer, or a frame kind a client never sends, drops the connection.
    for bad in [frame(FrameKind::CallbackReply, 1, &[0xFF; 8]), frame(FrameKind::Callback, 1, &answer)] {
        let mut s = tokio::net::TcpStream::connect(&cluster.addr).await.unwrap();
        s.write_all(&bad).await.unwrap();
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read(&mut s, &mut buf))
            .await
            .expect("server must close a bad connection")
            .unwrap_or(0);
        assert_eq!(n, 0);
    }
}
