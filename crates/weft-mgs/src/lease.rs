//! Leases of the server processes, and the rules of failover targets (OSTs that more than
//! one server may serve over shared storage, Lustre's `--servicenode`).
//!
//! Each server process renews one lease (`RenewLease`, about every 500 ms); the MGS that
//! serves keeps the time of each server's last renewal, in memory, by a monotonic clock.
//! A server serves its failover OSTs only while its lease holds, counted from when it
//! *sent* the renewal and ending a margin before the MGS's end (weft-server `failover.rs`);
//! the MGS counts from the renewal's *arrival*, which is later, and grants a failover OST
//! to another server only after its holder's lease lapsed by that count. So the holder
//! stopped serving before anyone else starts: two servers never write one OST.
//!
//! Who serves which OST is in the map (replicated with it); renewals are not. An MGS that
//! starts serving (a new leader, a restart) cannot know the renewals its predecessor saw,
//! so it counts every lease as renewed at that moment ([`Leases::restart`]).
//!
//! Everything here is pure: time is passed in, the map is changed in place.

use crate::limits::{LEASE_SERVERS_MAX, TARGET_SERVERS_MAX};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use weft_proto::msg::{target_name, ClusterMap, LeaseGrant, TargetInfo, TargetKind, TargetState};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The lease table of the MGS that serves.
#[derive(Debug)]
pub struct Leases {
    lease: Duration,
    /// When this MGS began to serve: every lease counts as renewed then.
    since: Instant,
    /// Each server's last renewal, as it arrived.
    renewed: HashMap<String, Instant>,
    /// Moves an admin asked for (`weft failover`), by the server asked to hand over: OST
    /// index to the server that takes it. In memory: a move lost with its MGS is asked again.
    releases: HashMap<String, BTreeMap<u32, String>>,
}

impl Leases {
    pub fn new(lease: Duration, now: Instant) -> Leases {
        Leases { lease, since: now, renewed: HashMap::new(), releases: HashMap::new() }
    }

