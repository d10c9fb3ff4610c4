//! Write-behind: a write is answered to the kernel once its data is queued, and goes to the
//! OSTs in the background, so one stream keeps several requests in flight across its stripes
//! instead of waiting a round trip per 1 MiB.
//!
//! A file has at most `max_rpcs_in_flight` writes on their way (a mount parameter, 8 by
//! default; Lustre's is per OST); what queues meanwhile is sent oldest first, and small
//! writes go together (up to WRITE_GATHER_BYTES_MAX) when the same caller made them under
//! locks of the same client: those side by side as one range, and others queued as further extents of each object's
//! request (`Client::write_many`, Lustre's niobufs). IO-500's 47,008-byte records, written
//! by two processes, reach the OSTs as requests of several MiB instead of one each, whether
//! the processes keep step (their records continue each other) or not: one that runs ahead
//! leaves gaps the other fills only later, and without extents every record was a request
//! of its own (Lustre's client gathers dirty pages into RPCs the same way while
//! max_rpcs_in_flight are out).
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
//!   close-on-exec copy in a child that a writer forks) does not take them;
//! * a request that waits for writes a server's policy holds back (a rate limit) lets its
//!   FUSE thread go, as a held request does itself (serve.rs): a throttled job's flushes and
//!   stats must not take the mount's few threads from the other jobs.
//!
//! Tracking is per file (FID), shared by every handle of the file on this mount.

use crate::limits::{
    DIRTY_BYTES_MAX, WRITER_PIDS_MAX, WRITE_GATHER_BELOW_BYTES, WRITE_GATHER_BYTES_MAX, WRITE_GATHER_SCAN_MAX,
};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use weft_client::locks::ExtentGuard;
use weft_client::Client;
use weft_proto::msg::Caller;
use weft_proto::{Fid, Layout, WeftError, WeftResult};

#[derive(Default)]
struct FileState {
    /// Writes queued or on their way, by offset: (end, sequence number). They never overlap:
    /// a write that overlaps one of them waits before it queues.
    in_flight: BTreeMap<u64, (u64, u64)>,
    /// The sequence numbers of `in_flight`, the oldest first.
    in_flight_seqs: BTreeSet<u64>,
    /// Writes queued and not yet sent.
    queued: Queue,
    /// Tasks sending the queued writes, at most `max_rpcs_in_flight`.
    senders: usize,
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

    /// Whether `[start, end)` overlaps a write queued or on its way. The writes are
    /// disjoint, so only the last one starting before `end` can.
    fn overlaps_in_flight(&self, start: u64, end: u64) -> bool {
        self.in_flight.range(..end).next_back().is_some_and(|(_, &(e, _))| e > start)
    }

    /// The write of `seq` at `offset` landed (or failed).
    fn landed(&mut self, offset: u64, seq: u64) {
        self.in_flight.remove(&offset);
        self.in_flight_seqs.remove(&seq);
    }

    /// Whether a write queued before sequence number `upto` is still queued or on its way.
    fn any_before(&self, upto: u64) -> bool {
        self.in_flight_seqs.first().is_some_and(|&oldest| oldest < upto)
    }
}

#[derive(Default)]
struct FileWrites {
    state: Mutex<FileState>,
    changed: Notify,
    /// Writes on their way that a server's scheduling policy holds back (a rate limit).
    held: AtomicUsize,
}

impl FileWrites {
    fn lock(&self) -> std::sync::MutexGuard<'_, FileState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `blocked` is false of the file's writes.
    async fn wait_until(&self, blocked: impl Fn(&FileState) -> bool) {
        loop {
            let changed = self.changed.notified();
            if !blocked(&self.lock()) {
                return;
            }
            self.note_if_held();
            changed.await;
        }
    }

    /// A request that waits for this file's writes while a server holds some of them back
    /// waits as long as the rate limit says: like a request held itself, it lets its FUSE
    /// thread go (see serve.rs), or a throttled job's flushes and stats would take the
    /// mount's few threads from every other job.
    fn note_if_held(&self) {
        if self.held.load(Ordering::Acquire) > 0 {
            weft_rpc::note_held();
        }
    }

