//! The open path through a cache: an open a cache serves (a read-only copy for reading, a
//! read-write file for anything) gets the copy as its passthrough backing file; a read-only
//! open of a file an `open_attach` rule matches is attached first. And a truncate of a
//! read-write file this mount holds.

use super::attach::facts;
use super::state::{io_error, lock, Held, Kind, Reserved};
use crate::iomode::{Backing, KernelAnswer, KernelIo};
use crate::mount::Mount;
use fuser::{BackingId, FopenFlags};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weft_proto::msg::{Caller, FileType, InodeInfo, SetAttr, OPEN_PCC};
use weft_proto::pcc::Backend;
use weft_proto::{ErrorCode, Fid, WeftResult};

/// An open through a cache, made at the MDS with its backing file registered, for opens.rs
/// to finish (its handle, the kernel's answer); if it cannot, it gives the cache its open
/// back (`Pcc::closed`). Holds the file's turn to open (`IoModes::serialize_open`) until
/// then, so that no other open of it picks a clashing mode meanwhile.
pub(crate) struct CacheOpen<'a> {
    pub inode: InodeInfo,
    pub handle: u64,
    pub answer: KernelAnswer,
    /// The open counts as a writer of the copy.
    pub writing: bool,
    pub turn: tokio::sync::MutexGuard<'a, ()>,
}

