//! Mirrors (Lustre's FLR) as a tool runs them: resync copies the data of the mirror in sync
//! into the stale ones, extend adds a mirror and resyncs it, verify compares the mirrors'
//! bytes, split removes one. Reads and writes of mirrored files are in io.rs: reads from a
//! mirror in sync (another when one does not answer), writes to one mirror after the MDS
//! marked the others stale.
//!
//! A resync holds a write lock on every object of the mirror in sync while it copies:
//! writers wait for it, and their caches reach the objects first. A write into a component
//! without objects takes no object lock; it changes the layout's generation instead, and
//! the MDS refuses the resync's end, which names the generation it copied under: the resync
//! starts over.

use crate::limits::{MIGRATE_ATTEMPTS_MAX, MIGRATE_CHUNK_BYTES, MIGRATE_RETRY_MS};
use crate::Client;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use weft_proto::layout::Layout;
use weft_proto::msg::mdt::MirrorOp;
use weft_proto::msg::{mdt, ost, Caller, InodeInfo, OpenIo, OPEN_READ};
use weft_proto::{ErrorCode, Fid, StripeSpec, WeftError, WeftResult};

/// What `mirror verify` found of one mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorCheck {
    pub mirror_id: u16,
    /// Every component in sync (none marked stale).
    pub in_sync: bool,
    /// The first byte where its data differs from the mirror writes go to; None: the same.
    pub differs_at: Option<u64>,
}

impl Client {
    async fn mirror_op(&self, who: &Caller, fid: Fid, op: MirrorOp) -> WeftResult<InodeInfo> {
        self.mdt(who, mdt::Mirror { fid, op }).await
    }

    /// Adds a mirror made from `spec` and copies the data into it.
    pub async fn mirror_extend(&self, who: &Caller, fid: Fid, spec: StripeSpec) -> WeftResult<Layout> {
        self.mirror_op(who, fid, MirrorOp::Extend { spec }).await?;
        self.mirror_resync(who, fid).await
    }

    /// Makes the file's mirrors written synchronously (`on`) or as FLR's (one mirror per
    /// write, the others stale).
    pub async fn mirror_set_sync(&self, who: &Caller, fid: Fid, on: bool) -> WeftResult<Layout> {
        let inode = self.mirror_op(who, fid, MirrorOp::Sync { on }).await?;
        inode.layout.ok_or_else(|| WeftError::io(format!("{fid} lost its layout")))
    }

    /// Removes mirror `mirror_id` (its objects destroyed).
    pub async fn mirror_split(&self, who: &Caller, fid: Fid, mirror_id: u16) -> WeftResult<Layout> {
        let inode = self.mirror_op(who, fid, MirrorOp::Split { mirror_id }).await?;
        inode.layout.ok_or_else(|| WeftError::io(format!("{fid} lost its layout")))
    }

