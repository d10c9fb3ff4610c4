//! The client's lock cache: the locks this client holds, what uses them now, and what to
//! do when a server calls one back.
//!
//! * **Extent locks** (on OST objects) are taken before a read or a write touches an
//!   object: a cached lock that covers the range is reused, else one is enqueued (the OST
//!   grows it to the whole object when nobody else wants any of it, so a stream enqueues
//!   once per object). A [`ExtentGuard`] holds the locks in use until the I/O is done: a
//!   queued write keeps its guard until it reached the OST.
//! * **Inode-bit locks** (on MDT inodes) arrive with metadata answers (intent locks); while
//!   one is held the kernel may cache the inode's name and attributes.
//! * **A blocking callback** on an extent lock drops the kernel's pages of the file while
//!   the lock still holds ([`LockHooks::drop_data`]; I/O arriving meanwhile still uses the
//!   lock, see [`Phase::Lockless`]), then lets new I/O enqueue a new lock (which the server
//!   queues behind the conflicting request), waits until nothing uses it (a queued write
//!   keeps it in use until it reached the OST), gives it back, and drops the pages
//!   once more for what the lockless phase brought in. On an inode-bit lock it drops the
//!   attributes and the names before answering ([`LockHooks::drop_inode`]). Either waits
//!   for the kernel at most [`crate::limits::DROP_BEFORE_ANSWER_MS`] before it answers.
//! * **Bounded**: past [`crate::limits::LOCKS_CACHED_MAX`] locks the least recently used
//!   unused ones are given back (and their caches dropped), as Lustre's LRU does.
//!
//! The decisions (which lock serves an I/O, what a callback does to a lock, which locks the
//! bound gives back) are pure functions of the lock table in `table.rs`, tested there; this
//! file does the waiting, the server calls and the kernel's invalidations they ask for.

mod table;
mod tickets;

use crate::limits::{CANCEL_BATCH_MAX, DROP_BEFORE_ANSWER_MS, UNKNOWN_LOCK_WAIT_MS};
use crate::Client;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};
use table::{Callback, Entry, LockKey, LockTable, Phase};
use tickets::{GrantTicket, Tickets};
use weft_proto::layout::{Layout, StripeObject};
use weft_proto::lock::{
    self, CallbackAnswer, CallbackRequest, Extent, LockGrant, LockHandle, LockMode, LockScope, LockTarget,
};
use weft_proto::msg::Caller;
use weft_proto::{Fid, WeftResult};

/// Pages are cached in units of this many bytes; extent locks cover whole pages.
pub const PAGE_BYTES: u64 = 4096;

/// What the mount does when a lock goes. The client library calls these; the FUSE adapter
/// implements them over its write-behind queue and the kernel's invalidation calls.
pub trait LockHooks: Send + Sync + 'static {
    /// A glimpse of one of `file`'s objects: write out what is queued for `file` now (not
    /// what a writer keeps queueing after).
    fn flush(&self, file: Fid) -> BoxFuture<'static, ()>;
    /// An extent lock of `file` goes: drop the file's cached pages and attributes; done
    /// when the kernel has.
    fn drop_data(&self, file: Fid) -> BoxFuture<'static, ()>;
    /// An inode-bit lock on `fid` loses `bits`: drop what they covered. The attributes go
    /// at once and the names are handed to the kernel before this returns; the future ends
    /// when the kernel is through with the names (dropping it does not stop them going).
    fn drop_inode(&self, fid: Fid, bits: u8) -> BoxFuture<'static, ()>;
}

/// The locks one client holds.
pub struct LockCache {
    /// The requests in flight that may bring a lock back.
    tickets: Tickets,
    table: Mutex<LockTable>,
    /// Wakes callbacks waiting for a lock's users to finish.
    released: tokio::sync::Notify,
    hooks: RwLock<Option<Arc<dyn LockHooks>>>,
    /// Whether reads and writes take extent locks (off: a benchmark's baseline).
    extent_locks: bool,
    max_cached: usize,
}

