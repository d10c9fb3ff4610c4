//! Tests drive the service through `Oss::handle`, as weft-server does.

use super::*;
use std::os::unix::ffi::OsStringExt;
use store::{FaultStore, FileStore, MemStore};
use weft_proto::faults::{Fault, FaultPlan};
use weft_proto::limits::{BULK_BYTES_MAX, OBJECT_SIZE_MAX_BYTES};
use weft_proto::msg::{self, StatfsInfo};
use weft_proto::{ErrorCode, Fid};

const FSNAME: &str = "testfs";

fn config(dir: &std::path::Path, indices: &[u32]) -> OssConfig {
    OssConfig {
        fsname: FSNAME.to_string(),
        osts: indices.iter().map(|&index| OstConfig { index, dir: dir.join(format!("ost{index}")) }).collect(),
    }
}

pub(crate) fn fid(ost: u32, oid: u32) -> Fid {
    Fid::new(Fid::object_seq(ost), oid, 0)
}

/// A test-side client: each helper asserts the request succeeded.
pub(crate) struct Client {
    pub(crate) oss: Arc<Oss>,
    pub(crate) ost: u32,
}

impl Client {
    pub(crate) async fn try_write(&self, oid: u32, offset: u64, data: &[u8], sync: bool) -> WeftResult<OstReply> {
        let req = OstRequest::Write(msg::ost::Write {
            fid: fid(self.ost, oid),
            offset,
            sync,
            owner: None,
            extents: Vec::new(),
        });
        self.oss.handle(self.ost, req, Bytes::copy_from_slice(data), Run::Offload).await.0
    }
    /// The write's answer (its transno and what the OST committed).
    pub(crate) async fn must_write(&self, oid: u32, offset: u64, data: &[u8]) -> msg::ost::WriteDone {
        let reply = self.try_write(oid, offset, data, false).await.expect("write");
        let OstReply::Written(done) = reply else { panic!("a write answered {reply:?}") };
        assert_eq!(done.len, data.len() as u32);
        done
    }
    pub(crate) async fn replay(
        &self,
        oid: u32,
        offset: u64,
        data: &[u8],
        transno: u64,
    ) -> WeftResult<msg::ost::WriteDone> {
        let req = OstRequest::Replay(msg::ost::Replay { fid: fid(self.ost, oid), offset, transno, owner: None });
        match self.oss.handle(self.ost, req, Bytes::copy_from_slice(data), Run::Offload).await.0? {
            OstReply::Written(done) => Ok(done),
            other => panic!("a replay answered {other:?}"),
        }
    }
    pub(crate) async fn must_read(&self, oid: u32, offset: u64, len: u32) -> Bytes {
        let (reply, bulk) = self
            .oss
            .handle(
                self.ost,
                OstRequest::Read(msg::ost::Read { fid: fid(self.ost, oid), offset, len }),
                Bytes::new(),
                Run::Inline,
            )
            .await;
        assert_eq!(reply.expect("read"), OstReply::Read(msg::ost::ReadDone { len: bulk.len() as u32 }));
        bulk
    }
    pub(crate) async fn request(&self, req: OstRequest) -> WeftResult<OstReply> {
        let (reply, bulk) = self.oss.handle(self.ost, req, Bytes::new(), Run::Offload).await;
        assert!(bulk.is_empty());
        reply
    }
    pub(crate) async fn must_getattr(&self, oid: u32) -> (u64, u64) {
        match self.request(OstRequest::Getattr(msg::ost::Getattr { fid: fid(self.ost, oid) })).await.expect("getattr") {
            OstReply::ObjectAttr(msg::ost::ObjectAttr { size, blocks, .. }) => (size, blocks),
            other => panic!("unexpected reply {other:?}"),
        }
    }
}

pub(crate) fn start(dir: &std::path::Path, ost: u32) -> Client {
    Client { oss: Oss::open(config(dir, &[ost])).expect("open"), ost }
}

/// One OST over the store given, as a simulation builds it.
pub(crate) fn serve(stores: Vec<(u32, Box<dyn ObjectStore>)>) -> Client {
    let ost = stores[0].0;
    Client { oss: Oss::with_stores(FSNAME, stores).expect("with stores"), ost }
}

