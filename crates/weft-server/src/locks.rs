//! The lock managers of one server process: a namespace per target it serves (inode-bit
//! locks for its MDT, extent locks for each OST), the MDT's advisory (fcntl/flock) locks,
//! and the link to the transport that calls clients back and evicts the silent.
//!
//! An eviction is for the whole process: the transport refuses the client from then on, so
//! every namespace and the advisory table drop what it held at once, instead of each
//! waiting out its own callback timeout.

use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;
use weft_dlm::advisory::{AdvisoryLocks, Refused};
use weft_dlm::namespace::{CallbackSender, Namespace, NamespaceConfig};
use weft_proto::lock::{
    self, CallbackAnswer, CallbackRequest, FlockOutcome, FlockSpec, LdlmReply, LdlmRequest, LockGrant, LockTarget,
};
use weft_proto::msg::ops::{Op, Payload};
use weft_proto::msg::RequestHeader;
use weft_proto::{ErrorCode, WeftError, WeftResult};
use weft_rpc::Exports;

pub(crate) struct LockService {
    pub mdt: Option<(u32, Arc<Namespace>)>,
    /// Changes at run time when a failover OST comes or goes ([`LockService::add_ost`]).
    osts: RwLock<HashMap<u32, Arc<Namespace>>>,
    sender: Arc<Sender>,
    advisory: Mutex<AdvisoryLocks>,
    exports: Arc<Exports>,
    callback_timeout: Duration,
    /// Holders of advisory locks checked on, and when: a holder is checked at most once per
    /// callback timeout, however often its waiters ask.
    checking: Mutex<HashMap<u64, std::time::Instant>>,
    me: Weak<LockService>,
}

/// The namespaces' way to the clients: the transport's exports.
struct Sender {
    exports: Arc<Exports>,
    service: OnceLock<Weak<LockService>>,
}

impl CallbackSender for Sender {
    fn send(
        &self,
        owner: u64,
        callback: CallbackRequest,
        timeout: Duration,
    ) -> BoxFuture<'static, WeftResult<CallbackAnswer>> {
        let exports = self.exports.clone();
        Box::pin(async move { exports.callback(owner, callback, timeout).await })
    }

    fn evict(&self, owner: u64, reason: String) {
        match self.service.get().and_then(Weak::upgrade) {
            Some(service) => service.evict(owner, reason),
            None => self.exports.evict(owner, reason),
        }
    }
}

impl LockService {
    /// `recovery`: the window after a restart in which no lock is granted (see
    /// [`NamespaceConfig::recovery_until`]); None for a new file system.
    pub fn new(
        exports: Arc<Exports>,
        mdt: Option<u32>,
        osts: &[u32],
        callback_timeout: Duration,
        recovery: Option<Duration>,
    ) -> Arc<LockService> {
        let recovery_until = recovery.map(|d| std::time::Instant::now() + d);
        let sender = Arc::new(Sender { exports: exports.clone(), service: OnceLock::new() });
        let namespace = |target| {
            Namespace::new(
                NamespaceConfig { target, callback_timeout, recovery_until },
                sender.clone() as Arc<dyn CallbackSender>,
            )
        };
        let service = Arc::new_cyclic(|me| LockService {
            mdt: mdt.map(|i| (i, namespace(LockTarget::Mdt(i)))),
            osts: RwLock::new(osts.iter().map(|&i| (i, namespace(LockTarget::Ost(i)))).collect()),
            sender: sender.clone(),
            advisory: Mutex::new(AdvisoryLocks::new()),
            exports,
            callback_timeout,
            checking: Mutex::new(HashMap::new()),
            me: me.clone(),
        });
        let _ = sender.service.set(Arc::downgrade(&service));
        service
    }

    /// Advisory locks have no callbacks: a client that died holding one would hold it
    /// forever. So a client whose advisory lock keeps someone out is checked on with a
    /// callback (a glimpse of the file, answered at once by a live client); one that does
    /// not answer within the callback timeout is evicted, which frees its locks.
    fn check_on(&self, target: LockTarget, fid: weft_proto::Fid, holders: Vec<u64>) {
        let Some(me) = self.me.upgrade() else { return };
        let now = std::time::Instant::now();
        for holder in holders {
            {
                let mut checking = self.checking.lock().unwrap_or_else(|p| p.into_inner());
                checking.retain(|_, since| now.duration_since(*since) < self.callback_timeout);
                if checking.contains_key(&holder) {
                    continue;
                }
                checking.insert(holder, now);
            }
            let me = me.clone();
            tokio::spawn(async move {
                let probe = CallbackRequest::Glimpse { target, resource: fid };
                let answer = me.exports.callback(holder, probe, me.callback_timeout).await;
                if let Err(e) = answer {
                    let reason = format!(
                        "it holds an advisory lock on {fid} that others wait for and did not answer a check within {:?}: {}",
                        me.callback_timeout, e.message
                    );
                    tracing::warn!(client = holder, "evicting client: {reason}");
                    me.evict(holder, reason);
                }
            });
        }
    }

