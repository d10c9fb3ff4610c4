//! The transport against real loopback sockets.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use weft_proto::msg::*;
use weft_proto::wire::{FrameHeader, FrameKind};
use weft_proto::ErrorCode;
use weft_rpc::{Handler, Network, Peer, PeerOptions, RequestContext, Server, ServerLimits};

/// Echoes the bulk of an OST write back as a read reply; counts calls.
struct Echo {
    calls: AtomicU64,
}

impl Handler for Echo {
    fn handle<'a>(
        &'a self,
        _: &'a RequestContext,
        _: weft_rpc::Run,
        body: RequestBody,
        bulk: Bytes,
    ) -> BoxFuture<'a, (Reply, Bytes)> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            match body {
                RequestBody::Ost { op: OstRequest::Write(..), .. } => {
                    (Ok(ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: bulk.len() as u32 }))), bulk)
                }
                _ => (Err(weft_proto::WeftError::new(ErrorCode::NotSupported, "echo only")), Bytes::new()),
            }
        })
    }
}

async fn start(addr: &str) -> (Arc<Echo>, Arc<Server>, String) {
    let echo = Arc::new(Echo { calls: AtomicU64::new(0) });
    let listener = TcpListener::bind(addr).await.unwrap();
    let local = listener.local_addr().unwrap().to_string();
    let server = Server::new(echo.clone(), ServerLimits::default());
    server.serve(listener);
    (echo, server, local)
}

fn write_req(n: u64) -> RequestBody {
    RequestBody::Ost {
        ost: 0,
        op: OstRequest::Write(ost::Write {
            fid: weft_proto::Fid::new(1, n as u32, 0),
            offset: 0,
            sync: false,
            owner: None,
            extents: Vec::new(),
        }),
    }
}

fn header(id: u64) -> RequestHeader {
    RequestHeader { client_id: 7, request_id: id, ..Default::default() }
}

#[tokio::test]
async fn many_requests_in_flight_get_their_own_bulk_back() {
    let (_echo, _task, addr) = start("127.0.0.1:0").await;
    let peer = Arc::new(Peer::new(addr, PeerOptions::default()));
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let peer = peer.clone();
        tasks.push(tokio::spawn(async move {
            let data = Bytes::from(vec![i as u8; 1000 + i as usize * 997]);
            let (body, bulk) = peer.call(header(i), write_req(i), data.clone()).await.unwrap();
            assert_eq!(body, ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: data.len() as u32 })));
            assert_eq!(bulk, data);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (body, _) = peer.call(header(100), RequestBody::Ping, Bytes::new()).await.unwrap();
    assert_eq!(body, ReplyBody::Pong);
    let err = peer
        .call(header(101), RequestBody::Mgs(MgsRequest::GetMap(mgs::GetMap { known_version: 0 })), Bytes::new())
        .await;
    assert_eq!(err.unwrap_err().code, ErrorCode::NotSupported);
}

#[tokio::test]
async fn garbage_and_oversized_frames_drop_only_their_connection() {
    let (_echo, _task, addr) = start("127.0.0.1:0").await;
    let peer = Peer::new(addr.clone(), PeerOptions::default());
    peer.call(header(1), RequestBody::Ping, Bytes::new()).await.unwrap();

    let mut garbage = TcpStream::connect(&addr).await.unwrap();
    garbage.write_all(&[0xAB; 64]).await.unwrap();
    let mut oversized = TcpStream::connect(&addr).await.unwrap();
    let h = FrameHeader { kind: FrameKind::Request, xid: 1, msg_len: u32::MAX, bulk_len: 0, msg_crc: 0, bulk_crc: 0 };
    oversized.write_all(&h.encode()).await.unwrap();
    // A well-formed header whose message is not a Request.
    let mut malformed = TcpStream::connect(&addr).await.unwrap();
    let msg = [0xFFu8; 8];
    let h = FrameHeader {
        kind: FrameKind::Request,
        xid: 1,
        msg_len: 8,
        bulk_len: 0,
        msg_crc: weft_proto::wire::checksum(&msg),
        bulk_crc: 0,
    };
    malformed.write_all(&h.encode()).await.unwrap();
    malformed.write_all(&msg).await.unwrap();

    for s in [&mut garbage, &mut oversized, &mut malformed] {
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read(s, &mut buf))
            .await
            .expect("server must close a bad connection")
            .unwrap_or(0);
        assert_eq!(n, 0, "server closed the bad connection without a reply");
    }
    // The good connection is still served.
    let (b, _) = peer.call(header(2), RequestBody::Ping, Bytes::new()).await.unwrap();
    assert_eq!(b, ReplyBody::Pong);
}

