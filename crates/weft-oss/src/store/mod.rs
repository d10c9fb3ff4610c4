//! Where an OST keeps its objects, behind one narrow trait, so that the OST's request logic
//! (`ost.rs`) runs unchanged over a directory of files ([`FileStore`], what servers use),
//! over memory that models what a power loss keeps ([`MemStore`], for tests and
//! simulations), and over either with injected faults ([`FaultStore`]).
//!
//! A store knows objects by object id only: which FIDs belong to the OST, the limits of a
//! request and the rule that LAST_ID only grows are the OST's to enforce.

mod fault;
mod file;
mod mem;

pub use fault::FaultStore;
pub use file::{is_record_file, FileStore, RECORD_FILE_NAMES};
pub use mem::MemStore;

use bytes::Bytes;
use std::path::PathBuf;
use std::sync::Arc;
use weft_proto::msg::ost::{FallocMode, ObjectAttr};
use weft_proto::msg::quota::QuotaOwner;
use weft_proto::msg::StatfsInfo;
use weft_proto::{ErrorCode, WeftError};

pub type StoreResult<T> = Result<T, StoreError>;

/// What an OST keeps of its commits (crate::commit): how many times its server started it,
/// and the last transaction number it made durable. Both only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitRecord {
    pub starts: u64,
    pub committed: u64,
    /// The machine's boot the OST last started in ([`ObjectStore::machine_boot`]): a start
    /// in the same boot found the page cache whole (a restart of the process), one in
    /// another may have lost what was not committed (a power loss, a reboot, another node).
    pub boot: u64,
}

/// The objects of one OST, by object id. Every method may block (file I/O); the service
/// calls them from the request's task only for small I/O, else from tokio's blocking pool.
pub trait ObjectStore: Send + Sync + 'static {
    /// Up to `len` bytes of object `oid` from `offset`: fewer past its end, none for an
    /// object that does not exist (never written, or removed).
    fn read(&self, oid: u32, offset: u64, len: u32) -> StoreResult<Bytes>;

    /// Stores a prefix of `data` at `offset`, creating the object if missing, and says how
    /// many bytes that prefix holds: possibly fewer than given (a short write), so a caller
    /// that needs all of them stored writes the rest again.
    fn write(&self, oid: u32, offset: u64, data: &[u8]) -> StoreResult<usize>;

    /// Cuts or extends (with a hole) object `oid` to `size` bytes, creating it if missing.
    fn set_len(&self, oid: u32, size: u64) -> StoreResult<()>;

    /// fallocate(2) on `[offset, offset+len)` of object `oid` (see `ost::Fallocate`): the
    /// modes that allocate make a missing object; a punch, or a zeroing that keeps the size,
    /// leaves a missing one missing (it reads as zeros already).
    fn fallocate(&self, oid: u32, offset: u64, len: u64, mode: FallocMode, keep_size: bool) -> StoreResult<()>;

    /// The object's size and 512-byte blocks; both 0 for an object that does not exist.
    fn stat(&self, oid: u32) -> StoreResult<ObjectAttr>;

    /// Makes the object's data and its existence durable (they survive a power loss). An
    /// object that does not exist is left as it is.
    fn sync(&self, oid: u32) -> StoreResult<()>;

    /// Makes every object of `oids` durable, as [`ObjectStore::sync`] of each does (an OST's
    /// commit, crate::commit). A store may do it at once for all (a file system's syncfs).
    fn sync_many(&self, oids: &[u32]) -> StoreResult<()> {
        oids.iter().try_for_each(|oid| self.sync(*oid))
    }

    /// Removes the object; one that does not exist is fine.
    fn remove(&self, oid: u32) -> StoreResult<()>;

    /// The highest object id ever handed out in MDT `mdt`'s range of ids
    /// (`weft_proto::fid::object_oid_range`), as last given to [`ObjectStore::set_last_id`]
    /// (0 if never). No I/O: a store reads it when it opens.
    fn last_id(&self, mdt: u32) -> u32;

    /// Records `oid` as the highest object id handed out in its MDT's range, durably before
    /// it returns. Does not compare: the caller keeps each LAST_ID growing.
    fn set_last_id(&self, oid: u32) -> StoreResult<()>;

    /// The OST's commit record as last given to [`ObjectStore::set_commit_record`]
    /// (zeros if never). No I/O: a store reads it when it opens.
    fn commit_record(&self) -> CommitRecord;

    /// Records the OST's commit record, durably before it returns.
    fn set_commit_record(&self, record: CommitRecord) -> StoreResult<()>;

    /// Which boot of the machine the store's data lives under now (Linux's boot_id for
    /// files; a count of simulated power losses in memory). No I/O past a small read.
    fn machine_boot(&self) -> u64;

    /// Makes everything the store holds durable (a restarted OST's first act when its
    /// machine did not reboot: what its previous process wrote is all there, in the cache).
    fn sync_all(&self) -> StoreResult<()>;

    /// Capacity and use of the space the objects live in.
    fn statfs(&self) -> StoreResult<StatfsInfo>;

    /// The object's file by absolute path, made if missing (as a first write would), for a
    /// client of this process to read and write itself (FUSE passthrough); None for a store
    /// that keeps objects without files.
    fn local_path(&self, oid: u32) -> StoreResult<Option<PathBuf>>;

    /// The object's 512-byte blocks now; None when it does not exist (quota accounting,
    /// after every change to it).
    fn allocated(&self, oid: u32) -> StoreResult<Option<u64>> {
        let attr = self.stat(oid)?;
        Ok((attr.size != 0 || attr.blocks != 0).then_some(attr.blocks))
    }

    /// The owner recorded for the object (whose quotas its blocks count against); None for
    /// an object without one (never written with an owner) or one that does not exist.
    fn owner(&self, oid: u32) -> StoreResult<Option<QuotaOwner>>;

    /// Records the object's owner with the object (an existing object).
    fn set_owner(&self, oid: u32, owner: QuotaOwner) -> StoreResult<()>;

    /// The ids of every object that exists (a scan at start, and to verify quota usage).
    fn object_ids(&self) -> StoreResult<Vec<u32>>;
}

