//! What this mount keeps of its caches: each cache's settings and the files it holds, each
//! file's kind, phase, size and opens ([`Pcc`]), and the few questions the rest of the mount
//! asks of it (is a file cached, a write drops a read-only copy, an open through the cache
//! counted). State only: the requests that change it are the other files of `pcc/`.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use weft_proto::msg::Caller;
use weft_proto::pcc::Backend;
use weft_proto::{ErrorCode, Fid, WeftError};

/// The subdirectories of a cache directory for each kind of copy.
pub(super) const RW_DIR: &str = "rw";
pub(super) const RO_DIR: &str = "ro";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Readonly,
    Readwrite,
}

impl Kind {
    pub(super) fn dir(self) -> &'static str {
        match self {
            Kind::Readonly => RO_DIR,
            Kind::Readwrite => RW_DIR,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
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
pub(super) struct Held {
    pub(super) kind: Kind,
    /// The cache directory it is in.
    pub(super) dir: PathBuf,
    /// The copy.
    pub(super) path: PathBuf,
    pub(super) bytes: u64,
    pub(super) used: Instant,
    /// Opens of it through the cache on this mount, and how many of them write.
    pub(super) opens: u32,
    pub(super) writers: u32,
    pub(super) phase: Phase,
    /// The layout the copy is of: a read-only copy whose file got other objects since (a
    /// release and restore, which call back no lock) is stale.
    pub(super) layout: Option<weft_proto::Layout>,
}

pub(super) struct Cache {
    pub(super) dir: PathBuf,
    pub(super) param: String,
    pub(super) backend: Backend,
    /// Ends the copytool serving `rwid`.
    pub(super) stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Ends the prefetch, and its changelog reader.
    pub(super) prefetch: Option<(tokio::sync::oneshot::Sender<()>, String)>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) caches: Vec<Cache>,
    pub(super) files: HashMap<Fid, Held>,
}

/// This mount's caches and what they hold.
#[derive(Default)]
pub(crate) struct Pcc {
    /// A cache was added: opens look here (nothing else on the open path while none is).
    pub(super) active: AtomicBool,
    pub(super) state: Mutex<State>,
    /// Adds, deletes, attaches and detaches one at a time.
    pub(super) changing: tokio::sync::Mutex<()>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) fn busy(why: String) -> WeftError {
    WeftError::new(ErrorCode::Busy, why)
}

pub(super) fn io_error(what: &str, path: &Path, e: std::io::Error) -> WeftError {
    let mut err = WeftError::from(e);
    err.message = format!("{what} {}: {}", path.display(), err.message);
    err
}

impl Pcc {
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    pub(super) fn held(&self, fid: Fid) -> Option<Held> {
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
    pub(super) fn reserve(&self, fid: Fid, writing: bool) -> Reserved {
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
    pub(super) fn forget(&self, fid: Fid) {
        let gone = lock(&self.state).files.remove(&fid);
        if let Some(h) = gone {
            let _ = std::fs::remove_file(&h.path);
        }
    }

    pub(super) fn backend_of(&self, dir: &Path) -> Option<Backend> {
        lock(&self.state).caches.iter().find(|c| c.dir == dir).map(|c| c.backend.clone())
    }
}

pub(super) enum Reserved {
    /// Counted: open it through the cache.
    Yes(Held),
    /// The cache holds it but does not serve this open (or is changing it).
    No,
    NotHeld,
}

/// A copy's file name: the FID as Lustre names cache files (`0x200000400:0x2:0x0`).
pub(super) fn copy_name(fid: Fid) -> String {
    fid.to_string().trim_matches(['[', ']']).to_string()
}

pub(super) fn root() -> Caller {
    Caller::root()
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
