//! What an idle file system costs in messages (the "health without pings"): clients
//! that hold locks on many targets and do nothing, servers that serve them. Every request
//! every server answers is counted over an idle window, for a base shape and for the same
//! with twice the clients and with twice the OSTs (and OSS processes). Messages per second
//! at idle must grow with clients plus targets, never with their product: the extra
//! clients may cost each a share of one map watch (one long poll to the MGS per 25 s), the
//! extra servers a few messages each (the MGS's monitor, the MDS's view of its OSTs), and
//! nothing may cost a message per client per server, which a pinger does.
//!
//! Everything runs in this process on one in-process network (no TCP, so a few hundred
//! servers and clients fit). `WEFT_IDLE_FULL=1` plays the shape (50 clients, 200
//! OSTs on 20 OSS processes, and each doubled; `make soak`); the default is a small one.

use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_client::{Client, ClientConfig};
use weft_proto::layout::StripeSpec;
use weft_proto::lock::LockMode;
use weft_proto::msg::{Caller, OPEN_WRITE};
use weft_proto::Fid;
use weft_server::config::OssRole;
use weft_server::{RunningServer, ServerConfig};

/// How long the counted idle window lasts: past the MGS monitor's interval (10 s), so its
/// scrapes show; the full form also past the map watch's (25 s).
const IDLE_WINDOW: Duration = Duration::from_secs(12);
const IDLE_WINDOW_FULL: Duration = Duration::from_secs(30);
/// Settling after the workload, before the window: the last lock and close traffic ends.
const SETTLE: Duration = Duration::from_secs(2);
/// Files each client writes, striped over this many OSTs each: its locks then span many
/// targets of many servers.
const FILES_PER_CLIENT: usize = 3;
const STRIPES_PER_FILE: i64 = 4;
/// Budgets the growth is checked against, in messages per second at idle: per extra client
/// (its map watch is one request per 25 s; 0.25 leaves room for the window catching a few
/// more than the average), and per extra server process (the MGS's monitor scrapes each
/// every 10 s, the MDS polls each OST's free space; a lease renewal would be 2/s). A pinger
/// costs each client a message per server per second: 1 per extra client per server, far
/// above both.
const EXTRA_CLIENT_BUDGET: f64 = 0.25;
const EXTRA_SERVER_BUDGET: f64 = 5.0;

#[derive(Debug, Clone, Copy)]
struct Shape {
    clients: usize,
    oss: usize,
    osts_per_oss: u32,
}

impl Shape {
    fn osts(&self) -> u32 {
        self.oss as u32 * self.osts_per_oss
    }
}

struct Measured {
    /// Requests answered while the clients worked (to show the counting counts).
    working: u64,
    per_second: f64,
    by_op: std::collections::BTreeMap<&'static str, u64>,
}