impl LockCache {
    pub(crate) fn new(extent_locks: bool, max_cached: usize) -> LockCache {
        LockCache {
            tickets: Tickets::default(),
            table: Mutex::new(LockTable::default()),
            released: tokio::sync::Notify::new(),
            hooks: RwLock::new(None),
            extent_locks,
            max_cached,
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, LockTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The scope of lock `key` as this client holds it, waiting a little for a grant
    /// still on its way in a reply (as a callback does); None when it is not known.
    pub(crate) async fn scope_of(&self, key: (LockTarget, LockHandle)) -> Option<LockScope> {
        if let Some(e) = self.table().get(&key) {
            return Some(e.scope);
        }
        self.tickets.await_landed_or(UNKNOWN_LOCK_WAIT_MS, || self.table().get(&key).is_some()).await;
        self.table().get(&key).map(|e| e.scope)
    }

    fn hooks(&self) -> Option<Arc<dyn LockHooks>> {
        self.hooks.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many locks are cached now.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `inode` came with a lock that still holds LOOKUP|UPDATE on it (a callback
    /// may have narrowed or ended it since): then its name and attributes are as the answer
    /// gave them, and the kernel and the inode cache may keep them.
    pub fn still_covers(&self, inode: &weft_proto::msg::InodeInfo) -> bool {
        inode.lock.as_ref().is_some_and(|lock| self.still_holds(inode.attr.fid, lock.handle))
    }

    /// Whether the MDT lock `handle` is still held, granted, on the inode `fid`, with
    /// LOOKUP|UPDATE: what it guards of `fid` (names, attributes, a directory's entries)
    /// is as this client knows it.
    pub fn still_holds(&self, fid: Fid, handle: LockHandle) -> bool {
        let key = (LockTarget::Mdt(fid.mdt_index()), handle);
        self.table().holds_bits_on(key, fid, lock::bits::LOOKUP | lock::bits::UPDATE)
    }

    /// This client changed `fid`'s layout itself (a mirror of a synchronous write went
    /// stale): no lock it holds vouches for the layout it had, so every open of the file
    /// fetches it again ([`LockCache::still_holds_layout`] is false until a new grant).
    pub fn forget_layout(&self, fid: Fid) {
        self.table().drop_bits_locally(fid, lock::bits::LAYOUT);
    }

    /// Whether the MDT lock `handle` is still held, granted, on `fid` with LAYOUT: the
    /// layout it came with is the file's (a change of it calls the lock back first).
    pub fn still_holds_layout(&self, fid: Fid, handle: LockHandle) -> bool {
        let key = (LockTarget::Mdt(fid.mdt_index()), handle);
        self.table().holds_bits_on(key, fid, lock::bits::LAYOUT)
    }

    /// One read or write is done with the lock. Only a lock being given back has anyone
    /// waiting for its users, so only its last user wakes them (the I/O path stays a
    /// counter update).
    fn unuse(&self, target: LockTarget, handle: LockHandle) {
        let wake = self.table().unuse((target, handle));
        if wake {
            self.released.notify_waiters();
        }
    }

    /// Marks a request that may bring a lock back as in flight.
    pub(crate) fn ticket(&self) -> GrantTicket<'_> {
        self.tickets.issue()
    }

    /// Removes `keys` from the table, and forgets the gone locks that no request in flight
    /// can bring back any more.
    fn remove_gone(&self, keys: &[LockKey]) -> Vec<Entry> {
        let oldest = self.tickets.oldest();
        let mut table = self.table();
        let gone = keys.iter().filter_map(|key| table.remove(*key)).collect();
        table.forget_gone(oldest);
        gone
    }

    /// A blocking callback: see the module documentation.
    async fn revoke(&self, target: LockTarget, handle: LockHandle, wanted: LockScope) -> CallbackAnswer {
        let key = (target, handle);
        // Answers to the requests sent up to now may carry grants from before this callback.
        let seen = self.tickets.last();
        let mut decision = self.table().callback(key, wanted, seen);
        if decision == Callback::Unknown {
            // Perhaps granted by a reply still on its way.
            self.tickets.await_landed_or(UNKNOWN_LOCK_WAIT_MS, || self.table().get(&key).is_some()).await;
            decision = self.table().callback(key, wanted, seen);
        }
        let (file, scope) = match decision {
            Callback::Unknown => {
                // The server takes it as given back: a grant of it landing late is stale.
                self.table().mark_gone(key, seen);
                return CallbackAnswer::Unknown;
            }
            Callback::Narrow { inode, dropped, keep } => {
                if let Some(h) = self.hooks() {
                    drop_before_answer(h.drop_inode(inode, dropped)).await;
                    if layout_changes(wanted) {
                        drop_before_answer(h.drop_data(inode)).await;
                    }
                }
                return CallbackAnswer::Narrowed(LockScope::Bits(keep));
            }
            Callback::AlreadyGoing => {
                self.wait_unused(target, handle, true).await;
                return CallbackAnswer::Released;
            }
            Callback::GiveBack { file, scope } => (file, scope),
        };
        let hooks = self.hooks();
        match (scope, &hooks) {
            (LockScope::Extent(_), Some(h)) => {
                // Drop the kernel's pages while the lock still holds, so that a read after
                // the conflicting write cannot find them. Bounded: a page may be held
                // locked by I/O that waits on another lock (another object of the file)
                // that waits on this very answer; then the rest of the dropping happens
                // after the answer.
                drop_before_answer(h.drop_data(file)).await;
                // Queued writes hold the lock until they reached the OST: waiting for its
                // users below writes them out.
                self.set_phase(target, handle, Phase::Draining);
            }
            (LockScope::Bits(bits), Some(h)) => {
                self.set_phase(target, handle, Phase::Draining);
                // Names too before the answer: the client whose change called the lock
                // back must not find them here once it is answered. Bounded for the same
                // reason as pages: the kernel takes the directory's lock to drop a name,
                // and an operation of this mount in that directory may hold it while it
                // waits on the MDS for the change this answer lets through.
                drop_before_answer(h.drop_inode(file, bits)).await;
                if layout_changes(wanted) {
                    drop_before_answer(h.drop_data(file)).await;
                }
            }
            _ => self.set_phase(target, handle, Phase::Draining),
        }
        // Wait for the reads and writes that use the lock (a queued write holds it until it
        // reached the OST).
        self.wait_unused(target, handle, false).await;
        let gone = self.remove_gone(&[key]).pop();
        self.released.notify_waiters();
        if let (Some(e), Some(h)) = (gone, hooks) {
            // Again after the answer, in a task of its own: pages that I/O in the lockless
            // phase brought in, and names handed out meanwhile.
            tokio::spawn(async move { drop_caches(&*h, &e) });
        }
        CallbackAnswer::Released
    }

    fn set_phase(&self, target: LockTarget, handle: LockHandle, phase: Phase) {
        self.table().set_phase((target, handle), phase);
    }

    /// Waits until nothing uses the lock (or, with `gone`, until it is removed).
    async fn wait_unused(&self, target: LockTarget, handle: LockHandle, gone: bool) {
        loop {
            let notified = self.released.notified();
            {
                match self.table().get(&(target, handle)) {
                    Some(e) if gone || e.users > 0 => {}
                    _ => return,
                }
            }
            notified.await;
        }
    }

    /// The files whose data locks cover this object (for a glimpse).
    fn files_of(&self, target: LockTarget, resource: Fid) -> Vec<Fid> {
        self.table().files_of(target, resource)
    }

    /// Whether this client holds a lock of `target`.
    pub(crate) fn holds_any(&self, target: LockTarget) -> bool {
        self.table().holds_any(target)
    }

    /// The locks of `target` this client holds, as a lock replay sends them.
    pub(crate) fn granted_of(&self, target: LockTarget) -> Vec<LockGrant> {
        self.table().granted_of(target)
    }

    /// After a lock replay to `target`'s new server: forgets every lock of `target` but the
    /// `kept` ones, and drops every cache they guarded. Returns how many were forgotten.
    pub(crate) fn keep_only(&self, target: LockTarget, kept: &[LockHandle]) -> usize {
        let entries = self.table().remove_except(target, kept);
        self.released.notify_waiters();
        if let Some(h) = self.hooks() {
            for e in &entries {
                drop_caches(&*h, e);
            }
        }
        entries.len()
    }

    /// Forgets every lock (eviction: the servers dropped them already) and drops every
    /// cache they guarded.
    pub(crate) fn forget_all(&self) {
        self.forget(|_| true);
    }

    /// Forgets the locks of the targets `which` names, without telling any server, and
    /// drops every cache they guarded.
    fn forget(&self, which: impl Fn(&LockTarget) -> bool) {
        let entries = self.table().remove_where(which);
        self.released.notify_waiters();
        if let Some(h) = self.hooks() {
            for e in &entries {
                drop_caches(&*h, e);
            }
        }
    }

    /// The least recently used unused locks past the bound, marked draining.
    fn take_lru_excess(&self) -> Vec<LockKey> {
        let seen = self.tickets.last();
        self.table().take_lru_excess(self.max_cached, seen)
    }
}

fn drop_caches(hooks: &dyn LockHooks, e: &Entry) {
    match e.scope {
        LockScope::Extent(_) => drop(tokio::spawn(hooks.drop_data(e.file))),
        LockScope::Bits(bits) => drop(hooks.drop_inode(e.resource, bits)),
    }
}

/// Waits for a callback's dropping of caches before its answer, at most
/// DROP_BEFORE_ANSWER_MS: the kernel may need a page or a directory that an operation
/// holds while it waits for this very answer; the rest then happens after it.
async fn drop_before_answer(dropped: BoxFuture<'static, ()>) {
    let _ = tokio::time::timeout(std::time::Duration::from_millis(DROP_BEFORE_ANSWER_MS), dropped).await;
}

/// Extent locks in use by one read or write; dropping it lets callbacks proceed.
pub struct ExtentGuard {
    cache: Option<Arc<LockCache>>,
    held: Vec<(LockTarget, LockHandle)>,
    /// The client id the locks were granted to. The requests made under them carry this
    /// id, not whatever id the client has when they go out: after an eviction the servers
    /// refuse it, so a write queued before the eviction never lands after it (under the new
    /// id it would, over what others wrote meanwhile).
    pub(crate) client_id: u64,
    /// The file whose objects the locks are on (none for a guard made without locking): a
    /// synchronous mirror that misses a write under them goes stale on it.
    pub(crate) file: Option<Fid>,
}

impl ExtentGuard {
    /// A guard over no locks (locking off), for requests of client `client_id`.
    pub fn none(client_id: u64) -> ExtentGuard {
        ExtentGuard { cache: None, held: Vec::new(), client_id, file: None }
    }

    /// Whether one request may go under both guards: their locks were granted to the same
    /// client id by the same cache.
    pub fn joins(&self, other: &ExtentGuard) -> bool {
        let same_cache = match (&self.cache, &other.cache) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        same_cache && self.client_id == other.client_id
    }

    /// Takes over `other`'s locks (writes gathered into one request keep all of theirs
    /// until it is answered). The two must [`ExtentGuard::joins`].
    pub fn absorb(&mut self, mut other: ExtentGuard) {
        debug_assert!(self.joins(&other), "guards of different clients gathered");
        self.held.append(&mut other.held);
    }
}

impl Drop for ExtentGuard {
    fn drop(&mut self) {
        if let Some(cache) = &self.cache {
            for (t, h) in self.held.drain(..) {
                cache.unuse(t, h);
            }
        }
    }
}

impl std::fmt::Debug for ExtentGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtentGuard")
            .field("locks", &self.held.len())
            .field("client_id", &format_args!("{:#x}", self.client_id))
            .finish()
    }
}

impl Client {
    /// The mount's hooks for callbacks (set once, when the FUSE adapter starts).
    pub fn set_lock_hooks(&self, hooks: Arc<dyn LockHooks>) {
        *self.locks.hooks.write().unwrap_or_else(|p| p.into_inner()) = Some(hooks);
    }

