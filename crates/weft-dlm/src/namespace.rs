//! One target's locks in a running server: the [`LockTable`] plus the callbacks that make
//! holders give their locks back, and the eviction of holders that do not answer.
//!
//! # How an enqueue proceeds
//!
//! 1. The request goes into the table. If nothing conflicts it is granted at once.
//! 2. Otherwise it waits, and the owner of each granted lock that blocks it gets a
//!    [`CallbackRequest::Blocking`] carrying the wanted scope: one callback per blocking
//!    lock at a time, sent concurrently from tasks of their own, so a lock blocking ten
//!    requests is called back once and a slow client does not delay the others.
//! 3. Each answer changes the table: [`CallbackAnswer::Released`] and
//!    [`CallbackAnswer::Unknown`] cancel the lock; [`CallbackAnswer::Narrowed`] converts it
//!    to the narrower scope (or cancels it, if that still conflicts with what was wanted or
//!    is not a narrowing). An error, an unexpected answer, or no answer within
//!    [`NamespaceConfig::callback_timeout`] **evicts** the holder: every lock it has in this
//!    namespace is dropped and [`CallbackSender::evict`] tells the transport to refuse it
//!    from then on (it must reconnect, and its caches are gone with its locks).
//! 4. Whatever a change lets through is granted (in FIFO order, see [`crate::state`]) and
//!    its waiting enqueue is woken. Locks that now block a waiting request, e.g. a request
//!    just granted ahead of a later conflicting one, are called back in turn.
//!
//! A waiting enqueue whose future is dropped (the caller gave up) cancels its request; one
//! whose own owner is evicted meanwhile returns [`ErrorCode::Evicted`].
//!
//! # Bounds
//!
//! A client holds at most [`LOCKS_PER_CLIENT_MAX`] locks (granted and waiting) in one
//! namespace: one more is refused with [`ErrorCode::NoLocks`] (a lock handed out again
//! under [`EnqueueOptions::reuse`] is no new lock). At most
//! [`WAITING_REQUESTS_PER_RESOURCE_MAX`] requests wait on one resource: one more is refused
//! with [`ErrorCode::Again`], and the client resends after a pause. A refused request
//! changes nothing and nobody is evicted for it.
//!
//! # Concurrency
//!
//! All state sits behind one `std::sync::Mutex`, never held across an `.await`: waiters
//! are woken through oneshot channels, callbacks run in spawned tasks. The
//! [`CallbackSender`] is never called with the mutex held, so it may call back into the
//! namespace (e.g. its `evict` may call [`Namespace::drop_owner`]).
//!
//! The async methods, [`Namespace::cancel`] and [`Namespace::drop_owner`] spawn callback
//! tasks and therefore must run within a Tokio runtime (or the namespace must have been
//! created within one).

use crate::limits::{LOCKS_PER_CLIENT_MAX, WAITING_REQUESTS_PER_RESOURCE_MAX};
use crate::state::{conflicts, Changes, EnqueueOptions, Enqueued, Lock, LockTable};
use futures::future::BoxFuture;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::Duration;
use tokio::sync::oneshot;
use weft_proto::lock::{CallbackAnswer, CallbackRequest, LockGrant, LockHandle, LockMode, LockScope, LockTarget};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// How the namespace reaches clients: implemented by the server's transport.
pub trait CallbackSender: Send + Sync + 'static {
    /// Sends `callback` to client `owner` and waits for its answer, at most `timeout`
    /// (the implementation waits for the client to be reachable within that time).
    fn send(
        &self,
        owner: u64,
        callback: CallbackRequest,
        timeout: Duration,
    ) -> BoxFuture<'static, WeftResult<CallbackAnswer>>;

    /// `owner` did not answer in time: from now on the transport refuses its requests with
    /// [`ErrorCode::Evicted`]. Called without any namespace lock held.
    fn evict(&self, owner: u64, reason: String);
}

/// What a namespace serves and how patient it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceConfig {
    /// The target whose locks these are (named in callbacks and eviction reasons).
    pub target: LockTarget,
    /// How long a client has to answer a callback before it is evicted.
    pub callback_timeout: Duration,
    /// After a restart: no lock is granted before this moment, so that every client that
    /// held locks before the restart has noticed it and dropped what they guarded (the
    /// recovery window; Lustre replays the locks instead).
    pub recovery_until: Option<std::time::Instant>,
}

