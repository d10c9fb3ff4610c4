//! The parameter tree of a server process (Lustre's `lctl get_param/set_param/list_param`):
//! names such as `ost.OSS.ost_io.nrs_policies` or `obdfilter.weft-OST0000.job_stats`, with
//! glob wildcards in any dot-separated component.

use serde::{Deserialize, Serialize};

/// One parameter and its value (several lines for a listing such as `nrs_tbf_rule`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamValue {
    pub name: String,
    pub value: String,
}

/// Parameters and their values: what a get answers, and what a set changed (with the
/// values they have now).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ParamValues(pub Vec<ParamValue>);

/// Parameter names: what a list answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ParamNames(pub Vec<String>);

/// Every parameter operation (see [`mdt_ops!`](crate::mdt_ops) for the list's form).
#[macro_export]
macro_rules! param_ops {
    ($then:ident) => {
        $then! {
            ParamRequest / ParamReply;
            /// The values of the parameters `pattern` matches.
            read GetParam { pattern: String } -> $crate::msg::param::ParamValues = "param_get";
            /// Sets every parameter `pattern` matches to `value`; fails, changing nothing,
            /// when none matches or the value is refused.
            write SetParam { pattern: String, value: String } -> $crate::msg::param::ParamValues = "param_set";
            /// The names of the parameters `pattern` matches (or lies above).
            read ListParam { pattern: String } -> $crate::msg::param::ParamNames = "param_list";
            /// What each target, and each job and user on it, did since the server started
            /// (or since the job statistics last forgot it): for the monitor's history.
            read Usage {} -> $crate::msg::param::UsageCounters = "param_usage";
        }
    };
}

/// Requests and bytes of one job or user on one target, counted from the
/// server's start (a counter that goes down was reset: the job was forgotten meanwhile).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UsageRow {
    /// The target (`weft-OST0000`).
    pub target: String,
    /// The jobid or uid.
    pub key: String,
    pub ops: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// A server's usage counters, by job, user and group (a target's own is the sum of its
/// users').
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UsageCounters {
    pub jobs: Vec<UsageRow>,
    pub users: Vec<UsageRow>,
    pub groups: Vec<UsageRow>,
}

crate::param_ops!(define_ops);

crate::define_replies! {
    /// Answers to parameter requests.
    ParamReply {
        Values(ParamValues),
        Names(ParamNames),
        Usage(UsageCounters),
    }
}

/// Whether `pattern` (glob wildcards `*`, `?` and `[...]`-free, per dot-separated
/// component) matches `name` whole.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), name.split('.').collect());
    p.len() == n.len() && p.iter().zip(&n).all(|(p, n)| crate::glob::matches(p.as_bytes(), n.as_bytes()))
}

/// Whether `pattern` matches `name` or a leading part of it (what `list-param ost.OSS.*`
/// lists).
pub fn name_or_parent_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), name.split('.').collect());
    p.len() <= n.len() && p.iter().zip(&n).all(|(p, n)| crate::glob::matches(p.as_bytes(), n.as_bytes()))
}

/// The permanent settings of `records` not in `applied` (all of them the first time, those
/// of `nrs_policies` first so that rules find their policy), in the order to apply them;
/// then `applied` holds `records`. Servers and mounts follow the map's settings with it.
pub fn records_to_apply(
    records: &[crate::msg::ParamRecord],
    applied: &mut Vec<crate::msg::ParamRecord>,
) -> Vec<crate::msg::ParamRecord> {
    let first = applied.is_empty();
    let mut new: Vec<crate::msg::ParamRecord> = if records.starts_with(applied) {
        records[applied.len()..].to_vec()
    } else {
        records.iter().filter(|r| !applied.contains(r)).cloned().collect()
    };
    if first {
        new.sort_by_key(|r| !r.name.ends_with(".nrs_policies"));
    }
    *applied = records.to_vec();
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_per_component() {
        assert!(name_matches("ost.OSS.ost_io.nrs_policies", "ost.OSS.ost_io.nrs_policies"));
        assert!(name_matches("ost.OSS.*.nrs_policies", "ost.OSS.ost_io.nrs_policies"));
        assert!(name_matches("obdfilter.*.job_stats", "obdfilter.weft-OST0001.job_stats"));
        assert!(!name_matches("ost.*", "ost.OSS.ost_io.nrs_policies"), "a star stays in its component");
        assert!(name_or_parent_matches("ost.*", "ost.OSS.ost_io.nrs_policies"));
        assert!(!name_matches("mds.MDS.mdt.nrs_policies", "ost.OSS.ost_io.nrs_policies"));
    }
}
