//! What every scheduling policy and the pipeline share: a policy's answer for a request
//! ([`Admission`], [`Grant`]), what it sees of the request ([`RequestInfo`]) and the
//! [`Policy`] trait. A leaf: the policies (fifo, rr, tbf) and the schedulers that choose
//! among them (mod.rs) both name it, and it names none of them.

use crate::context::{Origin, RequestContext};
use futures::future::BoxFuture;
use weft_proto::msg::{RequestBody, Run, Service};

/// A policy's leave for one request to run: how, and whatever the policy gave out for it,
/// held until the request has executed.
pub struct Grant {
    pub run: Run,
    held: Option<Box<dyn Send + Sync>>,
}

impl Grant {
    pub fn new(run: Run) -> Grant {
        Grant { run, held: None }
    }

    /// A grant that keeps `resource` (a semaphore permit, a token) until it is dropped.
    pub fn holding<R: Send + Sync + 'static>(run: Run, resource: R) -> Grant {
        // A resource of no size and no drop (`()`) holds nothing.
        if std::mem::size_of::<R>() == 0 && !std::mem::needs_drop::<R>() {
            return Grant::new(run);
        }
        Grant { run, held: Some(Box::new(resource)) }
    }

    /// Whether the grant holds something given out by the policy.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant").field("run", &self.run).field("holds", &self.holds()).finish()
    }
}

/// A policy's answer for one request.
pub enum Admission {
    /// Start now.
    Now(Grant),
    /// Start once the grant comes. `held`: the policy keeps the request back on purpose (a
    /// rate, a delay), not merely until a short turn is free, so an in-process caller's
    /// thread is let go meanwhile.
    Later { grant: BoxFuture<'static, Grant>, held: bool },
}

/// What a policy sees of a request.
pub struct RequestInfo<'a> {
    pub service: Service,
    pub ctx: &'a RequestContext,
    pub body: &'a RequestBody,
    /// Bytes of the request's bulk (a write's data).
    pub bulk_bytes: u64,
}

impl RequestInfo<'_> {
    pub fn jobid(&self) -> &str {
        &self.ctx.header.jobid
    }
    pub fn uid(&self) -> u32 {
        self.ctx.header.identity.uid
    }
    pub fn gid(&self) -> u32 {
        self.ctx.header.identity.gid
    }
    pub fn client_id(&self) -> u64 {
        self.ctx.header.client_id
    }
    pub fn opcode(&self) -> &'static str {
        self.ctx.opcode
    }
    pub fn origin(&self) -> Origin {
        self.ctx.origin
    }
}

/// Decides when requests of one service start and how they run; see the module
/// documentation.
pub trait Policy: Send + Sync + 'static {
    /// As `get-param ...nrs_policies` shows it (`fifo`, `tbf jobid`).
    fn name(&self) -> &str;
    fn admit(&self, request: &RequestInfo<'_>) -> Admission;
}
