//! The objects of one OST in memory, for tests and simulations: no disk, and a model of what
//! a power loss keeps. Each object has its current bytes (what reads see, and what a crash
//! of the process keeps: the page cache survives kill -9, so after one the same store is
//! simply used again) and its durable bytes, as of its last sync (what a machine that lost
//! power finds, [`MemStore::after_power_loss`]). The model takes the worst a file system may
//! do: nothing unsynced survives, so an object never synced is gone, and a remove is
//! undone (the file store does not fsync a directory after an unlink, so a power loss may
//! bring the file back). LAST_ID is durable as soon as it is set, as the file store's is.
//!
//! One mutex over the whole store: it is never on a server's data path.

use super::{CommitRecord, ObjectStore, StoreError, StoreResult};
use crate::limits::MEM_STORE_CAPACITY_DEFAULT_BYTES;
use crate::lock_unpoisoned;
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use weft_proto::msg::ost::{FallocMode, ObjectAttr};
use weft_proto::msg::quota::QuotaOwner;
use weft_proto::msg::StatfsInfo;

/// Objects are kept in pages so that a write far into an object costs what it writes, as a
/// sparse file does, and so that blocks can be counted.
const PAGE_BYTES: usize = 4096;
const SECTORS_PER_PAGE: u64 = (PAGE_BYTES / 512) as u64;

type Page = [u8; PAGE_BYTES];

#[derive(Debug, Clone, Default)]
struct Object {
    size: u64,
    /// Allocated pages by index (offset / PAGE_BYTES); a missing page is a hole. Never a page
    /// past the size, and the bytes past the size in the last page are zero, so extending
    /// the object shows a hole. A page is shared with the durable copy until either changes.
    pages: BTreeMap<u64, Arc<Page>>,
    /// Writes and truncates so far (the on-disk store's mtime stands for this).
    changes: u64,
}

#[derive(Debug, Default)]
struct Objects {
    current: HashMap<u32, Object>,
    durable: HashMap<u32, Object>,
    /// Pages of the current objects: the space in use.
    used_pages: u64,
    /// Per MDT range, as LAST_ID.
    last_id: HashMap<u32, u32>,
    /// Durable as soon as set, as LAST_ID.
    commit_record: CommitRecord,
    /// Simulated boots: one more after each power loss.
    boot: u64,
    /// Objects' owners (kept with the objects' metadata, as a file system's journal keeps
    /// xattrs: a power loss keeps them).
    owners: HashMap<u32, QuotaOwner>,
}

pub struct MemStore {
    objects: Mutex<Objects>,
    capacity_pages: u64,
}

impl MemStore {
    /// An empty store of [`MEM_STORE_CAPACITY_DEFAULT_BYTES`].
    pub fn new() -> MemStore {
        MemStore::with_capacity(MEM_STORE_CAPACITY_DEFAULT_BYTES)
    }

    /// An empty store whose writes fail with NoSpace past `capacity_bytes` (rounded down to
    /// whole pages).
    pub fn with_capacity(capacity_bytes: u64) -> MemStore {
        MemStore { objects: Mutex::new(Objects::default()), capacity_pages: capacity_bytes / PAGE_BYTES as u64 }
    }

    /// The store as a machine that lost power finds it when it starts again: every object as
    /// of its last sync, and LAST_ID. This store is left as it was.
    pub fn after_power_loss(&self) -> MemStore {
        let objects = lock_unpoisoned(&self.objects);
        let used_pages = objects.durable.values().map(|o| o.pages.len() as u64).sum();
        MemStore {
            objects: Mutex::new(Objects {
                current: objects.durable.clone(),
                durable: objects.durable.clone(),
                used_pages,
                last_id: objects.last_id.clone(),
                commit_record: objects.commit_record,
                boot: objects.boot + 1,
                owners: objects.owners.clone(),
            }),
            capacity_pages: self.capacity_pages,
        }
    }
}

