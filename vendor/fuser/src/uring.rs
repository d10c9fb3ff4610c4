//! FUSE over io_uring (Linux 6.14 and later, with `fuse.enable_uring=1`).
//!
//! Once INIT has negotiated `FUSE_OVER_IO_URING`, the kernel queues requests per CPU: each
//! CPU has a queue, and a request goes to a free entry of its caller's CPU's queue. An entry
//! is a pair of buffers the server registered with an `IORING_OP_URING_CMD` on /dev/fuse;
//! the command completes when a request lands in it. The reply is written into the same
//! buffers and handed back with `COMMIT_AND_FETCH`, which also makes the entry free again.
//! A request therefore costs one io_uring submission and one completion instead of a read
//! and a write on /dev/fuse, and the caller and the server stay on one CPU.
//!
//! Each thread here owns one io_uring and, normally, one entry of one queue: a thread busy
//! with a request has no free entry, so the kernel gives the queue's next request to another
//! thread's entry rather than parking it behind a blocked handler. A reply the file system
//! sends later, from another thread, commits its entry from there; meanwhile, if it has no
//! other entry waiting, this thread registers a fresh one so that it keeps serving. A request
//! that cannot be parsed, or a reply that does not fit, is answered with EIO: an entry left
//! unanswered would hang its caller.
//!
//! Entry layout (uapi `struct fuse_uring_req_header`): 128 bytes for the fuse_in_header (or
//! fuse_out_header in a reply), 128 bytes for the operation's own header, then
//! `struct fuse_uring_ent_in_out`. Everything after the operation header is in the payload
//! buffer. Requests are put back together as /dev/fuse would deliver them, so the parser
//! and the file system see no difference.

use std::io;
use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use io_uring::{IoUring, cqueue, opcode, squeue, types};
use log::{debug, error, warn};

use crate::Filesystem;
use crate::channel::ChannelSender;
use crate::ll::Operation;
use crate::reply::{ReplyEmpty, ReplySender};
use crate::request::RequestWithSender;
use crate::session::SessionEventLoop;

/// Smallest payload buffer the kernel accepts (FUSE_MIN_READ_BUFFER).
pub(crate) const MIN_PAYLOAD_BYTES: usize = 8192;

const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;
const IN_HEADER_BYTES: usize = 40;
const OUT_HEADER_BYTES: usize = 16;
const OP_HEADER_OFFSET: usize = 128;
const OP_HEADER_BYTES_MAX: usize = 128;
const ENT_OFFSET: usize = 256;
const HEADER_BYTES: usize = 288;
/// Submission queue size of each thread's ring: a register, its commits and spares.
const RING_DEPTH: u32 = 8;

/// Queues the kernel makes: one per possible CPU.
pub(crate) fn queue_count() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| count_cpu_list(s.trim()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// CPUs in a list like `0-3,6`.
fn count_cpu_list(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => n += b.parse::<usize>().ok()?.checked_sub(a.parse::<usize>().ok()?)? + 1,
            None => {
                part.parse::<usize>().ok()?;
                n += 1;
            }
        }
    }
    Some(n)
}

/// One registered entry's buffers. They stay where they are for as long as the kernel may
/// use them: the entry lives until its ring is dropped.
struct Entry {
    header: *mut u8,
    payload: *mut u8,
    payload_len: usize,
    iov: [libc::iovec; 2],
    _header_buf: Box<[u8]>,
    _payload_buf: Box<[u8]>,
}

// SAFETY: the buffers are written by the kernel while the entry waits for a request and
// by exactly one replier after; the raw pointers only point into the boxes the entry owns.
unsafe impl Send for Entry {}
unsafe impl Sync for Entry {}

impl Entry {
    fn new(payload_len: usize) -> Box<Entry> {
        let mut header_buf = vec![0u8; HEADER_BYTES].into_boxed_slice();
        let mut payload_buf = vec![0u8; payload_len].into_boxed_slice();
        let header = header_buf.as_mut_ptr();
        let payload = payload_buf.as_mut_ptr();
        Box::new(Entry {
            header,
            payload,
            payload_len,
            iov: [
                libc::iovec { iov_base: header.cast(), iov_len: HEADER_BYTES },
                libc::iovec { iov_base: payload.cast(), iov_len: payload_len },
            ],
            _header_buf: header_buf,
            _payload_buf: payload_buf,
        })
    }

