//! The [`fuser::Filesystem`] implementation: each kernel request becomes client library
//! calls run on the tokio runtime (`block_on`: FUSE worker threads are not runtime
//! threads), and each error becomes an errno in [`crate::errno`].

use crate::callers::Callers;
use crate::coherence::{recheck, ttl_for, MountHooks};
use crate::convert::{file_attr, file_type, mknod_type, set_time, timestamp};
use crate::errno::fuse_errno;
use crate::handles::{
    entry_offset, resume_at, HandleTable, OpenDir, OpenFile, Resume, Step, DIR_OFFSET_DOT, DIR_OFFSET_DOTDOT,
};
use crate::iomode::{Backing, IoModes, KernelIo};
use crate::limits::{
    CLOSES_IN_FLIGHT_MAX, FLOCK_RETRY_MS_MAX, FLOCK_RETRY_MS_MIN, KERNEL_BACKGROUND_REQUESTS_MAX, READAHEAD_BYTES_MAX,
    UNMOUNT_CLOSE_TIMEOUT_MS,
};
use crate::writeback::{QueuedWrite, WriteBehind};
use crate::xattr::{self, Answer, Virtual};
use crate::MountOptions;
use bytes::Bytes;
use fuser::{
    AccessFlags, BackingId, Errno, FileHandle, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLock,
    ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use serde::Serialize;
use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use weft_client::locks::LockHooks;
use weft_client::virtual_xattr::{CreateWithLayout, LayoutAnswer, PathAnswer};
use weft_client::{Client, Opened};
use weft_proto::layout::{Layout, StripeSpec};
use weft_proto::limits::{NAME_BYTES_MAX, READDIR_ENTRIES_MAX};
use weft_proto::lock::{FlockKind, FlockSpec, LockMode};
use weft_proto::msg::{
    Attr, Caller, FileType, InodeInfo, OpenIo, SetAttr, OPEN_PASSTHROUGH, OPEN_READ, OPEN_TRUNC, OPEN_WRITE,
    RENAME_EXCHANGE, RENAME_NOREPLACE, XATTR_CREATE, XATTR_REPLACE,
};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub(crate) struct WeftFs {
    client: Arc<Client>,
    runtime: tokio::runtime::Handle,
    opts: MountOptions,
    files: Arc<HandleTable<OpenFile>>,
    dirs: HandleTable<OpenDir>,
    /// Slots for closes running in the background (see `release`).
    closes: Arc<tokio::sync::Semaphore>,
    /// Writes answered to the kernel but still on their way to the OSTs.
    writes: Arc<WriteBehind>,
    /// What the lock callbacks do to this mount's caches.
    hooks: Arc<MountHooks>,
    /// Files on which this mount set advisory locks, by lock owner: a close releases them.
    advisory: std::sync::Mutex<std::collections::HashSet<(Fid, u64)>>,
    callers: Callers,
    /// Each open file's kernel I/O mode (cached, passthrough, uncached).
    io: IoModes,
    /// The kernel took passthrough at init, the mount options allow it, and the kernel has
    /// not refused a backing file since.
    passthrough: AtomicBool,
}

/// How the kernel is told to do an open's I/O.
struct KernelAnswer {
    io: KernelIo,
    flags: FopenFlags,
    backing: Option<Arc<Backing>>,
}

fn fid_of(ino: INodeNo) -> Fid {
    Fid::from_ino(ino.0)
}

/// The MDS open flags for kernel open flags.
fn open_flags(flags: i32) -> u32 {
    let access = match flags & libc::O_ACCMODE {
        libc::O_WRONLY => OPEN_WRITE,
        libc::O_RDWR => OPEN_READ | OPEN_WRITE,
        _ => OPEN_READ,
    };
    access | if flags & libc::O_TRUNC != 0 { OPEN_TRUNC } else { 0 }
}

/// The kernel's largest lock offset (OFFSET_MAX) means "to the end, whatever it becomes".
fn lock_end(end: u64) -> u64 {
    if end >= i64::MAX as u64 {
        u64::MAX
    } else {
        end
    }
}

fn kernel_end(end: u64) -> u64 {
    end.min(i64::MAX as u64)
}

/// A kernel lock request as the lock manager's. flock(2) arrives as a whole-file lock of
/// the open file description (fuser does not pass the kernel's FUSE_LK_FLOCK flag on), so it
/// is kept as an fcntl-style lock of that owner.
fn flock_spec(owner: LockOwner, start: u64, end: u64, typ: i32, pid: u32) -> Option<FlockSpec> {
    let kind = match typ {
        libc::F_RDLCK => FlockKind::Read,
        libc::F_WRLCK => FlockKind::Write,
        libc::F_UNLCK => FlockKind::Unlock,
        _ => return None,
    };
    (start <= end).then(|| FlockSpec { owner: owner.0, kind, start, end: lock_end(end), pid, flock: false })
}

fn evicted() -> WeftError {
    WeftError::new(ErrorCode::Evicted, "this file was opened before the client was evicted; open it again")
}

fn json(value: &impl Serialize) -> WeftResult<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| WeftError::io(format!("cannot encode an attribute value as JSON: {e}")))
}

