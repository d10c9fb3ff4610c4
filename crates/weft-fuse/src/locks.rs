//! Advisory locks: fcntl (F_GETLK, F_SETLK, F_SETLKW, and the open file description's
//! F_OFD_*) and flock, kept by the MDT so that they hold across mounts. A lock goes with its
//! owner: a process's fcntl locks at any close(2) of the file by that process (the kernel's
//! flush names the owner), an open file description's OFD and flock locks at its last close
//! (the release; for OFD locks the kernel names no owner there, so the mount remembers
//! which owners locked through which open, `lock_state::Advisory`). A blocking request waits
//! until granted, until its file is closed, or until its process gets a signal
//! (`lock_state::Interrupts`).

use crate::errno::fuse_errno;
use crate::limits::{FLOCK_RETRY_MS_MAX, FLOCK_RETRY_MS_MIN};
use crate::mount::Mount;
use fuser::{Errno, FileHandle, LockOwner, ReplyEmpty, ReplyLock};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use weft_proto::lock::{FlockKind, FlockSpec};
use weft_proto::msg::Caller;
use weft_proto::Fid;

/// The kernel's largest lock offset (OFFSET_MAX) means "to the end, whatever it becomes".
pub(crate) fn lock_end(end: u64) -> u64 {
    if end >= i64::MAX as u64 {
        u64::MAX
    } else {
        end
    }
}

/// A lock end as the kernel takes it back.
pub(crate) fn kernel_end(end: u64) -> u64 {
    end.min(i64::MAX as u64)
}

/// A kernel lock request as the lock manager's; None for a type or range the kernel should
/// not have sent (EINVAL). flock(2) arrives as a whole-file lock of the open file
/// description (fuser does not pass the kernel's FUSE_LK_FLOCK flag on), so it is kept as an
/// fcntl-style lock of that owner.
pub(crate) fn flock_spec(owner: LockOwner, start: u64, end: u64, typ: i32, pid: u32) -> Option<FlockSpec> {
    let kind = match typ {
        libc::F_RDLCK => FlockKind::Read,
        libc::F_WRLCK => FlockKind::Write,
        libc::F_UNLCK => FlockKind::Unlock,
        _ => return None,
    };
    (start <= end).then(|| FlockSpec { owner: owner.0, kind, start, end: lock_end(end), pid, flock: false })
}

/// The pauses of an F_SETLKW that asks again until granted: growing, up to a bound.
pub(crate) fn setlkw_pauses() -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(FLOCK_RETRY_MS_MIN), |ms| Some((ms * 2).min(FLOCK_RETRY_MS_MAX)))
        .map(Duration::from_millis)
}

/// A blocking request's wait: its kernel request id and what tells it of a signal (None:
/// the signal came already).
pub(crate) struct Wait {
    pub unique: u64,
    pub interrupted: Option<oneshot::Receiver<()>>,
}

impl Mount {
    /// Ends the advisory locks `owner` holds on `fid`, if this mount ever set one.
    pub(crate) async fn release_advisory(&self, who: &Caller, fid: Fid, owner: u64) {
        let had = self.advisory.lock().unwrap_or_else(|p| p.into_inner()).forget(fid, owner);
        if had {
            self.send_release(who, fid, owner).await;
        }
    }

    /// The last close of open `fh` of `fid`: ends the locks set through it (OFD locks, and
    /// flock's when the kernel names their owner, `flock_owner`).
    pub(crate) async fn release_open_locks(&self, who: &Caller, fid: Fid, fh: u64, flock_owner: Option<u64>) {
        let mut owners = self.advisory.lock().unwrap_or_else(|p| p.into_inner()).released(fid, fh);
        if let Some(owner) = flock_owner.filter(|o| !owners.contains(o)) {
            if self.advisory.lock().unwrap_or_else(|p| p.into_inner()).forget(fid, owner) {
                owners.push(owner);
            }
        }
        for owner in owners {
            self.send_release(who, fid, owner).await;
        }
    }

    async fn send_release(&self, who: &Caller, fid: Fid, owner: u64) {
        if let Err(e) = self.client.flock_release(who, fid, owner).await {
            tracing::warn!("releasing the advisory locks of {fid}: {e}");
        }
    }

    /// The kernel interrupts request `unique`: a lock wait for it ends with EINTR.
    pub(crate) fn interrupt(&self, unique: u64) {
        self.interrupts.lock().unwrap_or_else(|p| p.into_inner()).interrupt(unique);
    }

