//! The token bucket filter policy (Lustre's NRS TBF): requests are sorted into classes by
//! the fields the policy names (`tbf jobid`, `tbf uid+gid`, plain `tbf` for all of them),
//! each class is held to the rate of the first rule that matches it, and what a rule's rate
//! means is each matching class's rate, not the set's (as in Lustre).
//!
//! [`rule`] is the language (types, expressions, commands), [`core`] the decisions over an
//! injected clock; this module runs them on the server: a request its class may start now
//! goes on at once, any other waits for a grant that a dispatcher task sends when its turn
//! comes. Once let go, a request follows FIFO's plan (inline or offloaded, an OST's write
//! turn). A held request occupies nothing but its place in the queue: no thread of the
//! server, and (in-process) not the mount's thread either (see [`crate::held`]).

pub mod core;
pub mod rule;

use self::core::{ClassView, Next, Options, Tbf};
use self::rule::{Command, Facts, TbfType};
use super::fifo::Fifo;
use super::policy::{Admission, Policy, RequestInfo};
use crate::context::LOCAL_PEER;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::{oneshot, Notify};

/// A TBF policy of one service.
pub struct TbfPolicy {
    name: String,
    ty: TbfType,
    shared: Arc<Shared>,
}

/// What the policy, its dispatcher task and its running requests share.
struct Shared {
    core: Mutex<Tbf<oneshot::Sender<()>>>,
    wake: Notify,
    fifo: Fifo,
    epoch: Instant,
    /// Set when the policy is dropped (switched away from): the dispatcher lets every
    /// queued request go and ends.
    retired: AtomicBool,
    /// Told when a global rule's demand should be reported at once (see
    /// [`Tbf::take_report_wanted`]); the server's reporting task waits on it.
    report: Arc<Notify>,
}

impl Shared {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn core(&self) -> MutexGuard<'_, Tbf<oneshot::Sender<()>>> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Held by a running request's grant: its running slot comes back when it ends.
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut core = self.0.core();
        core.finished();
        // The dispatcher only has work when requests wait: waking it after every request
        // would cost a task switch each.
        let waiting = core.queued() > 0;
        drop(core);
        if waiting {
            self.0.wake.notify_one();
        }
    }
}

impl TbfPolicy {
    /// A TBF policy classifying by `ty`, with only the default rule; its dispatcher runs on
    /// the current tokio runtime.
    pub fn start(ty: TbfType, options: Options) -> TbfPolicy {
        TbfPolicy::start_reporting(ty, options, Arc::new(Notify::new()))
    }

    /// As [`TbfPolicy::start`], telling `report` when a global rule's demand should be
    /// reported at once.
    pub fn start_reporting(ty: TbfType, options: Options, report: Arc<Notify>) -> TbfPolicy {
        let shared = Arc::new(Shared {
            core: Mutex::new(Tbf::new(ty, options)),
            wake: Notify::new(),
            fifo: Fifo::default(),
            epoch: Instant::now(),
            retired: AtomicBool::new(false),
            report,
        });
        tokio::spawn(dispatch(shared.clone()));
        TbfPolicy { name: ty.to_string(), ty, shared }
    }

    /// Applies a rule command written to `nrs_tbf_rule`.
    pub fn command(&self, text: &str) -> Result<(), String> {
        let mut core = self.shared.core();
        let ty = core.ty();
        core.command(Command::parse(text, &ty)?)?;
        drop(core);
        // A rate may have risen: waiting classes may be due sooner.
        self.shared.wake.notify_one();
        Ok(())
    }

    /// What it classifies by.
    pub fn ty(&self) -> TbfType {
        self.ty
    }

    pub fn listing(&self) -> String {
        self.shared.core().listing()
    }

    pub fn classes(&self) -> Vec<ClassView> {
        self.shared.core().classes()
    }

    pub fn queued(&self) -> usize {
        self.shared.core().queued()
    }

    pub fn running(&self) -> usize {
        self.shared.core().running()
    }

    pub fn options(&self) -> Options {
        self.shared.core().options()
    }

    /// This server's demand on its global rules (see [`Tbf::global_demands`]); empty when it
    /// has none.
    pub fn global_demands(&self) -> Vec<weft_proto::msg::GlobalDemand> {
        let now = self.shared.now();
        self.shared.core().global_demands(now)
    }

