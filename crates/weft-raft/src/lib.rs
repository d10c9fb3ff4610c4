//! Replicated groups: one Raft group per replicated service (the MGS, each MDT) inside a
//! Weft server process, its messages over weft-rpc, its state a [`Machine`] the service
//! supplies.
//!
//! * [`group`]: one replica, [`Group`]: start, propose, read index, status, membership;
//! * [`log`]: the replica's log on disk (one append-only file of checksummed records, the
//!   vote in a small fsync'd file), openraft's `RaftLogStorage`;
//! * [`elect`]: elections after a pre-vote (openraft 0.9 has none), its decisions pure;
//! * [`members`]: adding and removing replicas of a live group, and the checks;
//! * [`machine`]: the [`Machine`] trait the service implements, and openraft's
//!   `RaftStateMachine` over it (snapshots kept in `DIR/snapshot`);
//! * [`pre_vote`]: the pre-vote's two messages;
//! * [`network`]: openraft's network over [`weft_rpc::Peer`]s with short timeouts;
//! * [`record`]: the record format of every file; [`limits`]: every bound and default.
//!
//! Consensus is openraft's, 0.9 (0.9.25): the stable line, whose API is fixed. 0.10 is an
//! alpha whose storage and network APIs still change between alphas; moving to it is a
//! change of this crate alone, since weft-proto carries openraft's messages as bytes. The
//! features are `serde` (the messages) and `storage-v2` (the log and the state machine as
//! two traits, `RaftLogStorage` and `RaftStateMachine`; no deprecated `RaftStorage`).

pub mod elect;
pub mod group;
pub mod limits;
pub mod log;
pub mod machine;
pub mod members;
pub mod network;
pub mod pre_vote;
pub mod record;

pub use group::{Group, GroupConfig, GroupStatus, ProposeError, Role};
pub use machine::Machine;
pub use members::{MemberError, Members};
pub use weft_proto::msg::GroupId;

/// A replica's id within its group.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The types of every replicated group: entries carry the service's bytes, answers are
    /// empty (the service answers its callers from its machine), nodes are addresses, and
    /// snapshots are bytes in memory, chunked by openraft.
    pub TypeConfig:
        D = Vec<u8>,
        R = (),
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);
