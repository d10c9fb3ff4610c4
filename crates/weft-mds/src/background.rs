//! Background tasks: precreate refill, the destroy queue, reply-cache pruning. They talk to
//! the OSTs through [`crate::ObjectTargets`] and write through the write queue (writer.rs).

use crate::limits::*;
use crate::writer::{InternalOp, Job, Queue};
use crate::Core;
use futures::StreamExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use weft_proto::msg::Run;
use weft_proto::{Fid, WeftError, WeftResult};

/// The background tasks; `checkpoint_interval` None: no checkpoint but those asked for.
pub fn spawn_all(
    core: Arc<Core>,
    queue: Queue,
    checkpoint_interval: Option<Duration>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(refill_task(core.clone(), queue.clone())),
        tokio::spawn(destroy_task(core.clone(), queue.clone())),
        tokio::spawn(prune_task(core.clone(), queue.clone())),
        tokio::spawn(changelog_task(core.clone(), queue.clone())),
        tokio::spawn(hsm_task(core.clone(), queue.clone())),
        tokio::spawn(qos_task(core.clone())),
    ];
    if let Some(interval) = checkpoint_interval {
        tasks.push(tokio::spawn(checkpoint_task(core, queue, interval)));
    }
    tasks
}

/// A replicated MDT's new leader: once clients had their recovery window to replay their
/// opens, destroys the orphan inodes none of them holds open (as a single MDT does at
/// start), a batch at a time.
pub(crate) async fn orphans_after_replay(core: Arc<Core>, queue: Queue) {
    loop {
        let until = *core.replay_opens_until.lock().unwrap_or_else(|p| p.into_inner());
        let left = until.and_then(|u| u.checked_duration_since(core.clock.instant()));
        match left {
            // Looked at again every while: the window may end sooner than it was to.
            Some(left) if !left.is_zero() => tokio::time::sleep(left.min(Duration::from_millis(100))).await,
            _ => break,
        }
    }
    loop {
        match internal(&queue, InternalOp::DestroyOrphans).await {
            Ok(0) => return,
            Ok(n) => tracing::info!(orphans = n, "destroyed orphan inodes no client replayed an open of"),
            Err(e) => {
                tracing::warn!(error = %e, "destroying orphan inodes after the recovery window failed; retrying");
                tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS_MAX)).await;
            }
        }
    }
}

pub(crate) async fn internal(queue: &Queue, op: InternalOp) -> WeftResult<u64> {
    let (done, rx) = oneshot::channel();
    queue.submit(Job::Internal { op, done }, Run::Offload)?;
    rx.await.map_err(|_| WeftError::io("the MDT writer stopped before answering"))?
}

fn backoff_ms(failures: u32) -> u64 {
    RETRY_BACKOFF_MS_MIN.saturating_mul(1u64 << failures.min(16)).min(RETRY_BACKOFF_MS_MAX)
}

/// One call of the refill task to an OST.
enum Refill {
    /// First, once per start: destroy the objects past the last id handed out (None: no
    /// record of the OST).
    Orphans {
        ost: u32,
        above_oid: Option<u32>,
    },
    Precreate {
        ost: u32,
        start: u32,
        count: u32,
    },
}

/// What a refill call achieved.
enum Refilled {
    Orphans(weft_proto::msg::ost::Orphans),
    Created(u32),
}

impl Refill {
    fn ost(&self) -> u32 {
        match self {
            Refill::Orphans { ost, .. } | Refill::Precreate { ost, .. } => *ost,
        }
    }
}

