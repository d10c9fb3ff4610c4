//! The lock cache's state, and every decision about it, without I/O or waiting: which
//! cached lock a read or write may use, what a blocking callback does to a lock, which
//! locks the LRU bound gives back. [`super::LockCache`] keeps one table behind a mutex and
//! does the waiting and the calls these decisions ask for.

use std::collections::HashMap;
use weft_proto::lock::{LockGrant, LockHandle, LockMode, LockScope, LockTarget};
use weft_proto::Fid;

/// A lock by the target that granted it and its handle there.
pub(crate) type LockKey = (LockTarget, LockHandle);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub resource: Fid,
    pub mode: LockMode,
    pub scope: LockScope,
    /// The file whose data an extent lock guards (for an inode lock: the inode).
    pub file: Fid,
    pub users: u32,
    pub phase: Phase,
    pub last_used: u64,
    /// The last request ticket issued when the lock was called back or chosen to go
    /// ([`super::LockCache::ticket`]; 0: never). A grant of it carried by an answer to a
    /// request sent before then may be older than the callback: it must not bring back the
    /// bits the callback took, nor the lock once it is gone.
    pub called_back_at: u64,
}

/// Where a lock is in its life on this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Held: I/O may use it, the kernel may cache what it guards.
    Granted,
    /// Called back, the kernel's pages being dropped: I/O already under way, and I/O that
    /// arrives now, still uses it (the server grants the conflicting lock only after the
    /// answer, so what it reads is current). Such I/O must not wait for a new lock: the
    /// kernel holds its pages locked meanwhile, and the invalidation waits on them.
    Lockless,
    /// Being given back: new I/O enqueues a new lock (queued on the server behind the
    /// conflicting request).
    Draining,
}

/// What a blocking callback does to a lock ([`LockTable::callback`] has already moved the
/// lock to where the decision leaves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Callback {
    /// This client does not hold it (perhaps its grant is still on the way).
    Unknown,
    /// An inode-bit lock keeps the bits nobody else wants (a chmod leaves a cached name
    /// alone): drop what `dropped` covered, answer `Narrowed(keep)`.
    Narrow { inode: Fid, dropped: u8, keep: u8 },
    /// Already being given back: answer once it is gone.
    AlreadyGoing,
    /// Give it back: it is [`Phase::Lockless`] now; drop what `scope` guarded of `file`,
    /// let it drain, wait for its users, remove it.
    GiveBack { file: Fid, scope: LockScope },
}

#[derive(Debug, Default)]
pub(crate) struct LockTable {
    entries: HashMap<LockKey, Entry>,
    by_resource: HashMap<(LockTarget, Fid), Vec<LockHandle>>,
    tick: u64,
    /// Entries not in [`Phase::Granted`]: the LRU bound counts only held locks, without a
    /// scan per insert while some are on their way back.
    not_granted: usize,
    /// Locks gone after a callback or an LRU choice, by the ticket issued last before it:
    /// an answer to a request sent up to then that names one must not record it again
    /// (the server handed it out before it went). Kept while such a request may be in
    /// flight ([`LockTable::forget_gone`]).
    gone: HashMap<LockKey, u64>,
}

impl LockTable {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn get(&self, key: &LockKey) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Moves an entry to `phase`, keeping [`LockTable::not_granted`].
    pub fn set_phase(&mut self, key: LockKey, phase: Phase) {
        if let Some(e) = self.entries.get_mut(&key) {
            match (e.phase == Phase::Granted, phase == Phase::Granted) {
                (true, false) => self.not_granted += 1,
                (false, true) => self.not_granted -= 1,
                _ => {}
            }
            e.phase = phase;
        }
    }

