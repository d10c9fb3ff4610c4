//! Tests drive the service through `Mgs::handle`, as weft-server does.

use super::*;
use std::time::Duration;
use weft_proto::msg::{TargetInfo, TargetKind, TargetState};
use weft_proto::ErrorCode;

fn target(kind: TargetKind, index: u32, address: &str) -> TargetInfo {
    TargetInfo::new(kind, index, address)
}

async fn must_register(mgs: &Mgs, t: TargetInfo) -> ClusterMap {
    match mgs.handle(MgsRequest::Register(mgs::Register { target: t })).await.expect("register") {
        MgsReply::Map(map) => map,
        other => panic!("unexpected reply {other:?}"),
    }
}

#[tokio::test]
async fn new_file_system_starts_at_version_one_and_registration_bumps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    let map = mgs.map();
    assert_eq!((map.version, map.fsname.as_str(), map.targets.len()), (1, "testfs", 0));

    let map = must_register(&mgs, target(TargetKind::Ost, 7, "h1:1")).await;
    assert_eq!(map.version, 2);
    // The same server registering again restarted: a new instance, which its clients must
    // learn (they replay their locks there), so the version moves.
    let map = must_register(&mgs, target(TargetKind::Ost, 7, "h1:1")).await;
    assert_eq!((map.version, map.target(TargetKind::Ost, 7).unwrap().instance), (3, 2));
    let map = must_register(&mgs, target(TargetKind::Ost, 7, "h2:1")).await;
    assert_eq!(map.version, 4);
    assert_eq!(map.target(TargetKind::Ost, 7).unwrap().address, "h2:1");
    must_register(&mgs, target(TargetKind::Mdt, 0, "h1:2")).await;
    let map = must_register(&mgs, target(TargetKind::Ost, 0, "h1:1")).await;
    let order: Vec<_> = map.targets.iter().map(|t| (t.kind, t.index)).collect();
    assert_eq!(order, [(TargetKind::Mdt, 0), (TargetKind::Ost, 0), (TargetKind::Ost, 7)]);
    assert_eq!(map.version, 6);
    assert_eq!(mgs.map(), map);
}

#[tokio::test]
async fn the_map_survives_reopen_and_another_fsname_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let before = {
        let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
        must_register(&mgs, target(TargetKind::Ost, 1000, "h:1")).await;
        mgs.handle(MgsRequest::PoolAdd(mgs::PoolAdd { pool: "flash".into(), osts: vec![1000] })).await.unwrap();
        let down = MgsRequest::SetTargetState(mgs::SetTargetState {
            kind: TargetKind::Ost,
            index: 1000,
            state: TargetState::Down,
        });
        mgs.handle(down).await.unwrap();
        mgs.map()
    };
    assert_eq!(before.version, 4);
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    assert_eq!(mgs.map(), before);

    let err = Mgs::open(tmp.path(), "otherfs").unwrap_err();
    assert_eq!(err.code, ErrorCode::Invalid);
    assert!(err.message.contains("'testfs'") && err.message.contains("'otherfs'"), "{}", err.message);
    assert_eq!(Mgs::open(tmp.path(), "").unwrap_err().code, ErrorCode::Invalid);

    std::fs::write(tmp.path().join(store::MAP_FILE_NAME), b"{ not json").unwrap();
    let err = Mgs::open(tmp.path(), "testfs").unwrap_err();
    assert!(err.message.contains("damaged"), "{}", err.message);
}

#[tokio::test]
async fn get_map_answers_unchanged_only_for_the_current_version() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    let get = |known_version| mgs.handle(MgsRequest::GetMap(mgs::GetMap { known_version }));
    assert_eq!(get(1).await, Ok(MgsReply::Unchanged(1)));
    assert_eq!(get(0).await, Ok(MgsReply::Map(mgs.map())), "0 always fetches");
    must_register(&mgs, target(TargetKind::Ost, 0, "h:1")).await;
    assert_eq!(get(1).await, Ok(MgsReply::Map(mgs.map())));
    assert_eq!(get(2).await, Ok(MgsReply::Unchanged(2)));
    assert_eq!(get(99).await, Ok(MgsReply::Map(mgs.map())), "a version from the future refetches");
}

