//! The dashboard, served beside the metrics by every server process with a metrics port
//! (the management service's; under `weft up --replicas`, the main process's): one page (`dashboard.html`, everything it needs inline: no internet) that draws charts
//! of throughput and operations per job, user or target from the monitor's history, the
//! NRS policies and rules in force on every server with the classes they held back, and the
//! space of every target. The JSON it reads:
//!
//! It asks the management service through the process's `MgsPeers`, which follow its leader:
//! a replicated one's history is each replica's own (every replica runs the monitor), so
//! after the leader dies the dashboard shows the new leader's, intervals before the death
//! included.
//!
//! * `/api/info`: the file system's name;
//! * `/api/history?kind=job&secs=600&step=5&top=8`: the MGS's `History` op (`kind=zone`:
//!   its targets' summed per I/O zone, see [`crate::dashboard_zones`]);
//! * `/api/zones?secs=60`: each I/O zone's pool, OSTs, rules and load;
//! * `/api/nrs`: every server's `*.nrs_policies`, `*.nrs_tbf_rule`, `*.nrs_tbf_classes`;
//! * `/api/space`: statfs of every target in the map;
//! * `/api/reservations`: the OSTs' capacities and the bandwidth reservations of the plan
//!   with their states now (drawn per OST over time);
//! * `/api/warnings`: the decay policies and what they did in the current periods (as
//!   root's `weft qos warnings --all`: the dashboard is an administrator's view, on the
//!   metrics port, which shows per-user usage already).

use crate::dashboard_zones::{zone_history, zone_usage, zones_json};
use crate::sources::Sources;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use weft_proto::msg::param::{GetParam, ParamValues};
use weft_proto::msg::{mdt, mgs, ost, ClusterMap, RequestHeader, TargetKind};

const PAGE: &str = include_str!("dashboard.html");
/// How long the dashboard waits for a server before it shows the others without it.
const SERVER_WAIT: Duration = Duration::from_secs(3);
/// How long it waits for the management service (a replicated one's new leader included).
const MGS_WAIT: Duration = Duration::from_secs(10);

pub(crate) fn routes(sources: Arc<Sources>) -> axum::Router {
    let (a, b, c, d, e) = (sources.clone(), sources.clone(), sources.clone(), sources.clone(), sources.clone());
    let (f, g) = (sources.clone(), sources);
    axum::Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/api/info", get(move || info(a.clone())))
        .route("/api/history", get(move |q: Query<HashMap<String, String>>| history(b.clone(), q)))
        .route("/api/nrs", get(move || nrs(c.clone())))
        .route("/api/space", get(move || space(d.clone())))
        .route("/api/warnings", get(move || warnings(e.clone())))
        .route("/api/zones", get(move |q: Query<HashMap<String, String>>| zones(f.clone(), q)))
        .route("/api/reservations", get(move || reservations(g.clone())))
}

fn bad(status: StatusCode, message: String) -> Response {
    (status, message).into_response()
}

async fn info(s: Arc<Sources>) -> Json<Value> {
    Json(json!({ "fsname": s.fsname }))
}

/// The cluster map, from the management service's leader.
async fn map(s: &Sources) -> Result<ClusterMap, Response> {
    weft_rpc::map::fetch_map_from(&s.mgs, MGS_WAIT)
        .await
        .map_err(|e| bad(StatusCode::SERVICE_UNAVAILABLE, format!("the management service: {}", e.message)))
}

async fn history(s: Arc<Sources>, Query(q): Query<HashMap<String, String>>) -> Response {
    let num = |k: &str, default: u64| {
        q.get(k).map_or(Ok(default), |v| v.parse::<u64>().map_err(|_| format!("{k}='{v}': a number")))
    };
    let (secs, step, top) = match (num("secs", 600), num("step", 0), num("top", 0)) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, u32::try_from(c).unwrap_or(u32::MAX)),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return bad(StatusCode::BAD_REQUEST, e),
    };
    let kind = q.get("kind").cloned().unwrap_or_else(|| "job".into());
    if kind == "zone" {
        let map = match map(&s).await {
            Ok(map) => map,
            Err(r) => return r,
        };
        return match zone_usage(&s, &map, secs, step, (SERVER_WAIT, MGS_WAIT)).await {
            Ok((zones, targets)) => Json(zone_history(&zones, targets)).into_response(),
            Err(r) => r,
        };
    }
    match s.mgs.op(RequestHeader::default(), mgs::History { kind, secs, top, step }, MGS_WAIT).await {
        Ok(h) => Json(h).into_response(),
        Err(e) if e.code == weft_proto::ErrorCode::Invalid => bad(StatusCode::BAD_REQUEST, e.message),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.message),
    }
}

/// `/api/zones?secs=60`: see [`crate::dashboard_zones`].
async fn zones(s: Arc<Sources>, Query(q): Query<HashMap<String, String>>) -> Response {
    let secs = match q.get("secs").map_or(Ok(60), |v| v.parse::<u64>()) {
        Ok(secs) => secs.max(1),
        Err(_) => return bad(StatusCode::BAD_REQUEST, "secs: a number".into()),
    };
    let map = match map(&s).await {
        Ok(map) => map,
        Err(r) => return r,
    };
    match zone_usage(&s, &map, secs, 0, (SERVER_WAIT, MGS_WAIT)).await {
        Ok((zones, history)) => zones_json(&zones, &history, secs),
        Err(r) => r,
    }
}

