//! Target failover for OSTs: two OSS server processes (here two servers of one test
//! process, over TCP on loopback) over the same OST directories (shared storage: on one
//! machine, the same path), each serving one OST first and standing by for the other's.
//!
//! - The serving one is stopped while a client writes and reads: the client sees no error,
//!   every byte it was told was written is there, and the time from the stop to the next
//!   answered request on its OST is printed.
//! - A server cut off from the management service (which is stopped) refuses its OST's I/O
//!   once its lease ran out (fencing), though it runs; a new management service counts
//!   every lease as renewed at its start, and the server serves again without a move.
//! - An OST moved by hand (`MoveTarget`, `weft failover`): bad input is refused naming what
//!   is allowed; the holder stops, the other serves.

use bytes::Bytes;
use std::time::{Duration, Instant};
use weft_client::{Client, ClientConfig};
use weft_proto::layout::StripeSpec;
use weft_proto::msg::{mgs, ost, Caller, ClusterMap, RequestBody, RequestHeader, TargetKind, TargetState};
use weft_proto::{ErrorCode, Fid};
use weft_rpc::mgs::MgsPeers;
use weft_server::config::OssRole;
use weft_server::{RunningServer, ServerConfig};

/// Addresses on loopback that nothing listens on now.
fn free_addresses(n: usize) -> Vec<String> {
    let listeners: Vec<_> = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    listeners.iter().map(|l| l.local_addr().unwrap().to_string()).collect()
}

/// The management service alone, at `listen`.
fn mgs_config(dir: &std::path::Path, listen: &str) -> ServerConfig {
    let mut c = ServerConfig::all_in_one(dir.to_path_buf(), Vec::new());
    c.listen = listen.to_string();
    c.mds = None;
    c.oss = None;
    c
}

/// MDT 0 alone.
fn mds_config(dir: &std::path::Path, mgs: &str) -> ServerConfig {
    let mut c = ServerConfig::all_in_one(dir.to_path_buf(), Vec::new());
    c.mgs = None;
    c.oss = None;
    c.mgs_address = mgs.to_string();
    c
}

/// An OSS serving `osts` first and standing by for `failover_osts`, its OSTs under `shared`.
fn oss_config(shared: &std::path::Path, listen: &str, mgs: &str, osts: Vec<u32>, failover: Vec<u32>) -> ServerConfig {
    let mut c = ServerConfig::all_in_one(shared.to_path_buf(), Vec::new());
    c.listen = listen.to_string();
    c.mgs = None;
    c.mds = None;
    c.oss = Some(OssRole { osts, failover_osts: failover });
    c.mgs_address = mgs.to_string();
    c
}

async fn map_of(mgs: &str) -> ClusterMap {
    let peers = MgsPeers::new(mgs, weft_rpc::PeerOptions::default());
    weft_rpc::map::fetch_map_from(&peers, Duration::from_secs(5)).await.unwrap()
}

/// Waits (within `secs`) until the management service's map satisfies `check`.
async fn map_shows(mgs: &str, what: &str, secs: u64, check: impl Fn(&ClusterMap) -> bool) -> ClusterMap {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let map = map_of(mgs).await;
        if check(&map) {
            return map;
        }
        assert!(Instant::now() < deadline, "the map never showed {what}: {map:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ost_at(map: &ClusterMap, index: u32) -> String {
    map.target(TargetKind::Ost, index).map(|t| t.address.clone()).unwrap_or_default()
}

/// One request to OST `index` at the server `address`, straight (no map): its statfs.
async fn statfs_at(address: &str, index: u32) -> Result<(), ErrorCode> {
    let opts = weft_rpc::PeerOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        ..weft_rpc::PeerOptions::default()
    };
    let peer = weft_rpc::Peer::new(address, opts);
    let body = RequestBody::Ost { ost: index, op: ost::Statfs {}.into() };
    let answer = peer.call_with_timeout(RequestHeader::default(), body, Bytes::new(), Duration::from_secs(2)).await;
    answer.map(drop).map_err(|e| e.code)
}