#[tokio::test]
async fn target_state_and_pool_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    let down =
        MgsRequest::SetTargetState(mgs::SetTargetState { kind: TargetKind::Ost, index: 3, state: TargetState::Down });
    assert_eq!(mgs.handle(down.clone()).await.unwrap_err().code, ErrorCode::NotFound);
    must_register(&mgs, target(TargetKind::Ost, 3, "h:1")).await;
    let MgsReply::Map(map) = mgs.handle(down.clone()).await.unwrap() else { panic!("expected a map") };
    assert_eq!((map.version, map.target(TargetKind::Ost, 3).unwrap().state), (3, TargetState::Down));
    let MgsReply::Map(map) = mgs.handle(down).await.unwrap() else { panic!("expected a map") };
    assert_eq!(map.version, 3, "no change, no new version");

    let bad_name = MgsRequest::PoolAdd(mgs::PoolAdd { pool: "no spaces".into(), osts: vec![3] });
    assert_eq!(mgs.handle(bad_name).await.unwrap_err().code, ErrorCode::Invalid);
    let unknown = MgsRequest::PoolAdd(mgs::PoolAdd { pool: "p".into(), osts: vec![3, 4] });
    let err = mgs.handle(unknown).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    assert!(err.message.contains('4'), "{}", err.message);
    // An MDT index is not an OST.
    must_register(&mgs, target(TargetKind::Mdt, 5, "h:2")).await;
    let mdt = MgsRequest::PoolAdd(mgs::PoolAdd { pool: "p".into(), osts: vec![5] });
    assert_eq!(mgs.handle(mdt).await.unwrap_err().code, ErrorCode::NotFound);
    assert!(mgs.map().pools.is_empty());
}

