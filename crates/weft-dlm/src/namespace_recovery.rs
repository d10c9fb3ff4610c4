//! A namespace's recovery window (see [`crate::recovery`]): grants held back while the
//! clients of the target's previous server replay their locks, ended as soon as every
//! client the [`LockClients`] record names replayed, or at its end, when the ones still
//! missing are evicted and forgotten; and the record itself, written before a client's
//! first lock and dropped when it disconnects or is evicted.

use super::{unix_now, Namespace};
use crate::recovery::{LockClients, Recovery};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};
use weft_proto::lock::{LockGrant, LockHandle};
use weft_proto::{ErrorCode, WeftResult};

impl Namespace {
    /// `recovery_status`: this target's last recovery window, in Lustre's shape.
    pub fn recovery_status(&self) -> String {
        self.recovery().render(Instant::now())
    }

    fn recovery(&self) -> MutexGuard<'_, Recovery> {
        self.recovery.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Grants nothing for `window` from now: a recovery window, as after a restart, for a
    /// target whose server changed (a replicated MDT's new leader), so that every client
    /// that held locks of its old server has noticed the move and dropped what they
    /// guarded before another is granted a conflicting lock.
    pub fn hold_grants_for(&self, window: Duration) {
        // Under the recovery mutex, as a watcher's end (watch_window): a watcher of the last
        // window that ends it does so before this, or sees the new generation and leaves it.
        let mut r = self.recovery();
        self.held_until_ns.fetch_max(self.ns_from_now(window), Ordering::Relaxed);
        // A new window: whatever watched the last one no longer ends it.
        self.window_watch.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        r.begin(now, unix_now(), now + window);
    }

    /// `window` from now, as `held_until_ns` counts (never 0: none).
    fn ns_from_now(&self, window: Duration) -> u64 {
        ((self.created.elapsed() + window).as_nanos().min(u128::from(u64::MAX)) as u64).max(1)
    }

    /// Ends the recovery window `window` from now, sooner or later than it was to end (a
    /// replicated MDT's new leader holds grants until the clients can know where it is, then
    /// gives them this long to replay).
    pub fn end_recovery_in(&self, window: Duration) {
        let mut r = self.recovery();
        self.end_locked(&mut r, window);
    }

    fn end_locked(&self, r: &mut Recovery, window: Duration) {
        self.held_until_ns.store(self.ns_from_now(window), Ordering::Relaxed);
        r.end_at(Instant::now() + window);
    }

    /// The clients can know where the target is now (the server registered): the window ends
    /// once every client the record names replayed, and `max` from now at the latest, when
    /// those that did not are evicted and forgotten (one that began coming back gets
    /// [`crate::limits::LATE_REPLAY_GRACE_MS`] more, once). Without a record (an OST's
    /// namespace), or with one that may miss clients, it ends `max` from now and evicts
    /// nobody; then the record is complete (every client holding locks replayed in it).
    pub fn end_recovery_when_replayed(self: &Arc<Self>, max: Duration) {
        // Ended already (every recorded client came back early, or the hold ran out): not
        // opened again.
        if !self.recovering() {
            return;
        }
        self.end_recovery_in(max);
        self.watch_window(Instant::now() + max, true);
    }

    /// The record of this target's clients (an MDT's, in its store). A window open now may
    /// end as soon as the clients it names replayed, but does not evict at its end: the
    /// clients may not know yet where the target is ([`Namespace::end_recovery_when_replayed`]
    /// says when they can).
    pub fn set_lock_clients(self: &Arc<Self>, clients: Arc<dyn LockClients>) {
        *self.clients.write().unwrap_or_else(|p| p.into_inner()) = Some(clients);
        if let Some(until) = self.grants_held_until() {
            self.watch_window(until, false);
        }
    }