    fn read_u32(&self, at: usize) -> u32 {
        // SAFETY: at + 4 <= HEADER_BYTES for every caller.
        unsafe { self.header.add(at).cast::<u32>().read_unaligned() }
    }

    fn read_u64(&self, at: usize) -> u64 {
        // SAFETY: as read_u32.
        unsafe { self.header.add(at).cast::<u64>().read_unaligned() }
    }
}

/// One thread's io_uring and its entries.
struct Ring {
    uring: IoUring<squeue::Entry128, cqueue::Entry>,
    /// Held while pushing to the submission queue: repliers on other threads push too.
    sq: Mutex<()>,
    fd: i32,
    qid: u16,
    entries: Mutex<Vec<Arc<Entry>>>,
    /// Entries holding a request not answered yet; the others wait for the kernel's next.
    busy: AtomicUsize,
    /// /dev/fuse, where backing files for passthrough are opened.
    channel: ChannelSender,
    /// The thread that waits on this ring: its own pushes are submitted by its next wait.
    owner: std::thread::ThreadId,
}

impl Ring {
    fn command(&self, cmd_op: u32, commit_id: u64) -> opcode::UringCmd80 {
        // struct fuse_uring_cmd_req { u64 flags; u64 commit_id; u16 qid; u8 padding[6]; }
        let mut cmd = [0u8; 80];
        cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
        cmd[16..18].copy_from_slice(&self.qid.to_ne_bytes());
        opcode::UringCmd80::new(types::Fd(self.fd), cmd_op).cmd(cmd)
    }

    fn push(&self, sqe: &squeue::Entry128) -> io::Result<()> {
        let _turn = self.sq.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            // SAFETY: `sq` serializes every pusher; the ring thread only reads completions.
            let pushed = unsafe { self.uring.submission_shared().push(sqe).is_ok() };
            if pushed {
                break;
            }
            self.uring.submit()?;
        }
        if std::thread::current().id() != self.owner {
            self.uring.submit()?;
        }
        Ok(())
    }

    /// Makes a new entry and registers it; the command completes with its first request.
    fn register_entry(&self, payload_len: usize) -> io::Result<()> {
        let entry: Arc<Entry> = Arc::from(Entry::new(payload_len));
        let index = {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            entries.push(entry.clone());
            entries.len() - 1
        };
        let mut sqe = self
            .command(CMD_REGISTER, 0)
            .addr(Some(entry.iov.as_ptr() as u64))
            .build()
            .user_data(index as u64);
        // The kernel takes the iovec count from sqe->len, which UringCmd80 has no setter for.
        // SAFETY: Entry128 starts with the 64-byte io_uring_sqe; `len` is at byte 24.
        unsafe { (&mut sqe as *mut squeue::Entry128).cast::<u8>().add(24).cast::<u32>().write(2) };
        self.push(&sqe)
    }

    fn entry(&self, index: u64) -> Option<Arc<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(index as usize).cloned()
    }

    /// Whether every entry of this ring holds an unanswered request.
    fn all_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) >= self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Hands entry `index` back with its reply written in it, and makes it wait for the
    /// kernel's next request.
    fn commit(&self, index: u64, commit_id: u64) -> io::Result<()> {
        self.busy.fetch_sub(1, Ordering::AcqRel);
        let sqe = self.command(CMD_COMMIT_AND_FETCH, commit_id).build().user_data(index);
        self.push(&sqe)
    }

    /// Answers the request in entry `index` with an error and nothing else.
    fn commit_error(&self, entry: &Entry, index: u64, commit_id: u64, errno: i32) -> io::Result<()> {
        // fuse_out_header { u32 len; i32 error; u64 unique }, unique as the request's
        // fuse_in_header has it (bytes 8..16, still in the buffer).
        let unique = entry.read_u64(8);
        let mut header = [0u8; OUT_HEADER_BYTES];
        header[0..4].copy_from_slice(&(OUT_HEADER_BYTES as u32).to_ne_bytes());
        header[4..8].copy_from_slice(&(-errno).to_ne_bytes());
        header[8..16].copy_from_slice(&unique.to_ne_bytes());
        // SAFETY: 16 bytes into the 288-byte header buffer, and the payload size field.
        unsafe {
            std::ptr::copy_nonoverlapping(header.as_ptr(), entry.header, OUT_HEADER_BYTES);
            entry.header.add(ENT_OFFSET + 16).cast::<u32>().write_unaligned(0);
        }
        self.commit(index, commit_id)
    }
}

