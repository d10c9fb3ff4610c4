//! A replicated MGS of three server processes' replicas (here three servers of one test
//! process, over TCP on loopback), a server with an MDT and an OST, and a client given the
//! three addresses: the targets register and the client follows the map; the MGS leader is
//! stopped; a new one answers within seconds; a pool made and a target registered after it
//! reach the map the client follows; the old leader, started again, catches up. And a fourth
//! replica joins the live group (`join = true`, `AddMember`), holding the map from before,
//! and the leader leaves it (`RemoveMember`): the others elect one that serves; when the
//! added replica leads, a client given only the first three follows to it.

use std::time::{Duration, Instant};
use weft_client::{Client, ClientConfig};
use weft_proto::msg::qos::{OstCapacity, ReserveRequest, Throughput};
use weft_proto::msg::{mgs, MgsReply, RequestHeader, TargetKind};
use weft_proto::ErrorCode;
use weft_rpc::mgs::MgsPeers;
use weft_server::config::MgsRole;
use weft_server::{RunningServer, ServerConfig};

/// Addresses on loopback that nothing listens on now.
fn free_addresses(n: usize) -> Vec<String> {
    let listeners: Vec<_> = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    listeners.iter().map(|l| l.local_addr().unwrap().to_string()).collect()
}

fn mgs_replica_config(dir: &std::path::Path, listen: &str, replicas: &[String]) -> ServerConfig {
    let mut c = ServerConfig::all_in_one(dir.to_path_buf(), Vec::new());
    c.listen = listen.to_string();
    c.mgs = Some(MgsRole { replicas: replicas.to_vec(), join: false });
    c.mds = None;
    c.oss = None;
    // The monitor runs on the leader alone: started and stopped with the lead.
    c.monitor_interval_s = 1;
    c
}

/// A server of OSTs `osts` (and MDT 0 when `mdt`) whose MGS is `list`.
fn target_config(dir: &std::path::Path, list: &str, mdt: bool, osts: Vec<u32>) -> ServerConfig {
    let mut c = ServerConfig::all_in_one(dir.to_path_buf(), osts);
    c.mgs = None;
    c.mgs_address = list.to_string();
    if !mdt {
        c.mds = None;
    }
    c
}

