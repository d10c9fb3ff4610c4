//! Two MDSs (MDT0 and MDT1) and an OSS in one process, each MDS over storage of its own
//! with a fault plan of its own, and a lock service of its own; the requests of one MDS to
//! the other go straight to it, and fail as over a network when either is down (its plan
//! lost power: a kill -9).

use crate::machine::{map, mds_config, mdt_storage, settle, LocalOst, MdtRoute, OST};
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use weft_dlm::namespace::{CallbackSender, Namespace, NamespaceConfig};
use weft_mds::storage::mem::{MemJournal, MemKv};
use weft_mds::Mds;
use weft_oss::store::{FaultStore, MemStore, ObjectStore};
use weft_oss::Oss;
use weft_proto::faults::FaultPlan;
use weft_proto::lock::{CallbackAnswer, CallbackRequest, LockTarget};
use weft_proto::msg::ops::{take_reply, Op};
use weft_proto::msg::{MdtReply, MdtRequest, RequestHeader, Run};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The MDTs of the simulated file system.
pub const MDTS: [u32; 2] = [0, 1];

/// An MDS that runs, and the plan that says whether it was killed.
type Running = (Arc<Mds>, Arc<FaultPlan>);

/// The running MDSs, as the requests between them find them.
#[derive(Default)]
struct Net {
    mdss: Mutex<[Option<Running>; 2]>,
}

impl Net {
    /// MDT `mdt`'s MDS, unless it is down.
    fn up(&self, mdt: u32) -> Option<Arc<Mds>> {
        let mdss = self.mdss.lock().unwrap_or_else(|p| p.into_inner());
        match mdss.get(mdt as usize) {
            Some(Some((mds, plan))) if !plan.powered_off() => Some(mds.clone()),
            _ => None,
        }
    }

    /// A request to MDT `to`, from MDT `from` (None: from a client). A dead MDS sends
    /// nothing, and one that is down answers nothing: the sender's time runs out.
    fn call(
        self: &Arc<Self>,
        from: Option<u32>,
        to: u32,
        header: RequestHeader,
        req: MdtRequest,
        run: Run,
    ) -> BoxFuture<'static, WeftResult<MdtReply>> {
        let net = self.clone();
        Box::pin(async move {
            let timed_out = || WeftError::new(ErrorCode::TimedOut, format!("MDT{to:04x} did not answer in time"));
            if from.is_some_and(|f| net.up(f).is_none()) {
                return Err(timed_out());
            }
            let mds = net.up(to).ok_or_else(timed_out)?;
            mds.handle(&header, req, run).await
        })
    }
}

/// One MDT: what its disks hold (a kill -9 keeps it all, the page cache included), its
/// fault plan and its MDS.
struct Mdt {
    kv: Arc<MemKv>,
    journal: Arc<MemJournal>,
    plan: Arc<FaultPlan>,
    mds: Arc<Mds>,
    _dir: tempfile::TempDir,
}

pub struct Cluster {
    net: Arc<Net>,
    oss: Arc<Oss>,
    objects: Arc<MemStore>,
    mdts: Vec<Mdt>,
}

impl Cluster {
    /// Formats and starts both MDTs and the OST, and waits until they have settled.
    pub async fn start() -> WeftResult<Cluster> {
        let objects = Arc::new(MemStore::new());
        let store: Box<dyn ObjectStore> = Box::new(FaultStore::new(objects.clone(), Arc::new(FaultPlan::new())));
        let oss = Oss::with_stores("sim", vec![(OST, store)])?;
        let mut cluster = Cluster { net: Arc::default(), oss, objects, mdts: Vec::new() };
        for index in MDTS {
            let mdt = cluster.open(index, Arc::default(), Arc::default()).await?;
            cluster.mdts.push(mdt);
        }
        Ok(cluster)
    }

