//! Fault-injecting wrappers of the MDT's storage, driven by a shared
//! [`FaultPlan`](weft_proto::faults::FaultPlan): taking a snapshot, committing, and every
//! journal operation count as one operation each. A failed operation changes nothing; a
//! short write of the journal stores a prefix of the record and fails (a torn append); a
//! commit is atomic, so a short write fails it whole; after a power loss nothing reaches
//! the store any more (the restarted machine is built over the inner stores).

use super::{JournalStore, KvSnapshot, KvStore, Row, StorageError, StorageResult};
use std::sync::Arc;
use weft_proto::faults::{Fault, FaultPlan};

fn injected(fault: Fault, what: &str) -> StorageError {
    StorageError::Io(format!("injected {fault:?} at {what}"))
}

pub struct FaultKv {
    inner: Arc<dyn KvStore>,
    plan: Arc<FaultPlan>,
}

impl FaultKv {
    pub fn new(inner: Arc<dyn KvStore>, plan: Arc<FaultPlan>) -> FaultKv {
        FaultKv { inner, plan }
    }
}

impl KvStore for FaultKv {
    fn snapshot(&self) -> StorageResult<Arc<dyn KvSnapshot>> {
        match self.plan.next() {
            None => self.inner.snapshot(),
            Some(fault) => Err(injected(fault, "a snapshot")),
        }
    }

    fn commit(&self, rows: &mut dyn Iterator<Item = Row<'_>>) -> StorageResult<()> {
        match self.plan.next() {
            None => self.inner.commit(rows),
            Some(fault) => Err(injected(fault, "a commit")),
        }
    }
}

pub struct FaultJournal {
    inner: Arc<dyn JournalStore>,
    plan: Arc<FaultPlan>,
}

impl FaultJournal {
    pub fn new(inner: Arc<dyn JournalStore>, plan: Arc<FaultPlan>) -> FaultJournal {
        FaultJournal { inner, plan }
    }
}

impl JournalStore for FaultJournal {
    fn append(&self, bytes: &[u8]) -> StorageResult<()> {
        match self.plan.next() {
            None => self.inner.append(bytes),
            Some(Fault::ShortWrite) => {
                self.inner.append(&bytes[..bytes.len() / 2])?;
                Err(injected(Fault::ShortWrite, "a journal append"))
            }
            Some(fault) => Err(injected(fault, "a journal append")),
        }
    }

    fn read_all(&self) -> StorageResult<Vec<u8>> {
        match self.plan.next() {
            None => self.inner.read_all(),
            Some(fault) => Err(injected(fault, "a journal read")),
        }
    }

    fn truncate(&self, len: u64) -> StorageResult<()> {
        match self.plan.next() {
            None => self.inner.truncate(len),
            Some(fault) => Err(injected(fault, "a journal cut")),
        }
    }

    fn len_bytes(&self) -> StorageResult<u64> {
        // Bookkeeping, not I/O that can fail on its own: not counted.
        self.inner.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::{MemJournal, MemKv};

    #[test]
    fn each_fault_does_what_it_says() {
        let plan = Arc::new(FaultPlan::new());
        let (kv, journal) = (Arc::new(MemKv::default()), Arc::new(MemJournal::default()));
        let fkv = FaultKv::new(kv.clone(), plan.clone());
        let fj = FaultJournal::new(journal.clone(), plan.clone());
        plan.inject(0, Fault::Fail);
        plan.inject(1, Fault::ShortWrite);
        plan.inject(3, Fault::PowerLoss);
        assert!(fkv.commit(&mut [(1, b"k".as_slice(), Some(b"v".as_slice()))].into_iter()).is_err());
        assert_eq!(kv.snapshot().unwrap().len(1).unwrap(), 0, "a failed commit wrote nothing");
        assert!(fj.append(b"abcd").is_err());
        assert_eq!(journal.read_all().unwrap(), b"ab", "a short append stored a prefix");
        fj.append(b"ef").unwrap();
        assert!(fj.append(b"gh").is_err());
        assert!(fkv.snapshot().is_err() && fj.read_all().is_err(), "nothing works after a power loss");
        assert_eq!(journal.read_all().unwrap(), b"abef");
    }
}
