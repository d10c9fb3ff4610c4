//! A file's data into a cache (`weft pcc attach`, an open's or a prefetch's attach): a
//! read-only copy under a read lock kept cached, or a read-write file copied under a write
//! lock, archived in the cache's id and released; room made first within the cache's quota.

use super::evict::{self, Entry, NoRoom, Quota};
use super::state::{busy, copy_name, io_error, lock, root, Held, Kind, Phase};
use crate::mount::Mount;
use std::path::Path;
use std::time::Instant;
use tokio::io::AsyncWriteExt;
use weft_client::virtual_xattr::HsmChange;
use weft_proto::limits::RPC_BULK_BYTES_MAX;
use weft_proto::msg::hsm::{HS_ARCHIVED, HS_EXISTS, HS_PCCRW, HS_RELEASED};
use weft_proto::msg::{Caller, FileType, InodeInfo, OpenIo, OPEN_READ};
use weft_proto::pcc::{Backend, FileFacts};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The rule's facts about a file: its owner, size, age and name.
pub(super) fn facts(inode: &InodeInfo, name: &[u8]) -> FileFacts {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    FileFacts {
        uid: inode.attr.uid,
        gid: inode.attr.gid,
        projid: inode.attr.projid,
        name: name.to_vec(),
        size: inode.attr.size,
        age_s: now.saturating_sub(inode.attr.mtime.sec).max(0) as u64,
    }
}

