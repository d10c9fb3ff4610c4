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

pub mod copytool;
mod dirs;
mod failing;
pub mod fallocate;
mod flock;
mod hsm;
pub mod inactive;
pub mod inodes;
pub mod limits;
pub mod locks;
mod metadata;
mod migrate;
pub mod mirror;
pub mod open_file;
pub mod params;
pub mod qos;
pub mod quota;
mod recovery;
mod reply_slots;
mod statahead;
mod statfs;
pub mod striping;
mod sync_mirror;
mod uncommitted;
pub mod wbc;
mod write_many;
mod write_replay;

mod io;

pub use io::Glimpse;
pub use open_file::{OpenFile, Siblings};
pub use statfs::TargetStatfs;
pub use weft_proto::msg::mdt::Opened;
pub mod virtual_xattr;

use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use weft_proto::lock::{LdlmReply, LdlmRequest, LockTarget};
use weft_proto::msg::ops::{service_answer, take_reply, Op, OpKind, Payload, Variant};
use weft_proto::msg::{
    Caller, ClusterMap, MdtReply, MdtRequest, OstReply, OstRequest, ReplyBody, RequestBody, RequestHeader,
    ServiceRequest, TargetKind,
};
use weft_proto::{ErrorCode, WeftError, WeftResult};
use weft_rpc::map::{target_label, MapFollower, MapState, PeerSet};
use weft_rpc::{Peer, PeerOptions};

/// What a client needs to start: where the MGS is, and how long to wait.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port` of the management service, or of each replica of a replicated one,
    /// separated by commas (`a:p,b:p,c:p`).
    pub mgs_address: String,
    /// How long one connection attempt may take; also the bound on the first MGS contact.
    pub connect_timeout: Duration,
    /// How long requests wait and resend while a server restarts before they fail (EIO).
    pub request_timeout: Duration,
    /// Whether reads and writes take extent locks, which let the mount cache pages and
    /// attributes coherently with other clients. Off only to measure what locking costs.
    pub extent_locks: bool,
    /// Most locks cached before the least recently used are given back.
    pub locks_cached_max: usize,
    /// How long an open or truncate of a released file waits for its restore (HSM).
    pub restore_timeout: Duration,
    /// The network of the servers started in this process (`weft up`, a test, a
    /// simulation): those are reached without TCP, and call this client back without TCP.
    /// None: every server is reached over TCP.
    pub network: Option<Arc<weft_rpc::Network>>,
    /// The file system's shared key, proved at every connection to its servers; by
    /// default the process's (`weft_rpc::secure::process_key`). None: no key.
    pub key: Option<Arc<weft_rpc::secure::SharedKey>>,
    /// The local address the client connects from (`weft mount -o nid=ADDR`): the address
    /// servers' nodemaps place it by. None: the one the kernel picks.
    pub local_address: Option<std::net::IpAddr>,
    /// The metadata write-back cache (wbc/; off by default).
    pub wbc: wbc::WbcConfig,
    /// Statahead (statahead.rs; on by default, as Lustre's).
    pub statahead: bool,
}

impl ClientConfig {
    pub fn new(mgs_address: impl Into<String>) -> ClientConfig {
        let defaults = PeerOptions::default();
        ClientConfig {
            mgs_address: mgs_address.into(),
            connect_timeout: defaults.connect_timeout,
            request_timeout: defaults.request_timeout,
            extent_locks: true,
            locks_cached_max: limits::LOCKS_CACHED_MAX,
            restore_timeout: Duration::from_secs(limits::RESTORE_TIMEOUT_S_DEFAULT),
            network: None,
            key: defaults.key,
            local_address: None,
            wbc: wbc::WbcConfig::default(),
            statahead: true,
        }
    }
}