#[tokio::test(start_paused = true)]
async fn wait_for_change_wakes_on_a_new_version_only() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    // Already newer than what the follower knows: resolves at once.
    assert_eq!(mgs.wait_for_change(0).await.version, 1);

    let follower = {
        let mgs = mgs.clone();
        tokio::spawn(async move { mgs.wait_for_change(1).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!follower.is_finished(), "nothing changed yet");
    // A request that changes nothing must not wake followers.
    mgs.handle(MgsRequest::GetMap(mgs::GetMap { known_version: 0 })).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!follower.is_finished());

    must_register(&mgs, target(TargetKind::Ost, 1, "h:1")).await;
    let map = tokio::time::timeout(Duration::from_secs(5), follower).await.expect("woken").unwrap();
    assert_eq!(map.version, 2);
    assert!(map.target(TargetKind::Ost, 1).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_registrations_each_get_a_version() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    let tasks: Vec<_> = (0..32u32)
        .map(|i| {
            let mgs = mgs.clone();
            tokio::spawn(async move { must_register(&mgs, target(TargetKind::Ost, i * 3, "h:1")).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let map = mgs.map();
    assert_eq!((map.version, map.targets.len()), (33, 32));
    // One management service per directory: a second is refused while the first runs.
    let e = Mgs::open(tmp.path(), "testfs").unwrap_err();
    assert!(e.message.contains("another management service"), "{}", e.message);
    drop(mgs);
    assert_eq!(Mgs::open(tmp.path(), "testfs").unwrap().map(), map);
}

#[tokio::test]
async fn a_watch_answers_when_the_map_moves_and_unchanged_when_it_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    let watch = |known_version, wait_ms| {
        mgs.handle(MgsRequest::WatchMap(mgs::WatchMap { known_version, wait_ms, client_id: 0 }))
    };
    // Nothing moves: Unchanged after the wait, not before.
    let started = std::time::Instant::now();
    assert_eq!(watch(1, 100).await, Ok(MgsReply::Unchanged(1)));
    assert!(started.elapsed() >= Duration::from_millis(100));
    // A follower behind gets the map at once.
    assert_eq!(watch(0, 10_000).await, Ok(MgsReply::Map(mgs.map())));
    // A follower waiting learns a change when it happens.
    // join! polls the watch first: it waits before the change is made.
    let (answer, _) = tokio::join!(watch(1, 10_000), async {
        tokio::task::yield_now().await;
        must_register(&mgs, target(TargetKind::Ost, 3, "h:1")).await
    });
    match answer {
        Ok(MgsReply::Map(map)) => assert!(map.version >= 2 && map.target(TargetKind::Ost, 3).is_some()),
        other => panic!("the watch answered {other:?}"),
    }
}

/// A client's watch is answered `Evicted` as soon as a server reports it evicted (and at
/// once if it was already), another client's watch is not, and a report past the bound is
/// refused whole.
#[tokio::test]
async fn a_watch_of_an_evicted_client_is_answered_evicted() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    let watch =
        |client_id| mgs.handle(MgsRequest::WatchMap(mgs::WatchMap { known_version: 1, wait_ms: 10_000, client_id }));
    let evict = |client_ids: Vec<u64>| mgs.handle(MgsRequest::ClientsEvicted(mgs::ClientsEvicted { client_ids }));
    let (answer, reported) = tokio::join!(watch(0xabc), async {
        tokio::task::yield_now().await;
        evict(vec![0xabc]).await
    });
    assert_eq!(reported, Ok(MgsReply::Done));
    assert_eq!(answer, Ok(MgsReply::Evicted));
    assert_eq!(watch(0xabc).await, Ok(MgsReply::Evicted), "already evicted: at once");
    let other = tokio::time::timeout(Duration::from_millis(200), watch(0xdef)).await;
    assert!(other.is_err(), "another client's watch keeps waiting: {other:?}");
    let too_many = evict((1..=crate::limits::EVICTIONS_PER_REPORT_MAX as u64 + 1).collect()).await.unwrap_err();
    assert_eq!(too_many.code, weft_proto::ErrorCode::Invalid);
    assert!(too_many.message.contains("at most 4096"), "{}", too_many.message);
    let still = tokio::time::timeout(Duration::from_millis(200), watch(1)).await;
    assert!(still.is_err(), "a refused report notes nobody: {still:?}");
}

#[tokio::test]
async fn permanent_parameters_replace_by_name_add_up_for_rules_persist_and_delete() {
    let tmp = tempfile::tempdir().unwrap();
    let set = |name: &str, value: &str, delete: bool| {
        MgsRequest::SetParamRecord(mgs::SetParamRecord { name: name.into(), value: value.into(), delete })
    };
    let names = |map: &ClusterMap| map.params.iter().map(|r| format!("{}={}", r.name, r.value)).collect::<Vec<_>>();
    {
        let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
        mgs.handle(set("ost.OSS.ost_io.nrs_policies", "fifo", false)).await.unwrap();
        mgs.handle(set("ost.OSS.ost_io.nrs_tbf_rule", "start a jobid={a} rate=5", false)).await.unwrap();
        mgs.handle(set("ost.OSS.ost_io.nrs_tbf_rule", "start b jobid={b} rate=5", false)).await.unwrap();
        mgs.handle(set("ost.OSS.ost_io.nrs_policies", "tbf jobid", false)).await.unwrap();
        let before = mgs.map().version;
        mgs.handle(set("ost.OSS.ost_io.nrs_policies", "tbf jobid", false)).await.unwrap();
        assert_eq!(mgs.map().version, before, "setting the last value again changes nothing");
        assert_eq!(
            names(&mgs.map()),
            [
                "ost.OSS.ost_io.nrs_tbf_rule=start a jobid={a} rate=5",
                "ost.OSS.ost_io.nrs_tbf_rule=start b jobid={b} rate=5",
                "ost.OSS.ost_io.nrs_policies=tbf jobid",
            ]
        );
    }
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    assert_eq!(mgs.map().params.len(), 3, "kept across a restart");
    mgs.handle(set("ost.OSS.*.nrs_tbf_rule", "", true)).await.unwrap();
    assert_eq!(names(&mgs.map()), ["ost.OSS.ost_io.nrs_policies=tbf jobid"]);
    let e = mgs.handle(set("mdt.*.job_cleanup_interval", "", true)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    assert!(e.message.contains("ost.OSS.ost_io.nrs_policies"), "{}", e.message);
    let e = mgs.handle(set("", "x", false)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Invalid);
}

// ---- A replica of a replicated MGS as its group's state machine.

/// A group of one, in memory: a proposal is committed at once and applied to the replica
/// that proposed it, as weft-raft applies a committed entry before `propose` returns.
struct OneReplicaGroup {
    mgs: std::sync::Mutex<std::sync::Weak<Mgs>>,
    index: std::sync::atomic::AtomicU64,
}

/// The group's opaque state of entry `index` (any bytes: the MGS keeps them as given).
fn group_state(index: u64) -> Vec<u8> {
    format!("state of entry {index}").into_bytes()
}

impl replica::Proposer for OneReplicaGroup {
    fn propose(&self, payload: Vec<u8>) -> WeftResult<u64> {
        let index = self.index.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let mgs = self.mgs.lock().unwrap().upgrade().expect("the replica is alive");
        mgs.apply(Some(payload.as_slice()), &group_state(index))?;
        Ok(index)
    }
}

/// A replica that leads a group of one, its lease renewed for a minute.
fn leading_replica(dir: &Path) -> Arc<Mgs> {
    let mgs = Mgs::open_replica(dir, "testfs").unwrap();
    let group = Arc::new(OneReplicaGroup {
        mgs: std::sync::Mutex::new(Arc::downgrade(&mgs)),
        index: std::sync::atomic::AtomicU64::new(0),
    });
    mgs.serve(group);
    mgs.renew_lease(std::time::Instant::now(), Duration::from_secs(60));
    mgs
}

#[tokio::test]
async fn a_replica_saves_each_committed_map_with_its_state_and_finds_both_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = leading_replica(tmp.path());
    assert_eq!(mgs.applied_state(), None, "a new replica applied nothing");
    let map = must_register(&mgs, target(TargetKind::Ost, 3, "h1:1")).await;
    assert_eq!(map.version, 2);
    let map = must_register(&mgs, target(TargetKind::Mdt, 0, "h1:2")).await;
    assert_eq!(map.version, 3);
    assert_eq!(mgs.map(), map, "published on the replica that proposed it");
    assert_eq!(mgs.applied_state(), Some(group_state(2)));
    // An entry without a map moves the state in memory only; the file keeps the last map's.
    mgs.apply(None, &group_state(3)).unwrap();
    assert_eq!(mgs.applied_state(), Some(group_state(2)));
    drop(mgs);

    let again = Mgs::open_replica(tmp.path(), "testfs").unwrap();
    assert_eq!(again.map(), map);
    assert_eq!(again.applied_state(), Some(group_state(2)), "what was saved, for the group to re-apply after");
    // The entries after it applied again, as the group does after a restart.
    let mut next = map.clone();
    next.version = 4;
    next.pools.insert("fast".into(), vec![3]);
    again.apply(Some(replica::encode_entry(&next).unwrap().as_slice()), &group_state(4)).unwrap();
    assert_eq!(again.map().pools["fast"], vec![3]);
    assert_eq!(store::load(tmp.path()).unwrap().unwrap(), next, "saved before it is published");
}

#[tokio::test]
async fn a_replica_skips_a_map_that_does_not_follow_the_one_it_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = leading_replica(tmp.path());
    let map = must_register(&mgs, target(TargetKind::Ost, 0, "h1:1")).await;
    // Proposed from version 1 by a deposed leader, committed after version 2.
    let mut stale = map.clone();
    stale.targets.clear();
    stale.version = 2;
    mgs.apply(Some(replica::encode_entry(&stale).unwrap().as_slice()), &group_state(9)).unwrap();
    assert_eq!(mgs.map(), map);
    assert!(mgs.apply(Some(&b"not a map"[..]), &group_state(10)).is_err(), "a corrupt entry stops the replica");
}

#[tokio::test]
async fn snapshot_and_install_carry_the_map_and_its_state_to_another_replica() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leading_replica(a.path());
    must_register(&leader, target(TargetKind::Ost, 1, "h1:1")).await;
    let map = must_register(&leader, target(TargetKind::Ost, 2, "h2:1")).await;
    let (state, data) = leader.snapshot().unwrap();
    assert_eq!(state, group_state(2));

    let behind = Mgs::open_replica(b.path(), "testfs").unwrap();
    let follower = behind.subscribe_for_test();
    behind.install(&state, &data).unwrap();
    assert_eq!(behind.map(), map);
    assert!(follower.has_changed().unwrap(), "a WatchMap on it would wake");
    assert_eq!(behind.applied_state(), Some(group_state(2)));
    drop(behind);
    let restarted = Mgs::open_replica(b.path(), "testfs").unwrap();
    assert_eq!((restarted.map(), restarted.applied_state()), (map, Some(group_state(2))));
}

#[tokio::test]
async fn a_replica_that_does_not_lead_refuses_with_moved_and_wakes_its_followers() {
    let tmp = tempfile::tempdir().unwrap();
    let follower = Mgs::open_replica(tmp.path().join("f").as_path(), "testfs").unwrap();
    let refused = follower.handle(MgsRequest::GetMap(mgs::GetMap { known_version: 0 })).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Moved);
    let refused = follower.handle(MgsRequest::PoolNew(mgs::PoolNew { pool: "p".into() })).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Moved);
    assert!(!follower.serves());

    let leader = leading_replica(&tmp.path().join("l"));
    assert!(leader.serves());
    let watch = {
        let leader = leader.clone();
        tokio::spawn(async move {
            leader.handle(MgsRequest::WatchMap(mgs::WatchMap { known_version: 1, wait_ms: 30_000, client_id: 0 })).await
        })
    };
    tokio::task::yield_now().await;
    leader.follow();
    let answer = tokio::time::timeout(Duration::from_secs(5), watch).await.expect("answered at once").unwrap();
    assert_eq!(answer.unwrap_err().code, ErrorCode::Moved);
    let refused = leader.handle(MgsRequest::Register(mgs::Register { target: target(TargetKind::Ost, 0, "h:1") }));
    assert_eq!(refused.await.unwrap_err().code, ErrorCode::Moved);
}

