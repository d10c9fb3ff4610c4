//! The metadata service: one MDT on redb, with group commit, a reply cache, precreated
//! objects and background destroys. No networking: `weft-server` wires [`Mds::handle`] to the
//! network and implements [`ObjectTargets`] over it.
//!
//! # The request path inside the MDS
//!
//! ```text
//! Mds::handle(header, request)
//!   ├─ read (lookup, getattr, readdir, getxattr, ...): inline, on the read view (the
//!   │    state as of the last commit, a snapshot: Core::read_view), ops::read → reply.
//!   │    Never waits for the writer.
//!   └─ mutation:
//!        1. reply cache probe (read view): a resend returns the stored reply;
//!        2. Create / SetStripe on a file: choose OSTs and take object ids from the
//!           in-memory precreate pools (objects.rs), waiting briefly for a refill;
//!        3. the write queue (writer.rs): committed by the caller's own thread when it is
//!           not an async task and nobody else is committing, else by the writer thread;
//!        4. the committer drains up to COMMIT_BATCH_OPS_MAX jobs into ONE batch over the
//!           committed state: per job, reply cache probe again (authoritative), then
//!           ops::execute (check-then-write), then the reply is stored;
//!        5. the batch's changes are appended to the journal as one record, the new state
//!           becomes the read view (in memory over the last checkpoint: store.rs), then
//!           each caller gets its reply (oneshot).
//! ```
//!
//! Background tasks (background.rs): precreate refill, destroy queue, reply-cache pruning,
//! checkpoints (the in-memory changes written into redb durably, the journal emptied).
//! Their writes also go through the write queue: one committer at a time.
//!
//! # Size on the MDT (Lustre's lazy size)
//!
//! A regular file's `Attr.size_known` is true only when its size was recorded by a closing
//! writer (`Close { size_blocks: Some(..) }`) and no writer has it open now; otherwise the
//! client derives the size from the objects.
//!
//! # Reply cache key
//!
//! `(client_id, reply_slot)`, holding the slot's last reply with its `request_id` (see
//! replies.rs); `request_id == 0` means "not resendable" and is never cached.

pub mod background;
mod change_locks;
pub mod changelog;
mod clients;
pub mod clock;
pub mod coordinator;
pub mod dne;
pub mod journal;
pub mod limits;
pub mod locking;
pub mod objects;
pub mod open_files;
pub mod ops;
mod ost_admin;
pub mod perm;
pub mod qos;
mod quota_master;
pub mod replica;
pub mod replies;
pub mod schema;
pub mod startup;
pub mod storage;
pub mod store;
pub mod writer;
pub mod zone;

#[cfg(test)]
mod sync_mirror_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

use crate::objects::{Objects, Reservation};
use crate::open_files::OpenFiles;
use crate::schema::InodeRecord;
use crate::storage::MdtStorage;
use crate::writer::{InternalOp, Job};
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use weft_proto::msg::quota::{QuotaGrant, QuotaUseEntry};
use weft_proto::msg::{mdt, ClusterMap, FileType, MdtReply, MdtRequest, RequestHeader, Run, Timestamp};
use weft_proto::{ErrorCode, Fid, StripeSpec, WeftError, WeftResult};

pub struct MdsConfig {
    /// The MDT's directory: its storage lives inside (unless [`Mds::open_with`] is given
    /// another), and statfs reports the space of the file system holding it.
    pub data_dir: PathBuf,
    pub mdt_index: u32,
    /// Objects asked per precreate call.
    pub precreate_batch: u32,
    /// Time between durable checkpoints; None: only when asked ([`Mds::checkpoint`]), for
    /// simulations that choose their moments.
    pub checkpoint_interval: Option<Duration>,
    /// A replicated MDT's new leader: how long from its start clients may replay their opens
    /// (`ReplayOpens`); the orphan inodes none replayed are destroyed after it. None: no
    /// replay (a single MDT destroys its orphans at start).
    pub open_replay_window: Option<Duration>,
    /// Whether this MDT keeps file data (`-L mdt` components, served once the server calls
    /// [`Mds::serve_dom`]); a replicated MDT does not: those components go to one OST.
    pub data_on_mdt: bool,
}