    /// Refuses `client` everything from now on and drops its locks everywhere here.
    fn evict(&self, client: u64, reason: String) {
        self.exports.evict(client, reason);
        self.drop_client(client);
        // It comes back under another id, if at all: the MDT's record forgets this one.
        if let Some((_, ns)) = &self.mdt {
            ns.forget_client(client);
        }
    }

    fn drop_client(&self, client: u64) {
        let osts: Vec<Arc<Namespace>> = self.osts().values().cloned().collect();
        for ns in self.mdt.iter().map(|(_, ns)| ns).chain(&osts) {
            ns.drop_owner(client);
        }
        self.advisory().drop_client(client);
    }

    /// Empties the advisory table: a replicated MDT's replica starting to lead again, whose
    /// table is from its last time as leader (the clients replay what they hold now).
    pub fn forget_advisory(&self) {
        *self.advisory() = AdvisoryLocks::new();
    }

    fn advisory(&self) -> std::sync::MutexGuard<'_, AdvisoryLocks> {
        self.advisory.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn osts(&self) -> std::sync::RwLockReadGuard<'_, HashMap<u32, Arc<Namespace>>> {
        self.osts.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn namespace(&self, target: LockTarget) -> Option<Arc<Namespace>> {
        match target {
            LockTarget::Mdt(i) => self.mdt.as_ref().filter(|(m, _)| *m == i).map(|(_, ns)| ns.clone()),
            LockTarget::Ost(i) => self.osts().get(&i).cloned(),
        }
    }

    /// A failover OST starts being served here: a new namespace that grants nothing for
    /// `recovery` (its clients replay the locks its previous server granted meanwhile).
    pub fn add_ost(&self, ost: u32, recovery: Duration) {
        let config = NamespaceConfig {
            target: LockTarget::Ost(ost),
            callback_timeout: self.callback_timeout,
            recovery_until: None,
        };
        let ns = Namespace::new(config, self.sender.clone() as Arc<dyn CallbackSender>);
        if !recovery.is_zero() {
            ns.hold_grants_for(recovery);
        }
        self.osts.write().unwrap_or_else(|p| p.into_inner()).insert(ost, ns);
    }

    /// A failover OST stops being served here: its locks go with it (the clients replay
    /// them to its next server).
    pub fn remove_ost(&self, ost: u32) {
        self.osts.write().unwrap_or_else(|p| p.into_inner()).remove(&ost);
    }

    /// One lock request (see [`Handle`]).
    pub async fn handle(&self, header: &RequestHeader, target: LockTarget, op: LdlmRequest) -> WeftResult<LdlmReply> {
        let ns = self
            .namespace(target)
            .ok_or_else(|| WeftError::new(ErrorCode::NotFound, format!("this server does not serve {target:?}")))?;
        let at = At { service: self, ns: &ns, owner: header.client_id, target };
        dispatch(at, op).await
    }
}

/// Where a lock request runs: the service, the target's namespace, the asking client.
struct At<'a> {
    service: &'a LockService,
    ns: &'a Arc<Namespace>,
    owner: u64,
    target: LockTarget,
}

impl At<'_> {
    /// Advisory locks are kept by the MDT only.
    fn advisory(&self) -> WeftResult<std::sync::MutexGuard<'_, AdvisoryLocks>> {
        match self.target {
            LockTarget::Mdt(_) => Ok(self.service.advisory()),
            LockTarget::Ost(_) => Err(WeftError::invalid("advisory locks are kept by the MDT, not by an OST")),
        }
    }
}

