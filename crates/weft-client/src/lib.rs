//! The client library: cluster map, metadata and object clients, striped parallel I/O.
//!
//! * [`Client`]: one instance per mount (one `client_id`), shared by every thread;
//! * the metadata methods (one per [`MdtRequest`]) are in `metadata.rs`;
//! * striped read/write/truncate/fsync/glimpse are in `io.rs`, planned by the pure functions
//!   of [`striping`];
//! * per-target and summed statfs are in `statfs.rs`.
//!
//! Connections: one [`Peer`] per server *address*, created on first use. Several targets
//! served by one process (the usual OSS with many OSTs) share one TCP connection, so the
//! number of connections follows the servers a client actually talks to, never the number
//! of targets, and a client that only touches a few stripes only holds a few connections.
//! Peers of addresses that left the map are dropped when the map changes.
//!
//! Failover: a request waits on its peer (which reconnects and resends with the same
//! request id) until `request_timeout`. Meanwhile the client refetches the map from the MGS;
//! if the map moves the target to another address, the request is resent there.

mod flock;
mod limits;
pub mod locks;
mod map;
mod metadata;
mod reply_slots;
mod statfs;
pub mod striping;

mod io;

pub use metadata::Opened;
pub use statfs::TargetStatfs;
pub mod virtual_xattr;

use bytes::Bytes;
use map::{target_label, MapState};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};
use weft_proto::lock::{LdlmReply, LdlmRequest, LockTarget};
use weft_proto::msg::{
    ClusterMap, Identity, InodeInfo, MdtReply, MdtRequest, MgsReply, MgsRequest, OstReply, OstRequest, ReplyBody,
    RequestBody, RequestHeader, TargetKind,
};
use weft_proto::{ErrorCode, WeftError, WeftResult};
use weft_rpc::{Peer, PeerOptions};

/// What a client needs to start: where the MGS is, and how long to wait.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port` of the management service.
    pub mgs_address: String,
    /// How long one connection attempt may take; also the bound on the first MGS contact.
    pub connect_timeout: Duration,
    /// How long requests wait and resend while a server restarts before they fail (EIO).
    pub request_timeout: Duration,
    /// The job the requests are for (Lustre's jobid), for scheduling and statistics.
    pub jobid: String,
    /// Whether reads and writes take extent locks, which let the mount cache pages and
    /// attributes coherently with other clients. Off only to measure what locking costs.
    pub extent_locks: bool,
    /// Most locks cached before the least recently used are given back.
    pub locks_cached_max: usize,
}

impl ClientConfig {
    pub fn new(mgs_address: impl Into<String>) -> ClientConfig {
        let defaults = PeerOptions::default();
        ClientConfig {
            mgs_address: mgs_address.into(),
            connect_timeout: defaults.connect_timeout,
            request_timeout: defaults.request_timeout,
            jobid: String::new(),
            extent_locks: true,
            locks_cached_max: limits::LOCKS_CACHED_MAX,
        }
    }
}

/// The MDT every metadata request goes to (one MDT in this version).
const MDT_INDEX: u32 = 0;

pub struct Client {
    config: ClientConfig,
    /// Random per incarnation: a client evicted by a server comes back under a new id.
    client_id: AtomicU64,
    /// Counts incarnations; what was started under an older one is not finished (a write
    /// queued before an eviction is never sent after it).
    generation: AtomicU64,
    locks: Arc<locks::LockCache>,
    weak_self: Weak<Client>,
    /// Makes this client reachable for callbacks from servers of this process.
    local_registration: std::sync::Mutex<Option<weft_rpc::local::ClientRegistration>>,
    next_request_id: AtomicU64,
    /// Where the MDT keeps each mutation's reply for a resend.
    reply_slots: reply_slots::ReplySlots,
    mgs: Peer,
    /// The current map; watchers learn of every change (requests waiting on a moved target).
    map_tx: watch::Sender<Arc<MapState>>,
    /// One peer per server address, created on first use.
    peers: RwLock<HashMap<String, Arc<Peer>>>,
    /// Wakes the map task early: a target is not answering. Shared with the task, which
    /// holds the client only weakly.
    map_refresh_wanted: Arc<Notify>,
    /// One map fetch at a time; concurrent askers wait for it and use its result.
    map_fetch: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("mgs_address", &self.config.mgs_address)
            .field("client_id", &format_args!("{:#x}", self.client_id()))
            .field("map_version", &self.map_tx.borrow().map.version)
            .finish()
    }
}

