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
            let held = self.resources.get(&resource).and_then(|res| {
                res.granted.iter().find(|(_, e)| {
                    e.owner == owner
                        && e.mode.covers(mode)
                        && e.scope.contains(&scope)
                        && !res.waiting.values().any(|w| w.conflicts(e))
                })
            });
            if let Some((&handle, e)) = held {
                return Enqueued::Granted(e.to_lock(handle, resource, true).grant());
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
mod tests {
    use super::*;
    use weft_proto::lock::bits;

    const OBJ: Fid = Fid::new(0x1_0000_0000, 1, 0);
    const INODE: Fid = Fid::new(0x2_0000_0400, 7, 0);
    const PLAIN: EnqueueOptions = EnqueueOptions { reuse: false, expand: false };
    const EXPAND: EnqueueOptions = EnqueueOptions { reuse: false, expand: true };
    const MODES: [LockMode; 3] = [LockMode::Pr, LockMode::Pw, LockMode::Ex];

    fn ext(start: u64, end: u64) -> LockScope {
        LockScope::Extent(Extent { start, end })
    }

    fn granted_handle(e: &Enqueued) -> LockHandle {
        match e {
            Enqueued::Granted(g) => g.handle,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    fn waiting_handle(e: &Enqueued) -> LockHandle {
        match e {
            Enqueued::Waiting { handle, .. } => *handle,
            other => panic!("expected to wait, got {other:?}"),
        }
    }

    // ----- readable unit tests -----

    #[test]
    fn readers_share() {
        let mut t = LockTable::new();
        let a = t.enqueue(1, OBJ, LockMode::Pr, ext(0, 99), PLAIN);
        let b = t.enqueue(2, OBJ, LockMode::Pr, ext(50, 149), PLAIN);
        assert_eq!(granted_handle(&a), 1);
        assert_eq!(granted_handle(&b), 2);
        assert_eq!(t.granted(OBJ).count(), 2);
    }

    #[test]
    fn writer_blocks_reader_of_another_owner_until_cancelled() {
        let mut t = LockTable::new();
        let w = granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN));
        let r = t.enqueue(2, OBJ, LockMode::Pr, ext(10, 10), PLAIN);
        let Enqueued::Waiting { handle, blockers } = r else { panic!("reader granted under a writer") };
        assert_eq!(blockers.len(), 1);
        assert_eq!((blockers[0].handle, blockers[0].owner), (w, 1));
        assert_eq!(t.blockers(handle), blockers);
        // A reader of a range the writer does not cover is not blocked.
        granted_handle(&t.enqueue(3, OBJ, LockMode::Pr, ext(100, 200), PLAIN));

        let changes = t.cancel(1, w);
        assert_eq!(changes.granted.len(), 1);
        assert_eq!(
            changes.granted[0].grant(),
            LockGrant { handle, resource: OBJ, mode: LockMode::Pr, scope: ext(10, 10) }
        );
        assert!(t.lock(handle).unwrap().granted);
    }

    #[test]
    fn same_owner_never_blocks_itself() {
        let mut t = LockTable::new();
        for mode in MODES {
            granted_handle(&t.enqueue(1, OBJ, mode, ext(0, 10), PLAIN));
            granted_handle(&t.enqueue(1, INODE, mode, LockScope::Bits(bits::ALL), PLAIN));
        }
        assert_eq!(t.owner_count(1), 6);
    }

    #[test]
    fn fifo_writer_is_not_starved_by_later_readers() {
        let mut t = LockTable::new();
        let r1 = granted_handle(&t.enqueue(1, OBJ, LockMode::Pr, ext(0, 99), PLAIN));
        let w = waiting_handle(&t.enqueue(2, OBJ, LockMode::Pw, ext(0, 99), PLAIN));
        // A reader arriving after the writer queues behind it though it is compatible with
        // every granted lock: it has no granted blocker, only the waiting writer ahead.
        let r3 = t.enqueue(3, OBJ, LockMode::Pr, ext(50, 50), PLAIN);
        assert_eq!(r3, Enqueued::Waiting { handle: 3, blockers: vec![] });

        let changes = t.cancel(1, r1);
        assert_eq!(changes.granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![w]);
        // Now the reader's blocker is the writer.
        assert_eq!(t.blockers(3).iter().map(|l| l.handle).collect::<Vec<_>>(), vec![w]);
        let changes = t.cancel(2, w);
        assert_eq!(changes.granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![3]);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_cancel_does_not_let_a_request_pass_an_earlier_one_that_still_waits() {
        let mut t = LockTable::new();
        granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 9), PLAIN));
        let right = granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(20, 29), PLAIN));
        let writer = waiting_handle(&t.enqueue(2, OBJ, LockMode::Pw, ext(0, 29), PLAIN));
        let reader = waiting_handle(&t.enqueue(3, OBJ, LockMode::Pr, ext(20, 20), PLAIN));
        // The reader's only granted blocker goes, but the writer ahead of it still waits.
        assert!(t.cancel(1, right).is_empty());
        assert!(!t.lock(writer).unwrap().granted && !t.lock(reader).unwrap().granted);
        assert!(t.blockers(reader).is_empty());
    }

    #[test]
    fn expansion_to_whole_when_alone_and_up_to_the_neighbours_otherwise() {
        let mut t = LockTable::new();
        let g = t.enqueue(1, OBJ, LockMode::Pw, ext(4096, 8191), EXPAND);
        let Enqueued::Granted(g) = g else { panic!() };
        assert_eq!(g.scope, LockScope::Extent(Extent::WHOLE));
        assert!(t.cancel(1, g.handle).is_empty());

        granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 999), PLAIN));
        granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(10_000, 10_999), PLAIN));
        // Owner 2 grows up to owner 1's locks on both sides.
        let Enqueued::Granted(g) = t.enqueue(2, OBJ, LockMode::Pr, ext(5000, 5000), EXPAND) else { panic!() };
        assert_eq!(g.scope, ext(1000, 9999));
        // Compatible locks do not limit growth: another reader grows over owner 2's lock.
        let Enqueued::Granted(g) = t.enqueue(3, OBJ, LockMode::Pr, ext(1000, 1000), EXPAND) else { panic!() };
        assert_eq!(g.scope, ext(1000, 9999));
        // Without `expand`, exactly what was asked.
        let Enqueued::Granted(g) = t.enqueue(3, OBJ, LockMode::Pr, ext(20_000, 20_000), PLAIN) else { panic!() };
        assert_eq!(g.scope, ext(20_000, 20_000));
    }

    #[test]
    fn no_expansion_while_a_conflicting_request_waits() {
        let mut t = LockTable::new();
        granted_handle(&t.enqueue(1, OBJ, LockMode::Pr, ext(0, 9), PLAIN));
        waiting_handle(&t.enqueue(2, OBJ, LockMode::Pw, ext(0, 9), PLAIN));
        let Enqueued::Granted(g) = t.enqueue(3, OBJ, LockMode::Pr, ext(100, 199), EXPAND) else { panic!() };
        assert_eq!(g.scope, ext(100, 199));
    }

    #[test]
    fn reuse_hands_out_a_covering_lock() {
        let mut t = LockTable::new();
        let reuse = EnqueueOptions { reuse: true, expand: false };
        let w = granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN));
        let again = t.enqueue(1, OBJ, LockMode::Pr, ext(10, 20), reuse);
        assert_eq!(
            again,
            Enqueued::Granted(LockGrant { handle: w, resource: OBJ, mode: LockMode::Pw, scope: ext(0, 99) })
        );
        // Not covering (wider range, or stronger mode): a new lock.
        assert_ne!(granted_handle(&t.enqueue(1, OBJ, LockMode::Pr, ext(50, 150), reuse)), w);
        assert_ne!(granted_handle(&t.enqueue(1, OBJ, LockMode::Ex, ext(10, 20), reuse)), w);
        // Another owner's lock is never reused.
        assert_eq!(waiting_handle(&t.enqueue(2, OBJ, LockMode::Pr, ext(10, 20), reuse)), 4);
        assert_eq!(t.len(), 4);
        // Nor is one that a waiting request waits for (it is being called back): the new
        // request queues behind the waiting one.
        assert_eq!(waiting_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(10, 20), reuse)), 5);
    }

    #[test]
    fn bits_convert_drops_update_and_grants_the_waiting_update_ex() {
        let mut t = LockTable::new();
        let lookup_update = LockScope::Bits(bits::LOOKUP | bits::UPDATE);
        let r = granted_handle(&t.enqueue(1, INODE, LockMode::Pr, lookup_update, PLAIN));
        let ex = waiting_handle(&t.enqueue(2, INODE, LockMode::Ex, LockScope::Bits(bits::UPDATE), PLAIN));
        // Widening is refused and changes nothing.
        let err = t.convert(1, r, LockMode::Pr, LockScope::Bits(bits::ALL)).unwrap_err();
        assert_eq!(err.code, ErrorCode::Invalid);
        assert_eq!(t.convert(1, r, LockMode::Pw, lookup_update).unwrap_err().code, ErrorCode::Invalid);
        assert_eq!(t.convert(2, r, LockMode::Pr, LockScope::Bits(bits::LOOKUP)).unwrap_err().code, ErrorCode::NotFound);
        assert_eq!(t.convert(2, ex, LockMode::Ex, LockScope::Bits(bits::UPDATE)).unwrap_err().code, ErrorCode::Invalid);
        assert!(!t.lock(ex).unwrap().granted);

        let changes = t.convert(1, r, LockMode::Pr, LockScope::Bits(bits::LOOKUP)).unwrap();
        assert_eq!(changes.granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![ex]);
        assert_eq!(t.lock(r).unwrap().scope, LockScope::Bits(bits::LOOKUP));
        // Bits never grow, even when asked to.
        let g = t.enqueue(3, INODE, LockMode::Pr, LockScope::Bits(bits::LAYOUT), EXPAND);
        assert_eq!(
            g,
            Enqueued::Granted(LockGrant {
                handle: 3,
                resource: INODE,
                mode: LockMode::Pr,
                scope: LockScope::Bits(bits::LAYOUT)
            })
        );
    }

    #[test]
    fn drop_owner_removes_everything_and_frees_resources() {
        let mut t = LockTable::new();
        granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 9), PLAIN));
        granted_handle(&t.enqueue(1, INODE, LockMode::Ex, LockScope::Bits(bits::UPDATE), PLAIN));
        let w = waiting_handle(&t.enqueue(2, OBJ, LockMode::Pw, ext(5, 5), PLAIN));
        waiting_handle(&t.enqueue(1, OBJ, LockMode::Pr, ext(5, 5), PLAIN));
        let (removed, changes) = t.drop_owner(1);
        assert_eq!(removed, vec![1, 2, 4]);
        assert_eq!(changes.granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![w]);
        assert_eq!((t.owner_count(1), t.len(), t.resource_count()), (0, 1, 1));
        let _ = t.cancel(2, w);
        assert_eq!((t.len(), t.resource_count()), (0, 0));
        assert!(t.owners.is_empty() && t.index.is_empty());
    }

    #[test]
    fn holders_of_write_lists_other_owners_extent_writers() {
        let mut t = LockTable::new();
        granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 9), PLAIN));
        granted_handle(&t.enqueue(2, OBJ, LockMode::Pr, ext(10, 19), PLAIN));
        granted_handle(&t.enqueue(3, OBJ, LockMode::Ex, ext(20, 29), PLAIN));
        waiting_handle(&t.enqueue(4, OBJ, LockMode::Pw, ext(0, 29), PLAIN));
        let owners: Vec<u64> = t.holders_of_write(OBJ, 3).map(|l| l.owner).collect();
        assert_eq!(owners, vec![1]);
    }

    // ----- exhaustive and pseudo-random checks -----

    /// Every lock, sorted by handle.
    fn snapshot(t: &LockTable) -> Vec<Lock> {
        let mut all: Vec<Lock> = t.index.keys().map(|&h| t.lock(h).unwrap()).collect();
        all.sort_by_key(|l| l.handle);
        all
    }

    /// The invariants that hold after every operation.
    fn check_invariants(t: &LockTable) {
        // The structures agree with each other; nothing empty is kept.
        let mut count = 0;
        for (fid, res) in &t.resources {
            assert!(!res.is_empty(), "empty resource kept");
            for (h, e) in res.granted.iter().chain(res.waiting.iter()) {
                count += 1;
                assert_eq!(t.index.get(h), Some(fid));
                assert!(t.owners[&e.owner].contains(h));
                assert!(*h < t.next_handle);
            }
            assert!(res.granted.keys().all(|h| !res.waiting.contains_key(h)));
        }
        assert_eq!(count, t.index.len());
        assert_eq!(t.owners.values().map(BTreeSet::len).sum::<usize>(), count);
        assert!(t.owners.values().all(|s| !s.is_empty()));

        let all = snapshot(t);
        for a in &all {
            let others = all.iter().filter(|b| b.resource == a.resource && b.handle != a.handle);
            if a.granted {
                // No two granted locks of different owners conflict.
                for b in others.filter(|b| b.granted) {
                    assert!(!a.conflicts_with(b), "granted locks conflict: {a:?} {b:?}");
                }
            } else {
                // A waiting lock is blocked by a granted lock or an earlier waiting one
                // (so nothing that could be granted is left waiting).
                let blocked = others.filter(|b| b.granted || b.handle < a.handle).any(|b| a.conflicts_with(b));
                assert!(blocked, "{a:?} waits for nothing in {all:?}");
                let expected: Vec<Lock> = all
                    .iter()
                    .filter(|b| b.resource == a.resource && b.granted && a.conflicts_with(b))
                    .copied()
                    .collect();
                assert_eq!(t.blockers(a.handle), expected);
            }
        }
    }

    /// What a test sequence does.
    #[derive(Debug, Clone, Copy)]
    enum Op {
        Enqueue { owner: u64, resource: Fid, mode: LockMode, scope: LockScope, opts: EnqueueOptions },
        Cancel { owner: u64, handle: LockHandle },
        Convert { owner: u64, handle: LockHandle, mode: LockMode, scope: LockScope },
        DropOwner { owner: u64 },
    }

    /// `changes` lists exactly the locks that went from waiting to granted between `before`
    /// and `t`, and granted locks other than `touched` did not change.
    fn check_changes(before: &[Lock], t: &LockTable, changes: &Changes, touched: Option<LockHandle>) {
        let after = snapshot(t);
        let now = |h: LockHandle| after.iter().find(|l| l.handle == h).copied();
        let mut promoted: Vec<Lock> =
            before.iter().filter(|l| !l.granted).filter_map(|l| now(l.handle)).filter(|l| l.granted).collect();
        let mut listed = changes.granted.clone();
        promoted.sort_by_key(|l| l.handle);
        listed.sort_by_key(|l| l.handle);
        assert_eq!(promoted, listed, "changes do not list the newly granted locks");
        for old in before {
            let new = now(old.handle);
            if old.granted && Some(old.handle) != touched {
                assert_eq!(new, Some(*old), "a granted lock changed behind its owner's back");
            }
            if !old.granted && Some(old.handle) != touched {
                // A waiting lock leaves only by being granted, or with its owner.
                if let Some(new) = new {
                    assert_eq!((new.owner, new.mode, new.resource), (old.owner, old.mode, old.resource));
                    assert!(new.scope.contains(&old.scope));
                    if new.granted {
                        check_grant(&after, &new, &old.scope, None);
                        // FIFO: it did not pass an earlier request that still waits and
                        // that it conflicts with.
                        let passed = after.iter().any(|w| {
                            !w.granted && w.resource == new.resource && w.handle < new.handle && w.conflicts_with(&new)
                        });
                        assert!(!passed, "{new:?} was granted ahead of a conflicting earlier request");
                    } else {
                        assert_eq!(new.scope, old.scope);
                    }
                }
            }
        }
    }

    /// A fresh grant of `asked`: contains it, conflicts with nothing granted, and if it grew,
    /// with nothing waiting either, and could not grow further. `expand` None = unknown.
    fn check_grant(all: &[Lock], g: &Lock, asked: &LockScope, expand: Option<bool>) {
        assert!(g.scope.contains(asked));
        let others: Vec<&Lock> = all.iter().filter(|l| l.resource == g.resource && l.handle != g.handle).collect();
        for o in &others {
            if o.granted {
                assert!(!g.conflicts_with(o), "{g:?} granted over {o:?}");
            }
        }
        match (g.scope, asked) {
            (LockScope::Extent(got), LockScope::Extent(a)) if got != *a => {
                assert_ne!(expand, Some(false), "grew without being asked");
                let incompatible = |o: &&&Lock| o.owner != g.owner && !o.mode.compatible(g.mode);
                assert!(
                    !others.iter().filter(incompatible).any(|o| !o.granted),
                    "grew while a conflicting request waits"
                );
                // Maximal: one more unit on either side would touch a conflicting lock.
                let probe = |x: u64| Lock { scope: ext(x, x), ..*g };
                if got.start > 0 {
                    assert!(
                        others.iter().any(|o| o.granted && probe(got.start - 1).conflicts_with(o)),
                        "{g:?} could grow left"
                    );
                }
                if got.end < EXTENT_EOF {
                    assert!(
                        others.iter().any(|o| o.granted && probe(got.end + 1).conflicts_with(o)),
                        "{g:?} could grow right"
                    );
                }
            }
            _ => assert_eq!(g.scope, *asked),
        }
        // When allowed to grow, it grew as far as it could.
        if expand == Some(true) {
            if let (LockScope::Extent(got), LockScope::Extent(_)) = (g.scope, asked) {
                let incompatible_waiting =
                    others.iter().any(|o| !o.granted && o.owner != g.owner && !o.mode.compatible(g.mode));
                if !incompatible_waiting {
                    let probe = |x: u64| Lock { scope: ext(x, x), ..*g };
                    if got.start > 0 {
                        assert!(others.iter().any(|o| o.granted && probe(got.start - 1).conflicts_with(o)));
                    }
                    if got.end < EXTENT_EOF {
                        assert!(others.iter().any(|o| o.granted && probe(got.end + 1).conflicts_with(o)));
                    }
                }
            }
        }
    }

    /// Applies `op` to `t`, checking everything it promises, then the invariants.
    fn apply(t: &mut LockTable, op: Op) {
        let before = snapshot(t);
        let next_before = t.next_handle;
        match op {
            Op::Enqueue { owner, resource, mode, scope, opts } => {
                let doomed =
                    |l: &Lock| before.iter().any(|w| !w.granted && w.resource == l.resource && w.conflicts_with(l));
                let reusable = before
                    .iter()
                    .find(|l| {
                        l.granted
                            && l.owner == owner
                            && l.resource == resource
                            && l.mode.covers(mode)
                            && l.scope.contains(&scope)
                            && !doomed(l)
                    })
                    .filter(|_| opts.reuse)
                    .copied();
                let result = t.enqueue(owner, resource, mode, scope, opts);
                if let Some(held) = reusable {
                    assert_eq!(result, Enqueued::Granted(held.grant()));
                    assert_eq!(snapshot(t), before);
                    assert_eq!(t.next_handle, next_before);
                } else {
                    let after = snapshot(t);
                    let handle = match &result {
                        Enqueued::Granted(g) => g.handle,
                        Enqueued::Waiting { handle, .. } => *handle,
                    };
                    assert_eq!(handle, next_before, "handles are not taken from the counter");
                    assert_eq!(after.len(), before.len() + 1);
                    assert!(before.iter().all(|l| after.contains(l)), "an enqueue changed other locks");
                    let new = t.lock(handle).unwrap();
                    assert_eq!((new.owner, new.resource, new.mode), (owner, resource, mode));
                    match result {
                        Enqueued::Granted(g) => {
                            assert_eq!(g, new.grant());
                            check_grant(&after, &new, &scope, Some(opts.expand));
                            // Granted at once: nothing of another owner waits that it conflicts with
                            // on the asked scope (FIFO).
                            let asked = Lock { scope, ..new };
                            assert!(!before.iter().any(|o| o.resource == resource && asked.conflicts_with(o)));
                        }
                        Enqueued::Waiting { blockers, .. } => {
                            assert!(!new.granted);
                            assert_eq!(new.scope, scope);
                            assert_eq!(blockers, t.blockers(handle));
                        }
                    }
                }
            }
            Op::Cancel { owner, handle } => {
                let target = before.iter().find(|l| l.handle == handle).copied();
                let changes = t.cancel(owner, handle);
                match target {
                    Some(l) if l.owner == owner => {
                        assert!(t.lock(handle).is_none());
                        check_changes(&before, t, &changes, Some(handle));
                    }
                    _ => {
                        assert!(changes.is_empty());
                        assert_eq!(snapshot(t), before, "a cancel of a foreign or unknown handle changed something");
                    }
                }
            }
            Op::Convert { owner, handle, mode, scope } => {
                let target = before.iter().find(|l| l.handle == handle).copied();
                let result = t.convert(owner, handle, mode, scope);
                let valid = target.is_some_and(|l| {
                    l.owner == owner
                        && l.granted
                        && l.mode.covers(mode)
                        && l.scope.contains(&scope)
                        && scope != LockScope::Bits(0)
                });
                match result {
                    Ok(changes) => {
                        assert!(valid, "convert accepted {op:?} of {target:?}");
                        let now = t.lock(handle).unwrap();
                        assert_eq!((now.mode, now.scope, now.granted), (mode, scope, true));
                        check_changes(&before, t, &changes, Some(handle));
                    }
                    Err(_) => {
                        assert!(!valid, "convert refused {op:?} of {target:?}");
                        assert_eq!(snapshot(t), before);
                    }
                }
            }
            Op::DropOwner { owner } => {
                let (removed, changes) = t.drop_owner(owner);
                let expected: Vec<LockHandle> = before.iter().filter(|l| l.owner == owner).map(|l| l.handle).collect();
                assert_eq!(removed, expected);
                assert_eq!(t.owner_count(owner), 0);
                assert!(snapshot(t).iter().all(|l| l.owner != owner));
                let kept: Vec<Lock> = before.iter().filter(|l| l.owner != owner).copied().collect();
                check_changes(&kept, t, &changes, None);
            }
        }
        assert!(t.next_handle >= next_before);
        check_invariants(t);
    }

    /// The extents over a small domain: ends in 0..=3 or EOF.
    fn extents(points: u64) -> Vec<LockScope> {
        let mut all = Vec::new();
        for start in 0..points {
            for end in (start..points).chain([EXTENT_EOF]) {
                all.push(ext(start, end));
            }
        }
        all
    }

    /// Depth-first over every sequence of `depth` operations from `alphabet` (the handles
    /// it names are whatever the sequence created).
    fn exhaust(t: &LockTable, alphabet: &[Op], depth: usize, visited: &mut usize) {
        if depth == 0 {
            return;
        }
        for &op in alphabet {
            let mut next = t.clone();
            apply(&mut next, op);
            *visited += 1;
            exhaust(&next, alphabet, depth - 1, visited);
        }
    }

    fn ops_on_handles(owners: &[u64], handles: std::ops::RangeInclusive<LockHandle>) -> Vec<Op> {
        let mut ops = Vec::new();
        for &owner in owners {
            ops.push(Op::DropOwner { owner });
            for handle in handles.clone() {
                ops.push(Op::Cancel { owner, handle });
            }
        }
        ops
    }

    #[test]
    fn exhaustive_extents() {
        let owners = [1, 2];
        let mut alphabet = Vec::new();
        for owner in owners {
            for mode in MODES {
                for scope in extents(2) {
                    for opts in [PLAIN, EXPAND] {
                        alphabet.push(Op::Enqueue { owner, resource: OBJ, mode, scope, opts });
                    }
                }
                let opts = EnqueueOptions { reuse: true, expand: false };
                alphabet.push(Op::Enqueue { owner, resource: OBJ, mode, scope: ext(1, 1), opts });
            }
        }
        alphabet.extend(ops_on_handles(&owners, 1..=3));
        for handle in 1..=2 {
            for owner in owners {
                alphabet.push(Op::Convert { owner, handle, mode: LockMode::Pr, scope: ext(1, 1) });
                alphabet.push(Op::Convert { owner, handle, mode: LockMode::Ex, scope: ext(0, EXTENT_EOF) });
            }
        }
        let mut visited = 0;
        exhaust(&LockTable::new(), &alphabet, 3, &mut visited);
        assert!(visited > 500_000, "{visited}");
    }

    #[test]
    fn exhaustive_bits() {
        let owners = [1, 2, 3];
        let mut alphabet = Vec::new();
        for owner in owners {
            for mode in MODES {
                for b in 1..=3u8 {
                    alphabet.push(Op::Enqueue { owner, resource: INODE, mode, scope: LockScope::Bits(b), opts: PLAIN });
                }
                alphabet.push(Op::Enqueue {
                    owner,
                    resource: INODE,
                    mode,
                    scope: LockScope::Bits(1),
                    opts: EnqueueOptions { reuse: true, expand: true },
                });
            }
        }
        alphabet.extend(ops_on_handles(&owners, 1..=3));
        for handle in 1..=3 {
            for owner in owners {
                for b in 0..=3u8 {
                    alphabet.push(Op::Convert { owner, handle, mode: LockMode::Pr, scope: LockScope::Bits(b) });
                }
            }
        }
        let mut visited = 0;
        exhaust(&LockTable::new(), &alphabet, 3, &mut visited);
        assert!(visited > 500_000, "{visited}");
    }

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn pick<T: Copy>(&mut self, from: &[T]) -> T {
            from[self.below(from.len() as u64) as usize]
        }
    }

    /// A scope inside `scope` (for converts), or any scope of its kind now and then.
    fn sub_scope(rng: &mut Rng, scope: LockScope, all_extents: &[LockScope]) -> LockScope {
        match scope {
            LockScope::Bits(b) if rng.below(4) > 0 => LockScope::Bits(b & rng.below(16) as u8),
            LockScope::Bits(_) => LockScope::Bits(rng.below(16) as u8),
            LockScope::Extent(e) if rng.below(4) > 0 => {
                let inside: Vec<LockScope> =
                    all_extents.iter().copied().filter(|s| LockScope::Extent(e).contains(s)).collect();
                rng.pick(&inside)
            }
            LockScope::Extent(_) => rng.pick(all_extents),
        }
    }

    #[test]
    fn random_sequences() {
        let all_extents = extents(4);
        let mut rng = Rng(0x5eed_1234_abcd_9876);
        for _ in 0..4000 {
            let mut t = LockTable::new();
            for _ in 0..40 {
                let owner = 1 + rng.below(3);
                let live: Vec<LockHandle> = t.index.keys().copied().collect();
                let handle =
                    if !live.is_empty() && rng.below(5) > 0 { rng.pick(&live) } else { rng.below(t.next_handle + 2) };
                // The right owner most of the time, to exercise the effective paths.
                let owner_of = |t: &LockTable, rng: &mut Rng| match t.lock(handle) {
                    Some(l) if rng.below(6) > 0 => l.owner,
                    _ => owner,
                };
                let op = match rng.below(20) {
                    0..=10 => {
                        let (resource, scope) = if rng.below(2) == 0 {
                            (OBJ, rng.pick(&all_extents))
                        } else {
                            (INODE, LockScope::Bits(1 + rng.below(15) as u8))
                        };
                        let opts = EnqueueOptions { reuse: rng.below(3) == 0, expand: rng.below(2) == 0 };
                        Op::Enqueue { owner, resource, mode: rng.pick(&MODES), scope, opts }
                    }
                    11..=15 => Op::Cancel { owner: owner_of(&t, &mut rng), handle },
                    16..=18 => {
                        let current = t.lock(handle).map_or(ext(0, 0), |l| l.scope);
                        Op::Convert {
                            owner: owner_of(&t, &mut rng),
                            handle,
                            mode: rng.pick(&MODES),
                            scope: sub_scope(&mut rng, current, &all_extents),
                        }
                    }
                    _ => Op::DropOwner { owner },
                };
                apply(&mut t, op);
            }
            // Everything leaves cleanly.
            for owner in 1..=3 {
                apply(&mut t, Op::DropOwner { owner });
            }
            assert!(t.is_empty() && t.resources.is_empty() && t.owners.is_empty());
        }
    }
}
