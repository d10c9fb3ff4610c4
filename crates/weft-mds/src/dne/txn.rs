//! One distributed change as its coordinator runs it: its steps asked of the MDTs, its
//! commit here, its end (see the module above).

use crate::ops::OpCtx;
use crate::writer::{Apply, Job};
use crate::Mds;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use weft_proto::msg::update::{TxnId, Update, UpdateAnswer};
use weft_proto::msg::{mdt, InodeInfo, MdtReply, MdtRequest, RequestHeader, Run};
use weft_proto::{Fid, WeftError, WeftResult};

/// One distributed change as its coordinator runs it.
pub(super) struct Txn<'a> {
    pub(super) mds: &'a Mds,
    pub(super) id: TxnId,
    /// The client's request header: the commit's reply is cached under it.
    pub(super) original: RequestHeader,
    /// What the participants are sent: the client's identity and id, no reply slot.
    pub(super) header: RequestHeader,
    /// The MDTs asked to prepare a step, in order (each once).
    pub(super) asked: Vec<u32>,
    pub(super) steps: u32,
    /// Whether the outcome is known: false while the commit's batch may have committed
    /// without our hearing (the writer stopped), when the participants must ask.
    pub(super) known: bool,
    pub(super) committed: bool,
}

impl<'a> Txn<'a> {
    pub(super) fn begin(mds: &'a Mds, header: &RequestHeader) -> Txn<'a> {
        let seq = mds.core.dne.next_seq.fetch_add(1, Ordering::Relaxed);
        mds.core.dne.running.lock().unwrap_or_else(|p| p.into_inner()).insert(seq);
        let id = TxnId { coordinator: mds.core.mdt_index, start: mds.core.mds_start, seq };
        // The participants act for the client (its identity, its locks) but keep no reply
        // of it: a step's own record makes its resend harmless.
        let original = header.clone();
        // Sent as this server (root; the MDTs' own requests are refused to others), for the
        // client: its lock owner id, its identity in each step.
        let header = RequestHeader {
            request_id: 0,
            reply_slot: 0,
            identity: weft_proto::msg::Identity::root(),
            ..header.clone()
        };
        Txn { mds, id, original, header, asked: Vec::new(), steps: 0, known: true, committed: false }
    }

    /// One request to MDT `mdt` (this one included) on behalf of the change.
    pub(super) async fn call(&self, mdt: u32, req: MdtRequest) -> WeftResult<MdtReply> {
        if mdt == self.mds.core.mdt_index {
            return Box::pin(self.mds.handle(&self.header, req, Run::Offload)).await;
        }
        self.mds.core.targets.mdt(mdt, self.header.clone(), req).await
    }

    /// Has `mdt` prepare `update` as the change's next step.
    pub(super) async fn prepare(&mut self, mdt: u32, update: Update) -> WeftResult<UpdateAnswer> {
        if !self.asked.contains(&mdt) {
            // Before the request: an answer lost on the way still gets the outcome.
            self.asked.push(mdt);
        }
        let step = self.steps;
        self.steps += 1;
        let who = self.original.identity.clone();
        match self.call(mdt, mdt::UpdatePrepare { txn: self.id, step, update, who }.into()).await? {
            MdtReply::Update(answer) => Ok(answer),
            other => Err(WeftError::protocol(format!("a prepared step answered {other:?}"))),
        }
    }

    /// The inode of `fid` from its MDT.
    pub(super) async fn getattr(&self, fid: Fid) -> WeftResult<InodeInfo> {
        match self.call(fid.mdt_index(), mdt::Getattr { fid }.into()).await? {
            MdtReply::Inode(info) => Ok(info),
            other => Err(WeftError::protocol(format!("a getattr answered {other:?}"))),
        }
    }

    /// Makes this MDT's part in one batch with the request's reply and the record of the
    /// commit, which the participants are then told of.
    pub(super) async fn commit(&mut self, req: MdtRequest, run: Run, part: Apply) -> WeftResult<MdtReply> {
        let (id, others) = (self.id, self.asked.clone());
        let apply: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let reply = part(ctx)?;
            ctx.t.put_committed_txn(&id, &others)?;
            Ok(reply)
        });
        // The clients that cached what this MDT changes are called back first.
        let owner = self.original.client_id;
        let held = match self.mds.locks.get() {
            Some(ns) => Some((ns.clone(), crate::change_locks::lock_change(self.mds, ns, owner, &req).await?)),
            None => None,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = Job::Request { header: self.original.clone(), req, reservation: None, apply: Some(apply), reply: tx };
        let submitted = self.mds.queue.submit(job, run);
        let answer = match submitted {
            Ok(()) => rx.await,
            Err(e) => Ok(Err(e)),
        };
        if let Some((ns, held)) = held {
            ns.cancel(owner, &held);
        }
        let Ok(reply) = answer else {
            self.known = false;
            return Err(WeftError::io("the MDT writer stopped before answering"));
        };
        self.committed = reply.is_ok();
        reply
    }

    /// After the outcome: the participants hear it now (a commit's are told by the task
    /// that reads the record, woken here; an abort's are told once, and ask if they miss it).
    pub(super) async fn end(mut self, ok: bool) {
        self.mds.core.dne.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id.seq);
        if self.committed && ok {
            self.mds.core.dne.tell.notify_one();
            return;
        }
        if !self.known {
            return;
        }
        for mdt in std::mem::take(&mut self.asked) {
            if let Err(e) = self.call(mdt, mdt::UpdateResolve { txn: self.id, commit: false }.into()).await {
                tracing::info!(txn = %self.id, mdt, error = %e, "an aborted change's participant will ask for its outcome");
            }
        }
    }
}