/// Where the reply to a ring request goes.
#[derive(Clone)]
pub(crate) struct RingReply {
    ring: Arc<Ring>,
    entry: Arc<Entry>,
    index: u64,
    commit_id: u64,
}

impl std::fmt::Debug for RingReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingReply").field("qid", &self.ring.qid).field("commit_id", &self.commit_id).finish()
    }
}

impl RingReply {
    pub(crate) fn channel(&self) -> &ChannelSender {
        &self.ring.channel
    }

    /// Writes the reply (fuse_out_header, then its arguments) into the entry and commits it.
    pub(crate) fn send(&self, data: &[IoSlice<'_>]) -> io::Result<()> {
        let total: usize = data.iter().map(|d| d.len()).sum();
        if total < OUT_HEADER_BYTES || total - OUT_HEADER_BYTES > self.entry.payload_len {
            // The kernel never asks for more than the entry holds; answer rather than hang.
            error!("FUSE io_uring queue {}: a reply of {total} bytes does not fit its entry", self.ring.qid);
            return self.ring.commit_error(&self.entry, self.index, self.commit_id, libc::EIO);
        }
        let mut at = 0usize;
        for slice in data {
            let mut src = &slice[..];
            while !src.is_empty() {
                // SAFETY: bounds checked above; the entry is ours until it is committed.
                unsafe {
                    if at < OUT_HEADER_BYTES {
                        let n = src.len().min(OUT_HEADER_BYTES - at);
                        std::ptr::copy_nonoverlapping(src.as_ptr(), self.entry.header.add(at), n);
                        at += n;
                        src = &src[n..];
                    } else {
                        let n = src.len();
                        std::ptr::copy_nonoverlapping(src.as_ptr(), self.entry.payload.add(at - OUT_HEADER_BYTES), n);
                        at += n;
                        src = &src[n..];
                    }
                }
            }
        }
        let payload_sz = (total - OUT_HEADER_BYTES) as u32;
        // SAFETY: payload_sz is at ENT_OFFSET + 16 in the header buffer.
        unsafe { self.entry.header.add(ENT_OFFSET + 16).cast::<u32>().write_unaligned(payload_sz) };
        self.ring.commit(self.index, self.commit_id)
    }
}

/// Keeps the calling thread on CPU `cpu`, the CPU whose callers queue `cpu` serves: the
/// kernel then wakes it where the caller runs instead of on another CPU (measured here:
/// one process creating files went from 4.0k to 9.9k creates/s with the pin, 4.1k without).
/// Where the CPU is not allowed to this process (a cpuset), the thread stays unpinned.
fn pin_to_cpu(cpu: u16) {
    // SAFETY: a zeroed cpu_set_t with one bit set, applied to this thread only.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(usize::from(cpu), &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        debug!("FUSE io_uring queue {cpu}: not pinned: {}", io::Error::last_os_error());
    }
}

