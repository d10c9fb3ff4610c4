//! Runs the server roles a config file names (management, metadata, object storage) in one
//! process, behind one listening address: `weft server --config FILE` on a real cluster, and
//! every role at once under `weft up`.
//!
//! ```text
//!            ┌──────────── one server process ─────────────┐
//! TCP ─▶ weft-rpc Server (decode → authorize → schedule → execute → reply → account)
//!        (a Peer of this process's weft_rpc::Network enters at authorize)
//!                        │ Router: by the target the request names
//!              ┌─────────┼──────────────┐
//!              ▼         ▼              ▼
//!             Mgs    Mds (MDT n)    Oss (OST i, j, ...)
//!                        │ precreate / destroy via Peer to the OSTs' servers
//! ```
//!
//! Every target registers with the MGS at start (also when the MGS is in the same process,
//! so that one code path serves both shapes), and the MDS follows the cluster map
//! (`weft_rpc::map::MapFollower`).

pub mod config;
mod dashboard;
mod dashboard_zones;
mod decay;
mod failover;
mod fileset;
pub mod limits;
mod locks;
mod metrics;
mod monitor;
mod nodemap;
mod params;
mod params_osp;
mod replicated;
mod replicated_mgs;
mod reservations;
mod resync;
mod router;
mod sources;
mod targets;

pub use config::ServerConfig;

use crate::limits::{GLOBAL_REPORT_MS, LOCK_RECOVERY_MS};
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use weft_mds::{Mds, MdsConfig};
use weft_mgs::Mgs;
use weft_oss::{Oss, OssConfig, OstConfig};
use weft_proto::layout::dom_target;
use weft_proto::msg::*;
use weft_rpc::map::MapFollower;
use weft_rpc::mgs::MgsPeers;
use weft_rpc::{Network, PeerOptions, Server, ServerLimits};

