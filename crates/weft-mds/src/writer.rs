//! The writer: group commit of mutations, the reply cache, and the writes of the background
//! tasks. One committer at a time: the writer thread, or a caller committing inline (see
//! [`Queue`]).
//!
//! The committer takes up to COMMIT_BATCH_OPS_MAX queued jobs and applies them, in order, to
//! one copy of the committed state (store.rs: in memory over the last checkpoint). It
//! appends the batch's changes to the journal as one record (after which they survive
//! kill -9), makes the new state the read view, then answers each caller. Each op checks
//! everything before it writes (see `ops`), so an op that fails with a POSIX error leaves
//! nothing in the shared batch. An op that fails with a storage error (EIO) may have written
//! half: then the batch is dropped, the open handles it changed are reverted, that op is
//! answered with its error and the rest of the batch is applied again.
//!
//! A batch carrying a checkpoint then writes everything in memory into redb in one durable
//! transaction, recording the journal's last record in it, and empties the journal.

use crate::limits::{COMMIT_BATCH_OPS_MAX, COMMIT_BATCH_WEIGHT_MAX, INLINE_BATCHES_MAX};
use crate::objects::Reservation;
use crate::open_files::Undo;
use crate::ops::OpCtx;
use crate::replica::Log;
use crate::schema;
use crate::store::{self, WriteTables};
use crate::Core;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use tokio::sync::oneshot;
use weft_proto::msg::hsm::ActionStatus;
use weft_proto::msg::{MdtReply, MdtRequest, RequestHeader, Run};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

// Requests dominate the queue and are moved once into it: boxing them would only add an
// allocation per mutation.
#[allow(clippy::large_enum_variant)]
pub enum Job {
    Request {
        header: RequestHeader,
        req: MdtRequest,
        /// Objects taken from the precreate pools before the batch (Create, SetStripe).
        reservation: Option<Reservation>,
        /// Done instead of `req`'s own op: a coordinator's part of a change over several
        /// MDTs (dne.rs), answered and cached as `req`'s answer.
        apply: Option<Apply>,
        reply: oneshot::Sender<WeftResult<MdtReply>>,
    },
    Internal {
        op: InternalOp,
        done: oneshot::Sender<WeftResult<u64>>,
    },
}

/// A change a batch makes for a request in place of the request's op (see `Job::Request`).
pub type Apply = std::sync::Arc<dyn Fn(&mut OpCtx<'_>) -> WeftResult<MdtReply> + Send + Sync>;

/// Writes of the background tasks.
#[derive(Debug)]
pub enum InternalOp {
    /// The OST created objects up to `created_oid`.
    PersistCreated { ost: u32, created_oid: u32 },
    /// The orphan cleanup left the OST's objects up to `last_oid` alone: none of them is
    /// ever handed out (recorded, so that the next start does not take them for orphans).
    SkipPast { ost: u32, last_oid: u32 },
    /// The OSTs confirmed these destroys.
    DestroyDone(Vec<(u32, Fid)>),
    /// Remove reply-cache entries stored before this unix time.
    PruneReplies { before_secs: u64 },
    /// Remove a batch of the changelog records every reader cleared; answers how many.
    PurgeChangelog,
    /// The HSM coordinator's sweep: running actions of dead copytools or without progress
    /// to hand out again (if still running under that copytool), ended ones to forget.
    HsmSweep { requeue: Vec<(u64, String)>, forget: Vec<u64> },
    /// `hsm_control=purge`: every waiting and running action canceled.
    HsmCancelAll,
    /// A replicated MDT's new leader, once its recovery window is over: destroys the
    /// orphan inodes no client replayed an open of (a batch of them; answers how many).
    DestroyOrphans,
    /// Records clients as holding this MDT's locks, or forgets them; `complete`: the
    /// record now names every such client (clients.rs).
    LockClients { add: Vec<u64>, remove: Vec<u64>, complete: bool },
    /// The quota master found `kind` `id`'s blocks over its soft limit (`end`: when its grace
    /// ends) or back under it (None).
    QuotaBlockGrace { kind: weft_proto::msg::quota::QuotaKind, id: u32, end: Option<u64> },
    /// Write the state in memory into redb durably (fsync) and empty the journal; see
    /// journal.rs and store.rs.
    Checkpoint,
    /// Write a row as it is, bypassing every encoding (tests inject corrupt records).
    #[cfg(test)]
    PutRaw { table: u8, key: Vec<u8>, value: Vec<u8> },
}

enum Outcome {
    Reply(WeftResult<MdtReply>),
    Internal(WeftResult<u64>),
}

/// Jobs waiting to be committed, and who commits them.
///
/// A job is committed either by the writer thread or by its caller, when the server's
/// scheduler let it run inline ([`Run::Inline`]: weft-rpc's FIFO policy does for every
/// mutation), the caller is a thread of its own (a FUSE thread under `weft up`, blocked on
/// the answer anyway) and nobody is committing: that saves two thread switches per
/// mutation, the writer's wakeup and the caller's, which on a small machine cost more than
/// the commit. Callers that are tasks of the async runtime never commit (a commit blocks; a
/// checkpoint syncs): they queue and wake the writer. Either way, whoever commits takes
/// everything queued, so concurrent mutations still share one batch and one journal record
/// (group commit).
///
/// Every submitter waits for its own answer, so the queue holds at most one job per request
/// in flight: no bound is needed beyond the servers' per-connection limits.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<QueueInner>,
}

