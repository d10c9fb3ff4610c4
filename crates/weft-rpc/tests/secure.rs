//! Node authentication over real TCP: a server that requires the shared key serves a peer
//! that holds it (sealed, bulk both ways), refuses one without it or with another key with a
//! sentence that says which, and drops hostile connections and frames (random bytes, broken
//! handshakes, sealed records changed on the way), counting each, while it goes on serving.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weft_proto::msg::*;
use weft_proto::wire::{encode_message, FrameKind};
use weft_proto::{ErrorCode, Fid, WeftError};
use weft_rpc::secure::seal::SealedWriter;
use weft_rpc::secure::{handshake, Flavor, Protection, Sealing, SharedKey};
use weft_rpc::{Handler, Peer, PeerOptions, RequestContext, Server, ServerLimits};

/// How long any one step may take before the test fails rather than hangs.
const STEP_WAIT: Duration = Duration::from_secs(20);

/// Answers an OST write with its own data as the reply's bulk.
struct Echo;

impl Handler for Echo {
    fn handle<'a>(
        &'a self,
        _: &'a RequestContext,
        _: weft_rpc::Run,
        body: RequestBody,
        bulk: Bytes,
    ) -> BoxFuture<'a, (Reply, Bytes)> {
        Box::pin(async move {
            match body {
                RequestBody::Ost { op: OstRequest::Write(_), .. } => {
                    let done = ost::WriteDone { len: bulk.len() as u32, transno: 0, committed: 0, quota_tight: false };
                    (Ok(ReplyBody::Ost(OstReply::Written(done))), bulk)
                }
                RequestBody::Ping => (Ok(ReplyBody::Pong), Bytes::new()),
                _ => (Err(WeftError::new(ErrorCode::NotSupported, "writes only")), Bytes::new()),
            }
        })
    }
}

async fn start(key: Option<&SharedKey>) -> (Arc<Server>, String) {
    let limits = ServerLimits { key: key.cloned().map(Arc::new), ..ServerLimits::default() };
    let server = Server::new(Arc::new(Echo), limits);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    server.serve(listener);
    (server, addr)
}

fn peer(addr: &str, key: Option<&SharedKey>) -> Peer {
    let opts = PeerOptions {
        key: key.cloned().map(Arc::new),
        request_timeout: STEP_WAIT,
        connect_timeout: Duration::from_secs(5),
        ..PeerOptions::default()
    };
    Peer::new(addr, opts)
}

fn write_body() -> RequestBody {
    let op = ost::Write { fid: Fid::new(1, 1, 0), offset: 0, sync: false, owner: None, extents: Vec::new() };
    RequestBody::Ost { ost: 0, op: OstRequest::Write(op) }
}

/// Sends `data` as a write's bulk and checks it comes back whole.
async fn echo(peer: &Peer, data: &[u8]) -> Result<(), WeftError> {
    let (reply, bulk) = peer.call(RequestHeader::default(), write_body(), Bytes::copy_from_slice(data)).await?;
    assert!(matches!(reply, ReplyBody::Ost(OstReply::Written(w)) if w.len as usize == data.len()), "{reply:?}");
    assert!(bulk == data, "{} bytes came back different", data.len());
    Ok(())
}

fn counts(server: &Server) -> Vec<(&'static str, u64)> {
    server.exports().auth().snapshot().to_vec()
}

fn count(server: &Server, reason: &str) -> u64 {
    counts(server).into_iter().find(|(r, _)| *r == reason).map(|(_, n)| n).unwrap_or(0)
}

/// Waits until the server counted `n` refusals for `reason` (it counts after the client
/// may have seen the connection close).
async fn wait_count(server: &Server, reason: &str, n: u64) {
    let start = Instant::now();
    while count(server, reason) < n {
        assert!(start.elapsed() < STEP_WAIT, "{reason}: {:?}, wanted {n}", counts(server));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[tokio::test]
async fn a_peer_with_the_key_is_served_sealed_and_one_without_is_refused_saying_why() {
    let key = SharedKey::generate(Flavor::Skpi).unwrap();
    let (server, addr) = start(Some(&key)).await;
    let good = peer(&addr, Some(&key));
    for len in [0, 1, 65_519, 65_520, (1 << 20) + 3] {
        echo(&good, &data(len)).await.unwrap();
    }

    let started = Instant::now();
    let e = echo(&peer(&addr, None), b"x").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotAuthenticated, "{e:?}");
    assert!(e.message.contains("requires its shared key"), "{}", e.message);
    assert!(!e.message.contains(&key.id_hex()), "a client without the key was told the key's id");
    assert!(started.elapsed() < Duration::from_secs(5), "a refused peer kept resending");
    wait_count(&server, "no_key", 1).await;

    let other = SharedKey::generate(Flavor::Skpi).unwrap();
    let e = echo(&peer(&addr, Some(&other)), b"x").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotAuthenticated, "{e:?}");
    assert!(e.message.contains("is not this file system's"), "{}", e.message);
    assert!(e.message.contains(&other.id_hex()) && !e.message.contains(&key.id_hex()), "{}", e.message);
    wait_count(&server, "wrong_key", 1).await;

    // The same key asking only for authentication at connect is given the server's skpi.
    let weaker = SharedKey::parse(&key.to_file_text().replace("flavor = skpi", "flavor = skn"), "k").unwrap();
    let mut raw = TcpStream::connect(&addr).await.unwrap();
    assert!(matches!(handshake::client(&mut raw, &weaker, &addr).await.unwrap(), Protection::Sealed(_)));
    echo(&peer(&addr, Some(&weaker)), &data(70_000)).await.unwrap();
    echo(&good, b"still served").await.unwrap();
}

