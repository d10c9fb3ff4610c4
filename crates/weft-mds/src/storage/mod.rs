//! Where an MDT keeps its state, behind two narrow traits:
//!
//! * [`KvStore`]: the durable tables (schema.rs names them by id): read through consistent
//!   snapshots ([`KvSnapshot`]), changed by atomic, durable commits. The MDS commits only at
//!   checkpoints, at format time, when it replays its journal and when it cleans up orphans;
//!   every mutation in between lives in memory and in the journal (store.rs, journal.rs).
//! * [`JournalStore`]: the journal's bytes, appended without a sync: they survive a crash
//!   of the process (the page cache keeps them), not a power loss.
//!
//! Implementations: redb and a file ([`redb_kv`], [`file_journal`]), the default; memory
//! ([`mem`]), which also says what a power loss leaves; and fault-injecting wrappers
//! ([`fault`]) driven by a [`weft_proto::faults::FaultPlan`].

pub mod fault;
pub mod file_journal;
mod mdt;
pub mod mem;
pub mod redb_kv;

pub use mdt::{MdtStorage, JOURNAL_FILE_NAME};

use std::sync::Arc;
use weft_proto::{ErrorCode, WeftError};

/// A storage failure. The MDS cannot tell one from another (every one is EIO to a client),
/// but a store that refuses to open can be told from one that fails under way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// Another MDS has the store open.
    #[error("{0}")]
    InUse(String),
    /// The store failed, or holds what this version cannot read.
    #[error("MDT storage error: {0}")]
    Io(String),
}

pub type StorageResult<T> = Result<T, StorageError>;

impl From<StorageError> for WeftError {
    fn from(e: StorageError) -> WeftError {
        match e {
            StorageError::InUse(what) => WeftError::new(ErrorCode::Busy, what),
            StorageError::Io(_) => WeftError::io(e.to_string()),
        }
    }
}

/// A row to write: table id, key, and the value or `None` to remove the key.
pub type Row<'a> = (u8, &'a [u8], Option<&'a [u8]>);

/// The MDT's durable tables. Keys and values are bytes; tables are the ids of schema.rs.
pub trait KvStore: Send + Sync + 'static {
    /// A consistent read-only view of every table, unchanged by later commits.
    fn snapshot(&self) -> StorageResult<Arc<dyn KvSnapshot>>;
    /// Writes `rows` in order in one atomic transaction, durable when it returns: after a
    /// crash or power loss a snapshot shows all of them or none.
    fn commit(&self, rows: &mut dyn Iterator<Item = Row<'_>>) -> StorageResult<()>;
}

/// One consistent view of a [`KvStore`].
pub trait KvSnapshot: Send + Sync + 'static {
    /// Calls `f` with the value of `key` in `table`; false when there is no such row.
    fn get(&self, table: u8, key: &[u8], f: &mut dyn FnMut(&[u8])) -> StorageResult<bool>;
    /// Calls `f` with every row of `table` whose key is `lo` or above and below `hi` (to the
    /// table's end when `None`), in key order, until it returns false.
    fn scan(
        &self,
        table: u8,
        lo: &[u8],
        hi: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> StorageResult<()>;
    /// Rows in `table`.
    fn len(&self, table: u8) -> StorageResult<u64>;
}

/// The journal's bytes.
pub trait JournalStore: Send + Sync + 'static {
    /// Appends `bytes` at the end, without a sync. On an error some prefix of them may have
    /// been stored.
    fn append(&self, bytes: &[u8]) -> StorageResult<()>;
    /// Every byte of the journal, in order.
    fn read_all(&self) -> StorageResult<Vec<u8>>;
    /// Cuts the journal to its first `len` bytes.
    fn truncate(&self, len: u64) -> StorageResult<()>;
    /// Bytes in the journal.
    fn len_bytes(&self) -> StorageResult<u64>;
}