/// The handler of one lock op.
trait Handle: Op<Answer = LdlmReply> {
    async fn run(self, at: At<'_>) -> WeftResult<Self::Reply>;
}

impl Handle for lock::Enqueue {
    /// Extent locks grow when nobody else wants the rest of the object; inode-bit locks are
    /// granted as asked.
    async fn run(self, at: At<'_>) -> WeftResult<LockGrant> {
        let expand = matches!(at.target, LockTarget::Ost(_));
        let opts = weft_dlm::state::EnqueueOptions { reuse: true, expand };
        at.ns.enqueue(at.owner, self.resource, self.mode, self.scope, opts).await
    }
}

impl Handle for lock::Cancel {
    async fn run(self, at: At<'_>) -> WeftResult<()> {
        at.ns.cancel(at.owner, &self.handles);
        Ok(())
    }
}

impl Handle for lock::Disconnect {
    async fn run(self, at: At<'_>) -> WeftResult<()> {
        at.ns.disconnect(at.owner).await
    }
}

impl Handle for lock::Replay {
    async fn run(self, at: At<'_>) -> WeftResult<lock::Replayed> {
        let kept = at.ns.replay(at.owner, &self.locks);
        if kept.len() < self.locks.len() {
            tracing::info!(
                client = at.owner,
                kept = kept.len(),
                refused = self.locks.len() - kept.len(),
                "lock replay of {:?}",
                at.target
            );
        }
        Ok(lock::Replayed { kept })
    }
}

impl Handle for lock::FlockSet {
    async fn run(self, at: At<'_>) -> WeftResult<FlockOutcome> {
        // Inside a recovery window the locks of the MDT's previous server are on their way
        // back (FlockReplay): nothing is set before they are.
        at.ns.recovery_over().await;
        let mut advisory = at.advisory()?;
        let result = match advisory.set(self.fid, at.owner, &self.lock) {
            Ok(()) => Ok(()),
            Err(Refused::Conflict(holder)) => {
                Err((holder, advisory.conflicting_clients(self.fid, at.owner, &self.lock)))
            }
            // Past the client's bound: ENOLCK at its mount, nothing changed.
            Err(Refused::NoLocks(e)) => return Err(e),
        };
        drop(advisory);
        Ok(match result {
            Ok(()) => FlockOutcome::Done,
            Err((holder, holders)) => {
                at.service.check_on(at.target, self.fid, holders);
                FlockOutcome::Conflict(Some(holder))
            }
        })
    }
}

impl Handle for lock::FlockGet {
    async fn run(self, at: At<'_>) -> WeftResult<Option<FlockSpec>> {
        at.ns.recovery_over().await;
        Ok(at.advisory()?.get(self.fid, at.owner, &self.lock))
    }
}

impl Handle for lock::FlockReplay {
    /// Each (file, owner, family) named gets exactly the locks given, or none when another
    /// client holds one that conflicts (only after the recovery window: inside it nobody
    /// else sets a lock).
    async fn run(self, at: At<'_>) -> WeftResult<lock::FlockReplayed> {
        // The client is coming back: its lock replay follows (a window gives it time).
        at.ns.replay_begun(at.owner);
        let mut advisory = at.advisory()?;
        let mut refused = Vec::new();
        let asked = self.held.len();
        for held in self.held {
            advisory.release(held.fid, at.owner, held.owner, held.flock);
            let set = held
                .locks
                .iter()
                .all(|l| l.owner == held.owner && l.flock == held.flock && advisory.set(held.fid, at.owner, l).is_ok());
            if !set {
                advisory.release(held.fid, at.owner, held.owner, held.flock);
                refused.push(held);
            }
        }
        drop(advisory);
        if !refused.is_empty() {
            tracing::info!(client = at.owner, asked, refused = refused.len(), "advisory lock replay");
        }
        Ok(lock::FlockReplayed { refused })
    }
}

impl Handle for lock::FlockRelease {
    async fn run(self, at: At<'_>) -> WeftResult<FlockOutcome> {
        at.advisory()?.release(self.fid, at.owner, self.owner, self.flock);
        Ok(FlockOutcome::Done)
    }
}

/// `dispatch`, sending every op of `weft_proto::ldlm_ops!` to its [`Handle`].
macro_rules! dispatch {
    (
        $Request:ident / $Answer:ident;
        $( $(#[$meta:meta])* $kind:ident $Op:ident { $($fields:tt)* } -> $Reply:ty = $name:literal; )*
    ) => {
        async fn dispatch(at: At<'_>, op: LdlmRequest) -> WeftResult<LdlmReply> {
            match op {
                $( LdlmRequest::$Op(op) => Handle::run(op, at).await.map(Payload::into_reply), )*
            }
        }
    };
}

weft_proto::ldlm_ops!(dispatch);
