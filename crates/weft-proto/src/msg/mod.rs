//! Every request and reply of every role. One enum per role; a request names its target
//! (the MGS, an MDT index, an OST index) so one server process can host many targets.
//!
//! * [`ops`]: operations typed to their answers, and the macros that build each service's
//!   op structs, request enum and reply enum from its op list;
//! * [`mgs`], [`mdt`], [`ost`]: each service's op list and replies ([`crate::lock`] has the
//!   lock manager's); [`param`]: every server process's parameter tree; [`raft`]: the
//!   messages between the replicas of a replicated group;
//! * [`types`]: the data metadata requests and replies carry.
//!
//! Bulk data (read and write payloads) travels beside the message in the frame, not inside
//! it, so it is never copied through the encoder; see [`crate::wire`].
//!
//! Compatibility: these types are encoded with postcard, in field order. Add new variants at
//! the end of an enum and bump [`crate::wire::PROTOCOL_VERSION`] when a change is not
//! backwards compatible; docs/PROTOCOL.md records each version.

#[macro_use]
pub mod ops;
pub mod changelog;
pub mod hsm;
pub mod mdt;
pub mod mgs;
pub mod ost;
pub mod param;
pub mod qos;
pub mod quota;
pub mod raft;
pub mod service;
pub mod target;
pub mod types;
pub mod update;
pub mod wbc;

pub use mdt::{MdtReply, MdtRequest};
pub use mgs::{
    target_name, ClusterMap, DecayAction, DecayActions, DecayPolicy, GlobalDemand, GlobalShare, GlobalShares,
    HistoryReply, LeaseGrant, MgsReply, MgsRequest, ParamRecord, TargetInfo, TargetKind, TargetState, UsageTotal,
};
pub use ost::{OstReply, OstRequest};
pub use param::{ParamReply, ParamRequest};
pub use raft::{GroupId, RaftReply, RaftRequest};
pub use service::Service;
pub use types::*;

use crate::error::WeftError;
use crate::lock::{LdlmReply, LdlmRequest, LockTarget};
use ops::OpKind;
use serde::{Deserialize, Serialize};

/// Who a request is for: the calling process's identity and the job it belongs to
/// (Lustre's jobid), carried on every request for permission checks, scheduling rules and
/// job statistics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    pub identity: Identity,
    pub jobid: String,
    /// The calling process's umask, for the creates it asks for (the MDS applies it unless
    /// the directory's default ACL replaces it); 0 applies none.
    pub umask: u32,
}

impl Caller {
    /// Root, no job: servers talking to servers, tools, a mount's own housekeeping.
    pub fn root() -> Caller {
        Caller::default()
    }

