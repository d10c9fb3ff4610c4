//! The MDT journal: why a metadata change survives kill -9 without an fsync per batch.
//!
//! Each batch of the writer thread records the key-value writes it made (physical logging:
//! the table, the key, and the new value or a deletion) and appends them as one record to
//! `journal` with a plain write(2) before anyone is answered. The changes themselves stay in
//! memory over redb's last checkpoint (store.rs). The page cache holds the journal across a
//! crash of the process, so after kill -9 the next start replays every record newer than
//! the last durable checkpoint into redb, in order, and the state is exactly what was
//! acknowledged. Every CHECKPOINT_INTERVAL_MS a checkpoint writes the changes in memory into
//! redb in one durable transaction (fsync), storing the last journaled sequence number in
//! it, and empties the journal. A power loss can therefore lose at most one checkpoint
//! interval of metadata changes; a process crash loses nothing acknowledged.
//!
//! Record format (all integers little-endian):
//!
//! ```text
//! magic u32 "WJR1" | payload_len u32 | crc32c u32 (of seq and payload) | seq u64 | payload
//! payload = postcard Vec<Change>
//! ```
//!
//! A torn or corrupt record ends the replay: it can only be the last one, written when the
//! process died inside write(2), and no caller was answered for it.

use crate::limits::RECORD_BYTES_MAX;
use crate::storage::JournalStore;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use weft_proto::{WeftError, WeftResult};

const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"WJR1");
const RECORD_HEADER_BYTES: usize = 20;

/// One key-value write of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub table: u8,
    pub key: Vec<u8>,
    /// `None`: the key was removed.
    pub value: Option<Vec<u8>>,
}

pub struct Journal {
    store: Arc<dyn JournalStore>,
    len_bytes: u64,
    next_seq: u64,
    /// A record was written in part and could not be taken back: past it replay stops, so
    /// nothing may be appended (and acknowledged) until it is cut off or a checkpoint
    /// empties the journal.
    torn: bool,
}

impl Journal {
    /// The journal in `store`, appending after `last_seq` (what replay found).
    pub fn open(store: Arc<dyn JournalStore>, last_seq: u64) -> WeftResult<Journal> {
        let len_bytes = store.len_bytes()?;
        Ok(Journal { store, len_bytes, next_seq: last_seq + 1, torn: false })
    }

    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    /// The sequence number of the last record appended.
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Appends one record. A record only partly written is taken back.
    pub fn append(&mut self, changes: &[Change]) -> WeftResult<()> {
        let payload = postcard::to_stdvec(changes).expect("encoding into memory cannot fail");
        if payload.len() > RECORD_BYTES_MAX as usize {
            // Replay would take it for a torn record and stop there, losing it and every
            // record after it: refuse it instead (its batch is not committed).
            return Err(WeftError::io(format!(
                "an MDT journal record of {} bytes is over the {RECORD_BYTES_MAX}-byte limit",
                payload.len()
            )));
        }
        if self.torn {
            self.rollback_to(self.len_bytes).map_err(|e| {
                WeftError::io(format!("the MDT journal ends in a torn record that cannot be cut off ({e}): changes wait for the next checkpoint"))
            })?;
            self.torn = false;
        }
        let seq = self.next_seq;
        let mut rec = Vec::with_capacity(RECORD_HEADER_BYTES + payload.len());
        rec.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
        rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let mut crc = crc32c::crc32c(&seq.to_le_bytes());
        crc = crc32c::crc32c_append(crc, &payload);
        rec.extend_from_slice(&crc.to_le_bytes());
        rec.extend_from_slice(&seq.to_le_bytes());
        rec.extend_from_slice(&payload);
        if let Err(e) = self.store.append(&rec) {
            // Whatever part was written must not be replayed. Should this fail too, the torn
            // tail would end a replay there: nothing goes after it until it is cut off.
            self.torn = self.rollback_to(self.len_bytes).is_err();
            return Err(e.into());
        }
        self.len_bytes += rec.len() as u64;
        self.next_seq += 1;
        Ok(())
    }

    /// Forgets the journal after `len_bytes`: a record only partly written.
    fn rollback_to(&mut self, len_bytes: u64) -> WeftResult<()> {
        self.store.truncate(len_bytes)?;
        self.len_bytes = len_bytes;
        Ok(())
    }

    /// Empties the journal once a durable checkpoint holds everything in it.
    pub fn reset(&mut self) -> WeftResult<()> {
        self.store.truncate(0)?;
        self.len_bytes = 0;
        self.torn = false;
        Ok(())
    }
}

