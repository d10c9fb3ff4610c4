//! Changing a live group's members: [`Group::add_member`] (a learner brought up to date,
//! then a voter) and [`Group::remove_member_at`], what `weft replica add|remove` asks the
//! leader. What is allowed is decided purely ([`plan_add`], [`plan_remove`]) against the
//! membership in the log, which is the group's truth once it is initialized (the configs'
//! `replicas` lists only give each replica its id and the founders their first members).
//!
//! A new replica always starts from a snapshot: before adding it the leader builds one and
//! purges its log up to it, so openraft sends the learner the snapshot and then the log
//! after it. The log alone would not do: a group made from a single MDT (`weft up
//! --replicas` on an old file system) holds state that predates its log, which every
//! founder copied but a newcomer would never see.

use crate::group::{write_error, Group, ProposeError, Role};
use crate::limits::{MEMBER_CATCH_UP_MS_MAX, MEMBER_SNAPSHOT_MS_MAX};
use crate::NodeId;
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, RaftMetrics};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use weft_proto::{ErrorCode, WeftError};

/// A group's members as the membership in its log names them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Members {
    pub voters: BTreeMap<NodeId, String>,
    /// Replicas that get the log without voting (one being added, catching up).
    pub learners: BTreeMap<NodeId, String>,
}

impl Members {
    fn of(metrics: &RaftMetrics<NodeId, BasicNode>) -> Members {
        let membership = metrics.membership_config.membership();
        let address = |id: NodeId| membership.get_node(&id).map(|n| (id, n.addr.clone()));
        Members {
            voters: membership.voter_ids().filter_map(address).collect(),
            learners: membership.learner_ids().filter_map(address).collect(),
        }
    }

    fn find(&self, address: &str) -> Option<(NodeId, bool)> {
        let voter = self.voters.iter().find(|(_, a)| a.as_str() == address).map(|(id, _)| (*id, true));
        voter.or_else(|| self.learners.iter().find(|(_, a)| a.as_str() == address).map(|(id, _)| (*id, false)))
    }

    fn at(&self, id: NodeId) -> Option<&String> {
        self.voters.get(&id).or_else(|| self.learners.get(&id))
    }

    /// As a membership change is answered.
    pub fn answer(&self) -> weft_proto::msg::raft::MembersAnswer {
        let list = |l: &BTreeMap<NodeId, String>| l.iter().map(|(id, a)| (*id, a.clone())).collect();
        weft_proto::msg::raft::MembersAnswer { voters: list(&self.voters), learners: list(&self.learners) }
    }

    /// `1 127.0.0.1:7001, 2 127.0.0.1:7002` (learners marked).
    pub fn text(&self) -> String {
        let voters = self.voters.iter().map(|(id, a)| format!("{id} {a}"));
        let learners = self.learners.iter().map(|(id, a)| format!("{id} {a} (learner)"));
        voters.chain(learners).collect::<Vec<_>>().join(", ")
    }
}

/// Why a membership change was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberError {
    /// This replica does not lead; the leader it knows of, if any (id, address).
    NotLeader { leader: Option<(NodeId, String)> },
    /// The change asked for is wrong (why, naming what is allowed).
    Refused(String),
    /// The group could not make it (no majority, the new replica did not catch up): why.
    Failed(String),
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemberError::NotLeader { leader } => {
                write!(f, "{}", ProposeError::NotLeader { leader: leader.clone() })
            }
            MemberError::Refused(why) | MemberError::Failed(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for MemberError {}

impl From<ProposeError> for MemberError {
    fn from(e: ProposeError) -> MemberError {
        match e {
            ProposeError::NotLeader { leader } => MemberError::NotLeader { leader },
            ProposeError::Failed(why) => MemberError::Failed(why),
        }
    }
}

impl MemberError {
    /// As a request's error: `Moved` naming the leader (weft-rpc's form, which the CLI
    /// follows), `Invalid` for a refusal, `Io` for a failure.
    pub fn into_weft(self, group: crate::GroupId) -> WeftError {
        match self {
            MemberError::NotLeader { leader } => WeftError::new(
                ErrorCode::Moved,
                weft_rpc::mgs::moved_to(
                    &format!("this replica does not lead {group}'s group"),
                    leader.as_ref().map(|(_, a)| a.as_str()),
                ),
            ),
            MemberError::Refused(why) => WeftError::invalid(format!("{group}: {why}")),
            MemberError::Failed(why) => WeftError::io(format!("{group}: {why}")),
        }
    }
}

/// What adding replica `id` at `address` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddPlan {
    /// It votes already: nothing to do (a resent request).
    Done,
    /// It is a learner already (an add that did not finish): wait for it, then promote it.
    Promote,
    /// A learner to add, then promote.
    Add,
}

