//! Striped data I/O: every call plans its object requests with the pure functions of
//! [`crate::striping`] and sends them in parallel, at most
//! [`crate::limits::OBJECT_REQUESTS_IN_FLIGHT_MAX`] at a time.

use crate::limits::{LAYOUT_ROUNDS_MAX, MIRROR_TRY_MS, OBJECT_REQUESTS_IN_FLIGHT_MAX, QUOTA_ACQUIRES_MAX};
use crate::locks::ExtentGuard;
use crate::striping::{gather, piece_is_whole_range, plan_pieces, scatter, ObjectPiece};
use crate::Client;
use bytes::{Bytes, BytesMut};
use futures::stream::{self, StreamExt, TryStreamExt};
use std::future::Future;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;
use weft_proto::layout::{Layout, LayoutComponent, Pattern, StripeObject};
use weft_proto::limits::{FILE_SIZE_MAX_BYTES, RPC_BULK_BYTES_MAX};
use weft_proto::msg::{mdt, ost, Attr, Caller, InodeInfo, SetAttr, TargetKind};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// What a file's objects hold, read in one pass: the file's size and blocks, its data
/// version, and the latest change to any of them (the file's mtime when later than the
/// MDS's, as Lustre's). A writer's close tells the MDS all of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Glimpse {
    pub size: u64,
    pub blocks: u64,
    pub data_version: u64,
    /// Nanoseconds since the epoch; 0: no object was ever written.
    pub mtime_ns: u64,
}

/// A file's size and 512-byte blocks from its objects' attributes (`attrs`: every object of
/// every instantiated component, in layout order): the end of the last byte any component
/// holds.
fn size_and_blocks(layout: &Layout, attrs: &[ost::ObjectAttr]) -> (u64, u64) {
    let mut size = 0;
    let mut rest = attrs;
    for comp in layout.data_components() {
        let (mine, after) = rest.split_at(comp.objects.len().min(rest.len()));
        let sizes: Vec<u64> = mine.iter().map(|a| a.size).collect();
        size = size.max(comp.file_size_from_objects(&sizes));
        rest = after;
    }
    (size, attrs.iter().map(|a| a.blocks).sum())
}

/// The object pieces of `[offset, offset+len)`, each with the index of its component, in
/// file order; the parts in components without objects (holes) have none. (Indices, not
/// references: futures that hold borrowed tuples trip the compiler's Send inference.)
pub(crate) fn plan_layout(layout: &Layout, offset: u64, len: u64) -> Vec<(usize, ObjectPiece)> {
    let mut out = Vec::new();
    for seg in layout.segments(offset, len) {
        let k = layout.components.iter().position(|c| std::ptr::eq(c, seg.comp)).expect("a segment of this layout");
        for piece in plan_pieces(seg.comp, seg.offset, seg.len, RPC_BULK_BYTES_MAX as u64) {
            out.push((k, piece));
        }
    }
    out
}

/// Runs `futures` with a bound on how many are in flight; results in the input order.
pub(crate) async fn bounded<T, F>(futures: impl IntoIterator<Item = F>) -> WeftResult<Vec<T>>
where
    F: Future<Output = WeftResult<T>>,
{
    stream::iter(futures).buffered(OBJECT_REQUESTS_IN_FLIGHT_MAX).try_collect().await
}

impl Client {
    /// The layout with objects for every component that `[offset, offset+len)` reaches, when
    /// some have none yet (a write or a truncate is about to reach them): the MDS gives them
    /// objects (Lustre's layout write intent; `open_handle`: the caller's open of the file
    /// for writing, as for a truncate): the inode as the MDS answered (its layout,
    /// and the lock that keeps it). None when `layout` has them all already.
    pub async fn instantiate(
        &self,
        who: &Caller,
        fid: Fid,
        layout: &Layout,
        offset: u64,
        len: u64,
        open_handle: Option<u64>,
    ) -> WeftResult<Option<InodeInfo>> {
        if len == 0 || !layout.needs_write_intent(offset, len) {
            return Ok(None);
        }
        let end = offset.saturating_add(len);
        let inode = self.mdt(who, mdt::LayoutIntent { fid, end, resync: false, open_handle }).await?;
        match &inode.layout {
            Some(l) if !l.write_needs_instantiation(offset, len) => Ok(Some(inode)),
            Some(_) => Err(WeftError::io(format!("the MDS gave {fid} no objects for [{offset}, +{len})"))),
            None => Err(WeftError::io(format!("{fid} lost its layout"))),
        }
    }