    /// Registers blocking request `unique`'s wait (before it leaves its FUSE thread, so that
    /// an interrupt read meanwhile by another thread finds it or is kept for it).
    pub(crate) fn lock_wait(&self, unique: u64) -> Wait {
        Wait { unique, interrupted: self.interrupts.lock().unwrap_or_else(|p| p.into_inner()).wait(unique) }
    }

    pub(crate) async fn getlk(self: Arc<Self>, who: Caller, fid: Fid, lock: FlockSpec, reply: ReplyLock) {
        let (start, end) = (lock.start, lock.end);
        match self.client.flock_get(&who, fid, lock).await {
            Ok(None) => reply.locked(start, kernel_end(end), libc::F_UNLCK, 0),
            Ok(Some(holder)) => {
                let typ = if holder.kind == FlockKind::Read { libc::F_RDLCK } else { libc::F_WRLCK };
                reply.locked(holder.start, kernel_end(holder.end), typ, holder.pid)
            }
            Err(e) => reply.error(fuse_errno("getlk", &e)),
        }
    }

    /// F_SETLK, or with `wait` F_SETLKW: asks again with a growing pause until granted, until
    /// the file is closed, until the process gets a signal, or until the client fails. The
    /// caller runs a waiting one as a task of its own: a waiter must not take a FUSE thread
    /// from the mount.
    pub(crate) async fn setlk(
        self: Arc<Self>,
        who: Caller,
        fid: Fid,
        fh: FileHandle,
        lock: FlockSpec,
        wait: Option<Wait>,
        reply: ReplyEmpty,
    ) {
        let unique = wait.as_ref().map(|w| w.unique);
        let outcome = self.set_lock(&who, fid, fh, lock, wait).await;
        if let Some(unique) = unique {
            self.interrupts.lock().unwrap_or_else(|p| p.into_inner()).done(unique);
        }
        match outcome {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    async fn set_lock(
        &self,
        who: &Caller,
        fid: Fid,
        fh: FileHandle,
        lock: FlockSpec,
        wait: Option<Wait>,
    ) -> Result<(), Errno> {
        if lock.kind != FlockKind::Unlock {
            self.advisory.lock().unwrap_or_else(|p| p.into_inner()).note(fid, lock.owner, fh.0);
        }
        let mut interrupted = match wait {
            Some(Wait { interrupted: None, .. }) => return Err(Errno::EINTR),
            Some(Wait { interrupted: Some(rx), .. }) => Some(rx),
            None => None,
        };
        let mut pauses = setlkw_pauses();
        loop {
            match self.client.flock_set(who, fid, lock.clone()).await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return Err(fuse_errno("setlk", &e)),
            }
            let Some(signal) = interrupted.as_mut() else {
                return Err(Errno::EAGAIN);
            };
            if self.files.get(fh.0).is_none() {
                return Err(Errno::EINTR);
            }
            let pause = pauses.next().unwrap_or(Duration::from_millis(FLOCK_RETRY_MS_MAX));
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = signal => return Err(Errno::EINTR),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_requests_map_to_the_lock_manager_and_bad_ones_are_refused() {
        let spec = flock_spec(LockOwner(7), 10, 19, libc::F_WRLCK, 42).unwrap();
        assert_eq!((spec.owner, spec.kind, spec.start, spec.end, spec.pid), (7, FlockKind::Write, 10, 19, 42));
        assert_eq!(flock_spec(LockOwner(7), 0, i64::MAX as u64, libc::F_RDLCK, 1).unwrap().end, u64::MAX);
        assert_eq!(flock_spec(LockOwner(7), 0, 0, libc::F_UNLCK, 1).unwrap().kind, FlockKind::Unlock);
        assert!(flock_spec(LockOwner(7), 5, 4, libc::F_RDLCK, 1).is_none(), "end before start");
        assert!(flock_spec(LockOwner(7), 0, 1, 99, 1).is_none(), "no such lock type");
        assert_eq!(kernel_end(u64::MAX), i64::MAX as u64);
        assert_eq!(kernel_end(100), 100);
    }

    #[test]
    fn setlkw_asks_again_sooner_first_then_at_the_bound() {
        let pauses: Vec<u64> = setlkw_pauses().take(8).map(|d| d.as_millis() as u64).collect();
        assert_eq!(pauses[0], FLOCK_RETRY_MS_MIN);
        assert!(pauses.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*pauses.last().unwrap(), FLOCK_RETRY_MS_MAX);
    }
}
