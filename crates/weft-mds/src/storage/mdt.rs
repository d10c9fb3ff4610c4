//! The default storage of an MDT put together: redb and a journal file in its directory.
//! Apart from the traits (storage/mod.rs) so that the implementations depend on the traits
//! and this file on both, with no loop between them.

use super::{JournalStore, KvStore, StorageError, StorageResult};
use std::sync::Arc;

/// The journal's file in an MDT's directory (beside the key-value store's).
pub const JOURNAL_FILE_NAME: &str = "journal";

/// Everything an MDT stores.
#[derive(Clone)]
pub struct MdtStorage {
    pub kv: Arc<dyn KvStore>,
    pub journal: Arc<dyn JournalStore>,
}

impl MdtStorage {
    /// The default: redb and a journal file in the MDT's directory `dir`.
    pub fn open_dir(dir: &std::path::Path) -> StorageResult<MdtStorage> {
        MdtStorage::open_dir_with(dir, false)
    }

    /// As [`MdtStorage::open_dir`], checking every page of the key-value store first (see
    /// [`super::redb_kv::RedbKv::open_checked`]): a replica's.
    pub fn open_dir_checked(dir: &std::path::Path) -> StorageResult<MdtStorage> {
        MdtStorage::open_dir_with(dir, true)
    }

    fn open_dir_with(dir: &std::path::Path, check: bool) -> StorageResult<MdtStorage> {
        std::fs::create_dir_all(dir)
            .map_err(|e| StorageError::Io(format!("cannot create MDT directory {}: {e}", dir.display())))?;
        let db = dir.join(crate::schema::DB_FILE_NAME);
        let kv = if check { super::redb_kv::RedbKv::open_checked(&db)? } else { super::redb_kv::RedbKv::open(&db)? };
        Ok(MdtStorage {
            kv: Arc::new(kv),
            journal: Arc::new(super::file_journal::FileJournal::open(&dir.join(JOURNAL_FILE_NAME))?),
        })
    }
}