    /// Reads `[offset, offset+len)` of a file of `file_size` bytes: exactly
    /// `min(len, file_size - offset)` bytes (none at or past the end), holes and objects
    /// shorter than the file reading as zeros.
    pub async fn read(
        &self,
        who: &Caller,
        layout: &Layout,
        offset: u64,
        len: u32,
        file_size: u64,
    ) -> WeftResult<Bytes> {
        if offset >= file_size || len == 0 {
            return Ok(Bytes::new());
        }
        if layout.mirror_ids().len() > 1 {
            return self.read_mirrored(who, layout, offset, len, file_size).await;
        }
        let want = (len as u64).min(file_size - offset);
        layout.check_usable()?;
        let pieces = plan_layout(layout, offset, want);
        if let [(k, piece)] = pieces[..] {
            let comp = &layout.components[k];
            if piece_is_whole_range(comp, offset, want, &piece) {
                return self.read_whole(who, comp, piece, want).await;
            }
        }
        let mut out = BytesMut::zeroed(want as usize);
        let mut replies = stream::iter(pieces.into_iter().map(|(k, piece)| async move {
            let data = self.read_piece(who, &layout.components[k], piece).await?;
            Ok::<_, WeftError>((k, piece, data))
        }))
        .buffer_unordered(OBJECT_REQUESTS_IN_FLIGHT_MAX);
        while let Some(reply) = replies.next().await {
            let (k, piece, data) = reply?;
            scatter(&layout.components[k], offset, &piece, &data, &mut out);
        }
        Ok(out.freeze())
    }

    /// A read of a file with mirrors: from the first mirror in sync that answers (FLR's
    /// reads go on through another mirror when an OST of one is down).
    async fn read_mirrored(
        &self,
        who: &Caller,
        layout: &Layout,
        offset: u64,
        len: u32,
        size: u64,
    ) -> WeftResult<Bytes> {
        self.over_mirrors(layout, |id| {
            let mirror = layout.mirror(id);
            async move { Box::pin(self.read(who, &mirror, offset, len, size)).await }
        })
        .await
    }

    /// `attempt` on the mirrors of `layout` in sync, in read order ([`Client::mirror_read_order`]),
    /// until one succeeds: while another remains, a mirror gets MIRROR_TRY_MS (and its targets
    /// are noted as failing when it does not make it). When none made it in time, the first
    /// is waited for as long as a file without mirrors would be (a server just restarted may
    /// hold its locks back for a while).
    pub async fn over_mirrors<T, F, Fut>(&self, layout: &Layout, mut attempt: F) -> WeftResult<T>
    where
        F: FnMut(u16) -> Fut,
        Fut: Future<Output = WeftResult<T>>,
    {
        let order = self.mirror_read_order(layout);
        let Some(&first) = order.first() else {
            return Err(WeftError::io("no mirror of the file is in sync"));
        };
        if order.len() > 1 {
            for &id in &order {
                let failed = match tokio::time::timeout(Duration::from_millis(MIRROR_TRY_MS), attempt(id)).await {
                    Ok(Ok(done)) => return Ok(done),
                    Ok(Err(e)) => e,
                    Err(_) => WeftError::new(ErrorCode::TimedOut, format!("no answer within {MIRROR_TRY_MS} ms")),
                };
                tracing::info!("mirror {id} did not serve a read ({failed}); reading another");
                self.note_failing(&layout.mirror(id));
            }
        }
        attempt(first).await
    }

