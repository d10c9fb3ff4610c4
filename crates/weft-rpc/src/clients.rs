//! The clients of a [`Network`](crate::Network) that servers of the same network call back
//! without TCP: each registers its [`CallbackHandler`] under its client id
//! ([`Clients::register`]), and a server's [`Exports`](crate::Exports) calls that handler
//! (through the network's [`Wire`] when there is one) when no TCP connection reaches the
//! client.

use crate::callback::CallbackHandler;
use crate::wire::Wire;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use weft_proto::lock::{CallbackAnswer, CallbackRequest};
use weft_proto::WeftResult;

/// The handlers registered under one client id, oldest first; the newest answers.
type Handlers = HashMap<u64, Vec<(u64, Arc<dyn CallbackHandler>)>>;

/// The in-process clients of one network; see the [module docs](self).
pub struct Clients {
    handlers: RwLock<Handlers>,
    next_token: AtomicU64,
    /// Carries every callback when set (a simulation).
    wire: Option<Arc<dyn Wire>>,
    /// `WEFT_TRANSPORT=tcp`: no client is reached in-process.
    tcp_forced: bool,
}

impl Clients {
    pub(crate) fn new(wire: Option<Arc<dyn Wire>>, tcp_forced: bool) -> Clients {
        Clients { handlers: RwLock::default(), next_token: AtomicU64::new(1), wire, tcp_forced }
    }

    /// Makes `handler` answer the callbacks that servers of this network send to `client_id`
    /// while no TCP connection reaches that client, until the registration is dropped.
    pub fn register(self: &Arc<Self>, client_id: u64, handler: Arc<dyn CallbackHandler>) -> ClientRegistration {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        self.handlers.write().unwrap_or_else(|p| p.into_inner()).entry(client_id).or_default().push((token, handler));
        ClientRegistration { clients: Arc::downgrade(self), client_id, token }
    }

    /// The handler registered for `client_id`, unless TCP is forced.
    pub(crate) fn handler(&self, client_id: u64) -> Option<Arc<dyn CallbackHandler>> {
        if self.tcp_forced {
            return None;
        }
        self.handlers.read().unwrap_or_else(|p| p.into_inner()).get(&client_id)?.last().map(|(_, h)| h.clone())
    }

    /// One callback to `client_id` through `handler`, directly or over the wire: its answer,
    /// or None when the wire lost it (the server sends it again).
    pub(crate) fn call(
        &self,
        client_id: u64,
        handler: Arc<dyn CallbackHandler>,
        callback: CallbackRequest,
    ) -> BoxFuture<'static, Option<WeftResult<CallbackAnswer>>> {
        match &self.wire {
            Some(wire) => wire.callback(client_id, callback, handler),
            None => {
                let answer = handler.handle(callback);
                Box::pin(async move { Some(answer.await) })
            }
        }
    }
}

/// Keeps a client's callback handler registered; dropping it unregisters that handler (an
/// older registration of the same client id, if any is still held, answers again).
#[must_use = "the handler is unregistered when the registration is dropped"]
pub struct ClientRegistration {
    clients: Weak<Clients>,
    client_id: u64,
    token: u64,
}

impl std::fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRegistration").field("client_id", &format_args!("{:016x}", self.client_id)).finish()
    }
}

impl ClientRegistration {
    pub fn client_id(&self) -> u64 {
        self.client_id
    }
}

impl Drop for ClientRegistration {
    fn drop(&mut self) {
        let Some(clients) = self.clients.upgrade() else { return };
        let mut map = clients.handlers.write().unwrap_or_else(|p| p.into_inner());
        if let Some(handlers) = map.get_mut(&self.client_id) {
            handlers.retain(|(t, _)| *t != self.token);
            if handlers.is_empty() {
                map.remove(&self.client_id);
            }
        }
    }
}