/// Keeps each up OST's pool above half a batch of precreated objects, after destroying the
/// OST's orphans (see [`crate::objects::OstPool::orphans_destroyed`]).
async fn refill_task(core: Arc<Core>, queue: Queue) {
    let batch = core.precreate_batch;
    loop {
        let wake = core.objects.refill_wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        let due: Vec<Refill> = {
            let mut st = core.objects.lock();
            let now = Instant::now();
            let up: Vec<u32> = st.up_osts.iter().copied().chain(st.dom).collect();
            let mut due = Vec::new();
            for ost in up {
                // A drained OST (max_create_count 0) gets no new objects: no precreates (the
                // ids its pool holds stay unused).
                let max_create = st.max_create_count(ost);
                let Some(pool) = st.ost_pools.get_mut(&ost).filter(|_| max_create > 0) else { continue };
                if pool.refilling || pool.available() >= core.objects.refill_below {
                    continue;
                }
                if pool.retry_at.is_some_and(|t| t > now) {
                    continue;
                }
                if !pool.orphans_destroyed {
                    pool.refilling = true;
                    due.push(Refill::Orphans { ost, above_oid: pool.orphans_above() });
                    continue;
                }
                let start = pool.refill_start();
                let count = batch.min(max_create).min(u32::MAX - start + 1);
                if start == u32::MAX || count == 0 {
                    continue; // The OST's object ids are exhausted.
                }
                pool.refilling = true;
                due.push(Refill::Precreate { ost, start, count });
            }
            due
        };
        let calls = due.into_iter().map(|refill| {
            let core = core.clone();
            let queue = queue.clone();
            async move {
                let ost = refill.ost();
                let r = match refill {
                    Refill::Orphans { above_oid, .. } => {
                        match core.targets.destroy_orphans(ost, core.mdt_index, above_oid, core.mds_start).await {
                            Ok(answer) if !answer.destroyed => {
                                let skip = InternalOp::SkipPast { ost, last_oid: answer.last_oid };
                                internal(&queue, skip).await.map(|_| Refilled::Orphans(answer))
                            }
                            Ok(answer) => Ok(Refilled::Orphans(answer)),
                            Err(e) => Err(e),
                        }
                    }
                    Refill::Precreate { start, count, .. } => match core.targets.precreate(ost, start, count).await {
                        Ok(last) if last >= start => {
                            internal(&queue, InternalOp::PersistCreated { ost, created_oid: last })
                                .await
                                .map(|_| Refilled::Created(last))
                        }
                        Ok(last) => {
                            Err(WeftError::io(format!("OST {ost} precreated nothing (last oid {last} < {start})")))
                        }
                        Err(e) => Err(e),
                    },
                };
                let mut st = core.objects.lock();
                if let Some(pool) = st.ost_pools.get_mut(&ost) {
                    pool.refilling = false;
                    match r {
                        Ok(done) => {
                            match done {
                                Refilled::Created(last) => pool.created_oid = pool.created_oid.max(last),
                                // After a cleanup the ids past the handed-out ones stay
                                // precreated: their objects are gone, and an object never
                                // written reads empty.
                                Refilled::Orphans(answer) => pool.orphans_cleaned(answer),
                            }
                            pool.failures = 0;
                            pool.retry_at = None;
                        }
                        Err(e) => {
                            pool.failures += 1;
                            let ms = backoff_ms(pool.failures);
                            pool.retry_at = Some(Instant::now() + Duration::from_millis(ms));
                            let what = if pool.orphans_destroyed { "precreate" } else { "orphan cleanup" };
                            tracing::warn!(ost, error = %e, retry_ms = ms, "{what} failed");
                        }
                    }
                }
                drop(st);
                core.objects.refilled.notify_waiters();
            }
        });
        let calls: Vec<_> = calls.collect();
        let any = !calls.is_empty();
        futures::stream::iter(calls).buffer_unordered(REFILL_CALLS_IN_FLIGHT_MAX).for_each(|()| async {}).await;
        if any {
            continue; // Check again at once: a pool may still be low.
        }
        let _ = tokio::time::timeout(Duration::from_millis(PRECREATE_CHECK_INTERVAL_MS), wake).await;
    }
}

