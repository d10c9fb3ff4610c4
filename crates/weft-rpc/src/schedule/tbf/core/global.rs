//! Global rules (`global=1`): this server's demand on each, reported to the management
//! service, and the share of the rule's rate it answers with. A child of core.rs.

use super::Tbf;
use weft_proto::msg::{GlobalDemand, GlobalShare};

impl<T> Tbf<T> {
    /// This server's demand on each global rule, for the management service's division:
    /// what its classes started over the last second, and whether one of their requests
    /// waited since the last report (or waits now).
    pub fn global_demands(&mut self, now: u64) -> Vec<GlobalDemand> {
        let mut out = Vec::new();
        for rule in self.rules.iter_mut().filter(|r| r.limits.global) {
            let id = rule.id;
            let waiting = self.slots.iter().flatten().any(|c| c.rule_id == id && !c.queue.is_empty());
            let demand = GlobalDemand {
                rule: rule.name.clone(),
                rate: rule.limits.rate,
                bps: rule.limits.bps,
                used: rule.meter.rate(now),
                backlogged: rule.waited || waiting,
            };
            rule.reported_idle = demand.used == 0 && !demand.backlogged;
            out.push(demand);
            rule.waited = false;
        }
        self.report_wanted = false;
        out
    }

    /// True once after a request of a global rule came to wait on a server that had
    /// reported the rule idle: its demand should be reported now (its share there is the
    /// idle reserve), not at the next interval.
    pub fn take_report_wanted(&mut self) -> bool {
        std::mem::take(&mut self.report_wanted)
    }

    /// Takes this server's shares of global rules (the division's answer) at `now`. What a
    /// class of the rule owes (its schedule ahead of `now`) is in requests and bytes, not in
    /// time: it is rescaled to the new share, so requests charged at a small share (a
    /// server's reserve) do not hold the class back at the large one that follows.
    pub fn set_shares(&mut self, now: u64, shares: &[GlobalShare]) {
        for share in shares {
            let Some(rule) = self.rules.iter_mut().find(|r| r.name == share.rule && r.limits.global) else {
                continue;
            };
            let (old_rate, old_bps) = rule.share.unwrap_or((rule.limits.rate, rule.limits.bps));
            let new = (share.rate.max(1), share.bps);
            rule.share = Some(new);
            let id = rule.id;
            let rescale = |tat: &mut u64, old: u64, new: u64| {
                if *tat > now && new != old {
                    let owed = u128::from(*tat - now) * u128::from(old.max(1)) / u128::from(new.max(1));
                    *tat = now.saturating_add(u64::try_from(owed).unwrap_or(u64::MAX / 2));
                }
            };
            for class in self.slots.iter_mut().flatten().filter(|c| c.rule_id == id) {
                rescale(&mut class.tat, old_rate, new.0);
                if let (Some(old), Some(new)) = (old_bps, new.1) {
                    rescale(&mut class.tat_bytes, old, new);
                }
            }
        }
    }
}
