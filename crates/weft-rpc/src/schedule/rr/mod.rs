//! The round robin policies of Lustre's NRS:
//!
//! * **crrn**, client round robin: when the service is busy, each client (a mount, by its
//!   client id) gets `quantum` requests in turn (Lustre's `nrs_crrn_quantum`, 16), so a
//!   client with a few requests is not stuck behind one that sent thousands;
//! * **orr**, object round robin: object reads (and/or writes, `nrs_orr_supported`) are
//!   queued per object and ordered by offset, and objects take turns of `quantum` requests
//!   (Lustre's `nrs_orr_quantum`, 256), so each object's I/O reaches the disk in order.
//!   Other requests of the service go as FIFO lets them.
//!
//! "Busy" is a bound on the requests the policy lets run at once (`nrs_crrn_running_max`,
//! `nrs_orr_running_max`; Lustre's is its service threads): below it a request starts as it
//! arrives, as under FIFO; past it, it waits in its queue, without a thread, and (held) an
//! in-process caller's thread is let go meanwhile. A request that ends gives its slot to
//! the next in turn at once, on its own thread: no dispatcher task. Once let go, a request
//! follows FIFO's plan (inline or offloaded, an OST's write turn).
//!
//! [`core`] holds the decisions, as pure logic.

pub mod core;

use self::core::RoundRobin;
use super::fifo::Fifo;
use super::policy::{Admission, Policy, RequestInfo};
use crate::limits::{CRRN_QUANTUM_DEFAULT, ORR_QUANTUM_DEFAULT, RR_RUNNING_MAX_DEFAULT};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;
use weft_proto::msg::{OstRequest, RequestBody};
use weft_proto::Fid;

/// Which round robin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Over clients.
    Crrn,
    /// Over objects, by offset within each.
    Orr,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Crrn => "crrn",
            Kind::Orr => "orr",
        }
    }
}

/// The object requests ORR orders (`nrs_orr_supported`, Lustre's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supported {
    Reads,
    Writes,
    ReadsAndWrites,
}

impl Supported {
    pub const ALL: [Supported; 3] = [Supported::Reads, Supported::Writes, Supported::ReadsAndWrites];

    pub fn name(self) -> &'static str {
        match self {
            Supported::Reads => "reads",
            Supported::Writes => "writes",
            Supported::ReadsAndWrites => "reads_and_writes",
        }
    }

    pub fn parse(text: &str) -> Result<Supported, String> {
        Supported::ALL.into_iter().find(|s| s.name() == text.trim()).ok_or_else(|| {
            let names: Vec<&str> = Supported::ALL.iter().map(|s| s.name()).collect();
            format!("'{text}': one of {}", names.join(", "))
        })
    }
}

/// What a request waits in: its client, or its object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Client(u64),
    Object(u32, Fid),
}

/// A round robin policy of one service.
pub struct RrPolicy {
    kind: Kind,
    shared: Arc<Shared>,
}

struct Shared {
    core: Mutex<RoundRobin<Key, oneshot::Sender<()>>>,
    fifo: Fifo,
    /// ORR's [`Supported`], as its index in [`Supported::ALL`].
    supported: AtomicU8,
}

impl Shared {
    fn core(&self) -> MutexGuard<'_, RoundRobin<Key, oneshot::Sender<()>>> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets the next waiting requests go while slots are free.
    fn start_next(&self) {
        let mut core = self.core();
        while let Some(waiter) = core.start_next() {
            if waiter.send(()).is_ok() {
                return;
            }
            // Its request was given up (a closed connection): no slot used.
            core.finished();
        }
    }
}

/// Held by a running request's grant: its slot goes to the next in turn when it ends.
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.core().finished();
        self.0.start_next();
    }
}

