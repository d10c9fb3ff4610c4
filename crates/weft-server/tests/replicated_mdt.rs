//! A replicated MDT of three server processes' replicas (here three servers of one test
//! process, over TCP on loopback), a management service with an OST, and a client: the
//! leader is stopped twice while the client works, the client carries on without an error,
//! every name it was told was made is there, and a replica that comes back catches up.

use std::time::{Duration, Instant};
use weft_client::{Client, ClientConfig};
use weft_proto::msg::{Caller, TargetKind};
use weft_proto::{ErrorCode, Fid};
use weft_server::config::MdsRole;
use weft_server::{RunningServer, ServerConfig};

/// Addresses on loopback that nothing listens on now.
fn free_addresses(n: usize) -> Vec<String> {
    let listeners: Vec<_> = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    listeners.iter().map(|l| l.local_addr().unwrap().to_string()).collect()
}

fn replica_config(dir: &std::path::Path, listen: &str, mgs: &str, replicas: &[String]) -> ServerConfig {
    let mut c = ServerConfig::all_in_one(dir.to_path_buf(), Vec::new());
    c.listen = listen.to_string();
    c.mgs_address = mgs.to_string();
    c.mgs = None;
    c.oss = None;
    c.mds = Some(MdsRole { index: 0, replicas: replicas.to_vec(), join: false });
    c
}

