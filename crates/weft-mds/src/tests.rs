//! Whole-service tests: idempotent resends, group commit, persistence across restarts,
//! orphans, the destroy queue, precreation and reply-cache pruning.

use crate::testutil::*;
use crate::writer::InternalOp;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use weft_proto::msg::*;
use weft_proto::{ErrorCode, Fid};

#[tokio::test]
async fn resent_mutation_returns_the_first_reply_without_a_second_effect() {
    let env = Env::new().await;
    env.must_file(Fid::ROOT, "f").await;
    let header = env.header_as(&Identity::root());
    let unlink = MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: "f".into() });
    let first = env.mds().handle(&header, unlink.clone(), Run::Inline).await;
    assert_eq!(first, Ok(MdtReply::Empty));
    // A resend after a reconnect: same client and request id.
    assert_eq!(env.mds().handle(&header, unlink.clone(), Run::Inline).await, first);
    // A new request id executes again.
    assert_eq!(code(env.req(unlink).await), ErrorCode::NotFound);

    let header = env.header_as(&Identity::root());
    let mkdir = MdtRequest::Mkdir(mdt::Mkdir { parent: Fid::ROOT, name: "d".into(), mode: 0o755, umask: 0 });
    let a = env.mds().handle(&header, mkdir.clone(), Run::Inline).await.unwrap();
    let b = env.mds().handle(&header, mkdir.clone(), Run::Inline).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 3);
    assert!(env.mds().stats().reply_cache_hits >= 2);

    // Errors are replayed too, and a create's handle is the same one.
    let header = env.header_as(&Identity::root());
    let create = MdtRequest::Create(mdt::Create {
        parent: Fid::ROOT,
        name: "c".into(),
        mode: 0o644,
        exclusive: true,
        spec: None,
        open_flags: OPEN_WRITE,
        umask: 0,
    });
    let a = env.mds().handle(&header, create.clone(), Run::Inline).await.unwrap();
    let b = env.mds().handle(&header, create, Run::Inline).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(env.stats_open(), 1);
}

/// One row per reply slot: a slot's next mutation replaces its reply, a resend of the slot's
/// last mutation still gets that reply, and a resend older than that is refused unexecuted.
#[tokio::test]
async fn a_reply_slot_keeps_only_its_last_reply() {
    let env = Env::new().await;
    let header = |request_id: u64, reply_slot: u32| RequestHeader {
        client_id: 9,
        request_id,
        reply_slot,
        identity: Identity::root(),
        jobid: "test".into(),
    };
    let mkdir =
        |name: &str| MdtRequest::Mkdir(mdt::Mkdir { parent: Fid::ROOT, name: name.into(), mode: 0o755, umask: 0 });
    let rows = || env.mds().core.read_view().reply_rows();
    let before = rows();
    let mut last = Vec::new();
    for i in 0..50u64 {
        last.push(
            env.mds().handle(&header(100 + i, (i % 2) as u32), mkdir(&format!("d{i}")), Run::Inline).await.unwrap(),
        );
    }
    assert_eq!(rows(), before + 2, "fifty mutations in two slots leave two rows");
    assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 52);
    // The last mutation of each slot, resent: its own reply, no second directory.
    assert_eq!(env.mds().handle(&header(149, 1), mkdir("d49"), Run::Inline).await.unwrap(), last[49]);
    assert_eq!(env.mds().handle(&header(148, 0), mkdir("d48"), Run::Inline).await.unwrap(), last[48]);
    // Older ones, resent (whatever they carry): refused, nothing done.
    let stale = env.mds().handle(&header(147, 1), mkdir("new"), Run::Inline).await.unwrap_err();
    assert_eq!(stale.code, ErrorCode::Stale, "{stale}");
    assert!(stale.message.contains("stale resend"), "{stale}");
    assert_eq!(
        code(env.req(MdtRequest::Lookup(mdt::Lookup { parent: Fid::ROOT, name: "new".into() })).await),
        ErrorCode::NotFound
    );
    assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 52);
    // The slot's next request runs.
    env.mds().handle(&header(150, 0), mkdir("d50"), Run::Inline).await.unwrap();
    assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 53);
    assert_eq!(rows(), before + 2);
}

