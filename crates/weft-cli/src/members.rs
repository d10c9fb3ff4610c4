//! `weft replica add GROUP ADDR` and `weft replica remove GROUP ADDR` (root): a replica of a
//! replicated MDT (`weft-MDT0000`) or of the management service (`MGS`) added to or removed
//! from its group on a live file system. The new replica's process runs first, its config
//! saying `join = true` (docs/CONFIG.md): it waits, and this command asks it which replica
//! it is, then asks the group's leader to add it (weft-raft `members.rs`: a snapshot, the log,
//! then a vote). A removal needs no answer from the replica removed (it may be dead).
//!
//! The group's size may be even after a change: Raft is as safe with four voters as with
//! three, an even group only tolerates no more failures than the odd one below it. Replacing
//! a replica is an add then a remove, through four, so a change to an even size is made, with
//! a warning, not refused.

use crate::limits::{
    PARAM_CONNECT_TIMEOUT_MS, REPLICA_ADD_WAIT_S, REPLICA_LEADER_HOPS_MAX, REPLICA_PROBE_MS, REPLICA_REMOVE_WAIT_S,
};
use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use std::collections::VecDeque;
use std::time::Duration;
use weft_proto::msg::raft::{AddMember, MembersAnswer, RaftRequest, RemoveMember};
use weft_proto::msg::{ClusterMap, GroupId, RaftReply, ReplyBody, RequestBody, TargetKind};
use weft_proto::ErrorCode;
use weft_rpc::{Peer, PeerOptions};

#[derive(Args)]
pub struct ReplicaArgs {
    #[command(subcommand)]
    command: ReplicaCommand,
}

#[derive(Subcommand)]
enum ReplicaCommand {
    /// Add the replica at ADDR to GROUP: its server runs with `join = true` in the group's
    /// section of its config; it catches up (a snapshot, then the log), then votes.
    Add(ChangeArgs),
    /// Remove the replica at ADDR from GROUP (the leader too: the others elect another).
    Remove(ChangeArgs),
}

#[derive(Args)]
struct ChangeArgs {
    /// The group: an MDT's name (weft-MDT0000) or MGS.
    group: String,
    /// The replica's server (host:port), as the group's members list it.
    address: String,
    #[command(flatten)]
    at: crate::cluster_addr::MgsArgs,
}

/// A group named on the command line: which, its name as printed, its param pattern.
#[derive(Debug)]
struct Named {
    id: GroupId,
    name: String,
    /// `mdt.weft-MDT0000.replica_status`, `mgs.MGS.replica_status`.
    status_param: String,
}

/// The group `word` names, checked against the map (its MDTs, and the MGS).
fn group_named(word: &str, map: &ClusterMap) -> anyhow::Result<Named> {
    let mdts: Vec<String> = map.mdts().map(|t| t.name(&map.fsname)).collect();
    let allowed = || {
        let mut all = mdts.clone();
        all.push("MGS".into());
        all.join(", ")
    };
    if word.eq_ignore_ascii_case("MGS") {
        return Ok(Named { id: GroupId::Mgs, name: "MGS".into(), status_param: "mgs.MGS.replica_status".into() });
    }
    let Some(target) = map.mdts().find(|t| t.name(&map.fsname) == word) else {
        bail!("unknown group '{word}': the replicated groups are named {}", allowed());
    };
    Ok(Named {
        id: GroupId::Mdt(target.index),
        name: word.to_string(),
        status_param: format!("mdt.{word}.replica_status"),
    })
}

fn options(request_timeout: Duration) -> PeerOptions {
    PeerOptions {
        connect_timeout: Duration::from_millis(PARAM_CONNECT_TIMEOUT_MS),
        request_timeout,
        ..PeerOptions::default()
    }
}

/// Which replica the server at `address` holds of `group` (its id), from its
/// `replica_status`: it must run, and hold one.
fn replica_at(rt: &tokio::runtime::Runtime, group: &Named, address: &str) -> anyhow::Result<u64> {
    use weft_proto::msg::param::GetParam;
    let limit = Duration::from_millis(REPLICA_PROBE_MS);
    let peer = Peer::new(address, options(limit));
    let op = GetParam { pattern: group.status_param.clone() };
    let answer = rt.block_on(peer.op(crate::param::caller(), 0, op, bytes::Bytes::new(), limit));
    let (values, _) = answer.map_err(|e| {
        anyhow!(
            "no replica answers at {address} (asked it for {} for {} s: {}): start its server first, with `join = true` in the [{}] section of its config",
            group.status_param,
            limit.as_secs(),
            e.message,
            if group.id == GroupId::Mgs { "mgs" } else { "mds" }
        )
    })?;
    let Some(text) = values.0.first().map(|v| v.value.clone()) else {
        bail!("the server at {address} holds no replica of {}: its config has no replicas for it", group.name);
    };
    let id = text.lines().find_map(|l| l.strip_prefix("replica: ")).and_then(|v| v.trim().parse().ok());
    id.ok_or_else(|| anyhow!("the server at {address} answered {} without its replica id", group.status_param))
}

