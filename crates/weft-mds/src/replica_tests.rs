//! A replicated MDT's replicas under a group that delivers every entry to every replica it
//! names, in order (weft-raft's tests cover the consensus; these, what the MDS does with it):
//! the leader's files are on every replica, a replica serves after another with the same
//! namespace and reply cache, a snapshot makes a new replica whole, and a replica that may
//! have lost the lead commits nothing more.

use super::*;
use crate::storage::mem::{MemJournal, MemKv};
use crate::testutil::{cluster_map, FakeTargets};
use crate::{Mds, MdsConfig};
use std::sync::atomic::AtomicBool;
use weft_proto::msg::*;
use weft_proto::Fid;

/// The group: applies each proposal to the replicas that are up, in order.
struct FakeGroup {
    replicas: Vec<Arc<Replica>>,
    up: Mutex<Vec<bool>>,
    last_index: AtomicU64,
    /// Proposals fail (the proposer lost the lead) while set.
    failing: AtomicBool,
}

impl FakeGroup {
    fn new(replicas: Vec<Arc<Replica>>) -> Arc<FakeGroup> {
        let up = Mutex::new(vec![true; replicas.len()]);
        Arc::new(FakeGroup { replicas, up, last_index: AtomicU64::new(0), failing: AtomicBool::new(false) })
    }

    fn set_up(&self, i: usize, up: bool) {
        self.up.lock().unwrap()[i] = up;
    }
}

impl Proposer for FakeGroup {
    fn propose(&self, payload: Vec<u8>) -> WeftResult<u64> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(not_leader("lost the lead"));
        }
        let index = self.last_index.fetch_add(1, Ordering::SeqCst) + 1;
        let up = self.up.lock().unwrap().clone();
        for (r, _) in self.replicas.iter().zip(up).filter(|(_, up)| *up) {
            r.apply(Some(&payload), &index.to_be_bytes())?;
        }
        Ok(index)
    }

    fn sync(&self) -> WeftResult<()> {
        Ok(())
    }
}

fn mem_replica(dir: &std::path::Path) -> (Arc<Replica>, MdtStorage) {
    let storage = MdtStorage { kv: Arc::new(MemKv::default()), journal: Arc::new(MemJournal::default()) };
    (Replica::open_with(dir.to_path_buf(), 0, storage.clone()).unwrap(), storage)
}

/// Opens `r`'s Mds; its lease to answer reads is renewed for the test's length.
fn serve(r: &Arc<Replica>, group: &Arc<FakeGroup>) -> Arc<Mds> {
    let mds = serve_unconfirmed(r, group);
    r.lease.renew(std::time::Instant::now(), std::time::Duration::from_secs(3600));
    mds
}

fn serve_unconfirmed(r: &Arc<Replica>, group: &Arc<FakeGroup>) -> Arc<Mds> {
    let cfg = MdsConfig::new(r.data_dir.clone(), 0);
    let mds = r.serve(cfg, group.clone(), Arc::new(FakeTargets::default())).unwrap();
    mds.set_cluster_map(&cluster_map(&[0], &[]));
    mds
}

fn header(request_id: u64) -> RequestHeader {
    RequestHeader {
        client_id: 7,
        request_id,
        reply_slot: request_id as u32,
        identity: Identity::root(),
        jobid: "test".into(),
    }
}

fn mkdir(name: &str) -> MdtRequest {
    MdtRequest::Mkdir(mdt::Mkdir { parent: Fid::ROOT, name: name.into(), mode: 0o755, umask: 0 })
}

async fn lookup(mds: &Mds, name: &str) -> WeftResult<MdtReply> {
    mds.handle(&header(0), MdtRequest::Lookup(mdt::Lookup { parent: Fid::ROOT, name: name.into() }), Run::Inline).await
}

