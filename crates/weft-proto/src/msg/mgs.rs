//! The management service's operations (the MGS's): registration, the cluster map and
//! following it, target states, pools.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use super::target::TargetKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TargetState {
    Up,
    /// Known to the map but not serving (stopped cleanly, or marked down by an admin).
    Down,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub kind: TargetKind,
    pub index: u32,
    /// `host:port` of the server process that serves this target.
    pub address: String,
    pub state: TargetState,
    /// Every server process that may serve this target over the same storage (Lustre's
    /// service nodes, its failover NIDs), in the order they registered; empty for a target
    /// only its `address` serves. Shown by `weft status` and `osc.*.import`.
    #[serde(default)]
    pub servers: Vec<String>,
    /// Its server serves it only under a lease from the MGS (a failover OST): once that
    /// lease lapsed, another of `servers` may take the target over. A target registered
    /// without a lease is never taken from its server.
    #[serde(default)]
    pub leased: bool,
    /// How many times the target was registered or moved: the MGS adds one at each (a
    /// start, a restart, a takeover), so a client that sees it change knows the server
    /// behind the target forgot its locks and opens, and replays them (Lustre's imperative
    /// recovery: the MGS tells, nobody pings). What a server sends here is ignored.
    #[serde(default)]
    pub instance: u64,
}

impl TargetInfo {
    /// A target served at `address`, Up, with no failover servers.
    pub fn new(kind: TargetKind, index: u32, address: impl Into<String>) -> TargetInfo {
        TargetInfo {
            kind,
            index,
            address: address.into(),
            state: TargetState::Up,
            servers: Vec::new(),
            leased: false,
            instance: 0,
        }
    }

    /// Lustre's target name: `weft-OST0007`, `weft-MDT0000`.
    pub fn name(&self, fsname: &str) -> String {
        target_name(fsname, self.kind, self.index)
    }
}

pub fn target_name(fsname: &str, kind: TargetKind, index: u32) -> String {
    match kind {
        TargetKind::Mdt => format!("{fsname}-MDT{index:04x}"),
        TargetKind::Ost => format!("{fsname}-OST{index:04x}"),
    }
}

/// Everything a client or server needs to find every target. Clients learn it from the MGS
/// alone and refetch it when `version` moves or a target stops answering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ClusterMap {
    pub version: u64,
    pub fsname: String,
    pub targets: Vec<TargetInfo>,
    /// Pool name to OST indices.
    pub pools: BTreeMap<String, Vec<u32>>,
    /// Permanent parameters (`weft set-param -P`), in the order they were set: every
    /// server applies the ones it has, at start and when they change.
    #[serde(default)]
    pub params: Vec<ParamRecord>,
    /// Decay policies (`weft qos policy`): the management service throttles whoever used
    /// more than a budget in the current period.
    #[serde(default)]
    pub decay: Vec<DecayPolicy>,
    /// Pools whose new files' mirrors are written synchronously (`weft pool set POOL
    /// --sync-mirrors on`): a file made with mirrors, one of them in such a pool, gets
    /// `comp_flags::SYNC_MIRRORS` as with `weft mirror create --sync`.
    #[serde(default)]
    pub sync_mirror_pools: std::collections::BTreeSet<String>,
    /// A replicated MGS's voters (every replica's address), kept by its leader as its
    /// group's membership changes; empty for a single MGS. Clients and servers call those
    /// their `mgs_address` list does not name too (weft-rpc `MgsPeers::learn`).
    #[serde(default)]
    pub mgs_replicas: Vec<String>,
    /// The nodemaps (`weft nodemap`): which client addresses get which identity policy.
    /// Every server maps its requests by them (see [`crate::nodemap`]).
    #[serde(default)]
    pub nodemap: crate::nodemap::NodemapConfig,
    /// Bandwidth reservations: the OSTs' capacities and the plan (`weft qos reserve`).
    #[serde(default)]
    pub qos: crate::msg::qos::QosPlan,
}

