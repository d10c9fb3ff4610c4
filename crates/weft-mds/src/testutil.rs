//! Test harness: an in-memory [`ObjectTargets`] that records calls and can be told to fail,
//! and an [`Env`] that runs an MDS in a temporary directory with `must_*` helpers.

use crate::{Mds, MdsConfig, ObjectTargets};
use futures::future::BoxFuture;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use weft_proto::msg::*;
use weft_proto::{ErrorCode, Fid, StripeSpec, WeftError, WeftResult};

/// The fake OST's bound on an orphan cleanup (a real OST's is far larger).
pub const FAKE_ORPHANS_DESTROY_MAX: u32 = 100;

/// How long a test waits for an event of the background tasks before it fails.
pub const WAIT_EVENT_MS: u64 = 5_000;

#[derive(Default)]
pub struct FakeTargets {
    /// Objects that exist, per OST.
    pub objects: Mutex<BTreeMap<u32, BTreeSet<u32>>>,
    pub precreates: Mutex<Vec<(u32, u32, u32)>>,
    pub destroyed: Mutex<Vec<(u32, Fid)>>,
    /// Orphan cleanups asked for: (ost, above_oid).
    pub orphan_cleanups: Mutex<Vec<(u32, Option<u32>)>>,
    /// Precreates and orphan cleanups fail, as with an OST that does not answer.
    pub fail_precreate: AtomicBool,
    pub fail_destroy: AtomicBool,
    /// Told at every destroy the fake OSTs saw.
    pub destroy_seen: tokio::sync::Notify,
}

impl FakeTargets {
    pub fn destroyed(&self) -> Vec<(u32, Fid)> {
        self.destroyed.lock().unwrap().clone()
    }
}

impl ObjectTargets for FakeTargets {
    fn precreate(&self, ost: u32, start_oid: u32, count: u32) -> BoxFuture<'static, WeftResult<u32>> {
        let r = if self.fail_precreate.load(Ordering::SeqCst) {
            Err(WeftError::new(ErrorCode::TimedOut, format!("fake OST {ost} does not answer")))
        } else {
            self.precreates.lock().unwrap().push((ost, start_oid, count));
            let mut objs = self.objects.lock().unwrap();
            let set = objs.entry(ost).or_default();
            for oid in start_oid..start_oid + count {
                set.insert(oid);
            }
            Ok(start_oid + count - 1)
        };
        Box::pin(async move { r })
    }

    /// As an OST: past the MDS's id every object goes; with no id, or a gap past the
    /// bound, none does (see weft-oss).
    fn destroy_orphans(
        &self,
        ost: u32,
        _mdt: u32,
        above_oid: Option<u32>,
        _mds_start: u64,
    ) -> BoxFuture<'static, WeftResult<ost::Orphans>> {
        let r = if self.fail_precreate.load(Ordering::SeqCst) {
            Err(WeftError::new(ErrorCode::TimedOut, format!("fake OST {ost} does not answer")))
        } else {
            self.orphan_cleanups.lock().unwrap().push((ost, above_oid));
            let mut objs = self.objects.lock().unwrap();
            let set = objs.entry(ost).or_default();
            let last_oid = set.last().copied().unwrap_or(0);
            match above_oid {
                Some(above) if last_oid.saturating_sub(above) <= FAKE_ORPHANS_DESTROY_MAX => {
                    set.split_off(&above.saturating_add(1));
                    Ok(ost::Orphans { last_oid, destroyed: true })
                }
                _ => Ok(ost::Orphans { last_oid, destroyed: false }),
            }
        };
        Box::pin(async move { r })
    }

    fn destroy(&self, ost: u32, fid: Fid) -> BoxFuture<'static, WeftResult<()>> {
        let r = if self.fail_destroy.load(Ordering::SeqCst) {
            Err(WeftError::new(ErrorCode::TimedOut, format!("fake OST {ost} does not answer")))
        } else {
            assert_eq!(fid.seq, Fid::object_seq(ost), "destroy of {fid} sent to the wrong OST {ost}");
            self.objects.lock().unwrap().entry(ost).or_default().remove(&fid.oid);
            self.destroyed.lock().unwrap().push((ost, fid));
            self.destroy_seen.notify_waiters();
            Ok(())
        };
        Box::pin(async move { r })
    }
}

pub fn cluster_map(osts: &[u32], pools: &[(&str, &[u32])]) -> ClusterMap {
    let mut targets: Vec<TargetInfo> =
        osts.iter().map(|i| TargetInfo::new(TargetKind::Ost, *i, format!("fake:{i}"))).collect();
    targets.push(TargetInfo::new(TargetKind::Mdt, 0, "fake:mdt"));
    ClusterMap {
        version: 1,
        fsname: "weft".into(),
        targets,
        pools: pools.iter().map(|(n, o)| (n.to_string(), o.to_vec())).collect(),
        params: Vec::new(),
        decay: Vec::new(),
        sync_mirror_pools: Default::default(),
        mgs_replicas: Vec::new(),
        nodemap: Default::default(),
        qos: Default::default(),
    }
}