#[tokio::test]
async fn changes_stay_in_memory_until_a_checkpoint_writes_them_into_redb() {
    let env = Env::new().await;
    let header = env.header_as(&Identity::root());
    let mkdir = MdtRequest::Mkdir(mdt::Mkdir { parent: Fid::ROOT, name: "d".into(), mode: 0o755, umask: 0 });
    let first = env.mds().handle(&header, mkdir.clone(), Run::Inline).await.unwrap();
    let mds = env.mds();
    assert!(mds.core.read_view().cached_reply(&header).unwrap().is_some());
    let in_redb = || {
        let t = crate::store::Tables::at_checkpoint(&*mds.core.storage.kv).unwrap();
        (t.dentry(Fid::ROOT, b"d").unwrap().is_some(), t.cached_reply(&header).unwrap().is_some())
    };
    crate::background::internal(&mds.queue, InternalOp::Checkpoint).await.unwrap();
    assert_eq!(in_redb(), (true, true), "after a checkpoint redb holds the directory and the reply");
    // Background jobs (the precreate pools filling up) may commit right after a checkpoint:
    // once they are done, a checkpoint leaves nothing in memory.
    let mut checkpoints = 1;
    while mds.core.read_view().overlay().rows() != 0 {
        assert!(checkpoints < 100, "rows stay in memory after {checkpoints} checkpoints");
        env.wait_refills_settled().await;
        crate::background::internal(&mds.queue, InternalOp::Checkpoint).await.unwrap();
        checkpoints += 1;
    }
    assert_eq!(mds.handle(&header, mkdir, Run::Inline).await.unwrap(), first);
    assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 3, "the resend made no second directory");
}

#[tokio::test]
async fn resend_survives_a_restart() {
    let mut env = Env::new().await;
    env.must_file(Fid::ROOT, "f").await;
    let header = env.header_as(&Identity::root());
    let unlink = MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: "f".into() });
    env.mds().handle(&header, unlink.clone(), Run::Inline).await.unwrap();
    env.restart().await;
    assert_eq!(env.mds().handle(&header, unlink, Run::Inline).await, Ok(MdtReply::Empty));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_share_commits() {
    let env = Env::with_map(cluster_map(&[0, 1], &[]), 64).await;
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    let before = env.mds().stats();
    let n = 400;
    let mut tasks = Vec::new();
    for i in 0..n {
        let mds = env.mds().clone();
        let header = env.header_as(&Identity::root());
        tasks.push(tokio::spawn(async move {
            let req = MdtRequest::Create(mdt::Create {
                parent: d,
                name: format!("f{i}").into(),
                mode: 0o644,
                exclusive: true,
                spec: None,
                open_flags: OPEN_READ,
                umask: 0,
            });
            mds.handle(&header, req, Run::Inline).await
        }));
    }
    let mut fids = std::collections::HashSet::new();
    let mut objects = std::collections::HashSet::new();
    for t in tasks {
        match t.await.unwrap().unwrap() {
            MdtReply::Opened(mdt::Opened { inode, .. }) => {
                assert!(fids.insert(inode.attr.fid));
                for o in &inode.layout.unwrap().plain().unwrap().objects {
                    assert!(objects.insert(o.fid), "object {} used twice", o.fid);
                }
            }
            r => panic!("{r:?}"),
        }
    }
    let after = env.mds().stats();
    let commits = after.commits - before.commits;
    assert!(commits < n, "{commits} commits for {n} creates");
    assert!(after.batch_ops_max > 1);
    assert_eq!(env.list(d, 1024).await.len(), n as usize);
}

#[tokio::test]
async fn namespace_persists_across_restart() {
    let mut env = Env::new().await;
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    let f = env.must_file(d, "f").await;
    env.req(MdtRequest::SetXattr(mdt::SetXattr { fid: f, name: "user.k".into(), value: b"v".to_vec(), flags: 0 }))
        .await
        .unwrap();
    env.req(MdtRequest::Symlink(mdt::Symlink { parent: d, name: "l".into(), target: b"f".to_vec() })).await.unwrap();
    let layout = env.getattr(f).await.unwrap().layout;
    env.restart().await;
    assert_eq!(env.sorted_names(d).await, vec!["f", "l"]);
    let i = env.lookup(d, "f").await.unwrap();
    assert_eq!((i.attr.fid, i.layout), (f, layout));
    let x = env.req(MdtRequest::GetXattr(mdt::GetXattr { fid: f, name: "user.k".into() })).await.unwrap();
    assert_eq!(x, MdtReply::Data(b"v".to_vec()));
    // New inodes and objects never reuse old ones.
    let g = env.must_file(d, "g").await;
    assert!(g.oid > f.oid);
    let go = env.getattr(g).await.unwrap().layout.unwrap().plain().unwrap().objects[0].fid;
    let fo = i_layout_object(&env, f).await;
    assert!(go.oid > fo.oid, "object {go} reused after restart ({fo})");
    assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 3);
}

