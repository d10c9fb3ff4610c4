//! The pipeline every request goes through, read from a connection or made in-process:
//!
//! ```text
//! decode ─▶ authorize ─▶ schedule ─▶ execute ─▶ reply ─▶ account
//! (transport) authorize.rs schedule/  Handler   (transport) account.rs
//! ```
//!
//! The transport ([`crate::server`]) decodes and replies; the stages between are here, the
//! same for every way in. A Ping is answered before any stage: it asks whether the process
//! lives, not a service.
//!
//! Two checks are made twice, as the request arrives and again as it leaves the scheduler
//! (where a policy may have kept it for seconds):
//!
//! * **its connection** (one atomic load, [`RequestContext::connection_closed`]): a request
//!   whose connection closed is not run, answered nor counted. Its sender resends it on a
//!   new connection and that copy is the one that runs; the old copy run late could land on
//!   top of what others did since (a write under a lock granted meanwhile), as Lustre knows
//!   when it drops the requests of an old connection;
//! * **its client's eviction**: a request queued when its client is evicted is answered
//!   `Evicted`, not run.

use crate::account::{Account, Outcome};
use crate::authorize::Authorize;
use crate::context::{Handler, Origin, RequestContext};
use crate::schedule::{Admission, RequestInfo, Schedulers};
use crate::stats::Stats;
use bytes::Bytes;
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use weft_proto::msg::{Reply, ReplyBody, RequestBody, Service};
use weft_proto::{ErrorCode, WeftError};

/// Tells a remote client that its request is held (sends a Held frame). Borrowed from the
/// connection's task: nothing is made for the requests no policy holds.
pub(crate) type HeldNotice<'a> = &'a (dyn Fn() + Send + Sync);

pub struct Pipeline {
    authorize: Authorize,
    schedulers: Arc<Schedulers>,
    /// The execute stage: the services of the process, behind one router.
    handler: Arc<dyn Handler>,
    stats: Arc<Stats>,
    /// Besides `stats`.
    accounts: RwLock<Vec<Arc<dyn Account>>>,
}

impl Pipeline {
    pub(crate) fn new(handler: Arc<dyn Handler>, authorize: Authorize, schedulers: Arc<Schedulers>) -> Pipeline {
        Pipeline {
            authorize,
            schedulers,
            handler,
            stats: Arc::new(Stats::default()),
            accounts: RwLock::new(Vec::new()),
        }
    }

    pub fn schedulers(&self) -> &Schedulers {
        &self.schedulers
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    pub(crate) fn add_account(&self, account: Arc<dyn Account>) {
        self.accounts.write().unwrap_or_else(|p| p.into_inner()).push(account);
    }

    /// Runs one decoded request through the stages; `reply` is the transport's reply stage
    /// and says whether the reply went out. `bulk_ok`: the request's bulk arrived intact.
    /// `held`: tells a remote client that a policy holds its request (see
    /// [`weft_proto::wire::FrameKind::Held`]); in-process callers are told on their thread.
    pub(crate) async fn run<R, F>(
        &self,
        ctx: RequestContext,
        body: RequestBody,
        bulk: Bytes,
        bulk_ok: bool,
        held: Option<HeldNotice<'_>>,
        reply: R,
    ) where
        R: FnOnce(Reply, Bytes) -> F,
        F: Future<Output = bool>,
    {
        if ctx.connection_closed() {
            return;
        }
        let started = Instant::now();
        let bytes_in = bulk.len() as u64;
        let service = body.service();
        let opcode = body.opcode_name();
        let target = body.target();
        // The request itself, only when the request log is on (formatting costs).
        let shown = tracing::enabled!(target: "weft_rpc::request", tracing::Level::TRACE).then(|| format!("{body:?}"));
        let (result, out, waited) = match service {
            None => (Ok(ReplyBody::Pong), Bytes::new(), Duration::ZERO),
            Some(_) if !bulk_ok => {
                let corrupted = WeftError::new(ErrorCode::Checksum, "request data arrived corrupted");
                (Err(corrupted), Bytes::new(), Duration::ZERO)
            }
            Some(service) => match self.answer(&ctx, service, body, bulk, started, held).await {
                Some(answered) => answered,
                // Its connection closed while the scheduler kept it: dropped unanswered.
                None => return,
            },
        };
        let ok = result.is_ok();
        let bytes_out = out.len() as u64;
        let bytes = bytes_in + bytes_out;
        let sent = reply(result, out).await;
        // The one clock reading at the reply: the request's time, and the job statistics' age.
        let at = Instant::now();
        let took = at.saturating_duration_since(started);
        let outcome = Outcome { service, took, waited, ok: ok && sent, bytes, bytes_in, bytes_out, target, at };
        // Every request, when asked for (WEFT_LOG=info,weft_rpc::request=debug): what a client's
        // operation costs in requests, and where each one's time went; at trace level with
        // the request itself.
        tracing::debug!(
            target: "weft_rpc::request",
            op = opcode,
            client = format_args!("{:016x}", ctx.header.client_id),
            took_us = outcome.took.as_micros() as u64,
            waited_us = waited.as_micros() as u64,
            bytes,
            ok,
            request = shown.as_deref().unwrap_or(""),
        );
        Account::record(&*self.stats, &ctx, &outcome);
        for account in self.accounts.read().unwrap_or_else(|p| p.into_inner()).iter() {
            account.record(&ctx, &outcome);
        }
    }

    /// Authorize, schedule, execute (a request whose bulk arrived intact): the answer, its
    /// bulk, and how long the scheduler kept the request; None when its connection closed
    /// before it ran.
    async fn answer(
        &self,
        ctx: &RequestContext,
        service: Service,
        body: RequestBody,
        bulk: Bytes,
        started: Instant,
        held_notice: Option<HeldNotice<'_>>,
    ) -> Option<(Reply, Bytes, Duration)> {
        if let Err(refused) = self.authorize.check(ctx) {
            return Some((Err(refused), Bytes::new(), Duration::ZERO));
        }
        let info = RequestInfo { service, ctx, body: &body, bulk_bytes: bulk.len() as u64 };
        let grant = match self.schedulers.of(service).admit(&info) {
            Admission::Now(grant) => grant,
            Admission::Later { grant, held } => {
                if held {
                    // The caller's thread may let this request go on elsewhere meanwhile.
                    match (ctx.origin, held_notice) {
                        (Origin::InProcess { .. }, _) => crate::held::note_held(),
                        (Origin::Remote, Some(notice)) => notice(),
                        (Origin::Remote, None) => {}
                    }
                }
                let grant = grant.await;
                // Kept by the scheduler: the world may have moved meanwhile.
                if ctx.connection_closed() {
                    return None;
                }
                if let Err(refused) = self.authorize.check(ctx) {
                    return Some((Err(refused), Bytes::new(), started.elapsed()));
                }
                grant
            }
        };
        let waited = started.elapsed();
        let (reply, bulk) = self.handler.handle(ctx, grant.run, body, bulk).await;
        drop(grant);
        Some((reply, bulk, waited))
    }
}
