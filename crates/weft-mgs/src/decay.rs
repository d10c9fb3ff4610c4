//! The decay policy engine's decisions and memory (the research's "decay" QoS, as DDN's
//! Clownfish and LIME did it by hand): a policy names a period, a budget of bytes and of
//! metadata operations per user, group or job, and fallback rates. Whoever used more than the
//! budget since the period began is throttled (a TBF rule on every server, set by
//! weft-server's decay.rs) until the next period begins, when every such limit is lifted.
//!
//! [`decide`] is pure: given a policy, the time, this period's usage and who is limited now,
//! it says whom to throttle and whom to let go, with the reason. [`DecayState`] is what the
//! engine remembers across restarts of the management service (who is limited, under which
//! rule, and the log of actions), kept as JSON beside the map.

use crate::limits::{DECAY_ACTIONS_MAX, DECAY_LIMITS_MAX};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use weft_proto::msg::{DecayAction, DecayPolicy};
use weft_proto::{WeftError, WeftResult};

/// One series' usage this period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Used {
    pub bytes: u64,
    pub ops: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Throttle { key: String, reason: String },
    Lift { key: String, reason: String },
}

/// What to do for `policy` at `now` (Unix seconds): throttle whoever is over budget this
/// period and not limited yet; lift the limits set in an earlier period. `limited`: the
/// keys this policy limits now, with the start of the period each was limited in.
pub fn decide(
    policy: &DecayPolicy,
    now: u64,
    usage: &[(String, Used)],
    limited: &BTreeMap<String, u64>,
) -> Vec<Decision> {
    let period = policy.period_start(now);
    let mut out = Vec::new();
    for (key, since) in limited {
        if *since < period {
            out.push(Decision::Lift { key: key.clone(), reason: format!("a new period began at {period}") });
        }
    }
    for (key, used) in usage {
        if limited.get(key).is_some_and(|since| *since >= period) {
            continue;
        }
        // Root (and its group) is never throttled: the mounts' own requests (a release, a
        // flush) go as root, and holding them would hold every user.
        if (policy.by == "user" || policy.by == "group") && key == "0" {
            continue;
        }
        let over_bytes = policy.budget_bytes.filter(|b| used.bytes > *b);
        let over_ops = policy.budget_ops.filter(|b| used.ops > *b);
        let reason = match (over_bytes, over_ops) {
            (Some(b), _) => format!("{} bytes this period, over the budget of {b}", used.bytes),
            (None, Some(o)) => format!("{} metadata operations this period, over the budget of {o}", used.ops),
            (None, None) => continue,
        };
        out.push(Decision::Throttle { key: key.clone(), reason });
    }
    out
}

/// A limit in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    /// The start of the period it was set in.
    pub period: u64,
    /// The TBF rule's name on the servers (None in a dry run: nothing was set).
    pub rule: Option<String>,
}

/// What the engine remembers; see the module documentation.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct DecayState {
    /// By policy, then by key.
    pub limits: BTreeMap<String, BTreeMap<String, Limit>>,
    /// Newest last, at most [`DECAY_ACTIONS_MAX`].
    pub actions: VecDeque<DecayAction>,
    /// The next number for a job's rule name (`d<policy>j<n>`).
    pub next_rule: u64,
    #[serde(skip)]
    path: PathBuf,
}

