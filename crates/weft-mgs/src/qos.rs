//! Global rate limiting: one TBF rate for a rule across every server, divided among them
//! by measured demand (the division of the research on TBF's global rate limiting).
//!
//! A rule started with `global=1` exists on every server that serves the service (it is
//! set with `set-param -P`). About once a second each server reports, per global rule, the
//! requests its classes started over the last second and whether any of them waited
//! (backlogged: it wants more than its share). The MGS keeps the latest report of each
//! server in memory and answers with the server's share, computed by [`divide`]:
//!
//! * a server where the rule is **idle** keeps a small reserve, so that the first requests
//!   that come there are served at once while the next report asks for more;
//! * an **active** server that is not backlogged needs what it used plus a quarter as
//!   headroom (and the reserve), so that growth shows as use before it is throttled;
//! * the rest is divided max-min fairly (a water filling): equal parts, except that a
//!   server needing less than its part gets its need and the others share what it leaves;
//!   a **backlogged** server wants all it can get. Nobody is favoured by its past share,
//!   and a server that did not wait never takes more than an equal part from one that did;
//! * with nobody backlogged, what is left is spread in proportion to each server's need.
//!
//! The shares add up to the rule's rate. A server's demand is what its last
//! [`QOS_REPORTS_REMEMBERED_MAX`] reports say together (the most it used, and whether it was
//! backlogged in any): a job whose requests go from server to server faster than the
//! reports (one writer over a file's stripes) is seen on all of them, and each keeps its
//! part of the rate, which its classes may save up for one report interval while the job is
//! elsewhere (see `weft_rpc::schedule::tbf::core`). When a job's demand moves from one
//! server to another for good, the shares follow within [`QOS_REPORTS_REMEMBERED_MAX`] + 1 reports.
//! A server that stops reporting (stopped, its rule gone) is forgotten after
//! [`QOS_REPORT_STALE_MS`].
//!
//! Pure logic over an injected clock: the MGS calls [`GlobalTable::report`] with the time.

use crate::limits::{
    GLOBAL_RULES_MAX, GLOBAL_SERVERS_MAX, QOS_REPORTS_REMEMBERED_MAX, QOS_REPORT_STALE_MS, QOS_RESERVE_PERCENT,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use weft_proto::msg::{GlobalDemand, GlobalShare, Service};
use weft_proto::{WeftError, WeftResult};

/// One server's demand on one rule, as [`divide`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Demand {
    /// Requests started per second.
    pub used: u64,
    /// A request waited: the server wants more than its share.
    pub backlogged: bool,
}

impl Demand {
    fn idle(&self) -> bool {
        !self.backlogged && self.used == 0
    }
}

/// Divides `rate` among servers of the given demands (see the module documentation). The
/// shares add up to `rate` (with more servers than requests per second, each still gets 1).
pub fn divide(rate: u64, demands: &[Demand]) -> Vec<u64> {
    let n = demands.len() as u64;
    if n == 0 {
        return Vec::new();
    }
    if demands.iter().all(Demand::idle) {
        return spread(rate, &vec![1; demands.len()]).into_iter().map(|s| s.max(1)).collect();
    }
    let reserve = (rate * QOS_RESERVE_PERCENT / 100 / n).max(1);
    let idle = demands.iter().filter(|d| d.idle()).count() as u64;
    let pool = rate.saturating_sub(reserve * idle);
    // What each active server that is not backlogged needs; a backlogged one wants all.
    let caps: Vec<Option<u64>> =
        demands.iter().map(|d| if d.backlogged { None } else { Some(d.used + d.used / 4 + reserve) }).collect();
    let active: Vec<usize> = (0..demands.len()).filter(|&i| !demands[i].idle()).collect();
    let mut shares = vec![0u64; demands.len()];
    let left = water_fill(pool, &active, &caps, &mut shares);
    if left > 0 {
        // Nobody backlogged and the needs met: the rest in proportion to the needs.
        let needs: Vec<u64> =
            (0..demands.len()).map(|i| if active.contains(&i) { caps[i].unwrap_or(0) } else { 0 }).collect();
        for (share, part) in shares.iter_mut().zip(spread(left, &needs)) {
            *share += part;
        }
    }
    for (share, d) in shares.iter_mut().zip(demands) {
        if d.idle() {
            *share = reserve;
        }
    }
    shares.iter().map(|&s| s.max(1)).collect()
}