impl MdsConfig {
    pub fn new(data_dir: PathBuf, mdt_index: u32) -> Self {
        MdsConfig {
            data_dir,
            mdt_index,
            precreate_batch: 256,
            checkpoint_interval: Some(Duration::from_millis(limits::CHECKPOINT_INTERVAL_MS)),
            open_replay_window: None,
            data_on_mdt: true,
        }
    }
}

/// How the MDS reaches the OSTs (implemented over the network by weft-server; in-memory
/// fake in tests).
pub trait ObjectTargets: Send + Sync + 'static {
    /// Create empty objects start_oid..start_oid+count-1 on that OST; returns the last oid created.
    fn precreate(&self, ost: u32, start_oid: u32, count: u32) -> BoxFuture<'static, WeftResult<u32>>;
    /// Remove an object; removing a missing object succeeds.
    fn destroy(&self, ost: u32, fid: Fid) -> BoxFuture<'static, WeftResult<()>>;
    /// The OST's orphan cleanup (`ost::DestroyOrphans`): destroy every object past
    /// `above_oid` (this MDS handed out none of them), or nothing when `above_oid` is None
    /// (no record of the OST). `mds_start` names this start of the MDS.
    fn destroy_orphans(
        &self,
        ost: u32,
        mdt: u32,
        above_oid: Option<u32>,
        mds_start: u64,
    ) -> BoxFuture<'static, WeftResult<weft_proto::msg::ost::Orphans>>;
    /// The OST's space (`ost::Statfs`), for placing objects by free space (`qos.rs`).
    fn statfs(&self, ost: u32) -> BoxFuture<'static, WeftResult<weft_proto::msg::StatfsInfo>> {
        let _ = ost;
        Box::pin(async { Err(WeftError::new(ErrorCode::NotSupported, "these targets report no space")) })
    }
    /// A request to another MDT of the file system (the steps of changes over several
    /// MDTs, dne.rs), followed to wherever the map says it is served.
    fn mdt(
        &self,
        mdt: u32,
        header: weft_proto::msg::RequestHeader,
        req: MdtRequest,
    ) -> BoxFuture<'static, WeftResult<MdtReply>> {
        let _ = (header, req);
        Box::pin(async move {
            Err(WeftError::new(ErrorCode::NotSupported, format!("MDT{mdt:04x} is not reachable from here")))
        })
    }
    /// The blocks of every id on that OST (`ost::QuotaUsageAll`), for the quota master.
    fn quota_usage(&self, ost: u32) -> BoxFuture<'static, WeftResult<Vec<QuotaUseEntry>>> {
        let _ = ost;
        Box::pin(async { Err(WeftError::new(ErrorCode::NotSupported, "these targets keep no quota")) })
    }
    /// The quota master's grants for that OST (`ost::QuotaGrants`), replacing the earlier.
    fn quota_grants(&self, ost: u32, grants: Vec<QuotaGrant>) -> BoxFuture<'static, WeftResult<Vec<QuotaUseEntry>>> {
        let _ = (ost, grants);
        Box::pin(async { Err(WeftError::new(ErrorCode::NotSupported, "these targets keep no quota")) })
    }
}

/// Counters for tests and monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MdsStats {
    /// Batches committed (one journal record each).
    pub commits: u64,
    /// Mutations executed (reply-cache hits excluded).
    pub mutations: u64,
    /// Mutations answered from the reply cache.
    pub reply_cache_hits: u64,
    /// Most jobs in one committed batch.
    pub batch_ops_max: u64,
    /// Objects confirmed destroyed by the OSTs.
    pub objects_destroyed: u64,
    /// Open handles now.
    pub open_handles: u64,
}

#[derive(Default)]
pub(crate) struct StatCounters {
    pub commits: AtomicU64,
    pub mutations: AtomicU64,
    pub reply_cache_hits: AtomicU64,
    pub batch_ops_max: AtomicU64,
    pub objects_destroyed: AtomicU64,
}

