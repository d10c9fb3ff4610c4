//! The cluster map, as every process but the MGS's learns it: one component for the client
//! library, the servers (the MDS follows the OSTs through it), the CLI and the test harness.
//!
//! * [`fetch_map`]: the map once (`weft status`, a test waiting for its targets), from one
//!   address; [`fetch_map_from`] from a replicated MGS's leader ([`MgsPeers`]);
//! * [`MapFollower`]: the map kept current. It asks the MGS with a long poll
//!   ([`mgs::WatchMap`]): the MGS answers as soon as the version moves past the one the
//!   follower knows, or after [`WATCH_WAIT_MS`] with `Unchanged`, so a change reaches every
//!   follower at once and an unchanged map costs one small request per wait. A follower can
//!   also ask at once ([`MapFollower::refresh`]), as a client does when a target it needs
//!   is missing or silent. It asks through [`MgsPeers`], so it follows a replicated MGS's
//!   leader: a replica that stops leading answers its long poll with `Moved` at once. A
//!   client's follower names the client in its watch ([`MapFollower::start_for_client`]):
//!   the MGS answers `Evicted` when a server evicted it, which the follower passes on
//!   ([`MapFollower::evictions`]), so an idle client learns it without pinging anyone;
//! * [`MapState`]: one version of the map, indexed by target;
//! * [`PeerSet`]: one [`Peer`] per server address the map names, made on first use and
//!   dropped when its address leaves the map, so connections follow the servers a process
//!   talks to, never the number of targets.

use crate::limits::{WATCH_ANSWER_MARGIN_MS, WATCH_RETRY_MS_MAX, WATCH_RETRY_MS_MIN, WATCH_WAIT_MS};
use crate::mgs::MgsPeers;
use crate::peer::{Peer, PeerOptions};
use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;
use tokio::sync::{watch, Notify};
use weft_proto::msg::{mgs, ClusterMap, MgsReply, RequestHeader, TargetInfo, TargetKind, TargetState};
use weft_proto::WeftResult;

/// The map, straight from the MGS at `peer`, within `timeout`.
pub async fn fetch_map(peer: &Peer, timeout: Duration) -> WeftResult<ClusterMap> {
    let op = mgs::GetMap { known_version: 0 };
    match peer.op(RequestHeader::default(), 0, op, Bytes::new(), timeout).await?.0 {
        MgsReply::Map(map) => Ok(map),
        // Version 0 always fetches; an MGS answering otherwise has nothing to give.
        MgsReply::Unchanged(version) => Ok(ClusterMap { version, ..Default::default() }),
        other => Err(unexpected(&other)),
    }
}

/// The map from the management service's leader among `mgs`, within `timeout`.
pub async fn fetch_map_from(mgs: &MgsPeers, timeout: Duration) -> WeftResult<ClusterMap> {
    match mgs.op(RequestHeader::default(), mgs::GetMap { known_version: 0 }, timeout).await? {
        MgsReply::Map(map) => Ok(map),
        MgsReply::Unchanged(version) => Ok(ClusterMap { version, ..Default::default() }),
        other => Err(unexpected(&other)),
    }
}

fn unexpected(reply: &MgsReply) -> weft_proto::WeftError {
    use weft_proto::msg::ops::Variant;
    weft_proto::WeftError::protocol(format!("the management service answered a map request with {}", reply.variant()))
}

/// One version of the map, indexed so that finding a target's address is one hash lookup
/// however many targets there are.
#[derive(Debug, Default)]
pub struct MapState {
    pub map: ClusterMap,
    index: HashMap<(TargetKind, u32), usize>,
}

impl MapState {
    pub fn new(map: ClusterMap) -> MapState {
        let index = map.targets.iter().enumerate().map(|(i, t)| ((t.kind, t.index), i)).collect();
        MapState { map, index }
    }

    pub fn version(&self) -> u64 {
        self.map.version
    }

