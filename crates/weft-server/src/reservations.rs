//! Bandwidth reservations at work on an OSS: the plan is in the cluster map (weft-mgs's
//! `planner`), and every process serving OSTs turns the reservations active on its OSTs into
//! TBF rules of its `ost.OSS.ost_io` service, twice a second and at each change of the map:
//!
//! * one rule per job, `qj<hash>` with `jobid={JOB}`, at the sum of what the job's active
//!   reservations give on this process's OSTs (bytes/s as `bps`, requests/s as `rate`), with
//!   `realtime=1` so that a job held back while the server was busy catches up;
//! * `qrest` behind them, matching every other request, at what the capacities of this
//!   process's OSTs leave after the reservations (in each unit whose capacity is known for
//!   all of them): the unreserved share what is left. TBF counts per class (per job), so
//!   each unreserved job is held to it, not their sum.
//!
//! The job rules go in front of `qrest`, which goes in front of the administrator's rules, so
//! a reserved job is never caught by another rule first. When no reservation is active here
//! the rules go, and a service this engine switched from FIFO to `tbf jobid` goes back to
//! FIFO: unused, reservations cost the request path nothing. Starting and ending needs no
//! message from the management service: each OSS reads the plan's times on its own clock.

use crate::params::Params;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use weft_proto::msg::param::{ParamRequest, SetParam};
use weft_proto::msg::qos::Throughput;
use weft_proto::msg::{ClusterMap, Identity, RequestHeader};
use weft_rpc::map::MapState;

/// How often the engine looks at the plan when the map does not change.
const TICK: Duration = Duration::from_millis(500);
/// The service reservations hold.
const SERVICE: &str = "ost.OSS.ost_io";
/// The rule of the unreserved requests.
const REST_RULE: &str = "qrest";
/// Stands for "no limit" in a unit nothing is reserved in (the largest rate TBF takes).
const UNLIMITED_RATE: u64 = 999_999;

/// A rule's limits: requests/s and bytes/s, None where nothing limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Rates {
    pub rate: Option<u64>,
    pub bps: Option<u64>,
}

impl Rates {
    fn add(&mut self, t: Throughput) {
        match t {
            Throughput::Bytes(v) => self.bps = Some(self.bps.unwrap_or(0) + v),
            Throughput::Requests(v) => self.rate = Some(self.rate.unwrap_or(0) + v),
        }
    }

    /// `rate=N bps=N`: a unit not limited gets TBF's largest rate, or no byte limit
    /// (`bps=0` clears it in a `change`).
    fn options(&self) -> String {
        format!("rate={} bps={}", self.rate.unwrap_or(UNLIMITED_RATE).max(1), self.bps.unwrap_or(0))
    }
}

/// What this process's rules should be at a time: by job, and the rest (None: no
/// reservation is active here, so no rule at all).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Wanted {
    pub jobs: BTreeMap<String, Rates>,
    pub rest: Option<Rates>,
}

/// The rules the plan in `map` asks of the process at `address` at `now_ms`.
pub(crate) fn wanted(map: &ClusterMap, address: &str, now_ms: u64) -> Wanted {
    let served: Vec<u32> = map.osts().filter(|t| t.address == address).map(|t| t.index).collect();
    let mut out = Wanted::default();
    let mut reserved = Rates::default();
    for r in map.qos.active(now_ms) {
        let here = r.osts.iter().filter(|o| served.contains(o)).count() as u64;
        if here == 0 {
            continue;
        }
        let give = r.per_ost().with(r.per_ost().value() * here);
        out.jobs.entry(r.job.clone()).or_default().add(give);
        reserved.add(give);
    }
    if out.jobs.is_empty() {
        return out;
    }
    // What the OSTs here can give, in each unit every one of them has a capacity in.
    let total = |pick: fn(&weft_proto::msg::qos::OstCapacity) -> Option<u64>| -> Option<u64> {
        served.iter().map(|o| map.qos.capacity.get(o).and_then(pick)).sum()
    };
    let left = |cap: Option<u64>, used: Option<u64>| cap.map(|c| c.saturating_sub(used.unwrap_or(0)).max(1));
    out.rest =
        Some(Rates { rate: left(total(|c| c.requests), reserved.rate), bps: left(total(|c| c.bytes), reserved.bps) });
    out
}

/// The rule name of `job`: `qj` and 12 hex digits of its FNV-1a hash (TBF names are at most
/// 15 bytes; a job id may be 64).
pub(crate) fn rule_name(job: &str) -> String {
    let hash = job.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("qj{:012x}", hash & 0xffff_ffff_ffff)
}

