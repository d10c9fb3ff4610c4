//! `WEFT_TRANSPORT=tcp`: servers registered in-process are reached over TCP anyway. Its own
//! test binary (own process): the variable is read once per process.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::net::TcpListener;
use weft_proto::msg::*;
use weft_rpc::{Handler, Peer, PeerOptions, RequestContext, Server, ServerLimits};

struct Pong;

impl Handler for Pong {
    fn handle<'a>(
        &'a self,
        _: &'a RequestContext,
        _: weft_rpc::Run,
        _: RequestBody,
        _: Bytes,
    ) -> BoxFuture<'a, (Reply, Bytes)> {
        Box::pin(async { (Ok(ReplyBody::Pong), Bytes::new()) })
    }
}

#[tokio::test]
async fn weft_transport_tcp_turns_the_in_process_path_off() {
    std::env::set_var(weft_rpc::network::TRANSPORT_ENV, "tcp");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = Server::new(Arc::new(Pong), ServerLimits::default());
    server.serve(listener);
    let network = weft_rpc::Network::new();
    network.register_server(&addr, &server);
    let peer = Peer::new(addr.clone(), PeerOptions { network: Some(network.clone()), ..PeerOptions::default() });
    assert!(weft_rpc::network::tcp_forced());
    assert!(!peer.is_local());
    assert!(network.in_process(&addr).is_none());
    let (body, _) = peer.call(RequestHeader::default(), RequestBody::Ping, Bytes::new()).await.unwrap();
    assert_eq!(body, ReplyBody::Pong);
    assert_eq!(server.stats().snapshot()["ping"].samples, 1);
}
