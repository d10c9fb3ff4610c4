//! openraft's network over weft-rpc: one [`Peer`] per member address (made on first use,
//! shared by the group's replication streams), each message a `RequestBody::Raft` with
//! openraft's request as postcard bytes, answered with postcard of openraft's result.
//!
//! Timeouts are short ([`MESSAGE_TIMEOUT_MS`], [`SNAPSHOT_CHUNK_TIMEOUT_MS`]): a replica
//! that does not answer is reported Unreachable, and openraft backs off and tries again,
//! rather than one append waiting out a mount's request timeout.

use crate::limits::{APPEND_MESSAGE_BYTES_MAX, MESSAGE_TIMEOUT_MS, SNAPSHOT_CHUNK_TIMEOUT_MS};
use crate::{NodeId, TypeConfig};
use bytes::Bytes;
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_proto::msg::raft as msg;
use weft_proto::msg::{GroupId, RaftReply, RaftRequest, ReplyBody, RequestBody, RequestHeader};
use weft_proto::{ErrorCode, WeftError};
use weft_rpc::{Peer, PeerOptions};

/// Makes the connections of one group's replica to the others.
#[derive(Clone)]
pub struct Network {
    group: GroupId,
    options: PeerOptions,
    peers: Arc<Mutex<HashMap<String, Arc<Peer>>>>,
}

impl Network {
    pub fn new(group: GroupId, network: Option<Arc<weft_rpc::Network>>) -> Network {
        let options = PeerOptions {
            connect_timeout: Duration::from_millis(MESSAGE_TIMEOUT_MS),
            network,
            ..PeerOptions::default()
        };
        Network { group, options, peers: Arc::default() }
    }

    pub fn group(&self) -> GroupId {
        self.group
    }

    /// Asks the replica `target` at `address` for its pre-vote (elect.rs): None when it
    /// does not answer within [`MESSAGE_TIMEOUT_MS`] or answers with something else.
    pub async fn pre_vote(
        &self,
        target: NodeId,
        address: &str,
        request: &crate::pre_vote::PreVoteRequest,
    ) -> Option<crate::pre_vote::PreVoteResponse> {
        let connection = Connection { target, group: self.group, peer: self.peer(address) };
        let op = RaftRequest::PreVote(msg::PreVote { request: encode(request).ok()? });
        let answer = connection
            .send::<crate::pre_vote::PreVoteResponse, String>(op, timeout(MESSAGE_TIMEOUT_MS), |r| match r {
                RaftReply::PreVoted(a) => Some(a.reply),
                _ => None,
            })
            .await;
        match answer {
            Ok(Ok(response)) => Some(response),
            Ok(Err(why)) => {
                tracing::debug!("replicated group {}: replica {target} gave no pre-vote: {why}", self.group);
                None
            }
            Err(Failure::Unreachable(e) | Failure::Network(e)) => {
                tracing::debug!("replicated group {}: pre-vote to replica {target} at {address}: {e}", self.group);
                None
            }
        }
    }

    fn peer(&self, address: &str) -> Arc<Peer> {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.entry(address.to_string()).or_insert_with(|| Arc::new(Peer::new(address, self.options.clone()))).clone()
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection { target, group: self.group, peer: self.peer(&node.addr) }
    }
}

/// One replica's messages to one other.
pub struct Connection {
    target: NodeId,
    group: GroupId,
    peer: Arc<Peer>,
}

/// Why a message did not get an answer, before it is typed for openraft.
enum Failure {
    /// The replica could not be reached or did not answer in time: back off.
    Unreachable(WeftError),
    /// Anything else on the way (a protocol error): try again.
    Network(WeftError),
}

impl Connection {
    /// Sends `op` and reads openraft's result out of the answer `answer` takes from the
    /// reply (None: an answer of another kind).
    async fn send<Resp: DeserializeOwned, E: DeserializeOwned>(
        &self,
        op: RaftRequest,
        timeout: Duration,
        answer: impl FnOnce(RaftReply) -> Option<Vec<u8>>,
    ) -> Result<Result<Resp, E>, Failure> {
        let opcode = op.opcode_name();
        let body = RequestBody::Raft { group: self.group, op };
        let reply = self.peer.call_with_timeout(RequestHeader::default(), body, Bytes::new(), timeout).await;
        match reply {
            Ok((ReplyBody::Raft(reply), _)) => {
                let variant = weft_proto::msg::ops::Variant::variant(&reply);
                let Some(bytes) = answer(reply) else {
                    return Err(Failure::Network(unexpected_reply(opcode, variant)));
                };
                postcard::from_bytes(&bytes).map_err(|e| {
                    Failure::Network(WeftError::protocol(format!("a {opcode} answer that does not decode: {e}")))
                })
            }
            Ok((other, _)) => {
                Err(Failure::Network(unexpected_reply(opcode, weft_proto::msg::ops::Variant::variant(&other))))
            }
            // A replica whose server runs but does not hold the group yet (starting, or
            // removed) is as good as unreachable.
            Err(e) if matches!(e.code, ErrorCode::Io | ErrorCode::TimedOut | ErrorCode::NotFound) => {
                Err(Failure::Unreachable(e))
            }
            Err(e) => Err(Failure::Network(e)),
        }
    }