/// A decay policy: within each period, whoever (a user or a job) used more than the
/// budget of bytes or of metadata operations runs at the fallback rates until the next
/// period starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecayPolicy {
    pub name: String,
    /// `user`, `group` or `job`.
    pub by: String,
    pub period_s: u64,
    /// Unix seconds the periods count from (when the policy was made).
    pub epoch: u64,
    /// Bytes read and written, and metadata operations, per period.
    pub budget_bytes: Option<u64>,
    pub budget_ops: Option<u64>,
    /// Requests per second on the OSS I/O services and on the MDS, over budget.
    pub rate: u64,
    pub mds_rate: u64,
    /// Only say what it would do.
    pub dry_run: bool,
}

impl DecayPolicy {
    /// The start of the period `now` (Unix seconds) falls in.
    pub fn period_start(&self, now: u64) -> u64 {
        let p = self.period_s.max(1);
        let since = now.saturating_sub(self.epoch);
        self.epoch + since - since % p
    }
}

/// One thing the decay engine did (or, in a dry run, would do), and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecayAction {
    /// Unix seconds.
    pub at: u64,
    pub policy: String,
    /// The user (uid) or job.
    pub key: String,
    /// `throttle`, `lift`, `would throttle`, `cannot throttle`.
    pub action: String,
    pub reason: String,
}

/// Decay actions, newest last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DecayActions(pub Vec<DecayAction>);

/// One permanent parameter setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamRecord {
    /// A name or a pattern (`ost.OSS.ost_io.nrs_policies`, `obdfilter.*.job_cleanup_interval`).
    pub name: String,
    pub value: String,
}

impl ClusterMap {
    pub fn target(&self, kind: TargetKind, index: u32) -> Option<&TargetInfo> {
        self.targets.iter().find(|t| t.kind == kind && t.index == index)
    }
    pub fn osts(&self) -> impl Iterator<Item = &TargetInfo> {
        self.targets.iter().filter(|t| t.kind == TargetKind::Ost)
    }
    pub fn mdts(&self) -> impl Iterator<Item = &TargetInfo> {
        self.targets.iter().filter(|t| t.kind == TargetKind::Mdt)
    }
    /// The server processes (their addresses, each once, sorted) that serve a target of
    /// `kind`, or any target.
    pub fn servers(&self, kind: Option<TargetKind>) -> Vec<String> {
        let set: std::collections::BTreeSet<&str> =
            self.targets.iter().filter(|t| kind.is_none_or(|k| t.kind == k)).map(|t| t.address.as_str()).collect();
        set.into_iter().map(String::from).collect()
    }
}