    pub fn lock_cache(&self) -> &Arc<LockCache> {
        &self.locks
    }

    /// Whether reads and writes take extent locks (the mount caches pages only then).
    pub fn extent_locking(&self) -> bool {
        self.locks.extent_locks
    }

    /// Locks, in `mode`, every object byte of `[offset, offset+len)` of `file` (at least one
    /// byte), whole pages, reusing cached locks. Past the end of a file's objects nothing is
    /// locked. The guard keeps them in use.
    pub async fn extent_lock(
        &self,
        who: &Caller,
        file: Fid,
        layout: &Layout,
        offset: u64,
        len: u64,
        mode: LockMode,
    ) -> WeftResult<ExtentGuard> {
        layout.check_usable()?;
        if mode == LockMode::Pw && layout.sync_mirrors() && layout.write_mirrors().len() > 1 {
            return self
                .lock_write_mirrors(who, file, layout, |m| async move {
                    Box::pin(self.extent_lock(who, file, &m, offset, len, mode)).await
                })
                .await;
        }
        let wants: Vec<(StripeObject, Extent)> = layout
            .segments(offset, len.max(1))
            .flat_map(|seg| {
                seg.comp.object_extents(seg.offset, seg.len).into_iter().map(|piece| {
                    (
                        seg.comp.objects[piece.stripe],
                        Extent::of(piece.object_offset, piece.len).page_aligned(PAGE_BYTES),
                    )
                })
            })
            .collect();
        self.lock_objects(who, file, mode, wants.into_iter()).await
    }