/// Max-min fair division of `pool` among the servers `among`, each up to its cap (None:
/// no cap): equal parts, except that a server needing less than its part gets what it needs
/// and the others share what it leaves. Writes the parts into `shares`; returns what is
/// left when every server got its cap.
fn water_fill(pool: u64, among: &[usize], caps: &[Option<u64>], shares: &mut [u64]) -> u64 {
    let mut left = pool;
    let mut open: Vec<usize> = among.to_vec();
    while !open.is_empty() {
        let fair = left / open.len() as u64;
        let (capped, rest): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| caps[i].is_some_and(|c| c <= fair));
        if capped.is_empty() {
            for (&i, part) in open.iter().zip(spread(left, &vec![1; open.len()])) {
                shares[i] = part;
            }
            return 0;
        }
        for i in capped {
            let cap = caps[i].expect("capped");
            shares[i] = cap;
            left -= cap;
        }
        open = rest;
    }
    left
}

/// `total` in proportion to `weights` (whole numbers adding up to `total`; the remainder of
/// the rounding goes to the largest weights first). All weights 0: all 0.
fn spread(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let mut parts: Vec<u64> =
        weights.iter().map(|&w| u64::try_from(u128::from(total) * u128::from(w) / sum).unwrap_or(u64::MAX)).collect();
    let mut left = total - parts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weights[i]));
    for i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        parts[*i] += 1;
        left -= 1;
    }
    parts
}

/// A server's latest reports on one rule.
#[derive(Debug)]
struct Report {
    /// Oldest first, at most [`QOS_REPORTS_REMEMBERED_MAX`].
    recent: VecDeque<Demand>,
    at_ms: u64,
}

impl Report {
    /// The demand the division sees: idle when the latest report says so (nothing started
    /// for a whole second: the job went elsewhere), else the most used and backlogged in
    /// any report.
    fn demand(&self) -> Demand {
        if self.recent.back().is_none_or(Demand::idle) {
            return Demand::default();
        }
        Demand {
            used: self.recent.iter().map(|d| d.used).max().unwrap_or(0),
            backlogged: self.recent.iter().any(|d| d.backlogged),
        }
    }
}

/// The latest reports of every server on every global rule, and the division.
#[derive(Debug, Default)]
pub struct GlobalTable {
    /// By service and rule name, then by server address (ordered: one division everywhere).
    rules: HashMap<(Service, String), BTreeMap<String, Report>>,
}