impl Client {
    /// Fetches the cluster map from the MGS (within `connect_timeout`) and starts the task
    /// that keeps it current.
    pub async fn connect(config: ClientConfig) -> WeftResult<Arc<Client>> {
        let client_id = rand::random::<u64>();
        let client = Arc::new_cyclic(|weak: &Weak<Client>| Client {
            client_id: AtomicU64::new(client_id),
            generation: AtomicU64::new(1),
            locks: Arc::new(locks::LockCache::new(config.extent_locks, config.locks_cached_max)),
            weak_self: weak.clone(),
            local_registration: std::sync::Mutex::new(None),
            next_request_id: AtomicU64::new(1),
            reply_slots: reply_slots::ReplySlots::default(),
            mgs: Peer::new(config.mgs_address.clone(), peer_options(&config, client_id, weak)),
            map_tx: watch::Sender::new(Arc::new(MapState::default())),
            peers: RwLock::new(HashMap::new()),
            map_refresh_wanted: Arc::new(Notify::new()),
            map_fetch: tokio::sync::Mutex::new(()),
            config,
        });
        client.fetch_map(0).await.map_err(|e| {
            WeftError::new(
                e.code,
                format!("cannot reach the management service at {}: {}", client.config.mgs_address, e.message),
            )
        })?;
        client.register_local(client_id);
        tokio::spawn(map_task(Arc::downgrade(&client), client.map_refresh_wanted.clone()));
        tokio::spawn(ping_task(Arc::downgrade(&client)));
        Ok(client)
    }

    fn register_local(&self, client_id: u64) {
        let handler = Arc::new(locks::Callbacks(self.weak_self.clone()));
        *self.local_registration.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(weft_rpc::local::register_client(client_id, handler));
    }