    /// Locks the whole file for writing: every other client's cached pages and queued
    /// writes of it are called in. A passthrough open takes it before the kernel writes the
    /// object past the locks.
    pub async fn whole_file_lock(&self, who: &Caller, file: Fid, layout: &Layout) -> WeftResult<ExtentGuard> {
        self.extent_lock_from(who, file, layout, 0).await
    }

    /// Locks every object of the file whole (to EOF) for reading: no client can write any
    /// of it while the lock holds, and a write anywhere calls it back first. A read-only
    /// cached copy of the file is kept under it.
    pub async fn whole_file_read_lock(&self, who: &Caller, file: Fid, layout: &Layout) -> WeftResult<ExtentGuard> {
        layout.check_usable()?;
        let wants: Vec<(StripeObject, Extent)> = layout
            .data_objects()
            .map(|object| (*object, Extent { start: 0, end: weft_proto::lock::EXTENT_EOF }))
            .collect();
        self.lock_objects(who, file, LockMode::Pr, wants.into_iter()).await
    }

    /// Locks a whole-file range for a truncate to `size`: every object from its new end on.
    pub(crate) async fn extent_lock_from(
        &self,
        who: &Caller,
        file: Fid,
        layout: &Layout,
        size: u64,
    ) -> WeftResult<ExtentGuard> {
        layout.check_usable()?;
        if layout.sync_mirrors() && layout.write_mirrors().len() > 1 {
            return self
                .lock_write_mirrors(who, file, layout, |m| async move {
                    Box::pin(self.extent_lock_from(who, file, &m, size)).await
                })
                .await;
        }
        let wants: Vec<(StripeObject, Extent)> = layout
            .data_components()
            .flat_map(|comp| {
                comp.objects.iter().enumerate().map(move |(stripe, object)| {
                    let start = comp.object_size_in_file(size, stripe) & !(PAGE_BYTES - 1);
                    (*object, Extent { start, end: weft_proto::lock::EXTENT_EOF })
                })
            })
            .collect();
        self.lock_objects(who, file, LockMode::Pw, wants.into_iter()).await
    }

