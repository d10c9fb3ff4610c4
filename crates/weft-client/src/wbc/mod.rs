//! The metadata write-back cache (docs/ARCHITECTURE.md, "The metadata write-back cache").
//!
//! In a directory whose lock this client holds exclusively (the MDT's `WbcGrant`: EX on
//! every inode bit and `WBC`, granted only when no other client holds a lock there, asked
//! for at the first create or after a few unlinks), files are made here, with FIDs the MDT
//! granted, names are removed here, and the creates, setattrs and unlinks are sent
//! in batches (`Batch`, one request of many ops, applied all or none). A batch goes when it
//! has [`WbcConfig::batch_ops`] ops or its oldest is [`WbcConfig::batch_ms`] old, on
//! [`Client::fsync_dir`], when the client ends ([`Client::release_locks`]), before any
//! operation in the directory that the cache does not do itself, and when the lock is
//! called back: the batch lands before the lock goes back, so the other client sees every
//! name.
//!
//! Durability: a create this cache answered and has not sent is like a write in a page
//! cache: lost with the client's crash; [`Client::fsync_dir`] makes it durable (the batch
//! is then committed on the MDT like any change).

mod state;

use crate::Client;
use state::{CreateNeeds, Dir};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use weft_proto::limits::{BATCH_OPS_MAX, READDIR_ENTRIES_MAX};
use weft_proto::lock::{bits, LockHandle, LockScope, LockTarget};
use weft_proto::msg::mdt;
use weft_proto::msg::wbc::BatchOp;
use weft_proto::msg::{Caller, FileType, InodeInfo, SetAttr, Timestamp, OPEN_READ};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// How the write-back cache behaves (`ClientConfig::wbc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WbcConfig {
    /// Whether creates in a directory this client can hold alone are made here. Off by
    /// default: a directory another client lists at the same time pays a callback and a
    /// batch per turn, and what is not sent is lost with the client.
    pub enabled: bool,
    /// A batch goes once it has this many ops (at most `BATCH_OPS_MAX`).
    pub batch_ops: usize,
    /// ... or once its oldest op is this old.
    pub batch_ms: u64,
    /// FIDs asked for at a time.
    pub fids_per_grant: u32,
}

impl Default for WbcConfig {
    fn default() -> WbcConfig {
        WbcConfig {
            enabled: false,
            batch_ops: crate::limits::WBC_BATCH_OPS_DEFAULT,
            batch_ms: crate::limits::WBC_BATCH_MS_DEFAULT,
            fids_per_grant: crate::limits::WBC_FIDS_PER_GRANT,
        }
    }
}

/// What the cache did, for tests and `weft bench`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WbcStats {
    /// Ops answered here.
    pub ops: u64,
    /// Batches sent, and the ops in them.
    pub batches: u64,
    pub ops_sent: u64,
    /// Batches the MDT refused (their ops are lost; see [`Client::fsync_dir`]).
    pub batches_failed: u64,
    /// Locks asked for and granted; callbacks that flushed a directory.
    pub grants: u64,
    pub callbacks: u64,
}

/// The cache of one client.
pub struct Wbc {
    enabled: AtomicBool,
    config: WbcConfig,
    dirs: Mutex<HashMap<Fid, Dir>>,
    /// Directories not to ask for again before the instant (refused, or called back).
    refused: Mutex<HashMap<Fid, Instant>>,
    /// How many times each directory was called back from this cache.
    called_back: Mutex<HashMap<Fid, u32>>,
    /// Unlinks sent to the MDS by directory, since the last ask there (see `wbc_unlink`).
    unlinks: Mutex<HashMap<Fid, u32>>,
    /// Write-back locks called back while their grant was still reading the directory's
    /// names (checked and changed only under `dirs`'s mutex, so a grant and a callback are
    /// ordered: the grant sees the mark, or the callback sees the directory).
    called_back_granting: Mutex<std::collections::HashSet<LockHandle>>,
    /// Grants asked for and not yet settled (a callback may be for one of them).
    granting: AtomicU64,
    /// One batch in flight at a time, so that they land in the order they were made.
    sending: tokio::sync::Mutex<()>,
    /// The first error of a batch that failed since the last `fsync_dir` (as a write error
    /// is reported by the next fsync).
    failed: Mutex<Option<WeftError>>,
    ops: AtomicU64,
    batches: AtomicU64,
    ops_sent: AtomicU64,
    batches_failed: AtomicU64,
    grants: AtomicU64,
    callbacks: AtomicU64,
}