    /// This MGS starts serving (again): renewals seen before are not trusted to be the last
    /// ones (another MGS may have served meanwhile), so every lease counts as renewed now.
    pub fn restart(&mut self, now: Instant) {
        self.since = now;
        self.renewed.clear();
        self.releases.clear();
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Records a renewal from `server` that arrived at `now`.
    pub fn renew(&mut self, server: &str, now: Instant) -> WeftResult<()> {
        if !self.renewed.contains_key(server) && self.renewed.len() >= LEASE_SERVERS_MAX {
            // Forget the servers whose leases lapsed long ago before refusing a new one.
            let lease = self.lease;
            self.renewed.retain(|_, at| now < *at + lease * 4);
            if self.renewed.len() >= LEASE_SERVERS_MAX {
                return Err(WeftError::new(
                    ErrorCode::NoSpace,
                    format!("the management service keeps the leases of {LEASE_SERVERS_MAX} servers already"),
                ));
            }
        }
        let at = self.renewed.entry(server.to_string()).or_insert(now);
        *at = (*at).max(now);
        Ok(())
    }

    /// Whether `server`'s lease holds at `now` (counted from its last renewal's arrival, or
    /// from when this MGS began to serve, whichever is later).
    pub fn live(&self, server: &str, now: Instant) -> bool {
        let last = self.renewed.get(server).map_or(self.since, |at| (*at).max(self.since));
        now < last + self.lease
    }

    /// Asks `holder` to hand OST `index` over to `to` at its next renewal.
    pub fn ask_release(&mut self, holder: &str, index: u32, to: &str) {
        self.releases.entry(holder.to_string()).or_default().insert(index, to.to_string());
    }

    /// The move of OST `index` away from `holder` is done (or moot).
    pub fn released(&mut self, holder: &str, index: u32) {
        if let Some(r) = self.releases.get_mut(holder) {
            r.remove(&index);
            if r.is_empty() {
                self.releases.remove(holder);
            }
        }
    }

    /// The answer to `server`'s renewal at `now`, from the map.
    pub fn grant(&self, map: &ClusterMap, server: &str, now: Instant) -> LeaseGrant {
        let releases = self.releases.get(server);
        let leased = map.osts().filter(|t| t.leased && t.state == TargetState::Up);
        let mut grant = LeaseGrant { lease_ms: self.lease.as_millis() as u64, ..LeaseGrant::default() };
        for t in leased {
            if t.address == server {
                match releases.and_then(|r| r.get(&t.index)) {
                    Some(to) => grant.release.push((t.index, to.clone())),
                    None => grant.holds.push(t.index),
                }
            } else if t.servers.iter().any(|s| s == server) && !self.live(&t.address, now) {
                grant.orphaned.push(t.index);
            }
        }
        grant
    }
}

/// Adds `server` to a target's servers (once, within the bound). When the list is full,
/// servers without a live lease other than the one serving it are forgotten first (a node
/// that came back under another address must not lock the target's list).
fn add_server(t: &mut TargetInfo, server: &str, live: &impl Fn(&str) -> bool) -> WeftResult<bool> {
    if t.servers.iter().any(|s| s == server) {
        return Ok(false);
    }
    if t.servers.len() >= TARGET_SERVERS_MAX {
        let holder = t.address.clone();
        t.servers.retain(|s| *s == holder || live(s));
    }
    if t.servers.len() >= TARGET_SERVERS_MAX {
        return Err(WeftError::new(
            ErrorCode::NoSpace,
            format!("a target may have {TARGET_SERVERS_MAX} servers; it has {:?}", t.servers),
        ));
    }
    t.servers.push(server.to_string());
    Ok(true)
}

/// `ClaimTarget`: `claim.address` may serve the OST from now on; with `serve`, it serves it
/// unless another server does under a lease that holds (`live`) or without a lease (never
/// taken away). Whether it got it, the map says.
pub fn claim(map: &mut ClusterMap, claim: &TargetInfo, serve: bool, live: impl Fn(&str) -> bool) -> WeftResult<bool> {
    if claim.kind != TargetKind::Ost {
        return Err(WeftError::invalid(
            "only OSTs fail over between servers; a replicated MDT moves with its group's leader",
        ));
    }
    let server = claim.address.as_str();
    let mut changed = match map.target(claim.kind, claim.index) {
        Some(_) => false,
        None => {
            // New: its address is the first server's, Down until one serves it (a standby
            // that registered first does not take it: the OST's first server does).
            let first = TargetInfo { state: TargetState::Down, ..TargetInfo::new(claim.kind, claim.index, server) };
            crate::rules::register(map, &first)?;
            crate::rules::set_target_state(map, claim.kind, claim.index, TargetState::Down)?;
            true
        }
    };
    let fsname = map.fsname.clone();
    let Some(t) = map.targets.iter_mut().find(|t| t.kind == claim.kind && t.index == claim.index) else {
        return Err(WeftError::io("the target just registered is missing from the map"));
    };
    if t.state == TargetState::Up && !t.address.is_empty() {
        let holder = t.address.clone();
        changed |= add_server(t, &holder, &live)?;
    }
    changed |= add_server(t, server, &live)?;
    if !serve {
        return Ok(changed);
    }
    let mine = t.address == server;
    let free = t.state == TargetState::Down || (t.leased && !live(&t.address));
    if !mine && !free {
        if !t.leased {
            tracing::warn!(
                target = %target_name(&fsname, t.kind, t.index),
                holder = %t.address,
                "a server claims an OST its server serves without a lease (no failover_osts there): refused"
            );
        }
        return Ok(changed);
    }
    // Served from now on by a server that starts serving it (a start, a restart, a
    // takeover): a new instance, which its clients learn from the map and replay their
    // locks to (see `rules::register`).
    t.address = server.to_string();
    t.state = TargetState::Up;
    t.leased = claim.leased;
    t.instance += 1;
    Ok(true)
}

/// What `MoveTarget` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// `to` serves it already.
    Done,
    /// Its server's lease lapsed (or nobody served it): `to` serves it now (the map changed).
    Granted,
    /// Its server must stop serving it first: asked at its next renewal.
    AskHolder(String),
}