    /// `write`, counted in [`Self::held`] while a server holds it back.
    async fn watch_held<T>(&self, write: impl std::future::Future<Output = T>) -> T {
        let mut write = std::pin::pin!(write);
        let mut marked = false;
        let out = std::future::poll_fn(|cx| {
            // A mark left on this runtime thread by another task's request is not ours.
            weft_rpc::take_held();
            let poll = write.as_mut().poll(cx);
            if !marked && weft_rpc::take_held() {
                marked = true;
                self.held.fetch_add(1, Ordering::AcqRel);
                // Waiters look again, and let their threads go.
                self.changed.notify_waiters();
            }
            poll
        })
        .await;
        if marked {
            self.held.fetch_sub(1, Ordering::AcqRel);
        }
        out
    }
}

/// A write waiting for its turn to go, with the room it takes in the dirty bound.
struct Queued {
    seq: u64,
    write: QueuedWrite,
    _room: OwnedSemaphorePermit,
}

/// The writes of a file queued and not yet sent, by offset (they never overlap), with their
/// offsets by sequence number so that the oldest is found without a scan: a queue holds up
/// to DIRTY_BYTES_MAX of writes, thousands of IO-500's 47,008-byte records, and is looked
/// at for every request.
#[derive(Default)]
struct Queue {
    by_offset: BTreeMap<u64, Queued>,
    by_seq: BTreeMap<u64, u64>,
}

impl Queue {
    fn insert(&mut self, q: Queued) {
        self.by_seq.insert(q.seq, q.write.offset);
        self.by_offset.insert(q.write.offset, q);
    }

    fn remove(&mut self, at: u64) -> Option<Queued> {
        let q = self.by_offset.remove(&at)?;
        self.by_seq.remove(&q.seq);
        Some(q)
    }

    /// The offset of the write queued first.
    fn oldest(&self) -> Option<u64> {
        self.by_seq.first_key_value().map(|(_, at)| *at)
    }
}

/// Takes the next request's writes from `queued`: the oldest queued write (so none waits
/// behind a writer that keeps queueing below it: a glimpse waits for the writes queued
/// before it), and, while each is smaller than WRITE_GATHER_BELOW_BYTES, other writes with
/// the same caller, layout and client, up to WRITE_GATHER_BYTES_MAX in all: first those
/// that continue it on either side, then the oldest others (of the next
/// WRITE_GATHER_SCAN_MAX queued), which go as further extents of the objects' requests
/// (`Client::write_many`); in offset order.
fn take_request(queued: &mut Queue) -> Vec<Queued> {
    let Some(head_at) = queued.oldest() else { return Vec::new() };
    let head = queued.remove(head_at).expect("found just before");
    let small = |q: &Queued| (q.write.data.len() as u64) < WRITE_GATHER_BELOW_BYTES;
    let joins = |q: &Queued, head: &Queued, bytes: u64| {
        let (w, h) = (&q.write, &head.write);
        small(q)
            && bytes + w.data.len() as u64 <= WRITE_GATHER_BYTES_MAX
            && w.who == h.who
            && (Arc::ptr_eq(&w.layout, &h.layout) || w.layout == h.layout)
            && w.locks.joins(&h.locks)
    };
    let mut bytes = head.write.data.len() as u64;
    let mut after = Vec::new();
    let mut before = Vec::new();
    if small(&head) {
        let mut end = head.write.offset + head.write.data.len() as u64;
        while let Some(next) = queued.by_offset.get(&end).filter(|q| joins(q, &head, bytes)) {
            end += next.write.data.len() as u64;
            bytes += next.write.data.len() as u64;
            let at = next.write.offset;
            after.push(queued.remove(at).expect("looked up just before"));
        }
        let mut start = head.write.offset;
        while let Some((&at, prev)) = queued.by_offset.range(..start).next_back() {
            if at + prev.write.data.len() as u64 != start || !joins(prev, &head, bytes) {
                break;
            }
            start = at;
            bytes += prev.write.data.len() as u64;
            before.push(queued.remove(at).expect("looked up just before"));
        }
    }
    if small(&head) {
        let mut others = Vec::new();
        for at in queued.by_seq.values().take(WRITE_GATHER_SCAN_MAX) {
            let q = &queued.by_offset[at];
            if joins(q, &head, bytes) {
                bytes += q.write.data.len() as u64;
                others.push(*at);
            }
            if bytes >= WRITE_GATHER_BYTES_MAX {
                break;
            }
        }
        after.extend(others.into_iter().map(|at| queued.remove(at).expect("looked up just before")));
    }
    before.reverse();
    before.push(head);
    before.extend(after);
    before.sort_by_key(|q| q.write.offset);
    before
}

