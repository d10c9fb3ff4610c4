//! The lock table: which locks are granted and which wait, as pure logic (no I/O, no clock,
//! no async), so that every rule can be tested exhaustively.
//!
//! # The rules
//!
//! * A lock belongs to an **owner** (a client id), covers a **scope** of one **resource**
//!   (a byte range of an object, or inode bits of an inode) in a **mode** (PR, PW, EX).
//! * Locks of the **same owner never conflict**. Locks of different owners conflict when
//!   their modes are incompatible (only PR + PR is compatible) and their scopes intersect:
//!   see [`conflicts`].
//! * Per resource there is a set of **granted** locks, which never conflict with each other,
//!   and a FIFO queue of **waiting** locks. A request waits when it conflicts with a granted
//!   lock of another owner, or with an earlier waiting request of another owner: the second
//!   rule is what keeps a stream of readers from starving a writer.
//! * Whenever a lock goes (cancel, eviction) or shrinks (convert), the waiting queue of its
//!   resource is walked in FIFO order and every request that no longer conflicts is granted.
//!   A request that still waits keeps blocking the later requests that conflict with it.
//! * An extent request may ask to be **expanded** (Lustre's lock expansion): it is granted
//!   the largest range around what it asked that no other owner's incompatible lock
//!   touches, so a client streaming through a file enqueues once instead of per write.
//!
//! The table never calls anybody back: that is the job of [`crate::namespace`], which asks
//! the holders listed by [`LockTable::blockers`] to give their locks back, and calls
//! [`LockTable::cancel`] or [`LockTable::convert`] with their answers.
//!
//! Handles come from a counter starting at 1 and are never reused, so a stale handle (a
//! client answering about a lock that is long gone) can never hit a newer lock. As handles
//! are assigned in arrival order, the waiting queue of a resource is simply its waiting
//! locks sorted by handle.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use weft_proto::lock::{Extent, LockGrant, LockHandle, LockMode, LockScope, EXTENT_EOF};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// How an enqueue may be satisfied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnqueueOptions {
    /// If the owner already holds a granted lock on the resource whose mode covers the
    /// wanted mode and whose scope contains the wanted scope, hand that lock out again
    /// (same handle) instead of creating a new one. A lock that a waiting request of
    /// another owner waits for is not handed out (it is being called back: Lustre does not
    /// match a lock with a callback pending); the request then queues like any other.
    pub reuse: bool,
    /// Extent scopes only: grant the largest extent around the asked one that no other
    /// owner's incompatible lock (granted or waiting) touches. No growth at all while an
    /// incompatible request of another owner waits on the resource. Bit scopes never grow.
    pub expand: bool,
}

/// One lock as the table knows it: a granted lock, or a request waiting in its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lock {
    pub handle: LockHandle,
    pub owner: u64,
    pub resource: Fid,
    pub mode: LockMode,
    /// What the lock covers. For a granted lock this is the final scope (possibly
    /// expanded, possibly narrowed by a convert); for a waiting one, what was asked.
    pub scope: LockScope,
    /// Granted (true) or waiting (false).
    pub granted: bool,
}

impl Lock {
    /// The lock as the wire carries it.
    pub fn grant(&self) -> LockGrant {
        LockGrant { handle: self.handle, resource: self.resource, mode: self.mode, scope: self.scope }
    }

    /// Whether the two locks may not be granted at once (the resource is not compared).
    pub fn conflicts_with(&self, other: &Lock) -> bool {
        conflicts(self.owner, self.mode, &self.scope, other.owner, other.mode, &other.scope)
    }
}

/// Whether a lock of owner `a_owner` in `a_mode` over `a_scope` and one of `b_owner` in
/// `b_mode` over `b_scope`, on the same resource, conflict: different owners, incompatible
/// modes, intersecting scopes.
pub fn conflicts(
    a_owner: u64,
    a_mode: LockMode,
    a_scope: &LockScope,
    b_owner: u64,
    b_mode: LockMode,
    b_scope: &LockScope,
) -> bool {
    a_owner != b_owner && !a_mode.compatible(b_mode) && a_scope.intersects(b_scope)
}

/// What [`LockTable::enqueue`] did with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// Granted at once (or, with [`EnqueueOptions::reuse`], an already granted lock).
    Granted(LockGrant),
    /// Queued. `blockers` are the granted locks of other owners it conflicts with now (the
    /// ones to call back). It may be empty: the request then waits only behind an earlier
    /// waiting request, and its blockers appear once that one is granted.
    Waiting { handle: LockHandle, blockers: Vec<Lock> },
}