impl Wbc {
    pub(crate) fn new(config: WbcConfig) -> Wbc {
        let config = WbcConfig { batch_ops: config.batch_ops.clamp(1, BATCH_OPS_MAX), ..config };
        Wbc {
            enabled: AtomicBool::new(config.enabled),
            config,
            dirs: Mutex::default(),
            refused: Mutex::default(),
            called_back: Mutex::default(),
            unlinks: Mutex::default(),
            called_back_granting: Mutex::default(),
            granting: AtomicU64::new(0),
            sending: tokio::sync::Mutex::new(()),
            failed: Mutex::default(),
            ops: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            ops_sent: AtomicU64::new(0),
            batches_failed: AtomicU64::new(0),
            grants: AtomicU64::new(0),
            callbacks: AtomicU64::new(0),
        }
    }

    fn dirs(&self) -> std::sync::MutexGuard<'_, HashMap<Fid, Dir>> {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn refused_until(&self, dir: Fid, until: Instant) {
        self.refused.lock().unwrap_or_else(|p| p.into_inner()).insert(dir, until);
    }

    fn may_ask(&self, dir: Fid) -> bool {
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        match refused.get(&dir) {
            Some(until) if *until > Instant::now() => false,
            Some(_) => {
                refused.remove(&dir);
                true
            }
            None => true,
        }
    }

    /// Counts an unlink in `dir` while the cache does not hold it (it goes to the MDS
    /// unless this count asks for the directory); true each time the count reaches
    /// `WBC_UNLINKS_BEFORE_GRANT` (then it starts again).
    fn unlinks_reach_grant(&self, dir: Fid) -> bool {
        let mut unlinks = self.unlinks.lock().unwrap_or_else(|p| p.into_inner());
        if unlinks.len() >= crate::limits::WBC_UNLINK_DIRS_MAX {
            unlinks.clear();
        }
        let n = unlinks.entry(dir).or_insert(0);
        *n += 1;
        if *n < crate::limits::WBC_UNLINKS_BEFORE_GRANT {
            return false;
        }
        unlinks.remove(&dir);
        true
    }

    /// The held directory a file made here is in.
    fn dir_of_made(&self, fid: Fid) -> Option<Fid> {
        self.dirs().iter().find(|(_, d)| d.made.contains_key(&fid)).map(|(f, _)| *f)
    }

    /// Forgets everything (an eviction: the MDT dropped the locks; what was not sent is lost).
    pub(crate) fn clear(&self) {
        let lost: usize = self.dirs().drain().map(|(_, d)| d.pending.len()).sum();
        if lost > 0 {
            tracing::warn!("{lost} metadata changes of the write-back cache not yet sent are lost with the eviction");
            self.fail(WeftError::io(format!("{lost} metadata changes were lost with this client's eviction")));
        }
    }

    fn fail(&self, e: WeftError) {
        self.failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
    }
}

fn now_ts() -> Timestamp {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp { sec: d.as_secs() as i64, nsec: d.subsec_nanos() }
}

impl Client {
    /// Turns the metadata write-back cache on or off (off sends what it holds first).
    pub async fn set_wbc(&self, on: bool) -> WeftResult<()> {
        self.wbc.enabled.store(on, Ordering::Release);
        if !on {
            self.wbc_leave_all().await?;
        }
        Ok(())
    }

    pub fn wbc_enabled(&self) -> bool {
        self.wbc.enabled.load(Ordering::Acquire)
    }

    /// What the write-back cache did so far.
    pub fn wbc_stats(&self) -> WbcStats {
        let w = &self.wbc;
        WbcStats {
            ops: w.ops.load(Ordering::Relaxed),
            batches: w.batches.load(Ordering::Relaxed),
            ops_sent: w.ops_sent.load(Ordering::Relaxed),
            batches_failed: w.batches_failed.load(Ordering::Relaxed),
            grants: w.grants.load(Ordering::Relaxed),
            callbacks: w.callbacks.load(Ordering::Relaxed),
        }
    }

    /// Whether this client holds `dir` for its write-back cache now (its lock granted).
    pub fn wbc_holds(&self, dir: Fid) -> bool {
        let handle = self.wbc.dirs().get(&dir).map(|d| d.lock.handle);
        handle.is_some_and(|h| self.locks.still_holds(dir, h))
    }