/// The address the map names for MDT 0, once some replica registered as its leader.
async fn mdt_address(mgs: &str, not: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let peer = weft_rpc::Peer::new(mgs.to_string(), weft_rpc::PeerOptions::default());
    loop {
        if let Ok(map) = weft_rpc::map::fetch_map(&peer, Duration::from_secs(2)).await {
            if let Some(t) = map.targets.iter().find(|t| t.kind == TargetKind::Mdt && t.index == 0) {
                if Some(t.address.as_str()) != not {
                    return t.address.clone();
                }
            }
        }
        assert!(Instant::now() < deadline, "no MDT leader registered in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn mkdir(client: &Client, name: &str) -> Fid {
    client
        .mkdir(&Caller::root(), Fid::ROOT, name.as_bytes(), 0o755)
        .await
        .unwrap_or_else(|e| panic!("mkdir {name}: {e}"))
        .attr
        .fid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mdt_serves_through_the_loss_of_its_leader_and_a_returning_replica_catches_up() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WEFT_LOG"))
        .with_test_writer()
        .try_init();
    let root = tempfile::tempdir().unwrap();
    let mut mgs_config = ServerConfig::all_in_one(root.path().join("mgs"), vec![0]);
    mgs_config.mds = None;
    let mgs = RunningServer::start(mgs_config).await.unwrap();
    let mgs_address = mgs.address.clone();
    let addresses = free_addresses(3);
    let configs: Vec<ServerConfig> = (0..3)
        .map(|i| replica_config(&root.path().join(format!("r{i}")), &addresses[i], &mgs_address, &addresses))
        .collect();
    let mut servers: Vec<Option<RunningServer>> = Vec::new();
    for c in &configs {
        servers.push(Some(RunningServer::start(c.clone()).await.unwrap()));
    }
    let leader = mdt_address(&mgs_address, None).await;

    let client = Client::connect(ClientConfig {
        request_timeout: Duration::from_secs(30),
        ..ClientConfig::new(mgs_address.clone())
    })
    .await
    .unwrap();
    let mut made = Vec::new();
    for i in 0..30 {
        made.push((format!("d{i}"), mkdir(&client, &format!("d{i}")).await));
    }
    // A second client, which changes what the first cached.
    let other = Client::connect(ClientConfig::new(mgs_address.clone())).await.unwrap();
    // A file open here and unlinked (an orphan while the open lasts), with bytes in it.
    let root = Caller::root();
    let flags = weft_proto::msg::OPEN_READ | weft_proto::msg::OPEN_WRITE;
    let opened = client.create(&root, Fid::ROOT, b"open-unlinked", 0o644, true, None, flags).await.unwrap();
    let layout = opened.inode.layout.clone().expect("a file has a layout");
    let bytes = bytes::Bytes::from(vec![0x5a; 8192]);
    {
        let locks = client.whole_file_lock(&root, opened.inode.attr.fid, &layout).await.unwrap();
        client.write(&root, &layout, 0, bytes.clone(), &locks).await.unwrap();
    }
    client.unlink(&root, Fid::ROOT, b"open-unlinked").await.unwrap();

    let mut outages = Vec::new();
    let mut registered = Vec::new();
    let mut old_leader = leader;
    for round in 0..2 {
        // What the client caches under the leader's locks: d{round}'s attributes.
        let probe = made[round].1;
        client.getattr(&Caller::root(), probe).await.unwrap();
        assert!(client.cached_attr(probe).is_some());
        // Stop the leader while a mkdir of the client's waits, and time the next answer.
        let i = addresses.iter().position(|a| *a == old_leader).unwrap();
        let server = servers[i].take().expect("the leader runs");
        let started = Instant::now();
        let pending = {
            let client = client.clone();
            tokio::spawn(async move { mkdir(&client, &format!("during{round}")).await })
        };
        server.shutdown().await;
        let new_leader = mdt_address(&mgs_address, Some(&old_leader)).await;
        registered.push(started.elapsed());
        made.push((format!("during{round}"), pending.await.unwrap()));
        outages.push(started.elapsed());
        // The client replayed its locks to the new leader: what it cached is still good
        // without a request, once its replay was answered or gave up (2 s at most).
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert!(client.cached_attr(probe).is_some(), "the cache under the replayed lock survived the failover");
        // And the replayed lock is a lock: another client's chmod calls it back.
        let set = weft_proto::msg::SetAttr { mode: Some(0o700), ..Default::default() };
        other.setattr(&Caller::root(), probe, set).await.unwrap();
        assert!(client.cached_attr(probe).is_none(), "a change elsewhere called the replayed lock back");
        assert_eq!(client.getattr(&Caller::root(), probe).await.unwrap().attr.mode & 0o7777, 0o700);
        // The open was replayed: the new leader's orphan cleanup, after the window, spared
        // the file, whose bytes the open still reads.
        let read = client.read(&root, &layout, 0, 8192, 8192).await.unwrap();
        assert!(read == bytes, "the unlinked file open here kept its bytes through failover {round}");
        made.push((format!("after{round}"), mkdir(&client, &format!("after{round}")).await));
        for (name, fid) in &made {
            let found = client.lookup(&Caller::root(), Fid::ROOT, name.as_bytes()).await.unwrap();
            assert_eq!(found.attr.fid, *fid, "{name} is the directory that was made");
        }
        assert_ne!(new_leader, old_leader);
        // Bring the stopped replica back: it catches up from the log.
        servers[i] = Some(RunningServer::start(configs[i].clone()).await.unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let leader_at = servers.iter().flatten().find(|s| s.serves_mdt()).and_then(|s| s.mdt_group_status());
            let back_at = servers[i].as_ref().unwrap().mdt_group_status().unwrap();
            if let Some(l) = leader_at {
                if back_at.applied.is_some() && back_at.applied >= l.committed {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "the returning replica did not catch up: {back_at:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        old_leader = new_leader;
    }
    let ms = |v: &[Duration]| v.iter().map(|d| format!("{} ms", d.as_millis())).collect::<Vec<_>>();
    eprintln!(
        "replicated MDT, each round: a new leader in the map after {:?}, the client's next answer after {:?}",
        ms(&registered),
        ms(&outages)
    );
    // A name made twice is refused once, not answered twice: the group kept one of each.
    let again = client.mkdir(&Caller::root(), Fid::ROOT, b"d0", 0o755).await.unwrap_err();
    assert_eq!(again.code, ErrorCode::Exists);

    client.close(&root, opened.inode.attr.fid, opened.handle, None).await.unwrap();
    drop(client);
    drop(other);
    for s in servers.into_iter().flatten() {
        s.shutdown().await;
    }
    mgs.shutdown().await;
}