    fn rpc_error<E: std::error::Error>(&self, failure: Failure) -> RPCError<NodeId, BasicNode, E> {
        match failure {
            Failure::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            Failure::Network(e) => RPCError::Network(NetworkError::new(&e)),
        }
    }
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, WeftError> {
    postcard::to_allocvec(value).map_err(|e| WeftError::protocol(format!("encoding a raft message: {e}")))
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let entries = rpc.entries.len() as u64;
        let request = encode(&rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        if request.len() > APPEND_MESSAGE_BYTES_MAX && entries > 1 {
            return Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(entries / 2)));
        }
        let op = RaftRequest::AppendEntries(msg::AppendEntries { request });
        let answer = self.send::<AppendEntriesResponse<NodeId>, RaftError<NodeId>>(
            op,
            timeout(MESSAGE_TIMEOUT_MS),
            |r| match r {
                RaftReply::Appended(a) => Some(a.reply),
                _ => None,
            },
        );
        match answer.await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(self.target, e))),
            Err(f) => Err(self.rpc_error(f)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        let request = encode(&rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let op = RaftRequest::InstallSnapshot(msg::InstallSnapshot { request });
        let answer = self
            .send::<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>(
                op,
                timeout(SNAPSHOT_CHUNK_TIMEOUT_MS),
                |r| match r {
                    RaftReply::SnapshotChunk(a) => Some(a.reply),
                    _ => None,
                },
            )
            .await;
        match answer {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(self.target, e))),
            Err(f) => Err(self.rpc_error(f)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let request = encode(&rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let op = RaftRequest::Vote(msg::Vote { request });
        let answer =
            self.send::<VoteResponse<NodeId>, RaftError<NodeId>>(op, timeout(MESSAGE_TIMEOUT_MS), |r| match r {
                RaftReply::Voted(a) => Some(a.reply),
                _ => None,
            });
        match answer.await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(self.target, e))),
            Err(f) => Err(self.rpc_error(f)),
        }
    }
}

/// The replica that sent `op`: the candidate of a vote, the leader of an append or of a
/// snapshot chunk (each carries its sender's vote). None when the bytes do not decode. A
/// simulated network reads it to cut the messages between two replicas both ways, since a
/// request between servers names no sender of its own.
pub fn sender(op: &RaftRequest) -> Option<NodeId> {
    let vote = match op {
        RaftRequest::AppendEntries(m) => {
            postcard::from_bytes::<AppendEntriesRequest<TypeConfig>>(&m.request).ok()?.vote
        }
        RaftRequest::Vote(m) => postcard::from_bytes::<VoteRequest<NodeId>>(&m.request).ok()?.vote,
        RaftRequest::PreVote(m) => {
            return postcard::from_bytes::<crate::pre_vote::PreVoteRequest>(&m.request).ok().map(|r| r.candidate)
        }
        RaftRequest::InstallSnapshot(m) => {
            postcard::from_bytes::<InstallSnapshotRequest<TypeConfig>>(&m.request).ok()?.vote
        }
        // An admin's request, from no replica.
        RaftRequest::AddMember(_) | RaftRequest::RemoveMember(_) => return None,
    };
    vote.leader_id().voted_for()
}

fn unexpected_reply(opcode: &str, variant: &str) -> WeftError {
    WeftError::protocol(format!("unexpected {variant} reply to {opcode}"))
}

fn timeout(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{LogId, Vote};

    #[test]
    fn the_sender_of_each_message_is_the_replica_whose_vote_it_carries() {
        let vote = encode(&VoteRequest::<NodeId>::new(Vote::new(3, 2), None)).unwrap();
        assert_eq!(sender(&RaftRequest::Vote(msg::Vote { request: vote })), Some(2));
        let append = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(4, 3),
            prev_log_id: Some(LogId::new(openraft::CommittedLeaderId::new(4, 3), 7)),
            entries: Vec::new(),
            leader_commit: None,
        };
        let request = encode(&append).unwrap();
        assert_eq!(sender(&RaftRequest::AppendEntries(msg::AppendEntries { request })), Some(3));
        let garbage = RaftRequest::AppendEntries(msg::AppendEntries { request: vec![0xff; 3] });
        assert_eq!(sender(&garbage), None);
    }
}
