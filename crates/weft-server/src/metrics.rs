//! The metrics endpoint of a server process: `GET /metrics` on the config's `metrics_listen`
//! address answers in the OpenMetrics text format to whoever asks for it (Prometheus does, in
//! its Accept header), else in Prometheus's text format 0.0.4 (curl, `promtool check
//! metrics`), as Prometheus's own Go client does. The figures are gathered on each scrape
//! from what the process keeps anyway, so metrics cost the request path nothing:
//!
//! | metric | labels | from |
//! |---|---|---|
//! | `weft_requests_total`, `weft_request_errors_total`, `weft_request_duration_seconds` (histogram) | `service`, `target`, `opcode` | the pipeline's per-opcode statistics (weft-rpc's `Stats`) |
//! | `weft_read_bytes_total`, `weft_write_bytes_total` | `target` | the same |
//! | `weft_ost_read_bytes_total`, `weft_ost_write_bytes_total`, `weft_job_ops_total` | `target`, `job` | job statistics |
//! | `weft_user_read_bytes_total`, `weft_user_write_bytes_total`, `weft_user_ops_total` | `target`, `uid` | the same, kept by uid |
//! | `weft_nrs_queued`, `weft_nrs_running`, `weft_nrs_policy` | `service` (`policy`) | the schedulers |
//! | `weft_nrs_class_started_total`, `weft_nrs_class_held_total`, `weft_nrs_class_wait_seconds_total` | `service`, `class`, `rule` | TBF's classes |
//! | `weft_locks` | `target` | the lock namespaces (granted and waiting) |
//! | `weft_clients`, `weft_evictions_total` | | the exports |
//! | `weft_auth_failures_total` | `reason` (`no_key`, `wrong_key`, `handshake`, `frame`) | the exports' counts of what the shared key refused |
//! | `weft_target_space_bytes`, `weft_target_inodes` | `target`, `state` | statfs of each target |
//!
//! A target is named as Lustre does (`weft-OST0001`). Job and user series end when the job
//! statistics forget an idle job (`job_cleanup_interval`), as Lustre's job_stats do.

use crate::sources::Sources;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::Arc;
use weft_proto::lock::LockTarget;
use weft_proto::msg::{
    mdt, ost, target_name, MdtReply, MdtRequest, OstReply, OstRequest, RequestHeader, Service, StatfsInfo, TargetKind,
};
use weft_rpc::jobstats::By;
use weft_rpc::stats::{OpKey, OpStats, LATENCY_BUCKETS};
use weft_rpc::Run;

/// An MDT's changelog: its name, the records kept, each reader's id and the records it holds.
type ChangelogFigures = (String, u64, Vec<(String, u64)>);
/// An MDT's HSM coordinator: its name, its actions by (action, status), copytools alive.
type HsmFigures = (String, BTreeMap<(&'static str, &'static str), u64>, usize);