    /// The current incarnation (see [`Client::client_id`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A server evicted this client (it did not answer a lock callback in time): its locks
    /// are gone, so every cache they guarded is dropped, and the client comes back under a
    /// new id with new connections. What was under way before fails with EIO.
    fn evicted(&self, old_id: u64) {
        let new_id = rand::random::<u64>();
        if self.client_id.load(Ordering::Acquire) != old_id {
            return; // another request saw it first
        }
        // The generation first: a write checked against it before the new id is in use
        // can no longer go out under the new id.
        self.generation.fetch_add(1, Ordering::AcqRel);
        if self.client_id.compare_exchange(old_id, new_id, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        tracing::warn!("evicted as client {old_id:016x}; reconnecting as {new_id:016x}");
        self.peers.write().unwrap_or_else(|p| p.into_inner()).clear();
        self.register_local(new_id);
        self.locks.forget_all();
    }

    /// The cluster map as this client knows it now.
    pub fn map(&self) -> ClusterMap {
        self.map_tx.borrow().map.clone()
    }

    pub fn client_id(&self) -> u64 {
        self.client_id.load(Ordering::Acquire)
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    fn has_target(&self, kind: TargetKind, index: u32) -> bool {
        self.map_tx.borrow().target(kind, index).is_some()
    }

    fn header(&self, who: &Identity) -> RequestHeader {
        RequestHeader {
            client_id: self.client_id(),
            request_id: self.next_request_id.fetch_add(1, Ordering::Relaxed),
            reply_slot: 0,
            identity: who.clone(),
            jobid: self.config.jobid.clone(),
        }
    }

    /// Asks the MGS for a map newer than ours and installs it; `seen_version` is the
    /// version the caller found wanting. Returns whether the map changed. Concurrent
    /// callers share one fetch.
    async fn fetch_map(&self, seen_version: u64) -> WeftResult<bool> {
        let _one_at_a_time = self.map_fetch.lock().await;
        let current = self.map_tx.borrow().map.version;
        if current != seen_version {
            // Someone else installed a newer map while we waited for the lock.
            return Ok(true);
        }
        let body = RequestBody::Mgs(MgsRequest::GetMap { known_version: current });
        let (reply, _) = self
            .mgs
            .call_with_timeout(self.header(&Identity::root()), body, Bytes::new(), self.config.connect_timeout)
            .await?;
        match reply {
            ReplyBody::Mgs(MgsReply::Map(map)) => {
                if map.version == current && current != 0 {
                    return Ok(false);
                }
                tracing::debug!(version = map.version, targets = map.targets.len(), "cluster map updated");
                let state = Arc::new(MapState::new(map));
                self.drop_unused_peers(&state);
                self.map_tx.send_replace(state);
                Ok(true)
            }
            ReplyBody::Mgs(MgsReply::Unchanged { .. }) => Ok(false),
            other => Err(unexpected_reply("mgs_get_map", &other)),
        }
    }

    fn drop_unused_peers(&self, state: &MapState) {
        let addresses = state.addresses();
        let mut peers = self.peers.write().unwrap_or_else(|p| p.into_inner());
        peers.retain(|address, _| addresses.contains(address.as_str()));
    }

    fn peer(&self, address: &str) -> Arc<Peer> {
        if let Some(p) = self.peers.read().unwrap_or_else(|p| p.into_inner()).get(address) {
            return p.clone();
        }
        let mut peers = self.peers.write().unwrap_or_else(|p| p.into_inner());
        peers
            .entry(address.to_string())
            .or_insert_with(|| {
                Arc::new(Peer::new(address, peer_options(&self.config, self.client_id(), &self.weak_self)))
            })
            .clone()
    }

    /// The peer serving a target. A target missing from the map makes the client refetch
    /// the map once before it fails.
    async fn target_peer(&self, kind: TargetKind, index: u32) -> WeftResult<(Arc<Peer>, String)> {
        let version = {
            let state = self.map_tx.borrow();
            if let Some(address) = state.address(kind, index) {
                let address = address.to_string();
                drop(state);
                return Ok((self.peer(&address), address));
            }
            state.map.version
        };
        if let Err(e) = self.fetch_map(version).await {
            tracing::debug!("refetching the cluster map failed: {e}");
        }
        let state = self.map_tx.borrow();
        match state.address(kind, index) {
            Some(address) => {
                let address = address.to_string();
                drop(state);
                Ok((self.peer(&address), address))
            }
            None => Err(WeftError::not_found(format!(
                "{} is not in the cluster map (version {})",
                target_label(kind, index),
                state.map.version
            ))),
        }
    }

    /// Sends one request to a target and waits for its reply, following the target if the
    /// map moves it to another address while the request waits.
    async fn call_target(
        &self,
        kind: TargetKind,
        index: u32,
        header: RequestHeader,
        body: RequestBody,
        bulk: Bytes,
    ) -> WeftResult<(ReplyBody, Bytes)> {
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            let (peer, address) = self.target_peer(kind, index).await?;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let mut map_rx = self.map_tx.subscribe();
            let call = peer.call_with_timeout(header.clone(), body.clone(), bulk.clone(), remaining);
            let moved = async {
                loop {
                    tokio::select! {
                        changed = map_rx.changed() => {
                            if changed.is_err() {
                                std::future::pending::<()>().await;
                            }
                            let state = map_rx.borrow_and_update();
                            if state.address(kind, index).is_some_and(|a| a != address) {
                                return;
                            }
                        }
                        _ = tokio::time::sleep(Duration::from_millis(limits::TARGET_SILENCE_MS_MAX)) => {
                            // The target is slow or gone: ask the MGS whether it moved.
                            self.map_refresh_wanted.notify_one();
                        }
                    }
                }
            };
            tokio::select! {
                result = call => {
                    if let Err(e) = &result {
                        if e.code == ErrorCode::Evicted {
                            self.evicted(header.client_id);
                        }
                    }
                    return result;
                }
                _ = moved => {
                    // Resending with the same request id is safe: the MDS reply cache makes
                    // mutations idempotent, and OST writes and punches are idempotent.
                    tracing::debug!(
                        target = %target_label(kind, index), from = %address,
                        "target moved; resending {}", body.opcode_name()
                    );
                    if Instant::now() >= deadline {
                        return Err(WeftError::new(
                            ErrorCode::TimedOut,
                            format!("{} did not answer {} in time", target_label(kind, index), body.opcode_name()),
                        ));
                    }
                }
            }
        }
    }

    /// One metadata request to the MDT.
    async fn mdt(&self, who: &Identity, op: MdtRequest) -> WeftResult<MdtReply> {
        let mut header = self.header(who);
        // Held until the answer: every resend of this mutation carries the same slot.
        let slot = if op.is_mutation() { Some(self.reply_slots.take().await) } else { None };
        header.reply_slot = slot.as_ref().map_or(0, |s| s.number());
        let opcode = op.opcode_name();
        let body = RequestBody::Mdt { mdt: MDT_INDEX, op };
        // The answer may carry an intent lock (recorded before the ticket goes).
        let _ticket = self.locks.ticket();
        match self.call_target(TargetKind::Mdt, MDT_INDEX, header, body, Bytes::new()).await? {
            (ReplyBody::Mdt(reply), _) => {
                if let MdtReply::Inode(InodeInfo { lock: Some(grant), .. })
                | MdtReply::Opened { inode: InodeInfo { lock: Some(grant), .. }, .. } = &reply
                {
                    self.note_inode_lock(grant);
                }
                Ok(reply)
            }
            (other, _) => Err(unexpected_reply(opcode, &other)),
        }
    }

    /// One request to a target's lock manager.
    pub(crate) async fn ldlm(&self, target: LockTarget, op: LdlmRequest) -> WeftResult<LdlmReply> {
        let header = self.header(&Identity::root());
        let (kind, index) = target.target();
        let body = RequestBody::Ldlm { target, op };
        let opcode = body.opcode_name();
        match self.call_target(kind, index, header, body, Bytes::new()).await? {
            (ReplyBody::Ldlm(reply), _) => Ok(reply),
            (other, _) => Err(unexpected_reply(opcode, &other)),
        }
    }

    /// One object request to an OST. Object I/O carries the root identity: the MDS has
    /// authorized the open that handed out the layout.
    async fn ost(&self, ost: u32, op: OstRequest, bulk: Bytes) -> WeftResult<(OstReply, Bytes)> {
        let header = self.header(&Identity::root());
        let body = RequestBody::Ost { ost, op };
        let opcode = body.opcode_name();
        match self.call_target(TargetKind::Ost, ost, header, body, bulk).await? {
            (ReplyBody::Ost(reply), bulk) => Ok((reply, bulk)),
            (other, _) => Err(unexpected_reply(opcode, &other)),
        }
    }
}

fn peer_options(config: &ClientConfig, client_id: u64, client: &Weak<Client>) -> PeerOptions {
    PeerOptions {
        connect_timeout: config.connect_timeout,
        request_timeout: config.request_timeout,
        client_id,
        callbacks: Some(Arc::new(locks::Callbacks(client.clone()))),
    }
}

/// The error of work started before this client was evicted.
pub(crate) fn evicted_error() -> WeftError {
    WeftError::new(ErrorCode::Evicted, "this client was evicted meanwhile; what it had under way is discarded")
}

impl Client {
    /// A peer opened a new connection in place of a broken one, so it may be talking to a
    /// restarted server, which has forgotten the locks it granted: the locks of that
    /// server's targets are forgotten here too, with what they guarded, before any request
    /// goes on the new connection. (A mere network blip costs the caches, nothing more: a
    /// server that still knows a lock gets "unknown" when it calls it back.) Servers hold new
    /// grants back for a recovery window after a restart, longer than the ping interval, so
    /// no other client is granted a conflicting lock before a client holding locks (which
    /// pings) has reconnected.
    pub(crate) fn forget_locks_of(&self, address: &str) {
        let targets: Vec<LockTarget> = self
            .map_tx
            .borrow()
            .map
            .targets
            .iter()
            .filter(|t| t.address == address)
            .map(|t| LockTarget::of(t.kind, t.index))
            .collect();
        tracing::info!("reconnected to {address}: dropping what was cached under its locks");
        self.locks.forget_targets(&targets);
    }
}

/// Keeps the map current: refetches it every `MAP_REFRESH_INTERVAL_MS`, or at once when a
/// request finds its target silent. Ends when the client is dropped.
async fn map_task(client: Weak<Client>, refresh_wanted: Arc<Notify>) {
    loop {
        tokio::select! {
            _ = refresh_wanted.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(limits::MAP_REFRESH_INTERVAL_MS)) => {}
        }
        let Some(client) = client.upgrade() else { return };
        let version = client.map_tx.borrow().map.version;
        if let Err(e) = client.fetch_map(version).await {
            tracing::debug!("refetching the cluster map failed: {e}");
        }
    }
}