    /// Creates an empty regular file `name` in `parent` and does not open it (open with
    /// O_CREAT|O_EXCL and close at once: mdtest's create, touch). Made here when the
    /// write-back cache is on and holds the directory (asked for on the first create);
    /// else a create and a close at the MDT. The FID is final.
    pub async fn create_file(&self, who: &Caller, parent: Fid, name: &[u8], mode: u32) -> WeftResult<InodeInfo> {
        if let Some(made) = self.wbc_create(who, parent, name, mode).await {
            return made;
        }
        let opened = self.create(who, parent, name, mode, true, None, OPEN_READ).await?;
        self.close(who, opened.inode.attr.fid, opened.handle, None).await?;
        Ok(opened.inode)
    }

    /// [`Client::create_file`] by the write-back cache alone: None when it does not hold
    /// `parent` (off, refused, called back), and the caller makes the file at the MDT as
    /// it would without the cache (an open create, say, which costs one request, where
    /// create_file's create and close cost two).
    pub async fn wbc_create(&self, who: &Caller, parent: Fid, name: &[u8], mode: u32) -> Option<WeftResult<InodeInfo>> {
        if self.wbc_enabled() && self.wbc_hold(who, parent).await {
            loop {
                let needs = {
                    let mut dirs = self.wbc.dirs();
                    match dirs.get_mut(&parent) {
                        // The listing at its bound: the directory goes back (below).
                        Some(d) if d.names.len() >= crate::limits::WBC_LISTING_MAX && !d.closing => {
                            CreateNeeds::Closing
                        }
                        Some(d) => match d.create(who, name, mode, now_ts(), Instant::now()) {
                            Ok(needs) => needs,
                            Err(e) => return Some(Err(e)),
                        },
                        None => break, // called back meanwhile
                    }
                };
                match needs {
                    CreateNeeds::Made(inode) => {
                        self.wbc.ops.fetch_add(1, Ordering::Relaxed);
                        self.wbc_after_op(parent).await;
                        return Some(Ok(*inode));
                    }
                    CreateNeeds::Fids => {
                        if !self.wbc_grant(who, parent).await {
                            break;
                        }
                    }
                    CreateNeeds::Flush => {
                        if let Err(e) = self.wbc_flush(parent).await {
                            return Some(Err(e));
                        }
                    }
                    CreateNeeds::Closing => {
                        if self.wbc.dirs().get(&parent).is_some_and(|d| !d.closing) {
                            self.wbc.refused_until(parent, Instant::now() + Duration::from_secs(3600));
                            if let Err(e) = self.wbc_leave(parent).await {
                                return Some(Err(e));
                            }
                        }
                        break;
                    }
                }
            }
        }
        None
    }

