//! Target failover for OSTs (Lustre's `--servicenode`): an OSS process that lists
//! `failover_osts` serves its OSTs under one lease from the management service, and takes
//! over the OSTs it may serve when their server's lease lapsed.
//!
//! - **The lease.** Every [`LEASE_RENEW_MS`] this process sends one `RenewLease` (one
//!   message per process, however many OSTs and clients). The answer names the failover
//!   OSTs the map has this process serve; it serves them until the renewal's *send* time
//!   plus the lease less [`LEASE_MARGIN_MS`] ([`LeaseHolder`]), by the monotonic clock. The
//!   management service gives an OST to another server only once the lease lapsed counted
//!   from the renewal's *arrival* (weft-mgs `lease.rs`), later: this process has stopped
//!   (it answers `Moved`) before another starts. That holds when it is only cut off and
//!   still running (fencing).
//! - **Takeover.** A renewal's answer names the OSTs this process may serve whose server's
//!   lease lapsed (`orphaned`): it claims each (`ClaimTarget`), and the map, once it names
//!   this process, moves the clients here. It opens the OST's directory (shared storage:
//!   what the dead server acknowledged is there) and starts its lock namespace in recovery,
//!   so the clients replay their extent locks before anything conflicting is granted.
//! - **Moving by hand** (`weft failover`): the answer names an OST to hand over; this
//!   process stops serving it (it is no longer covered by the lease) and tells the
//!   management service (`HandOver`), which moves it in the map to the server named.
//!
//! A process that comes back does not take its OSTs back by itself: its claim at start
//! wins only an OST that nobody serves under a lease that holds.

use crate::limits::{LEASE_MARGIN_MS, LEASE_RENEW_MS, LEASE_RENEW_TIMEOUT_MS, OST_TAKEOVER_LOCK_RECOVERY_MS};
use crate::locks::LockService;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weft_oss::{Oss, OstConfig};
use weft_proto::msg::{mgs, target_name, LeaseGrant, TargetInfo, TargetKind, TargetState};
use weft_proto::{ErrorCode, WeftError, WeftResult};
use weft_rpc::mgs::MgsPeers;

// Several renewals per lease: a lost renewal or two must not stop a server.
const _: () = assert!(LEASE_RENEW_MS * 4 < weft_mgs::limits::LEASE_MS - LEASE_MARGIN_MS);

/// What a process knows of its own lease: decisions only, time passed in.
#[derive(Debug, Clone)]
pub(crate) struct LeaseHolder {
    margin: Duration,
    /// The lease's end as this process counts it (None: never granted).
    until: Option<Instant>,
    /// The OSTs the last granted renewal covers.
    holds: BTreeSet<u32>,
}

impl LeaseHolder {
    pub fn new(margin: Duration) -> LeaseHolder {
        LeaseHolder { margin, until: None, holds: BTreeSet::new() }
    }

    /// A renewal sent at `sent` was granted for `lease`, covering `holds`. Counted from the
    /// send (the management service counts from the arrival, later), less the margin (for
    /// clocks that run at slightly different rates, and a request that passed the check
    /// just before the end and is still writing).
    pub fn granted(&mut self, sent: Instant, lease: Duration, holds: &[u32]) {
        let until = (sent + lease).checked_sub(self.margin).unwrap_or(sent);
        // Renewals are sent one after another: a later grant is for a later send.
        self.until = Some(self.until.map_or(until, |u| u.max(until)));
        self.holds = holds.iter().copied().collect();
    }

    /// An OST claimed after the renewal at hand was answered: the lease covers it from now.
    pub fn add(&mut self, ost: u32) {
        self.holds.insert(ost);
    }

    /// Whether OST `ost` may be served at `now`. The request path reads the same decision
    /// as published per OST ([`Failover::check`], without a lock).
    #[cfg(test)]
    pub fn serves(&self, ost: u32, now: Instant) -> bool {
        self.holds.contains(&ost) && self.until.is_some_and(|u| now < u)
    }

    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    pub fn holds(&self) -> &BTreeSet<u32> {
        &self.holds
    }
}

