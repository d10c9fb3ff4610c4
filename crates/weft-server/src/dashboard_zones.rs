//! The dashboard's view of I/O zones (`lod.*.zone_rule`, weft-mds's zone.rs): each zone is
//! a pool of OSTs that a zone rule names, and its load is the sum of its OSTs' in the
//! monitor's history (per target: bytes read and written, requests), so no counter is
//! added for it. The OSTs of no zone, if any, are summed as one more row, `(no zone)`.
//!
//! * `/api/history?kind=zone&...`: the history's shape (`HistoryReply`), per zone;
//! * `/api/zones?secs=60`: each zone's pool, OSTs, rules, and its bytes/s read and written
//!   and requests/s over the last `secs`.
//!
//! The rules come from the first MDS that answers: every MDT has the same (each is set by
//! `weft set-param`, and `-P` replays them on every one).

use crate::sources::Sources;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use bytes::Bytes;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use weft_proto::msg::param::{GetParam, ParamValues};
use weft_proto::msg::{mgs, ClusterMap, HistoryReply, RequestHeader, TargetKind, UsageTotal};

/// How the OSTs outside every zone are named in the zones' rows and series.
pub(crate) const NO_ZONE: &str = "(no zone)";

/// One zone: its pool, its OSTs' target names, and the rules that send files to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Zone {
    pub pool: String,
    pub osts: Vec<String>,
    pub rules: Vec<String>,
}

/// The zones of `map` under the rules of `listing` (`get-param lod.*.zone_rule`'s value), in
/// the rules' order, then `(no zone)` with the other OSTs when there is a zone and are
/// others.
pub(crate) fn zones(map: &ClusterMap, listing: &str) -> Vec<Zone> {
    let mut out: Vec<Zone> = Vec::new();
    for (name, expr, pool) in weft_mds::zone::parse_listing(listing) {
        let rule = format!("{name}: {expr}");
        if let Some(z) = out.iter_mut().find(|z| z.pool == pool) {
            z.rules.push(rule);
            continue;
        }
        let members = map.pools.get(&pool).cloned().unwrap_or_default();
        let osts = map.osts().filter(|t| members.contains(&t.index)).map(|t| t.name(&map.fsname)).collect();
        out.push(Zone { pool, osts, rules: vec![rule] });
    }
    let zoned: Vec<&String> = out.iter().flat_map(|z| &z.osts).collect();
    let osts: Vec<String> = map.osts().map(|t| t.name(&map.fsname)).filter(|n| !zoned.contains(&n)).collect();
    if !out.is_empty() && !osts.is_empty() {
        out.push(Zone { pool: NO_ZONE.into(), osts, rules: Vec::new() });
    }
    out
}

/// Per-target usage summed per zone (an OST in two zones counts in both), zones with
/// nothing included: the zones' totals, in the zones' order.
pub(crate) fn per_zone(zones: &[Zone], targets: &[UsageTotal]) -> Vec<UsageTotal> {
    zones
        .iter()
        .map(|z| {
            let mut t = UsageTotal { name: z.pool.clone(), ops: 0, read_bytes: 0, write_bytes: 0 };
            for u in targets.iter().filter(|u| z.osts.contains(&u.name)) {
                t.ops += u.ops;
                t.read_bytes += u.read_bytes;
                t.write_bytes += u.write_bytes;
            }
            t
        })
        .collect()
}

/// The history of targets, summed per zone: series step by step, totals over the window.
pub(crate) fn zone_history(zones: &[Zone], targets: HistoryReply) -> HistoryReply {
    let mut steps: BTreeMap<u64, Vec<UsageTotal>> = BTreeMap::new();
    for (t, u) in targets.series {
        steps.entry(t).or_default().push(u);
    }
    let series = steps
        .into_iter()
        .flat_map(|(t, us)| {
            per_zone(zones, &us).into_iter().filter(|z| z.ops + z.read_bytes + z.write_bytes > 0).map(move |z| (t, z))
        })
        .collect();
    HistoryReply { totals: per_zone(zones, &targets.totals), series, ..targets }
}

/// The rules' listing from the first MDS that answers.
async fn listing(s: &Sources, map: &ClusterMap, wait: Duration) -> String {
    for server in map.servers(Some(TargetKind::Mdt)) {
        let op = GetParam { pattern: "lod.*.zone_rule".into() };
        if let Ok((ParamValues(values), _)) =
            s.peers.get(&server).op(RequestHeader::default(), 0, op, Bytes::new(), wait).await
        {
            if let Some(v) = values.into_iter().next() {
                return v.value;
            }
        }
    }
    String::new()
}