async fn measure(shape: Shape, window: Duration) -> Measured {
    let root = tempfile::tempdir().unwrap();
    let network = weft_rpc::Network::new();
    // The MGS (with its monitor at the default interval, as a site runs it) and the MDS.
    let mut head = ServerConfig::all_in_one(root.path().join("head"), Vec::new());
    head.oss = None;
    head.monitor_interval_s = weft_server::limits::MONITOR_INTERVAL_S_DEFAULT;
    let head = RunningServer::start_on(head, network.clone()).await.unwrap();
    let mgs = head.mgs_address();
    let mut servers = vec![head];
    for n in 0..shape.oss {
        let first = n as u32 * shape.osts_per_oss;
        let mut c = ServerConfig::all_in_one(root.path().join(format!("oss{n}")), Vec::new());
        c.mgs = None;
        c.mds = None;
        c.mgs_address = mgs.clone();
        c.oss = Some(OssRole { osts: (first..first + shape.osts_per_oss).collect(), failover_osts: Vec::new() });
        servers.push(RunningServer::start_on(c, network.clone()).await.unwrap());
    }
    let mut clients = Vec::new();
    for _ in 0..shape.clients {
        let config = ClientConfig { network: Some(network.clone()), ..ClientConfig::new(mgs.clone()) };
        clients.push(Client::connect(config).await.unwrap());
    }
    wait_for_osts(&clients[0], shape.osts()).await;

    // Each client writes its files under locks it keeps (cached, as a mount keeps them).
    let who = Caller::root();
    let writes = clients.iter().enumerate().map(|(c, client)| {
        let (client, who) = (client.clone(), who.clone());
        async move {
            for f in 0..FILES_PER_CLIENT {
                let name = format!("c{c}-f{f}");
                let spec = StripeSpec { stripe_count: STRIPES_PER_FILE, ..StripeSpec::default() };
                let opened = client
                    .create(&who, Fid::ROOT, name.as_bytes(), 0o644, true, Some(spec), OPEN_WRITE)
                    .await
                    .unwrap_or_else(|e| panic!("create {name}: {e}"));
                let fid = opened.inode.attr.fid;
                let layout = opened.inode.layout.clone().expect("a file has a layout");
                let data = bytes::Bytes::from(vec![c as u8; 4 << 20]);
                let locks = client.extent_lock(&who, fid, &layout, 0, data.len() as u64, LockMode::Pw).await.unwrap();
                client.write(&who, &layout, 0, data, &locks).await.unwrap();
                drop(locks);
                client.close(&who, fid, opened.handle, None).await.unwrap();
            }
        }
    });
    futures::future::join_all(writes).await;
    tokio::time::sleep(SETTLE).await;

    let count = |servers: &[RunningServer]| servers.iter().map(RunningServer::requests_served).sum::<u64>();
    let ops = |servers: &[RunningServer]| {
        let mut all = std::collections::BTreeMap::new();
        for s in servers {
            for (op, n) in s.requests_by_op() {
                *all.entry(op).or_insert(0) += n;
            }
        }
        all
    };
    let (before, ops_before) = (count(&servers), ops(&servers));
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let (after, ops_after) = (count(&servers), ops(&servers));
    let secs = started.elapsed().as_secs_f64();
    let by_op = ops_after
        .into_iter()
        .map(|(op, n)| (op, n - ops_before.get(op).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    drop(clients);
    for s in servers {
        s.shutdown().await;
    }
    Measured { working: before, per_second: (after - before) as f64 / secs, by_op }
}

/// Waits until the map the client follows names every OST.
async fn wait_for_osts(client: &Arc<Client>, osts: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.map().osts().count() < osts as usize {
        assert!(Instant::now() < deadline, "the OSTs did not all register");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_messages_grow_with_clients_plus_targets_not_their_product() {
    let full = std::env::var("WEFT_IDLE_FULL").is_ok_and(|v| v == "1");
    let base = if full {
        Shape { clients: 50, oss: 20, osts_per_oss: 10 }
    } else {
        Shape { clients: 8, oss: 4, osts_per_oss: 4 }
    };
    let more_clients = Shape { clients: base.clients * 2, ..base };
    let more_targets = Shape { oss: base.oss * 2, ..base };
    let window = if full { IDLE_WINDOW_FULL } else { IDLE_WINDOW };
    let mut rates = Vec::new();
    for shape in [base, more_clients, more_targets] {
        let m = measure(shape, window).await;
        println!(
            "idle: {:>3} clients, {:>3} OSTs on {:>2} OSS: {} requests while working, then {:.2} messages/s idle \
             over {window:?} {:?}",
            shape.clients,
            shape.osts(),
            shape.oss,
            m.working,
            m.per_second,
            m.by_op
        );
        rates.push(m.per_second);
    }
    let per_extra_client = (rates[1] - rates[0]) / base.clients as f64;
    let per_extra_server = (rates[2] - rates[0]) / base.oss as f64;
    println!(
        "idle: each extra client costs {per_extra_client:.3} messages/s, each extra OSS process \
         ({} OSTs) {per_extra_server:.3}",
        base.osts_per_oss
    );
    assert!(
        per_extra_client <= EXTRA_CLIENT_BUDGET,
        "doubling the clients added {per_extra_client:.3} messages/s per client at idle (budget {EXTRA_CLIENT_BUDGET})"
    );
    assert!(
        per_extra_server <= EXTRA_SERVER_BUDGET,
        "doubling the OSTs added {per_extra_server:.3} messages/s per OSS process at idle (budget {EXTRA_SERVER_BUDGET})"
    );
}