/// One scrape's figures, gathered (statfs is asynchronous) before they are encoded.
#[derive(Debug)]
struct Snapshot {
    fsname: String,
    ops: Vec<(OpKey, OpStats)>,
    /// (target, job or uid, requests, bytes read, bytes written)
    jobs: Vec<(String, String, u64, u64, u64)>,
    users: Vec<(String, String, u64, u64, u64)>,
    nrs: Vec<(Service, String, usize, usize)>,
    classes: Vec<(Service, String, String, weft_rpc::schedule::tbf::core::ClassStats)>,
    locks: Vec<(String, usize)>,
    changelog: Option<ChangelogFigures>,
    hsm: Option<HsmFigures>,
    clients: usize,
    evictions: u64,
    auth_failures: [(&'static str, u64); 4],
    space: Vec<(String, StatfsInfo)>,
}

impl Sources {
    fn targets(&self) -> Vec<(TargetKind, u32)> {
        let mut out: Vec<(TargetKind, u32)> = self.router.mdt_index.map(|i| (TargetKind::Mdt, i)).into_iter().collect();
        if let Some(oss) = &self.router.oss {
            out.extend(oss.ost_indices().into_iter().map(|i| (TargetKind::Ost, i)));
        }
        out
    }

    fn name(&self, target: (TargetKind, u32)) -> String {
        target_name(&self.fsname, target.0, target.1)
    }

    /// The changelog of this process's MDT, if it runs one and the changelog can be read.
    fn changelog(&self) -> Option<ChangelogFigures> {
        let (mds, index) = (self.router.mds.get()?, self.router.mdt_index?);
        let users = mds.changelog_users().ok()?;
        let held = users.users.iter().map(|u| (u.id.clone(), users.current_index.saturating_sub(u.cleared))).collect();
        Some((self.name((TargetKind::Mdt, index)), users.records, held))
    }

    /// The HSM coordinator of this process's MDT, if it runs one.
    fn hsm(&self) -> Option<HsmFigures> {
        let (mds, index) = (self.router.mds.get()?, self.router.mdt_index?);
        let mut counts = BTreeMap::new();
        for a in mds.hsm_actions().ok()? {
            *counts.entry((a.action.name(), a.status.name())).or_insert(0) += 1;
        }
        Some((self.name((TargetKind::Mdt, index)), counts, mds.copytools_alive()))
    }

    async fn snapshot(&self) -> Snapshot {
        let targets = self.targets();
        let per_key = |by: By| {
            let mut out = Vec::new();
            for &t in &targets {
                for (key, ops, read, write) in self.jobs.usage(by, t, std::time::Instant::now()) {
                    out.push((self.name(t), key, ops, read, write));
                }
            }
            out
        };
        let mut nrs = Vec::new();
        let mut classes = Vec::new();
        for &service in &self.services {
            let policy = self.schedulers.of(service).policy();
            let (queued, running) = if let Some(tbf) = self.schedulers.tbf(service) {
                let ty = tbf.ty();
                for c in tbf.classes() {
                    classes.push((service, c.key.label(&ty), c.rule.clone(), c.stats));
                }
                (tbf.queued(), tbf.running())
            } else if let Some(rr) = self.schedulers.rr(service) {
                (rr.queued(), rr.running())
            } else {
                (0, 0)
            };
            nrs.push((service, policy.name().to_string(), queued, running));
        }
        let mut locks = Vec::new();
        let mut space = Vec::new();
        for &t in &targets {
            let lock_target = match t.0 {
                TargetKind::Mdt => LockTarget::Mdt(t.1),
                TargetKind::Ost => LockTarget::Ost(t.1),
            };
            if let Some(ns) = self.router.locks.namespace(lock_target) {
                locks.push((self.name(t), ns.lock_count()));
            }
            if let Some(info) = self.statfs(t).await {
                space.push((self.name(t), info));
            }
        }
        Snapshot {
            fsname: self.fsname.clone(),
            changelog: self.changelog(),
            hsm: self.hsm(),
            ops: self.stats.by_target().into_iter().collect(),
            jobs: per_key(By::Job),
            users: per_key(By::User),
            nrs,
            classes,
            locks,
            clients: self.exports.clients(),
            evictions: self.exports.evictions(),
            auth_failures: self.exports.auth().snapshot(),
            space,
        }
    }

    /// The target's statfs, as a client would get it; None if it failed (logged).
    async fn statfs(&self, t: (TargetKind, u32)) -> Option<StatfsInfo> {
        let answer = match t.0 {
            TargetKind::Ost => {
                let oss = self.router.oss.as_ref()?;
                match oss.handle(t.1, OstRequest::Statfs(ost::Statfs {}), bytes::Bytes::new(), Run::Offload).await.0 {
                    Ok(OstReply::Statfs(info)) => Ok(info),
                    Ok(_) => return None,
                    Err(e) => Err(e),
                }
            }
            TargetKind::Mdt => {
                let mds = self.router.mds.get()?;
                match mds.handle(&RequestHeader::default(), MdtRequest::Statfs(mdt::Statfs {}), Run::Offload).await {
                    Ok(MdtReply::Statfs(info)) => Ok(info),
                    Ok(_) => return None,
                    Err(e) => Err(e),
                }
            }
        };
        answer.map_err(|e| tracing::debug!("metrics: statfs of {}: {e}", self.name(t))).ok()
    }
}

type Labels = Vec<(&'static str, String)>;

/// Writes one metric family of `rows`.
fn family<V: Copy>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    ty: MetricType,
    rows: impl IntoIterator<Item = (Labels, V)>,
    mut write: impl FnMut(&mut prometheus_client::encoding::MetricEncoder<'_>, V) -> std::fmt::Result,
) -> std::fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, ty)?;
    for (labels, v) in rows {
        if labels.is_empty() {
            // Through encode_family an empty set is written `name{} v`, which some parsers
            // refuse; the metric's own encoder writes `name v`.
            write(&mut metric, v)?;
        } else {
            write(&mut metric.encode_family(&labels)?, v)?;
        }
    }
    Ok(())
}

fn counter(m: &mut prometheus_client::encoding::MetricEncoder<'_>, v: u64) -> std::fmt::Result {
    m.encode_counter::<NoLabelSet, u64, u64>(&v, None)
}

fn counter_f(m: &mut prometheus_client::encoding::MetricEncoder<'_>, v: f64) -> std::fmt::Result {
    m.encode_counter::<NoLabelSet, f64, f64>(&v, None)
}

fn gauge(m: &mut prometheus_client::encoding::MetricEncoder<'_>, v: i64) -> std::fmt::Result {
    m.encode_gauge(&v)
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> std::fmt::Result {
        use MetricType::{Counter, Gauge};
        let op_labels = |key: &OpKey, fs: &str| -> Labels {
            vec![
                ("service", key.1.map_or("none", Service::name).to_string()),
                ("target", key.0.map_or_else(String::new, |t| target_name(fs, t.0, t.1))),
                ("opcode", key.2.to_string()),
            ]
        };
        family(
            &mut e,
            "weft_requests",
            "Requests answered",
            Counter,
            self.ops.iter().map(|(k, s)| (op_labels(k, &self.fsname), s.samples)),
            counter,
        )?;
        family(
            &mut e,
            "weft_request_errors",
            "Requests answered with an error",
            Counter,
            self.ops.iter().map(|(k, s)| (op_labels(k, &self.fsname), s.errors)),
            counter,
        )?;
        {
            let mut metric = e.encode_descriptor(
                "weft_request_duration_seconds",
                "Time from a request's arrival to its answer",
                None,
                MetricType::Histogram,
            )?;
            for (k, s) in &self.ops {
                let labels = op_labels(k, &self.fsname);
                let mut m = metric.encode_family(&labels)?;
                // Bucket i counts requests under 2^i microseconds, the last all slower ones
                // (+Inf); the encoder makes the counts cumulative, as Prometheus's are.
                let buckets: Vec<(f64, u64)> = s
                    .latency_log2_us
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (if i + 1 == LATENCY_BUCKETS { f64::INFINITY } else { (1u64 << i) as f64 / 1e6 }, *n))
                    .collect();
                m.encode_histogram::<NoLabelSet>(s.sum_us as f64 / 1e6, s.samples, &buckets, None)?;
            }
        }
        let by_target = |pick: fn(&OpStats) -> u64| {
            let mut sums: std::collections::BTreeMap<String, u64> = Default::default();
            for (k, s) in &self.ops {
                if let Some(t) = k.0 {
                    *sums.entry(target_name(&self.fsname, t.0, t.1)).or_default() += pick(s);
                }
            }
            sums.into_iter().map(|(t, v)| (vec![("target", t)], v)).collect::<Vec<_>>()
        };
        family(&mut e, "weft_read_bytes", "Bytes read from the target", Counter, by_target(|s| s.bytes_out), counter)?;
        family(&mut e, "weft_write_bytes", "Bytes written to the target", Counter, by_target(|s| s.bytes_in), counter)?;

        type Row = (String, String, u64, u64, u64);
        let keyed = |rows: &[Row], label: &'static str, pick: fn(&Row) -> u64, osts_only: bool| {
            rows.iter()
                .filter(|r| !osts_only || r.0.contains("-OST"))
                .map(|r| (vec![("target", r.0.clone()), (label, r.1.clone())], pick(r)))
                .collect::<Vec<_>>()
        };
        type Pick = fn(&Row) -> u64;
        let (ops, read, write): (Pick, Pick, Pick) = (|r| r.2, |r| r.3, |r| r.4);
        let jobs = &self.jobs;
        family(
            &mut e,
            "weft_ost_read_bytes",
            "Bytes a job read from the OST",
            Counter,
            keyed(jobs, "job", read, true),
            counter,
        )?;
        family(
            &mut e,
            "weft_ost_write_bytes",
            "Bytes a job wrote to the OST",
            Counter,
            keyed(jobs, "job", write, true),
            counter,
        )?;
        family(
            &mut e,
            "weft_job_ops",
            "Requests of a job on the target",
            Counter,
            keyed(jobs, "job", ops, false),
            counter,
        )?;
        let users = &self.users;
        family(
            &mut e,
            "weft_user_read_bytes",
            "Bytes a user read from the OST",
            Counter,
            keyed(users, "uid", read, true),
            counter,
        )?;
        family(
            &mut e,
            "weft_user_write_bytes",
            "Bytes a user wrote to the OST",
            Counter,
            keyed(users, "uid", write, true),
            counter,
        )?;
        family(
            &mut e,
            "weft_user_ops",
            "Requests of a user on the target",
            Counter,
            keyed(users, "uid", ops, false),
            counter,
        )?;

