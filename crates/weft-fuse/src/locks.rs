//! Advisory locks: fcntl (F_GETLK, F_SETLK, F_SETLKW, and the open file description's
//! F_OFD_*) and flock, kept by the MDT so that they hold across mounts. A lock goes with its
//! owner: a process's fcntl locks at any close(2) of the file by that process (the kernel's
//! flush names the owner), an open file description's OFD and flock locks at its last close
//! (the release; for OFD locks the kernel names no owner there, so the mount remembers
//! which owners locked through which open, [`Advisory`]). A blocking request waits until
//! granted, until its file is closed, or until its process gets a signal ([`Interrupts`]).

use crate::errno::fuse_errno;
use crate::limits::{EARLY_INTERRUPTS_MAX, FLOCK_RETRY_MS_MAX, FLOCK_RETRY_MS_MIN};
use crate::mount::Mount;
use fuser::{Errno, FileHandle, LockOwner, ReplyEmpty, ReplyLock};
use std::collections::{HashMap, VecDeque};
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

/// The lock owners that may hold advisory locks set through this mount, each with the open
/// file descriptions (kernel file handles) it set them through.
#[derive(Default)]
pub(crate) struct Advisory {
    /// By file, then by owner: the opens it locked through.
    files: HashMap<Fid, HashMap<u64, Vec<u64>>>,
}

impl Advisory {
    /// `owner` set a lock on `fid` through open `fh`.
    pub(crate) fn note(&mut self, fid: Fid, owner: u64, fh: u64) {
        let opens = self.files.entry(fid).or_default().entry(owner).or_default();
        if !opens.contains(&fh) {
            opens.push(fh);
        }
    }

    /// The locks of `owner` on `fid` are being released: whether it may have had any.
    pub(crate) fn forget(&mut self, fid: Fid, owner: u64) -> bool {
        let Some(owners) = self.files.get_mut(&fid) else { return false };
        let had = owners.remove(&owner).is_some();
        if owners.is_empty() {
            self.files.remove(&fid);
        }
        had
    }

    /// The last close of open `fh` of `fid`: the owners that set locks through it and may
    /// still hold them. An OFD lock's owner is the open itself. A process's fcntl locks were
    /// released by its own close of this open (the flush, which forgets them) before the
    /// last close could come, so an owner found here with them has locked again since, and
    /// only through this open.
    pub(crate) fn released(&mut self, fid: Fid, fh: u64) -> Vec<u64> {
        let Some(owners) = self.files.get_mut(&fid) else { return Vec::new() };
        let gone: Vec<u64> = owners.iter().filter(|(_, opens)| opens.contains(&fh)).map(|(owner, _)| *owner).collect();
        for owner in &gone {
            owners.remove(owner);
        }
        if owners.is_empty() {
            self.files.remove(&fid);
        }
        gone
    }
}

/// Blocking lock requests in wait, by the kernel's request id, so that a signal to the
/// waiting process ends the wait: the kernel sends FUSE_INTERRUPT, the request is answered
/// EINTR, and the kernel restarts the call (SA_RESTART) or returns EINTR. Without it a
/// request the file system has read can end on no signal, SIGKILL included.
#[derive(Default)]
pub(crate) struct Interrupts {
    waiting: HashMap<u64, oneshot::Sender<()>>,
    /// Interrupts that came before their request was registered (the kernel may hand the
    /// two to different FUSE threads), newest last.
    early: VecDeque<u64>,
}

impl Interrupts {
    /// Request `unique` starts to wait: what tells it a signal came, or None when its
    /// interrupt came already.
    pub(crate) fn wait(&mut self, unique: u64) -> Option<oneshot::Receiver<()>> {
        if let Some(at) = self.early.iter().position(|u| *u == unique) {
            self.early.remove(at);
            return None;
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(unique, tx);
        Some(rx)
    }

    /// The kernel interrupts request `unique`.
    pub(crate) fn interrupt(&mut self, unique: u64) {
        match self.waiting.remove(&unique) {
            Some(tx) => drop(tx.send(())),
            None => {
                // Most interrupts name a request that is not a lock wait and ends anyway;
                // the few kept are for a wait about to register.
                if self.early.len() == EARLY_INTERRUPTS_MAX {
                    self.early.pop_front();
                }
                self.early.push_back(unique);
            }
        }
    }

    /// Request `unique` no longer waits.
    pub(crate) fn done(&mut self, unique: u64) {
        self.waiting.remove(&unique);
    }
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
    fn an_open_s_last_close_ends_the_locks_set_through_it_and_a_process_close_its_own() {
        let (f, g) = (Fid::new(0x200000400, 1, 0), Fid::new(0x200000400, 2, 0));
        let mut a = Advisory::default();
        // An OFD lock (owner 10, through open 1), a process's fcntl lock through opens 1
        // and 2 (owner 20), a lock on another file through the same handle number.
        a.note(f, 10, 1);
        a.note(f, 20, 1);
        a.note(f, 20, 2);
        a.note(g, 30, 1);
        assert!(a.forget(f, 20), "the process's close releases its locks");
        assert!(!a.forget(f, 20), "once");
        let mut owners = a.released(f, 1);
        owners.sort();
        assert_eq!(owners, vec![10], "the open's last close: its OFD lock");
        assert!(a.released(f, 1).is_empty());
        assert_eq!(a.released(g, 1), vec![30], "another file's opens are its own");
        // A process that locked again after its close, through another open.
        a.note(f, 20, 2);
        assert!(a.released(f, 1).is_empty());
        assert_eq!(a.released(f, 2), vec![20]);
    }

    #[test]
    fn a_signal_ends_a_lock_wait_even_when_its_interrupt_comes_first() {
        let mut i = Interrupts::default();
        let mut waiting = i.wait(7).expect("no interrupt yet");
        assert!(waiting.try_recv().is_err(), "nothing yet");
        i.interrupt(7);
        assert!(waiting.try_recv().is_ok(), "the wait learns of the signal");
        // The interrupt read by another thread before its request registered.
        i.interrupt(8);
        assert!(i.wait(8).is_none(), "a wait whose signal came already ends at once");
        assert!(i.wait(8).is_some(), "an early interrupt serves one wait");
        i.done(8);
        // Interrupts for requests that never wait are kept up to a bound.
        for unique in 100..100 + 2 * EARLY_INTERRUPTS_MAX as u64 {
            i.interrupt(unique);
        }
        assert_eq!(i.early.len(), EARLY_INTERRUPTS_MAX);
        assert!(i.wait(100).is_some(), "the oldest were dropped");
        assert!(i.wait(99 + 2 * EARLY_INTERRUPTS_MAX as u64).is_none(), "the newest kept");
    }

    #[test]
    fn setlkw_asks_again_sooner_first_then_at_the_bound() {
        let pauses: Vec<u64> = setlkw_pauses().take(8).map(|d| d.as_millis() as u64).collect();
        assert_eq!(pauses[0], FLOCK_RETRY_MS_MIN);
        assert!(pauses.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*pauses.last().unwrap(), FLOCK_RETRY_MS_MAX);
    }
}
