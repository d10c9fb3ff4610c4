//! `MgsPeers`: a replicated MGS's clients find the leader. Three addresses on loopback: one
//! where nothing listens (a stopped replica), one that does not lead and names the leader,
//! and the leader. A call goes round to the leader, remembers it, and later calls go there
//! first; a list whose replicas all refuse fails within its deadline, naming them.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use weft_proto::msg::*;
use weft_proto::{ErrorCode, WeftError};
use weft_rpc::mgs::{moved_to, MgsPeers};
use weft_rpc::{Handler, PeerOptions, RequestContext, Server, ServerLimits};

/// An MGS replica: the leader answers GetMap; a follower refuses, naming `leader` if known.
struct Replica {
    leader: Option<String>,
    leads: bool,
    asked: AtomicU64,
}

impl Handler for Replica {
    fn handle<'a>(
        &'a self,
        _: &'a RequestContext,
        _: weft_rpc::Run,
        _: RequestBody,
        _: Bytes,
    ) -> BoxFuture<'a, (Reply, Bytes)> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        let reply = if self.leads {
            Ok(ReplyBody::Mgs(MgsReply::Map(ClusterMap { version: 7, fsname: "weft".into(), ..Default::default() })))
        } else {
            Err(WeftError::new(ErrorCode::Moved, moved_to("this MGS replica does not lead", self.leader.as_deref())))
        };
        Box::pin(async move { (reply, Bytes::new()) })
    }
}

async fn serve(replica: Replica) -> (String, Arc<Replica>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let replica = Arc::new(replica);
    let server = Server::new(replica.clone(), ServerLimits::default());
    server.serve(listener);
    (address, replica)
}

fn nothing_listens() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn a_call_goes_round_to_the_leader_and_the_next_starts_there() {
    let stopped = nothing_listens();
    let (leader, leading) = serve(Replica { leader: None, leads: true, asked: AtomicU64::new(0) }).await;
    let (follower, following) =
        serve(Replica { leader: Some(leader.clone()), leads: false, asked: AtomicU64::new(0) }).await;
    // The stopped one first, then the follower: the leader is found through the follower.
    let mgs = MgsPeers::new(&format!("{stopped},{follower},{leader}"), PeerOptions::default());
    let started = Instant::now();
    let map = mgs.op(RequestHeader::default(), mgs::GetMap { known_version: 0 }, Duration::from_secs(10)).await;
    assert!(matches!(map, Ok(MgsReply::Map(ref m)) if m.version == 7), "{map:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "a refused address is left at once: {:?}", started.elapsed());
    assert_eq!(mgs.current(), leader);
    assert_eq!(following.asked.load(Ordering::Relaxed), 1);
    mgs.op(RequestHeader::default(), mgs::GetMap { known_version: 0 }, Duration::from_secs(10)).await.unwrap();
    assert_eq!(following.asked.load(Ordering::Relaxed), 1, "the next call went to the leader first");
    assert_eq!(leading.asked.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn replicas_without_a_leader_fail_within_the_deadline_naming_them() {
    let (a, _) = serve(Replica { leader: None, leads: false, asked: AtomicU64::new(0) }).await;
    let b = nothing_listens();
    let mgs = MgsPeers::new(&format!("{a},{b}"), PeerOptions::default());
    let started = Instant::now();
    let error =
        mgs.op(RequestHeader::default(), mgs::GetMap { known_version: 0 }, Duration::from_secs(2)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    assert!(error.message.contains(&a) && error.message.contains(&b), "{error}");
}
