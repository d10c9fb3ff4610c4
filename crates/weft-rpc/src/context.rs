//! What every stage of the server pipeline knows of a request, and the execute stage's
//! trait: [`RequestContext`], [`Origin`], [`Handler`], and the state of the connection a
//! request came on ([`ConnectionState`]). A leaf: it imports nothing else of this crate, so
//! that the stages (authorize, schedule, account), the transports and the services can all
//! name these types without reaching each other.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use weft_proto::msg::{Reply, RequestBody, RequestHeader, Run};

/// The peer address a request made in-process carries: this host, no port.
pub const LOCAL_PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// What the pipeline knows about a request when it reaches the executing service.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub header: RequestHeader,
    /// Where the request came from; [`LOCAL_PEER`] for a request made in-process.
    pub peer: SocketAddr,
    pub opcode: &'static str,
    pub origin: Origin,
    /// The connection the request came on, when it came on one that can break (TCP, or a
    /// simulated wire); None in-process, where the caller itself is the connection.
    pub connection: Option<Arc<ConnectionState>>,
}

impl RequestContext {
    /// Whether the connection this request came on has closed since. Such a request is
    /// not run, answered nor counted: its sender resends it on a new connection, and that
    /// copy is the one that runs (Lustre drops the requests of an old connection the same
    /// way). One atomic load.
    pub fn connection_closed(&self) -> bool {
        self.connection.as_ref().is_some_and(|c| c.is_closed())
    }
}

/// How a request reached the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Read from a connection; it runs as a task of the server's runtime.
    Remote,
    /// Made in this process and polled by its caller; `caller_may_block`: the caller is a
    /// thread of its own (a FUSE thread), not a task of an async runtime, so work run
    /// inline may block it.
    InProcess { caller_may_block: bool },
}

/// The execute stage: the services a server process hosts, behind one router. `run` is how
/// the scheduler said the request runs.
pub trait Handler: Send + Sync + 'static {
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        run: Run,
        body: RequestBody,
        bulk: Bytes,
    ) -> BoxFuture<'a, (Reply, Bytes)>;
}

/// Whether one connection of the server is still open: set closed once, by whoever sees it
/// end (the connection's reader, or a simulated wire breaking it), and read by the pipeline
/// as each of its requests arrives and as it leaves the scheduler.
#[derive(Debug, Default)]
pub struct ConnectionState {
    closed: AtomicBool,
}

impl ConnectionState {
    pub fn new() -> Arc<ConnectionState> {
        Arc::new(ConnectionState::default())
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}
