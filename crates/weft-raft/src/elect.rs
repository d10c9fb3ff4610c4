//! Elections with a pre-vote (the Raft thesis, 9.6): a replica that heard no leader for an
//! election timeout first asks the other voters whether they would vote for it, and raises
//! its term only once a majority of each voter set says yes.
//!
//! Why: openraft 0.9 has no pre-vote (0.10 gained it). Without one, a replica cut off from
//! the leader (a partition, a process stopped and woken, a restart behind a leader that
//! backs off from it, a monotonic clock that jumped ahead) stands in a higher term. The
//! others refuse it while they hear the leader (openraft's leader lease), but the leader
//! sees the higher term in the answer to its next append and steps down: the group is
//! without a leader for an election or two, and every client waits. With the pre-vote the
//! others refuse first, the term does not move, and nothing happens.
//!
//! How, on openraft 0.9's public API: openraft's own election timer is off
//! (`Config::enable_elect = false`); [`drive`] watches this replica's vote the way that
//! timer did (openraft's `handle_tick_election`: an election timeout after the vote last
//! changed or was renewed by the leader, plus the leader lease while the vote is a
//! leader's) and, when due, runs the pre-vote, then `trigger().elect()`. A replica asked
//! ([`answer`]) grants when it does not lead, heard no leader within the lease (the rule
//! openraft's real vote applies too, so a pre-vote granted is a vote likely granted), and
//! the candidate's last log id is at least its own. The decisions are pure functions
//! here; the task around them only reads state and sends.

use crate::network::Network;
pub use crate::pre_vote::{PreVoteRequest, PreVoteResponse};
use crate::{NodeId, TypeConfig};
use openraft::{LogId, Raft, ServerState};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::BuildHasher;
use std::time::Duration;
use tokio::time::Instant;

/// Why a pre-vote is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The replica asked leads the group.
    Leads,
    /// It heard a leader within the lease.
    HeardLeader,
    /// Its log is longer than the candidate's.
    LogAhead,
}

/// What a replica knows of itself when it answers or decides to stand.
#[derive(Debug, Clone)]
pub struct Local {
    pub state: ServerState,
    pub term: u64,
    /// Its vote is a leader's (granted by a majority): a leader leads or led in that term.
    pub vote_committed: bool,
    /// When its vote last changed or was renewed by the leader's append (None: never).
    pub vote_changed: Option<Instant>,
    pub last_log_id: Option<LogId<NodeId>>,
    /// The voter sets (two during a joint change), each with every voter's address.
    pub voters: Vec<BTreeMap<NodeId, String>>,
}

impl Local {
    /// Whether it heard a leader within `lease` before `now`.
    pub fn heard_leader(&self, now: Instant, lease: Duration) -> bool {
        self.vote_committed && self.vote_changed.is_some_and(|at| now <= at + lease)
    }

    pub fn is_voter(&self, id: NodeId) -> bool {
        self.voters.iter().any(|set| set.contains_key(&id))
    }
}

/// The answer to `request` from a replica in the state `local` at `now`.
pub fn answer(request: &PreVoteRequest, local: &Local, now: Instant, lease: Duration) -> Result<(), Refusal> {
    if local.state == ServerState::Leader {
        return Err(Refusal::Leads);
    }
    if local.heard_leader(now, lease) {
        return Err(Refusal::HeardLeader);
    }
    if request.last_log_id < local.last_log_id {
        return Err(Refusal::LogAhead);
    }
    Ok(())
}

/// Whether a replica in the state `local` should stand (after a pre-vote) at `now`:
/// openraft's rule for its own timer, with `timeout` this round's random election timeout,
/// and not before `not_before` (the end of the last attempt's wait).
pub fn due(local: &Local, me: NodeId, now: Instant, lease: Duration, timeout: Duration, not_before: Instant) -> bool {
    if !matches!(local.state, ServerState::Follower | ServerState::Candidate) || !local.is_voter(me) {
        return false;
    }
    if now < not_before {
        return false;
    }
    let wait = if local.vote_committed { lease + timeout } else { timeout };
    match local.vote_changed {
        Some(at) => now >= at + wait,
        None => true,
    }
}