/// A store shared with whoever needs to look at it while an OST uses it: a simulation keeps
/// its [`MemStore`] to bring it back after a power loss, a test its [`FileStore`] to count
/// cached handles.
impl<S: ObjectStore + ?Sized> ObjectStore for Arc<S> {
    fn read(&self, oid: u32, offset: u64, len: u32) -> StoreResult<Bytes> {
        (**self).read(oid, offset, len)
    }
    fn write(&self, oid: u32, offset: u64, data: &[u8]) -> StoreResult<usize> {
        (**self).write(oid, offset, data)
    }
    fn set_len(&self, oid: u32, size: u64) -> StoreResult<()> {
        (**self).set_len(oid, size)
    }
    fn fallocate(&self, oid: u32, offset: u64, len: u64, mode: FallocMode, keep_size: bool) -> StoreResult<()> {
        (**self).fallocate(oid, offset, len, mode, keep_size)
    }
    fn stat(&self, oid: u32) -> StoreResult<ObjectAttr> {
        (**self).stat(oid)
    }
    fn sync(&self, oid: u32) -> StoreResult<()> {
        (**self).sync(oid)
    }
    fn sync_many(&self, oids: &[u32]) -> StoreResult<()> {
        (**self).sync_many(oids)
    }
    fn remove(&self, oid: u32) -> StoreResult<()> {
        (**self).remove(oid)
    }
    fn last_id(&self, mdt: u32) -> u32 {
        (**self).last_id(mdt)
    }
    fn set_last_id(&self, oid: u32) -> StoreResult<()> {
        (**self).set_last_id(oid)
    }
    fn commit_record(&self) -> CommitRecord {
        (**self).commit_record()
    }
    fn set_commit_record(&self, record: CommitRecord) -> StoreResult<()> {
        (**self).set_commit_record(record)
    }
    fn machine_boot(&self) -> u64 {
        (**self).machine_boot()
    }
    fn sync_all(&self) -> StoreResult<()> {
        (**self).sync_all()
    }
    fn statfs(&self) -> StoreResult<StatfsInfo> {
        (**self).statfs()
    }
    fn local_path(&self, oid: u32) -> StoreResult<Option<PathBuf>> {
        (**self).local_path(oid)
    }
    fn allocated(&self, oid: u32) -> StoreResult<Option<u64>> {
        (**self).allocated(oid)
    }
    fn owner(&self, oid: u32) -> StoreResult<Option<QuotaOwner>> {
        (**self).owner(oid)
    }
    fn set_owner(&self, oid: u32, owner: QuotaOwner) -> StoreResult<()> {
        (**self).set_owner(oid, owner)
    }
    fn object_ids(&self) -> StoreResult<Vec<u32>> {
        (**self).object_ids()
    }
}

