//! The account stage of the server pipeline: what was learned of each request once it was
//! answered goes to every [`Account`] of the server. [`Stats`] (per opcode, always there) is
//! one; job statistics and a metrics endpoint are others, added with
//! [`Server::add_account`](crate::Server::add_account).

use crate::context::RequestContext;
use std::time::Duration;
use weft_proto::msg::{Service, TargetKind};

/// One answered request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// None for a Ping, which no service runs.
    pub service: Option<Service>,
    /// From the start of the pipeline to the reply sent.
    pub took: Duration,
    /// Of that, how long the scheduler kept it before it ran.
    pub waited: Duration,
    /// Executed without error and answered.
    pub ok: bool,
    /// Bulk bytes in and out.
    pub bytes: u64,
    /// Of those, the request's (a write's data) and the reply's (a read's).
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// The MDT or OST the request was for.
    pub target: Option<(TargetKind, u32)>,
    /// When the reply was sent: the pipeline's one clock reading at the reply, which
    /// accounts use instead of reading the clock again.
    pub at: std::time::Instant,
}

pub trait Account: Send + Sync + 'static {
    fn record(&self, ctx: &RequestContext, outcome: &Outcome);
}
