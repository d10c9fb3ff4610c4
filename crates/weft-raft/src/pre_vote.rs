//! The pre-vote's messages (elect.rs decides; network.rs carries them), in a module of
//! their own so that neither of those names the other.

use crate::NodeId;
use openraft::LogId;
use serde::{Deserialize, Serialize};

/// What a replica asks the other voters before it stands (postcard of it is
/// `RaftRequest::PreVote.request`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreVoteRequest {
    pub candidate: NodeId,
    /// The term it would stand in: its own plus one.
    pub term: u64,
    /// Its last log id: a replica whose log is longer refuses.
    pub last_log_id: Option<LogId<NodeId>>,
}

/// A replica's answer to a [`PreVoteRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreVoteResponse {
    pub granted: bool,
    /// The answering replica's term (for the candidate's log line).
    pub term: u64,
}