/// Sends a membership change to the group's leader: first to `first` (where the map says it
/// is), then wherever a server that does not lead names the leader.
fn ask_leader(
    rt: &tokio::runtime::Runtime,
    group: &Named,
    first: Vec<String>,
    op: RaftRequest,
    limit: Duration,
) -> anyhow::Result<MembersAnswer> {
    let mut queue: VecDeque<String> = first.into();
    let mut tried = Vec::new();
    for _ in 0..REPLICA_LEADER_HOPS_MAX {
        let Some(address) = queue.pop_front() else { break };
        let peer = Peer::new(address.clone(), options(limit));
        let body = RequestBody::Raft { group: group.id, op: op.clone() };
        let error = match rt.block_on(peer.call_once(crate::param::caller(), body, bytes::Bytes::new(), limit)) {
            Ok((ReplyBody::Raft(RaftReply::Members(m)), _)) => return Ok(m),
            Ok((other, _)) => bail!("{address} answered a membership change with {other:?}"),
            Err(e) => e,
        };
        // Errors of the group itself name it first ("MDT0000: ..."); anything else is this
        // server not being the one to ask.
        let of_group = error.message.starts_with(&format!("{}:", group.id));
        match error.code {
            ErrorCode::Moved => {
                if let Some(leader) = weft_rpc::mgs::leader_named(&error.message) {
                    queue.push_front(leader.to_string());
                }
            }
            ErrorCode::Io | ErrorCode::TimedOut | ErrorCode::NotFound if !of_group => {}
            _ => bail!("{}: {}", group.name, error.message),
        }
        tried.push(format!("{address} ({})", error.message));
    }
    bail!("no leader of {} answered; tried: {}", group.name, tried.join("; "))
}

fn members_text(m: &MembersAnswer) -> String {
    let voters = m.voters.iter().map(|(id, a)| format!("{id} {a}"));
    let learners = m.learners.iter().map(|(id, a)| format!("{id} {a} (learner)"));
    voters.chain(learners).collect::<Vec<_>>().join(", ")
}

pub fn replica(a: ReplicaArgs) -> anyhow::Result<()> {
    let (c, adding) = match &a.command {
        ReplicaCommand::Add(c) => (c, true),
        ReplicaCommand::Remove(c) => (c, false),
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mgs_list = c.at.address(None)?;
    let mgs = weft_rpc::mgs::MgsPeers::new(&mgs_list, options(Duration::from_secs(REPLICA_REMOVE_WAIT_S)));
    let map = rt
        .block_on(weft_rpc::map::fetch_map_from(&mgs, Duration::from_secs(REPLICA_REMOVE_WAIT_S)))
        .map_err(|e| anyhow!("cannot reach the management service at {mgs_list}: {}", e.message))?;
    let group = group_named(&c.group, &map)?;
    // Where the leader is: the MDT's server in the map, the MGS's replicas in turn.
    let first: Vec<String> = match group.id {
        GroupId::Mdt(index) => map.target(TargetKind::Mdt, index).map(|t| t.address.clone()).into_iter().collect(),
        GroupId::Mgs => mgs.addresses().into_iter().map(str::to_string).collect(),
    };
    let answer = if adding {
        let replica = replica_at(&rt, &group, &c.address)?;
        let op = RaftRequest::AddMember(AddMember { replica, address: c.address.clone() });
        let m = ask_leader(&rt, &group, first, op, Duration::from_secs(REPLICA_ADD_WAIT_S))?;
        println!("{}: replica {replica} at {} added; members: {}", group.name, c.address, members_text(&m));
        m
    } else {
        let op = RaftRequest::RemoveMember(RemoveMember { address: c.address.clone() });
        let m = ask_leader(&rt, &group, first, op, Duration::from_secs(REPLICA_REMOVE_WAIT_S))?;
        println!("{}: {} removed; members: {}", group.name, c.address, members_text(&m));
        m
    };
    let voters = answer.voters.len();
    if voters.is_multiple_of(2) {
        eprintln!(
            "weft: warning: {} has {voters} voters: an even group survives no more failures than {} voters do; add or remove one",
            group.name,
            voters - 1
        );
    }
    if group.id == GroupId::Mgs {
        println!(
            "clients and servers find the management service through their MGS address lists: put the new list in their configs and mounts"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_named_as_the_map_names_its_mdt_or_mgs() {
        let mut map = ClusterMap { fsname: "weft".into(), ..ClusterMap::default() };
        map.targets.push(weft_proto::msg::TargetInfo::new(TargetKind::Mdt, 0, "a:1"));
        assert_eq!(group_named("weft-MDT0000", &map).unwrap().id, GroupId::Mdt(0));
        assert_eq!(group_named("mgs", &map).unwrap().id, GroupId::Mgs);
        let e = group_named("weft-MDT0001", &map).unwrap_err().to_string();
        assert!(e.contains("unknown group 'weft-MDT0001'") && e.contains("weft-MDT0000, MGS"), "{e}");
    }
}
