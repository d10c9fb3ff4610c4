//! A replica's log: one append-only file (`DIR/log`) of [records](crate::record), each an
//! openraft `Entry` in postcard, and small files for what must never go back (`DIR/vote`),
//! what was purged (`DIR/purged`) and the committed log id (`DIR/committed`).
//!
//! Durability is today's MDT journal's: an append is a plain write(2), no fsync, since the
//! page cache keeps it through a kill -9 of the process; the file is fsync'd on the
//! service's schedule ([`LogStore::sync`], which `Group::sync` calls) and at shutdown. The
//! vote is written to a temporary file, fsync'd and renamed each time: a vote that went back
//! after a power loss could elect two leaders in one term. The committed log id is renamed
//! into place without an fsync (it is only a hint to re-apply after a restart; the sync
//! makes it durable with the log); the purged log id is fsync'd before the prefix goes.
//!
//! An index (log index -> offset, log id) is kept in memory; entries are read back from
//! the file (the page cache holds the newest ones). Truncating a conflicting suffix cuts the
//! file; purging a prefix records the purged log id, and rewrites the file without the
//! prefix once the prefix is large ([`LOG_REWRITE_PREFIX_BYTES_MIN`]).
//!
//! At open every record is read and checked: a torn last record (a crash while writing it;
//! it was never acknowledged) is cut off with a warning; any other bad record refuses the
//! start, naming the file, the offset and what is wrong.

use crate::limits::{LOG_RECORD_BYTES_MAX, LOG_REWRITE_PREFIX_BYTES_MIN};
use crate::record::{self, corrupt, file_error, Read};
use crate::{NodeId, TypeConfig};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, Entry, LogId, LogState, RaftLogId, RaftLogReader, StorageError, StorageIOError, Vote};
use std::collections::VecDeque;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::ops::{Bound, RangeBounds};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use weft_proto::faults::{Fault, FaultPlan};
use weft_proto::WeftResult;

/// Where one entry is in the file.
#[derive(Debug, Clone, Copy)]
struct Slot {
    log_id: LogId<NodeId>,
    offset: u64,
}

struct Files {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    /// The end of the last whole record: where the next append goes.
    end: u64,
    /// Every entry in the file, consecutive indexes, oldest first.
    slots: VecDeque<Slot>,
    purged: Option<LogId<NodeId>>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    rewrite_prefix_bytes_min: u64,
    /// The end of the log as of its last fsync: what a power loss keeps at worst.
    synced_end: u64,
    /// Set by an injected power loss: the file was cut back once.
    powered_off: bool,
    /// Faults to inject (tests and simulations): appends, vote saves and syncs consult it.
    faults: Option<Arc<FaultPlan>>,
}

/// The log of one replica; clones share it (openraft's readers are clones).
#[derive(Clone)]
pub struct LogStore {
    files: Arc<Mutex<Files>>,
    /// The committed index last saved (u64::MAX: none), for the group's status.
    committed_index: Arc<AtomicU64>,
}

fn io_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_logs(AnyError::error(e.to_string())).into()
}

fn read_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::read_logs(AnyError::error(e.to_string())).into()
}

impl LogStore {
    /// Opens (or makes) the log in `dir`, checking every record.
    pub fn open(dir: &Path) -> WeftResult<LogStore> {
        LogStore::open_with(dir, LOG_REWRITE_PREFIX_BYTES_MIN, None)
    }

    /// Opens the log in `dir` with faults injected where `faults` says: an append fails
    /// (nothing written), writes a short prefix of its records (a torn tail), or finds the
    /// machine powered off (the file cut back to what its last fsync made durable); a vote
    /// save or a sync fails. Every later operation after a power loss fails.
    pub fn open_with_faults(dir: &Path, faults: Arc<FaultPlan>) -> WeftResult<LogStore> {
        LogStore::open_with(dir, LOG_REWRITE_PREFIX_BYTES_MIN, Some(faults))
    }

