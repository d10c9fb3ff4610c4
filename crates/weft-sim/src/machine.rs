//! One simulated server machine: an MDS (MDT 0) and an OSS (OST 0) in one process, over
//! storage in memory wrapped in fault injectors that share the machine's [`FaultPlan`].
//! Restarting it after a crash builds new services over what the crash left of the storage.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_mds::storage::fault::{FaultJournal, FaultKv};
use weft_mds::storage::mem::{MemJournal, MemKv};
use weft_mds::storage::MdtStorage;
use weft_mds::{Mds, MdsConfig, ObjectTargets};
use weft_oss::store::{FaultStore, MemStore, ObjectStore};
use weft_oss::Oss;
use weft_proto::faults::FaultPlan;
use weft_proto::msg::ops::{take_reply, Op};
use weft_proto::msg::{
    ost, ClusterMap, MdtReply, MdtRequest, OstReply, OstRequest, RequestHeader, Run, TargetInfo, TargetKind,
};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The one OST of the machine.
pub const OST: u32 = 0;
/// Objects the MDS precreates at a time: more than a workload creates files, so the pool
/// is filled once, before the workload, and no refill moves the faults' places.
const PRECREATE_BATCH: u32 = 512;
/// How long the storage must stay quiet before the machine counts as settled.
const SETTLE_QUIET_MS: u64 = 50;
const SETTLE_WAIT_MS_MAX: u64 = 10_000;

/// What the machine stores, as the crash leaves it.
#[derive(Clone)]
pub struct Disks {
    pub kv: Arc<MemKv>,
    pub journal: Arc<MemJournal>,
    pub objects: Arc<MemStore>,
}

impl Disks {
    pub fn new() -> Disks {
        Disks { kv: Arc::default(), journal: Arc::default(), objects: Arc::new(MemStore::new()) }
    }

    /// What a power loss leaves: the durable part only.
    pub fn after_power_loss(&self) -> Disks {
        Disks {
            kv: self.kv.clone(),
            journal: Arc::new(self.journal.after_power_loss()),
            objects: Arc::new(self.objects.after_power_loss()),
        }
    }
}

impl Default for Disks {
    fn default() -> Self {
        Disks::new()
    }
}

/// The MDS's way to the OST: the OSS of the same machine, called directly. Destroys never
/// finish (the simulation does not check reclaimed space, and a background destroy would
/// move the faults' places). Its way to other MDTs, if any: `mdts`.
pub(crate) struct LocalOst {
    pub oss: Arc<Oss>,
    pub mdts: Option<MdtRoute>,
}

/// How an MDS of a simulation with several reaches the others (MDT, header, request).
pub(crate) type MdtRoute =
    Box<dyn Fn(u32, RequestHeader, MdtRequest) -> BoxFuture<'static, WeftResult<MdtReply>> + Send + Sync>;

impl LocalOst {
    /// One op to an OST of the machine's OSS, as over the wire but without it.
    fn call<O>(&self, ost: u32, op: O) -> BoxFuture<'static, WeftResult<O::Reply>>
    where
        O: Op<Request = OstRequest, Answer = OstReply> + Send + 'static,
    {
        let oss = self.oss.clone();
        Box::pin(async move {
            let (reply, _) = oss.handle(ost, op.into(), Bytes::new(), Run::Inline).await;
            take_reply::<O>(reply?)
        })
    }
}

impl ObjectTargets for LocalOst {
    fn precreate(&self, ost: u32, start_oid: u32, count: u32) -> BoxFuture<'static, WeftResult<u32>> {
        let call = self.call(ost, ost::Precreate { start_oid, count });
        Box::pin(async move { Ok(call.await?.last_oid) })
    }

    fn destroy_orphans(
        &self,
        ost: u32,
        mdt: u32,
        above_oid: Option<u32>,
        mds_start: u64,
    ) -> BoxFuture<'static, WeftResult<ost::Orphans>> {
        self.call(ost, ost::DestroyOrphans { mdt, above_oid, mds_start })
    }

    fn destroy(&self, _ost: u32, _fid: Fid) -> BoxFuture<'static, WeftResult<()>> {
        Box::pin(std::future::pending())
    }

    fn mdt(&self, mdt: u32, header: RequestHeader, req: MdtRequest) -> BoxFuture<'static, WeftResult<MdtReply>> {
        match &self.mdts {
            Some(route) => route(mdt, header, req),
            None => Box::pin(async move {
                Err(WeftError::new(ErrorCode::NotSupported, format!("MDT{mdt:04x} is not in the simulation")))
            }),
        }
    }
}