impl Mount {
    /// `may_detach_rw`: the quota may send read-write files back to the servers to make
    /// room (an explicit attach; not an open's or a prefetch's, which must not wait on that).
    pub(super) async fn attach(
        &self,
        who: &Caller,
        fid: Fid,
        kind: Kind,
        dir: &Path,
        backend: &Backend,
        may_detach_rw: bool,
    ) -> WeftResult<()> {
        if self.pcc.backend_of(dir).is_none() {
            return Err(WeftError::not_found(format!("the cache {} is no longer on this mount", dir.display())));
        }
        if let Some(h) = self.pcc.held(fid) {
            if h.kind == kind && h.phase == Phase::Attached {
                return Ok(());
            }
            return Err(busy(format!("{fid} is in a cache of this mount already ({:?}): detach it first", h.kind)));
        }
        if self.io.counts(fid) != crate::iomode::IoCounts::default() {
            return Err(busy(format!("{fid} is open on this mount: attach it when it is closed")));
        }
        // A close does not wait for the write-behind: what this mount wrote last must be on
        // the servers before the size is measured and the bytes copied, or the quota would
        // judge (and the cache keep) the file as it was before those writes.
        self.writes.wait_idle(fid).await;
        let inode = self.client.getattr(who, fid).await?;
        if inode.attr.kind != FileType::Regular {
            return Err(WeftError::invalid(format!("{fid} is not a regular file: only files are cached")));
        }
        if kind == Kind::Readwrite {
            if who.identity.uid != 0 && who.identity.uid != inode.attr.uid {
                return Err(WeftError::new(ErrorCode::Perm, "only the owner or root attaches a file read-write"));
            }
            let s = self.client.hsm_state(&root(), fid).await?;
            if s.states & (HS_EXISTS | HS_RELEASED) != 0 {
                return Err(busy(format!(
                    "{fid} has a copy in archive {} already: a read-write cache takes files with none (weft hsm \
                     remove it first)",
                    s.archive_id
                )));
            }
        }
        // The caller may read it (and a released file comes back first). Held while a
        // read-only copy is made: no other client may start writing it past the locks
        // (passthrough) meanwhile, and the answer says whether one does now.
        let opened = self.client.open(who, fid, OPEN_READ).await?;
        let result = async {
            if opened.io == OpenIo::Uncached {
                return Err(busy(format!("{fid} is being written through passthrough elsewhere: attach it later")));
            }
            let layout =
                opened.inode.layout.clone().ok_or_else(|| WeftError::invalid(format!("{fid} has no layout")))?;
            let size = match opened.inode.attr.size_known {
                true => opened.inode.attr.size,
                false => self.client.glimpse(&root(), &layout).await?.0,
            };
            self.make_room(dir, backend, size, fid, may_detach_rw).await?;
            Ok(layout)
        }
        .await;
        let layout = match result {
            Ok(layout) => layout,
            Err(e) => {
                let _ = self.client.close(who, fid, opened.handle, None).await;
                return Err(e);
            }
        };
        if kind == Kind::Readwrite {
            // The release needs the file closed everywhere; the write lock keeps writers out.
            self.client.close(who, fid, opened.handle, None).await?;
        }
        let path = dir.join(kind.dir()).join(copy_name(fid));
        let held = Held {
            kind,
            dir: dir.to_path_buf(),
            path: path.clone(),
            bytes: 0,
            used: Instant::now(),
            opens: 0,
            writers: 0,
            phase: Phase::Attaching,
            layout: Some(layout.clone()),
        };
        lock(&self.pcc.state).files.insert(fid, held);
        let result = self.copy_in(fid, kind, &layout, &path).await;
        if kind == Kind::Readonly {
            let _ = self.client.close(who, fid, opened.handle, None).await;
        }
        let mut state = lock(&self.pcc.state);
        let phase = state.files.get(&fid).map(|h| h.phase);
        match (result, phase) {
            (Ok(bytes), Some(Phase::Attaching)) => {
                let h = state.files.get_mut(&fid).expect("looked up above");
                h.phase = Phase::Attached;
                h.bytes = bytes;
                tracing::info!("{fid} attached {kind:?} in {} ({bytes} bytes)", dir.display());
                Ok(())
            }
            // Released into the cache, and another client wants it back already: the
            // restore has the copy (and deletes it when done).
            (Ok(bytes), Some(_)) if kind == Kind::Readwrite => {
                if let Some(h) = state.files.get_mut(&fid) {
                    h.bytes = bytes;
                }
                Ok(())
            }
            (result, _) => {
                // Not released (a read-write copy_in fails only before the release is
                // done), or a read-only copy a write made stale meanwhile.
                state.files.remove(&fid);
                drop(state);
                let _ = std::fs::remove_file(&path);
                match result {
                    Ok(_) => Err(busy(format!("{fid} was written while it was copied into the cache: try again"))),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Copies the file into the cache under a lock on all of it: read for a read-only copy
    /// (kept cached: its callback drops the copy), write for a read-write file (which is
    /// then released before any other client may write it). The bytes copied.
    async fn copy_in(&self, fid: Fid, kind: Kind, layout: &weft_proto::Layout, path: &Path) -> WeftResult<u64> {
        let c = &self.client;
        let guard = match kind {
            Kind::Readonly => c.whole_file_read_lock(&root(), fid, layout).await?,
            Kind::Readwrite => c.whole_file_lock(&root(), fid, layout).await?,
        };
        let size = c.glimpse_versioned(&root(), layout).await?.size;
        let tmp = path.with_extension("part");
        let copied = async {
            let mut out = tokio::fs::File::create(&tmp).await.map_err(|e| io_error("cannot create", &tmp, e))?;
            let mut offset = 0u64;
            while offset < size {
                let len = (size - offset).min(u64::from(RPC_BULK_BYTES_MAX)) as u32;
                let data = c.read(&root(), layout, offset, len, size).await?;
                if data.is_empty() {
                    return Err(WeftError::io(format!("{fid} ended at {offset} bytes, before its size {size}")));
                }
                out.write_all(&data).await.map_err(|e| io_error("cannot write", &tmp, e))?;
                offset += data.len() as u64;
            }
            if kind == Kind::Readwrite {
                // The only copy once the file is released.
                out.sync_all().await.map_err(|e| io_error("cannot sync", &tmp, e))?;
            }
            tokio::fs::rename(&tmp, path).await.map_err(|e| io_error("cannot rename", &tmp, e))?;
            if kind == Kind::Readwrite {
                if let Some(parent) = path.parent() {
                    std::fs::File::open(parent)
                        .and_then(|d| d.sync_all())
                        .map_err(|e| io_error("cannot sync", parent, e))?;
                }
            }
            Ok::<_, WeftError>(offset)
        }
        .await;
        let bytes = match copied {
            Ok(bytes) => bytes,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        if kind == Kind::Readwrite {
            // Archived in the cache's id, then released: under the write lock, so no write
            // can come between the copy and the release.
            let Some(rwid) = self.pcc.backend_of(path.parent().and_then(Path::parent).unwrap_or(path)).map(|b| b.rwid)
            else {
                return Err(WeftError::not_found("the cache went while the file was copied into it"));
            };
            let set = HsmChange { set: HS_EXISTS | HS_ARCHIVED | HS_PCCRW, clear: 0, archive_id: rwid };
            c.hsm_set(&root(), fid, set).await?;
            if let Err(e) = c.hsm_release(&root(), fid).await {
                // The release may have been done and its answer lost: then the copy is the
                // file's only data, and it stays.
                if c.hsm_state(&root(), fid).await.is_ok_and(|s| s.states & HS_RELEASED != 0) {
                    tracing::warn!("{fid}: the release answered {e}, yet it is released: attached");
                    drop(guard);
                    return Ok(bytes);
                }
                let undo = HsmChange { set: 0, clear: HS_EXISTS | HS_ARCHIVED | HS_PCCRW, archive_id: 0 };
                if let Err(undo_err) = c.hsm_set(&root(), fid, undo).await {
                    tracing::warn!("{fid}: the cache's flags could not be cleared after a failed release: {undo_err}");
                }
                return Err(e);
            }
            // The kernel's attributes (blocks) of it are the copy's from now on.
            drop(weft_client::locks::LockHooks::drop_inode(&*self.hooks, fid, weft_proto::lock::bits::UPDATE));
        }
        drop(guard);
        Ok(bytes)
    }

    /// Makes room for `bytes` more in the cache at `dir`, evicting what no open uses (the
    /// choice is `evict::make_room`'s, asked again after each eviction).
    async fn make_room(
        &self,
        dir: &Path,
        backend: &Backend,
        bytes: u64,
        attaching: Fid,
        may_detach_rw: bool,
    ) -> WeftResult<()> {
        let quota = Quota { bytes: backend.quota_bytes, evict: backend.evict, may_detach_rw };
        loop {
            let plan = {
                let state = lock(&self.pcc.state);
                let copies: Vec<Entry> =
                    state.files.iter().filter(|(_, h)| h.dir == dir).map(|(fid, h)| Entry::of(*fid, h)).collect();
                evict::make_room(&copies, bytes, attaching, &quota)
            };
            let victim = match (plan.evict.first(), plan.refused) {
                (Some(victim), _) => *victim,
                (None, None) => return Ok(()),
                (None, Some(NoRoom::LargerThanQuota)) => {
                    let quota = quota.bytes;
                    return Err(WeftError::new(
                        ErrorCode::NoSpace,
                        format!(
                            "{attaching} has {bytes} bytes, more than the cache {}'s quota of {quota}: no room for it",
                            dir.display()
                        ),
                    ));
                }
                (None, Some(NoRoom::Held { held_bytes })) => {
                    let (dir, held, quota) = (dir.display(), held_bytes, quota.bytes);
                    let why = format!("the cache {dir} holds {held} of its {quota} bytes in open files");
                    return Err(WeftError::new(ErrorCode::NoSpace, format!("{why}: no room for {bytes} more")));
                }
            };
            tracing::info!("cache {} full: {} goes ({:?})", dir.display(), victim.0, backend.evict);
            match victim.1 {
                Kind::Readonly => {
                    self.pcc.forget(victim.0);
                }
                Kind::Readwrite => self.detach_rw(victim.0).await?,
            }
        }
    }
}
