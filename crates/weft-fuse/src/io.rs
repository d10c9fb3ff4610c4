//! Data: read, write, flush (close of a descriptor) and fsync of files opened through the
//! mount. Passthrough opens never come here for reads and writes (the kernel does them on
//! the object's file).

use crate::errno::fuse_errno;
use crate::handles::{mode_without_privileges, OpenFile};
use crate::iomode::KernelIo;
use crate::limits::LAYOUT_REFETCHES_MAX;
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
use weft_proto::ErrorCode;
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

async fn refetch_layout(client: &weft_client::Client, who: &Caller, file: &OpenFile) -> WeftResult<Arc<Layout>> {
    let inode = client.getattr(who, file.fid).await?;
    let layout = inode.layout.ok_or_else(|| WeftError::io(format!("{} lost its layout", file.fid)))?;
    Ok(file.update_layout(Arc::new(layout), inode.lock.as_ref().map(|l| l.handle)))
}

/// The open's layout for what is done without extent locks (fsync, the size at close, a
/// truncate): fetched again when the MDT lock it came with is gone (it may have migrated).
pub(crate) async fn current_layout(
    client: &weft_client::Client,
    who: &Caller,
    file: &OpenFile,
) -> WeftResult<Option<Arc<Layout>>> {
    let Some(layout) = file.layout() else { return Ok(None) };
    if file.layout_lock().is_some_and(|h| client.lock_cache().still_holds_layout(file.fid, h)) {
        return Ok(Some(layout));
    }
    refetch_layout(client, who, file).await.map(Some)
}

/// The size, blocks and data version the objects of the open's layout hold (a writer's close
/// tells the MDS): read again when the layout changed meanwhile (a migration destroys the
/// objects it read), as a read or write takes its layout again.
pub(crate) async fn glimpse_current(
    client: &weft_client::Client,
    who: &Caller,
    file: &OpenFile,
) -> WeftResult<Option<weft_client::Glimpse>> {
    for _ in 0..=LAYOUT_REFETCHES_MAX {
        let Some(layout) = current_layout(client, who, file).await? else { return Ok(None) };
        let glimpsed = client.glimpse_versioned(who, &layout).await?;
        if file.layout_lock().is_some_and(|h| client.lock_cache().still_holds_layout(file.fid, h)) {
            return Ok(Some(glimpsed));
        }
    }
    Err(WeftError::new(ErrorCode::Busy, format!("the layout of {} kept changing", file.fid)))
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
        if read_needs_glimpse(offset, size, file.known_size()) && !self.size_still_exact(file) {
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

    /// The open's layout and the extent locks of `[offset, offset+len)` in `mode` (PW: a
    /// write, which gives the components it reaches their objects first). The layout is
    /// checked under the locks: the MDT lock it came with must still hold its LAYOUT bit,
    /// or it is fetched again. A migration swaps a layout only while it holds every object
    /// of the old one locked, and the swap calls that MDT lock back first: so a read or
    /// write that holds its locks and finds the lock there has the file's layout, and one
    /// that waited for the migration's locks finds it gone and looks again.
    ///
    /// With `mirror` (a read of a file with mirrors), the layout answered is that mirror's
    /// alone, or the first in sync's if it is no longer.
    pub(crate) async fn locked_layout(
        &self,
        who: &Caller,
        file: &OpenFile,
        offset: u64,
        len: u64,
        mode: LockMode,
        mirror: Option<u16>,
    ) -> WeftResult<(Arc<Layout>, ExtentGuard)> {
        let mut layout = file.layout().ok_or_else(|| WeftError::io(format!("{} has no layout", file.fid)))?;
        // Components this open knew without objects may have them now (another client
        // wrote there): a read that reaches one, or past the size it knows, looks again.
        let reads_past = |l: &Layout| {
            !l.fully_instantiated() && (l.needs_instantiation(offset, len) || offset + len > file.known_size())
        };
        if mode == LockMode::Pr && reads_past(&layout) {
            layout = self.refresh_layout(who, file).await?;
        }
        for _ in 0..=LAYOUT_REFETCHES_MAX {
            if mode == LockMode::Pw {
                layout.check_writable(offset, len)?;
                // A component the write reaches first gets its objects now.
                let open = Some(file.mds_handle);
                if let Some(inode) = self.client.instantiate(who, file.fid, &layout, offset, len, open).await? {
                    if let Some(new) = inode.layout {
                        layout = self.share_layout(file, new, inode.lock.as_ref().map(|l| l.handle));
                        // Its stripes as granted (fewer than planned, maybe) bound the file.
                        layout.check_writable(offset, len)?;
                    }
                }
            }
            let view = match mirror {
                Some(id) if layout.is_mirrored() => {
                    let id = if layout.mirror_in_sync(id) { id } else { layout.write_mirror() };
                    Arc::new(layout.mirror(id))
                }
                _ => layout.clone(),
            };
            let locks = self.client.extent_lock(who, file.fid, &view, offset, len, mode).await?;
            if file.layout_lock().is_some_and(|h| self.client.lock_cache().still_holds_layout(file.fid, h)) {
                return Ok((view, locks));
            }
            // The lock went (a change, or only the lock cache's bound): the layout the MDS
            // has now. The same generation is the same layout, which the extent locks held
            // keep the file's (a migration needs them), so they serve as they are.
            let fresh = self.refresh_layout(who, file).await?;
            if fresh.generation == layout.generation {
                return Ok((view, locks));
            }
            drop(locks);
            layout = fresh;
        }
        Err(WeftError::new(ErrorCode::Busy, format!("the layout of {} kept changing under a read or write", file.fid)))
    }

    /// The file's layout as the MDS has it now, with the lock it came with, for every open
    /// of the file on this mount.
    pub(crate) async fn refresh_layout(&self, who: &Caller, file: &OpenFile) -> WeftResult<Arc<Layout>> {
        let inode = self.client.getattr(who, file.fid).await?;
        let layout = inode.layout.ok_or_else(|| WeftError::io(format!("{} lost its layout", file.fid)))?;
        Ok(self.share_layout(file, layout, inode.lock.as_ref().map(|l| l.handle)))
    }

    /// A newer layout of `file`'s inode: every open of it on this mount takes it (a change
    /// made by this mount calls back none of its own locks, so the others would not know).
    pub(crate) fn share_layout(&self, file: &OpenFile, layout: Layout, lock: Option<LockHandle>) -> Arc<Layout> {
        let shared = file.update_layout(Arc::new(layout), lock);
        for other in self.files.find_all(|f| f.fid == file.fid) {
            other.update_layout(shared.clone(), lock);
        }
        shared
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
            match current_layout(&self.client, &who, &file).await? {
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
