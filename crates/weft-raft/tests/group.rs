//! Replicated groups of three replicas, each behind its own weft-rpc server on loopback TCP,
//! each with a machine kept in a file (so a restart is a real one): elections, proposals,
//! a leader's death, catching up from the log and by snapshot, a minority, a damaged log,
//! membership changes.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use weft_proto::faults::{Fault, FaultPlan};
use weft_proto::msg::{GroupId, Reply, ReplyBody, RequestBody};
use weft_proto::WeftError;
use weft_raft::{Group, GroupConfig, Machine, NodeId, ProposeError, Role};
use weft_rpc::{Handler, RequestContext, Run, Server, ServerLimits};

const GROUP: GroupId = GroupId::Mdt(0);

// ---- A machine kept in a file: every entry's payload, in the order applied.

#[derive(Default, Clone, Serialize, Deserialize)]
struct Kept {
    /// (log index, payload) of every entry with data, in the order applied.
    entries: Vec<(u64, Vec<u8>)>,
    /// The state given with the last entry applied.
    state: Option<Vec<u8>>,
    last_index: Option<u64>,
}

struct FileMachine {
    path: PathBuf,
    /// Applying this log index fails (a machine whose storage broke).
    fail_at: Mutex<Option<u64>>,
    kept: Mutex<Kept>,
    /// Entries applied out of order or twice (must stay empty).
    violations: Mutex<Vec<String>>,
    installs: Mutex<u64>,
}

impl FileMachine {
    fn open(path: PathBuf) -> Arc<FileMachine> {
        let kept = match std::fs::read(&path) {
            Ok(bytes) => postcard::from_bytes(&bytes).expect("the test machine's file"),
            Err(_) => Kept::default(),
        };
        Arc::new(FileMachine {
            path,
            fail_at: Mutex::default(),
            kept: Mutex::new(kept),
            violations: Mutex::default(),
            installs: Mutex::new(0),
        })
    }

    fn save(&self, kept: &Kept) -> Result<(), String> {
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, postcard::to_allocvec(kept).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, &self.path).map_err(|e| e.to_string())
    }

    fn payloads(&self) -> Vec<Vec<u8>> {
        self.kept.lock().unwrap().entries.iter().map(|(_, p)| p.clone()).collect()
    }

    fn installs(&self) -> u64 {
        *self.installs.lock().unwrap()
    }
}

impl Machine for FileMachine {
    fn apply(&self, index: u64, payload: Option<&[u8]>, state: &[u8]) -> Result<(), String> {
        if *self.fail_at.lock().unwrap() == Some(index) {
            return Err(format!("the disk under entry {index} failed"));
        }
        let mut kept = self.kept.lock().unwrap();
        if kept.last_index.is_some_and(|last| index != last + 1) {
            self.violations.lock().unwrap().push(format!("entry {index} applied after {:?}", kept.last_index));
        }
        kept.last_index = Some(index);
        if let Some(p) = payload {
            kept.entries.push((index, p.to_vec()));
        }
        kept.state = Some(state.to_vec());
        self.save(&kept)
    }

    fn applied_state(&self) -> Option<Vec<u8>> {
        self.kept.lock().unwrap().state.clone()
    }

    fn snapshot(&self) -> Result<(Vec<u8>, Vec<u8>), String> {
        let kept = self.kept.lock().unwrap();
        let data = postcard::to_allocvec(&*kept).map_err(|e| e.to_string())?;
        Ok((kept.state.clone().unwrap_or_default(), data))
    }

    fn install(&self, state: &[u8], data: &[u8]) -> Result<(), String> {
        let mut installed: Kept = postcard::from_bytes(data).map_err(|e| e.to_string())?;
        installed.state = Some(state.to_vec());
        let mut kept = self.kept.lock().unwrap();
        *kept = installed;
        *self.installs.lock().unwrap() += 1;
        self.save(&kept)
    }
}

// ---- A server that routes raft messages to its replica.

#[derive(Default)]
struct Route {
    group: RwLock<Option<Group>>,
}