impl WeftFs {
    pub(crate) fn new(
        client: Arc<Client>,
        runtime: tokio::runtime::Handle,
        opts: MountOptions,
        writes: Arc<WriteBehind>,
        hooks: Arc<MountHooks>,
    ) -> WeftFs {
        WeftFs {
            client,
            runtime,
            callers: Callers::new(opts.jobid.clone()),
            opts,
            files: Arc::new(HandleTable::default()),
            dirs: HandleTable::default(),
            closes: Arc::new(tokio::sync::Semaphore::new(CLOSES_IN_FLIGHT_MAX as usize)),
            writes,
            hooks,
            advisory: std::sync::Mutex::new(std::collections::HashSet::new()),
            io: IoModes::default(),
            passthrough: AtomicBool::new(false),
        }
    }

    /// Who sent a kernel request.
    fn who(&self, req: &Request) -> Caller {
        self.callers.of(req.uid(), req.gid(), req.pid())
    }

    fn block<T>(&self, f: impl Future<Output = T>) -> T {
        self.runtime.block_on(f)
    }

    /// Whether the caches are kept coherent by locks (else by short lifetimes).
    fn locking(&self) -> bool {
        self.client.extent_locking()
    }

    /// How long the kernel may keep what it is told about `inode`.
    fn ttl(&self, inode: &InodeInfo) -> Duration {
        if self.locking() {
            ttl_for(&self.client, inode)
        } else {
            self.opts.attr_ttl
        }
    }

    /// The lifetime of a name for `inode` under `parent`, remembering the name so that the
    /// lock's callback can take it back.
    fn entry_ttl(&self, parent: INodeNo, name: &OsStr, inode: &InodeInfo) -> Duration {
        let ttl = self.ttl(inode);
        if self.locking() && !ttl.is_zero() && !self.hooks.note_alias(parent.0, name, inode.attr.fid.to_ino()) {
            return Duration::ZERO;
        }
        ttl
    }

    fn reply_entry(&self, reply: ReplyEntry, op: &str, parent: INodeNo, name: &OsStr, result: WeftResult<InodeInfo>) {
        match result {
            Ok(inode) => {
                let ttl = self.entry_ttl(parent, name, &inode);
                reply.entry(&ttl, &file_attr(&inode.attr, inode.layout.as_ref()), Generation(0));
                recheck(&self.client, &self.hooks, &inode);
            }
            Err(e) => reply.error(fuse_errno(op, &e)),
        }
    }