async fn get_param(s: &Sources, server: &str, pattern: &str) -> Vec<(String, String)> {
    let op = GetParam { pattern: pattern.into() };
    match s.peers.get(server).op(RequestHeader::default(), 0, op, Bytes::new(), SERVER_WAIT).await {
        Ok((ParamValues(values), _)) => values.into_iter().map(|v| (v.name, v.value)).collect(),
        Err(_) => Vec::new(),
    }
}

/// `ost.OSS.ost_io.nrs_policies` -> `ost.OSS.ost_io`
fn service_of(name: &str) -> String {
    name.rsplit_once('.').map_or(name, |(service, _)| service).to_string()
}

async fn nrs(s: Arc<Sources>) -> Response {
    let servers = match map(&s).await {
        Ok(map) => map.servers(None),
        Err(r) => return r,
    };
    let mut services = Vec::new();
    let mut classes = Vec::new();
    for server in servers {
        let rules: HashMap<String, String> =
            get_param(&s, &server, "*.*.*.nrs_tbf_rule").await.into_iter().map(|(n, v)| (service_of(&n), v)).collect();
        for (name, listing) in get_param(&s, &server, "*.*.*.nrs_policies").await {
            let service = service_of(&name);
            let policy = crate::reservations::policy_in_force(&listing);
            let rules = rules.get(&service).cloned().unwrap_or_default();
            services.push(json!({ "server": server, "service": service, "policy": policy, "rules": rules.trim() }));
        }
        for (name, listing) in get_param(&s, &server, "*.*.*.nrs_tbf_classes").await {
            let service = service_of(&name);
            let mut class: Option<serde_json::Map<String, Value>> = None;
            let mut flush = |c: Option<serde_json::Map<String, Value>>| {
                if let Some(mut c) = c {
                    c.insert("server".into(), server.clone().into());
                    c.insert("service".into(), service.clone().into());
                    classes.push(Value::Object(c));
                }
            };
            for line in listing.lines() {
                if let Some(k) = line.strip_prefix("- class: ") {
                    flush(class.take());
                    class = Some([("class".to_string(), Value::from(k))].into_iter().collect());
                } else if let (Some(c), Some((k, v))) = (class.as_mut(), line.trim().split_once(": ")) {
                    let value = v.parse::<u64>().map_or_else(|_| Value::from(v), Value::from);
                    c.insert(k.to_string(), value);
                }
            }
            flush(class.take());
        }
    }
    Json(json!({ "services": services, "classes": classes })).into_response()
}

/// The plan of bandwidth reservations, each with its state and per-OST share now.
async fn reservations(s: Arc<Sources>) -> Response {
    let map = match map(&s).await {
        Ok(map) => map,
        Err(r) => return r,
    };
    let now = weft_proto::msg::qos::now_ms();
    let osts: Vec<Value> = map
        .osts()
        .map(|t| {
            let c = map.qos.capacity.get(&t.index).copied().unwrap_or_default();
            json!({ "ost": t.index, "target": t.name(&map.fsname), "bytes": c.bytes, "requests": c.requests })
        })
        .collect();
    let reservations: Vec<Value> = map
        .qos
        .reservations
        .iter()
        .map(|r| {
            let share = r.per_ost();
            json!({
                "id": r.id, "job": r.job, "osts": r.osts, "start_ms": r.start_ms, "end_ms": r.end_ms(),
                "state": r.state(now).name(), "unit": share.unit(), "per_ost": share.value(),
                "throughput": r.throughput.to_string(),
            })
        })
        .collect();
    Json(json!({ "now_ms": now, "osts": osts, "reservations": reservations })).into_response()
}

async fn warnings(s: Arc<Sources>) -> Response {
    let policies = match map(&s).await {
        Ok(map) => map.decay,
        Err(r) => return r,
    };
    let op = mgs::DecayWarnings { uid: None, gids: Vec::new(), all: true };
    match s.mgs.op(RequestHeader::default(), op, MGS_WAIT).await {
        Ok(a) => Json(json!({ "policies": policies, "actions": a.0 })).into_response(),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.message),
    }
}

async fn space(s: Arc<Sources>) -> Response {
    let map = match map(&s).await {
        Ok(map) => map,
        Err(r) => return r,
    };
    let mut targets = Vec::new();
    for t in &map.targets {
        let peer = s.peers.get(&t.address);
        let info = match t.kind {
            TargetKind::Ost => {
                peer.op(RequestHeader::default(), t.index, ost::Statfs {}, Bytes::new(), SERVER_WAIT).await
            }
            TargetKind::Mdt => {
                peer.op(RequestHeader::default(), t.index, mdt::Statfs {}, Bytes::new(), SERVER_WAIT).await
            }
        };
        let Ok((info, _)) = info else { continue };
        let bytes = |blocks: u64| blocks.saturating_mul(u64::from(info.bsize));
        targets.push(json!({
            "target": t.name(&map.fsname),
            "total_bytes": bytes(info.blocks),
            "free_bytes": bytes(info.bfree),
            "avail_bytes": bytes(info.bavail),
            "total_inodes": info.files,
            "free_inodes": info.ffree,
        }));
    }
    Json(json!({ "targets": targets })).into_response()
}
