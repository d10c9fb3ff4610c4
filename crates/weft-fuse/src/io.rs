//! Data: read, write, flush (close of a descriptor) and fsync of files opened through the
//! mount. Passthrough opens never come here for reads and writes (the kernel does them on
//! the object's file).

use crate::errno::fuse_errno;
use crate::handles::{mode_without_privileges, OpenFile};
use crate::iomode::KernelIo;
use crate::mount::{evicted, reply_empty, Mount};
use crate::writeback::QueuedWrite;
use bytes::Bytes;
use fuser::{Errno, FileHandle, INodeNo, ReplyData, ReplyEmpty, ReplyWrite};
use std::sync::Arc;
use weft_client::locks::{ExtentGuard, LockHooks};
use weft_proto::layout::Layout;
use weft_proto::lock::bits;
use weft_proto::lock::LockHandle;
use weft_proto::lock::LockMode;
use weft_proto::msg::{Caller, SetAttr};
use weft_proto::{WeftError, WeftResult};

/// How a write through the mount reaches the OSTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WritePath {
    /// Queued (write-behind), answered once queued.
    Queued,
    /// Written at once, answered once on the OST: another client reads the object past the
    /// locks (passthrough), so what the write returns must be there.
    Through,
}

pub(crate) fn write_path(io: KernelIo) -> WritePath {
    match io {
        KernelIo::Uncached => WritePath::Through,
        KernelIo::Cached | KernelIo::Passthrough => WritePath::Queued,
    }
}

/// The other opens of a file on this mount take a layout one of them learned.
impl weft_client::Siblings for Mount {
    fn share(&self, file: &weft_client::OpenFile, layout: &Arc<Layout>, lock: Option<LockHandle>) {
        for other in self.files.find_all(|f| f.fid == file.fid) {
            other.update_layout(layout.clone(), lock);
        }
    }
}

