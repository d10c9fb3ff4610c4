//! The decay policy engine at work, in the process that runs the management service: after
//! each of the monitor's intervals it asks weft-mgs's `decide` what to do for every policy
//! of the map, and does it on every server process: a TBF rule at the fallback rate for
//! whoever is over budget (`d<policy>u<uid>` with `uid={UID}`, or `d<policy>j<n>` with
//! `jobid={JOB}`, on `ost.OSS.ost_io` and `mds.MDS.mdt`, `global=1` so that the rate holds
//! for the whole file system however many servers the user's files are on), stopped when the next period
//! begins or the policy is removed. Rules in force are started again every interval (a
//! start of the same rule is no change), so a server that restarted gets them back. A
//! service still on FIFO is switched to TBF keyed by what the policies name (`tbf uid`,
//! `tbf jobid`, or both). Every action is logged with its reason (`weft qos warnings`, the
//! dashboard, this process's log); a dry-run policy only logs what it would do.

use bytes::Bytes;
use std::time::Duration;
use weft_mgs::decay::{decide, Decision, Limit, Used};
use weft_mgs::history::Kind;
use weft_mgs::Mgs;
use weft_proto::msg::param::SetParam;
use weft_proto::msg::{DecayAction, DecayPolicy, Identity, RequestHeader, TargetKind};
use weft_rpc::map::PeerSet;

/// How long the engine waits for one server before it goes on without it.
const SERVER_WAIT: Duration = Duration::from_secs(3);

fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The services a rule goes to, each with the servers that run it.
fn services(mgs: &Mgs) -> Vec<(&'static str, Vec<String>)> {
    let map = mgs.map();
    vec![("ost.OSS.ost_io", map.servers(Some(TargetKind::Ost))), ("mds.MDS.mdt", map.servers(Some(TargetKind::Mdt)))]
}

/// The TBF type a service switched from FIFO takes: the fields the policies name.
fn tbf_type(policies: &[DecayPolicy]) -> &'static str {
    let mut fields = Vec::new();
    for (by, field) in [("user", "uid"), ("group", "gid"), ("job", "jobid")] {
        if policies.iter().any(|p| p.by == by) {
            fields.push(field);
        }
    }
    if fields.is_empty() {
        fields.push("uid");
    }
    match fields.join("+").as_str() {
        "uid" => "tbf uid",
        "gid" => "tbf gid",
        "jobid" => "tbf jobid",
        "uid+gid" => "tbf uid+gid",
        "uid+jobid" => "tbf uid+jobid",
        "gid+jobid" => "tbf gid+jobid",
        _ => "tbf uid+gid+jobid",
    }
}

async fn set(peers: &PeerSet, server: &str, name: &str, value: &str) -> Result<(), String> {
    let header = RequestHeader { identity: Identity::root(), ..RequestHeader::default() };
    let op = SetParam { pattern: name.to_string(), value: value.to_string() };
    peers.get(server).op(header, 0, op, Bytes::new(), SERVER_WAIT).await.map(drop).map_err(|e| e.message)
}

/// Starts (or keeps) rule `command` on every server; the failures, by server.
async fn start_everywhere(peers: &PeerSet, mgs: &Mgs, rule: &str, expr: &str, p: &DecayPolicy) -> Vec<String> {
    let mut failed = Vec::new();
    let policies = mgs.map().decay;
    for (service, servers) in services(mgs) {
        let rate = if service.starts_with("mds") { p.mds_rate } else { p.rate };
        // One rate for the whole file system: the management service divides it among the
        // servers by demand, so a user striped over many OSSs gets the fallback rate, not
        // a multiple of it.
        let command = format!("start {rule} {expr} rate={rate} global=1");
        for server in servers {
            let name = format!("{service}.nrs_tbf_rule");
            let mut result = set(peers, &server, &name, &command).await;
            if result.as_ref().is_err_and(|e| e.contains("nrs_policies=tbf first")) {
                let policy = tbf_type(&policies);
                tracing::info!("decay: {server} {service} runs FIFO: switching it to {policy}");
                let switched = set(peers, &server, &format!("{service}.nrs_policies"), policy).await;
                result = switched.and(set(peers, &server, &name, &command).await);
            }
            if let Err(e) = result {
                failed.push(format!("{server}: {e}"));
            }
        }
    }
    failed
}

async fn stop_everywhere(peers: &PeerSet, mgs: &Mgs, rule: &str) {
    for (service, servers) in services(mgs) {
        for server in servers {
            match set(peers, &server, &format!("{service}.nrs_tbf_rule"), &format!("stop {rule}")).await {
                // Gone already (a restarted server, a policy switched): nothing to stop.
                Err(e) if !e.contains("no TBF rule") && !e.contains("nrs_policies=tbf first") => {
                    tracing::warn!("decay: stopping {rule} on {server} {service}: {e}")
                }
                _ => {}
            }
        }
    }
}

/// The TBF expression that matches `key` of policy `p`; None for a key the rule language
/// cannot name (a jobid with spaces or braces, a uid that is not a number).
fn expr_for(p: &DecayPolicy, key: &str) -> Option<String> {
    match p.by.as_str() {
        "user" | "group" => {
            let id: u32 = key.parse().ok()?;
            Some(format!("{}={{{id}}}", if p.by == "user" { "uid" } else { "gid" }))
        }
        _ => {
            let plain = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@/:".contains(&b));
            plain.then(|| format!("jobid={{{key}}}"))
        }
    }
}