/// `MoveTarget` (an admin's `weft failover`): checks everything, then moves the target in the
/// map when nobody serves it under a lease that holds.
pub fn move_target(
    map: &mut ClusterMap,
    kind: TargetKind,
    index: u32,
    to: &str,
    live: impl Fn(&str) -> bool,
) -> WeftResult<Move> {
    let name = target_name(&map.fsname, kind, index);
    if kind != TargetKind::Ost {
        return Err(WeftError::invalid(format!("{name}: only OSTs move between servers")));
    }
    let known: Vec<String> = map.osts().map(|t| t.name(&map.fsname)).collect();
    let Some(t) = map.targets.iter_mut().find(|t| t.kind == kind && t.index == index) else {
        return Err(WeftError::not_found(format!("{name} is not registered; the OSTs are: {}", known.join(", "))));
    };
    if t.servers.len() < 2 {
        return Err(WeftError::invalid(format!(
            "{name} has no failover server (servers: {}): list it in another server's [oss] failover_osts",
            if t.servers.is_empty() { t.address.clone() } else { t.servers.join(", ") }
        )));
    }
    if !t.servers.iter().any(|s| s == to) {
        return Err(WeftError::invalid(format!(
            "{to} is not a server of {name}; its servers are: {}",
            t.servers.join(", ")
        )));
    }
    if !t.leased && t.state == TargetState::Up {
        return Err(WeftError::invalid(format!(
            "{name} is served by {} without a lease (no failover_osts in its config): it cannot be moved while it runs",
            t.address
        )));
    }
    if t.address == to && t.state == TargetState::Up {
        return Ok(Move::Done);
    }
    if !live(to) {
        return Err(WeftError::new(
            ErrorCode::TimedOut,
            format!("{to} holds no lease with the management service: is its server running?"),
        ));
    }
    if t.state == TargetState::Up && live(&t.address) {
        return Ok(Move::AskHolder(t.address.clone()));
    }
    t.address = to.to_string();
    t.state = TargetState::Up;
    t.leased = true;
    t.instance += 1;
    Ok(Move::Granted)
}