        let svc = |s: &Service| vec![("service", s.name().to_string())];
        family(
            &mut e,
            "weft_nrs_queued",
            "Requests the service's policy holds back now",
            Gauge,
            self.nrs.iter().map(|(s, _, q, _)| (svc(s), *q as i64)),
            gauge,
        )?;
        family(
            &mut e,
            "weft_nrs_running",
            "Requests the service's policy let run and not finished",
            Gauge,
            self.nrs.iter().map(|(s, _, _, r)| (svc(s), *r as i64)),
            gauge,
        )?;
        family(
            &mut e,
            "weft_nrs_policy",
            "The service's NRS policy (1 for the one in force)",
            Gauge,
            self.nrs.iter().map(|(s, p, _, _)| {
                let mut l = svc(s);
                l.push(("policy", p.clone()));
                (l, 1i64)
            }),
            gauge,
        )?;
        let class = |(s, c, r, _): &(Service, String, String, _)| {
            vec![("service", s.name().to_string()), ("class", c.clone()), ("rule", r.clone())]
        };
        family(
            &mut e,
            "weft_nrs_class_started",
            "Requests of a TBF class started",
            Counter,
            self.classes.iter().map(|x| (class(x), x.3.started)),
            counter,
        )?;
        family(
            &mut e,
            "weft_nrs_class_held",
            "Requests of a TBF class that waited for its rate: how often a limit held it back",
            Counter,
            self.classes.iter().map(|x| (class(x), x.3.held)),
            counter,
        )?;
        family(
            &mut e,
            "weft_nrs_class_wait_seconds",
            "Time the held requests of a TBF class waited",
            Counter,
            self.classes.iter().map(|x| (class(x), x.3.waited_ns as f64 / 1e9)),
            counter_f,
        )?;
        family(
            &mut e,
            "weft_locks",
            "Locks granted and waiting in the target's namespace",
            Gauge,
            self.locks.iter().map(|(t, n)| (vec![("target", t.clone())], *n as i64)),
            gauge,
        )?;
        family(&mut e, "weft_clients", "Clients connected", Gauge, [(Labels::new(), self.clients as i64)], gauge)?;
        family(&mut e, "weft_evictions", "Clients evicted", Counter, [(Labels::new(), self.evictions)], counter)?;
        family(
            &mut e,
            "weft_auth_failures",
            "Connections and frames refused for want of the shared key's proof",
            Counter,
            self.auth_failures.iter().map(|(reason, n)| (vec![("reason", reason.to_string())], *n)),
            counter,
        )?;
        let space = self.space.iter().flat_map(|(t, s)| {
            let bytes = |blocks: u64| (blocks.saturating_mul(u64::from(s.bsize))) as i64;
            [("total", bytes(s.blocks)), ("free", bytes(s.bfree)), ("avail", bytes(s.bavail))]
                .map(|(state, v)| (vec![("target", t.clone()), ("state", state.to_string())], v))
        });
        family(&mut e, "weft_target_space_bytes", "Space of the target's file system", Gauge, space, gauge)?;
        let inodes = self.space.iter().flat_map(|(t, s)| {
            [("total", s.files as i64), ("free", s.ffree as i64)]
                .map(|(state, v)| (vec![("target", t.clone()), ("state", state.to_string())], v))
        });
        family(&mut e, "weft_target_inodes", "Inodes of the target", Gauge, inodes, gauge)?;
        if let Some((target, records, readers)) = &self.changelog {
            let kept = [(vec![("target", target.clone())], *records as i64)];
            family(&mut e, "weft_changelog_records", "Changelog records kept on the MDT", Gauge, kept, gauge)?;
            let held =
                readers.iter().map(|(id, n)| (vec![("target", target.clone()), ("reader", id.clone())], *n as i64));
            family(
                &mut e,
                "weft_changelog_reader_pending_records",
                "Changelog records written since the reader last cleared",
                Gauge,
                held,
                gauge,
            )?;
        }
        if let Some((target, counts, copytools)) = &self.hsm {
            let actions = counts.iter().map(|((action, status), n)| {
                let labels =
                    vec![("target", target.clone()), ("action", action.to_string()), ("status", status.to_string())];
                (labels, *n as i64)
            });
            family(
                &mut e,
                "weft_hsm_actions",
                "HSM actions the coordinator holds, by action and status",
                Gauge,
                actions,
                gauge,
            )?;
            let alive = [(vec![("target", target.clone())], *copytools as i64)];
            family(&mut e, "weft_hsm_copytools", "Copytools heard from lately", Gauge, alive, gauge)?;
        }
        Ok(())
    }
}