    fn lock_clients(&self) -> Option<Arc<dyn LockClients>> {
        self.clients.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits (in a task) until every recorded client replayed, then ends the window; at
    /// `deadline` with `evict`, evicts and forgets the clients still missing and ends it. A
    /// later call supersedes an earlier one's watch.
    fn watch_window(self: &Arc<Self>, deadline: Instant, evict: bool) {
        let Some(clients) = self.lock_clients() else { return };
        if let Some(recorded) = clients.recorded() {
            self.recovery().expect(recorded);
        }
        let generation = self.window_watch.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(runtime) = tokio::runtime::Handle::try_current().ok().or_else(|| self.runtime.clone()) else {
            return;
        };
        let me = Arc::clone(self);
        runtime.spawn(async move {
            let current = || me.window_watch.load(Ordering::Relaxed) == generation;
            let mut deadline = deadline;
            let mut grace = evict;
            loop {
                if !current() {
                    return;
                }
                let replayed = me.replays.notified();
                tokio::pin!(replayed);
                replayed.as_mut().enable();
                if me.recovery().all_back() {
                    break;
                }
                if tokio::time::timeout_at(deadline.into(), replayed).await.is_ok() {
                    continue;
                }
                // A client whose opens or advisory locks came back replays its locks next:
                // `replay_begun` held grants for it already; wait that long, once.
                if std::mem::take(&mut grace) && current() && me.recovery().missing_begun() {
                    if let Some(until) = me.grants_held_until().filter(|u| *u > deadline) {
                        deadline = until;
                        continue;
                    }
                }
                break;
            }
            // Checked and ended under the recovery mutex, which a new window's hold takes.
            let (missing, knows) = {
                let mut r = me.recovery();
                if !current() {
                    return;
                }
                let (all_back, knows) = (r.all_back(), r.knows_whom());
                if !all_back && !evict {
                    // Its end stands: the clients may not have known where to replay.
                    return;
                }
                let missing = r.missing();
                r.evicted(missing.len() as u64);
                me.end_locked(&mut r, Duration::ZERO);
                (missing, knows)
            };
            for &owner in &missing {
                let reason =
                    format!("it did not replay its locks of {:?} within the recovery window", me.config.target);
                me.report_eviction(owner, reason);
                me.drop_owner(owner);
            }
            if !missing.is_empty() {
                if let Err(e) = clients.forget(missing.clone()).await {
                    tracing::warn!("forgetting clients evicted at the window's end failed: {e}");
                }
            }
            if !knows {
                // A whole window ran: every client holding locks replayed in it. Each is
                // recorded (not only by the task its replay started) before the record is
                // said to be complete.
                let mut recorded = true;
                let came_back = me.recovery().came_back();
                for owner in came_back {
                    if !clients.known(owner) {
                        recorded &= clients.record(owner).await.is_ok();
                    }
                }
                if !recorded {
                    tracing::warn!("a client that replayed could not be recorded: the record stays incomplete");
                } else if let Err(e) = clients.complete().await {
                    tracing::warn!("marking the record of clients complete failed: {e}");
                }
            }
            tracing::info!(target = ?me.config.target, evicted = missing.len(), "recovery window over");
        });
    }

    /// A client began coming back (its opens or advisory locks replayed): a window waits a
    /// little longer for its lock replay.
    pub fn replay_begun(&self, owner: u64) {
        let mut r = self.recovery();
        // Grants stay held for its lock replay (the watcher waits as long, once).
        if r.begun(owner) && self.grants_held_until().is_some() {
            let more = Duration::from_millis(crate::limits::LATE_REPLAY_GRACE_MS);
            self.held_until_ns.fetch_max(self.ns_from_now(more), Ordering::Relaxed);
            r.end_no_sooner_than(Instant::now() + more);
        }
    }

    /// Records `owner` before its first lock (see [`LockClients`]): a recovery window then
    /// waits for it.
    pub(super) async fn admit(&self, owner: u64) -> WeftResult<()> {
        let record = {
            let clients = self.clients.read().unwrap_or_else(|p| p.into_inner());
            match &*clients {
                Some(c) if !c.known(owner) => c.record(owner),
                _ => return Ok(()),
            }
        };
        record.await
    }

    /// `owner` is gone for good (evicted from any of the server's targets: it comes back
    /// under another id, if at all): no recovery window waits for it. In a task: the
    /// eviction paths do not wait for the record.
    pub fn forget_client(&self, owner: u64) {
        self.forget_or_record(owner, false);
    }

    /// Changes `owner`'s record (in a task) when it says otherwise.
    fn forget_or_record(&self, owner: u64, record: bool) {
        let Some(clients) = self.lock_clients().filter(|c| c.known(owner) != record) else { return };
        if let Some(runtime) = tokio::runtime::Handle::try_current().ok().or_else(|| self.runtime.clone()) {
            let change = if record { clients.record(owner) } else { clients.forget(vec![owner]) };
            runtime.spawn(async move {
                if let Err(e) = change.await {
                    tracing::warn!(client = owner, "changing a client's record failed: {e}");
                }
            });
        }
    }

    /// A client unmounts: its locks are dropped (what they let through is granted) and its
    /// record forgotten, so that no recovery window waits for it.
    pub async fn disconnect(&self, owner: u64) -> WeftResult<()> {
        // Its own enqueues still waiting fail Stale, not Evicted: it is not evicted.
        let recalls = self.inner().drop_owner(owner, self.config.target, ErrorCode::Stale);
        self.dispatch(recalls);
        // Forgotten even while its record is being written (the record orders the two).
        match self.lock_clients() {
            Some(clients) => clients.forget(vec![owner]).await,
            None => Ok(()),
        }
    }

    /// Whether grants are held for a recovery window now.
    pub fn recovering(&self) -> bool {
        self.grants_held_until().is_some()
    }

    /// The moment before which nothing is granted, if it is still to come.
    pub(super) fn grants_held_until(&self) -> Option<Instant> {
        let held = match self.held_until_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(self.created + Duration::from_nanos(ns)),
        };
        held.filter(|until| Instant::now() < *until)
    }