/// The waiting requests an operation let through, in the order they were granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "the owners of newly granted locks are waiting to be told"]
pub struct Changes {
    /// Locks that went from waiting to granted, with their final (possibly expanded) scope.
    pub granted: Vec<Lock>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.granted.is_empty()
    }
}

/// One lock inside a resource's queues (the handle is the map key, the resource the map's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    owner: u64,
    mode: LockMode,
    scope: LockScope,
    /// Asked with [`EnqueueOptions::expand`]: applied when a waiting request is granted.
    expand: bool,
}

impl Entry {
    fn conflicts(&self, other: &Entry) -> bool {
        conflicts(self.owner, self.mode, &self.scope, other.owner, other.mode, &other.scope)
    }

    fn to_lock(self, handle: LockHandle, resource: Fid, granted: bool) -> Lock {
        Lock { handle, owner: self.owner, resource, mode: self.mode, scope: self.scope, granted }
    }
}

/// The locks of one resource. Both maps are keyed by handle; for `waiting`, handle order
/// is arrival order, i.e. the FIFO queue.
#[derive(Debug, Clone, Default)]
struct Resource {
    granted: BTreeMap<LockHandle, Entry>,
    waiting: BTreeMap<LockHandle, Entry>,
}

impl Resource {
    fn is_empty(&self) -> bool {
        self.granted.is_empty() && self.waiting.is_empty()
    }

    fn entry(&self, handle: LockHandle) -> Option<(Entry, bool)> {
        match self.granted.get(&handle) {
            Some(e) => Some((*e, true)),
            None => self.waiting.get(&handle).map(|e| (*e, false)),
        }
    }

    /// The scope to grant `e` with (it must be grantable): its own, or for an expandable
    /// extent the largest extent around it that touches no other owner's incompatible
    /// lock. `e` must not be in `waiting` itself.
    fn grown(&self, e: &Entry) -> LockScope {
        let LockScope::Extent(asked) = e.scope else { return e.scope };
        let incompatible = |o: &Entry| o.owner != e.owner && !o.mode.compatible(e.mode);
        if !e.expand || self.waiting.values().any(incompatible) {
            return e.scope;
        }
        let (mut start, mut end) = (0, EXTENT_EOF);
        for g in self.granted.values().filter(|g| incompatible(g)) {
            match g.scope {
                LockScope::Extent(x) if x.end < asked.start => start = start.max(x.end + 1),
                LockScope::Extent(x) if x.start > asked.end => end = end.min(x.start - 1),
                // Overlapping (impossible for a grantable request) or a bits scope on an
                // object (a caller bug): no growth.
                _ => return e.scope,
            }
        }
        LockScope::Extent(Extent { start, end })
    }
}

/// Every lock of one target: per resource the granted locks and the FIFO wait queue.
///
/// See the [module documentation](self) for the rules. Empty resources are removed, so
/// memory follows the number of live locks.
#[derive(Debug, Clone)]
pub struct LockTable {
    next_handle: LockHandle,
    resources: HashMap<Fid, Resource>,
    /// Where each live lock (granted or waiting) is.
    index: HashMap<LockHandle, Fid>,
    /// Each owner's live locks; owners without locks are removed.
    owners: HashMap<u64, BTreeSet<LockHandle>>,
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable::new()
    }
}

impl LockTable {
    pub fn new() -> LockTable {
        LockTable { next_handle: 1, resources: HashMap::new(), index: HashMap::new(), owners: HashMap::new() }
    }

    /// Asks for a lock: granted at once when it conflicts with no granted lock and no
    /// waiting request of another owner, queued otherwise. See [`EnqueueOptions`].
    pub fn enqueue(
        &mut self,
        owner: u64,
        resource: Fid,
        mode: LockMode,
        scope: LockScope,
        opts: EnqueueOptions,
    ) -> Enqueued {
        if opts.reuse {
            if let Some(held) = self.reusable(owner, resource, mode, &scope) {
                return Enqueued::Granted(held.grant());
            }
        }
        let handle = self.next_handle;
        self.next_handle += 1;
        self.index.insert(handle, resource);
        self.owners.entry(owner).or_default().insert(handle);
        let entry = Entry { owner, mode, scope, expand: opts.expand };
        let res = self.resources.entry(resource).or_default();
        let blockers: Vec<Lock> = res
            .granted
            .iter()
            .filter(|(_, g)| g.conflicts(&entry))
            .map(|(&h, g)| g.to_lock(h, resource, true))
            .collect();
        if !blockers.is_empty() || res.waiting.values().any(|w| w.conflicts(&entry)) {
            res.waiting.insert(handle, entry);
            return Enqueued::Waiting { handle, blockers };
        }
        let entry = Entry { scope: res.grown(&entry), ..entry };
        res.granted.insert(handle, entry);
        Enqueued::Granted(entry.to_lock(handle, resource, true).grant())
    }

