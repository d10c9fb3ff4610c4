//! The persistent client cache (Lustre's PCC): chosen files' data in a directory on this
//! node's own disk, read and written there by the kernel through FUSE passthrough.
//!
//! * **Caches** are added to a mount (`weft pcc add MNT DIR --param "RULE KEYS"`, the
//!   settings of `weft-proto/src/pcc.rs`) and kept in its memory; the files are
//!   `DIR/rw/FID` and `DIR/ro/FID`.
//! * **Read-only copies** (`attach -r`, or a read-only open of a file the rule matches):
//!   the data is copied under a read lock on every object of the file, to its end, and the
//!   lock stays cached. A write or truncate anywhere needs a write lock, so its callback
//!   reaches this mount before the write is done: [`Pcc::invalidate`] drops the copy
//!   (from the lock hooks, `coherence.rs`), and the next open reads the servers. The lock
//!   going for any other reason (the lock LRU, a lost server) drops the copy too.
//! * **Read-write files** (`attach -w`) are built on HSM, as Lustre's: the data is copied
//!   into the cache under a write lock on the whole file, the file is marked archived in
//!   the cache's archive id (`rwid`, with `HS_PCCRW`) and released on the servers. This
//!   mount then opens it with `OPEN_PCC` and the kernel does its I/O on the cache file;
//!   the size goes to the MDT at each writer's close. Any other client's open, truncate or
//!   stat for the size is a restore, which the coordinator hands to the copytool this
//!   mount runs for `rwid`: it waits until this mount's writers closed, writes the cache
//!   file into new objects, and the file is the servers' again (the restore clears the
//!   HSM flags; the copy is deleted). A mount that dies leaves its files released, their
//!   data in `DIR/rw`: others' opens wait for the restore and fail with the reason after
//!   their `restore_timeout`, until the mount is back and the cache added again (it takes
//!   up what `DIR/rw` holds).
//! * **Prefetch** (`prefetch=1`, Weft's): the mount registers a changelog reader (its id
//!   kept in `DIR/.prefetch-reader`, so that a mount that comes back goes on where it
//!   stopped) and follows the MDT's records: a file closed after writing anywhere that
//!   the rule matches gets a read-only copy, no scan needed (not at its create: a writer
//!   may be writing it through passthrough, past the locks, until it closes). `pcc del`
//!   deregisters the reader.
//! * **Quota**: a cache's `quota` bounds what it holds; an attach that does not fit first
//!   evicts copies that no open uses (least recently used or largest first, as `evict`
//!   says). A read-only copy is deleted; a read-write file is detached (restored) first,
//!   so no data is lost. What cannot be made room for is refused with ENOSPC.
//!
//! Known limits: an open made through a read-only copy keeps reading it after the copy
//! was dropped (passthrough cannot be taken back from an open), as NFS's close-to-open;
//! opens made after the write read the new bytes. A read-write file's restore waits for
//! this mount's writers to close.

use crate::coherence::MountHooks;
use crate::iomode::{Backing, KernelIo};
use crate::mount::Mount;
use crate::opens::KernelAnswer;
use fuser::{BackingId, FopenFlags};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use weft_client::copytool::{self, Failure};
use weft_client::virtual_xattr::HsmChange;
use weft_proto::limits::RPC_BULK_BYTES_MAX;
use weft_proto::msg::hsm::{HsmAction, HsmActionItem, HS_ARCHIVED, HS_EXISTS, HS_PCCRW, HS_RELEASED};
use weft_proto::msg::{Caller, FileType, InodeInfo, OpenIo, SetAttr, OPEN_PCC, OPEN_READ};
use weft_proto::pcc::{Backend, Evict, FileFacts};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The subdirectories of a cache directory for each kind of copy.
const RW_DIR: &str = "rw";
const RO_DIR: &str = "ro";
/// How often a restore looks whether this mount's writers of the file closed.
const WRITERS_POLL_MS: u64 = 100;
/// The file in a cache directory that names its changelog reader (prefetch).
const READER_FILE: &str = ".prefetch-reader";
/// Changelog records a prefetch takes in at once, and its pause when there are none.
const PREFETCH_BATCH: u32 = 1024;
const PREFETCH_IDLE_MS: u64 = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Readonly,
    Readwrite,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Readonly => RO_DIR,
            Kind::Readwrite => RW_DIR,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Being copied in; a read-only copy invalidated meanwhile is not taken.
    Attaching,
    Attached,
    /// A read-only copy whose lock went while it was being copied.
    Invalidated,
    /// A read-write file going back to the servers.
    Restoring,
}

