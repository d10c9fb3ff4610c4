//! FIFO: every request starts as it arrives (Lustre's default and fallback policy). What
//! it decides is how a request runs, and one ordering rule of the object store:
//!
//! * **Buffered writes and punches to one OST take turns.** Concurrent pwrite(2)s of one
//!   object contend for its inode lock and the kernel spins for it (measured: with two 1 MiB
//!   streams an eighth of all CPU went to that spinning). Waiting for a turn here is asleep,
//!   and turns are short: the data only lands in the page cache. A write with a sync, which
//!   waits for the disk, takes no turn.
//! * **Small object I/O runs inline** (reads and writes up to [`crate::limits::INLINE_IO_BYTES_MAX`],
//!   getattr, the local path of an object): it lands in or comes from the page cache in
//!   microseconds, less than the two thread hand-offs of the blocking pool (measured: with
//!   47,008-byte writes most of the server's time went to context switches). A cold small
//!   read may wait on the disk a moment on a runtime thread. Syncs, precreates, destroys,
//!   punches, statfs and large transfers, which can take long, are offloaded.
//! * **Metadata runs inline**: reads answer from memory, and a mutation is committed by its
//!   caller's own thread when that thread may block and nobody else is committing (a FUSE
//!   thread under `weft up`, which waits for the answer anyway: two thread switches saved
//!   per mutation); otherwise the MDT's writer thread commits it (see weft-mds's writer.rs).

use super::policy::{Admission, Grant, Policy, RequestInfo};
use crate::limits::{INLINE_IO_BYTES_MAX, WRITE_TURNS_OSTS_MAX};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use weft_proto::msg::Run;
use weft_proto::msg::{OstRequest, RequestBody, Service};

/// FIFO's name, as `nrs_policies` shows it.
pub const NAME: &str = "fifo";

#[derive(Default)]
pub struct Fifo {
    /// One write turn per OST index written to. The index comes from the request, before
    /// anyone checked that this process serves it: bounded, past the bound a write goes
    /// without a turn (to an OST the process does not serve, it is refused anyway).
    write_turns: Mutex<HashMap<u32, Arc<Semaphore>>>,
}

impl Fifo {
    fn turn(&self, ost: u32) -> Option<Arc<Semaphore>> {
        let mut turns = self.write_turns.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(turn) = turns.get(&ost) {
            return Some(turn.clone());
        }
        if turns.len() >= WRITE_TURNS_OSTS_MAX {
            return None;
        }
        Some(turns.entry(ost).or_insert_with(|| Arc::new(Semaphore::new(1))).clone())
    }

    /// How `request` runs and the write turn it takes first: FIFO's decision, which other
    /// policies follow once they let a request go.
    pub fn plan(&self, request: &RequestInfo<'_>) -> Plan {
        match (request.service, request.body) {
            (Service::OstIo | Service::Ost, RequestBody::Ost { ost, op }) => match object_io(op, request.bulk_bytes) {
                (run, true) => Plan { run, turn: self.turn(*ost) },
                (run, false) => Plan { run, turn: None },
            },
            _ => Plan { run: Run::Inline, turn: None },
        }
    }
}

/// How a request runs, and the OST write turn it must take before it does.
pub struct Plan {
    pub run: Run,
    turn: Option<Arc<Semaphore>>,
}

impl Plan {
    /// Admits the request: now if it needs no turn or its turn is free, else once the turn
    /// is. `also`: what another policy gave out for it, held with the turn.
    pub fn admit(self, also: impl Send + Sync + 'static) -> Admission {
        let Some(turn) = self.turn else { return Admission::Now(Grant::holding(self.run, also)) };
        match turn.clone().try_acquire_owned() {
            Ok(permit) => Admission::Now(Grant::holding(self.run, (permit, also))),
            Err(_) => Admission::Later { grant: Box::pin(turn_then(turn, self.run, also)), held: false },
        }
    }

