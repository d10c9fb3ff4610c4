//! The metadata write-back cache over TCP, as a user of two client libraries sees it: one
//! client makes thousands of files in its own directory with a handful of requests; another
//! that lists the directory calls the first one's lock back and sees every name, with its
//! attributes, because the batch lands first; changes of the second are then seen by the
//! first. A batch interrupted by the MDS's restart is applied exactly once.

use std::collections::BTreeSet;
use std::time::Duration;
use weft_client::wbc::WbcConfig;
use weft_client::{Client, ClientConfig};
use weft_proto::msg::{Caller, FileType, SetAttr};
use weft_proto::{ErrorCode, Fid};
use weft_server::{RunningServer, ServerConfig};

const FILES: usize = 3000;
/// The largest batch: a test that wants one batch makes one op fewer.
const BATCH: usize = weft_proto::limits::BATCH_OPS_MAX;

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn config(mgs: &str, wbc: WbcConfig) -> ClientConfig {
    ClientConfig { request_timeout: Duration::from_secs(30), wbc, ..ClientConfig::new(mgs) }
}

fn on() -> WbcConfig {
    WbcConfig { enabled: true, ..WbcConfig::default() }
}

/// The MDT requests the server answered, by op, and their sum.
fn mdt_requests(server: &RunningServer) -> (u64, std::collections::BTreeMap<&'static str, u64>) {
    let by_op: std::collections::BTreeMap<_, _> =
        server.requests_by_op().into_iter().filter(|(op, _)| op.starts_with("mds_")).collect();
    (by_op.values().sum(), by_op)
}