/// Waits (within `secs`) until OST `index` at `address` answers as `wanted` says.
async fn until_answers(
    address: &str,
    index: u32,
    what: &str,
    secs: u64,
    wanted: impl Fn(&Result<(), ErrorCode>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let got = statfs_at(address, index).await;
        if wanted(&got) {
            return;
        }
        assert!(Instant::now() < deadline, "OST {index} at {address} never {what}: last {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A parameter of the server at `address` (`weft get-param`'s request).
async fn param_at(address: &str, name: &str) -> String {
    let peer = weft_rpc::Peer::new(address, weft_rpc::PeerOptions::default());
    let op = weft_proto::msg::param::GetParam { pattern: name.into() };
    let (values, _) = peer.op(RequestHeader::default(), 0, op, Bytes::new(), Duration::from_secs(5)).await.unwrap();
    values.0.into_iter().map(|v| v.value).collect()
}

fn pattern(i: usize, len: usize) -> Bytes {
    (0..len).map(|j| (i * 31 + j * 7 % 251) as u8).collect::<Vec<u8>>().into()
}

fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WEFT_LOG"))
        .with_test_writer()
        .try_init();
}

/// Writes file `name` striped over every OST (64 KiB stripes, so `len` over 64 KiB touches
/// both) and reads it back; Ok once both were answered.
async fn write_and_check(client: &Client, name: &str, data: &Bytes) -> Result<Fid, String> {
    let root = Caller::root();
    let flags = weft_proto::msg::OPEN_READ | weft_proto::msg::OPEN_WRITE;
    let spec = StripeSpec { stripe_count: -1, stripe_size: 65_536, ..StripeSpec::unset() };
    let opened = client
        .create(&root, Fid::ROOT, name.as_bytes(), 0o644, true, Some(spec), flags)
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    let layout = opened.inode.layout.clone().ok_or("a file without a layout")?;
    let fid = opened.inode.attr.fid;
    {
        let locks = client.whole_file_lock(&root, fid, &layout).await.map_err(|e| format!("lock {name}: {e}"))?;
        client.write(&root, &layout, 0, data.clone(), &locks).await.map_err(|e| format!("write {name}: {e}"))?;
    }
    let read = client.read(&root, &layout, 0, data.len() as u32, data.len() as u64).await;
    let read = read.map_err(|e| format!("read {name}: {e}"))?;
    if read != *data {
        return Err(format!("{name} read back other bytes than were written"));
    }
    client.close(&root, fid, opened.handle, None).await.map_err(|e| format!("close {name}: {e}"))?;
    Ok(fid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ost_whose_server_stops_moves_to_its_failover_server_and_the_client_sees_no_error() {
    logs();
    let root = tempfile::tempdir().unwrap();
    let addresses = free_addresses(3);
    let (mgs_at, a_at, b_at) = (addresses[0].clone(), addresses[1].clone(), addresses[2].clone());
    let mgs = RunningServer::start(mgs_config(&root.path().join("mgs"), &mgs_at)).await.unwrap();
    let mds = RunningServer::start(mds_config(&root.path().join("mds"), &mgs_at)).await.unwrap();
    let shared = root.path().join("shared");
    let a = RunningServer::start(oss_config(&shared, &a_at, &mgs_at, vec![0], vec![1])).await.unwrap();
    let b = RunningServer::start(oss_config(&shared, &b_at, &mgs_at, vec![1], vec![0])).await.unwrap();

    // Each OST is served by its first server, and names both.
    let map = map_shows(&mgs_at, "both OSTs up", 10, |m| {
        ost_at(m, 0) == a_at && ost_at(m, 1) == b_at && m.osts().all(|t| t.state == TargetState::Up)
    })
    .await;
    for t in map.osts() {
        assert!(t.leased, "{t:?}");
        let mut servers = t.servers.clone();
        servers.sort();
        let mut both = vec![a_at.clone(), b_at.clone()];
        both.sort();
        assert_eq!(servers, both, "{t:?}");
    }
    // The standby refuses what it does not serve with Moved: a client goes to the map.
    assert_eq!(statfs_at(&b_at, 0).await, Err(ErrorCode::Moved));
    assert_eq!(statfs_at(&a_at, 0).await, Ok(()));

    let client =
        Client::connect(ClientConfig { request_timeout: Duration::from_secs(60), ..ClientConfig::new(mgs_at.clone()) })
            .await
            .unwrap();
    let len = 160 * 1024;
    let mut acknowledged = Vec::new();
    for i in 0..10 {
        let name = format!("before-{i}");
        let data = pattern(i, len);
        write_and_check(&client, &name, &data).await.unwrap();
        acknowledged.push((name, data));
    }

    // A goes away while the client works; every operation must still succeed.
    let writer = {
        let client = client.clone();
        tokio::spawn(async move {
            let mut done = Vec::new();
            let mut slowest = Duration::ZERO;
            for i in 100..130 {
                let name = format!("during-{i}");
                let data = pattern(i, len);
                let started = Instant::now();
                write_and_check(&client, &name, &data).await?;
                slowest = slowest.max(started.elapsed());
                done.push((name, data));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok::<_, String>((done, slowest))
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopped = Instant::now();
    a.shutdown().await;
    // The next request OST 0 answers, straight to where the map says it is.
    let mut answered = None;
    while answered.is_none() {
        let at = ost_at(&map_of(&mgs_at).await, 0);
        if at == b_at && statfs_at(&b_at, 0).await.is_ok() {
            answered = Some(stopped.elapsed());
        }
        assert!(stopped.elapsed() < Duration::from_secs(20), "OST 0 was not served again within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answered = answered.unwrap_or_default();
    let (during, slowest) = writer.await.unwrap().expect("no operation of the client failed across the failover");
    println!(
        "OST failover: OST0000 answered again {:.2} s after its server stopped; the slowest create+write+read+close of the client took {:.2} s",
        answered.as_secs_f64(),
        slowest.as_secs_f64()
    );
    assert!(answered < Duration::from_secs(10), "{answered:?}");
    acknowledged.extend(during);

    // Everything acknowledged is there, read through a client that never saw server A.
    let fresh = Client::connect(ClientConfig::new(mgs_at.clone())).await.unwrap();
    for (name, data) in &acknowledged {
        let who = Caller::root();
        let inode = fresh.lookup(&who, Fid::ROOT, name.as_bytes()).await.unwrap();
        let layout = inode.layout.clone().unwrap();
        // The size is the OSTs' (the MDS's attributes do not follow writes): the bytes decide.
        let read = fresh.read(&who, &layout, 0, data.len() as u32, data.len() as u64).await.unwrap();
        assert_eq!(read.len(), data.len(), "{name}");
        assert!(read == *data, "{name}: the bytes acknowledged before or during the failover are not all there");
    }
    // The map says who serves now; B took the OST over and answers for both.
    let map = map_of(&mgs_at).await;
    assert_eq!((ost_at(&map, 0), ost_at(&map, 1)), (b_at.clone(), b_at.clone()));
    let imports = client.import_params();
    let osc0 = imports.iter().find(|(n, _)| n.starts_with("osc.weft-OST0000")).map(|(_, v)| v.clone()).unwrap();
    assert!(osc0.contains(&format!("current_connection: {b_at}")), "{osc0}");
    assert!(osc0.contains("failover_nids: [") && osc0.contains(&a_at) && osc0.contains(&b_at), "{osc0}");
    // The client followed the move and replayed its extent locks of OST0000 to B.
    assert!(osc0.contains("generation: 2"), "{osc0}");
    let count = |key: &str| -> u64 {
        osc0.lines().find_map(|l| l.trim().strip_prefix(key)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    };
    let (kept, refused) = (count("locks_kept:"), count("locks_refused:"));
    println!("OST failover: the client's lock replay to OST0000's new server: {kept} kept, {refused} refused");
    assert!(kept + refused > 0, "the client replayed no lock: {osc0}");

    // A comes back: it does not take its OST back by itself.
    let a = RunningServer::start(oss_config(&shared, &a_at, &mgs_at, vec![0], vec![1])).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(ost_at(&map_of(&mgs_at).await, 0), b_at, "the returning server took its OST back");
    assert_eq!(statfs_at(&a_at, 0).await, Err(ErrorCode::Moved));

    drop((client, fresh));
    for s in [a, b, mds, mgs] {
        s.shutdown().await;
    }
}

/// Starts a server again on the directory a stopped one used: a stopped single MGS lets go
/// of its directory's files (the history's lock) once the map's long polls it was answering
/// ended (25 s at most).
async fn restart(config: ServerConfig) -> RunningServer {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        match RunningServer::start(config.clone()).await {
            Ok(s) => return s,
            Err(e) if e.to_string().contains("in use") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the server did not start again: {e:#}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_cut_off_from_the_mgs_stops_serving_and_an_ost_moves_by_hand() {
    logs();
    let root = tempfile::tempdir().unwrap();
    let addresses = free_addresses(3);
    let (mgs_at, a_at, b_at) = (addresses[0].clone(), addresses[1].clone(), addresses[2].clone());
    let mgs_dir = root.path().join("mgs");
    let mgs_config = mgs_config(&mgs_dir, &mgs_at);
    let mgs = RunningServer::start(mgs_config.clone()).await.unwrap();
    let shared = root.path().join("shared");
    let a = RunningServer::start(oss_config(&shared, &a_at, &mgs_at, vec![0], vec![1])).await.unwrap();
    let b = RunningServer::start(oss_config(&shared, &b_at, &mgs_at, vec![1], vec![0])).await.unwrap();
    map_shows(&mgs_at, "both OSTs up", 10, |m| ost_at(m, 0) == a_at && ost_at(m, 1) == b_at).await;
    until_answers(&a_at, 0, "answered", 5, Result::is_ok).await;
    let status = param_at(&a_at, "obdfilter.weft-OST0000.failover_status").await;
    assert!(status.contains("serving: yes") && status.contains(&format!("this_server: {a_at} (first)")), "{status}");
    let status = param_at(&b_at, "obdfilter.weft-OST0000.failover_status").await;
    assert!(
        status.contains("serving: no") && status.contains("lease_left_ms: 0") && status.contains("(failover)"),
        "{status}"
    );

    // Moving by hand: bad input named with what is allowed.
    let peers = MgsPeers::new(&mgs_at, weft_rpc::PeerOptions::default());
    let mv = |index: u32, to: &str| mgs::MoveTarget { kind: TargetKind::Ost, index, to: to.to_string() };
    let header = RequestHeader::default;
    let e = peers.op(header(), mv(0, "127.0.0.1:1"), Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Invalid);
    assert!(
        e.message.contains("is not a server of weft-OST0000; its servers are:") && e.message.contains(&b_at),
        "{e}"
    );
    let e = peers.op(header(), mv(7, &b_at), Duration::from_secs(5)).await.unwrap_err();
    assert!(e.code == ErrorCode::NotFound && e.message.contains("weft-OST0000, weft-OST0001"), "{e}");
    // The holder hands over at its next renewal; the other serves.
    let asked = Instant::now();
    peers.op(header(), mv(0, &b_at), Duration::from_secs(5)).await.unwrap();
    map_shows(&mgs_at, "OST 0 at B", 5, |m| ost_at(m, 0) == b_at).await;
    until_answers(&b_at, 0, "answered at its new server", 5, Result::is_ok).await;
    println!("OST moved by hand: served at its new server {:.2} s after asked", asked.elapsed().as_secs_f64());
    assert_eq!(statfs_at(&a_at, 0).await, Err(ErrorCode::Moved), "the old holder stopped");
    // And back, for the fencing below.
    peers.op(header(), mv(0, &a_at), Duration::from_secs(5)).await.unwrap();
    until_answers(&a_at, 0, "answered after moving back", 5, Result::is_ok).await;

    // The management service goes away: the servers run, but their leases run out, and they
    // stop serving their failover OSTs (nobody could take them over without it either).
    mgs.shutdown().await;
    let cut = Instant::now();
    until_answers(&a_at, 0, "refused I/O without a lease", 8, |r| *r == Err(ErrorCode::Moved)).await;
    let fenced = cut.elapsed();
    until_answers(&b_at, 1, "refused I/O without a lease", 8, |r| *r == Err(ErrorCode::Moved)).await;
    println!("fencing: a server cut off from the MGS refused its OST's I/O {:.2} s after", fenced.as_secs_f64());
    let status = param_at(&a_at, "obdfilter.weft-OST0000.failover_status").await;
    assert!(status.contains("serving: no") && status.contains("lease_left_ms: 0"), "{status}");
    assert!(fenced >= Duration::from_secs(2), "fenced before its lease could have run out: {fenced:?}");

    // A new management service counts every lease as renewed at its start: the servers
    // serve their OSTs again, and nothing moved.
    let mgs = restart(mgs_config).await;
    until_answers(&a_at, 0, "served again under a new management service", 10, Result::is_ok).await;
    until_answers(&b_at, 1, "served again under a new management service", 10, Result::is_ok).await;
    let map = map_of(&mgs_at).await;
    assert_eq!((ost_at(&map, 0), ost_at(&map, 1)), (a_at.clone(), b_at.clone()));

    for s in [a, b, mgs] {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_that_cannot_open_an_ost_it_took_over_marks_it_down_instead_of_holding_it() {
    logs();
    let root = tempfile::tempdir().unwrap();
    let addresses = free_addresses(3);
    let (mgs_at, a_at, b_at) = (addresses[0].clone(), addresses[1].clone(), addresses[2].clone());
    let mgs = RunningServer::start(mgs_config(&root.path().join("mgs"), &mgs_at)).await.unwrap();
    let a = RunningServer::start(oss_config(&root.path().join("a"), &a_at, &mgs_at, vec![0], vec![1])).await.unwrap();
    // B does not reach OST0000's storage: where its directory should be is a file.
    let b_dir = root.path().join("b");
    std::fs::create_dir_all(&b_dir).unwrap();
    std::fs::write(b_dir.join("ost0000"), b"not a directory").unwrap();
    let b = RunningServer::start(oss_config(&b_dir, &b_at, &mgs_at, vec![1], vec![0])).await.unwrap();
    map_shows(&mgs_at, "both OSTs up", 10, |m| ost_at(m, 0) == a_at && ost_at(m, 1) == b_at).await;

    a.shutdown().await;
    let map = map_shows(&mgs_at, "OST0000 down after B failed to open it", 15, |m| {
        m.target(TargetKind::Ost, 0).is_some_and(|t| t.state == TargetState::Down)
    })
    .await;
    assert_eq!(ost_at(&map, 0), b_at, "B claimed it");
    assert_eq!(statfs_at(&b_at, 0).await, Err(ErrorCode::Moved));
    // Nobody claims a target that is down by itself; its first server's start does.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(map_of(&mgs_at).await.target(TargetKind::Ost, 0).map(|t| t.state), Some(TargetState::Down));
    let a = RunningServer::start(oss_config(&root.path().join("a"), &a_at, &mgs_at, vec![0], vec![1])).await.unwrap();
    map_shows(&mgs_at, "OST0000 back at A", 10, |m| {
        ost_at(m, 0) == a_at && m.target(TargetKind::Ost, 0).is_some_and(|t| t.state == TargetState::Up)
    })
    .await;
    until_answers(&a_at, 0, "answered at its first server again", 5, Result::is_ok).await;
    for s in [a, b, mgs] {
        s.shutdown().await;
    }
}
