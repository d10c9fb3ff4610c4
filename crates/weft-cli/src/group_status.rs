//! `weft status`'s view of the replicated groups (the MDT's, the MGS's): each member as the
//! group's leader knows it, from its `replica_status` parameter.

use crate::limits::REPLICA_PROBE_MS;
use std::time::Duration;
use weft_rpc::{Peer, PeerOptions};

/// A replicated group as its leader sees it, for `weft status`.
#[derive(serde::Serialize, Debug)]
pub struct GroupRow {
    /// `weft-MDT0000`, `MGS`.
    pub name: String,
    /// The leader's replica id and address.
    pub leader: String,
    pub term: u64,
    /// The leader's last log index.
    pub last_log_index: String,
    pub members: Vec<MemberRow>,
}

#[derive(serde::Serialize, Debug)]
pub struct MemberRow {
    pub replica: u64,
    pub address: String,
    /// `voter`, or `learner` (being added: catching up).
    pub kind: String,
    /// How much of the log it holds, as the leader knows it (`-`: not known yet).
    pub matched: String,
}

/// The members of a `replica_status` text (`members:` and `learners:` lists).
fn parse_members(text: &str) -> Vec<MemberRow> {
    let mut kind = "";
    let mut out = Vec::new();
    for line in text.lines() {
        match line {
            "members:" => kind = "voter",
            "learners:" => kind = "learner",
            _ => {
                let Some(body) = line.trim().strip_prefix("- {").and_then(|l| l.strip_suffix('}')) else { continue };
                let field = |key: &str| {
                    body.split(", ").find_map(|kv| kv.trim().strip_prefix(key)?.strip_prefix(": ")).unwrap_or("-")
                };
                out.push(MemberRow {
                    replica: field("replica").parse().unwrap_or(0),
                    address: field("address").to_string(),
                    kind: kind.to_string(),
                    matched: field("matched").to_string(),
                });
            }
        }
    }
    out
}

/// The group `param` names (`mdt.*.replica_status`, `mgs.*.replica_status`) as its leader
/// answers it, asking `addresses` first and then the leader one of them names; None when
/// no leader answers within a second or two each.
pub fn group_row(rt: &tokio::runtime::Runtime, name: &str, param: &str, addresses: &[String]) -> Option<GroupRow> {
    use weft_proto::msg::param::GetParam;
    let limit = Duration::from_millis(REPLICA_PROBE_MS);
    let ask = |address: &str| -> Option<String> {
        let opts = PeerOptions { connect_timeout: limit, request_timeout: limit, ..PeerOptions::default() };
        let peer = Peer::new(address, opts);
        let op = GetParam { pattern: param.to_string() };
        let (values, _) =
            rt.block_on(peer.op(weft_proto::msg::RequestHeader::default(), 0, op, bytes::Bytes::new(), limit)).ok()?;
        values.0.first().map(|v| v.value.clone())
    };
    let field = |text: &str, key: &str| {
        text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(": ")).unwrap_or("-").to_string()
    };
    let row = |text: &str| GroupRow {
        name: name.to_string(),
        leader: field(text, "leader"),
        term: field(text, "term").parse().unwrap_or(0),
        last_log_index: field(text, "last_log_index"),
        members: parse_members(text),
    };
    // The leaders the others name: a replica added later is outside `addresses`.
    let mut named: Vec<String> = Vec::new();
    for address in addresses {
        let Some(text) = ask(address) else { continue };
        if field(&text, "role") == "leader" {
            return Some(row(&text));
        }
        if let Some(leader) = field(&text, "leader").split_whitespace().nth(1) {
            if !addresses.iter().chain(&named).any(|a| a == leader) {
                named.push(leader.to_string());
            }
        }
    }
    named.iter().filter_map(|a| ask(a)).find(|text| field(text, "role") == "leader").map(|text| row(&text))
}

/// `weft status`'s table of the replicated groups' members.
pub fn print_groups(groups: &[GroupRow]) {
    println!("{:<14} {:<8} {:<22} {:<8} {:>9}", "GROUP", "REPLICA", "ADDRESS", "ROLE", "MATCHED");
    for g in groups {
        for m in &g.members {
            let leads = g.leader.split_whitespace().next() == Some(m.replica.to_string().as_str());
            let role = if leads { "leader" } else { m.kind.as_str() };
            println!("{:<14} {:<8} {:<22} {:<8} {:>9}", g.name, m.replica, m.address, role, m.matched);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_read_from_a_replica_status() {
        let text = "group: MDT0000\nreplica: 1\nrole: leader\nterm: 3\nleader: 1 a:1\nlast_log_index: 40\n\
                    committed: 40\napplied: 40\nmembers:\n  - { replica: 1, address: a:1, matched: 40 }\n\
                    \x20 - { replica: 2, address: b:1, matched: - }\nlearners:\n  - { replica: 4, address: d:1, matched: 12 }\n";
        let m = parse_members(text);
        let seen: Vec<_> =
            m.iter().map(|m| (m.replica, m.address.as_str(), m.kind.as_str(), m.matched.as_str())).collect();
        assert_eq!(seen, vec![(1, "a:1", "voter", "40"), (2, "b:1", "voter", "-"), (4, "d:1", "learner", "12")]);
    }
}
