//! The seam a simulation drives: a [`Wire`] carries every attempt of a request from a
//! [`Peer`](crate::Peer) to a server of its [`Network`](crate::Network), and every callback
//! from a server's [`Exports`](crate::Exports) to a client of it, instead of TCP or a direct
//! call. What it does with them (delays, reorders, drops, duplicates, breaks connections,
//! partitions) is the simulation's; the Peer's resends, deadline, backoff and errors and
//! the Exports' callback rounds are the same code as over TCP and in-process.
//!
//! A request reaches the server through its [`Endpoint`], on a connection the wire keeps
//! ([`ConnectionState`]): a copy delivered on a connection the wire closed meanwhile is not
//! run, exactly as a request of a closed TCP connection is not.

use crate::callback::CallbackHandler;
use crate::context::ConnectionState;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::Arc;
use weft_proto::lock::{CallbackAnswer, CallbackRequest};
use weft_proto::msg::{Reply, Request};
use weft_proto::WeftResult;

/// A server as a wire reaches it.
pub trait Endpoint: Send + Sync + 'static {
    /// Runs `request`, arrived on `connection`, through the server's pipeline (authorize,
    /// schedule, execute, account) and returns its answer; None when the connection closed
    /// before the request ran (it is then not run, answered nor counted).
    fn deliver(
        self: Arc<Self>,
        request: Request,
        bulk: Bytes,
        connection: Arc<ConnectionState>,
    ) -> BoxFuture<'static, Option<(Reply, Bytes)>>;
}

/// Carries the messages of a simulated network; see the [module docs](self).
pub trait Wire: Send + Sync + 'static {
    /// One attempt of `request` to the server at `address`. An `Err` is what the Peer sees of
    /// a broken connection (it resends until its deadline); the wire must not cancel a
    /// delivery it started when this future is dropped (a Peer's deadline drops it).
    fn request(
        &self,
        address: &str,
        request: Request,
        bulk: Bytes,
        server: Arc<dyn Endpoint>,
    ) -> BoxFuture<'static, WeftResult<(Reply, Bytes)>>;

    /// One attempt of a callback to `client_id`, whose handler is `handler`: the client's
    /// answer, or None for a connection lost before the answer (the server sends again,
    /// within its callback timeout).
    fn callback(
        &self,
        client_id: u64,
        callback: CallbackRequest,
        handler: Arc<dyn CallbackHandler>,
    ) -> BoxFuture<'static, Option<WeftResult<CallbackAnswer>>>;
}