/// OST 0 over a memory store, with faults where `plan` says.
pub(crate) fn serve_with_faults(mem: &Arc<MemStore>, plan: &Arc<FaultPlan>) -> Client {
    serve(vec![(0, Box::new(FaultStore::new(mem.clone(), plan.clone())))])
}

#[tokio::test]
async fn write_read_round_trip_with_sparse_hole() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 3);
    c.must_write(1, 0, b"head").await;
    c.must_write(1, 1 << 20, b"tail").await;
    let data = c.must_read(1, 0, (1 << 20) + 4).await;
    assert_eq!(data.len(), (1 << 20) + 4);
    assert_eq!(&data[..4], b"head");
    assert!(data[4..1 << 20].iter().all(|&b| b == 0));
    assert_eq!(&data[1 << 20..], b"tail");
    assert_eq!(c.must_read(1, 2, 4).await.as_ref(), b"ad\0\0");
}

#[tokio::test]
async fn a_write_of_several_extents_lands_each_and_leaves_the_gaps() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 3);
    c.must_write(1, 0, b"..........").await;
    let extents = vec![msg::ost::Extent { offset: 1, len: 2 }, msg::ost::Extent { offset: 6, len: 3 }];
    let op = msg::ost::Write { fid: fid(c.ost, 1), offset: 1, sync: false, owner: None, extents };
    let (reply, _) =
        c.oss.handle(c.ost, OstRequest::Write(op.clone()), Bytes::from_static(b"abXYZ"), Run::Inline).await;
    let Ok(OstReply::Written(done)) = reply else { panic!("{reply:?}") };
    assert_eq!(done.len, 5);
    assert_eq!(c.must_read(1, 0, 10).await.as_ref(), b".ab...XYZ.");
    // Extents that do not hold the bulk exactly are refused, and write nothing.
    let (reply, _) = c.oss.handle(c.ost, OstRequest::Write(op), Bytes::from_static(b"abXYZ!"), Run::Inline).await;
    assert!(reply.is_err(), "{reply:?}");
    assert_eq!(c.must_read(1, 0, 10).await.as_ref(), b".ab...XYZ.");
}

#[tokio::test]
async fn reads_past_the_end_are_short_and_missing_objects_read_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    c.must_write(7, 0, b"0123456789").await;
    assert_eq!(c.must_read(7, 5, 100).await.as_ref(), b"56789");
    assert!(c.must_read(7, 10, 100).await.is_empty());
    assert!(c.must_read(7, u64::MAX, u32::MAX).await.is_empty());
    // Never written: empty, and the read must not create it.
    assert!(c.must_read(8, 0, 4096).await.is_empty());
    assert_eq!(c.must_getattr(8).await, (0, 0));
    // A length over the bulk limit is capped, not refused.
    let big = vec![0xabu8; BULK_BYTES_MAX as usize + 100];
    c.must_write(9, 0, &big[..BULK_BYTES_MAX as usize]).await;
    c.must_write(9, u64::from(BULK_BYTES_MAX), &big[..100]).await;
    assert_eq!(c.must_read(9, 0, u32::MAX).await.len(), BULK_BYTES_MAX as usize);
}

#[tokio::test]
async fn punch_shrinks_and_extends() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    c.must_write(1, 0, &[7u8; 100]).await;
    assert_eq!(c.request(OstRequest::Punch(msg::ost::Punch { fid: fid(0, 1), size: 10 })).await, Ok(OstReply::Empty));
    assert_eq!(c.must_getattr(1).await.0, 10);
    assert_eq!(c.must_read(1, 0, 100).await.as_ref(), &[7u8; 10]);
    assert_eq!(c.request(OstRequest::Punch(msg::ost::Punch { fid: fid(0, 1), size: 4096 })).await, Ok(OstReply::Empty));
    let data = c.must_read(1, 0, 8192).await;
    assert_eq!(data.len(), 4096);
    assert!(data[10..].iter().all(|&b| b == 0), "extension must read as a hole");
    // Punch of a missing object creates it.
    assert_eq!(c.request(OstRequest::Punch(msg::ost::Punch { fid: fid(0, 2), size: 123 })).await, Ok(OstReply::Empty));
    assert_eq!(c.must_getattr(2).await.0, 123);
    let too_big =
        c.request(OstRequest::Punch(msg::ost::Punch { fid: fid(0, 2), size: OBJECT_SIZE_MAX_BYTES + 1 })).await;
    assert_eq!(too_big.unwrap_err().code, ErrorCode::FileTooBig);
}