/// Another version's client is told this server's version before its connection drops, and
/// a client meeting another version's server fails at once naming both, instead of resending
/// until its timeout.
#[tokio::test]
async fn another_protocol_version_is_answered_and_named_at_once() {
    let (echo, _task, addr) = start("127.0.0.1:0").await;
    let newer = weft_proto::wire::PROTOCOL_VERSION + 1;
    let mut client = TcpStream::connect(&addr).await.unwrap();
    let mut hello =
        FrameHeader { kind: FrameKind::Request, xid: 1, msg_len: 0, bulk_len: 0, msg_crc: 0, bulk_crc: 0 }.encode();
    hello[4..6].copy_from_slice(&newer.to_be_bytes());
    client.write_all(&hello).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::io::AsyncReadExt::read_to_end(&mut client, &mut answer);
    tokio::time::timeout(Duration::from_secs(5), read).await.expect("the server must close").unwrap();
    assert_eq!(answer.len(), weft_proto::wire::HEADER_BYTES, "one bare header, then the end");
    // Of this build's version, so this side reads it; the newer client would refuse it
    // naming both versions.
    let told = FrameHeader::decode(answer[..].try_into().unwrap()).unwrap();
    assert_eq!((told.kind, told.msg_len, told.bulk_len), (FrameKind::Reply, 0, 0));
    assert_eq!(echo.calls.load(Ordering::SeqCst), 0);

    // A server of another version: it answers every connection with its version.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut answer = FrameHeader::version_answer();
            answer[4..6].copy_from_slice(&newer.to_be_bytes());
            let _ = s.write_all(&answer).await;
        }
    });
    let peer = Peer::new(other.clone(), PeerOptions::default());
    let started = Instant::now();
    let err =
        peer.call_with_timeout(header(1), RequestBody::Ping, Bytes::new(), Duration::from_secs(30)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}: resent instead of giving up", started.elapsed());
    assert_eq!(err.code, ErrorCode::Protocol, "{err}");
    assert!(err.message.contains(&other), "{err}");
    assert!(err.message.contains(&format!("version {newer}")), "{err}");
    assert!(err.message.contains(&format!("speaks {}", newer - 1)), "{err}");
}

#[tokio::test]
async fn requests_wait_and_resend_across_a_server_restart() {
    let (echo, server, addr) = start("127.0.0.1:0").await;
    let peer = Arc::new(Peer::new(
        addr.clone(),
        PeerOptions {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(20),
            ..Default::default()
        },
    ));
    peer.call(header(1), RequestBody::Ping, Bytes::new()).await.unwrap();
    server.shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let calls_before = echo.calls.load(Ordering::SeqCst);
    let pending = {
        let peer = peer.clone();
        tokio::spawn(async move { peer.call(header(2), write_req(2), Bytes::from_static(b"abc")).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (echo2, _task2, _) = start(&addr).await;
    let (body, bulk) = pending.await.unwrap().unwrap();
    assert_eq!(body, ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: 3 })));
    assert_eq!(&bulk[..], b"abc");
    assert_eq!(echo.calls.load(Ordering::SeqCst), calls_before, "the stopped server executed nothing more");
    assert_eq!(echo2.calls.load(Ordering::SeqCst), 1, "the restarted server executed the resent request");
}

#[tokio::test]
async fn a_dead_address_fails_within_the_timeout_naming_it() {
    // Bind then drop to get a port with nobody listening.
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().to_string()
    };
    let peer = Peer::new(addr.clone(), PeerOptions::default());
    let started = Instant::now();
    let err =
        peer.call_with_timeout(header(1), RequestBody::Ping, Bytes::new(), Duration::from_secs(2)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4), "took {:?}", started.elapsed());
    assert_eq!(err.code, ErrorCode::TimedOut);
    assert!(err.message.contains(&addr) && err.message.contains("ping"), "{}", err.message);
}

// ---- The in-process transport (weft_rpc::network) ----

