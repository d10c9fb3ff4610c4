//! What keeps this mount's kernel caches true while other clients change the file system:
//! the lock hooks the client library calls when a lock goes, and the cache lifetimes the
//! mount hands the kernel.
//!
//! * While the client holds an inode-bit lock on an inode, the kernel may keep its name and
//!   attributes for [`LOCKED_TTL_S`]; when the lock goes, [`MountHooks::drop_inode`] tells the
//!   kernel to forget them (FUSE_NOTIFY_INVAL_INODE for attributes, FUSE_NOTIFY_INVAL_ENTRY
//!   for each name this mount handed out for the inode). Without a lock: TTL 0.
//! * A regular file whose size the MDS does not know (a writer has it open somewhere) gets
//!   TTL 0 for its attributes, so every stat asks (and glimpses the objects).
//! * While the client holds extent locks on a file's objects the kernel keeps the file's
//!   pages across opens (FOPEN_KEEP_CACHE); when one goes, its callback waits for the writes
//!   queued under it (they keep it in use) and [`MountHooks::drop_data`] drops the pages.
//!   A glimpse of the file has its queued writes land first ([`MountHooks::flush`]).
//!
//! The kernel calls run on the mount's invalidation thread: an invalidation waits for pages
//! that a read in flight holds locked, and that read may wait for a lock this very callback
//! gives back. Its queue holds at most [`INVALIDATIONS_QUEUED_MAX`]; past it an invalidation
//! waits for room in a task of its own (never dropped, never blocking the caller).

use crate::limits::{ALIASES_PER_INODE_MAX, INVALIDATIONS_QUEUED_MAX, LOCKED_TTL_S};
use crate::writeback::WriteBehind;
use fuser::{INodeNo, Notifier};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use weft_client::locks::LockHooks;
use weft_proto::lock::bits;
use weft_proto::msg::{FileType, InodeInfo};
use weft_proto::Fid;

/// One invalidation for the kernel; `done` learns when the kernel is through with it.
struct Inval {
    ino: u64,
    pages: bool,
    entries: Vec<(u64, OsString)>,
    done: tokio::sync::oneshot::Sender<()>,
}

pub(crate) struct MountHooks {
    /// The thread that talks to the kernel (see [`MountHooks::set_notifier`]).
    invalidations: OnceLock<tokio::sync::mpsc::Sender<Inval>>,
    /// For attribute invalidations, which never wait and go out at once.
    notifier: OnceLock<Notifier>,
    writes: Arc<WriteBehind>,
    /// The persistent client caches: a data lock going drops a read-only copy.
    pub(crate) pcc: Arc<crate::pcc::Pcc>,
    /// inode -> the (parent, name) entries this mount handed the kernel for it.
    aliases: Mutex<HashMap<u64, Vec<(u64, OsString)>>>,
}

impl MountHooks {
    pub(crate) fn new(writes: Arc<WriteBehind>) -> Arc<MountHooks> {
        Arc::new(MountHooks {
            invalidations: OnceLock::new(),
            notifier: OnceLock::new(),
            writes,
            pcc: Arc::default(),
            aliases: Mutex::new(HashMap::new()),
        })
    }

    /// The session's notifier, once the kernel connection exists: one thread of the mount
    /// sends every invalidation, in order. A thread of its own because a page invalidation
    /// may wait for pages a read holds locked, and one thread (not a task per call) because
    /// dropping many locks at once (the LRU) would otherwise be as many thread hand-offs.
    pub(crate) fn set_notifier(&self, notifier: Notifier) {
        let _ = self.notifier.set(notifier.clone());
        self.start_invalidations(move |inval| {
            // ENOENT: the kernel has forgotten the inode or name already; nothing to do.
            let (offset, len) = if inval.pages { (0, 0) } else { (-1, 0) };
            let _ = notifier.inval_inode(INodeNo(inval.ino), offset, len);
            for (parent, name) in &inval.entries {
                let _ = notifier.inval_entry(INodeNo(*parent), name);
            }
        });
    }

    /// Starts the invalidation thread, which hands each invalidation to `kernel` in order.
    fn start_invalidations(&self, mut kernel: impl FnMut(&Inval) + Send + 'static) {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Inval>(INVALIDATIONS_QUEUED_MAX);
        let started = std::thread::Builder::new().name("weft-inval".into()).spawn(move || {
            while let Some(inval) = rx.blocking_recv() {
                kernel(&inval);
                let _ = inval.done.send(());
            }
        });
        match started {
            Ok(_) => {
                let _ = self.invalidations.set(tx);
            }
            Err(e) => tracing::error!("cannot start the invalidation thread: {e}; caches stay until they expire"),
        }
    }

