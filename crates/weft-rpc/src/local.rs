//! The in-process transport: when a client and a server share one process (`weft up`), a
//! [`Peer`](crate::Peer) whose address a [`Server`] registered with
//! [`Server::register_local`] hands its requests straight to that server's pipeline —
//! authorize → schedule → execute → account, the same stages and statistics as over TCP —
//! with no framing, no encoding, no checksums (nothing crossed a wire) and the bulk passed as
//! the same `Bytes` (zero copy).
//!
//! The registry is process-global and keyed by the exact address string the server
//! registered (its listen address, as the cluster map publishes it). A Peer looks its address
//! up on every attempt, so a server shut down ([`Server::shutdown`] unregisters it) is no
//! longer reached in-process: the attempt falls back to TCP and fails like any dead server
//! (the Peer retries until its deadline), and a server started again under the same address
//! is found again.
//!
//! Callbacks go the other way through a second registry, of clients: a client of this
//! process registers its [`CallbackHandler`] under its client id ([`register_client`]), and a
//! server's [`Exports`](crate::Exports) calls that handler directly when no TCP connection
//! reaches the client.
//!
//! `WEFT_TRANSPORT=tcp` in the environment (read once per process) makes every lookup miss,
//! of servers and of clients: everything goes over TCP, for measurement and comparison.
//!
//! A request made in-process runs the server's pipeline on its caller's thread. When a
//! scheduling policy holds it back, the pipeline says so on that thread ([`note_held`]); a
//! caller that polls requests on threads it must not lose for long (the FUSE mount's
//! workers) asks after each poll ([`take_held`]) and finishes such a request elsewhere.

use crate::callback::CallbackHandler;
use crate::server::Server;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};

/// The environment variable that forces TCP when set to `tcp`.
pub const TRANSPORT_ENV: &str = "WEFT_TRANSPORT";

type Registry = RwLock<HashMap<String, Weak<Server>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Whether `WEFT_TRANSPORT=tcp` asked for TCP even in-process (read once per process).
pub fn tcp_forced() -> bool {
    static FORCED: OnceLock<bool> = OnceLock::new();
    *FORCED.get_or_init(|| {
        let forced = std::env::var(TRANSPORT_ENV).is_ok_and(|v| v.trim().eq_ignore_ascii_case("tcp"));
        if forced {
            tracing::info!("{TRANSPORT_ENV}=tcp: in-process servers are reached over TCP");
        }
        forced
    })
}

pub(crate) fn register(address: &str, server: &Arc<Server>) {
    let mut map = registry().write().unwrap_or_else(|p| p.into_inner());
    // Entries of servers dropped without a shutdown go stale: sweep them here, not per lookup.
    map.retain(|_, s| s.strong_count() > 0);
    map.insert(address.to_string(), Arc::downgrade(server));
}

/// Removes `address` if it still names `server` (a newer server may have taken it over).
pub(crate) fn unregister(address: &str, server: &Server) {
    let mut map = registry().write().unwrap_or_else(|p| p.into_inner());
    if map.get(address).is_some_and(|s| std::ptr::eq(s.as_ptr(), server)) {
        map.remove(address);
    }
}

/// The server registered in this process under `address`, unless TCP is forced.
pub fn lookup(address: &str) -> Option<Arc<Server>> {
    if tcp_forced() {
        return None;
    }
    registry().read().unwrap_or_else(|p| p.into_inner()).get(address)?.upgrade()
}

/// The handlers registered under one client id, oldest first; the newest answers.
type Clients = RwLock<HashMap<u64, Vec<(u64, Arc<dyn CallbackHandler>)>>>;

fn clients() -> &'static Clients {
    static CLIENTS: OnceLock<Clients> = OnceLock::new();
    CLIENTS.get_or_init(Default::default)
}

/// Keeps a client's callback handler registered in-process; dropping it unregisters that
/// handler (an older registration of the same client id, if any is still held, answers again).
#[must_use = "the handler is unregistered when the registration is dropped"]
#[derive(Debug)]
pub struct ClientRegistration {
    client_id: u64,
    token: u64,
}

impl ClientRegistration {
    pub fn client_id(&self) -> u64 {
        self.client_id
    }
}

impl Drop for ClientRegistration {
    fn drop(&mut self) {
        let mut map = clients().write().unwrap_or_else(|p| p.into_inner());
        if let Some(handlers) = map.get_mut(&self.client_id) {
            handlers.retain(|(t, _)| *t != self.token);
            if handlers.is_empty() {
                map.remove(&self.client_id);
            }
        }
    }
}

/// Makes `handler` answer the callbacks that servers of this process send to `client_id`
/// while no TCP connection reaches that client, until the registration is dropped.
pub fn register_client(client_id: u64, handler: Arc<dyn CallbackHandler>) -> ClientRegistration {
    static TOKENS: AtomicU64 = AtomicU64::new(1);
    let token = TOKENS.fetch_add(1, Ordering::Relaxed);
    clients().write().unwrap_or_else(|p| p.into_inner()).entry(client_id).or_default().push((token, handler));
    ClientRegistration { client_id, token }
}

/// The handler registered in this process for `client_id`, unless TCP is forced.
pub(crate) fn client_handler(client_id: u64) -> Option<Arc<dyn CallbackHandler>> {
    if tcp_forced() {
        return None;
    }
    clients().read().unwrap_or_else(|p| p.into_inner()).get(&client_id)?.last().map(|(_, h)| h.clone())
}

thread_local! {
    /// Set when a request polled on this thread was held back by a scheduling policy.
    static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks that a request polled on this thread waits because a policy holds it back (the
/// pipeline's schedule stage does).
pub fn note_held() {
    HELD.with(|h| h.set(true));
}

/// Whether a request polled on this thread since the last call was held back by a policy
/// (and clears the mark).
pub fn take_held() -> bool {
    HELD.with(|h| h.replace(false))
}