    fn reply_empty(reply: ReplyEmpty, op: &str, result: WeftResult<()>) {
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fuse_errno(op, &e)),
        }
    }

    /// An inode with the real size of a file being written (a glimpse when the MDS does
    /// not know it).
    async fn complete(&self, who: &Caller, mut inode: InodeInfo) -> WeftResult<InodeInfo> {
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

    /// The MDS open flags for kernel open flags, asking for passthrough when this mount
    /// could give it (see [`OpenIo`]).
    fn mds_open_flags(&self, fid: Option<Fid>, flags: i32) -> u32 {
        // (`passthrough` is on only where locks are: see `init`.)
        let passthrough = self.passthrough.load(Ordering::Relaxed)
            && fid.is_none_or(|fid| self.io.passthrough_possible(fid))
            && self.client.has_local_osts();
        open_flags(flags) | if passthrough { OPEN_PASSTHROUGH } else { 0 }
    }

    /// For an open the MDS granted passthrough: the object's file, before the open's turn
    /// (this may wait for other clients' callbacks). `created`: the object is new, so no
    /// client can have cached any of it. None when the file has no object of this process
    /// or this mount cannot use passthrough for it now.
    async fn prepare_passthrough(
        &self,
        who: &Caller,
        fid: Fid,
        layout: Option<&Layout>,
        created: bool,
    ) -> Option<std::fs::File> {
        let layout = layout?;
        if !self.io.passthrough_possible(fid) || self.io.backing(fid).is_some() {
            return None;
        }
        // Writes queued by earlier opens land before the kernel writes past them.
        self.writes.wait_idle(fid).await;
        let result = async {
            let Some(file) = self.client.local_object(who, layout).await? else { return Ok(None) };
            if !created {
                // Other clients' cached pages and queued writes of the file are called in:
                // the kernel's reads and writes from now on pass every lock. The lock may go
                // back at the next callback; the others' opens are uncached meanwhile.
                drop(self.client.whole_file_lock(who, fid, layout).await?);
            }
            Ok::<_, WeftError>(Some(file))
        }
        .await;
        result.unwrap_or_else(|e| {
            tracing::warn!("passthrough open of {fid}: {e}; its I/O goes through the mount instead");
            None
        })
    }

    /// The backing file for a passthrough open of `fid`, with the open's turn held: the one
    /// the kernel has already, or `prepared` handed to the kernel now. None when this mount
    /// cannot use passthrough for the file.
    async fn backing_for(
        &self,
        fid: Fid,
        prepared: Option<std::fs::File>,
        created: bool,
        register: impl FnOnce(&std::fs::File) -> std::io::Result<BackingId>,
    ) -> Option<Arc<Backing>> {
        if !self.io.passthrough_possible(fid) {
            return None;
        }
        if let Some(backing) = self.io.backing(fid) {
            return Some(backing);
        }
        let file = prepared?;
        let id = match register(&file) {
            Ok(id) => id,
            Err(e) => {
                let refused = matches!(
                    e.raw_os_error(),
                    Some(libc::EPERM | libc::ELOOP | libc::EINVAL | libc::ENOTTY | libc::EOPNOTSUPP)
                );
                if refused {
                    // Not privileged, or the object files are on a stacked file system: it
                    // will not work for any file.
                    self.passthrough.store(false, Ordering::Relaxed);
                    tracing::warn!("the kernel refuses passthrough to {fid}'s object file ({e}): turned off");
                } else {
                    tracing::warn!("passthrough open of {fid}: {e}; its I/O goes through the mount instead");
                }
                return None;
            }
        };
        if !created {
            // Pages this mount cached before would be stale once the kernel writes the
            // object itself. No cached open is left (passthrough_possible), so no read holds
            // any of them.
            self.hooks.drop_data(fid).await;
        }
        Some(Arc::new(Backing { id, file }))
    }

    /// An MDS open answered, made an open for the kernel: the I/O mode (passthrough
    /// where granted and possible, else opened again without asking for it, so that the
    /// MDS does not keep other clients uncached for nothing), the real size, O_TRUNC
    /// applied, a handle in the table. Holds the file's open turn until the caller has
    /// answered the kernel (the returned guard).
    async fn open_for_kernel(
        &self,
        who: &Caller,
        mut opened: Opened,
        flags: i32,
        created: bool,
        register: impl FnOnce(&std::fs::File) -> std::io::Result<BackingId>,
    ) -> WeftResult<(u64, InodeInfo, KernelAnswer, tokio::sync::MutexGuard<'_, ()>)> {
        let fid = opened.inode.attr.fid;
        let mut backing = None;
        let mut turn = if opened.io == OpenIo::Passthrough {
            let prepared = self.prepare_passthrough(who, fid, opened.inode.layout.as_ref(), created).await;
            let turn = self.io.serialize_open(fid).await;
            backing = self.backing_for(fid, prepared, created, register).await;
            turn
        } else {
            self.io.serialize_open(fid).await
        };
        if opened.io == OpenIo::Passthrough && backing.is_none() {
            drop(turn);
            if let Err(e) = self.client.close(who, fid, opened.handle, None).await {
                tracing::warn!("closing {fid}'s passthrough open that could not be used: {e}");
            }
            opened = self.client.open(who, fid, open_flags(flags)).await?;
            turn = self.io.serialize_open(fid).await;
        }
        let answer = self.kernel_answer(fid, opened.io, backing);
        let (fh, inode) = self.finish_open(who, opened.inode, opened.handle, flags, answer.io).await?;
        Ok((fh, inode, answer, turn))
    }

    /// How the kernel does the I/O of an open the MDS answered with `granted`, given the
    /// backing file for a passthrough grant; records it. Called with the file's open turn
    /// held, and the kernel answered before it is let go.
    fn kernel_answer(&self, fid: Fid, granted: OpenIo, backing: Option<Arc<Backing>>) -> KernelAnswer {
        let io = self.io.choose(fid, granted, backing.is_some());
        let backing = if io == KernelIo::Passthrough { backing } else { None };
        self.io.opened(fid, io, backing.clone());
        let flags = match io {
            // Pages stay cached across opens while extent locks guard them; without locks
            // every open drops them, so a read after another client's close sees new data.
            KernelIo::Cached if self.locking() => FopenFlags::FOPEN_KEEP_CACHE,
            KernelIo::Cached | KernelIo::Passthrough => FopenFlags::empty(),
            KernelIo::Uncached => FopenFlags::FOPEN_DIRECT_IO,
        };
        KernelAnswer { io, flags, backing }
    }

    /// Ends the advisory locks `owner` holds on `fid`, if this mount ever set one.
    async fn release_advisory(&self, who: &Caller, fid: Fid, owner: u64) {
        let had = self.advisory.lock().unwrap_or_else(|p| p.into_inner()).remove(&(fid, owner));
        if had {
            if let Err(e) = self.client.flock_release(who, fid, owner).await {
                tracing::warn!("releasing the advisory locks of {fid}: {e}");
            }
        }
    }

    /// Every open of `fid` on this mount learns its new size (after a truncate here).
    fn set_open_size(&self, fid: Fid, size: u64) {
        for file in self.files.find_all(|f| f.fid == fid) {
            file.set_size(size);
        }
    }

    /// After the MDS opened a file: its real size, O_TRUNC applied to the objects, and a
    /// handle in the table. Closes the MDS open again if any of that fails.
    async fn finish_open(
        &self,
        who: &Caller,
        inode: InodeInfo,
        handle: u64,
        flags: i32,
        io: KernelIo,
    ) -> WeftResult<(u64, InodeInfo)> {
        let fid = inode.attr.fid;
        let result = async {
            let mut inode = self.complete(who, inode).await?;
            if flags & libc::O_TRUNC != 0 && inode.attr.size > 0 {
                if let Some(layout) = &inode.layout {
                    inode.attr = self.client.truncate(who, fid, layout, 0, Some(handle)).await?;
                    self.set_open_size(fid, 0);
                }
            }
            Ok::<_, WeftError>(inode)
        }
        .await;
        match result {
            Ok(inode) => {
                let mut file = OpenFile::new(fid, handle, inode.layout.clone(), inode.attr.size);
                file.generation = self.client.generation();
                file.io = io;
                if io == KernelIo::Passthrough && flags & libc::O_ACCMODE != libc::O_RDONLY {
                    file.assume_written();
                }
                let fh = self.files.insert(file);
                Ok((fh, inode))
            }
            Err(e) => {
                if let Err(close) = self.client.close(who, fid, handle, None).await {
                    tracing::warn!("closing {fid} after a failed open: {close}");
                }
                self.io.released(fid, io);
                Err(e)
            }
        }
    }

    async fn setattr_async(
        &self,
        who: &Caller,
        fid: Fid,
        fh: Option<FileHandle>,
        set: SetAttr,
    ) -> WeftResult<(Attr, Option<Layout>)> {
        let mut last: Option<(Attr, Option<Layout>)> = None;
        if set.size.is_some() {
            // A truncate must not be overtaken by writes queued before it.
            self.writes.wait_idle(fid).await;
        }
        if let Some(size) = set.size {
            // Through a descriptor (ftruncate), the open's right to write the file is what
            // counts, not the mode bits now.
            let open = fh.and_then(|fh| self.files.get(fh.0));
            let layout = match &open {
                Some(file) => file.layout.clone(),
                None => self.client.getattr(who, fid).await?.layout,
            };
            let handle = open.map(|file| file.mds_handle);
            let attr = match &layout {
                Some(layout) => self.client.truncate(who, fid, layout, size, handle).await?,
                None => self.client.setattr(who, fid, SetAttr { size: Some(size), ..SetAttr::default() }).await?.attr,
            };
            self.set_open_size(fid, size);
            last = Some((attr, layout));
        }
        let rest = SetAttr { size: None, ..set };
        if rest != SetAttr::default() {
            let inode = self.complete(who, self.client.setattr(who, fid, rest).await?).await?;
            last = Some((inode.attr, inode.layout));
        }
        match last {
            Some(done) => Ok(done),
            None => {
                let inode = self.complete(who, self.client.getattr(who, fid).await?).await?;
                Ok((inode.attr, inode.layout))
            }
        }
    }

    async fn virtual_get(&self, who: &Caller, fid: Fid, which: Virtual) -> WeftResult<Vec<u8>> {
        match which {
            Virtual::Layout => {
                let (layout, default) = self.client.getstripe(who, fid).await?;
                json(&LayoutAnswer { layout, default, fid: fid.to_string() })
            }
            Virtual::Fid => Ok(fid.to_string().into_bytes()),
            Virtual::Fid2Path(target) => {
                let path = self.client.fid2path(who, target).await?;
                json(&PathAnswer { path: String::from_utf8_lossy(&path).into_owned() })
            }
            Virtual::Df => json(&self.client.statfs_targets().await?),
            Virtual::Map => json(&self.client.map()),
            Virtual::Io => json(&self.io.counts(fid)),
            Virtual::LayoutDelete | Virtual::Create(_) | Virtual::Unknown => {
                Err(WeftError::new(ErrorCode::NoData, "no such virtual attribute to read"))
            }
        }
    }

    async fn virtual_set(&self, who: &Caller, fid: Fid, which: Virtual, value: &[u8]) -> WeftResult<()> {
        match which {
            Virtual::Layout => {
                let spec: StripeSpec = serde_json::from_slice(value)
                    .map_err(|e| WeftError::invalid(format!("weft.layout takes a JSON stripe specification: {e}")))?;
                self.client.setstripe(who, fid, spec).await
            }
            Virtual::LayoutDelete => self.client.deletestripe(who, fid).await,
            Virtual::Create(name) => {
                let req: CreateWithLayout = serde_json::from_slice(value)
                    .map_err(|e| WeftError::invalid(format!("weft.create takes a JSON {{spec, mode}} object: {e}")))?;
                let opened =
                    self.client.create(who, fid, &name, req.mode & 0o7777, true, Some(req.spec), OPEN_READ).await?;
                self.client.close(who, opened.inode.attr.fid, opened.handle, None).await
            }
            _ => Err(WeftError::new(ErrorCode::NotSupported, "this virtual attribute cannot be set")),
        }
    }

    /// Closes what is still open at unmount, so the MDS does not keep orphan opens, and
    /// waits for the closes still running in the background.
    fn close_all(&self) {
        let files = self.files.drain();
        let closing = async {
            for file in &files {
                if let Err(e) = self.writes.drain(file.fid).await {
                    tracing::warn!("unmount: a queued write of {} failed: {e}", file.fid);
                }
            }
            let _all = self.closes.acquire_many(CLOSES_IN_FLIGHT_MAX).await;
            for file in files {
                if let Err(e) = self.client.close(&Caller::root(), file.fid, file.mds_handle, None).await {
                    tracing::warn!("closing {} at unmount: {e}", file.fid);
                }
            }
            // Nobody needs to call back a mount that is gone.
            self.client.release_locks().await;
        };
        // The runtime may be shutting down as well: never let that take the process down.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.block(tokio::time::timeout(Duration::from_millis(UNMOUNT_CLOSE_TIMEOUT_MS), closing))
        }));
        if !matches!(outcome, Ok(Ok(()))) {
            tracing::warn!("unmount: not every open file could be closed on the MDS");
        }
    }
}