struct QueueInner {
    core: Arc<Core>,
    state: Mutex<QueueState>,
    /// Wakes the writer thread: a job came that its submitter does not commit, or closing.
    wake: Condvar,
    /// Held while committing, by the writer thread or an inline caller.
    commit: Mutex<()>,
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<Job>,
    closed: bool,
}

impl Queue {
    /// The queue of `core`'s MDT and its writer thread.
    pub fn start(core: Arc<Core>) -> WeftResult<(Queue, std::thread::JoinHandle<()>)> {
        let name = format!("mdt{}-writer", core.mdt_index);
        let queue = Queue {
            inner: Arc::new(QueueInner {
                core,
                state: Mutex::new(QueueState::default()),
                wake: Condvar::new(),
                commit: Mutex::new(()),
            }),
        };
        let writer = queue.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || writer.run())
            .map_err(|e| WeftError::io(format!("cannot start the MDT writer thread: {e}")))?;
        Ok((queue, thread))
    }

    /// Queues `job`, committing it at once on this thread when `run` and the thread allow
    /// (see [`Queue`]). The answer goes to the job's channel. Fails once the queue is closed.
    pub fn submit(&self, job: Job, run: Run) -> WeftResult<()> {
        let q = &self.inner;
        {
            let mut st = q.state.lock().unwrap_or_else(|p| p.into_inner());
            if st.closed {
                return Err(WeftError::new(ErrorCode::Again, "the MDT writer stopped"));
            }
            st.jobs.push_back(job);
        }
        // A thread inside a runtime task must not block on a commit, whatever `run` says.
        if run == Run::Inline && tokio::task::try_id().is_none() {
            if let Ok(_committing) = q.commit.try_lock() {
                // Whoever queued behind us and found us committing woke the writer for what
                // we leave.
                self.commit_queued(INLINE_BATCHES_MAX);
                return Ok(());
            }
        }
        q.wake.notify_one();
        Ok(())
    }

    /// After the jobs queued before it are committed, the writer thread ends.
    pub fn close(&self) {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.inner.wake.notify_all();
    }

    /// Commits up to `batches` batches of what is queued; the caller holds `commit`.
    fn commit_queued(&self, batches: usize) {
        for _ in 0..batches {
            let jobs: Vec<Job> = {
                let mut st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
                let n = batch_len(&st.jobs);
                st.jobs.drain(..n).collect()
            };
            if jobs.is_empty() {
                return;
            }
            commit_batch(&self.inner.core, jobs);
        }
    }

    /// The writer thread.
    fn run(&self) {
        let q = &self.inner;
        loop {
            {
                let mut st = q.state.lock().unwrap_or_else(|p| p.into_inner());
                while st.jobs.is_empty() && !st.closed {
                    st = q.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                if st.jobs.is_empty() {
                    break; // closed and done
                }
            }
            let _committing = q.commit.lock().unwrap_or_else(|p| p.into_inner());
            self.commit_queued(usize::MAX);
        }
        tracing::debug!("MDT writer thread stopped");
    }
}

