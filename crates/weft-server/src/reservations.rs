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
use weft_proto::msg::param::{GetParam, ParamReply, ParamRequest, SetParam};
use weft_proto::msg::qos::{now_ms, Throughput};
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
/// The least the rest is held to when reservations take a whole capacity: 1 MiB/s, one
/// request a second (a lower rate would put one request's class long in debt).
const REST_BPS_MIN: u64 = 1 << 20;
const REST_RATE_MIN: u64 = 1;
/// The TBF type reservations need: a class per job, so a job's rule holds the whole job (a
/// type with more fields, `tbf` or `tbf nid+jobid`, would hold each node or user apart).
const POLICY: &str = "tbf jobid";

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

    fn rate(&self) -> u64 {
        self.rate.unwrap_or(UNLIMITED_RATE).clamp(1, UNLIMITED_RATE)
    }

    /// `rate=N bps=N` for a `change`: a unit not limited gets TBF's largest rate, or no
    /// byte limit (`bps=0` clears it).
    fn options(&self) -> String {
        format!("rate={} bps={}", self.rate(), self.bps.unwrap_or(0))
    }

    /// The same for a `start`, which takes no `bps=0`.
    fn start_options(&self) -> String {
        let bps = self.bps.map(|b| format!(" bps={b}")).unwrap_or_default();
        format!("rate={}{bps}", self.rate())
    }
}

/// What this process's rules should be at a time: by job, and the rest (None: no
/// reservation is active here, so no rule at all).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Wanted {
    pub jobs: BTreeMap<String, Rates>,
    pub rest: Option<Rates>,
}

/// The OSTs the map has the process at `address` serve (a failover OST: where it is now).
fn served(map: &ClusterMap, address: &str) -> Vec<u32> {
    map.osts().filter(|t| t.address == address).map(|t| t.index).collect()
}

