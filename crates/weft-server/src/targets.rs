//! The MDS's way to the OSTs: precreate and destroy over the network, addressed through the
//! cluster map. Implements `weft_mds::ObjectTargets`.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use weft_proto::msg::*;
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};
use weft_rpc::{Peer, PeerOptions};

pub(crate) struct NetTargets {
    opts: PeerOptions,
    /// OST index to the peer serving it; peers are shared per address.
    osts: Mutex<HashMap<u32, Arc<Peer>>>,
}

impl NetTargets {
    pub fn new(opts: PeerOptions) -> Self {
        NetTargets { opts, osts: Mutex::new(HashMap::new()) }
    }

    pub fn set_map(&self, map: &ClusterMap) {
        let mut osts = self.osts.lock().unwrap_or_else(|p| p.into_inner());
        let mut by_address: HashMap<String, Arc<Peer>> =
            osts.values().map(|p| (p.address().to_string(), p.clone())).collect();
        osts.clear();
        for t in map.osts() {
            let peer = by_address
                .entry(t.address.clone())
                .or_insert_with(|| Arc::new(Peer::new(t.address.clone(), self.opts.clone())))
                .clone();
            osts.insert(t.index, peer);
        }
    }

    fn peer(&self, ost: u32) -> WeftResult<Arc<Peer>> {
        self.osts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ost)
            .cloned()
            .ok_or_else(|| WeftError::not_found(format!("OST{ost:04x} is not in the cluster map")))
    }

    fn call(&self, ost: u32, op: OstRequest) -> BoxFuture<'static, WeftResult<OstReply>> {
        let peer = self.peer(ost);
        Box::pin(async move {
            let peer = peer?;
            match peer.call(super::header(), RequestBody::Ost { ost, op }, Bytes::new()).await? {
                (ReplyBody::Ost(r), _) => Ok(r),
                (other, _) => Err(WeftError::new(ErrorCode::Protocol, format!("unexpected reply {other:?}"))),
            }
        })
    }
}

impl weft_mds::ObjectTargets for NetTargets {
    fn precreate(&self, ost: u32, start_oid: u32, count: u32) -> BoxFuture<'static, WeftResult<u32>> {
        let call = self.call(ost, OstRequest::Precreate { start_oid, count });
        Box::pin(async move {
            match call.await? {
                OstReply::Precreated { last_oid } => Ok(last_oid),
                other => Err(WeftError::new(ErrorCode::Protocol, format!("unexpected reply {other:?}"))),
            }
        })
    }

    fn destroy(&self, ost: u32, fid: Fid) -> BoxFuture<'static, WeftResult<()>> {
        let call = self.call(ost, OstRequest::Destroy { fid });
        Box::pin(async move { call.await.map(|_| ()) })
    }
}
