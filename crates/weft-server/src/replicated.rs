//! A replicated MDT in a server process: this process's replica of the MDT's group
//! (weft-mds `replica.rs`), the group it takes part in (weft-raft), and the [`Mds`] that
//! runs here while this replica leads; and [`run`], the loop that hosts any replicated
//! service ([`Hosted`]: the MDT's here, the MGS's in `replicated_mgs.rs`).
//!
//! One task follows the group ([`run`]): when this replica becomes the leader it asks the
//! group for a read index (every entry of the terms before is then applied here), opens the
//! [`Mds`] over the replica's store ([`Replica::serve`]), holds lock grants back for the
//! recovery window, and registers the MDT at this server's address with the MGS, which moves
//! it in the cluster map: the clients follow the map there (and forget what they cached under
//! the old leader's locks). While it serves it renews the read lease every heartbeat; when it
//! loses the lead, or its replica was fenced (a batch the group did not commit), it shuts the
//! [`Mds`] down and the replica follows the group again. A following replica folds what it
//! applied into its store and makes the group's log durable every checkpoint interval.

use crate::limits::{FAILOVER_RECOVERY_MS_MAX, FAILOVER_REGISTER_WAIT_MS, MDT_LEASE_OF_ELECTION_TIMEOUT};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use weft_mds::replica::{Proposer, Replica};
use weft_mds::{Mds, MdsConfig, ObjectTargets};
use weft_proto::msg::*;
use weft_proto::{ErrorCode, WeftError, WeftResult};
use weft_raft::{Group, ProposeError, Role};
use weft_rpc::mgs::MgsPeers;

/// The MDS this process runs now, if any: always the same one for a single MDT, the
/// leader's while this replica leads for a replicated one. Read by every MDT request.
#[derive(Default)]
pub(crate) struct MdsSlot {
    current: RwLock<Option<Arc<Mds>>>,
}

impl MdsSlot {
    pub fn holding(mds: Option<Arc<Mds>>) -> Arc<MdsSlot> {
        Arc::new(MdsSlot { current: RwLock::new(mds) })
    }

    pub fn get(&self) -> Option<Arc<Mds>> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, mds: Option<Arc<Mds>>) -> Option<Arc<Mds>> {
        std::mem::replace(&mut *self.current.write().unwrap_or_else(|p| p.into_inner()), mds)
    }
}

/// The error of an MDT request to a replica that does not serve it now.
pub(crate) fn not_serving(mdt: u32) -> WeftError {
    WeftError::new(
        ErrorCode::Moved,
        format!(
            "MDT{mdt:04x} is not served here: this replica does not lead its group (the cluster map names the leader)"
        ),
    )
}

/// What a replicated service's replica does for its group: weft-mds's [`Replica`] and
/// weft-mgs's [`weft_mgs::Mgs`] have these four calls, and [`Machine`] makes either the
/// group's state machine.
pub(crate) trait ReplicaState: Send + Sync + 'static {
    fn apply(&self, payload: Option<&[u8]>, state: &[u8]) -> WeftResult<()>;
    fn applied_state(&self) -> Option<Vec<u8>>;
    fn snapshot(&self) -> WeftResult<(Vec<u8>, Vec<u8>)>;
    fn install(&self, state: &[u8], data: &[u8]) -> WeftResult<()>;
}

impl ReplicaState for Replica {
    fn apply(&self, payload: Option<&[u8]>, state: &[u8]) -> WeftResult<()> {
        Replica::apply(self, payload, state)
    }
    fn applied_state(&self) -> Option<Vec<u8>> {
        Replica::applied_state(self)
    }
    fn snapshot(&self) -> WeftResult<(Vec<u8>, Vec<u8>)> {
        Replica::snapshot(self)
    }
    fn install(&self, state: &[u8], data: &[u8]) -> WeftResult<()> {
        Replica::install(self, state, data)
    }
}

impl ReplicaState for weft_mgs::Mgs {
    fn apply(&self, payload: Option<&[u8]>, state: &[u8]) -> WeftResult<()> {
        weft_mgs::Mgs::apply(self, payload, state)
    }
    fn applied_state(&self) -> Option<Vec<u8>> {
        weft_mgs::Mgs::applied_state(self)
    }
    fn snapshot(&self) -> WeftResult<(Vec<u8>, Vec<u8>)> {
        weft_mgs::Mgs::snapshot(self)
    }
    fn install(&self, state: &[u8], data: &[u8]) -> WeftResult<()> {
        weft_mgs::Mgs::install(self, state, data)
    }
}

/// A replica as its group's state machine (an MDT's or the MGS's).
pub(crate) struct Machine<T>(pub Arc<T>);

impl<T: ReplicaState> weft_raft::Machine for Machine<T> {
    fn apply(&self, _index: u64, payload: Option<&[u8]>, state: &[u8]) -> Result<(), String> {
        self.0.apply(payload, state).map_err(|e| e.message)
    }

    fn applied_state(&self) -> Option<Vec<u8>> {
        self.0.applied_state()
    }