/// Every [`QOS_STATFS_INTERVAL_MS`], asks the next [`QOS_STATFS_PER_ROUND_MAX`] OSTs in turn for their space,
/// which placement weighs once the OSTs are out of balance (`qos.rs`, as Lustre's OSP
/// devices keep each OST's statfs). The work per second is bounded, whatever the OST count.
async fn qos_task(core: Arc<Core>) {
    // The first round soon after the start, once the map lists the OSTs.
    let mut pause = Duration::from_millis(QOS_STATFS_INTERVAL_MS / 5);
    loop {
        tokio::time::sleep(pause).await;
        pause = Duration::from_millis(QOS_STATFS_INTERVAL_MS);
        let batch: Vec<u32> = {
            let mut st = core.objects.lock();
            let n = st.up_osts.len();
            // One OST (or none) leaves placement no choice to weigh.
            if n < 2 {
                continue;
            }
            let start = st.statfs_cursor % n;
            let take = n.min(QOS_STATFS_PER_ROUND_MAX);
            st.statfs_cursor = (start + take) % n;
            (0..take).map(|i| st.up_osts[(start + i) % n]).collect()
        };
        let asked = batch.into_iter().map(|ost| {
            let call = core.targets.statfs(ost);
            async move { (ost, call.await) }
        });
        let answers = futures::future::join_all(asked).await;
        let mut st = core.objects.lock();
        for (ost, answer) in answers {
            match answer {
                Ok(s) => {
                    st.free.insert(ost, s.bavail.saturating_mul(u64::from(s.bsize)));
                }
                Err(e) => tracing::debug!(ost, error = %e, "statfs for placement failed"),
            }
        }
        let up = st.up_osts.clone();
        st.free.retain(|o, _| up.binary_search(o).is_ok());
    }
}

fn pending_destroys(core: &Core) -> WeftResult<Vec<(u32, Fid)>> {
    // Entries of OSTs that are down wait without blocking the others.
    core.read_view().destroy_entries(DESTROY_BATCH_OBJECTS_MAX, |ost| core.objects.is_up(ost))
}

/// Destroys queued objects on their OSTs; entries leave the queue once an OST confirmed.
async fn destroy_task(core: Arc<Core>, queue: Queue) {
    let mut failures = 0u32;
    loop {
        let wake = core.destroy_wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        let entries = match pending_destroys(&core) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the destroy queue");
                Vec::new()
            }
        };
        if entries.is_empty() {
            core.destroy_idle.notify_waiters();
            let _ = tokio::time::timeout(Duration::from_millis(PRECREATE_CHECK_INTERVAL_MS), wake).await;
            continue;
        }
        let results =
            futures::future::join_all(entries.iter().map(|(ost, fid)| core.targets.destroy(*ost, *fid))).await;
        let mut done = Vec::new();
        let mut failed = 0;
        for ((ost, fid), r) in entries.into_iter().zip(results) {
            match r {
                Ok(()) => done.push((ost, fid)),
                Err(e) => {
                    failed += 1;
                    tracing::debug!(ost, %fid, error = %e, "destroy failed; will retry");
                }
            }
        }
        if !done.is_empty() {
            let n = done.len() as u64;
            match internal(&queue, InternalOp::DestroyDone(done)).await {
                Ok(_) => {
                    core.stats.objects_destroyed.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => tracing::warn!(error = %e, "cannot record finished destroys"),
            }
        }
        if failed > 0 {
            failures += 1;
            let ms = backoff_ms(failures);
            tracing::warn!(failed, retry_ms = ms, "some object destroys failed");
            tokio::time::sleep(Duration::from_millis(ms)).await;
        } else {
            failures = 0;
        }
    }
}

async fn prune_task(core: Arc<Core>, queue: Queue) {
    loop {
        tokio::time::sleep(Duration::from_millis(REPLY_CACHE_PRUNE_INTERVAL_MS)).await;
        let before = (core.clock.now().sec.max(0) as u64).saturating_sub(REPLY_CACHE_AGE_SECS_MAX);
        match internal(&queue, InternalOp::PruneReplies { before_secs: before }).await {
            Ok(n) if n > 0 => tracing::debug!(pruned = n, "reply cache pruned"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "reply cache pruning failed"),
        }
    }
}

