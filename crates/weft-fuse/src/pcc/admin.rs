//! The administrator's requests (`weft pcc add`, `del`, `list`, `state`, `detach`, as
//! virtual attributes the CLI sets and reads: see xattr.rs) and the unmount's stop.

use super::prefetch::READER_FILE;
use super::state::{busy, io_error, lock, root, Cache, Held, Kind, Phase, RO_DIR, RW_DIR};
use crate::mount::Mount;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use weft_client::virtual_xattr::HsmChange;
use weft_proto::msg::hsm::{HS_ARCHIVED, HS_EXISTS, HS_PCCRW, HS_RELEASED};
use weft_proto::msg::Caller;
use weft_proto::pcc::{Backend, Evict};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// `weft.pcc.add`'s value.
#[derive(Debug, Serialize, Deserialize)]
pub struct AddRequest {
    pub dir: String,
    pub param: String,
}

/// `weft.pcc.del`'s value.
#[derive(Debug, Serialize, Deserialize)]
pub struct DelRequest {
    pub dir: String,
    #[serde(default)]
    pub keep: bool,
}

/// `weft.pcc.attach`'s value: the kind (None: read-only, as Lustre 2.16) and the id (0:
/// the first cache of that kind).
#[derive(Debug, Serialize, Deserialize)]
pub struct AttachRequest {
    pub kind: Option<Kind>,
    #[serde(default)]
    pub id: u32,
}

/// `weft.pcc.detach`'s value.
#[derive(Debug, Serialize, Deserialize)]
pub struct DetachRequest {
    #[serde(default)]
    pub keep: bool,
}

/// One cache as `weft pcc list` shows it (Lustre's fields, and Weft's use of it).
#[derive(Debug, Serialize, Deserialize)]
pub struct CacheInfo {
    pub pccpath: String,
    pub param: String,
    pub rwid: u32,
    pub roid: u32,
    pub flags: u32,
    pub autocache: String,
    pub quota_bytes: u64,
    pub evict: Evict,
    pub used_bytes: u64,
    pub files: u64,
}

/// `weft pcc state`: Lustre's fields (`type`, `PCC_file`, `open_count`, `flags`) and the
/// cache id.
#[derive(Debug, Serialize, Deserialize)]
pub struct FileState {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: u32,
    pub pcc_file: String,
    pub open_count: u32,
    pub flags: u32,
}

/// Lustre's `PCC_STATE_FL_ATTACHING`.
const STATE_FL_ATTACHING: u32 = 0x2;

