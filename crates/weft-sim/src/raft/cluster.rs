//! The servers of one seed of the replicated MDT's simulation (see the parent module): three
//! replicas of MDT 0 (and of the MGS, by the seed) and the OST's server, on one network
//! whose Raft messages the wire can cut; started, killed, restarted, partitioned, and
//! compared at the end.
use crate::net::wire::SimWire;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_proto::msg::TargetKind;
use weft_proto::ErrorCode;
use weft_rpc::{Network, PeerOptions};
use weft_server::config::{MdsRole, MgsRole};
use weft_server::{RunningServer, ServerConfig};

/// How often the simulation looks for the serving leader while an operation runs.
pub(super) const WATCH_MS: u64 = 20;
/// Replicas of the MDT.
pub(super) const REPLICAS: usize = 3;
/// How long a lock callback may take before the client is evicted.
pub(super) const LOCK_TIMEOUT_MS: u64 = 3_000;
/// How long the first election, or the replicas' agreement at the end, may take.
pub(super) const GROUP_WAIT_MS_MAX: u64 = 60_000;
/// How long a stopped server's store may stay open (its aborted tasks not yet dropped).
pub(super) const REOPEN_WAIT_MS_MAX: u64 = 10_000;

/// Who serves the MDT, as the operations go: failovers and the longest time without a
/// leader the others reach.
pub(super) struct Watch {
    pub(super) serving: Option<usize>,
    pub(super) without_since: Option<Instant>,
    pub(super) longest: Duration,
    pub(super) failovers: usize,
}

impl Watch {
    pub(super) fn new(serving: Option<usize>) -> Watch {
        Watch { serving, without_since: None, longest: Duration::ZERO, failovers: 0 }
    }

    /// The serving leader is gone now (killed).
    pub(super) fn lost(&mut self) {
        self.without_since.get_or_insert_with(Instant::now);
    }

    pub(super) fn observe(&mut self, cluster: &Cluster) {
        match cluster.serving() {
            None => {
                self.without_since.get_or_insert_with(Instant::now);
            }
            Some(i) => {
                if let Some(since) = self.without_since.take() {
                    self.longest = self.longest.max(since.elapsed());
                }
                if self.serving.is_some_and(|s| s != i) {
                    self.failovers += 1;
                    cluster.wire.note(format!("replica {i} serves the MDT now"));
                }
                self.serving = Some(i);
            }
        }
    }
}

/// The servers of one seed.
pub(super) struct Cluster {
    pub(super) wire: SimWire,
    pub(super) network: Arc<Network>,
    /// The OST's server (and a single MGS's).
    pub(super) ost: Option<RunningServer>,
    /// What clients are given: the MGS's address, or a replicated one's list.
    pub(super) mgs_address: String,
    pub(super) mgs_replicated: bool,
    pub(super) addresses: Vec<String>,
    pub(super) configs: Vec<ServerConfig>,
    pub(super) replicas: Vec<Option<RunningServer>>,
    /// The replica partitioned from the others now.
    pub(super) isolated: Option<usize>,
}

/// Addresses on loopback that nothing listens on now.
fn free_addresses(n: usize) -> Result<Vec<String>, String> {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("no free port on loopback: {e}"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("no address of a loopback port: {e}"))
}

