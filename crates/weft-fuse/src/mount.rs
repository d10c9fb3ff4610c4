//! What one mount keeps between kernel requests, and the helpers every kind of request uses:
//! who asks, how long the kernel may cache an answer, the real size of a file being written.
//!
//! The requests themselves are in files of their own, by what the kernel asks: `entries.rs`
//! (names and attributes), `opens.rs` (open, create, release), `io.rs` (read, write, flush,
//! fsync), `xattr.rs` (extended attributes, real and virtual), `locks.rs` (fcntl and flock).
//! Each is an `async fn` over `Arc<Mount>` that answers the kernel itself, run by
//! `serve.rs`.

use crate::callers::Callers;
use crate::coherence::{recheck, ttl_for, MountHooks};
use crate::convert::file_attr;
use crate::errno::fuse_errno;
use crate::handles::{HandleTable, OpenDir, OpenFile};
use crate::iomode::IoModes;
use crate::limits::CLOSES_IN_FLIGHT_MAX;
use crate::lock_state::{Advisory, Interrupts};
use crate::writeback::WriteBehind;
use crate::MountOptions;
use fuser::{Generation, INodeNo, ReplyEmpty, ReplyEntry, Request};
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_client::Client;
use weft_proto::msg::{Caller, FileType, InodeInfo};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub(crate) struct Mount {
    pub client: Arc<Client>,
    pub runtime: tokio::runtime::Handle,
    pub opts: MountOptions,
    pub files: HandleTable<OpenFile>,
    pub dirs: HandleTable<OpenDir>,
    /// Slots for closes running in the background (see `release`).
    pub closes: Arc<tokio::sync::Semaphore>,
    /// Writes answered to the kernel but still on their way to the OSTs.
    pub writes: Arc<WriteBehind>,
    /// What the lock callbacks do to this mount's caches.
    pub hooks: Arc<MountHooks>,
    /// Who set advisory locks through this mount, on which file, through which open: a
    /// close releases them.
    pub advisory: Mutex<Advisory>,
    /// Blocking lock requests in wait, for the kernel's interrupts.
    pub interrupts: Mutex<Interrupts>,
    pub callers: Callers,
    /// Each open file's kernel I/O mode (cached, passthrough, uncached).
    pub io: IoModes,
    /// The kernel took passthrough at init, the mount options allow it, and the kernel has
    /// not refused a backing file since.
    pub passthrough: AtomicBool,
    /// Opens for writing this mount made so far: a read-only open's size stays exact only
    /// while none came after it (see `OpenFile::exact_size`).
    pub write_opens: AtomicU64,
    /// The persistent client caches (`pcc.rs`).
    pub pcc: Arc<crate::pcc::Pcc>,
    /// Why each thread's last `weft.*` request was refused (`weft.error`).
    pub refusals: crate::refusals::Refusals,
}

pub(crate) use crate::root::fid_of;

pub(crate) fn evicted() -> WeftError {
    WeftError::new(ErrorCode::Evicted, "this file was opened before the client was evicted; open it again")
}

impl Mount {
    pub(crate) fn new(
        client: Arc<Client>,
        runtime: tokio::runtime::Handle,
        opts: MountOptions,
        writes: Arc<WriteBehind>,
        hooks: Arc<MountHooks>,
    ) -> Mount {
        let pcc = hooks.pcc.clone();
        Mount {
            pcc,
            client,
            runtime,
            callers: Callers::new(opts.jobid.clone()),
            opts,
            files: HandleTable::default(),
            dirs: HandleTable::default(),
            closes: Arc::new(tokio::sync::Semaphore::new(CLOSES_IN_FLIGHT_MAX as usize)),
            writes,
            hooks,
            advisory: Mutex::default(),
            interrupts: Mutex::default(),
            io: IoModes::default(),
            passthrough: AtomicBool::new(false),
            write_opens: AtomicU64::new(0),
            refusals: Default::default(),
        }
    }

    /// Who sent a kernel request, and for which job.
    pub(crate) fn who(&self, req: &Request) -> Caller {
        self.callers.of(req.uid(), req.gid(), req.pid(), std::time::Instant::now())
    }