#[tokio::test]
async fn a_key_proved_at_connect_only_and_a_server_without_a_key() {
    let key = SharedKey::generate(Flavor::Skn).unwrap();
    let (_server, addr) = start(Some(&key)).await;
    let mut raw = TcpStream::connect(&addr).await.unwrap();
    assert!(matches!(handshake::client(&mut raw, &key, &addr).await.unwrap(), Protection::Plain));
    echo(&peer(&addr, Some(&key)), &data(200_000)).await.unwrap();
    let e = echo(&peer(&addr, None), b"x").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotAuthenticated, "{e:?}");

    let (_open, open_addr) = start(None).await;
    let e = echo(&peer(&open_addr, Some(&key)), b"x").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotAuthenticated, "{e:?}");
    assert!(e.message.contains("takes no key"), "{}", e.message);
    echo(&peer(&open_addr, None), b"plain").await.unwrap();
}

/// A pseudo-random generator for the fuzzing (no dependency, reproducible by seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Sends `bytes` on a new connection and waits until the server closes it.
async fn hostile(addr: &str, bytes: &[u8]) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(bytes).await;
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(STEP_WAIT, s.read_to_end(&mut sink)).await.expect("the server closed it");
}

/// A whole sealed frame (a write with `bulk`) as it would go on a connection whose
/// handshake gave `state`, from the connection's first record.
async fn sealed_frame(sealing: Sealing, bulk: &[u8]) -> Vec<u8> {
    let request = Request { header: RequestHeader::default(), body: write_body() };
    let msg = encode_message(&request).unwrap();
    let mut w = SealedWriter::new(Vec::new(), sealing.state, sealing.send_from);
    weft_rpc::frame::write_frame(&mut w, FrameKind::Request, 1, &msg, &Bytes::copy_from_slice(bulk)).await.unwrap();
    w.into_inner()
}

