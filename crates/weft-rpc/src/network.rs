//! The servers and clients of one process as they reach each other: a [`Network`], made by
//! whoever starts the process's servers and clients and handed to each of them (the
//! [`Server`]s are registered in it, the [`Peer`](crate::Peer)s and the
//! [`Exports`](crate::Exports) are given it). Not a global: two networks in one process (a
//! simulation beside a test) never see each other.
//!
//! Each attempt of a request picks its [`Transport`] here, by the address it goes to:
//!
//! * **in-process** (`weft up`): a Server registered under that address
//!   ([`Network::register_server`]) and not shut down gets the request straight into its
//!   pipeline — authorize → schedule → execute → account, the same stages and statistics as
//!   over TCP — with no framing, no encoding, no checksums and the bulk passed as the same
//!   `Bytes` (zero copy). A server shut down is no longer reached in-process: the attempt
//!   falls back to TCP and fails like any dead server (the Peer retries until its deadline),
//!   and a server registered again under the same address is found again;
//! * **a [`Wire`]** (a simulation, [`Network::with_wire`]): the same registered servers,
//!   reached through the wire, which may delay, drop, duplicate or break;
//! * **TCP** otherwise.
//!
//! Callbacks go the other way through the network's [`Clients`]: a client registers its
//! handler under its client id ([`Network::register_client`]), and a server's Exports calls
//! it when no TCP connection reaches the client.
//!
//! `WEFT_TRANSPORT=tcp` in the environment (read once per process) makes a network made by
//! [`Network::new`] reach nothing in-process, servers or clients: everything goes over TCP,
//! for measurement and comparison.

use crate::callback::CallbackHandler;
use crate::clients::{ClientRegistration, Clients};
use crate::server::Server;
use crate::wire::Wire;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock, Weak};

/// The environment variable that forces TCP when set to `tcp`.
pub const TRANSPORT_ENV: &str = "WEFT_TRANSPORT";

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

/// How one attempt of a request travels.
pub(crate) enum Transport {
    Tcp,
    InProcess(Arc<Server>),
    Wire(Arc<dyn Wire>, Arc<Server>),
}

/// The servers and clients of a process; see the [module docs](self).
pub struct Network {
    servers: RwLock<HashMap<String, Weak<Server>>>,
    clients: Arc<Clients>,
    wire: Option<Arc<dyn Wire>>,
    tcp_forced: bool,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("servers", &self.servers.read().unwrap_or_else(|p| p.into_inner()).len())
            .field("wire", &self.wire.is_some())
            .field("tcp_forced", &self.tcp_forced)
            .finish()
    }
}

impl Network {
    /// A process's network: servers registered in it are reached in-process, unless
    /// `WEFT_TRANSPORT=tcp`.
    pub fn new() -> Arc<Network> {
        Network::make(None, tcp_forced())
    }

    /// A network whose every message between its servers and clients goes through `wire`
    /// (a simulation): nothing is reached in-process directly.
    pub fn with_wire(wire: Arc<dyn Wire>) -> Arc<Network> {
        Network::make(Some(wire), false)
    }

    fn make(wire: Option<Arc<dyn Wire>>, tcp_forced: bool) -> Arc<Network> {
        Arc::new(Network {
            servers: RwLock::default(),
            clients: Arc::new(Clients::new(wire.clone(), tcp_forced)),
            wire,
            tcp_forced,
        })
    }

    /// Makes `server` reachable under `address` (its listen address, as clients spell it) by
    /// the Peers of this network, until it is shut down or another server takes the address.
    /// Call it from within the runtime the server runs on: a mutation whose in-process
    /// caller gives up finishes there.
    pub fn register_server(&self, address: &str, server: &Arc<Server>) {
        server.note_runtime();
        if server.is_stopping() {
            return;
        }
        let mut map = self.servers.write().unwrap_or_else(|p| p.into_inner());
        // Entries of servers dropped without a shutdown go stale: sweep them here, not per
        // lookup.
        map.retain(|_, s| s.strong_count() > 0);
        map.insert(address.to_string(), Arc::downgrade(server));
    }

    /// Makes `handler` answer the callbacks that servers of this network send to `client_id`
    /// while no TCP connection reaches that client, until the registration is dropped.
    pub fn register_client(&self, client_id: u64, handler: Arc<dyn CallbackHandler>) -> ClientRegistration {
        self.clients.register(client_id, handler)
    }

    /// The clients servers of this network call back without TCP (for a server's Exports).
    pub fn clients(&self) -> &Arc<Clients> {
        &self.clients
    }

    fn server(&self, address: &str) -> Option<Arc<Server>> {
        if self.tcp_forced {
            return None;
        }
        let server = self.servers.read().unwrap_or_else(|p| p.into_inner()).get(address)?.upgrade()?;
        (!server.is_stopping()).then_some(server)
    }

    /// The server registered under `address` that a request reaches by a direct call (not
    /// over TCP, nor through a wire): what passthrough and inline decisions ask.
    pub fn in_process(&self, address: &str) -> Option<Arc<Server>> {
        if self.wire.is_some() {
            return None;
        }
        self.server(address)
    }

    /// How an attempt to `address` travels now.
    pub(crate) fn transport(&self, address: &str) -> Transport {
        match (self.server(address), &self.wire) {
            (None, _) => Transport::Tcp,
            (Some(server), None) => Transport::InProcess(server),
            (Some(server), Some(wire)) => Transport::Wire(wire.clone(), server),
        }
    }
}