/// State shared by the request path, the writer thread and the background tasks.
pub struct Core {
    pub mdt_index: u32,
    pub data_dir: PathBuf,
    pub precreate_batch: u32,
    /// Names this start of the MDS to the OSTs (an orphan cleanup is done once per start).
    pub mds_start: u64,
    pub storage: MdtStorage,
    pub open_files: Mutex<OpenFiles>,
    pub objects: Objects,
    pub targets: Arc<dyn ObjectTargets>,
    /// Where committed batches go (a journal, or a replicated MDT's group); used by the
    /// committer only. See journal.rs and replica.rs.
    pub journal: Mutex<replica::Log>,
    pub(crate) stats: StatCounters,
    /// Wakes the destroy task after a commit that queued destroys.
    pub destroy_wake: Notify,
    /// Told (`notify_waiters`) each time the destroy task found its queue empty: what a test
    /// waits on to know every confirmed destroy left the queue, instead of sleeping.
    pub destroy_idle: Notify,
    /// Whether changes are recorded, and what waits for removal.
    pub changelog: changelog::State,
    /// A file of the MDT has (or had) an HSM state: writes look for one to mark dirty.
    pub hsm_used: std::sync::atomic::AtomicBool,
    /// The HSM coordinator's settings, copytools and waiting list.
    pub coordinator: coordinator::Coordinator,
    /// What every decision that depends on time reads (see clock.rs).
    pub clock: clock::Clock,
    /// The newest committed state; replaced by the committer only (see [`Core::read_view`]).
    view: Mutex<Arc<store::Tables>>,
    /// A replicated MDT's: reads are answered only while it holds (replica.rs).
    lease: Option<Arc<replica::Lease>>,
    /// The quota master's memory between rounds (quota_master.rs).
    pub quota: quota_master::Master,
    /// Changes over several MDTs this one coordinates, and the MDTs (dne.rs).
    pub dne: dne::State,
    /// Until when clients may replay their opens (a replicated MDT's new leader; see
    /// [`Mds::end_open_replay_in`]).
    pub replay_opens_until: Mutex<Option<std::time::Instant>>,
}

impl Core {
    /// Ok while this MDS may answer and act: always for a single MDT; for a replicated
    /// one's leader, while its read lease holds.
    pub fn lease_ok(&self) -> WeftResult<()> {
        match &self.lease {
            Some(lease) => lease.check(),
            None => Ok(()),
        }
    }

    pub fn open_files(&self) -> std::sync::MutexGuard<'_, OpenFiles> {
        self.open_files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state as of the last commit: a snapshot, unchanged by later commits, that a read
    /// keeps for its whole operation.
    pub fn read_view(&self) -> Arc<store::Tables> {
        self.view.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Called by the committer once a batch is journaled (or a checkpoint committed): later
    /// reads see `view`.
    pub(crate) fn publish(&self, view: store::Tables) {
        *self.view.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(view);
    }
}

pub struct Mds {
    core: Arc<Core>,
    queue: writer::Queue,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    stopping: AtomicBool,
    locks: std::sync::OnceLock<Arc<weft_dlm::namespace::Namespace>>,
}

/// The server clock.
pub fn now() -> Timestamp {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp { sec: d.as_secs() as i64, nsec: d.subsec_nanos() }
}

/// The files of the MDT in `dir` (not running; its journal folded into its store, as
/// [`replica::Replica::open`] leaves it) that keep data on the MDT.
pub fn files_with_data_on_mdt(dir: &std::path::Path) -> WeftResult<Vec<Fid>> {
    let storage = MdtStorage::open_dir(dir)?;
    store::Tables::at_checkpoint(&*storage.kv)?.files_with_data_on_mdt()
}

impl Mds {
    /// Opens (or formats) the MDT, creates the root directory when new, destroys orphans left
    /// by a crash, and starts the writer thread and background tasks. Must be called inside
    /// a tokio runtime.
    pub fn open(cfg: MdsConfig, targets: Arc<dyn ObjectTargets>) -> WeftResult<Arc<Mds>> {
        let storage = MdtStorage::open_dir(&cfg.data_dir)?;
        Mds::open_with(cfg, storage, targets)
    }

