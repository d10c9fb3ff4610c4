//! One replica of one replicated group: openraft over [`LogStore`], [`StateMachine`] and
//! [`Network`], and what the service asks of it.

use crate::limits::{
    APPEND_ENTRIES_MAX, ELECTION_TIMEOUT_MS_MAX_DEFAULT, ELECTION_TIMEOUT_MS_MIN_DEFAULT, HEARTBEAT_MS_DEFAULT,
    LOG_KEPT_AFTER_SNAPSHOT_ENTRIES_MAX, PROPOSE_TIMEOUT_ELECTIONS, SNAPSHOT_AFTER_ENTRIES_DEFAULT,
    SNAPSHOT_CHUNK_BYTES, SNAPSHOT_CHUNK_TIMEOUT_MS,
};
use crate::log::LogStore;
use crate::machine::{Machine, StateMachine};
use crate::network::Network;
use crate::{NodeId, TypeConfig};
use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, InitializeError, RaftError};
use openraft::{BasicNode, ChangeMembers, Config, Raft, RaftMetrics, ServerState, SnapshotPolicy};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use weft_proto::faults::FaultPlan;
use weft_proto::msg::raft::{AppendAnswer, PreVoteAnswer, SnapshotAnswer, VoteAnswer};
use weft_proto::msg::{GroupId, RaftReply, RaftRequest};
use weft_proto::{WeftError, WeftResult};

/// One replica's settings. Defaults of the timings live in limits.rs, units in the names.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub group: GroupId,
    pub node_id: NodeId,
    /// Every voter at bootstrap: node id -> server address ("127.0.0.1:7001"). A replica
    /// to be added to a live group (`Group::add_member`) starts with members that do not
    /// name it (or none): it waits for the leader instead of bootstrapping a group of its own.
    pub members: BTreeMap<NodeId, String>,
    /// This replica's directory for its log and vote (made if missing).
    pub dir: PathBuf,
    pub heartbeat_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Build a snapshot after this many entries since the last (then the log before it is
    /// purged, keeping some for slow followers); default 50_000.
    pub snapshot_after_entries: u64,
}

impl GroupConfig {
    /// A replica with the default timings.
    pub fn new(group: GroupId, node_id: NodeId, members: BTreeMap<NodeId, String>, dir: PathBuf) -> GroupConfig {
        GroupConfig {
            group,
            node_id,
            members,
            dir,
            heartbeat_ms: HEARTBEAT_MS_DEFAULT,
            election_timeout_min_ms: ELECTION_TIMEOUT_MS_MIN_DEFAULT,
            election_timeout_max_ms: ELECTION_TIMEOUT_MS_MAX_DEFAULT,
            snapshot_after_entries: SNAPSHOT_AFTER_ENTRIES_DEFAULT,
        }
    }

    /// How long a proposal or a read index waits for a majority before it fails.
    pub fn propose_timeout(&self) -> Duration {
        Duration::from_millis(PROPOSE_TIMEOUT_ELECTIONS * self.election_timeout_max_ms)
    }

    /// The settings of this replica's election task (elect.rs): openraft's own timer's,
    /// whose leader lease is the longest election timeout.
    fn election_timing(&self) -> crate::elect::Timing {
        crate::elect::Timing {
            tick: Duration::from_millis((self.heartbeat_ms / 2).clamp(10, 100)),
            lease: Duration::from_millis(self.election_timeout_max_ms),
            timeout_min: Duration::from_millis(self.election_timeout_min_ms),
            timeout_max: Duration::from_millis(self.election_timeout_max_ms),
        }
    }

    fn openraft(&self) -> WeftResult<Config> {
        let snapshot_after = self.snapshot_after_entries.max(1);
        Config {
            cluster_name: self.group.to_string(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            install_snapshot_timeout: SNAPSHOT_CHUNK_TIMEOUT_MS,
            max_payload_entries: APPEND_ENTRIES_MAX,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(snapshot_after),
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
            max_in_snapshot_log_to_keep: LOG_KEPT_AFTER_SNAPSHOT_ENTRIES_MAX.min(snapshot_after / 2),
            // Elections are ours, after a pre-vote (elect.rs): openraft's timer stands
            // without asking, and a replica cut off and healed would depose the leader.
            enable_elect: false,
            ..Config::default()
        }
        .validate()
        .map_err(|e| WeftError::invalid(format!("replicated group {}: {e}", self.group)))
    }
}

/// Why a proposal (or a read index, or a membership change) was not done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposeError {
    /// This replica does not lead; the leader it knows of, if any (id, address).
    NotLeader { leader: Option<(NodeId, String)> },
    /// The group could not commit it (shut down, storage failed, no majority in time): why.
    Failed(String),
}

