//! How this mount does the I/O of each file it has open: the kernel's page cache (the usual
//! way), passthrough to the object's file, or uncached (FOPEN_DIRECT_IO). The MDS decides
//! between clients ([`OpenIo`]); this table keeps the kernel's own rule within the mount: an
//! inode is either in passthrough or in cached mode, never both at once (the kernel fails
//! the open with EIO otherwise), and all its passthrough opens share one backing file.
//!
//! Opens of one file are serialized here from the choice of the kernel's mode until the
//! kernel has the answer, so two opens racing cannot pick modes that clash.

use crate::limits::OPEN_STRIPES;
use fuser::{BackingId, FopenFlags};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use weft_proto::msg::OpenIo;
use weft_proto::Fid;

/// What the kernel was told for one open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelIo {
    /// Page cache, write-behind, extent locks.
    Cached,
    /// The kernel reads and writes the object's file itself.
    Passthrough,
    /// FOPEN_DIRECT_IO: every read and write comes here, and a write lands before it is
    /// answered.
    Uncached,
}

/// How the kernel is told to do an open's I/O.
pub(crate) struct KernelAnswer {
    pub io: KernelIo,
    pub flags: FopenFlags,
    pub backing: Option<Arc<Backing>>,
}

/// This mount's opens of one file, by kernel I/O mode (the `weft.io` virtual attribute).
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct IoCounts {
    pub cached: u32,
    pub passthrough: u32,
    pub uncached: u32,
}

/// The object file the kernel reads and writes for a file's passthrough opens.
pub struct Backing {
    /// The kernel's reference to it (closed on drop).
    pub id: BackingId,
    /// Ours: its size is the file's (one object), read at a writer's close.
    pub file: std::fs::File,
    /// A persistent client cache's copy (`pcc.rs`), not the object's file: opens the cache
    /// does not serve must not share it.
    pub cache: bool,
}

#[derive(Default)]
struct FileIo {
    counts: IoCounts,
    /// The backing file the kernel was given, while passthrough opens last.
    backing: Option<Arc<Backing>>,
}

pub struct IoModes {
    files: Mutex<HashMap<Fid, FileIo>>,
    opening: Vec<tokio::sync::Mutex<()>>,
}

impl Default for IoModes {
    fn default() -> Self {
        IoModes {
            files: Mutex::new(HashMap::new()),
            opening: (0..OPEN_STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
        }
    }
}

impl IoModes {
    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<Fid, FileIo>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Held from choosing the kernel's mode of an open until the kernel has the answer.
    pub async fn serialize_open(&self, fid: Fid) -> tokio::sync::MutexGuard<'_, ()> {
        let stripe = (fid.seq ^ (fid.oid as u64).rotate_left(17)) as usize % OPEN_STRIPES;
        self.opening[stripe].lock().await
    }

    /// Whether a new open of `fid` may be passthrough to its object as far as this mount
    /// goes: none of its opens here uses the page cache, and the backing file the kernel
    /// has, if any, is not a cache's copy (which serves the cache's opens only).
    pub fn passthrough_possible(&self, fid: Fid) -> bool {
        self.files().get(&fid).is_none_or(|f| f.counts.cached == 0 && f.backing.as_ref().is_none_or(|b| !b.cache))
    }

    /// The backing file the kernel already has for `fid`, if passthrough opens last.
    pub fn backing(&self, fid: Fid) -> Option<Arc<Backing>> {
        self.files().get(&fid).and_then(|f| f.backing.clone())
    }

    /// What the kernel is told for an open the MDS answered with `granted`; `backing`
    /// says whether a backing file is at hand for a passthrough grant.
    pub fn choose(&self, fid: Fid, granted: OpenIo, backing: bool) -> KernelIo {
        let files = self.files();
        let here = files.get(&fid).map(|f| f.counts.clone()).unwrap_or_default();
        match granted {
            OpenIo::Passthrough if backing && here.cached == 0 => KernelIo::Passthrough,
            // A passthrough grant comes without a backing file only when cached opens are
            // here (the open path then opens again without asking for passthrough): the page
            // cache under the locks is coherent with the others, uncached meanwhile.
            OpenIo::Passthrough | OpenIo::Cached if here.passthrough == 0 => KernelIo::Cached,
            // The kernel refuses a cached open beside a passthrough one: uncached is right
            // beside anything.
            OpenIo::Passthrough | OpenIo::Cached | OpenIo::Uncached => KernelIo::Uncached,
        }
    }

    /// Records an open the kernel was answered with `io`; for passthrough, `backing` is
    /// the file it was given. (The first passthrough open of an existing file drops the
    /// kernel's pages of it, and neither passthrough nor uncached opens cache any: a
    /// cached open after them finds no stale page.)
    pub fn opened(&self, fid: Fid, io: KernelIo, backing: Option<Arc<Backing>>) {
        let mut files = self.files();
        let f = files.entry(fid).or_default();
        match io {
            KernelIo::Cached => f.counts.cached += 1,
            KernelIo::Passthrough => {
                f.counts.passthrough += 1;
                if f.backing.is_none() {
                    f.backing = backing;
                }
            }
            KernelIo::Uncached => f.counts.uncached += 1,
        }
    }

    /// An open of `fid` with `io` was released. The backing file goes with the last
    /// passthrough open.
    pub fn released(&self, fid: Fid, io: KernelIo) {
        let mut files = self.files();
        let Some(f) = files.get_mut(&fid) else { return };
        let count = match io {
            KernelIo::Cached => &mut f.counts.cached,
            KernelIo::Passthrough => &mut f.counts.passthrough,
            KernelIo::Uncached => &mut f.counts.uncached,
        };
        *count = count.saturating_sub(1);
        if f.counts.passthrough == 0 {
            f.backing = None;
        }
        if f.counts == IoCounts::default() {
            files.remove(&fid);
        }
    }

    pub fn counts(&self, fid: Fid) -> IoCounts {
        self.files().get(&fid).map(|f| f.counts.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inode_never_mixes_cached_and_passthrough_opens() {
        let modes = IoModes::default();
        let f = Fid::new(0x200000400, 1, 0);
        // Alone: passthrough when granted with a backing file.
        assert!(modes.passthrough_possible(f));
        assert_eq!(modes.choose(f, OpenIo::Passthrough, true), KernelIo::Passthrough);
        modes.opened(f, KernelIo::Passthrough, None);
        // The MDS says cached (e.g. it restarted): uncached beside the passthrough open.
        assert_eq!(modes.choose(f, OpenIo::Cached, false), KernelIo::Uncached);
        assert_eq!(modes.choose(f, OpenIo::Uncached, false), KernelIo::Uncached);
        modes.released(f, KernelIo::Passthrough);
        assert!(modes.files().is_empty(), "nothing kept once the file's opens are gone");
        // After it, cached opens again.
        assert_eq!(modes.choose(f, OpenIo::Cached, false), KernelIo::Cached);
        modes.opened(f, KernelIo::Cached, None);
        modes.opened(f, KernelIo::Cached, None);
        // Cached opens here: no passthrough, even if the MDS granted it.
        assert!(!modes.passthrough_possible(f));
        assert_eq!(modes.choose(f, OpenIo::Passthrough, true), KernelIo::Cached);
        modes.released(f, KernelIo::Cached);
        modes.released(f, KernelIo::Cached);
        assert_eq!(modes.counts(f), IoCounts::default());
        assert!(modes.files().is_empty());
    }
}