    async fn open(&self, index: u32, kv: Arc<MemKv>, journal: Arc<MemJournal>) -> WeftResult<Mdt> {
        let plan = Arc::new(FaultPlan::new());
        let dir = tempfile::tempdir().map_err(|e| WeftError::io(format!("no temporary directory: {e}")))?;
        // What the MDS reaches: the OST, and the other MDT through the net.
        let net = self.net.clone();
        let route: MdtRoute = Box::new(move |to, header, req| net.call(Some(index), to, header, req, Run::Offload));
        let targets = LocalOst { oss: self.oss.clone(), mdts: Some(route) };
        let storage = mdt_storage(&kv, &journal, &plan);
        let mds = Mds::open_with(mds_config(dir.path(), index), storage, Arc::new(targets))?;
        mds.set_cluster_map(&map(&MDTS));
        mds.set_lock_namespace(lock_namespace(index));
        self.net.mdss.lock().unwrap_or_else(|p| p.into_inner())[index as usize] = Some((mds.clone(), plan.clone()));
        settle(&plan, &self.objects, index).await?;
        Ok(Mdt { kv, journal, plan, mds, _dir: dir })
    }

    /// MDT `mdt`'s fault plan (a kill is a power loss of it, its page cache kept).
    pub fn plan(&self, mdt: u32) -> &Arc<FaultPlan> {
        &self.mdts[mdt as usize].plan
    }

    /// Whether an MDS was killed.
    pub fn killed(&self) -> Option<u32> {
        MDTS.into_iter().find(|m| self.plan(*m).powered_off())
    }

    /// A client's request to MDT `mdt`.
    pub async fn send<O>(&self, mdt: u32, header: RequestHeader, op: O) -> WeftResult<O::Reply>
    where
        O: Op<Request = MdtRequest, Answer = MdtReply>,
    {
        take_reply::<O>(self.send_request(mdt, header, op.into()).await?)
    }

    pub async fn send_request(&self, mdt: u32, header: RequestHeader, req: MdtRequest) -> WeftResult<MdtReply> {
        self.net.call(None, mdt, header, req, Run::Inline).await
    }

    /// Kills MDT `mdt`'s MDS (if its plan has not lost power yet, now) and starts it again
    /// over what its disks hold, as after kill -9.
    pub async fn restart(&mut self, mdt: u32) -> WeftResult<()> {
        let old = &self.mdts[mdt as usize];
        old.plan.power_off();
        old.mds.shutdown().await;
        let (kv, journal) = (old.kv.clone(), old.journal.clone());
        let new = self.open(mdt, kv, journal).await?;
        self.mdts[mdt as usize] = new;
        Ok(())
    }

    /// Distributed changes left unresolved on either MDT: steps prepared, commits untold.
    pub fn unresolved(&self) -> WeftResult<(usize, usize)> {
        let mut sum = (0, 0);
        for m in &self.mdts {
            let (prepared, untold) = m.mds.dne_unresolved()?;
            sum = (sum.0 + prepared, sum.1 + untold);
        }
        Ok(sum)
    }

    /// Has both MDSs resolve what is left now rather than after their tasks' periods.
    pub fn resolve_now(&self) {
        for m in &self.mdts {
            m.mds.dne_resolve_now();
        }
    }

    /// Stops both MDSs.
    pub async fn stop(self) {
        for m in &self.mdts {
            m.plan.power_off();
            m.mds.shutdown().await;
        }
    }
}

/// MDT `mdt`'s lock service: the MDS's own locks (a change's, a prepared step's kept until
/// its outcome); the simulation's client caches nothing, so nobody is called back.
fn lock_namespace(mdt: u32) -> Arc<Namespace> {
    let config = NamespaceConfig {
        target: LockTarget::Mdt(mdt),
        callback_timeout: std::time::Duration::from_secs(20),
        recovery_until: None,
    };
    Namespace::new(config, Arc::new(NoCallbacks))
}

struct NoCallbacks;

impl CallbackSender for NoCallbacks {
    fn send(
        &self,
        _: u64,
        _: CallbackRequest,
        _: std::time::Duration,
    ) -> BoxFuture<'static, WeftResult<CallbackAnswer>> {
        Box::pin(async { Ok(CallbackAnswer::Unknown) })
    }

    fn evict(&self, _: u64, _: String) {}
}