/// Lustre's pinger: while the client holds locks, it asks one target of every server
/// process each PING_INTERVAL_MS whether it is still known there. A client that was evicted
/// meanwhile (it was stopped, or cut off) learns it here even if it sends nothing else,
/// drops every cache its lost locks guarded and comes back under a new id; and a broken
/// connection is made again, so that callbacks reach the client.
async fn ping_task(client: Weak<Client>) {
    loop {
        tokio::time::sleep(Duration::from_millis(limits::PING_INTERVAL_MS)).await;
        let Some(client) = client.upgrade() else { return };
        if client.locks.is_empty() {
            continue;
        }
        let targets = client.map_tx.borrow().one_target_per_address();
        // All servers at once: a few silent ones must not delay noticing the others.
        let probes = targets.into_iter().map(|(kind, index)| {
            let target = LockTarget::of(kind, index);
            let probe = client.ldlm(target, LdlmRequest::Cancel { handles: Vec::new() });
            // Only the answer matters (an eviction is handled where requests fail).
            tokio::time::timeout(Duration::from_millis(limits::PING_INTERVAL_MS), probe)
        });
        futures::future::join_all(probes).await;
    }
}

fn reply_name(reply: &ReplyBody) -> &'static str {
    match reply {
        ReplyBody::Pong => "Pong",
        ReplyBody::Mgs(_) => "Mgs",
        ReplyBody::Mdt(r) => mdt_reply_name(r),
        ReplyBody::Ost(_) => "Ost",
        ReplyBody::Ldlm(_) => "Ldlm",
    }
}