/// Decides an add against the members (pure: the membership in the log, the request).
pub fn plan_add(members: &Members, id: NodeId, address: &str) -> Result<AddPlan, String> {
    if id == 0 {
        return Err("replica ids start at 1 (1 + the replica's place in its config's replicas list)".into());
    }
    if address.is_empty() {
        return Err("no address given for the new replica".into());
    }
    match (members.find(address), members.at(id)) {
        (Some((at, true)), _) if at == id => Ok(AddPlan::Done),
        (Some((at, false)), _) if at == id => Ok(AddPlan::Promote),
        (Some((other, _)), _) => Err(format!("{address} is already replica {other} of the group")),
        (None, Some(other)) => Err(format!(
            "replica id {id} is already the group's replica at {other}: a joining replica's config lists every \
             replica the group ever had, in the same order, then itself (its id is its place in that list)"
        )),
        (None, None) => Ok(AddPlan::Add),
    }
}

/// Decides a removal: the replica's id and whether it votes.
pub fn plan_remove(members: &Members, address: &str) -> Result<(NodeId, bool), String> {
    let Some((id, voter)) = members.find(address) else {
        return Err(format!("{address} is not a member of the group; its members are: {}", members.text()));
    };
    if voter && members.voters.len() == 1 {
        return Err(format!("{address} is the group's only voter: a group cannot lose its last replica"));
    }
    Ok((id, voter))
}

fn change_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> MemberError {
    match e {
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            MemberError::Failed(format!("the membership could not change: {e} (another change in progress? try again)"))
        }
        e => write_error(e).into(),
    }
}

impl Group {
    /// The members as the membership this replica knows names them.
    pub fn members(&self) -> Members {
        Members::of(&self.inner.raft.metrics().borrow())
    }

    fn ensure_leader(&self) -> Result<(), MemberError> {
        let status = self.status();
        match status.role {
            Role::Leader => Ok(()),
            _ => Err(MemberError::NotLeader { leader: status.leader.filter(|(id, _)| *id != status.node_id) }),
        }
    }

