//! The blocks an OST's objects hold per user, group and project (quota accounting, which is
//! always on, as Lustre's). Each object records its file's owner (sent with writes, kept
//! with the object by the store); the OST keeps, in memory, every object's owner and
//! blocks and each id's sum, moved by every change to an object: a write, a punch, a
//! fallocate, a destroy. The sums are rebuilt by a scan of the objects when the OST
//! starts, so they are right after any crash; `verify` scans again to compare.

use crate::lock_unpoisoned;
use crate::store::{ObjectStore, StoreResult};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use weft_proto::msg::quota::{QuotaGrant, QuotaKind, QuotaOwner, QuotaUseEntry};

/// Room left in a grant below which writes are told to go through (not behind): more than
/// a mount's writes in flight for one file, so that none of them passes a limit unseen.
pub const QUOTA_TIGHT_KIB: u64 = 64 * 1024;

#[derive(Debug, Clone, Copy)]
struct Tracked {
    owner: Option<QuotaOwner>,
    /// 512-byte blocks, as st_blocks.
    blocks: u64,
}

#[derive(Debug, Default)]
struct State {
    objects: HashMap<u32, Tracked>,
    /// 512-byte blocks per (kind, id).
    used: HashMap<(QuotaKind, u32), u64>,
    /// The quota master's grants, in KiB: ids without one are not limited here. Not kept
    /// across a restart: the master's next round (a second) grants again.
    grants: HashMap<(QuotaKind, u32), u64>,
    /// KiB of writes admitted and not yet counted, per limited id: concurrent writes are
    /// held to the grant together, not each against the same count.
    inflight: HashMap<(QuotaKind, u32), u64>,
}

impl State {
    fn add(&mut self, owner: Option<QuotaOwner>, blocks: i128) {
        let Some(owner) = owner else { return };
        for kind in QuotaKind::ALL {
            let slot = self.used.entry((kind, owner.id(kind))).or_insert(0);
            *slot = (i128::from(*slot) + blocks).max(0) as u64;
        }
    }
}

#[derive(Debug, Default)]
pub struct Usage {
    state: Mutex<State>,
    /// Whether the master granted anything here: without a grant no write is checked, and
    /// the write path does not take the lock for it.
    limited: AtomicBool,
}

impl Usage {
    /// Counts every object of `store`: its owner and blocks.
    pub fn scan(store: &dyn ObjectStore) -> StoreResult<Usage> {
        let mut state = State::default();
        for oid in store.object_ids()? {
            let owner = store.owner(oid)?;
            let blocks = store.stat(oid)?.blocks;
            state.objects.insert(oid, Tracked { owner, blocks });
            state.add(owner, i128::from(blocks));
        }
        Ok(Usage { state: Mutex::new(state), limited: AtomicBool::new(false) })
    }

    /// Object `oid` changed: `allocated` says its blocks now (None: it does not exist), read
    /// under this lock so that two changes to one object are counted in their order. It
    /// belongs to `owner` when the request named one (else to whom it belonged). Answers the
    /// owner to record with the object when it is new to it.
    pub fn changed(
        &self,
        oid: u32,
        owner: Option<QuotaOwner>,
        allocated: impl FnOnce() -> StoreResult<Option<u64>>,
    ) -> StoreResult<Option<QuotaOwner>> {
        let mut st = lock_unpoisoned(&self.state);
        let old = st.objects.get(&oid).copied();
        let Some(blocks) = allocated()? else {
            // Gone, or never made (a punch of an object not written yet).
            if let Some(t) = st.objects.remove(&oid) {
                st.add(t.owner, -i128::from(t.blocks));
            }
            return Ok(None);
        };
        let old_owner = old.and_then(|t| t.owner);
        let new_owner = owner.or(old_owner);
        if old.is_some_and(|t| t.blocks == blocks) && new_owner == old_owner {
            return Ok(None);
        }
        st.add(old_owner, -i128::from(old.map_or(0, |t| t.blocks)));
        st.add(new_owner, i128::from(blocks));
        st.objects.insert(oid, Tracked { owner: new_owner, blocks });
        Ok((new_owner != old_owner).then_some(new_owner).flatten())
    }

