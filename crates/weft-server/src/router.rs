//! The execute stage of a server process: sends each request to the service that hosts the
//! target it names.

use crate::locks::LockService;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::sync::Arc;
use weft_mgs::Mgs;
use weft_oss::Oss;
use weft_proto::lock::LockTarget;
use weft_proto::msg::*;
use weft_proto::{ErrorCode, WeftError};
use weft_rpc::{Handler, RequestContext, Run};

pub(crate) struct Router {
    pub mgs: Option<Arc<Mgs>>,
    /// A replicated MGS's group: its messages, and the leader a refusal names.
    pub mgs_group: Option<weft_raft::Group>,
    /// The MDS running here now (a replicated MDT's while this replica leads).
    pub mds: Arc<crate::replicated::MdsSlot>,
    /// The MDT is replicated: its requests and lock requests are refused while this replica
    /// does not lead (`ErrorCode::Moved`), not answered "not here".
    pub replicated: bool,
    /// The replicated MDT's group, for its messages.
    pub mdt_group: Option<weft_raft::Group>,
    pub mdt_index: Option<u32>,
    pub oss: Option<Arc<Oss>>,
    /// The MDT's data-on-MDT object target (`weft_proto::layout::dom_target`).
    pub dom: Option<Arc<Oss>>,
    /// A failover node's OSTs, served only under its lease (failover.rs).
    pub failover: Option<Arc<crate::failover::Failover>>,
    pub locks: Arc<LockService>,
    pub params: Arc<crate::params::Params>,
    /// Nodemaps and root squash: who each request is for (see `nodemap.rs`).
    pub identities: Arc<crate::nodemap::Identities>,
}

/// Who may do what to the decay policies and reservations: root sets and removes them and reads everyone's
/// warnings; anyone else reads their own and their groups' (a request without a uid means
/// the caller's; the groups are always the caller's own).
fn authorize_mgs(header: &RequestHeader, op: MgsRequest) -> Result<MgsRequest, WeftError> {
    let caller = header.identity.uid;
    let perm = |what: &str| Err(WeftError::new(ErrorCode::Perm, format!("only root {what}")));
    match op {
        MgsRequest::DecaySet(_) | MgsRequest::DecayRemove(_) if caller != 0 => perm("changes decay policies"),
        MgsRequest::PoolNew(_)
        | MgsRequest::PoolAdd(_)
        | MgsRequest::PoolRemove(_)
        | MgsRequest::PoolDestroy(_)
        | MgsRequest::PoolSet(_)
            if caller != 0 =>
        {
            perm("changes pools")
        }
        MgsRequest::Nodemap(_) if caller != 0 => perm("changes nodemaps"),
        MgsRequest::QosCapacity(_) if caller != 0 => perm("sets the OSTs' capacities"),
        // A reservation is its maker's: the uid is the caller's, whatever was sent.
        MgsRequest::QosReserve(r) => Ok(MgsRequest::QosReserve(mgs::QosReserve { uid: caller, ..r })),
        MgsRequest::QosCancel(c) => Ok(MgsRequest::QosCancel(mgs::QosCancel { uid: caller, ..c })),
        MgsRequest::RemoveTarget(_) if caller != 0 => perm("takes targets out of the map"),
        MgsRequest::MoveTarget(_) | MgsRequest::ClaimTarget(_) | MgsRequest::HandOver(_) if caller != 0 => {
            perm("moves targets between servers")
        }
        MgsRequest::DecayWarnings(w) => {
            if caller != 0 && (w.all || w.uid.is_some_and(|u| u != caller)) {
                return perm("reads other users' warnings");
            }
            let uid = w.uid.unwrap_or(caller);
            let gids = if uid == caller {
                std::iter::once(header.identity.gid).chain(header.identity.groups.iter().copied()).collect()
            } else {
                Vec::new()
            };
            Ok(MgsRequest::DecayWarnings(mgs::DecayWarnings { uid: Some(uid), gids, all: w.all }))
        }
        op => Ok(op),
    }
}

fn not_here(what: String) -> (Reply, Bytes) {
    (Err(WeftError::new(ErrorCode::NotFound, format!("this server does not serve {what}"))), Bytes::new())
}

impl Router {
    /// A failover OST this process does not serve now (no lease for it, or another server
    /// has it): the answer that sends the client to the map.
    fn fenced(&self, ost: u32) -> Option<WeftError> {
        self.failover.as_ref().and_then(|f| f.check(ost).err())
    }

    /// Who serves object target `ost`: the MDT's data-on-MDT store or the OSS.
    fn object_service(&self, ost: u32) -> Option<&Arc<Oss>> {
        match weft_proto::layout::dom_mdt(ost) {
            Some(_) => self.dom.as_ref(),
            None => self.oss.as_ref(),
        }
    }
}