    /// As [`Mds::open`], over `storage` (in memory, or with faults injected, in tests).
    pub fn open_with(cfg: MdsConfig, storage: MdtStorage, targets: Arc<dyn ObjectTargets>) -> WeftResult<Arc<Mds>> {
        startup::format_or_check(&*storage.kv, cfg.mdt_index)?;
        let journal_seq = startup::replay_journal(&*storage.kv, &storage.journal)?;
        let orphans = startup::destroy_orphans(&*storage.kv)?;
        if orphans > 0 {
            tracing::info!(orphans, "destroyed orphan inodes left open before the restart");
        }
        let journal = journal::Journal::open(storage.journal.clone(), journal_seq)?;
        Mds::start(cfg, storage, replica::Log::Local(journal), None, targets)
    }

    /// The Mds of a replicated MDT's leading replica, over the replica's store, which
    /// [`replica::Replica::serve`] made ready (formatted, journal folded, orphans destroyed,
    /// all through the group).
    pub(crate) fn open_replicated(
        cfg: MdsConfig,
        replica: Arc<replica::Replica>,
        storage: MdtStorage,
        targets: Arc<dyn ObjectTargets>,
    ) -> WeftResult<Arc<Mds>> {
        if startup::format_changes(&*storage.kv, cfg.mdt_index)?.is_some() {
            return Err(WeftError::io("the MDT replica's store is not formatted"));
        }
        let lease = Some(replica.lease.clone());
        Mds::start(cfg, storage, replica::Log::Replicated(replica), lease, targets)
    }

    fn start(
        cfg: MdsConfig,
        storage: MdtStorage,
        log: replica::Log,
        lease: Option<Arc<replica::Lease>>,
        targets: Arc<dyn ObjectTargets>,
    ) -> WeftResult<Arc<Mds>> {
        assert!(cfg.precreate_batch > 0, "precreate_batch must be positive");
        let view = store::Tables::at_checkpoint(&*storage.kv)?;
        let changelog = changelog::State::load(&view)?;
        let hsm_used = std::sync::atomic::AtomicBool::new(view.hsm_used()?);
        let clock = clock::Clock::default();
        let coordinator = coordinator::Coordinator::load(&view, clock.instant())?;
        let mds_start = start_id();
        let core = Arc::new(Core {
            mdt_index: cfg.mdt_index,
            data_dir: cfg.data_dir.clone(),
            precreate_batch: cfg.precreate_batch,
            mds_start,
            storage,
            open_files: Mutex::new(OpenFiles::starting_at(mds_start)),
            replay_opens_until: Mutex::new(cfg.open_replay_window.map(|w| clock.instant() + w)),
            objects: Objects::new(u64::from(cfg.precreate_batch.div_ceil(2)), cfg.data_on_mdt, cfg.mdt_index),
            targets,
            journal: Mutex::new(log),
            stats: StatCounters::default(),
            destroy_wake: Notify::new(),
            destroy_idle: Notify::new(),
            changelog,
            hsm_used,
            coordinator,
            clock,
            view: Mutex::new(Arc::new(view)),
            lease,
            quota: quota_master::Master::default(),
            dne: dne::State::new(cfg.mdt_index),
        });
        let (queue, writer_thread) = writer::Queue::start(core.clone())?;
        let mut tasks = background::spawn_all(core.clone(), queue.clone(), cfg.checkpoint_interval);
        if cfg.open_replay_window.is_some() {
            tasks.push(tokio::spawn(background::orphans_after_replay(core.clone(), queue.clone())));
        }
        tasks.push(tokio::spawn(quota_master::quota_task(core.clone(), queue.clone())));
        tasks.push(tokio::spawn(dne::tasks::tell_task(core.clone(), queue.clone())));
        tasks.push(tokio::spawn(dne::tasks::ask_task(core.clone(), queue.clone())));
        Ok(Arc::new(Mds {
            core,
            queue,
            writer_thread: Mutex::new(Some(writer_thread)),
            tasks: Mutex::new(tasks),
            stopping: AtomicBool::new(false),
            locks: std::sync::OnceLock::new(),
        }))
    }