/// How many locks a namespace lets a client hold and requests wait on a resource: the
/// bounds of [`crate::limits`], smaller in tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceBounds {
    /// Locks (granted and waiting) of one client.
    pub locks_per_client_max: usize,
    /// Requests waiting on one resource.
    pub waiting_per_resource_max: usize,
}

impl Default for NamespaceBounds {
    fn default() -> Self {
        NamespaceBounds {
            locks_per_client_max: LOCKS_PER_CLIENT_MAX,
            waiting_per_resource_max: WAITING_REQUESTS_PER_RESOURCE_MAX,
        }
    }
}

/// One target's lock namespace. Create with [`Namespace::new`]; see the
/// [module documentation](self).
pub struct Namespace {
    config: NamespaceConfig,
    bounds: NamespaceBounds,
    sender: Arc<dyn CallbackSender>,
    inner: Mutex<Inner>,
    /// Ourselves, for the callback tasks spawned from `&self` methods.
    me: Weak<Namespace>,
    /// The runtime the namespace was created in, if any: used when a callback must be
    /// spawned from outside a runtime (e.g. an enqueue future dropped there).
    runtime: Option<tokio::runtime::Handle>,
    /// Set by [`Namespace::hold_grants_for`]: no grant before this many nanoseconds after
    /// `created` (0: none). An atomic, read by every enqueue.
    held_until_ns: AtomicU64,
    created: std::time::Instant,
    /// The last recovery window and what clients replayed in it (`recovery_status`).
    recovery: Mutex<crate::recovery::Recovery>,
    /// Who held this target's locks, kept where the server's death does not lose it (an
    /// MDT's store): a recovery window waits for them (namespace_recovery.rs).
    clients: RwLock<Option<Arc<dyn crate::recovery::LockClients>>>,
    /// Woken at each lock replay, for a window waiting for every client to come back.
    replays: tokio::sync::Notify,
    /// Counts the windows watched: a later watch supersedes an earlier one.
    window_watch: AtomicU64,
    /// Whether a lock was ever granted by [`Namespace::try_enqueue_alone`] (the
    /// write-back cache's): until then no read asks [`Namespace::held_by_other`] the table.
    alone_granted: std::sync::atomic::AtomicBool,
}

/// What the mutex guards.
#[derive(Default)]
struct Inner {
    table: LockTable,
    /// The enqueues waiting for their lock, by the handle of their waiting request.
    waiters: HashMap<LockHandle, oneshot::Sender<WeftResult<LockGrant>>>,
    /// Granted locks with a blocking callback in flight (at most one per lock).
    calling: HashSet<LockHandle>,
    /// Locks the server holds for the length of one operation of their owner (an MDS
    /// change): never called back, the waiters wait for the operation's cancel.
    operation: HashSet<LockHandle>,
}

/// A blocking callback to send: `holder` blocks `waiter`.
struct Recall {
    holder: Lock,
    waiter: Lock,
}

impl Inner {
    /// Hands each newly granted lock to its waiting enqueue. Returns the resources touched.
    fn wake(&mut self, changes: Changes) -> BTreeSet<Fid> {
        let mut touched = BTreeSet::new();
        for lock in changes.granted {
            touched.insert(lock.resource);
            if let Some(tx) = self.waiters.remove(&lock.handle) {
                // A receiver gone means the enqueue was dropped: its guard cancels the lock.
                let _ = tx.send(Ok(lock.grant()));
            }
        }
        touched
    }

    /// The callbacks the waiting requests of `resources` need: one per blocking lock that
    /// has none in flight, carrying the scope of the first (FIFO) request it blocks.
    fn recalls(&mut self, resources: impl IntoIterator<Item = Fid>) -> Vec<Recall> {
        let mut recalls = Vec::new();
        for fid in resources {
            let waiting: Vec<Lock> = self.table.waiting(fid).collect();
            for waiter in waiting {
                for holder in self.table.blockers(waiter.handle) {
                    if self.operation.contains(&holder.handle) {
                        continue;
                    }
                    if self.calling.insert(holder.handle) {
                        recalls.push(Recall { holder, waiter });
                    }
                }
            }
        }
        recalls
    }

    /// Applies `changes` made on `resource`: wakes the granted, lists the callbacks needed.
    fn settle(&mut self, changes: Changes, resource: Fid) -> Vec<Recall> {
        let mut touched = self.wake(changes);
        touched.insert(resource);
        self.recalls(touched)
    }

