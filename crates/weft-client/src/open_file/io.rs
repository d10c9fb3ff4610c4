//! Reads and writes through an open file: the layout taken under the extent locks (checked
//! against the MDT lock it came with, fetched again after a migration, components given
//! their objects by the write that reaches them first), the size looked up past what the
//! open knows, and the size and blocks a writer's close tells the MDS. One copy for every
//! front end: the FUSE adapter adds its write-behind and kernel caches around it, libweft
//! calls it as it is.

use super::OpenFile;
use crate::limits::LAYOUT_REFETCHES_MAX;
use crate::locks::ExtentGuard;
use crate::{Client, Glimpse};
use bytes::Bytes;
use std::sync::Arc;
use weft_proto::layout::Layout;
use weft_proto::lock::{LockHandle, LockMode};
use weft_proto::msg::Caller;
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The other opens of a file in the same front end: a change of layout made through one
/// open (a component instantiated, a refetch after a migration) reaches them all, since a
/// change this client makes calls back none of its own locks and they would not know.
pub trait Siblings: Sync {
    /// Gives `layout` (with the MDT lock it came with) to every other open of `file`'s inode.
    fn share(&self, file: &OpenFile, layout: &Arc<Layout>, lock: Option<LockHandle>);
}

/// A front end whose opens share nothing (each open is alone, or all are one `OpenFile`).
impl Siblings for () {
    fn share(&self, _: &OpenFile, _: &Arc<Layout>, _: Option<LockHandle>) {}
}

fn no_layout(file: &OpenFile) -> WeftError {
    WeftError::io(format!("{} has no layout", file.fid))
}

/// Whether a read of `[offset, offset+size)` must first ask the objects for the file's
/// size: it reaches past the size the open knows, and another client may have written
/// more since. Inside it, every byte is answered (zeros past the objects).
pub fn read_needs_glimpse(offset: u64, size: u32, known_size: u64) -> bool {
    offset.saturating_add(u64::from(size)) > known_size
}

impl Client {
    /// A newer layout of `file`'s inode: the open and its siblings take it.
    fn take_layout(
        &self,
        file: &OpenFile,
        layout: Layout,
        lock: Option<LockHandle>,
        siblings: &dyn Siblings,
    ) -> Arc<Layout> {
        let shared = file.update_layout(Arc::new(layout), lock);
        siblings.share(file, &shared, lock);
        shared
    }

    /// The file's layout as the MDS has it now, with the lock it came with, for the open
    /// and its siblings.
    pub async fn refresh_layout(
        &self,
        who: &Caller,
        file: &OpenFile,
        siblings: &dyn Siblings,
    ) -> WeftResult<Arc<Layout>> {
        let inode = self.getattr(who, file.fid).await?;
        let layout = inode.layout.ok_or_else(|| WeftError::io(format!("{} lost its layout", file.fid)))?;
        Ok(self.take_layout(file, layout, inode.lock.as_ref().map(|l| l.handle), siblings))
    }

    /// Whether the MDT lock `file`'s layout came with still holds its LAYOUT bit (so the
    /// layout is the file's).
    fn layout_still_held(&self, file: &OpenFile) -> bool {
        file.layout_lock().is_some_and(|h| self.lock_cache().still_holds_layout(file.fid, h))
    }

    /// The open's layout for what is done without extent locks (fsync, the size at close, a
    /// truncate): fetched again when the MDT lock it came with is gone (it may have migrated).
    pub async fn current_layout(&self, who: &Caller, file: &OpenFile) -> WeftResult<Option<Arc<Layout>>> {
        let Some(layout) = file.layout() else { return Ok(None) };
        if self.layout_still_held(file) {
            return Ok(Some(layout));
        }
        self.refresh_layout(who, file, &()).await.map(Some)
    }