impl Handler for Router {
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        run: Run,
        body: RequestBody,
        bulk: Bytes,
    ) -> BoxFuture<'a, (Reply, Bytes)> {
        Box::pin(async move {
            let mapped = match self.identities.map(ctx.peer.ip(), &ctx.header, body) {
                Ok(m) => m,
                Err(e) => return (Err(e), Bytes::new()),
            };
            let (header, body, policy) = (&*mapped.header, mapped.body, mapped.policy);
            match body {
                RequestBody::Ping => (Ok(ReplyBody::Pong), Bytes::new()),
                RequestBody::Mgs(op) => match &self.mgs {
                    Some(mgs) => match authorize_mgs(&ctx.header, op) {
                        Ok(op) => {
                            let mut answer = mgs.handle(op).await;
                            if let (Err(e), Some(group)) = (&mut answer, &self.mgs_group) {
                                *e = crate::replicated_mgs::moved(e.clone(), group);
                            }
                            (answer.map(ReplyBody::Mgs), Bytes::new())
                        }
                        Err(e) => (Err(e), Bytes::new()),
                    },
                    None => not_here("the management service".into()),
                },
                RequestBody::Mdt { mdt, op } => match (self.mds.get(), self.mdt_index) {
                    (Some(mds), Some(i)) if i == mdt => {
                        let fileset = policy.as_ref().and_then(|p| p.fileset());
                        let op = match fileset {
                            None => op,
                            Some(path) => match self.identities.filesets.root_of(&mds, path).await {
                                Ok(top) => match crate::fileset::gate(&mds, top, op) {
                                    Ok(op) => op,
                                    Err(e) => return (Err(e), Bytes::new()),
                                },
                                Err(e) => return (Err(e), Bytes::new()),
                            },
                        };
                        let fid2path = matches!(op, MdtRequest::Fid2Path(_));
                        let acl = matches!(&op, MdtRequest::GetXattr(g) if crate::nodemap::is_acl(&g.name));
                        let mut answer = mds.handle(header, op, run).await;
                        if let (Ok(reply), Some(policy)) = (&mut answer, &policy) {
                            policy.map_reply(reply, acl);
                            if let (Some(path), true) = (fileset, fid2path) {
                                crate::fileset::path_in_fileset(path, reply);
                            }
                        }
                        (answer.map(ReplyBody::Mdt), Bytes::new())
                    }
                    (None, Some(i)) if i == mdt && self.replicated => {
                        (Err(crate::replicated::not_serving(mdt)), Bytes::new())
                    }
                    _ => not_here(format!("MDT{mdt:04x}")),
                },
                RequestBody::Ost { ost, op } => match (self.fenced(ost), self.object_service(ost)) {
                    (Some(e), _) => (Err(e), Bytes::new()),
                    (None, Some(oss)) => {
                        if let OstRequest::Getattr(ost::Getattr { fid }) = &op {
                            // The size of an object: writers elsewhere put out their queued
                            // writes first.
                            if let Some(ns) = self.locks.namespace(LockTarget::Ost(ost)) {
                                ns.glimpse(ctx.header.client_id, *fid).await;
                            }
                        }
                        let (reply, bulk) = oss.handle(ost, op, bulk, run).await;
                        (reply.map(ReplyBody::Ost), bulk)
                    }
                    (None, None) => not_here(format!("OST{ost:04x}")),
                },
                RequestBody::Param(op) => (self.params.handle(&ctx.header, op).map(ReplyBody::Param), Bytes::new()),
                RequestBody::Ldlm { target: LockTarget::Mdt(mdt), .. }
                    if self.replicated && self.mds.get().is_none_or(|m| m.check_lease().is_err()) =>
                {
                    (Err(crate::replicated::not_serving(mdt)), Bytes::new())
                }
                RequestBody::Ldlm { target, op } => {
                    if let Some(e) = match target {
                        LockTarget::Ost(ost) => self.fenced(ost),
                        LockTarget::Mdt(_) => None,
                    } {
                        return (Err(e), Bytes::new());
                    }
                    if let (LockTarget::Mdt(_), Some(path)) = (target, policy.as_ref().and_then(|p| p.fileset())) {
                        // No MDS here to tell inside from outside: refused, not let through.
                        let Some(mds) = self.mds.get() else {
                            return (Err(crate::replicated::not_serving(0)), Bytes::new());
                        };
                        let top = self.identities.filesets.root_of(&mds, path).await;
                        if let Err(e) = top.and_then(|top| crate::fileset::gate_lock(&mds, top, &op)) {
                            return (Err(e), Bytes::new());
                        }
                    }
                    (self.locks.handle(header, target, op).await.map(ReplyBody::Ldlm), Bytes::new())
                }
                RequestBody::Raft { op: RaftRequest::AddMember(_) | RaftRequest::RemoveMember(_), .. }
                    if ctx.header.identity.uid != 0 =>
                {
                    (Err(WeftError::new(ErrorCode::Perm, "only root adds or removes replicas")), Bytes::new())
                }
                RequestBody::Raft { group, op } => {
                    match self.mdt_group.iter().chain(&self.mgs_group).find(|g| g.group() == group) {
                        Some(g) => (g.handle(op).await.map(ReplyBody::Raft), Bytes::new()),
                        None => not_here(format!("the replicated group {group}")),
                    }
                }
            }
        })
    }
}