    /// Drops every lock of `owner`; its waiting enqueues fail with `code` (`Evicted`, or
    /// `Stale` for a client that leaves).
    fn drop_owner(&mut self, owner: u64, target: LockTarget, code: ErrorCode) -> Vec<Recall> {
        let (removed, changes) = self.table.drop_owner(owner);
        for handle in removed {
            self.operation.remove(&handle);
            if let Some(tx) = self.waiters.remove(&handle) {
                let why = match code {
                    ErrorCode::Evicted => "was evicted from",
                    _ => "left",
                };
                let _ = tx.send(Err(WeftError::new(
                    code,
                    format!("client {owner} {why} the locks of {target:?} while waiting for lock {handle}"),
                )));
            }
        }
        let touched = self.wake(changes);
        self.recalls(touched)
    }
}

/// Cancels a waiting (or just granted) request if the enqueue that owns it goes away.
struct WaitGuard<'a> {
    ns: &'a Namespace,
    owner: u64,
    handle: LockHandle,
    armed: bool,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.ns.cancel(self.owner, &[self.handle]);
        }
    }
}

/// Cancels the locks an [`Namespace::enqueue_many`] took if it fails or goes away.
struct TakenGuard<'a> {
    ns: &'a Namespace,
    owner: u64,
    handles: Vec<LockHandle>,
}

impl Drop for TakenGuard<'_> {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.ns.cancel(self.owner, &self.handles);
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The global order of [`Namespace::enqueue_many`]: by resource, then scope, then mode.
fn lock_order(want: &(Fid, LockMode, LockScope)) -> (Fid, u8, u64, u64, LockMode) {
    let (fid, mode, scope) = *want;
    match scope {
        LockScope::Extent(e) => (fid, 0, e.start, e.end, mode),
        LockScope::Bits(b) => (fid, 1, u64::from(b), 0, mode),
    }
}

impl Namespace {
    pub fn new(config: NamespaceConfig, sender: Arc<dyn CallbackSender>) -> Arc<Namespace> {
        Namespace::with_bounds(config, NamespaceBounds::default(), sender)
    }

