//! POSIX advisory locks (fcntl byte ranges, flock) held on the MDT, so that they hold
//! across every client of the file system.

use crate::Client;
use weft_proto::lock::{FlockSpec, LdlmReply, LdlmRequest, LockTarget};
use weft_proto::{Fid, WeftError, WeftResult};

impl Client {
    /// Sets or removes an advisory lock without waiting: false when another owner holds a
    /// conflicting one.
    pub async fn flock_set(&self, fid: Fid, lock: FlockSpec) -> WeftResult<bool> {
        match self.ldlm(LockTarget::Mdt(crate::MDT_INDEX), LdlmRequest::FlockSet { fid, lock }).await? {
            LdlmReply::FlockDone => Ok(true),
            LdlmReply::FlockConflict(_) => Ok(false),
            other => Err(unexpected(&other)),
        }
    }

    /// F_GETLK: a lock of another owner that conflicts with `lock`, if any.
    pub async fn flock_get(&self, fid: Fid, lock: FlockSpec) -> WeftResult<Option<FlockSpec>> {
        match self.ldlm(LockTarget::Mdt(crate::MDT_INDEX), LdlmRequest::FlockGet { fid, lock }).await? {
            LdlmReply::FlockConflict(holder) => Ok(holder),
            other => Err(unexpected(&other)),
        }
    }

    /// Removes every advisory lock `owner` holds on `fid` (a close).
    pub async fn flock_release(&self, fid: Fid, owner: u64) -> WeftResult<()> {
        let op = LdlmRequest::FlockRelease { fid, owner, flock: false };
        match self.ldlm(LockTarget::Mdt(crate::MDT_INDEX), op).await? {
            LdlmReply::FlockDone => Ok(()),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(reply: &LdlmReply) -> WeftError {
    WeftError::protocol(format!("unexpected answer to an advisory lock request: {reply:?}"))
}