/// Serves `GET /metrics` on `listener` until the process ends, and the dashboard (`/`) and
/// the JSON it draws from (`/api/...`), which ask the management service (its leader, when
/// replicated).
pub(crate) async fn serve(listener: tokio::net::TcpListener, sources: Arc<Sources>) {
    use axum::routing::get;
    let s = sources.clone();
    let mut app = axum::Router::new().route(
        "/metrics",
        get(move |headers: axum::http::HeaderMap| {
            let s = s.clone();
            async move { render(&s, &headers).await }
        }),
    );
    app = app.merge(crate::dashboard::routes(sources.clone()));
    if let Err(e) = axum::serve(listener, app).await {
        tracing::warn!("the metrics endpoint stopped: {e}");
    }
}

/// The OpenMetrics text of one scrape.
pub(crate) async fn text(sources: &Sources) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(sources.snapshot().await));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

/// The scrape in the format the client asked for: OpenMetrics if its Accept header names it,
/// else the text format.
async fn render(sources: &Sources, headers: &axum::http::HeaderMap) -> axum::response::Response {
    let openmetrics = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("application/openmetrics-text")));
    match text(sources).await {
        Ok(text) if openmetrics => {
            ([(CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
        }
        Ok(text) => ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text_format(&text)).into_response(),
        Err(_) => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "the metrics could not be encoded\n").into_response(),
    }
}

