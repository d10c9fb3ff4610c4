//! The replication service's operations (weft-raft): the messages of one Raft group's
//! replicas to each other, each naming its group, since one server process may hold a
//! replica of the MGS and of several MDTs.
//!
//! The messages are openraft's own, carried as opaque bytes (postcard of openraft's serde
//! types, made and read by weft-raft): this crate does not depend on openraft, and a change
//! of openraft's types changes weft-raft, not the protocol's enums.
//!
//! Every op is a `write` (a Mutation in [`OpKind`](crate::msg::ops::OpKind) terms): a vote
//! or an append changes the replica's state, so a transport that resends reads freely must
//! not treat them as harmless; openraft's RPCs are idempotent by design (a repeated append
//! or vote is answered the same way), so resending them is safe either way.

use serde::{Deserialize, Serialize};

/// A replicated group: the MGS, or one MDT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum GroupId {
    Mgs,
    Mdt(u32),
}

impl std::fmt::Display for GroupId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupId::Mgs => write!(f, "MGS"),
            GroupId::Mdt(index) => write!(f, "MDT{index:04x}"),
        }
    }
}

/// What a replica answers to an `AppendEntries`: postcard of openraft's
/// `Result<AppendEntriesResponse, RaftError>`, read back by weft-raft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AppendAnswer {
    pub reply: Vec<u8>,
}

/// What a replica answers to a `Vote`: postcard of openraft's
/// `Result<VoteResponse, RaftError>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct VoteAnswer {
    pub reply: Vec<u8>,
}

/// What a replica answers to a `PreVote`: postcard of weft-raft's `PreVoteResponse`
/// (whether it would vote for the candidate now; it changes nothing on the replica).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PreVoteAnswer {
    pub reply: Vec<u8>,
}

/// What a replica answers to an `InstallSnapshot` chunk: postcard of openraft's
/// `Result<InstallSnapshotResponse, RaftError<InstallSnapshotError>>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SnapshotAnswer {
    pub reply: Vec<u8>,
}

/// A group's members after a change ([`RaftRequest::AddMember`], [`RaftRequest::RemoveMember`]),
/// as the leader that made it knows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MembersAnswer {
    /// The voters: (replica id, address).
    pub voters: Vec<(u64, String)>,
    /// Replicas that get the log but do not vote (one being added that is catching up).
    pub learners: Vec<(u64, String)>,
}

/// Every raft operation (see [`mdt_ops!`](crate::mdt_ops) for the list's form). `request`
/// is postcard of openraft's request of the same name.
#[macro_export]
macro_rules! raft_ops {
    ($then:ident) => {
        $then! {
            RaftRequest / RaftReply;
            /// Entries to append (or none: a heartbeat) from the group's leader.
            write AppendEntries { request: Vec<u8> } -> $crate::msg::raft::AppendAnswer = "raft_append";
            /// A candidate asks for this replica's vote.
            write Vote { request: Vec<u8> } -> $crate::msg::raft::VoteAnswer = "raft_vote";
            /// One chunk of a snapshot the leader sends a replica that is too far behind.
            write InstallSnapshot { request: Vec<u8> } -> $crate::msg::raft::SnapshotAnswer = "raft_install_snapshot";
            /// An admin's `weft replica add` (root), to the group's leader: the replica
            /// `replica` at `address` (started with `join = true`, waiting) is made a learner,
            /// brought up to date (a snapshot, then the log), then a voter. Answered once it
            /// votes, or refused (bad input, not the leader: `Moved` naming it, no catching
            /// up in time: the learner is taken out again).
            write AddMember { replica: u64, address: String } -> $crate::msg::raft::MembersAnswer = "raft_add_member";
            /// An admin's `weft replica remove` (root), to the group's leader: the replica at
            /// `address` leaves the group (the leader too: it steps down once the change
            /// committed, and the others elect another).
            write RemoveMember { address: String } -> $crate::msg::raft::MembersAnswer = "raft_remove_member";
            /// A replica that heard no leader for an election timeout asks whether this one
            /// would vote for it, before it raises its term (Raft's pre-vote): granted when
            /// this replica heard no leader within its lease either and the asker's log is
            /// at least as long. It changes nothing here (a read), so a replica cut off and
            /// healed, or whose clock jumped, does not depose a leader the others follow.
            /// `request` is postcard of weft-raft's `PreVoteRequest`.
            read PreVote { request: Vec<u8> } -> $crate::msg::raft::PreVoteAnswer = "raft_pre_vote";
        }
    };
}

crate::raft_ops!(define_ops);

crate::define_replies! {
    /// Answers to raft requests.
    RaftReply {
        Appended(AppendAnswer),
        Voted(VoteAnswer),
        SnapshotChunk(SnapshotAnswer),
        Members(MembersAnswer),
        PreVoted(PreVoteAnswer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_named_as_lustre_names_targets() {
        assert_eq!(GroupId::Mgs.to_string(), "MGS");
        assert_eq!(GroupId::Mdt(0).to_string(), "MDT0000");
        assert_eq!(GroupId::Mdt(26).to_string(), "MDT001a");
    }
}
