//! The background of distributed changes: a coordinator tells the participants of its
//! commits; a participant asks the outcome of steps whose outcome never came.

use crate::ops::{self, OpCtx};
use crate::writer::{Apply, Job};
use std::sync::Arc;
use weft_proto::msg::update::TxnState;
use weft_proto::msg::{mdt, MdtReply, MdtRequest, RequestHeader, Run};
use weft_proto::{WeftError, WeftResult};

/// The header of this MDS's own requests: root, no client, no reply slot.
fn own_header() -> RequestHeader {
    RequestHeader {
        client_id: 0,
        request_id: 0,
        reply_slot: 0,
        identity: weft_proto::msg::Identity::root(),
        jobid: String::new(),
    }
}

/// A request of this MDS's own (a background task's) to MDT `mdt`, this one included.
async fn own_call(core: &crate::Core, queue: &crate::writer::Queue, mdt: u32, req: MdtRequest) -> WeftResult<MdtReply> {
    let header = own_header();
    if mdt != core.mdt_index {
        return core.targets.mdt(mdt, header, req).await;
    }
    if !req.is_mutation() {
        let t = core.read_view();
        return ops::read(&ops::QueryCtx { core, t: &t, who: &header.identity }, &req);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = Job::Request { header, req: req.clone(), reservation: None, apply: None, reply: tx };
    queue.submit(job, Run::Offload)?;
    let answer = rx.await.map_err(|_| WeftError::io("the MDT writer stopped before answering"))?;
    core.dne.after(&req);
    answer
}

/// The coordinator's side after its commits, and after a start: the participants of each
/// committed change are told until they have all answered, and then its record goes.
pub(crate) async fn tell_task(core: Arc<crate::Core>, queue: crate::writer::Queue) {
    let every = std::time::Duration::from_millis(crate::limits::DNE_RETRY_MS);
    loop {
        let _ = tokio::time::timeout(every, core.dne.tell.notified()).await;
        let rows = match core.read_view().committed_txns(crate::limits::DNE_BATCH_MAX) {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "the committed changes could not be read");
                continue;
            }
        };
        for (txn, mdts) in rows {
            let mut left = Vec::new();
            for mdt in mdts {
                let req = mdt::UpdateResolve { txn, commit: true }.into();
                if let Err(e) = own_call(&core, &queue, mdt, req).await {
                    tracing::debug!(%txn, mdt, error = %e, "a participant of a committed change did not answer; told later");
                    left.push(mdt);
                }
            }
            let apply: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
                ctx.t.put_committed_txn(&txn, &left)?;
                Ok(MdtReply::Empty)
            });
            let (tx, rx) = tokio::sync::oneshot::channel();
            let header = own_header();
            let req = mdt::UpdateResolve { txn, commit: true }.into();
            if queue
                .submit(Job::Request { header, req, reservation: None, apply: Some(apply), reply: tx }, Run::Offload)
                .is_err()
            {
                return;
            }
            let _ = rx.await;
        }
    }
}

/// A participant's side: the changes with steps prepared here a while ago whose outcome
/// never came are asked for, and kept or undone as their coordinator says.
pub(crate) async fn ask_task(core: Arc<crate::Core>, queue: crate::writer::Queue) {
    let every = std::time::Duration::from_millis(crate::limits::DNE_RETRY_MS);
    loop {
        let _ = tokio::time::timeout(every, core.dne.ask.notified()).await;
        let now = core.clock.now().sec.max(0) as u64;
        let before = now.saturating_sub(crate::limits::DNE_ASK_AFTER_S);
        let waiting = match core.read_view().prepared_txns(before, crate::limits::DNE_BATCH_MAX) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "the prepared steps could not be read");
                continue;
            }
        };
        for txn in waiting {
            let state = match own_call(&core, &queue, txn.coordinator, mdt::TxnOutcome { txn }.into()).await {
                Ok(MdtReply::Txn(state)) => state,
                Ok(other) => {
                    tracing::warn!(%txn, "a change's outcome answered {other:?}");
                    continue;
                }
                Err(e) => {
                    tracing::debug!(%txn, error = %e, "a change's coordinator did not say its outcome; asked again later");
                    continue;
                }
            };
            let Some(commit) = outcome_of(state) else { continue };
            tracing::info!(%txn, commit, "a change's outcome, asked of its coordinator");
            if let Err(e) = own_call(&core, &queue, core.mdt_index, mdt::UpdateResolve { txn, commit }.into()).await {
                tracing::warn!(%txn, error = %e, "a change's prepared steps could not be resolved");
            }
        }
    }
}

/// A participant's side: a step prepared a while ago whose outcome never came is asked for.
fn outcome_of(state: TxnState) -> Option<bool> {
    match state {
        TxnState::Committed => Some(true),
        TxnState::Aborted => Some(false),
        TxnState::Running => None,
    }
}

/// What a simulation (or a test) sees of the distributed changes left here, and how it
/// has them resolved now rather than after the tasks' periods.
impl crate::Mds {
    /// The changes with steps prepared here and no outcome yet, and the committed changes
    /// whose participants have not all heard.
    pub fn dne_unresolved(&self) -> WeftResult<(usize, usize)> {
        let t = self.core.read_view();
        let prepared = t.prepared_txns(u64::MAX, usize::MAX)?.len();
        Ok((prepared, t.committed_txns(usize::MAX)?.len()))
    }

    /// Moves this MDS's clock past [`crate::limits::DNE_ASK_AFTER_S`] (every step prepared
    /// so far is old enough to ask about) and wakes the tasks that tell and ask.
    pub fn dne_resolve_now(&self) {
        self.core.clock.advance(std::time::Duration::from_secs(crate::limits::DNE_ASK_AFTER_S + 1));
        self.core.dne.tell.notify_one();
        self.core.dne.ask.notify_one();
    }
}