/// Serves queue `qid` until the connection ends.
pub(crate) fn serve_queue<FS: Filesystem>(se: &SessionEventLoop<FS>, qid: u16, payload_len: usize) -> io::Result<()> {
    let uring = IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(RING_DEPTH)?;
    let ring = Arc::new(Ring {
        uring,
        sq: Mutex::new(()),
        fd: se.ch.as_fd().as_raw_fd(),
        qid,
        entries: Mutex::new(Vec::new()),
        busy: AtomicUsize::new(0),
        channel: se.ch.sender(),
        owner: std::thread::current().id(),
    });
    pin_to_cpu(qid);
    if let Err(e) = ring.register_entry(payload_len) {
        // Once INIT has agreed on io_uring the kernel holds every request until each queue
        // has an entry: without this one the mount answers nothing. Say so plainly; the
        // session ends with this error when it is unmounted.
        error!(
            "FUSE io_uring queue {qid}: cannot register an entry ({e}); requests wait until unmount \
             (mount without io_uring to avoid this)"
        );
        return Err(e);
    }
    let mut buf = vec![0u8; IN_HEADER_BYTES + OP_HEADER_BYTES_MAX + payload_len];
    let mut done = Vec::new();
    loop {
        match ring.uring.submitter().submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
        // SAFETY: only this thread consumes completions.
        done.extend(unsafe { ring.uring.completion_shared() }.map(|c| (c.user_data(), c.result())));
        for (index, result) in done.drain(..) {
            if result < 0 {
                return match -result {
                    libc::ENOTCONN | libc::ENODEV | libc::ECANCELED => Ok(()),
                    e => {
                        error!("FUSE io_uring queue {qid}: {}", io::Error::from_raw_os_error(e));
                        Err(io::Error::from_raw_os_error(e))
                    }
                };
            }
            let Some(entry) = ring.entry(index) else {
                error!("FUSE io_uring queue {qid}: completion for unknown entry {index}");
                continue;
            };
            ring.busy.fetch_add(1, Ordering::AcqRel);
            let len = entry.read_u32(0) as usize;
            let commit_id = entry.read_u64(ENT_OFFSET + 8);
            let payload_sz = entry.read_u32(ENT_OFFSET + 16) as usize;
            let op_len = len.checked_sub(IN_HEADER_BYTES + payload_sz);
            let Some(op_len) = op_len.filter(|n| *n <= OP_HEADER_BYTES_MAX && payload_sz <= entry.payload_len) else {
                error!("FUSE io_uring queue {qid}: malformed request (len {len}, payload {payload_sz})");
                ring.commit_error(&entry, index, commit_id, libc::EIO)?;
                continue;
            };
            // The request is copied out of the entry, payload included, because its reply is
            // written into the same buffers: a handler still holding the request's bytes (a
            // write's data) while its reply, or another thread's deferred one, lands there
            // would alias them. Under `weft up` large reads and writes are passthrough and do
            // not come here; through the mount a write pays this one extra copy.
            // SAFETY: sizes checked against the buffers just above.
            unsafe {
                std::ptr::copy_nonoverlapping(entry.header, buf.as_mut_ptr(), IN_HEADER_BYTES);
                std::ptr::copy_nonoverlapping(
                    entry.header.add(OP_HEADER_OFFSET),
                    buf.as_mut_ptr().add(IN_HEADER_BYTES),
                    op_len,
                );
                std::ptr::copy_nonoverlapping(entry.payload, buf.as_mut_ptr().add(IN_HEADER_BYTES + op_len), payload_sz);
            }
            let origin = ReplySender::Ring(RingReply { ring: ring.clone(), entry: entry.clone(), index, commit_id });
            let data = &buf[..IN_HEADER_BYTES + op_len + payload_sz];
            match RequestWithSender::new(origin, data) {
                Some(req) => {
                    if let Ok(Operation::Destroy(_)) = req.request.operation() {
                        req.reply::<ReplyEmpty>().ok();
                        return Ok(());
                    }
                    req.dispatch(se);
                }
                None => {
                    warn!("FUSE io_uring queue {qid}: a request could not be parsed");
                    ring.commit_error(&entry, index, commit_id, libc::EIO)?;
                }
            }
            if ring.all_busy() {
                // A reply comes later (a lock granted after a wait) and no entry of this
                // thread is left waiting for the kernel, so it makes one. Entries come back
                // when their replies are committed, so there are at most as many as replies
                // ever waited at once.
                debug!("FUSE io_uring queue {qid}: a reply waits, registering another entry");
                ring.register_entry(payload_len)?;
            }
        }
    }
}