    /// Object `oid` is gone.
    pub fn removed(&self, oid: u32) {
        let mut st = lock_unpoisoned(&self.state);
        if let Some(t) = st.objects.remove(&oid) {
            st.add(t.owner, -i128::from(t.blocks));
        }
    }

    /// KiB held by `kind` `id`'s objects.
    pub fn used_kib(&self, kind: QuotaKind, id: u32) -> u64 {
        lock_unpoisoned(&self.state).used.get(&(kind, id)).map_or(0, |b| b.div_ceil(2))
    }

    /// Every id with blocks here, in KiB.
    pub fn all_used(&self) -> Vec<QuotaUseEntry> {
        let st = lock_unpoisoned(&self.state);
        let mut all: Vec<QuotaUseEntry> = st
            .used
            .iter()
            .filter(|(_, b)| **b > 0)
            .map(|(&(kind, id), b)| QuotaUseEntry { kind, id, used_kib: b.div_ceil(2) })
            .collect();
        all.sort_by_key(|e| (e.kind, e.id));
        all
    }

    /// Replaces the master's grants; answers the blocks of the granted ids now.
    pub fn set_grants(&self, grants: &[QuotaGrant]) -> Vec<QuotaUseEntry> {
        let mut st = lock_unpoisoned(&self.state);
        st.grants = grants.iter().map(|g| ((g.kind, g.id), g.grant_kib)).collect();
        self.limited.store(!st.grants.is_empty(), Ordering::Release);
        grants
            .iter()
            .map(|g| QuotaUseEntry {
                kind: g.kind,
                id: g.id,
                used_kib: st.used.get(&(g.kind, g.id)).map_or(0, |b| b.div_ceil(2)),
            })
            .collect()
    }

    /// Whether one of object `oid`'s ids has less than [`QUOTA_TIGHT_KIB`] left of its
    /// grant here.
    pub fn tight(&self, oid: u32) -> bool {
        if !self.limited.load(Ordering::Acquire) {
            return false;
        }
        let st = lock_unpoisoned(&self.state);
        let Some(owner) = st.objects.get(&oid).and_then(|t| t.owner) else { return false };
        QuotaKind::ALL.into_iter().any(|kind| {
            let key = (kind, owner.id(kind));
            st.grants.get(&key).is_some_and(|&grant| {
                let used = st.used.get(&key).map_or(0, |b| b.div_ceil(2));
                grant.saturating_sub(used) < QUOTA_TIGHT_KIB
            })
        })
    }

    /// Whether `len` more bytes of object `oid` (owned by `owner`, or by whom it belongs to)
    /// fit in every grant of its ids, with the writes admitted before and not yet counted:
    /// the answer holds `len` against them until it is dropped (after the write is counted).
    /// Err names the id and its grant here. Counted as if every byte took a new block (an
    /// overwrite may take none), as Lustre checks.
    pub fn admit(&self, oid: u32, owner: Option<QuotaOwner>, len: u64) -> Result<Admitted<'_>, String> {
        let none = || Admitted { usage: self, held: Vec::new() };
        if !self.limited.load(Ordering::Acquire) {
            return Ok(none());
        }
        let mut st = lock_unpoisoned(&self.state);
        let Some(owner) = owner.or_else(|| st.objects.get(&oid).and_then(|t| t.owner)) else { return Ok(none()) };
        let mut held: Vec<(QuotaKind, u32)> = Vec::new();
        let kib = len.div_ceil(1024);
        for kind in QuotaKind::ALL {
            let key = (kind, owner.id(kind));
            let Some(&grant) = st.grants.get(&key) else { continue };
            let used = st.used.get(&key).map_or(0, |b| b.div_ceil(2)) + st.inflight.get(&key).copied().unwrap_or(0);
            if used + kib > grant {
                return Err(format!(
                    "{} {} holds {used} KiB here, and this OST's share of its quota is {grant} KiB",
                    kind.name(),
                    key.1
                ));
            }
            held.push(key);
        }
        for key in &held {
            *st.inflight.entry(*key).or_insert(0) += kib;
        }
        Ok(Admitted { usage: self, held: held.into_iter().map(|k| (k, kib)).collect() })
    }
}