    /// Waits (at most `limit`) until `done` holds of this replica's metrics; `what` names
    /// it in the error. Losing the lead meanwhile is `NotLeader`.
    async fn wait_for(
        &self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut(&RaftMetrics<NodeId, BasicNode>) -> bool,
    ) -> Result<(), MemberError> {
        let mut metrics = self.inner.raft.metrics();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            {
                let m = metrics.borrow_and_update();
                if done(&m) {
                    return Ok(());
                }
            }
            self.ensure_leader()?;
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(MemberError::Failed("the replica stopped".into())),
                Err(_) => {
                    return Err(MemberError::Failed(format!("{what}: not done within {} s", limit.as_secs())));
                }
            }
        }
    }

    /// Builds a snapshot of everything applied and purges the log up to it, so that a
    /// replica added next starts from the snapshot (module doc).
    async fn snapshot_and_purge(&self) -> Result<(), MemberError> {
        let raft = &self.inner.raft;
        let Some(applied) = raft.metrics().borrow().last_applied.map(|l| l.index) else { return Ok(()) };
        let fatal = |e: openraft::error::Fatal<NodeId>| MemberError::Failed(format!("the replica stopped: {e}"));
        raft.trigger().snapshot().await.map_err(fatal)?;
        let limit = Duration::from_millis(MEMBER_SNAPSHOT_MS_MAX);
        self.wait_for("a snapshot for the new replica", limit, |m| m.snapshot.is_some_and(|s| s.index >= applied))
            .await?;
        let Some(upto) = raft.metrics().borrow().snapshot.map(|s| s.index) else { return Ok(()) };
        raft.trigger().purge_log(upto).await.map_err(fatal)?;
        self.wait_for("purging the log behind the snapshot", limit, |m| m.purged.is_some_and(|p| p.index >= upto)).await
    }

    /// Adds replica `id` at `address` to the live group: a learner, which the leader brings
    /// up to date (a snapshot, then the log), then a voter. Waits until it votes. A replica
    /// that does not catch up within `MEMBER_CATCH_UP_MS_MAX` is taken out again. Answers the
    /// members after the change.
    pub async fn add_member(&self, id: NodeId, address: String) -> Result<Members, MemberError> {
        self.ensure_leader()?;
        let raft = &self.inner.raft;
        let group = self.group();
        let plan = plan_add(&self.members(), id, &address).map_err(MemberError::Refused)?;
        if plan == AddPlan::Done {
            return Ok(self.members());
        }
        if plan == AddPlan::Add {
            self.snapshot_and_purge().await?;
            raft.add_learner(id, BasicNode { addr: address.clone() }, false).await.map_err(change_error)?;
            tracing::info!("replicated group {group}: replica {id} at {address} added as a learner; catching up");
        }
        // Up to date: it holds everything the leader had when it was added.
        let target = raft.metrics().borrow().last_log_index.unwrap_or(0);
        let started = Instant::now();
        let limit = Duration::from_millis(MEMBER_CATCH_UP_MS_MAX);
        let caught_up = |m: &RaftMetrics<NodeId, BasicNode>| {
            m.replication.as_ref().and_then(|r| r.get(&id).copied().flatten()).is_some_and(|l| l.index >= target)
        };
        if let Err(e) = self.wait_for("catching up", limit, caught_up).await {
            let matched = raft.metrics().borrow().replication.as_ref().and_then(|r| r.get(&id).copied().flatten());
            if !matches!(e, MemberError::NotLeader { .. }) {
                // Not left as a learner the leader keeps sending to.
                let _ = raft.change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([id])), false).await;
            }
            return Err(match e {
                MemberError::Failed(_) => MemberError::Failed(format!(
                    "replica {id} at {address} did not catch up within {} s (it has the log up to {}, the leader {target}): \
                     is it running, with `join = true`, reachable from the leader? It was taken out again",
                    limit.as_secs(),
                    matched.map_or("nothing".to_string(), |l| l.index.to_string())
                )),
                other => other,
            });
        }
        tracing::info!(
            "replicated group {group}: replica {id} caught up in {} ms; it becomes a voter",
            started.elapsed().as_millis()
        );
        raft.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false).await.map_err(change_error)?;
        Ok(self.members())
    }

    /// Removes the replica at `address` from the live group (a voter or a learner). The
    /// leader may remove itself: it steps down once the change is committed, and the others
    /// elect a leader among themselves. Answers the members after the change.
    pub async fn remove_member_at(&self, address: &str) -> Result<Members, MemberError> {
        self.ensure_leader()?;
        let (id, voter) = plan_remove(&self.members(), address).map_err(MemberError::Refused)?;
        let change = match voter {
            true => ChangeMembers::RemoveVoters(BTreeSet::from([id])),
            false => ChangeMembers::RemoveNodes(BTreeSet::from([id])),
        };
        let limit = self.inner.config.propose_timeout();
        match tokio::time::timeout(limit, self.inner.raft.change_membership(change, false)).await {
            Ok(r) => r.map_err(change_error)?,
            Err(_) => {
                return Err(MemberError::Failed(format!(
                    "removing {address}: no majority of the old and the new members answered within {} ms",
                    limit.as_millis()
                )))
            }
        };
        tracing::info!("replicated group {}: replica {id} at {address} removed", self.group());
        Ok(self.members())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(voters: &[(u64, &str)], learners: &[(u64, &str)]) -> Members {
        let map = |l: &[(u64, &str)]| l.iter().map(|(id, a)| (*id, a.to_string())).collect();
        Members { voters: map(voters), learners: map(learners) }
    }

    #[test]
    fn an_add_is_checked_against_the_membership_in_the_log() {
        let m = members(&[(1, "a:1"), (2, "b:1"), (3, "c:1")], &[(4, "d:1")]);
        assert_eq!(plan_add(&m, 5, "e:1"), Ok(AddPlan::Add));
        assert_eq!(plan_add(&m, 4, "d:1"), Ok(AddPlan::Promote), "an add that did not finish goes on");
        assert_eq!(plan_add(&m, 2, "b:1"), Ok(AddPlan::Done), "a resent add is answered");
        let e = plan_add(&m, 5, "b:1").unwrap_err();
        assert!(e.contains("b:1 is already replica 2"), "{e}");
        let e = plan_add(&m, 3, "e:1").unwrap_err();
        assert!(
            e.contains("replica id 3 is already the group's replica at c:1") && e.contains("in the same order"),
            "{e}"
        );
        assert!(plan_add(&m, 0, "e:1").unwrap_err().contains("start at 1"));
    }

    #[test]
    fn a_removal_names_the_members_when_the_address_is_none_of_them() {
        let m = members(&[(1, "a:1"), (2, "b:1")], &[(4, "d:1")]);
        assert_eq!(plan_remove(&m, "b:1"), Ok((2, true)));
        assert_eq!(plan_remove(&m, "d:1"), Ok((4, false)), "a learner left by a failed add");
        let e = plan_remove(&m, "z:9").unwrap_err();
        assert!(e.contains("z:9 is not a member") && e.contains("1 a:1, 2 b:1, 4 d:1 (learner)"), "{e}");
        let alone = members(&[(1, "a:1")], &[]);
        assert!(plan_remove(&alone, "a:1").unwrap_err().contains("only voter"));
    }
}