/// How many of the queued jobs one commit takes: at most COMMIT_BATCH_OPS_MAX, and at most
/// COMMIT_BATCH_WEIGHT_MAX ops of write-back batches (at least one job).
fn batch_len(jobs: &VecDeque<Job>) -> usize {
    let mut weight = 0;
    let mut n = 0;
    for job in jobs.iter().take(COMMIT_BATCH_OPS_MAX) {
        weight += match job {
            Job::Request { req: MdtRequest::Batch(b), .. } => b.ops.len().max(1),
            _ => 1,
        };
        if n > 0 && weight > COMMIT_BATCH_WEIGHT_MAX {
            break;
        }
        n += 1;
    }
    n
}

fn commit_batch(core: &Core, mut jobs: Vec<Job>) {
    loop {
        match try_batch(core, &jobs) {
            Ok((outcomes, queued_destroys)) => {
                let n = jobs.len() as u64;
                core.stats.commits.fetch_add(1, Ordering::Relaxed);
                core.stats.batch_ops_max.fetch_max(n, Ordering::Relaxed);
                for (job, outcome) in jobs.into_iter().zip(outcomes) {
                    answer(job, outcome);
                }
                if queued_destroys {
                    core.destroy_wake.notify_one();
                }
                return;
            }
            Err(BatchError::Op(i, e)) => {
                tracing::warn!(error = %e, "a mutation failed with a storage error; retrying the rest of its batch");
                fail(jobs.remove(i), e);
                if jobs.is_empty() {
                    return;
                }
            }
            Err(BatchError::Whole(e)) => {
                tracing::error!(error = %e, "an MDT batch failed");
                for job in jobs {
                    fail(job, e.clone());
                }
                return;
            }
        }
    }
}

fn answer(job: Job, outcome: Outcome) {
    match (job, outcome) {
        (Job::Request { reply, .. }, Outcome::Reply(r)) => {
            let _ = reply.send(r);
        }
        (Job::Internal { done, .. }, Outcome::Internal(r)) => {
            let _ = done.send(r);
        }
        _ => unreachable!("outcomes are built in job order"),
    }
}