impl Default for MemStore {
    fn default() -> MemStore {
        MemStore::new()
    }
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let objects = lock_unpoisoned(&self.objects);
        f.debug_struct("MemStore")
            .field("objects", &objects.current.len())
            .field("durable_objects", &objects.durable.len())
            .field("used_pages", &objects.used_pages)
            .field("capacity_pages", &self.capacity_pages)
            .field("last_id", &objects.last_id)
            .finish()
    }
}

/// The page holding byte `offset`, and where in it.
fn page_of(offset: u64) -> (u64, usize) {
    (offset / PAGE_BYTES as u64, (offset % PAGE_BYTES as u64) as usize)
}

impl ObjectStore for MemStore {
    fn read(&self, oid: u32, offset: u64, len: u32) -> StoreResult<Bytes> {
        let objects = lock_unpoisoned(&self.objects);
        let Some(object) = objects.current.get(&oid) else {
            return Ok(Bytes::new());
        };
        // Bounded by the size, which a write bounded by the store's capacity.
        let len = u64::from(len).min(object.size.saturating_sub(offset)) as usize;
        if len == 0 {
            return Ok(Bytes::new());
        }
        let mut buf = BytesMut::zeroed(len);
        let (first, _) = page_of(offset);
        let (last, _) = page_of(offset + len as u64 - 1);
        for (&index, page) in object.pages.range(first..=last) {
            let page_start = index * PAGE_BYTES as u64;
            let from = offset.max(page_start);
            let to = (offset + len as u64).min(page_start + PAGE_BYTES as u64);
            let in_page = (from - page_start) as usize..(to - page_start) as usize;
            let in_buf = (from - offset) as usize..(to - offset) as usize;
            buf[in_buf].copy_from_slice(&page[in_page]);
        }
        Ok(buf.freeze())
    }

    fn write(&self, oid: u32, offset: u64, data: &[u8]) -> StoreResult<usize> {
        let mut guard = lock_unpoisoned(&self.objects);
        let objects = &mut *guard;
        if data.is_empty() {
            objects.current.entry(oid).or_default();
            return Ok(0);
        }
        let Some(end) = offset.checked_add(data.len() as u64) else {
            return Err(StoreError::TooBig { what: format!("object {oid}: write: passes the largest offset") });
        };
        let (first, _) = page_of(offset);
        let (last, _) = page_of(end - 1);
        let new_pages = match objects.current.get(&oid) {
            Some(object) => (first..=last).filter(|index| !object.pages.contains_key(index)).count() as u64,
            None => last - first + 1,
        };
        if objects.used_pages + new_pages > self.capacity_pages {
            return Err(StoreError::NoSpace {
                what: format!(
                    "object {oid}: write: the memory store's {} bytes are full",
                    self.capacity_pages * PAGE_BYTES as u64
                ),
            });
        }
        objects.used_pages += new_pages;
        let object = objects.current.entry(oid).or_default();
        let mut written = 0usize;
        while written < data.len() {
            let (index, in_page) = page_of(offset + written as u64);
            let n = (PAGE_BYTES - in_page).min(data.len() - written);
            let page = Arc::make_mut(object.pages.entry(index).or_insert_with(|| Arc::new([0; PAGE_BYTES])));
            page[in_page..in_page + n].copy_from_slice(&data[written..written + n]);
            written += n;
        }
        object.size = object.size.max(end);
        object.changes += 1;
        Ok(data.len())
    }

    fn set_len(&self, oid: u32, size: u64) -> StoreResult<()> {
        let mut guard = lock_unpoisoned(&self.objects);
        let objects = &mut *guard;
        let object = objects.current.entry(oid).or_default();
        if size < object.size {
            let (last, in_page) = page_of(size);
            let kept_pages = if in_page == 0 { last } else { last + 1 };
            let cut = object.pages.split_off(&kept_pages);
            objects.used_pages -= cut.len() as u64;
            if in_page != 0 {
                if let Some(page) = object.pages.get_mut(&last) {
                    Arc::make_mut(page)[in_page..].fill(0);
                }
            }
        }
        object.size = size;
        object.changes += 1;
        Ok(())
    }