    pub fn target(&self, kind: TargetKind, index: u32) -> Option<&TargetInfo> {
        self.index.get(&(kind, index)).map(|i| &self.map.targets[*i])
    }

    pub fn address(&self, kind: TargetKind, index: u32) -> Option<&str> {
        self.target(kind, index).map(|t| t.address.as_str())
    }

    /// Every server address the map names.
    pub fn addresses(&self) -> HashSet<&str> {
        self.map.targets.iter().map(|t| t.address.as_str()).collect()
    }

    /// One target (the first in the map) of each server address that is up.
    pub fn one_target_per_address(&self) -> Vec<(TargetKind, u32)> {
        let mut seen = HashSet::new();
        self.map
            .targets
            .iter()
            .filter(|t| t.state == TargetState::Up && seen.insert(t.address.as_str()))
            .map(|t| (t.kind, t.index))
            .collect()
    }
}

/// How a target is named in messages: `OST 7`, `MDT 0`.
pub fn target_label(kind: TargetKind, index: u32) -> String {
    match kind {
        TargetKind::Mdt => format!("MDT {index}"),
        TargetKind::Ost => format!("OST {index}"),
    }
}

/// The map kept current; see the module documentation. Dropping the last handle ends the
/// task that follows it.
pub struct MapFollower {
    mgs: Arc<MgsPeers>,
    published: watch::Sender<Arc<MapState>>,
    /// One fetch at a time: concurrent askers wait for it and use its result.
    fetching: tokio::sync::Mutex<()>,
    /// Wakes the follower's task to fetch at once.
    wanted: Arc<Notify>,
    /// The client this follower watches for (its current id; 0: none, a server's).
    client_id: Arc<AtomicU64>,
    /// The last client id the MGS said was evicted (0: none yet).
    evicted: watch::Sender<u64>,
}

impl MapFollower {
    /// Fetches the map from the MGS behind `mgs` (within `timeout`) and starts following it.
    pub async fn start(mgs: Arc<MgsPeers>, timeout: Duration) -> WeftResult<Arc<MapFollower>> {
        MapFollower::start_for_client(mgs, timeout, Arc::new(AtomicU64::new(0))).await
    }

    /// As [`MapFollower::start`], for the client whose id `client_id` holds (read at each
    /// watch, so a client back under a new id is watched under it): its evictions come out
    /// of [`MapFollower::evictions`].
    pub async fn start_for_client(
        mgs: Arc<MgsPeers>,
        timeout: Duration,
        client_id: Arc<AtomicU64>,
    ) -> WeftResult<Arc<MapFollower>> {
        let map = fetch_map_from(&mgs, timeout).await?;
        mgs.learn(&map.mgs_replicas);
        let follower = Arc::new(MapFollower {
            mgs,
            published: watch::Sender::new(Arc::new(MapState::new(map))),
            fetching: tokio::sync::Mutex::new(()),
            wanted: Arc::new(Notify::new()),
            client_id,
            evicted: watch::Sender::new(0),
        });
        tokio::spawn(follow(Arc::downgrade(&follower), follower.wanted.clone()));
        Ok(follower)
    }

    /// The management service it follows (for other requests to it).
    pub fn mgs(&self) -> &Arc<MgsPeers> {
        &self.mgs
    }

    /// The map as known now.
    pub fn current(&self) -> Arc<MapState> {
        self.published.borrow().clone()
    }

