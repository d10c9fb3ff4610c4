//! A bounded cache of open object files, per OST. Read and Write are the hot path: an
//! open(2) per request would cost a path walk and a descriptor allocation each time, so
//! handles stay open across requests, up to [`OPEN_FILES_MAX`] per OST, and
//! [`OPEN_FILES_PROCESS_MAX`] for all the OSTs of the process together.
//!
//! The cache is sharded by object id so that requests to different objects rarely meet on a
//! mutex, and the mutex is held only for a map lookup, never across I/O.
//!
//! Destroy must not leave a handle to the unlinked file behind (a later read would see the
//! destroyed bytes). A request that missed the cache opens the file outside the lock and then
//! inserts it; if a destroy ran in between, the handle may be to the unlinked file. Each shard
//! therefore counts destroys (`destroy_epoch`): the opener remembers the epoch it saw at the
//! miss and inserts only when it is unchanged. A destroy unlinks first and bumps the epoch
//! after, so an open that raced it is either removed by it or refused at insert.

use crate::limits::{OPEN_FILES_MAX, OPEN_FILES_PROCESS_MAX, OPEN_FILES_SHARDS};
use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Handles cached by every cache of the process, against [`OPEN_FILES_PROCESS_MAX`]: the
/// descriptors a process holds do not grow with the number of OSTs it serves.
static CACHED_IN_PROCESS: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug, Default)]
struct Shard {
    files: HashMap<u32, Arc<File>>,
    destroy_epoch: u64,
}

/// What a lookup found: the handle, or the epoch to pass to [`HandleCache::insert`].
pub(crate) enum Lookup {
    Hit(Arc<File>),
    Miss { epoch: u64 },
}

#[derive(Debug)]
pub(crate) struct HandleCache {
    shards: Box<[Mutex<Shard>]>,
    shard_files_max: usize,
}

impl HandleCache {
    pub fn new() -> Self {
        const { assert!(OPEN_FILES_SHARDS > 0 && OPEN_FILES_MAX >= OPEN_FILES_SHARDS) };
        HandleCache {
            shards: (0..OPEN_FILES_SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_files_max: OPEN_FILES_MAX / OPEN_FILES_SHARDS,
        }
    }

    fn shard(&self, oid: u32) -> MutexGuard<'_, Shard> {
        // A panic while holding the lock cannot leave the map inconsistent (each operation is
        // one insert or remove), so a poisoned lock is still usable.
        self.shards[oid as usize % self.shards.len()].lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn lookup(&self, oid: u32) -> Lookup {
        let shard = self.shard(oid);
        match shard.files.get(&oid) {
            Some(h) => Lookup::Hit(h.clone()),
            None => Lookup::Miss { epoch: shard.destroy_epoch },
        }
    }

    /// Caches `file` unless a destroy ran since the lookup that returned `epoch`. Returns
    /// the handle to use (an existing one if a concurrent request inserted first).
    pub fn insert(&self, oid: u32, file: Arc<File>, epoch: u64) -> Arc<File> {
        let evicted = {
            let mut shard = self.shard(oid);
            if shard.destroy_epoch != epoch {
                return file;
            }
            if let Some(existing) = shard.files.get(&oid) {
                return existing.clone();
            }
            let mut evicted = None;
            let process_full = CACHED_IN_PROCESS.load(Ordering::Relaxed) >= OPEN_FILES_PROCESS_MAX;
            if shard.files.len() >= self.shard_files_max || process_full {
                // Any victim will do: a bound matters here, recency hardly (the page cache
                // keeps the data; only the open(2) is repeated).
                if let Some(victim) = shard.files.keys().next().copied() {
                    evicted = shard.files.remove(&victim);
                } else {
                    // The process holds its budget in other OSTs' caches: used uncached.
                    return file;
                }
            }
            if evicted.is_none() {
                CACHED_IN_PROCESS.fetch_add(1, Ordering::Relaxed);
            }
            shard.files.insert(oid, file.clone());
            debug_assert!(shard.files.len() <= self.shard_files_max);
            evicted
        };
        // The evicted descriptor closes here, outside the shard's lock.
        drop(evicted);
        file
    }

    /// Forgets `oid`; call after unlinking its file.
    pub fn invalidate(&self, oid: u32) {
        let mut shard = self.shard(oid);
        shard.destroy_epoch += 1;
        if shard.files.remove(&oid).is_some() {
            CACHED_IN_PROCESS.fetch_sub(1, Ordering::Relaxed);
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).files.len()).sum()
    }
}

impl Drop for HandleCache {
    /// An OST stopped (its failover server took it): its handles leave the process's count.
    fn drop(&mut self) {
        let held: usize = self.shards.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).files.len()).sum();
        CACHED_IN_PROCESS.fetch_sub(held, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> Arc<File> {
        Arc::new(tempfile::tempfile().expect("tempfile"))
    }

    #[test]
    fn bounded_and_destroy_refuses_stale_insert() {
        let cache = HandleCache::new();
        // One descriptor shared by every entry: the test must not need a raised fd limit.
        let shared = handle();
        for oid in 0..(OPEN_FILES_MAX as u32 * 2) {
            let Lookup::Miss { epoch } = cache.lookup(oid) else { panic!("unexpected hit") };
            cache.insert(oid, shared.clone(), epoch);
        }
        assert_eq!(cache.len(), OPEN_FILES_MAX);

        let oid = 5_000_001;
        let Lookup::Miss { epoch } = cache.lookup(oid) else { panic!("unexpected hit") };
        cache.invalidate(oid); // a destroy between the miss and the insert
        cache.insert(oid, handle(), epoch);
        assert!(matches!(cache.lookup(oid), Lookup::Miss { .. }));
    }
}