pub struct Client {
    config: ClientConfig,
    /// Random per incarnation: a client evicted by a server comes back under a new id.
    /// Shared with the map follower, which names it in its watch (see `watch_evictions`).
    client_id: Arc<AtomicU64>,
    /// Counts incarnations; what was started under an older one is not finished (a write
    /// queued before an eviction is never sent after it).
    generation: AtomicU64,
    /// Object targets that failed a mirror's read, until when they go last (see
    /// `Client::mirror_read_order`).
    failing: Mutex<failing::FailingTargets>,
    locks: Arc<locks::LockCache>,
    /// Names and attributes answered under locks this client holds (see inodes.rs).
    inodes: inodes::InodeCache,
    /// The striped directories seen, to send each name to its stripe (dirs.rs).
    stripes: dirs::Stripes,
    weak_self: Weak<Client>,
    /// Makes this client reachable for callbacks from servers of its network.
    local_registration: std::sync::Mutex<Option<weft_rpc::ClientRegistration>>,
    next_request_id: AtomicU64,
    /// Where the MDT keeps each mutation's reply for a resend.
    reply_slots: reply_slots::ReplySlots,
    /// What each target's import went through (`{mdc,osc}.*.import`).
    imports: std::sync::Mutex<std::collections::HashMap<LockTarget, recovery::ImportStats>>,
    /// OSTs deactivated on this client (`osc.*.active=0`): requests to them fail at once.
    pub inactive: inactive::InactiveOsts,
    /// This client's opens on the MDT, by handle: what it replays to a new leader.
    opens: std::sync::Mutex<std::collections::HashMap<u64, weft_proto::msg::mdt::ReplayedOpen>>,
    /// The owner, group and project of each file open here (with how many opens), sent
    /// with its writes: the OSTs count the objects' blocks against them (quotas).
    owners: std::sync::Mutex<std::collections::HashMap<weft_proto::Fid, (u32, weft_proto::msg::quota::QuotaOwner)>>,
    /// Files an OST said are close to a quota limit, until when their writes go through.
    quota_tight: std::sync::Mutex<std::collections::HashMap<weft_proto::Fid, std::time::Instant>>,
    /// This client's advisory locks as the MDT granted them: what it replays to a new one.
    advisory: std::sync::Mutex<flock::HeldAdvisory>,
    /// Writes the OSTs answered but had not committed: what it replays after an OSS
    /// restart (uncommitted.rs).
    uncommitted: uncommitted::Uncommitted,
    /// A task asks the OSTs of the kept writes what they committed (set while it runs).
    polling_commits: std::sync::atomic::AtomicBool,
    /// The metadata write-back cache (wbc/).
    wbc: wbc::Wbc,
    /// What statahead knows of the directories looked up in.
    statahead: statahead::Statahead,
    /// The cluster map, kept current; requests waiting on a target learn when it moves.
    map: Arc<MapFollower>,
    /// One peer per server address, made on first use.
    peers: PeerSet,
}

/// A new client id from the operating system's generator: not a user-space generator's,
/// whose state a forked child shares with its parent (rand 0.9's thread generator does
/// not reseed after fork), so that two children of one process never come up as one client
/// (the servers would take one's requests for the other's resends).
fn fresh_client_id() -> u64 {
    getrandom::u64().unwrap_or_else(|_| rand::random::<u64>() ^ u64::from(std::process::id()).rotate_left(32))
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("mgs_address", &self.config.mgs_address)
            .field("client_id", &format_args!("{:#x}", self.client_id()))
            .field("map_version", &self.map.current().version())
            .finish()
    }
}

impl Client {
    /// Fetches the cluster map from the MGS (within `connect_timeout`) and starts following
    /// it.
    pub async fn connect(config: ClientConfig) -> WeftResult<Arc<Client>> {
        // The MGS never calls a client back: its peer takes no callbacks.
        let mgs_opts = PeerOptions {
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            network: config.network.clone(),
            key: config.key.clone(),
            local_address: config.local_address,
            ..PeerOptions::default()
        };
        // One address, or a replicated MGS's (`a:p,b:p,c:p`): the map is followed at the leader.
        let mgs = Arc::new(weft_rpc::mgs::MgsPeers::new(&config.mgs_address, mgs_opts));
        let client_id = fresh_client_id();
        let id = Arc::new(AtomicU64::new(client_id));
        let map = MapFollower::start_for_client(mgs, config.connect_timeout, id.clone()).await.map_err(|e| {
            WeftError::new(
                e.code,
                format!("cannot reach the management service at {}: {}", config.mgs_address, e.message),
            )
        })?;
        let client = Arc::new_cyclic(|weak: &Weak<Client>| Client {
            client_id: id,
            generation: AtomicU64::new(1),
            failing: Mutex::new(failing::FailingTargets::default()),
            locks: Arc::new(locks::LockCache::new(config.extent_locks, config.locks_cached_max)),
            inodes: inodes::InodeCache::default(),
            stripes: dirs::Stripes::default(),
            weak_self: weak.clone(),
            local_registration: std::sync::Mutex::new(None),
            next_request_id: AtomicU64::new(1),
            reply_slots: reply_slots::ReplySlots::default(),
            opens: Default::default(),
            owners: Default::default(),
            quota_tight: Default::default(),
            advisory: Default::default(),
            uncommitted: Default::default(),
            polling_commits: Default::default(),
            imports: Default::default(),
            inactive: Default::default(),
            peers: PeerSet::new(peer_options(&config, client_id, weak)),
            wbc: wbc::Wbc::new(config.wbc),
            statahead: Default::default(),
            map,
            config,
        });
        client.register_local(client_id);
        tokio::spawn(recovery::drop_peers_that_left(Arc::downgrade(&client), client.map.subscribe()));
        tokio::spawn(recovery::watch_evictions(Arc::downgrade(&client), client.map.evictions()));
        Ok(client)
    }

