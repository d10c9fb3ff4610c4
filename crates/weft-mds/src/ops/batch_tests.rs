use crate::ops::t::*;
use weft_proto::msg::wbc::{BatchOp, WbcGranted};
use weft_proto::msg::*;
use weft_proto::{ErrorCode, Fid};

async fn grant(env: &Env, dir: Fid, fids: u32) -> WbcGranted {
    match env.req(MdtRequest::WbcGrant(mdt::WbcGrant { dir, fids })).await.unwrap() {
        MdtReply::WbcGranted(g) => g,
        r => panic!("{r:?}"),
    }
}

fn fid_at(g: &WbcGranted, i: u32) -> Fid {
    Fid::new(g.first.seq, g.first.oid + i, 0)
}

fn create(parent: Fid, name: &str, fid: Fid) -> BatchOp {
    let time = Timestamp { sec: 1_700_000_000, nsec: 5 };
    BatchOp::Create { parent, name: name.into(), fid, mode: 0o644, uid: 0, gid: 0, time }
}

fn batch(ops: Vec<BatchOp>) -> MdtRequest {
    MdtRequest::Batch(mdt::Batch { ops })
}

#[tokio::test]
async fn a_batch_creates_sets_and_unlinks_in_one_request() {
    let env = Env::new().await;
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    let old = env.must_file(d, "old").await;
    let g = grant(&env, d, 8).await;
    assert_eq!((g.count, g.dir.attr.fid), (8, d));
    let ops = vec![
        create(d, "a", fid_at(&g, 0)),
        create(d, "b", fid_at(&g, 1)),
        create(d, "gone", fid_at(&g, 2)),
        BatchOp::Setattr { fid: fid_at(&g, 1), set: SetAttr { mode: Some(0o600), ..Default::default() } },
        BatchOp::Unlink { parent: d, name: b"gone".to_vec() },
        BatchOp::Unlink { parent: d, name: b"old".to_vec() },
    ];
    env.req(batch(ops)).await.unwrap();
    assert_eq!(env.sorted_names(d).await, ["a", "b"]);
    let a = env.lookup(d, "a").await.unwrap();
    assert_eq!(a.attr.fid, fid_at(&g, 0), "the FID the client gave");
    assert_eq!(
        (a.attr.kind, a.attr.mode, a.attr.nlink, a.attr.size, a.attr.size_known),
        (FileType::Regular, 0o644, 1, 0, true)
    );
    assert_eq!(a.attr.mtime, Timestamp { sec: 1_700_000_000, nsec: 5 });
    assert!(!a.layout.unwrap().fully_instantiated(), "objects come with the first write");
    assert_eq!(env.must_attr(fid_at(&g, 1)).await.mode, 0o600);
    assert_eq!(code(env.getattr(fid_at(&g, 2)).await), ErrorCode::NotFound);
    assert_eq!(code(env.getattr(old).await), ErrorCode::NotFound);
    // A create after the grant does not reuse the granted FIDs.
    let later = env.must_file(d, "later").await;
    assert!(later.oid >= g.first.oid + g.count || later.seq != g.first.seq, "{later} in the granted range");
}

#[tokio::test]
async fn one_bad_op_fails_the_whole_batch_and_nothing_is_applied() {
    let env = Env::new().await;
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    env.must_file(d, "x").await;
    let g = grant(&env, d, 8).await;
    let before = env.must_attr(d).await;
    let ops = vec![
        create(d, "a", fid_at(&g, 0)),
        BatchOp::Unlink { parent: d, name: b"x".to_vec() },
        create(d, "b", fid_at(&g, 1)),
        create(d, "a", fid_at(&g, 2)),
    ];
    let e = env.req(batch(ops)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Exists, "{e}");
    assert!(e.message.contains("op 4 of 4 (create 'a')"), "{e}");
    assert_eq!(env.sorted_names(d).await, ["x"], "nothing applied");
    assert_eq!(code(env.getattr(fid_at(&g, 0)).await), ErrorCode::NotFound);
    assert_eq!(env.must_attr(d).await.mtime, before.mtime);
    // The same FIDs are still free to use.
    env.req(batch(vec![create(d, "a", fid_at(&g, 0))])).await.unwrap();
    assert_eq!(env.sorted_names(d).await, ["a", "x"]);
}