#[tokio::test]
async fn every_replica_keeps_what_the_leader_committed_and_another_serves_it_with_the_reply_cache() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (replicas, storages): (Vec<_>, Vec<_>) = dirs.iter().map(|d| mem_replica(d.path())).unzip();
    let group = FakeGroup::new(replicas.clone());

    let a = serve(&replicas[0], &group);
    let mut answers = Vec::new();
    for i in 0..20u64 {
        answers.push(a.handle(&header(100 + i), mkdir(&format!("d{i}")), Run::Inline).await.unwrap());
    }
    // The followers have every entry (the format's included), kept as the group said.
    for r in &replicas {
        assert_eq!(r.applied_state(), Some(group.last_index.load(Ordering::SeqCst).to_be_bytes().to_vec()));
    }
    a.shutdown().await;
    replicas[0].follow().unwrap();

    // B leads now: the same names, and a create resent to it is answered as the first was.
    let b = serve(&replicas[1], &group);
    for i in 0..20u64 {
        let MdtReply::Inode(found) = lookup(&b, &format!("d{i}")).await.unwrap() else { panic!("not an inode") };
        let MdtReply::Inode(made) = &answers[i as usize] else { panic!("mkdir answered {:?}", answers[i as usize]) };
        assert_eq!(found.attr.fid, made.attr.fid);
        let resent = b.handle(&header(100 + i), mkdir(&format!("d{i}")), Run::Inline).await;
        assert_eq!(resent.as_ref(), Ok(&answers[i as usize]), "a resend to the new leader is not run again");
    }
    b.handle(&header(500), mkdir("after"), Run::Inline).await.unwrap();
    b.shutdown().await;
    replicas[1].follow().unwrap();

    // A replica that restarts (process gone, its storage kept) has everything, "after" too.
    drop(replicas);
    let restarted = Replica::open_with(dirs[2].path().to_path_buf(), 0, storages[2].clone()).unwrap();
    let group2 = FakeGroup::new(vec![restarted.clone()]);
    group2.last_index.store(group.last_index.load(Ordering::SeqCst), Ordering::SeqCst);
    let c = serve(&restarted, &group2);
    assert!(lookup(&c, "after").await.is_ok());
    assert!(lookup(&c, "d19").await.is_ok());
    c.shutdown().await;
}

#[tokio::test]
async fn a_snapshot_makes_a_new_replica_whole_and_removes_what_it_had_alone() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let (a_rep, _) = mem_replica(dirs[0].path());
    let (d_rep, _) = mem_replica(dirs[1].path());
    let group = FakeGroup::new(vec![a_rep.clone(), d_rep.clone()]);
    group.set_up(1, false);
    let a = serve(&a_rep, &group);
    for i in 0..5u64 {
        a.handle(&header(10 + i), mkdir(&format!("s{i}")), Run::Inline).await.unwrap();
    }
    // Part in the store, part in the journal: the snapshot has both.
    a.checkpoint().await.unwrap();
    a.handle(&header(20), mkdir("late"), Run::Inline).await.unwrap();
    let (state, data) = a_rep.snapshot().unwrap();
    a.shutdown().await;
    a_rep.follow().unwrap();

    // D was down for all of it, and had a row of its own that the group never committed.
    d_rep.apply(Some(&postcard::to_stdvec(&Entry { origin: 0, seq: 0, changes: vec![] }).unwrap()), b"old").unwrap();
    d_rep.install(&state, &data).unwrap();
    assert_eq!(d_rep.applied_state(), Some(state.clone()));
    group.set_up(1, true);
    let solo = FakeGroup::new(vec![d_rep.clone()]);
    solo.last_index.store(u64::from_be_bytes(state.as_slice().try_into().unwrap()), Ordering::SeqCst);
    let d = serve(&d_rep, &solo);
    for name in ["s0", "s4", "late"] {
        assert!(lookup(&d, name).await.is_ok(), "{name} is on the new replica");
    }
    d.shutdown().await;
}

/// Requests are answered only under a lease the group renewed, never past it.
#[tokio::test]
async fn a_replica_answers_reads_only_while_its_lease_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = mem_replica(dir.path());
    let group = FakeGroup::new(vec![r.clone()]);
    let mds = serve_unconfirmed(&r, &group);
    let e = mds.handle(&header(1), mkdir("d"), Run::Inline).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Moved, "no lease yet: no change starts either");
    let now = std::time::Instant::now();
    r.lease.renew(now, std::time::Duration::from_secs(60));
    mds.handle(&header(1), mkdir("d"), Run::Inline).await.unwrap();
    assert!(lookup(&mds, "d").await.is_ok());
    // A renewal asked long ago has run out, and does not shorten the one that holds.
    r.lease.renew(now - std::time::Duration::from_secs(600), std::time::Duration::from_secs(1));
    assert!(lookup(&mds, "d").await.is_ok());
    let lapsed = Lease::default();
    lapsed.renew(std::time::Instant::now(), std::time::Duration::ZERO);
    assert_eq!(lapsed.check().unwrap_err().code, ErrorCode::Moved);
    mds.shutdown().await;
}

