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
use weft_client::locks::LockHooks;
use weft_proto::lock::bits;
use weft_proto::lock::LockMode;
use weft_proto::msg::{Caller, SetAttr};
use weft_proto::{WeftError, WeftResult};

/// Whether a read of `[offset, offset+size)` must first ask the objects for the file's
/// size: it reaches past the size this handle knows, and another client may have written
/// more since. Inside it, every byte is answered (zeros past the objects), so the kernel
/// never sees a short read inside the file and shrinks its idea of the size.
pub(crate) fn read_needs_glimpse(offset: u64, size: u32, known_size: u64) -> bool {
    offset.saturating_add(u64::from(size)) > known_size
}

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

impl Mount {
    pub(crate) async fn read(self: Arc<Self>, who: Caller, fh: FileHandle, offset: u64, size: u32, reply: ReplyData) {
        let Some(file) = self.files.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let Some(mut layout) = file.layout() else {
            return reply.data(&[]);
        };
        if file.generation != self.client.generation() {
            return reply.error(fuse_errno("read", &evicted()));
        }
        let result = async {
            // Components this open knew without objects may have them now (another client
            // wrote there): a read that reaches one, or past the size it knows, looks again.
            if !layout.fully_instantiated()
                && (layout.needs_instantiation(offset, u64::from(size))
                    || read_needs_glimpse(offset, size, file.known_size()))
            {
                if let Some(fresh) = self.client.getattr(&who, file.fid).await?.layout {
                    layout = file.update_layout(fresh);
                }
            }
            let layout = &*layout;
            // The data and its size hold while the read lock does: another client's queued
            // writes are called in first.
            let _locks = self.client.extent_lock(&who, file.fid, layout, offset, u64::from(size), LockMode::Pr).await?;
            // Reads see every write made before them on this mount.
            self.writes.wait_idle(file.fid).await;
            if read_needs_glimpse(offset, size, file.known_size()) && !self.size_still_exact(&file) {
                let (size_now, _) = self.client.glimpse(&who, layout).await?;
                file.raise_size(size_now);
            }
            self.client.read(&who, layout, offset, size, file.known_size()).await
        }
        .await;
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(fuse_errno("read", &e)),
        }
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
        let Some(mut layout) = file.layout() else {
            let no_layout = WeftError::io(format!("{} has no layout to write to", file.fid));
            return reply.error(fuse_errno("write", &no_layout));
        };
        if file.generation != self.client.generation() {
            return reply.error(fuse_errno("write", &evicted()));
        }
        let len = data.len();
        let written = async {
            if kill_privileges {
                self.clear_privileges(&who, &file).await?;
            }
            layout.check_writable(offset, len as u64)?;
            // A component the write reaches first gets its objects now.
            if let Some(new) = self.client.instantiate(&who, file.fid, &layout, offset, len as u64).await? {
                layout = file.update_layout(new);
            }
            // The write lock travels with the queued write until it reached the OSTs.
            let locks = self.client.extent_lock(&who, file.fid, &layout, offset, len as u64, LockMode::Pw).await?;
            match write_path(file.io) {
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
            match file.layout() {
                Some(layout) => self.client.fsync(&who, &layout).await,
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
    fn a_read_asks_the_objects_only_past_the_size_it_knows() {
        assert!(!read_needs_glimpse(0, 4096, 4096));
        assert!(read_needs_glimpse(0, 4097, 4096));
        assert!(read_needs_glimpse(4096, 1, 4096));
        assert!(!read_needs_glimpse(100, 0, 100));
        assert!(read_needs_glimpse(u64::MAX, 1, u64::MAX - 1), "no overflow at the end of the range");
    }

    #[test]
    fn only_uncached_writes_go_through_at_once() {
        assert_eq!(write_path(KernelIo::Uncached), WritePath::Through);
        assert_eq!(write_path(KernelIo::Cached), WritePath::Queued);
    }
}