impl Mount {
    /// An open the cache serves, if it does: a read-only copy for reading, a read-write
    /// file for anything; a read-only open of a file the rule matches is attached first
    /// (`open_attach`). None: the open goes the usual way (a write drops a read-only copy).
    /// `mds_flags` are the open's flags for the MDS (opens.rs makes them). The open is made
    /// at the MDS and its backing file registered; opens.rs finishes it ([`CacheOpen`]).
    pub(crate) async fn pcc_open(
        &self,
        who: &Caller,
        fid: Fid,
        flags: i32,
        mds_flags: u32,
        register: impl FnOnce(&std::fs::File) -> std::io::Result<BackingId>,
    ) -> Option<WeftResult<CacheOpen<'_>>> {
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        let held = match self.pcc.reserve(fid, writing) {
            Reserved::Yes(h) => h,
            Reserved::No => return None,
            Reserved::NotHeld if writing => return None,
            Reserved::NotHeld => {
                self.auto_attach(who, fid).await?;
                match self.pcc.reserve(fid, writing) {
                    Reserved::Yes(h) => h,
                    _ => return None,
                }
            }
        };
        // From here on the open counts (a restore waits for its writers): every way out
        // that does not open through the cache gives it back (opens.rs, if it cannot finish).
        let result = self.open_through_cache(who, fid, mds_flags, &held, register).await;
        if !matches!(result, Some(Ok(_))) {
            self.pcc.closed(fid, writing);
        }
        result.map(|r| r.map(|open| CacheOpen { writing, ..open }))
    }

    async fn open_through_cache(
        &self,
        who: &Caller,
        fid: Fid,
        mds_flags: u32,
        held: &Held,
        register: impl FnOnce(&std::fs::File) -> std::io::Result<BackingId>,
    ) -> Option<WeftResult<CacheOpen<'_>>> {
        let mds_flags = mds_flags | if held.kind == Kind::Readwrite { OPEN_PCC } else { 0 };
        let opened = match self.client.open(who, fid, mds_flags).await {
            Ok(o) => o,
            // A restore is asked for or running (another client wants it): the usual open
            // waits for it. The copy stays: the restore reads it, and deletes it when done.
            Err(e) if e.code == ErrorCode::Stale && held.kind == Kind::Readwrite => return None,
            Err(e) => return Some(Err(e)),
        };
        let give_back = |this: &Self| {
            let client = this.client.clone();
            let (who, handle) = (who.clone(), opened.handle);
            async move {
                if let Err(e) = client.close(&who, fid, handle, None).await {
                    tracing::warn!("closing {fid}'s open the cache could not serve: {e}");
                }
            }
        };
        if held.kind == Kind::Readonly && opened.inode.layout != held.layout {
            // Other objects since the copy was made (released and restored): stale.
            give_back(self).await;
            self.pcc.invalidate(fid);
            return None;
        }
        let turn = self.io.serialize_open(fid).await;
        let backing = match self.io.backing(fid) {
            Some(b) if b.cache => b,
            // Opens of it here that the cache does not serve (made while it was attached):
            // the kernel does not mix modes on one inode, so this one goes their way.
            Some(_) => {
                give_back(self).await;
                return None;
            }
            None if !self.io.passthrough_possible(fid) => {
                give_back(self).await;
                return None;
            }
            None => {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(held.kind == Kind::Readwrite)
                    .open(&held.path)
                    .and_then(|f| register(&f).map(|id| (f, id)));
                match file {
                    Ok((file, id)) => Arc::new(Backing { id, file, cache: true }),
                    Err(e) => {
                        give_back(self).await;
                        if held.kind == Kind::Readonly {
                            // Dropped meanwhile (a write elsewhere): the servers have it.
                            self.pcc.invalidate(fid);
                            return None;
                        }
                        return Some(Err(io_error("the cache copy", &held.path, e)));
                    }
                }
            }
        };
        self.io.opened(fid, KernelIo::Passthrough, Some(backing.clone()));
        let answer = KernelAnswer { io: KernelIo::Passthrough, flags: FopenFlags::empty(), backing: Some(backing) };
        Some(Ok(CacheOpen { inode: opened.inode, handle: opened.handle, answer, writing: false, turn }))
    }

    /// A read-only open of a file a read-only cache's rule matches, with `open_attach`: a
    /// copy is made now. None when no rule takes it (or the copy fails: the open goes on).
    async fn auto_attach(&self, who: &Caller, fid: Fid) -> Option<()> {
        let caches: Vec<(PathBuf, Backend)> = lock(&self.pcc.state)
            .caches
            .iter()
            .filter(|c| c.backend.ro && c.backend.open_attach)
            .map(|c| (c.dir.clone(), c.backend.clone()))
            .collect();
        // Open here already (the kernel does not mix its modes on one inode): no copy now.
        if caches.is_empty() || self.io.counts(fid) != crate::iomode::IoCounts::default() {
            return None;
        }
        let inode = self.client.getattr(who, fid).await.ok()?;
        if inode.attr.kind != FileType::Regular || inode.layout.as_ref().is_none_or(|l| l.is_released()) {
            return None;
        }
        // The name costs a request: only for rules that look at it.
        let name = match caches.iter().any(|(_, b)| b.rule.uses_name()) {
            true => {
                let path = self.client.fid2path(who, fid).await.ok()?;
                path.rsplit(|b| *b == b'/').next().unwrap_or(&path).to_vec()
            }
            false => Vec::new(),
        };
        let facts = facts(&inode, &name);
        let (dir, backend) = caches.into_iter().find(|(_, b)| b.rule.matches(&facts))?;
        // An open does not wait behind another attach (a copy of gigabytes, a detach
        // waiting on a restore): it goes to the servers this time.
        let _changing = self.pcc.changing.try_lock().ok()?;
        if let Err(e) = self.attach(who, fid, Kind::Readonly, &dir, &backend, false).await {
            tracing::info!("{fid} matches the rule of cache {} but was not attached: {e}", dir.display());
            return None;
        }
        Some(())
    }

    /// A truncate of a read-write file this mount holds: its copy and the MDT's size.
    pub(crate) async fn pcc_truncate(&self, who: &Caller, fid: Fid, path: &Path, size: u64) -> WeftResult<InodeInfo> {
        let inode = self.client.setattr(who, fid, SetAttr { size: Some(size), ..SetAttr::default() }).await?;
        let file = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| io_error("cannot open", path, e))?;
        file.set_len(size).map_err(|e| io_error("cannot truncate", path, e))?;
        Ok(inode)
    }
}