impl Handler for Route {
    fn handle<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        _run: Run,
        body: RequestBody,
        _bulk: Bytes,
    ) -> Pin<Box<dyn Future<Output = (Reply, Bytes)> + Send + 'a>> {
        Box::pin(async move {
            let reply = match body {
                RequestBody::Raft { group: id, op } => {
                    let group = self.group.read().unwrap().clone().filter(|g| g.group() == id);
                    match group {
                        Some(g) => g.handle(op).await.map(ReplyBody::Raft),
                        None => Err(WeftError::not_found(format!("no replicated group {id} here"))),
                    }
                }
                _ => Err(WeftError::invalid("raft only")),
            };
            (reply, Bytes::new())
        })
    }
}

struct Node {
    id: NodeId,
    address: String,
    dir: PathBuf,
    machine: Arc<FileMachine>,
    group: Option<Group>,
    server: Option<Arc<Server>>,
    route: Arc<Route>,
    /// Faults injected into its log (until its next restart).
    faults: Option<Arc<FaultPlan>>,
}

struct Cluster {
    nodes: Vec<Node>,
    members: BTreeMap<NodeId, String>,
    snapshot_after_entries: u64,
    /// Each replica's network when the replicas reach each other in-process or through a
    /// wire (one network shared, or one per replica); none: TCP.
    networks: BTreeMap<NodeId, Arc<weft_rpc::Network>>,
    _root: tempfile::TempDir,
}

fn config(id: NodeId, members: &BTreeMap<NodeId, String>, dir: &Path, snapshot_after_entries: u64) -> GroupConfig {
    GroupConfig {
        heartbeat_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        snapshot_after_entries,
        ..GroupConfig::new(GROUP, id, members.clone(), dir.to_path_buf())
    }
}