    pub fn new(identity: Identity, jobid: impl Into<String>) -> Caller {
        Caller { identity, jobid: jobid.into(), umask: 0 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RequestHeader {
    /// Random per client instance (mount); with `reply_slot` the key of the reply cache.
    pub client_id: u64,
    /// Increases per client; a resend after reconnect carries the same id. 0: not
    /// resendable, never cached.
    pub request_id: u64,
    /// The client's reply-cache slot for this request (Lustre's multi-slot last_rcvd). A
    /// client holds a slot from sending a resendable mutation until it has the answer or has
    /// given up, so no two such requests in flight share one: the MDT keeps one reply per
    /// (client, slot), and a request older than its slot's last one is a stale resend.
    pub reply_slot: u32,
    pub identity: Identity,
    /// The job this request is for (Lustre's jobid), for scheduling and statistics.
    pub jobid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub header: RequestHeader,
    pub body: RequestBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RequestBody {
    /// Answered by every server process: liveness and round-trip measurement.
    Ping,
    Mgs(MgsRequest),
    Mdt {
        mdt: u32,
        op: MdtRequest,
    },
    Ost {
        ost: u32,
        op: OstRequest,
    },
    /// The lock manager of a target (see [`crate::lock`]).
    Ldlm {
        target: LockTarget,
        op: LdlmRequest,
    },
    /// The parameter tree of the server process (`weft get-param`, `set-param`).
    Param(ParamRequest),
    /// A message between the replicas of a replicated group (see [`raft`]).
    Raft {
        group: GroupId,
        op: RaftRequest,
    },
}

/// Every reply is a result: an error crosses the wire as a [`WeftError`].
pub type Reply = Result<ReplyBody, WeftError>;

crate::define_replies! {
    ReplyBody {
        Pong = (),
        Mgs(MgsReply),
        Mdt(MdtReply),
        Ost(OstReply),
        Ldlm(LdlmReply),
        Param(ParamReply),
        Raft(RaftReply),
    }
}

/// How a server executes a request once its scheduler admitted it (the scheduler decides;
/// see weft-rpc's schedule module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// By whoever polls it: the connection's task, or an in-process caller's own thread
    /// (which commits an MDT batch itself when it may block). For work of microseconds,
    /// where a hand-off to another thread would cost more than the work.
    Inline,
    /// Handed to a thread that may block: the blocking pool for object I/O that waits on a
    /// disk, the MDT writer thread for a commit.
    Offload,
}

impl RequestBody {
    /// Whether the request only reads: executing it twice, or abandoning it halfway,
    /// changes nothing.
    pub fn is_read_only(&self) -> bool {
        self.kind() == OpKind::Read
    }

    pub fn kind(&self) -> OpKind {
        match self {
            RequestBody::Ping => OpKind::Read,
            RequestBody::Mgs(op) => op.kind(),
            RequestBody::Mdt { op, .. } => op.kind(),
            RequestBody::Ost { op, .. } => op.kind(),
            RequestBody::Ldlm { op, .. } => op.kind(),
            RequestBody::Param(op) => op.kind(),
            RequestBody::Raft { op, .. } => op.kind(),
        }
    }

    /// The service that runs it; None for a Ping, which every server process answers
    /// before any stage.
    pub fn service(&self) -> Option<Service> {
        Some(match self {
            RequestBody::Ping => return None,
            RequestBody::Mgs(_) => Service::Mgs,
            RequestBody::Mdt { .. } => Service::Mdt,
            RequestBody::Ost { op, .. } => match op {
                OstRequest::Read(_)
                | OstRequest::Write(_)
                | OstRequest::Punch(_)
                | OstRequest::Sync(_)
                | OstRequest::Fallocate(_)
                | OstRequest::Replay(_)
                | OstRequest::Commit(_) => Service::OstIo,
                OstRequest::Getattr(_)
                | OstRequest::Precreate(_)
                | OstRequest::Destroy(_)
                | OstRequest::Statfs(_)
                | OstRequest::LocalPath(_)
                | OstRequest::DestroyOrphans(_)
                | OstRequest::QuotaUsage(_)
                | OstRequest::QuotaUsageAll(_)
                | OstRequest::QuotaGrants(_)
                | OstRequest::SetOwner(_) => Service::Ost,
            },
            RequestBody::Ldlm { .. } => Service::Ldlm,
            RequestBody::Param(_) => Service::Param,
            RequestBody::Raft { .. } => Service::Raft,
        })
    }

    /// The target the request is for: an MDT or an OST (statistics per target); None for
    /// the MGS, locks, parameters and pings.
    pub fn target(&self) -> Option<(TargetKind, u32)> {
        match self {
            RequestBody::Mdt { mdt, .. } => Some((TargetKind::Mdt, *mdt)),
            RequestBody::Ost { ost, .. } => Some((TargetKind::Ost, *ost)),
            _ => None,
        }
    }

    /// Short operation name for statistics and logs, as Lustre names them where it can.
    pub fn opcode_name(&self) -> &'static str {
        match self {
            RequestBody::Ping => "ping",
            RequestBody::Mgs(op) => op.opcode_name(),
            RequestBody::Mdt { op, .. } => op.opcode_name(),
            RequestBody::Ost { op, .. } => op.opcode_name(),
            RequestBody::Ldlm { op, .. } => op.opcode_name(),
            RequestBody::Param(op) => op.opcode_name(),
            RequestBody::Raft { op, .. } => op.opcode_name(),
        }
    }
}

/// A service's request enum: how its requests are addressed.
pub trait ServiceRequest: Sized {
    /// The body of a request to target `index` of the service (the MGS has one, so it
    /// ignores the index).
    fn into_body(self, index: u32) -> RequestBody;
}

impl ServiceRequest for MgsRequest {
    fn into_body(self, _index: u32) -> RequestBody {
        RequestBody::Mgs(self)
    }
}

impl ServiceRequest for MdtRequest {
    fn into_body(self, index: u32) -> RequestBody {
        RequestBody::Mdt { mdt: index, op: self }
    }
}

impl ServiceRequest for ParamRequest {
    fn into_body(self, _index: u32) -> RequestBody {
        RequestBody::Param(self)
    }
}

impl ServiceRequest for OstRequest {
    fn into_body(self, index: u32) -> RequestBody {
        RequestBody::Ost { ost: index, op: self }
    }
}