impl RrPolicy {
    pub fn new(kind: Kind) -> RrPolicy {
        let quantum = match kind {
            Kind::Crrn => CRRN_QUANTUM_DEFAULT,
            Kind::Orr => ORR_QUANTUM_DEFAULT,
        };
        RrPolicy {
            kind,
            shared: Arc::new(Shared {
                core: Mutex::new(RoundRobin::new(quantum, RR_RUNNING_MAX_DEFAULT)),
                fifo: Fifo::default(),
                supported: AtomicU8::new(0),
            }),
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn quantum(&self) -> u32 {
        self.shared.core().quantum()
    }

    pub fn set_quantum(&self, quantum: u32) {
        self.shared.core().set_quantum(quantum);
    }

    pub fn running_max(&self) -> usize {
        self.shared.core().running_max()
    }

    pub fn set_running_max(&self, running_max: usize) {
        self.shared.core().set_running_max(running_max);
        // A raised bound frees slots for who waits.
        self.shared.start_next();
    }

    pub fn supported(&self) -> Supported {
        Supported::ALL[usize::from(self.shared.supported.load(Ordering::Relaxed))]
    }

    pub fn set_supported(&self, supported: Supported) {
        let index = Supported::ALL.iter().position(|s| *s == supported).unwrap_or(0);
        self.shared.supported.store(index as u8, Ordering::Relaxed);
    }

    pub fn queued(&self) -> usize {
        self.shared.core().queued()
    }

    pub fn running(&self) -> usize {
        self.shared.core().running()
    }

    /// The queue `request` waits in, and its place there; None when this policy leaves it
    /// to FIFO (ORR: requests other than the object I/O it orders).
    fn key(&self, request: &RequestInfo<'_>) -> Option<(Key, u64)> {
        match self.kind {
            Kind::Crrn => Some((Key::Client(request.client_id()), 0)),
            Kind::Orr => {
                let RequestBody::Ost { ost, op } = request.body else { return None };
                let (fid, offset, read) = match op {
                    OstRequest::Read(r) => (r.fid, r.offset, true),
                    OstRequest::Write(w) => (w.fid, w.offset, false),
                    _ => return None,
                };
                let ordered = match self.supported() {
                    Supported::Reads => read,
                    Supported::Writes => !read,
                    Supported::ReadsAndWrites => true,
                };
                ordered.then_some((Key::Object(*ost, fid), offset))
            }
        }
    }
}

impl Drop for RrPolicy {
    /// Switched away from: every waiting request goes on.
    fn drop(&mut self) {
        let waiting = self.shared.core().take_waiting();
        for waiter in waiting {
            let _ = waiter.send(());
        }
    }
}

impl Policy for RrPolicy {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn admit(&self, request: &RequestInfo<'_>) -> Admission {
        let plan = self.shared.fifo.plan(request);
        let Some((key, order)) = self.key(request) else { return plan.admit(()) };
        // The waiter is made only for a request that waits.
        let mut rx = None;
        let starts = self.shared.core().arrive_with(&key, order, || {
            let (tx, r) = oneshot::channel();
            rx = Some(r);
            tx
        });
        if starts {
            return plan.admit(Running(self.shared.clone()));
        }
        let rx = rx.expect("made for a request that waits");
        // Sent when its turn comes (or dropped when the policy is switched away from).
        plan.admit_after(rx, Running(self.shared.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Origin, RequestContext, LOCAL_PEER};
    use crate::schedule::Grant;
    use weft_proto::msg::{ost, RequestHeader, Service};

    fn read(client: u64, fid: Fid, offset: u64) -> (RequestContext, RequestBody) {
        let header = RequestHeader { client_id: client, ..RequestHeader::default() };
        let ctx =
            RequestContext { header, peer: LOCAL_PEER, opcode: "ost_read", origin: Origin::Remote, connection: None };
        (ctx, RequestBody::Ost { ost: 0, op: OstRequest::Read(ost::Read { fid, offset, len: 4096 }) })
    }

    fn admit(p: &RrPolicy, r: &(RequestContext, RequestBody)) -> Admission {
        p.admit(&RequestInfo { service: Service::OstIo, ctx: &r.0, body: &r.1, bulk_bytes: 0 })
    }

    /// Admits each request in turn; returns the order in which they start as each started
    /// one ends at once.
    async fn order(p: &RrPolicy, requests: &[(RequestContext, RequestBody)]) -> Vec<usize> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut first: Vec<(usize, Grant)> = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            match admit(p, r) {
                Admission::Now(g) => first.push((i, g)),
                Admission::Later { grant, held } => {
                    assert!(held, "a waiting request lets an in-process caller's thread go");
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let g = grant.await;
                        let _ = tx.send((i, g));
                    });
                }
            }
        }
        tokio::task::yield_now().await;
        let mut started: Vec<usize> = first.iter().map(|(i, _)| *i).collect();
        drop(first);
        while started.len() < requests.len() {
            let (i, g) = rx.recv().await.unwrap();
            started.push(i);
            drop(g);
        }
        started
    }