/// A write admitted against the grants: its KiB count as in flight until this is dropped.
pub struct Admitted<'a> {
    usage: &'a Usage,
    held: Vec<((QuotaKind, u32), u64)>,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let mut st = lock_unpoisoned(&self.usage.state);
        for (key, kib) in &self.held {
            if let Some(n) = st.inflight.get_mut(key) {
                *n = n.saturating_sub(*kib);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    #[test]
    fn blocks_follow_writes_owner_changes_and_removals_and_a_scan_finds_the_same() {
        let store = MemStore::new();
        let alice = QuotaOwner { uid: 1000, gid: 100, projid: 7 };
        let bob = QuotaOwner { uid: 2000, gid: 100, projid: 0 };
        let usage = Usage::scan(&store).unwrap();
        store.write(1, 0, &[1u8; 8192]).unwrap();
        let blocks = store.stat(1).unwrap().blocks;
        let at = |b: u64| move || -> StoreResult<Option<u64>> { Ok(Some(b)) };
        assert_eq!(usage.changed(1, Some(alice), at(blocks)).unwrap(), Some(alice), "a new owner is recorded");
        store.set_owner(1, alice).unwrap();
        assert_eq!(usage.used_kib(QuotaKind::User, 1000), blocks / 2);
        assert_eq!(usage.used_kib(QuotaKind::Project, 7), blocks / 2);
        // A write without an owner keeps the object's.
        store.write(1, 8192, &[1u8; 8192]).unwrap();
        let more = store.stat(1).unwrap().blocks;
        assert_eq!(usage.changed(1, None, at(more)).unwrap(), None);
        assert_eq!(usage.used_kib(QuotaKind::User, 1000), more / 2);
        // A chown moves the blocks.
        assert_eq!(usage.changed(1, Some(bob), at(more)).unwrap(), Some(bob));
        store.set_owner(1, bob).unwrap();
        assert_eq!(usage.used_kib(QuotaKind::User, 1000), 0);
        assert_eq!(usage.used_kib(QuotaKind::User, 2000), more / 2);
        assert_eq!(usage.used_kib(QuotaKind::Group, 100), more / 2, "the group is the same");
        let scanned = Usage::scan(&store).unwrap();
        assert_eq!(scanned.used_kib(QuotaKind::User, 2000), usage.used_kib(QuotaKind::User, 2000));
        usage.removed(1);
        assert_eq!(usage.used_kib(QuotaKind::User, 2000), 0);
    }

    #[test]
    fn writes_admitted_together_are_held_to_the_grant_together() {
        let usage = Usage::default();
        let alice = QuotaOwner { uid: 1000, gid: 100, projid: 0 };
        assert!(usage.admit(1, Some(alice), 1 << 30).is_ok(), "no grant: not limited");
        usage.set_grants(&[QuotaGrant { kind: QuotaKind::User, id: 1000, grant_kib: 1024 }]);
        let first = usage.admit(1, Some(alice), 600 << 10).unwrap();
        let refused = usage.admit(2, Some(alice), 600 << 10).map(drop).unwrap_err();
        assert!(refused.contains("usr 1000 holds 600 KiB here"), "{refused}");
        assert!(usage.admit(2, Some(QuotaOwner { uid: 7, ..alice }), 600 << 10).is_ok(), "another user");
        drop(first);
        assert!(usage.admit(2, Some(alice), 600 << 10).is_ok(), "released once counted");
        usage.changed(1, Some(alice), || Ok(Some(2 * 512))).unwrap();
        assert!(usage.tight(1), "1 KiB of 1 MiB used: less than the tight margin left");
    }
}