#[tokio::test]
async fn a_replica_that_may_have_lost_the_lead_commits_nothing_more() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let (a_rep, _) = mem_replica(dirs[0].path());
    let (b_rep, _) = mem_replica(dirs[1].path());
    let group = FakeGroup::new(vec![a_rep.clone(), b_rep.clone()]);
    let a = serve(&a_rep, &group);
    a.handle(&header(1), mkdir("kept"), Run::Inline).await.unwrap();

    group.failing.store(true, Ordering::SeqCst);
    let e = a.handle(&header(2), mkdir("lost"), Run::Inline).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Moved, "{e}");
    assert!(a_rep.fenced());
    // Even with the group back, this Mds commits nothing: its state may not be the group's.
    group.failing.store(false, Ordering::SeqCst);
    let e = a.handle(&header(3), mkdir("refused"), Run::Inline).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Moved, "{e}");
    assert_eq!(group.last_index.load(Ordering::SeqCst), 2, "the format and one mkdir were proposed");

    // An entry of the next leader reaching a serving replica fences it and is kept.
    let b_entry = Entry {
        origin: 99,
        seq: 1,
        changes: vec![Change { table: schema::TABLE_XATTRS, key: b"k".to_vec(), value: Some(b"v".to_vec()) }],
    };
    let (c_dir, (c_rep, c_storage)) = {
        let d = tempfile::tempdir().unwrap();
        let r = mem_replica(d.path());
        (d, r)
    };
    let solo = FakeGroup::new(vec![c_rep.clone()]);
    let c = serve(&c_rep, &solo);
    c_rep.apply(Some(&postcard::to_stdvec(&b_entry).unwrap()), &9u64.to_be_bytes()).unwrap();
    assert!(c_rep.fenced());
    c.checkpoint().await.unwrap();
    c.shutdown().await;
    c_rep.follow().unwrap();
    let mut found = None;
    c_storage.kv.snapshot().unwrap().get(schema::TABLE_XATTRS, b"k", &mut |v| found = Some(v.to_vec())).unwrap();
    assert_eq!(found.as_deref(), Some(&b"v"[..]), "the other leader's entry is in the store");
    assert_eq!(c_rep.applied_state(), Some(9u64.to_be_bytes().to_vec()));
    drop(c_dir);

    a.shutdown().await;
    a_rep.follow().unwrap();
}