#[tokio::test]
async fn fallocate_allocates_punches_and_zeroes_object_files() {
    use msg::ost::{FallocMode, Fallocate};
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    let falloc = |oid, offset, len, mode, keep_size| {
        c.request(OstRequest::Fallocate(Fallocate { fid: fid(0, oid), offset, len, mode, keep_size, owner: None }))
    };
    // Allocating extends and takes blocks; with keep_size only the blocks.
    assert_eq!(falloc(1, 0, 1 << 20, FallocMode::Allocate, false).await, Ok(OstReply::Empty));
    let (size, blocks) = c.must_getattr(1).await;
    assert_eq!(size, 1 << 20);
    assert!(blocks * 512 >= 1 << 20, "{blocks} blocks");
    assert_eq!(falloc(2, 0, 1 << 20, FallocMode::Allocate, true).await, Ok(OstReply::Empty));
    assert_eq!(c.must_getattr(2).await.0, 0);
    // A punch makes a hole and keeps the size; zeroing reads zeros.
    c.must_write(3, 0, &[7u8; 3 * 65536]).await;
    assert_eq!(falloc(3, 65536, 65536, FallocMode::Punch, false).await, Ok(OstReply::Empty));
    let data = c.must_read(3, 0, 3 * 65536).await;
    assert_eq!(data.len(), 3 * 65536);
    assert!(data[65536..2 * 65536].iter().all(|&b| b == 0) && data[..65536].iter().all(|&b| b == 7));
    assert!(c.must_getattr(3).await.1 * 512 <= 2 * 65536 + 4096, "the hole holds no blocks");
    assert_eq!(falloc(3, 10, 20, FallocMode::Zero, true).await, Ok(OstReply::Empty));
    assert_eq!(falloc(3, 3 * 65536, 100, FallocMode::Zero, false).await, Ok(OstReply::Empty));
    let data = c.must_read(3, 0, 4 * 65536).await;
    assert_eq!(data.len(), 3 * 65536 + 100);
    assert!(data[10..30].iter().all(|&b| b == 0) && data[9] == 7 && data[30] == 7);
    // A punch does not make a missing object; a range past the largest object is refused.
    assert_eq!(falloc(4, 0, 4096, FallocMode::Punch, true).await, Ok(OstReply::Empty));
    assert_eq!(c.must_getattr(4).await, (0, 0));
    let too_big = falloc(4, OBJECT_SIZE_MAX_BYTES, 1, FallocMode::Allocate, true).await;
    assert_eq!(too_big.unwrap_err().code, ErrorCode::FileTooBig);
}

#[tokio::test]
async fn getattr_counts_allocated_blocks_of_a_sparse_object() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    let offset = 1u64 << 30;
    c.must_write(1, offset, &[1u8; 4096]).await;
    let (size, blocks) = c.must_getattr(1).await;
    assert_eq!(size, offset + 4096);
    assert!(blocks >= 8, "4 KiB of data is at least 8 sectors, got {blocks}");
    assert!(blocks * 512 < 1 << 20, "a 1 GiB hole must not be allocated, got {blocks} sectors");
}

#[tokio::test]
async fn destroy_is_idempotent_and_evicts_the_cached_handle() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    c.must_write(1, 0, b"doomed").await;
    assert_eq!(c.must_read(1, 0, 6).await.as_ref(), b"doomed"); // handle now cached
    let destroy = OstRequest::Destroy(msg::ost::Destroy { fid: fid(0, 1) });
    assert_eq!(c.request(destroy.clone()).await, Ok(OstReply::Empty));
    assert_eq!(c.request(destroy).await, Ok(OstReply::Empty));
    assert!(c.must_read(1, 0, 6).await.is_empty());
    assert_eq!(c.must_getattr(1).await, (0, 0));
    assert!(matches!(c.request(OstRequest::Sync(msg::ost::Sync { fid: fid(0, 1) })).await, Ok(OstReply::Committed(_))));
    // Writing again recreates the object from scratch.
    c.must_write(1, 2, b"new").await;
    assert_eq!(c.must_read(1, 0, 10).await.as_ref(), b"\0\0new");
}