async fn i_layout_object(env: &Env, fid: Fid) -> Fid {
    env.getattr(fid).await.unwrap().layout.unwrap().plain().unwrap().objects[0].fid
}

#[tokio::test]
async fn orphans_are_destroyed_at_restart() {
    let mut env = Env::new().await;
    let (i, _handle) = env.create_as(&Identity::root(), Fid::ROOT, "f", 0o644).await.unwrap();
    let object = i.layout.unwrap().plain().unwrap().objects[0].fid;
    env.req(MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: "f".into() })).await.unwrap();
    assert_eq!(env.must_attr(i.attr.fid).await.nlink, 0);
    // Crash-like restart: the handle is never closed.
    env.restart().await;
    assert_eq!(code(env.getattr(i.attr.fid).await), ErrorCode::NotFound);
    let destroyed = env.wait_destroyed(1).await;
    assert!(destroyed.contains(&(0, object)));
}

/// Each start destroys the OST's objects past the last id handed out before it hands out
/// any: after a power loss took back creates, their ids come round again, and a new file
/// must not show what the lost one wrote.
#[tokio::test]
async fn a_start_destroys_the_objects_past_the_last_handed_out() {
    let mut env = Env::new().await;
    let mut last = 0;
    for name in ["a", "b", "c"] {
        last = last.max(i_layout_object(&env, env.must_file(Fid::ROOT, name).await).await.oid);
    }
    // A new MDT has no record of the OST: it asks for nothing to be destroyed.
    assert_eq!(env.targets.orphan_cleanups.lock().unwrap().clone(), vec![(0, None)]);
    env.restart().await;
    // Nothing is handed out until the OST confirmed.
    let d = env.must_file(Fid::ROOT, "d").await;
    assert_eq!(env.targets.orphan_cleanups.lock().unwrap().clone(), vec![(0, None), (0, Some(last))]);
    let objects = env.targets.objects.lock().unwrap().get(&0).cloned().unwrap_or_default();
    assert_eq!(objects.last().copied(), Some(last), "precreated ids past {last} are destroyed");
    assert_eq!(i_layout_object(&env, d).await.oid, last + 1);
}

/// An MDT with no record of an OST (a new MDT against a used OST, an empty data directory),
/// or whose record is too far behind the OST to be its own, destroys nothing there and
/// hands out only ids past the OST's last one, also after a restart.
#[tokio::test]
async fn objects_that_are_not_this_mdts_are_never_destroyed_nor_handed_out() {
    let targets = Arc::new(FakeTargets::default());
    let someone_elses: BTreeSet<u32> = (1..=40).collect();
    targets.objects.lock().unwrap().insert(0, someone_elses.clone());
    let mut env = Env::with_targets(targets.clone(), cluster_map(&[0], &[]), 16).await;
    let f = env.must_file(Fid::ROOT, "f").await;
    assert_eq!(i_layout_object(&env, f).await.oid, 41);
    env.restart().await;
    let g = env.must_file(Fid::ROOT, "g").await;
    assert!(i_layout_object(&env, g).await.oid > 41);
    let objects = targets.objects.lock().unwrap().get(&0).cloned().unwrap();
    assert!(someone_elses.is_subset(&objects), "an object of another owner was destroyed");
    assert_eq!(targets.orphan_cleanups.lock().unwrap()[0], (0, None));

    // The OST moved far past this MDT's record: refused, skipped, nothing destroyed.
    let far = 41 + FAKE_ORPHANS_DESTROY_MAX + 500;
    targets.objects.lock().unwrap().get_mut(&0).unwrap().extend(far - 10..=far);
    env.restart().await;
    let h = env.must_file(Fid::ROOT, "h").await;
    assert_eq!(i_layout_object(&env, h).await.oid, far + 1);
    let objects = targets.objects.lock().unwrap().get(&0).cloned().unwrap();
    assert!(objects.contains(&far) && someone_elses.is_subset(&objects));
}