/// Peer options on `network`.
fn on(network: &Arc<Network>) -> PeerOptions {
    PeerOptions { network: Some(network.clone()), ..PeerOptions::default() }
}

/// An Echo server reachable only in-process, under a name no socket has.
fn start_local(network: &Network, name: &str) -> (Arc<Echo>, Arc<Server>, String) {
    let echo = Arc::new(Echo { calls: AtomicU64::new(0) });
    let server = Server::new(echo.clone(), ServerLimits::default());
    let address = format!("in-process-{name}-{}", std::process::id());
    network.register_server(&address, &server);
    (echo, server, address)
}

/// Everything a client can observe of one server: replies, bulks, errors.
async fn observe(peer: Arc<Peer>) -> Vec<Result<(ReplyBody, Bytes), ErrorCode>> {
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let peer = peer.clone();
        tasks.push(tokio::spawn(async move {
            let data = Bytes::from(vec![i as u8; 1000 + i as usize * 997]);
            peer.call(header(i), write_req(i), data).await.map_err(|e| e.code)
        }));
    }
    let mut seen = Vec::new();
    for t in tasks {
        seen.push(t.await.unwrap());
    }
    seen.push(peer.call(header(100), RequestBody::Ping, Bytes::new()).await.map_err(|e| e.code));
    let get_map = RequestBody::Mgs(MgsRequest::GetMap(mgs::GetMap { known_version: 0 }));
    seen.push(peer.call(header(101), get_map, Bytes::new()).await.map_err(|e| e.code));
    seen.push(peer.call(header(102), write_req(102), Bytes::new()).await.map_err(|e| e.code));
    seen
}

#[tokio::test]
async fn in_process_calls_answer_as_tcp_does() {
    let (_echo_tcp, _tcp_server, tcp_addr) = start("127.0.0.1:0").await;
    let network = Network::new();
    let (echo, local_server, local_addr) = start_local(&network, "same-replies");
    let tcp_peer = Arc::new(Peer::new(tcp_addr, on(&network)));
    let local_peer = Arc::new(Peer::new(local_addr, on(&network)));
    assert!(!tcp_peer.is_local() && local_peer.is_local());

    let over_tcp = observe(tcp_peer).await;
    let in_process = observe(local_peer.clone()).await;
    assert_eq!(over_tcp, in_process);
    assert_eq!(in_process[63].as_ref().unwrap().1.len(), 1000 + 63 * 997);
    assert_eq!(in_process[65], Err(ErrorCode::NotSupported));
    assert_eq!(echo.calls.load(Ordering::SeqCst), 66, "ping is answered by the pipeline itself");

    // The bulk is passed, not copied, both ways.
    let data = Bytes::from(vec![7u8; 1 << 20]);
    let (_, back) = local_peer.call(header(200), write_req(200), data.clone()).await.unwrap();
    assert_eq!(back.as_ptr(), data.as_ptr());

    // The account stage saw every request, as over TCP.
    let stats = local_server.stats().snapshot();
    let writes = &stats["ost_write"];
    assert_eq!((writes.samples, writes.errors), (66, 0));
    let echoed: u64 = (0..64u64).map(|i| 2 * (1000 + i * 997)).sum::<u64>() + 2 * (1 << 20);
    assert_eq!(writes.bytes, echoed);
    assert_eq!((stats["ping"].samples, stats["mgs_get_map"].errors), (1, 1));
}

#[tokio::test]
async fn a_server_listening_and_registered_is_reached_in_process() {
    let (echo, server, addr) = start("127.0.0.1:0").await;
    let network = Network::new();
    let peer = Peer::new(addr.clone(), on(&network));
    peer.call(header(1), write_req(1), Bytes::from_static(b"tcp")).await.unwrap();
    network.register_server(&addr, &server);
    assert!(peer.is_local());
    let (body, bulk) = peer.call(header(2), write_req(2), Bytes::from_static(b"local")).await.unwrap();
    assert_eq!((body, &bulk[..]), (ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: 5 })), &b"local"[..]));
    assert_eq!(echo.calls.load(Ordering::SeqCst), 2);
    assert_eq!(server.stats().snapshot()["ost_write"].samples, 2);
}