#[tokio::test]
async fn precreate_is_idempotent_and_last_id_survives_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 5);
    let pre = |start_oid, count| OstRequest::Precreate(msg::ost::Precreate { start_oid, count });
    assert_eq!(c.request(pre(1, 100)).await, Ok(OstReply::Precreated(msg::ost::Precreated { last_oid: 100 })));
    assert_eq!(c.must_getattr(50).await, (0, 0));
    assert!(c.must_read(50, 0, 10).await.is_empty());
    // The object's file comes with its first write.
    let object = tmp.path().join(format!("ost5/O/{:x}/d{}/50", Fid::object_seq(5), 50 % 32));
    assert!(!object.exists(), "{} is made by the first write", object.display());
    c.must_write(50, 0, b"keep me").await;
    assert!(object.is_file(), "{} must exist once written", object.display());
    // A resend must not truncate objects already written.
    assert_eq!(c.request(pre(1, 100)).await, Ok(OstReply::Precreated(msg::ost::Precreated { last_oid: 100 })));
    assert_eq!(c.must_read(50, 0, 100).await.as_ref(), b"keep me");
    // A lower range does not move LAST_ID back.
    assert_eq!(c.request(pre(1, 10)).await, Ok(OstReply::Precreated(msg::ost::Precreated { last_oid: 10 })));
    assert_eq!(c.oss.ost_for_test(5).last_id(), 100);

    for bad in [pre(1, 0), pre(1, limits::PRECREATE_COUNT_MAX + 1), pre(u32::MAX, 2)] {
        assert_eq!(c.request(bad).await.unwrap_err().code, ErrorCode::Invalid);
    }
    drop(c);

    let c = start(tmp.path(), 5);
    assert_eq!(c.oss.ost_for_test(5).last_id(), 100);
    assert_eq!(c.must_read(50, 0, 100).await.as_ref(), b"keep me");
    assert_eq!(c.request(pre(101, 5)).await, Ok(OstReply::Precreated(msg::ost::Precreated { last_oid: 105 })));
    let persisted = std::fs::read_to_string(tmp.path().join(format!("ost5/O/{:x}/LAST_ID", Fid::object_seq(5))));
    assert_eq!(persisted.unwrap().trim(), "105");
}

fn orphans(above_oid: Option<u32>, mds_start: u64) -> OstRequest {
    OstRequest::DestroyOrphans(msg::ost::DestroyOrphans { mdt: 0, above_oid, mds_start })
}

fn cleaned(last_oid: u32, destroyed: bool) -> WeftResult<OstReply> {
    Ok(OstReply::Orphans(msg::ost::Orphans { last_oid, destroyed }))
}

#[tokio::test]
async fn orphan_cleanup_empties_the_objects_past_the_given_id_and_keeps_last_id() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    let pre = OstRequest::Precreate(msg::ost::Precreate { start_oid: 1, count: 10 });
    c.request(pre).await.unwrap();
    for oid in 1..=6 {
        c.must_write(oid, 0, format!("object {oid}").as_bytes()).await;
    }
    assert_eq!(c.request(orphans(Some(3), 1)).await, cleaned(10, true));
    for oid in 1..=3 {
        assert_eq!(c.must_read(oid, 0, 64).await.as_ref(), format!("object {oid}").as_bytes());
    }
    for oid in 4..=10 {
        assert!(c.must_read(oid, 0, 64).await.is_empty(), "object {oid} is an orphan");
        assert_eq!(c.must_getattr(oid).await, (0, 0));
    }
    // Ids stay handed out: a write to one makes it again. A late copy of the same request
    // (a resend) destroys nothing: the MDS may have handed the ids out by then.
    c.must_write(4, 0, b"new").await;
    assert_eq!(c.oss.ost_for_test(0).last_id(), 10);
    assert_eq!(c.request(orphans(Some(3), 1)).await, cleaned(10, true));
    assert_eq!(c.must_read(4, 0, 64).await.as_ref(), b"new");
    // The next start of the MDS cleans up again.
    assert_eq!(c.request(orphans(Some(3), 2)).await, cleaned(10, true));
    assert!(c.must_read(4, 0, 64).await.is_empty());
}