    /// Whole pages of the range are dropped (punch) or kept as zero pages (allocate, zero);
    /// pages stay below the size (this model's rule), so an allocation that keeps the size
    /// allocates nothing past it.
    fn fallocate(&self, oid: u32, offset: u64, len: u64, mode: FallocMode, keep_size: bool) -> StoreResult<()> {
        let Some(end) = offset.checked_add(len) else {
            return Err(StoreError::TooBig { what: format!("object {oid}: fallocate: passes the largest offset") });
        };
        let mut guard = lock_unpoisoned(&self.objects);
        let Objects { current, used_pages, .. } = &mut *guard;
        if len == 0 || (!mode.needs_objects(keep_size) && !current.contains_key(&oid)) {
            return Ok(());
        }
        let object = current.entry(oid).or_default();
        let size = if mode.may_extend(keep_size) { object.size.max(end) } else { object.size };
        let page = PAGE_BYTES as u64;
        if mode.clears() && offset < object.size {
            let to = end.min(object.size);
            for index in page_of(offset).0..=page_of(to - 1).0 {
                let (start, stop) = (index * page, (index + 1) * page);
                if offset <= start && stop <= to {
                    *used_pages -= u64::from(object.pages.remove(&index).is_some());
                } else if let Some(p) = object.pages.get_mut(&index) {
                    let from = offset.max(start) - start;
                    Arc::make_mut(p)[from as usize..(to.min(stop) - start) as usize].fill(0);
                }
            }
        }
        let alloc_end = end.min(size);
        if mode != FallocMode::Punch && offset < alloc_end {
            let wanted: Vec<u64> =
                (page_of(offset).0..=page_of(alloc_end - 1).0).filter(|i| !object.pages.contains_key(i)).collect();
            if *used_pages + wanted.len() as u64 > self.capacity_pages {
                return Err(StoreError::NoSpace {
                    what: format!(
                        "object {oid}: fallocate: the memory store's {} bytes are full",
                        self.capacity_pages * page
                    ),
                });
            }
            *used_pages += wanted.len() as u64;
            for index in wanted {
                object.pages.insert(index, Arc::new([0; PAGE_BYTES]));
            }
        }
        object.size = size;
        object.changes += 1;
        Ok(())
    }

    fn stat(&self, oid: u32) -> StoreResult<ObjectAttr> {
        let objects = lock_unpoisoned(&self.objects);
        Ok(match objects.current.get(&oid) {
            Some(object) => ObjectAttr {
                size: object.size,
                blocks: object.pages.len() as u64 * SECTORS_PER_PAGE,
                mtime_ns: object.changes,
            },
            None => ObjectAttr { size: 0, blocks: 0, mtime_ns: 0 },
        })
    }

    fn sync(&self, oid: u32) -> StoreResult<()> {
        let mut guard = lock_unpoisoned(&self.objects);
        let objects = &mut *guard;
        if let Some(object) = objects.current.get(&oid) {
            objects.durable.insert(oid, object.clone());
        }
        Ok(())
    }

    fn remove(&self, oid: u32) -> StoreResult<()> {
        let mut objects = lock_unpoisoned(&self.objects);
        if let Some(object) = objects.current.remove(&oid) {
            objects.used_pages -= object.pages.len() as u64;
        }
        objects.owners.remove(&oid);
        Ok(())
    }

    fn allocated(&self, oid: u32) -> StoreResult<Option<u64>> {
        let objects = lock_unpoisoned(&self.objects);
        Ok(objects.current.get(&oid).map(|o| o.pages.len() as u64 * SECTORS_PER_PAGE))
    }

    fn owner(&self, oid: u32) -> StoreResult<Option<QuotaOwner>> {
        let objects = lock_unpoisoned(&self.objects);
        Ok(objects.current.contains_key(&oid).then(|| objects.owners.get(&oid).copied()).flatten())
    }

    fn set_owner(&self, oid: u32, owner: QuotaOwner) -> StoreResult<()> {
        lock_unpoisoned(&self.objects).owners.insert(oid, owner);
        Ok(())
    }

