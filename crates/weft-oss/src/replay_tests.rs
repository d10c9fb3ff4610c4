//! An OST's commits and replays (commit.rs) through its requests: what a power loss keeps,
//! replays after it in either order, truncates and destroys in the replay window, restarts
//! in the same boot, and a commit of many objects. The helpers are tests.rs's.

use crate::tests::{fid, serve, serve_with_faults, start};
use crate::{limits, store::MemStore};
use std::sync::Arc;
use weft_proto::faults::{Fault, FaultPlan};
use weft_proto::msg::{self, OstReply, OstRequest};
use weft_proto::ErrorCode;

#[tokio::test]
async fn after_a_power_loss_an_ost_has_what_it_synced_and_its_last_id() {
    let mem = Arc::new(MemStore::new());
    let plan = Arc::new(FaultPlan::new());
    let c = serve_with_faults(&mem, &plan);
    let pre = |start_oid, count| OstRequest::Precreate(msg::ost::Precreate { start_oid, count });
    assert_eq!(c.request(pre(1, 10)).await, Ok(OstReply::Precreated(msg::ost::Precreated { last_oid: 10 })));
    assert!(matches!(c.try_write(1, 0, b"synced", true).await, Ok(OstReply::Written(_))));
    c.must_write(3, 0, b"fsynced later").await;
    let synced = c.request(OstRequest::Sync(msg::ost::Sync { fid: fid(0, 3) })).await.expect("sync");
    // Answered before the power loss, not committed: a client keeps these to replay.
    let more = c.must_write(1, 6, b" and more").await;
    let written = c.must_write(2, 0, b"written").await;
    let over = c.must_write(2, 2, b"ITTEN").await;
    for done in [&more, &written, &over] {
        assert!(done.transno > done.committed, "{done:?} is not committed yet");
    }
    let OstReply::Committed(synced) = synced else { panic!("a sync answered {synced:?}") };
    assert_eq!(more.committed, synced.committed);
    // An OST without files offers no passthrough path.
    let err = c.request(OstRequest::LocalPath(msg::ost::LocalPath { fid: fid(0, 1) })).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotSupported);

    plan.inject(plan.ops(), Fault::PowerLoss);
    assert_eq!(c.try_write(1, 0, b"too late", true).await.unwrap_err().code, ErrorCode::Io);
    assert_eq!(c.request(pre(11, 10)).await.unwrap_err().code, ErrorCode::Io);
    drop(c);

    let restarted = Arc::new(mem.after_power_loss());
    let c = serve(vec![(0, Box::new(restarted.clone()))]);
    assert_eq!(c.must_read(1, 0, 100).await.as_ref(), b"synced");
    assert!(c.must_read(2, 0, 100).await.is_empty());
    assert_eq!(c.must_read(3, 0, 100).await.as_ref(), b"fsynced later");
    assert_eq!(c.oss.ost_for_test(0).last_id(), 10);

    // The clients replay what was not committed, in any order: the later write to object 2
    // first, then the earlier one, which must not come back over it. A new write since the
    // restart is later than any replay.
    let new = c.must_write(3, 0, b"FSYNCED").await;
    assert!(new.transno > over.transno, "a later start numbers above an earlier one");
    let again = c.replay(2, 2, b"ITTEN", over.transno).await.expect("replay");
    assert!(again.transno > again.committed, "a replayed write is not committed until the next commit");
    c.replay(2, 0, b"written", written.transno).await.expect("replay");
    c.replay(1, 6, b" and more", more.transno).await.expect("replay");
    // A replay of a committed write changes nothing (its bytes may have been written over).
    let old = c.replay(3, 0, b"stale bytes", synced.committed).await.expect("replay of a committed write");
    assert_eq!(old.transno, 0, "nothing to keep");
    assert_eq!(c.must_read(1, 0, 100).await.as_ref(), b"synced and more");
    assert_eq!(c.must_read(2, 0, 100).await.as_ref(), b"wrITTEN");
    assert_eq!(c.must_read(3, 0, 100).await.as_ref(), b"FSYNCED later");

    // Committed, they survive a second power loss.
    c.request(OstRequest::Commit(msg::ost::Commit { commit: true })).await.expect("commit");
    drop(c);
    let c = serve(vec![(0, Box::new(restarted.after_power_loss()))]);
    assert_eq!(c.must_read(1, 0, 100).await.as_ref(), b"synced and more");
    assert_eq!(c.must_read(2, 0, 100).await.as_ref(), b"wrITTEN");
    assert_eq!(c.must_read(3, 0, 100).await.as_ref(), b"FSYNCED later");
}