    /// The size, blocks and data version the objects of the open's layout hold (a writer's
    /// close tells the MDS): read again when the layout changed meanwhile (a migration
    /// destroys the objects it read), as a read or write takes its layout again.
    pub async fn glimpse_current(&self, who: &Caller, file: &OpenFile) -> WeftResult<Option<Glimpse>> {
        for _ in 0..=LAYOUT_REFETCHES_MAX {
            let Some(layout) = self.current_layout(who, file).await? else { return Ok(None) };
            let glimpsed = self.glimpse_versioned(who, &layout).await?;
            if self.layout_still_held(file) {
                return Ok(Some(glimpsed));
            }
        }
        Err(WeftError::new(ErrorCode::Busy, format!("the layout of {} kept changing", file.fid)))
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
    #[allow(clippy::too_many_arguments)]
    pub async fn locked_layout(
        &self,
        who: &Caller,
        file: &OpenFile,
        offset: u64,
        len: u64,
        mode: LockMode,
        mirror: Option<u16>,
        siblings: &dyn Siblings,
    ) -> WeftResult<(Arc<Layout>, ExtentGuard)> {
        let mut layout = file.layout().ok_or_else(|| no_layout(file))?;
        // Components this open knew without objects may have them now (another client
        // wrote there): a read that reaches one, or past the size it knows, looks again.
        let reads_past = |l: &Layout| {
            !l.fully_instantiated() && (l.needs_instantiation(offset, len) || offset + len > file.known_size())
        };
        if mode == LockMode::Pr && reads_past(&layout) {
            layout = self.refresh_layout(who, file, siblings).await?;
        }
        for _ in 0..=LAYOUT_REFETCHES_MAX {
            if mode == LockMode::Pw {
                layout.check_writable(offset, len)?;
                // A component the write reaches first gets its objects now.
                let open = Some(file.mds_handle);
                if let Some(inode) = self.instantiate(who, file.fid, &layout, offset, len, open).await? {
                    if let Some(new) = inode.layout {
                        layout = self.take_layout(file, new, inode.lock.as_ref().map(|l| l.handle), siblings);
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
            let locks = self.extent_lock(who, file.fid, &view, offset, len, mode).await?;
            if self.layout_still_held(file) {
                return Ok((view, locks));
            }
            // The lock went (a change, or only the lock cache's bound): the layout the MDS
            // has now. The same generation is the same layout, which the extent locks held
            // keep the file's (a migration needs them), so they serve as they are.
            let fresh = self.refresh_layout(who, file, siblings).await?;
            if fresh.generation == layout.generation {
                return Ok((view, locks));
            }
            drop(locks);
            layout = fresh;
        }
        Err(WeftError::new(ErrorCode::Busy, format!("the layout of {} kept changing under a read or write", file.fid)))
    }

    /// A read through `file` of `[offset, offset+size)`, under read locks, from one mirror
    /// in sync when the file has mirrors (another when one does not answer in time), with
    /// the size looked up when the read reaches past what the open knows. For front ends
    /// with no write-behind of their own (libweft); the FUSE adapter waits for its queued
    /// writes between the locks and the read, and so composes the same steps itself.
    pub async fn read_open(&self, who: &Caller, file: &OpenFile, offset: u64, size: u32) -> WeftResult<Bytes> {
        let layout = file.layout().ok_or_else(|| no_layout(file))?;
        let once = |mirror: Option<u16>| async move {
            let (layout, _locks) =
                self.locked_layout(who, file, offset, u64::from(size), LockMode::Pr, mirror, &()).await?;
            if read_needs_glimpse(offset, size, file.known_size()) {
                let (size_now, _) = self.glimpse(who, &layout).await?;
                file.raise_size(size_now);
            }
            self.read(who, &layout, offset, size, file.known_size()).await
        };
        match layout.mirror_ids().len() > 1 {
            false => once(None).await,
            true => self.over_mirrors(&layout, |id| once(Some(id))).await,
        }
    }

    /// A write through `file` of `data` at `offset`, answered once the OSTs have it (no
    /// write-behind: libweft's writes return when they are on the servers, as with
    /// O_DIRECT, and the page cache is the application's).
    pub async fn write_open(&self, who: &Caller, file: &OpenFile, offset: u64, data: Bytes) -> WeftResult<()> {
        let end = offset + data.len() as u64;
        let (layout, locks) = self.locked_layout(who, file, offset, data.len() as u64, LockMode::Pw, None, &()).await?;
        self.write(who, &layout, offset, data, &locks).await?;
        file.note_write(end);
        Ok(())
    }

    /// The close of `file`: a writer tells the MDS the size and blocks its objects hold.
    pub async fn close_open(&self, who: &Caller, file: &OpenFile) -> WeftResult<()> {
        let written = match file.wrote() {
            true => self.glimpse_current(who, file).await?,
            false => None,
        };
        self.close(who, file.fid, file.mds_handle, written).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::Fid;

    #[test]
    fn a_read_asks_the_objects_only_past_the_size_it_knows() {
        assert!(!read_needs_glimpse(0, 4096, 4096));
        assert!(read_needs_glimpse(0, 4097, 4096));
        assert!(read_needs_glimpse(4096, 1, 4096));
        assert!(!read_needs_glimpse(100, 0, 100));
        assert!(read_needs_glimpse(u64::MAX, 1, u64::MAX - 1), "no overflow at the end of the range");
    }

    #[test]
    fn open_file_size_grows_with_writes_and_follows_truncates() {
        let f = OpenFile::new(Fid::new(1, 1, 0), 1, None, 100);
        assert!(!f.wrote());
        f.note_write(50);
        assert!(f.wrote());
        assert_eq!(f.known_size(), 100, "a write inside the file does not shrink it");
        f.note_write(4096);
        assert_eq!(f.known_size(), 4096);
        f.raise_size(100);
        assert_eq!(f.known_size(), 4096, "a glimpse never lowers the size");
        f.raise_size(5000);
        assert_eq!(f.known_size(), 5000);
        f.set_size(10);
        assert_eq!(f.known_size(), 10);
    }
}