    /// Locks each (object, extent) in `mode`, in the order given (stripe order, so that two
    /// clients cannot each hold an object the other waits for).
    async fn lock_objects(
        &self,
        who: &Caller,
        file: Fid,
        mode: LockMode,
        wants: impl Iterator<Item = (StripeObject, Extent)>,
    ) -> WeftResult<ExtentGuard> {
        let client_id = self.client_id();
        if !self.locks.extent_locks {
            return Ok(ExtentGuard { cache: None, held: Vec::new(), client_id, file: Some(file) });
        }
        let mut guard = ExtentGuard { cache: Some(self.locks.clone()), held: Vec::new(), client_id, file: Some(file) };
        for (object, extent) in wants {
            let target = LockTarget::Ost(object.ost);
            let handle = self.lock_object(who, file, target, object.fid, mode, LockScope::Extent(extent)).await?;
            guard.held.push((target, handle));
        }
        if self.client_id() != client_id {
            // Evicted meanwhile: some of these locks went with the old id.
            return Err(crate::evicted_error());
        }
        Ok(guard)
    }

    async fn lock_object(
        &self,
        who: &Caller,
        file: Fid,
        target: LockTarget,
        resource: Fid,
        mode: LockMode,
        scope: LockScope,
    ) -> WeftResult<LockHandle> {
        loop {
            if let Some(h) = self.locks.table().use_matching(target, resource, mode, &scope) {
                return Ok(h);
            }
            let generation = self.generation();
            let ticket = self.locks.ticket();
            let grant = self.ldlm(who, target, lock::Enqueue { resource, mode, scope }).await?;
            if generation != self.generation() {
                return Err(crate::evicted_error());
            }
            let usable = self.locks.table().insert(target, &grant, file, 1, ticket.id());
            drop(ticket);
            if usable {
                self.trim_locks();
                return Ok(grant.handle);
            }
            // The server reused a lock we are giving back: once our cancel is through, ask
            // again for a lock of our own.
            self.locks.wait_unused(target, grant.handle, true).await;
        }
    }