/// The rule that limits `key` under policy number `index` (a name of at most 15 bytes, as
/// TBF takes), and its expression.
fn rule_for(index: usize, p: &DecayPolicy, key: &str, next: &mut u64) -> Option<(String, String)> {
    let expr = expr_for(p, key)?;
    let name = match p.by.as_str() {
        "user" => format!("d{index}u{key}"),
        "group" => format!("d{index}g{key}"),
        _ => {
            *next += 1;
            format!("d{index}j{}", *next % 1_000_000_000)
        }
    };
    Some((name, expr))
}

/// One round of the engine; see the module documentation.
pub(crate) async fn enforce(mgs: &Mgs, peers: &PeerSet) {
    let now = now_s();
    let map = mgs.map();
    // Written back only when something changed.
    let mut changed = false;
    let action = |p: &str, key: &str, what: &str, reason: String| DecayAction {
        at: now,
        policy: p.to_string(),
        key: key.to_string(),
        action: what.to_string(),
        reason,
    };
    // Limits of policies that were removed: lifted.
    let gone: Vec<(String, String, Option<String>)> = {
        let state = mgs.decay();
        state
            .limits
            .iter()
            .filter(|(p, _)| !map.decay.iter().any(|d| &d.name == *p))
            .flat_map(|(p, l)| l.iter().map(move |(k, v)| (p.clone(), k.clone(), v.rule.clone())))
            .collect()
    };
    for (policy, key, rule) in gone {
        changed = true;
        if let Some(rule) = &rule {
            stop_everywhere(peers, mgs, rule).await;
        }
        let mut state = mgs.decay();
        if let Some(l) = state.limits.get_mut(&policy) {
            l.remove(&key);
            if l.is_empty() {
                state.limits.remove(&policy);
            }
        }
        state.log(action(&policy, &key, "lift", "the policy was removed".into()));
    }
    for (index, p) in map.decay.iter().enumerate() {
        let kind = match p.by.as_str() {
            "user" => Kind::User,
            "group" => Kind::Group,
            _ => Kind::Job,
        };
        let usage = match mgs.usage_since(p.period_start(now), kind).await {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("decay policy {}: {e}", p.name);
                continue;
            }
        };
        let usage: Vec<(String, Used)> =
            usage.into_iter().map(|(k, t)| (k, Used { bytes: t.bytes(), ops: t.ops })).collect();
        let limited = mgs.decay().limited(&p.name);
        for decision in decide(p, now, &usage, &limited) {
            changed = true;
            match decision {
                Decision::Throttle { key, reason } => {
                    if !mgs.decay().has_room() {
                        continue;
                    }
                    let period = p.period_start(now);
                    if p.dry_run {
                        let mut state = mgs.decay();
                        state.limit(&p.name, &key, Limit { period, rule: None });
                        state.log(action(&p.name, &key, "would throttle", reason));
                        continue;
                    }
                    let named = {
                        let mut state = mgs.decay();
                        rule_for(index, p, &key, &mut state.next_rule)
                    };
                    let Some((rule, expr)) = named else {
                        let mut state = mgs.decay();
                        state.limit(&p.name, &key, Limit { period, rule: None });
                        state.log(action(&p.name, &key, "cannot throttle", format!("{reason}; no rule can name it")));
                        continue;
                    };
                    let failed = start_everywhere(peers, mgs, &rule, &expr, p).await;
                    let mut state = mgs.decay();
                    state.limit(&p.name, &key, Limit { period, rule: Some(rule.clone()) });
                    let rates = format!("{} requests/s on the OSS, {} on the MDS", p.rate, p.mds_rate);
                    state.log(action(&p.name, &key, "throttle", format!("{reason}: held to {rates} (rule {rule})")));
                    if !failed.is_empty() {
                        state.log(action(&p.name, &key, "cannot throttle", format!("on {}", failed.join("; "))));
                    }
                }
                Decision::Lift { key, reason } => {
                    let limit = mgs.decay().limits.get_mut(&p.name).and_then(|l| l.remove(&key));
                    if let Some(rule) = limit.and_then(|l| l.rule) {
                        stop_everywhere(peers, mgs, &rule).await;
                    }
                    mgs.decay().log(action(&p.name, &key, "lift", reason));
                }
            }
        }
        // Keep the rules in force where they are (a server that restarted lost them).
        let rules: Vec<(String, String)> = {
            let state = mgs.decay();
            let Some(limits) = state.limits.get(&p.name) else { continue };
            limits.iter().filter_map(|(k, l)| l.rule.clone().map(|r| (k.clone(), r))).collect()
        };
        for (key, rule) in rules {
            // A limit with a rule was made from a key its expression names.
            let Some(expr) = expr_for(p, &key) else { continue };
            for failure in start_everywhere(peers, mgs, &rule, &expr, p).await {
                tracing::debug!("decay: keeping {rule}: {failure}");
            }
        }
    }
    if changed {
        if let Err(e) = mgs.decay().save() {
            tracing::warn!("decay: {e}");
        }
    }
}
