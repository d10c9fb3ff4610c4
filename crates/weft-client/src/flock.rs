//! POSIX advisory locks (fcntl byte ranges, flock) held on the MDT, so that they hold
//! across every client of the file system.

use crate::Client;
use weft_proto::lock::{self, FlockOutcome, FlockSpec, LockTarget};
use weft_proto::msg::Caller;
use weft_proto::{Fid, WeftResult};

const MDT: LockTarget = LockTarget::Mdt(crate::MDT_INDEX);

impl Client {
    /// Sets or removes an advisory lock without waiting: false when another owner holds a
    /// conflicting one.
    pub async fn flock_set(&self, who: &Caller, fid: Fid, lock: FlockSpec) -> WeftResult<bool> {
        let outcome = self.ldlm(who, MDT, lock::FlockSet { fid, lock }).await?;
        Ok(outcome == FlockOutcome::Done)
    }

    /// F_GETLK: a lock of another owner that conflicts with `lock`, if any.
    pub async fn flock_get(&self, who: &Caller, fid: Fid, lock: FlockSpec) -> WeftResult<Option<FlockSpec>> {
        self.ldlm(who, MDT, lock::FlockGet { fid, lock }).await
    }

    /// Removes every advisory lock `owner` holds on `fid` (a close).
    pub async fn flock_release(&self, who: &Caller, fid: Fid, owner: u64) -> WeftResult<()> {
        self.ldlm(who, MDT, lock::FlockRelease { fid, owner, flock: false }).await.map(drop)
    }
}