impl GlobalTable {
    /// Takes `server`'s report on its global rules of `service` at `now_ms` and answers its
    /// share of each.
    pub fn report(
        &mut self,
        now_ms: u64,
        server: &str,
        service: Service,
        rules: &[GlobalDemand],
    ) -> WeftResult<Vec<GlobalShare>> {
        self.forget_stale(now_ms);
        // A rule this server no longer reports (stopped there) no longer counts it.
        for ((s, rule), servers) in self.rules.iter_mut() {
            if *s == service && !rules.iter().any(|r| r.rule == *rule) {
                servers.remove(server);
            }
        }
        self.rules.retain(|_, servers| !servers.is_empty());
        let mut shares = Vec::with_capacity(rules.len());
        for r in rules {
            let key = (service, r.rule.clone());
            if !self.rules.contains_key(&key) && self.rules.len() >= GLOBAL_RULES_MAX {
                return Err(WeftError::invalid(format!(
                    "more than {GLOBAL_RULES_MAX} global TBF rules in the file system: stop some"
                )));
            }
            let servers = self.rules.entry(key).or_default();
            if !servers.contains_key(server) && servers.len() >= GLOBAL_SERVERS_MAX {
                return Err(WeftError::invalid(format!(
                    "global TBF rule '{}': more than {GLOBAL_SERVERS_MAX} servers report it",
                    r.rule
                )));
            }
            let demand = Demand { used: r.used, backlogged: r.backlogged };
            let report =
                servers.entry(server.to_string()).or_insert_with(|| Report { recent: VecDeque::new(), at_ms: now_ms });
            if report.recent.len() == QOS_REPORTS_REMEMBERED_MAX {
                report.recent.pop_front();
            }
            report.recent.push_back(demand);
            report.at_ms = now_ms;
            let demands: Vec<Demand> = servers.values().map(Report::demand).collect();
            let position = servers.keys().position(|s| s == server).expect("just inserted");
            let rate = divide(r.rate, &demands)[position];
            // The byte rate is divided as the request rate is.
            let bps = r.bps.map(|bps| {
                u64::try_from(u128::from(bps) * u128::from(rate) / u128::from(r.rate.max(1))).unwrap_or(bps).max(1)
            });
            shares.push(GlobalShare { rule: r.rule.clone(), rate, bps });
        }
        Ok(shares)
    }

    fn forget_stale(&mut self, now_ms: u64) {
        for servers in self.rules.values_mut() {
            servers.retain(|_, rep| now_ms.saturating_sub(rep.at_ms) <= QOS_REPORT_STALE_MS);
        }
        self.rules.retain(|_, servers| !servers.is_empty());
    }

