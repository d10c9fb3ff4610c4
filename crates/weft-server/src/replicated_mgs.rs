//! A replicated MGS in a server process: this process's replica ([`Mgs::open_replica`],
//! weft-mgs `replica.rs`) as its group's state machine, and the hosting [`replicated::run`]
//! drives: while this replica leads (and after a read index, so its map is the group's) the
//! MGS serves, its updates go through the group ([`replicated::GroupProposer`]), and the monitor (with
//! the decay engine it runs) works here; when it loses the lead it stops both, and its
//! requests are answered `Moved` naming the leader ([`moved`]), where weft-rpc's `MgsPeers`
//! goes next. The monitor's history and the decay state are the leader's own statistics: a
//! new leader starts its own (weft-mgs `replica.rs`).

use crate::replicated::{self, Hosted};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weft_mgs::Mgs;
use weft_proto::{ErrorCode, WeftError, WeftResult};
use weft_raft::{Group, ProposeError};

impl weft_mgs::replica::Proposer for replicated::GroupProposer {
    fn propose(&self, payload: Vec<u8>) -> WeftResult<u64> {
        self.runtime.block_on(self.group.propose(payload)).map_err(|e| match e {
            ProposeError::NotLeader { leader } => WeftError::new(
                ErrorCode::Moved,
                weft_rpc::mgs::moved_to(
                    "this MGS replica no longer leads its group",
                    leader.as_ref().map(|(_, a)| a.as_str()),
                ),
            ),
            ProposeError::Failed(why) => WeftError::io(format!("the MGS's group did not commit: {why}")),
        })
    }
}

/// A `Moved` answer of this replica, rewritten to name the leader its group knows.
pub(crate) fn moved(error: WeftError, group: &Group) -> WeftError {
    if error.code != ErrorCode::Moved || weft_rpc::mgs::leader_named(&error.message).is_some() {
        return error;
    }
    let status = group.status();
    let leader = status.leader.filter(|(id, _)| *id != status.node_id).map(|(_, a)| a);
    WeftError::new(ErrorCode::Moved, weft_rpc::mgs::moved_to(&error.message, leader.as_deref()))
}

/// What runs while this replica leads: the monitor (`monitor_interval` zero: none).
pub(crate) struct MgsHosting {
    pub mgs: Arc<Mgs>,
    pub peers: Arc<weft_rpc::map::PeerSet>,
    pub monitor_interval: Duration,
    pub serving: AtomicBool,
    pub monitor: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Keeps the group's voters in the map while this replica leads.
    pub members: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl MgsHosting {
    pub fn new(mgs: Arc<Mgs>, peers: Arc<weft_rpc::map::PeerSet>, monitor_interval: Duration) -> MgsHosting {
        MgsHosting {
            mgs,
            peers,
            monitor_interval,
            serving: AtomicBool::new(false),
            monitor: Mutex::new(None),
            members: Mutex::new(None),
        }
    }
}

impl Hosted for MgsHosting {
    fn name(&self) -> String {
        "MGS".to_string()
    }

    fn serving(&self) -> bool {
        self.serving.load(Ordering::Acquire)
    }

    fn fenced(&self) -> bool {
        false
    }

    async fn start(&self, group: &Group) -> anyhow::Result<()> {
        let proposer = replicated::GroupProposer { group: group.clone(), runtime: tokio::runtime::Handle::current() };
        self.mgs.serve(Arc::new(proposer));
        self.serving.store(true, Ordering::Release);
        if !self.monitor_interval.is_zero() {
            let (mgs, peers, interval) = (self.mgs.clone(), self.peers.clone(), self.monitor_interval);
            // Ends when the replica stops leading, also when the server shuts down (it makes
            // the replica follow).
            let task = tokio::spawn(async move {
                tokio::select! {
                    () = crate::monitor::run(mgs.clone(), peers, interval) => {}
                    () = mgs.stops_leading() => {}
                }
            });
            if let Some(old) = self.monitor.lock().unwrap_or_else(|p| p.into_inner()).replace(task) {
                old.abort();
            }
        }
        // The group's voters in the map, now and as they change, so that clients and servers
        // reach replicas their lists do not name (weft-rpc `MgsPeers::learn`).
        let (mgs, mut changes) = (self.mgs.clone(), group.watch());
        let task = tokio::spawn(async move {
            loop {
                let voters: Vec<String> = changes.borrow_and_update().members.values().cloned().collect();
                if mgs.map().mgs_replicas != voters {
                    if let Err(e) = mgs.set_replicas(voters).await {
                        tracing::warn!("the MGS's members not recorded in the map: {e}");
                    }
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    () = mgs.stops_leading() => return,
                }
            }
        });
        if let Some(old) = self.members.lock().unwrap_or_else(|p| p.into_inner()).replace(task) {
            old.abort();
        }
        tracing::info!(version = self.mgs.map().version, "this MGS replica leads its group and serves");
        Ok(())
    }

    async fn stop(&self) -> WeftResult<()> {
        self.mgs.follow();
        self.serving.store(false, Ordering::Release);
        for task in [&self.monitor, &self.members] {
            if let Some(task) = task.lock().unwrap_or_else(|p| p.into_inner()).take() {
                task.abort();
            }
        }
        Ok(())
    }

    fn renew_lease(&self, asked: Instant, length: Duration) {
        self.mgs.renew_lease(asked, length);
    }

    fn checkpoint(&self) -> WeftResult<()> {
        // Every map applied is in the map file already (fsync'd): only the log to sync.
        Ok(())
    }
}

/// Starts hosting `mgs` in `group` (a task for as long as the server runs).
pub(crate) fn host(hosting: MgsHosting, group: Group) -> tokio::task::JoinHandle<()> {
    tokio::spawn(replicated::run(replicated::Hosting {
        service: hosting,
        group,
        election_timeout_min: Duration::from_millis(weft_raft::limits::ELECTION_TIMEOUT_MS_MIN_DEFAULT),
        heartbeat: Duration::from_millis(weft_raft::limits::HEARTBEAT_MS_DEFAULT),
        checkpoint_interval: Duration::from_millis(weft_mds::limits::CHECKPOINT_INTERVAL_MS),
    }))
}