impl Cluster {
    pub(super) async fn start(
        root: &std::path::Path,
        network: &Arc<Network>,
        wire: SimWire,
        mgs_replicated: bool,
    ) -> Result<Cluster, String> {
        let addresses = free_addresses(REPLICAS)?;
        wire.replicas(&addresses);
        let mut ost_config = ServerConfig::all_in_one(root.join("ost"), vec![0]);
        ost_config.mds = None;
        ost_config.lock_timeout_ms = LOCK_TIMEOUT_MS;
        let mut ost = None;
        let mgs_address = if mgs_replicated {
            ost_config.mgs = None;
            ost_config.mgs_address = addresses.join(",");
            ost_config.mgs_address.clone()
        } else {
            let server = RunningServer::start_on(ost_config.clone(), network.clone())
                .await
                .map_err(|e| format!("the MGS and OST's server did not start: {e:#}"))?;
            let address = server.mgs_address();
            ost = Some(server);
            address
        };
        let configs: Vec<ServerConfig> = (0..REPLICAS)
            .map(|i| {
                let mut c = ServerConfig::all_in_one(root.join(format!("r{i}")), Vec::new());
                c.listen = addresses[i].clone();
                if mgs_replicated {
                    c.mgs = Some(MgsRole { replicas: addresses.clone(), join: false });
                    c.mgs_address = String::new();
                } else {
                    c.mgs = None;
                    c.mgs_address = mgs_address.clone();
                }
                c.oss = None;
                c.mds = Some(MdsRole { index: 0, replicas: addresses.clone(), join: false });
                c.lock_timeout_ms = LOCK_TIMEOUT_MS;
                c
            })
            .collect();
        let mut cluster = Cluster {
            wire,
            network: network.clone(),
            ost,
            mgs_address,
            mgs_replicated,
            addresses,
            configs,
            replicas: Vec::new(),
            isolated: None,
        };
        // At once: a replica of a replicated MGS starts once the group has a leader.
        let starting: Vec<_> = (0..REPLICAS)
            .map(|i| tokio::spawn(RunningServer::start_on(cluster.configs[i].clone(), network.clone())))
            .collect();
        let mut failed = None;
        for (i, start) in starting.into_iter().enumerate() {
            match start.await {
                Ok(Ok(s)) => cluster.replicas.push(Some(s)),
                Ok(Err(e)) => {
                    cluster.replicas.push(None);
                    failed.get_or_insert(format!("replica {i} did not start: {e:#}"));
                }
                Err(e) => {
                    cluster.replicas.push(None);
                    failed.get_or_insert(format!("replica {i}'s start panicked: {e}"));
                }
            }
        }
        if mgs_replicated && failed.is_none() {
            match RunningServer::start_on(ost_config, network.clone()).await {
                Ok(s) => cluster.ost = Some(s),
                Err(e) => failed = Some(format!("the OST's server did not start: {e:#}")),
            }
        }
        if let Some(e) = failed {
            cluster.shutdown().await;
            return Err(e);
        }
        if let Err(e) = cluster.wait_for_map().await {
            cluster.shutdown().await;
            return Err(e);
        }
        Ok(cluster)
    }

