//! Any store with faults injected where a shared [`FaultPlan`] says, so that tests can show
//! what an OST answers, and what it keeps, when its disk fails or its machine loses power.
//! Every operation but [`ObjectStore::last_id`] (no I/O) counts as one operation of the plan.
//!
//! A power loss here only makes the operations fail: what the machine finds when it starts
//! again is the inner store's to say (for a [`super::MemStore`], `after_power_loss`).

use super::{CommitRecord, ObjectStore, StoreError, StoreResult};
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::Arc;
use weft_proto::faults::{Fault, FaultPlan};
use weft_proto::msg::ost::{FallocMode, ObjectAttr};
use weft_proto::msg::quota::QuotaOwner;
use weft_proto::msg::StatfsInfo;

#[derive(Debug)]
pub struct FaultStore<S: ObjectStore> {
    inner: S,
    plan: Arc<FaultPlan>,
}

impl<S: ObjectStore> FaultStore<S> {
    pub fn new(inner: S, plan: Arc<FaultPlan>) -> FaultStore<S> {
        FaultStore { inner, plan }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Asks the plan about the next operation: an error unless it may go ahead (a short
    /// write is for [`ObjectStore::write`] to carry out, and fails any other operation).
    fn check(&self, what: impl FnOnce() -> String) -> StoreResult<()> {
        match self.plan.next() {
            None => Ok(()),
            Some(fault) => Err(injected(fault, what())),
        }
    }
}

fn injected(fault: Fault, what: String) -> StoreError {
    let why = match fault {
        Fault::Fail | Fault::ShortWrite => "injected I/O error",
        Fault::PowerLoss => "injected power loss: the machine is off",
    };
    StoreError::Io { what: format!("{what}: {why}") }
}

impl<S: ObjectStore> ObjectStore for FaultStore<S> {
    fn read(&self, oid: u32, offset: u64, len: u32) -> StoreResult<Bytes> {
        self.check(|| format!("object {oid}: read"))?;
        self.inner.read(oid, offset, len)
    }

    /// A short write stores half of `data` (rounded down): a strict prefix of anything
    /// longer than one byte.
    fn write(&self, oid: u32, offset: u64, data: &[u8]) -> StoreResult<usize> {
        match self.plan.next() {
            None => self.inner.write(oid, offset, data),
            Some(Fault::ShortWrite) => self.inner.write(oid, offset, &data[..data.len() / 2]),
            Some(fault) => Err(injected(fault, format!("object {oid}: write"))),
        }
    }

    fn set_len(&self, oid: u32, size: u64) -> StoreResult<()> {
        self.check(|| format!("object {oid}: truncate"))?;
        self.inner.set_len(oid, size)
    }

    fn fallocate(&self, oid: u32, offset: u64, len: u64, mode: FallocMode, keep_size: bool) -> StoreResult<()> {
        self.check(|| format!("object {oid}: fallocate"))?;
        self.inner.fallocate(oid, offset, len, mode, keep_size)
    }

    fn stat(&self, oid: u32) -> StoreResult<ObjectAttr> {
        self.check(|| format!("object {oid}: stat"))?;
        self.inner.stat(oid)
    }

    fn sync(&self, oid: u32) -> StoreResult<()> {
        self.check(|| format!("object {oid}: sync"))?;
        self.inner.sync(oid)
    }

    fn remove(&self, oid: u32) -> StoreResult<()> {
        self.check(|| format!("object {oid}: remove"))?;
        self.inner.remove(oid)
    }

    fn last_id(&self, mdt: u32) -> u32 {
        self.inner.last_id(mdt)
    }

    fn set_last_id(&self, oid: u32) -> StoreResult<()> {
        self.check(|| format!("cannot persist LAST_ID {oid}"))?;
        self.inner.set_last_id(oid)
    }

    fn commit_record(&self) -> CommitRecord {
        self.inner.commit_record()
    }

    fn set_commit_record(&self, record: CommitRecord) -> StoreResult<()> {
        self.check(|| "commit record: write".to_string())?;
        self.inner.set_commit_record(record)
    }

    fn machine_boot(&self) -> u64 {
        self.inner.machine_boot()
    }

    fn sync_all(&self) -> StoreResult<()> {
        self.check(|| "sync everything".to_string())?;
        self.inner.sync_all()
    }

    fn statfs(&self) -> StoreResult<StatfsInfo> {
        self.check(|| "statfs".to_string())?;
        self.inner.statfs()
    }

    fn local_path(&self, oid: u32) -> StoreResult<Option<PathBuf>> {
        self.check(|| format!("object {oid}: local path"))?;
        self.inner.local_path(oid)
    }

    fn allocated(&self, oid: u32) -> StoreResult<Option<u64>> {
        self.inner.allocated(oid)
    }

    fn owner(&self, oid: u32) -> StoreResult<Option<QuotaOwner>> {
        self.inner.owner(oid)
    }

    fn set_owner(&self, oid: u32, owner: QuotaOwner) -> StoreResult<()> {
        self.check(|| format!("object {oid}: set owner"))?;
        self.inner.set_owner(oid, owner)
    }

    fn object_ids(&self) -> StoreResult<Vec<u32>> {
        self.inner.object_ids()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    fn store_with(faults: &[(u64, Fault)]) -> FaultStore<Arc<MemStore>> {
        let plan = Arc::new(FaultPlan::new());
        for &(op, fault) in faults {
            plan.inject(op, fault);
        }
        FaultStore::new(Arc::new(MemStore::new()), plan)
    }

    fn read_all(store: &dyn ObjectStore, oid: u32) -> Vec<u8> {
        store.read(oid, 0, u32::MAX).expect("read").to_vec()
    }

    #[test]
    fn a_failed_operation_changes_nothing_and_the_next_one_works() {
        let store = store_with(&[(1, Fault::Fail), (3, Fault::Fail), (5, Fault::Fail)]);
        store.write(1, 0, b"before").unwrap(); // op 0
        let err = store.write(1, 0, b"LOST").unwrap_err(); // op 1
        assert!(matches!(err, StoreError::Io { .. }) && err.what().contains("object 1: write"), "{err:?}");
        assert_eq!(read_all(&store, 1), b"before"); // op 2
        assert!(store.set_len(1, 0).is_err()); // op 3
        assert_eq!(read_all(&store, 1), b"before"); // op 4
        assert!(store.remove(1).is_err()); // op 5
        assert_eq!(read_all(&store, 1), b"before"); // op 6
    }

    #[test]
    fn a_short_write_stores_a_strict_prefix_and_says_so() {
        let store = store_with(&[(0, Fault::ShortWrite), (1, Fault::ShortWrite), (2, Fault::ShortWrite)]);
        assert_eq!(store.write(1, 0, b"0123456789").unwrap(), 5); // op 0
        assert_eq!(store.write(2, 0, b"x").unwrap(), 0); // op 1: half of one byte
                                                         // Any other operation fails as with Fail.
        assert!(store.sync(1).is_err()); // op 2
        assert_eq!(read_all(&store, 1), b"01234"); // op 3
        assert!(read_all(&store, 2).is_empty()); // op 4
    }

    #[test]
    fn after_a_power_loss_nothing_reaches_the_store_and_only_synced_data_comes_back() {
        let store = store_with(&[(3, Fault::PowerLoss)]);
        store.write(1, 0, b"synced").unwrap();
        store.sync(1).unwrap();
        store.write(1, 6, b" only").unwrap();
        for _ in 0..3 {
            let err = store.write(2, 0, b"never").unwrap_err();
            assert!(err.what().contains("power loss"), "{err}");
        }
        assert!(store.read(1, 0, 100).is_err());
        assert!(store.set_last_id(10).is_err());
        assert!(store.statfs().is_err());
        // Untouched since the power went: the current bytes are as before it.
        assert_eq!(read_all(store.inner().as_ref(), 1), b"synced only");
        assert!(read_all(store.inner().as_ref(), 2).is_empty());
        assert_eq!(store.inner().last_id(0), 0);

        let restarted = store.inner().after_power_loss();
        assert_eq!(read_all(&restarted, 1), b"synced");
    }
}