pub fn user(uid: u32) -> Identity {
    Identity { uid, gid: uid, groups: vec![] }
}

pub struct Env {
    pub dir: tempfile::TempDir,
    mds: Option<Arc<Mds>>,
    pub targets: Arc<FakeTargets>,
    pub map: ClusterMap,
    next_request: AtomicU64,
    pub client_id: u64,
}

impl Env {
    pub async fn new() -> Env {
        Self::with_map(cluster_map(&[0], &[]), 16).await
    }

    pub async fn with_map(map: ClusterMap, batch: u32) -> Env {
        Self::with_targets(Arc::new(FakeTargets::default()), map, batch).await
    }

    pub async fn with_targets(targets: Arc<FakeTargets>, map: ClusterMap, batch: u32) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let mds = Self::start(dir.path(), targets.clone(), &map, batch);
        Env { dir, mds: Some(mds), targets, map, next_request: AtomicU64::new(1), client_id: 42 }
    }

    fn start(path: &std::path::Path, targets: Arc<FakeTargets>, map: &ClusterMap, batch: u32) -> Arc<Mds> {
        let mut cfg = MdsConfig::new(path.to_path_buf(), 0);
        cfg.precreate_batch = batch;
        let mds = Mds::open(cfg, targets).unwrap();
        mds.set_cluster_map(map);
        mds
    }

    pub fn mds(&self) -> &Arc<Mds> {
        self.mds.as_ref().expect("the MDS is running")
    }

    /// Stops the MDS and opens it again on the same directory (a restart).
    pub async fn restart(&mut self) {
        self.stop().await;
        self.mds = Some(Self::start(self.dir.path(), self.targets.clone(), &self.map, 16));
    }

    pub async fn stop(&mut self) {
        if let Some(mds) = self.mds.take() {
            mds.shutdown().await;
            assert_eq!(Arc::strong_count(&mds), 1, "someone still holds the MDS");
        }
    }

    pub fn header_as(&self, who: &Identity) -> RequestHeader {
        let request_id = self.next_request.fetch_add(1, Ordering::Relaxed);
        RequestHeader {
            client_id: self.client_id,
            request_id,
            // A slot of its own per request: tests run many at once under one client id.
            reply_slot: request_id as u32,
            identity: who.clone(),
            jobid: "test".into(),
        }
    }

    pub async fn req(&self, req: MdtRequest) -> WeftResult<MdtReply> {
        self.req_as(&Identity::root(), req).await
    }

    pub async fn req_as(&self, who: &Identity, req: MdtRequest) -> WeftResult<MdtReply> {
        self.mds().handle(&self.header_as(who), req, Run::Inline).await
    }

    pub async fn mkdir_as(&self, who: &Identity, parent: Fid, name: &str, mode: u32) -> WeftResult<Fid> {
        let made =
            self.req_as(who, MdtRequest::Mkdir(mdt::Mkdir { parent, name: name.into(), mode, umask: 0 })).await?;
        // With a lock namespace, a change of names comes with its directory (mdt::Changed).
        match made.into_parts().0 {
            MdtReply::Inode(i) => Ok(i.attr.fid),
            r => panic!("mkdir replied {r:?}"),
        }
    }

    pub async fn must_mkdir(&self, parent: Fid, name: &str) -> Fid {
        self.mkdir_as(&Identity::root(), parent, name, 0o755).await.unwrap()
    }

    /// Creates and opens for writing; returns the inode and handle.
    pub async fn create_as(&self, who: &Identity, parent: Fid, name: &str, mode: u32) -> WeftResult<(InodeInfo, u64)> {
        let req = MdtRequest::Create(mdt::Create {
            parent,
            name: name.into(),
            mode,
            exclusive: true,
            spec: None,
            open_flags: OPEN_READ | OPEN_WRITE,
            umask: 0,
        });
        match self.req_as(who, req).await? {
            MdtReply::Opened(mdt::Opened { inode, handle, .. }) => Ok((inode, handle)),
            r => panic!("create replied {r:?}"),
        }
    }

    /// Creates a file and closes it with size 0; returns its FID.
    pub async fn must_file(&self, parent: Fid, name: &str) -> Fid {
        let (i, h) = self.create_as(&Identity::root(), parent, name, 0o644).await.unwrap();
        self.must_close(i.attr.fid, h, Some((0, 0))).await;
        i.attr.fid
    }

    pub async fn must_close(&self, fid: Fid, handle: u64, size_blocks: Option<(u64, u64)>) {
        self.req(MdtRequest::Close(mdt::Close { fid, handle, size_blocks, data_version: 0, mtime_ns: 0 }))
            .await
            .unwrap();
    }

    pub async fn lookup(&self, parent: Fid, name: &str) -> WeftResult<InodeInfo> {
        match self.req(MdtRequest::Lookup(mdt::Lookup { parent, name: name.into() })).await? {
            MdtReply::Inode(i) => Ok(i),
            r => panic!("lookup replied {r:?}"),
        }
    }

    pub async fn must_attr(&self, fid: Fid) -> Attr {
        match self.req(MdtRequest::Getattr(mdt::Getattr { fid })).await.unwrap() {
            MdtReply::Inode(i) => i.attr,
            r => panic!("getattr replied {r:?}"),
        }
    }

    pub async fn getattr(&self, fid: Fid) -> WeftResult<InodeInfo> {
        match self.req(MdtRequest::Getattr(mdt::Getattr { fid })).await? {
            MdtReply::Inode(i) => Ok(i),
            r => panic!("getattr replied {r:?}"),
        }
    }

    /// Every name in a directory, through as many readdir calls as needed, in listing order.
    pub async fn list(&self, dir: Fid, page: u32) -> Vec<String> {
        let mut cookie = 0;
        let mut names = Vec::new();
        loop {
            let p = match self
                .req(MdtRequest::Readdir(mdt::Readdir { fid: dir, cookie, max_entries: page }))
                .await
                .unwrap()
            {
                MdtReply::Dir(p) => p,
                r => panic!("readdir replied {r:?}"),
            };
            for e in &p.entries {
                names.push(String::from_utf8(e.name.clone()).unwrap());
            }
            if let Some(last) = p.entries.last() {
                cookie = last.cookie;
            }
            if p.eof {
                return names;
            }
            assert!(!p.entries.is_empty(), "a page without entries must be eof");
        }
    }

    pub async fn sorted_names(&self, dir: Fid) -> Vec<String> {
        let mut n = self.list(dir, 1024).await;
        n.sort();
        n
    }

    /// Waits (at most WAIT_EVENT_MS) until the fake OSTs saw `n` destroys.
    pub async fn wait_destroyed(&self, n: usize) -> Vec<(u32, Fid)> {
        let seen = async {
            loop {
                let next = self.targets.destroy_seen.notified();
                tokio::pin!(next);
                next.as_mut().enable();
                let d = self.targets.destroyed();
                if d.len() >= n {
                    return d;
                }
                next.await;
            }
        };
        match tokio::time::timeout(std::time::Duration::from_millis(WAIT_EVENT_MS), seen).await {
            Ok(d) => d,
            Err(_) => panic!("expected {n} destroys, saw {:?}", self.targets.destroyed()),
        }
    }

    /// Waits (at most WAIT_EVENT_MS) until the destroy task finds its queue empty.
    pub async fn wait_destroy_queue_empty(&self) {
        let core = &self.mds().core;
        let idle = core.destroy_idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        // Sends it round once more, should it be waiting already.
        core.destroy_wake.notify_one();
        tokio::time::timeout(std::time::Duration::from_millis(WAIT_EVENT_MS), idle)
            .await
            .expect("the destroy queue did not empty");
    }

    /// Waits (at most WAIT_EVENT_MS) until no refill runs and every up pool is full enough:
    /// the refill task commits nothing more until objects are taken.
    pub async fn wait_refills_settled(&self) {
        let objects = &self.mds().core.objects;
        let settled = async {
            loop {
                let refilled = objects.refilled.notified();
                tokio::pin!(refilled);
                refilled.as_mut().enable();
                let busy =
                    {
                        let st = objects.lock();
                        st.up_osts.iter().chain(st.dom.iter()).filter_map(|o| st.ost_pools.get(o)).any(|p| {
                            p.refilling || (p.available() < objects.refill_below && p.refill_start() != u32::MAX)
                        })
                    };
                if !busy {
                    return;
                }
                refilled.await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_millis(WAIT_EVENT_MS), settled)
            .await
            .expect("the precreate pools did not settle");
    }
}