    fn register_local(&self, client_id: u64) {
        let Some(network) = &self.config.network else { return };
        let handler = Arc::new(locks::Callbacks(self.weak_self.clone()));
        *self.local_registration.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(network.register_client(client_id, handler));
    }

    /// The current incarnation (see [`Client::client_id`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A server evicted this client (it did not answer a lock callback in time): its locks
    /// are gone, so every cache they guarded is dropped, and the client comes back under a
    /// new id with new connections. What was under way before fails with EIO.
    fn evicted(&self, old_id: u64) {
        let new_id = fresh_client_id();
        if self.client_id.load(Ordering::Acquire) != old_id {
            return; // another request saw it first
        }
        // (Requests made under the old id's locks keep carrying it and are refused; see
        // `locks::ExtentGuard`.)
        self.generation.fetch_add(1, Ordering::AcqRel);
        if self.client_id.compare_exchange(old_id, new_id, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        tracing::warn!("evicted as client {old_id:016x}; reconnecting as {new_id:016x}");
        self.peers.reset(peer_options(&self.config, new_id, &self.weak_self));
        self.register_local(new_id);
        self.locks.forget_all();
        self.inodes.clear();
        self.wbc.clear();
        // Its kept writes went out under the old id: an OST that restarted would take their
        // replays, but the eviction says this client's view of what it wrote is void.
        let dropped = self.uncommitted.clear();
        if dropped > 0 {
            tracing::warn!("{dropped} writes not yet committed by their OSTs are no longer kept for replay");
        }
        // The servers dropped its advisory locks with it.
        let mut advisory = self.held_advisory();
        if !advisory.is_empty() {
            tracing::warn!("the advisory locks this client held are lost with its eviction");
            advisory.clear();
        }
    }

    /// The cluster map as this client knows it now.
    pub fn map(&self) -> ClusterMap {
        self.map.current().map.clone()
    }

    /// The cluster map as it changes (the permanent parameters in it, say).
    pub fn map_changes(&self) -> tokio::sync::watch::Receiver<Arc<MapState>> {
        self.map.subscribe()
    }

    pub fn client_id(&self) -> u64 {
        self.client_id.load(Ordering::Acquire)
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The management service this client follows.
    pub fn mgs_address(&self) -> &str {
        &self.config.mgs_address
    }

    fn has_target(&self, kind: TargetKind, index: u32) -> bool {
        let (kind, index) = server_of(kind, index);
        self.map.current().target(kind, index).is_some()
    }

    fn header(&self, who: &Caller) -> RequestHeader {
        RequestHeader {
            client_id: self.client_id(),
            request_id: self.next_request_id.fetch_add(1, Ordering::Relaxed),
            reply_slot: 0,
            identity: who.identity.clone(),
            jobid: who.jobid.clone(),
        }
    }

    /// The peer serving a target. A target missing from the map makes the client ask the
    /// MGS once before it fails.
    pub(crate) async fn target_peer(&self, kind: TargetKind, index: u32) -> WeftResult<(Arc<Peer>, String)> {
        let (kind, index) = server_of(kind, index);
        let state = self.map.current();
        if let Some(found) = self.peers.for_target(&state, kind, index) {
            return Ok(found);
        }
        if let Err(e) = self.map.refresh(state.version()).await {
            tracing::debug!("refetching the cluster map failed: {e}");
        }
        let state = self.map.current();
        self.peers.for_target(&state, kind, index).ok_or_else(|| {
            WeftError::not_found(format!(
                "{} is not in the cluster map (version {})",
                target_label(kind, index),
                state.version()
            ))
        })
    }

    /// Sends one request to a target and waits for its reply, following the target if the
    /// map moves it to another address while the request waits. `timeout` shortens the
    /// request timeout for this call.
    async fn call_target(
        &self,
        kind: TargetKind,
        index: u32,
        header: RequestHeader,
        body: RequestBody,
        bulk: Bytes,
        timeout: Option<Duration>,
    ) -> WeftResult<(ReplyBody, Bytes)> {
        if kind == TargetKind::Ost && weft_proto::layout::dom_mdt(index).is_none() {
            self.inactive.check(index)?;
        }
        let timeout = timeout.map_or(self.config.request_timeout, |t| t.min(self.config.request_timeout));
        // Tokio's clock: a simulation's paused clock drives the resend decision.
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (peer, address) = self.target_peer(kind, index).await?;
            let remaining = time_left(deadline, tokio::time::Instant::now()).unwrap_or_default();
            let mut map_rx = self.map.subscribe();
            let call = peer.call_with_timeout(header.clone(), body.clone(), bulk.clone(), remaining);
            let moved = async {
                loop {
                    tokio::select! {
                        changed = map_rx.changed() => {
                            if changed.is_err() {
                                std::future::pending::<()>().await;
                            }
                            let state = map_rx.borrow_and_update();
                            let (kind, index) = server_of(kind, index);
                            if state.address(kind, index).is_some_and(|a| a != address) {
                                return;
                            }
                        }
                        _ = tokio::time::sleep(Duration::from_millis(limits::TARGET_SILENCE_MS_MAX)) => {
                            // The target is slow or gone: ask the MGS whether it moved.
                            self.map.refresh_soon();
                        }
                    }
                }
            };
            tokio::select! {
                result = call => {
                    match &result {
                        Err(e) if e.code == ErrorCode::Evicted => self.evicted(header.client_id),
                        Err(e) if e.code == ErrorCode::Moved => {
                            // Not served there now (a replica that lost the lead): resend where
                            // the map says once it says so, or after a pause, within the time.
                            tracing::debug!(target = %target_label(kind, index), from = %address, "{}", e.message);
                            self.map.refresh_soon();
                            let pause = Duration::from_millis(limits::MOVED_RETRY_MS);
                            let left = time_left(deadline, tokio::time::Instant::now()).unwrap_or_default();
                            if left <= pause {
                                return result;
                            }
                            let mut map_rx = self.map.subscribe();
                            let _ = tokio::time::timeout(pause, map_rx.changed()).await;
                            continue;
                        }
                        _ => {}
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
                    if time_left(deadline, tokio::time::Instant::now()).is_none() {
                        return Err(WeftError::new(
                            ErrorCode::TimedOut,
                            format!("{} did not answer {} in time", target_label(kind, index), body.opcode_name()),
                        ));
                    }
                }
            }
        }
    }

    /// One metadata op to the MDT: a mutation holds a reply-cache slot until its answer;
    /// an answer naming an inode records the intent lock it carries.
    pub(crate) async fn mdt<O>(&self, who: &Caller, op: O) -> WeftResult<O::Reply>
    where
        O: Op<Request = MdtRequest, Answer = MdtReply>,
    {
        self.mdt_routed(who, op, None).await
    }

    /// [`Client::mdt`] to MDT `index` (what names no inode there: HSM's take, a quota).
    pub(crate) async fn mdt_on<O>(&self, who: &Caller, index: u32, op: O) -> WeftResult<O::Reply>
    where
        O: Op<Request = MdtRequest, Answer = MdtReply>,
    {
        self.mdt_routed(who, op, Some(index)).await
    }

    async fn mdt_routed<O>(&self, who: &Caller, op: O, to: Option<u32>) -> WeftResult<O::Reply>
    where
        O: Op<Request = MdtRequest, Answer = MdtReply>,
    {
        let mut header = self.header(who);
        // Held until the answer: every resend of this mutation carries the same slot.
        let slot = if O::KIND == OpKind::Mutation { Some(self.reply_slots.take().await) } else { None };
        header.reply_slot = slot.as_ref().map_or(0, |s| s.number());
        // The answer may carry an intent lock (recorded before the ticket goes).
        let ticket = self.locks.ticket();
        let mut request: MdtRequest = op.into();
        // A name goes to its stripe of a striped directory, a request to its FID's MDT.
        self.stripes.route(&mut request);
        // A change of this client: what it touches is forgotten now and not remembered
        // from answers that may have crossed it (see inodes.rs).
        let change = inodes::plan(&request).map(|(touches, keep)| (self.inodes.begin(&touches), keep));
        let mut sent = self
            .send::<MdtRequest, MdtReply>(
                header.clone(),
                to.unwrap_or_else(|| dirs::target(&request)),
                request.clone(),
                Bytes::new(),
                None,
            )
            .await;
        if sent.as_ref().is_err_and(|e| e.code == ErrorCode::WrongStripe) {
            // The directory was striped since this client last saw it: its stripes, then
            // the request to its name's stripe.
            self.learn_stripes(who, &request).await;
            self.stripes.route(&mut request);
            let target = to.unwrap_or_else(|| dirs::target(&request));
            sent = self.send::<MdtRequest, MdtReply>(header, target, request, Bytes::new(), None).await;
        }
        // A change of names comes with its directories (mdt::Changed).
        let sent = sent.map(|(answer, _)| answer.into_parts());
        if let Ok((answer, dirs)) = &sent {
            for inode in answer.inode().into_iter().chain(dirs).chain(answer.more_inodes()) {
                self.stripes.note(inode);
                if let Some(grant) = &inode.lock {
                    self.note_inode_lock(grant, ticket.id());
                }
            }
        }
        if let Some((change, keep)) = change {
            let dirs = sent.as_ref().map_or(&[][..], |(_, dirs)| &dirs[..]);
            let outcome = match &sent {
                Ok((answer, _)) => Ok(answer.inode().and_then(|inode| keep.answer(inode))),
                Err(_) => Err(()),
            };
            self.inodes.end(change, outcome, dirs);
        }
        take_reply::<O>(sent?.0)
    }

    /// One request to a target's lock manager.
    pub(crate) async fn ldlm<O>(&self, who: &Caller, target: LockTarget, op: O) -> WeftResult<O::Reply>
    where
        O: Op<Request = LdlmRequest, Answer = LdlmReply>,
    {
        let header = self.header(who);
        let (kind, index) = target.target();
        let body = RequestBody::Ldlm { target, op: op.into() };
        let (reply, _) = self.call_target(kind, index, header, body, Bytes::new(), None).await?;
        take_reply::<O>(service_answer(O::OPCODE, reply)?)
    }

    /// One object op to an OST. The OSS checks no permission (the MDS authorized the open
    /// that handed out the layout); the caller's identity and jobid are for its scheduling
    /// and statistics.
    pub(crate) async fn ost<O>(&self, who: &Caller, ost: u32, op: O, bulk: Bytes) -> WeftResult<(O::Reply, Bytes)>
    where
        O: Op<Request = OstRequest, Answer = OstReply>,
    {
        self.call(who, ost, op, bulk, None).await
    }

    /// One object op made under extent locks (a write, a punch): it goes out under the
    /// client id the locks were granted to (see [`locks::ExtentGuard`]), so an eviction
    /// between the locking and the sending makes it fail instead of landing.
    pub(crate) async fn ost_under<O>(
        &self,
        who: &Caller,
        locks: &locks::ExtentGuard,
        ost: u32,
        op: O,
        bulk: Bytes,
    ) -> WeftResult<(O::Reply, Bytes)>
    where
        O: Op<Request = OstRequest, Answer = OstReply>,
    {
        let header = RequestHeader { client_id: locks.client_id, ..self.header(who) };
        let (answer, bulk) = self.send::<OstRequest, OstReply>(header, ost, op.into(), bulk, None).await?;
        Ok((take_reply::<O>(answer)?, bulk))
    }

    /// One op to target `index` of its service, bounded by `timeout` (at most the request
    /// timeout) when given.
    pub(crate) async fn call<O>(
        &self,
        who: &Caller,
        index: u32,
        op: O,
        bulk: Bytes,
        timeout: Option<Duration>,
    ) -> WeftResult<(O::Reply, Bytes)>
    where
        O: Op,
        O::Request: TargetService,
        O::Answer: Payload<ReplyBody> + Variant,
    {
        let header = self.header(who);
        let (answer, bulk) = self.send::<O::Request, O::Answer>(header, index, op.into(), bulk, timeout).await?;
        Ok((take_reply::<O>(answer)?, bulk))
    }

    /// Sends one request of a service to target `index` and takes the service's answer out
    /// of the reply.
    async fn send<R, A>(
        &self,
        header: RequestHeader,
        index: u32,
        request: R,
        bulk: Bytes,
        timeout: Option<Duration>,
    ) -> WeftResult<(A, Bytes)>
    where
        R: TargetService,
        A: Payload<ReplyBody> + Variant,
    {
        let body = request.into_body(index);
        let opcode = body.opcode_name();
        let (reply, bulk) = self.call_target(R::KIND, index, header, body, bulk, timeout).await?;
        Ok((service_answer(opcode, reply)?, bulk))
    }
}

/// The target of the cluster map that serves target `index` of `kind`: itself, or for a
/// data-on-MDT object target its MDT (whose server keeps those objects).
/// What is left of a request's time at `now` before its `deadline`; None once it passed
/// (then a moved target is not tried again). The caller reads the clock (tokio's, so a
/// paused clock drives the decision).
fn time_left(deadline: tokio::time::Instant, now: tokio::time::Instant) -> Option<Duration> {
    deadline.checked_duration_since(now).filter(|left| !left.is_zero())
}

fn server_of(kind: TargetKind, index: u32) -> (TargetKind, u32) {
    match (kind, weft_proto::layout::dom_mdt(index)) {
        (TargetKind::Ost, Some(mdt)) => (TargetKind::Mdt, mdt),
        _ => (kind, index),
    }
}

/// The request enums whose ops go to one target of the cluster map.
pub(crate) trait TargetService: ServiceRequest {
    const KIND: TargetKind;
}

impl TargetService for MdtRequest {
    const KIND: TargetKind = TargetKind::Mdt;
}

impl TargetService for OstRequest {
    const KIND: TargetKind = TargetKind::Ost;
}

fn peer_options(config: &ClientConfig, client_id: u64, client: &Weak<Client>) -> PeerOptions {
    PeerOptions {
        connect_timeout: config.connect_timeout,
        request_timeout: config.request_timeout,
        client_id,
        callbacks: Some(Arc::new(locks::Callbacks(client.clone()))),
        network: config.network.clone(),
        key: config.key.clone(),
        local_address: config.local_address,
    }
}

/// The error of work started before this client was evicted.
pub(crate) fn evicted_error() -> WeftError {
    WeftError::new(ErrorCode::Evicted, "this client was evicted meanwhile; what it had under way is discarded")
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
    fn client_futures_are_send(client: &Client, layout: &Layout, who: &Caller) {
        assert_send(Client::connect(ClientConfig::new("localhost:1")));
        assert_send(client.read(who, layout, 0, 1, 1));
        assert_send(client.write(who, layout, 0, Bytes::new(), &locks::ExtentGuard::none(1)));
        assert_send(client.truncate(who, Fid::ROOT, layout, 0, None));
        assert_send(client.glimpse(who, layout));
        assert_send(client.fsync(who, layout));
        assert_send(client.lookup(who, Fid::ROOT, b"x"));
        assert_send(client.stat(who, Fid::ROOT));
        assert_send(client.statfs_targets());
        assert_send(client.statfs());
    }

    /// The resend decision on a clock a test moves: time is left until the deadline, none
    /// at it or after.
    #[tokio::test(start_paused = true)]
    async fn a_moved_target_is_tried_again_only_while_time_is_left() {
        let start = tokio::time::Instant::now();
        let deadline = start + Duration::from_secs(10);
        assert_eq!(time_left(deadline, tokio::time::Instant::now()), Some(Duration::from_secs(10)));
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert_eq!(time_left(deadline, tokio::time::Instant::now()), Some(Duration::from_millis(1)));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(time_left(deadline, tokio::time::Instant::now()), None, "at the deadline");
        assert_eq!(time_left(deadline, deadline + Duration::from_secs(1)), None, "after it");
    }

    #[test]
    fn client_is_shared_between_threads() {
        fn check<T: Send + Sync>() {}
        check::<Client>();
        let config = ClientConfig::new("mgs:988");
        assert_eq!(config.connect_timeout, Duration::from_millis(weft_rpc::limits::CONNECT_TIMEOUT_MS_DEFAULT));
        assert_eq!(config.request_timeout, Duration::from_secs(weft_rpc::limits::REQUEST_TIMEOUT_S_DEFAULT));
    }
}
