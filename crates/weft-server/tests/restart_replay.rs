//! A server that restarts has forgotten the locks it granted; its clients learn of the
//! restart from the management service (the registration moves the targets' instance in the
//! map they watch: Lustre's imperative recovery), or from their reconnecting, and replay
//! their locks during the server's recovery window. So a client keeps what it cached: a
//! lookup after the restart costs no request. And a change another client makes after the
//! restart still reaches it (the replayed lock is called back like any other).

use std::time::{Duration, Instant};
use weft_client::{Client, ClientConfig};
use weft_proto::msg::Caller;
use weft_proto::Fid;
use weft_server::{RunningServer, ServerConfig};

/// An address on loopback that nothing listens on now (the server restarts on it).
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// How many locks the client's import of MDT 0 says its replays kept.
fn mdt_locks_kept(client: &Client) -> u64 {
    let imports = client.import_params();
    let (_, text) = imports.iter().find(|(name, _)| name.starts_with("mdc.")).expect("an MDT import");
    text.lines()
        .find_map(|l| l.trim().strip_prefix("locks_kept: "))
        .and_then(|n| n.parse().ok())
        .expect("locks_kept in the import")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_keeps_its_cache_across_a_server_restart_and_still_sees_changes() {
    let root = tempfile::tempdir().unwrap();
    // The management service in a server of its own, which stays up; the MDT and the OST
    // in the one that restarts.
    let mut mgs_config = ServerConfig::all_in_one(root.path().join("mgs"), Vec::new());
    (mgs_config.mds, mgs_config.oss) = (None, None);
    let mgs_server = RunningServer::start(mgs_config).await.unwrap();
    let mgs = mgs_server.mgs_address();
    let mut config = ServerConfig::all_in_one(root.path().join("server"), vec![0]);
    (config.listen, config.mgs, config.mgs_address) = (free_address(), None, mgs.clone());
    let server = RunningServer::start(config.clone()).await.unwrap();
    let connect =
        || Client::connect(ClientConfig { request_timeout: Duration::from_secs(30), ..ClientConfig::new(mgs.clone()) });
    let client = connect().await.unwrap();
    let who = Caller::root();
    let dir = client.mkdir(&who, Fid::ROOT, b"d", 0o755).await.unwrap().attr.fid;
    client.lookup(&who, Fid::ROOT, b"d").await.unwrap();
    assert!(client.cached_attr(dir).is_some(), "cached under its lock before the restart");

    server.shutdown().await;
    let server = RunningServer::start(config).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while mdt_locks_kept(&client) == 0 {
        assert!(Instant::now() < deadline, "the client did not replay its locks: {:?}", client.import_params());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let served = server.requests_served();
    let found = client.lookup(&who, Fid::ROOT, b"d").await.unwrap();
    assert_eq!(found.attr.fid, dir);
    assert_eq!(server.requests_served(), served, "a lookup after the restart is answered from the cache");

    // Another client changes the directory after the restart: the replayed lock is called
    // back (once the recovery window ends), and the first client sees the change.
    let other = connect().await.unwrap();
    let set = weft_proto::msg::SetAttr { mode: Some(0o700), ..Default::default() };
    other.setattr(&who, dir, set).await.unwrap();
    assert_eq!(client.lookup(&who, Fid::ROOT, b"d").await.unwrap().attr.mode & 0o7777, 0o700);
    drop((client, other));
    server.shutdown().await;
    mgs_server.shutdown().await;
}