    /// Makes what the write-back cache holds of `dir` durable: its batches sent and
    /// committed. Reports a batch that failed since the last call (its changes are lost).
    pub async fn fsync_dir(&self, dir: Fid) -> WeftResult<()> {
        self.wbc_flush(dir).await?;
        match self.wbc.failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether this client holds `dir` now, asking the MDT for it if it may.
    async fn wbc_hold(&self, who: &Caller, dir: Fid) -> bool {
        if self.wbc_holds(dir) {
            return true;
        }
        if self.wbc.dirs().contains_key(&dir) {
            // Its lock went without a callback (a restart that did not keep it): send what
            // it holds under ordinary locks and start over.
            if self.wbc_leave(dir).await.is_err() {
                return false;
            }
        }
        self.wbc.may_ask(dir) && self.wbc_grant(who, dir).await
    }

    /// Asks for `dir`'s lock and FIDs (again, for FIDs, when held); reads the listing on a
    /// first grant. False when refused.
    async fn wbc_grant(&self, who: &Caller, dir: Fid) -> bool {
        self.wbc.granting.fetch_add(1, Ordering::AcqRel);
        let granted = self.wbc_grant_counted(who, dir).await;
        self.wbc.granting.fetch_sub(1, Ordering::AcqRel);
        granted
    }

    async fn wbc_grant_counted(&self, who: &Caller, dir: Fid) -> bool {
        let fids = self.wbc.config.fids_per_grant;
        let ticket = self.locks.ticket();
        let granted = match self.mdt(who, mdt::WbcGrant { dir, fids }).await {
            Ok(g) => g,
            Err(e) => {
                let back_off = if e.code == ErrorCode::Busy { 1 } else { 60 };
                tracing::debug!(%dir, error = %e, "no write-back cache in this directory now");
                self.wbc.refused_until(dir, Instant::now() + Duration::from_secs(back_off));
                return false;
            }
        };
        let Some(lock) = granted.dir.lock else { return false };
        self.note_inode_lock(&lock, ticket.id());
        drop(ticket);
        self.wbc.grants.fetch_add(1, Ordering::Relaxed);
        {
            let mut dirs = self.wbc.dirs();
            if let Some(d) = dirs.get_mut(&dir).filter(|d| d.lock.handle == lock.handle) {
                d.add_fids(granted.first, granted.count);
                return true;
            }
        }
        // A first grant: the names there now, which only this client changes from now on.
        let mut names = HashMap::new();
        let mut cookie = 0;
        loop {
            let page = match self.mdt(who, mdt::Readdir { fid: dir, cookie, max_entries: READDIR_ENTRIES_MAX }).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!(%dir, error = %e, "cannot list the directory for the write-back cache");
                    self.wbc_give_back(dir, lock.handle).await;
                    return false;
                }
            };
            for e in &page.entries {
                names.insert(e.name.clone(), (e.fid, e.kind));
            }
            if names.len() > crate::limits::WBC_LISTING_MAX {
                self.wbc_give_back(dir, lock.handle).await;
                self.wbc.refused_until(dir, Instant::now() + Duration::from_secs(3600));
                return false;
            }
            match page.entries.last() {
                Some(last) if !page.eof => cookie = last.cookie,
                _ => break,
            }
        }
        let handle = lock.handle;
        let mut d = Dir::new(lock, granted.dir.attr, names);
        d.add_fids(granted.first, granted.count);
        let mut dirs = self.wbc.dirs();
        // Called back while the names were read: the lock is going whole, and nothing may
        // be made under it (its batch would land under no lock). A callback from now on
        // finds the directory and sends its batch first.
        let gone = self.wbc.called_back_granting.lock().unwrap_or_else(|p| p.into_inner()).remove(&handle);
        if gone {
            drop(dirs);
            self.wbc.refused_until(dir, Instant::now() + crate::limits::WBC_CALLBACK_BACKOFF);
            return false;
        }
        dirs.insert(dir, d);
        true
    }

    async fn wbc_give_back(&self, dir: Fid, handle: LockHandle) {
        self.give_back_lock(LockTarget::Mdt(dir.mdt_index()), handle).await;
    }

    /// After an op was made here: a full batch goes now (in the background, one at a
    /// time), a first op starts the timer of its directory.
    async fn wbc_after_op(&self, dir: Fid) {
        let (pending, first) = match self.wbc.dirs().get(&dir) {
            Some(d) => (d.pending.len(), d.pending.len() == 1),
            None => return,
        };
        let batch = self.wbc.config.batch_ops;
        if pending >= 2 * batch {
            // Two batches' worth waiting: the maker waits for one to go (bounded memory).
            if let Err(e) = self.wbc_send_one(dir).await {
                tracing::warn!(%dir, error = %e, "a batch of the write-back cache failed");
            }
        } else if pending >= batch && pending % batch == 0 {
            self.wbc_spawn(dir, None);
        } else if first {
            self.wbc_spawn(dir, Some(Duration::from_millis(self.wbc.config.batch_ms)));
        }
    }

    /// A task that sends a batch of `dir`: at once (`every` None), or every `every` until
    /// nothing is left (the timer of a directory's oldest op).
    fn wbc_spawn(&self, dir: Fid, every: Option<Duration>) {
        let client = self.weak_self.clone();
        tokio::spawn(async move {
            loop {
                if let Some(pause) = every {
                    tokio::time::sleep(pause).await;
                }
                let Some(client) = client.upgrade() else { return };
                if let Err(e) = client.wbc_send_one(dir).await {
                    tracing::warn!(%dir, error = %e, "a batch of the write-back cache failed");
                }
                if every.is_none() || client.wbc_pending(dir) == 0 {
                    return;
                }
            }
        });
    }

    /// Sends one batch of `dir`'s pending ops (after the one in flight, if any).
    async fn wbc_send_one(&self, dir: Fid) -> WeftResult<()> {
        let _sending = self.wbc.sending.lock().await;
        let Some((ops, who)) = self.wbc.dirs().get_mut(&dir).and_then(|d| d.take(BATCH_OPS_MAX)) else {
            return Ok(());
        };
        self.wbc_send(dir, ops, &who).await
    }

    async fn wbc_send(&self, dir: Fid, ops: Vec<BatchOp>, who: &Caller) -> WeftResult<()> {
        let n = ops.len() as u64;
        match self.mdt(who, mdt::Batch { ops: ops.clone() }).await {
            Ok(()) => {
                if let Some(d) = self.wbc.dirs().get_mut(&dir) {
                    d.sent(&ops);
                }
                self.wbc.batches.fetch_add(1, Ordering::Relaxed);
                self.wbc.ops_sent.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                self.wbc.batches_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%dir, ops = n, error = %e, "the MDT refused a batch of the write-back cache; its changes are lost");
                if let Some(d) = self.wbc.dirs().get_mut(&dir) {
                    d.lost(&ops);
                }
                self.wbc.fail(e.clone());
                Err(e)
            }
        }
    }

    /// Sends everything `dir` holds, in order, and waits until the MDT applied it.
    pub(crate) async fn wbc_flush(&self, dir: Fid) -> WeftResult<()> {
        let _sending = self.wbc.sending.lock().await;
        let mut result = Ok(());
        loop {
            let Some((ops, who)) = self.wbc.dirs().get_mut(&dir).and_then(|d| d.take(BATCH_OPS_MAX)) else {
                return result;
            };
            if let Err(e) = self.wbc_send(dir, ops, &who).await {
                result = result.and(Err(e));
            }
        }
    }

    /// Sends what `dir` holds, then gives its lock back and forgets it: the cache does not
    /// follow the change about to be made there.
    pub(crate) async fn wbc_leave(&self, dir: Fid) -> WeftResult<()> {
        if !self.wbc_close(dir) {
            return Ok(());
        }
        let sent = self.wbc_flush(dir).await;
        let gone = self.wbc.dirs().remove(&dir);
        if let Some(d) = gone {
            self.wbc_give_back(dir, d.lock.handle).await;
        }
        sent
    }

    /// Marks `dir` as being given back (no new op is made there); whether it is held.
    fn wbc_close(&self, dir: Fid) -> bool {
        let mut dirs = self.wbc.dirs();
        let Some(d) = dirs.get_mut(&dir) else { return false };
        d.closing = true;
        true
    }

    /// Every directory held: sent and given back (the client ends, or the cache is turned off).
    pub(crate) async fn wbc_leave_all(&self) -> WeftResult<()> {
        let held: Vec<Fid> = self.wbc.dirs().keys().copied().collect();
        let mut result = Ok(());
        for dir in held {
            result = result.and(self.wbc_leave(dir).await);
        }
        result
    }

    /// A callback of lock `handle` of `target`: if it is a write-back lock, the directory's
    /// batches land first and it is forgotten here. Whether it was one (then the whole lock
    /// goes back).
    pub(crate) async fn wbc_called_back(&self, target: LockTarget, handle: LockHandle) -> bool {
        // A client that holds no directory and asks for none (every client without the
        // cache: the mount, the commands) answers its callbacks without looking further.
        if self.wbc.dirs().is_empty() && self.wbc.granting.load(Ordering::Acquire) == 0 {
            return false;
        }
        let is_wbc = |scope: Option<LockScope>| matches!(scope, Some(LockScope::Bits(b)) if b & bits::WBC != 0);
        if !matches!(target, LockTarget::Mdt(_)) || !is_wbc(self.locks.scope_of((target, handle)).await) {
            return false;
        }
        let dir = {
            let dirs = self.wbc.dirs();
            let dir = dirs
                .iter()
                .find(|(fid, d)| d.lock.handle == handle && LockTarget::Mdt(fid.mdt_index()) == target)
                .map(|(fid, _)| *fid);
            if dir.is_none() {
                // Its grant is still reading the names: it will not use the lock.
                let mut marks = self.wbc.called_back_granting.lock().unwrap_or_else(|p| p.into_inner());
                if marks.len() >= crate::limits::WBC_GRANTS_CALLED_BACK_MAX {
                    marks.clear();
                }
                marks.insert(handle);
                return true;
            }
            dir
        };
        let Some(dir) = dir else { return false };
        self.wbc_close(dir);
        self.wbc.callbacks.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.wbc_flush(dir).await {
            tracing::warn!(%dir, error = %e, "the write-back cache's last batch before a callback failed");
        }
        self.wbc.dirs().remove(&dir);
        // Someone else works here now: ordinary requests for a while, longer each time it
        // happens again (two clients creating in one directory would otherwise take it
        // from each other every second, each grant reading the names anew).
        let times = {
            let mut called = self.wbc.called_back.lock().unwrap_or_else(|p| p.into_inner());
            let times = called.entry(dir).or_insert(0);
            *times += 1;
            *times
        };
        let back_off = crate::limits::WBC_CALLBACK_BACKOFF.saturating_mul(1 << times.min(6).saturating_sub(1));
        self.wbc.refused_until(dir, Instant::now() + back_off.min(crate::limits::WBC_CALLBACK_BACKOFF_MAX));
        true
    }

    /// A lookup the cache answers: the file made here, or "no such name" (it knows every
    /// name of a directory it holds). None: ask the MDS.
    pub(crate) fn wbc_lookup(&self, parent: Fid, name: &[u8]) -> Option<WeftResult<InodeInfo>> {
        if !self.wbc_holds(parent) {
            return None;
        }
        let dirs = self.wbc.dirs();
        let d = dirs.get(&parent)?;
        match d.names.get(name) {
            None => Some(Err(WeftError::not_found(format!("no {} in {parent}", String::from_utf8_lossy(name))))),
            Some((fid, _)) => d.made.get(fid).cloned().map(Ok),
        }
    }

    /// The attributes of a file made here, or of a directory held.
    pub(crate) fn wbc_getattr(&self, fid: Fid) -> Option<InodeInfo> {
        let dirs = self.wbc.dirs();
        if dirs.is_empty() {
            return None;
        }
        dirs.values().find_map(|d| d.made.get(&fid).cloned())
    }

    /// Before an op on a file made here that the MDS must see (an open, a truncate, an
    /// xattr): its directory's batches go first.
    pub(crate) async fn wbc_before_use_of(&self, fid: Fid) -> WeftResult<()> {
        if self.wbc.dirs().is_empty() {
            return Ok(());
        }
        match self.wbc.dir_of_made(fid) {
            Some(dir) => self.wbc_flush(dir).await,
            None => Ok(()),
        }
    }

    /// Before an op the MDS makes in `dir` (a listing, a create with an open, a mkdir, an
    /// unlink of a name that was there before): what the cache holds of it is sent first.
    pub(crate) async fn wbc_flush_held(&self, dir: Fid) -> WeftResult<()> {
        if !self.wbc.dirs().contains_key(&dir) {
            return Ok(());
        }
        self.wbc_flush(dir).await
    }

    /// An unlink the cache does: Some when it did (or the name is not there). A directory
    /// not held is asked for once this client has removed a few names there through the
    /// MDS (`rm -r`, mdtest's deletes, a purge): a single `rm` does not read a listing.
    pub(crate) async fn wbc_unlink(&self, who: &Caller, parent: Fid, name: &[u8]) -> Option<WeftResult<()>> {
        let held = self.wbc_holds(parent)
            || (self.wbc_enabled() && self.wbc.unlinks_reach_grant(parent) && self.wbc_hold(who, parent).await);
        if !held {
            return None;
        }
        let done = {
            let mut dirs = self.wbc.dirs();
            dirs.get_mut(&parent)?.unlink(who, name, now_ts(), Instant::now())
        };
        match done {
            Ok(true) => {
                self.wbc.ops.fetch_add(1, Ordering::Relaxed);
                self.wbc_after_op(parent).await;
                Some(Ok(()))
            }
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// A setattr the cache does (mode and times of a file made here by its owner).
    pub(crate) async fn wbc_setattr(&self, who: &Caller, fid: Fid, set: &SetAttr) -> Option<InodeInfo> {
        let dir = self.wbc.dir_of_made(fid)?;
        if !self.wbc_holds(dir) {
            return None;
        }
        let done = self.wbc.dirs().get_mut(&dir)?.setattr(who, fid, set, now_ts(), Instant::now())?;
        self.wbc.ops.fetch_add(1, Ordering::Relaxed);
        self.wbc_after_op(dir).await;
        Some(done)
    }

    /// Keeps a held directory's listing right after an op the MDS made in it: `name` now
    /// leads to `to` (None: removed).
    pub(crate) fn wbc_note_name(&self, parent: Fid, name: &[u8], to: Option<(Fid, FileType)>) {
        let mut dirs = self.wbc.dirs();
        let Some(d) = dirs.get_mut(&parent) else { return };
        match to {
            Some(entry) => d.names.insert(name.to_vec(), entry),
            None => d.names.remove(name),
        };
    }

    /// How many ops of `dir` this cache holds not yet sent.
    pub fn wbc_pending(&self, dir: Fid) -> usize {
        self.wbc.dirs().get(&dir).map_or(0, |d| d.pending.len())
    }

    /// Whether `fid` is a file made here and not a directory (for tests).
    pub fn wbc_made(&self, fid: Fid) -> bool {
        self.wbc_getattr(fid).is_some_and(|i| i.attr.kind == FileType::Regular)
    }
}