#[tokio::test]
async fn hostile_connections_and_frames_are_dropped_and_counted_and_the_server_goes_on() {
    let key = SharedKey::generate(Flavor::Skpi).unwrap();
    let (server, addr) = start(Some(&key)).await;
    let good = peer(&addr, Some(&key));
    echo(&good, b"before").await.unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

    // Random bytes: neither a frame nor a hello.
    for round in 0..20 {
        let len = 1 + (rng.next() % 300) as usize;
        let mut junk = rng.bytes(len);
        if junk.starts_with(b"WFT") {
            junk[0] = 0;
        }
        hostile(&addr, &junk).await;
        wait_count(&server, "handshake", round + 1).await;
    }
    // A hello with the right key id whose Noise message is garbage, or cut short.
    let mut hello = Vec::new();
    hello.extend_from_slice(&handshake::KEY_MAGIC.to_be_bytes());
    hello.extend_from_slice(&weft_proto::wire::PROTOCOL_VERSION.to_be_bytes());
    hello.extend_from_slice(&[Flavor::Skpi as u8, 0]);
    let id: Vec<u8> = (0..8).map(|i| u8::from_str_radix(&key.id_hex()[i * 2..i * 2 + 2], 16).unwrap()).collect();
    hello.extend_from_slice(&id);
    let before = count(&server, "handshake");
    let mut forged = hello.clone();
    forged.extend_from_slice(&48u16.to_be_bytes());
    forged.extend_from_slice(&rng.bytes(48));
    hostile(&addr, &forged).await;
    let mut cut = hello.clone();
    cut.extend_from_slice(&48u16.to_be_bytes());
    cut.extend_from_slice(&rng.bytes(20));
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&cut).await.unwrap();
    drop(s);
    wait_count(&server, "handshake", before + 2).await;

    // Sealed frames changed on the way, one byte anywhere: each fails to open, its
    // connection is dropped, and nothing runs.
    for round in 0..30u64 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let Protection::Sealed(sealing) = handshake::client(&mut s, &key, &addr).await.unwrap() else {
            panic!("not sealed")
        };
        let len = (rng.next() % 100_000) as usize;
        let mut frame = sealed_frame(sealing, &data(len)).await;
        let at = (rng.next() % frame.len() as u64) as usize;
        frame[at] ^= 1 << (rng.next() % 8);
        let _ = s.write_all(&frame).await;
        // A changed length prefix leaves the server waiting for the rest of a record: the
        // end of the stream ends that wait.
        let _ = s.shutdown().await;
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(STEP_WAIT, s.read_to_end(&mut sink)).await.expect("the server closed it");
        assert!(sink.is_empty(), "round {round}: the server answered a changed frame");
    }
    let dropped = count(&server, "frame");
    assert!(dropped >= 25, "only {dropped} of 30 changed frames counted: {:?}", counts(&server));

    // A whole sealed frame replayed on another connection (whose handshake made other
    // keys) does not open either.
    let mut first = TcpStream::connect(&addr).await.unwrap();
    let Protection::Sealed(sealing) = handshake::client(&mut first, &key, &addr).await.unwrap() else { panic!() };
    let frame = sealed_frame(sealing, b"replayed").await;
    let mut second = TcpStream::connect(&addr).await.unwrap();
    handshake::client(&mut second, &key, &addr).await.unwrap();
    second.write_all(&frame).await.unwrap();
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(STEP_WAIT, second.read_to_end(&mut sink)).await.expect("the server closed it");
    assert!(sink.is_empty(), "the server answered a replayed frame");
    wait_count(&server, "frame", dropped + 1).await;
    drop(first);

    echo(&good, b"after").await.unwrap();
}

/// A stream that keeps a copy of what is written to it.
struct Recorder {
    inner: TcpStream,
    written: Vec<u8>,
}

impl tokio::io::AsyncRead for Recorder {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Recorder {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = polled {
            self.written.extend_from_slice(&buf[..n]);
        }
        polled
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The hello and first message of a real client's handshake with the server at `addr`, as
/// someone on the path would have recorded them.
async fn recorded_opening(addr: &str, key: &SharedKey) -> Vec<u8> {
    let mut r = Recorder { inner: TcpStream::connect(addr).await.unwrap(), written: Vec::new() };
    handshake::client(&mut r, key, addr).await.unwrap();
    // The hello (16), the length (2) and message 1 (48); the confirmation follows.
    r.written[..16 + 2 + 48].to_vec()
}

/// Sends `bytes` then a plain Ping frame, and reads everything the server sends back.
async fn replay(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let ping = encode_message(&Request { header: RequestHeader::default(), body: RequestBody::Ping }).unwrap();
    let _ = weft_rpc::frame::write_frame(&mut s, FrameKind::Request, 1, &ping, &Bytes::new()).await;
    let _ = s.shutdown().await;
    let mut back = Vec::new();
    let _ = tokio::time::timeout(STEP_WAIT, s.read_to_end(&mut back)).await.expect("the server closed it");
    back
}

fn frames_in(bytes: &[u8]) -> usize {
    bytes.windows(4).filter(|w| *w == b"WFT1").count()
}

/// Someone who recorded a client's opening cannot use it: replayed, the server waits for the
/// confirmation only the key can make (also with flavor skn, where frames then go plain);
/// with the flavor in the hello lowered, the handshake itself fails.
#[tokio::test]
async fn a_recorded_opening_replayed_or_downgraded_gets_nothing_run() {
    for flavor in [Flavor::Skn, Flavor::Skpi] {
        let key = SharedKey::generate(flavor).unwrap();
        let (server, addr) = start(Some(&key)).await;
        let opening = recorded_opening(&addr, &key).await;
        let before = count(&server, "handshake");
        let back = replay(&addr, &opening).await;
        assert_eq!(frames_in(&back), 0, "{flavor}: a replayed opening got a frame answered");
        wait_count(&server, "handshake", before + 1).await;

        let mut lowered = opening.clone();
        lowered[6] = Flavor::Skn as u8;
        if flavor == Flavor::Skpi {
            let back = replay(&addr, &lowered).await;
            // Refused with a reply (the handshake failed), never served.
            assert_eq!(frames_in(&back), 1, "{flavor}: {back:?}");
            wait_count(&server, "handshake", before + 2).await;
        }
        echo(&peer(&addr, Some(&key)), b"still served").await.unwrap();
    }
}