impl Mount {
    pub(crate) async fn read(self: Arc<Self>, who: Caller, fh: FileHandle, offset: u64, size: u32, reply: ReplyData) {
        let Some(file) = self.files.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        if file.layout().is_none() {
            return reply.data(&[]);
        }
        if file.generation != self.client.generation() {
            return reply.error(fuse_errno("read", &evicted()));
        }
        let mirrored = file.layout().is_some_and(|l| l.mirror_ids().len() > 1);
        let result = match mirrored {
            false => self.read_from(&who, &file, offset, size, None).await,
            true => self.read_mirrored(&who, &file, offset, size).await,
        };
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(fuse_errno("read", &e)),
        }
    }

    /// A read through the open `file` from mirror `mirror` of its layout (the first in sync
    /// if that one is not), or from the file's one copy.
    async fn read_from(
        &self,
        who: &Caller,
        file: &OpenFile,
        offset: u64,
        size: u32,
        mirror: Option<u16>,
    ) -> WeftResult<Bytes> {
        // The data and its size hold while the read lock does: another client's queued
        // writes are called in first.
        let (layout, _locks) = self.locked_layout(who, file, offset, u64::from(size), LockMode::Pr, mirror).await?;
        let layout = &*layout;
        // Reads see every write made before them on this mount.
        self.writes.wait_idle(file.fid).await;
        if weft_client::open_file::read_needs_glimpse(offset, size, file.known_size()) && !self.size_still_exact(file) {
            let (size_now, _) = self.client.glimpse(who, layout).await?;
            file.raise_size(size_now);
        }
        self.client.read(who, layout, offset, size, file.known_size()).await
    }

    /// A read of a file with mirrors (FLR): from one mirror in sync, those whose targets
    /// did not fail lately first, another when one does not answer in time (see
    /// `Client::over_mirrors`), so a readable file reads on with an OST down.
    async fn read_mirrored(&self, who: &Caller, file: &OpenFile, offset: u64, size: u32) -> WeftResult<Bytes> {
        let layout = file.layout().ok_or_else(|| WeftError::io(format!("{} has no layout", file.fid)))?;
        self.client.over_mirrors(&layout, |id| self.read_from(who, file, offset, size, Some(id))).await
    }

    /// `data`: the kernel's buffer, copied once into shared bytes (the striping then slices
    /// it without copying again). `kill_privileges`: the kernel asks for the file's setuid
    /// and setgid bits to be cleared (FUSE_WRITE_KILL_SUIDGID, a write around the page cache
    /// by a process without CAP_FSETID; through the page cache the kernel clears them
    /// itself with a setattr).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn write(
        self: Arc<Self>,
        who: Caller,
        pid: u32,
        fh: FileHandle,
        offset: u64,
        data: Bytes,
        kill_privileges: bool,
        reply: ReplyWrite,
    ) {
        let Some(file) = self.files.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        if file.layout().is_none() {
            let no_layout = WeftError::io(format!("{} has no layout to write to", file.fid));
            return reply.error(fuse_errno("write", &no_layout));
        }
        if file.generation != self.client.generation() {
            return reply.error(fuse_errno("write", &evicted()));
        }
        let len = data.len();
        let written = async {
            if kill_privileges {
                self.clear_privileges(&who, &file).await?;
            }
            // The write lock travels with the queued write until it reached the OSTs.
            let (layout, locks) = self.locked_layout(&who, &file, offset, len as u64, LockMode::Pw, None).await?;
            // Near a quota limit the write goes through, so that its EDQUOT is its own.
            let path = match write_path(file.io) {
                WritePath::Queued if self.client.quota_tight(file.fid) => WritePath::Through,
                path => path,
            };
            match path {
                WritePath::Through => {
                    // After whatever an earlier mode of this inode left queued.
                    self.writes.wait_queued(file.fid).await;
                    self.client.write(&who, &layout, offset, data, &locks).await
                }
                WritePath::Queued => {
                    let write = QueuedWrite { who: who.clone(), fid: file.fid, layout, offset, data, locks };
                    self.writes.submit(self.client.clone(), pid, write).await
                }
            }
        }
        .await;
        match written {
            Ok(()) => {
                file.note_write(offset + len as u64);
                reply.written(len as u32);
            }
            Err(e) => reply.error(fuse_errno("write", &e)),
        }
    }

    /// The open's layout and the extent locks of `[offset, offset+len)` in `mode`, its
    /// layout shared with the mount's other opens of the file (`Client::locked_layout`).
    pub(crate) async fn locked_layout(
        &self,
        who: &Caller,
        file: &OpenFile,
        offset: u64,
        len: u64,
        mode: LockMode,
        mirror: Option<u16>,
    ) -> WeftResult<(Arc<Layout>, ExtentGuard)> {
        self.client.locked_layout(who, file, offset, len, mode, mirror, self).await
    }

    /// The file's layout as the MDS has it now, for every open of the file on this mount.
    pub(crate) async fn refresh_layout(&self, who: &Caller, file: &OpenFile) -> WeftResult<Arc<Layout>> {
        self.client.refresh_layout(who, file, self).await
    }

    /// After a change of `fid`'s layout made without an open's help (a truncate): every
    /// open of it on this mount takes the layout the MDS has now.
    pub(crate) async fn share_fresh_layout(&self, who: &Caller, fid: weft_proto::Fid) -> WeftResult<()> {
        if let Some(file) = self.files.find_all(|f| f.fid == fid).into_iter().next() {
            self.refresh_layout(who, &file).await?;
        }
        Ok(())
    }

    /// Clears the setuid and setgid bits of an open file before a write, as Linux does for a
    /// writer without CAP_FSETID. Looked at once per open that found the bits set at open
    /// (a chmod u+s after the open is not cleared by writes through it).
    async fn clear_privileges(&self, who: &Caller, file: &OpenFile) -> WeftResult<()> {
        if file.privileged_mode().is_none() {
            return Ok(());
        }
        let now = self.client.getattr(who, file.fid).await?;
        if let Some(mode) = mode_without_privileges(now.attr.mode) {
            // Allowed to a writer that is not the owner (the MDS's `chmod`).
            self.client.setattr(who, file.fid, SetAttr { mode: Some(mode), ..SetAttr::default() }).await?;
            // The kernel still has the old mode cached.
            drop(self.hooks.drop_inode(file.fid, bits::UPDATE));
        }
        file.privileges_cleared();
        Ok(())
    }

    /// close(2) of a descriptor: a writer learns what of its queued writes failed so far
    /// (without waiting for those on their way, see writeback.rs); the close also ends the
    /// fcntl locks its process held on the file (POSIX).
    pub(crate) async fn flush(
        self: Arc<Self>,
        who: Caller,
        pid: u32,
        ino: INodeNo,
        lock_owner: u64,
        reply: ReplyEmpty,
    ) {
        let fid = crate::mount::fid_of(ino);
        let written = self.writes.flush(fid, pid);
        self.release_advisory(&who, fid, lock_owner).await;
        reply_empty(reply, "flush", written);
    }

    pub(crate) async fn fsync(self: Arc<Self>, who: Caller, fh: FileHandle, reply: ReplyEmpty) {
        let Some(file) = self.files.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let synced = async {
            self.writes.drain(file.fid).await?;
            match self.client.current_layout(&who, &file).await? {
                Some(layout) => self.client.fsync_file(&who, Some(file.fid), &layout).await,
                None => Ok(()),
            }
        }
        .await;
        reply_empty(reply, "fsync", synced);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_uncached_writes_go_through_at_once() {
        assert_eq!(write_path(KernelIo::Uncached), WritePath::Through);
        assert_eq!(write_path(KernelIo::Cached), WritePath::Queued);
    }
}