/// One write to queue: where, what, and the write locks that cover it (kept until the
/// write reached the OSTs, so a callback for them waits for it).
pub struct QueuedWrite {
    /// Who wrote: the OST requests carry its identity and jobid.
    pub who: Caller,
    pub fid: Fid,
    pub layout: Arc<Layout>,
    pub offset: u64,
    pub data: Bytes,
    pub locks: ExtentGuard,
}

pub struct WriteBehind {
    dirty: Arc<Semaphore>,
    /// The dirty bound the semaphore stands for (`max_dirty_mb`), in bytes.
    dirty_max: Mutex<u64>,
    /// Writes of one file sent at once (`max_rpcs_in_flight`).
    rpcs_max: AtomicUsize,
    files: Mutex<HashMap<Fid, Arc<FileWrites>>>,
}

impl Default for WriteBehind {
    fn default() -> Self {
        WriteBehind {
            dirty: Arc::new(Semaphore::new(DIRTY_BYTES_MAX as usize)),
            dirty_max: Mutex::new(u64::from(DIRTY_BYTES_MAX)),
            rpcs_max: AtomicUsize::new(weft_client::params::MAX_RPCS_IN_FLIGHT_DEFAULT),
            files: Mutex::new(HashMap::new()),
        }
    }
}

impl WriteBehind {
    /// Writes of one file sent at once (`max_rpcs_in_flight`).
    pub fn rpcs_max(&self) -> usize {
        self.rpcs_max.load(Ordering::Relaxed)
    }

    /// Moves `max_rpcs_in_flight`: writes queued from now on start senders up to it (those
    /// already running go on until their file's queue is empty).
    pub fn set_rpcs_max(&self, n: usize) {
        self.rpcs_max.store(n.max(1), Ordering::Relaxed);
    }

    /// The bound of bytes written but not yet acknowledged (`max_dirty_mb`).
    pub fn dirty_max(&self) -> u64 {
        *self.dirty_max.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the dirty bound to `bytes`. Raising it frees room at once; lowering it takes
    /// the room that is free now, and the rest as writes in flight land (a task on
    /// `runtime` waits for it), so the bound is never exceeded for long and no write waits
    /// for room that no longer exists.
    pub fn set_dirty_max(&self, bytes: u64, runtime: &tokio::runtime::Handle) {
        let mut max = self.dirty_max.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = bytes.max(1);
        if bytes >= *max {
            self.dirty.add_permits((bytes - *max) as usize);
        } else {
            let cut = (*max - bytes) as usize;
            let taken = self.dirty.forget_permits(cut);
            if taken < cut {
                let (dirty, rest) = (self.dirty.clone(), cut - taken);
                runtime.spawn(async move {
                    // Chunks of at most u32::MAX permits each (the most one acquire takes).
                    let mut rest = rest;
                    while rest > 0 {
                        let n = rest.min(u32::MAX as usize);
                        match dirty.acquire_many(n as u32).await {
                            Ok(permit) => permit.forget(),
                            Err(_) => return,
                        }
                        rest -= n;
                    }
                });
            }
        }
        *max = bytes;
    }

    fn file(&self, fid: Fid) -> Arc<FileWrites> {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).entry(fid).or_default().clone()
    }

