//! Write-behind: a write is answered to the kernel once its data is queued, and goes to the
//! OSTs in the background, so one stream keeps several requests in flight across its stripes
//! instead of waiting a round trip per 1 MiB.
//!
//! The rules that keep this safe:
//! * memory is bounded: queued bytes take permits of one semaphore (DIRTY_BYTES_MAX), and a
//!   write waits for room (backpressure);
//! * order is kept: a write that overlaps one still in flight waits for it first;
//! * whatever reads or measures the file waits first: reads, getattr of a file whose size
//!   comes from its objects, truncates, fsync and release (the last close, which then tells
//!   the MDS the size); another client's read or stat calls back the write lock, whose
//!   callback waits for the writes queued under it;
//! * close(2) does not wait (POSIX asks that of fsync only, and Lustre's close does not
//!   either): over TCP that saves a round trip per small file written. It reports a failure
//!   that already happened; one still on its way is returned by the next write or fsync of
//!   the file on this mount, or logged at its release;
//! * errors go to the process that queued the writes: a close by another process (the
//!   close-on-exec copy in a child that a writer forks) does not take them.
//!
//! Tracking is per file (FID), shared by every handle of the file on this mount.

use crate::limits::{DIRTY_BYTES_MAX, WRITER_PIDS_MAX};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, Semaphore};
use weft_client::locks::ExtentGuard;
use weft_client::Client;
use weft_proto::msg::Caller;
use weft_proto::{Fid, Layout, WeftError, WeftResult};

#[derive(Default)]
struct FileState {
    /// Writes on their way: (start, end, sequence number).
    in_flight: Vec<(u64, u64, u64)>,
    /// The sequence number of the next write queued.
    next_seq: u64,
    error: Option<WeftError>,
    /// Processes (kernel task ids) that queued writes, up to WRITER_PIDS_MAX.
    writers: Vec<u32>,
    /// More writers than remembered: every flush reports the file's errors.
    writers_overflow: bool,
}

impl FileState {
    fn note_writer(&mut self, pid: u32) {
        if self.writers_overflow || self.writers.contains(&pid) {
            return;
        }
        if self.writers.len() < WRITER_PIDS_MAX {
            self.writers.push(pid);
        } else {
            self.writers_overflow = true;
        }
    }

    fn wrote(&self, pid: u32) -> bool {
        self.writers_overflow || self.writers.contains(&pid)
    }
}

#[derive(Default)]
struct FileWrites {
    state: Mutex<FileState>,
    changed: Notify,
}

impl FileWrites {
    fn lock(&self) -> std::sync::MutexGuard<'_, FileState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until no write in flight matches `blocks`.
    async fn wait_until(&self, blocks: impl Fn(&(u64, u64, u64)) -> bool) {
        loop {
            let changed = self.changed.notified();
            if !self.lock().in_flight.iter().any(&blocks) {
                return;
            }
            changed.await;
        }
    }
}

/// One write to queue: where, what, and the write locks that cover it (kept until the
/// write reached the OSTs, so a callback for them waits for it).
pub struct QueuedWrite {
    /// Who wrote: the OST requests carry its identity and jobid.
    pub who: Caller,
    pub fid: Fid,
    pub layout: Layout,
    pub offset: u64,
    pub data: Bytes,
    pub locks: ExtentGuard,
}

pub struct WriteBehind {
    dirty: Arc<Semaphore>,
    files: Mutex<HashMap<Fid, Arc<FileWrites>>>,
}

impl Default for WriteBehind {
    fn default() -> Self {
        WriteBehind { dirty: Arc::new(Semaphore::new(DIRTY_BYTES_MAX as usize)), files: Mutex::new(HashMap::new()) }
    }
}

