//! The client's end of server-to-client callbacks.
//!
//! A server's lock manager calls a client back when another client needs a lock it holds
//! (blocking callback) or the size of an object it writes (glimpse). The client answers
//! through a [`CallbackHandler`]: set in [`PeerOptions::callbacks`](crate::PeerOptions) it
//! serves the callbacks that arrive on the Peer's TCP connections; registered in a network with
//! [`crate::Network::register_client`] it serves those of servers of that network that have
//! no TCP connection to the client. The server side is [`crate::Exports`].

use futures::future::BoxFuture;
use weft_proto::lock::{CallbackAnswer, CallbackRequest};
use weft_proto::WeftResult;

/// Answers the callbacks servers send this client. Each callback runs as its own task, so a
/// handler may send requests (a flush, a lock cancel) through the same Peers while it works;
/// an `Err` travels back to the server as the answer.
///
/// Hold the client weakly: the reader of each of the Peer's connections holds the handler, and
/// the client holds its Peers, so a strong reference would keep a dropped client alive.
pub trait CallbackHandler: Send + Sync + 'static {
    fn handle(&self, callback: CallbackRequest) -> BoxFuture<'static, WeftResult<CallbackAnswer>>;

    /// A Peer opened a new connection to `address` in place of a broken one, before any
    /// request goes on it: the server there may have restarted and forgotten what it
    /// granted this client.
    fn reconnected(&self, _address: &str) {}

    /// A connection of a Peer to `address` broke (its server died, restarted or was cut
    /// off): a client that holds locks there connects again so callbacks can reach it.
    fn disconnected(&self, _address: &str) {}
}