pub struct Machine {
    pub plan: Arc<FaultPlan>,
    pub disks: Disks,
    pub mds: Arc<Mds>,
    pub oss: Arc<Oss>,
    /// The MDS's statfs looks at a real directory.
    _dir: tempfile::TempDir,
}

impl Machine {
    /// Starts the services over `disks` with a fresh plan, and waits until they have made
    /// their start-up writes (format, replay, the precreate pool).
    pub async fn start(disks: Disks) -> WeftResult<Machine> {
        let plan = Arc::new(FaultPlan::new());
        let storage = mdt_storage(&disks.kv, &disks.journal, &plan);
        let objects: Box<dyn ObjectStore> = Box::new(FaultStore::new(disks.objects.clone(), plan.clone()));
        let oss = Oss::with_stores("sim", vec![(OST, objects)])?;
        let dir = tempfile::tempdir().map_err(|e| WeftError::io(format!("no temporary directory: {e}")))?;
        let mds =
            Mds::open_with(mds_config(dir.path(), 0), storage, Arc::new(LocalOst { oss: oss.clone(), mdts: None }))?;
        mds.set_cluster_map(&map(&[0]));
        let machine = Machine { plan, disks, mds, oss, _dir: dir };
        settle(&machine.plan, &machine.disks.objects, 0).await?;
        Ok(machine)
    }

    /// Cuts the power to the running services and stops them; what they do after fails.
    pub async fn stop(self) -> Disks {
        self.plan.power_off();
        self.mds.shutdown().await;
        self.disks
    }

    /// One object op to the OST.
    pub async fn ost<O>(&self, op: O, bulk: Bytes) -> WeftResult<(O::Reply, Bytes)>
    where
        O: Op<Request = OstRequest, Answer = OstReply>,
    {
        let (reply, bulk) = self.oss.handle(OST, op.into(), bulk, Run::Inline).await;
        Ok((take_reply::<O>(reply?)?, bulk))
    }
}

/// The storage of an MDT over `kv` and `journal`, with the faults of `plan`.
pub(crate) fn mdt_storage(kv: &Arc<MemKv>, journal: &Arc<MemJournal>, plan: &Arc<FaultPlan>) -> MdtStorage {
    MdtStorage {
        kv: Arc::new(FaultKv::new(kv.clone(), plan.clone())),
        journal: Arc::new(FaultJournal::new(journal.clone(), plan.clone())),
    }
}

/// A simulated MDS's settings: the pool of objects filled once, no checkpoint but asked.
pub(crate) fn mds_config(dir: &std::path::Path, mdt_index: u32) -> MdsConfig {
    MdsConfig {
        precreate_batch: PRECREATE_BATCH,
        checkpoint_interval: None,
        ..MdsConfig::new(dir.to_path_buf(), mdt_index)
    }
}

/// Waits until MDT `mdt`'s objects are precreated on the OST and no storage operation of
/// `plan` has run for a moment.
pub(crate) async fn settle(plan: &FaultPlan, objects: &MemStore, mdt: u32) -> WeftResult<()> {
    let start = Instant::now();
    let mut last = (plan.ops(), Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let ops = plan.ops();
        if ops != last.0 {
            last = (ops, Instant::now());
        } else if objects.last_id(mdt) >= PRECREATE_BATCH && last.1.elapsed() >= Duration::from_millis(SETTLE_QUIET_MS)
        {
            return Ok(());
        }
        if start.elapsed() > Duration::from_millis(SETTLE_WAIT_MS_MAX) {
            return Err(WeftError::io("the simulated machine did not settle"));
        }
    }
}

/// The cluster map of MDTs `mdts` and the one OST.
pub(crate) fn map(mdts: &[u32]) -> ClusterMap {
    let target = |kind, index| TargetInfo::new(kind, index, "sim:0");
    let mut targets: Vec<TargetInfo> = mdts.iter().map(|m| target(TargetKind::Mdt, *m)).collect();
    targets.push(target(TargetKind::Ost, OST));
    ClusterMap { version: 1, fsname: "sim".into(), targets, pools: Default::default(), ..Default::default() }
}
