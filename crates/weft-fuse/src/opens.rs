//! Opens: open, create, release, and each open's I/O mode (cached, passthrough, uncached:
//! see `iomode.rs` and `OpenIo`), closes at unmount.

use crate::coherence::recheck;
use crate::convert::file_attr;
use crate::errno::fuse_errno;
use crate::handles::OpenFile;
use crate::iomode::{Backing, KernelAnswer, KernelIo};
use crate::limits::{CLOSES_IN_FLIGHT_MAX, UNMOUNT_CLOSE_TIMEOUT_MS};
use crate::mount::{fid_of, Mount};
use fuser::{BackingId, FileHandle, FopenFlags, Generation, INodeNo, ReplyCreate, ReplyEmpty, ReplyOpen};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use weft_client::locks::LockHooks;
use weft_client::Opened;
use weft_proto::layout::Layout;
use weft_proto::msg::{Caller, InodeInfo, OpenIo, OPEN_EXEC, OPEN_PASSTHROUGH, OPEN_READ, OPEN_TRUNC, OPEN_WRITE};
use weft_proto::{Fid, WeftError, WeftResult};

/// The flag the kernel's execve(2) opens its program with (`__FMODE_EXEC`, kept in the
/// open's flags that FUSE passes on; not an O_ flag a program can give).
const KERNEL_FMODE_EXEC: i32 = 0x20;

/// The MDS's open flags for open(2) flags `flags`.
pub(crate) fn open_flags(flags: i32) -> u32 {
    let access = match flags & libc::O_ACCMODE {
        libc::O_WRONLY => OPEN_WRITE,
        libc::O_RDWR => OPEN_READ | OPEN_WRITE,
        _ if flags & KERNEL_FMODE_EXEC != 0 => OPEN_EXEC,
        _ => OPEN_READ,
    };
    access | if flags & libc::O_TRUNC != 0 { OPEN_TRUNC } else { 0 }
}

/// The kernel's open flags for an open of mode `io` with open(2) flags `flags`. Pages stay
/// cached across opens while extent locks guard them; without locks every open drops them,
/// so a read after another client's close sees new data. Passthrough opens never use the
/// page cache of the mount, and an uncached open must not keep pages either.
///
/// A write-only cached open writes around the page cache (FOPEN_DIRECT_IO on the handle,
/// not the inode): nothing can read through it, and a write through the page cache costs
/// a page-cache copy and later its reclaim for pages nobody reads, the mount's biggest
/// cost per byte written over TCP (half of it, measured). The kernel drops the pages other
/// opens of the file have cached in the range before it sends the write, so they read
/// what was written (`a_write_only_open_leaves_no_stale_page_to_readers`), except a read
/// racing the write (see ARCHITECTURE.md, known gaps).
pub(crate) fn fopen_flags(io: KernelIo, locking: bool, flags: i32) -> FopenFlags {
    let write_only = flags & libc::O_ACCMODE == libc::O_WRONLY;
    match io {
        KernelIo::Cached if write_only && locking => FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_KEEP_CACHE,
        KernelIo::Cached if write_only => FopenFlags::FOPEN_DIRECT_IO,
        KernelIo::Cached if locking => FopenFlags::FOPEN_KEEP_CACHE,
        KernelIo::Cached | KernelIo::Passthrough => FopenFlags::empty(),
        KernelIo::Uncached => FopenFlags::FOPEN_DIRECT_IO,
    }
}

/// Whether a create found no bytes any client could have cached or queued: made now
/// (`O_EXCL`), or existing at a known size of 0 (known once its last writer closed and its
/// writes landed). Otherwise a passthrough open takes the whole-file lock first.
pub(crate) fn create_found_empty(exclusive: bool, size_known: bool, size: u64) -> bool {
    exclusive || (size_known && size == 0)
}