    /// Who asks for a create, with the umask the kernel passed: the MDS applies it, unless
    /// the directory's default ACL replaces it (the kernel leaves both to the file system
    /// under FUSE_DONT_MASK).
    pub(crate) fn creator(&self, req: &Request, umask: u32) -> Caller {
        Caller { umask, ..self.who(req) }
    }

    /// Whether the caches are kept coherent by locks (else by short lifetimes).
    pub(crate) fn locking(&self) -> bool {
        self.client.extent_locking()
    }

    /// How long the kernel may keep what it is told about `inode`.
    pub(crate) fn ttl(&self, inode: &InodeInfo) -> Duration {
        if self.locking() {
            ttl_for(&self.client, inode)
        } else {
            self.opts.attr_ttl
        }
    }

    /// The lifetime of a name for `inode` under `parent`, remembering the name so that the
    /// lock's callback can take it back.
    pub(crate) fn entry_ttl(&self, parent: INodeNo, name: &OsStr, inode: &InodeInfo) -> Duration {
        let ttl = self.ttl(inode);
        if self.locking()
            && !ttl.is_zero()
            && !self.hooks.note_alias(parent.0, name, crate::root::ino_of(inode.attr.fid))
        {
            return Duration::ZERO;
        }
        ttl
    }

    pub(crate) fn reply_entry(
        &self,
        reply: ReplyEntry,
        op: &str,
        parent: INodeNo,
        name: &OsStr,
        result: WeftResult<InodeInfo>,
    ) {
        match result {
            // "." or "..": the kernel finds an inode by its number; no name to remember.
            Ok(inode) if name == "." || name == ".." => {
                reply.entry(&Duration::ZERO, &file_attr(&inode.attr, inode.layout.as_ref()), Generation(0));
            }
            Ok(inode) => {
                let ttl = self.entry_ttl(parent, name, &inode);
                reply.entry(&ttl, &file_attr(&inode.attr, inode.layout.as_ref()), Generation(0));
                recheck(&self.client, &self.hooks, &inode);
            }
            Err(e) => reply.error(fuse_errno(op, &e)),
        }
    }

    /// An inode with the real size of a file being written (a glimpse when the MDS does
    /// not know it).
    pub(crate) async fn complete(&self, who: &Caller, mut inode: InodeInfo) -> WeftResult<InodeInfo> {
        if let Some((size, blocks)) = self.pcc.owned_size(inode.attr.fid) {
            // Its data is in this mount's cache: the size is the copy's, asked each time (the
            // kernel writes the copy itself).
            inode.attr.size = size;
            inode.attr.blocks = blocks;
            inode.attr.size_known = false;
            return Ok(inode);
        }
        if inode.attr.kind == FileType::Regular && !inode.attr.size_known {
            // The size comes from the objects: let this mount's queued writes land first.
            self.writes.wait_idle(inode.attr.fid).await;
        }
        let known = inode.attr.size_known;
        self.client.complete_size(who, &mut inode).await?;
        // A glimpsed size holds only for this answer: it must not be cached (see ttl_for).
        inode.attr.size_known = known;
        Ok(inode)
    }

    /// Every open of `fid` on this mount learns its new size (after a truncate here).
    /// Whether `file`'s size is still the file's: the MDS knew it at the open (no writer
    /// had the file open), the lock the open came with still holds (another client opening
    /// it for writing or truncating it would have called it back), and this mount opened
    /// nothing for writing since (its own opens call back none of its locks). Then a read
    /// past it needs no glimpse of the objects.
    pub(crate) fn size_still_exact(&self, file: &OpenFile) -> bool {
        file.exact_size.is_some_and(|(lock, epoch)| {
            epoch == self.write_opens.load(Ordering::Acquire) && self.client.lock_cache().still_holds(file.fid, lock)
        })
    }

    pub(crate) fn set_open_size(&self, fid: Fid, size: u64) {
        for file in self.files.find_all(|f| f.fid == fid) {
            file.set_size(size);
        }
    }
}

pub(crate) fn reply_empty(reply: ReplyEmpty, op: &str, result: WeftResult<()>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(fuse_errno(op, &e)),
    }
}