/// Whether a replica that was due in the state `before` is still due in the state `after`,
/// read once its pre-vote round came back: not if meanwhile its vote moved (a leader was
/// elected, or one it hears renewed the vote) or it left the followers and candidates.
pub fn still_due(before: &Local, after: &Local) -> bool {
    matches!(after.state, ServerState::Follower | ServerState::Candidate)
        && after.term == before.term
        && after.vote_committed == before.vote_committed
        && after.vote_changed == before.vote_changed
}

/// Whether `granted` (the candidate included) is a majority of every voter set.
pub fn majority(voters: &[BTreeMap<NodeId, String>], granted: &BTreeSet<NodeId>) -> bool {
    !voters.is_empty() && voters.iter().all(|set| set.keys().filter(|id| granted.contains(id)).count() * 2 > set.len())
}

/// A random election timeout in `[min, max]` (std's RandomState as the source: this needs
/// spread between replicas, not quality).
pub fn random_timeout(min: Duration, max: Duration) -> Duration {
    let spread = max.saturating_sub(min).as_millis() as u64;
    let draw = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    min + Duration::from_millis(draw % (spread + 1))
}

/// This replica's state as openraft holds it (None once openraft stopped), its last log id
/// from the log store.
pub(crate) async fn local(raft: &Raft<TypeConfig>, log: &crate::log::LogStore) -> Option<Local> {
    let mut local = raft
        .with_raft_state(|s| {
            let membership = s.membership_state.effective();
            let voters = membership
                .get_joint_config()
                .iter()
                .map(|set| {
                    set.iter()
                        .map(|id| (*id, membership.get_node(id).map(|n| n.addr.clone()).unwrap_or_default()))
                        .collect()
                })
                .collect();
            let vote = s.vote_ref();
            Local {
                state: s.server_state,
                term: vote.leader_id().term,
                vote_committed: vote.is_committed(),
                vote_changed: s.vote_last_modified(),
                last_log_id: None,
                voters,
            }
        })
        .await
        .ok()?;
    local.last_log_id = log.last_log_id();
    Some(local)
}

/// The settings the election task needs.
#[derive(Clone)]
pub(crate) struct Timing {
    pub tick: Duration,
    pub lease: Duration,
    pub timeout_min: Duration,
    pub timeout_max: Duration,
}