    /// Learns every change of the map.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MapState>> {
        self.published.subscribe()
    }

    /// Learns each client id the MGS said was evicted (a client's follower only).
    pub fn evictions(&self) -> watch::Receiver<u64> {
        self.evicted.subscribe()
    }

    /// Asks the MGS now, unless the map moved past `seen_version` meanwhile; returns whether
    /// the map is newer than `seen_version` afterwards.
    pub async fn refresh(&self, seen_version: u64) -> WeftResult<bool> {
        let _one_at_a_time = self.fetching.lock().await;
        if self.current().version() != seen_version {
            return Ok(true);
        }
        let map = fetch_map_from(&self.mgs, self.mgs.options().connect_timeout).await?;
        Ok(self.install(map))
    }

    /// Has the follower's task ask the MGS at once (a target is silent: did it move?).
    pub fn refresh_soon(&self) {
        self.wanted.notify_one();
    }

    /// Publishes `map` if it is newer than the current one.
    fn install(&self, map: ClusterMap) -> bool {
        let newer = map.version > self.current().version();
        if newer {
            // A replicated MGS's members, for when the listed ones are gone (mgs.rs).
            self.mgs.learn(&map.mgs_replicas);
            tracing::debug!(version = map.version, targets = map.targets.len(), "cluster map updated");
            self.published.send_replace(Arc::new(MapState::new(map)));
        }
        newer
    }
}

/// The follower's task: long polls, and a fetch at once when asked.
async fn follow(follower: Weak<MapFollower>, wanted: Arc<Notify>) {
    let mut retry_ms = WATCH_RETRY_MS_MIN;
    loop {
        let Some(f) = follower.upgrade() else { return };
        let known = f.current().version();
        let peer = f.mgs.clone();
        // An id already reported evicted is not watched again (its answer would come at
        // once, again and again) until the client is back under a new one.
        let client_id = Some(f.client_id.load(Ordering::Acquire)).filter(|id| *id != *f.evicted.borrow()).unwrap_or(0);
        drop(f);
        let watch = async {
            let op = mgs::WatchMap { known_version: known, wait_ms: WATCH_WAIT_MS, client_id };
            let wait = Duration::from_millis(u64::from(WATCH_WAIT_MS));
            let timeout = wait + Duration::from_millis(WATCH_ANSWER_MARGIN_MS);
            peer.op_answered_within(RequestHeader::default(), op, timeout, wait).await
        };
        let answer = tokio::select! {
            answer = watch => answer,
            _ = wanted.notified() => fetch_map_from(&peer, peer.options().connect_timeout).await.map(MgsReply::Map),
        };
        let Some(f) = follower.upgrade() else { return };
        let answer = answer.and_then(|r| match r {
            MgsReply::Map(_) | MgsReply::Unchanged(_) | MgsReply::Evicted => Ok(r),
            other => Err(unexpected(&other)),
        });
        match answer {
            Ok(MgsReply::Evicted) => {
                tracing::info!(client = client_id, "the management service says a server evicted this client");
                f.evicted.send_replace(client_id);
                retry_ms = WATCH_RETRY_MS_MIN;
            }
            Ok(MgsReply::Map(map)) => {
                f.install(map);
                retry_ms = WATCH_RETRY_MS_MIN;
            }
            // Unchanged (other answers were made errors above).
            Ok(_) => retry_ms = WATCH_RETRY_MS_MIN,
            Err(e) => {
                tracing::debug!("following the cluster map: {e}; asking again in {retry_ms} ms");
                drop(f);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(retry_ms)) => {}
                    _ = wanted.notified() => {}
                }
                retry_ms = (retry_ms * 2).min(WATCH_RETRY_MS_MAX);
            }
        }
    }
}

/// One [`Peer`] per server address, shared by every target that address serves.
pub struct PeerSet {
    opts: RwLock<PeerOptions>,
    peers: RwLock<HashMap<String, Arc<Peer>>>,
}

impl PeerSet {
    pub fn new(opts: PeerOptions) -> PeerSet {
        PeerSet { opts: RwLock::new(opts), peers: RwLock::new(HashMap::new()) }
    }

    /// The peer for `address`, made on first use.
    pub fn get(&self, address: &str) -> Arc<Peer> {
        if let Some(p) = self.peers.read().unwrap_or_else(|p| p.into_inner()).get(address) {
            return p.clone();
        }
        let opts = self.opts.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut peers = self.peers.write().unwrap_or_else(|p| p.into_inner());
        peers.entry(address.to_string()).or_insert_with(|| Arc::new(Peer::new(address, opts))).clone()
    }