    /// Writes every change in memory into the store durably now and empties the journal
    /// (what the background checkpoint does every interval).
    pub async fn checkpoint(&self) -> WeftResult<()> {
        background::internal(&self.queue, InternalOp::Checkpoint).await.map(drop)
    }

    /// The changelog's mask (`mdd.*.changelog_mask`): the types recorded.
    pub fn changelog_mask(&self) -> u32 {
        self.core.changelog.mask()
    }

    pub fn set_changelog_mask(&self, mask: u32) {
        self.core.changelog.set_mask(mask);
    }

    /// The changelog's readers and last record (`mdd.*.changelog_users`).
    pub fn changelog_users(&self) -> WeftResult<weft_proto::msg::changelog::ChangelogUsers> {
        ops::changelog::users(&self.core.read_view(), self.core.changelog.mask())
    }

    /// The HSM coordinator (`mdt.*.hsm_control`, `mdt.*.hsm.*`).
    pub fn coordinator(&self) -> &coordinator::Coordinator {
        &self.core.coordinator
    }

    /// `hsm_control=purge`: cancels every waiting and running HSM action; answers how many.
    pub async fn hsm_cancel_all(&self) -> WeftResult<u64> {
        background::internal(&self.queue, InternalOp::HsmCancelAll).await
    }

    /// The coordinator's sweep now (what the background does every second): for tests.
    pub async fn hsm_sweep(&self) -> WeftResult<u64> {
        background::hsm_sweep(&self.core, &self.queue).await
    }

    /// Every action the coordinator holds, in arrival order (`mdt.*.hsm.actions`).
    pub fn hsm_actions(&self) -> WeftResult<Vec<weft_proto::msg::hsm::HsmActionItem>> {
        self.core.read_view().all_hsm_actions()
    }

    /// How many copytools were heard from within `HSM_AGENT_TIMEOUT_MS`.
    pub fn copytools_alive(&self) -> usize {
        self.core.coordinator.copytools_alive(self.core.clock.instant())
    }

    /// `mdt.*.hsm.agents`: the copytools heard from lately.
    pub fn hsm_agents(&self) -> WeftResult<String> {
        let mut running = std::collections::BTreeMap::new();
        for a in self.hsm_actions()? {
            if a.status == weft_proto::msg::hsm::ActionStatus::Started {
                *running.entry(a.agent).or_insert(0u64) += 1;
            }
        }
        Ok(self.core.coordinator.agents_listing(&running, self.core.clock.instant()))
    }

    /// The files queued for a resync of their synchronous mirrors (a write missed a mirror
    /// whose OST failed) whose stale mirrors' OSTs are all up again in the map: what the
    /// server resyncs now. At most `limit`.
    pub fn resyncs_due(&self, limit: usize) -> WeftResult<Vec<Fid>> {
        let view = self.core.read_view();
        let mut due = Vec::new();
        for fid in view.resync_entries(limit)? {
            // A file removed since (its removal took the entry off) is not due.
            let Some(layout) = view.inode(fid)?.and_then(|rec| rec.layout) else { continue };
            let stale: Vec<u16> = layout.mirror_ids().into_iter().filter(|m| !layout.mirror_in_sync(*m)).collect();
            let mut osts = stale.iter().flat_map(|m| layout.mirror(*m).objects().map(|o| o.ost).collect::<Vec<_>>());
            // Nor one with no stale mirror left (the change that made it so took the entry off).
            if !stale.is_empty()
                && osts.all(|ost| weft_proto::layout::dom_mdt(ost).is_some() || self.core.objects.is_up(ost))
            {
                due.push(fid);
            }
        }
        Ok(due)
    }

    /// Which OSTs exist, their state, pools. Called at start and whenever the map changes.
    pub fn set_cluster_map(&self, map: &ClusterMap) {
        self.core.dne.set_mdts(map.mdts().map(|t| t.index).collect());
        self.core.objects.set_map(map, |ost| self.precreate_state(ost));
    }

