//! Writes an OSS answered but had not made durable are lost if its machine loses power:
//! the client keeps each one until the OST says it committed it, and sends it again when
//! the management service says the OSS restarted (Lustre's transno, last_committed and
//! replay). Here the OSS's OSTs keep their objects in memory that a power loss takes back
//! to their last sync (weft-oss `MemStore`), its commits far apart, so that what the client
//! wrote is not durable when the power goes; a client that never saw the loss then reads
//! every acknowledged byte.

use bytes::Bytes;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_client::{Client, ClientConfig};
use weft_oss::store::{MemStore, ObjectStore};
use weft_proto::layout::StripeSpec;
use weft_proto::msg::Caller;
use weft_proto::Fid;
use weft_server::{RunningServer, ServerConfig};

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// A counter of the OST imports' replay section (`osc.*.import`), for each OST.
fn osc_replay_counts(client: &Client, field: &str) -> Vec<u64> {
    client
        .import_params()
        .iter()
        .filter(|(name, _)| name.starts_with("osc."))
        .filter_map(|(_, text)| {
            text.lines().find_map(|l| l.trim().strip_prefix(&format!("{field}: ")).and_then(|n| n.parse::<u64>().ok()))
        })
        .collect()
}

fn stores(mems: &[Arc<MemStore>]) -> Option<Vec<(u32, Box<dyn ObjectStore>)>> {
    Some(mems.iter().enumerate().map(|(i, m)| (i as u32, Box::new(m.clone()) as Box<dyn ObjectStore>)).collect())
}

/// Starts the OSS over `mems`, trying again while its address is not free yet (the server
/// before it on the same address just stopped).
async fn start_oss(config: &ServerConfig, network: &Arc<weft_rpc::Network>, mems: &[Arc<MemStore>]) -> RunningServer {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match RunningServer::start_with_stores(config.clone(), network.clone(), stores(mems)).await {
            Ok(server) => return server,
            Err(e) if Instant::now() < deadline && format!("{e:#}").contains("cannot listen") => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("the OSS did not start: {e:#}"),
        }
    }
}

