//! The management service as every client of it reaches it: [`MgsPeers`], one address or
//! the replicas of a replicated MGS, written `host:port[,host:port...]`.
//!
//! A replicated MGS is served by its group's leader alone; the other replicas answer
//! `ErrorCode::Moved`, naming the leader when they know it ([`moved_to`]). `MgsPeers` holds
//! one [`Peer`] per address and remembers which answered last; a call goes there first, and
//! on a `Moved` answer goes to the leader it names (or the next address), on a connection
//! failure or silence to the next address (each address tried once per turn,
//! [`Peer::call_once`], not resent to as a lone Peer is), round after round with a short
//! pause, within the call's deadline. A leader named that the list does not hold (a replica
//! added to the group later) is asked right after the replica that named it. The map names
//! the group's members (`ClusterMap::mgs_replicas`, kept by its leader); the map follower
//! hands them to [`MgsPeers::learn`], and calls go to those the list does not hold too, so a
//! client whose listed replicas all left or died still reaches the group while one it learned
//! of runs. Every MGS client goes through it: the map follower and `fetch`, a
//! client's connect, a server's registration and its QoS demand reports, the CLI. With one
//! address it is exactly one [`Peer`] call, as before replication.

use crate::limits::{MGS_ATTEMPT_MS, MGS_ROUND_PAUSE_MS_MAX, MGS_ROUND_PAUSE_MS_MIN};
use crate::peer::{Peer, PeerOptions};
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use weft_proto::msg::ops::{service_answer, take_reply, Op, Payload, Variant};
use weft_proto::msg::{ReplyBody, RequestBody, RequestHeader, ServiceRequest};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// How a replica that does not lead names the leader in its `Moved` message.
const LEADER_MARK: &str = "the leader is at ";

/// The message of a `Moved` answer from an MGS replica that knows the leader's address.
pub fn moved_to(why: &str, leader: Option<&str>) -> String {
    match leader {
        Some(address) => format!("{why}; {LEADER_MARK}{address}"),
        None => format!("{why}; no leader is known yet"),
    }
}

/// The leader's address a [`moved_to`] message names.
pub fn leader_named(message: &str) -> Option<&str> {
    let at = message.rfind(LEADER_MARK)? + LEADER_MARK.len();
    message[at..].split_whitespace().next()
}

/// The addresses of an MGS list (`a:p,b:p,c:p`; spaces allowed), in order, without empties.
pub fn parse_addresses(list: &str) -> Vec<String> {
    list.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect()
}

/// The management service's addresses, and which of them answered last (module doc).
pub struct MgsPeers {
    /// The listed replicas, in the order given.
    peers: Vec<Arc<Peer>>,
    /// The listed ones, then the group's other members as the map last named them: what a
    /// call goes round (replaced whole by [`MgsPeers::learn`]).
    everyone: std::sync::RwLock<Arc<Vec<Arc<Peer>>>>,
    /// Where the next call goes first: the peer that answered last.
    current: AtomicUsize,
    /// A leader a replica named that the list does not (a replica added to the group after
    /// this list was written: `weft replica add MGS`): asked after the listed replica that
    /// named it, as long as one names it.
    unlisted: std::sync::Mutex<Option<Arc<Peer>>>,
}

impl std::fmt::Debug for MgsPeers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MgsPeers").field("addresses", &self.addresses()).field("current", &self.current()).finish()
    }
}

impl MgsPeers {
    /// The MGS at `list` (one address, or several separated by commas).
    pub fn new(list: &str, opts: PeerOptions) -> MgsPeers {
        MgsPeers::from_addresses(parse_addresses(list), opts)
    }

    /// The MGS at each of `addresses` (an empty list is one empty address, which fails to
    /// connect with a message naming it).
    pub fn from_addresses(mut addresses: Vec<String>, opts: PeerOptions) -> MgsPeers {
        if addresses.is_empty() {
            addresses.push(String::new());
        }
        let peers = addresses.into_iter().map(|a| Arc::new(Peer::new(a, opts.clone()))).collect();
        MgsPeers::of(peers)
    }

    fn of(peers: Vec<Arc<Peer>>) -> MgsPeers {
        MgsPeers {
            everyone: std::sync::RwLock::new(Arc::new(peers.clone())),
            peers,
            current: AtomicUsize::new(0),
            unlisted: std::sync::Mutex::new(None),
        }
    }