impl std::fmt::Display for ProposeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProposeError::NotLeader { leader: Some((id, address)) } => {
                write!(f, "not the leader: replica {id} at {address} leads")
            }
            ProposeError::NotLeader { leader: None } => write!(f, "not the leader, and no leader is known"),
            ProposeError::Failed(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for ProposeError {}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    Candidate,
    Learner,
    Shutdown,
}

#[derive(Clone, Debug)]
pub struct GroupStatus {
    pub group: GroupId,
    pub node_id: NodeId,
    pub role: Role,
    pub term: u64,
    pub leader: Option<(NodeId, String)>,
    pub last_log_index: Option<u64>,
    pub committed: Option<u64>,
    pub applied: Option<u64>,
    /// On the leader: each member's matched log index (None: not known yet).
    pub matched: BTreeMap<NodeId, Option<u64>>,
    /// The voters, node id -> address.
    pub members: BTreeMap<NodeId, String>,
    /// Replicas that get the log without voting: one being added, catching up.
    pub learners: BTreeMap<NodeId, String>,
}

impl GroupStatus {
    /// Whether a watcher should hear of the change from `self` to `new`: the role, the
    /// leader, the term or the members moved (not each log index).
    fn moved(&self, new: &GroupStatus) -> bool {
        self.role != new.role
            || self.leader != new.leader
            || self.term != new.term
            || self.members != new.members
            || self.learners != new.learners
    }
}

pub(crate) struct Inner {
    pub(crate) config: GroupConfig,
    pub(crate) raft: Raft<TypeConfig>,
    log: LogStore,
    status: tokio::sync::watch::Sender<GroupStatus>,
}

/// One replica of a replicated group. Cheap to clone: clones share the replica.
#[derive(Clone)]
pub struct Group {
    pub(crate) inner: Arc<Inner>,
}

fn status_of(group: GroupId, metrics: &RaftMetrics<NodeId, BasicNode>, log: &LogStore) -> GroupStatus {
    let membership = metrics.membership_config.membership();
    let address = |id: &NodeId| membership.get_node(id).map(|n| n.addr.clone());
    GroupStatus {
        group,
        node_id: metrics.id,
        role: match metrics.state {
            ServerState::Leader => Role::Leader,
            ServerState::Follower => Role::Follower,
            ServerState::Candidate => Role::Candidate,
            ServerState::Learner => Role::Learner,
            ServerState::Shutdown => Role::Shutdown,
        },
        term: metrics.current_term,
        leader: metrics.current_leader.and_then(|id| address(&id).map(|a| (id, a))),
        last_log_index: metrics.last_log_index,
        committed: log.committed_index().or(metrics.last_applied.map(|l| l.index)),
        applied: metrics.last_applied.map(|l| l.index),
        matched: metrics
            .replication
            .as_ref()
            .map(|r| r.iter().map(|(id, m)| (*id, m.map(|l| l.index))).collect())
            .unwrap_or_default(),
        members: membership.voter_ids().filter_map(|id| address(&id).map(|a| (id, a))).collect(),
        learners: membership.learner_ids().filter_map(|id| address(&id).map(|a| (id, a))).collect(),
    }
}

fn leader_of(f: &ForwardToLeader<NodeId, BasicNode>) -> ProposeError {
    let leader = match (f.leader_id, &f.leader_node) {
        (Some(id), Some(node)) => Some((id, node.addr.clone())),
        _ => None,
    };
    ProposeError::NotLeader { leader }
}

pub(crate) fn write_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ProposeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => leader_of(&f),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => ProposeError::Failed(e.to_string()),
        RaftError::Fatal(f) => ProposeError::Failed(format!("the replica stopped: {f}")),
    }
}

impl Group {
    /// Opens this replica's log (refusing a corrupt one: the error names the file, the
    /// offset and what is wrong; a torn LAST record is cut off with a warning, since it was
    /// never acknowledged), starts openraft, and initializes the group with `members` if
    /// its log is empty (every member may call it; only a fresh group takes it).
    /// `network`: the process's weft_rpc::Network for Peers (in-process delivery when the
    /// address is served in this process), None for TCP only.
    pub async fn start(
        cfg: GroupConfig,
        machine: Arc<dyn Machine>,
        network: Option<Arc<weft_rpc::Network>>,
    ) -> WeftResult<Group> {
        Group::start_with_faults(cfg, machine, network, None).await
    }

