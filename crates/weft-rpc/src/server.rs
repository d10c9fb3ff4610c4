//! The server side: accepts connections and runs every request through one pipeline,
//!
//! ```text
//! read frame ─▶ decode ─▶ authorize ─▶ schedule (NRS) ─▶ execute ─▶ reply ─▶ account
//! ```
//!
//! A frame that cannot be decoded (bad magic, oversized, checksum of the message wrong,
//! malformed message) drops that connection only; every other connection keeps being served.
//! Requests on one connection execute concurrently, bounded by `requests_in_flight_max`; past
//! that the connection stops being read (backpressure through TCP).

use crate::frame::{read_frame, write_frame};
use crate::stats::Stats;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use weft_proto::msg::{Reply, Request, RequestBody, RequestHeader};
use weft_proto::wire::{decode_message, encode_message, FrameKind};
use weft_proto::{ErrorCode, WeftError};

/// What the pipeline knows about a request when it reaches the executing service.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub header: RequestHeader,
    pub peer: SocketAddr,
    pub opcode: &'static str,
}

/// The execute stage: the services a server process hosts, behind one router.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, ctx: RequestContext, body: RequestBody, bulk: Bytes) -> BoxFuture<'static, (Reply, Bytes)>;
}

#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Requests executing at once per connection before the server stops reading it.
    pub requests_in_flight_max: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits { requests_in_flight_max: weft_proto::limits::CONNECTION_IN_FLIGHT_MAX }
    }
}

pub struct Server {
    handler: Arc<dyn Handler>,
    limits: ServerLimits,
    stats: Arc<Stats>,
    /// Set once by [`Server::shutdown`]; the accept loop and every connection watch it.
    stopping: tokio::sync::watch::Sender<bool>,
}

impl Server {
    pub fn new(handler: Arc<dyn Handler>, limits: ServerLimits) -> Arc<Server> {
        let (stopping, _) = tokio::sync::watch::channel(false);
        Arc::new(Server { handler, limits, stats: Arc::new(Stats::default()), stopping })
    }

    /// Stops accepting and closes every connection (requests executing finish first).
    pub fn shutdown(&self) {
        self.stopping.send_replace(true);
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Serves `listener` until [`Server::shutdown`].
    pub fn serve(self: &Arc<Self>, listener: TcpListener) -> tokio::task::JoinHandle<()> {
        let server = self.clone();
        let mut stopping = self.stopping.subscribe();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    _ = async { let _ = stopping.wait_for(|s| *s).await; } => return,
                };
                match accepted {
                    Ok((stream, peer)) => {
                        let server = server.clone();
                        tokio::spawn(async move { server.connection(stream, peer).await });
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: pause instead of spinning.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                }
            }
        })
    }

    async fn connection(self: Arc<Self>, stream: TcpStream, peer: SocketAddr) {
        stream.set_nodelay(true).ok();
        let (mut reader, writer) = stream.into_split();
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        let in_flight = Arc::new(Semaphore::new(self.limits.requests_in_flight_max));
        let mut stopping = self.stopping.subscribe();
        loop {
            let read = tokio::select! {
                r = read_frame(&mut reader) => r,
                _ = async { let _ = stopping.wait_for(|s| *s).await; } => {
                    let _ = writer.lock().await.shutdown().await;
                    return;
                }
            };
            let frame = match read {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    if e.code == ErrorCode::Protocol {
                        tracing::warn!("dropping connection from {peer}: {}", e.message);
                    }
                    return;
                }
            };
            if frame.header.kind != FrameKind::Request {
                tracing::warn!("dropping connection from {peer}: unexpected frame kind {:?}", frame.header.kind);
                return;
            }
            let request: Request = match decode_message(&frame.msg) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("dropping connection from {peer}: {}", e.message);
                    return;
                }
            };
            let Ok(permit) = in_flight.clone().acquire_owned().await else { return };
            let server = self.clone();
            let writer = writer.clone();
            let xid = frame.header.xid;
            tokio::spawn(async move {
                let started = Instant::now();
                let opcode = request.body.opcode_name();
                let bulk_in = frame.bulk.len() as u64;
                let (reply, bulk) = if frame.bulk_ok {
                    let ctx = RequestContext { header: request.header, peer, opcode };
                    server.execute(ctx, request.body, frame.bulk).await
                } else {
                    (Err(WeftError::new(ErrorCode::Checksum, "request data arrived corrupted")), Bytes::new())
                };
                let ok = reply.is_ok();
                let bytes = bulk_in + bulk.len() as u64;
                let msg = match encode_message(&reply) {
                    Ok(m) => m,
                    Err(e) => encode_message::<Reply>(&Err(e)).unwrap_or_default(),
                };
                let sent = {
                    let mut w = writer.lock().await;
                    write_frame(&mut *w, FrameKind::Reply, xid, &msg, &bulk).await
                };
                drop(permit);
                server.stats.record(opcode, started.elapsed(), ok && sent.is_ok(), bytes);
            });
        }
    }

    /// Authorize, schedule, execute. Authorization of identities beyond mode bits and
    /// scheduling policies other than FIFO (Lustre's NRS: round-robin, token bucket filter)
    /// plug in here.
    async fn execute(&self, ctx: RequestContext, body: RequestBody, bulk: Bytes) -> (Reply, Bytes) {
        if let RequestBody::Ping = body {
            return (Ok(weft_proto::msg::ReplyBody::Pong), Bytes::new());
        }
        self.handler.handle(ctx, body, bulk).await
    }
}