/// Prometheus's text format 0.0.4 of our OpenMetrics text. For the types written here the two
/// differ only in that a counter family is named with its `_total` in HELP and TYPE (its
/// samples are `_total` in both), and that the text format has no `# EOF` and no `# UNIT`.
fn text_format(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        let comment = ["# HELP ", "# TYPE "].into_iter().find_map(|p| Some((p, line.strip_prefix(p)?)));
        match comment {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let total = if counters.contains(name) { "_total" } else { "" };
                out.push_str(&format!("{prefix}{name}{total} {tail}\n"));
            }
            None if line == "# EOF" || line.starts_with("# UNIT ") => {}
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::text_format;

    #[test]
    fn the_text_format_names_counters_with_their_total_and_has_no_eof() {
        let om = "# HELP weft_requests Requests answered.\n# TYPE weft_requests counter\n\
weft_requests_total{opcode=\"a\"} 3\n# HELP weft_clients Clients connected.\n# TYPE weft_clients gauge\n\
weft_clients 2\n# EOF\n";
        let want = "# HELP weft_requests_total Requests answered.\n# TYPE weft_requests_total counter\n\
weft_requests_total{opcode=\"a\"} 3\n# HELP weft_clients Clients connected.\n# TYPE weft_clients gauge\n\
weft_clients 2\n";
        assert_eq!(text_format(om), want);
    }
}