    /// The mirrors in sync in the order reads try them: those with an object on a target
    /// that failed a mirror's read lately ([`Client::note_failing`]) last.
    pub fn mirror_read_order(&self, layout: &Layout) -> Vec<u16> {
        let now = tokio::time::Instant::now().into_std();
        self.failing.lock().unwrap_or_else(|p| p.into_inner()).read_order(layout, now)
    }

    /// A read of `mirror` failed: its targets go last in mirror reads for a while.
    pub fn note_failing(&self, mirror: &Layout) {
        let now = tokio::time::Instant::now().into_std();
        self.failing.lock().unwrap_or_else(|p| p.into_inner()).note(mirror, now);
    }

    /// A read that one object answers whole, in file order: its bytes handed back as they
    /// came (zero-filled past the object's end).
    async fn read_whole(
        &self,
        who: &Caller,
        comp: &LayoutComponent,
        piece: ObjectPiece,
        want: u64,
    ) -> WeftResult<Bytes> {
        let data = self.read_piece(who, comp, piece).await?;
        if data.len() as u64 == want {
            return Ok(data);
        }
        let mut out = BytesMut::zeroed(want as usize);
        out[..data.len()].copy_from_slice(&data);
        Ok(out.freeze())
    }

    /// One object read; shorter than asked past the object's end.
    async fn read_piece(&self, who: &Caller, comp: &LayoutComponent, piece: ObjectPiece) -> WeftResult<Bytes> {
        let object = &comp.objects[piece.stripe];
        let op = ost::Read { fid: object.fid, offset: piece.object_offset, len: piece.len as u32 };
        let (done, data) = self.ost(who, object.ost, op, Bytes::new()).await?;
        if done.len as usize != data.len() || data.len() as u64 > piece.len {
            return Err(WeftError::protocol(format!(
                "OST {} answered a read of {} bytes of object {} with {} bytes, {} announced",
                object.ost,
                piece.len,
                object.fid,
                data.len(),
                done.len
            )));
        }
        Ok(data)
    }