    /// Data on the MDT is served from now on: its objects come from the MDT's own object
    /// target ([`weft_proto::layout::dom_target`]), precreated through the
    /// [`ObjectTargets`] as the OSTs' are.
    pub fn serve_dom(&self) {
        let dom = weft_proto::layout::dom_target(self.core.mdt_index);
        self.core.objects.serve_dom(dom, self.precreate_state(dom));
    }

    /// The persisted (next oid, created oid) of an object target, None when unknown.
    fn precreate_state(&self, ost: u32) -> Option<(u32, u32)> {
        match self.core.read_view().precreate_state(ost) {
            Ok(s) => s,
            Err(e) => {
                // Starting from the beginning would hand out objects in use: refuse the OST
                // (empty pool that never refills) rather than guess.
                tracing::error!(ost, error = %e, "cannot read the precreate state of an OST");
                Some((u32::MAX, u32::MAX - 1))
            }
        }
    }

    pub fn stats(&self) -> MdsStats {
        let s = &self.core.stats;
        MdsStats {
            commits: s.commits.load(Ordering::Relaxed),
            mutations: s.mutations.load(Ordering::Relaxed),
            reply_cache_hits: s.reply_cache_hits.load(Ordering::Relaxed),
            batch_ops_max: s.batch_ops_max.load(Ordering::Relaxed),
            objects_destroyed: s.objects_destroyed.load(Ordering::Relaxed),
            open_handles: self.core.open_files().len() as u64,
        }
    }

    /// The MDT's lock namespace: once set, every request goes through [`locking`] (changes
    /// call back the clients caching what they change; answers carry intent locks).
    /// Its clients' record (clients.rs) goes with it: a recovery window open now, or one
    /// later, waits for the clients it names.
    pub fn set_lock_namespace(&self, ns: Arc<weft_dlm::namespace::Namespace>) {
        let view = self.core.read_view();
        match view.lock_clients().and_then(|c| Ok((c, view.lock_clients_complete()?))) {
            Ok((recorded, complete)) => {
                ns.set_lock_clients(Arc::new(clients::MdtClients::new(self.queue.clone(), recorded, complete)))
            }
            // Without it the recovery windows last their whole length, as an OST's do.
            Err(e) => tracing::warn!(error = %e, "the MDT's record of its clients could not be read"),
        }
        let _ = self.locks.set(ns);
    }

    /// Executes one request. `run`: whether the scheduler lets a mutation be committed by
    /// the thread that polls it, when that thread may block (see [`writer::Queue`]).
    pub async fn handle(&self, header: &RequestHeader, req: MdtRequest, run: Run) -> WeftResult<MdtReply> {
        // A replicated MDT's leader that cannot confirm it still leads starts nothing: not a
        // read (it could be stale), nor a change (it would wait on lock callbacks and then
        // on a group that no longer follows it).
        self.check_lease()?;
        if req.is_between_mdts() && !perm::is_root(&header.identity) {
            return Err(WeftError::new(ErrorCode::Perm, format!("{} is for the MDTs' own use", req.opcode_name())));
        }
        if let MdtRequest::QuotaAcquire(op) = &req {
            ops::quota::check_may_acquire(&header.identity, &op.owner)?;
            // The master's round talks to the OSTs: not an op of a batch or a snapshot.
            return self
                .core
                .quota
                .round(&self.core, &self.queue, Some((op.owner, op.ost)))
                .await
                .map(MdtReply::Granted);
        }
        if let (MdtRequest::ReplayOpens(_), Some(ns)) = (&req, self.locks.get()) {
            // The client is coming back: its lock replay follows (a window gives it time).
            ns.replay_begun(header.client_id);
        }
        // New limits reach the OSTs before the answer: the next write is held to them.
        let limits_change =
            matches!(req, MdtRequest::QuotaSet(_) | MdtRequest::QuotaDelete(_) | MdtRequest::QuotaSetGrace(_));
        dne::check_stripe(self, &req)?;
        if let (MdtRequest::Fid2Path(mdt::Fid2Path { fid }), true) = (&req, self.core.dne.several()) {
            return dne::fid2path(self, header, *fid).await;
        }
        let answer = match self.locks.get() {
            Some(ns) => locking::handle(self, ns, header, req, run).await,
            None => dne::change(self, header, req, run).await,
        };
        if limits_change && answer.is_ok() {
            if let Err(e) = self.core.quota.round(&self.core, &self.queue, None).await {
                tracing::warn!(error = %e, "granting the new quota limits to the OSTs failed; the next round does");
            }
        }
        answer
    }