/// A running server process: its address and the services it hosts.
pub struct RunningServer {
    pub address: String,
    /// Where the metrics endpoint listens (`http://ADDRESS/metrics`), if the config asks for
    /// one.
    pub metrics_address: Option<String>,
    pub config: ServerConfig,
    server: Arc<Server>,
    /// The network this process's servers and clients reach each other on.
    network: Arc<Network>,
    mds: Arc<replicated::MdsSlot>,
    /// A replicated MDT's group, which this process's replica takes part in.
    mdt_group: Option<weft_raft::Group>,
    /// The management service run here, and a replicated MGS's group.
    mgs: Option<Arc<Mgs>>,
    mgs_group: Option<weft_raft::Group>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningServer {
    /// Starts every role the config names and registers its targets with the MGS.
    /// Returns once the listener is up and the targets are registered. The process's
    /// clients reach it in-process through [`RunningServer::network`].
    pub async fn start(config: ServerConfig) -> anyhow::Result<RunningServer> {
        RunningServer::start_on(config, Network::new()).await
    }

    /// As [`RunningServer::start`], on `network`: the server is registered there, and its
    /// own requests (to the MGS, to the OSTs) and its callbacks go through it (a simulation's
    /// wire, or another server of the same process).
    pub async fn start_on(config: ServerConfig, network: Arc<Network>) -> anyhow::Result<RunningServer> {
        RunningServer::start_with_stores(config, network, None).await
    }

    /// As [`RunningServer::start_on`], its OSTs over `ost_stores` (index, store) instead of
    /// directories when given: for tests and simulations that keep objects in memory and
    /// take them back to what a power loss keeps (`weft_oss::store::MemStore`).
    pub async fn start_with_stores(
        config: ServerConfig,
        network: Arc<Network>,
        ost_stores: Option<Vec<(u32, Box<dyn weft_oss::store::ObjectStore>)>>,
    ) -> anyhow::Result<RunningServer> {
        config.validate()?;
        if let Some(path) = &config.key {
            // The node's key: its servers require it and its peers prove it (the process
            // is the node, as a Lustre node has one keyring).
            let key = weft_rpc::secure::SharedKey::load(path).map_err(|e| anyhow::anyhow!("{}", e.message))?;
            weft_rpc::secure::set_process_key(Some(key)).map_err(|e| anyhow::anyhow!("{}", e.message))?;
        }
        // Targets that existed before this start had clients, which may cache under locks
        // this process does not know: hold grants back until they noticed the restart.
        let mdt_dir = |index: u32| config.data_dir.join(format!("mdt{index:04x}"));
        let ost_dir = |index: u32| config.data_dir.join(format!("ost{index:04x}"));
        let restarted = config.mds.as_ref().is_some_and(|m| mdt_dir(m.index).exists())
            || config.oss.as_ref().is_some_and(|o| o.osts.iter().any(|&i| ost_dir(i).exists()))
            || ost_stores.iter().flatten().any(|(_, store)| store.commit_record().starts > 0);
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create data directory {}", config.data_dir.display()))?;
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let address = listener.local_addr()?.to_string();
        // With port 0 in `listen`, the MGS address may be our own: resolve it.
        let mgs_address = config.mgs_addresses(&address);

        // A single MGS serves from the start; a replicated MGS's replica while it leads its
        // group (replicated_mgs.rs).
        let mut mgs_group = None;
        let mgs = match &config.mgs {
            Some(m) => {
                let dir = config.data_dir.join("mgs");
                let opened = match m.group(&config.listen)? {
                    None => Mgs::open(&dir, &config.fsname),
                    Some(_) => Mgs::open_replica(&dir, &config.fsname),
                };
                let mgs = opened.map_err(|e| anyhow::anyhow!("management service: {}", e.message))?;
                if let Some((node_id, members)) = m.group(&config.listen)? {
                    let group_config = weft_raft::GroupConfig::new(GroupId::Mgs, node_id, members, dir.join("raft"));
                    let machine = Arc::new(replicated::Machine(mgs.clone()));
                    let group = weft_raft::Group::start(group_config, machine, Some(network.clone()))
                        .await
                        .map_err(|e| anyhow::anyhow!("the MGS's replicated group: {}", e.message))?;
                    mgs_group = Some(group);
                }
                Some(mgs)
            }
            None => None,
        };
        let oss = match (&config.oss, ost_stores) {
            (Some(_), Some(stores)) => Some(
                Oss::with_stores(&config.fsname, stores)
                    .map_err(|e| anyhow::anyhow!("object storage service: {}", e.message))?,
            ),
            (Some(o), None) => Some(
                Oss::open(OssConfig {
                    fsname: config.fsname.clone(),
                    // A failover node opens its OSTs once the management service says it
                    // serves them (failover.rs).
                    osts: match o.fails_over() {
                        true => Vec::new(),
                        false => o.osts.iter().map(|&index| OstConfig { index, dir: ost_dir(index) }).collect(),
                    },
                })
                .map_err(|e| anyhow::anyhow!("object storage service: {}", e.message))?,
            ),
            (None, _) => None,
        };
        // The MDT's data-on-MDT objects: a hidden object target inside its directory.
        let dom = match &config.mds {
            Some(m) => Some(
                Oss::open(OssConfig {
                    fsname: config.fsname.clone(),
                    osts: vec![OstConfig { index: dom_target(m.index), dir: mdt_dir(m.index).join("dom") }],
                })
                .map_err(|e| anyhow::anyhow!("data on the MDT: {}", e.message))?,
            ),
            None => None,
        };
        let peer_opts = PeerOptions { network: Some(network.clone()), ..PeerOptions::default() };
        let mgs_peer = Arc::new(MgsPeers::new(&mgs_address, peer_opts.clone()));
        let object_targets = Arc::new(targets::NetTargets::new(peer_opts.clone(), dom.clone()));
        // A single MDT's MDS runs from the start; a replicated MDT's runs while this replica
        // leads its group (replicated.rs).
        let mut replica = None;
        let mut mdt_group = None;
        let mds = match &config.mds {
            Some(m) => match m.group(&config.listen)? {
                None => Some(
                    Mds::open(MdsConfig::new(mdt_dir(m.index), m.index), object_targets.clone())
                        .map_err(|e| anyhow::anyhow!("metadata service: {}", e.message))?,
                ),
                Some((node_id, members)) => {
                    let r = weft_mds::replica::Replica::open(mdt_dir(m.index), m.index)
                        .map_err(|e| anyhow::anyhow!("MDT replica: {}", e.message))?;
                    let group_config = weft_raft::GroupConfig::new(
                        GroupId::Mdt(m.index),
                        node_id,
                        members,
                        mdt_dir(m.index).join("raft"),
                    );
                    let machine = Arc::new(replicated::Machine(r.clone()));
                    let group = weft_raft::Group::start(group_config, machine, Some(network.clone()))
                        .await
                        .map_err(|e| anyhow::anyhow!("the MDT's replicated group: {}", e.message))?;
                    replica = Some(r);
                    mdt_group = Some(group);
                    None
                }
            },
            None => None,
        };
        let mds_slot = replicated::MdsSlot::holding(mds.clone());

        let exports = Arc::new(weft_rpc::Exports::with_clients(network.clients().clone()));
        let mdt_index = config.mds.as_ref().map(|m| m.index);
        let ost_indices = oss.as_ref().map(|o| o.ost_indices()).unwrap_or_default();
        // Extent locks on data-on-MDT objects are the MDT server's, as an OST's are its.
        let object_locks: Vec<u32> = ost_indices.iter().copied().chain(mdt_index.map(dom_target)).collect();
        let locks = locks::LockService::new(
            exports.clone(),
            mdt_index,
            &object_locks,
            Duration::from_millis(config.lock_timeout_ms),
            restarted.then_some(Duration::from_millis(LOCK_RECOVERY_MS)),
        );
        // A restarted single MDT's window waits for the clients it recorded: it lasts until
        // the MDT is registered (the clients cannot know of the restart before), then until
        // they replayed, LOCK_RECOVERY_MS at most (below), when the missing are evicted.
        let restarted_mdt = match (&locks.mdt, &mdt_group) {
            (Some((_, ns)), None) if restarted => {
                ns.hold_grants_for(Duration::from_millis(limits::FAILOVER_REGISTER_WAIT_MS));
                Some(ns.clone())
            }
            _ => None,
        };
        if let (Some(mds), Some((_, ns))) = (&mds, &locks.mdt) {
            mds.set_lock_namespace(ns.clone());
        }
        let mdt_locks = locks.clone();
        let schedulers = Arc::new(weft_rpc::schedule::Schedulers::default());
        let mut services = Vec::new();
        if mgs.is_some() {
            services.push(Service::Mgs);
        }
        if config.mds.is_some() {
            services.push(Service::Mdt);
        }
        if mdt_group.is_some() || mgs_group.is_some() {
            services.push(Service::Raft);
        }
        if oss.is_some() || dom.is_some() {
            services.extend([Service::OstIo, Service::Ost]);
        }
        if config.mds.is_some() || oss.is_some() {
            services.push(Service::Ldlm);
        }
        // Per job, user and group, on each target: job_stats, the metrics, the budgets.
        let jobstats = Arc::new(weft_rpc::jobstats::JobStats::default());
        let mut targets: Vec<(TargetKind, u32)> = mdt_index.map(|i| (TargetKind::Mdt, i)).into_iter().collect();
        targets.extend(ost_indices.iter().map(|&i| (TargetKind::Ost, i)));
        // The failover OSTs this node may serve, served or not (`recovery_status` says).
        let failover = match (&config.oss, &oss) {
            (Some(o), Some(oss)) if o.fails_over() => Some(failover::Failover::new(
                &config.fsname,
                &address,
                config.data_dir.clone(),
                o.osts.clone(),
                o.failover_osts.clone(),
                oss.clone(),
                locks.clone(),
                mgs_peer.clone(),
            )),
            _ => None,
        };
        if let Some(f) = &failover {
            targets.extend(f.all().into_iter().map(|i| (TargetKind::Ost, i)));
        }
        let identities = Arc::new(nodemap::Identities::default());
        let params = Arc::new(params::Params::new(
            schedulers.clone(),
            services.clone(),
            jobstats.clone(),
            params::Served {
                mds: mds_slot.clone(),
                groups: params::ReplicaGroups { mdt: mdt_group.clone(), mgs: mgs_group.clone() },
                locks: locks.clone(),
                failover: failover.clone(),
                identities: identities.clone(),
            },
            &config.fsname,
            targets,
        ));
        let exports_for_metrics = exports.clone();
        let exports_for_mgs = exports.clone();
        let mgs_for_monitor = mgs.clone();
        let router = Arc::new(router::Router {
            mgs: mgs.clone(),
            mgs_group: mgs_group.clone(),
            mds: mds_slot.clone(),
            replicated: mdt_group.is_some(),
            mdt_group: mdt_group.clone(),
            mdt_index,
            oss: oss.clone(),
            dom: dom.clone(),
            failover: failover.clone(),
            locks,
            params: params.clone(),
            identities: identities.clone(),
        });
        let server = Server::with_parts(router.clone(), ServerLimits::default(), exports, schedulers.clone());
        server.add_account(jobstats.clone());
        let mut tasks = vec![server.serve(listener)];
        let mut metrics_address = None;
        // Server processes this one reaches as a client: the monitor's and the dashboard's.
        let peers = Arc::new(weft_rpc::map::PeerSet::new(peer_opts.clone()));
        if let Some(at) = &config.metrics_listen {
            let listener = tokio::net::TcpListener::bind(at)
                .await
                .with_context(|| format!("cannot listen for metrics on {at}"))?;
            metrics_address = Some(listener.local_addr()?.to_string());
            let sources = Arc::new(sources::Sources {
                peers: peers.clone(),
                fsname: config.fsname.clone(),
                services: services.clone(),
                stats: server.stats(),
                jobs: jobstats,
                schedulers: schedulers.clone(),
                exports: exports_for_metrics,
                router,
                mgs: mgs_peer.clone(),
            });
            tasks.push(tokio::spawn(metrics::serve(listener, sources)));
        }
        // Clients and servers of this process (`weft up`: the mount, the MDS towards the
        // OSTs, registration with our own MGS) reach us without TCP; other processes use TCP.
        network.register_server(&address, &server);

        let monitor_interval = Duration::from_secs(config.monitor_interval_s);
        // The monitor runs beside every MGS, each replica of a replicated one too: each keeps
        // its own history, so a new leader's holds what happened before it led.
        if let Some(mgs) = mgs_for_monitor.as_ref().filter(|_| !monitor_interval.is_zero()) {
            tasks.push(tokio::spawn(monitor::run(mgs.clone(), peers.clone(), monitor_interval)));
        }
        if let (Some(mgs), Some(group)) = (mgs_for_monitor, &mgs_group) {
            // A replicated MGS serves while it leads: hosted before this process registers and
            // fetches the map, which may need this replica.
            tasks.push(replicated_mgs::host(replicated_mgs::MgsHosting::new(mgs), group.clone()));
        }

        // Register our targets with the MGS; it may not be up yet on a real cluster.
        let mut targets = Vec::new();
        if let (Some(m), None) = (&config.mds, &mdt_group) {
            // A replicated MDT's leader registers it once it serves.
            targets.push((TargetKind::Mdt, m.index));
        }
        if let (Some(o), None) = (&oss, &failover) {
            targets.extend(o.ost_indices().into_iter().map(|i| (TargetKind::Ost, i)));
        }
        // In one change of the map: a server of many OSTs would otherwise move it once per
        // OST, and every process following the map would fetch each version.
        let infos: Vec<TargetInfo> =
            targets.iter().map(|&(kind, index)| TargetInfo::new(kind, index, address.clone())).collect();
        if !infos.is_empty() {
            let timeout = mgs_peer.options().request_timeout;
            let registered = mgs_peer.op(header(), mgs::RegisterTargets { targets: infos }, timeout).await;
            registered.map_err(|e| {
                anyhow::anyhow!(
                    "cannot register {} target(s) with the management service at {mgs_address}: {}",
                    targets.len(),
                    e.message
                )
            })?;
        }
        // The clients learn of the restart now: the MDT's have this long to replay.
        if let Some(ns) = restarted_mdt {
            ns.end_recovery_when_replayed(Duration::from_millis(LOCK_RECOVERY_MS));
        }
        // A failover node claims its OSTs, and serves those the map gives it under its lease.
        if let Some(f) = &failover {
            f.start().await.with_context(|| format!("management service at {mgs_address}"))?;
            tasks.push(tokio::spawn(f.clone().run()));
        }

        // Every process follows the map: the MDS for the OSTs it places files on, all of
        // them for the permanent parameters (`set-param -P`).
        let follower = MapFollower::start(mgs_peer.clone(), peer_opts.request_timeout)
            .await
            .map_err(|e| anyhow::anyhow!("cannot fetch the cluster map from {mgs_address}: {}", e.message))?;
        let mut changes = follower.subscribe();
        let mut applied = Vec::new();
        let mut osts_seen = std::collections::BTreeSet::new();
        {
            let state = changes.borrow_and_update().clone();
            // Root squash first: the nodemaps' arrival lets requests run.
            params.apply_records(&state.map.params, &mut applied);
            identities.set_nodemaps(&state.map.nodemap);
            if let Some(mds) = &mds {
                mds.set_cluster_map(&state.map);
                params.apply_to_new_osts(&state.map.params, &mut osts_seen);
            }
        }
        if config.mds.is_some() {
            object_targets.follow(follower.clone());
        }
        if oss.is_some() {
            // Bandwidth reservations active on this process's OSTs, as TBF rules.
            tasks.push(tokio::spawn(reservations::run(params.clone(), follower.subscribe(), address.clone())));
        }
        if let Some(mds) = &mds {
            // Data on the MDT is not replicated yet: a replicated MDT hands out no DoM objects.
            mds.serve_dom();
        }
        if let (Some(r), Some(group), Some(m)) = (replica, &mdt_group, &config.mds) {
            let (dir, index) = (mdt_dir(m.index), m.index);
            tasks.push(tokio::spawn(replicated::run(replicated::Hosting {
                service: replicated::MdtHosting {
                    replica: r,
                    slot: mds_slot.clone(),
                    // Clients replay their opens within the window their locks have.
                    mds_config: Box::new(move || MdsConfig {
                        open_replay_window: Some(Duration::from_millis(limits::FAILOVER_REGISTER_WAIT_MS)),
                        // Its data would live on one replica's disk: -L mdt goes to an OST.
                        data_on_mdt: false,
                        ..MdsConfig::new(dir.clone(), index)
                    }),
                    targets: object_targets.clone(),
                    locks: mdt_locks,
                    mgs: mgs_peer.clone(),
                    address: address.clone(),
                    map: follower.subscribe(),
                },
                group: group.clone(),
                election_timeout_min: Duration::from_millis(weft_raft::limits::ELECTION_TIMEOUT_MS_MIN_DEFAULT),
                heartbeat: Duration::from_millis(weft_raft::limits::HEARTBEAT_MS_DEFAULT),
                checkpoint_interval: Duration::from_millis(weft_mds::limits::CHECKPOINT_INTERVAL_MS),
            })));
        }
        let mds_follows = config.mds.is_some().then(|| mds_slot.clone());
        let (object_targets, params, identities) = (object_targets.clone(), params.clone(), identities.clone());
        tasks.push(tokio::spawn(async move {
            let _follower = follower;
            while changes.changed().await.is_ok() {
                let state = changes.borrow_and_update().clone();
                // Root squash first: the nodemaps' arrival lets requests run.
                params.apply_records(&state.map.params, &mut applied);
                identities.set_nodemaps(&state.map.nodemap);
                if let Some(slot) = &mds_follows {
                    object_targets.peers.retain_map(&state);
                    if let Some(mds) = slot.get() {
                        mds.set_cluster_map(&state.map);
                        params.apply_to_new_osts(&state.map.params, &mut osts_seen);
                    }
                }
            }
        }));
        if config.mds.is_some() {
            // Synchronous mirrors that went stale, resynced once their OSTs are back.
            tasks.push(tokio::spawn(resync::run(mds_slot.clone(), config.mgs_addresses(&address))));
        }
        for objects in [&oss, &dom].into_iter().flatten() {
            let interval = Duration::from_millis(config.commit_interval_ms.max(1));
            tasks.push(tokio::spawn(commit_periodically(Arc::downgrade(objects), interval)));
        }
        tasks.push(tokio::spawn(report_evictions(mgs_peer.clone(), exports_for_mgs)));
        tasks.push(tokio::spawn(report_global_demand(mgs_peer.clone(), address.clone(), services, schedulers)));
        tracing::info!("serving {} on {address}", config.roles_text());
        Ok(RunningServer {
            address,
            metrics_address,
            config,
            server,
            network,
            mds: mds_slot,
            mdt_group,
            mgs,
            mgs_group,
            tasks,
        })
    }

    /// The management service's address, or a replicated one's addresses (`a:p,b:p,c:p`):
    /// what a client is given.
    pub fn mgs_address(&self) -> String {
        self.config.mgs_addresses(&self.address)
    }

    /// Where this process's replica of a replicated MGS stands in its group; None for a
    /// single MGS or none.
    pub fn mgs_group_status(&self) -> Option<weft_raft::GroupStatus> {
        self.mgs_group.as_ref().map(weft_raft::Group::status)
    }

    /// The network this server is registered on: a client given it reaches the server
    /// without TCP (`weft up`).
    pub fn network(&self) -> &Arc<Network> {
        &self.network
    }

    /// Where this process's replica of a replicated MDT stands in its group (role, term,
    /// leader, log positions); None for a single MDT or none.
    pub fn mdt_group_status(&self) -> Option<weft_raft::GroupStatus> {
        self.mdt_group.as_ref().map(weft_raft::Group::status)
    }

    /// Whether this process runs an MDS now (a replicated MDT's only while it leads).
    pub fn serves_mdt(&self) -> bool {
        self.mds.get().is_some()
    }

    /// This server's clients: callback routes and evictions.
    /// Requests this server answered since it started (every service, every op).
    pub fn requests_served(&self) -> u64 {
        self.requests_by_op().values().sum()
    }

    /// The same, per op name, for a report of what a server spends its messages on.
    pub fn requests_by_op(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.server.stats().snapshot().into_iter().map(|(op, s)| (op, s.samples)).collect()
    }

    pub fn exports(&self) -> Arc<weft_rpc::Exports> {
        self.server.exports()
    }

    /// The schedulers of this process's services, whose policies can be switched.
    pub fn schedulers(&self) -> &weft_rpc::schedule::Schedulers {
        self.server.schedulers()
    }

    /// Stops serving and lets the MDS commit what it has in flight.
    pub async fn shutdown(self) {
        if let (Some(mgs), Some(_)) = (&self.mgs, &self.mgs_group) {
            // First, while replies still go out: the map followers waiting here are told to
            // go to the next leader, and the monitor stops with the lead.
            mgs.follow();
        }
        self.server.shutdown();
        for t in &self.tasks {
            t.abort();
        }
        if let Some(mds) = self.mds.get() {
            mds.shutdown().await;
        }
        if let Some(group) = &self.mdt_group {
            group.shutdown().await;
        }
        if let Some(group) = &self.mgs_group {
            group.shutdown().await;
        }
    }
}

fn header() -> RequestHeader {
    // Server-to-server requests are not mutations of the namespace: no reply cache key needed.
    RequestHeader { client_id: 0, request_id: 0, reply_slot: 0, identity: Identity::root(), jobid: String::new() }
}

/// Every [`GLOBAL_REPORT_MS`], for each service whose TBF has global rules (`global=1`):
/// reports their demand here to the management service and takes this server's share. At
/// once, besides, when a job's requests come to wait here on a rule last reported idle (this
/// server holds only the idle reserve of its rate).
async fn report_global_demand(
    mgs: Arc<MgsPeers>,
    address: String,
    services: Vec<Service>,
    schedulers: Arc<weft_rpc::schedule::Schedulers>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(GLOBAL_REPORT_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = schedulers.global_report_wanted().notified() => {}
        }
        for &service in &services {
            let Some(tbf) = schedulers.tbf(service) else { continue };
            let rules = tbf.global_demands();
            if rules.is_empty() {
                continue;
            }
            let op = mgs::QosDemand { server: address.clone(), service, rules };
            // Within the report interval: a late answer is a stale share.
            match mgs.op(header(), op, Duration::from_millis(GLOBAL_REPORT_MS)).await {
                Ok(shares) => {
                    tbf.set_shares(&shares.0);
                    failing = false;
                }
                // The share in force stays until the management service answers again.
                Err(e) if !failing => {
                    tracing::warn!("global TBF rules: the management service did not divide them: {e}");
                    failing = true;
                }
                Err(_) => {}
            }
        }
    }
}