/// An MDS without a record of the OST, or whose record is further behind LAST_ID than an MDS
/// can be, gets LAST_ID and no object is destroyed.
#[tokio::test]
async fn orphan_cleanup_never_destroys_what_cannot_be_the_mdss_orphans() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    let far = limits::ORPHANS_DESTROY_MAX + 5;
    for start_oid in (1..far).step_by(limits::PRECREATE_COUNT_MAX as usize) {
        let count = limits::PRECREATE_COUNT_MAX.min(far - start_oid + 1);
        c.request(OstRequest::Precreate(msg::ost::Precreate { start_oid, count })).await.unwrap();
    }
    assert_eq!(c.oss.ost_for_test(0).last_id(), far);
    for oid in [1, 4, far] {
        c.must_write(oid, 0, b"someone's").await;
    }
    assert_eq!(c.request(orphans(None, 1)).await, cleaned(far, false));
    assert_eq!(c.request(orphans(Some(3), 2)).await, cleaned(far, false), "a gap wider than the bound");
    for oid in [1, 4, far] {
        assert_eq!(c.must_read(oid, 0, 64).await.as_ref(), b"someone's");
    }
    // Within the bound it goes ahead.
    assert_eq!(c.request(orphans(Some(far - 1), 3)).await, cleaned(far, true));
    assert!(c.must_read(far, 0, 64).await.is_empty());
    assert_eq!(c.must_read(4, 0, 64).await.as_ref(), b"someone's");
}

#[tokio::test]
async fn foreign_fids_and_unserved_osts_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 2);
    let wrong = Fid::new(Fid::object_seq(3), 1, 0);
    for req in [
        OstRequest::Read(msg::ost::Read { fid: wrong, offset: 0, len: 10 }),
        OstRequest::Write(msg::ost::Write { fid: wrong, offset: 0, sync: false, owner: None, extents: Vec::new() }),
        OstRequest::Getattr(msg::ost::Getattr { fid: wrong }),
        OstRequest::Destroy(msg::ost::Destroy { fid: wrong }),
        OstRequest::Getattr(msg::ost::Getattr { fid: Fid::ROOT }),
    ] {
        let (reply, _) = c.oss.handle(2, req, Bytes::from_static(b"x"), Run::Offload).await;
        assert_eq!(reply.unwrap_err().code, ErrorCode::Invalid);
    }
    let (reply, _) = c.oss.handle(3, OstRequest::Statfs(msg::ost::Statfs {}), Bytes::new(), Run::Offload).await;
    assert_eq!(reply.unwrap_err().code, ErrorCode::NotFound);
}

#[tokio::test]
async fn writes_past_the_largest_file_size_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    let err = c.try_write(1, OBJECT_SIZE_MAX_BYTES - 2, b"abc", false).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::FileTooBig);
    let err = c.try_write(1, u64::MAX, b"abc", false).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::FileTooBig);
    let oversized = vec![0u8; BULK_BYTES_MAX as usize + 1];
    assert_eq!(c.try_write(1, 0, &oversized, false).await.unwrap_err().code, ErrorCode::Invalid);
}

#[test]
fn reopening_with_another_fsname_or_index_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ost");
    let cfg = |fsname: &str, index| OssConfig {
        fsname: fsname.to_string(),
        osts: vec![OstConfig { index, dir: dir.clone() }],
    };
    Oss::open(cfg("alpha", 4)).expect("format");
    Oss::open(cfg("alpha", 4)).expect("reopen");

    let err = Oss::open(cfg("beta", 4)).unwrap_err();
    assert_eq!(err.code, ErrorCode::Invalid);
    for needle in [dir.display().to_string(), "'alpha'".into(), "'beta'".into()] {
        assert!(err.message.contains(&needle), "{needle} missing from: {}", err.message);
    }
    let err = Oss::open(cfg("alpha", 5)).unwrap_err();
    assert_eq!(err.code, ErrorCode::Invalid);
    assert!(err.message.contains(" 4") && err.message.contains(" 5"), "{}", err.message);

    std::fs::write(dir.join("target"), "fsname = \"alpha\"\nindex = 4\nformat_version = 99\n").unwrap();
    let err = Oss::open(cfg("alpha", 4)).unwrap_err();
    assert!(err.message.contains("99"), "{}", err.message);
    std::fs::write(dir.join("target"), "\u{0}garbage").unwrap();
    assert_eq!(Oss::open(cfg("alpha", 4)).unwrap_err().code, ErrorCode::Invalid);

    let twice = OssConfig {
        fsname: "alpha".into(),
        osts: vec![
            OstConfig { index: 1, dir: tmp.path().join("a") },
            OstConfig { index: 1, dir: tmp.path().join("b") },
        ],
    };
    assert_eq!(Oss::open(twice).unwrap_err().code, ErrorCode::Invalid);
}

