//! Micro-benchmark of the request path: round trips of an empty request and of 1 MiB bulk
//! through a real `Server` pipeline, over loopback TCP and in-process. Run with
//! `make bench-micro` (release build); not part of the test suite.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_proto::msg::*;
use weft_rpc::{Handler, Peer, PeerOptions, RequestContext, Server, ServerLimits};

/// Answers an OST write by handing its bulk back, as a read would.
struct Echo;

impl Handler for Echo {
    fn handle<'a>(
        &'a self,
        _: &'a RequestContext,
        _: weft_rpc::Run,
        _body: RequestBody,
        bulk: Bytes,
    ) -> BoxFuture<'a, (Reply, Bytes)> {
        Box::pin(async move { (Ok(ReplyBody::Ost(OstReply::Read(ost::ReadDone { len: bulk.len() as u32 }))), bulk) })
    }
}

const ROUND_TRIPS: u32 = 20_000;
const BULK_ROUND_TRIPS: u32 = 2_000;
const BULK_BYTES: usize = 1 << 20;
const IN_FLIGHT: usize = 8;

fn header(id: u64) -> RequestHeader {
    RequestHeader { client_id: 1, request_id: id, ..Default::default() }
}

async fn measure(name: &str, peer: Arc<Peer>) {
    // Sequential pings: the latency of one request.
    let start = Instant::now();
    for i in 0..ROUND_TRIPS {
        peer.call(header(i as u64), RequestBody::Ping, Bytes::new()).await.expect("ping");
    }
    let per = start.elapsed() / ROUND_TRIPS;
    println!("{name:<11} ping round trip       {:>9.1} us", per.as_secs_f64() * 1e6);

    // 1 MiB each way, IN_FLIGHT requests at a time: bulk throughput.
    let data = Bytes::from(vec![7u8; BULK_BYTES]);
    let write = RequestBody::Ost {
        ost: 0,
        op: OstRequest::Write(ost::Write {
            fid: weft_proto::Fid::new(1, 1, 0),
            offset: 0,
            sync: false,
            owner: None,
            extents: Vec::new(),
        }),
    };
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..IN_FLIGHT {
        let (peer, data, write) = (peer.clone(), data.clone(), write.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..BULK_ROUND_TRIPS / IN_FLIGHT as u32 {
                let (_, back) = peer
                    .call(header(((t as u64 + 1) << 32) | i as u64), write.clone(), data.clone())
                    .await
                    .expect("bulk");
                assert_eq!(back.len(), BULK_BYTES);
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let secs = start.elapsed().as_secs_f64();
    let moved = 2.0 * BULK_BYTES as f64 * BULK_ROUND_TRIPS as f64;
    // In-process the bulk is handed over, not copied: requests/s is the figure that counts.
    println!(
        "{name:<11} 1 MiB bulk both ways {:>9.0} requests/s, {:.0} MB/s ({IN_FLIGHT} in flight)",
        BULK_ROUND_TRIPS as f64 / secs,
        moved / secs / 1e6
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let server = Server::new(Arc::new(Echo), ServerLimits::default());
    server.serve(listener);
    let network = weft_rpc::Network::new();
    let opts = PeerOptions {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(30),
        network: Some(network.clone()),
        ..Default::default()
    };
    measure("tcp", Arc::new(Peer::new(address.clone(), opts.clone()))).await;
    network.register_server(&address, &server);
    let local = Arc::new(Peer::new(address, opts));
    assert!(local.is_local() || weft_rpc::network::tcp_forced(), "the server registered in-process");
    measure("in-process", local).await;
    server.shutdown();
}