/// Whether the kernel's refusal of a backing file means passthrough cannot work on this
/// mount at all (no privilege, or object files on a stacked file system), not just for one
/// file.
pub(crate) fn refuses_every_backing_file(errno: Option<i32>) -> bool {
    matches!(errno, Some(libc::EPERM | libc::ELOOP | libc::EINVAL | libc::ENOTTY | libc::EOPNOTSUPP))
}

/// Where a release finds the size its writer left, for the MDS close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeAtClose {
    /// A passthrough writer: the object file the kernel wrote is the file.
    BackingFile,
    /// A writer through the mount: the objects' sizes (a glimpse).
    Objects,
    /// Nothing written through this open: the MDS keeps what it has.
    Unchanged,
}

pub(crate) fn size_at_close(io: KernelIo, wrote: bool) -> SizeAtClose {
    match (io, wrote) {
        (KernelIo::Passthrough, true) => SizeAtClose::BackingFile,
        (_, true) => SizeAtClose::Objects,
        (_, false) => SizeAtClose::Unchanged,
    }
}

impl Mount {
    /// The MDS open flags for kernel open flags, asking for passthrough when this mount
    /// could give it (see [`OpenIo`]).
    fn mds_open_flags(&self, fid: Option<Fid>, flags: i32) -> u32 {
        // (`passthrough` is on only where locks are: see `init`.) Only when the site asked:
        // the OSS counts no byte done this way (see `Passthrough`).
        let passthrough = self.opts.passthrough == crate::Passthrough::On
            && self.passthrough.load(Ordering::Relaxed)
            && fid.is_none_or(|fid| self.io.passthrough_possible(fid))
            && self.client.passthrough_allowed();
        let flags =
            open_flags(flags) | if passthrough { OPEN_PASSTHROUGH } else { 0 } | self.opts.atime.open_flags(flags);
        match fid {
            Some(fid) => self.without_needless_atime(fid, flags),
            None => flags,
        }
    }

    pub(crate) async fn open(self: Arc<Self>, who: Caller, ino: INodeNo, flags: i32, reply: ReplyOpen) {
        let fid = fid_of(ino);
        if self.pcc.active() {
            let register = |f: &std::fs::File| reply.open_backing(f);
            match self.pcc_open(&who, fid, flags, open_flags(flags), register).await {
                Some(Ok(open)) => {
                    let io = KernelIo::Passthrough;
                    let (writing, _turn) = (open.writing, open.turn);
                    return match self.finish_open(&who, open.inode, open.handle, flags, io, None).await {
                        Ok((fh, _)) => {
                            if let Some(file) = self.files.get(fh) {
                                file.through_cache.store(true, Ordering::Release);
                            }
                            let backing = open.answer.backing.as_ref().expect("the cache's opens are passthrough");
                            reply.opened_passthrough(FileHandle(fh), open.answer.flags, &backing.id)
                        }
                        Err(e) => {
                            self.pcc.closed(fid, writing);
                            reply.error(fuse_errno("open", &e))
                        }
                    };
                }
                Some(Err(e)) => return reply.error(fuse_errno("open", &e)),
                None => {}
            }
        }
        // Before the MDS answers: a write-open of this mount racing this one counts as after.
        let write_opens = self.write_opens.load(Ordering::Acquire);
        let mds_flags = self.mds_open_flags(Some(fid), flags);
        let atime = self.atime_before_open(fid, mds_flags);
        let opened = match self.client.open(&who, fid, mds_flags).await {
            Ok(opened) => opened,
            Err(e) => return reply.error(fuse_errno("open", &e)),
        };
        self.atime_after_open(fid, atime, opened.inode.attr.atime);
        let register = |f: &std::fs::File| reply.open_backing(f);
        match self.open_for_kernel(&who, opened, flags, false, Some(write_opens), register).await {
            Ok((fh, _, answer, _turn)) => match &answer.backing {
                Some(backing) => reply.opened_passthrough(FileHandle(fh), answer.flags, &backing.id),
                None => reply.opened(FileHandle(fh), answer.flags),
            },
            Err(e) => reply.error(fuse_errno("open", &e)),
        }
    }