fn fail(job: Job, e: WeftError) {
    match job {
        Job::Request { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Job::Internal { done, .. } => {
            let _ = done.send(Err(e));
        }
    }
}

enum BatchError {
    /// Job `i` failed with a storage error: drop it, redo the rest.
    Op(usize, WeftError),
    /// The batch itself failed (its journal record could not be written): every job fails.
    Whole(WeftError),
}

/// Applies and commits one batch: the outcome of each job, and whether objects were queued
/// for destruction.
fn try_batch(core: &Core, jobs: &[Job]) -> Result<(Vec<Outcome>, bool), BatchError> {
    let mut undo: Vec<Undo> = Vec::new();
    let mut outcomes = Vec::with_capacity(jobs.len());
    let mut mutations = 0u64;
    let mut hits = 0u64;
    let mut checkpoint = None;
    let mut t = WriteTables::over((*core.read_view()).clone());
    let applied = (|| -> Result<(), BatchError> {
        let now = core.clock.now();
        let now_secs = now.sec.max(0) as u64;
        for (i, job) in jobs.iter().enumerate() {
            match job {
                Job::Request { header, req, reservation, apply, .. } => {
                    let cacheable = header.request_id != 0;
                    // The batch sees its own replies: a resend queued behind its original.
                    let cached =
                        if cacheable { t.cached_reply(header).map_err(|e| BatchError::Op(i, e))? } else { None };
                    let (reply, used) = match cached {
                        Some(r) => {
                            hits += 1;
                            (r, false)
                        }
                        None => {
                            let mut ctx = OpCtx {
                                core,
                                t: &mut t,
                                who: &header.identity,
                                jobid: &header.jobid,
                                client_id: header.client_id,
                                now,
                                undo: &mut undo,
                                reservation: reservation.as_ref(),
                                reservation_used: false,
                            };
                            let r = match apply {
                                Some(apply) => apply(&mut ctx),
                                None => crate::ops::execute(&mut ctx, req),
                            };
                            let used = ctx.reservation_used && r.is_ok();
                            if let Err(e) = &r {
                                if e.code == ErrorCode::Io {
                                    return Err(BatchError::Op(i, e.clone()));
                                }
                            }
                            mutations += 1;
                            if cacheable {
                                t.put_reply(header, now_secs, &r).map_err(|e| BatchError::Op(i, e))?;
                            }
                            (r, used)
                        }
                    };
                    if let (Some(res), false) = (reservation, used) {
                        release_unused(&mut t, res).map_err(|e| BatchError::Op(i, e))?;
                    }
                    outcomes.push(Outcome::Reply(reply));
                }
                Job::Internal { op: InternalOp::Checkpoint, .. } => {
                    // After the batch's other jobs, which it then holds too.
                    checkpoint = Some(i);
                    outcomes.push(Outcome::Internal(Ok(0)));
                }
                Job::Internal { op, .. } => {
                    let r = apply_internal(core, &mut t, op).map_err(|e| BatchError::Op(i, e))?;
                    outcomes.push(Outcome::Internal(Ok(r)));
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = applied {
        core.open_files().revert(undo);
        return Err(e);
    }
    let changes = std::mem::take(&mut t.changes);
    let mut journal = core.journal.lock().unwrap_or_else(|p| p.into_inner());
    if !changes.is_empty() {
        // Before anyone is answered and before reads can see the batch: the journal record
        // is what makes it survive a crash until the next checkpoint.
        if let Err(e) = journal.append(&changes) {
            core.open_files().revert(undo);
            return Err(BatchError::Whole(e));
        }
        core.publish(t.into_view());
    }
    if let Some(i) = checkpoint {
        if let Err(e) = checkpoint_now(core, &mut journal) {
            // Nothing is lost: the state in memory and the journal stay as they were.
            outcomes[i] = Outcome::Internal(Err(e));
        }
    }
    drop(journal);
    core.stats.mutations.fetch_add(mutations, Ordering::Relaxed);
    core.stats.reply_cache_hits.fetch_add(hits, Ordering::Relaxed);
    let queued_destroys = changes.iter().any(|c| c.table == schema::TABLE_DESTROY_QUEUE && c.value.is_some());
    Ok((outcomes, queued_destroys))
}

/// Writes the committed state in memory into the store in one durable commit with the
/// journal's bookkeeping, makes the store's new state the base of an empty overlay, and
/// empties the journal (replica.rs, [`Log::checkpoint`]). The caller holds the log, so no
/// batch commits meanwhile.
fn checkpoint_now(core: &Core, log: &mut Log) -> WeftResult<()> {
    let view = core.read_view();
    let started = std::time::Instant::now();
    let kv = &*core.storage.kv;
    // A failure once committed leaves the old view, which reads the same rows.
    let publish = || {
        core.publish(store::Tables::at_checkpoint(kv)?);
        Ok(())
    };
    if log.checkpoint(kv, &view, publish)? {
        tracing::debug!(rows = view.overlay().rows(), us = started.elapsed().as_micros() as u64, "MDT checkpoint");
    }
    Ok(())
}

/// Objects reserved for an op that did not use them (it failed, or opened an existing file):
/// they exist on the OSTs, so they are destroyed rather than forgotten.
fn release_unused(t: &mut WriteTables, res: &Reservation) -> WeftResult<()> {
    for obj in res.objects() {
        t.persist_next_oid(obj.ost, obj.fid.oid.saturating_add(1))?;
        t.queue_destroy(obj.ost, obj.fid)?;
    }
    Ok(())
}

fn apply_internal(core: &Core, t: &mut WriteTables, op: &InternalOp) -> WeftResult<u64> {
    match op {
        InternalOp::PersistCreated { ost, created_oid } => {
            t.persist_created_oid(*ost, *created_oid)?;
            Ok(0)
        }
        InternalOp::SkipPast { ost, last_oid } => {
            t.persist_next_oid(*ost, last_oid.saturating_add(1))?;
            t.persist_created_oid(*ost, *last_oid)?;
            Ok(0)
        }
        InternalOp::QuotaBlockGrace { kind, id, end } => {
            let mut rec = t.quota_record(*kind, *id)?.unwrap_or_default();
            rec.block_grace_end = *end;
            t.put_quota_record(*kind, *id, &rec)?;
            Ok(0)
        }
        InternalOp::DestroyDone(done) => {
            for (ost, fid) in done {
                t.unqueue_destroy(*ost, *fid)?;
            }
            Ok(done.len() as u64)
        }
        InternalOp::PruneReplies { before_secs } => {
            Ok(t.prune_replies(*before_secs, crate::limits::REPLY_CACHE_PRUNE_ENTRIES_MAX)? as u64)
        }
        InternalOp::PurgeChangelog => {
            // Inside the writer, after every batch before it: the readers as they are now
            // (a deregister leaves the flag to this, so no record is missed if it fails).
            core.changelog.set_on(!t.changelog_users()?.is_empty());
            let (upto, _) = crate::changelog::purge_point(t)?;
            Ok(t.purge_changelog(upto, crate::limits::CHANGELOG_PURGE_BATCH_RECORDS)? as u64)
        }
        InternalOp::HsmSweep { requeue, forget } => {
            let now = core.clock.now();
            let mut n = 0;
            for (cookie, agent) in requeue {
                let Some(mut a) = t.hsm_action(*cookie)? else { continue };
                if a.status == ActionStatus::Started && a.agent == *agent {
                    a.status = ActionStatus::Waiting;
                    a.agent.clear();
                    a.changed = now;
                    t.put_hsm_action(&a)?;
                    core.coordinator.add_waiting(a.cookie, a.archive_id);
                    n += 1;
                }
            }
            for cookie in forget {
                if let Some(a) = t.hsm_action(*cookie)?.filter(|a| a.status.is_final()) {
                    t.remove_hsm_action(&a)?;
                    n += 1;
                }
            }
            Ok(n)
        }
        InternalOp::HsmCancelAll => {
            let now = core.clock.now();
            let mut n = 0;
            for a in t.all_hsm_actions()?.into_iter().filter(|a| !a.status.is_final()) {
                crate::ops::hsm::cancel(core, t, a, now)?;
                n += 1;
            }
            Ok(n)
        }
        InternalOp::DestroyOrphans => {
            let of = core.open_files();
            crate::startup::destroy_orphans_in(t, |fid| of.counts(fid).opens > 0)
        }
        InternalOp::LockClients { add, remove, complete } => {
            if *complete {
                t.mark_lock_clients_complete()?;
            }
            let now = core.clock.now().sec.max(0) as u64;
            for &client in add {
                t.add_lock_client(client, now)?;
            }
            for &client in remove {
                t.remove_lock_client(client)?;
            }
            Ok((add.len() + remove.len()) as u64)
        }
        InternalOp::Checkpoint => unreachable!("a checkpoint is taken after its batch"),
        #[cfg(test)]
        InternalOp::PutRaw { table, key, value } => {
            t.put_raw(*table, key, value)?;
            Ok(0)
        }
    }
}