    /// Ends the window for open replays `window` from now, sooner or later than it was to
    /// end (the new leader keeps it open until the clients can know where it is); the
    /// orphans nobody replayed an open of are destroyed after it.
    pub fn end_open_replay_in(&self, window: Duration) {
        let mut until = self.core.replay_opens_until.lock().unwrap_or_else(|p| p.into_inner());
        if until.is_some() {
            *until = Some(self.core.clock.instant() + window);
        }
    }

    /// Whether `fid` is `top` or in the tree under it (a fileset's check, see
    /// [`ops::fid2path::within`]).
    pub fn fid_within(&self, fid: Fid, top: Fid) -> WeftResult<bool> {
        ops::fid2path::within(&self.core.read_view(), fid, top)
    }

    /// Ok while this MDS may answer: always for a single MDT; for a replicated one's leader,
    /// while its read lease holds (replica.rs), else the `Moved` error.
    pub fn check_lease(&self) -> WeftResult<()> {
        self.core.lease_ok()
    }

    /// Whether the writer of open `handle` may still take the file's recorded size as
    /// exact: it opened the file at a trusted size and no other writer or size change came
    /// since (see [`open_files::OpenHandle::trusted_size_epoch`]).
    pub(crate) fn size_still_trusted(&self, handle: u64) -> bool {
        let of = self.core.open_files();
        of.handle(handle).is_some_and(|oh| of.size_still_trusted(oh))
    }