    /// Admits the request once another policy lets it go: when `go` fires, or its sender is
    /// dropped (the policy switched away from). Held on purpose meanwhile (see
    /// [`Admission::Later`]); then FIFO's plan as for any request.
    pub fn admit_after(self, go: tokio::sync::oneshot::Receiver<()>, also: impl Send + Sync + 'static) -> Admission {
        Admission::Later {
            grant: Box::pin(async move {
                let _ = go.await;
                self.grant(also).await
            }),
            held: true,
        }
    }

    /// The grant once the turn (if any) is free.
    pub async fn grant(self, also: impl Send + Sync + 'static) -> Grant {
        match self.turn {
            None => Grant::holding(self.run, also),
            Some(turn) => turn_then(turn, self.run, also).await,
        }
    }
}

async fn turn_then(turn: Arc<Semaphore>, run: Run, also: impl Send + Sync + 'static) -> Grant {
    match turn.acquire_owned().await {
        Ok(permit) => Grant::holding(run, (permit, also)),
        // Never closed; were it, the write would simply go without a turn.
        Err(_) => Grant::holding(run, also),
    }
}

/// How an object request runs, and whether it takes its OST's write turn.
pub fn object_io(op: &OstRequest, bulk_bytes: u64) -> (Run, bool) {
    let inline = |bytes: u64| if bytes <= INLINE_IO_BYTES_MAX { Run::Inline } else { Run::Offload };
    match op {
        OstRequest::Write(w) if !w.sync => (inline(bulk_bytes), true),
        OstRequest::Write(_) => (Run::Offload, false),
        // A replay writes as a write does (and its replay window serializes it with writes).
        OstRequest::Replay(_) => (inline(bulk_bytes), true),
        OstRequest::Punch(_) | OstRequest::Fallocate(_) => (Run::Offload, true),
        OstRequest::Read(r) => (inline(u64::from(r.len)), false),
        // A file create lands in the page cache too; in-process callers would pay two
        // thread hand-offs for it on every passthrough open.
        OstRequest::Getattr(_) | OstRequest::LocalPath(_) => (Run::Inline, false),
        OstRequest::Sync(_)
        | OstRequest::Commit(_)
        | OstRequest::Destroy(_)
        | OstRequest::Precreate(_)
        | OstRequest::Statfs(_)
        | OstRequest::DestroyOrphans(_)
        | OstRequest::QuotaUsage(_)
        | OstRequest::QuotaUsageAll(_)
        | OstRequest::QuotaGrants(_)
        | OstRequest::SetOwner(_) => (Run::Offload, false),
    }
}

impl Policy for Fifo {
    fn name(&self) -> &str {
        NAME
    }