    fn object_ids(&self) -> StoreResult<Vec<u32>> {
        Ok(lock_unpoisoned(&self.objects).current.keys().copied().collect())
    }

    fn last_id(&self, mdt: u32) -> u32 {
        lock_unpoisoned(&self.objects).last_id.get(&mdt).copied().unwrap_or(0)
    }

    fn set_last_id(&self, oid: u32) -> StoreResult<()> {
        lock_unpoisoned(&self.objects).last_id.insert(weft_proto::fid::object_oid_mdt(oid), oid);
        Ok(())
    }

    fn commit_record(&self) -> CommitRecord {
        lock_unpoisoned(&self.objects).commit_record
    }

    fn set_commit_record(&self, record: CommitRecord) -> StoreResult<()> {
        lock_unpoisoned(&self.objects).commit_record = record;
        Ok(())
    }

    fn machine_boot(&self) -> u64 {
        lock_unpoisoned(&self.objects).boot
    }

    fn sync_all(&self) -> StoreResult<()> {
        let mut objects = lock_unpoisoned(&self.objects);
        objects.durable = objects.current.clone();
        Ok(())
    }

    fn statfs(&self) -> StoreResult<StatfsInfo> {
        let objects = lock_unpoisoned(&self.objects);
        let free_pages = self.capacity_pages.saturating_sub(objects.used_pages);
        // Object ids are the only bound on objects.
        let files = u64::from(u32::MAX) + 1;
        Ok(StatfsInfo {
            bsize: PAGE_BYTES as u32,
            blocks: self.capacity_pages,
            bfree: free_pages,
            bavail: free_pages,
            files,
            ffree: files - objects.current.len() as u64,
        })
    }

    fn local_path(&self, _oid: u32) -> StoreResult<Option<PathBuf>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(store: &MemStore, oid: u32) -> Vec<u8> {
        store.read(oid, 0, u32::MAX).expect("read").to_vec()
    }

    #[test]
    fn a_power_loss_keeps_what_was_synced_and_a_crash_keeps_everything() {
        let store = MemStore::new();
        assert_eq!(store.write(1, 0, b"synced").unwrap(), 6);
        store.sync(1).unwrap();
        store.write(1, 6, b" and not").unwrap();
        store.write(2, 0, b"never synced").unwrap();
        store.write(3, 0, b"synced").unwrap();
        store.sync(3).unwrap();
        store.set_len(3, 2).unwrap();
        store.set_last_id(40).unwrap();

        // kill -9: the page cache keeps everything, so the store is used as it is.
        assert_eq!(read_all(&store, 1), b"synced and not");
        assert_eq!(read_all(&store, 2), b"never synced");
        assert_eq!(read_all(&store, 3), b"sy");

        let restarted = store.after_power_loss();
        assert_eq!(read_all(&restarted, 1), b"synced");
        assert!(read_all(&restarted, 2).is_empty());
        assert_eq!(restarted.stat(2).unwrap(), ObjectAttr { size: 0, blocks: 0, mtime_ns: 0 });
        assert_eq!(read_all(&restarted, 3), b"synced");
        assert_eq!(restarted.last_id(0), 40);
        // Writing after the restart does not change what the lost machine had.
        restarted.write(1, 0, b"SYNCED").unwrap();
        assert_eq!(read_all(&store, 1), b"synced and not");
    }

    #[test]
    fn a_removed_object_reads_empty_and_a_power_loss_may_bring_it_back() {
        let store = MemStore::new();
        store.write(1, 0, b"old").unwrap();
        store.sync(1).unwrap();
        store.remove(1).unwrap();
        store.remove(1).unwrap();
        store.sync(1).unwrap();
        assert!(read_all(&store, 1).is_empty());
        assert_eq!(store.stat(1).unwrap(), ObjectAttr { size: 0, blocks: 0, mtime_ns: 0 });
        assert_eq!(read_all(&store.after_power_loss(), 1), b"old");

        // Made again and synced: the new object is the one that survives.
        store.write(1, 0, b"new").unwrap();
        store.sync(1).unwrap();
        assert_eq!(read_all(&store.after_power_loss(), 1), b"new");
    }