/// Why a store operation failed, in the classes a client tells apart (the errno it gets).
/// `what` names the object and the operation ("object 7: fdatasync: ..."); the OST adds
/// itself when it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// No room left: the device is full or a quota is reached (ENOSPC, EDQUOT). The client
    /// gets ENOSPC and may free space.
    NoSpace { what: String },
    /// The store's file system holds no object this large (EFBIG).
    TooBig { what: String },
    /// A file the store relies on is gone (ENOENT), as the OST has always answered it.
    NotFound { what: String },
    /// The storage did not answer in time (ETIMEDOUT, a store on a network file system).
    TimedOut { what: String },
    /// Any other failure of the device or the file system (EIO).
    Io { what: String },
}

impl StoreError {
    /// `context` ("object 7: write") and the error, classified as weft_proto classifies
    /// local storage errors (`From<std::io::Error> for WeftError`), so a code a client saw
    /// before stores were a trait is the code it sees now.
    pub fn from_io(context: impl std::fmt::Display, e: std::io::Error) -> StoreError {
        let what = format!("{context}: {e}");
        match WeftError::from(e).code {
            ErrorCode::NoSpace => StoreError::NoSpace { what },
            ErrorCode::FileTooBig => StoreError::TooBig { what },
            ErrorCode::NotFound => StoreError::NotFound { what },
            ErrorCode::TimedOut => StoreError::TimedOut { what },
            _ => StoreError::Io { what },
        }
    }

    /// What failed, for a person.
    pub fn what(&self) -> &str {
        match self {
            StoreError::NoSpace { what }
            | StoreError::TooBig { what }
            | StoreError::NotFound { what }
            | StoreError::TimedOut { what }
            | StoreError::Io { what } => what,
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what())
    }
}

impl std::error::Error for StoreError {}

impl From<StoreError> for WeftError {
    fn from(e: StoreError) -> WeftError {
        match e {
            StoreError::NoSpace { what } => WeftError::new(ErrorCode::NoSpace, what),
            StoreError::TooBig { what } => WeftError::new(ErrorCode::FileTooBig, what),
            StoreError::NotFound { what } => WeftError::new(ErrorCode::NotFound, what),
            StoreError::TimedOut { what } => WeftError::new(ErrorCode::TimedOut, what),
            StoreError::Io { what } => WeftError::io(what),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_keep_the_codes_clients_saw() {
        let cases = [
            (libc::ENOSPC, ErrorCode::NoSpace),
            (libc::EDQUOT, ErrorCode::NoSpace),
            (libc::EFBIG, ErrorCode::FileTooBig),
            (libc::ENOENT, ErrorCode::NotFound),
            (libc::EIO, ErrorCode::Io),
            (libc::EACCES, ErrorCode::Io),
        ];
        for (errno, code) in cases {
            let err = WeftError::from(StoreError::from_io("object 7: write", std::io::Error::from_raw_os_error(errno)));
            assert_eq!(err.code, code, "errno {errno}");
            assert!(err.message.starts_with("object 7: write: "), "{}", err.message);
        }
    }
}