    /// Takes this server's shares of its global rules.
    pub fn set_shares(&self, shares: &[weft_proto::msg::GlobalShare]) {
        let now = self.shared.now();
        self.shared.core().set_shares(now, shares);
        // A share may have risen: waiting classes may be due sooner.
        self.shared.wake.notify_one();
    }

    /// Changes the settings under one hold of the scheduler, so that two settings made at
    /// once both land.
    pub fn update_options(&self, change: impl FnOnce(&mut Options)) {
        let mut core = self.shared.core();
        let mut options = core.options();
        change(&mut options);
        core.set_options(options);
        drop(core);
        self.shared.wake.notify_one();
    }
}

impl Drop for TbfPolicy {
    fn drop(&mut self) {
        self.shared.retired.store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}

/// A request's class key under `ty`: its values of the fields `ty` classifies by (the
/// client's address as a NID, in-process requests being this host's; jobid; opcode;
/// identity), the others blank, so only what the class needs is made.
pub fn key_of(request: &RequestInfo<'_>, ty: &TbfType) -> Facts {
    use self::rule::Field;
    let mut key = Facts::default();
    if ty.has(Field::Nid) {
        let ip =
            if request.ctx.peer == LOCAL_PEER { std::net::Ipv4Addr::LOCALHOST.into() } else { request.ctx.peer.ip() };
        key.nid = Facts::nid_of(ip);
    }
    if ty.has(Field::Jobid) {
        key.jobid = request.jobid().to_string();
    }
    if ty.has(Field::Opcode) {
        key.opcode = request.opcode().to_string();
    }
    if ty.has(Field::Uid) {
        key.uid = request.uid();
    }
    if ty.has(Field::Gid) {
        key.gid = request.gid();
    }
    key
}

/// The bytes a request moves: a write's bulk, a read's length.
fn bytes_of(request: &RequestInfo<'_>) -> u64 {
    use weft_proto::msg::{OstRequest, RequestBody};
    match request.body {
        RequestBody::Ost { op: OstRequest::Read(r), .. } => u64::from(r.len),
        _ => request.bulk_bytes,
    }
}

impl Policy for TbfPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn admit(&self, request: &RequestInfo<'_>) -> Admission {
        let plan = self.shared.fifo.plan(request);
        let key = key_of(request, &self.ty);
        let now = self.shared.now();
        // The waiter is made only for a request that waits: no receiver, it starts now.
        let mut rx = None;
        let mut core = self.shared.core();
        core.arrive_keyed(now, &key, bytes_of(request), || {
            let (tx, r) = oneshot::channel();
            rx = Some(r);
            tx
        });
        let Some(rx) = rx else {
            drop(core);
            return plan.admit(Running(self.shared.clone()));
        };
        let report = core.take_report_wanted();
        drop(core);
        if report {
            self.shared.report.notify_one();
        }
        self.shared.wake.notify_one();
        // The dispatcher sends when the class's turn comes (or drops the sender when the
        // policy is switched away from).
        plan.admit_after(rx, Running(self.shared.clone()))
    }
}

/// Lets queued requests go as their classes become due, until the policy is retired and
/// nothing waits.
async fn dispatch(shared: Arc<Shared>) {
    loop {
        let notified = shared.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let next = {
            let mut core = shared.core();
            if shared.retired.load(Ordering::Acquire) {
                drain(&mut core);
                return;
            }
            let mut next;
            loop {
                next = core.next(shared.now());
                match next {
                    Next::Run(tx) => {
                        if tx.send(()).is_err() {
                            // Its request was given up (a closed connection): no slot used.
                            core.finished();
                        }
                    }
                    _ => break,
                }
            }
            next
        };
        match next {
            Next::At(at) => {
                let wait = std::time::Duration::from_nanos(at.saturating_sub(shared.now()));
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = &mut notified => {}
                }
            }
            _ => notified.await,
        }
    }
}

/// Lets every queued request go (the policy was switched away from): none is lost.
fn drain(core: &mut Tbf<oneshot::Sender<()>>) {
    let (ty, options) = (core.ty(), core.options());
    let mut fresh = Tbf::new(ty, options);
    std::mem::swap(core, &mut fresh);
    for waiting in fresh.into_waiting() {
        let _ = waiting.send(());
    }
}