    /// Records a grant with `users` users, carried by the answer to the request of ticket
    /// `sent`; false when it names a lock this client is giving back (the server reused it
    /// before our cancel arrived) or gave back already while that request was in flight:
    /// that one must not be used.
    pub fn insert(&mut self, target: LockTarget, grant: &LockGrant, file: Fid, users: u32, sent: u64) -> bool {
        self.tick += 1;
        let key = (target, grant.handle);
        if let Some(e) = self.entries.get_mut(&key) {
            if e.phase != Phase::Granted {
                return false;
            }
            // The server handed out a lock we hold (it reuses covering locks): with the bits
            // it grants now, which this client may have dropped itself (`drop_bits_locally`),
            // unless the request left before a callback took bits away: then the grant may
            // be from before the callback, and the bits stay dropped.
            if let (LockScope::Bits(have), LockScope::Bits(granted)) = (e.scope, grant.scope) {
                if sent > e.called_back_at {
                    e.scope = LockScope::Bits(have | granted);
                }
            }
            e.users += users;
            e.last_used = self.tick;
            return true;
        }
        let entry = Entry {
            resource: grant.resource,
            mode: grant.mode,
            scope: grant.scope,
            file,
            users,
            phase: Phase::Granted,
            last_used: self.tick,
            called_back_at: 0,
        };
        if self.gone.get(&key).is_some_and(|at| sent <= *at) {
            return false;
        }
        self.entries.insert(key, entry);
        self.by_resource.entry((target, grant.resource)).or_default().push(grant.handle);
        true
    }

    pub fn remove(&mut self, key: LockKey) -> Option<Entry> {
        let e = self.entries.remove(&key)?;
        if e.phase != Phase::Granted {
            self.not_granted -= 1;
        }
        if e.called_back_at != 0 {
            self.gone.insert(key, e.called_back_at);
        }
        let (target, handle) = key;
        if let Some(v) = self.by_resource.get_mut(&(target, e.resource)) {
            v.retain(|h| *h != handle);
            if v.is_empty() {
                self.by_resource.remove(&(target, e.resource));
            }
        }
        Some(e)
    }

    /// Records that the server takes `key` as given back, by the last ticket issued then
    /// (a callback for a lock this client never recorded).
    pub fn mark_gone(&mut self, key: LockKey, at: u64) {
        if at != 0 {
            self.gone.insert(key, at);
        }
    }

    /// Forgets the gone locks no answer in flight can name any more: `oldest` is the oldest
    /// ticket of a request still in flight (past the last one issued when none is).
    pub fn forget_gone(&mut self, oldest: u64) {
        if !self.gone.is_empty() {
            self.gone.retain(|_, at| *at >= oldest);
        }
    }

    /// Removes every lock of the targets `which` names.
    pub fn remove_where(&mut self, which: impl Fn(&LockTarget) -> bool) -> Vec<Entry> {
        let keys: Vec<LockKey> = self.entries.keys().filter(|(t, _)| which(t)).copied().collect();
        keys.into_iter().filter_map(|key| self.remove(key)).collect()
    }

    /// The held locks of `target`, as granted (what a lock replay asks to keep).
    pub fn holds_any(&self, target: LockTarget) -> bool {
        self.entries.keys().any(|(t, _)| *t == target)
    }

    pub fn granted_of(&self, target: LockTarget) -> Vec<LockGrant> {
        self.entries
            .iter()
            .filter(|((t, _), e)| *t == target && e.phase == Phase::Granted)
            .map(|(&(_, handle), e)| LockGrant { handle, resource: e.resource, mode: e.mode, scope: e.scope })
            .collect()
    }

    /// Removes every lock of `target` but those whose handles `kept` lists.
    pub fn remove_except(&mut self, target: LockTarget, kept: &[LockHandle]) -> Vec<Entry> {
        let keys: Vec<LockKey> =
            self.entries.keys().filter(|(t, h)| *t == target && !kept.contains(h)).copied().collect();
        keys.into_iter().filter_map(|key| self.remove(key)).collect()
    }

    /// Removes every lock; their keys.
    pub fn clear(&mut self) -> Vec<LockKey> {
        self.by_resource.clear();
        self.gone.clear();
        self.not_granted = 0;
        self.entries.drain().map(|(key, _)| key).collect()
    }

    /// A usable cached lock on `resource` in a mode covering `mode` and a scope containing
    /// `scope`, now with one more user.
    pub fn use_matching(
        &mut self,
        target: LockTarget,
        resource: Fid,
        mode: LockMode,
        scope: &LockScope,
    ) -> Option<LockHandle> {
        let handles = self.by_resource.get(&(target, resource))?;
        self.tick += 1;
        let tick = self.tick;
        for h in handles {
            if let Some(e) = self.entries.get_mut(&(target, *h)) {
                if e.phase != Phase::Draining && e.mode.covers(mode) && e.scope.contains(scope) {
                    e.users += 1;
                    e.last_used = tick;
                    return Some(*h);
                }
            }
        }
        None
    }