    /// Records an inode-bit lock that came with a metadata answer.
    /// (A grant of a lock being given back is not recorded: `still_holds` then says no, and
    /// the answer is not cached.)
    /// `sent`: the ticket of the request whose answer carried it.
    pub(crate) fn note_inode_lock(&self, grant: &LockGrant, sent: u64) {
        // An MDT grants locks on its own inodes only: the resource names the MDT.
        let target = LockTarget::Mdt(grant.resource.mdt_index());
        if self.locks.table().insert(target, grant, grant.resource, 0, sent) {
            self.trim_locks();
        }
    }

    /// Gives back the least recently used locks past the bound, in the background.
    fn trim_locks(&self) {
        let excess = self.locks.take_lru_excess();
        if excess.is_empty() {
            return;
        }
        let client = self.weak_self.clone();
        tokio::spawn(async move {
            let Some(client) = client.upgrade() else { return };
            // Unused locks (no queued write holds them): drop what they guard, tell the
            // servers, and only then forget them, so that a grant of the same lock meanwhile
            // is seen as one being given back.
            if let Some(hooks) = client.locks.hooks() {
                // Copied out: the kernel calls must not run under the cache's mutex, which
                // every read and write takes.
                let victims: Vec<Entry> = {
                    let table = client.locks.table();
                    excess.iter().filter_map(|key| table.get(key).cloned()).collect()
                };
                for e in &victims {
                    drop_caches(&*hooks, e);
                }
            }
            client.cancel_on_servers(excess.clone()).await;
            client.locks.remove_gone(&excess);
            client.locks.released.notify_waiters();
        });
    }