impl fuser::Filesystem for WeftFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if let Err(nearest) = config.set_max_write(self.opts.max_write_bytes) {
            let _ = config.set_max_write(nearest);
        }
        if let Err(nearest) = config.set_max_readahead(READAHEAD_BYTES_MAX) {
            let _ = config.set_max_readahead(nearest);
        }
        let _ = config.set_max_background(KERNEL_BACKGROUND_REQUESTS_MAX);
        // Lookups and creates in one directory may run in parallel: the MDS serializes.
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        // The kernel reads and writes local objects' files itself where it may (see
        // `OpenIo`); without extent locks nothing could keep the other clients coherent.
        if self.opts.passthrough && self.locking() {
            match (config.add_capabilities(InitFlags::FUSE_PASSTHROUGH), config.set_max_stack_depth(1)) {
                (Ok(()), Ok(_)) => *self.passthrough.get_mut() = true,
                _ => tracing::info!("the kernel offers no FUSE passthrough: all I/O goes through the mount"),
            }
        }
        // Requests through io_uring, a queue per CPU (see fuser's uring.rs): fewer system
        // calls and wake-ups per request than /dev/fuse reads.
        if self.opts.uring {
            match config.add_capabilities(InitFlags::FUSE_OVER_IO_URING) {
                Ok(()) => tracing::info!("FUSE requests come through io_uring"),
                Err(_) => tracing::info!(
                    "FUSE requests come through /dev/fuse: this kernel does not offer io_uring for FUSE \
                     (Linux 6.14+ with {} set to Y does)",
                    crate::URING_SWITCH
                ),
            }
        }
        // fcntl and flock locks go to the file system, which makes them hold across mounts.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS | InitFlags::FUSE_FLOCK_LOCKS) {
            tracing::warn!("the kernel does not forward {missing:?}: advisory locks stay local to this mount");
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.close_all();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let who = self.who(req);
        let result = self.block(async {
            let inode = self.client.lookup(&who, fid_of(parent), name.as_bytes()).await?;
            self.complete(&who, inode).await
        });
        self.reply_entry(reply, "lookup", parent, name, result);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let who = self.who(req);
        let result = self.block(async { self.complete(&who, self.client.getattr(&who, fid_of(ino)).await?).await });
        match result {
            Ok(inode) => {
                reply.attr(&self.ttl(&inode), &file_attr(&inode.attr, inode.layout.as_ref()));
                recheck(&self.client, &self.hooks, &inode);
            }
            Err(e) => reply.error(fuse_errno("getattr", &e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let who = self.who(req);
        let set = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
            ctime: ctime.map(timestamp),
        };
        match self.block(self.setattr_async(&who, fid_of(ino), fh, set)) {
            // No lock came with the change: the next stat asks again.
            Ok((attr, layout)) => {
                let ttl = if self.locking() { Duration::ZERO } else { self.opts.attr_ttl };
                reply.attr(&ttl, &file_attr(&attr, layout.as_ref()))
            }
            Err(e) => reply.error(fuse_errno("setattr", &e)),
        }
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let who = self.who(req);
        match self.block(self.client.readlink(&who, fid_of(ino))) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(fuse_errno("readlink", &e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let who = self.who(req);
        let Some(kind) = mknod_type(mode) else {
            reply.error(Errno::EINVAL);
            return;
        };
        let (dir, bytes, perm) = (fid_of(parent), name.as_bytes(), mode & 0o7777);
        let result = self.block(async {
            if kind == FileType::Regular {
                // A regular file is a create (it gets a layout), closed at once.
                let opened = self.client.create(&who, dir, bytes, perm, true, None, 0).await?;
                self.client.close(&who, opened.inode.attr.fid, opened.handle, None).await?;
                Ok(opened.inode)
            } else {
                self.client.mknod(&who, dir, bytes, kind, perm, rdev).await
            }
        });
        self.reply_entry(reply, "mknod", parent, name, result);
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        let who = self.who(req);
        let result = self.block(self.client.mkdir(&who, fid_of(parent), name.as_bytes(), mode & 0o7777));
        self.reply_entry(reply, "mkdir", parent, name, result);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let who = self.who(req);
        Self::reply_empty(reply, "unlink", self.block(self.client.unlink(&who, fid_of(parent), name.as_bytes())));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let who = self.who(req);
        Self::reply_empty(reply, "rmdir", self.block(self.client.rmdir(&who, fid_of(parent), name.as_bytes())));
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let who = self.who(req);
        let target = target.as_os_str().as_bytes();
        let result = self.block(self.client.symlink(&who, fid_of(parent), link_name.as_bytes(), target));
        self.reply_entry(reply, "symlink", parent, link_name, result);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            reply.error(Errno::EINVAL);
            return;
        }
        let mut weft_flags = 0;
        if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            weft_flags |= RENAME_NOREPLACE;
        }
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            weft_flags |= RENAME_EXCHANGE;
        }
        let who = self.who(req);
        let result = self.block(self.client.rename(
            &who,
            fid_of(parent),
            name.as_bytes(),
            fid_of(newparent),
            newname.as_bytes(),
            weft_flags,
        ));
        Self::reply_empty(reply, "rename", result);
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let who = self.who(req);
        let result = self.block(async {
            let inode = self.client.link(&who, fid_of(ino), fid_of(newparent), newname.as_bytes()).await?;
            self.complete(&who, inode).await
        });
        self.reply_entry(reply, "link", newparent, newname, result);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let who = self.who(req);
        let fid = fid_of(ino);
        self.block(async {
            let opened = match self.client.open(&who, fid, self.mds_open_flags(Some(fid), flags.0)).await {
                Ok(opened) => opened,
                Err(e) => return reply.error(fuse_errno("open", &e)),
            };
            let register = |f: &std::fs::File| reply.open_backing(f);
            match self.open_for_kernel(&who, opened, flags.0, false, register).await {
                Ok((fh, _, answer, _turn)) => match &answer.backing {
                    Some(backing) => reply.opened_passthrough(FileHandle(fh), answer.flags, &backing.id),
                    None => reply.opened(FileHandle(fh), answer.flags),
                },
                Err(e) => reply.error(fuse_errno("open", &e)),
            }
        })
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(file) = self.files.get(fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        let Some(layout) = &file.layout else {
            reply.data(&[]);
            return;
        };
        if file.generation != self.client.generation() {
            reply.error(fuse_errno("read", &evicted()));
            return;
        }
        let who = self.who(req);
        let result = self.block(async {
            // The data and its size hold while the read lock does: another client's
            // queued writes are called in first.
            let _locks = self.client.extent_lock(&who, file.fid, layout, offset, size as u64, LockMode::Pr).await?;
            // Reads see every write made before them on this mount.
            self.writes.wait_idle(file.fid).await;
            let mut file_size = file.known_size();
            if offset.saturating_add(size as u64) > file_size {
                // The read reaches past the size this handle knows: another client may
                // have written more. Ask the objects, so the kernel gets every byte there is.
                let (size_now, _) = self.client.glimpse(&who, layout).await?;
                file.raise_size(size_now);
                file_size = file.known_size();
            }
            self.client.read(&who, layout, offset, size, file_size).await
        });
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(fuse_errno("read", &e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(file) = self.files.get(fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        let Some(layout) = &file.layout else {
            reply.error(fuse_errno("write", &WeftError::io(format!("{} has no layout to write to", file.fid))));
            return;
        };
        let len = data.len();
        if file.generation != self.client.generation() {
            reply.error(fuse_errno("write", &evicted()));
            return;
        }
        // The kernel's buffer is borrowed for this call only: one copy into shared bytes,
        // which the striping then slices without copying again.
        let bytes = Bytes::copy_from_slice(data);
        let who = self.who(req);
        let queued = async {
            // The write lock travels with the queued write until it reached the OSTs.
            let locks = self.client.extent_lock(&who, file.fid, layout, offset, len as u64, LockMode::Pw).await?;
            if file.io == KernelIo::Uncached {
                // Another client reads the object past the locks (passthrough): what this
                // write returns must be there. So it is written now, after whatever an
                // earlier mode of this inode left queued, not queued itself.
                self.writes.wait_queued(file.fid).await;
                return self.client.write(&who, layout, offset, bytes, &locks).await;
            }
            let write =
                QueuedWrite { who: who.clone(), fid: file.fid, layout: layout.clone(), offset, data: bytes, locks };
            self.writes.submit(self.client.clone(), req.pid(), write).await
        };
        match self.block(queued) {
            Ok(()) => {
                file.note_write(offset + len as u64);
                reply.written(len as u32);
            }
            Err(e) => reply.error(fuse_errno("write", &e)),
        }
    }

    fn flush(&self, req: &Request, ino: INodeNo, _fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        // close(2) by a writer waits for its queued writes and reports what failed; a close
        // also ends the fcntl locks its process held on the file (POSIX).
        let result = self.block(async {
            let written = self.writes.flush(fid_of(ino), req.pid()).await;
            self.release_advisory(&self.who(req), fid_of(ino), lock_owner.0).await;
            written
        });
        Self::reply_empty(reply, "flush", result);
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(owner) = lock_owner {
            // The last close of an open file description ends its flock lock.
            self.block(self.release_advisory(&self.who(req), fid_of(_ino), owner.0));
        }
        let Some(file) = self.files.remove(fh.0) else {
            reply.ok();
            return;
        };
        // A passthrough writer's size is its object file's: no glimpse needed.
        let local_size = match (file.io, file.wrote()) {
            (KernelIo::Passthrough, true) => self.io.backing(file.fid).and_then(|b| match b.file.metadata() {
                Ok(m) => Some((m.len(), m.blocks())),
                Err(e) => {
                    tracing::warn!("release of {}: cannot stat its object file: {e}", file.fid);
                    None
                }
            }),
            _ => None,
        };
        // The kernel left the open's I/O mode before it sent the release.
        self.io.released(file.fid, file.io);
        let who = self.who(req);
        // The kernel does not wait for a release (close(2) has returned already), so the
        // FUSE thread answers at once and closes on the MDS after; unmount waits for the
        // closes still running (CLOSES_IN_FLIGHT_MAX of them at most).
        let Ok(permit) = self.block(self.closes.clone().acquire_owned()) else {
            reply.ok();
            return;
        };
        reply.ok();
        let client = self.client.clone();
        let writes = self.writes.clone();
        // With no write on its way the close is quick: this thread does it (a hand-off to
        // the runtime and back would cost more). Otherwise it waits for the writes in the
        // background, keeping this thread free for the kernel's next request.
        let inline = writes.is_idle(file.fid);
        let close = async move {
            let _permit = permit;
            if let Err(e) = writes.drain(file.fid).await {
                tracing::warn!("release of {}: a queued write failed: {e}", file.fid);
            }
            // A writer tells the MDS the size and blocks the objects now hold.
            let size_blocks = match (&file.layout, file.wrote()) {
                _ if local_size.is_some() => local_size,
                (Some(layout), true) => match client.glimpse(&who, layout).await {
                    Ok(size_blocks) => Some(size_blocks),
                    Err(e) => {
                        tracing::warn!("release of {}: cannot read its size from the objects: {e}", file.fid);
                        None
                    }
                },
                _ => None,
            };
            if let Err(e) = client.close(&who, file.fid, file.mds_handle, size_blocks).await {
                tracing::warn!("release of {}: the MDS close failed: {e}", file.fid);
            }
        };
        if inline {
            self.block(close);
        } else {
            self.runtime.spawn(close);
        }
    }

    fn fsync(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let Some(file) = self.files.get(fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        let result = self.block(async {
            self.writes.drain(file.fid).await?;
            match &file.layout {
                Some(layout) => self.client.fsync(&self.who(req), layout).await,
                None => Ok(()),
            }
        });
        Self::reply_empty(reply, "fsync", result);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let fh = self.dirs.insert(OpenDir::new(fid_of(ino)));
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn readdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let Some(dir) = self.dirs.get(fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        let mut at = resume_at(offset);
        if at == Resume::Dot {
            if reply.add(ino, DIR_OFFSET_DOT, fuser::FileType::Directory, ".") {
                return reply.ok();
            }
            at = Resume::DotDot;
        }
        if at == Resume::DotDot {
            // The parent is not known without a lookup; the kernel does not use this number.
            if reply.add(ino, DIR_OFFSET_DOTDOT, fuser::FileType::Directory, "..") {
                return reply.ok();
            }
            at = Resume::Entry(0);
        }
        let Resume::Entry(mut index) = at else { unreachable!("dot entries are handled above") };
        let who = self.who(req);
        loop {
            match dir.step(index) {
                Step::End => break,
                Step::Fetch { after_cookie, first_index } => {
                    match self.block(self.client.readdir(&who, dir.fid, after_cookie, READDIR_ENTRIES_MAX)) {
                        Ok(page) => dir.store(first_index, after_cookie, page.entries, page.eof),
                        Err(e) => return reply.error(fuse_errno("readdir", &e)),
                    }
                }
                Step::Entries { first_index, entries } => {
                    for (i, entry) in entries.iter().enumerate() {
                        let name = OsStr::from_bytes(&entry.name);
                        let offset = entry_offset(first_index + i as u64);
                        if reply.add(INodeNo(entry.fid.to_ino()), offset, file_type(entry.kind), name) {
                            return reply.ok();
                        }
                    }
                    index = first_index + entries.len() as u64;
                }
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.dirs.remove(fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Every metadata change is durable on the MDT when acknowledged.
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.block(self.client.statfs()) {
            Ok(s) => {
                reply.statfs(s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, NAME_BYTES_MAX as u32, s.bsize)
            }
            Err(e) => reply.error(fuse_errno("statfs", &e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let who = self.who(req);
        let (fid, name) = (fid_of(ino), name.as_bytes());
        let result = match xattr::parse(name) {
            Some(which) => self.block(self.virtual_set(&who, fid, which, value)),
            None => {
                let flags = flags as u32 & (XATTR_CREATE | XATTR_REPLACE);
                self.block(self.client.setxattr(&who, fid, name, value, flags))
            }
        };
        Self::reply_empty(reply, "setxattr", result);
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let who = self.who(req);
        let (fid, name) = (fid_of(ino), name.as_bytes());
        let result = match xattr::parse(name) {
            Some(which) => self.block(self.virtual_get(&who, fid, which)),
            None => self.block(self.client.getxattr(&who, fid, name)),
        };
        match result {
            Ok(value) => match xattr::answer(value.len(), size) {
                Answer::Size(len) => reply.size(len),
                Answer::Data => reply.data(&value),
                Answer::Range => reply.error(Errno::ERANGE),
            },
            Err(e) => reply.error(fuse_errno("getxattr", &e)),
        }
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let who = self.who(req);
        match self.block(self.client.listxattr(&who, fid_of(ino))) {
            Ok(names) => {
                let value = xattr::list_value(&names);
                match xattr::answer(value.len(), size) {
                    Answer::Size(len) => reply.size(len),
                    Answer::Data => reply.data(&value),
                    Answer::Range => reply.error(Errno::ERANGE),
                }
            }
            Err(e) => reply.error(fuse_errno("listxattr", &e)),
        }
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let who = self.who(req);
        let (fid, name) = (fid_of(ino), name.as_bytes());
        let result = match xattr::parse(name) {
            Some(Virtual::Layout | Virtual::LayoutDelete) => self.block(self.client.deletestripe(&who, fid)),
            Some(_) => Err(WeftError::new(ErrorCode::NoData, "this virtual attribute cannot be removed")),
            None => self.block(self.client.removexattr(&who, fid, name)),
        };
        Self::reply_empty(reply, "removexattr", result);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // default_permissions: the kernel checks mode bits itself.
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let who = self.who(req);
        let exclusive = flags & libc::O_EXCL != 0;
        self.block(async {
            let mds_flags = self.mds_open_flags(None, flags);
            let created =
                self.client.create(&who, fid_of(parent), name.as_bytes(), mode & 0o7777, exclusive, None, mds_flags);
            let opened = match created.await {
                Ok(opened) => opened,
                Err(e) => return reply.error(fuse_errno("create", &e)),
            };
            // Without O_EXCL the file may have existed. One of known size 0 holds no bytes a
            // client could have cached or queued (its size is known once its last writer
            // closed, writes landed); a longer one gets the whole-file lock first.
            let new = exclusive || (opened.inode.attr.size_known && opened.inode.attr.size == 0);
            let register = |f: &std::fs::File| reply.open_backing(f);
            match self.open_for_kernel(&who, opened, flags, new, register).await {
                Ok((fh, inode, answer, _turn)) => {
                    let ttl = self.entry_ttl(parent, name, &inode);
                    let attr = file_attr(&inode.attr, inode.layout.as_ref());
                    let fh = FileHandle(fh);
                    match &answer.backing {
                        Some(b) => reply.created_passthrough(&ttl, &attr, Generation(0), fh, answer.flags, &b.id),
                        None => reply.created(&ttl, &attr, Generation(0), fh, answer.flags),
                    }
                    recheck(&self.client, &self.hooks, &inode);
                }
                Err(e) => reply.error(fuse_errno("create", &e)),
            }
        })
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let Some(lock) = flock_spec(lock_owner, start, end, typ, pid) else {
            return reply.error(Errno::EINVAL);
        };
        match self.block(self.client.flock_get(&self.who(req), fid_of(ino), lock)) {
            Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
            Ok(Some(holder)) => {
                let typ = if holder.kind == FlockKind::Read { libc::F_RDLCK } else { libc::F_WRLCK };
                reply.locked(holder.start, kernel_end(holder.end), typ, holder.pid)
            }
            Err(e) => reply.error(fuse_errno("getlk", &e)),
        }
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let Some(lock) = flock_spec(lock_owner, start, end, typ, pid) else {
            return reply.error(Errno::EINVAL);
        };
        let fid = fid_of(ino);
        let who = self.who(req);
        if lock.kind != FlockKind::Unlock {
            self.advisory.lock().unwrap_or_else(|p| p.into_inner()).insert((fid, lock.owner));
        }
        if !sleep {
            let result = self.block(self.client.flock_set(&who, fid, lock));
            return match result {
                Ok(true) => reply.ok(),
                Ok(false) => reply.error(Errno::EAGAIN),
                Err(e) => reply.error(fuse_errno("setlk", &e)),
            };
        }
        // F_SETLKW: wait off the FUSE threads (a waiter must not take a worker from the
        // mount), asking again with a growing pause until granted, until the file is closed,
        // or until the client fails.
        let client = self.client.clone();
        let files = self.files.clone();
        self.runtime.spawn(async move {
            let mut pause_ms = FLOCK_RETRY_MS_MIN;
            loop {
                match client.flock_set(&who, fid, lock.clone()).await {
                    Ok(true) => return reply.ok(),
                    Ok(false) => {}
                    Err(e) => return reply.error(fuse_errno("setlk", &e)),
                }
                if files.get(fh.0).is_none() {
                    return reply.error(Errno::EINTR);
                }
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                pause_ms = (pause_ms * 2).min(FLOCK_RETRY_MS_MAX);
            }
        });
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn lseek(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _offset: i64, _whence: i32, reply: ReplyLseek) {
        reply.error(Errno::ENOSYS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flags_carry_access_mode_and_truncate() {
        assert_eq!(open_flags(libc::O_RDONLY), OPEN_READ);
        assert_eq!(open_flags(libc::O_WRONLY), OPEN_WRITE);
        assert_eq!(open_flags(libc::O_RDWR | libc::O_TRUNC), OPEN_READ | OPEN_WRITE | OPEN_TRUNC);
        assert_eq!(open_flags(libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT), OPEN_WRITE);
    }
}
