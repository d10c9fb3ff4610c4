//! POSIX advisory locks (fcntl byte ranges, flock) held on the MDT, so that they hold
//! across every client of the file system.
//!
//! The MDT's server keeps them in memory: a new server (a replicated MDT's new leader, or a
//! restart) knows none. So the client keeps its own: every change the MDT answered done is
//! applied to a table of this client's locks (weft-dlm's, the server's own rules, one per
//! owner so that owners never conflict in it), and after a move it replays them
//! ([`Client::replay_advisory`]). The new server takes no set or get before its recovery
//! window ends, so the replays come first.

use crate::limits::{ADVISORY_REPLAY_ROUNDS_MAX, LOCK_REPLAY_MS_MAX};
use crate::Client;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use weft_dlm::advisory::AdvisoryLocks;
use weft_proto::lock::{self, FlockHeld, FlockOutcome, FlockSpec, LockTarget};
use weft_proto::msg::Caller;
use weft_proto::{Fid, WeftResult};

/// The MDT that keeps a file's advisory locks: its own.
fn mdt_of(fid: Fid) -> LockTarget {
    LockTarget::Mdt(fid.mdt_index())
}

/// The client id this client's own table files its locks under (there is one client in it).
const SELF: u64 = 0;

/// This client's advisory locks as the MDT granted them: a table per owner.
#[derive(Default)]
pub(crate) struct HeldAdvisory {
    owners: HashMap<u64, AdvisoryLocks>,
}

/// One owner's locks on one file in one family, as a replay names them.
type Key = (Fid, u64, bool);

impl HeldAdvisory {
    fn set(&mut self, fid: Fid, lock: &FlockSpec) {
        let table = self.owners.entry(lock.owner).or_insert_with(|| AdvisoryLocks::with_bound(usize::MAX));
        // One owner's locks never conflict with each other, so this is never refused.
        let _ = table.set(fid, SELF, lock);
        if table.count() == 0 {
            self.owners.remove(&lock.owner);
        }
    }

    fn release(&mut self, fid: Fid, owner: u64, flock: bool) {
        if let Some(table) = self.owners.get_mut(&owner) {
            table.release(fid, SELF, owner, flock);
            if table.count() == 0 {
                self.owners.remove(&owner);
            }
        }
    }

    /// Every lock held, by (file, owner, family), each list in order.
    fn snapshot(&self) -> BTreeMap<Key, Vec<FlockSpec>> {
        let mut held: BTreeMap<Key, Vec<FlockSpec>> = BTreeMap::new();
        for table in self.owners.values() {
            for (fid, spec) in table.held_by(SELF) {
                held.entry((fid, spec.owner, spec.flock)).or_default().push(spec);
            }
        }
        for locks in held.values_mut() {
            locks.sort_by_key(|l| l.start);
        }
        held
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.owners.clear();
    }
}

impl Client {
    /// Sets or removes an advisory lock without waiting: false when another owner holds a
    /// conflicting one.
    pub async fn flock_set(&self, who: &Caller, fid: Fid, lock: FlockSpec) -> WeftResult<bool> {
        let outcome = self.ldlm(who, mdt_of(fid), lock::FlockSet { fid, lock: lock.clone() }).await?;
        let done = outcome == FlockOutcome::Done;
        if done {
            self.held_advisory().set(fid, &lock);
        }
        Ok(done)
    }

    /// F_GETLK: a lock of another owner that conflicts with `lock`, if any.
    pub async fn flock_get(&self, who: &Caller, fid: Fid, lock: FlockSpec) -> WeftResult<Option<FlockSpec>> {
        self.ldlm(who, mdt_of(fid), lock::FlockGet { fid, lock }).await
    }

    /// Removes every advisory lock `owner` holds on `fid` (a close).
    pub async fn flock_release(&self, who: &Caller, fid: Fid, owner: u64) -> WeftResult<()> {
        self.ldlm(who, mdt_of(fid), lock::FlockRelease { fid, owner, flock: false }).await?;
        self.held_advisory().release(fid, owner, false);
        Ok(())
    }

    pub(crate) fn held_advisory(&self) -> std::sync::MutexGuard<'_, HeldAdvisory> {
        self.advisory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Advisory lock replay to the MDT's new server: every lock held, then, round after
    /// round, what changed here while the round before was on its way (a replay replaces
    /// what the server has of each (file, owner, family) it names, so a lock released
    /// meanwhile is named again with nothing). What the server refuses (another client set a
    /// conflicting lock once its window was over) is lost, and said so in the log.
    pub(crate) async fn replay_advisory(&self, target: LockTarget) {
        let mut sent: Option<BTreeMap<Key, Vec<FlockSpec>>> = None;
        for _ in 0..ADVISORY_REPLAY_ROUNDS_MAX {
            let mut now = self.held_advisory().snapshot();
            now.retain(|(fid, _, _), _| mdt_of(*fid) == target);
            let changed: Vec<FlockHeld> = match &sent {
                None => now.iter().map(|(k, locks)| held(*k, locks.clone())).collect(),
                Some(before) => {
                    let keys = before.keys().chain(now.keys()).filter(|k| before.get(k) != now.get(k));
                    keys.map(|k| held(*k, now.get(k).cloned().unwrap_or_default())).collect()
                }
            };
            if changed.is_empty() {
                return;
            }
            let asked = changed.len();
            let root = Caller::root();
            let replay = self.ldlm(&root, target, lock::FlockReplay { held: changed });
            let refused = match tokio::time::timeout(Duration::from_millis(LOCK_REPLAY_MS_MAX), replay).await {
                Ok(Ok(answer)) => answer.refused,
                Ok(Err(e)) => {
                    tracing::warn!("advisory lock replay failed ({e}): the locks held here may be lost");
                    return;
                }
                Err(_) => {
                    tracing::warn!("advisory lock replay got no answer within {LOCK_REPLAY_MS_MAX} ms");
                    return;
                }
            };
            tracing::info!(asked, refused = refused.len(), "replayed advisory locks to the MDT's new server");

            for lost in refused {
                tracing::warn!(
                    "advisory lock replay refused for {} (owner {:#x}): another client holds a conflicting lock; \
                     this owner's locks there are lost",
                    lost.fid,
                    lost.owner
                );
                self.held_advisory().release(lost.fid, lost.owner, lost.flock);
                now.remove(&(lost.fid, lost.owner, lost.flock));
            }
            sent = Some(now);
        }
    }
}

fn held((fid, owner, flock): Key, locks: Vec<FlockSpec>) -> FlockHeld {
    FlockHeld { fid, owner, flock, locks }
}