#[tokio::test]
async fn destroys_retry_until_the_ost_answers_and_survive_restart() {
    let mut env = Env::new().await;
    env.targets.fail_destroy.store(true, Ordering::SeqCst);
    let f = env.must_file(Fid::ROOT, "f").await;
    let object = i_layout_object(&env, f).await;
    env.req(MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: "f".into() })).await.unwrap();
    // Queued, and kept queued while the OST does not answer.
    let queued = env.mds().core.read_view().destroy_entries(usize::MAX, |_| true).unwrap();
    assert_eq!(queued, vec![(0, object)]);
    assert!(env.targets.destroyed().is_empty());
    env.restart().await;
    env.targets.fail_destroy.store(false, Ordering::SeqCst);
    assert_eq!(env.wait_destroyed(1).await, vec![(0, object)]);
    // The queue is empty once confirmed: nothing is destroyed twice.
    env.wait_destroy_queue_empty().await;
    assert_eq!(env.targets.destroyed().len(), 1);
}

#[tokio::test]
async fn precreate_refills_and_nospace_when_the_ost_fails() {
    let env = Env::new().await; // batch 16
    for i in 0..40 {
        env.must_file(Fid::ROOT, &format!("f{i}")).await;
    }
    let calls = env.targets.precreates.lock().unwrap().clone();
    assert!(calls.len() >= 3, "{calls:?}");
    // Each call continues where the last ended.
    for w in calls.windows(2) {
        assert_eq!(w[1].1, w[0].1 + w[0].2);
    }
    assert_eq!(calls[0], (0, 1, 16));
    // Starve the pool: the OST stops answering.
    env.targets.fail_precreate.store(true, Ordering::SeqCst);
    let mut saw_nospace = false;
    for i in 0..40 {
        match env.create_as(&Identity::root(), Fid::ROOT, &format!("g{i}"), 0o644).await {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.code, ErrorCode::NoSpace, "{e}");
                assert!(e.message.contains("OST"), "{e}");
                saw_nospace = true;
                break;
            }
        }
    }
    assert!(saw_nospace);
}

#[tokio::test]
async fn reply_cache_is_pruned_by_age() {
    let env = Env::new().await;
    let header = env.header_as(&Identity::root());
    let mkdir = MdtRequest::Mkdir(mdt::Mkdir { parent: Fid::ROOT, name: "d".into(), mode: 0o755, umask: 0 });
    env.mds().handle(&header, mkdir.clone(), Run::Inline).await.unwrap();
    assert_eq!(env.mds().prune_reply_cache(600).await.unwrap(), 0);
    env.mds().core.clock.advance(Duration::from_millis(1100));
    assert!(env.mds().prune_reply_cache(0).await.unwrap() >= 1);
    // Pruned: the same request id now executes again.
    assert_eq!(code(env.mds().handle(&header, mkdir, Run::Inline).await), ErrorCode::Exists);
}

/// A reply row too damaged to read fails the mutations of its slot with EIO (a resend could
/// not be told from a new request), and the next pruning pass removes it, whatever its age.
#[tokio::test]
async fn a_damaged_reply_row_fails_its_slot_until_pruned() {
    let env = Env::new().await;
    let header = env.header_as(&Identity::root());
    let key = crate::schema::reply_key(header.client_id, header.reply_slot).to_vec();
    let corrupt = InternalOp::PutRaw { table: crate::schema::TABLE_REPLY_CACHE, key, value: vec![0xff; 3] };
    crate::background::internal(&env.mds().queue, corrupt).await.unwrap();
    let mkdir = MdtRequest::Mkdir(mdt::Mkdir { parent: Fid::ROOT, name: "d".into(), mode: 0o755, umask: 0 });
    let e = env.mds().handle(&header, mkdir.clone(), Run::Inline).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Io, "{e}");
    assert!(e.message.contains("corrupt reply-cache entry"), "{e}");
    assert_eq!(env.mds().prune_reply_cache(600).await.unwrap(), 1, "removed though it is new");
    env.mds().handle(&header, mkdir, Run::Inline).await.unwrap();
    assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 3);
}

#[tokio::test]
async fn second_open_of_a_running_mdt_is_refused() {
    let env = Env::new().await;
    let r = crate::Mds::open(crate::MdsConfig::new(env.dir.path().to_path_buf(), 0), env.targets.clone());
    assert_eq!(r.err().map(|e| e.code), Some(ErrorCode::Busy));
}

#[tokio::test]
async fn unknown_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        use crate::storage::KvStore;
        let kv = crate::storage::redb_kv::RedbKv::open(&dir.path().join(crate::schema::DB_FILE_NAME)).unwrap();
        let version = 99u32.to_be_bytes();
        let row = (crate::schema::TABLE_META, crate::schema::META_FORMAT_KEY, Some(version.as_slice()));
        kv.commit(&mut std::iter::once(row)).unwrap();
    }
    let r = crate::Mds::open(
        crate::MdsConfig::new(dir.path().to_path_buf(), 0),
        std::sync::Arc::new(FakeTargets::default()),
    );
    let e = r.err().unwrap();
    assert_eq!(e.code, ErrorCode::NotSupported);
    assert!(e.message.contains("format version 99"), "{e}");
}

