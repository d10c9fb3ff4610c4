//! The journal in a file of the MDT's directory, appended with plain write(2): the page
//! cache keeps it through a crash of the process (see journal.rs for why that is enough).

use super::{JournalStore, StorageError, StorageResult};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub struct FileJournal {
    path: PathBuf,
    file: Mutex<File>,
}

impl FileJournal {
    pub fn open(path: &Path) -> StorageResult<FileJournal> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)
            .map_err(|e| StorageError::Io(format!("cannot open the MDT journal {}: {e}", path.display())))?;
        Ok(FileJournal { path: path.to_path_buf(), file: Mutex::new(file) })
    }

    fn file(&self) -> std::sync::MutexGuard<'_, File> {
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn error(&self, what: &str, e: std::io::Error) -> StorageError {
        StorageError::Io(format!("cannot {what} the MDT journal {}: {e}", self.path.display()))
    }
}

impl JournalStore for FileJournal {
    fn append(&self, bytes: &[u8]) -> StorageResult<()> {
        self.file().write_all(bytes).map_err(|e| self.error("append to", e))
    }

    fn read_all(&self) -> StorageResult<Vec<u8>> {
        let mut bytes = Vec::new();
        File::open(&self.path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(|e| self.error("read", e))?;
        Ok(bytes)
    }

    fn truncate(&self, len: u64) -> StorageResult<()> {
        self.file().set_len(len).map_err(|e| self.error("cut", e))
    }

    fn len_bytes(&self) -> StorageResult<u64> {
        Ok(self.file().metadata().map_err(|e| self.error("stat", e))?.len())
    }
}
