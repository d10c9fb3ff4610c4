//! The MDS request path without any transport: each operation through `Mds::handle` from a
//! plain thread (as a FUSE thread calls it under `weft up`), with and without the lock
//! namespace, and with a changelog reader registered (every change recorded), in
//! microseconds per operation; and creates under I/O zone rules (`lod.*.zone_rule`): one
//! that matches, and 64 that do not (each tried, then the zones' OSTs left out). Objects
//! come from an in-memory OST stand-in, so this measures the MDT alone: `cargo run
//! --release -p weft-mds --example mds_ops`.

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_dlm::namespace::{CallbackSender, Namespace, NamespaceConfig};
use weft_mds::{Mds, MdsConfig, ObjectTargets};
use weft_proto::lock::{CallbackAnswer, CallbackRequest, LockTarget};
use weft_proto::msg::*;
use weft_proto::{Fid, WeftResult};

const OPS: u64 = 20_000;

/// OSTs that create and destroy nothing.
struct NoObjects;

impl ObjectTargets for NoObjects {
    fn precreate(&self, _ost: u32, start_oid: u32, count: u32) -> BoxFuture<'static, WeftResult<u32>> {
        Box::pin(async move { Ok(start_oid + count - 1) })
    }
    fn destroy_orphans(&self, _: u32, _: u32, _: Option<u32>, _: u64) -> BoxFuture<'static, WeftResult<ost::Orphans>> {
        Box::pin(async { Ok(ost::Orphans { last_oid: 0, destroyed: true }) })
    }
    fn destroy(&self, _ost: u32, _fid: Fid) -> BoxFuture<'static, WeftResult<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// One client only: nobody is ever called back.
struct NoCallbacks;

impl CallbackSender for NoCallbacks {
    fn send(&self, _: u64, _: CallbackRequest, _: Duration) -> BoxFuture<'static, WeftResult<CallbackAnswer>> {
        Box::pin(async { Ok(CallbackAnswer::Unknown) })
    }
    fn evict(&self, _: u64, _: String) {}
}

fn map() -> ClusterMap {
    let mut targets: Vec<TargetInfo> =
        (0..4).map(|i| TargetInfo::new(TargetKind::Ost, i, format!("mem:{i}"))).collect();
    targets.push(TargetInfo::new(TargetKind::Mdt, 0, "mem:mdt"));
    ClusterMap {
        version: 1,
        fsname: "bench".into(),
        targets,
        // Two of the four OSTs make the zone of the zone rules' runs.
        pools: [("zone".to_string(), vec![2, 3])].into(),
        params: Vec::new(),
        decay: Vec::new(),
        sync_mirror_pools: Default::default(),
        mgs_replicas: Vec::new(),
        nodemap: Default::default(),
        qos: Default::default(),
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (locks, changelog, zones) in
        [(false, false, 0), (true, false, 0), (false, true, 0), (false, false, 1), (false, false, 64)]
    {
        let dir = tempfile::tempdir().unwrap();
        let cfg = MdsConfig::new(dir.path().to_path_buf(), 0);
        let mds = rt.block_on(async { Mds::open(cfg, Arc::new(NoObjects)) }).unwrap();
        mds.set_cluster_map(&map());
        for i in 0..zones {
            // The first of one matches every create; none of 64 does.
            let expr = if zones == 1 { "uid={0}".to_string() } else { format!("jobid={{job{i}.*}}&uid={{{i}}}") };
            let cmd = weft_mds::zone::ZoneCommand::parse(&format!("start z{i} {expr} pool=zone")).unwrap();
            mds.objects().lock().zones.apply(cmd).unwrap();
        }
        if locks {
            let ns = rt.block_on(async {
                Namespace::new(
                    NamespaceConfig {
                        target: LockTarget::Mdt(0),
                        callback_timeout: Duration::from_secs(20),
                        recovery_until: None,
                    },
                    Arc::new(NoCallbacks),
                )
            });
            mds.set_lock_namespace(ns);
        }
        let request_id = std::sync::atomic::AtomicU64::new(0);
        let header = || RequestHeader {
            client_id: 7,
            request_id: request_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            reply_slot: 0,
            identity: Identity::root(),
            jobid: String::new(),
        };
        let call = |req: MdtRequest| rt.block_on(mds.handle(&header(), req, Run::Inline)).unwrap();
        if changelog {
            call(MdtRequest::ChangelogRegister(mdt::ChangelogRegister { name: None }));
        }
        // With locks on, a change of names answers its directories too (MdtReply::Changed).
        let (MdtReply::Inode(dir), _) =
            call(MdtRequest::Mkdir(mdt::Mkdir { parent: Fid::ROOT, name: b"d".to_vec(), mode: 0o755, umask: 0 }))
                .into_parts()
        else {
            panic!("mkdir")
        };
        let dir = dir.attr.fid;
        let name = |i: u64| format!("f{i}").into_bytes();
        let time = |what: &str, f: &mut dyn FnMut(u64)| {
            let start = Instant::now();
            for i in 0..OPS {
                f(i);
            }
            let us = start.elapsed().as_secs_f64() * 1e6 / OPS as f64;
            let mode = match (locks, changelog, zones) {
                (_, _, 1) => "1 zone    ",
                (_, _, 64) => "64 zones  ",
                (false, false, _) => "locks off ",
                (true, false, _) => "locks on  ",
                (_, true, _) => "changelog ",
            };
            println!("{mode} {what:22} {us:8.1} us");
        };
        let mut fids = Vec::new();
        let mut handles = Vec::new();
        time("lookup (missing)", &mut |i| {
            let _ = rt.block_on(mds.handle(
                &header(),
                MdtRequest::Lookup(mdt::Lookup { parent: dir, name: name(i) }),
                Run::Inline,
            ));
        });
        time("create", &mut |i| {
            let req = MdtRequest::Create(mdt::Create {
                parent: dir,
                name: name(i),
                mode: 0o644,
                exclusive: false,
                spec: None,
                open_flags: OPEN_WRITE,
                umask: 0,
            });
            let (MdtReply::Opened(mdt::Opened { inode, handle, .. }), _) = call(req).into_parts() else {
                panic!("create")
            };
            fids.push(inode.attr.fid);
            handles.push(handle);
        });
        time("close", &mut |i| {
            let (fid, handle) = (fids[i as usize], handles[i as usize]);
            call(MdtRequest::Close(mdt::Close { fid, handle, size_blocks: None, data_version: 0, mtime_ns: 0 }));
        });
        time("getattr", &mut |i| {
            call(MdtRequest::Getattr(mdt::Getattr { fid: fids[i as usize] }));
        });
        time("lookup", &mut |i| {
            call(MdtRequest::Lookup(mdt::Lookup { parent: dir, name: name(i) }));
        });
        time("unlink", &mut |i| {
            call(MdtRequest::Unlink(mdt::Unlink { parent: dir, name: name(i) }));
        });
        rt.block_on(mds.shutdown());
    }
}