/// Tells the management service of each client this server evicts, so that the client's map
/// watch is answered `Evicted` (an idle client learns it without pinging this server). At
/// most [`weft_mgs::limits::EVICTIONS_PER_REPORT_MAX`] per report; a report the MGS does not
/// take is not sent again (the client learns it at its next request here instead).
/// Commits the OSTs' writes every `interval` (the config's `commit_interval_ms`, by default
/// [`limits::OST_COMMIT_INTERVAL_MS`]; weft-oss commit.rs): what a power loss can take
/// back is this interval's writes, which their clients keep to replay. Ends with the OSS.
async fn commit_periodically(oss: std::sync::Weak<Oss>, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(oss) = oss.upgrade() else { return };
        // Syncs block: off the async threads.
        if tokio::task::spawn_blocking(move || oss.commit_all()).await.is_err() {
            return;
        }
    }
}

async fn report_evictions(mgs: Arc<MgsPeers>, exports: Arc<weft_rpc::Exports>) {
    let mut count = exports.watch_evictions();
    let mut reported = *count.borrow_and_update();
    while count.changed().await.is_ok() {
        let now = *count.borrow_and_update();
        let new = usize::try_from(now - reported).unwrap_or(usize::MAX);
        reported = now;
        let client_ids = exports.evicted_last(new.min(weft_mgs::limits::EVICTIONS_PER_REPORT_MAX));
        let timeout = mgs.options().request_timeout;
        if let Err(e) = mgs.op(header(), mgs::ClientsEvicted { client_ids }, timeout).await {
            tracing::warn!("could not tell the management service of an eviction: {e}");
        }
    }
}

pub(crate) async fn register(mgs: &MgsPeers, target: TargetInfo) -> anyhow::Result<()> {
    let timeout = mgs.options().request_timeout;
    let registered = mgs.op(header(), mgs::Register { target }, timeout).await;
    registered.map(drop).map_err(|e| anyhow::anyhow!("{}", e.message))
}