    pub(crate) async fn create(
        self: Arc<Self>,
        who: Caller,
        parent: INodeNo,
        name: OsString,
        perm: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let exclusive = flags & libc::O_EXCL != 0;
        let mds_flags = self.mds_open_flags(None, flags);
        let created = self.client.create(&who, fid_of(parent), name.as_bytes(), perm, exclusive, None, mds_flags);
        let opened = match created.await {
            Ok(opened) => opened,
            Err(e) => return reply.error(fuse_errno("create", &e)),
        };
        // Without O_EXCL the file may have existed.
        let empty = create_found_empty(exclusive, opened.inode.attr.size_known, opened.inode.attr.size);
        let register = |f: &std::fs::File| reply.open_backing(f);
        match self.open_for_kernel(&who, opened, flags, empty, None, register).await {
            Ok((fh, inode, answer, _turn)) => {
                let ttl = self.entry_ttl(parent, &name, &inode);
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
    }

    /// open(2) with O_TMPFILE in `parent`: an unnamed file, opened as a created one is. It
    /// goes with its last close unless linkat(2) names it (`link`, which the MDS allows for
    /// a file without links while it is open).
    pub(crate) async fn tmpfile(
        self: Arc<Self>,
        who: Caller,
        parent: INodeNo,
        perm: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mds_flags = self.mds_open_flags(None, flags);
        let opened = match self.client.create_tmpfile(&who, fid_of(parent), perm, mds_flags).await {
            Ok(opened) => opened,
            Err(e) => return reply.error(fuse_errno("tmpfile", &e)),
        };
        let register = |f: &std::fs::File| reply.open_backing(f);
        match self.open_for_kernel(&who, opened, flags, true, None, register).await {
            Ok((fh, inode, answer, _turn)) => {
                // No name to remember for the entry's callback.
                let ttl = self.ttl(&inode);
                let attr = file_attr(&inode.attr, inode.layout.as_ref());
                let fh = FileHandle(fh);
                match &answer.backing {
                    Some(b) => reply.created_passthrough(&ttl, &attr, Generation(0), fh, answer.flags, &b.id),
                    None => reply.created(&ttl, &attr, Generation(0), fh, answer.flags),
                }
            }
            Err(e) => reply.error(fuse_errno("tmpfile", &e)),
        }
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
                if refuses_every_backing_file(e.raw_os_error()) {
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
        Some(Arc::new(Backing { id, file, cache: false }))
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
        write_opens: Option<u64>,
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
        let answer = self.kernel_answer(fid, opened.io, backing, flags);
        let (fh, inode) = self.finish_open(who, opened.inode, opened.handle, flags, answer.io, write_opens).await?;
        Ok((fh, inode, answer, turn))
    }

    /// How the kernel does the I/O of an open the MDS answered with `granted`, given the
    /// backing file for a passthrough grant; records it. Called with the file's open turn
    /// held, and the kernel answered before it is let go.
    fn kernel_answer(&self, fid: Fid, granted: OpenIo, backing: Option<Arc<Backing>>, flags: i32) -> KernelAnswer {
        let io = self.io.choose(fid, granted, backing.is_some());
        let backing = if io == KernelIo::Passthrough { backing } else { None };
        self.io.opened(fid, io, backing.clone());
        KernelAnswer { io, flags: fopen_flags(io, self.locking(), flags), backing }
    }

    /// After the MDS opened a file: its real size, O_TRUNC applied to the objects, and a
    /// handle in the table. Closes the MDS open again if any of that fails.
    pub(crate) async fn finish_open(
        &self,
        who: &Caller,
        inode: InodeInfo,
        handle: u64,
        flags: i32,
        io: KernelIo,
        write_opens: Option<u64>,
    ) -> WeftResult<(u64, InodeInfo)> {
        let fid = inode.attr.fid;
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
        if writing {
            self.write_opens.fetch_add(1, Ordering::AcqRel);
        }
        // The size as the MDS answered it, before any glimpse completes it.
        let exact_size = match (writing, write_opens, inode.attr.size_known, &inode.lock) {
            (false, Some(epoch), true, Some(lock)) => Some((lock.handle, epoch)),
            _ => None,
        };
        let result = async {
            let mut inode = self.complete(who, inode).await?;
            if flags & libc::O_TRUNC != 0 && inode.attr.size > 0 {
                if let Some(path) = self.pcc.owned_path(fid) {
                    inode.attr = self.pcc_truncate(who, fid, &path, 0).await?.attr;
                    self.set_open_size(fid, 0);
                } else if let Some(layout) = &inode.layout {
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
                file.set_layout_lock(inode.lock.as_ref().map(|l| l.handle));
                file.generation = self.client.generation();
                file.io = io;
                file.exact_size = exact_size;
                file.jobid.clone_from(&who.jobid);
                file.note_mode(inode.attr.mode);
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

    /// The last close of an open file description. The kernel does not wait for a release
    /// (close(2) has returned already), so the kernel is answered at once and the MDS close
    /// follows as a task of its own, keeping the FUSE thread free; unmount waits for the
    /// closes still running ([`CLOSES_IN_FLIGHT_MAX`] of them at most).
    pub(crate) async fn release(
        self: Arc<Self>,
        who: Caller,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: Option<u64>,
        reply: ReplyEmpty,
    ) {
        // The last close of an open file description ends its OFD and flock locks.
        self.release_open_locks(&who, fid_of(ino), fh.0, lock_owner).await;
        let Some(file) = self.files.remove(fh.0) else {
            return reply.ok();
        };
        // A release with no process behind it closes for the job that opened.
        let who = if who.jobid.is_empty() { Caller { jobid: file.jobid.clone(), ..who } } else { who };
        let local_size = match size_at_close(file.io, file.wrote()) {
            SizeAtClose::BackingFile => self.io.backing(file.fid).and_then(|b| match b.file.metadata() {
                // The object's own attributes, as its OST would answer them (one object).
                Ok(m) => {
                    let mtime_ns = weft_proto::layout::object_mtime_ns(&m);
                    let data_version = weft_proto::layout::data_version([(m.len(), mtime_ns)]);
                    Some(weft_client::Glimpse { size: m.len(), blocks: m.blocks(), data_version, mtime_ns })
                }
                Err(e) => {
                    tracing::warn!("release of {}: cannot stat its object file: {e}", file.fid);
                    None
                }
            }),
            SizeAtClose::Objects | SizeAtClose::Unchanged => None,
        };
        // The kernel left the open's I/O mode before it sent the release.
        self.io.released(file.fid, file.io);
        if file.through_cache.load(Ordering::Acquire) {
            self.pcc.closed(file.fid, file.wrote());
        }
        let Ok(permit) = self.closes.clone().acquire_owned().await else {
            return reply.ok();
        };
        reply.ok();
        let client = self.client.clone();
        let writes = self.writes.clone();
        let inline = self.client.mdt_is_local() && writes.is_idle(file.fid);
        let close = async move {
            let _permit = permit;
            if let Err(e) = writes.drain(file.fid).await {
                tracing::warn!("release of {}: a queued write failed: {e}", file.fid);
            }
            // A writer tells the MDS the size, blocks and data version the objects now hold.
            let written = match size_at_close(file.io, file.wrote()) {
                _ if local_size.is_some() => local_size,
                SizeAtClose::Objects => match client.glimpse_current(&who, &file).await {
                    Ok(written) => written,
                    Err(e) => {
                        tracing::warn!("release of {}: cannot read its size from the objects: {e}", file.fid);
                        None
                    }
                },
                _ => None,
            };
            if let Err(e) = client.close(&who, file.fid, file.mds_handle, written).await {
                tracing::warn!("release of {}: the MDS close failed: {e}", file.fid);
            }
        };
        // Over TCP never on this FUSE thread: the kernel's next request (the next create's,
        // say) may be queued behind it on this thread's ring for a round trip. In-process
        // (`weft up`) a close costs only CPU, which a hand-off to a runtime thread would add to.
        if inline {
            close.await;
        } else {
            self.runtime.spawn(close);
        }
    }

    /// Closes what is still open at unmount, so the MDS does not keep orphan opens, and
    /// waits for the closes still running in the background. Called on a FUSE thread.
    pub(crate) fn close_all(&self) {
        self.pcc_stop();
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
            // The timeout is made inside the runtime: its timer needs the runtime's clock.
            self.runtime.block_on(async {
                tokio::time::timeout(Duration::from_millis(UNMOUNT_CLOSE_TIMEOUT_MS), closing).await
            })
        }));
        if !matches!(outcome, Ok(Ok(()))) {
            tracing::warn!("unmount: not every open file could be closed on the MDS");
        }
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
        assert_eq!(open_flags(libc::O_RDONLY | libc::O_LARGEFILE | KERNEL_FMODE_EXEC), OPEN_EXEC);
    }

    #[test]
    fn the_kernel_keeps_pages_only_for_cached_opens_under_locks() {
        let (keep, direct) = (FopenFlags::FOPEN_KEEP_CACHE, FopenFlags::FOPEN_DIRECT_IO);
        assert_eq!(fopen_flags(KernelIo::Cached, true, libc::O_RDONLY), keep);
        assert_eq!(fopen_flags(KernelIo::Cached, true, libc::O_RDWR), keep);
        assert_eq!(fopen_flags(KernelIo::Cached, false, libc::O_RDWR), FopenFlags::empty());
        assert_eq!(fopen_flags(KernelIo::Passthrough, true, libc::O_RDWR), FopenFlags::empty());
        assert_eq!(fopen_flags(KernelIo::Uncached, true, libc::O_RDONLY), direct);
        assert_eq!(fopen_flags(KernelIo::Uncached, false, libc::O_RDWR), direct);
    }

    #[test]
    fn a_write_only_open_under_locks_writes_around_the_page_cache() {
        let (keep, direct) = (FopenFlags::FOPEN_KEEP_CACHE, FopenFlags::FOPEN_DIRECT_IO);
        assert_eq!(fopen_flags(KernelIo::Cached, true, libc::O_WRONLY | libc::O_CREAT), keep | direct);
        assert_eq!(fopen_flags(KernelIo::Cached, false, libc::O_WRONLY), direct);
        assert_eq!(fopen_flags(KernelIo::Passthrough, true, libc::O_WRONLY), FopenFlags::empty());
    }

    #[test]
    fn a_create_found_empty_only_when_new_or_known_empty() {
        assert!(create_found_empty(true, false, 7), "O_EXCL: made now");
        assert!(create_found_empty(false, true, 0));
        assert!(!create_found_empty(false, true, 1));
        assert!(!create_found_empty(false, false, 0), "a size not known may hide queued bytes");
    }

    #[test]
    fn refusals_that_turn_passthrough_off_are_told_from_one_file_failing() {
        for errno in [libc::EPERM, libc::ELOOP, libc::EINVAL, libc::ENOTTY, libc::EOPNOTSUPP] {
            assert!(refuses_every_backing_file(Some(errno)));
        }
        assert!(!refuses_every_backing_file(Some(libc::EMFILE)));
        assert!(!refuses_every_backing_file(None));
    }

    #[test]
    fn a_close_reads_the_size_where_the_writer_left_it() {
        assert_eq!(size_at_close(KernelIo::Passthrough, true), SizeAtClose::BackingFile);
        assert_eq!(size_at_close(KernelIo::Cached, true), SizeAtClose::Objects);
        assert_eq!(size_at_close(KernelIo::Uncached, true), SizeAtClose::Objects);
        assert_eq!(size_at_close(KernelIo::Passthrough, false), SizeAtClose::Unchanged);
    }
}