    /// Servers taking part in each rule, for tests and listings.
    pub fn servers(&self, service: Service, rule: &str) -> Vec<String> {
        self.rules.get(&(service, rule.to_string())).map(|s| s.keys().cloned().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(used: u64, backlogged: bool) -> Demand {
        Demand { used, backlogged }
    }

    #[test]
    fn shares_always_add_up_to_the_rate() {
        let cases: Vec<Vec<Demand>> = vec![
            vec![d(0, false)],
            vec![d(0, false), d(0, false), d(0, false)],
            vec![d(50, true), d(0, false)],
            vec![d(50, true), d(49, true)],
            vec![d(10, false), d(90, true)],
            vec![d(10, false), d(20, false), d(0, false)],
            vec![d(1000, false), d(1000, false), d(5, true)],
            vec![d(3, true), d(0, false), d(0, false), d(0, false), d(0, false)],
        ];
        for rate in [7, 100, 1000, 10_000] {
            for demands in &cases {
                let shares = divide(rate, demands);
                assert_eq!(shares.len(), demands.len());
                assert_eq!(shares.iter().sum::<u64>(), rate, "rate {rate}, {demands:?} -> {shares:?}");
                assert!(shares.iter().all(|&s| s >= 1));
            }
        }
    }

    #[test]
    fn an_idle_server_keeps_the_reserve_and_the_busy_one_takes_the_rest() {
        assert_eq!(divide(100, &[d(50, true), d(0, false)]), vec![98, 2]);
        // Several idle ones: 5% of the rate over them all.
        assert_eq!(divide(1000, &[d(0, false), d(400, true), d(0, false), d(0, false)]), vec![12, 964, 12, 12]);
        // Nobody busy: an equal split.
        assert_eq!(divide(100, &[d(0, false), d(0, false)]), vec![50, 50]);
    }

    #[test]
    fn backlogged_servers_share_equally_whatever_they_had() {
        // One had 90 and the other 10, both want more: equal, not stuck at 90/10.
        assert_eq!(divide(100, &[d(90, true), d(10, true)]), vec![50, 50]);
        // One uses 10 and wants no more: it keeps 10 and headroom, the other gets the rest.
        let shares = divide(100, &[d(10, false), d(60, true)]);
        assert_eq!(shares, vec![14, 86]);
        // Nobody backlogged: headroom in proportion to use.
        let shares = divide(100, &[d(20, false), d(40, false)]);
        assert!(shares[1] > shares[0] && shares[0] >= 27, "{shares:?}");
    }

    #[test]
    fn with_more_servers_than_the_rate_each_still_gets_one_request_per_second() {
        let shares = divide(2, &[d(0, false); 5]);
        assert!(shares.iter().all(|&s| s == 1), "{shares:?}");
    }

    fn demand(rule: &str, rate: u64, used: u64, backlogged: bool) -> GlobalDemand {
        GlobalDemand { rule: rule.into(), rate, bps: Some(rate * 1000), used, backlogged }
    }

    #[test]
    fn the_table_divides_between_the_servers_that_report_and_forgets_silent_ones() {
        let mut t = GlobalTable::default();
        let s = Service::OstIo;
        // The first server alone has it all.
        let a = t.report(0, "a", s, &[demand("g", 100, 0, false)]).unwrap();
        assert_eq!(a, vec![GlobalShare { rule: "g".into(), rate: 100, bps: Some(100_000) }]);
        // A second one arrives busy; the first is idle: it keeps the reserve.
        let b = t.report(500, "b", s, &[demand("g", 100, 80, true)]).unwrap();
        assert_eq!(b[0].rate, 98);
        assert_eq!(b[0].bps, Some(98_000));
        let a = t.report(1000, "a", s, &[demand("g", 100, 0, false)]).unwrap();
        assert_eq!(a[0].rate, 2);
        // The demand moves to a: equal while both want more (b, still busy, wanted more in
        // one of its last three reports), then b's idle reserve once it reports idle.
        let a = t.report(2000, "a", s, &[demand("g", 100, 2, true)]).unwrap();
        assert_eq!(a[0].rate, 50);
        let b = t.report(2500, "b", s, &[demand("g", 100, 5, false)]).unwrap();
        assert_eq!(b[0].rate, 50);
        let b = t.report(3500, "b", s, &[demand("g", 100, 0, false)]).unwrap();
        assert_eq!(b[0].rate, 2);
        let a = t.report(4000, "a", s, &[demand("g", 100, 50, true)]).unwrap();
        assert_eq!(a[0].rate, 98);
        // b stops reporting: after the stale time a has the whole rate.
        let a = t.report(3500 + QOS_REPORT_STALE_MS + 1, "a", s, &[demand("g", 100, 98, true)]).unwrap();
        assert_eq!(a[0].rate, 100);
        assert_eq!(t.servers(s, "g"), vec!["a".to_string()]);
        // A rule a server no longer reports is no longer its.
        t.report(9000, "a", s, &[]).unwrap();
        assert!(t.servers(s, "g").is_empty());
    }

    #[test]
    fn rules_of_different_services_or_names_are_divided_apart() {
        let mut t = GlobalTable::default();
        t.report(0, "a", Service::OstIo, &[demand("g", 100, 50, true)]).unwrap();
        let mds = t.report(0, "b", Service::Mdt, &[demand("g", 100, 50, true)]).unwrap();
        assert_eq!(mds[0].rate, 100, "an MDS rule of the same name is another rule");
        let h = t.report(0, "b", Service::OstIo, &[demand("h", 10, 5, true)]).unwrap();
        assert_eq!(h[0].rate, 10);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut t = GlobalTable::default();
        let many: Vec<GlobalDemand> = (0..=GLOBAL_RULES_MAX).map(|i| demand(&format!("r{i}"), 10, 0, false)).collect();
        let err = t.report(0, "a", Service::OstIo, &many).unwrap_err();
        assert!(err.message.contains("global TBF rules"), "{}", err.message);
        let mut t = GlobalTable::default();
        for i in 0..GLOBAL_SERVERS_MAX {
            t.report(0, &format!("s{i}"), Service::OstIo, &[demand("g", 10, 0, false)]).unwrap();
        }
        assert!(t.report(0, "late", Service::OstIo, &[demand("g", 10, 0, false)]).is_err());
    }
}
