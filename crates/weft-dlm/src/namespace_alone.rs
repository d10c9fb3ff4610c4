//! Locks granted without waiting: statahead's intent locks ([`Namespace::try_enqueue_each`]),
//! and locks granted to one client alone: the metadata write-back cache's exclusive lock on a
//! directory (weft-mds ops/batch.rs). It is granted only when no other client waits for a
//! lock on the resource or holds one to change it; other clients' read locks (what they
//! cache of the directory after a lookup) are called back first, as for any change there.
//! While it is held, every other client's lock on the resource calls it back as any lock
//! does, and the MDT's reads of the directory's names check for it
//! ([`Namespace::held_by_other`]).

use super::Namespace;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use weft_proto::lock::{LockGrant, LockMode, LockScope};
use weft_proto::{Fid, WeftResult};

use crate::state::{EnqueueOptions, Enqueued};

impl Namespace {
    /// A lock of `owner` on `resource` when no other owner waits for a lock on it or holds
    /// one other than a protected read (None: someone does, and nobody is called back);
    /// the others' read locks are called back first. One `owner` holds already is handed
    /// out again.
    pub async fn try_enqueue_alone(
        self: &Arc<Self>,
        owner: u64,
        resource: Fid,
        mode: LockMode,
        scope: LockScope,
    ) -> WeftResult<Option<LockGrant>> {
        self.recovery_over().await;
        // The client holds what it is granted: recorded first (see `enqueue`).
        self.admit(owner).await?;
        let readers = {
            let inner = self.inner();
            let mut readers = false;
            for lock in inner.table.granted(resource).chain(inner.table.waiting(resource)) {
                match lock {
                    l if l.owner == owner => {}
                    l if l.granted && l.mode == LockMode::Pr => readers = true,
                    _ => return Ok(None),
                }
            }
            readers
        };
        if readers {
            // Cached reads only: called back as for a change here; the lock is granted once
            // they are cancelled (a client that comes meanwhile waits behind it).
            let grant =
                self.enqueue(owner, resource, mode, scope, EnqueueOptions { reuse: true, expand: false }).await?;
            self.alone_granted.store(true, Ordering::Release);
            return Ok(Some(grant));
        }
        let granted = self.try_enqueue(owner, resource, mode, scope, EnqueueOptions { reuse: true, expand: false })?;
        if granted.is_some() {
            self.alone_granted.store(true, Ordering::Release);
        }
        Ok(granted)
    }

    /// A lock of `owner` on each of `resources`, each granted at once or None: it would
    /// have to wait (nobody is called back, nothing is queued) or the client holds its
    /// bound of locks. Statahead's intent locks, which skip an inode another client is
    /// changing instead of waiting for it.
    pub async fn try_enqueue_each(
        self: &Arc<Self>,
        owner: u64,
        resources: &[Fid],
        mode: LockMode,
        scope: LockScope,
    ) -> WeftResult<Vec<Option<LockGrant>>> {
        self.recovery_over().await;
        self.admit(owner).await?;
        let opts = EnqueueOptions { reuse: true, expand: false };
        resources.iter().map(|r| self.try_enqueue(owner, *r, mode, scope, opts)).collect()
    }

    /// One lock granted at once, or None (see [`Namespace::try_enqueue_each`]); the caller
    /// has admitted `owner`.
    fn try_enqueue(
        self: &Arc<Self>,
        owner: u64,
        resource: Fid,
        mode: LockMode,
        scope: LockScope,
        opts: EnqueueOptions,
    ) -> WeftResult<Option<LockGrant>> {
        let mut inner = self.inner();
        if self.at_bound(&inner, owner, resource, mode, &scope, opts).is_some() {
            return Ok(None);
        }
        match inner.table.enqueue(owner, resource, mode, scope, opts) {
            Enqueued::Granted(grant) => Ok(Some(grant)),
            Enqueued::Waiting { handle, .. } => {
                // Taken back at once: the newest in line held nobody back.
                let changes = inner.table.cancel(owner, handle);
                let recalls = inner.settle(changes, resource);
                drop(inner);
                self.dispatch(recalls);
                Ok(None)
            }
        }
    }

    /// Whether `owner` holds, granted (called back or not), a lock on `resource` of `mode`
    /// covering `bits` that is its own and not an operation's: a change it makes there needs
    /// no operation lock of its own (it could only queue behind the request that calls this
    /// very lock back).
    pub fn holds_granted(&self, owner: u64, resource: Fid, mode: LockMode, bits: u8) -> bool {
        if !self.alone_granted.load(Ordering::Acquire) {
            return false;
        }
        let inner = self.inner();
        let found = inner.table.granted(resource).any(|l| {
            l.owner == owner
                && l.mode == mode
                && matches!(l.scope, LockScope::Bits(b) if b & bits == bits)
                && !inner.operation.contains(&l.handle)
        });
        found
    }

    /// Whether another owner than `owner` holds a granted lock on `resource` with any of
    /// `bits` (a write-back cache's on a directory whose names `owner` asks for). Cheap
    /// while no lock was ever granted alone.
    pub fn held_by_other(&self, owner: u64, resource: Fid, bits: u8) -> bool {
        if !self.alone_granted.load(Ordering::Acquire) {
            return false;
        }
        let inner = self.inner();
        let found = inner.table.granted(resource).any(|l| {
            l.owner != owner
                && matches!(l.scope, LockScope::Bits(b) if b & bits != 0)
                && !inner.operation.contains(&l.handle)
        });
        found
    }
}