    /// Writes `data` at `offset`, one request per object piece, in parallel; returns once
    /// every OST acknowledged. A piece that is contiguous in the file is sent as a slice
    /// of `data`, without a copy. `locks` are the write locks taken for the range
    /// ([`Client::extent_lock`]); a write whose locks belong to an incarnation of the client
    /// before an eviction fails instead of writing over what others wrote since.
    pub async fn write(
        &self,
        who: &Caller,
        layout: &Layout,
        offset: u64,
        data: Bytes,
        locks: &ExtentGuard,
    ) -> WeftResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.check_write(layout, offset, data.len() as u64, locks)?;
        if layout.sync_mirrors() && layout.write_mirrors().len() > 1 {
            // Every mirror in sync takes the bytes (sync_mirror.rs).
            let data = &data;
            return self
                .on_write_mirrors(who, locks.file, layout, |mirror| async move {
                    Box::pin(self.write(who, &mirror, offset, data.clone(), locks)).await
                })
                .await;
        }
        let pieces = plan_layout(layout, offset, data.len() as u64);
        let data = &data;
        let owner = locks.file.and_then(|f| self.owner_of(f));
        bounded(pieces.into_iter().map(|(k, piece)| async move {
            let comp = &layout.components[k];
            let object = &comp.objects[piece.stripe];
            let bulk = gather(comp, offset, &piece, data);
            let op =
                ost::Write { fid: object.fid, offset: piece.object_offset, sync: false, owner, extents: Vec::new() };
            let done = self.write_object(who, locks, object, op, bulk.clone()).await?;
            // Kept until the OST commits it, to replay if its server restarts first.
            let kept = crate::uncommitted::Kept { fid: object.fid, offset: piece.object_offset, bulk, owner };
            self.answered_write(object.ost, &done, kept);
            Ok(())
        }))
        .await?;
        self.bound_uncommitted(who).await;
        Ok(())
    }

    /// Whether a write of `len` bytes at `offset` may go to the objects of `layout` under
    /// `locks`: granted to this client's incarnation, within the largest file, into
    /// components that have their objects.
    pub(crate) fn check_write(&self, layout: &Layout, offset: u64, len: u64, locks: &ExtentGuard) -> WeftResult<()> {
        if locks.client_id != self.client_id() {
            return Err(crate::evicted_error());
        }
        let end = offset.checked_add(len).filter(|end| *end <= FILE_SIZE_MAX_BYTES);
        if end.is_none() {
            return Err(WeftError::new(
                ErrorCode::FileTooBig,
                format!("a write of {len} bytes at offset {offset} would pass the largest file size"),
            ));
        }
        layout.check_usable()?;
        layout.check_writable(offset, len)?;
        if layout.write_needs_instantiation(offset, len) {
            return Err(WeftError::io(format!(
                "a write of {len} bytes at {offset} reaches a component without objects: instantiate it first"
            )));
        }
        Ok(())
    }

    /// One write request to `object` under `locks`, `bulk` its bytes: asks the MDS for more
    /// of a quota when the OST's share is used up, and checks that every byte landed.
    pub(crate) async fn write_object(
        &self,
        who: &Caller,
        locks: &ExtentGuard,
        object: &StripeObject,
        op: ost::Write,
        bulk: Bytes,
    ) -> WeftResult<ost::WriteDone> {
        let owner = op.owner;
        let mut acquired = 0;
        let done = loop {
            match self.ost_under(who, locks, object.ost, op.clone(), bulk.clone()).await {
                // The OST's share of a quota is used up: the master may move room to it
                // from the other OSTs (quota_master.rs in weft-mds); else EDQUOT.
                Err(e) if e.code == ErrorCode::QuotaExceeded && acquired < QUOTA_ACQUIRES_MAX => {
                    let Some(owner) = owner else { return Err(e) };
                    if !self.mdt(who, mdt::QuotaAcquire { owner, ost: object.ost }).await? {
                        return Err(e);
                    }
                    acquired += 1;
                }
                other => break other?.0,
            }
        };
        if done.len as usize != bulk.len() {
            return Err(WeftError::io(format!(
                "short write to object {} on OST {}: {} of {} bytes",
                object.fid,
                object.ost,
                done.len,
                bulk.len()
            )));
        }
        if done.quota_tight {
            if let Some(file) = locks.file {
                self.note_quota_tight(file);
            }
        }
        Ok(done)
    }

    /// The size and 512-byte blocks of a file from its objects (Lustre's glimpse): every
    /// object's attributes, in parallel. A missing object counts as empty.
    pub async fn glimpse(&self, who: &Caller, layout: &Layout) -> WeftResult<(u64, u64)> {
        let (mirror, attrs) = self.glimpse_attrs(who, layout).await?;
        Ok(size_and_blocks(mirror.as_ref().unwrap_or(layout), &attrs))
    }

    /// [`Client::glimpse`] and the file's data version
    /// ([`weft_proto::layout::data_version`]), for closes of writers and copytools (the
    /// read path's glimpses do not compute it).
    pub async fn glimpse_versioned(&self, who: &Caller, layout: &Layout) -> WeftResult<Glimpse> {
        let (mirror, attrs) = self.glimpse_attrs(who, layout).await?;
        let (size, blocks) = size_and_blocks(mirror.as_ref().unwrap_or(layout), &attrs);
        Ok(Glimpse {
            size,
            blocks,
            data_version: weft_proto::layout::data_version(attrs.iter().map(|a| (a.size, a.mtime_ns))),
            mtime_ns: attrs.iter().map(|a| a.mtime_ns).max().unwrap_or(0),
        })
    }

    /// The object attributes a glimpse reads: of every object of `layout`, or, for a file
    /// with synchronous mirrors, of one mirror in sync that answers (every one holds the
    /// file; one whose OST died goes last after MIRROR_TRY_MS, as for reads, until a write
    /// marks it stale), which is returned with them.
    async fn glimpse_attrs(&self, who: &Caller, layout: &Layout) -> WeftResult<(Option<Layout>, Vec<ost::ObjectAttr>)> {
        layout.check_usable()?;
        if layout.sync_mirrors() && layout.write_mirrors().len() > 1 {
            return self
                .over_mirrors(layout, |id| {
                    let mirror = layout.mirror(id);
                    async move {
                        let attrs = self.object_attrs(who, &mirror).await?;
                        Ok((Some(mirror), attrs))
                    }
                })
                .await;
        }
        Ok((None, self.object_attrs(who, layout).await?))
    }

    /// The attributes of every object of the data components, in parallel, in layout order.
    async fn object_attrs(&self, who: &Caller, layout: &Layout) -> WeftResult<Vec<ost::ObjectAttr>> {
        bounded(layout.data_objects().copied().map(|object| async move {
            match self.ost(who, object.ost, ost::Getattr { fid: object.fid }, Bytes::new()).await {
                Ok((attr, _)) => Ok(attr),
                Err(e) if e.code == ErrorCode::NotFound && self.has_target(TargetKind::Ost, object.ost) => {
                    // The OST is there but the object is not (never written): a hole.
                    Ok(ost::ObjectAttr { size: 0, blocks: 0, mtime_ns: 0 })
                }
                Err(e) => Err(e),
            }
        }))
        .await
    }

    /// Truncates (or extends with a hole) to `size`: every object cut to its share of
    /// `size` in parallel, then the size recorded on the MDT. `open_handle`: the caller's
    /// open of the file when it truncates through a descriptor (ftruncate), whose right to
    /// write the file holds whatever the mode bits say now.
    pub async fn truncate(
        &self,
        who: &Caller,
        fid: Fid,
        layout: &Layout,
        size: u64,
        open_handle: Option<u64>,
    ) -> WeftResult<Attr> {
        if size > FILE_SIZE_MAX_BYTES {
            return Err(WeftError::new(
                ErrorCode::FileTooBig,
                format!("size {size} is larger than the largest file ({FILE_SIZE_MAX_BYTES} bytes)"),
            ));
        }
        if layout.is_released() {
            // A truncate needs the data the archive holds (the part kept): restore first.
            self.restore(who, fid).await?;
            let restored = self.getattr(who, fid).await?.layout.unwrap_or_else(|| layout.clone());
            if restored.is_released() {
                return Err(WeftError::new(ErrorCode::Busy, format!("{fid} was released again while truncated")));
            }
            return Box::pin(self.truncate(who, fid, &restored, size, open_handle)).await;
        }
        let mut layout = layout.clone();
        let mut round = 0;
        let (layout, locks) = loop {
            layout.check_writable(size.saturating_sub(1), u64::from(size > 0))?;
            // A size inside a component with no objects yet gives it objects first: the
            // objects' sizes then say the size, as a writer's close reads it back. (Any
            // size: on a file with mirrors in sync, the others go stale first.)
            let intent = self.instantiate(who, fid, &layout, 0, size.max(1), open_handle).await?;
            if let Some(new) = intent.and_then(|i| i.layout) {
                layout = new;
            }
            let locks = self.extent_lock_from(who, fid, &layout, size).await?;
            // Under the locks, the layout cannot be swapped away (a migration locks the same
            // objects): it must still be the file's, or the punches would miss its objects.
            let now =
                self.getattr(who, fid).await?.layout.ok_or_else(|| WeftError::io(format!("{fid} lost its layout")))?;
            if now.generation == layout.generation {
                break (layout, locks);
            }
            round += 1;
            if round > LAYOUT_ROUNDS_MAX {
                return Err(WeftError::new(ErrorCode::Busy, format!("the layout of {fid} kept changing")));
            }
            drop(locks);
            layout = now;
        };
        let (layout, locks) = (&layout, &locks);
        // Every mirror a write goes to is cut (all in sync, when written synchronously).
        self.on_write_mirrors(who, Some(fid), layout, |mirror| async move {
            let punches: Vec<(StripeObject, u64)> = mirror
                .data_components()
                .flat_map(|comp| {
                    comp.objects
                        .iter()
                        .enumerate()
                        .map(move |(stripe, object)| (*object, comp.object_size_in_file(size, stripe)))
                })
                .collect();
            bounded(punches.into_iter().map(|(object, object_size)| async move {
                let op = ost::Punch { fid: object.fid, size: object_size };
                self.ost_under(who, locks, object.ost, op, Bytes::new()).await.map(drop)
            }))
            .await
            .map(drop)
        })
        .await?;
        let set = SetAttr { size: Some(size), ..SetAttr::default() };
        let mut inode = self.mdt(who, mdt::Setattr { fid, set, open_handle }).await?;
        inode.attr.size = size;
        Ok(inode.attr)
    }

    /// Whether object I/O may pass by the servers now (FUSE passthrough): an OST is served
    /// by this process, and no OST of it has a scheduling policy other than FIFO on its I/O
    /// service. Under TBF every byte must go through the server's scheduler, or a rule
    /// would be bypassed; opens made before the policy changed keep their mode until closed.
    pub fn passthrough_allowed(&self) -> bool {
        let state = self.map.current();
        let mut local = false;
        for t in state.map.targets.iter().filter(|t| t.kind == TargetKind::Ost) {
            if let Some(server) = self.in_process(&t.address) {
                if !server.schedulers().of(weft_proto::msg::Service::OstIo).is_fifo() {
                    return false;
                }
                local = true;
            }
        }
        local
    }

    /// Whether the MDT is served by this very process (`weft up`): a request to it costs
    /// CPU, not a round trip.
    pub fn mdt_is_local(&self) -> bool {
        self.serves_locally(TargetKind::Mdt)
    }

    /// Whether a target of `kind` is served by this very process.
    fn serves_locally(&self, kind: TargetKind) -> bool {
        let state = self.map.current();
        state.map.targets.iter().any(|t| t.kind == kind && self.in_process(&t.address).is_some())
    }

    /// The server at `address` when it runs in this process and is called directly.
    fn in_process(&self, address: &str) -> Option<std::sync::Arc<weft_rpc::Server>> {
        self.config().network.as_ref()?.in_process(address)
    }

    /// The object file of a file of one object, open for reading and writing, when the OST
    /// holding it is served by this very process: what a passthrough open hands the kernel.
    /// `None` when the file has more objects or its OST is elsewhere.
    pub async fn local_object(&self, who: &Caller, layout: &Layout) -> WeftResult<Option<std::fs::File>> {
        if layout.is_composite() {
            return Ok(None);
        }
        let comp = layout.plain()?;
        let [object] = comp.objects.as_slice() else { return Ok(None) };
        if comp.pattern != Pattern::Raid0 {
            return Ok(None);
        }
        let (peer, _) = self.target_peer(TargetKind::Ost, object.ost).await?;
        if !peer.is_local() {
            return Ok(None);
        }
        let (found, _) = self.ost(who, object.ost, ost::LocalPath { fid: object.fid }, Bytes::new()).await?;
        let path = std::path::PathBuf::from(std::ffi::OsString::from_vec(found.path));
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).map_err(|e| {
            let mut err = WeftError::from(e);
            err.message = format!("cannot open object {} at {}: {}", object.fid, path.display(), err.message);
            err
        })?;
        Ok(Some(file))
    }

    /// Makes every object of the file durable on its OST, in parallel.
    pub async fn fsync(&self, who: &Caller, layout: &Layout) -> WeftResult<()> {
        self.fsync_file(who, None, layout).await
    }

    /// [`Client::fsync`] of the file `file`: with synchronous mirrors, every mirror in sync
    /// is made durable, and one that does not answer goes stale on `file` (see
    /// sync_mirror.rs; without `file` it fails the sync).
    pub async fn fsync_file(&self, who: &Caller, file: Option<Fid>, layout: &Layout) -> WeftResult<()> {
        layout.check_usable()?;
        self.on_write_mirrors(who, file, layout, |mirror| async move {
            bounded(mirror.data_objects().copied().map(|object| async move {
                let (done, _) = self.ost(who, object.ost, ost::Sync { fid: object.fid }, Bytes::new()).await?;
                self.uncommitted.committed(object.ost, done.committed);
                Ok(())
            }))
            .await
            .map(drop)
        })
        .await
    }
}