/// Open replay: a new leader takes back, during its window, the opens clients held from the
/// old one (an unlinked file open somewhere is then no orphan to destroy); after the window
/// it takes none, and the orphans nobody holds open go.
#[tokio::test]
async fn opens_replayed_to_a_new_leader_keep_their_files_and_late_ones_are_refused() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let (replicas, _): (Vec<_>, Vec<_>) = dirs.iter().map(|d| mem_replica(d.path())).unzip();
    let group = FakeGroup::new(replicas.clone());
    let a = serve(&replicas[0], &group);
    let create = |name: &str| {
        MdtRequest::Create(mdt::Create {
            parent: Fid::ROOT,
            name: name.into(),
            mode: 0o644,
            exclusive: true,
            spec: None,
            open_flags: OPEN_READ | OPEN_WRITE,
            umask: 0,
        })
    };
    let opened = |r: WeftResult<MdtReply>| match r.unwrap() {
        MdtReply::Opened(o) => o,
        other => panic!("create answered {other:?}"),
    };
    let kept = opened(a.handle(&header(1), create("kept"), Run::Inline).await);
    let gone = opened(a.handle(&header(2), create("gone"), Run::Inline).await);
    for (i, name) in [(3, "kept"), (4, "gone")] {
        let unlink = MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: name.into() });
        a.handle(&header(i), unlink, Run::Inline).await.unwrap();
    }
    a.shutdown().await;
    replicas[0].follow().unwrap();

    // B leads, with a window for replays: the client replays one of its two opens.
    let cfg = MdsConfig {
        open_replay_window: Some(std::time::Duration::from_secs(3600)),
        ..MdsConfig::new(replicas[1].data_dir.clone(), 0)
    };
    let b = replicas[1].serve(cfg, group.clone(), Arc::new(FakeTargets::default())).unwrap();
    b.set_cluster_map(&cluster_map(&[0], &[]));
    replicas[1].lease.renew(std::time::Instant::now(), std::time::Duration::from_secs(3600));
    let replayed = |handle, fid| mdt::ReplayedOpen { fid, handle, flags: OPEN_READ | OPEN_WRITE, passthrough: false };
    let missing = Fid::new(Fid::ROOT.seq, 999_999, 0);
    let replay = MdtRequest::ReplayOpens(mdt::ReplayOpens {
        opens: vec![replayed(kept.handle, kept.inode.attr.fid), replayed(77, missing)],
    });
    assert_eq!(b.handle(&header(5), replay, Run::Inline).await, Ok(MdtReply::Cookies(vec![kept.handle])));
    // The orphan cleanup after the window spares the replayed open's file only.
    let destroyed = crate::background::internal(&b.queue, crate::writer::InternalOp::DestroyOrphans).await.unwrap();
    assert_eq!(destroyed, 1, "the orphan nobody replayed an open of is destroyed");
    let view = b.core.read_view();
    assert!(view.inode(kept.inode.attr.fid).unwrap().is_some());
    assert!(view.inode(gone.inode.attr.fid).unwrap().is_none());
    // New handles never meet replayed ones: they start at this MDS's start.
    let fresh = opened(b.handle(&header(6), create("fresh"), Run::Inline).await);
    assert!(fresh.handle > kept.handle);
    // The replayed open's last close destroys its unlinked file, as any open's would.
    let close = MdtRequest::Close(mdt::Close {
        fid: kept.inode.attr.fid,
        handle: kept.handle,
        size_blocks: None,
        data_version: 0,
        mtime_ns: 0,
    });
    assert_eq!(b.handle(&header(7), close, Run::Inline).await, Ok(MdtReply::Closed(None)));
    b.shutdown().await;
    replicas[1].follow().unwrap();

    // A leader past its window (or one that never changed server) takes no replay.
    let a = serve(&replicas[0], &group);
    let late = MdtRequest::ReplayOpens(mdt::ReplayOpens { opens: vec![replayed(fresh.handle, fresh.inode.attr.fid)] });
    assert_eq!(a.handle(&header(8), late, Run::Inline).await.unwrap_err().code, ErrorCode::Stale);
    a.shutdown().await;
}

/// A replica whose store was damaged outside redb (a disk fault, a stray write) refuses to
/// open, and the error names the file; the same file undamaged opens.
#[test]
fn a_replica_with_a_damaged_store_refuses_to_open_and_names_the_file() {
    use crate::storage::KvStore;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(crate::schema::DB_FILE_NAME);
    {
        let kv = crate::storage::redb_kv::RedbKv::open(&db).unwrap();
        let rows: Vec<(Vec<u8>, Vec<u8>)> =
            (0..20_000u32).map(|i| (i.to_be_bytes().to_vec(), vec![(i % 251) as u8; 100])).collect();
        kv.commit(&mut rows.iter().map(|(k, v)| (0u8, k.as_slice(), Some(v.as_slice())))).unwrap();
    }
    Replica::open(dir.path().to_path_buf(), 0).expect("an undamaged store opens");
    let len = std::fs::metadata(&db).unwrap().len();
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
        file.write_all_at(&vec![0xa5; 256 * 1024], len / 2 - 128 * 1024).unwrap();
    }
    let refused = Replica::open(dir.path().to_path_buf(), 0).err().expect("a damaged store must be refused");
    assert!(refused.message.contains("corrupt"), "{}", refused.message);
    assert!(refused.message.contains(&db.display().to_string()), "the file is named: {}", refused.message);
}