    /// Returns once grants are no longer held for a recovery window (at once outside one):
    /// for requests that are not lock grants but must not come before the clients' replays
    /// either (advisory locks set on an MDT). Looks again every
    /// [`crate::limits::RECOVERY_RECHECK_MS`]: the window may end sooner than it was to.
    pub async fn recovery_over(&self) {
        while let Some(until) = self.grants_held_until() {
            let recheck = Instant::now() + Duration::from_millis(crate::limits::RECOVERY_RECHECK_MS);
            tokio::time::sleep_until(until.min(recheck).into()).await;
        }
    }

    /// Lock replay (see [`crate::state::LockTable::replay`]): takes back the locks `owner`
    /// held from this target's previous server, only while grants are held for the
    /// recovery window ([`Namespace::hold_grants_for`], or the window after a restart),
    /// before any new lock could conflict with them. Returns the handles kept; none once
    /// the window is over (the owner then forgets them all, as without replay). A replay of
    /// no locks says the client is back (a window waiting for it may end).
    pub fn replay(&self, owner: u64, locks: &[LockGrant]) -> Vec<LockHandle> {
        if self.grants_held_until().is_none() {
            // Too late: refused, and shown so (`recovery_status`'s refused_locks).
            self.recovery().replayed(owner, 0, locks.len() as u64);
            return Vec::new();
        }
        let kept: Vec<LockHandle> = {
            let mut inner = self.inner();
            let bound = self.bounds.locks_per_client_max.saturating_sub(inner.table.owner_count(owner));
            locks.iter().take(bound).filter(|g| inner.table.replay(owner, **g)).map(|g| g.handle).collect()
        };
        let refused = (locks.len() - kept.len()) as u64;
        self.recovery().replayed(owner, kept.len() as u64, refused);
        // It holds locks now: recorded, if it was not (a target from before the record).
        if !kept.is_empty() {
            self.forget_or_record(owner, true);
        }
        self.replays.notify_waiters();
        kept
    }
}