    /// The peer serving target `(kind, index)` in `state`, if the map names it.
    pub fn for_target(&self, state: &MapState, kind: TargetKind, index: u32) -> Option<(Arc<Peer>, String)> {
        let address = state.address(kind, index)?;
        Some((self.get(address), address.to_string()))
    }

    /// Drops the peers of addresses that left the map.
    pub fn retain_map(&self, state: &MapState) {
        let addresses = state.addresses();
        self.peers.write().unwrap_or_else(|p| p.into_inner()).retain(|a, _| addresses.contains(a.as_str()));
    }

    /// Drops every peer; new ones are made with `opts` (a client back under a new id).
    pub fn reset(&self, opts: PeerOptions) {
        *self.opts.write().unwrap_or_else(|p| p.into_inner()) = opts;
        self.peers.write().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The peers made so far.
    pub fn len(&self) -> usize {
        self.peers.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(kind: TargetKind, index: u32, address: &str) -> TargetInfo {
        TargetInfo::new(kind, index, address)
    }

    #[test]
    fn the_index_finds_sparse_targets_by_kind() {
        let map = ClusterMap {
            version: 3,
            fsname: "weft".into(),
            targets: vec![
                t(TargetKind::Mdt, 0, "a:1"),
                t(TargetKind::Ost, 0, "b:1"),
                t(TargetKind::Ost, 1000, "b:1"),
                t(TargetKind::Ost, 7, "c:1"),
            ],
            pools: Default::default(),
            params: Vec::new(),
            decay: Vec::new(),
            sync_mirror_pools: Default::default(),
            mgs_replicas: Vec::new(),
            nodemap: Default::default(),
            qos: Default::default(),
        };
        let s = MapState::new(map);
        assert_eq!(s.address(TargetKind::Ost, 1000), Some("b:1"));
        assert_eq!(s.address(TargetKind::Mdt, 0), Some("a:1"));
        assert_eq!(s.address(TargetKind::Mdt, 7), None);
        assert_eq!(s.address(TargetKind::Ost, 8), None);
        assert_eq!(s.addresses().len(), 3);
        assert_eq!(s.one_target_per_address(), vec![(TargetKind::Mdt, 0), (TargetKind::Ost, 0), (TargetKind::Ost, 7)]);
        assert_eq!(target_label(TargetKind::Ost, 7), "OST 7");
    }

    #[tokio::test]
    async fn peers_are_one_per_address_and_follow_the_map() {
        let set = PeerSet::new(PeerOptions::default());
        let map = |targets| MapState::new(ClusterMap { version: 1, targets, ..Default::default() });
        let both = map(vec![t(TargetKind::Ost, 0, "b:1"), t(TargetKind::Ost, 1, "b:1"), t(TargetKind::Ost, 2, "c:1")]);
        let (p0, _) = set.for_target(&both, TargetKind::Ost, 0).unwrap();
        let (p1, a1) = set.for_target(&both, TargetKind::Ost, 1).unwrap();
        assert!(Arc::ptr_eq(&p0, &p1), "one connection per server, not per target");
        assert_eq!(a1, "b:1");
        set.for_target(&both, TargetKind::Ost, 2).unwrap();
        assert_eq!(set.len(), 2);
        assert!(set.for_target(&both, TargetKind::Ost, 3).is_none());
        set.retain_map(&map(vec![t(TargetKind::Ost, 2, "c:1")]));
        assert_eq!(set.len(), 1, "the server that left the map is dropped");
        set.reset(PeerOptions { client_id: 9, ..Default::default() });
        assert!(set.is_empty());
        assert_eq!(set.get("c:1").options().client_id, 9);
    }
}