pub fn code<T: std::fmt::Debug>(r: WeftResult<T>) -> ErrorCode {
    r.expect_err("expected an error").code
}

pub fn spec(count: i64) -> StripeSpec {
    StripeSpec { stripe_count: count, ..StripeSpec::unset() }
}

impl Env {
    pub fn stats_open(&self) -> u64 {
        self.mds().stats().open_handles
    }
}

/// Callbacks answered "released" at once: a lock service for tests of one MDS.
struct NoCallbacks;
impl weft_dlm::namespace::CallbackSender for NoCallbacks {
    fn send(
        &self,
        _: u64,
        _: weft_proto::lock::CallbackRequest,
        _: std::time::Duration,
    ) -> futures::future::BoxFuture<'static, WeftResult<weft_proto::lock::CallbackAnswer>> {
        Box::pin(async { Ok(weft_proto::lock::CallbackAnswer::Released) })
    }
    fn evict(&self, _: u64, _: String) {}
}

/// A lock namespace of MDT 0 whose callbacks are answered at once (`Mds::set_lock_namespace`).
pub fn namespace() -> Arc<weft_dlm::namespace::Namespace> {
    let config = weft_dlm::namespace::NamespaceConfig {
        target: weft_proto::lock::LockTarget::Mdt(0),
        callback_timeout: std::time::Duration::from_secs(5),
        recovery_until: None,
    };
    weft_dlm::namespace::Namespace::new(config, Arc::new(NoCallbacks))
}