    /// A namespace with other bounds than [`crate::limits`]'s (tests).
    pub fn with_bounds(
        config: NamespaceConfig,
        bounds: NamespaceBounds,
        sender: Arc<dyn CallbackSender>,
    ) -> Arc<Namespace> {
        let created = std::time::Instant::now();
        Arc::new_cyclic(|me| Namespace {
            config,
            bounds,
            sender,
            inner: Mutex::new(Inner::default()),
            me: me.clone(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            // A restart's window: grants held until then (it may end sooner, see
            // namespace_recovery.rs).
            held_until_ns: AtomicU64::new(match config.recovery_until {
                Some(until) => {
                    (until.saturating_duration_since(created).as_nanos().min(u128::from(u64::MAX)) as u64).max(1)
                }
                None => 0,
            }),
            created,
            recovery: Mutex::new(match config.recovery_until {
                Some(until) => {
                    let mut r = crate::recovery::Recovery::default();
                    r.begin(created, unix_now(), until);
                    r
                }
                None => crate::recovery::Recovery::default(),
            }),
            clients: RwLock::new(None),
            replays: tokio::sync::Notify::new(),
            window_watch: AtomicU64::new(0),
            alone_granted: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn config(&self) -> &NamespaceConfig {
        &self.config
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks for a lock for `owner` and returns once it is granted. Granted at once when
    /// nothing conflicts; otherwise the holders of the conflicting locks are called back
    /// (see the [module documentation](self)) and this waits until their answers, or their
    /// evictions, let the request through.
    ///
    /// Errors: [`ErrorCode::Evicted`] when `owner` itself was evicted (or dropped with
    /// [`Namespace::drop_owner`]) while waiting; [`ErrorCode::Stale`] when its waiting
    /// request was cancelled by handle; [`ErrorCode::NoLocks`] and [`ErrorCode::Again`]
    /// past a bound (see the [module documentation](self)). Dropping the future cancels the
    /// request.
    pub async fn enqueue(
        self: &Arc<Self>,
        owner: u64,
        resource: Fid,
        mode: LockMode,
        scope: LockScope,
        opts: EnqueueOptions,
    ) -> WeftResult<LockGrant> {
        self.enqueue_as(owner, resource, mode, scope, opts, false).await
    }

    /// How many locks `owner` holds when that is its bound and this request would add one
    /// (None: it may have it, or reuses one it holds).
    fn at_bound(
        &self,
        inner: &Inner,
        owner: u64,
        resource: Fid,
        mode: LockMode,
        scope: &LockScope,
        opts: EnqueueOptions,
    ) -> Option<usize> {
        let reused = opts.reuse && inner.table.reusable(owner, resource, mode, scope).is_some();
        let held = inner.table.owner_count(owner);
        (!reused && held >= self.bounds.locks_per_client_max).then_some(held)
    }

    /// `operation`: a lock the server holds for one operation (see [`Namespace::enqueue_operation`]).
    async fn enqueue_as(
        self: &Arc<Self>,
        owner: u64,
        resource: Fid,
        mode: LockMode,
        scope: LockScope,
        opts: EnqueueOptions,
        operation: bool,
    ) -> WeftResult<LockGrant> {
        self.recovery_over().await;
        if !operation {
            // The client holds what it is granted: recorded first, so that a recovery
            // window after this server's death waits for it.
            self.admit(owner).await?;
        }
        let (handle, granted, recalls) = {
            let mut inner = self.inner();
            if let Some(held) = self.at_bound(&inner, owner, resource, mode, &scope, opts) {
                return Err(WeftError::new(
                    ErrorCode::NoLocks,
                    format!(
                        "client {owner} holds {held} locks of {:?}, its bound; give some back (cancel) first",
                        self.config.target
                    ),
                ));
            }
            match inner.table.enqueue(owner, resource, mode, scope, opts) {
                Enqueued::Granted(grant) => {
                    if operation {
                        inner.operation.insert(grant.handle);
                    }
                    return Ok(grant);
                }
                Enqueued::Waiting { handle, .. }
                    if inner.table.waiting_count(resource) > self.bounds.waiting_per_resource_max =>
                {
                    // The newest in line: taking it out again lets nothing through.
                    let changes = inner.table.cancel(owner, handle);
                    debug_assert!(changes.is_empty(), "the last waiter held nobody back");
                    let recalls = inner.settle(changes, resource);
                    drop(inner);
                    self.dispatch(recalls);
                    return Err(WeftError::new(
                        ErrorCode::Again,
                        format!(
                            "{} requests wait for a lock on {resource} of {:?} already; retry later",
                            self.bounds.waiting_per_resource_max, self.config.target
                        ),
                    ));
                }
                Enqueued::Waiting { handle, .. } => {
                    if operation {
                        inner.operation.insert(handle);
                    }
                    let (tx, rx) = oneshot::channel();
                    inner.waiters.insert(handle, tx);
                    (handle, rx, inner.recalls([resource]))
                }
            }
        };
        let mut guard = WaitGuard { ns: self, owner, handle, armed: true };
        self.dispatch(recalls);
        let result = granted.await;
        match result {
            Ok(Ok(grant)) => {
                guard.armed = false;
                Ok(grant)
            }
            // Evicted, or cancelled by handle: the request is gone already.
            Ok(Err(e)) => {
                guard.armed = false;
                Err(e)
            }
            // Not expected (every removal of a waiter answers it): the guard cleans up.
            Err(_) => Err(WeftError::io(format!("lock {handle} of {:?} was lost while waiting", self.config.target))),
        }
    }

    /// Takes several locks for one operation (all without reuse or expansion), in a fixed
    /// global order (by resource, then scope, then mode) whatever the order of `wants`, so
    /// that two operations wanting the same locks cannot each hold one the other waits for.
    /// Returns the grants in the order of `wants`. On error, or if the future is dropped,
    /// the locks taken so far are cancelled.
    ///
    /// Ordering prevents deadlock between different resources; on one resource, ask for
    /// one lock with the union of the scopes (partially overlapping bit sets taken as two
    /// locks by two operations can still wait on each other).
    pub async fn enqueue_many(
        self: &Arc<Self>,
        owner: u64,
        wants: &[(Fid, LockMode, LockScope)],
    ) -> WeftResult<Vec<LockGrant>> {
        self.enqueue_many_as(owner, wants, false).await
    }

    /// [`Namespace::enqueue_many`] for locks the server holds on behalf of `owner` for one
    /// operation and cancels when it is done (an MDS change holds EX on what it changes).
    /// They conflict like any lock of `owner` (so other clients' caches are called back and
    /// their requests wait), but are never called back themselves: the client does not hold
    /// them, the operation does, and it ends soon.
    pub async fn enqueue_operation(
        self: &Arc<Self>,
        owner: u64,
        wants: &[(Fid, LockMode, LockScope)],
    ) -> WeftResult<Vec<LockGrant>> {
        self.enqueue_many_as(owner, wants, true).await
    }

    async fn enqueue_many_as(
        self: &Arc<Self>,
        owner: u64,
        wants: &[(Fid, LockMode, LockScope)],
        operation: bool,
    ) -> WeftResult<Vec<LockGrant>> {
        let mut order: Vec<usize> = (0..wants.len()).collect();
        order.sort_by_key(|&i| lock_order(&wants[i]));
        let mut grants: Vec<Option<LockGrant>> = vec![None; wants.len()];
        let mut taken = TakenGuard { ns: self, owner, handles: Vec::with_capacity(wants.len()) };
        for i in order {
            let (resource, mode, scope) = wants[i];
            let grant = self.enqueue_as(owner, resource, mode, scope, EnqueueOptions::default(), operation).await?;
            taken.handles.push(grant.handle);
            grants[i] = Some(grant);
        }
        taken.handles.clear();
        Ok(grants.into_iter().flatten().collect())
    }

    /// Gives locks of `owner` back, granted or waiting, and grants what this lets through.
    /// Handles that are unknown or not `owner`'s are ignored. A waiting enqueue whose
    /// request is cancelled this way returns [`ErrorCode::Stale`].
    pub fn cancel(&self, owner: u64, handles: &[LockHandle]) {
        let recalls = {
            let mut inner = self.inner();
            let mut touched = BTreeSet::new();
            for &handle in handles {
                let Some(lock) = inner.table.lock(handle).filter(|l| l.owner == owner) else { continue };
                touched.insert(lock.resource);
                inner.operation.remove(&handle);
                let changes = inner.table.cancel(owner, handle);
                if let Some(tx) = inner.waiters.remove(&handle) {
                    let _ = tx.send(Err(WeftError::new(ErrorCode::Stale, format!("lock {handle} was cancelled"))));
                }
                touched.extend(inner.wake(changes));
            }
            inner.recalls(touched)
        };
        self.dispatch(recalls);
    }

    /// Before answering the size of object `resource` to `asker`: every other owner
    /// holding a granted PW or EX extent lock on it is sent a [`CallbackRequest::Glimpse`]
    /// (concurrently, one per owner) so that it writes out what it queued; returns when all
    /// answered. An owner that fails or does not answer within the callback timeout is
    /// evicted, unless it gave its write locks on `resource` back meanwhile.
    pub async fn glimpse(self: &Arc<Self>, asker: u64, resource: Fid) {
        let owners: BTreeSet<u64> = self.inner().table.holders_of_write(resource, asker).map(|l| l.owner).collect();
        if owners.is_empty() {
            return;
        }
        let timeout = self.config.callback_timeout;
        let target = self.config.target;
        let calls = owners.into_iter().map(|owner| {
            let answer = self.sender.send(owner, CallbackRequest::Glimpse { target, resource }, timeout);
            async move { (owner, tokio::time::timeout(timeout, answer).await) }
        });
        for (owner, answer) in futures::future::join_all(calls).await {
            let failure = match answer {
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => format!("failed: {e}"),
                Err(_) => format!("got no answer within {timeout:?}"),
            };
            let recalls = {
                let mut inner = self.inner();
                if !inner.table.holders_of_write(resource, asker).any(|l| l.owner == owner) {
                    continue;
                }
                inner.drop_owner(owner, target, ErrorCode::Evicted)
            };
            let reason =
                format!("the glimpse callback of {target:?} for object {resource} to client {owner} {failure}");
            self.report_eviction(owner, reason);
            self.dispatch(recalls);
        }
    }

    /// Drops every lock of `owner` (the transport lost the client for good, or an admin
    /// evicts it) and grants what this lets through. Its waiting enqueues return
    /// [`ErrorCode::Evicted`]. Does not call [`CallbackSender::evict`].
    pub fn drop_owner(&self, owner: u64) {
        let recalls = self.inner().drop_owner(owner, self.config.target, ErrorCode::Evicted);
        self.dispatch(recalls);
    }

    /// How many locks (granted and waiting) the namespace holds.
    pub fn lock_count(&self) -> usize {
        self.inner().table.len()
    }

    /// How many locks (granted and waiting) `owner` holds.
    pub fn owner_lock_count(&self, owner: u64) -> usize {
        self.inner().table.owner_count(owner)
    }

    /// One lock, granted or waiting (for tests and diagnostics).
    pub fn lock(&self, handle: LockHandle) -> Option<Lock> {
        self.inner().table.lock(handle)
    }

    /// Starts a task per blocking callback.
    fn dispatch(&self, recalls: Vec<Recall>) {
        if recalls.is_empty() {
            return;
        }
        let runtime = tokio::runtime::Handle::try_current().ok().or_else(|| self.runtime.clone());
        match (self.me.upgrade(), runtime) {
            (Some(me), Some(runtime)) => {
                for recall in recalls {
                    runtime.spawn(Arc::clone(&me).recall(recall));
                }
            }
            // No runtime (or the namespace is going away): nothing can be called back.
            // Forget the marks so that a later change retries.
            _ => {
                let mut inner = self.inner();
                for recall in recalls {
                    inner.calling.remove(&recall.holder.handle);
                }
            }
        }
    }

    /// Calls `recall.holder` back and applies the answer (see the module documentation).
    async fn recall(self: Arc<Self>, recall: Recall) {
        let Recall { holder, waiter } = recall;
        let NamespaceConfig { target, callback_timeout: timeout, .. } = self.config;
        let callback = CallbackRequest::Blocking {
            target,
            handle: holder.handle,
            resource: holder.resource,
            wanted: waiter.scope,
        };
        let answer = match tokio::time::timeout(timeout, self.sender.send(holder.owner, callback, timeout)).await {
            Ok(answer) => answer,
            Err(_) => Err(WeftError::new(ErrorCode::TimedOut, format!("no answer within {timeout:?}"))),
        };
        let mut eviction = None;
        let recalls = {
            let mut inner = self.inner();
            inner.calling.remove(&holder.handle);
            match (inner.table.lock(holder.handle), answer) {
                // Gone meanwhile (cancelled by its owner, or the owner evicted): the answer,
                // whatever it is, changes nothing.
                (None, _) => Vec::new(),
                (Some(_), Ok(CallbackAnswer::Released | CallbackAnswer::Unknown)) => {
                    let changes = inner.table.cancel(holder.owner, holder.handle);
                    inner.settle(changes, holder.resource)
                }
                (Some(now), Ok(CallbackAnswer::Narrowed(scope))) => {
                    let still = conflicts(now.owner, now.mode, &scope, waiter.owner, waiter.mode, &waiter.scope);
                    let converted =
                        if still { None } else { inner.table.convert(now.owner, now.handle, now.mode, scope).ok() };
                    // Still in the way, or not a narrowing: as good as released.
                    let changes = converted.unwrap_or_else(|| inner.table.cancel(now.owner, now.handle));
                    inner.settle(changes, holder.resource)
                }
                (Some(now), answer) => {
                    let failure = match answer {
                        Ok(other) => format!("answered {other:?}"),
                        Err(e) => format!("failed: {e}"),
                    };
                    eviction = Some(format!(
                        "the blocking callback of {target:?} for lock {} ({:?} {:?} on {}) to client {} {failure} \
                         (callback timeout {timeout:?})",
                        now.handle, now.mode, now.scope, now.resource, now.owner
                    ));
                    inner.drop_owner(now.owner, target, ErrorCode::Evicted)
                }
            }
        };
        if let Some(reason) = eviction {
            self.report_eviction(holder.owner, reason);
        }
        self.dispatch(recalls);
    }

    /// Logs an eviction whose locks are already dropped, and tells the transport.
    fn report_eviction(&self, owner: u64, reason: String) {
        tracing::warn!(client = owner, target = ?self.config.target, "evicting client: {reason}");
        self.sender.evict(owner, reason);
    }
}

#[path = "namespace_recovery.rs"]
mod recovery_window;

#[path = "namespace_alone.rs"]
mod alone;

#[cfg(test)]
#[path = "namespace_tests.rs"]
mod tests;
