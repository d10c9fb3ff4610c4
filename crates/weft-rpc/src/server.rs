//! The server's transport: accepts connections, reads and decodes each request, runs it
//! through the [`Pipeline`] (authorize → schedule → execute → account) as a task of its own,
//! and writes the reply.
//!
//! A frame that cannot be decoded (bad magic, oversized, checksum of the message wrong,
//! malformed message) drops that connection only; every other connection keeps being served.
//! A connection's requests run concurrently, each as its own task, so a request the
//! scheduler holds never stops the connection from being read. The requests read and not
//! yet answered on one connection are bounded by `requests_unanswered_max`, a bound on
//! memory, not a scheduling decision: past it the connection stops being read
//! (backpressure through TCP).
//!
//! A server registered in a [`Network`](crate::Network) is also reached in-process (see
//! [`crate::network`]): the request skips the read/decode and reply/encode stages and enters
//! the same pipeline as a request read from a connection; or through the network's
//! [`Wire`](crate::Wire), on connections the wire keeps ([`Endpoint`]).
//!
//! Each connection has a [`ConnectionState`], closed as its reader sees it end: the
//! pipeline does not run a request of a closed connection (see [`crate::pipeline`]).
//!
//! Callbacks and eviction: every server has [`Exports`] (its own, or one given to
//! [`Server::with_exports`] so that the handler can hold it too). Each connection notes in
//! it, for every request with a non-zero `client_id`, that it is now the way to that client;
//! [`Exports::callback`] writes Callback frames on that connection and the connection loop
//! hands the CallbackReply frames that come back to the waiting callback (any other frame
//! kind from a client drops the connection, as a malformed frame does). The pipeline answers
//! every request of a client [`Exports::evict`]ed, except Ping, with
//! [`ErrorCode::Evicted`] without executing it, over TCP and in-process alike.

use crate::account::Account;
use crate::authorize::Authorize;
use crate::context::{ConnectionState, Handler, Origin, RequestContext, LOCAL_PEER};
use crate::exports::Exports;
use crate::frame::{read_frame, write_frame, ReadError};
use crate::limits::{
    ACCEPT_ERROR_PAUSE_MS, HANDSHAKES_MAX, HANDSHAKE_TIMEOUT_MS, REFUSED_CONNECTION_WAIT_MS, SERVER_CONNECTIONS_MAX,
};
use crate::pipeline::Pipeline;
use crate::schedule::Schedulers;
use crate::secure::{handshake, Protection, Refusal, SharedKey};
use crate::stats::Stats;
use crate::wire::Endpoint;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use weft_proto::lock::CallbackAnswer;
use weft_proto::msg::{Reply, Request};
use weft_proto::wire::{decode_message, encode_message, FrameError, FrameHeader, FrameKind, MAGIC};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// A future polled by its caller that, dropped before it finished, finishes as a task of
/// `rt` instead of being cancelled where it stood.
struct FinishOnDrop<F: Future<Output = ()> + Send + 'static> {
    task: Option<std::pin::Pin<Box<F>>>,
    rt: tokio::runtime::Handle,
}

impl<F: Future<Output = ()> + Send + 'static> Future for FinishOnDrop<F> {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let Some(task) = self.task.as_mut() else { return std::task::Poll::Ready(()) };
        let done = task.as_mut().poll(cx);
        if done.is_ready() {
            self.task = None;
        }
        done
    }
}

impl<F: Future<Output = ()> + Send + 'static> Drop for FinishOnDrop<F> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            // A runtime shutting down drops the task: the process is ending anyway.
            drop(self.rt.spawn(task));
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Requests read and not yet answered per connection before the server stops reading it.
    pub requests_unanswered_max: usize,
    /// Connections open at once; one past it is answered `Busy` and closed.
    pub connections_max: usize,
    /// The shared key every connection must prove ([`crate::secure`]); by default the
    /// process's ([`crate::secure::process_key`]). None: connections need no key.
    pub key: Option<Arc<SharedKey>>,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            requests_unanswered_max: weft_proto::limits::CONNECTION_IN_FLIGHT_MAX,
            connections_max: SERVER_CONNECTIONS_MAX,
            key: crate::secure::process_key(),
        }
    }
}