impl WriteBehind {
    fn file(&self, fid: Fid) -> Arc<FileWrites> {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).entry(fid).or_default().clone()
    }

    fn existing(&self, fid: Fid) -> Option<Arc<FileWrites>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).get(&fid).cloned()
    }

    /// Queues a write of `data` at `offset`; returns once it is queued (or with the file's
    /// earlier error). Must run inside the tokio runtime.
    pub async fn submit(&self, client: Arc<Client>, pid: u32, write: QueuedWrite) -> WeftResult<()> {
        let QueuedWrite { who, fid, layout, offset, data, locks } = write;
        let fw = self.file(fid);
        {
            let mut st = fw.lock();
            if let Some(e) = st.error.take() {
                return Err(e);
            }
            st.note_writer(pid);
        }
        let len = data.len() as u64;
        debug_assert!(len <= DIRTY_BYTES_MAX as u64, "one FUSE write is at most max_write");
        let permit = self
            .dirty
            .clone()
            .acquire_many_owned(len.min(DIRTY_BYTES_MAX as u64) as u32)
            .await
            .map_err(|_| WeftError::io("the mount is shutting down"))?;
        let (start, end) = (offset, offset + len);
        fw.wait_until(|(s, e, _)| *s < end && start < *e).await;
        let seq = {
            let mut st = fw.lock();
            let seq = st.next_seq;
            st.next_seq += 1;
            st.in_flight.push((start, end, seq));
            seq
        };
        tokio::spawn(async move {
            let result = client.write(&who, &layout, offset, data, &locks).await;
            drop(locks);
            drop(permit);
            let mut st = fw.lock();
            if let Some(i) = st.in_flight.iter().position(|r| r.2 == seq) {
                st.in_flight.swap_remove(i);
            }
            if let Err(e) = result {
                tracing::debug!("write-behind of {fid} at {offset}: {e}");
                st.error.get_or_insert(e);
            }
            drop(st);
            fw.changed.notify_waiters();
        });
        Ok(())
    }

    /// Whether no write of `fid` is queued or on its way.
    pub fn is_idle(&self, fid: Fid) -> bool {
        self.existing(fid).is_none_or(|fw| fw.lock().in_flight.is_empty())
    }

    /// Waits until every queued write of `fid` has landed (or failed).
    pub async fn wait_idle(&self, fid: Fid) {
        if let Some(fw) = self.existing(fid) {
            fw.wait_until(|_| true).await;
        }
    }

    /// Waits until the writes of `fid` queued before this call have landed (or failed).
    /// Unlike [`Self::wait_idle`] this ends while a writer keeps queueing more: a glimpse
    /// must not wait for a stream to stop.
    pub async fn wait_queued(&self, fid: Fid) {
        if let Some(fw) = self.existing(fid) {
            let upto = fw.lock().next_seq;
            fw.wait_until(|(_, _, seq)| *seq < upto).await;
        }
    }

    /// A flush (close of a descriptor) by process `pid`: the file's first write error so
    /// far, once, if `pid` wrote to it. Does not wait for the writes on their way.
    pub fn flush(&self, fid: Fid, pid: u32) -> WeftResult<()> {
        let Some(fw) = self.existing(fid) else { return Ok(()) };
        let mut st = fw.lock();
        match st.error.take() {
            Some(e) if st.wrote(pid) => Err(e),
            other => {
                st.error = other;
                Ok(())
            }
        }
    }

    /// Waits like [`Self::wait_idle`], then returns the file's first write error, once.
    pub async fn drain(&self, fid: Fid) -> WeftResult<()> {
        let Some(fw) = self.existing(fid) else { return Ok(()) };
        fw.wait_until(|_| true).await;
        let error = fw.lock().error.take();
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cur) = files.get(&fid) {
            let st = cur.lock();
            if st.in_flight.is_empty() && st.error.is_none() {
                drop(st);
                files.remove(&fid);
            }
        }
        error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_reports_errors_only_to_writer_processes() {
        let mut st = FileState::default();
        assert!(!st.wrote(7), "nobody wrote yet");
        st.note_writer(7);
        assert!(st.wrote(7) && !st.wrote(8), "a forked child's flush does not take the writer's errors");
        for pid in 100..100 + WRITER_PIDS_MAX as u32 {
            st.note_writer(pid);
        }
        assert!(st.wrote(8), "past the bound every flush reports them");
    }
}