/// The place of the replica that leads, once one does and serves.
async fn leader(servers: &[Option<RunningServer>]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let leading = servers.iter().position(|s| {
            s.as_ref().and_then(RunningServer::mgs_group_status).is_some_and(|st| st.role == weft_raft::Role::Leader)
        });
        if let Some(i) = leading {
            return i;
        }
        assert!(Instant::now() < deadline, "no MGS replica leads");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the map `client` follows satisfies `what`: within seconds (its long poll on
/// a stopped leader must not wait out the poll).
async fn client_sees(client: &Client, what: &str, check: impl Fn(&weft_proto::msg::ClusterMap) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check(&client.map()) {
        assert!(Instant::now() < deadline, "the client's map never showed {what}: {:?}", client.map());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Three MGS replica servers at `addresses` (each in `root/mgsN`), started at once: each
/// start returns once the map is fetched from a leader, so a majority must be up.
async fn start_replicas(
    root: &std::path::Path,
    addresses: &[String],
) -> (Vec<ServerConfig>, Vec<Option<RunningServer>>) {
    let configs: Vec<ServerConfig> =
        (0..3).map(|i| mgs_replica_config(&root.join(format!("mgs{i}")), &addresses[i], addresses)).collect();
    let starting: Vec<_> = configs.iter().map(|c| tokio::spawn(RunningServer::start(c.clone()))).collect();
    let mut servers: Vec<Option<RunningServer>> = Vec::new();
    for s in starting {
        servers.push(Some(s.await.unwrap().unwrap()));
    }
    (configs, servers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mgs_serves_through_the_loss_of_its_leader_and_a_returning_replica_catches_up() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WEFT_LOG"))
        .with_test_writer()
        .try_init();
    let root = tempfile::tempdir().unwrap();
    let addresses = free_addresses(3);
    let list = addresses.join(",");
    let (configs, mut servers) = start_replicas(root.path(), &addresses).await;
    assert_eq!(servers[0].as_ref().unwrap().mgs_address(), list, "a client of the MGS is given every replica");

    let targets = RunningServer::start(target_config(&root.path().join("t0"), &list, true, vec![0])).await.unwrap();
    let client =
        Client::connect(ClientConfig { request_timeout: Duration::from_secs(30), ..ClientConfig::new(list.clone()) })
            .await
            .unwrap();
    client_sees(&client, "MDT 0 and OST 0", |m| {
        m.target(TargetKind::Mdt, 0).is_some() && m.target(TargetKind::Ost, 0).is_some()
    })
    .await;

    // A replica that does not lead refuses, naming the leader.
    let first = leader(&servers).await;
    let follower = (first + 1) % 3;
    let peer = weft_rpc::Peer::new(addresses[follower].clone(), weft_rpc::PeerOptions::default());
    let refused = weft_rpc::map::fetch_map(&peer, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Moved, "{refused}");
    assert_eq!(weft_rpc::mgs::leader_named(&refused.message), Some(addresses[first].as_str()), "{refused}");

    // Each replica shows its place in the group.
    let status = |i: usize| {
        let peer = weft_rpc::Peer::new(addresses[i].clone(), weft_rpc::PeerOptions::default());
        async move {
            let op = weft_proto::msg::param::GetParam { pattern: "mgs.MGS.replica_status".into() };
            let (values, _) =
                peer.op(RequestHeader::default(), 0, op, bytes::Bytes::new(), Duration::from_secs(5)).await.unwrap();
            values.0.into_iter().map(|v| v.value).collect::<String>()
        }
    };
    let (leading, following) = (status(first).await, status(follower).await);
    assert!(leading.contains("role: leader") && leading.contains("group: MGS"), "{leading}");
    assert!(
        following.contains("role: follower")
            && following.contains(&format!("leader: {} {}", first + 1, addresses[first])),
        "{following}"
    );

    // Bandwidth reservations, one active and one planned after it, are in the plan.
    let admin = MgsPeers::new(&list, weft_rpc::PeerOptions::default());
    let wait = Duration::from_secs(30);
    let capacity = OstCapacity { bytes: Some(100 << 20), requests: None };
    admin.op(RequestHeader::default(), mgs::QosCapacity { osts: vec![0], capacity }, wait).await.unwrap();
    let reserve = |id: &str| mgs::QosReserve {
        request: ReserveRequest {
            id: id.into(),
            job: String::new(),
            throughput: Throughput::Bytes(60 << 20),
            osts: vec![0],
            earliest_ms: 0,
            duration_ms: 600_000,
        },
        uid: 0,
    };
    admin.op(RequestHeader::default(), reserve("job-a"), wait).await.unwrap();
    let planned = admin.op(RequestHeader::default(), reserve("job-b"), wait).await.unwrap().qos;
    let (a, b) = (planned.get("job-a").unwrap().clone(), planned.get("job-b").unwrap().clone());
    assert_eq!(b.start_ms, a.end_ms(), "job-b waits for job-a");

    // Stop the leader; the next MGS request (a pool made) is answered by the new one.
    let stopped = Instant::now();
    servers[first].take().unwrap().shutdown().await;
    let made = admin
        .op(RequestHeader::default(), mgs::PoolNew { pool: "after".into() }, Duration::from_secs(30))
        .await
        .expect("a new leader answers");
    let outage = stopped.elapsed();
    assert!(made.pools.contains_key("after"));
    let second = leader(&servers).await;
    assert_ne!(second, first);
    assert_eq!(admin.current(), addresses[second], "the list remembers who answered");
    eprintln!("replicated MGS: the leader stopped, the next MGS request answered after {} ms", outage.as_millis());
    assert!(outage < Duration::from_secs(20), "a new MGS leader took {outage:?}");
    // The new leader has the plan, and plans after it.
    assert_eq!(made.qos, planned, "the reservations survive the failover");
    let after = admin.op(RequestHeader::default(), reserve("job-c"), wait).await.unwrap().qos;
    assert_eq!(after.get("job-c").unwrap().start_ms, b.end_ms(), "job-c waits for job-b");

    // What changes after it reaches the client, and a target registers with the new leader.
    client_sees(&client, "the pool made after the failover", |m| m.pools.contains_key("after")).await;
    let more = RunningServer::start(target_config(&root.path().join("t1"), &list, false, vec![1])).await.unwrap();
    client_sees(&client, "OST 1, registered after the failover", |m| m.target(TargetKind::Ost, 1).is_some()).await;
    client
        .mkdir(&weft_proto::msg::Caller::root(), weft_proto::Fid::ROOT, b"d", 0o755)
        .await
        .expect("the file system works on");

    // The old leader comes back and catches up from the log.
    servers[first] = Some(RunningServer::start(configs[first].clone()).await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    let leading = loop {
        let now_leader = leader(&servers).await;
        let leads = servers[now_leader].as_ref().unwrap().mgs_group_status().unwrap();
        let back = servers[first].as_ref().unwrap().mgs_group_status().unwrap();
        if back.applied.is_some() && back.applied >= leads.committed {
            break now_leader;
        }
        assert!(Instant::now() < deadline, "the returning replica did not catch up: {back:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let saved = |i: usize| weft_mgs::store::load(&root.path().join(format!("mgs{i}")).join("mgs")).unwrap().unwrap();
    assert_eq!(saved(first), saved(leading), "the returning replica holds the leader's map");
    assert!(saved(first).target(TargetKind::Ost, 1).is_some() && saved(first).pools.contains_key("after"));
    match admin.op(RequestHeader::default(), mgs::GetMap { known_version: 0 }, Duration::from_secs(10)).await {
        Ok(MgsReply::Map(map)) => assert_eq!(map, saved(leading)),
        other => panic!("unexpected answer {other:?}"),
    }

    drop(client);
    more.shutdown().await;
    targets.shutdown().await;
    for s in servers.into_iter().flatten() {
        s.shutdown().await;
    }
}

/// A membership change sent to the replica at `address` as `uid`.
async fn change(
    address: &str,
    uid: u32,
    op: weft_proto::msg::RaftRequest,
) -> weft_proto::WeftResult<weft_proto::msg::raft::MembersAnswer> {
    let peer = weft_rpc::Peer::new(address.to_string(), weft_rpc::PeerOptions::default());
    let mut header = RequestHeader::default();
    header.identity.uid = uid;
    let body = weft_proto::msg::RequestBody::Raft { group: weft_proto::msg::GroupId::Mgs, op };
    match peer.call_with_timeout(header, body, bytes::Bytes::new(), Duration::from_secs(60)).await?.0 {
        weft_proto::msg::ReplyBody::Raft(weft_proto::msg::RaftReply::Members(m)) => Ok(m),
        other => panic!("unexpected answer {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mgs_replica_joins_a_live_group_and_the_leader_leaves_it() {
    let root = tempfile::tempdir().unwrap();
    let addresses = free_addresses(4);
    let founders = addresses[..3].to_vec();
    let configs: Vec<ServerConfig> =
        (0..3).map(|i| mgs_replica_config(&root.path().join(format!("mgs{i}")), &addresses[i], &founders)).collect();
    let starting: Vec<_> = configs.iter().map(|c| tokio::spawn(RunningServer::start(c.clone()))).collect();
    let mut servers: Vec<Option<RunningServer>> = Vec::new();
    for s in starting {
        servers.push(Some(s.await.unwrap().unwrap()));
    }
    let admin = MgsPeers::new(&addresses.join(","), weft_rpc::PeerOptions::default());
    let pool = |name: &str| mgs::PoolNew { pool: name.into() };
    admin.op(RequestHeader::default(), pool("before"), Duration::from_secs(30)).await.unwrap();

    // The fourth joins: it waits, outside the group, until it is added.
    let mut joining = mgs_replica_config(&root.path().join("mgs3"), &addresses[3], &addresses);
    joining.mgs.as_mut().unwrap().join = true;
    servers.push(Some(RunningServer::start(joining).await.unwrap()));
    let first = leader(&servers).await;
    let waiting = servers[3].as_ref().unwrap().mgs_group_status().unwrap();
    assert!(waiting.members.is_empty() && waiting.role != weft_raft::Role::Leader, "{waiting:?}");

    let add = || {
        weft_proto::msg::RaftRequest::AddMember(weft_proto::msg::raft::AddMember {
            replica: 4,
            address: addresses[3].clone(),
        })
    };
    let refused = change(&addresses[first], 1000, add()).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Perm, "{refused}");
    let follower = (first + 1) % 3;
    let moved = change(&addresses[follower], 0, add()).await.unwrap_err();
    assert_eq!(weft_rpc::mgs::leader_named(&moved.message), Some(addresses[first].as_str()), "{moved}");
    let members = change(&addresses[first], 0, add()).await.unwrap();
    assert_eq!(members.voters.len(), 4, "{members:?}");
    assert!(members.voters.contains(&(4, addresses[3].clone())), "{members:?}");
    let saved = |i: usize| weft_mgs::store::load(&root.path().join(format!("mgs{i}")).join("mgs")).unwrap();
    assert!(saved(3).is_some_and(|m| m.pools.contains_key("before")), "the new replica holds the map from before");

    // The leader removed: the others elect one, and it serves.
    let remove = weft_proto::msg::RaftRequest::RemoveMember(weft_proto::msg::raft::RemoveMember {
        address: addresses[first].clone(),
    });
    let members = change(&addresses[first], 0, remove.clone()).await.unwrap();
    assert!(members.voters.iter().all(|(_, a)| *a != addresses[first]) && members.voters.len() == 3, "{members:?}");
    let gone = change(&addresses[follower], 0, remove).await;
    assert!(
        gone.as_ref().is_err_and(|e| e.code == ErrorCode::Moved || e.message.contains("is not a member")),
        "{gone:?}"
    );
    let removed = servers[first].take().unwrap();
    admin.op(RequestHeader::default(), pool("after"), Duration::from_secs(30)).await.expect("a new leader answers");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !saved(3).is_some_and(|m| m.pools.contains_key("after")) {
        assert!(Instant::now() < deadline, "the added replica did not get the map made after the removal");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The added replica made the leader (the leader stopped, and if the next is not it, that
    // one stopped and the first started again: its log is then shorter than the added
    // replica's). A client given only the founders' addresses follows to it.
    let l = leader(&servers).await;
    if l != 3 {
        servers[l].take().unwrap().shutdown().await;
        let next = leader(&servers).await;
        // Committed by the next leader with the added replica (the first is down): the added
        // replica's log is then longer than the first's.
        admin.op(RequestHeader::default(), pool("between"), Duration::from_secs(30)).await.unwrap();
        if next != 3 {
            servers[next].take().unwrap().shutdown().await;
            servers[l] = Some(RunningServer::start(configs[l].clone()).await.unwrap());
        }
    }
    assert_eq!(leader(&servers).await, 3);
    let old_list = MgsPeers::new(&founders.join(","), weft_rpc::PeerOptions::default());
    let made = old_list.op(RequestHeader::default(), pool("unlisted"), Duration::from_secs(10)).await;
    assert!(made.is_ok_and(|m| m.pools.contains_key("unlisted")), "a leader outside the list is not followed");

    removed.shutdown().await;
    for s in servers.into_iter().flatten() {
        s.shutdown().await;
    }
}

/// The map names the group's members, so a client given one replica's address alone still
/// reaches the group after that replica stops (without it, its only address is dead).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_given_one_replica_learns_the_others_from_the_map_and_follows_them_after_it_stops() {
    let root = tempfile::tempdir().unwrap();
    let addresses = free_addresses(3);
    let list = addresses.join(",");
    let (_, mut servers) = start_replicas(root.path(), &addresses).await;
    let first = leader(&servers).await;
    let client = Client::connect(ClientConfig {
        request_timeout: Duration::from_secs(30),
        ..ClientConfig::new(addresses[first].clone())
    })
    .await
    .unwrap();
    client_sees(&client, "the MGS's three replicas", |m| m.mgs_replicas == addresses).await;

    // The only replica the client was given stops; another leads, and what it does reaches
    // the client's map through a replica it learned of.
    servers[first].take().unwrap().shutdown().await;
    let admin = MgsPeers::new(&list, weft_rpc::PeerOptions::default());
    admin
        .op(RequestHeader::default(), mgs::PoolNew { pool: "learned".into() }, Duration::from_secs(30))
        .await
        .expect("a pool made by the new leader");
    client_sees(&client, "the pool made after its listed replica stopped", |m| m.pools.contains_key("learned")).await;
    drop(client);
    for s in servers.into_iter().flatten() {
        s.shutdown().await;
    }
}
