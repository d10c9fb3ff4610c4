//! Locks granted to one client alone: the metadata write-back cache's exclusive lock on a
//! directory (weft-mds ops/batch.rs). It is asked for without calling anybody back, and
//! granted only when no other client holds or waits for any lock on the resource; while it
//! is held, every other client's lock on the resource calls it back as any lock does, and
//! the MDT's reads of the directory's names check for it ([`Namespace::held_by_other`]).

use super::Namespace;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use weft_proto::lock::{LockGrant, LockMode, LockScope};
use weft_proto::{Fid, WeftResult};

use crate::state::{EnqueueOptions, Enqueued};

impl Namespace {
    /// A lock of `owner` on `resource` when no other owner holds or waits for any lock on
    /// it (None: someone does; nobody is called back). One `owner` holds already is handed
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
        let mut inner = self.inner();
        let others = inner.table.granted(resource).chain(inner.table.waiting(resource)).any(|l| l.owner != owner);
        if others {
            return Ok(None);
        }
        let opts = EnqueueOptions { reuse: true, expand: false };
        match inner.table.enqueue(owner, resource, mode, scope, opts) {
            Enqueued::Granted(grant) => {
                self.alone_granted.store(true, Ordering::Release);
                Ok(Some(grant))
            }
            Enqueued::Waiting { handle, .. } => {
                // Not expected with nobody else on the resource: take the request back.
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