    /// Gives every cached lock back (an unmount, a client that ends): the servers need not
    /// call back a client that is gone. Best effort; what fails is left to the eviction.
    pub async fn release_locks(&self) {
        if let Err(e) = self.wbc_leave_all().await {
            tracing::warn!("the write-back cache's last batches failed: {e}");
        }
        let held = self.locks.table().clear();
        self.locks.released.notify_waiters();
        self.cancel_on_servers(held).await;
        // The MDT records its lock holders, and a recovery window after its server dies
        // waits for each: this client leaves that record (best effort: one it misses is
        // evicted at the next window's end).
        let mdts: Vec<u32> = self.map.current().map.mdts().map(|t| t.index).collect();
        for index in mdts {
            let mdt = LockTarget::Mdt(index);
            if let Err(e) = self.ldlm(&Caller::root(), mdt, lock::Disconnect {}).await {
                tracing::debug!("disconnecting from {mdt:?} failed: {e}");
            }
        }
    }

    /// Gives one lock back: the server first, then this client's table.
    pub(crate) async fn give_back_lock(&self, target: LockTarget, handle: LockHandle) {
        self.cancel_on_servers(vec![(target, handle)]).await;
        self.locks.remove_gone(&[(target, handle)]);
        self.locks.released.notify_waiters();
    }

    /// Tells each target which of its locks this client gave back, in batches. Best effort:
    /// a lock whose cancel is lost is answered "unknown" when it is called back.
    async fn cancel_on_servers(&self, locks: Vec<(LockTarget, LockHandle)>) {
        let mut by_target: HashMap<LockTarget, Vec<LockHandle>> = HashMap::new();
        for (t, h) in locks {
            by_target.entry(t).or_default().push(h);
        }
        for (target, handles) in by_target {
            for chunk in handles.chunks(CANCEL_BATCH_MAX) {
                if let Err(e) = self.ldlm(&Caller::root(), target, lock::Cancel { handles: chunk.to_vec() }).await {
                    tracing::debug!("giving back locks on {target:?} failed: {e}");
                }
            }
        }
    }

    /// Answers a server's callback.
    pub(crate) async fn answer_callback(&self, callback: CallbackRequest) -> WeftResult<CallbackAnswer> {
        match callback {
            CallbackRequest::Blocking { target, handle, wanted, .. } => {
                // A write-back lock: its directory's batches land first, and it goes whole.
                let wanted = if self.wbc_called_back(target, handle).await {
                    LockScope::Bits(lock::WBC_LOCK_BITS)
                } else {
                    wanted
                };
                Ok(self.locks.revoke(target, handle, wanted).await)
            }
            CallbackRequest::Glimpse { target, resource } => {
                if let Some(h) = self.locks.hooks() {
                    for file in self.locks.files_of(target, resource) {
                        h.flush(file).await;
                    }
                }
                Ok(CallbackAnswer::Flushed)
            }
        }
    }
}

/// Whether a callback comes from a change of the file's layout (an EX lock on its LAYOUT
/// bit): the kernel's pages of it may have come from objects it no longer reads (a mirror
/// gone stale), so they go too. Other changes (attributes, names) leave pages alone: the
/// extent locks guard them.
fn layout_changes(wanted: LockScope) -> bool {
    matches!(wanted, LockScope::Bits(b) if b & lock::bits::LAYOUT != 0)
}

/// The transport's view of a client: callbacks go to the client while it lives.
pub(crate) struct Callbacks(pub(crate) Weak<Client>);

impl weft_rpc::CallbackHandler for Callbacks {
    fn handle(&self, callback: CallbackRequest) -> BoxFuture<'static, WeftResult<CallbackAnswer>> {
        let client = self.0.clone();
        Box::pin(async move {
            match client.upgrade() {
                Some(c) => c.answer_callback(callback).await,
                // Unmounting: whatever it was, it is not held any more.
                None => Ok(CallbackAnswer::Unknown),
            }
        })
    }

    fn reconnected(&self, address: &str) {
        if let Some(client) = self.0.upgrade() {
            client.replay_after_reconnect(address);
        }
    }

    fn disconnected(&self, address: &str) {
        if let Some(client) = self.0.upgrade() {
            client.connection_lost(address);
        }
    }
}