impl DecayState {
    /// Loads the state in `dir` (`decay.json`), empty when there is none.
    pub fn load(dir: &Path) -> WeftResult<DecayState> {
        let path = dir.join("decay.json");
        let mut state = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<DecayState>(&bytes)
                .map_err(|e| WeftError::io(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => DecayState::default(),
            Err(e) => return Err(WeftError::io(format!("{}: {e}", path.display()))),
        };
        state.path = path;
        Ok(state)
    }

    /// Writes the state (temporary file, fsync, rename).
    pub fn save(&self) -> WeftResult<()> {
        let tmp = self.path.with_extension("tmp");
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| WeftError::io(e.to_string()))?;
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        };
        write().map_err(|e| WeftError::io(format!("{}: {e}", self.path.display())))
    }

    /// The keys `policy` limits now, with their periods.
    pub fn limited(&self, policy: &str) -> BTreeMap<String, u64> {
        self.limits.get(policy).map(|l| l.iter().map(|(k, v)| (k.clone(), v.period)).collect()).unwrap_or_default()
    }

    /// Records that `policy` limits `key` (or, without a rule, that it dealt with it this
    /// period).
    pub fn limit(&mut self, policy: &str, key: &str, limit: Limit) {
        self.limits.entry(policy.to_string()).or_default().insert(key.to_string(), limit);
    }

    /// Logs an action (and keeps the log bounded).
    pub fn log(&mut self, action: DecayAction) {
        tracing::warn!("decay policy {}: {} {}: {}", action.policy, action.action, action.key, action.reason);
        self.actions.push_back(action);
        while self.actions.len() > DECAY_ACTIONS_MAX {
            self.actions.pop_front();
        }
    }

    /// Whether another limit fits.
    pub fn has_room(&self) -> bool {
        self.limits.values().map(BTreeMap::len).sum::<usize>() < DECAY_LIMITS_MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> DecayPolicy {
        DecayPolicy {
            name: "fair".into(),
            by: "user".into(),
            period_s: 120,
            epoch: 1000,
            budget_bytes: Some(100 << 20),
            budget_ops: Some(500),
            rate: 10,
            mds_rate: 5,
            dry_run: false,
        }
    }

    fn used(bytes: u64, ops: u64) -> Used {
        Used { bytes, ops }
    }

    #[test]
    fn periods_count_from_the_policys_epoch() {
        let p = policy();
        assert_eq!(p.period_start(1000), 1000);
        assert_eq!(p.period_start(1119), 1000);
        assert_eq!(p.period_start(1120), 1120);
        assert_eq!(p.period_start(500), 1000, "before the epoch: the first period");
    }

    #[test]
    fn over_budget_is_throttled_once_and_lifted_when_the_next_period_begins() {
        let p = policy();
        let usage = vec![
            ("1000".to_string(), used(200 << 20, 3)),
            ("1001".to_string(), used(10 << 20, 3)),
            ("1002".to_string(), used(0, 900)),
            ("0".to_string(), used(1 << 40, 1 << 20)),
        ];
        let d = decide(&p, 1050, &usage, &BTreeMap::new());
        assert_eq!(d.len(), 2, "root is not throttled: {d:?}");
        match &d[0] {
            Decision::Throttle { key, reason } => {
                assert_eq!(key, "1000");
                assert!(reason.contains("209715200 bytes") && reason.contains("budget of 104857600"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&d[1], Decision::Throttle { key, reason } if key == "1002" && reason.contains("metadata")));
        // Limited in this period: nothing more to do until it ends.
        let limited: BTreeMap<String, u64> = [("1000".to_string(), 1000), ("1002".to_string(), 1000)].into();
        assert!(decide(&p, 1100, &usage, &limited).is_empty());
        // The next period: both lifted (and this period's usage, empty so far, throttles no one).
        let d = decide(&p, 1121, &[], &limited);
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|d| matches!(d, Decision::Lift { .. })));
    }

    #[test]
    fn groups_are_budgeted_like_users_and_the_root_group_is_not_throttled() {
        let p = DecayPolicy { by: "group".into(), ..policy() };
        let usage = vec![("0".to_string(), used(1 << 40, 0)), ("500".to_string(), used(200 << 20, 0))];
        let d = decide(&p, 1050, &usage, &BTreeMap::new());
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(matches!(&d[0], Decision::Throttle { key, .. } if key == "500"));
    }

    #[test]
    fn the_state_survives_a_restart_and_its_log_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DecayState::load(dir.path()).unwrap();
        s.limits
            .entry("fair".into())
            .or_default()
            .insert("1000".into(), Limit { period: 1000, rule: Some("d0u1000".into()) });
        for i in 0..DECAY_ACTIONS_MAX + 10 {
            s.log(DecayAction {
                at: i as u64,
                policy: "fair".into(),
                key: "1000".into(),
                action: "throttle".into(),
                reason: "r".into(),
            });
        }
        s.save().unwrap();
        let back = DecayState::load(dir.path()).unwrap();
        assert_eq!(back.limited("fair"), [("1000".to_string(), 1000)].into());
        assert_eq!(back.actions.len(), DECAY_ACTIONS_MAX);
        assert_eq!(back.actions.front().unwrap().at, 10, "the oldest went first");
    }
}