    /// [`Group::start`] with faults injected into the log where `faults` says (tests and
    /// simulations; see [`LogStore::open_with_faults`]).
    pub async fn start_with_faults(
        cfg: GroupConfig,
        machine: Arc<dyn Machine>,
        network: Option<Arc<weft_rpc::Network>>,
        faults: Option<Arc<FaultPlan>>,
    ) -> WeftResult<Group> {
        if cfg.members.len().is_multiple_of(2) && !cfg.members.is_empty() {
            // An even group survives no more losses than the odd one below it, and needs a
            // larger majority.
            tracing::warn!(
                "replicated group {}: {} members; an odd number is as safe with one replica fewer",
                cfg.group,
                cfg.members.len()
            );
        }
        if !cfg.members.contains_key(&cfg.node_id) {
            // Uninitialized and no voter, it never stands for election: it only answers the
            // leader once added (members.rs).
            tracing::info!(
                "replicated group {}: replica {} starts outside the members: it waits to be added (weft replica add)",
                cfg.group,
                cfg.node_id
            );
        }
        let raft_config = Arc::new(cfg.openraft()?);
        let log = match faults {
            Some(plan) => LogStore::open_with_faults(&cfg.dir, plan)?,
            None => LogStore::open(&cfg.dir)?,
        };
        let state_machine = StateMachine::open(&cfg.dir, machine)?;
        let net = Network::new(cfg.group, network);
        let raft = Raft::new(cfg.node_id, raft_config, net.clone(), log.clone(), state_machine)
            .await
            .map_err(|e| WeftError::io(format!("replicated group {}: openraft did not start: {e}", cfg.group)))?;
        let fresh = !raft.is_initialized().await.map_err(|e| WeftError::io(e.to_string()))?;
        if fresh && cfg.members.contains_key(&cfg.node_id) {
            let members: BTreeMap<NodeId, BasicNode> =
                cfg.members.iter().map(|(id, a)| (*id, BasicNode { addr: a.clone() })).collect();
            match raft.initialize(members).await {
                Ok(()) => {}
                // Another member's initialization reached this one first.
                Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => {
                    return Err(WeftError::invalid(format!("replicated group {}: cannot initialize: {e}", cfg.group)))
                }
            }
        }
        let first = status_of(cfg.group, &raft.metrics().borrow(), &log);
        let (status, _) = tokio::sync::watch::channel(first);
        let timing = cfg.election_timing();
        tokio::spawn(crate::elect::drive(cfg.node_id, raft.clone(), log.clone(), net, timing));
        let inner = Arc::new(Inner { config: cfg, raft, log, status });
        tokio::spawn(follow_metrics(Arc::downgrade(&inner)));
        Ok(Group { inner })
    }

    pub fn group(&self) -> GroupId {
        self.inner.config.group
    }

    pub fn node_id(&self) -> NodeId {
        self.inner.config.node_id
    }

    async fn bounded<T>(
        &self,
        what: &str,
        work: impl std::future::Future<Output = Result<T, ProposeError>>,
    ) -> Result<T, ProposeError> {
        let limit = self.inner.config.propose_timeout();
        // Counted in slices: a monotonic clock that jumps ahead does not fail every
        // proposal under way at once (weft_rpc::budget).
        match weft_rpc::budget::within(limit, work).await {
            Some(r) => r,
            None => Err(ProposeError::Failed(format!(
                "{} {what}: no majority of the replicas answered within {} ms",
                self.inner.config.group,
                limit.as_millis()
            ))),
        }
    }

    /// Proposes `payload` as the next entry; returns its log index once a majority has it
    /// and this replica's machine applied it. A proposal that timed out may still commit
    /// later (the service's reply cache answers its resend).
    pub async fn propose(&self, payload: Vec<u8>) -> Result<u64, ProposeError> {
        self.bounded("proposal", async {
            self.inner.raft.client_write(payload).await.map(|r| r.log_id.index).map_err(write_error)
        })
        .await
    }