    pub(crate) fn open_with(
        dir: &Path,
        rewrite_prefix_bytes_min: u64,
        faults: Option<Arc<FaultPlan>>,
    ) -> WeftResult<LogStore> {
        std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
        let vote: Option<Vote<NodeId>> = read_value(&dir.join("vote"))?;
        let purged: Option<LogId<NodeId>> = read_value(&dir.join("purged"))?;
        // Only a hint (re-applied up to it at start): a damaged one is forgotten, not fatal.
        let committed: Option<LogId<NodeId>> = match read_value(&dir.join("committed")) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("{e}: re-applying after this restart waits for the leader");
                None
            }
        };
        let path = dir.join("log");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| file_error(&path, e))?;
        let len = file.metadata().map_err(|e| file_error(&path, e))?.len();
        let mut slots: VecDeque<Slot> = VecDeque::new();
        let mut offset = 0u64;
        loop {
            match record::read_at(&file, offset, len, LOG_RECORD_BYTES_MAX).map_err(|e| file_error(&path, e))? {
                Read::End => break,
                Read::Torn(why) => {
                    tracing::warn!(
                        "{}: cutting off a torn last record at offset {offset} ({why}): it was never acknowledged",
                        path.display()
                    );
                    file.set_len(offset).map_err(|e| file_error(&path, e))?;
                    break;
                }
                Read::Corrupt(why) => return Err(corrupt(&path, offset, why)),
                Read::Record { payload, next } => {
                    let entry: Entry<TypeConfig> = postcard::from_bytes(&payload)
                        .map_err(|e| corrupt(&path, offset, format!("an entry that does not decode: {e}")))?;
                    let log_id = *entry.get_log_id();
                    if purged.is_some_and(|p| log_id.index <= p.index) {
                        // Purged: the prefix a rewrite has not dropped yet.
                    } else {
                        let expected = match (slots.back(), purged) {
                            (Some(last), _) => Some(last.log_id.index + 1),
                            (None, Some(p)) => Some(p.index + 1),
                            (None, None) => None,
                        };
                        if expected.is_some_and(|e| e != log_id.index) {
                            return Err(corrupt(
                                &path,
                                offset,
                                format!(
                                    "entry {} where entry {} should be",
                                    log_id.index,
                                    expected.unwrap_or_default()
                                ),
                            ));
                        }
                        slots.push_back(Slot { log_id, offset });
                    }
                    offset = next;
                }
            }
        }
        let committed_index = Arc::new(AtomicU64::new(committed.map_or(u64::MAX, |c| c.index)));
        Ok(LogStore {
            files: Arc::new(Mutex::new(Files {
                dir: dir.to_path_buf(),
                path,
                file,
                end: offset,
                slots,
                purged,
                vote,
                committed,
                rewrite_prefix_bytes_min,
                synced_end: offset,
                powered_off: false,
                faults,
            })),
            committed_index,
        })
    }

    fn files(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes everything appended so far, and the committed log id, durable.
    pub fn sync(&self) -> WeftResult<()> {
        // The fsync outside the lock, on a second descriptor of the file: appends go on
        // meanwhile (what they add is synced next time).
        let (file, path, dir, end) = {
            let mut files = self.files();
            if let Err(why) = files.fault() {
                return Err(file_error(&files.path, why));
            }
            let file = files.file.try_clone().map_err(|e| file_error(&files.path, e))?;
            (file, files.path.clone(), files.dir.clone(), files.end)
        };
        file.sync_data().map_err(|e| file_error(&path, e))?;
        {
            let mut files = self.files();
            // A truncate meanwhile may have cut below `end`.
            files.synced_end = files.synced_end.max(end).min(files.end);
        }
        // The committed log id as last renamed into place (save_committed), and the rename.
        let committed = dir.join("committed");
        match File::open(&committed) {
            Ok(f) => f.sync_all().map_err(|e| file_error(&committed, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(file_error(&committed, e)),
        }
        record::sync_dir(&path).map_err(|e| file_error(&dir, e))
    }

    /// The committed index last saved, for the status.
    pub fn committed_index(&self) -> Option<u64> {
        match self.committed_index.load(Ordering::Acquire) {
            u64::MAX => None,
            i => Some(i),
        }
    }

    /// The last log id in the log (or purged), for tests and the status.
    pub fn last_log_id(&self) -> Option<LogId<NodeId>> {
        let files = self.files();
        files.slots.back().map(|s| s.log_id).or(files.purged)
    }

    /// The log file's length, for tests of the rewrite.
    #[cfg(test)]
    fn file_bytes(&self) -> u64 {
        self.files().end
    }
}

fn read_value<T: serde::de::DeserializeOwned>(path: &Path) -> WeftResult<Option<T>> {
    match record::read_small(path, LOG_RECORD_BYTES_MAX)? {
        None => Ok(None),
        Some(payload) => postcard::from_bytes(&payload)
            .map(Some)
            .map_err(|e| corrupt(path, record::HEADER_BYTES, format!("a value that does not decode: {e}"))),
    }
}

/// Errors as text inside this module, typed for openraft at its traits (its StorageError is
/// large to carry around).
fn write_value<T: serde::Serialize>(path: &Path, value: &T, durable: bool) -> Result<(), String> {
    let bytes = postcard::to_allocvec(value).map_err(|e| e.to_string())?;
    record::write_small(path, &bytes, durable).map_err(|e| format!("{}: {e}", path.display()))
}

impl Files {
    /// The fault planned for this operation, acted on where it is the same for every
    /// operation: Err(why) for a failure or a power loss (the file then cut back to what its
    /// last fsync made durable); Ok(Some(ShortWrite)) for the caller to act on.
    fn fault(&mut self) -> Result<Option<Fault>, String> {
        let Some(plan) = &self.faults else { return Ok(None) };
        match plan.next() {
            None => Ok(None),
            Some(Fault::Fail) => Err("injected fault: the disk failed".into()),
            Some(Fault::ShortWrite) => Ok(Some(Fault::ShortWrite)),
            Some(Fault::PowerLoss) => {
                if !self.powered_off {
                    self.powered_off = true;
                    let _ = self.file.set_len(self.synced_end);
                }
                Err("injected fault: the machine lost power".into())
            }
        }
    }

    fn first_index(&self) -> Option<u64> {
        self.slots.front().map(|s| s.log_id.index)
    }

    fn read_entry(&self, slot: &Slot) -> Result<Entry<TypeConfig>, String> {
        let next = self
            .slots
            .get((slot.log_id.index - self.first_index().unwrap_or(0)) as usize + 1)
            .map_or(self.end, |s| s.offset);
        match record::read_at(&self.file, slot.offset, next, LOG_RECORD_BYTES_MAX) {
            Ok(Read::Record { payload, .. }) => postcard::from_bytes(&payload)
                .map_err(|e| format!("{} at offset {}: {e}", self.path.display(), slot.offset)),
            Ok(other) => Err(format!("{} at offset {}: {other:?} on reading back", self.path.display(), slot.offset)),
            Err(e) => Err(format!("{}: {e}", self.path.display())),
        }
    }

    /// Drops the file's prefix before `prefix` bytes: a new file, fsync'd, renamed.
    fn rewrite(&mut self, prefix: u64) -> std::io::Result<()> {
        let tmp = record::tmp_path(&self.path);
        let out = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp)?;
        let mut buf = vec![0u8; 1024 * 1024];
        let mut at = prefix;
        while at < self.end {
            let n = (self.end - at).min(buf.len() as u64) as usize;
            self.file.read_exact_at(&mut buf[..n], at)?;
            out.write_all_at(&buf[..n], at - prefix)?;
            at += n as u64;
        }
        out.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        record::sync_dir(&self.path)?;
        self.file = out;
        self.end -= prefix;
        for slot in self.slots.iter_mut() {
            slot.offset -= prefix;
        }
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let files = self.files();
        let Some(first) = files.first_index() else { return Ok(Vec::new()) };
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i + 1,
            Bound::Unbounded => first,
        }
        .max(first);
        let last = first + files.slots.len() as u64 - 1;
        let end = match range.end_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => match i.checked_sub(1) {
                Some(i) => i,
                None => return Ok(Vec::new()),
            },
            Bound::Unbounded => last,
        }
        .min(last);
        let mut entries = Vec::with_capacity(end.saturating_sub(start).saturating_add(1).min(1024) as usize);
        let mut index = start;
        while index <= end {
            let slot = files.slots[(index - first) as usize];
            entries.push(files.read_entry(&slot).map_err(read_error)?);
            index += 1;
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let files = self.files();
        let last_log_id = files.slots.back().map(|s| s.log_id).or(files.purged);
        Ok(LogState { last_purged_log_id: files.purged, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut files = self.files();
        if let Err(why) = files.fault() {
            return Err(StorageIOError::write_vote(AnyError::error(why)).into());
        }
        let path = files.dir.join("vote");
        write_value(&path, vote, true)
            .map_err(|e| StorageError::from(StorageIOError::write_vote(AnyError::error(e.to_string()))))?;
        files.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.files().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), StorageError<NodeId>> {
        let mut files = self.files();
        if let Some(c) = committed {
            write_value(&files.dir.join("committed"), &c, false).map_err(io_error)?;
            self.committed_index.store(c.index, Ordering::Release);
        }
        files.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        let files = self.files();
        let last = files.slots.back().map(|s| s.log_id).or(files.purged);
        // After a power loss the hint may be ahead of what the log kept.
        Ok(match files.committed {
            Some(c) if last.is_none_or(|l| l.index < c.index) => last,
            c => c,
        })
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let result = (|| -> Result<(), String> {
            let mut files = self.files();
            let mut buf = Vec::new();
            let mut added = Vec::new();
            let mut next = files.slots.back().map(|s| s.log_id.index + 1).or(files.purged.map(|p| p.index + 1));
            for entry in entries {
                let log_id = *entry.get_log_id();
                if next.is_some_and(|n| n != log_id.index) {
                    return Err(format!(
                        "append of entry {} where entry {} is next",
                        log_id.index,
                        next.unwrap_or_default()
                    ));
                }
                next = Some(log_id.index + 1);
                let payload = postcard::to_allocvec(&entry).map_err(|e| e.to_string())?;
                if payload.len() > LOG_RECORD_BYTES_MAX as usize {
                    return Err(format!(
                        "entry {} of {} bytes exceeds {LOG_RECORD_BYTES_MAX}",
                        log_id.index,
                        payload.len()
                    ));
                }
                added.push(Slot { log_id, offset: files.end + buf.len() as u64 });
                buf.extend_from_slice(&record::encode(&payload));
            }
            if files.fault()? == Some(Fault::ShortWrite) {
                let _ = files.file.write_all_at(&buf[..buf.len() / 2], files.end);
                return Err(format!("{}: injected fault: a short write", files.path.display()));
            }
            files.file.write_all_at(&buf, files.end).map_err(|e| format!("{}: {e}", files.path.display()))?;
            files.end += buf.len() as u64;
            files.slots.extend(added);
            Ok(())
        })();
        // No fsync: written is as durable as today's MDT journal (module docs).
        match &result {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.clone()))),
        }
        result.map_err(io_error)
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut files = self.files();
        let Some(first) = files.first_index() else { return Ok(()) };
        if log_id.index < first {
            return Err(io_error(format!("truncate at {} before the log's first entry {first}", log_id.index)));
        }
        let keep = (log_id.index - first) as usize;
        if keep >= files.slots.len() {
            return Ok(());
        }
        let end = files.slots[keep].offset;
        files.file.set_len(end).map_err(|e| io_error(format!("{}: {e}", files.path.display())))?;
        files.end = end;
        files.slots.truncate(keep);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut files = self.files();
        if files.purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        // Durable before the entries go: a restart must not look for them.
        write_value(&files.dir.join("purged"), &log_id, true).map_err(io_error)?;
        files.purged = Some(log_id);
        while files.slots.front().is_some_and(|s| s.log_id.index <= log_id.index) {
            files.slots.pop_front();
        }
        let prefix = files.slots.front().map_or(files.end, |s| s.offset);
        let path = files.path.clone();
        if files.slots.is_empty() {
            files.file.set_len(0).map_err(|e| io_error(format!("{}: {e}", path.display())))?;
            files.end = 0;
        } else if prefix >= files.rewrite_prefix_bytes_min && prefix * 2 > files.end {
            files
                .rewrite(prefix)
                .map_err(|e| io_error(format!("{}: rewriting without its prefix: {e}", path.display())))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(term: u64, index: u64, data: &str) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(data.as_bytes().to_vec()),
        }
    }

    /// Appends `entries` as openraft would, without its callback (made only by openraft):
    /// the same write path.
    fn append(log: &LogStore, entries: Vec<Entry<TypeConfig>>) {
        let mut files = log.files();
        for e in entries {
            let payload = postcard::to_allocvec(&e).unwrap();
            let offset = files.end;
            files.file.write_all_at(&record::encode(&payload), offset).unwrap();
            files.end += record::HEADER_BYTES + payload.len() as u64;
            files.slots.push_back(Slot { log_id: e.log_id, offset });
        }
    }

    fn data(entries: &[Entry<TypeConfig>]) -> Vec<(u64, String)> {
        entries
            .iter()
            .map(|e| match &e.payload {
                EntryPayload::Normal(d) => (e.log_id.index, String::from_utf8_lossy(d).into_owned()),
                _ => (e.log_id.index, String::new()),
            })
            .collect()
    }

    #[tokio::test]
    async fn entries_votes_and_purges_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogStore::open(dir.path()).unwrap();
        append(&log, (0..10).map(|i| entry(1, i, &format!("e{i}"))).collect());
        log.save_vote(&Vote::new(3, 2)).await.unwrap();
        log.truncate(LogId::new(CommittedLeaderId::new(1, 1), 8)).await.unwrap();
        append(&log, vec![entry(2, 8, "x8")]);
        log.purge(LogId::new(CommittedLeaderId::new(1, 1), 2)).await.unwrap();
        drop(log);

        let mut log = LogStore::open(dir.path()).unwrap();
        assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(3, 2)));
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(2));
        assert_eq!(state.last_log_id, Some(LogId::new(CommittedLeaderId::new(2, 1), 8)));
        let all = log.try_get_log_entries(..).await.unwrap();
        let want: Vec<(u64, String)> =
            (3..8).map(|i| (i, format!("e{i}"))).chain(std::iter::once((8, "x8".to_string()))).collect();
        assert_eq!(data(&all), want);
        assert_eq!(data(&log.try_get_log_entries(4..6).await.unwrap()), vec![(4, "e4".into()), (5, "e5".into())]);
    }

    #[tokio::test]
    async fn a_large_purged_prefix_is_rewritten_away() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogStore::open_with(dir.path(), 0, None).unwrap();
        append(&log, (0..100).map(|i| entry(1, i, &"x".repeat(100))).collect());
        let before = log.file_bytes();
        log.purge(LogId::new(CommittedLeaderId::new(1, 1), 89)).await.unwrap();
        assert!(log.file_bytes() < before / 5, "{} of {before} bytes left", log.file_bytes());
        let on_disk = std::fs::metadata(dir.path().join("log")).unwrap().len();
        assert_eq!(on_disk, log.file_bytes());
        drop(log);
        let mut log = LogStore::open(dir.path()).unwrap();
        let left = log.try_get_log_entries(..).await.unwrap();
        assert_eq!(left.iter().map(|e| e.log_id.index).collect::<Vec<_>>(), (90..100).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_corrupt_record_in_the_middle_refuses_to_open_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        append(&log, (0..5).map(|i| entry(1, i, "abcdefgh")).collect());
        let third = log.files().slots[2].offset;
        drop(log);
        let path = dir.path().join("log");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[third as usize + record::HEADER_BYTES as usize + 3] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let err = LogStore::open(dir.path()).err().expect("a corrupt log must not open");
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(&format!("offset {third}")), "{text}");
        assert!(text.contains("checksum"), "{text}");
    }

    #[tokio::test]
    async fn a_torn_last_record_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        append(&log, (0..5).map(|i| entry(1, i, "abcdefgh")).collect());
        let last = log.files().slots[4].offset;
        drop(log);
        let path = dir.path().join("log");
        let len = std::fs::metadata(&path).unwrap().len();
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(len - 3).unwrap();
        drop(file);
        let mut log = LogStore::open(dir.path()).unwrap();
        assert_eq!(log.get_log_state().await.unwrap().last_log_id.map(|l| l.index), Some(3));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), last, "the torn record is cut off the file");
        append(&log, vec![entry(1, 4, "again")]);
        assert_eq!(data(&log.try_get_log_entries(4..5).await.unwrap()), vec![(4, "again".into())]);
    }
}