/// Removes the changelog records every reader cleared, a batch at a time, when a reader
/// cleared or left; warns (at most every CHANGELOG_IDLE_WARN_INTERVAL_S) of a reader that
/// holds too many.
async fn changelog_task(core: Arc<Core>, queue: Queue) {
    loop {
        tokio::time::sleep(Duration::from_millis(CHANGELOG_PURGE_INTERVAL_MS)).await;
        // A reader that stopped clearing: looked for every tick (a dead reader clears nothing).
        let view = core.read_view();
        match crate::changelog::purge_point(&view) {
            Ok((_, Some((reader, held)))) => {
                let now = core.clock.now().sec.max(0) as u64;
                let last = core.changelog.warned_at.load(Ordering::Relaxed);
                if now.saturating_sub(last) >= CHANGELOG_IDLE_WARN_INTERVAL_S {
                    core.changelog.warned_at.store(now, Ordering::Relaxed);
                    tracing::warn!(
                        reader = %reader,
                        held,
                        "a changelog reader holds {held} records it has not cleared: they stay on the MDT until it \
                         clears them or is deregistered (weft changelog-deregister)"
                    );
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "changelog: cannot read its readers"),
        }
        if !core.changelog.take_purge() {
            continue;
        }
        loop {
            match internal(&queue, InternalOp::PurgeChangelog).await {
                Ok(n) if n as usize == CHANGELOG_PURGE_BATCH_RECORDS => continue,
                Ok(n) => {
                    if n > 0 {
                        tracing::debug!(removed = n, "changelog records every reader cleared removed");
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "changelog: removing cleared records failed");
                    core.changelog.want_purge();
                    break;
                }
            }
        }
    }
}

/// The HSM coordinator's sweep (see coordinator.rs): every HSM_SWEEP_INTERVAL_MS, the
/// waiting list rebuilt from the table, the running actions of dead copytools and those
/// without progress for `active_request_timeout` handed out again, ended actions older
/// than `grace_delay` forgotten. Nothing while no file of the MDT has an HSM state.
async fn hsm_task(core: Arc<Core>, queue: Queue) {
    loop {
        tokio::time::sleep(Duration::from_millis(HSM_SWEEP_INTERVAL_MS)).await;
        if !core.hsm_used.load(Ordering::Relaxed) {
            continue;
        }
        if let Err(e) = hsm_sweep(&core, &queue).await {
            tracing::warn!(error = %e, "HSM coordinator: sweep failed");
        }
    }
}

pub(crate) async fn hsm_sweep(core: &Core, queue: &Queue) -> WeftResult<u64> {
    use weft_proto::msg::hsm::ActionStatus;
    let view = core.read_view();
    let now = core.clock.now().sec;
    let instant = core.clock.instant();
    let timeout = core.coordinator.active_request_timeout().as_secs().min(HSM_ACTIVE_REQUEST_TIMEOUT_S_MAX) as i64;
    let keep = core.coordinator.grace_delay().as_secs().min(HSM_ACTIVE_REQUEST_TIMEOUT_S_MAX) as i64;
    core.coordinator.forget_gone_agents(instant);
    let (mut requeue, mut forget, mut waiting) = (Vec::new(), Vec::new(), std::collections::BTreeMap::new());
    let actions = view.all_hsm_actions()?;
    let newest = actions.last().map_or(0, |a| a.cookie);
    for a in actions {
        {
            if a.status == ActionStatus::Waiting {
                waiting.insert(a.cookie, a.archive_id);
            }
            let quiet = now.saturating_sub(a.changed.sec);
            let c = &core.coordinator;
            let lost = || {
                c.agent_dead(&a.agent, instant)
                    || quiet >= timeout
                    || c.agent_dropped(&a.agent, a.cookie, a.changed.sec)
            };
            if a.status == ActionStatus::Started && lost() {
                tracing::info!(
                    cookie = a.cookie, fid = %a.fid, agent = %a.agent, action = a.action.name(),
                    "HSM action handed out again: its copytool is gone or made no progress"
                );
                requeue.push((a.cookie, a.agent));
            } else if a.status.is_final() && quiet >= keep && forget.len() < HSM_PURGE_BATCH_ACTIONS {
                forget.push(a.cookie);
            }
        }
    }
    core.coordinator.set_waiting(waiting, newest);
    if requeue.is_empty() && forget.is_empty() {
        return Ok(0);
    }
    internal(queue, InternalOp::HsmSweep { requeue, forget }).await
}

/// Makes the journal durable in the store every `interval` while it holds records.
async fn checkpoint_task(core: Arc<Core>, queue: Queue, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        // A committer holding the log (a replicated MDT's waits on its group) is committing:
        // a runtime thread must not wait for it, and there will be something to write.
        let pending = match core.journal.try_lock() {
            Ok(log) => log.pending(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().pending(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        };
        if pending {
            if let Err(e) = internal(&queue, InternalOp::Checkpoint).await {
                tracing::warn!(error = %e, "MDT checkpoint failed; retrying");
            }
        }
    }
}