pub struct Server {
    pipeline: Pipeline,
    limits: ServerLimits,
    exports: Arc<Exports>,
    /// Set once by [`Server::shutdown`]; the accept loop and every connection watch it.
    stopping: tokio::sync::watch::Sender<bool>,
    /// The runtime in-process requests execute on: the server's, as a connection's would.
    runtime: OnceLock<tokio::runtime::Handle>,
    /// TCP connections open now (bounded by `limits.connections_max`).
    connections: Arc<AtomicUsize>,
    /// Key handshakes under way (bounded by [`HANDSHAKES_MAX`]).
    handshakes: Arc<Semaphore>,
}

impl Server {
    pub fn new(handler: Arc<dyn Handler>, limits: ServerLimits) -> Arc<Server> {
        Server::with_exports(handler, limits, Arc::new(Exports::new()))
    }

    /// A server whose clients are `exports`: made before the server so that the handler (the
    /// lock manager in it) can call clients back and evict them.
    pub fn with_exports(handler: Arc<dyn Handler>, limits: ServerLimits, exports: Arc<Exports>) -> Arc<Server> {
        Server::with_parts(handler, limits, exports, Arc::new(Schedulers::default()))
    }

    /// A server whose clients are `exports` and whose services are scheduled by
    /// `schedulers`: both made before the server so that the handler can reach them (the
    /// lock manager calls clients back; the parameter tree switches policies).
    pub fn with_parts(
        handler: Arc<dyn Handler>,
        limits: ServerLimits,
        exports: Arc<Exports>,
        schedulers: Arc<Schedulers>,
    ) -> Arc<Server> {
        let (stopping, _) = tokio::sync::watch::channel(false);
        Arc::new(Server {
            pipeline: Pipeline::new(handler, Authorize::new(exports.clone()), schedulers),
            limits,
            exports,
            stopping,
            runtime: OnceLock::new(),
            connections: Arc::default(),
            handshakes: Arc::new(Semaphore::new(HANDSHAKES_MAX)),
        })
    }

    /// Stops accepting and closes every connection (requests executing finish first), and
    /// stops being reachable in-process: later in-process calls fail as against a dead server
    /// (the [`Network`](crate::Network) no longer hands it out).
    pub fn shutdown(&self) {
        self.stopping.send_replace(true);
    }