#[tokio::test]
async fn damaged_last_id_is_an_error_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    drop(start(tmp.path(), 0));
    std::fs::write(tmp.path().join(format!("ost0/O/{:x}/LAST_ID", Fid::object_seq(0))), "twelve").unwrap();
    let err = Oss::open(config(tmp.path(), &[0])).unwrap_err();
    assert!(err.message.contains("LAST_ID"), "{}", err.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_to_disjoint_ranges_land_exactly() {
    const TASKS: u32 = 64;
    const CHUNK_BYTES: usize = 64 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let c = Arc::new(start(tmp.path(), 0));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            // Interleaved: task t owns chunks t, t + TASKS, ... so neighbours race on pages.
            for round in 0..4u64 {
                let chunk = u64::from(t) + round * u64::from(TASKS);
                let data = vec![(chunk % 251) as u8 + 1; CHUNK_BYTES];
                c.must_write(1, chunk * CHUNK_BYTES as u64, &data).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total = 4 * TASKS as usize * CHUNK_BYTES;
    let mut all = Vec::new();
    while all.len() < total {
        let part = c.must_read(1, all.len() as u64, BULK_BYTES_MAX).await;
        assert!(!part.is_empty());
        all.extend_from_slice(&part);
    }
    assert_eq!(all.len(), total);
    for (chunk, bytes) in all.chunks(CHUNK_BYTES).enumerate() {
        assert!(bytes.iter().all(|&b| b == (chunk % 251) as u8 + 1), "chunk {chunk} is wrong");
    }
}

#[tokio::test]
async fn more_objects_than_the_handle_cache_holds() {
    let tmp = tempfile::tempdir().unwrap();
    // Served from a file store the test keeps, to count its open handles.
    let store = Arc::new(FileStore::open(&tmp.path().join("ost0"), Fid::object_seq(0)).expect("open store"));
    let c = serve(vec![(0, Box::new(store.clone()))]);
    let objects = limits::OPEN_FILES_MAX as u32 + 200;
    for oid in 0..objects {
        c.must_write(oid, 0, &oid.to_le_bytes()).await;
    }
    for oid in 0..objects {
        assert_eq!(c.must_read(oid, 0, 4).await.as_ref(), &oid.to_le_bytes());
    }
    assert_eq!(store.cached_handles(), limits::OPEN_FILES_MAX);
}

/// Large aligned I/O goes around the page cache (O_DIRECT), small and unaligned I/O through
/// it, on the same object: whatever the mix, a read returns the last bytes written.
#[tokio::test]
async fn direct_and_buffered_io_of_one_object_read_back_the_same() {
    const MIB: usize = 1 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::open(&tmp.path().join("ost0"), Fid::object_seq(0)).expect("open store"));
    let c = serve(vec![(0, Box::new(store.clone()))]);
    let mut model = Vec::new();
    let write = |model: &mut Vec<u8>, offset: usize, len: usize, seed: u8| {
        let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8 ^ seed).collect();
        if model.len() < offset + len {
            model.resize(offset + len, 0);
        }
        model[offset..offset + len].copy_from_slice(&data);
        (offset as u64, data)
    };
    let writes = [
        (0, MIB, 1),                 // direct
        (3 * 4096 + 5, 100, 2),      // buffered, inside the direct range
        (MIB, MIB, 3),               // direct, after it
        (2 * MIB + 100, 47_008, 4),  // buffered, unaligned, extends the object
        (MIB + 4096, 256 * 1024, 5), // direct over part of the second MiB
        (MIB + 4096 - 10, 20, 6),    // buffered across the edge of that one
    ];
    for (offset, len, seed) in writes {
        let (offset, data) = write(&mut model, offset, len, seed);
        // From a page-aligned buffer, as a large bulk received over TCP is.
        let mut buf = vec![0u8; data.len() + 4096];
        let pad = buf.as_ptr().align_offset(4096);
        buf[pad..pad + data.len()].copy_from_slice(&data);
        let bulk = Bytes::from(buf).slice(pad..pad + data.len());
        let req = OstRequest::Write(msg::ost::Write {
            fid: fid(0, 1),
            offset,
            sync: false,
            owner: None,
            extents: Vec::new(),
        });
        let written = c.oss.handle(0, req, bulk, Run::Offload).await.0;
        assert!(matches!(written, Ok(OstReply::Written(d)) if d.len == len as u32), "{written:?}");
    }
    assert!(store.direct_handles() > 0, "no write went around the page cache");
    for (offset, len) in [(0, MIB), (MIB, MIB), (2 * MIB, MIB), (4096, 3 * MIB), (0, 4 * MIB)] {
        let got = c.must_read(1, offset as u64, len as u32).await;
        let want = &model[offset.min(model.len())..(offset + len).min(model.len())];
        assert!(
            got.as_ref() == want,
            "{len} bytes at {offset}: {} bytes read, {} wanted, or other bytes",
            got.len(),
            want.len()
        );
    }
}