/// The rules the plan in `map` asks of the process at `address` at `now_ms`.
pub(crate) fn wanted(map: &ClusterMap, address: &str, now_ms: u64) -> Wanted {
    let served = served(map, address);
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
    // Never nothing: at a rate of 1 a single request would put its class days in debt.
    let left =
        |cap: Option<u64>, used: Option<u64>, floor: u64| cap.map(|c| c.saturating_sub(used.unwrap_or(0)).max(floor));
    out.rest = Some(Rates {
        rate: left(total(|c| c.requests), reserved.rate, REST_RATE_MIN),
        bps: left(total(|c| c.bytes), reserved.bps, REST_BPS_MIN),
    });
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

impl Spec {
    fn start(&self, name: &str) -> String {
        format!("start {name} {} {} {}", self.expr, self.rates.start_options(), self.start_options)
            .trim_end()
            .to_string()
    }

    fn change(&self, name: &str) -> String {
        format!("change {name} {}", self.rates.options())
    }
}

/// The engine's memory: the rules it set, and the policy it switched the service from.
#[derive(Default)]
struct Engine {
    rules: BTreeMap<String, Spec>,
    switched_from: Option<String>,
    /// The last failure logged, so that a lasting one is logged once.
    failed: Option<String>,
}

/// The next time after `now_ms` at which a reservation on the OSTs of `address` starts or
/// ends: the engine wakes then, so rules change on time, not up to a tick late.
pub(crate) fn next_change(map: &ClusterMap, address: &str, now_ms: u64) -> Option<u64> {
    let served = served(map, address);
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
        if !(wanted.jobs.is_empty() && engine.rules.is_empty() && engine.switched_from.is_none()) {
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
        let idle =
            next.is_none() && engine.rules.is_empty() && engine.switched_from.is_none() && engine.failed.is_none();
        let wake = next.map_or(TICK, |t| Duration::from_millis(t - now).min(TICK));
        tokio::select! {
            _ = tokio::time::sleep(wake), if !idle => {}
            changed = map.changed() => if changed.is_err() { return },
        }
    }
}

fn get(params: &Params, name: &str) -> Result<String, String> {
    let header = RequestHeader { identity: Identity::root(), ..RequestHeader::default() };
    let op = ParamRequest::GetParam(GetParam { pattern: format!("{SERVICE}.{name}") });
    match params.handle(&header, op) {
        Ok(ParamReply::Values(v)) => Ok(v.0.into_iter().map(|p| p.value).collect()),
        Ok(_) => Err(format!("{SERVICE}.{name}: an answer that is not values")),
        Err(e) => Err(e.message),
    }
}

/// The policy in force in an `nrs_policies` listing: the last one started (FIFO, the
/// fallback, is always started).
pub(crate) fn policy_in_force(listing: &str) -> String {
    let mut policy = "fifo".to_string();
    let mut current = None;
    for line in listing.lines() {
        if let Some(n) = line.trim().strip_prefix("- name: ") {
            current = Some(n.to_string());
        } else if line.trim() == "state: started" {
            if let Some(n) = &current {
                policy.clone_from(n);
            }
        }
    }
    policy
}

/// The rule names of an `nrs_tbf_rule` listing, in their order.
fn rule_order(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|l| !l.trim_end().ends_with(':'))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
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
            let name = rule_name(job);
            if rules.iter().any(|(n, _)| *n == name) {
                tracing::error!("bandwidth reservations: job {job} has the rule name {name} of another job: not held");
                continue;
            }
            let start_options = format!("realtime=1 rank={REST_RULE}");
            rules.push((name, Spec { expr: format!("jobid={{{job}}}"), rates: *rates, start_options }));
        }
        let policy = policy_in_force(&get(params, "nrs_policies")?);
        if !rules.is_empty() && policy != POLICY {
            if policy.starts_with("tbf") {
                // An administrator's TBF of another type: its classes are not jobs.
                self.rules.clear();
                return Err(format!(
                    "{SERVICE} runs '{policy}', whose classes are not jobs: reservations are not held here \
                     (set {SERVICE}.nrs_policies={POLICY})"
                ));
            }
            set(params, "nrs_policies", POLICY)?;
            tracing::info!("bandwidth reservations: {SERVICE} ran {policy}, switched to {POLICY}");
            self.switched_from.get_or_insert(policy);
            self.rules.clear();
        }
        // What is there: a rule gone (the policy restarted) is started again, rules out of
        // their places (another rule started in front) are all started again.
        if !self.rules.is_empty() {
            let order = rule_order(&get(params, "nrs_tbf_rule").unwrap_or_default());
            let at = |n: &str| order.iter().position(|o| o == n);
            let rest = at(REST_RULE);
            let ranked = self.rules.keys().all(|n| {
                let Some(i) = at(n) else { return false };
                let ours = |o: &String| o == REST_RULE || self.rules.contains_key(o);
                let in_front_of_rest = n == REST_RULE || rest.is_some_and(|r| i < r);
                in_front_of_rest && order[..i].iter().all(ours)
            });
            if !ranked {
                tracing::warn!(
                    "bandwidth reservations: {SERVICE}'s rules were changed or out of place; starting them again"
                );
                self.stop_all(params, |_| true)?;
            }
        }
        // Rules to stop: the jobs' first, then the rest's (the jobs' are ranked by it).
        let keep: Vec<String> = rules.iter().map(|(n, _)| n.clone()).collect();
        self.stop_all(params, |n| !keep.iter().any(|k| k == n))?;
        if rules.is_empty() {
            if let Some(before) = self.switched_from.take() {
                let left = rule_order(&get(params, "nrs_tbf_rule").unwrap_or_default());
                if left.iter().all(|r| r == "default") {
                    set(params, "nrs_policies", &before)?;
                    tracing::info!("bandwidth reservations: none active here, {SERVICE} back to {before}");
                } else {
                    tracing::info!("bandwidth reservations: none active here; {SERVICE} stays TBF for its other rules");
                }
            }
            return Ok(());
        }
        for (name, spec) in rules {
            if self.rules.get(&name) == Some(&spec) {
                continue;
            }
            // A rule of that name there already takes the new limits; otherwise it starts.
            if set(params, "nrs_tbf_rule", &spec.change(&name)).is_err() {
                let start = spec.start(&name);
                set(params, "nrs_tbf_rule", &start).map_err(|e| format!("{start}: {e}"))?;
            }
            self.rules.insert(name, spec);
        }
        Ok(())
    }

    /// Stops this engine's rules that `which` names: the jobs' first, the rest's last.
    fn stop_all(&mut self, params: &Params, which: impl Fn(&str) -> bool) -> Result<(), String> {
        let mut gone: Vec<String> = self.rules.keys().filter(|n| which(n)).cloned().collect();
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::qos::{OstCapacity, Reservation};
    use weft_proto::msg::{TargetInfo, TargetKind};

    const M: u64 = 1 << 20;

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
            map.qos.capacity.insert(i, OstCapacity { bytes: Some(1000 * M), requests: None });
        }
        map.qos.reservations.push(reservation("r1", "job1", Throughput::Bytes(300 * M), &[0, 1, 2], 100, 200));
        map.qos.reservations.push(reservation("r2", "job1", Throughput::Bytes(50 * M), &[0], 150, 300));
        map.qos.reservations.push(reservation("r3", "job3", Throughput::Requests(40), &[1, 2], 100, 300));
        assert_eq!(wanted(&map, "a:1", 50), Wanted::default(), "nothing active yet");
        let w = wanted(&map, "a:1", 160);
        // r1 gives 100 on each of its three OSTs, two of them here; r2 50 on OST 0.
        assert_eq!(w.jobs["job1"], Rates { rate: None, bps: Some(250 * M) });
        assert_eq!(w.jobs["job3"], Rates { rate: Some(20), bps: None });
        // 2000 of capacity here, 250 reserved; no request capacity known: no request limit.
        assert_eq!(w.rest, Some(Rates { rate: None, bps: Some(1750 * M) }));
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
        let rest = Spec { expr: "*".into(), rates: Rates { rate: None, bps: Some(5) }, start_options: String::new() };
        let job = Spec {
            expr: "jobid={123}".into(),
            rates: Rates { rate: Some(7_000_000), bps: None },
            start_options: format!("realtime=1 rank={REST_RULE}"),
        };
        for text in [rest.start(REST_RULE), rest.change(REST_RULE), job.start(&name), job.change(&name)] {
            weft_rpc::schedule::tbf::rule::Command::parse(&text, &ty).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        assert!(job.start(&name).contains("rate=999999"), "a rate past TBF's largest is clamped");
    }

    #[test]
    fn listings_give_the_policy_in_force_and_the_rules_in_order() {
        let policies = "regular_requests:\n  - name: fifo\n    state: started\n  - name: tbf jobid\n    state: started\n  - name: orr\n    state: stopped\n";
        assert_eq!(policy_in_force(policies), "tbf jobid");
        assert_eq!(policy_in_force("  - name: fifo\n    state: started\n  - name: tbf\n    state: stopped\n"), "fifo");
        let rules = "regular_requests:\nCPT 0:\nqj1 jobid={1} 999999, ref 1, bps 5\nqrest * 999999, ref 2\ndefault * 10000, ref 0\n";
        assert_eq!(rule_order(rules), ["qj1", "qrest", "default"]);
    }
}