    fn snapshot(&self) -> Result<(Vec<u8>, Vec<u8>), String> {
        self.0.snapshot().map_err(|e| e.message)
    }

    fn install(&self, state: &[u8], data: &[u8]) -> Result<(), String> {
        self.0.install(state, data).map_err(|e| e.message)
    }
}

/// The group as a replica's writer sees it (the MDS's writer, the MGS's update): a proposal
/// blocks the committing thread (never a runtime task) until the group answers.
pub(crate) struct GroupProposer {
    pub group: Group,
    pub runtime: tokio::runtime::Handle,
}

impl Proposer for GroupProposer {
    fn propose(&self, payload: Vec<u8>) -> WeftResult<u64> {
        self.runtime.block_on(self.group.propose(payload)).map_err(propose_error)
    }

    fn sync(&self) -> WeftResult<()> {
        self.group.sync()
    }
}

fn propose_error(e: ProposeError) -> WeftError {
    match e {
        ProposeError::NotLeader { .. } => WeftError::new(ErrorCode::Moved, format!("the MDT's group: {e}")),
        ProposeError::Failed(why) => WeftError::io(format!("the MDT's group did not commit: {why}")),
    }
}

/// A service a replica hosts while it leads its group: the MDT's [`Mds`] ([`MdtHosting`]),
/// the MGS ([`crate::replicated_mgs::MgsHosting`]). [`run`] drives either.
pub(crate) trait Hosted: Send + Sync + 'static {
    /// How logs name it: `MDT0000`, `MGS`.
    fn name(&self) -> String;
    /// Whether it serves here now.
    fn serving(&self) -> bool;
    /// Whether it must stop although this replica still leads (its state is no longer the
    /// group's).
    fn fenced(&self) -> bool;
    /// Starts serving: this replica leads and has applied everything committed before.
    async fn start(&self, group: &Group) -> anyhow::Result<()>;
    /// Stops serving; the replica follows its group again. An error: it cannot, and the
    /// replica leaves the group.
    async fn stop(&self) -> WeftResult<()>;
    /// The group confirmed the lead after `asked`: reads may be answered until `asked + length`.
    fn renew_lease(&self, asked: Instant, length: Duration);
    /// A following replica's durability work on the checkpoint schedule (the group's log is
    /// synced after it).
    fn checkpoint(&self) -> WeftResult<()>;
}

/// What [`run`] needs: the service, its group, and the timings.
pub(crate) struct Hosting<H> {
    pub service: H,
    pub group: Group,
    pub election_timeout_min: Duration,
    pub heartbeat: Duration,
    pub checkpoint_interval: Duration,
}

/// Follows the group for as long as the server runs (module doc).
pub(crate) async fn run<H: Hosted>(h: Hosting<H>) {
    let mut changes = h.group.watch();
    let mut tick = tokio::time::interval(h.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_checkpoint = Instant::now();
    let lease = h.election_timeout_min.mul_f64(MDT_LEASE_OF_ELECTION_TIMEOUT);
    let service = &h.service;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = changes.changed() => if changed.is_err() { return },
        }
        let leads = changes.borrow_and_update().role == Role::Leader;
        if service.serving() {
            if !leads || service.fenced() {
                tracing::info!("this {} replica no longer leads its group: it stops serving", service.name());
                if let Err(e) = service.stop().await {
                    tracing::error!(error = %e, "this {} replica cannot follow its group again", service.name());
                    h.group.shutdown().await;
                    return;
                }
            } else {
                let asked = Instant::now();
                if h.group.read_index().await.is_ok() {
                    service.renew_lease(asked, lease);
                }
            }
        } else if leads {
            let asked = Instant::now();
            if let Err(e) = h.group.read_index().await {
                tracing::debug!(error = %e, "a new leader's read index failed; trying again");
                continue;
            }
            service.renew_lease(asked, lease);
            if let Err(e) = service.start(&h.group).await {
                tracing::warn!(error = %e, "this {} replica leads but cannot serve yet", service.name());
            }
        } else if last_checkpoint.elapsed() >= h.checkpoint_interval {
            last_checkpoint = Instant::now();
            if let Err(e) = service.checkpoint().and_then(|()| h.group.sync()) {
                tracing::warn!(error = %e, "a {} replica's checkpoint failed; retrying", service.name());
            }
        }
    }
}

/// A replicated MDT's hosting: its replica, and the [`Mds`] it runs while it leads.
pub(crate) struct MdtHosting {
    pub replica: Arc<Replica>,
    pub slot: Arc<MdsSlot>,
    pub mds_config: Box<dyn Fn() -> MdsConfig + Send + Sync>,
    pub targets: Arc<dyn ObjectTargets>,
    /// This process's lock managers (the MDT's namespace, the advisory locks).
    pub locks: Arc<crate::locks::LockService>,
    pub mgs: Arc<MgsPeers>,
    pub address: String,
    pub map: tokio::sync::watch::Receiver<Arc<weft_rpc::map::MapState>>,
}

