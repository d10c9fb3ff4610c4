//! The MDS's way to the OSTs: precreate and destroy over the network, addressed through the
//! cluster map. Implements `weft_mds::ObjectTargets`.

use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use weft_oss::Oss;
use weft_proto::msg::ops::Op;
use weft_proto::msg::quota::{QuotaGrant, QuotaUseEntry};
use weft_proto::msg::Run;
use weft_proto::msg::{ost, MdtReply, MdtRequest, OstReply, OstRequest, RequestBody, RequestHeader, TargetKind};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};
use weft_rpc::map::{MapFollower, PeerSet};
use weft_rpc::PeerOptions;

/// How long a request answered `Moved` (a failover OST not served there now) waits for the
/// map to say where before it is sent again: as a client waits (weft-client's
/// `MOVED_RETRY_MS`).
const MOVED_RETRY_MS: u64 = crate::limits::OST_MOVED_RETRY_MS;

pub(crate) struct NetTargets {
    /// Set once this server has registered its targets and follows the map.
    map: OnceLock<Arc<MapFollower>>,
    /// One peer per OSS address.
    pub peers: Arc<PeerSet>,
    request_timeout: Duration,
    /// The MDT's own data-on-MDT object target, reached without the network.
    dom: Option<Arc<Oss>>,
}

impl NetTargets {
    pub fn new(opts: PeerOptions, dom: Option<Arc<Oss>>) -> Self {
        let request_timeout = opts.request_timeout;
        NetTargets { map: OnceLock::new(), peers: Arc::new(PeerSet::new(opts)), request_timeout, dom }
    }

    /// From now on the OSTs are found through `map`.
    pub fn follow(&self, map: Arc<MapFollower>) {
        let _ = self.map.set(map);
    }

    fn call<O>(&self, ost: u32, op: O) -> BoxFuture<'static, WeftResult<O::Reply>>
    where
        O: Op<Request = OstRequest, Answer = OstReply> + Clone + Send + Sync + 'static,
        O::Reply: Send,
    {
        if let Some(dom) = self.dom.clone().filter(|_| weft_proto::layout::dom_mdt(ost).is_some()) {
            return Box::pin(async move {
                let (reply, _) = dom.handle(ost, op.into(), Bytes::new(), Run::Offload).await;
                weft_proto::msg::ops::take_reply::<O>(reply?)
            });
        }
        let send = self.send(TargetKind::Ost, ost, super::header(), op.into());
        Box::pin(async move { weft_proto::msg::ops::take_reply::<O>(send.await?) })
    }

    /// One request to a target of `kind` wherever the map says it is served now: a
    /// failover OST or a replicated MDT moves to another server, and the request follows
    /// it there and is sent again (precreates, destroys and the steps of distributed
    /// changes are idempotent), as a client's does.
    fn send<R, A>(
        &self,
        kind: TargetKind,
        index: u32,
        header: RequestHeader,
        req: R,
    ) -> BoxFuture<'static, WeftResult<A>>
    where
        R: Into<RequestBodyOf> + Clone + Send + Sync + 'static,
        A: weft_proto::msg::ops::Payload<weft_proto::msg::ReplyBody> + Send + 'static,
    {
        let map = self.map.get().cloned();
        let (peers, timeout) = (self.peers.clone(), self.request_timeout);
        Box::pin(async move {
            let map = map.ok_or_else(|| WeftError::not_found("the cluster map is not known yet"))?;
            let deadline = tokio::time::Instant::now() + timeout;
            let label = match kind {
                TargetKind::Ost => format!("OST{index:04x}"),
                _ => format!("MDT{index:04x}"),
            };
            loop {
                let mut changes = map.subscribe();
                let state = changes.borrow_and_update().clone();
                let (peer, address) = peers
                    .for_target(&state, kind, index)
                    .ok_or_else(|| WeftError::not_found(format!("{label} is not in the cluster map")))?;
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let moved = async {
                    loop {
                        if changes.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                        if changes.borrow_and_update().address(kind, index).is_some_and(|a| a != address) {
                            return;
                        }
                    }
                };
                let body = req.clone().into().body(index);
                tokio::select! {
                    answer = peer.call_with_timeout(header.clone(), body, Bytes::new(), left) => match answer {
                        Err(e) if e.code == ErrorCode::Moved && left > Duration::from_millis(MOVED_RETRY_MS) => {
                            map.refresh_soon();
                            let _ = tokio::time::timeout(Duration::from_millis(MOVED_RETRY_MS), changes.changed()).await;
                        }
                        other => {
                            let (reply, _) = other?;
                            return weft_proto::msg::ops::service_answer(&label, reply);
                        }
                    },
                    () = moved => {}
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(WeftError::new(ErrorCode::TimedOut, format!("{label} did not answer in time")));
                }
            }
        })
    }
}

/// A service's request, made into a whole request's body for a target index.
enum RequestBodyOf {
    Ost(OstRequest),
    Mdt(MdtRequest),
}

impl RequestBodyOf {
    fn body(self, index: u32) -> RequestBody {
        match self {
            RequestBodyOf::Ost(op) => RequestBody::Ost { ost: index, op },
            RequestBodyOf::Mdt(op) => RequestBody::Mdt { mdt: index, op },
        }
    }
}

impl From<OstRequest> for RequestBodyOf {
    fn from(r: OstRequest) -> Self {
        RequestBodyOf::Ost(r)
    }
}

impl From<MdtRequest> for RequestBodyOf {
    fn from(r: MdtRequest) -> Self {
        RequestBodyOf::Mdt(r)
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
        mdt: u32,
        above_oid: Option<u32>,
        mds_start: u64,
    ) -> BoxFuture<'static, WeftResult<ost::Orphans>> {
        self.call(ost, ost::DestroyOrphans { mdt, above_oid, mds_start })
    }

    fn destroy(&self, ost: u32, fid: Fid) -> BoxFuture<'static, WeftResult<()>> {
        self.call(ost, ost::Destroy { fid })
    }

    fn statfs(&self, ost: u32) -> BoxFuture<'static, WeftResult<weft_proto::msg::StatfsInfo>> {
        self.call(ost, ost::Statfs {})
    }

    fn quota_usage(&self, ost: u32) -> BoxFuture<'static, WeftResult<Vec<QuotaUseEntry>>> {
        self.call(ost, ost::QuotaUsageAll {})
    }

    fn quota_grants(&self, ost: u32, grants: Vec<QuotaGrant>) -> BoxFuture<'static, WeftResult<Vec<QuotaUseEntry>>> {
        self.call(ost, ost::QuotaGrants { grants })
    }

    fn mdt(&self, mdt: u32, header: RequestHeader, req: MdtRequest) -> BoxFuture<'static, WeftResult<MdtReply>> {
        self.send(TargetKind::Mdt, mdt, header, req)
    }
}