#[tokio::test]
async fn a_leader_whose_lease_ran_out_answers_no_read() {
    let tmp = tempfile::tempdir().unwrap();
    let leader = leading_replica(tmp.path());
    let stale = Mgs::open_replica(&tmp.path().join("other"), "testfs").unwrap();
    stale.serve(Arc::new(OneReplicaGroup {
        mgs: std::sync::Mutex::new(Arc::downgrade(&stale)),
        index: std::sync::atomic::AtomicU64::new(0),
    }));
    // Confirmed two seconds ago for one second: expired.
    stale.renew_lease(std::time::Instant::now() - Duration::from_secs(2), Duration::from_secs(1));
    let refused = stale.handle(MgsRequest::GetMap(mgs::GetMap { known_version: 0 })).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Moved);
    assert!(leader.handle(MgsRequest::GetMap(mgs::GetMap { known_version: 0 })).await.is_ok());
}

#[tokio::test]
async fn a_single_mgs_writes_no_group_state() {
    let tmp = tempfile::tempdir().unwrap();
    let mgs = Mgs::open(tmp.path(), "testfs").unwrap();
    must_register(&mgs, target(TargetKind::Ost, 0, "h1:1")).await;
    let text = std::fs::read_to_string(tmp.path().join(store::MAP_FILE_NAME)).unwrap();
    assert!(!text.contains("group_state"), "{text}");
    assert!(!mgs.is_replica() && mgs.serves());
}