/// Writes `data` to a new file striped over every OST: in one write, or with `records` in
/// records of 4,700 bytes, the even ones first, then the odd ones, each half in one
/// `write_many` (as the mount's write-behind sends small writes that do not continue each
/// other: each object's request holds several extents under one transno).
async fn write_file(client: &Client, name: &str, data: &Bytes, records: bool) -> (Fid, weft_proto::layout::Layout) {
    let root = Caller::root();
    let flags = weft_proto::msg::OPEN_READ | weft_proto::msg::OPEN_WRITE;
    let spec = StripeSpec { stripe_count: -1, stripe_size: 65_536, ..StripeSpec::unset() };
    let opened = client.create(&root, Fid::ROOT, name.as_bytes(), 0o644, true, Some(spec), flags).await.unwrap();
    let layout = opened.inode.layout.clone().expect("a layout");
    let fid = opened.inode.attr.fid;
    {
        let locks = client.whole_file_lock(&root, fid, &layout).await.unwrap();
        if records {
            const RECORD: usize = 4_700;
            for parity in 0..2 {
                let writes = (0..data.len())
                    .step_by(RECORD)
                    .enumerate()
                    .filter(|(i, _)| i % 2 == parity)
                    .map(|(_, at)| (at as u64, data.slice(at..(at + RECORD).min(data.len()))))
                    .collect();
                client.write_many(&root, &layout, writes, &locks).await.unwrap();
            }
        } else {
            client.write(&root, &layout, 0, data.clone(), &locks).await.unwrap();
        }
    }
    client.close(&root, fid, opened.handle, None).await.unwrap();
    (fid, layout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_a_power_loss_took_back_come_back_from_the_client_that_kept_them() {
    let root = tempfile::tempdir().unwrap();
    // The management service and the MDT in a server that stays up; OSTs 0 and 1 in one
    // that loses power.
    let mut meta = ServerConfig::all_in_one(root.path().join("meta"), Vec::new());
    meta.oss = None;
    let meta_server = RunningServer::start(meta).await.unwrap();
    let mgs = meta_server.mgs_address();
    let mut config = ServerConfig::all_in_one(root.path().join("oss"), vec![0, 1]);
    (config.listen, config.mgs, config.mds, config.mgs_address) = (free_address(), None, None, mgs.clone());
    // No periodic commit within the test: only an fsync commits.
    config.commit_interval_ms = 600_000;
    let mems = [Arc::new(MemStore::new()), Arc::new(MemStore::new())];
    let network = weft_rpc::Network::new();
    let oss = start_oss(&config, &network, &mems).await;

    let connect =
        || Client::connect(ClientConfig { request_timeout: Duration::from_secs(30), ..ClientConfig::new(mgs.clone()) });
    let client = connect().await.unwrap();
    let who = Caller::root();
    // One file fsync'd (committed), then two more written (answered, not committed), the
    // last in records that do not continue each other.
    let files: Vec<(String, Bytes)> = (0..3)
        .map(|i| (format!("f{i}"), Bytes::from((0..300_000u32).map(|b| (b * 7 + i) as u8).collect::<Vec<u8>>())))
        .collect();
    let mut written = Vec::new();
    for (i, (name, data)) in files.iter().enumerate() {
        let (fid, layout) = write_file(&client, name, data, i == 2).await;
        if i == 0 {
            client.fsync(&who, &layout).await.unwrap();
        }
        written.push((fid, layout));
    }

    // The power goes: the OSS's objects are what they were at its last commit.
    oss.shutdown().await;
    let after: Vec<Arc<MemStore>> = mems.iter().map(|m| Arc::new(m.after_power_loss())).collect();
    // The bytes of the files not synced are gone (read before the client can replay).
    for (_, layout) in &written[1..] {
        for object in &layout.components[0].objects {
            let lost = after[object.ost as usize].read(object.fid.oid, 0, 16).unwrap();
            assert!(lost.is_empty(), "the power loss took back what was not committed");
        }
    }
    let restarted_at = Instant::now();
    let oss = start_oss(&config, &network, &after).await;

    let deadline = Instant::now() + Duration::from_secs(20);
    // Both OSTs held unsynced stripes of both files.
    while osc_replay_counts(&client, "writes_replayed").contains(&0) {
        assert!(Instant::now() < deadline, "the client did not replay to both OSTs: {:?}", client.import_params());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let replayed: u64 = osc_replay_counts(&client, "writes_replayed").iter().sum();
    eprintln!(
        "write replay: {replayed} writes replayed within {:.2} s of the OSS's restart",
        restarted_at.elapsed().as_secs_f64()
    );
    assert_eq!(osc_replay_counts(&client, "writes_lost"), vec![0, 0]);

    // A client that never saw the power loss reads every acknowledged byte.
    let fresh = connect().await.unwrap();
    for ((name, data), (_, layout)) in files.iter().zip(&written) {
        let read = fresh.read(&who, layout, 0, data.len() as u32, data.len() as u64).await.unwrap();
        assert!(read == *data, "{name}: {} bytes read, not the {} acknowledged", read.len(), data.len());
    }
    // The replayed writes are committed by the next fsync, and survive a second power loss.
    for (_, layout) in &written {
        client.fsync(&who, layout).await.unwrap();
    }
    oss.shutdown().await;
    let again: Vec<Arc<MemStore>> = after.iter().map(|m| Arc::new(m.after_power_loss())).collect();
    let oss = start_oss(&config, &network, &again).await;
    let third = connect().await.unwrap();
    for ((name, data), (_, layout)) in files.iter().zip(&written) {
        let read = third.read(&who, layout, 0, data.len() as u32, data.len() as u64).await.unwrap();
        assert!(read == *data, "{name}: not durable after its fsync");
    }
    drop((client, fresh, third));
    oss.shutdown().await;
    meta_server.shutdown().await;
}