    /// Remembers the runtime this is called from as the one in-process requests finish on
    /// when their caller gives up (the server's, as a connection's would). Called by
    /// [`Network::register_server`](crate::Network::register_server).
    pub(crate) fn note_runtime(&self) {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let _ = self.runtime.set(rt);
        }
    }

    /// Whether [`Server::shutdown`] was called.
    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.pipeline.stats().clone()
    }

    /// The schedulers of this server's services (their policies can be switched).
    pub fn schedulers(&self) -> &Schedulers {
        self.pipeline.schedulers()
    }

    /// Adds an account stage: `account` learns of every request answered from now on.
    pub fn add_account(&self, account: Arc<dyn Account>) {
        self.pipeline.add_account(account);
    }

    /// This server's clients: callback routes and evictions.
    pub fn exports(&self) -> Arc<Exports> {
        self.exports.clone()
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
                        let max = server.limits.connections_max;
                        if server.connections.fetch_add(1, Ordering::AcqRel) >= max {
                            server.connections.fetch_sub(1, Ordering::AcqRel);
                            tracing::warn!(
                                "refusing connection from {peer}: {max} connections open (the bound, SERVER_CONNECTIONS_MAX)"
                            );
                            let busy = WeftError::new(
                                ErrorCode::Busy,
                                format!(
                                    "the server has {max} connections open, its bound (SERVER_CONNECTIONS_MAX): try again later"
                                ),
                            );
                            tokio::spawn(refuse(stream, busy));
                            continue;
                        }
                        let open = OpenConnection(server.connections.clone());
                        let server = server.clone();
                        tokio::spawn(async move {
                            server.connection(stream, peer).await;
                            drop(open);
                        });
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: pause instead of spinning.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(ACCEPT_ERROR_PAUSE_MS)).await;
                    }
                }
            }
        })
    }

    /// The handshake a server with a key requires before anything else: Some(how the
    /// connection is protected), or None for a connection refused (answered, counted and
    /// logged here) or gone.
    async fn authenticate(&self, stream: TcpStream, peer: SocketAddr) -> Option<(TcpStream, Protection)> {
        let Some(key) = &self.limits.key else { return Some((stream, Protection::Plain)) };
        let counters = self.exports.auth();
        // Connections that proved nothing yet are bounded apart from the others, so that a
        // flood of them cannot take the slots of clients that hold the key.
        let Ok(_permit) = self.handshakes.clone().try_acquire_owned() else {
            counters.refused(Refusal::Handshake);
            tracing::warn!("dropping connection from {peer}: {HANDSHAKES_MAX} key handshakes under way (the bound)");
            return None;
        };
        let mut stream = stream;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(HANDSHAKE_TIMEOUT_MS);
        let mut first = [0u8; 4];
        let mut got = 0;
        while got < first.len() {
            match tokio::time::timeout_at(deadline, stream.read(&mut first[got..])).await {
                Ok(Ok(n)) if n > 0 => got += n,
                // Closed, failed or silent: a connection that sent nothing is no one's
                // attempt (a probe of the port); one cut short in its first bytes is a
                // failed one.
                _ if got == 0 => return None,
                _ => {
                    counters.refused(Refusal::Handshake);
                    tracing::warn!("dropping connection from {peer}: it sent {got} bytes, not a key handshake");
                    return None;
                }
            }
        }
        match u32::from_be_bytes(first) {
            handshake::KEY_MAGIC => {}
            MAGIC => {
                counters.refused(Refusal::NoKey);
                tracing::warn!(
                    "refusing connection from {peer}: it has no key (this file system requires key {})",
                    key.id_hex()
                );
                let e = WeftError::new(
                    ErrorCode::NotAuthenticated,
                    format!(
                        "this file system requires its shared key (flavor {}): give the node its key file (--key FILE, -o skpath=FILE, or {})",
                        key.flavor(),
                        crate::secure::KEY_FILE_ENV
                    ),
                );
                refuse_unkeyed(stream, first, e).await;
                return None;
            }
            other => {
                counters.refused(Refusal::Handshake);
                tracing::warn!(
                    "dropping connection from {peer}: it began with {other:#010x}, neither a key handshake nor a frame"
                );
                return None;
            }
        }
        match tokio::time::timeout_at(deadline, handshake::server(&mut stream, key)).await {
            Ok(Ok(protection)) => Some((stream, protection)),
            Ok(Err((why, e, answer))) => {
                // Counted before it is answered: whoever reads the answer sees the count.
                counters.refused(why);
                tracing::warn!("refusing connection from {peer} (key {}): {}", key.id_hex(), e.message);
                if answer {
                    handshake::answer(&mut stream, &e).await;
                }
                None
            }
            Err(_) => {
                counters.refused(Refusal::Handshake);
                tracing::warn!("dropping connection from {peer}: no key handshake within {HANDSHAKE_TIMEOUT_MS} ms");
                None
            }
        }
    }

    async fn connection(self: Arc<Self>, stream: TcpStream, peer: SocketAddr) {
        stream.set_nodelay(true).ok();
        let Some((stream, protection)) = self.authenticate(stream, peer).await else { return };
        let (mut reader, writer) = crate::secure::split(stream, protection);
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        let link = self.exports.open_link(writer.clone());
        let state = ConnectionState::new();
        // However the connection ends, it stops being anyone's route, and the requests it
        // carried that have not run yet are not run.
        struct Closing<'a>(&'a Exports, &'a crate::exports::Link, &'a ConnectionState);
        impl Drop for Closing<'_> {
            fn drop(&mut self) {
                self.2.close();
                self.0.close_link(self.1);
            }
        }
        let _closing = Closing(&self.exports, &link, &state);
        let unanswered = Arc::new(Semaphore::new(self.limits.requests_unanswered_max));
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
                Err(ReadError::Io(e)) => {
                    if crate::secure::is_auth_failure(&e) {
                        self.exports.auth().frame_rejected();
                        tracing::warn!("dropping connection from {peer}: {e}");
                    }
                    return;
                }
                Err(ReadError::Frame(FrameError::NotWeft(handshake::KEY_MAGIC))) => {
                    // A client with a key, and this server has none: say so.
                    let e = WeftError::new(
                        ErrorCode::NotAuthenticated,
                        "this file system takes no key: mount without --key (or make the servers require it)",
                    );
                    tracing::warn!("refusing connection from {peer}: it offers a key, this server takes none");
                    handshake::answer(&mut *writer.lock().await, &e).await;
                    return;
                }
                Err(e) => {
                    if let ReadError::Frame(FrameError::Version { .. }) = e {
                        // Tell the peer which version this is before dropping it.
                        let mut w = writer.lock().await;
                        let _ = w.write_all(&FrameHeader::version_answer()).await;
                        let _ = w.shutdown().await;
                    }
                    tracing::warn!("dropping connection from {peer}: {}", WeftError::from(e).message);
                    return;
                }
            };
            match frame.header.kind {
                FrameKind::Request => {}
                FrameKind::CallbackReply => {
                    let answer = decode_message::<Result<CallbackAnswer, WeftError>>(&frame.msg);
                    let malformed = answer.as_ref().err().map(|e| e.message.clone());
                    self.exports.complete(&link, frame.header.xid, answer.and_then(|a| a));
                    if let Some(m) = malformed {
                        tracing::warn!("dropping connection from {peer}: callback reply: {m}");
                        return;
                    }
                    continue;
                }
                kind => {
                    tracing::warn!("dropping connection from {peer}: unexpected frame kind {kind:?}");
                    return;
                }
            }
            let request: Request = match decode_message(&frame.msg) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("dropping connection from {peer}: {}", e.message);
                    return;
                }
            };
            self.exports.note_route(request.header.client_id, &link);
            let Ok(permit) = unanswered.clone().acquire_owned().await else { return };
            let server = self.clone();
            let writer = writer.clone();
            let xid = frame.header.xid;
            let connection = Some(state.clone());
            tokio::spawn(async move {
                let opcode = request.body.opcode_name();
                let ctx = RequestContext { header: request.header, peer, opcode, origin: Origin::Remote, connection };
                let writer = &writer;
                let held = || {
                    let writer = writer.clone();
                    tokio::spawn(async move {
                        let mut w = writer.lock().await;
                        let _ = write_frame(&mut *w, FrameKind::Held, xid, &[], &Bytes::new()).await;
                    });
                };
                server
                    .pipeline
                    .run(ctx, request.body, frame.bulk, frame.bulk_ok, Some(&held), |reply, bulk| async move {
                        let msg = match encode_message(&reply) {
                            Ok(m) => m,
                            Err(e) => encode_message::<Reply>(&Err(e)).unwrap_or_default(),
                        };
                        let sent = {
                            let mut w = writer.lock().await;
                            write_frame(&mut *w, FrameKind::Reply, xid, &msg, &bulk).await.is_ok()
                        };
                        drop(permit);
                        sent
                    })
                    .await;
            });
        }
    }

    /// TCP connections open now.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Acquire)
    }

    /// One request in-process: the pipeline runs on the caller's own thread (polled by its
    /// caller: no hand-off to a runtime worker and back), and the reply comes back as the same
    /// values, bulk included. A mutation whose caller gives up finishes as a task of the
    /// server's runtime instead of being cancelled midway, as over TCP. Fails with an I/O
    /// error, which the Peer retries, when the server is stopping or its runtime is gone.
    pub(crate) async fn call_local(self: &Arc<Self>, request: Request, bulk: Bytes) -> WeftResult<(Reply, Bytes)> {
        if self.is_stopping() {
            return Err(WeftError::io("the server is shut down"));
        }
        let (tx, rx) = oneshot::channel();
        let origin = Origin::InProcess { caller_may_block: tokio::task::try_id().is_none() };
        let ctx = RequestContext {
            header: request.header,
            peer: LOCAL_PEER,
            opcode: request.body.opcode_name(),
            origin,
            connection: None,
        };
        // The reply stage cannot fail in-process: a caller that gave up is not the server's
        // failure (over TCP its reply would be written and discarded too).
        let read_only = request.body.is_read_only();
        let server = self.clone();
        let task = async move {
            let reply = move |reply, bulk| async move {
                let _ = tx.send((reply, bulk));
                true
            };
            server.pipeline.run(ctx, request.body, bulk, true, None, reply).await
        };
        // The request runs on the caller's own thread: no hand-off to a runtime worker and
        // back (a FUSE lookup or stat then costs no thread switch at all under `weft up`,
        // a create only the MDT writer's).
        if read_only {
            // A read has nothing to protect from a caller that gives up halfway.
            task.await;
        } else {
            // A mutation must not be cancelled midway by a caller timing out, just as over
            // TCP: if the caller gives up, the rest runs on as a task of the runtime.
            let rt = match self.runtime.get() {
                Some(rt) => rt.clone(),
                None => tokio::runtime::Handle::current(),
            };
            FinishOnDrop { task: Some(Box::pin(task)), rt }.await;
        }
        rx.await.map_err(|_| WeftError::io("the server dropped the request"))
    }
}

