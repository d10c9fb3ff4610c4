//! Synchronous mirrors on the MDS: `MirrorOp::Sync` sets the file's flag, `Stale` marks a
//! mirror that missed a write and queues the file's resync in the same batch (kept across a
//! restart), the last mirror in sync never goes stale, a resync's end takes the file off
//! the queue, and an unlink of a queued file too.

use crate::testutil::*;
use weft_proto::layout::Layout;
use weft_proto::msg::mdt::MirrorOp;
use weft_proto::msg::*;
use weft_proto::{ErrorCode, Fid, StripeSpec};

async fn mirror(env: &Env, fid: Fid, op: MirrorOp) -> Result<Layout, ErrorCode> {
    match env.req(MdtRequest::Mirror(mdt::Mirror { fid, op })).await {
        Ok(MdtReply::Inode(i)) => Ok(i.layout.expect("a layout")),
        Ok(r) => panic!("a mirror op replied {r:?}"),
        Err(e) => Err(e.code),
    }
}

/// Creates `name` in the root with `spec`: what the create answered.
async fn create(env: &Env, name: &str, spec: StripeSpec) -> mdt::Opened {
    let create = mdt::Create {
        parent: Fid::ROOT,
        name: name.into(),
        mode: 0o644,
        exclusive: true,
        spec: Some(spec),
        open_flags: 0,
        umask: 0,
    };
    match env.req(MdtRequest::Create(create)).await.unwrap() {
        MdtReply::Opened(o) => o,
        r => panic!("create replied {r:?}"),
    }
}

/// A file with mirror 1 on OST 0 and mirror 2 on OST 2.
async fn two_mirror_file(env: &Env, name: &str) -> Fid {
    let on = |ost| StripeSpec { stripe_count: 1, ost_list: vec![ost], ..StripeSpec::unset() };
    let opened = create(env, name, StripeSpec { mirrors: vec![on(0), on(2)], ..StripeSpec::unset() }).await;
    let fid = opened.inode.attr.fid;
    env.must_close(fid, opened.handle, Some((0, 0))).await;
    fid
}

#[tokio::test]
async fn a_new_file_with_a_mirror_in_a_pool_set_to_sync_mirrors_writes_them_synchronously() {
    let mut map = cluster_map(&[0, 1, 2, 3], &[("fast", &[0, 1]), ("slow", &[2, 3])]);
    map.sync_mirror_pools.insert("slow".into());
    let env = Env::with_map(map, 1).await;
    let layout_of = |opened: mdt::Opened| opened.inode.layout.expect("a layout");
    let in_pool = |pool: &str| StripeSpec { stripe_count: 1, pool: Some(pool.into()), ..StripeSpec::unset() };
    let spec = StripeSpec { mirrors: vec![in_pool("fast"), in_pool("slow")], ..StripeSpec::unset() };
    let layout = layout_of(create(&env, "tiered", spec).await);
    assert!(layout.sync_mirrors(), "a mirror in the slow pool: synchronous");
    assert_eq!(layout.write_mirrors(), [1, 2]);
    // Without a mirror in such a pool, or without mirrors at all: as before.
    let spec = StripeSpec { mirrors: vec![in_pool("fast"), in_pool("fast")], ..StripeSpec::unset() };
    assert!(!layout_of(create(&env, "fast", spec).await).sync_mirrors());
    assert!(!layout_of(create(&env, "plain", in_pool("slow")).await).sync_mirrors());
}

#[tokio::test]
async fn a_stale_synchronous_mirror_is_queued_for_resync_until_its_resync_ends() {
    let mut env = Env::with_map(cluster_map(&[0, 1, 2, 3], &[]), 1).await;
    let fid = two_mirror_file(&env, "f").await;
    // Only a file's own mirrors go stale this way: FLR's are marked by write intents.
    assert_eq!(mirror(&env, fid, MirrorOp::Stale { mirror_id: 2 }).await, Err(ErrorCode::Invalid));
    let layout = mirror(&env, fid, MirrorOp::Sync { on: true }).await.unwrap();
    assert!(layout.sync_mirrors());
    assert_eq!(layout.write_mirrors(), [1, 2]);
    assert!(env.mds().resyncs_due(10).unwrap().is_empty());

    let layout = mirror(&env, fid, MirrorOp::Stale { mirror_id: 1 }).await.unwrap();
    assert!(!layout.mirror_in_sync(1) && layout.mirror_in_sync(2));
    // The last mirror in sync stays so; one stale already is left as it is.
    assert_eq!(mirror(&env, fid, MirrorOp::Stale { mirror_id: 2 }).await, Err(ErrorCode::Busy));
    assert_eq!(mirror(&env, fid, MirrorOp::Stale { mirror_id: 1 }).await.unwrap(), layout);
    assert_eq!(mirror(&env, fid, MirrorOp::Stale { mirror_id: 7 }).await, Err(ErrorCode::NotFound));
    // Queued with the mark, and still after a restart.
    assert_eq!(env.mds().resyncs_due(10).unwrap(), [fid]);
    env.restart().await;
    assert_eq!(env.mds().resyncs_due(10).unwrap(), [fid]);
    // Not due while the stale mirror's OST is down in the map.
    env.mds().set_cluster_map(&cluster_map(&[1, 2, 3], &[]));
    assert!(env.mds().resyncs_due(10).unwrap().is_empty());
    env.mds().set_cluster_map(&cluster_map(&[0, 1, 2, 3], &[]));

    // A new mirror of a synchronous file is written synchronously too (once resynced).
    let extended = mirror(&env, fid, MirrorOp::Extend { spec: StripeSpec::unset() }).await.unwrap();
    assert!(extended.components.iter().all(|c| c.flags & weft_proto::layout::comp_flags::SYNC_MIRRORS != 0));
    let done = mirror(&env, fid, MirrorOp::Resynced { generation: extended.generation }).await.unwrap();
    assert_eq!(done.write_mirrors(), [1, 2, 3]);
    assert!(env.mds().resyncs_due(10).unwrap().is_empty());

    // An unlinked queued file leaves the queue, also once its mirrors are no longer
    // written synchronously.
    let g = two_mirror_file(&env, "g").await;
    mirror(&env, g, MirrorOp::Sync { on: true }).await.unwrap();
    mirror(&env, g, MirrorOp::Stale { mirror_id: 2 }).await.unwrap();
    assert!(!mirror(&env, g, MirrorOp::Sync { on: false }).await.unwrap().sync_mirrors());
    assert_eq!(env.mds().resyncs_due(10).unwrap(), [g]);
    env.req(MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: "g".into() })).await.unwrap();
    assert!(env.mds().resyncs_due(10).unwrap().is_empty());
}
