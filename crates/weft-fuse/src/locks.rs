//! Advisory locks: fcntl (F_GETLK, F_SETLK, F_SETLKW) and flock, kept by the MDT so that
//! they hold across mounts; a close ends the locks of its owner.

use crate::errno::fuse_errno;
use crate::limits::{FLOCK_RETRY_MS_MAX, FLOCK_RETRY_MS_MIN};
use crate::mount::Mount;
use fuser::{Errno, FileHandle, LockOwner, ReplyEmpty, ReplyLock};
use std::sync::Arc;
use std::time::Duration;
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

impl Mount {
    /// Ends the advisory locks `owner` holds on `fid`, if this mount ever set one.
    pub(crate) async fn release_advisory(&self, who: &Caller, fid: Fid, owner: u64) {
        let had = self.advisory.lock().unwrap_or_else(|p| p.into_inner()).remove(&(fid, owner));
        if had {
            if let Err(e) = self.client.flock_release(who, fid, owner).await {
                tracing::warn!("releasing the advisory locks of {fid}: {e}");
            }
        }
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
    /// the file is closed, or until the client fails. The caller runs a waiting one as a task
    /// of its own: a waiter must not take a FUSE thread from the mount.
    pub(crate) async fn setlk(
        self: Arc<Self>,
        who: Caller,
        fid: Fid,
        fh: FileHandle,
        lock: FlockSpec,
        wait: bool,
        reply: ReplyEmpty,
    ) {
        if lock.kind != FlockKind::Unlock {
            self.advisory.lock().unwrap_or_else(|p| p.into_inner()).insert((fid, lock.owner));
        }
        let mut pauses = setlkw_pauses();
        loop {
            match self.client.flock_set(&who, fid, lock.clone()).await {
                Ok(true) => return reply.ok(),
                Ok(false) if !wait => return reply.error(Errno::EAGAIN),
                Ok(false) => {}
                Err(e) => return reply.error(fuse_errno("setlk", &e)),
            }
            if self.files.get(fh.0).is_none() {
                return reply.error(Errno::EINTR);
            }
            tokio::time::sleep(pauses.next().unwrap_or(Duration::from_millis(FLOCK_RETRY_MS_MAX))).await;
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
