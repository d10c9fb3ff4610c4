//! The object storage service: several OSTs per process, each a directory of object files
//! addressed by FID.
//!
//! One local file per object keeps the Linux page cache (readahead, write-back) and sparse
//! files for free, which is most of what an object store needs; the cost is a file per
//! object, which hashed directories keep manageable. See [`store::FileStore`] for the on-disk
//! layout. An OST's request logic reaches its objects only through [`store::ObjectStore`], so
//! tests and simulations can serve OSTs from memory ([`store::MemStore`]) and inject disk
//! faults and power losses ([`store::FaultStore`]) with [`Oss::with_stores`].
//!
//! No networking here: weft-server decodes requests, schedules them and calls
//! [`Oss::handle`], which runs each on the calling task or on tokio's blocking pool as the
//! scheduler said: small I/O that the page cache answers in microseconds inline, anything
//! that may wait on a disk where an async runtime thread does not wait for it.

mod commit;
mod durable;
mod handles;
pub mod limits;
mod ost;
mod quota;
pub mod store;
mod target;

pub use target::TARGET_FORMAT_VERSION;

use bytes::Bytes;
use ost::Ost;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use store::{FileStore, ObjectStore};
use weft_proto::msg::{OstReply, OstRequest, Run};
use weft_proto::{WeftError, WeftResult};

/// One OST this process serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OstConfig {
    pub index: u32,
    pub dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OssConfig {
    pub fsname: String,
    pub osts: Vec<OstConfig>,
}

/// The OSTs of one process.
#[derive(Debug)]
pub struct Oss {
    fsname: String,
    /// Keyed by index: sparse indices are normal, so never a vector indexed by it. Changes
    /// at run time when a failover OST comes or goes ([`Oss::add_ost`], [`Oss::stop_ost`]):
    /// a request takes the read side only long enough to clone its OST's Arc.
    osts: RwLock<BTreeMap<u32, Arc<Ost>>>,
}

impl Oss {
    /// Opens (formatting when new) each OST directory. Format = a small TOML file `target` in
    /// the dir holding fsname, index and a format version; opening an OST dir formatted for
    /// another fsname/index/version is an error naming the dir and both values. Creates
    /// `O/<seq hex>/d0..d31` dirs.
    pub fn open(cfg: OssConfig) -> WeftResult<Arc<Oss>> {
        if cfg.fsname.is_empty() {
            return Err(WeftError::invalid("the file system name (fsname) is empty"));
        }
        let mut osts = BTreeMap::new();
        for ost_cfg in cfg.osts {
            // Before the directory is touched: a second OST of the same index must not
            // format its directory on its way to failing.
            refuse_twice(&osts, ost_cfg.index)?;
            osts.insert(ost_cfg.index, Arc::new(open_ost(&cfg.fsname, &ost_cfg)?));
        }
        warn_if_descriptors_short(osts.len());
        Ok(Arc::new(Oss { fsname: cfg.fsname, osts: RwLock::new(osts) }))
    }

    /// Opens one more OST (a failover OST this process takes over), as [`Oss::open`] opens
    /// each: its LAST_ID and objects are read from its directory now, so what the server
    /// that served it before wrote there is what this one serves.
    pub fn add_ost(&self, cfg: &OstConfig) -> WeftResult<()> {
        if self.osts.read().unwrap_or_else(|p| p.into_inner()).contains_key(&cfg.index) {
            return Err(WeftError::invalid(format!("OST index {} is served by this process already", cfg.index)));
        }
        let ost = Arc::new(open_ost(&self.fsname, cfg)?);
        let mut osts = self.osts.write().unwrap_or_else(|p| p.into_inner());
        refuse_twice(&osts, cfg.index)?;
        osts.insert(cfg.index, ost);
        Ok(())
    }

    /// Stops serving OST `index` (its failover server takes it): requests that come after
    /// are answered NotFound here (weft-server answers `Moved` before they get here); those
    /// under way finish on the OST they started on. Whether it was served.
    pub fn stop_ost(&self, index: u32) -> bool {
        self.osts.write().unwrap_or_else(|p| p.into_inner()).remove(&index).is_some()
    }

    /// The OSTs of `stores`, each over the store given with its index: for tests and
    /// simulations, which keep objects in memory ([`store::MemStore`]) or inject faults
    /// ([`store::FaultStore`]). No directory and no `target` file: the caller chose the
    /// stores, so there is no configuration to check them against.
    pub fn with_stores(fsname: &str, stores: Vec<(u32, Box<dyn ObjectStore>)>) -> WeftResult<Arc<Oss>> {
        if fsname.is_empty() {
            return Err(WeftError::invalid("the file system name (fsname) is empty"));
        }
        let mut osts = BTreeMap::new();
        for (index, store) in stores {
            refuse_twice(&osts, index)?;
            osts.insert(index, Arc::new(Ost::new(index, store)?));
        }
        Ok(Arc::new(Oss { fsname: fsname.to_string(), osts: RwLock::new(osts) }))
    }