#[tokio::test]
async fn sync_writes_and_sync_requests_succeed() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    let Ok(OstReply::Written(done)) = c.try_write(1, 0, b"durable", true).await else { panic!("a sync write") };
    assert_eq!((done.len, done.committed), (7, done.transno), "a write-through write is committed when answered");
    let sync = |oid| OstRequest::Sync(msg::ost::Sync { fid: fid(0, oid) });
    let committed = OstReply::Committed(msg::ost::Committed { committed: done.transno });
    assert_eq!(c.request(sync(1)).await, Ok(committed.clone()));
    assert_eq!(c.request(sync(99)).await, Ok(committed));
    assert_eq!(c.must_read(1, 0, 7).await.as_ref(), b"durable");
}

#[tokio::test]
async fn a_full_disk_is_no_space_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    // An object whose file is /dev/full: every write fails with ENOSPC, as on a full disk.
    let object = tmp.path().join(format!("ost0/O/{:x}/d1/1", Fid::object_seq(0)));
    std::os::unix::fs::symlink("/dev/full", &object).unwrap();
    for sync in [false, true] {
        let err = c.try_write(1, 0, b"no room", sync).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::NoSpace, "{err}");
        assert!(err.message.contains("object 1"), "{}", err.message);
    }
}

#[tokio::test]
async fn statfs_reports_the_ost_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 0);
    match c.request(OstRequest::Statfs(msg::ost::Statfs {})).await.expect("statfs") {
        OstReply::Statfs(StatfsInfo { bsize, blocks, bfree, bavail, .. }) => {
            assert!(bsize > 0 && blocks > 0);
            assert!(bfree <= blocks && bavail <= bfree);
        }
        other => panic!("unexpected reply {other:?}"),
    }
}

#[tokio::test]
async fn sparse_indices_in_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let oss = Oss::open(config(tmp.path(), &[1000, 0, 7])).expect("open");
    assert_eq!(oss.ost_indices(), vec![0, 7, 1000]);
    for ost in [0, 7, 1000] {
        let c = Client { oss: oss.clone(), ost };
        c.must_write(1, 0, &ost.to_le_bytes()).await;
        assert_eq!(c.must_read(1, 0, 4).await.as_ref(), &ost.to_le_bytes());
    }
}