    /// Executes one request without taking locks.
    pub(crate) async fn execute(&self, header: &RequestHeader, req: MdtRequest, run: Run) -> WeftResult<MdtReply> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(WeftError::new(ErrorCode::Again, "the MDS is shutting down; retry on its successor"));
        }
        if !req.is_mutation() {
            // Checked again: a read that waited on a lock answers only from a leader.
            self.check_lease()?;
            let tables = self.core.read_view();
            return ops::read(&ops::QueryCtx { core: &self.core, t: &tables, who: &header.identity }, &req);
        }
        if header.request_id != 0 {
            if let Some(reply) = self.core.read_view().cached_reply(header)? {
                self.core.stats.reply_cache_hits.fetch_add(1, Ordering::Relaxed);
                return reply;
            }
        }
        let reservation = self.prepare_objects(header, &req).await?;
        let (reply_tx, reply_rx) = oneshot::channel();
        self.queue
            .submit(Job::Request { header: header.clone(), req, reservation, apply: None, reply: reply_tx }, run)?;
        reply_rx.await.map_err(|_| WeftError::io("the MDT writer stopped before answering"))?
    }

    /// For a create of a new file or a new layout on an empty file: checks what can be
    /// checked without the writer and reserves objects. Errors here are not cached (nothing
    /// happened); `None` lets the writer decide (it reports the error, or the name exists).
    async fn prepare_objects(&self, header: &RequestHeader, req: &MdtRequest) -> WeftResult<Option<Reservation>> {
        let dom = weft_proto::layout::dom_target(self.core.mdt_index);
        let spec = {
            let t = self.core.read_view();
            match req {
                MdtRequest::LayoutIntent(mdt::LayoutIntent { fid, end, resync, .. }) => {
                    let up = |ost| self.core.objects.is_up(ost);
                    let wants = ops::stripe::prepare_intent(&t, *fid, *end, *resync, dom, up)?;
                    return match wants {
                        Some(w) if !w.is_empty() => Ok(Some(self.core.objects.reserve_all(&w).await?)),
                        _ => Ok(None),
                    };
                }
                // New files: placed by the zone rules as the writer will place them.
                MdtRequest::Create(mdt::Create { parent, name, spec, .. }) => {
                    ops::create::prepare(&t, &header.identity, *parent, name, spec.as_ref())?
                        .map(|s| self.core.objects.zoned(s, &header.identity, &header.jobid))
                }
                MdtRequest::SetStripe(mdt::SetStripe { fid, spec }) => {
                    ops::stripe::prepare(&self.core, &t, *fid, spec)?
                }
                MdtRequest::Open(mdt::Open { fid, flags }) => ops::open::prepare_restore(&t, *fid, *flags)?,
                MdtRequest::CreateVolatile(mdt::CreateVolatile { like, spec }) => {
                    ops::stripe::prepare_volatile(&t, *like, spec)?
                }
                MdtRequest::CreateTmpfile(mdt::CreateTmpfile { parent, .. }) => {
                    ops::create::prepare_tmpfile(&t, &header.identity, *parent)?
                        .map(|s| self.core.objects.zoned(s, &header.identity, &header.jobid))
                }
                _ => None,
            }
        };
        match spec {
            Some(spec) => {
                let wants = objects::instantiation_wants(&self.core.objects.planned(&spec), 1, dom, None);
                Ok(Some(self.core.objects.reserve_all(&wants).await?))
            }
            None => Ok(None),
        }
    }

    /// Removes reply-cache entries stored more than `age_secs` ago (at most
    /// REPLY_CACHE_PRUNE_ENTRIES_MAX per call); returns how many. The background task does
    /// this every REPLY_CACHE_PRUNE_INTERVAL_MS with REPLY_CACHE_AGE_SECS_MAX.
    pub async fn prune_reply_cache(&self, age_secs: u64) -> WeftResult<u64> {
        let (done, rx) = oneshot::channel();
        let before = (self.core.clock.now().sec.max(0) as u64).saturating_sub(age_secs).saturating_add(1);
        self.queue
            .submit(Job::Internal { op: InternalOp::PruneReplies { before_secs: before }, done }, Run::Offload)?;
        rx.await.map_err(|_| WeftError::io("the MDT writer stopped before answering"))?
    }

    /// Stops background tasks, waits for the in-flight batch to commit.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
        // A last durable checkpoint, so that a clean restart has no journal to replay (but a
        // request admitted just before `stopping` may still commit after it: replay has it).
        let (done, rx) = tokio::sync::oneshot::channel();
        if self.queue.submit(Job::Internal { op: writer::InternalOp::Checkpoint, done }, Run::Offload).is_ok() {
            if let Ok(Err(e)) = rx.await {
                tracing::warn!(error = %e, "the final MDT checkpoint failed; the journal will be replayed at the next start");
            }
        }
        // The writer ends once the queued jobs are committed.
        self.queue.close();
        let thread = self.writer_thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for Mds {
    fn drop(&mut self) {
        for t in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            t.abort();
        }
    }
}

/// The inode an operation returns, with the open counts applied to the size rule.
pub fn inode_info(core: &Core, fid: Fid, rec: &InodeRecord) -> weft_proto::msg::InodeInfo {
    let writers = if rec.kind == FileType::Regular { core.open_files().counts(fid).writers } else { 0 };
    ops::inode_info_with(fid, rec, writers)
}

/// The directory default a new file under `dir` inherits: its own, else the root's.
pub fn inherited_spec(t: &store::Tables, dir: &InodeRecord) -> WeftResult<StripeSpec> {
    if let Some(d) = &dir.dir_default {
        return Ok(d.clone());
    }
    if let Some(root) = t.inode(Fid::ROOT)? {
        if let Some(d) = root.dir_default {
            return Ok(d);
        }
    }
    Ok(StripeSpec::unset())
}

/// A name for this start of the MDS: the wall clock in nanoseconds, which no earlier start
/// of it can have had.
pub(crate) fn start_id() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    now.as_nanos() as u64
}