    /// Returns once this replica is sure it still leads and has applied everything
    /// committed before the call (openraft's ensure_linearizable: a read index).
    pub async fn read_index(&self) -> Result<(), ProposeError> {
        self.bounded("read index", async {
            match self.inner.raft.ensure_linearizable().await {
                Ok(_) => Ok(()),
                Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => Err(leader_of(&f)),
                Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e))) => {
                    Err(ProposeError::Failed(format!("{} read index: {e}", self.inner.config.group)))
                }
                Err(RaftError::Fatal(f)) => Err(ProposeError::Failed(format!("the replica stopped: {f}"))),
            }
        })
        .await
    }

    /// Serves one raft message from a peer (the server's router calls it).
    pub async fn handle(&self, op: RaftRequest) -> WeftResult<RaftReply> {
        let raft = &self.inner.raft;
        Ok(match op {
            RaftRequest::AppendEntries(m) => {
                RaftReply::Appended(AppendAnswer { reply: encode(&raft.append_entries(decode(&m.request)?).await)? })
            }
            RaftRequest::Vote(m) => {
                RaftReply::Voted(VoteAnswer { reply: encode(&raft.vote(decode(&m.request)?).await)? })
            }
            RaftRequest::InstallSnapshot(m) => RaftReply::SnapshotChunk(SnapshotAnswer {
                reply: encode(&raft.install_snapshot(decode(&m.request)?).await)?,
            }),
            RaftRequest::PreVote(m) => {
                let request: crate::elect::PreVoteRequest = decode(&m.request)?;
                RaftReply::PreVoted(PreVoteAnswer { reply: encode(&self.pre_vote(&request).await)? })
            }
            RaftRequest::AddMember(m) => {
                let members = self.add_member(m.replica, m.address).await.map_err(|e| e.into_weft(self.group()))?;
                RaftReply::Members(members.answer())
            }
            RaftRequest::RemoveMember(m) => {
                let members = self.remove_member_at(&m.address).await.map_err(|e| e.into_weft(self.group()))?;
                RaftReply::Members(members.answer())
            }
        })
    }

    /// This replica's answer to a pre-vote (elect.rs decides).
    async fn pre_vote(&self, request: &crate::elect::PreVoteRequest) -> Result<crate::elect::PreVoteResponse, String> {
        let Some(local) = crate::elect::local(&self.inner.raft, &self.inner.log).await else {
            return Err(format!("replica {} of {} has stopped", self.node_id(), self.group()));
        };
        let lease = self.inner.config.election_timing().lease;
        let verdict = crate::elect::answer(request, &local, tokio::time::Instant::now(), lease);
        if let Err(why) = verdict {
            tracing::debug!(
                "replicated group {}: pre-vote for replica {} in term {} refused: {why:?}",
                self.group(),
                request.candidate,
                request.term
            );
        }
        Ok(crate::elect::PreVoteResponse { granted: verdict.is_ok(), term: local.term })
    }

    pub fn status(&self) -> GroupStatus {
        status_of(self.inner.config.group, &self.inner.raft.metrics().borrow(), &self.inner.log)
    }

    /// Changes of the status (role, leader, term, members): for the service to start or
    /// stop serving as the leader. The value is the status as of the last such change.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<GroupStatus> {
        self.inner.status.subscribe()
    }

    /// Makes the log durable (fsync) now: the service calls it on its checkpoint schedule.
    pub fn sync(&self) -> WeftResult<()> {
        self.inner.log.sync()
    }

    /// Removes voter `id` from the live group (it stops getting entries); by address, with
    /// its checks: [`Group::remove_member_at`] (members.rs).
    pub async fn remove_member(&self, id: NodeId) -> Result<(), ProposeError> {
        self.inner
            .raft
            .change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])), false)
            .await
            .map_err(write_error)?;
        Ok(())
    }

    /// Stops the replica and makes its log durable.
    pub async fn shutdown(&self) {
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!("replicated group {}: openraft did not stop cleanly: {e}", self.inner.config.group);
        }
        if let Err(e) = self.inner.log.sync() {
            tracing::warn!("replicated group {}: {e}", self.inner.config.group);
        }
        let last = self.status();
        self.inner.status.send_replace(GroupStatus { role: Role::Shutdown, ..last });
    }
}

/// Publishes the status on each change of role, leader, term or members, until the group
/// is gone or openraft stops.
async fn follow_metrics(inner: std::sync::Weak<Inner>) {
    let Some(mut metrics) = inner.upgrade().map(|i| i.raft.metrics()) else { return };
    while metrics.changed().await.is_ok() {
        let Some(inner) = inner.upgrade() else { return };
        let new = status_of(inner.config.group, &metrics.borrow_and_update(), &inner.log);
        inner.status.send_if_modified(|old| {
            let moved = old.moved(&new);
            *old = new;
            moved
        });
    }
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> WeftResult<T> {
    postcard::from_bytes(bytes).map_err(|e| WeftError::protocol(format!("a raft message that does not decode: {e}")))
}

fn encode<T: Serialize>(value: &T) -> WeftResult<Vec<u8>> {
    postcard::to_allocvec(value).map_err(|e| WeftError::protocol(format!("encoding a raft answer: {e}")))
}