/// One rule the engine keeps: its expression, limits and the options it starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    expr: String,
    rates: Rates,
    start_options: String,
}

/// The engine's memory: the rules it set, and whether it switched the service to TBF.
#[derive(Default)]
struct Engine {
    rules: BTreeMap<String, Spec>,
    switched: bool,
    /// The last failure logged, so that a lasting one is logged once.
    failed: Option<String>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The next time after `now_ms` at which a reservation on the OSTs of `address` starts or
/// ends: the engine wakes then, so rules change on time, not up to a tick late.
pub(crate) fn next_change(map: &ClusterMap, address: &str, now_ms: u64) -> Option<u64> {
    let served: Vec<u32> = map.osts().filter(|t| t.address == address).map(|t| t.index).collect();
    map.qos
        .reservations
        .iter()
        .filter(|r| r.osts.iter().any(|o| served.contains(o)))
        .flat_map(|r| [r.start_ms, r.end_ms()])
        .filter(|&t| t > now_ms)
        .min()
}

/// Runs the engine until the map's sender is gone (the process stops).
pub(crate) async fn run(params: Arc<Params>, mut map: watch::Receiver<Arc<MapState>>, address: String) {
    let mut engine = Engine::default();
    loop {
        let state = map.borrow_and_update().clone();
        let now = now_ms();
        let wanted = wanted(&state.map, &address, now);
        if !(wanted.jobs.is_empty() && engine.rules.is_empty() && !engine.switched) {
            match engine.apply(&params, &wanted) {
                Err(e) if engine.failed.as_deref() != Some(e.as_str()) => {
                    tracing::warn!("bandwidth reservations on {address}: {e}");
                    engine.failed = Some(e);
                }
                Err(_) => {}
                Ok(()) => engine.failed = None,
            }
        }
        // The next start or end here, or a tick (a failed rule is tried again, a clock
        // that jumped is followed); with no reservation here and nothing set, only a change
        // of the map wakes the engine: unused, it costs nothing.
        let next = next_change(&state.map, &address, now);
        let idle = next.is_none() && engine.rules.is_empty() && !engine.switched && engine.failed.is_none();
        let wake = next.map_or(TICK, |t| Duration::from_millis(t - now).min(TICK));
        tokio::select! {
            _ = tokio::time::sleep(wake), if !idle => {}
            changed = map.changed() => if changed.is_err() { return },
        }
    }
}

fn set(params: &Params, name: &str, value: &str) -> Result<(), String> {
    let header = RequestHeader { identity: Identity::root(), ..RequestHeader::default() };
    let op = ParamRequest::SetParam(SetParam { pattern: format!("{SERVICE}.{name}"), value: value.to_string() });
    params.handle(&header, op).map(drop).map_err(|e| e.message)
}

impl Engine {
    fn apply(&mut self, params: &Params, wanted: &Wanted) -> Result<(), String> {
        // The rest first: the jobs' rules are ranked in front of it.
        let mut rules: Vec<(String, Spec)> = Vec::new();
        if let Some(rest) = wanted.rest {
            rules.push((REST_RULE.into(), Spec { expr: "*".into(), rates: rest, start_options: String::new() }));
        }
        for (job, rates) in &wanted.jobs {
            let start_options = format!("realtime=1 rank={REST_RULE}");
            rules.push((rule_name(job), Spec { expr: format!("jobid={{{job}}}"), rates: *rates, start_options }));
        }
        // Rules to stop: the jobs' first, then the rest's (the jobs' are ranked by it).
        let mut gone: Vec<String> =
            self.rules.keys().filter(|n| !rules.iter().any(|(name, _)| name == *n)).cloned().collect();
        gone.sort_by_key(|n| n == REST_RULE);
        for name in gone {
            match set(params, "nrs_tbf_rule", &format!("stop {name}")) {
                Err(e) if !e.contains("no TBF rule") && !e.contains("tbf first") => {
                    return Err(format!("stop {name}: {e}"))
                }
                _ => {
                    self.rules.remove(&name);
                }
            }
        }
        if rules.is_empty() {
            if self.switched {
                set(params, "nrs_policies", "fifo")?;
                self.switched = false;
                tracing::info!("bandwidth reservations: none active here, {SERVICE} back to FIFO");
            }
            return Ok(());
        }
        for (name, spec) in rules {
            if self.rules.get(&name) == Some(&spec) {
                continue;
            }
            // A rule of that name there already (this engine's, or left by a restart of the
            // policy) takes the new limits; otherwise it is started.
            if set(params, "nrs_tbf_rule", &format!("change {name} {}", spec.rates.options())).is_err() {
                let bps = spec.rates.bps.map(|b| format!(" bps={b}")).unwrap_or_default();
                let rate = spec.rates.rate.unwrap_or(UNLIMITED_RATE).max(1);
                let start = format!("start {name} {} rate={rate}{bps} {}", spec.expr, spec.start_options);
                let mut started = set(params, "nrs_tbf_rule", &start);
                if started.as_ref().is_err_and(|e| e.contains("tbf first")) {
                    set(params, "nrs_policies", "tbf jobid")?;
                    self.switched = true;
                    tracing::info!("bandwidth reservations: {SERVICE} ran FIFO, switched to tbf jobid");
                    started = set(params, "nrs_tbf_rule", &start);
                }
                started.map_err(|e| format!("{start}: {e}"))?;
            }
            self.rules.insert(name, spec);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::qos::{OstCapacity, Reservation};
    use weft_proto::msg::{TargetInfo, TargetKind};

    fn reservation(id: &str, job: &str, t: Throughput, osts: &[u32], start: u64, end: u64) -> Reservation {
        Reservation {
            id: id.into(),
            job: job.into(),
            throughput: t,
            osts: osts.to_vec(),
            submitted_ms: 0,
            earliest_ms: 0,
            start_ms: start,
            duration_ms: end - start,
            ended_ms: None,
            uid: 0,
        }
    }

    #[test]
    fn the_rules_follow_the_reservations_active_on_this_servers_osts() {
        let mut map = ClusterMap { version: 1, fsname: "fs".into(), ..Default::default() };
        for (i, at) in [(0, "a:1"), (1, "a:1"), (2, "b:1")] {
            map.targets.push(TargetInfo::new(TargetKind::Ost, i, at));
        }
        for i in 0..3 {
            map.qos.capacity.insert(i, OstCapacity { bytes: Some(1000), requests: None });
        }
        map.qos.reservations.push(reservation("r1", "job1", Throughput::Bytes(300), &[0, 1, 2], 100, 200));
        map.qos.reservations.push(reservation("r2", "job1", Throughput::Bytes(50), &[0], 150, 300));
        map.qos.reservations.push(reservation("r3", "job3", Throughput::Requests(40), &[1, 2], 100, 300));
        assert_eq!(wanted(&map, "a:1", 50), Wanted::default(), "nothing active yet");
        let w = wanted(&map, "a:1", 160);
        // r1 gives 100 on each of its three OSTs, two of them here; r2 50 on OST 0.
        assert_eq!(w.jobs["job1"], Rates { rate: None, bps: Some(250) });
        assert_eq!(w.jobs["job3"], Rates { rate: Some(20), bps: None });
        // 2000 of capacity here, 250 reserved; no request capacity known: no request limit.
        assert_eq!(w.rest, Some(Rates { rate: None, bps: Some(1750) }));
        let b = wanted(&map, "b:1", 250);
        assert!(!b.jobs.contains_key("job1"), "r1 is over, r2 is not on b");
        assert_eq!(b.jobs["job3"], Rates { rate: Some(20), bps: None });
        assert_eq!(wanted(&map, "a:1", 300), Wanted::default(), "all over");
        // The engine wakes at each start and end on its OSTs.
        assert_eq!(next_change(&map, "a:1", 0), Some(100));
        assert_eq!(next_change(&map, "a:1", 160), Some(200));
        assert_eq!(next_change(&map, "b:1", 160), Some(200), "r1's end (r2 is not on b)");
        assert_eq!(next_change(&map, "b:1", 200), Some(300), "r3's end");
        assert_eq!(next_change(&map, "a:1", 300), None);
    }

    #[test]
    fn rule_names_fit_tbf_and_the_commands_parse() {
        let name = rule_name("a-very-long-slurm-job-id-that-is-longer-than-fifteen-bytes");
        assert_eq!(name.len(), 14);
        assert_ne!(rule_name("1"), rule_name("2"));
        let ty = weft_rpc::schedule::tbf::rule::TbfType::parse("jobid").unwrap();
        for text in [
            format!("start {REST_RULE} * {}", Rates { rate: None, bps: Some(5) }.options()),
            format!("start {name} jobid={{123}} rate=999999 bps=7 realtime=1 rank={REST_RULE}"),
            format!("change {name} rate=999999 bps=0"),
        ] {
            weft_rpc::schedule::tbf::rule::Command::parse(&text, &ty).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }
}