/// The records of the journal in `store`, in order, stopping at the first torn one.
pub fn read_records(store: &dyn JournalStore) -> WeftResult<Vec<(u64, Vec<Change>)>> {
    let bytes = store.read_all()?;
    let mut out = Vec::new();
    let mut pos = 0usize;
    while bytes.len() - pos >= RECORD_HEADER_BYTES {
        let h = &bytes[pos..pos + RECORD_HEADER_BYTES];
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let (magic, len, crc) = (word(0), word(4), word(8));
        let seq = u64::from_le_bytes(h[12..20].try_into().expect("8 bytes"));
        if magic != RECORD_MAGIC || len > RECORD_BYTES_MAX || bytes.len() - pos - RECORD_HEADER_BYTES < len as usize {
            break;
        }
        let payload = &bytes[pos + RECORD_HEADER_BYTES..pos + RECORD_HEADER_BYTES + len as usize];
        if crc32c::crc32c_append(crc32c::crc32c(&seq.to_le_bytes()), payload) != crc {
            break;
        }
        let Ok(changes) = postcard::from_bytes::<Vec<Change>>(payload) else { break };
        out.push((seq, changes));
        pos += RECORD_HEADER_BYTES + len as usize;
    }
    if pos < bytes.len() {
        tracing::warn!(
            ignored_bytes = bytes.len() - pos,
            "the MDT journal ends in a torn record (the process died while writing it); it was never acknowledged"
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fault::FaultJournal;
    use crate::storage::file_journal::FileJournal;
    use crate::storage::mem::MemJournal;
    use crate::storage::JOURNAL_FILE_NAME;
    use weft_proto::faults::{Fault, FaultPlan};

    fn change(k: u8, v: Option<u8>) -> Change {
        Change { table: 1, key: vec![k], value: v.map(|v| vec![v]) }
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE_NAME);
        let store = Arc::new(FileJournal::open(&path).unwrap());
        let mut j = Journal::open(store.clone(), 0).unwrap();
        j.append(&[change(1, Some(10))]).unwrap();
        j.append(&[change(2, None), change(3, Some(30))]).unwrap();
        assert_eq!(j.last_seq(), 2);
        let recs = read_records(&*store).unwrap();
        assert_eq!(recs, vec![(1, vec![change(1, Some(10))]), (2, vec![change(2, None), change(3, Some(30))])]);
        // A record cut short by a crash is not replayed, and what came before is.
        let full = std::fs::read(&path).unwrap();
        std::fs::write(&path, &full[..full.len() - 3]).unwrap();
        assert_eq!(read_records(&*store).unwrap().len(), 1);
        // A flipped byte in a payload ends the replay there.
        let mut bad = full.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        std::fs::write(&path, &bad).unwrap();
        assert_eq!(read_records(&*store).unwrap().len(), 1);
        std::fs::write(&path, &full).unwrap();
        j.reset().unwrap();
        assert!(read_records(&*store).unwrap().is_empty());
    }

    #[test]
    fn a_torn_append_is_taken_back_and_the_next_record_follows_the_last_whole_one() {
        let plan = Arc::new(FaultPlan::new());
        let mem = Arc::new(MemJournal::default());
        let mut j = Journal::open(Arc::new(FaultJournal::new(mem.clone(), plan.clone())), 0).unwrap();
        j.append(&[change(1, Some(1))]).unwrap();
        plan.inject(1, Fault::ShortWrite);
        assert!(j.append(&[change(2, Some(2))]).is_err(), "the torn record is not acknowledged");
        j.append(&[change(3, Some(3))]).unwrap();
        let recs = read_records(&*mem).unwrap();
        assert_eq!(recs, vec![(1, vec![change(1, Some(1))]), (2, vec![change(3, Some(3))])]);
    }

    /// A torn record that cannot be cut off would end a replay before anything appended
    /// after it: nothing is, until the cut succeeds.
    #[test]
    fn nothing_is_appended_after_a_torn_record_that_stays() {
        let plan = Arc::new(FaultPlan::new());
        let mem = Arc::new(MemJournal::default());
        let mut j = Journal::open(Arc::new(FaultJournal::new(mem.clone(), plan.clone())), 0).unwrap();
        j.append(&[change(1, Some(1))]).unwrap(); // op 0
        plan.inject(1, Fault::ShortWrite);
        plan.inject(2, Fault::Fail); // the cut after the torn append
        plan.inject(3, Fault::Fail); // the cut tried again by the next append
        assert!(j.append(&[change(2, Some(2))]).is_err());
        let e = j.append(&[change(3, Some(3))]).unwrap_err();
        assert!(e.message.contains("torn record"), "{e}");
        j.append(&[change(4, Some(4))]).unwrap(); // the cut works now
        let recs = read_records(&*mem).unwrap();
        assert_eq!(recs, vec![(1, vec![change(1, Some(1))]), (2, vec![change(4, Some(4))])]);
    }
}