/// Every MGS operation (see [`mdt_ops!`](crate::mdt_ops) for the list's form).
#[macro_export]
macro_rules! mgs_ops {
    ($then:ident) => {
        $then! {
            MgsRequest / MgsReply;
            /// A server announces a target it serves (at start). Sparse indices are fine; an
            /// index already registered moves to the new address.
            write Register { target: $crate::msg::TargetInfo } -> $crate::msg::ClusterMap = "mgs_register";
            /// The map, if newer than `known_version` (0 = always).
            read GetMap { known_version: u64 } -> $crate::msg::MgsReply = "mgs_get_map";
            write SetTargetState {
                kind: $crate::msg::TargetKind,
                index: u32,
                state: $crate::msg::TargetState,
            } -> $crate::msg::ClusterMap = "mgs_set_state";
            /// Creates the pool if needed and adds the OSTs to it.
            write PoolAdd { pool: String, osts: Vec<u32> } -> $crate::msg::ClusterMap = "mgs_pool_add";
            /// Creates an empty pool (`lctl pool_new`); one of that name must not exist.
            write PoolNew { pool: String } -> $crate::msg::ClusterMap = "mgs_pool_new";
            /// Takes OSTs out of a pool (`lctl pool_remove`); each must be in it.
            write PoolRemove { pool: String, osts: Vec<u32> } -> $crate::msg::ClusterMap = "mgs_pool_remove";
            /// Removes an empty pool (`lctl pool_destroy`).
            write PoolDestroy { pool: String } -> $crate::msg::ClusterMap = "mgs_pool_destroy";
            /// The map once its version passes `known_version`, or `Unchanged` after
            /// `wait_ms` without a change (a long poll: followers learn a change when it
            /// happens, and ask once per `wait_ms` while nothing does). A client names
            /// itself in `client_id` (0: a server, or nobody): if a server evicted it, the
            /// answer is `Evicted` at once, so an idle client learns it without pinging.
            read WatchMap { known_version: u64, wait_ms: u32, client_id: u64 } -> $crate::msg::MgsReply = "mgs_watch_map";
            /// Adds a permanent parameter setting (replacing an earlier one of the same name,
            /// except rule commands, which add up), or with `delete` removes the settings
            /// whose names `name` matches.
            write SetParamRecord { name: String, value: String, delete: bool } -> $crate::msg::ClusterMap = "mgs_set_param";
            /// A server's measured demand on its global TBF rules (`global=1`) of one
            /// service; the answer is its share of each rule's rate. Sent about once a second
            /// by every server that has such rules; the MGS keeps it in memory only.
            read QosDemand {
                server: String,
                service: $crate::msg::service::Service,
                rules: Vec<$crate::msg::GlobalDemand>,
            } -> $crate::msg::GlobalShares = "mgs_qos_demand";
            /// From the monitor's history: each target's, job's or user's (`kind`) usage
            /// over the last `secs` seconds, busiest first, at most `top` of them (0: all);
            /// with `step` > 0 also over time, per `step` seconds.
            read History { kind: String, secs: u64, top: u32, step: u64 } -> $crate::msg::HistoryReply = "mgs_history";
            /// Adds a decay policy, or replaces the one of the same name (root only).
            write DecaySet { policy: $crate::msg::DecayPolicy } -> $crate::msg::ClusterMap = "mgs_decay_set";
            /// Removes a decay policy (root only); the limits it set are lifted.
            write DecayRemove { name: String } -> $crate::msg::ClusterMap = "mgs_decay_remove";
            /// The decay actions of the current periods: for `uid` (None: the caller's;
            /// root may ask for anyone's, or everyone's with `all`).
            read DecayWarnings { uid: Option<u32>, gids: Vec<u32>, all: bool } -> $crate::msg::DecayActions = "mgs_decay_warnings";
            /// A server process renews its one lease (about every 500 ms, whatever it
            /// serves): the answer names the failover OSTs it holds under it, those it may
            /// take over, and those it is asked to hand over. The MGS keeps leases in memory.
            read RenewLease { server: String } -> $crate::msg::LeaseGrant = "mgs_renew_lease";
            /// A server registers `target.address` as one that may serve the target
            /// (`target.leased`: it serves under its lease); with `serve`, it becomes the
            /// target's server unless another server holds it under a lease that has not
            /// lapsed. The map answered says who serves it.
            write ClaimTarget { target: $crate::msg::TargetInfo, serve: bool } -> $crate::msg::ClusterMap = "mgs_claim_target";
            /// An admin moves a failover target to `to`, another of its servers (`weft
            /// failover`): at once when its server's lease lapsed, else its server is asked
            /// to hand it over at its next renewal.
            write MoveTarget { kind: $crate::msg::TargetKind, index: u32, to: String } -> $crate::msg::ClusterMap = "mgs_move_target";
            /// The server `from` stopped serving the target it was asked to hand over:
            /// `to` serves it from now on.
            write HandOver { kind: $crate::msg::TargetKind, index: u32, from: String, to: String } -> $crate::msg::ClusterMap = "mgs_hand_over";
            /// A server evicted these clients (they did not answer a lock callback in time):
            /// the MGS answers their map watches `Evicted` (see `WatchMap`). Kept in memory.
            write ClientsEvicted { client_ids: Vec<u64> } -> () = "mgs_clients_evicted";
            /// A pool's settings (`weft pool set`): `sync_mirrors`, whether new files with a
            /// mirror in the pool write their mirrors synchronously. The pool must exist.
            write PoolSet { pool: String, sync_mirrors: bool } -> $crate::msg::ClusterMap = "mgs_pool_set";
            /// Changes the nodemaps (`weft nodemap ...`, root only): the map answered has them.
            write Nodemap { command: $crate::nodemap::NodemapCommand } -> $crate::msg::ClusterMap = "mgs_nodemap";
            /// Takes an OST out of the map (`weft del-ost`, root only; Lustre's `lctl del_ost`):
            /// the MDS and the clients forget it. The caller has checked that no MDT has
            /// objects left there; the MGS refuses an OST that is in a pool or is a failover
            /// OST.
            write RemoveTarget { kind: $crate::msg::TargetKind, index: u32 } -> $crate::msg::ClusterMap = "mgs_remove_target";
            /// As `Register`, for every target a server starts with, in one change of the
            /// map: a server of 250 OSTs moves the map once, not 250 times (every follower
            /// would fetch each version). All or none.
            write RegisterTargets { targets: Vec<$crate::msg::TargetInfo> } -> $crate::msg::ClusterMap = "mgs_register_targets";
            /// Sets the capacity of OSTs (`weft qos capacity`, `weft qos calibrate`; root
            /// only); a unit left None is cleared. Reservations already planned stay.
            write QosCapacity { osts: Vec<u32>, capacity: $crate::msg::qos::OstCapacity } -> $crate::msg::ClusterMap = "mgs_qos_capacity";
            /// Plans a reservation (`weft qos reserve`): at the earliest time its OSTs have
            /// room for it for its whole duration, or refused with the reason. `uid` is the
            /// caller's (the server's router sets it).
            write QosReserve { request: $crate::msg::qos::ReserveRequest, uid: u32 } -> $crate::msg::ClusterMap = "mgs_qos_reserve";
            /// Ends a reservation now (`weft qos cancel`; its owner or root): what it held is
            /// given back, and the reservations planned after it move earlier where they can.
            write QosCancel { id: String, uid: u32 } -> $crate::msg::ClusterMap = "mgs_qos_cancel";
        }
    };
}