#[tokio::test]
async fn in_process_calls_to_a_shut_down_server_fail_within_the_timeout() {
    let network = Network::new();
    let (echo, server, addr) = start_local(&network, "shutdown");
    let peer = Peer::new(addr.clone(), on(&network));
    peer.call(header(1), RequestBody::Ping, Bytes::new()).await.unwrap();
    server.shutdown();
    assert!(!peer.is_local());
    let started = Instant::now();
    let err = peer
        .call_with_timeout(header(2), write_req(2), Bytes::from_static(b"x"), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4), "took {:?}", started.elapsed());
    assert_eq!(err.code, ErrorCode::TimedOut);
    assert!(err.message.contains(&addr) && err.message.contains("ost_write"), "{}", err.message);
    assert_eq!(echo.calls.load(Ordering::SeqCst), 0, "the stopped server executed nothing");
    // Registering again after shutdown does nothing: the server stays stopped.
    network.register_server(&addr, &server);
    assert!(!peer.is_local());
}

#[tokio::test]
async fn in_process_requests_wait_and_resend_across_a_server_restart() {
    let (echo, server, addr) = start("127.0.0.1:0").await;
    let network = Network::new();
    network.register_server(&addr, &server);
    let peer = Arc::new(Peer::new(
        addr.clone(),
        PeerOptions {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(20),
            ..on(&network)
        },
    ));
    peer.call(header(1), RequestBody::Ping, Bytes::new()).await.unwrap();
    server.shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pending = {
        let peer = peer.clone();
        tokio::spawn(async move { peer.call(header(2), write_req(2), Bytes::from_static(b"abc")).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (echo2, server2, _) = start(&addr).await;
    network.register_server(&addr, &server2);
    let (body, bulk) = pending.await.unwrap().unwrap();
    assert_eq!(body, ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: 3 })));
    assert_eq!(&bulk[..], b"abc");
    assert_eq!(echo.calls.load(Ordering::SeqCst), 0);
    assert_eq!(echo2.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_in_process_call_times_out_as_a_whole() {
    /// Never answers.
    struct Stuck;
    impl Handler for Stuck {
        fn handle<'a>(
            &'a self,
            _: &'a RequestContext,
            _: weft_rpc::Run,
            _: RequestBody,
            _: Bytes,
        ) -> BoxFuture<'a, (Reply, Bytes)> {
            Box::pin(futures::future::pending())
        }
    }
    let server = Server::new(Arc::new(Stuck), ServerLimits::default());
    let addr = format!("in-process-stuck-{}", std::process::id());
    let network = Network::new();
    network.register_server(&addr, &server);
    let peer = Peer::new(addr, on(&network));
    let started = Instant::now();
    let err =
        peer.call_with_timeout(header(1), write_req(1), Bytes::new(), Duration::from_millis(500)).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

// ---- The bound on a server's connections ----

#[tokio::test]
async fn a_connection_past_the_bound_is_refused_with_a_reason() {
    let echo = Arc::new(Echo { calls: AtomicU64::new(0) });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let limits = ServerLimits { connections_max: 2, ..ServerLimits::default() };
    let server = Server::new(echo.clone(), limits);
    server.serve(listener);
    // Two connections, each answered once: both are open at the server.
    let first = Peer::new(addr.clone(), PeerOptions::default());
    let second = Peer::new(addr.clone(), PeerOptions::default());
    first.call(header(1), RequestBody::Ping, Bytes::new()).await.unwrap();
    second.call(header(2), RequestBody::Ping, Bytes::new()).await.unwrap();
    assert_eq!(server.connections(), 2);

    // A third is answered Busy, naming the bound, and nothing of it runs.
    let third = Peer::new(addr.clone(), PeerOptions::default());
    let err = third.call(header(3), write_req(3), Bytes::from_static(b"x")).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Busy, "{}", err.message);
    assert!(err.message.contains("2 connections") && err.message.contains("SERVER_CONNECTIONS_MAX"), "{}", err.message);
    assert_eq!(echo.calls.load(Ordering::SeqCst), 0);

    // Once one of the two closes, a new connection is served.
    drop(first);
    for _ in 0..500 {
        if server.connections() < 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.connections(), 1);
    let fourth = Peer::new(addr, PeerOptions::default());
    let (body, bulk) = fourth.call(header(4), write_req(4), Bytes::from_static(b"late")).await.unwrap();
    assert_eq!((body, &bulk[..]), (ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: 4 })), &b"late"[..]));
}
