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
use weft_proto::WeftResult;

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
        let until = (self.created.elapsed() + window).as_nanos().min(u128::from(u64::MAX)) as u64;
        self.held_until_ns.fetch_max(until.max(1), Ordering::Relaxed);
        // A new window: whatever watched the last one no longer ends it.
        self.window_watch.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        self.recovery().begin(now, unix_now(), now + window);
    }

    /// Ends the recovery window `window` from now, sooner or later than it was to end (a
    /// replicated MDT's new leader holds grants until the clients can know where it is, then
    /// gives them this long to replay).
    pub fn end_recovery_in(&self, window: Duration) {
        let until = (self.created.elapsed() + window).as_nanos().min(u128::from(u64::MAX)) as u64;
        self.held_until_ns.store(until.max(1), Ordering::Relaxed);
        self.recovery().end_at(Instant::now() + window);
    }

    /// The clients can know where the target is now: the window ends once every client the
    /// record names replayed, and `max` from now at the latest, when those that did not are
    /// evicted. Without a record (an OST's namespace) it simply ends `max` from now.
    pub fn end_recovery_when_replayed(self: &Arc<Self>, max: Duration) {
        self.end_recovery_in(max);
        self.watch_window(Instant::now() + max);
    }

    /// The record of this target's clients (an MDT's, in its store). A window open now
    /// waits for the clients it names, until it was to end.
    pub fn set_lock_clients(self: &Arc<Self>, clients: Arc<dyn LockClients>) {
        *self.clients.write().unwrap_or_else(|p| p.into_inner()) = Some(clients);
        if let Some(until) = self.grants_held_until() {
            self.watch_window(until);
        }
    }

    fn lock_clients(&self) -> Option<Arc<dyn LockClients>> {
        self.clients.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits (in a task) until every recorded client replayed or `deadline`, then ends the
    /// window, evicting and forgetting the clients still missing. A later call supersedes
    /// an earlier one's watch.
    fn watch_window(self: &Arc<Self>, deadline: Instant) {
        let Some(clients) = self.lock_clients() else { return };
        self.recovery().expect(clients.recorded());
        let generation = self.window_watch.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(runtime) = tokio::runtime::Handle::try_current().ok().or_else(|| self.runtime.clone()) else {
            return;
        };
        let me = Arc::clone(self);
        runtime.spawn(async move {
            loop {
                let replayed = me.replays.notified();
                tokio::pin!(replayed);
                replayed.as_mut().enable();
                if me.recovery().all_back() {
                    break;
                }
                if tokio::time::timeout_at(deadline.into(), replayed).await.is_err() {
                    break;
                }
            }
            if me.window_watch.load(Ordering::Relaxed) != generation {
                return;
            }
            let missing = me.recovery().missing();
            if !missing.is_empty() {
                me.recovery().evicted(missing.len() as u64);
                for &owner in &missing {
                    let reason =
                        format!("it did not replay its locks of {:?} within the recovery window", me.config.target);
                    me.report_eviction(owner, reason);
                    me.drop_owner(owner);
                }
            }
            me.end_recovery_in(Duration::ZERO);
            tracing::info!(target = ?me.config.target, evicted = missing.len(), "recovery window over");
        });
    }

    /// Records `owner` before its first lock (see [`LockClients`]): a recovery window then
    /// waits for it.
    pub(super) async fn admit(&self, owner: u64) -> WeftResult<()> {
        match self.lock_clients() {
            Some(clients) if !clients.known(owner) => clients.record(owner).await,
            _ => Ok(()),
        }
    }

    /// `owner` is gone for good (evicted, or it disconnected): no recovery window waits for
    /// it. In a task: the eviction paths do not wait for the record.
    pub(super) fn forget_client(&self, owner: u64) {
        let Some(clients) = self.lock_clients().filter(|c| c.known(owner)) else { return };
        if let Some(runtime) = tokio::runtime::Handle::try_current().ok().or_else(|| self.runtime.clone()) {
            let forget = clients.forget(vec![owner]);
            runtime.spawn(async move {
                if let Err(e) = forget.await {
                    tracing::warn!(client = owner, "forgetting a client's record failed: {e}");
                }
            });
        }
    }

    /// A client unmounts: its locks are dropped (what they let through is granted) and its
    /// record forgotten, so that no recovery window waits for it.
    pub async fn disconnect(&self, owner: u64) -> WeftResult<()> {
        self.drop_owner(owner);
        match self.lock_clients() {
            Some(clients) if clients.known(owner) => clients.forget(vec![owner]).await,
            _ => Ok(()),
        }
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
        self.replays.notify_waiters();
        kept
    }
}