    /// Lock replay: records a lock `owner` held from the target's previous server as
    /// granted under its old handle. False (nothing recorded) when the handle is in use or
    /// the lock conflicts with one granted or waiting: the owner must forget it. Later
    /// handles are numbered past it. The same lock of the same owner replayed again (a
    /// replay resent, or sent both on reconnecting and on seeing the restart in the map) is
    /// kept: true, nothing changes.
    pub fn replay(&mut self, owner: u64, grant: LockGrant) -> bool {
        if grant.handle == 0 {
            return false;
        }
        if let Some(&resource) = self.index.get(&grant.handle) {
            let held = self.resources.get(&resource).and_then(|r| r.granted.get(&grant.handle));
            return resource == grant.resource
                && held.is_some_and(|e| e.owner == owner && e.mode == grant.mode && e.scope == grant.scope);
        }
        let entry = Entry { owner, mode: grant.mode, scope: grant.scope, expand: false };
        let res = self.resources.entry(grant.resource).or_default();
        if res.granted.values().chain(res.waiting.values()).any(|g| g.conflicts(&entry)) {
            if res.granted.is_empty() && res.waiting.is_empty() {
                self.resources.remove(&grant.resource);
            }
            return false;
        }
        res.granted.insert(grant.handle, entry);
        self.index.insert(grant.handle, grant.resource);
        self.owners.entry(owner).or_default().insert(grant.handle);
        self.next_handle = self.next_handle.max(grant.handle.saturating_add(1));
        true
    }

    /// Gives a lock back, granted or waiting, and grants the waiting requests this lets
    /// through. A handle that is unknown or not `owner`'s changes nothing.
    pub fn cancel(&mut self, owner: u64, handle: LockHandle) -> Changes {
        match self.lock(handle) {
            Some(lock) if lock.owner == owner => {
                self.remove(handle);
                Changes { granted: self.settle(lock.resource) }
            }
            _ => Changes::default(),
        }
    }

    /// Narrows a granted lock of `owner` in place (Lustre's lock convert): `mode` must be
    /// covered by the lock's mode and `scope` contained in its scope (and not empty), e.g.
    /// an inode-bit lock dropping its UPDATE bit. Grants the waiting requests this lets
    /// through. Anything that would widen the lock is refused (`Invalid`, nothing changes):
    /// a caller wanting more enqueues a new lock. An unknown or foreign handle is
    /// `NotFound`, a waiting one `Invalid`.
    pub fn convert(&mut self, owner: u64, handle: LockHandle, mode: LockMode, scope: LockScope) -> WeftResult<Changes> {
        let lock = match self.lock(handle) {
            Some(lock) if lock.owner == owner => lock,
            _ => return Err(WeftError::not_found(format!("client {owner} holds no lock {handle}"))),
        };
        if !lock.granted {
            return Err(WeftError::invalid(format!("lock {handle} is waiting: only a granted lock converts")));
        }
        if !lock.mode.covers(mode) || !lock.scope.contains(&scope) || scope == LockScope::Bits(0) {
            return Err(WeftError::new(
                ErrorCode::Invalid,
                format!(
                    "lock {handle} ({:?} {:?}) cannot convert to {mode:?} {scope:?}: only narrowing converts",
                    lock.mode, lock.scope
                ),
            ));
        }
        if let Some(e) = self.resources.get_mut(&lock.resource).and_then(|r| r.granted.get_mut(&handle)) {
            e.mode = mode;
            e.scope = scope;
        }
        Ok(Changes { granted: self.settle(lock.resource) })
    }

    /// Removes every lock of `owner`, granted and waiting (eviction), and grants the
    /// waiting requests this lets through. Returns the removed handles, in handle order.
    pub fn drop_owner(&mut self, owner: u64) -> (Vec<LockHandle>, Changes) {
        let Some(handles) = self.owners.get(&owner).cloned() else { return (Vec::new(), Changes::default()) };
        let mut touched = BTreeSet::new();
        for &h in &handles {
            if let Some(fid) = self.remove(h) {
                touched.insert(fid);
            }
        }
        let granted = touched.into_iter().flat_map(|fid| self.settle(fid)).collect();
        (handles.into_iter().collect(), Changes { granted })
    }

    /// For a waiting lock: the granted locks of other owners it conflicts with now. Empty
    /// for a granted or unknown handle (and for a request waiting only behind an earlier
    /// waiting one).
    pub fn blockers(&self, handle: LockHandle) -> Vec<Lock> {
        let Some(&fid) = self.index.get(&handle) else { return Vec::new() };
        let Some(res) = self.resources.get(&fid) else { return Vec::new() };
        let Some(w) = res.waiting.get(&handle) else { return Vec::new() };
        res.granted.iter().filter(|(_, g)| g.conflicts(w)).map(|(&h, g)| g.to_lock(h, fid, true)).collect()
    }