    #[test]
    fn objects_are_sparse_and_a_cut_then_extended_object_shows_a_hole() {
        let store = MemStore::new();
        store.write(1, 1 << 30, &[1u8; 4096]).unwrap();
        let attr = store.stat(1).unwrap();
        assert_eq!(attr.size, (1 << 30) + 4096);
        assert!(attr.blocks >= 8 && attr.blocks * 512 < 1 << 20, "{attr:?}");

        store.write(2, 0, &[7u8; 10_000]).unwrap();
        store.set_len(2, 5000).unwrap();
        store.set_len(2, 12_000).unwrap();
        let data = read_all(&store, 2);
        assert_eq!(data.len(), 12_000);
        assert!(data[..5000].iter().all(|&b| b == 7));
        assert!(data[5000..].iter().all(|&b| b == 0), "the cut bytes must not come back");
        assert_eq!(
            store.read(2, 4990, 20).unwrap().as_ref(),
            &[7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert!(store.read(2, 12_000, 10).unwrap().is_empty());

        store.set_len(3, 100).unwrap();
        assert_eq!(read_all(&store, 3), [0u8; 100]);
    }

    #[test]
    fn fallocate_allocates_punches_and_zeroes_as_a_sparse_file_does() {
        let store = MemStore::new();
        store.fallocate(1, 0, 3 * 4096, FallocMode::Allocate, false).unwrap();
        assert_eq!(store.stat(1).unwrap().size, 3 * 4096);
        assert_eq!(store.stat(1).unwrap().blocks, 3 * SECTORS_PER_PAGE);
        store.write(1, 0, &[7; 3 * 4096]).unwrap();
        // A punch of a page and a half: the whole page goes, the half reads zeros.
        store.fallocate(1, 4096, 4096 + 2048, FallocMode::Punch, true).unwrap();
        let data = read_all(&store, 1);
        assert_eq!(data.len(), 3 * 4096, "a punch keeps the size");
        assert!(data[..4096].iter().all(|b| *b == 7) && data[4096..2 * 4096 + 2048].iter().all(|b| *b == 0));
        assert!(data[2 * 4096 + 2048..].iter().all(|b| *b == 7));
        assert_eq!(store.stat(1).unwrap().blocks, 2 * SECTORS_PER_PAGE);
        // Zeroing past the end extends; with keep_size it does not.
        store.fallocate(1, 0, 10, FallocMode::Zero, true).unwrap();
        store.fallocate(1, 3 * 4096, 4096, FallocMode::Zero, true).unwrap();
        assert_eq!(store.stat(1).unwrap().size, 3 * 4096);
        store.fallocate(1, 3 * 4096, 100, FallocMode::Zero, false).unwrap();
        let data = read_all(&store, 1);
        assert_eq!(data.len(), 3 * 4096 + 100);
        assert!(data[..10].iter().all(|b| *b == 0) && data[10] == 7);
        // A punch of an object that does not exist makes none.
        store.fallocate(2, 0, 4096, FallocMode::Punch, true).unwrap();
        assert_eq!(store.stat(2).unwrap(), ObjectAttr { size: 0, blocks: 0, mtime_ns: 0 });
    }

    #[test]
    fn a_full_store_refuses_writes_with_no_space() {
        let store = MemStore::with_capacity(2 * PAGE_BYTES as u64);
        store.write(1, 0, &[1u8; PAGE_BYTES]).unwrap();
        store.write(2, 0, &[2u8; PAGE_BYTES]).unwrap();
        let err = store.write(3, 0, b"x").unwrap_err();
        assert!(matches!(err, StoreError::NoSpace { .. }), "{err:?}");
        assert!(err.what().contains("object 3"), "{err}");
        assert_eq!(store.statfs().unwrap().bfree, 0);
        // Rewriting allocated pages needs no room; removing frees it.
        store.write(1, 10, b"still fits").unwrap();
        store.remove(2).unwrap();
        store.write(3, 0, b"x").unwrap();
        assert_eq!(read_all(&store, 3), b"x");
    }
}