impl Mount {
    /// `weft pcc add`: a cache directory with its settings. Takes up the read-write files a
    /// cache of this directory held before (this mount's earlier life) and starts serving
    /// their restores.
    pub(crate) async fn pcc_add(self: &Arc<Self>, who: &Caller, req: AddRequest) -> WeftResult<()> {
        if who.identity.uid != 0 {
            return Err(WeftError::new(ErrorCode::Perm, "only root adds a cache to a mount"));
        }
        let backend = Backend::parse(&req.param).map_err(WeftError::invalid)?;
        if !self.passthrough.load(Ordering::Relaxed) {
            return Err(WeftError::new(
                ErrorCode::NotSupported,
                "this mount has no FUSE passthrough (kernel 6.9+, mount option passthrough=auto or on): a cache needs it",
            ));
        }
        let dir = std::path::absolute(&req.dir).map_err(|e| io_error("cache directory", Path::new(&req.dir), e))?;
        let _changing = self.pcc.changing.lock().await;
        {
            let state = lock(&self.pcc.state);
            if state.caches.iter().any(|c| c.dir == dir) {
                return Err(busy(format!("{} is a cache of this mount already", dir.display())));
            }
            for c in &state.caches {
                if backend.rw && c.backend.rw && c.backend.rwid == backend.rwid {
                    return Err(busy(format!("rwid={} is the cache {}'s already", backend.rwid, c.dir.display())));
                }
            }
        }
        for sub in [RW_DIR, RO_DIR] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).map_err(|e| io_error("cannot make", &p, e))?;
        }
        // Read-only copies do not outlive the cache (their locks went with the mount).
        if let Ok(entries) = std::fs::read_dir(dir.join(RO_DIR)) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        // Read-write files left by an earlier life of this mount: still this cache's while
        // the file is released into it.
        let mut found = Vec::new();
        for e in std::fs::read_dir(dir.join(RW_DIR)).map_err(|e| io_error("cannot read", &dir, e))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(fid) = name.parse::<Fid>() else {
                // A copy that was being made when the mount stopped.
                let _ = std::fs::remove_file(e.path());
                continue;
            };
            match self.client.hsm_state(&root(), fid).await {
                Ok(s) if s.states & (HS_PCCRW | HS_RELEASED) == (HS_PCCRW | HS_RELEASED) => found.push((fid, e.path())),
                // Marked but never released (the mount stopped in the attach): the servers
                // have the data; the marks go, and the copy.
                Ok(s) if s.states & HS_PCCRW != 0 => {
                    let clear = HsmChange { set: 0, clear: HS_EXISTS | HS_ARCHIVED | HS_PCCRW, archive_id: 0 };
                    self.client.hsm_set(&root(), fid, clear).await?;
                    let _ = std::fs::remove_file(e.path());
                }
                Ok(_) | Err(WeftError { code: ErrorCode::NotFound, .. }) => {
                    tracing::info!("cache {}: {fid} is no longer cached here; its old copy goes", dir.display());
                    let _ = std::fs::remove_file(e.path());
                }
                Err(e) => return Err(e),
            }
        }
        if !found.is_empty() && !backend.rw {
            return Err(WeftError::invalid(format!(
                "{} holds {} read-write files: add it with rwid=N pccrw=1 to serve them",
                dir.display(),
                found.len()
            )));
        }
        let prefetch = match backend.prefetch {
            true => Some(self.start_prefetch(&dir).await?),
            false => {
                // A reader an earlier prefetching add left: nobody reads it now.
                if let Ok(id) = std::fs::read_to_string(dir.join(READER_FILE)) {
                    match self.client.changelog_deregister(&root(), id.trim()).await {
                        Ok(()) => drop(std::fs::remove_file(dir.join(READER_FILE))),
                        Err(e) if e.code == ErrorCode::NotFound => drop(std::fs::remove_file(dir.join(READER_FILE))),
                        Err(e) => tracing::warn!("changelog reader {} of cache {}: {e}", id.trim(), dir.display()),
                    }
                }
                None
            }
        };
        let stop = backend.rw.then(|| self.start_copytool(&dir, backend.rwid));
        let mut state = lock(&self.pcc.state);
        for (fid, path) in found {
            let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
            let h = Held {
                kind: Kind::Readwrite,
                dir: dir.clone(),
                path,
                bytes,
                used: Instant::now(),
                opens: 0,
                writers: 0,
                phase: Phase::Attached,
                layout: None,
            };
            state.files.insert(fid, h);
        }
        tracing::info!("cache {} added: {}", dir.display(), req.param);
        state.caches.push(Cache { dir, param: req.param, backend, stop, prefetch });
        self.pcc.active.store(true, Ordering::Release);
        Ok(())
    }

    /// `weft pcc del`: the cache goes. Its read-write files go back to the servers first
    /// (with `keep`, they stay released in the directory, for a later add), its read-only
    /// copies are deleted.
    pub(crate) async fn pcc_del(&self, who: &Caller, req: DelRequest) -> WeftResult<()> {
        if who.identity.uid != 0 {
            return Err(WeftError::new(ErrorCode::Perm, "only root deletes a cache of a mount"));
        }
        let dir = std::path::absolute(&req.dir).map_err(|e| io_error("cache directory", Path::new(&req.dir), e))?;
        let _changing = self.pcc.changing.lock().await;
        if !lock(&self.pcc.state).caches.iter().any(|c| c.dir == dir) {
            return Err(WeftError::not_found(format!("{} is not a cache of this mount", dir.display())));
        }
        let held: Vec<(Fid, Held)> =
            lock(&self.pcc.state).files.iter().filter(|(_, h)| h.dir == dir).map(|(f, h)| (*f, h.clone())).collect();
        for (fid, h) in held {
            match h.kind {
                Kind::Readonly => {
                    self.pcc.forget(fid);
                }
                Kind::Readwrite if req.keep => {
                    lock(&self.pcc.state).files.remove(&fid);
                }
                Kind::Readwrite => self.detach_rw(fid).await?,
            }
        }
        let mut state = lock(&self.pcc.state);
        if let Some(i) = state.caches.iter().position(|c| c.dir == dir) {
            let mut cache = state.caches.remove(i);
            if let Some(stop) = cache.stop.take() {
                let _ = stop.send(());
            }
            if let Some((stop, reader)) = cache.prefetch.take() {
                let _ = stop.send(());
                let client = self.client.clone();
                let file = dir.join(READER_FILE);
                // Its records are nobody's now.
                self.runtime.spawn(async move {
                    match client.changelog_deregister(&root(), &reader).await {
                        Ok(()) => drop(std::fs::remove_file(file)),
                        Err(e) => tracing::warn!("changelog reader {reader} of a deleted cache: {e}"),
                    }
                });
            }
        }
        self.pcc.active.store(!state.caches.is_empty(), Ordering::Release);
        tracing::info!("cache {} deleted", dir.display());
        Ok(())
    }

    /// `weft pcc list`.
    pub(crate) fn pcc_list(&self) -> Vec<CacheInfo> {
        let state = lock(&self.pcc.state);
        state
            .caches
            .iter()
            .map(|c| {
                let held = state.files.values().filter(|h| h.dir == c.dir);
                let (files, used) = held.fold((0, 0), |(n, b), h| (n + 1, b + h.bytes));
                CacheInfo {
                    pccpath: c.dir.display().to_string(),
                    param: c.param.clone(),
                    rwid: if c.backend.rw { c.backend.rwid } else { 0 },
                    roid: if c.backend.ro { c.backend.roid } else { 0 },
                    flags: c.backend.flags(),
                    autocache: c.backend.rule.text(),
                    quota_bytes: c.backend.quota_bytes,
                    evict: c.backend.evict,
                    used_bytes: used,
                    files,
                }
            })
            .collect()
    }

    /// `weft pcc state FILE`.
    pub(crate) fn pcc_state(&self, fid: Fid) -> FileState {
        let state = lock(&self.pcc.state);
        let Some(h) = state.files.get(&fid) else {
            return FileState { kind: "none".into(), id: 0, pcc_file: String::new(), open_count: 0, flags: 0 };
        };
        let backend = state.caches.iter().find(|c| c.dir == h.dir).map(|c| &c.backend);
        let id = match (h.kind, backend) {
            (Kind::Readwrite, Some(b)) => b.rwid,
            (Kind::Readonly, Some(b)) => b.roid,
            _ => 0,
        };
        let kind = match h.kind {
            Kind::Readonly => "readonly",
            Kind::Readwrite => "readwrite",
        };
        let flags = if h.phase == Phase::Attaching { STATE_FL_ATTACHING } else { 0 };
        FileState { kind: kind.into(), id, pcc_file: h.path.display().to_string(), open_count: h.opens, flags }
    }

    /// The cache an attach of `kind` with `id` (0: the first that serves the kind) goes to.
    fn cache_for(&self, kind: Kind, id: u32) -> WeftResult<(PathBuf, Backend)> {
        let readwrite = kind == Kind::Readwrite;
        let state = lock(&self.pcc.state);
        let cache = state.caches.iter().find(|c| c.backend.serves(readwrite, id));
        cache
            .map(|c| (c.dir.clone(), c.backend.clone()))
            .ok_or_else(|| WeftError::not_found(weft_proto::pcc::no_cache_for(readwrite, id)))
    }

    /// `weft pcc attach`: the file's data into a cache.
    pub(crate) async fn pcc_attach(&self, who: &Caller, fid: Fid, req: AttachRequest) -> WeftResult<()> {
        let kind = req.kind.unwrap_or(Kind::Readonly);
        let (dir, backend) = self.cache_for(kind, req.id)?;
        let _changing = self.pcc.changing.lock().await;
        self.attach(who, fid, kind, &dir, &backend, true).await
    }

    /// `weft pcc detach`.
    pub(crate) async fn pcc_detach(&self, _who: &Caller, fid: Fid, req: DetachRequest) -> WeftResult<()> {
        let _changing = self.pcc.changing.lock().await;
        let Some(h) = self.pcc.held(fid) else {
            return Err(WeftError::not_found(format!("{fid} is in no cache of this mount")));
        };
        match h.kind {
            Kind::Readonly if req.keep => {
                lock(&self.pcc.state).files.remove(&fid);
                Ok(())
            }
            Kind::Readonly => {
                self.pcc.forget(fid);
                Ok(())
            }
            Kind::Readwrite => self.detach_rw(fid).await,
        }
    }

    /// Ends every cache's copytool (unmount). Read-write files stay in their directories,
    /// released: the next add takes them up.
    pub(crate) fn pcc_stop(&self) {
        let mut state = lock(&self.pcc.state);
        for c in &mut state.caches {
            if let Some(stop) = c.stop.take() {
                let _ = stop.send(());
            }
            // The reader stays registered: the next add goes on from where this one stopped.
            if let Some((stop, _)) = c.prefetch.take() {
                let _ = stop.send(());
            }
        }
    }
}