    fn existing(&self, fid: Fid) -> Option<Arc<FileWrites>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).get(&fid).cloned()
    }

    /// Queues a write of `data` at `offset`; returns once it is queued (or with the file's
    /// earlier error). Must run inside the tokio runtime.
    pub async fn submit(&self, client: Arc<Client>, pid: u32, write: QueuedWrite) -> WeftResult<()> {
        let fid = write.fid;
        let fw = self.file(fid);
        {
            let mut st = fw.lock();
            if let Some(e) = st.error.take() {
                return Err(e);
            }
            st.note_writer(pid);
        }
        let len = write.data.len() as u64;
        if len == 0 {
            return Ok(());
        }
        // A write larger than the whole bound (a bound below max_write) takes all of it.
        let room = self
            .dirty
            .clone()
            .acquire_many_owned(len.min(self.dirty_max()).min(u64::from(u32::MAX)) as u32)
            .await
            .map_err(|_| WeftError::io("the mount is shutting down"))?;
        let (start, end) = (write.offset, write.offset + len);
        // Queued once no write it overlaps is queued or on its way: checked and queued under
        // one hold of the state, so two overlapping writes never queue together.
        let start_sender = loop {
            let changed = fw.changed.notified();
            {
                let mut st = fw.lock();
                if !st.overlaps_in_flight(start, end) {
                    let seq = st.next_seq;
                    st.next_seq += 1;
                    st.in_flight.insert(start, (end, seq));
                    st.in_flight_seqs.insert(seq);
                    st.queued.insert(Queued { seq, write, _room: room });
                    let start_sender = st.senders < self.rpcs_max();
                    if start_sender {
                        st.senders += 1;
                    }
                    break start_sender;
                }
            }
            fw.note_if_held();
            changed.await;
        };
        if start_sender {
            tokio::spawn(send_queued(client, fw));
        }
        Ok(())
    }

    /// Whether no write of `fid` is queued or on its way.
    pub fn is_idle(&self, fid: Fid) -> bool {
        self.existing(fid).is_none_or(|fw| fw.lock().in_flight.is_empty())
    }

    /// Waits until every queued write of `fid` has landed (or failed).
    pub async fn wait_idle(&self, fid: Fid) {
        if let Some(fw) = self.existing(fid) {
            fw.wait_until(|st| !st.in_flight.is_empty()).await;
        }
    }

    /// Waits until the writes of `fid` queued before this call have landed (or failed).
    /// Unlike [`Self::wait_idle`] this ends while a writer keeps queueing more: a glimpse
    /// must not wait for a stream to stop.
    pub async fn wait_queued(&self, fid: Fid) {
        if let Some(fw) = self.existing(fid) {
            let upto = fw.lock().next_seq;
            fw.wait_until(|st| st.any_before(upto)).await;
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
        fw.wait_until(|st| !st.in_flight.is_empty()).await;
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

/// One sender of `fw`'s queued writes: sends requests until nothing is queued.
async fn send_queued(client: Arc<Client>, fw: Arc<FileWrites>) {
    loop {
        let request = {
            let mut st = fw.lock();
            let request = take_request(&mut st.queued);
            if request.is_empty() {
                st.senders -= 1;
                return;
            }
            request
        };
        let mut parts = request.into_iter();
        let Queued { seq, write, _room } = parts.next().expect("a request has a write");
        let QueuedWrite { who, fid, layout, offset, data, mut locks } = write;
        // What lands with the request: (offset, sequence number) of each of its writes.
        let mut landed = vec![(offset, seq)];
        let mut rooms = vec![_room];
        let mut writes = vec![(offset, data)];
        for q in parts {
            locks.absorb(q.write.locks);
            landed.push((q.write.offset, q.seq));
            writes.push((q.write.offset, q.write.data));
            rooms.push(q._room);
        }
        let result = fw.watch_held(client.write_many(&who, &layout, writes, &locks)).await;
        drop(locks);
        drop(rooms);
        let mut st = fw.lock();
        for (at, seq) in landed {
            st.landed(at, seq);
        }
        if let Err(e) = result {
            tracing::debug!("write-behind of {fid} at {offset}: {e}");
            st.error.get_or_insert(e);
        }
        drop(st);
        fw.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queues writes of `(offset, len, caller uid, client id)`, in that order.
    fn queue(writes: &[(u64, usize, u32, u64)]) -> Queue {
        let dirty = Arc::new(Semaphore::new(DIRTY_BYTES_MAX as usize));
        let layout = Arc::new(Layout::raid0(1 << 20, None, Vec::new()));
        let mut queued = Queue::default();
        for (seq, &(offset, len, uid, client)) in writes.iter().enumerate() {
            let mut who = Caller::root();
            who.identity.uid = uid;
            let write = QueuedWrite {
                who,
                fid: Fid::default(),
                layout: layout.clone(),
                offset,
                data: Bytes::from(vec![seq as u8; len]),
                locks: ExtentGuard::none(client),
            };
            let room = dirty.clone().try_acquire_many_owned(len as u32).unwrap();
            queued.insert(Queued { seq: seq as u64, write, _room: room });
        }
        queued
    }

    #[tokio::test]
    async fn the_dirty_bound_moves_up_and_down_and_never_strands_a_writer() {
        let wb = WriteBehind::default();
        let rt = tokio::runtime::Handle::current();
        let held = wb.dirty.clone().acquire_many_owned(10 << 20).await.unwrap();
        wb.set_dirty_max(16 << 20, &rt);
        assert_eq!((wb.dirty_max(), wb.dirty.available_permits()), (16 << 20, 6 << 20));
        // Below what is in use: nothing free now, and the bound holds once the writes land.
        wb.set_dirty_max(4 << 20, &rt);
        assert_eq!(wb.dirty.available_permits(), 0);
        drop(held);
        let t0 = std::time::Instant::now();
        while wb.dirty.available_permits() != 4 << 20 {
            assert!(t0.elapsed() < std::time::Duration::from_secs(5), "{}", wb.dirty.available_permits());
            tokio::task::yield_now().await;
        }
        wb.set_dirty_max(u64::from(DIRTY_BYTES_MAX), &rt);
        assert_eq!(wb.dirty.available_permits(), DIRTY_BYTES_MAX as usize);
    }

    fn offsets(request: &[Queued]) -> Vec<u64> {
        request.iter().map(|q| q.write.offset).collect()
    }

    #[test]
    fn small_writes_side_by_side_go_as_one_request() {
        const R: u64 = 47_008;
        // Two processes' records in turn, queued out of order, and one further on.
        let mut q =
            queue(&[(R, R as usize, 0, 1), (0, R as usize, 0, 1), (2 * R, R as usize, 0, 1), (9 * R, 10, 0, 1)]);
        assert_eq!(offsets(&take_request(&mut q)), [0, R, 2 * R, 9 * R], "one further on goes as another extent");
        assert!(take_request(&mut q).is_empty());
    }

    #[test]
    fn the_oldest_write_goes_first_whatever_is_queued_below_it() {
        // A writer going backwards: the oldest is the highest offset.
        let big = WRITE_GATHER_BELOW_BYTES as usize;
        let mut q = queue(&[(3 * big as u64, big, 0, 1), (2 * big as u64, big, 0, 1), (0, big, 0, 1)]);
        assert_eq!(offsets(&take_request(&mut q)), [3 * big as u64]);
        assert_eq!(offsets(&take_request(&mut q)), [2 * big as u64]);
        assert_eq!(offsets(&take_request(&mut q)), [0]);
    }

    #[test]
    fn gathering_stops_at_other_callers_clients_large_writes_and_the_bound() {
        let mut q = queue(&[(0, 100, 0, 1), (100, 100, 7, 1), (200, 100, 7, 1)]);
        assert_eq!(offsets(&take_request(&mut q)), [0], "another caller (uid, jobid) goes apart");
        assert_eq!(offsets(&take_request(&mut q)), [100, 200]);

        let mut q = queue(&[(0, 100, 0, 1), (100, 100, 0, 2)]);
        assert_eq!(offsets(&take_request(&mut q)), [0], "locks of another client id (an eviction between)");

        let big = WRITE_GATHER_BELOW_BYTES as usize;
        let mut q = queue(&[(0, big, 0, 1), (big as u64, 100, 0, 1)]);
        assert_eq!(offsets(&take_request(&mut q)), [0], "a full write goes alone");
        let mut q = queue(&[(0, 100, 0, 1), (100, big, 0, 1)]);
        assert_eq!(offsets(&take_request(&mut q)), [0], "and is not gathered into a small one");

        let piece = (WRITE_GATHER_BELOW_BYTES - 1) as usize;
        let pieces: Vec<_> = (0..6).map(|i| ((i * piece) as u64, piece, 0, 1)).collect();
        let mut q = queue(&pieces);
        let first = take_request(&mut q);
        let bytes: u64 = first.iter().map(|w| w.write.data.len() as u64).sum();
        assert!(bytes <= WRITE_GATHER_BYTES_MAX && bytes + piece as u64 > WRITE_GATHER_BYTES_MAX, "{bytes}");
        assert_eq!(first.len() + take_request(&mut q).len(), 6);
    }

    #[test]
    fn writes_in_flight_are_found_by_overlap_and_age() {
        let mut st = FileState::default();
        for (start, end, seq) in [(100, 200, 5), (300, 400, 3), (400, 450, 7)] {
            st.in_flight.insert(start, (end, seq));
            st.in_flight_seqs.insert(seq);
        }
        assert!(!st.overlaps_in_flight(0, 100) && !st.overlaps_in_flight(200, 300), "ranges that only touch");
        assert!(!st.overlaps_in_flight(450, 1000));
        assert!(st.overlaps_in_flight(199, 201) && st.overlaps_in_flight(0, 101) && st.overlaps_in_flight(449, 450));
        assert!(st.overlaps_in_flight(0, 1000), "one covering them all");
        assert!(st.overlaps_in_flight(150, 160), "one inside another");
        assert!(st.any_before(4) && !st.any_before(3));
        st.landed(300, 3);
        assert!(!st.any_before(5) && st.any_before(6));
        assert!(!st.overlaps_in_flight(300, 400), "a landed write blocks nothing");
    }

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