async fn bind(address: &str) -> TcpListener {
    // The port of a replica that just stopped may take a moment to be free again.
    for _ in 0..100 {
        if let Ok(l) = TcpListener::bind(address).await {
            return l;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("cannot bind {address}");
}

impl Cluster {
    async fn start(replicas: u64, snapshot_after_entries: u64) -> Cluster {
        Cluster::start_on(replicas, snapshot_after_entries, |_, _| None).await
    }

    /// A cluster whose replica `id` at `address` uses the network `network(id, address)`.
    async fn start_on(
        replicas: u64,
        snapshot_after_entries: u64,
        network: impl Fn(NodeId, &str) -> Option<Arc<weft_rpc::Network>>,
    ) -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let mut listeners = Vec::new();
        let mut members = BTreeMap::new();
        for id in 1..=replicas {
            let l = bind("127.0.0.1:0").await;
            members.insert(id, l.local_addr().unwrap().to_string());
            listeners.push(l);
        }
        let networks = members.iter().filter_map(|(id, a)| network(*id, a).map(|n| (*id, n))).collect();
        let mut cluster =
            Cluster { nodes: Vec::new(), members: members.clone(), snapshot_after_entries, networks, _root: root };
        for (id, listener) in (1..=replicas).zip(listeners) {
            let dir = cluster._root.path().join(format!("replica{id}"));
            std::fs::create_dir_all(&dir).unwrap();
            let node = Node {
                id,
                address: members[&id].clone(),
                machine: FileMachine::open(dir.join("machine")),
                dir,
                group: None,
                server: None,
                route: Arc::default(),
                faults: None,
            };
            cluster.nodes.push(node);
            cluster.serve(id, listener).await;
        }
        cluster
    }

    fn node(&self, id: NodeId) -> &Node {
        self.nodes.iter().find(|n| n.id == id).unwrap()
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).unwrap()
    }

    fn group(&self, id: NodeId) -> &Group {
        self.node(id).group.as_ref().expect("a running replica")
    }

    async fn serve(&mut self, id: NodeId, listener: TcpListener) {
        let (members, after) = (self.members.clone(), self.snapshot_after_entries);
        let (network, networks) = (self.networks.get(&id).cloned(), self.networks.clone());
        let node = self.node_mut(id);
        let server = Server::new(node.route.clone(), ServerLimits::default());
        server.serve(listener);
        for n in networks.values() {
            n.register_server(&node.address, &server);
        }
        node.server = Some(server);
        let cfg = config(id, &members, &node.dir, after);
        let group = Group::start_with_faults(cfg, node.machine.clone(), network, node.faults.clone()).await.unwrap();
        *node.route.group.write().unwrap() = Some(group.clone());
        node.group = Some(group);
    }

    /// Stops a replica and its server, as a dead process.
    async fn stop(&mut self, id: NodeId) {
        let node = self.node_mut(id);
        if let Some(g) = node.group.take() {
            g.shutdown().await;
        }
        *node.route.group.write().unwrap() = None;
        if let Some(s) = node.server.take() {
            s.shutdown();
        }
    }

    /// Starts a stopped replica again from its directory and its machine's file.
    async fn restart(&mut self, id: NodeId) {
        self.restart_with_faults(id, None).await
    }

    async fn restart_with_faults(&mut self, id: NodeId, faults: Option<Arc<FaultPlan>>) {
        let address = self.node(id).address.clone();
        let node = self.node_mut(id);
        node.faults = faults;
        node.machine = FileMachine::open(node.dir.join("machine"));
        node.route = Arc::default();
        let listener = bind(&address).await;
        self.serve(id, listener).await;
    }

    fn running(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.group.is_some())
    }

    /// The replica every running replica agrees leads, once there is one.
    async fn leader(&self, within: Duration) -> NodeId {
        let start = Instant::now();
        loop {
            let leaders: Vec<NodeId> = self
                .running()
                .filter(|n| n.group.as_ref().unwrap().status().role == Role::Leader)
                .map(|n| n.id)
                .collect();
            if let [leader] = leaders[..] {
                if self.running().all(|n| n.group.as_ref().unwrap().status().leader.map(|l| l.0) == Some(leader)) {
                    return leader;
                }
            }
            assert!(start.elapsed() < within, "no leader within {within:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every running replica's machine holds `want`, in order.
    async fn converge(&self, want: &[Vec<u8>], within: Duration) {
        let start = Instant::now();
        loop {
            if self.running().all(|n| n.machine.payloads() == want) {
                break;
            }
            if start.elapsed() > within {
                for n in self.running() {
                    let got = n.machine.payloads();
                    eprintln!("replica {}: {} entries, last {:?}", n.id, got.len(), got.last());
                }
                panic!("the replicas did not converge on {} entries within {within:?}", want.len());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for n in self.running() {
            assert!(n.machine.violations.lock().unwrap().is_empty(), "{:?}", n.machine.violations.lock().unwrap());
        }
    }
}

fn payload(i: u64) -> Vec<u8> {
    format!("entry {i}").into_bytes()
}

/// Proposes `range`'s payloads one by one to whoever leads (following a change of leader,
/// as a service's client would), checking each lands after the last.
async fn propose_all(cluster: &Cluster, range: std::ops::Range<u64>) -> Vec<Vec<u8>> {
    let mut last = 0;
    let mut leader = cluster.leader(ELECTION_BOUND).await;
    for i in range.clone() {
        let index = loop {
            match cluster.group(leader).propose(payload(i)).await {
                Ok(index) => break index,
                // Not appended here: safe to send again to the leader.
                Err(ProposeError::NotLeader { .. }) => leader = cluster.leader(ELECTION_BOUND).await,
                Err(e) => panic!("proposal {i}: {e}"),
            }
        };
        assert!(index > last, "log index {index} after {last}");
        last = index;
    }
    range.map(payload).collect()
}

const ELECTION_BOUND: Duration = Duration::from_secs(5);
const CONVERGE_BOUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_commits_on_every_replica_and_followers_name_it() {
    let cluster = Cluster::start(3, 50_000).await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let want = propose_all(&cluster, 0..100).await;
    cluster.converge(&want, CONVERGE_BOUND).await;

    let follower = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    let refused = cluster.group(follower).propose(payload(1000)).await;
    assert_eq!(refused, Err(ProposeError::NotLeader { leader: Some((leader, cluster.node(leader).address.clone())) }));
    assert_eq!(cluster.group(leader).read_index().await, Ok(()));

    let status = cluster.group(leader).status();
    assert_eq!(status.members, cluster.members);
    assert_eq!(status.group, GROUP);
    assert!(status.committed >= Some(100), "{status:?}");
    assert_eq!(status.matched.len(), 3, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over_and_the_old_one_catches_up_from_the_log() {
    let mut cluster = Cluster::start(3, 50_000).await;
    let old = cluster.leader(ELECTION_BOUND).await;
    let mut want = propose_all(&cluster, 0..20).await;
    cluster.converge(&want, CONVERGE_BOUND).await;

    cluster.stop(old).await;
    let killed = Instant::now();
    let new = cluster.leader(ELECTION_BOUND).await;
    assert_ne!(new, old);
    eprintln!("a new leader {:?} after the leader stopped", killed.elapsed());
    want.extend(propose_all(&cluster, 20..60).await);
    cluster.converge(&want, CONVERGE_BOUND).await;

    cluster.restart(old).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
    assert_eq!(cluster.node(old).machine.installs(), 0, "caught up from the log, not by snapshot");
    // The returned replica follows the leader the others follow.
    cluster.leader(ELECTION_BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_behind_a_purged_log_catches_up_by_snapshot() {
    let mut cluster = Cluster::start(3, 20).await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let behind = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    let mut want = propose_all(&cluster, 0..5).await;
    cluster.converge(&want, CONVERGE_BOUND).await;

    cluster.stop(behind).await;
    want.extend(propose_all(&cluster, 5..120).await);
    cluster.converge(&want, CONVERGE_BOUND).await;

    cluster.restart(behind).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
    assert!(cluster.node(behind).machine.installs() >= 1, "the replica behind caught up by a snapshot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_refuses_writes_and_reads_within_a_bound() {
    let mut cluster = Cluster::start(3, 50_000).await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let want = propose_all(&cluster, 0..3).await;
    cluster.converge(&want, CONVERGE_BOUND).await;

    // The leader is left alone: it cannot know it lost its followers before it asks them.
    for id in [1, 2, 3] {
        if id != leader {
            cluster.stop(id).await;
        }
    }
    let lone = cluster.group(leader).clone();
    let bound = config(leader, &cluster.members, Path::new("."), 1).propose_timeout() + Duration::from_secs(1);
    let start = Instant::now();
    let write = lone.propose(payload(99)).await;
    assert!(write.is_err(), "a lone replica committed {write:?}");
    assert!(start.elapsed() < bound, "the proposal took {:?}", start.elapsed());
    let start = Instant::now();
    let read = lone.read_index().await;
    assert!(read.is_err(), "a lone replica served a read index");
    assert!(start.elapsed() < bound, "the read index took {:?}", start.elapsed());
    assert_eq!(cluster.node(leader).machine.payloads(), want, "nothing applied without a majority");
}

/// The offsets of the records of a log file (12-byte headers, length at bytes 4..8).
fn record_offsets(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap();
    let mut offsets = Vec::new();
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        offsets.push(at as u64);
        let len = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 12 + len;
    }
    offsets
}

/// A group of one replica, once it leads.
async fn single(dir: &Path, machine: Arc<FileMachine>) -> Result<Group, WeftError> {
    let members = BTreeMap::from([(1, "127.0.0.1:1".to_string())]);
    let group = Group::start(config(1, &members, dir, 50_000), machine, None).await?;
    let mut watch = group.watch();
    tokio::time::timeout(ELECTION_BOUND, watch.wait_for(|s| s.role == Role::Leader))
        .await
        .expect("a group of one leads")
        .unwrap();
    Ok(group)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_log_refuses_to_start_and_a_torn_last_record_is_cut() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("replica");
    let group = single(&dir, FileMachine::open(root.path().join("machine"))).await.unwrap();
    for i in 0..10 {
        group.propose(payload(i)).await.unwrap();
    }
    group.shutdown().await;
    drop(group);
    let log = dir.join("log");
    let clean = std::fs::read(&log).unwrap();

    // A record in the middle damaged: the replica refuses, naming the file and the offset.
    let offsets = record_offsets(&log);
    let middle = offsets[offsets.len() / 2];
    let mut damaged = clean.clone();
    damaged[middle as usize + 13] ^= 0x01;
    std::fs::write(&log, &damaged).unwrap();
    let err =
        single(&dir, FileMachine::open(root.path().join("machine"))).await.err().expect("a corrupt log must not start");
    assert!(err.message.contains(&log.display().to_string()), "{err}");
    assert!(err.message.contains(&format!("offset {middle}")), "{err}");

    // The last record torn: cut off, and the replica starts and goes on, its machine whole.
    std::fs::write(&log, &clean[..clean.len() - 5]).unwrap();
    let machine = FileMachine::open(root.path().join("machine"));
    let group = single(&dir, machine.clone()).await.unwrap();
    group.propose(payload(10)).await.unwrap();
    assert_eq!(machine.payloads(), (0..11).map(payload).collect::<Vec<_>>());
    assert!(machine.violations.lock().unwrap().is_empty(), "{:?}", machine.violations.lock().unwrap());
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_machine_lost_its_state_behind_a_purge_is_brought_up_to_the_snapshot() {
    let mut cluster = Cluster::start(3, 20).await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let want = propose_all(&cluster, 0..100).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
    let follower = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    // Its own snapshot and purge happen on its own schedule: wait for them.
    let dir = cluster.node(follower).dir.clone();
    let start = Instant::now();
    while !dir.join("purged").exists() {
        assert!(start.elapsed() < CONVERGE_BOUND, "the follower never purged its log");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.stop(follower).await;
    // The machine's durable state as of long ago (an MDT's last checkpoint): nothing.
    std::fs::remove_file(dir.join("machine")).unwrap();
    cluster.restart(follower).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_added_and_removed_on_a_live_group() {
    let mut cluster = Cluster::start(3, 50_000).await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let mut want = propose_all(&cluster, 0..10).await;

    // A fourth replica, started outside the members: it waits to be added.
    let listener = bind("127.0.0.1:0").await;
    let address = listener.local_addr().unwrap().to_string();
    let dir = cluster._root.path().join("replica4");
    cluster.nodes.push(Node {
        id: 4,
        address: address.clone(),
        machine: FileMachine::open(cluster._root.path().join("machine4")),
        dir,
        group: None,
        server: None,
        route: Arc::default(),
        faults: None,
    });
    cluster.serve(4, listener).await;
    cluster.group(leader).add_member(4, address.clone()).await.unwrap();
    let status = cluster.group(leader).status();
    assert_eq!(status.members.get(&4), Some(&address), "{status:?}");
    want.extend(propose_all(&cluster, 10..20).await);
    cluster.converge(&want, CONVERGE_BOUND).await;

    let removed = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader && *id != 4).unwrap();
    cluster.group(leader).remove_member(removed).await.unwrap();
    assert!(!cluster.group(leader).status().members.contains_key(&removed));
    cluster.stop(removed).await;
    want.extend(propose_all(&cluster, 20..30).await);
    cluster.converge(&want, CONVERGE_BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_watch_tells_of_a_new_leader() {
    let mut cluster = Cluster::start(3, 50_000).await;
    let old = cluster.leader(ELECTION_BOUND).await;
    let watcher = cluster.nodes.iter().map(|n| n.id).find(|id| *id != old).unwrap();
    let mut watch = cluster.group(watcher).watch();
    cluster.stop(old).await;
    let new = tokio::time::timeout(ELECTION_BOUND, async {
        loop {
            watch.changed().await.unwrap();
            let status = watch.borrow_and_update().clone();
            if let Some((id, _)) = status.leader.filter(|(id, _)| *id != old) {
                return id;
            }
        }
    })
    .await
    .expect("the watch told of no new leader");
    assert_eq!(cluster.leader(ELECTION_BOUND).await, new);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_of_one_process_reach_each_other_in_process() {
    let network = weft_rpc::Network::new();
    let mut cluster = Cluster::start_on(3, 50_000, |_, _| Some(network.clone())).await;
    let old = cluster.leader(ELECTION_BOUND).await;
    let mut want = propose_all(&cluster, 0..20).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
    cluster.stop(old).await;
    assert_ne!(cluster.leader(ELECTION_BOUND).await, old);
    want.extend(propose_all(&cluster, 20..40).await);
    cluster.restart(old).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
}

// ---- A partition: each replica's messages go through a wire of its own that drops those
// from or to a replica cut off.

#[derive(Default)]
struct Partition {
    cut: Mutex<std::collections::BTreeSet<String>>,
}

struct CutWire {
    from: String,
    partition: Arc<Partition>,
}

impl weft_rpc::Wire for CutWire {
    fn request(
        &self,
        address: &str,
        request: weft_proto::msg::Request,
        bulk: Bytes,
        server: Arc<dyn weft_rpc::Endpoint>,
    ) -> Pin<Box<dyn Future<Output = weft_proto::WeftResult<(Reply, Bytes)>> + Send + 'static>> {
        let cut = {
            let cut = self.partition.cut.lock().unwrap();
            cut.contains(&self.from) || cut.contains(address)
        };
        Box::pin(async move {
            if cut {
                return Err(WeftError::new(weft_proto::ErrorCode::Io, "partitioned"));
            }
            match server.deliver(request, bulk, weft_rpc::ConnectionState::new()).await {
                Some(answer) => Ok(answer),
                None => Err(WeftError::new(weft_proto::ErrorCode::Io, "the connection broke")),
            }
        })
    }

    fn callback(
        &self,
        _client_id: u64,
        _callback: weft_proto::lock::CallbackRequest,
        _handler: Arc<dyn weft_rpc::CallbackHandler>,
    ) -> Pin<Box<dyn Future<Output = Option<weft_proto::WeftResult<weft_proto::lock::CallbackAnswer>>> + Send + 'static>>
    {
        Box::pin(async { None })
    }
}

/// Three replicas whose messages cross a [`Partition`], a leader elected and ten entries
/// committed everywhere: the partition, the cluster, its leader and the entries.
async fn partitionable_cluster() -> (Arc<Partition>, Cluster, NodeId, Vec<Vec<u8>>) {
    let partition = Arc::new(Partition::default());
    let cluster = Cluster::start_on(3, 50_000, |_, address| {
        Some(weft_rpc::Network::with_wire(Arc::new(CutWire {
            from: address.to_string(),
            partition: partition.clone(),
        })))
    })
    .await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let want = propose_all(&cluster, 0..10).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
    (partition, cluster, leader, want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_refuses_writes_and_reads_and_follows_after_healing() {
    let (partition, cluster, old, mut want) = partitionable_cluster().await;

    partition.cut.lock().unwrap().insert(cluster.node(old).address.clone());
    // The majority elects another leader; the old one may still believe it leads.
    let start = Instant::now();
    let new = loop {
        let leading = cluster.nodes.iter().find(|n| n.id != old && cluster.group(n.id).status().role == Role::Leader);
        if let Some(n) = leading {
            break n.id;
        }
        assert!(start.elapsed() < ELECTION_BOUND, "the majority elected no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for i in 10..20 {
        cluster.group(new).propose(payload(i)).await.unwrap();
        want.push(payload(i));
    }
    let isolated = cluster.group(old);
    assert!(isolated.propose(payload(99)).await.is_err(), "the cut-off replica committed");
    assert!(isolated.read_index().await.is_err(), "the cut-off replica served a read index");
    assert_eq!(cluster.node(old).machine.payloads(), want[..10], "the cut-off replica applied nothing new");

    partition.cut.lock().unwrap().clear();
    cluster.converge(&want, CONVERGE_BOUND).await;
    // One leader all follow (the returning replica's higher term may cause one more
    // election, which its shorter log cannot win).
    assert_ne!(cluster.leader(ELECTION_BOUND).await, old);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_machine_fails_stops_and_the_others_go_on() {
    let cluster = Cluster::start(3, 50_000).await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let mut want = propose_all(&cluster, 0..5).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
    let broken = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    let next = cluster.group(leader).status().last_log_index.unwrap() + 1;
    *cluster.node(broken).machine.fail_at.lock().unwrap() = Some(next);

    want.extend(propose_all(&cluster, 5..10).await);
    let start = Instant::now();
    while cluster.group(broken).status().role != Role::Shutdown {
        assert!(start.elapsed() < CONVERGE_BOUND, "the replica whose machine failed did not stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cluster.node(broken).machine.payloads(), want[..5], "nothing applied past the failure");
    let start = Instant::now();
    while !cluster.nodes.iter().filter(|n| n.id != broken).all(|n| n.machine.payloads() == want) {
        assert!(start.elapsed() < CONVERGE_BOUND, "the other replicas did not apply everything");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(cluster.group(broken).propose(payload(99)).await, Err(ProposeError::Failed(_))));
}

/// Waits until replica `id` has stopped (its storage failed).
async fn stopped(cluster: &Cluster, id: NodeId) {
    let start = Instant::now();
    while cluster.group(id).status().role != Role::Shutdown {
        assert!(start.elapsed() < CONVERGE_BOUND, "replica {id} did not stop after its storage failed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_write_stops_a_replica_whose_restart_cuts_the_torn_tail_and_catches_up() {
    let mut cluster = Cluster::start(3, 50_000).await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let torn = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    let plan = Arc::new(FaultPlan::new());
    cluster.stop(torn).await;
    cluster.restart_with_faults(torn, Some(plan.clone())).await;
    let mut want = propose_all(&cluster, 0..5).await;
    cluster.converge(&want, CONVERGE_BOUND).await;

    // Its next append writes half its records, then the replica stops.
    plan.inject(plan.ops(), Fault::ShortWrite);
    want.extend(propose_all(&cluster, 5..10).await);
    stopped(&cluster, torn).await;
    assert_eq!(plan.pending(), 0);

    cluster.stop(torn).await;
    cluster.restart(torn).await;
    want.extend(propose_all(&cluster, 10..15).await);
    cluster.converge(&want, CONVERGE_BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_lost_power_loses_its_unsynced_log_and_catches_up() {
    let mut cluster = Cluster::start(3, 50_000).await;
    let leader = cluster.leader(ELECTION_BOUND).await;
    let unlucky = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    let plan = Arc::new(FaultPlan::new());
    cluster.stop(unlucky).await;
    cluster.restart_with_faults(unlucky, Some(plan.clone())).await;
    let mut want = propose_all(&cluster, 0..10).await;
    cluster.converge(&want, CONVERGE_BOUND).await;
    let log = cluster.node(unlucky).dir.join("log");
    let before = std::fs::metadata(&log).unwrap().len();

    // Not synced since its start: the power loss takes back what it appended since.
    plan.inject(plan.ops(), Fault::PowerLoss);
    want.extend(propose_all(&cluster, 10..15).await);
    stopped(&cluster, unlucky).await;
    assert!(std::fs::metadata(&log).unwrap().len() < before, "the unsynced tail of the log is gone");

    cluster.stop(unlucky).await;
    cluster.restart(unlucky).await;
    want.extend(propose_all(&cluster, 15..20).await);
    cluster.converge(&want, CONVERGE_BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_cut_off_and_healed_does_not_depose_the_leader() {
    // Without a pre-vote the cut-off follower stands in term after term, and the leader,
    // seeing the higher term in an append's answer after the heal, steps down.
    let (partition, cluster, leader, mut want) = partitionable_cluster().await;
    let term = cluster.group(leader).status().term;

    let cut = cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader).unwrap();
    partition.cut.lock().unwrap().insert(cluster.node(cut).address.clone());
    // Five of the longest election timeouts (600 ms): a follower without a pre-vote stands
    // several times meanwhile.
    for i in 10..30 {
        cluster.group(leader).propose(payload(i)).await.unwrap();
        want.push(payload(i));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(cluster.group(cut).status().term, term, "the cut-off follower raised its term");
    partition.cut.lock().unwrap().clear();
    cluster.converge(&want, CONVERGE_BOUND).await;
    // A few heartbeats and election timeouts after the heal: the same leader, the same term.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for n in cluster.running() {
        let status = n.group.as_ref().unwrap().status();
        assert_eq!(status.term, term, "replica {} is in another term", n.id);
        assert_eq!(status.leader.map(|l| l.0), Some(leader), "replica {} follows another leader", n.id);
    }
    assert_eq!(cluster.leader(ELECTION_BOUND).await, leader);
}