#[tokio::test]
async fn a_truncate_is_committed_so_no_replay_brings_back_what_it_cut() {
    let mem = Arc::new(MemStore::new());
    let c = serve(vec![(0, Box::new(mem.clone()))]);
    let written = c.must_write(1, 0, b"0123456789").await;
    c.request(OstRequest::Punch(msg::ost::Punch { fid: fid(0, 1), size: 4 })).await.expect("punch");
    drop(c);
    let c = serve(vec![(0, Box::new(mem.after_power_loss()))]);
    let replayed = c.replay(1, 0, b"0123456789", written.transno).await.expect("replay");
    assert_eq!(replayed.transno, 0, "committed by the truncate: nothing to write");
    assert_eq!(c.must_read(1, 0, 100).await.as_ref(), b"0123");
}

#[tokio::test]
async fn a_replay_into_an_object_destroyed_since_the_restart_is_not_written() {
    let mem = Arc::new(MemStore::new());
    let c = serve(vec![(0, Box::new(mem.clone()))]);
    let written = c.must_write(5, 0, b"of a file the power loss took back").await;
    drop(c);
    let c = serve(vec![(0, Box::new(mem.after_power_loss()))]);
    // The MDS's orphan cleanup (or an unlink) removed it: its id may go to a new file.
    c.request(OstRequest::Destroy(msg::ost::Destroy { fid: fid(0, 5) })).await.expect("destroy");
    c.replay(5, 0, b"of a file the power loss took back", written.transno).await.expect("replay");
    assert!(c.must_read(5, 0, 100).await.is_empty());
}

#[tokio::test]
async fn a_replay_to_the_same_start_or_the_same_boot_writes_nothing_and_one_from_two_restarts_ago_is_refused() {
    let mem = Arc::new(MemStore::new());
    let c = serve(vec![(0, Box::new(mem.clone()))]);
    let written = c.must_write(1, 0, b"kept").await;
    // The same start (a reconnect): nothing was lost, nothing is written, and the client
    // keeps the write until a commit covers it.
    assert_eq!(c.replay(1, 0, b"XXXX", written.transno).await.expect("replay").transno, written.transno);
    c.must_write(1, 0, b"LATE").await;
    drop(c);
    // A restart of the process (the same boot): what it wrote is all there, synced at the
    // start; an earlier write's replay must not come back over a later one.
    let c = serve(vec![(0, Box::new(mem.clone()))]);
    assert_eq!(c.replay(1, 0, b"kept", written.transno).await.expect("replay").transno, 0);
    assert_eq!(c.must_read(1, 0, 10).await.as_ref(), b"LATE");
    drop(c);
    let rebooted = Arc::new(mem.after_power_loss());
    let c = serve(vec![(0, Box::new(rebooted.clone()))]);
    assert_eq!(c.must_read(1, 0, 10).await.as_ref(), b"LATE", "synced at the same-boot start");
    // Two restarts after power losses, the second committing: a write of the first start
    // not committed by it is of a start whose end this OST cannot know, and is refused so.
    let lost = c.must_write(2, 0, b"never committed").await;
    drop(c);
    let again = Arc::new(rebooted.after_power_loss());
    let c = serve(vec![(0, Box::new(again.clone()))]);
    c.must_write(3, 0, b"committed here").await;
    c.request(OstRequest::Commit(msg::ost::Commit { commit: true })).await.expect("commit");
    drop(c);
    let c = serve(vec![(0, Box::new(again.after_power_loss()))]);
    let err = c.replay(2, 0, b"never committed", lost.transno).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Stale);
    assert!(err.message.contains("not known"), "{}", err.message);
}

#[tokio::test]
async fn a_replay_after_a_truncate_in_the_window_writes_nothing_past_the_cut() {
    let mem = Arc::new(MemStore::new());
    let c = serve(vec![(0, Box::new(mem.clone()))]);
    let written = c.must_write(1, 0, b"0123456789").await;
    drop(c);
    let c = serve(vec![(0, Box::new(mem.after_power_loss()))]);
    // A truncate after the restart (O_TRUNC), then the replay of the write before it.
    c.request(OstRequest::Punch(msg::ost::Punch { fid: fid(0, 1), size: 4 })).await.expect("punch");
    c.replay(1, 0, b"0123456789", written.transno).await.expect("replay");
    assert_eq!(c.must_read(1, 0, 100).await.as_ref(), b"0123");
}

#[tokio::test]
async fn a_commit_of_many_objects_syncs_the_file_system_once_and_covers_every_write() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    let count = limits::SYNCFS_OBJECTS_MIN as u32 + 8;
    let mut last = 0;
    for oid in 1..=count {
        last = c.must_write(oid, 0, format!("object {oid}").as_bytes()).await.transno;
    }
    let commit = OstRequest::Commit(msg::ost::Commit { commit: true });
    assert_eq!(c.request(commit).await, Ok(OstReply::Committed(msg::ost::Committed { committed: last })));
    let peek = OstRequest::Commit(msg::ost::Commit { commit: false });
    assert_eq!(c.request(peek).await, Ok(OstReply::Committed(msg::ost::Committed { committed: last })));
    assert_eq!(c.must_read(count, 0, 100).await.as_ref(), format!("object {count}").as_bytes());
}
