//! A replicated MGS in a server process: this process's replica ([`Mgs::open_replica`],
//! weft-mgs `replica.rs`) as its group's state machine, and the hosting [`replicated::run`]
//! drives: while this replica leads (and after a read index, so its map is the group's) the
//! MGS serves and its updates go through the group ([`replicated::GroupProposer`]); when it
//! loses the lead its requests are answered `Moved` naming the leader ([`moved`]), where
//! weft-rpc's `MgsPeers` goes next. The monitor runs beside every replica, leading or not
//! (lib.rs), into the replica's own history, so a new leader's history holds what happened
//! before it led; the decay engine acts only where the MGS serves (monitor.rs). The decay
//! state is the leader's own (weft-mgs `replica.rs`).

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

/// What runs while this replica leads.
pub(crate) struct MgsHosting {
    pub mgs: Arc<Mgs>,
    pub serving: AtomicBool,
    /// Keeps the group's voters in the map while this replica leads.
    pub members: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl MgsHosting {
    pub fn new(mgs: Arc<Mgs>) -> MgsHosting {
        MgsHosting { mgs, serving: AtomicBool::new(false), members: Mutex::new(None) }
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
        // The group's voters in the map, now and as they change, so that clients and servers
        // reach replicas their lists do not name (weft-rpc `MgsPeers::learn`).
        let (mgs, mut changes) = (self.mgs.clone(), group.watch());
        let task = tokio::spawn(async move {
            loop {
                let voters: Vec<String> = changes.borrow_and_update().members.values().cloned().collect();
                // A failed update is tried again after a pause, not only at the next change.
                let mut retry = None;
                if mgs.map().mgs_replicas != voters {
                    if let Err(e) = mgs.set_replicas(voters).await {
                        tracing::warn!("the MGS's members not recorded in the map (tried again): {e}");
                        retry = Some(Duration::from_millis(crate::limits::MGS_MEMBERS_RETRY_MS));
                    }
                }
                let pause = async {
                    match retry {
                        Some(d) => tokio::time::sleep(d).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    () = pause => {}
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
        if let Some(task) = self.members.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
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