/// `HandOver`: `from` stopped serving the target; `to` serves it.
pub fn hand_over(map: &mut ClusterMap, kind: TargetKind, index: u32, from: &str, to: &str) -> WeftResult<bool> {
    let name = target_name(&map.fsname, kind, index);
    let Some(t) = map.targets.iter_mut().find(|t| t.kind == kind && t.index == index) else {
        return Err(WeftError::not_found(format!("{name} is not registered")));
    };
    if t.address == to && t.state == TargetState::Up {
        return Ok(false);
    }
    if t.address != from {
        return Err(WeftError::new(
            ErrorCode::Stale,
            format!("{name} is served by {}, not by {from}: nothing to hand over", t.address),
        ));
    }
    if !t.servers.iter().any(|s| s == to) {
        return Err(WeftError::invalid(format!("{to} is not a server of {name}")));
    }
    t.address = to.to_string();
    t.state = TargetState::Up;
    t.leased = true;
    t.instance += 1;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(4);

    fn ost(index: u32, server: &str) -> TargetInfo {
        TargetInfo { leased: true, ..TargetInfo::new(TargetKind::Ost, index, server) }
    }

    fn map() -> ClusterMap {
        ClusterMap { version: 1, fsname: "weft".into(), ..ClusterMap::default() }
    }

    fn at(t: &ClusterMap, index: u32) -> (String, TargetState) {
        let t = t.target(TargetKind::Ost, index).unwrap();
        (t.address.clone(), t.state)
    }

    #[test]
    fn a_lease_holds_for_its_length_after_the_last_renewal_arrived_and_not_after() {
        let t0 = Instant::now();
        let mut leases = Leases::new(LEASE, t0);
        leases.renew("a:1", t0 + Duration::from_secs(1)).unwrap();
        assert!(leases.live("a:1", t0 + Duration::from_millis(4_999)));
        assert!(!leases.live("a:1", t0 + Duration::from_secs(5)), "lapsed 4 s after the renewal arrived");
        leases.renew("a:1", t0 + Duration::from_secs(3)).unwrap();
        assert!(leases.live("a:1", t0 + Duration::from_secs(6)), "a renewal extends it");
        // A renewal that arrives late (sent before one already seen) does not shorten it.
        leases.renew("a:1", t0 + Duration::from_secs(2)).unwrap();
        assert!(leases.live("a:1", t0 + Duration::from_millis(6_999)));
        // A server never heard of counts as renewed when this MGS began to serve.
        assert!(leases.live("b:1", t0 + Duration::from_millis(3_999)));
        assert!(!leases.live("b:1", t0 + LEASE));
    }

    #[test]
    fn a_new_leader_counts_every_lease_as_renewed_at_its_takeover() {
        let t0 = Instant::now();
        let mut leases = Leases::new(LEASE, t0);
        leases.renew("a:1", t0).unwrap();
        leases.ask_release("a:1", 2, "b:1");
        // The old leader saw a's lease lapse at t0 + 4 s; a new leader took over at t0 + 10 s.
        assert!(!leases.live("a:1", t0 + Duration::from_secs(10)));
        leases.restart(t0 + Duration::from_secs(10));
        assert!(leases.live("a:1", t0 + Duration::from_secs(13)), "it cannot know a's renewals: a full lease");
        assert!(!leases.live("a:1", t0 + Duration::from_secs(14)));
        let mut m = map();
        claim(&mut m, &ost(2, "a:1"), true, |_| false).unwrap();
        assert!(leases.grant(&m, "a:1", t0 + Duration::from_secs(11)).release.is_empty(), "moves are forgotten");
    }

    #[test]
    fn the_first_server_takes_an_ost_a_standby_waits_until_its_lease_lapsed() {
        let t0 = Instant::now();
        let mut leases = Leases::new(LEASE, t0);
        let mut m = map();
        // The standby registers first: it does not take the OST.
        assert!(claim(&mut m, &ost(2, "b:1"), false, |_| true).unwrap());
        assert_eq!(at(&m, 2).1, TargetState::Down);
        assert!(claim(&mut m, &ost(2, "a:1"), true, |_| true).unwrap());
        assert_eq!(at(&m, 2), ("a:1".to_string(), TargetState::Up));
        assert_eq!(m.target(TargetKind::Ost, 2).unwrap().servers, vec!["b:1".to_string(), "a:1".to_string()]);
        leases.renew("a:1", t0).unwrap();
        leases.renew("b:1", t0).unwrap();
        // While a's lease holds, b's claim changes nothing and b is not told to take it.
        let soon = t0 + Duration::from_secs(2);
        assert!(!claim(&mut m, &ost(2, "b:1"), true, |s| leases.live(s, soon)).unwrap());
        assert_eq!(at(&m, 2).0, "a:1");
        assert_eq!(leases.grant(&m, "a:1", soon).holds, vec![2]);
        assert!(leases.grant(&m, "b:1", soon).orphaned.is_empty());
        // a went silent: 4 s after its last renewal arrived, b is told, and its claim wins.
        let later = t0 + LEASE;
        leases.renew("b:1", later).unwrap();
        assert_eq!(leases.grant(&m, "b:1", later).orphaned, vec![2]);
        assert!(claim(&mut m, &ost(2, "b:1"), true, |s| leases.live(s, later)).unwrap());
        assert_eq!(at(&m, 2).0, "b:1");
        // a comes back: it registers, but does not take its OST back while b's lease holds.
        leases.renew("a:1", later).unwrap();
        assert!(!claim(&mut m, &ost(2, "a:1"), true, |s| leases.live(s, later)).unwrap());
        assert_eq!(at(&m, 2).0, "b:1");
        assert!(leases.grant(&m, "a:1", later).holds.is_empty(), "a's lease no longer covers OST 2");
    }

    #[test]
    fn a_full_list_of_servers_forgets_those_without_a_lease_before_refusing() {
        let mut m = map();
        claim(&mut m, &ost(0, "a:1"), true, |_| true).unwrap();
        for i in 1..TARGET_SERVERS_MAX {
            claim(&mut m, &ost(0, &format!("gone:{i}")), false, |_| true).unwrap();
        }
        let live_ones = |s: &str| !s.starts_with("gone");
        let full = claim(&mut m, &ost(0, "b:1"), false, |_| true).unwrap_err();
        assert_eq!(full.code, ErrorCode::NoSpace, "every one live: refused");
        assert!(claim(&mut m, &ost(0, "b:1"), false, live_ones).unwrap());
        assert_eq!(m.target(TargetKind::Ost, 0).unwrap().servers, vec!["a:1".to_string(), "b:1".to_string()]);
    }

    #[test]
    fn an_ost_served_without_a_lease_is_never_taken() {
        let mut m = map();
        let plain = TargetInfo::new(TargetKind::Ost, 0, "a:1");
        claim(&mut m, &plain, true, |_| false).unwrap();
        claim(&mut m, &ost(0, "b:1"), true, |_| false).unwrap();
        assert_eq!(at(&m, 0).0, "a:1");
        let leases = Leases::new(LEASE, Instant::now());
        assert!(leases.grant(&m, "b:1", Instant::now() + LEASE * 10).orphaned.is_empty());
        let refused = move_target(&mut m, TargetKind::Ost, 0, "b:1", |_| true).unwrap_err();
        assert!(refused.message.contains("without a lease"), "{}", refused.message);
    }

    #[test]
    fn moving_by_hand_checks_its_input_and_asks_a_live_holder_to_hand_over() {
        let t0 = Instant::now();
        let mut leases = Leases::new(LEASE, t0);
        let mut m = map();
        claim(&mut m, &ost(2, "a:1"), true, |_| true).unwrap();
        claim(&mut m, &ost(2, "b:1"), false, |_| true).unwrap();
        claim(&mut m, &ost(3, "a:1"), true, |_| true).unwrap();
        let live = |s: &str| s != "dead:1";
        let e = move_target(&mut m, TargetKind::Ost, 9, "b:1", live).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotFound);
        assert!(e.message.contains("weft-OST0002, weft-OST0003"), "{}", e.message);
        let e = move_target(&mut m, TargetKind::Ost, 2, "c:1", live).unwrap_err();
        assert!(e.message.contains("c:1 is not a server of weft-OST0002; its servers are: a:1, b:1"), "{}", e.message);
        let e = move_target(&mut m, TargetKind::Ost, 3, "b:1", live).unwrap_err();
        assert!(e.message.contains("has no failover server"), "{}", e.message);
        let e = move_target(&mut m, TargetKind::Mdt, 0, "b:1", live).unwrap_err();
        assert_eq!(e.code, ErrorCode::Invalid);
        assert_eq!(move_target(&mut m, TargetKind::Ost, 2, "a:1", live).unwrap(), Move::Done);
        assert_eq!(move_target(&mut m, TargetKind::Ost, 2, "b:1", live).unwrap(), Move::AskHolder("a:1".into()));
        assert_eq!(at(&m, 2).0, "a:1", "not moved before its holder stopped");
        leases.renew("a:1", t0).unwrap();
        leases.ask_release("a:1", 2, "b:1");
        let g = leases.grant(&m, "a:1", t0);
        assert_eq!((g.holds, g.release), (vec![3], vec![(2, "b:1".to_string())]), "no longer covered once asked");
        assert!(hand_over(&mut m, TargetKind::Ost, 2, "a:1", "b:1").unwrap());
        leases.released("a:1", 2);
        assert_eq!(at(&m, 2).0, "b:1");
        assert!(!hand_over(&mut m, TargetKind::Ost, 2, "a:1", "b:1").unwrap(), "a resend changes nothing");
        assert_eq!(hand_over(&mut m, TargetKind::Ost, 2, "c:1", "a:1").unwrap_err().code, ErrorCode::Stale);
        // A server without a lease is refused at once; a holder whose lease lapsed is not asked.
        claim(&mut m, &ost(2, "dead:1"), false, |_| true).unwrap();
        let e = move_target(&mut m, TargetKind::Ost, 2, "dead:1", live).unwrap_err();
        assert!(e.message.contains("dead:1 holds no lease"), "{}", e.message);
        assert_eq!(move_target(&mut m, TargetKind::Ost, 2, "a:1", |s| s == "a:1").unwrap(), Move::Granted);
        assert_eq!(at(&m, 2).0, "a:1");
    }
}