    fn aliases(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<(u64, OsString)>>> {
        self.aliases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers that the kernel knows `ino` as `parent/name`; false if too many names are
    /// remembered for it already (then the entry must not be cached).
    pub(crate) fn note_alias(&self, parent: u64, name: &OsStr, ino: u64) -> bool {
        let mut aliases = self.aliases();
        let list = aliases.entry(ino).or_default();
        if list.iter().any(|(p, n)| *p == parent && n == name) {
            return true;
        }
        if list.len() >= ALIASES_PER_INODE_MAX {
            return false;
        }
        list.push((parent, name.to_os_string()));
        true
    }

    /// Drops the kernel's cached attributes of `ino` at once: the kernel only marks them
    /// stale, nothing to wait for.
    pub(crate) fn drop_attributes(&self, ino: INodeNo) {
        if let Some(notifier) = self.notifier.get() {
            let _ = notifier.inval_inode(ino, -1, 0);
        }
    }

    /// Hands an invalidation to the invalidation thread; the receiver learns when the
    /// kernel is through with it (at once without a kernel connection).
    fn invalidate(&self, ino: u64, pages: bool, entries: Vec<(u64, OsString)>) -> tokio::sync::oneshot::Receiver<()> {
        let (done, rx) = tokio::sync::oneshot::channel();
        let inval = Inval { ino, pages, entries, done };
        let Some(tx) = self.invalidations.get() else { return rx };
        match tx.try_send(inval) {
            Ok(()) => {}
            // The queue is full: wait for room without holding up the caller (a lock callback,
            // or a FUSE thread in `recheck`).
            Err(tokio::sync::mpsc::error::TrySendError::Full(inval)) => {
                let tx = tx.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn(async move {
                            let _ = tx.send(inval).await;
                        });
                    }
                    Err(_) => {
                        let waiting = std::thread::Builder::new()
                            .name("weft-inval-wait".into())
                            .spawn(move || tx.blocking_send(inval).is_ok());
                        if let Err(e) = waiting {
                            tracing::error!("cannot queue an invalidation: {e}; the cache stays until it expires");
                        }
                    }
                }
            }
            // The thread is gone (unmounted): nothing left to drop.
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {}
        }
        rx
    }
}

impl LockHooks for MountHooks {
    fn flush(&self, file: Fid) -> BoxFuture<'static, ()> {
        let writes = self.writes.clone();
        Box::pin(async move { writes.wait_queued(file).await })
    }

    fn drop_data(&self, file: Fid) -> BoxFuture<'static, ()> {
        self.pcc.invalidate(file);
        let done = self.invalidate(crate::root::ino_of(file), true, Vec::new());
        Box::pin(async move {
            let _ = done.await;
        })
    }

    fn drop_inode(&self, fid: Fid, lost: u8) -> BoxFuture<'static, ()> {
        let ino = crate::root::ino_of(fid);
        self.drop_attributes(INodeNo(ino));
        // Names on the invalidation thread: the kernel takes the directory's lock for them,
        // which an operation of this mount may hold (see `revoke` in the client's locks).
        let entries =
            if lost & bits::LOOKUP != 0 { self.aliases().remove(&ino).unwrap_or_default() } else { Vec::new() };
        if entries.is_empty() {
            return Box::pin(std::future::ready(()));
        }
        let done = self.invalidate(ino, false, entries);
        Box::pin(async move {
            let _ = done.await;
        })
    }
}

/// How long the kernel may cache this inode's name and attributes: as long as the lock that
/// came with it holds, 0 without one or while the size is not known.
pub(crate) fn ttl_for(client: &weft_client::Client, inode: &InodeInfo) -> Duration {
    // Names and attributes both: one lifetime covers the two in FUSE's answers.
    if !client.lock_cache().still_covers(inode) {
        return Duration::ZERO;
    }
    if inode.attr.kind == FileType::Regular && !inode.attr.size_known {
        return Duration::ZERO;
    }
    Duration::from_secs(LOCKED_TTL_S)
}

/// After answering the kernel: if the lock went meanwhile, its callback may have
/// invalidated before the kernel had the answer, so invalidate again.
pub(crate) fn recheck(client: &weft_client::Client, hooks: &MountHooks, inode: &InodeInfo) {
    if inode.lock.is_some() && !client.lock_cache().still_covers(inode) {
        drop(hooks.drop_inode(inode.attr.fid, bits::ALL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// With the kernel stalled, the queue holds at most its bound; the invalidations past it
    /// wait for room (none dropped, the caller not blocked), and once the kernel goes on
    /// every one reaches it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_the_bound_invalidations_wait_for_room_and_none_is_dropped() {
        let hooks = MountHooks::new(Arc::new(WriteBehind::default()));
        let (resume, stalled) = std::sync::mpsc::channel::<()>();
        let seen = Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        hooks.start_invalidations(move |_| {
            if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                let _ = stalled.recv(); // the kernel stalls on the first one
            }
        });
        let total = INVALIDATIONS_QUEUED_MAX + 100;
        let mut done = Vec::with_capacity(total);
        for i in 0..total {
            done.push(hooks.drop_data(Fid::new(0x2_0000_0400, i as u32 + 1, 0)));
        }
        // The caller was never blocked; the queue holds no more than its bound.
        let tx = hooks.invalidations.get().unwrap();
        assert!(tx.max_capacity() - tx.capacity() <= INVALIDATIONS_QUEUED_MAX);
        assert_eq!(tx.max_capacity(), INVALIDATIONS_QUEUED_MAX);
        resume.send(()).unwrap();
        futures::future::join_all(done).await;
        assert_eq!(seen.load(Ordering::SeqCst), total, "every invalidation reached the kernel");
    }
}