/// The answer to a lease renewal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LeaseGrant {
    /// How long the lease holds, counted from when the renewal was sent; the server stops
    /// serving its failover OSTs a margin before.
    pub lease_ms: u64,
    /// The failover OSTs the map has this server serve: the lease covers these only.
    pub holds: Vec<u32>,
    /// Failover OSTs this server may serve whose server's lease lapsed: it may claim them.
    pub orphaned: Vec<u32>,
    /// OSTs an admin moved (`weft failover`): stop serving each, then hand it over to the
    /// server named.
    pub release: Vec<(u32, String)>,
}

/// One global TBF rule as one server measured it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalDemand {
    pub rule: String,
    /// The rule's rate for the whole file system (requests per second), and byte rate.
    pub rate: u64,
    pub bps: Option<u64>,
    /// Requests its classes started per second, over the last second.
    pub used: u64,
    /// Whether its classes wanted more: a request of theirs waited since the last report.
    pub backlogged: bool,
}

/// One server's share of global rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GlobalShares(pub Vec<GlobalShare>);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalShare {
    pub rule: String,
    pub rate: u64,
    pub bps: Option<u64>,
}

/// One series' usage over some time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UsageTotal {
    pub name: String,
    pub ops: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// What the monitor's history answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HistoryReply {
    /// The seconds the history's intervals last (the monitor's scrape interval).
    pub interval_s: u64,
    pub totals: Vec<UsageTotal>,
    /// With a step: (start of the step in Unix seconds, usage) per series, oldest first.
    pub series: Vec<(u64, UsageTotal)>,
    /// The step of `series`: the one asked, or the history's interval if that is longer.
    pub step_s: u64,
}

crate::mgs_ops!(define_ops);

crate::define_replies! {
    /// The MGS's answers.
    MgsReply {
        Map(ClusterMap),
        /// The caller's map is current: its version.
        Unchanged(u64),
        Shares(GlobalShares),
        History(HistoryReply),
        Actions(DecayActions),
        Lease(LeaseGrant),
        /// The client named in a `WatchMap` was evicted by a server: its locks are gone.
        Evicted,
        /// Done, nothing to tell (`ClientsEvicted`).
        Done = (),
    }
}

/// GetMap and WatchMap answer with one of several variants (`Map`, `Unchanged`, `Evicted`).
impl crate::msg::ops::Payload<MgsReply> for MgsReply {
    fn from_reply(reply: MgsReply) -> Result<Self, MgsReply> {
        Ok(reply)
    }
    fn into_reply(self) -> MgsReply {
        self
    }
}