#[tokio::test]
async fn malformed_batches_are_refused_with_a_clear_error() {
    let env = Env::new().await;
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    let g = grant(&env, d, 2).await;
    let refused = |r: weft_proto::WeftResult<MdtReply>, words: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.code, ErrorCode::Invalid, "{e}");
        assert!(e.message.contains(words), "{e} lacks {words}");
    };
    refused(env.req(batch(vec![])).await, "a batch of 0 ops");
    let future = Fid::new(g.first.seq, g.first.oid + 1000, 0);
    refused(env.req(batch(vec![create(d, "f", future)])).await, "not a FID this MDT handed out");
    refused(env.req(batch(vec![create(d, "f", Fid::new(7, 7, 0))])).await, "not a FID this MDT handed out");
    let mut wrong_owner = create(d, "f", fid_at(&g, 0));
    if let BatchOp::Create { uid, .. } = &mut wrong_owner {
        *uid = 4242;
    }
    refused(env.req(batch(vec![wrong_owner])).await, "the MDS gives");
    let other_mdt = Fid::new(weft_proto::fid::SEQ_METADATA_BASE + weft_proto::fid::SEQ_PER_MDT, 5, 0);
    refused(env.req(batch(vec![create(other_mdt, "f", fid_at(&g, 0))])).await, "not on this MDT");
    let size = BatchOp::Setattr { fid: d, set: SetAttr { size: Some(5), ..Default::default() } };
    refused(env.req(batch(vec![size])).await, "truncate");
    let too_many = (0..weft_proto::limits::BATCH_OPS_MAX + 1)
        .map(|i| BatchOp::Unlink { parent: d, name: format!("n{i}").into_bytes() })
        .collect();
    refused(env.req(batch(too_many)).await, "from 1 to");
    assert_eq!(code(env.req(batch(vec![create(d, "a/b", fid_at(&g, 0))])).await), ErrorCode::Invalid);
    assert_eq!(
        code(env.req(batch(vec![BatchOp::Unlink { parent: d, name: b"none".to_vec() }])).await),
        ErrorCode::NotFound
    );
    // The MDS still serves.
    env.req(batch(vec![create(d, "f", fid_at(&g, 0))])).await.unwrap();
    assert_eq!(env.sorted_names(d).await, ["f"]);
}

#[tokio::test]
async fn a_resent_batch_is_applied_once_also_after_a_restart() {
    let mut env = Env::new().await;
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    let g = grant(&env, d, 4).await;
    let header = env.header_as(&Identity::root());
    let req = batch(vec![create(d, "a", fid_at(&g, 0)), create(d, "b", fid_at(&g, 1))]);
    env.mds().handle(&header, req.clone(), Run::Inline).await.unwrap();
    // A resend (a reconnect): the reply cache answers, nothing runs twice.
    env.mds().handle(&header, req.clone(), Run::Inline).await.unwrap();
    env.restart().await;
    env.mds().handle(&header, req, Run::Inline).await.unwrap();
    assert_eq!(env.sorted_names(d).await, ["a", "b"]);
    assert_eq!(env.must_attr(d).await.nlink, 2);
    // The granted FIDs stay handed out across the restart.
    let later = env.must_file(d, "c").await;
    assert!(later.oid >= g.first.oid + g.count, "{later}");
}

#[tokio::test]
async fn no_grant_where_the_cache_cannot_make_files() {
    let env = Env::new().await;
    let f = env.must_file(Fid::ROOT, "f").await;
    assert_eq!(code(env.req(MdtRequest::WbcGrant(mdt::WbcGrant { dir: f, fids: 1 })).await), ErrorCode::NotDir);
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    let e = env.req_as(&user(1000), MdtRequest::WbcGrant(mdt::WbcGrant { dir: d, fids: 1 })).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Access, "{e}");
}

/// A commit batch holds at most COMMIT_BATCH_WEIGHT_MAX ops of batches, and is one journal
/// record and one entry of a replicated MDT's log, which must fit in a replication message.
#[tokio::test]
async fn a_commit_of_batches_fits_in_a_replication_message() {
    fn bytes_under(p: &std::path::Path) -> u64 {
        let mut n = 0;
        for e in std::fs::read_dir(p).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            n += if m.is_dir() { bytes_under(&e.path()) } else { m.len() };
        }
        n
    }
    let env = Env::new().await;
    let d = env.must_mkdir(Fid::ROOT, "d").await;
    let g = grant(&env, d, 1000).await;
    let before = bytes_under(env.dir.path());
    let ops = (0..1000).map(|i| create(d, &format!("file.{i:06}"), fid_at(&g, i))).collect();
    env.req(batch(ops)).await.unwrap();
    let per_create = (bytes_under(env.dir.path()) - before) / 1000;
    // Twice that, for a changelog record per create.
    let commit = 2 * per_create * crate::limits::COMMIT_BATCH_WEIGHT_MAX as u64;
    // The replication's appends are cut at 3 MiB, inside a message (MESSAGE_BYTES_MAX).
    let message = weft_proto::limits::MESSAGE_BYTES_MAX as u64;
    assert!(commit < message / 2, "{per_create} bytes per create");
}