    #[cfg(test)]
    fn ost_for_test(&self, index: u32) -> Arc<Ost> {
        self.osts.read().unwrap_or_else(|p| p.into_inner())[&index].clone()
    }

    /// Commits every OST with changes waiting (commit.rs), for the server's periodic
    /// commit: blocking I/O, run off the async threads. An OST whose commit fails says so
    /// in the log and tries again next time; the others go on.
    pub fn commit_all(&self) {
        let osts: Vec<Arc<Ost>> = self.osts.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for ost in osts.iter().filter(|o| o.commit_pending()) {
            if let Err(e) = ost.commit() {
                tracing::warn!("periodic commit: {e}");
            }
        }
    }

    /// The indices this process serves, ascending.
    pub fn ost_indices(&self) -> Vec<u32> {
        self.osts.read().unwrap_or_else(|p| p.into_inner()).keys().copied().collect()
    }

    /// Executes one OstRequest on OST `ost` (NotFound if this process does not serve it),
    /// on this task or on the blocking pool as `run` says (the server's scheduler decides;
    /// see weft-rpc's FIFO policy for why small I/O runs inline). `bulk` is the request's
    /// data (for Write; checksum already verified by the transport). Returns the reply and
    /// the reply bulk (data for Read, empty otherwise).
    pub async fn handle(&self, ost: u32, req: OstRequest, bulk: Bytes, run: Run) -> (WeftResult<OstReply>, Bytes) {
        let found = self.osts.read().unwrap_or_else(|p| p.into_inner()).get(&ost).cloned();
        let Some(target) = found else {
            return (Err(WeftError::not_found(format!("OST {ost} is not served by this process"))), Bytes::new());
        };
        if run == Run::Inline {
            return target.execute(&req, &bulk);
        }
        match tokio::task::spawn_blocking(move || target.execute(&req, &bulk)).await {
            Ok(result) => result,
            // Only a panic (a bug) or a runtime shutdown gets here.
            Err(e) => (Err(WeftError::io(format!("OST {ost}: request did not complete: {e}"))), Bytes::new()),
        }
    }
}

/// Whether `dir` holds an OST already (it was served before: it may have had clients).
pub fn formatted(dir: &std::path::Path) -> bool {
    dir.join(target::TARGET_FILE_NAME).is_file()
}

/// Checks (formatting when new) and opens one OST directory.
fn open_ost(fsname: &str, cfg: &OstConfig) -> WeftResult<Ost> {
    target::open_or_format(&cfg.dir, fsname, cfg.index)?;
    let store =
        FileStore::open(&cfg.dir, weft_proto::Fid::object_seq(cfg.index)).map_err(|e| ost::ost_error(cfg.index, e))?;
    Ost::new(cfg.index, Box::new(store))
}

fn refuse_twice(osts: &BTreeMap<u32, Arc<Ost>>, index: u32) -> WeftResult<()> {
    if osts.contains_key(&index) {
        return Err(WeftError::invalid(format!("OST index {index} is configured twice in this process")));
    }
    Ok(())
}

/// The locks of this crate guard state that stays usable after a holder panicked (a flag,
/// LAST_ID, a map of objects), so a poisoned lock is used rather than failing every later
/// request of the OST.
pub(crate) fn lock_unpoisoned<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Each OST may hold [`limits::OPEN_FILES_MAX`] descriptors in each of its two caches, all
/// of them together [`limits::OPEN_FILES_PROCESS_MAX`]. Raising the limit is the
/// binary's business (it is process-wide); a short limit shows up here, at start, rather than
/// as EMFILE errors under load.
fn warn_if_descriptors_short(ost_count: usize) {
    // SAFETY: getrlimit only writes the struct we pass.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let needed = ost_count.saturating_mul(2 * limits::OPEN_FILES_MAX).min(limits::OPEN_FILES_PROCESS_MAX) as u64;
    if limit.rlim_cur != libc::RLIM_INFINITY && (limit.rlim_cur as u64) < needed {
        tracing::warn!(
            open_files_limit = limit.rlim_cur as u64,
            needed,
            "the open files limit (ulimit -n) is below what {ost_count} OSTs may cache; expect EMFILE under load"
        );
    }
}

#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod tests;