/// Counts one open connection until dropped (however its task ends).
struct OpenConnection(Arc<AtomicUsize>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection refused (past the server's bound): the requests it
/// sends within [`REFUSED_CONNECTION_WAIT_MS`] (a Peer's opening ping, then its request) are
/// answered with `why`, none is run, then the connection is closed. The Peer returns that
/// error instead of resending.
async fn refuse(stream: TcpStream, why: WeftError) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = tokio::io::BufReader::new(reader);

    let busy: Reply = Err(why);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(REFUSED_CONNECTION_WAIT_MS);
    while let Ok(Ok(Some(frame))) = tokio::time::timeout_at(deadline, read_frame(&mut reader)).await {
        if frame.header.kind != FrameKind::Request {
            continue;
        }
        let Ok(msg) = encode_message(&busy) else { break };
        if write_frame(&mut writer, FrameKind::Reply, frame.header.xid, &msg, &Bytes::new()).await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

/// A client without the key at a server that requires it (its first 4 bytes read): the
/// requests it sends within [`REFUSED_CONNECTION_WAIT_MS`] (a Peer's opening ping, then its
/// request) are answered with `why`, none is read past its header (the message and bulk are
/// skipped, not held), then the connection is closed.
async fn refuse_unkeyed(stream: TcpStream, first: [u8; 4], why: WeftError) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = tokio::io::BufReader::new(std::io::Cursor::new(first).chain(reader));
    let Ok(msg) = encode_message::<Reply>(&Err(why)) else { return };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(REFUSED_CONNECTION_WAIT_MS);
    let _ = tokio::time::timeout_at(deadline, async {
        loop {
            let mut head = [0u8; weft_proto::wire::HEADER_BYTES];
            reader.read_exact(&mut head).await?;
            let Ok(header) = FrameHeader::decode(&head) else { return Ok(()) };
            let skip = u64::from(header.msg_len) + u64::from(header.bulk_len);
            tokio::io::copy(&mut (&mut reader).take(skip), &mut tokio::io::sink()).await?;
            if header.kind == FrameKind::Request {
                write_frame(&mut writer, FrameKind::Reply, header.xid, &msg, &Bytes::new())
                    .await
                    .map_err(|e| std::io::Error::other(e.message))?;
            }
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    })
    .await;
    let _ = writer.shutdown().await;
}

/// A request through a [`Wire`](crate::Wire): the same pipeline, on a connection the wire
/// keeps, run as a task of the server's runtime as a request read from TCP is.
impl Endpoint for Server {
    fn deliver(
        self: Arc<Self>,
        request: Request,
        bulk: Bytes,
        connection: Arc<ConnectionState>,
    ) -> BoxFuture<'static, Option<(Reply, Bytes)>> {
        Box::pin(async move {
            if self.is_stopping() {
                return None;
            }
            let (tx, rx) = oneshot::channel();
            let ctx = RequestContext {
                header: request.header,
                peer: LOCAL_PEER,
                opcode: request.body.opcode_name(),
                origin: Origin::Remote,
                connection: Some(connection),
            };
            let reply = move |reply, bulk| async move { tx.send((reply, bulk)).is_ok() };
            self.pipeline.run(ctx, request.body, bulk, true, None, reply).await;
            rx.await.ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::FinishOnDrop;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    // The paused clock: the waits below are the runtime idling, not real time.
    #[tokio::test(start_paused = true)]
    async fn a_future_dropped_midway_finishes_as_a_task() {
        let go = Arc::new(tokio::sync::Notify::new());
        let done = Arc::new(AtomicBool::new(false));
        let task = {
            let (go, done) = (go.clone(), done.clone());
            async move {
                go.notified().await;
                done.store(true, Ordering::SeqCst);
            }
        };
        let rt = tokio::runtime::Handle::current();
        // The caller gives up while the future waits halfway.
        let gave_up =
            tokio::time::timeout(Duration::from_millis(20), FinishOnDrop { task: Some(Box::pin(task)), rt }).await;
        assert!(gave_up.is_err());
        assert!(!done.load(Ordering::SeqCst));
        go.notify_one();
        for _ in 0..200 {
            if done.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the dropped future did not finish");
    }

    /// Ready at its first poll, and counts every poll: a finished future handed to the
    /// runtime again would be polled a second time.
    struct CountPolls(Arc<std::sync::atomic::AtomicU32>);

    impl std::future::Future for CountPolls {
        type Output = ();

        fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            std::task::Poll::Ready(())
        }
    }

    // The paused clock: the waits below are the runtime idling, not real time.
    #[tokio::test(start_paused = true)]
    async fn a_future_polled_to_the_end_is_not_run_again() {
        let polls = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let task = CountPolls(polls.clone());
        FinishOnDrop { task: Some(Box::pin(task)), rt: tokio::runtime::Handle::current() }.await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(polls.load(Ordering::SeqCst), 1);
    }
}
