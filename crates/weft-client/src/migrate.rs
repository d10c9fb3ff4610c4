//! Migration (Lustre's `lfs migrate`): a file's data rewritten into a new layout while the
//! file stays in use, then the layouts swapped on the MDT.
//!
//! The copy runs under a write lock on every object of the old layout: other clients'
//! cached pages and queued writes reach the objects first, and their next reads and writes
//! wait for the lock. The swap calls back the MDT locks their opens' layouts came with,
//! so once the lock is let go they find their layout gone and fetch the new one (see
//! weft-fuse's `locked_layout`). A write into a component that had no objects takes no
//! object lock; it instantiates the component, which changes the layout's generation, and
//! the swap, which names the generation the copy started from, is refused: the migration
//! starts over. So a writer either waits for the migration or makes it start again, and
//! no byte written before the swap is left behind in the old objects.

use crate::limits::{MIGRATE_ATTEMPTS_MAX, MIGRATE_CHUNK_BYTES, MIGRATE_RETRY_MS};
use crate::Client;
use weft_proto::msg::{mdt, Caller, InodeInfo, OpenIo, OPEN_READ};
use weft_proto::{ErrorCode, Fid, Layout, StripeSpec, WeftError, WeftResult};

/// How one attempt ended when it did not migrate the file.
enum Attempt {
    /// The layout changed while the data was copied: copy again.
    Again(WeftError),
    Failed(WeftError),
}

impl From<WeftError> for Attempt {
    fn from(e: WeftError) -> Self {
        Attempt::Failed(e)
    }
}

impl Client {
    /// A volatile file: no name, open for reading and writing, its layout `spec` over the
    /// default of `like`'s directory; it is destroyed at its last close.
    pub async fn create_volatile(&self, who: &Caller, like: Fid, spec: StripeSpec) -> WeftResult<mdt::Opened> {
        let flags = weft_proto::msg::OPEN_READ | weft_proto::msg::OPEN_WRITE;
        self.mdt(who, mdt::CreateVolatile { like, spec }).await.inspect(|o| self.note_open(o, flags))
    }

    /// Exchanges the layouts of `fid` and `with` if `fid`'s is still of `generation`.
    pub async fn swap_layouts(&self, who: &Caller, fid: Fid, with: Fid, generation: u32) -> WeftResult<InodeInfo> {
        self.mdt(who, mdt::SwapLayouts { fid, with, generation }).await
    }

    /// Rewrites the data of `fid` into a new layout made from `spec` (over its directory's
    /// default) and makes that the file's layout; the old objects are destroyed. Starts
    /// over when the file's layout changed during the copy, up to MIGRATE_ATTEMPTS_MAX
    /// times. Answers the new layout.
    pub async fn migrate(&self, who: &Caller, fid: Fid, spec: &StripeSpec) -> WeftResult<Layout> {
        let mut last = None;
        for attempt in 0..MIGRATE_ATTEMPTS_MAX {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(MIGRATE_RETRY_MS)).await;
            }
            match self.migrate_once(who, fid, spec).await {
                Ok(layout) => return Ok(layout),
                Err(Attempt::Failed(e)) => return Err(e),
                Err(Attempt::Again(e)) => {
                    tracing::debug!("migration of {fid} starts over: {e}");
                    last = Some(e);
                }
            }
        }
        let why = last.map_or(String::new(), |e| format!(" (last: {})", e.message));
        Err(WeftError::new(
            ErrorCode::Busy,
            format!("{fid} kept changing while it was copied: {MIGRATE_ATTEMPTS_MAX} attempts{why}"),
        ))
    }

    async fn migrate_once(&self, who: &Caller, fid: Fid, spec: &StripeSpec) -> Result<Layout, Attempt> {
        // An open for reading: while it is there no other client starts writing the file
        // past the locks (passthrough), and its answer says whether one writes now.
        let opened = self.open(who, fid, OPEN_READ).await?;
        let result = async {
            if opened.io == OpenIo::Uncached {
                return Err(Attempt::Failed(WeftError::new(
                    ErrorCode::Busy,
                    format!("{fid} is being written through passthrough (past the locks): migrate it once closed"),
                )));
            }
            let old = opened.inode.layout.clone().ok_or_else(|| WeftError::invalid(format!("{fid} has no layout")))?;
            old.check_usable()?;
            // Every mirror's objects: a read of any of them waits too.
            let mut old_locks = Vec::new();
            for id in old.mirror_ids() {
                old_locks.push(self.whole_file_lock(who, fid, &old.mirror(id)).await?);
            }
            let (size, _) = self.glimpse(who, &old).await?;
            let volatile = self.create_volatile(who, fid, spec.clone()).await?;
            let vfid = volatile.inode.attr.fid;
            let copied = async {
                let mut new =
                    volatile.inode.layout.clone().ok_or_else(|| WeftError::io("a volatile file without a layout"))?;
                let open = Some(volatile.handle);
                if let Some(l) = self.instantiate(who, vfid, &new, 0, size, open).await?.and_then(|i| i.layout) {
                    new = l;
                }
                self.copy_data(who, (&old, size), (vfid, &new), open).await?;
                self.fsync(who, &new).await?;
                match self.swap_layouts(who, fid, vfid, old.generation).await {
                    Ok(inode) => Ok(inode.layout.unwrap_or(new)),
                    Err(e) if e.code == ErrorCode::Busy => Err(Attempt::Again(e)),
                    Err(e) => Err(Attempt::Failed(e)),
                }
            }
            .await;
            // The volatile file goes now, with the old objects after a swap, or with the
            // copy after a failure.
            if let Err(e) = self.close(who, vfid, volatile.handle, None).await {
                tracing::warn!("migration of {fid}: closing its volatile file {vfid}: {e}");
            }
            copied
        }
        .await;
        if let Err(e) = self.close(who, fid, opened.handle, None).await {
            tracing::warn!("migration of {fid}: close: {e}");
        }
        result
    }

    /// Copies the `size` bytes of `from` into the objects of `to` (written under `locks`), in
    /// MIGRATE_CHUNK_BYTES pieces; pieces that read as zeros are not written (holes stay
    /// holes). A migration's copy and a mirror's resync.
    pub(crate) async fn copy_bytes(
        &self,
        who: &Caller,
        (from, size): (&Layout, u64),
        to: &Layout,
        locks: &crate::locks::ExtentGuard,
    ) -> WeftResult<()> {
        let mut offset = 0u64;
        while offset < size {
            let len = (size - offset).min(MIGRATE_CHUNK_BYTES);
            let data = self.read(who, from, offset, len as u32, size).await?;
            if data.iter().any(|b| *b != 0) {
                self.write(who, to, offset, data, locks).await?;
            }
            offset += len;
        }
        Ok(())
    }

    /// Copies `size` bytes of `from` into the objects of the volatile file `to` (open as
    /// `open`), leaving holes where `from` reads as zeros, and gives the new objects the
    /// file's size.
    async fn copy_data(
        &self,
        who: &Caller,
        (from, size): (&Layout, u64),
        (vfid, to): (Fid, &Layout),
        open: Option<u64>,
    ) -> WeftResult<()> {
        let locks = self.whole_file_lock(who, vfid, to).await?;
        self.copy_bytes(who, (from, size), to, &locks).await?;
        drop(locks);
        // The objects end where the file does (a hole at the end was not written).
        self.truncate(who, vfid, to, size, open).await.map(drop)
    }
}