impl Hosted for MdtHosting {
    fn name(&self) -> String {
        format!("MDT{:04x}", self.replica.mdt_index)
    }

    fn serving(&self) -> bool {
        self.slot.get().is_some()
    }

    fn fenced(&self) -> bool {
        self.replica.fenced()
    }

    async fn start(&self, group: &Group) -> anyhow::Result<()> {
        let mds = start_serving(self, group).await?;
        self.slot.set(Some(mds));
        Ok(())
    }

    async fn stop(&self) -> WeftResult<()> {
        if let Some(mds) = self.slot.set(None) {
            mds.shutdown().await;
        }
        self.replica.follow()
    }

    fn renew_lease(&self, asked: Instant, length: Duration) {
        self.replica.lease.renew(asked, length);
    }

    fn checkpoint(&self) -> WeftResult<()> {
        self.replica.checkpoint()
    }
}

async fn start_serving(h: &MdtHosting, group: &Group) -> anyhow::Result<Arc<Mds>> {
    let proposer = Arc::new(GroupProposer { group: group.clone(), runtime: tokio::runtime::Handle::current() });
    let (replica, cfg, targets) = (h.replica.clone(), (h.mds_config)(), h.targets.clone());
    // Formatting and the orphan cleanup wait on the group: a thread that may block.
    let mds = tokio::task::spawn_blocking(move || replica.serve(cfg, proposer, targets))
        .await?
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    // The recovery window lasts until the clients can know where the MDT is, then until the
    // clients its store records replayed (FAILOVER_RECOVERY_MS_MAX at most; below).
    // What the advisory table holds is from this replica's last time as leader: the clients
    // replay what they hold now (FlockReplay) while nothing can be set.
    h.locks.forget_advisory();
    let mdt_ns = h.locks.mdt.as_ref().map(|(_, ns)| ns.clone());
    if let Some(ns) = &mdt_ns {
        ns.hold_grants_for(Duration::from_millis(FAILOVER_REGISTER_WAIT_MS));
        mds.set_lock_namespace(ns.clone());
    }
    mds.set_cluster_map(&h.map.borrow().map);
    let target = TargetInfo::new(TargetKind::Mdt, h.replica.mdt_index, h.address.clone());
    let (mgs, ns, registered) = (h.mgs.clone(), mdt_ns, mds.clone());
    tokio::spawn(async move {
        match crate::register(&mgs, target).await {
            Ok(()) => {
                // The clients learn the move now: the window ends once every recorded one
                // replayed, or this long from now, evicting the rest. Opens are replayed
                // before locks, so the open window needs no more than the longest.
                let window = Duration::from_millis(FAILOVER_RECOVERY_MS_MAX);
                if let Some(ns) = ns {
                    ns.end_recovery_when_replayed(window);
                }
                registered.end_open_replay_in(window);
            }
            // Serving anyway: the clients that find it here are served once the window
            // (FAILOVER_REGISTER_WAIT_MS) ends, or once every recorded client replayed
            // (nobody is evicted: they could not know where to); the next change of leader
            // registers again.
            Err(e) => tracing::warn!(error = %e, "the new MDT leader could not register with the management service"),
        }
    });
    tracing::info!(mdt = h.replica.mdt_index, address = %h.address, "this MDT replica leads its group and serves");
    Ok(mds)
}

/// `mdt.FS-MDTxxxx.replica_status`: this replica's place in its group, one `key: value` per
/// line as Lustre's status parameters (the members by id, with what each has of the log as
/// the leader knows it).
pub(crate) fn status_text(st: &weft_raft::GroupStatus) -> String {
    use std::fmt::Write;
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let mut out = String::new();
    let role = format!("{:?}", st.role).to_lowercase();
    let _ = writeln!(out, "group: {}", st.group);
    let _ = writeln!(out, "replica: {}", st.node_id);
    let _ = writeln!(out, "role: {role}");
    let _ = writeln!(out, "term: {}", st.term);
    match &st.leader {
        Some((id, address)) => {
            let _ = writeln!(out, "leader: {id} {address}");
        }
        None => {
            let _ = writeln!(out, "leader: none");
        }
    }
    let _ = writeln!(out, "last_log_index: {}", opt(st.last_log_index));
    let _ = writeln!(out, "committed: {}", opt(st.committed));
    let _ = writeln!(out, "applied: {}", opt(st.applied));
    let _ = writeln!(out, "members:");
    for (id, address) in &st.members {
        let matched = st.matched.get(id).copied().flatten();
        let _ = writeln!(out, "  - {{ replica: {id}, address: {address}, matched: {} }}", opt(matched));
    }
    if !st.learners.is_empty() {
        // A replica being added: it gets the log, and votes once it caught up.
        let _ = writeln!(out, "learners:");
        for (id, address) in &st.learners {
            let matched = st.matched.get(id).copied().flatten();
            let _ = writeln!(out, "  - {{ replica: {id}, address: {address}, matched: {} }}", opt(matched));
        }
    }
    out
}