    /// One user is done with the lock; true when it was the last of a lock being given
    /// back (someone waits for that).
    pub fn unuse(&mut self, key: LockKey) -> bool {
        match self.entries.get_mut(&key) {
            Some(e) => {
                e.users = e.users.saturating_sub(1);
                e.users == 0 && e.phase != Phase::Granted
            }
            None => false,
        }
    }

    /// Whether the inode-bit lock is held and still covers `bits`.
    /// Whether the lock `key` is held, on the inode `fid`, with `bits`: what a cached
    /// answer needs (a handle alone could be one a restarted server gave out again).
    pub fn holds_bits_on(&self, key: LockKey, fid: Fid, bits: u8) -> bool {
        self.entries
            .get(&key)
            .is_some_and(|e| e.phase == Phase::Granted && e.file == fid && e.scope.contains(&LockScope::Bits(bits)))
    }

    /// This client changed what `bits` of the inode `fid` guard itself (the MDS calls back
    /// no lock of the client that asks for a change): its inode locks of `fid` no longer
    /// vouch for what they came with, until a grant brings the bits back.
    pub fn drop_bits_locally(&mut self, fid: Fid, bits: u8) {
        for e in self.entries.values_mut().filter(|e| e.file == fid && e.resource == fid) {
            if let LockScope::Bits(have) = e.scope {
                e.scope = LockScope::Bits(have & !bits);
            }
        }
    }

    /// A blocking callback asks for `wanted` of the lock: see [`Callback`].
    /// `seen`: the last request ticket issued when the callback arrived.
    pub fn callback(&mut self, key: LockKey, wanted: LockScope, seen: u64) -> Callback {
        let Some(e) = self.entries.get_mut(&key) else { return Callback::Unknown };
        if e.phase != Phase::Granted {
            return Callback::AlreadyGoing;
        }
        e.called_back_at = seen;
        if let (LockScope::Bits(have), LockScope::Bits(want)) = (e.scope, wanted) {
            let keep = have & !want;
            if keep != 0 {
                e.scope = LockScope::Bits(keep);
                return Callback::Narrow { inode: e.resource, dropped: have & want, keep };
            }
        }
        let decision = Callback::GiveBack { file: e.file, scope: e.scope };
        self.set_phase(key, Phase::Lockless);
        decision
    }

    /// The files whose locks cover this resource (for a glimpse), sorted, each once.
    pub fn files_of(&self, target: LockTarget, resource: Fid) -> Vec<Fid> {
        let mut files: Vec<Fid> = (self.by_resource.get(&(target, resource)).into_iter().flatten())
            .filter_map(|h| self.entries.get(&(target, *h)).map(|e| e.file))
            .collect();
        files.sort_unstable();
        files.dedup();
        files
    }

    /// Past `max_cached` held locks, the least recently used unused ones down to 90% of the
    /// bound (so the scan runs once per many inserts), now [`Phase::Draining`]. Locks already
    /// on their way back count as gone.
    /// `seen`: the last request ticket issued now.
    pub fn take_lru_excess(&mut self, max_cached: usize, seen: u64) -> Vec<LockKey> {
        let held = self.entries.len() - self.not_granted;
        if held <= max_cached {
            return Vec::new();
        }
        let excess = held - max_cached * 9 / 10;
        let mut idle: Vec<(u64, LockKey)> = (self.entries.iter())
            // A write-back lock goes with its batches, never by the bound (wbc/).
            .filter(|(_, e)| e.users == 0 && e.phase == Phase::Granted && !is_wbc(&e.scope))
            .map(|(key, e)| (e.last_used, *key))
            .collect();
        let n = excess.min(idle.len());
        if n == 0 {
            return Vec::new();
        }
        idle.select_nth_unstable(n - 1);
        idle.truncate(n);
        let out: Vec<LockKey> = idle.into_iter().map(|(_, key)| key).collect();
        for key in &out {
            self.set_phase(*key, Phase::Draining);
            if let Some(e) = self.entries.get_mut(key) {
                e.called_back_at = seen;
            }
        }
        out
    }
}

/// Whether a lock is the metadata write-back cache's (wbc/).
fn is_wbc(scope: &LockScope) -> bool {
    matches!(scope, LockScope::Bits(b) if b & weft_proto::lock::bits::WBC != 0)
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