/// One file this mount keeps in a cache.
#[derive(Debug, Clone)]
struct Held {
    kind: Kind,
    /// The cache directory it is in.
    dir: PathBuf,
    /// The copy.
    path: PathBuf,
    bytes: u64,
    used: Instant,
    /// Opens of it through the cache on this mount, and how many of them write.
    opens: u32,
    writers: u32,
    phase: Phase,
    /// The layout the copy is of: a read-only copy whose file got other objects since (a
    /// release and restore, which call back no lock) is stale.
    layout: Option<weft_proto::Layout>,
}

struct Cache {
    dir: PathBuf,
    param: String,
    backend: Backend,
    /// Ends the copytool serving `rwid`.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Ends the prefetch, and its changelog reader.
    prefetch: Option<(tokio::sync::oneshot::Sender<()>, String)>,
}

#[derive(Default)]
struct State {
    caches: Vec<Cache>,
    files: HashMap<Fid, Held>,
}

/// This mount's caches and what they hold.
#[derive(Default)]
pub(crate) struct Pcc {
    /// A cache was added: opens look here (nothing else on the open path while none is).
    active: AtomicBool,
    state: Mutex<State>,
    /// Adds, deletes, attaches and detaches one at a time.
    changing: tokio::sync::Mutex<()>,
}

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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn busy(why: String) -> WeftError {
    WeftError::new(ErrorCode::Busy, why)
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> WeftError {
    let mut err = WeftError::from(e);
    err.message = format!("{what} {}: {}", path.display(), err.message);
    err
}

impl Pcc {
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    fn held(&self, fid: Fid) -> Option<Held> {
        lock(&self.state).files.get(&fid).cloned()
    }

    /// A write anywhere is about to change `fid` (the read lock its copy is kept under
    /// goes): a read-only copy is dropped. Read-write files are left alone (their data is
    /// nowhere else).
    pub(crate) fn invalidate(&self, fid: Fid) {
        if !self.active() {
            return;
        }
        let gone = {
            let mut state = lock(&self.state);
            match state.files.get_mut(&fid) {
                Some(h) if h.kind == Kind::Readonly && h.phase == Phase::Attaching => {
                    h.phase = Phase::Invalidated;
                    None
                }
                Some(h) if h.kind == Kind::Readonly => state.files.remove(&fid),
                _ => None,
            }
        };
        if let Some(h) = gone {
            tracing::debug!("read-only copy of {fid} dropped: the file changes");
            // Opens through it keep their descriptor (see the module's limits).
            let _ = std::fs::remove_file(&h.path);
        }
    }

    /// The size and blocks of a read-write file this mount holds: its copy's.
    pub(crate) fn owned_size(&self, fid: Fid) -> Option<(u64, u64)> {
        let path = self.owned_path(fid)?;
        match std::fs::metadata(&path) {
            Ok(m) => Some((m.len(), m.blocks())),
            Err(e) => {
                tracing::warn!("the cache copy {} of {fid}: {e}", path.display());
                None
            }
        }
    }

    /// The copy of a read-write file this mount holds.
    pub(crate) fn owned_path(&self, fid: Fid) -> Option<PathBuf> {
        if !self.active() {
            return None;
        }
        self.held(fid).filter(|h| h.kind == Kind::Readwrite && h.phase == Phase::Attached).map(|h| h.path)
    }

    /// Counts an open through the cache of `fid` before it is made, if the cache serves it
    /// (a read-only copy for reading, a read-write file for anything; a write drops a
    /// read-only copy). Under the state lock, so that a restore either sees the writer or
    /// the open sees the restore.
    fn reserve(&self, fid: Fid, writing: bool) -> Reserved {
        if !self.active() {
            return Reserved::No;
        }
        let mut state = lock(&self.state);
        match state.files.get_mut(&fid) {
            None => Reserved::NotHeld,
            Some(h) if h.phase != Phase::Attached => Reserved::No,
            Some(h) if h.kind == Kind::Readonly && writing => {
                drop(state);
                self.invalidate(fid);
                Reserved::No
            }
            Some(h) => {
                h.opens += 1;
                h.writers += u32::from(writing);
                h.used = Instant::now();
                Reserved::Yes(h.clone())
            }
        }
    }

    /// An open through the cache was released (or a reserved one was not made).
    pub(crate) fn closed(&self, fid: Fid, writer: bool) {
        let mut state = lock(&self.state);
        if let Some(h) = state.files.get_mut(&fid) {
            h.opens = h.opens.saturating_sub(1);
            if writer {
                h.writers = h.writers.saturating_sub(1);
                if let Ok(m) = std::fs::metadata(&h.path) {
                    h.bytes = m.len();
                }
            }
        }
    }

    /// Drops what the cache held of `fid`, its copy too.
    fn forget(&self, fid: Fid) {
        let gone = lock(&self.state).files.remove(&fid);
        if let Some(h) = gone {
            let _ = std::fs::remove_file(&h.path);
        }
    }

    fn backend_of(&self, dir: &Path) -> Option<Backend> {
        lock(&self.state).caches.iter().find(|c| c.dir == dir).map(|c| c.backend.clone())
    }
}

enum Reserved {
    /// Counted: open it through the cache.
    Yes(Held),
    /// The cache holds it but does not serve this open (or is changing it).
    No,
    NotHeld,
}

/// What a restore by this mount's copytool needs (no mount: the copytool outlives none of
/// it, and the mount's requests do not wait on it).
struct Restorer {
    agent: Arc<copytool::Agent>,
    pcc: Arc<Pcc>,
    hooks: Arc<MountHooks>,
    dir: PathBuf,
}

impl Restorer {
    async fn run(&self, item: HsmActionItem) {
        let started = Instant::now();
        let result = match item.action {
            HsmAction::Restore => self.restore(&item).await,
            other => Err(Failure::new(
                libc::EINVAL,
                format!("archive {} is a client cache: it serves restores, not {}", item.archive_id, other.name()),
            )),
        };
        let restored = self.agent.report_end(&item, result, started).await;
        let fid = item.fid;
        if restored {
            self.pcc.forget(fid);
            // This mount's attributes of it were the copy's.
            drop(weft_client::locks::LockHooks::drop_inode(&*self.hooks, fid, weft_proto::lock::bits::UPDATE));
        } else if let Some(h) = lock(&self.pcc.state).files.get_mut(&fid) {
            h.phase = Phase::Attached;
        }
    }

    /// The cache copy written into the file's new objects, once this mount's writers closed.
    async fn restore(&self, item: &HsmActionItem) -> Result<copytool::Moved, Failure> {
        let fid = item.fid;
        let path = self.dir.join(RW_DIR).join(copy_name(fid));
        if !path.exists() {
            return Err(Failure::new(
                libc::ENOENT,
                format!("{fid} is not in this mount's cache {} (was it attached elsewhere?)", self.dir.display()),
            ));
        }
        let mut progress = self.agent.progress(item.cookie);
        loop {
            {
                let mut state = lock(&self.pcc.state);
                match state.files.get_mut(&fid) {
                    Some(h) if h.writers > 0 => {}
                    Some(h) => {
                        h.phase = Phase::Restoring;
                        break;
                    }
                    None => break,
                }
            }
            // Keeps the action this copytool's while it waits.
            progress.moved(0).await?;
            tokio::time::sleep(Duration::from_millis(WRITERS_POLL_MS)).await;
        }
        let mut source = tokio::fs::File::open(&path).await?;
        self.agent.restore_from(item, &mut source, None).await
    }
}

/// The rule's facts about a file: its owner, size, age and name.
fn facts(inode: &InodeInfo, name: &[u8]) -> FileFacts {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    FileFacts {
        uid: inode.attr.uid,
        gid: inode.attr.gid,
        projid: 0,
        name: name.to_vec(),
        size: inode.attr.size,
        age_s: now.saturating_sub(inode.attr.mtime.sec).max(0) as u64,
    }
}

/// A copy's file name: the FID as Lustre names cache files (`0x200000400:0x2:0x0`).
fn copy_name(fid: Fid) -> String {
    fid.to_string().trim_matches(['[', ']']).to_string()
}

fn root() -> Caller {
    Caller::root()
}

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

    /// The copytool serving restores of the cache's read-write files; the sender stops it.
    fn start_copytool(&self, dir: &Path, rwid: u32) -> tokio::sync::oneshot::Sender<()> {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let name = format!("pcc-{}-{}-{rwid}", host.trim(), std::process::id());
        let agent = Arc::new(copytool::Agent { client: self.client.clone(), who: root(), name });
        let (pcc, hooks) = (self.pcc.clone(), self.hooks.clone());
        let restorer = Arc::new(Restorer { agent: agent.clone(), pcc, hooks, dir: dir.to_path_buf() });
        let run: copytool::Runner = Arc::new(move |item| {
            let r = restorer.clone();
            Box::pin(async move { r.run(item).await })
        });
        let stop = Box::pin(async move {
            let _ = rx.await;
        });
        self.runtime.spawn(copytool::serve(agent, vec![rwid], 2, run, stop));
        tx
    }

    /// The changelog reader of a prefetching cache (the one it had, if still registered)
    /// and the task following it; the sender stops the task.
    async fn start_prefetch(self: &Arc<Self>, dir: &Path) -> WeftResult<(tokio::sync::oneshot::Sender<()>, String)> {
        let file = dir.join(READER_FILE);
        let users = self.client.changelog_users(&root()).await?;
        let kept = std::fs::read_to_string(&file).ok().and_then(|id| {
            let id = id.trim().to_string();
            users.users.iter().find(|u| u.id == id).map(|u| (u.id.clone(), u.cleared))
        });
        let (reader, cleared) = match kept {
            Some(kept) => kept,
            None => {
                let u = self.client.changelog_register(&root(), Some("pcc".into())).await?;
                std::fs::write(&file, &u.id).map_err(|e| io_error("cannot write", &file, e))?;
                (u.id, u.cleared)
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = prefetch(Arc::downgrade(self), dir.to_path_buf(), reader.clone(), cleared, rx);
        self.runtime.spawn(task);
        tracing::info!("cache {}: prefetch follows the changelog as reader {reader}", dir.display());
        Ok((tx, reader))
    }

    /// A file the changelog named: a read-only copy if the cache's rule takes it and it is
    /// neither cached nor open here.
    async fn prefetch_one(&self, dir: &Path, fid: Fid) {
        if self.pcc.held(fid).is_some() || self.io.counts(fid) != crate::iomode::IoCounts::default() {
            return;
        }
        let Some(backend) = self.pcc.backend_of(dir) else { return };
        let Ok(inode) = self.client.getattr(&root(), fid).await else { return };
        if inode.attr.kind != FileType::Regular || inode.layout.as_ref().is_none_or(|l| l.is_released()) {
            return;
        }
        let Ok(path) = self.client.fid2path(&root(), fid).await else { return };
        let name = path.rsplit(|b| *b == b'/').next().unwrap_or(&path).to_vec();
        if !backend.rule.matches(&facts(&inode, &name)) {
            return;
        }
        let _changing = self.pcc.changing.lock().await;
        if let Err(e) = self.attach(&root(), fid, Kind::Readonly, dir, &backend, false).await {
            tracing::info!("prefetch of {fid} into {}: {e}", dir.display());
        }
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

    /// `may_detach_rw`: the quota may send read-write files back to the servers to make
    /// room (an explicit attach; not an open's or a prefetch's, which must not wait on that).
    async fn attach(
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

    /// Makes room for `bytes` more in the cache at `dir`, evicting what no open uses.
    async fn make_room(
        &self,
        dir: &Path,
        backend: &Backend,
        bytes: u64,
        attaching: Fid,
        may_detach_rw: bool,
    ) -> WeftResult<()> {
        let quota = backend.quota_bytes;
        if quota == 0 {
            return Ok(());
        }
        if bytes > quota {
            return Err(WeftError::new(
                ErrorCode::NoSpace,
                format!(
                    "{attaching} has {bytes} bytes, more than the cache {}'s quota of {quota}: no room for it",
                    dir.display()
                ),
            ));
        }
        loop {
            let victim = {
                let state = lock(&self.pcc.state);
                let held: Vec<(&Fid, &Held)> = state.files.iter().filter(|(_, h)| h.dir == dir).collect();
                let used: u64 = held.iter().map(|(_, h)| h.bytes).sum();
                if used + bytes <= quota {
                    return Ok(());
                }
                let idle = held.iter().filter(|(f, h)| {
                    **f != attaching
                        && h.opens == 0
                        && h.phase == Phase::Attached
                        && (may_detach_rw || h.kind == Kind::Readonly)
                });
                let pick = match backend.evict {
                    Evict::Lru => idle.min_by_key(|(_, h)| h.used),
                    Evict::Size => idle.max_by_key(|(_, h)| h.bytes),
                };
                match pick {
                    Some((fid, h)) => (**fid, h.kind),
                    None => {
                        let (dir, held) = (dir.display(), used);
                        let why = format!("the cache {dir} holds {held} of its {quota} bytes in open files");
                        return Err(WeftError::new(ErrorCode::NoSpace, format!("{why}: no room for {bytes} more")));
                    }
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

    /// A read-write file back to the servers: a restore, which this mount's copytool
    /// serves from the copy (and then deletes it).
    async fn detach_rw(&self, fid: Fid) -> WeftResult<()> {
        if let Some(h) = self.pcc.held(fid) {
            if h.opens > 0 {
                return Err(busy(format!("{fid} is open on this mount ({} opens): detach it when closed", h.opens)));
            }
        }
        match self.client.restore(&root(), fid).await {
            Ok(()) => {}
            // Removed meanwhile: nothing to bring back.
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(e) => return Err(e),
        }
        self.pcc.forget(fid);
        drop(weft_client::locks::LockHooks::drop_inode(&*self.hooks, fid, weft_proto::lock::bits::UPDATE));
        Ok(())
    }

    /// An open the cache serves, if it does: a read-only copy for reading, a read-write
    /// file for anything; a read-only open of a file the rule matches is attached first
    /// (`open_attach`). None: the open goes the usual way (a write drops a read-only copy).
    pub(crate) async fn pcc_open(
        &self,
        who: &Caller,
        fid: Fid,
        flags: i32,
        register: impl FnOnce(&std::fs::File) -> std::io::Result<BackingId>,
    ) -> Option<WeftResult<(u64, KernelAnswer)>> {
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
        // that does not open through the cache gives it back.
        let result = self.open_through_cache(who, fid, flags, &held, register).await;
        if !matches!(result, Some(Ok(_))) {
            self.pcc.closed(fid, writing);
        }
        result
    }

    async fn open_through_cache(
        &self,
        who: &Caller,
        fid: Fid,
        flags: i32,
        held: &Held,
        register: impl FnOnce(&std::fs::File) -> std::io::Result<BackingId>,
    ) -> Option<WeftResult<(u64, KernelAnswer)>> {
        let mds_flags = crate::opens::open_flags(flags) | if held.kind == Kind::Readwrite { OPEN_PCC } else { 0 };
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
        let _turn = self.io.serialize_open(fid).await;
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
        let result = self.finish_open(who, opened.inode, opened.handle, flags, KernelIo::Passthrough, None).await;
        Some(result.map(|(fh, _)| {
            if let Some(file) = self.files.get(fh) {
                file.through_cache.store(true, Ordering::Release);
            }
            (fh, answer)
        }))
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

/// Follows the changelog for a prefetching cache until stopped or the mount goes: the
/// files of each batch of creates and writers' closes are looked at once, then the batch is
/// cleared.
async fn prefetch(
    mount: std::sync::Weak<Mount>,
    dir: PathBuf,
    reader: String,
    mut last: u64,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    use weft_proto::msg::changelog::ChangelogType;
    loop {
        let Some(m) = mount.upgrade() else { return };
        let records = match m.client.changelog_read(&root(), last + 1, PREFETCH_BATCH).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("prefetch into {}: reading the changelog: {e}", dir.display());
                Vec::new()
            }
        };
        let Some(end) = records.last().map(|r| r.index) else {
            drop(m);
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(Duration::from_millis(PREFETCH_IDLE_MS)) => continue,
            }
        };
        let mut fids: Vec<Fid> = records
            .iter()
            .filter(|r| r.kind == ChangelogType::Close && r.target != Fid::default())
            .map(|r| r.target)
            .collect();
        fids.sort_unstable_by_key(|f| (f.seq, f.oid, f.ver));
        fids.dedup();
        for fid in fids {
            if !matches!(stop.try_recv(), Err(tokio::sync::oneshot::error::TryRecvError::Empty)) {
                return;
            }
            m.prefetch_one(&dir, fid).await;
        }
        if let Err(e) = m.client.changelog_clear(&root(), &reader, end).await {
            tracing::warn!("prefetch into {}: clearing the changelog to {end}: {e}", dir.display());
        }
        last = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_named_by_fid_as_lustre_names_them_and_parse_back() {
        let fid = Fid::new(0x200000400, 0x2, 0);
        assert_eq!(copy_name(fid), "0x200000400:0x2:0x0");
        assert_eq!(copy_name(fid).parse::<Fid>().unwrap(), fid, "an add finds the files it held by name");
    }
}