fn mdt_reply_name(reply: &MdtReply) -> &'static str {
    match reply {
        MdtReply::Inode(_) => "Inode",
        MdtReply::Opened { .. } => "Opened",
        MdtReply::Empty => "Empty",
        MdtReply::Data(_) => "Data",
        MdtReply::Names(_) => "Names",
        MdtReply::Dir(_) => "Dir",
        MdtReply::Stripe { .. } => "Stripe",
        MdtReply::Statfs(_) => "Statfs",
    }
}

fn unexpected_reply(opcode: &str, reply: &ReplyBody) -> WeftError {
    WeftError::protocol(format!("unexpected {} reply to {opcode}", reply_name(reply)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::layout::Layout;
    use weft_proto::Fid;

    fn assert_send<T: Send>(_: T) {}

    /// Never run: it only has to compile, which proves the futures can be spawned on a
    /// multi-threaded runtime (no lock guard is held across an await).
    #[allow(dead_code)]
    fn client_futures_are_send(client: &Client, layout: &Layout, who: &Identity) {
        assert_send(Client::connect(ClientConfig::new("localhost:1")));
        assert_send(client.read(layout, 0, 1, 1));
        assert_send(client.write(layout, 0, Bytes::new(), &locks::ExtentGuard::none(1)));
        assert_send(client.truncate(who, Fid::ROOT, layout, 0));
        assert_send(client.glimpse(layout));
        assert_send(client.fsync(layout));
        assert_send(client.lookup(who, Fid::ROOT, b"x"));
        assert_send(client.stat(who, Fid::ROOT));
        assert_send(client.statfs_targets());
        assert_send(client.statfs());
    }

    #[test]
    fn client_is_shared_between_threads() {
        fn check<T: Send + Sync>() {}
        check::<Client>();
        let config = ClientConfig::new("mgs:988");
        assert_eq!(config.connect_timeout, Duration::from_secs(5));
        assert_eq!(config.request_timeout, Duration::from_secs(100));
    }
}