/// The target history of the last `secs` (in `step` steps when not 0), and the zones.
pub(crate) async fn zone_usage(
    s: &Sources,
    map: &ClusterMap,
    secs: u64,
    step: u64,
    waits: (Duration, Duration),
) -> Result<(Vec<Zone>, HistoryReply), Response> {
    let zones = zones(map, &listing(s, map, waits.0).await);
    let op = mgs::History { kind: "target".into(), secs, top: 0, step };
    let targets = s
        .mgs
        .op(RequestHeader::default(), op, waits.1)
        .await
        .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.message).into_response())?;
    Ok((zones, targets))
}

/// `/api/zones`: each zone with its rates over the last `secs`.
pub(crate) fn zones_json(zones: &[Zone], history: &HistoryReply, secs: u64) -> Response {
    let totals = per_zone(zones, &history.totals);
    let secs = secs.max(1) as f64;
    let rows: Vec<serde_json::Value> = zones
        .iter()
        .zip(totals)
        .map(|(z, t)| {
            json!({
                "pool": z.pool,
                "osts": z.osts,
                "rules": z.rules,
                "read_bytes_per_s": t.read_bytes as f64 / secs,
                "write_bytes_per_s": t.write_bytes as f64 / secs,
                "ops_per_s": t.ops as f64 / secs,
            })
        })
        .collect();
    Json(json!({ "secs": secs, "zones": rows })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::TargetInfo;

    fn map() -> ClusterMap {
        let ost = |index| TargetInfo::new(TargetKind::Ost, index, "127.0.0.1:1");
        ClusterMap {
            fsname: "weft".into(),
            targets: (0..4).map(ost).collect(),
            pools: [("zone1".to_string(), vec![0, 1]), ("zone2".to_string(), vec![2])].into(),
            ..ClusterMap::default()
        }
    }

    fn usage(name: &str, ops: u64, read: u64, write: u64) -> UsageTotal {
        UsageTotal { name: name.into(), ops, read_bytes: read, write_bytes: write }
    }

    #[test]
    fn a_zones_load_is_the_sum_of_its_osts() {
        let listing = "zone1 jobid={ckpt*} pool=zone1\nana jobid={ana*} pool=zone2\nmore uid={5} pool=zone1\n";
        let z = zones(&map(), listing);
        let pools: Vec<&str> = z.iter().map(|z| z.pool.as_str()).collect();
        assert_eq!(pools, ["zone1", "zone2", NO_ZONE]);
        assert_eq!(z[0].osts, ["weft-OST0000", "weft-OST0001"]);
        assert_eq!(z[0].rules, ["zone1: jobid={ckpt*}", "more: uid={5}"]);
        assert_eq!(z[2].osts, ["weft-OST0003"]);
        assert!(zones(&map(), "").is_empty(), "no rule: no zone, not even (no zone)");
        let mut every = map();
        every.pools.insert("rest".into(), vec![3]);
        let all = zones(&every, "a uid={1} pool=zone1\nb uid={2} pool=zone2\nc uid={3} pool=rest\n");
        assert_eq!(all.len(), 3, "no (no zone) row without such OSTs");

        let targets = vec![
            usage("weft-OST0000", 10, 100, 1000),
            usage("weft-OST0001", 5, 50, 500),
            usage("weft-OST0003", 1, 0, 7),
            usage("weft-MDT0000", 99, 0, 0),
        ];
        let sums = per_zone(&z, &targets);
        assert_eq!(sums[0], usage("zone1", 15, 150, 1500));
        assert_eq!(sums[1], usage("zone2", 0, 0, 0));
        assert_eq!(sums[2], usage(NO_ZONE, 1, 0, 7), "the MDT is no zone's");
        let history = HistoryReply {
            interval_s: 5,
            totals: targets.clone(),
            series: vec![(100, targets[0].clone()), (100, targets[2].clone()), (105, targets[1].clone())],
            step_s: 5,
        };
        let h = zone_history(&z, history);
        assert_eq!(h.totals[0], usage("zone1", 15, 150, 1500));
        assert_eq!(
            h.series,
            [(100, usage("zone1", 10, 100, 1000)), (100, usage(NO_ZONE, 1, 0, 7)), (105, usage("zone1", 5, 50, 500))],
            "steps where a zone did nothing are left out, as the history leaves them"
        );
    }
}