    /// Waits until a replica serves and the map names it.
    pub(super) async fn wait_for_map(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_millis(GROUP_WAIT_MS_MAX);
        let options = PeerOptions { network: Some(self.network.clone()), ..PeerOptions::default() };
        let mgs = weft_rpc::mgs::MgsPeers::new(&self.mgs_address, options);
        loop {
            if let Some(i) = self.serving() {
                if let Ok(map) = weft_rpc::map::fetch_map_from(&mgs, Duration::from_secs(2)).await {
                    let mdt = map.targets.iter().find(|t| t.kind == TargetKind::Mdt && t.index == 0);
                    let ost = map.targets.iter().any(|t| t.kind == TargetKind::Ost);
                    if ost && mdt.is_some_and(|t| t.address == self.addresses[i]) {
                        return Ok(());
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(format!("no MDT leader in the map after {GROUP_WAIT_MS_MAX} ms"));
            }
            tokio::time::sleep(Duration::from_millis(WATCH_MS)).await;
        }
    }

    /// ", the MGS's leader too" when replica `i` leads a replicated MGS, for the log.
    pub(super) fn mgs_role(&self, i: usize) -> &'static str {
        let leads = self.replicas[i]
            .as_ref()
            .and_then(|s| s.mgs_group_status())
            .is_some_and(|st| st.role == weft_raft::Role::Leader);
        match (self.mgs_replicated, leads) {
            (true, true) => ", the MGS's leader too",
            (true, false) => ", an MGS follower",
            _ => "",
        }
    }

    /// The replica that serves the MDT and that the others reach, if any: of two that serve
    /// (an old leader just healed, which has not heard of the new term yet), the newer term's.
    pub(super) fn serving(&self) -> Option<usize> {
        (0..REPLICAS)
            .filter(|&i| Some(i) != self.isolated)
            .filter_map(|i| {
                let s = self.replicas[i].as_ref().filter(|s| s.serves_mdt())?;
                Some((s.mdt_group_status()?.term, i))
            })
            .max()
            .map(|(_, i)| i)
    }

    pub(super) async fn kill(&mut self, i: usize) {
        self.wire.isolate(&self.addresses[i]);
        if let Some(server) = self.replicas[i].take() {
            server.shutdown().await;
        }
    }

    pub(super) async fn restart(&mut self, i: usize) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_millis(REOPEN_WAIT_MS_MAX);
        let server = loop {
            match RunningServer::start_on(self.configs[i].clone(), self.network.clone()).await {
                Ok(s) => break s,
                // The killed server's aborted tasks may not have let go of its store yet.
                Err(e) if format!("{e:#}").contains("already open") && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(WATCH_MS)).await
                }
                Err(e) => return Err(format!("replica {i} did not start again: {e:#}")),
            }
        };
        self.replicas[i] = Some(server);
        self.wire.rejoin(&self.addresses[i]);
        Ok(())
    }

    /// Waits until a replica serves and every replica applied all the group committed.
    pub(super) async fn wait_caught_up(&self, watch: &mut Watch) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_millis(GROUP_WAIT_MS_MAX);
        loop {
            watch.observe(self);
            let statuses: Vec<_> =
                self.replicas.iter().map(|s| s.as_ref().and_then(|s| s.mdt_group_status())).collect();
            if let Some(leader) = self.serving().and_then(|i| statuses[i].clone()) {
                if statuses
                    .iter()
                    .all(|s| s.as_ref().is_some_and(|s| s.applied.is_some() && s.applied == leader.committed))
                {
                    self.wire.note(format!("every replica applied up to {:?}", leader.committed));
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                let positions: Vec<String> = statuses
                    .iter()
                    .map(|s| match s {
                        Some(s) => format!("{:?} applied {:?} committed {:?}", s.role, s.applied, s.committed),
                        None => "down".into(),
                    })
                    .collect();
                return Err(format!("the replicas did not all catch up in {GROUP_WAIT_MS_MAX} ms: {positions:?}"));
            }
            tokio::time::sleep(Duration::from_millis(WATCH_MS)).await;
        }
    }

    /// Stops every server: the followers first, so that the leader commits nothing more.
    pub(super) async fn shutdown(&mut self) {
        let leader = self.serving();
        for i in (0..REPLICAS).filter(|&i| Some(i) != leader).chain(leader) {
            if let Some(s) = self.replicas.get_mut(i).and_then(Option::take) {
                s.shutdown().await;
            }
        }
        if let Some(ost) = self.ost.take() {
            ost.shutdown().await;
        }
    }

    /// Each stopped replica's whole store, as one canonical dump, is the same.
    pub(super) fn replicas_agree(&self, root: &std::path::Path) -> Result<(), String> {
        let mut dumps = Vec::new();
        for i in 0..REPLICAS {
            let dir = root.join(format!("r{i}")).join("mdt0000");
            // The server's tasks, aborted by its shutdown, let go of the store when the
            // runtime next polls them: until then it is still open.
            let deadline = Instant::now() + Duration::from_millis(REOPEN_WAIT_MS_MAX);
            let replica = loop {
                match weft_mds::replica::Replica::open(dir.clone(), 0) {
                    Ok(r) => break r,
                    Err(e) if e.code == ErrorCode::Busy && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(WATCH_MS))
                    }
                    Err(e) => return Err(format!("replica {i}'s store does not open after the end: {e}")),
                }
            };
            let (_, dump) = replica.snapshot().map_err(|e| format!("replica {i}'s store does not dump: {e}"))?;
            dumps.push(dump);
        }
        for i in 1..REPLICAS {
            if dumps[i] != dumps[0] {
                return Err(format!(
                    "the replicas disagree at the end: replica {i}'s store dumps to {} bytes, replica 0's to {}",
                    dumps[i].len(),
                    dumps[0].len()
                ));
            }
        }
        Ok(())
    }
}
