//! Requests of a connection that closed, and of a client evicted, while a scheduling
//! policy held them, over real TCP. A TBF rule (`opcode={ost_write} rate=1`, three tokens
//! saved up) holds the fourth write of a raw connection; what happens to it decides whether
//! an old copy can land on top of newer data (the stale write the network simulation found).

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use weft_proto::msg::*;
use weft_proto::wire::{decode_message, encode_message, FrameKind};
use weft_proto::{ErrorCode, Fid};
use weft_rpc::frame::{read_frame, write_frame};
use weft_rpc::schedule::Schedulers;
use weft_rpc::{Exports, Handler, RequestContext, Server, ServerLimits};

/// How long any one step may take before the test fails rather than hangs.
const STEP_WAIT_S: u64 = 20;

/// Runs OST writes: remembers each one's data, in the order they ran.
#[derive(Default)]
struct Writes {
    ran: Mutex<Vec<Vec<u8>>>,
}

impl Writes {
    fn ran(&self) -> Vec<String> {
        self.ran.lock().unwrap().iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect()
    }
}

impl Handler for Writes {
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
                    self.ran.lock().unwrap().push(bulk.to_vec());
                    (
                        Ok(ReplyBody::Ost(OstReply::Written(ost::WriteDone {
                            len: bulk.len() as u32,
                            transno: 0,
                            committed: 0,
                            quota_tight: false,
                        }))),
                        Bytes::new(),
                    )
                }
                _ => (Err(weft_proto::WeftError::new(ErrorCode::NotSupported, "writes only")), Bytes::new()),
            }
        })
    }
}

/// A server whose OST writes go through `opcode={ost_write} rate=1`.
async fn start() -> (Arc<Writes>, Arc<Server>, String) {
    let writes = Arc::new(Writes::default());
    let schedulers = Arc::new(Schedulers::default());
    let server = Server::with_parts(writes.clone(), ServerLimits::default(), Arc::new(Exports::new()), schedulers);
    server.schedulers().set_policy(Service::OstIo, "tbf opcode").unwrap();
    server.schedulers().tbf(Service::OstIo).unwrap().command("start slow opcode={ost_write} rate=1").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    server.serve(listener);
    (writes, server, addr)
}

async fn send_write(stream: &mut TcpStream, client_id: u64, xid: u64, data: &str) {
    let request = Request {
        header: RequestHeader { client_id, request_id: xid, ..Default::default() },
        body: RequestBody::Ost {
            ost: 0,
            op: OstRequest::Write(ost::Write {
                fid: Fid::new(1, 1, 0),
                offset: 0,
                sync: false,
                owner: None,
                extents: Vec::new(),
            }),
        },
    };
    let msg = encode_message(&request).unwrap();
    write_frame(stream, FrameKind::Request, xid, &msg, &Bytes::from(data.to_string())).await.unwrap();
}

/// Reads frames until `xid` is answered or said held: (the kind of that frame, the reply).
async fn until(stream: &mut TcpStream, xid: u64, kind: FrameKind) -> Option<Reply> {
    let wait = Duration::from_secs(STEP_WAIT_S);
    loop {
        let frame = tokio::time::timeout(wait, read_frame(stream)).await.expect("the server answered in time");
        let frame = frame.unwrap().expect("the connection stays open");
        if frame.header.xid == xid && frame.header.kind == kind {
            return (kind == FrameKind::Reply).then(|| decode_message::<Reply>(&frame.msg).unwrap());
        }
    }
}

/// Sends four writes on a new connection; returns once the fourth is held by the rule.
async fn four_writes_the_last_held(addr: &str, client_id: u64, tag: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    for xid in 1..=4 {
        send_write(&mut stream, client_id, xid, &format!("{tag}{xid}")).await;
    }
    until(&mut stream, 4, FrameKind::Held).await;
    stream
}

#[tokio::test]
async fn a_held_request_of_a_closed_connection_is_not_run() {
    let (writes, _server, addr) = start().await;
    let old = four_writes_the_last_held(&addr, 7, "old").await;
    // The sender's connection breaks while its write is held (it will resend elsewhere).
    drop(old);
    // A write on an open connection, of the same class: it runs after the held one's turn.
    let mut open = TcpStream::connect(&addr).await.unwrap();
    send_write(&mut open, 8, 1, "control").await;
    let reply = until(&mut open, 1, FrameKind::Reply).await.unwrap();
    assert_eq!(
        reply,
        Ok(ReplyBody::Ost(OstReply::Written(ost::WriteDone { len: 7, transno: 0, committed: 0, quota_tight: false })))
    );
    // The three that had tokens ran; the held copy of the closed connection never did.
    assert_eq!(writes.ran(), ["old1", "old2", "old3", "control"]);
}

#[tokio::test]
async fn a_held_request_of_a_client_evicted_meanwhile_is_answered_evicted() {
    let (writes, server, addr) = start().await;
    let mut stream = four_writes_the_last_held(&addr, 9, "w").await;
    server.exports().evict(9, "did not answer a lock callback".into());
    let reply = until(&mut stream, 4, FrameKind::Reply).await.unwrap();
    let error = reply.unwrap_err();
    assert_eq!(error.code, ErrorCode::Evicted, "{}", error.message);
    assert!(error.message.contains("did not answer a lock callback"), "{}", error.message);
    assert_eq!(writes.ran(), ["w1", "w2", "w3"]);
}