    fn admit(&self, request: &RequestInfo<'_>) -> Admission {
        self.plan(request).admit(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Origin, RequestContext, LOCAL_PEER};
    use weft_proto::msg::{mdt, ost, RequestHeader};
    use weft_proto::Fid;

    fn ctx() -> RequestContext {
        RequestContext {
            header: RequestHeader::default(),
            peer: LOCAL_PEER,
            opcode: "x",
            origin: Origin::Remote,
            connection: None,
        }
    }

    fn admit(fifo: &Fifo, body: &RequestBody, bulk_bytes: u64) -> Admission {
        let ctx = ctx();
        fifo.admit(&RequestInfo { service: body.service().unwrap(), ctx: &ctx, body, bulk_bytes })
    }

    fn now(a: Admission) -> Grant {
        match a {
            Admission::Now(g) => g,
            Admission::Later { .. } => panic!("held"),
        }
    }

    #[test]
    fn small_io_runs_inline_and_large_or_slow_io_is_offloaded() {
        let fid = Fid::new(0x100000000, 1, 0);
        let small = OstRequest::Write(ost::Write { fid, offset: 0, sync: false, owner: None, extents: Vec::new() });
        assert_eq!(object_io(&small, 47_008), (Run::Inline, true));
        assert_eq!(object_io(&small, 4 << 20), (Run::Offload, true));
        let synced = OstRequest::Write(ost::Write { fid, offset: 0, sync: true, owner: None, extents: Vec::new() });
        assert_eq!(object_io(&synced, 4096), (Run::Offload, false), "a write through to the disk takes no turn");
        assert_eq!(object_io(&OstRequest::Read(ost::Read { fid, offset: 0, len: 4096 }), 0), (Run::Inline, false));
        assert_eq!(object_io(&OstRequest::Read(ost::Read { fid, offset: 0, len: 1 << 20 }), 0), (Run::Offload, false));
        assert_eq!(object_io(&OstRequest::Punch(ost::Punch { fid, size: 0 }), 0), (Run::Offload, true));
        assert_eq!(object_io(&OstRequest::Getattr(ost::Getattr { fid }), 0), (Run::Inline, false));
        assert_eq!(object_io(&OstRequest::Sync(ost::Sync { fid }), 0), (Run::Offload, false));
        let fifo = Fifo::default();
        let mkdir = RequestBody::Mdt {
            mdt: 0,
            op: mdt::Mkdir { parent: Fid::ROOT, name: b"d".to_vec(), mode: 0o755, umask: 0 }.into(),
        };
        assert_eq!(now(admit(&fifo, &mkdir, 0)).run, Run::Inline);
    }

    #[test]
    fn raft_messages_run_inline_at_once_and_no_policy_can_hold_them() {
        let append = RequestBody::Raft {
            group: weft_proto::msg::GroupId::Mdt(0),
            op: weft_proto::msg::raft::AppendEntries { request: vec![1, 2, 3] }.into(),
        };
        assert_eq!(append.service(), Some(Service::Raft));
        assert_eq!(now(admit(&Fifo::default(), &append, 0)).run, Run::Inline);
        let schedulers = super::super::Schedulers::default();
        for policy in ["tbf", "tbf jobid", "crrn", "fifo"] {
            let refused = schedulers.set_policy(Service::Raft, policy).expect_err(policy);
            assert!(refused.contains("raft requests are always served first come, first served"), "{refused}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn writes_to_one_ost_take_turns_and_other_osts_do_not_wait() {
        let fifo = Fifo::default();
        let write = |ost| RequestBody::Ost {
            ost,
            op: OstRequest::Write(ost::Write {
                fid: Fid::new(0x100000000, 1, 0),
                offset: 0,
                sync: false,
                owner: None,
                extents: Vec::new(),
            }),
        };
        let first = now(admit(&fifo, &write(3), 4096));
        assert!(first.holds());
        let Admission::Later { grant, held } = admit(&fifo, &write(3), 4096) else { panic!("no turn was taken") };
        assert!(!held, "a turn is not a policy holding the request back");
        let other = now(admit(&fifo, &write(4), 4096));
        let second = tokio::spawn(grant);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!second.is_finished(), "the second write waits for the first's turn");
        drop(first);
        assert_eq!(second.await.unwrap().run, Run::Inline);
        drop(other);
    }

    #[test]
    fn made_up_ost_indices_cannot_grow_the_turns_without_bound() {
        let fifo = Fifo::default();
        let write = |ost| RequestBody::Ost {
            ost,
            op: OstRequest::Write(ost::Write {
                fid: Fid::new(0x100000000, 1, 0),
                offset: 0,
                sync: false,
                owner: None,
                extents: Vec::new(),
            }),
        };
        for ost in 0..WRITE_TURNS_OSTS_MAX as u32 + 100 {
            drop(now(admit(&fifo, &write(ost), 4096)));
        }
        assert_eq!(fifo.write_turns.lock().unwrap().len(), WRITE_TURNS_OSTS_MAX);
        // Past the bound a write goes without a turn; known OSTs keep theirs.
        assert!(!now(admit(&fifo, &write(u32::MAX), 4096)).holds());
        assert!(now(admit(&fifo, &write(0), 4096)).holds());
    }
}