    /// Copies the data of the mirror in sync into every stale mirror and marks them in sync;
    /// starts over when the layout changed meanwhile. Answers the layout now.
    pub async fn mirror_resync(&self, who: &Caller, fid: Fid) -> WeftResult<Layout> {
        let mut last = None;
        for attempt in 0..MIGRATE_ATTEMPTS_MAX {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(MIGRATE_RETRY_MS)).await;
            }
            match self.resync_once(who, fid).await {
                Err(e) if e.code == ErrorCode::Busy => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| WeftError::new(ErrorCode::Busy, format!("{fid} kept changing"))))
    }

    async fn resync_once(&self, who: &Caller, fid: Fid) -> WeftResult<Layout> {
        let opened = self.open(who, fid, OPEN_READ).await?;
        let result = async {
            if opened.io == OpenIo::Uncached {
                return Err(WeftError::new(
                    ErrorCode::NotSupported,
                    format!("{fid} is being written through passthrough (past the locks): resync it once closed"),
                ));
            }
            let first =
                opened.inode.layout.clone().ok_or_else(|| WeftError::invalid(format!("{fid} has no layout")))?;
            if !first.is_mirrored() {
                return Err(WeftError::invalid(format!("{fid} has no mirrors")));
            }
            if first.mirror_ids().iter().all(|m| first.mirror_in_sync(*m)) {
                return Ok(first);
            }
            // Every mirror gets objects for the data first (the MDS marks none stale for
            // this); then, under the locks, all is read from that layout, whose generation
            // the end names: any change after it (a writer's new component, another mirror)
            // makes the MDS refuse the end, and the resync starts over.
            let (guess, _) = self.glimpse(who, &first).await?;
            let intent = mdt::LayoutIntent { fid, end: guess.max(1), resync: true, open_handle: None };
            let layout = self.mdt(who, intent).await?.layout.ok_or_else(|| WeftError::io("a layout went"))?;
            let _writers_wait = self.whole_file_lock(who, fid, &layout).await?;
            let (size, _) = self.glimpse(who, &layout).await?;
            let stale: Vec<u16> = layout.mirror_ids().into_iter().filter(|m| !layout.mirror_in_sync(*m)).collect();
            if stale.iter().any(|m| layout.mirror(*m).needs_instantiation(0, size.max(1))) {
                return Err(WeftError::new(ErrorCode::Busy, format!("{fid} grew while its resync began")));
            }
            let source = layout.mirror(layout.write_mirror());
            for id in &stale {
                let target = layout.mirror(*id);
                let locks = self.whole_file_lock(who, fid, &target).await?;
                // What the stale mirror holds goes first: holes in the source stay holes.
                self.punch_all(who, &target, 0, &locks).await?;
                self.copy_bytes(who, (&source, size), &target, &locks).await?;
                self.punch_all(who, &target, size, &locks).await?;
                self.fsync(who, &target).await?;
            }
            let inode = self.mirror_op(who, fid, MirrorOp::Resynced { generation: layout.generation }).await?;
            inode.layout.ok_or_else(|| WeftError::io(format!("{fid} lost its layout")))
        }
        .await;
        if let Err(e) = self.close(who, fid, opened.handle, None).await {
            tracing::warn!("resync of {fid}: close: {e}");
        }
        result
    }

    /// Cuts every object of `mirror` to its share of a file of `size` bytes.
    async fn punch_all(
        &self,
        who: &Caller,
        mirror: &Layout,
        size: u64,
        locks: &crate::locks::ExtentGuard,
    ) -> WeftResult<()> {
        for comp in mirror.data_components() {
            for (stripe, object) in comp.objects.iter().enumerate() {
                let op = ost::Punch { fid: object.fid, size: comp.object_size_in_file(size, stripe) };
                self.ost_under(who, locks, object.ost, op, Bytes::new()).await?;
            }
        }
        Ok(())
    }

    /// Compares every mirror's bytes with those of the mirror writes go to, under a read
    /// lock on the latter (no write meanwhile).
    pub async fn mirror_verify(&self, who: &Caller, fid: Fid) -> WeftResult<Vec<MirrorCheck>> {
        let inode = self.getattr(who, fid).await?;
        let layout = inode.layout.ok_or_else(|| WeftError::invalid(format!("{fid} has no layout")))?;
        if !layout.is_mirrored() {
            return Err(WeftError::invalid(format!("{fid} has no mirrors")));
        }
        let primary = layout.write_mirror();
        let source = layout.mirror(primary);
        let _no_writes = self.whole_file_read_lock(who, fid, &source).await?;
        let (size, _) = self.glimpse(who, &source).await?;
        let mut out = Vec::new();
        for id in layout.mirror_ids() {
            let mirror = layout.mirror(id);
            let mut differs_at = None;
            if id != primary {
                let mut offset = 0u64;
                while offset < size && differs_at.is_none() {
                    let len = (size - offset).min(MIGRATE_CHUNK_BYTES);
                    let want = self.read(who, &source, offset, len as u32, size).await?;
                    // A mirror whose objects are missing or unreachable differs from its start.
                    let got = match mirror.fully_instantiated() {
                        true => self.read(who, &mirror, offset, len as u32, size).await.unwrap_or_default(),
                        false => Bytes::new(),
                    };
                    if let Some(k) = (0..want.len()).find(|k| got.get(*k) != Some(&want[*k])) {
                        differs_at = Some(offset + k as u64);
                    }
                    offset += len;
                }
                // Bytes past the size in the mirror's objects are not the file's.
                if differs_at.is_none() && self.glimpse(who, &mirror).await.map(|(s, _)| s).unwrap_or(size) > size {
                    differs_at = Some(size);
                }
            }
            out.push(MirrorCheck { mirror_id: id, in_sync: layout.mirror_in_sync(id), differs_at });
        }
        Ok(out)
    }
}