    #[tokio::test]
    async fn crrn_gives_each_client_its_turn_when_the_service_is_busy() {
        let p = RrPolicy::new(Kind::Crrn);
        p.set_running_max(1);
        p.set_quantum(2);
        let fid = Fid::new(0x100000000, 1, 0);
        // Client 1 sends six, client 2 then two.
        let requests: Vec<_> = [1, 1, 1, 1, 1, 1, 2, 2].iter().map(|&c| read(c, fid, 0)).collect();
        let order = order(&p, &requests).await;
        assert_eq!(order, vec![0, 1, 2, 6, 7, 3, 4, 5], "client 2 after client 1's quantum, not after all of it");
        assert_eq!((p.queued(), p.running()), (0, 0));
    }

    #[tokio::test]
    async fn orr_orders_an_objects_reads_by_offset_and_leaves_the_rest_to_fifo() {
        let p = RrPolicy::new(Kind::Orr);
        p.set_running_max(1);
        let fid = Fid::new(0x100000000, 1, 0);
        let offsets = [0, 40, 10, 30, 20];
        let requests: Vec<_> = offsets.iter().map(|&o| read(1, fid, o << 12)).collect();
        let order = order(&p, &requests).await;
        assert_eq!(order, vec![0, 2, 4, 3, 1], "the first at once, the rest by offset");
        // Writes are not ordered by default (Lustre's `reads`): they start as FIFO lets them.
        let (ctx, _) = read(1, fid, 0);
        let write = RequestBody::Ost {
            ost: 0,
            op: OstRequest::Write(ost::Write { fid, offset: 0, sync: true, owner: None, extents: Vec::new() }),
        };
        let busy = admit(&p, &read(1, fid, 0));
        assert!(matches!(busy, Admission::Now(_)));
        let w = p.admit(&RequestInfo { service: Service::OstIo, ctx: &ctx, body: &write, bulk_bytes: 4096 });
        assert!(matches!(w, Admission::Now(_)), "a write goes past ORR's bound");
        p.set_supported(Supported::ReadsAndWrites);
        let w = p.admit(&RequestInfo { service: Service::OstIo, ctx: &ctx, body: &write, bulk_bytes: 4096 });
        assert!(matches!(w, Admission::Later { .. }), "ordered now, and the only slot is taken");
        drop(busy);
    }

    #[tokio::test]
    async fn switching_away_lets_the_waiting_requests_go() {
        let p = RrPolicy::new(Kind::Crrn);
        p.set_running_max(1);
        let fid = Fid::new(0x100000000, 1, 0);
        let running = admit(&p, &read(1, fid, 0));
        let Admission::Later { grant, .. } = admit(&p, &read(2, fid, 0)) else { panic!("the slot is taken") };
        let waiting = tokio::spawn(grant);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(p);
        let _grant = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.unwrap().unwrap();
        drop(running);
    }
}