    /// The group's members as the map names them (`ClusterMap::mgs_replicas`): calls go to
    /// those the list does not hold too, after the listed ones; a member that left is
    /// forgotten (a listed address never is). Nothing changes for a single MGS (an empty
    /// list in the map).
    pub fn learn(&self, members: &[String]) {
        let mut everyone = self.everyone.write().unwrap_or_else(|p| p.into_inner());
        let unlisted: Vec<&String> = members.iter().filter(|m| self.peers.iter().all(|p| p.address() != *m)).collect();
        let known = everyone.len() - self.peers.len();
        if known == unlisted.len() && everyone[self.peers.len()..].iter().zip(&unlisted).all(|(p, m)| p.address() == *m)
        {
            return;
        }
        let mut next = self.peers.clone();
        for member in unlisted {
            let peer = everyone.iter().find(|p| p.address() == member).cloned();
            next.push(peer.unwrap_or_else(|| Arc::new(Peer::new(member.clone(), self.peers[0].options().clone()))));
        }
        tracing::info!(
            learned = ?next[self.peers.len()..].iter().map(|p| p.address()).collect::<Vec<_>>(),
            "the management service's members beyond the list, from the map"
        );
        *everyone = Arc::new(next);
    }

    /// The replicas a call goes round: the listed ones, then those learned from the map.
    fn everyone(&self) -> Arc<Vec<Arc<Peer>>> {
        self.everyone.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The addresses learned from the map that the list does not hold.
    pub fn learned(&self) -> Vec<String> {
        self.everyone()[self.peers.len()..].iter().map(|p| p.address().to_string()).collect()
    }

    /// The peer of `leader`, a leader named by a replica but not in the list.
    fn unlisted_peer(&self, leader: &str) -> Arc<Peer> {
        let mut unlisted = self.unlisted.lock().unwrap_or_else(|p| p.into_inner());
        match unlisted.as_ref() {
            Some(p) if p.address() == leader => p.clone(),
            _ => {
                let peer = Arc::new(Peer::new(leader.to_string(), self.peers[0].options().clone()));
                *unlisted = Some(peer.clone());
                peer
            }
        }
    }

    /// Every address, in the order given.
    pub fn addresses(&self) -> Vec<&str> {
        self.peers.iter().map(|p| p.address()).collect()
    }

    /// The addresses as written in configs and mount sources: `a:p,b:p`.
    pub fn list(&self) -> String {
        self.addresses().join(",")
    }

    /// The address that answered last (the first before any answered).
    pub fn current(&self) -> String {
        let everyone = self.everyone();
        everyone[self.current.load(Ordering::Relaxed) % everyone.len()].address().to_string()
    }

    pub fn options(&self) -> &PeerOptions {
        self.peers[0].options()
    }

    /// Sends one MGS op and takes its answer, within `timeout` (module doc).
    pub async fn op<O>(&self, header: RequestHeader, op: O, timeout: Duration) -> WeftResult<O::Reply>
    where
        O: Op,
        O::Request: ServiceRequest,
        O::Answer: Payload<ReplyBody> + Variant,
    {
        self.op_answered_within(header, op, timeout, Duration::ZERO).await
    }

    /// As [`MgsPeers::op`], for an op the service itself may take up to `answer` to answer
    /// (a long poll): each address is given that much more before the next is tried.
    pub async fn op_answered_within<O>(
        &self,
        header: RequestHeader,
        op: O,
        timeout: Duration,
        answer: Duration,
    ) -> WeftResult<O::Reply>
    where
        O: Op,
        O::Request: ServiceRequest,
        O::Answer: Payload<ReplyBody> + Variant,
    {
        let reply = self.call(header, op.into().into_body(0), timeout, answer).await?;
        take_reply::<O>(service_answer(O::OPCODE, reply)?)
    }

    async fn call(
        &self,
        header: RequestHeader,
        body: RequestBody,
        timeout: Duration,
        answer: Duration,
    ) -> WeftResult<ReplyBody> {
        let peers = self.everyone();
        if let [peer] = peers.as_slice() {
            return peer.call_with_timeout(header, body, Bytes::new(), timeout).await.map(|(r, _)| r);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let attempt_max = answer + Duration::from_millis(MGS_ATTEMPT_MS);
        let mut pause_ms = MGS_ROUND_PAUSE_MS_MIN;
        let mut attempts = 0usize;
        loop {
            let i = self.current.load(Ordering::Relaxed) % peers.len();
            let peer = &peers[i];
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let error = match peer
                .call_once(header.clone(), body.clone(), Bytes::new(), remaining.min(attempt_max))
                .await
            {
                Ok((reply, _)) => return Ok(reply),
                Err(e)
                    if matches!(
                        e.code,
                        ErrorCode::Moved | ErrorCode::TimedOut | ErrorCode::Io | ErrorCode::Again | ErrorCode::Checksum
                    ) =>
                {
                    e
                }
                Err(e) => return Err(e),
            };
            let leader = (error.code == ErrorCode::Moved).then(|| leader_named(&error.message)).flatten();
            if let Some(leader) = leader.filter(|l| peers.iter().all(|p| p.address() != *l)) {
                // Not listed: asked once, right away; the rotation goes on if it fails.
                let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
                let peer = self.unlisted_peer(leader);
                match peer.call_once(header.clone(), body.clone(), Bytes::new(), remaining.min(attempt_max)).await {
                    Ok((reply, _)) => return Ok(reply),
                    Err(e)
                        if matches!(
                            e.code,
                            ErrorCode::Moved
                                | ErrorCode::TimedOut
                                | ErrorCode::Io
                                | ErrorCode::Again
                                | ErrorCode::Checksum
                        ) =>
                    {
                        tracing::debug!(to = leader, "the management service's unlisted leader: {}", e.message);
                    }
                    Err(e) => return Err(e),
                }
            }
            let named = leader.and_then(|leader| peers.iter().position(|p| p.address() == leader)).filter(|&j| j != i);
            let next = named.unwrap_or((i + 1) % peers.len());
            tracing::debug!(
                from = peer.address(),
                to = peers[next].address(),
                "the management service: {}",
                error.message
            );
            let _ = self.current.compare_exchange(i, next, Ordering::Relaxed, Ordering::Relaxed);
            attempts += 1;
            // A whole round without an answer (an election under way): pause before the next.
            let pause = if attempts.is_multiple_of(peers.len()) {
                let p = Duration::from_millis(pause_ms);
                pause_ms = (pause_ms * 2).min(MGS_ROUND_PAUSE_MS_MAX);
                p
            } else {
                Duration::ZERO
            };
            if tokio::time::Instant::now() + pause >= deadline {
                return Err(WeftError::new(
                    error.code,
                    format!(
                        "no replica of the management service ({}) answered {} within {} s; last: {}",
                        self.list(),
                        body.opcode_name(),
                        timeout.as_secs_f32().round(),
                        error.message
                    ),
                ));
            }
            tokio::time::sleep(pause).await;
        }
    }
}

impl From<Arc<Peer>> for MgsPeers {
    /// The MGS behind one existing peer.
    fn from(peer: Arc<Peer>) -> MgsPeers {
        MgsPeers::of(vec![peer])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_leader_names_read_back() {
        assert_eq!(parse_addresses("a:1, b:2,,c:3 "), ["a:1", "b:2", "c:3"]);
        assert_eq!(parse_addresses("a:1"), ["a:1"]);
        let m = moved_to("this MGS replica does not lead its group", Some("127.0.0.1:7001"));
        assert_eq!(leader_named(&m), Some("127.0.0.1:7001"));
        assert_eq!(leader_named(&moved_to("x", None)), None);
        let peers = MgsPeers::new("a:1,b:2", PeerOptions::default());
        assert_eq!((peers.list(), peers.current()), ("a:1,b:2".to_string(), "a:1".to_string()));
        assert_eq!(MgsPeers::new("", PeerOptions::default()).addresses(), [""]);
    }

    #[test]
    fn members_the_map_names_beyond_the_list_are_learned_and_forgotten_when_they_leave() {
        let peers = MgsPeers::new("a:1", PeerOptions::default());
        let members = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        peers.learn(&members(&["a:1", "b:2", "c:3"]));
        assert_eq!(peers.learned(), ["b:2", "c:3"]);
        let b = peers.everyone()[1].clone();
        peers.learn(&members(&["b:2", "d:4"]));
        assert_eq!(peers.learned(), ["b:2", "d:4"], "c:3 left; a:1 is listed and stays");
        assert!(Arc::ptr_eq(&peers.everyone()[1], &b), "a known member keeps its connection");
        assert_eq!(peers.addresses(), ["a:1"]);
        peers.learn(&[]);
        assert!(peers.learned().is_empty());
    }
}
