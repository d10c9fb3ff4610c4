//! The [`fuser::Filesystem`] implementation: what the kernel is offered at init, and for
//! every other request who asks (uid, gid, groups, jobid) and which op of [`Mount`] answers
//! it, run by [`Serve`]. Nothing is decided here; the ops live by what the kernel asks in
//! `entries.rs`, `opens.rs`, `io.rs`, `xattr.rs` and `locks.rs`.

use crate::convert::{mknod_type, set_time, timestamp};
use crate::entries::rename_flags;
use crate::limits::{KERNEL_BACKGROUND_REQUESTS_MAX, READAHEAD_BYTES_MAX};
use crate::locks::flock_spec;
use crate::mount::{fid_of, Mount};
use crate::serve::Serve;
use bytes::Bytes;
use fuser::{
    AccessFlags, Errno, FileHandle, FopenFlags, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLock, ReplyLseek, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, RequestId, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;
use weft_proto::msg::SetAttr;

pub(crate) struct WeftFs {
    mount: Arc<Mount>,
    serve: Serve,
}

impl WeftFs {
    pub(crate) fn new(mount: Mount) -> WeftFs {
        let serve = Serve::new(mount.runtime.clone());
        let mount = Arc::new(mount);
        crate::params::follow(&mount);
        WeftFs { mount, serve }
    }

    /// The mount, for an op of one request.
    fn m(&self) -> Arc<Mount> {
        self.mount.clone()
    }
}

impl fuser::Filesystem for WeftFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let mount = &self.mount;
        if let Err(nearest) = config.set_max_write(mount.opts.max_write_bytes) {
            let _ = config.set_max_write(nearest);
        }
        if let Err(nearest) = config.set_max_readahead(READAHEAD_BYTES_MAX) {
            let _ = config.set_max_readahead(nearest);
        }
        let _ = config.set_max_background(KERNEL_BACKGROUND_REQUESTS_MAX);
        // Lookups and creates in one directory may run in parallel: the MDS serializes.
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        // File handles (name_to_handle_at, open_by_handle_at, an NFS server re-exporting the
        // mount): inode numbers are FIDs, valid for the file's life, and a lookup of "." or
        // ".." in an inode finds it or its parent after the kernel dropped it. Without this
        // the kernel refuses every handle it decodes (ESTALE).
        if config.add_capabilities(InitFlags::FUSE_EXPORT_SUPPORT).is_err() {
            tracing::info!("the kernel offers no FUSE export support: file handles give ESTALE");
        }
        // The kernel reads and writes local objects' files (`passthrough=on`, see `OpenIo`)
        // and cache copies (`pcc.rs`) itself where it may; without extent locks nothing
        // could keep the other clients coherent.
        if mount.opts.passthrough != crate::Passthrough::Off && mount.locking() {
            match (config.add_capabilities(InitFlags::FUSE_PASSTHROUGH), config.set_max_stack_depth(1)) {
                (Ok(()), Ok(_)) => mount.passthrough.store(true, std::sync::atomic::Ordering::Relaxed),
                _ => tracing::info!("the kernel offers no FUSE passthrough: all I/O goes through the mount"),
            }
        }
        // Requests through io_uring, a queue per CPU (see fuser's uring.rs): fewer system
        // calls and wake-ups per request than /dev/fuse reads.
        if mount.opts.uring {
            match config.add_capabilities(InitFlags::FUSE_OVER_IO_URING) {
                Ok(()) => tracing::info!("FUSE requests come through io_uring"),
                Err(_) => tracing::info!(
                    "FUSE requests come through /dev/fuse: this kernel does not offer io_uring for FUSE \
                     (Linux 6.14+ with {} set to Y does)",
                    crate::URING_SWITCH
                ),
            }
        }
        // POSIX ACLs: the kernel checks them (it reads system.posix_acl_access, which the MDS
        // keeps and checks too) and leaves the umask to the MDS, which applies it unless the
        // directory's default ACL replaces it. Without this a user granted access by an ACL
        // would be refused by the kernel's mode-bit check.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK) {
            tracing::warn!("the kernel does not offer {missing:?}: POSIX ACLs are not checked by it");
        }
        // fcntl and flock locks go to the file system, which makes them hold across mounts.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS | InitFlags::FUSE_FLOCK_LOCKS) {
            tracing::warn!("the kernel does not forward {missing:?}: advisory locks stay local to this mount");
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.mount.close_all();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let m = self.m();
        self.serve.run(m.clone().lookup(m.who(req), parent, name.to_owned(), reply));
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let m = self.m();
        self.serve.run(m.clone().getattr(m.who(req), ino, reply));
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
        let set = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
            ctime: ctime.map(timestamp),
            ..SetAttr::default()
        };
        let m = self.m();
        self.serve.run(m.clone().setattr(m.who(req), ino, fh, set, reply));
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let m = self.m();
        self.serve.run(m.clone().readlink(m.who(req), ino, reply));
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let Some(kind) = mknod_type(mode) else {
            return reply.error(Errno::EINVAL);
        };
        let m = self.m();
        self.serve.run(m.clone().mknod(
            m.creator(req, umask),
            parent,
            name.to_owned(),
            kind,
            mode & 0o7777,
            rdev,
            reply,
        ));
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let m = self.m();
        self.serve.run(m.clone().mkdir(m.creator(req, umask), parent, name.to_owned(), mode & 0o7777, reply));
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let m = self.m();
        self.serve.run(m.clone().unlink(m.who(req), parent, name.to_owned(), reply));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let m = self.m();
        self.serve.run(m.clone().rmdir(m.who(req), parent, name.to_owned(), reply));
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let m = self.m();
        let (name, target) = (link_name.to_owned(), target.as_os_str().to_owned());
        self.serve.run(m.clone().symlink(m.who(req), parent, name, target, reply));
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
        let Some(flags) = rename_flags(flags) else {
            return reply.error(Errno::EINVAL);
        };
        let m = self.m();
        let (name, newname) = (name.to_owned(), newname.to_owned());
        self.serve.run(m.clone().rename(m.who(req), parent, name, newparent, newname, flags, reply));
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let m = self.m();
        self.serve.run(m.clone().link(m.who(req), ino, newparent, newname.to_owned(), reply));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let m = self.m();
        self.serve.run(m.clone().open(m.who(req), ino, flags.0, reply));
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
        let m = self.m();
        self.serve.run(m.clone().read(m.who(req), fh, offset, size, reply));
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let m = self.m();
        // The kernel's buffer is borrowed for this call only.
        let data = Bytes::copy_from_slice(data);
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        self.serve.run(m.clone().write(m.who(req), req.pid(), fh, offset, data, kill, reply));
    }

    fn flush(&self, req: &Request, ino: INodeNo, _fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        let m = self.m();
        self.serve.run(m.clone().flush(m.who(req), req.pid(), ino, lock_owner.0, reply));
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let m = self.m();
        self.serve.run(m.clone().release(m.who(req), ino, fh, lock_owner.map(|o| o.0), reply));
    }

    fn fsync(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let m = self.m();
        self.serve.run(m.clone().fsync(m.who(req), fh, reply));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(self.mount.opendir(ino), FopenFlags::empty());
    }

    fn readdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectory) {
        let m = self.m();
        self.serve.run(m.clone().readdir(m.who(req), ino, fh, offset, reply));
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.mount.releasedir(fh);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // A metadata change acknowledged by the MDT survives a crash of any server (its
        // journal); a power loss can take back the last checkpoint interval, which an fsync
        // of a directory does not shorten (see docs/ARCHITECTURE.md, Durability).
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.serve.run(self.m().statfs(reply));
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
        let m = self.m();
        let (who, thread) = (m.who(req), req.pid());
        self.serve.run(m.clone().setxattr(who, thread, ino, name.to_owned(), value.to_vec(), flags, reply));
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let m = self.m();
        self.serve.run(m.clone().getxattr(m.who(req), req.pid(), ino, name.to_owned(), size, reply));
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let m = self.m();
        self.serve.run(m.clone().listxattr(m.who(req), ino, size, reply));
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let m = self.m();
        self.serve.run(m.clone().removexattr(m.who(req), req.pid(), ino, name.to_owned(), reply));
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // default_permissions: the kernel checks mode bits and ACLs itself.
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let m = self.m();
        self.serve.run(m.clone().create(m.creator(req, umask), parent, name.to_owned(), mode & 0o7777, flags, reply));
    }

    fn tmpfile(&self, req: &Request, parent: INodeNo, mode: u32, umask: u32, flags: i32, reply: ReplyCreate) {
        let m = self.m();
        self.serve.run(m.clone().tmpfile(m.creator(req, umask), parent, mode & 0o7777, flags, reply));
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
        let m = self.m();
        self.serve.run(m.clone().getlk(m.who(req), fid_of(ino), lock, reply));
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
        let m = self.m();
        if sleep {
            // F_SETLKW waits off the FUSE threads: a waiter must not take a worker from the
            // mount. Its wait is registered here, so that an interrupt finds it.
            let wait = m.lock_wait(req.unique().0);
            self.serve.runtime().spawn(m.clone().setlk(m.who(req), fid_of(ino), fh, lock, Some(wait), reply));
        } else {
            self.serve.run(m.clone().setlk(m.who(req), fid_of(ino), fh, lock, None, reply));
        }
    }

    fn interrupt(&self, _req: &Request, unique: RequestId) {
        self.mount.interrupt(unique.0);
    }

    fn fallocate(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let m = self.m();
        self.serve.run(m.clone().fallocate(m.who(req), fh, offset, length, mode, reply));
    }

    fn lseek(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _offset: i64, _whence: i32, reply: ReplyLseek) {
        reply.error(Errno::ENOSYS);
    }
}
