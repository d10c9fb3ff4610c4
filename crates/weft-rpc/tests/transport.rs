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
use weft_rpc::{Handler, Peer, PeerOptions, RequestContext, Server, ServerLimits};

/// Echoes the bulk of an OST write back as a read reply; counts calls.
struct Echo {
    calls: AtomicU64,
}

impl Handler for Echo {
    fn handle(&self, _ctx: RequestContext, body: RequestBody, bulk: Bytes) -> BoxFuture<'static, (Reply, Bytes)> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            match body {
                RequestBody::Ost { op: OstRequest::Write { .. }, .. } => {
                    (Ok(ReplyBody::Ost(OstReply::Read { len: bulk.len() as u32 })), bulk)
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
        op: OstRequest::Write { fid: weft_proto::Fid::new(1, n as u32, 0), offset: 0, sync: false },
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
            assert_eq!(body, ReplyBody::Ost(OstReply::Read { len: data.len() as u32 }));
            assert_eq!(bulk, data);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (body, _) = peer.call(header(100), RequestBody::Ping, Bytes::new()).await.unwrap();
    assert_eq!(body, ReplyBody::Pong);
    let err = peer.call(header(101), RequestBody::Mgs(MgsRequest::GetMap { known_version: 0 }), Bytes::new()).await;
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

#[tokio::test]
async fn requests_wait_and_resend_across_a_server_restart() {
    let (echo, server, addr) = start("127.0.0.1:0").await;
    let peer = Arc::new(Peer::new(
        addr.clone(),
        PeerOptions { connect_timeout: Duration::from_secs(1), request_timeout: Duration::from_secs(20) },
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
    assert_eq!(body, ReplyBody::Ost(OstReply::Read { len: 3 }));
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