#[tokio::test]
async fn local_path_makes_the_object_file_that_reads_and_writes_share() {
    let tmp = tempfile::tempdir().unwrap();
    let c = start(tmp.path(), 2);
    assert_eq!(
        c.request(OstRequest::Precreate(msg::ost::Precreate { start_oid: 1, count: 4 })).await,
        Ok(OstReply::Precreated(msg::ost::Precreated { last_oid: 4 }))
    );
    let path = match c.request(OstRequest::LocalPath(msg::ost::LocalPath { fid: fid(2, 3) })).await.expect("local path")
    {
        OstReply::LocalPath(msg::ost::ObjectPath { path }) => {
            std::path::PathBuf::from(std::ffi::OsString::from_vec(path))
        }
        other => panic!("unexpected reply {other:?}"),
    };
    assert!(path.is_absolute() && path.starts_with(tmp.path()), "{}", path.display());
    assert_eq!(std::fs::metadata(&path).expect("made").len(), 0);
    // What a passthrough client writes there is the object's, and the other way round.
    std::fs::write(&path, b"written past the OSS").unwrap();
    assert_eq!(c.must_read(3, 0, 100).await.as_ref(), b"written past the OSS");
    c.must_write(3, 0, b"WRITTEN").await;
    assert_eq!(&std::fs::read(&path).unwrap()[..7], b"WRITTEN");
    assert!(matches!(c.request(OstRequest::Sync(msg::ost::Sync { fid: fid(2, 3) })).await, Ok(OstReply::Committed(_))));
    // No file for an object this OST never handed out.
    let err = c.request(OstRequest::LocalPath(msg::ost::LocalPath { fid: fid(2, 5) })).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_store_that_writes_short_still_gets_every_byte() {
    let mem = Arc::new(MemStore::new());
    let plan = Arc::new(FaultPlan::new());
    let c = serve_with_faults(&mem, &plan);
    // The write's first two store operations write short: half, then half of the rest.
    plan.inject(plan.ops(), Fault::ShortWrite);
    plan.inject(plan.ops() + 1, Fault::ShortWrite);
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    c.must_write(1, 4096, &data).await;
    assert_eq!(c.must_read(1, 4096, data.len() as u32).await.as_ref(), &data[..]);
    assert_eq!(c.must_getattr(1).await.0, 4096 + data.len() as u64);
}

#[tokio::test]
async fn a_store_that_stores_nothing_fails_the_write_instead_of_spinning() {
    let mem = Arc::new(MemStore::new());
    let plan = Arc::new(FaultPlan::new());
    let c = serve_with_faults(&mem, &plan);
    for op in 0..u64::from(limits::WRITE_STALLS_MAX) {
        plan.inject(plan.ops() + op, Fault::ShortWrite); // half of one byte is nothing
    }
    let err = c.try_write(1, 0, b"x", false).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Io);
    assert!(err.message.contains("OST 0") && err.message.contains("object 1"), "{}", err.message);
    // The store works again: so does the write.
    c.must_write(1, 0, b"x").await;
    assert_eq!(c.must_read(1, 0, 10).await.as_ref(), b"x");

    // A failed store operation is an I/O error naming the OST, the object and the operation.
    plan.inject(plan.ops(), Fault::Fail);
    let err = c.try_write(2, 0, b"y", false).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Io);
    for needle in ["OST 0", "object 2", "write"] {
        assert!(err.message.contains(needle), "{needle} missing from: {}", err.message);
    }
    assert!(c.must_read(2, 0, 10).await.is_empty());
}

/// A failover OST: one process stops serving it and another opens the same directory; what
/// the first wrote (LAST_ID and bytes) is what the second serves.
#[tokio::test]
async fn an_ost_stopped_in_one_process_is_served_by_another_from_the_same_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let first = start(tmp.path(), 2);
    let pre = OstRequest::Precreate(msg::ost::Precreate { start_oid: 1, count: 20 });
    first.request(pre).await.expect("precreate");
    first.must_write(7, 0, b"written before the move").await;
    let standby = Oss::open(config(tmp.path(), &[])).expect("open with no OST");
    assert_eq!(
        standby.handle(2, msg::ost::Statfs {}.into(), Bytes::new(), Run::Inline).await.0.unwrap_err().code,
        ErrorCode::NotFound
    );
    assert!(first.oss.stop_ost(2));
    assert!(!first.oss.stop_ost(2), "stopped once");
    assert_eq!(first.request(msg::ost::Statfs {}.into()).await.unwrap_err().code, ErrorCode::NotFound);
    let cfg = OstConfig { index: 2, dir: tmp.path().join("ost2") };
    standby.add_ost(&cfg).expect("take over");
    assert_eq!(standby.add_ost(&cfg).unwrap_err().code, ErrorCode::Invalid, "not twice");
    assert_eq!(standby.ost_indices(), vec![2]);
    let second = Client { oss: standby, ost: 2 };
    assert_eq!(second.oss.ost_for_test(2).last_id(), 20);
    assert_eq!(second.must_read(7, 0, 100).await.as_ref(), b"written before the move");
}