/// A corrupt inode record fails only the op that reads it (EIO naming the FID); the rest of
/// its batch is applied again, in-memory opens included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_error_in_a_batch_fails_only_its_op() {
    let env = Env::new().await;
    let bad = env.must_file(Fid::ROOT, "bad").await;
    let corrupt =
        InternalOp::PutRaw { table: crate::schema::TABLE_INODES, key: bad.to_bytes().to_vec(), value: vec![0xff; 3] };
    crate::background::internal(&env.mds().queue, corrupt).await.unwrap();
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    let mut tasks = Vec::new();
    for i in 0..30 {
        let mds = env.mds().clone();
        let header = env.header_as(&Identity::root());
        tasks.push(tokio::spawn(async move {
            let req = if i % 10 == 5 {
                MdtRequest::Setattr(mdt::Setattr {
                    fid: bad,
                    set: SetAttr { mode: Some(0o600), ..Default::default() },
                    open_handle: None,
                })
            } else {
                MdtRequest::Create(mdt::Create {
                    parent: d,
                    name: format!("f{i}").into(),
                    mode: 0o644,
                    exclusive: true,
                    spec: None,
                    open_flags: OPEN_WRITE,
                    umask: 0,
                })
            };
            (i, mds.handle(&header, req, Run::Inline).await)
        }));
    }
    for t in tasks {
        let (i, r) = t.await.unwrap();
        if i % 10 == 5 {
            let e = r.unwrap_err();
            assert_eq!(e.code, ErrorCode::Io);
            assert!(e.message.contains(&bad.to_string()), "{e}");
        } else {
            r.unwrap();
        }
    }
    assert_eq!(env.list(d, 100).await.len(), 27);
    assert_eq!(env.stats_open(), 27);
    assert_eq!(code(env.getattr(bad).await), ErrorCode::Io);
}

/// Plain threads (as FUSE threads under `weft up`) commit their own mutations when nobody
/// else is committing; tasks of the runtime queue theirs for the writer thread. Both at once
/// lose nothing, answer everyone, and what was answered survives a restart.
#[test]
fn inline_committers_and_the_writer_thread_together_lose_nothing() {
    // A job nobody commits would hang its caller: fail instead.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let run = std::thread::spawn(move || {
        inline_and_queued_commits();
        let _ = done_tx.send(());
    });
    if done_rx.recv_timeout(Duration::from_secs(60)).is_err() {
        panic!("a mutation was never committed (or the test failed: see above)");
    }
    run.join().unwrap();
}

fn inline_and_queued_commits() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut env = rt.block_on(Env::new());
    let env_ref = &env;
    const PER_CALLER: usize = 150;
    std::thread::scope(|s| {
        for t in 0..3 {
            let rt = &rt;
            s.spawn(move || {
                for i in 0..PER_CALLER {
                    rt.block_on(env_ref.must_file(Fid::ROOT, &format!("thread{t}-{i}")));
                }
            });
        }
        rt.block_on(async {
            let tasks: Vec<_> = (0..2)
                .map(|t| {
                    let mds = env_ref.mds().clone();
                    let headers: Vec<_> = (0..PER_CALLER).map(|_| env_ref.header_as(&Identity::root())).collect();
                    tokio::spawn(async move {
                        for (i, header) in headers.into_iter().enumerate() {
                            let req = MdtRequest::Mkdir(mdt::Mkdir {
                                parent: Fid::ROOT,
                                name: format!("task{t}-{i}").into(),
                                mode: 0o755,
                                umask: 0,
                            });
                            mds.handle(&header, req, Run::Inline).await.unwrap();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
    });
    rt.block_on(async {
        env.restart().await;
        let names = env.list(Fid::ROOT, 1000).await;
        assert_eq!(names.len(), 5 * PER_CALLER);
        for i in 0..PER_CALLER {
            assert!(names.contains(&format!("thread2-{i}")) && names.contains(&format!("task1-{i}")));
        }
        assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 2 + 2 * PER_CALLER as u32);
        assert_eq!(env.mds().stats().open_handles, 0);
        env.stop().await;
    });
}