/// Runs this replica's elections until openraft stops: every tick, whether it is due to
/// stand; if so, the pre-vote, then the election.
pub(crate) async fn drive(
    me: NodeId,
    raft: Raft<TypeConfig>,
    log: crate::log::LogStore,
    network: Network,
    timing: Timing,
) {
    let group = network.group();
    let mut timeout = random_timeout(timing.timeout_min, timing.timeout_max);
    let mut not_before = Instant::now();
    loop {
        tokio::time::sleep(timing.tick).await;
        let Some(local) = local(&raft, &log).await else { return };
        let now = Instant::now();
        if !due(&local, me, now, timing.lease, timeout, not_before) {
            continue;
        }
        // Whatever comes of this round, the next waits a fresh random timeout.
        timeout = random_timeout(timing.timeout_min, timing.timeout_max);
        not_before = now + timeout;
        let request = PreVoteRequest { candidate: me, term: local.term + 1, last_log_id: local.last_log_id };
        let others: BTreeMap<NodeId, String> =
            local.voters.iter().flatten().filter(|(id, _)| **id != me).map(|(id, a)| (*id, a.clone())).collect();
        // Asked at once; decided as soon as a majority granted, so that a dead replica's
        // silence (up to MESSAGE_TIMEOUT_MS) delays nothing when the others answer.
        let mut asks = tokio::task::JoinSet::new();
        for (id, address) in others {
            let (network, request) = (network.clone(), request.clone());
            asks.spawn(async move { (id, network.pre_vote(id, &address, &request).await) });
        }
        let mut granted = BTreeSet::from([me]);
        let mut refused = Vec::new();
        while !majority(&local.voters, &granted) {
            let (id, reply) = match asks.join_next().await {
                None => break,
                Some(Ok(answer)) => answer,
                Some(Err(_)) => continue,
            };
            match reply {
                Some(r) if r.granted => {
                    granted.insert(id);
                }
                Some(r) => refused.push(format!("{id} (term {})", r.term)),
                None => refused.push(format!("{id} (no answer)")),
            }
        }
        asks.abort_all();
        if !majority(&local.voters, &granted) {
            tracing::debug!(
                "replicated group {group}: replica {me} heard no leader, but its pre-vote for term {} was refused by {}",
                request.term,
                refused.join(", ")
            );
            continue;
        }
        // The round took time (up to a message timeout): a leader elected or heard meanwhile
        // must not be deposed by a vote it no longer needs.
        let Some(after) = self::local(&raft, &log).await else { return };
        if !still_due(&local, &after) {
            tracing::debug!("replicated group {group}: replica {me} heard from a leader during its pre-vote: it stays");
            continue;
        }
        tracing::info!(
            "replicated group {group}: replica {me} heard no leader for {} ms and a majority would vote for it: it stands for term {}",
            local.vote_changed.map_or(0, |at| now.saturating_duration_since(at).as_millis()),
            request.term
        );
        if raft.trigger().elect().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    const LEASE: Duration = Duration::from_millis(1_500);
    const TIMEOUT: Duration = Duration::from_millis(1_000);

    fn log_id(term: u64, index: u64) -> Option<LogId<NodeId>> {
        Some(LogId::new(CommittedLeaderId::new(term, 1), index))
    }

    fn voters(ids: &[NodeId]) -> BTreeMap<NodeId, String> {
        ids.iter().map(|id| (*id, format!("127.0.0.1:{}", 7000 + id))).collect()
    }

    fn follower(now: Instant, heard_ago_ms: u64) -> Local {
        Local {
            state: ServerState::Follower,
            term: 3,
            vote_committed: true,
            vote_changed: Some(now - Duration::from_millis(heard_ago_ms)),
            last_log_id: log_id(3, 10),
            voters: vec![voters(&[1, 2, 3])],
        }
    }

    fn ask(last_log_id: Option<LogId<NodeId>>) -> PreVoteRequest {
        PreVoteRequest { candidate: 2, term: 4, last_log_id }
    }

    #[test]
    fn a_replica_that_hears_its_leader_refuses_and_one_that_does_not_grants() {
        let now = Instant::now() + Duration::from_secs(10);
        assert_eq!(answer(&ask(log_id(3, 10)), &follower(now, 100), now, LEASE), Err(Refusal::HeardLeader));
        assert_eq!(answer(&ask(log_id(3, 10)), &follower(now, 1_600), now, LEASE), Ok(()));
        // A vote not yet a leader's (it voted for a candidate that did not win) is no lease.
        let voted = Local { vote_committed: false, ..follower(now, 100) };
        assert_eq!(answer(&ask(log_id(3, 10)), &voted, now, LEASE), Ok(()));
        let leader = Local { state: ServerState::Leader, ..follower(now, 5_000) };
        assert_eq!(answer(&ask(log_id(3, 10)), &leader, now, LEASE), Err(Refusal::Leads));
    }

    #[test]
    fn a_shorter_or_older_log_is_refused_a_longer_one_granted() {
        let now = Instant::now() + Duration::from_secs(10);
        let local = follower(now, 2_000);
        assert_eq!(answer(&ask(log_id(3, 9)), &local, now, LEASE), Err(Refusal::LogAhead));
        assert_eq!(answer(&ask(log_id(2, 50)), &local, now, LEASE), Err(Refusal::LogAhead));
        assert_eq!(answer(&ask(None), &local, now, LEASE), Err(Refusal::LogAhead));
        assert_eq!(answer(&ask(log_id(3, 11)), &local, now, LEASE), Ok(()));
        assert_eq!(answer(&ask(log_id(4, 1)), &local, now, LEASE), Ok(()));
    }

    #[test]
    fn a_follower_stands_after_the_lease_and_a_timeout_a_candidate_after_a_timeout() {
        let now = Instant::now() + Duration::from_secs(10);
        let long_ago = now - Duration::from_secs(5);
        assert!(!due(&follower(now, 2_400), 1, now, LEASE, TIMEOUT, long_ago));
        assert!(due(&follower(now, 2_500), 1, now, LEASE, TIMEOUT, long_ago));
        let candidate = Local { state: ServerState::Candidate, vote_committed: false, ..follower(now, 1_000) };
        assert!(due(&candidate, 1, now, LEASE, TIMEOUT, long_ago));
        assert!(!due(
            &Local { vote_changed: Some(now - Duration::from_millis(900)), ..candidate.clone() },
            1,
            now,
            LEASE,
            TIMEOUT,
            long_ago
        ));
        // Not before the last attempt's wait ended.
        assert!(!due(&candidate, 1, now, LEASE, TIMEOUT, now + Duration::from_millis(1)));
        // A leader, a learner, a replica outside the voters never stands.
        assert!(!due(&Local { state: ServerState::Leader, ..candidate.clone() }, 1, now, LEASE, TIMEOUT, long_ago));
        assert!(!due(&Local { state: ServerState::Learner, ..candidate.clone() }, 1, now, LEASE, TIMEOUT, long_ago));
        assert!(!due(&candidate, 4, now, LEASE, TIMEOUT, long_ago));
        // A replica that never heard anyone (a new group) stands at once.
        assert!(due(&Local { vote_changed: None, ..candidate }, 1, now, LEASE, TIMEOUT, long_ago));
    }

    #[test]
    fn a_majority_is_needed_in_every_voter_set() {
        let three = vec![voters(&[1, 2, 3])];
        assert!(!majority(&three, &BTreeSet::from([1])));
        assert!(majority(&three, &BTreeSet::from([1, 3])));
        // A joint change from {1,2,3} to {3,4,5}: a majority of each.
        let joint = vec![voters(&[1, 2, 3]), voters(&[3, 4, 5])];
        assert!(!majority(&joint, &BTreeSet::from([1, 2, 3])));
        assert!(majority(&joint, &BTreeSet::from([1, 3, 4])));
        assert!(majority(&[voters(&[1])], &BTreeSet::from([1])));
        assert!(!majority(&[], &BTreeSet::from([1])));
    }

    #[test]
    fn random_timeouts_stay_within_their_bounds_and_spread() {
        let (min, max) = (Duration::from_millis(750), Duration::from_millis(1_500));
        let drawn: BTreeSet<Duration> = (0..64).map(|_| random_timeout(min, max)).collect();
        assert!(drawn.iter().all(|t| (min..=max).contains(t)), "{drawn:?}");
        assert!(drawn.len() > 8, "64 draws gave {} values", drawn.len());
        assert_eq!(random_timeout(min, min), min);
    }

    #[test]
    fn a_replica_whose_vote_moved_during_its_pre_vote_does_not_stand() {
        let now = Instant::now();
        let before = Local {
            state: ServerState::Follower,
            term: 3,
            vote_committed: true,
            vote_changed: Some(now),
            last_log_id: log_id(3, 10),
            voters: Vec::new(),
        };
        assert!(still_due(&before, &before.clone()), "nothing changed: it stands");
        let renewed = Local { vote_changed: Some(now + Duration::from_millis(5)), ..before.clone() };
        assert!(!still_due(&before, &renewed), "the leader's append renewed its vote");
        let elected = Local { term: 4, ..before.clone() };
        assert!(!still_due(&before, &elected), "another was elected meanwhile");
        let leads = Local { state: ServerState::Leader, ..before.clone() };
        assert!(!still_due(&before, &leads));
    }
}