    /// One lock, granted or waiting.
    pub fn lock(&self, handle: LockHandle) -> Option<Lock> {
        let fid = *self.index.get(&handle)?;
        let (entry, granted) = self.resources.get(&fid)?.entry(handle)?;
        Some(entry.to_lock(handle, fid, granted))
    }

    /// The granted locks of `resource`, in handle order.
    pub fn granted(&self, resource: Fid) -> impl Iterator<Item = Lock> + '_ {
        let res = self.resources.get(&resource);
        res.into_iter().flat_map(move |r| r.granted.iter().map(move |(&h, e)| e.to_lock(h, resource, true)))
    }

    /// The waiting locks of `resource`, in FIFO order.
    pub fn waiting(&self, resource: Fid) -> impl Iterator<Item = Lock> + '_ {
        let res = self.resources.get(&resource);
        res.into_iter().flat_map(move |r| r.waiting.iter().map(move |(&h, e)| e.to_lock(h, resource, false)))
    }

    /// The granted PW and EX extent locks of `resource` held by owners other than
    /// `except_owner`: whoever may have written data the object does not hold yet (the
    /// clients to glimpse before answering its size).
    pub fn holders_of_write(&self, resource: Fid, except_owner: u64) -> impl Iterator<Item = Lock> + '_ {
        self.granted(resource).filter(move |l| {
            l.owner != except_owner && l.mode != LockMode::Pr && matches!(l.scope, LockScope::Extent(_))
        })
    }

    /// The granted lock of `owner` that an enqueue with [`EnqueueOptions::reuse`] hands out
    /// again: its mode covers `mode`, its scope contains `scope`, and no waiting request of
    /// another owner waits for it.
    pub fn reusable(&self, owner: u64, resource: Fid, mode: LockMode, scope: &LockScope) -> Option<Lock> {
        let res = self.resources.get(&resource)?;
        let (&handle, e) = res.granted.iter().find(|(_, e)| {
            e.owner == owner
                && e.mode.covers(mode)
                && e.scope.contains(scope)
                && !res.waiting.values().any(|w| w.conflicts(e))
        })?;
        Some(e.to_lock(handle, resource, true))
    }

    /// How many requests wait in the queue of `resource`.
    pub fn waiting_count(&self, resource: Fid) -> usize {
        self.resources.get(&resource).map_or(0, |res| res.waiting.len())
    }

    /// How many locks (granted and waiting) `owner` has.
    pub fn owner_count(&self, owner: u64) -> usize {
        self.owners.get(&owner).map_or(0, BTreeSet::len)
    }

    /// How many locks (granted and waiting) the table holds.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// How many resources have at least one lock.
    pub fn resource_count(&self) -> usize {
        self.resources.len()
    }

    /// Takes a lock out of every structure, without granting anything. Returns its resource.
    fn remove(&mut self, handle: LockHandle) -> Option<Fid> {
        let fid = self.index.remove(&handle)?;
        let res = self.resources.get_mut(&fid)?;
        let entry = res.granted.remove(&handle).or_else(|| res.waiting.remove(&handle))?;
        if let Some(handles) = self.owners.get_mut(&entry.owner) {
            handles.remove(&handle);
            if handles.is_empty() {
                self.owners.remove(&entry.owner);
            }
        }
        Some(fid)
    }

    /// Walks the wait queue of `fid` in FIFO order and grants every request that conflicts
    /// neither with a granted lock nor with an earlier request that still waits. Removes
    /// the resource if it is empty. Returns the newly granted locks.
    fn settle(&mut self, fid: Fid) -> Vec<Lock> {
        let Some(res) = self.resources.get_mut(&fid) else { return Vec::new() };
        let mut granted = Vec::new();
        let mut still_waiting: Vec<Entry> = Vec::new();
        let queue: Vec<(LockHandle, Entry)> = res.waiting.iter().map(|(&h, e)| (h, *e)).collect();
        for (handle, e) in queue {
            if res.granted.values().any(|g| g.conflicts(&e)) || still_waiting.iter().any(|w| w.conflicts(&e)) {
                still_waiting.push(e);
                continue;
            }
            res.waiting.remove(&handle);
            let e = Entry { scope: res.grown(&e), ..e };
            res.granted.insert(handle, e);
            granted.push(e.to_lock(handle, fid, true));
        }
        if res.is_empty() {
            self.resources.remove(&fid);
        }
        granted
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
