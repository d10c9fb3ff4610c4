//! The MDS's way to the OSTs: precreate and destroy over the network, addressed through the
//! cluster map. Implements `weft_mds::ObjectTargets`.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::{Arc, OnceLock};
use weft_oss::Oss;
use weft_proto::msg::ops::Op;
use weft_proto::msg::Run;
use weft_proto::msg::{ost, OstReply, OstRequest, TargetKind};
use weft_proto::{Fid, WeftError, WeftResult};
use weft_rpc::map::{MapFollower, PeerSet};
use weft_rpc::{Peer, PeerOptions};

pub(crate) struct NetTargets {
    /// Set once this server has registered its targets and follows the map.
    map: OnceLock<Arc<MapFollower>>,
    /// One peer per OSS address.
    pub peers: PeerSet,
    /// The MDT's own data-on-MDT object target, reached without the network.
    dom: Option<Arc<Oss>>,
}

impl NetTargets {
    pub fn new(opts: PeerOptions, dom: Option<Arc<Oss>>) -> Self {
        NetTargets { map: OnceLock::new(), peers: PeerSet::new(opts), dom }
    }

    /// From now on the OSTs are found through `map`.
    pub fn follow(&self, map: Arc<MapFollower>) {
        let _ = self.map.set(map);
    }

    fn peer(&self, ost: u32) -> WeftResult<Arc<Peer>> {
        let map = self.map.get().ok_or_else(|| WeftError::not_found("the cluster map is not known yet"))?;
        let state = map.current();
        self.peers
            .for_target(&state, TargetKind::Ost, ost)
            .map(|(peer, _)| peer)
            .ok_or_else(|| WeftError::not_found(format!("OST{ost:04x} is not in the cluster map")))
    }

    fn call<O>(&self, ost: u32, op: O) -> BoxFuture<'static, WeftResult<O::Reply>>
    where
        O: Op<Request = OstRequest, Answer = OstReply> + Send + 'static,
        O::Reply: Send,
    {
        if let Some(dom) = self.dom.clone().filter(|_| weft_proto::layout::dom_mdt(ost).is_some()) {
            return Box::pin(async move {
                let (reply, _) = dom.handle(ost, op.into(), Bytes::new(), Run::Offload).await;
                weft_proto::msg::ops::take_reply::<O>(reply?)
            });
        }
        let peer = self.peer(ost);
        Box::pin(async move {
            let peer = peer?;
            let timeout = peer.options().request_timeout;
            Ok(peer.op(super::header(), ost, op, Bytes::new(), timeout).await?.0)
        })
    }
}

impl weft_mds::ObjectTargets for NetTargets {
    fn precreate(&self, ost: u32, start_oid: u32, count: u32) -> BoxFuture<'static, WeftResult<u32>> {
        let call = self.call(ost, ost::Precreate { start_oid, count });
        Box::pin(async move { Ok(call.await?.last_oid) })
    }

    fn destroy_orphans(
        &self,
        ost: u32,
        above_oid: Option<u32>,
        mds_start: u64,
    ) -> BoxFuture<'static, WeftResult<ost::Orphans>> {
        self.call(ost, ost::DestroyOrphans { above_oid, mds_start })
    }

    fn destroy(&self, ost: u32, fid: Fid) -> BoxFuture<'static, WeftResult<()>> {
        self.call(ost, ost::Destroy { fid })
    }
}