async fn names(client: &Client, who: &Caller, dir: Fid) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut cookie = 0;
    loop {
        let page = client.readdir(who, dir, cookie, 1024).await.unwrap();
        out.extend(page.entries.iter().map(|e| String::from_utf8_lossy(&e.name).into_owned()));
        match page.entries.last() {
            Some(last) if !page.eof => cookie = last.cookie,
            _ => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_creates_go_in_batches_and_another_client_sees_every_name() {
    let root = tempfile::tempdir().unwrap();
    let server = RunningServer::start(ServerConfig::all_in_one(root.path().join("s"), vec![0])).await.unwrap();
    let mgs = server.mgs_address();
    let a = Client::connect(config(&mgs, on())).await.unwrap();
    let b = Client::connect(config(&mgs, WbcConfig::default())).await.unwrap();
    let who = Caller::root();
    let dir = a.mkdir(&who, Fid::ROOT, b"a", 0o755).await.unwrap().attr.fid;

    let (before, _) = mdt_requests(&server);
    let mut fids = Vec::new();
    for i in 0..FILES {
        let f = a.create_file(&who, dir, format!("f{i}").as_bytes(), 0o644).await.unwrap();
        fids.push(f.attr.fid);
    }
    // Made here: a stat needs no request, and the FID is final.
    let f7 = a.getattr(&who, fids[7]).await.unwrap();
    assert_eq!((f7.attr.kind, f7.attr.mode, f7.attr.size), (FileType::Regular, 0o644, 0));
    assert_eq!(a.lookup(&who, dir, b"f7").await.unwrap().attr.fid, fids[7]);
    assert_eq!(a.lookup(&who, dir, b"nothing").await.unwrap_err().code, ErrorCode::NotFound);
    // A file made and removed before its batch went, and a mode changed.
    a.create_file(&who, dir, b"brief", 0o644).await.unwrap();
    a.unlink(&who, dir, b"brief").await.unwrap();
    a.setattr(&who, fids[1], SetAttr { mode: Some(0o600), ..Default::default() }).await.unwrap();
    a.fsync_dir(dir).await.unwrap();
    let (after, by_op) = mdt_requests(&server);
    let sent = after - before;
    eprintln!("{FILES} creates: {sent} MDT requests ({by_op:?}), cache {:?}", a.wbc_stats());
    assert!(sent * 20 < FILES as u64, "{sent} MDT requests for {FILES} creates: {by_op:?}");
    assert_eq!(by_op.get("mds_create"), None, "no create went on its own");
    let stats = a.wbc_stats();
    assert_eq!((stats.ops as usize, stats.ops_sent as usize), (FILES + 3, FILES + 3));
    // One went once 1024 ops were made (with what came while it was sent), the fsync sent
    // the rest.
    assert!(stats.batches >= 2, "{stats:?}");

    // More files, not yet sent when B comes.
    for i in FILES..FILES + 200 {
        let f = a.create_file(&who, dir, format!("f{i}").as_bytes(), 0o644).await.unwrap();
        fids.push(f.attr.fid);
    }
    assert!(a.wbc_pending(dir) > 0, "the last creates wait for their batch");

    // B lists the directory: A's lock is called back and its batches land first.
    let seen = names(&b, &who, dir).await;
    let want: BTreeSet<String> = (0..FILES + 200).map(|i| format!("f{i}")).collect();
    assert_eq!(seen, want, "B sees every name A made, and not the one it removed");
    assert!(a.wbc_stats().callbacks >= 1, "{:?}", a.wbc_stats());
    assert!(!a.wbc_holds(dir));
    for i in [0, 1, 7, FILES - 1, FILES + 199] {
        let f = b.lookup(&who, dir, format!("f{i}").as_bytes()).await.unwrap();
        let mode = if i == 1 { 0o600 } else { 0o644 };
        assert_eq!(f.attr.fid, fids[i], "the FID A gave");
        assert_eq!(
            (f.attr.kind, f.attr.mode, f.attr.uid, f.attr.size, f.attr.nlink),
            (FileType::Regular, mode, 0, 0, 1)
        );
    }
    assert_eq!(a.wbc_stats().batches_failed, 0);

    // B changes the directory; A sees it.
    let opened = b.create(&who, dir, b"from-b", 0o644, true, None, weft_proto::msg::OPEN_READ).await.unwrap();
    b.close(&who, opened.inode.attr.fid, opened.handle, None).await.unwrap();
    b.unlink(&who, dir, b"f0").await.unwrap();
    assert_eq!(a.lookup(&who, dir, b"from-b").await.unwrap().attr.fid, opened.inode.attr.fid);
    assert_eq!(a.lookup(&who, dir, b"f0").await.unwrap_err().code, ErrorCode::NotFound);
    let now = names(&a, &who, dir).await;
    assert_eq!(now.len(), FILES + 200);
    assert!(now.contains("from-b") && !now.contains("f0"));

    // Once B is gone, A takes the directory back (after the pause that follows a callback),
    // and its next creates are batched again.
    b.release_locks().await;
    drop(b);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let grants = a.wbc_stats().grants;
    a.create_file(&who, dir, b"again", 0o644).await.unwrap();
    assert!(a.wbc_holds(dir) && a.wbc_stats().grants > grants, "{:?}", a.wbc_stats());
    a.fsync_dir(dir).await.unwrap();
    a.release_locks().await;
    drop(a);
    server.shutdown().await;
}

/// `rm -r` of a directory another client filled, by a new client (a new process under the
/// interception library): after a few unlinks through the MDS it takes the directory and
/// removes the rest in batches; a third client that holds one of the files' attributes
/// loses the file at the batch, and the directory, emptied, is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_client_removes_names_it_did_not_make_in_batches() {
    let root = tempfile::tempdir().unwrap();
    let server = RunningServer::start(ServerConfig::all_in_one(root.path().join("s"), vec![0])).await.unwrap();
    let mgs = server.mgs_address();
    let who = Caller::root();
    let maker = Client::connect(config(&mgs, on())).await.unwrap();
    let dir = maker.mkdir(&who, Fid::ROOT, b"d", 0o755).await.unwrap().attr.fid;
    for i in 0..FILES {
        maker.create_file(&who, dir, format!("f{i}").as_bytes(), 0o644).await.unwrap();
    }
    maker.release_locks().await;
    drop(maker);
    let watcher = Client::connect(config(&mgs, WbcConfig::default())).await.unwrap();
    let seen = watcher.lookup(&who, dir, b"f2999").await.unwrap();

    let remover = Client::connect(config(&mgs, on())).await.unwrap();
    let (before, _) = mdt_requests(&server);
    for i in 0..FILES {
        remover.unlink(&who, dir, format!("f{i}").as_bytes()).await.unwrap();
    }
    assert_eq!(remover.unlink(&who, dir, b"f5").await.unwrap_err().code, ErrorCode::NotFound, "gone at once");
    assert!(remover.wbc_holds(dir));
    remover.fsync_dir(dir).await.unwrap();
    let (after, by_op) = mdt_requests(&server);
    eprintln!("{FILES} unlinks: {} MDT requests ({by_op:?}), cache {:?}", after - before, remover.wbc_stats());
    assert!((after - before) * 20 < FILES as u64, "{} MDT requests for {FILES} unlinks: {by_op:?}", after - before);
    let unlinks_alone = by_op.get("mds_unlink").copied().unwrap_or(0);
    assert_eq!(unlinks_alone, u64::from(weft_client::limits::WBC_UNLINKS_BEFORE_GRANT) - 1, "{by_op:?}");
    assert_eq!(remover.wbc_stats().batches_failed, 0);

    // The watcher's cached file is gone for it too (the batch called its lock back).
    assert_eq!(watcher.lookup(&who, dir, b"f2999").await.unwrap_err().code, ErrorCode::NotFound);
    assert_eq!(watcher.getattr(&who, seen.attr.fid).await.unwrap_err().code, ErrorCode::NotFound);
    assert!(names(&watcher, &who, dir).await.is_empty());
    // The remover removes the directory it emptied (its own lock there goes first).
    assert_eq!(remover.unlink(&who, Fid::ROOT, b"d").await.unwrap_err().code, ErrorCode::IsDir);
    remover.rmdir(&who, Fid::ROOT, b"d").await.unwrap();
    assert_eq!(watcher.lookup(&who, Fid::ROOT, b"d").await.unwrap_err().code, ErrorCode::NotFound);
    remover.release_locks().await;
    watcher.release_locks().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cut_by_the_mds_restart_is_applied_exactly_once() {
    let root = tempfile::tempdir().unwrap();
    let mut mgs_config = ServerConfig::all_in_one(root.path().join("mgs"), Vec::new());
    (mgs_config.mds, mgs_config.oss) = (None, None);
    let mgs_server = RunningServer::start(mgs_config).await.unwrap();
    let mgs = mgs_server.mgs_address();
    let mut config_s = ServerConfig::all_in_one(root.path().join("server"), vec![0]);
    (config_s.listen, config_s.mgs, config_s.mgs_address) = (free_address(), None, mgs.clone());
    let server = RunningServer::start(config_s.clone()).await.unwrap();
    // Nothing goes before the fsync: one batch of everything.
    let wbc = WbcConfig { batch_ops: BATCH, batch_ms: 600_000, ..on() };
    let a = Client::connect(config(&mgs, wbc)).await.unwrap();
    let who = Caller::root();
    let dir = a.mkdir(&who, Fid::ROOT, b"d", 0o755).await.unwrap().attr.fid;
    for i in 0..BATCH - 1 {
        a.create_file(&who, dir, format!("f{i}").as_bytes(), 0o644).await.unwrap();
    }
    assert_eq!(a.wbc_stats().batches, 0);
    // The batch goes, and the server stops under it (before it ran, while it runs, or
    // before its answer went out): the client resends it to the restarted server, whose
    // reply cache answers it if it was applied.
    let sync = {
        let a = a.clone();
        tokio::spawn(async move { a.fsync_dir(dir).await })
    };
    tokio::time::sleep(Duration::from_millis(3)).await;
    server.shutdown().await;
    let server = RunningServer::start(config_s).await.unwrap();
    sync.await.unwrap().expect("the batch is applied once, whichever way the restart cut it");
    eprintln!(
        "the restarted server answered {:?} batches (1: resent to it), the client {:?}",
        server.requests_by_op().get("mds_batch"),
        a.wbc_stats()
    );
    let b = Client::connect(config(&mgs, WbcConfig::default())).await.unwrap();
    let seen = names(&b, &who, dir).await;
    assert_eq!(seen.len(), BATCH - 1);
    assert_eq!(a.wbc_stats().batches_failed, 0);
    for c in [a, b] {
        c.release_locks().await;
    }
    server.shutdown().await;
    mgs_server.shutdown().await;
}

fn replica_config(dir: &std::path::Path, listen: &str, mgs: &str, replicas: &[String]) -> ServerConfig {
    let mut c = ServerConfig::all_in_one(dir.to_path_buf(), Vec::new());
    (c.listen, c.mgs_address, c.mgs, c.oss) = (listen.to_string(), mgs.to_string(), None, None);
    c.mds = Some(weft_server::config::MdsRole { index: 0, replicas: replicas.to_vec(), join: false });
    c
}

/// The address the map names for MDT 0 once a replica leads it (not `not`).
async fn mdt_leader(mgs: &str, not: Option<&str>) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let peer = weft_rpc::Peer::new(mgs.to_string(), weft_rpc::PeerOptions::default());
    loop {
        if let Ok(map) = weft_rpc::map::fetch_map(&peer, Duration::from_secs(2)).await {
            let mdt = map.targets.iter().find(|t| t.kind == weft_proto::msg::TargetKind::Mdt && t.index == 0);
            if let Some(t) = mdt.filter(|t| Some(t.address.as_str()) != not) {
                return t.address.clone();
            }
        }
        assert!(std::time::Instant::now() < deadline, "no MDT leader registered in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_mdt_applies_a_batch_once_through_the_loss_of_its_leader() {
    let root = tempfile::tempdir().unwrap();
    let mut mgs_config = ServerConfig::all_in_one(root.path().join("mgs"), vec![0]);
    mgs_config.mds = None;
    let mgs_server = RunningServer::start(mgs_config).await.unwrap();
    let mgs = mgs_server.address.clone();
    let addresses: Vec<String> = (0..3).map(|_| free_address()).collect();
    let mut servers = Vec::new();
    for (i, a) in addresses.iter().enumerate() {
        let c = replica_config(&root.path().join(format!("r{i}")), a, &mgs, &addresses);
        servers.push(Some(RunningServer::start(c).await.unwrap()));
    }
    let leader = mdt_leader(&mgs, None).await;
    let wbc = WbcConfig { batch_ops: BATCH, batch_ms: 600_000, ..on() };
    let a = Client::connect(config(&mgs, wbc)).await.unwrap();
    let who = Caller::root();
    let dir = a.mkdir(&who, Fid::ROOT, b"d", 0o755).await.unwrap().attr.fid;
    let mut fids = std::collections::HashSet::new();
    for i in 0..BATCH - 1 {
        fids.insert(a.create_file(&who, dir, format!("f{i}").as_bytes(), 0o644).await.unwrap().attr.fid);
    }
    // The batch goes through the group; its leader stops under it.
    let sync = {
        let a = a.clone();
        tokio::spawn(async move { a.fsync_dir(dir).await })
    };
    tokio::time::sleep(Duration::from_millis(3)).await;
    let i = addresses.iter().position(|x| *x == leader).unwrap();
    servers[i].take().unwrap().shutdown().await;
    mdt_leader(&mgs, Some(&leader)).await;
    sync.await.unwrap().expect("the batch is applied once by the group");
    let b = Client::connect(config(&mgs, WbcConfig::default())).await.unwrap();
    assert_eq!(names(&b, &who, dir).await.len(), BATCH - 1);
    // The new leader hands out FIDs after the range the old one granted.
    let f = b.create_file(&who, dir, b"after", 0o644).await.unwrap();
    assert!(!fids.contains(&f.attr.fid), "{} was granted to the other client", f.attr.fid);
    assert_eq!(a.lookup(&who, dir, b"f1000").await.unwrap().attr.kind, FileType::Regular);
    for c in [a, b] {
        c.release_locks().await;
    }
    for s in servers.into_iter().flatten() {
        s.shutdown().await;
    }
    mgs_server.shutdown().await;
}