/// The failover OSTs of one process.
pub(crate) struct Failover {
    fsname: String,
    /// This process's address: its name in the map and in its lease.
    address: String,
    data_dir: PathBuf,
    /// The OSTs it serves first (`osts`), and those it may take over (`failover_osts`).
    first: Vec<u32>,
    standby: Vec<u32>,
    /// Per OST it may serve, the end of the lease for it in nanoseconds since `epoch` (0:
    /// not served here): what the request path reads, without a lock.
    served_until_ns: BTreeMap<u32, AtomicU64>,
    epoch: Instant,
    holder: Mutex<LeaseHolder>,
    /// The OSTs open here now.
    open: Mutex<BTreeSet<u32>>,
    oss: Arc<Oss>,
    locks: Arc<LockService>,
    mgs: Arc<MgsPeers>,
}

impl Failover {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        fsname: &str,
        address: &str,
        data_dir: PathBuf,
        first: Vec<u32>,
        standby: Vec<u32>,
        oss: Arc<Oss>,
        locks: Arc<LockService>,
        mgs: Arc<MgsPeers>,
    ) -> Arc<Failover> {
        let served_until_ns = first.iter().chain(&standby).map(|&i| (i, AtomicU64::new(0))).collect();
        Arc::new(Failover {
            fsname: fsname.to_string(),
            address: address.to_string(),
            data_dir,
            first,
            standby,
            served_until_ns,
            epoch: Instant::now(),
            holder: Mutex::new(LeaseHolder::new(Duration::from_millis(LEASE_MARGIN_MS))),
            open: Mutex::new(BTreeSet::new()),
            oss,
            locks,
            mgs,
        })
    }

    /// Whether OST `ost` is one this process may serve under its lease.
    pub fn covers(&self, ost: u32) -> bool {
        self.served_until_ns.contains_key(&ost)
    }

    /// Whether a request to OST `ost` may be served here now; else the `Moved` answer that
    /// sends the client to the map (another server serves it, or will).
    pub fn check(&self, ost: u32) -> WeftResult<()> {
        let Some(until) = self.served_until_ns.get(&ost) else { return Ok(()) };
        let now = self.epoch.elapsed().as_nanos() as u64;
        if now < until.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(WeftError::new(
            ErrorCode::Moved,
            format!(
                "{} is not served here now: this server holds no lease for it (the cluster map names its server)",
                target_name(&self.fsname, TargetKind::Ost, ost)
            ),
        ))
    }

    fn holder(&self) -> std::sync::MutexGuard<'_, LeaseHolder> {
        self.holder.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes what the request path reads say what the holder decided.
    fn publish(&self) {
        let holder = self.holder().clone();
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let until_ns =
            holder.until().map_or(0, |u| u.checked_duration_since(self.epoch).map_or(0, |d| d.as_nanos() as u64));
        for (ost, slot) in &self.served_until_ns {
            let served = holder.holds().contains(ost) && open.contains(ost);
            slot.store(if served { until_ns } else { 0 }, Ordering::Release);
        }
    }

    fn target(&self, index: u32) -> TargetInfo {
        TargetInfo { leased: true, ..TargetInfo::new(TargetKind::Ost, index, self.address.clone()) }
    }

    /// At start: registers every OST this process may serve (claiming those it serves
    /// first), then renews once, which opens the OSTs the map gives it.
    pub async fn start(self: &Arc<Self>) -> anyhow::Result<()> {
        let timeout = self.mgs.options().request_timeout;
        for (&index, serve) in self.first.iter().map(|i| (i, true)).chain(self.standby.iter().map(|i| (i, false))) {
            let op = mgs::ClaimTarget { target: self.target(index), serve };
            self.mgs.op(crate::header(), op, timeout).await.map_err(|e| {
                anyhow::anyhow!(
                    "cannot register {} with the management service: {}",
                    target_name(&self.fsname, TargetKind::Ost, index),
                    e.message
                )
            })?;
        }
        let sent = Instant::now();
        let grant = self
            .mgs
            .op(crate::header(), mgs::RenewLease { server: self.address.clone() }, timeout)
            .await
            .map_err(|e| anyhow::anyhow!("the management service did not grant a lease: {}", e.message))?;
        self.granted(sent, grant).await;
        Ok(())
    }

    /// Renews the lease every [`LEASE_RENEW_MS`] for as long as the process runs.
    pub async fn run(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(LEASE_RENEW_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tick.tick().await;
            let sent = Instant::now();
            let op = mgs::RenewLease { server: self.address.clone() };
            match self.mgs.op(crate::header(), op, Duration::from_millis(LEASE_RENEW_TIMEOUT_MS)).await {
                Ok(grant) => {
                    if failing {
                        tracing::info!("the management service renews this server's lease again");
                    }
                    failing = false;
                    self.granted(sent, grant).await;
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(
                            "the management service did not renew this server's lease ({}): its failover OSTs stop being served when it runs out",
                            e.message
                        );
                    }
                    // Nothing to close: the request path refuses what ran out (fencing), and
                    // the OST stays open here, its clients' locks with it, should the next
                    // grant cover it again (nobody else may have served it meanwhile: the
                    // map would not name this server).
                    failing = true;
                }
            }
        }
    }

    /// Applies a granted renewal sent at `sent`.
    async fn granted(&self, sent: Instant, grant: LeaseGrant) {
        let lease = Duration::from_millis(grant.lease_ms);
        self.holder().granted(sent, lease, &grant.holds);
        // Refused at once for what the lease no longer covers, then closed.
        self.publish();
        let open: Vec<u32> = self.open.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect();
        for ost in open.into_iter().filter(|o| !grant.holds.contains(o)) {
            self.close(ost);
        }
        for &ost in &grant.holds {
            // At start, or moved here by hand: an OST served before may have clients that
            // cache under its locks, which get a restart's window (as a single server's).
            self.open_ost(ost, Duration::from_millis(crate::limits::LOCK_RECOVERY_MS)).await;
        }
        let timeout = Duration::from_millis(LEASE_RENEW_TIMEOUT_MS);
        for (ost, to) in &grant.release {
            // Not covered any more, so closed above: the other server may start.
            let op = mgs::HandOver { kind: TargetKind::Ost, index: *ost, from: self.address.clone(), to: to.clone() };
            match self.mgs.op(crate::header(), op, timeout).await {
                Ok(_) => tracing::info!(ost, %to, "handed the OST over, as an admin asked"),
                Err(e) => {
                    tracing::warn!(ost, %to, "handing the OST over failed (asked again at the next renewal): {e}")
                }
            }
        }
        for &ost in grant.orphaned.iter().filter(|o| self.covers(**o)) {
            let op = mgs::ClaimTarget { target: self.target(ost), serve: true };
            match self.mgs.op(crate::header(), op, timeout).await {
                Ok(map) if map.target(TargetKind::Ost, ost).is_some_and(|t| t.address == self.address) => {
                    tracing::warn!(ost, "taking over the OST: its server's lease lapsed");
                    self.holder().add(ost);
                    self.open_ost(ost, Duration::from_millis(OST_TAKEOVER_LOCK_RECOVERY_MS)).await;
                }
                Ok(_) => tracing::info!(ost, "another server took the OST over first"),
                Err(e) => tracing::warn!(ost, "claiming the OST failed: {e}"),
            }
        }
    }

    /// Opens OST `ost` here if it is not open, its lock namespace holding grants back for
    /// `recovery` (the clients replay their locks meanwhile), and serves it.
    async fn open_ost(&self, ost: u32, recovery: Duration) {
        if !self.open.lock().unwrap_or_else(|p| p.into_inner()).contains(&ost) {
            let cfg = OstConfig { index: ost, dir: self.data_dir.join(format!("ost{ost:04x}")) };
            // A new OST had no clients: nothing to wait for.
            let recovery = if weft_oss::formatted(&cfg.dir) { recovery } else { Duration::ZERO };
            if let Err(e) = self.oss.add_ost(&cfg) {
                // Held but not served, it would be lost to the clients for as long as this
                // server lives: marked down instead, which its first server's next start,
                // or `weft failover` to a server that can open it, ends.
                tracing::error!(
                    ost,
                    dir = %cfg.dir.display(),
                    "cannot open the OST this server is to serve ({e}): marking it down in the cluster map"
                );
                let op = mgs::SetTargetState { kind: TargetKind::Ost, index: ost, state: TargetState::Down };
                if let Err(e) = self.mgs.op(crate::header(), op, Duration::from_millis(LEASE_RENEW_TIMEOUT_MS)).await {
                    tracing::warn!(ost, "marking the OST down failed: {e}");
                }
                return;
            }
            self.locks.add_ost(ost, recovery);
            self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(ost);
            tracing::info!(ost, "serving the OST");
        }
        self.publish();
    }

    /// Stops serving OST `ost` here (refused first, then closed).
    fn close(&self, ost: u32) {
        if !self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&ost) {
            return;
        }
        self.publish();
        self.oss.stop_ost(ost);
        self.locks.remove_ost(ost);
        tracing::warn!(ost, "stopped serving the OST: the lease no longer covers it");
    }

    /// `obdfilter.OST.failover_status`: whether this server serves OST `ost` now, how long
    /// its lease covers it still, and whether it is a server it serves first or stands by for.
    pub fn status_text(&self, ost: u32) -> String {
        let now = Instant::now();
        let holder = self.holder().clone();
        let serving = self.check(ost).is_ok();
        let left_ms = match holder.until() {
            Some(u) if holder.holds().contains(&ost) => u.saturating_duration_since(now).as_millis(),
            _ => 0,
        };
        let role = if self.first.contains(&ost) { "first" } else { "failover" };
        format!(
            "serving: {}\nlease_left_ms: {left_ms}\nthis_server: {} ({role})\n",
            if serving { "yes" } else { "no" },
            self.address
        )
    }

    /// The OSTs this process may serve, for the parameter tree.
    pub fn all(&self) -> Vec<u32> {
        self.served_until_ns.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(4);

    #[test]
    fn a_lease_counts_from_the_send_less_the_margin_and_covers_what_the_answer_named() {
        let t0 = Instant::now();
        let mut h = LeaseHolder::new(Duration::from_secs(1));
        assert!(!h.serves(2, t0), "nothing before a grant");
        h.granted(t0, LEASE, &[2]);
        assert!(h.serves(2, t0 + Duration::from_millis(2_999)));
        assert!(!h.serves(2, t0 + Duration::from_secs(3)), "fenced a margin before the MGS's end");
        assert!(!h.serves(3, t0), "only what the answer named");
        // A renewal answered late (sent at t0 + 1 s, answered at t0 + 2.5 s) counts from its send.
        h.granted(t0 + Duration::from_secs(1), LEASE, &[2, 3]);
        assert!(h.serves(3, t0 + Duration::from_millis(3_999)));
        assert!(!h.serves(3, t0 + Duration::from_secs(4)));
        // The MGS gave OST 2 away: the next grant does not cover it, even within the lease.
        h.granted(t0 + Duration::from_millis(1_500), LEASE, &[3]);
        assert!(!h.serves(2, t0 + Duration::from_millis(1_600)));
        h.add(2);
        assert!(h.serves(2, t0 + Duration::from_millis(1_600)), "claimed after the answer");
    }

    #[test]
    fn a_holder_cut_off_stops_before_the_mgs_may_grant_its_ost_elsewhere() {
        // The holder's last renewal left at `sent` and arrived `delay` later; the MGS grants
        // the OST elsewhere from arrival + lease. Whatever the delay, the holder stopped by then.
        let margin = Duration::from_millis(LEASE_MARGIN_MS);
        let lease = Duration::from_millis(weft_mgs::limits::LEASE_MS);
        let sent = Instant::now();
        let mut h = LeaseHolder::new(margin);
        h.granted(sent, lease, &[0]);
        for delay_ms in [0, 1, 100, 1_000, 3_000] {
            let mgs_grants_at = sent + Duration::from_millis(delay_ms) + lease;
            assert!(!h.serves(0, mgs_grants_at), "delay {delay_ms} ms");
            assert!(!h.serves(0, mgs_grants_at - margin + Duration::from_nanos(1)));
        }
        // A wall-clock jump changes nothing: only Instants are compared.
        assert!(h.serves(0, sent + lease - margin - Duration::from_millis(1)));
    }
}
