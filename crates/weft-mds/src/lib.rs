//! The metadata service: one MDT on redb, with group commit, a reply cache, precreated
//! objects and background destroys. No networking: `weft-server` wires [`Mds::handle`] to the
//! network and implements [`ObjectTargets`] over it.
//!
//! # The request path inside the MDS
//!
//! ```text
//! Mds::handle(header, request)
//!   ├─ read (lookup, getattr, readdir, getxattr, ...): a redb read transaction, inline,
//!   │    ops::read → reply. Never waits for the writer.
//!   └─ mutation:
//!        1. reply cache probe (read transaction): a resend returns the stored reply;
//!        2. Create / SetStripe on a file: choose OSTs and take object ids from the
//!           in-memory precreate pools (objects.rs), waiting briefly for a refill;
//!        3. bounded channel (COMMIT_QUEUE_OPS_MAX) → the ONE writer thread (writer.rs);
//!        4. the writer drains up to COMMIT_BATCH_OPS_MAX jobs into ONE write transaction:
//!           per job, reply cache probe again (authoritative), then ops::execute
//!           (check-then-write), then the reply is stored in the reply cache, same transaction;
//!        5. one durable commit for the batch, then each caller gets its reply (oneshot).
//! ```
//!
//! Background tasks (background.rs): precreate refill, destroy queue, reply-cache pruning.
//! Their writes also go through the writer thread, so there is one writer.
//!
//! # Size on the MDT (Lustre's lazy size)
//!
//! A regular file's `Attr.size_known` is true only when its size was recorded by a closing
//! writer (`Close { size_blocks: Some(..) }`) and no writer has it open now; otherwise the
//! client derives the size from the objects.
//!
//! # Reply cache key
//!
//! `(client_id, request_id)`; `request_id == 0` means "not resendable" and is never cached.

pub mod background;
pub mod journal;
pub mod limits;
pub mod locking;
pub mod objects;
pub mod open_files;
pub mod ops;
pub mod perm;
pub mod schema;
pub mod store;
pub mod writer;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

use crate::objects::{Objects, Reservation};
use crate::open_files::OpenFiles;
use crate::schema::InodeRecord;
use crate::store::storage_err;
use crate::writer::{InternalOp, Job};
use futures::future::BoxFuture;
use redb::{Database, ReadableDatabase};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot, Notify};
use weft_proto::msg::{ClusterMap, FileType, MdtReply, MdtRequest, RequestHeader, Timestamp};
use weft_proto::{ErrorCode, Fid, StripeSpec, WeftError, WeftResult};

pub struct MdsConfig {
    /// The MDT's directory; the redb file lives inside.
    pub data_dir: PathBuf,
    pub mdt_index: u32,
    /// Objects asked per precreate call.
    pub precreate_batch: u32,
}

impl MdsConfig {
    pub fn new(data_dir: PathBuf, mdt_index: u32) -> Self {
        MdsConfig { data_dir, mdt_index, precreate_batch: 256 }
    }
}

/// How the MDS reaches the OSTs (implemented over the network by weft-server; in-memory
/// fake in tests).
pub trait ObjectTargets: Send + Sync + 'static {
    /// Create empty objects start_oid..start_oid+count-1 on that OST; returns the last oid created.
    fn precreate(&self, ost: u32, start_oid: u32, count: u32) -> BoxFuture<'static, WeftResult<u32>>;
    /// Remove an object; removing a missing object succeeds.
    fn destroy(&self, ost: u32, fid: Fid) -> BoxFuture<'static, WeftResult<()>>;
}

/// Counters for tests and monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MdsStats {
    /// Write transactions committed.
    pub commits: u64,
    /// Mutations executed (reply-cache hits excluded).
    pub mutations: u64,
    /// Mutations answered from the reply cache.
    pub reply_cache_hits: u64,
    /// Most jobs in one committed batch.
    pub batch_ops_max: u64,
    /// Objects confirmed destroyed by the OSTs.
    pub objects_destroyed: u64,
    /// Open handles now.
    pub open_handles: u64,
}

#[derive(Default)]
pub(crate) struct StatCounters {
    pub commits: AtomicU64,
    pub mutations: AtomicU64,
    pub reply_cache_hits: AtomicU64,
    pub batch_ops_max: AtomicU64,
    pub objects_destroyed: AtomicU64,
}

/// State shared by the request path, the writer thread and the background tasks.
pub struct Core {
    pub mdt_index: u32,
    pub data_dir: PathBuf,
    pub precreate_batch: u32,
    pub db: Database,
    pub open_files: Mutex<OpenFiles>,
    pub objects: Objects,
    pub targets: Arc<dyn ObjectTargets>,
    /// Used by the writer thread only; see journal.rs.
    pub journal: Mutex<journal::Journal>,
    pub(crate) stats: StatCounters,
    /// Wakes the destroy task after a commit.
    pub destroy_wake: Notify,
}

impl Core {
    pub fn open_files(&self) -> std::sync::MutexGuard<'_, OpenFiles> {
        self.open_files.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct Mds {
    core: Arc<Core>,
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    stopping: AtomicBool,
    locks: std::sync::OnceLock<Arc<weft_dlm::namespace::Namespace>>,
}

/// The server clock.
pub fn now() -> Timestamp {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp { sec: d.as_secs() as i64, nsec: d.subsec_nanos() }
}

impl Mds {
    /// Opens (or formats) the MDT, creates the root directory when new, destroys orphans left
    /// by a crash, and starts the writer thread and background tasks. Must be called inside
    /// a tokio runtime.
    pub fn open(cfg: MdsConfig, targets: Arc<dyn ObjectTargets>) -> WeftResult<Arc<Mds>> {
        assert!(cfg.precreate_batch > 0, "precreate_batch must be positive");
        std::fs::create_dir_all(&cfg.data_dir).map_err(|e| {
            WeftError::new(ErrorCode::Io, format!("cannot create MDT directory {}: {e}", cfg.data_dir.display()))
        })?;
        let path = cfg.data_dir.join(schema::DB_FILE_NAME);
        let db = Database::create(&path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => WeftError::new(
                ErrorCode::Busy,
                format!("MDT database {} is already open (another MDS running on it?)", path.display()),
            ),
            e => WeftError::io(format!("cannot open MDT database {}: {e}", path.display())),
        })?;
        writer::format_or_check(&db, cfg.mdt_index)?;
        let journal_seq = writer::replay_journal(&db, &cfg.data_dir)?;
        let orphans = writer::destroy_orphans(&db)?;
        if orphans > 0 {
            tracing::info!(orphans, "destroyed orphan inodes left open before the restart");
        }
        let core = Arc::new(Core {
            mdt_index: cfg.mdt_index,
            data_dir: cfg.data_dir.clone(),
            precreate_batch: cfg.precreate_batch,
            db,
            open_files: Mutex::new(OpenFiles::default()),
            objects: Objects::default(),
            targets,
            journal: Mutex::new(journal::Journal::open(&cfg.data_dir, journal_seq)?),
            stats: StatCounters::default(),
            destroy_wake: Notify::new(),
        });
        let (tx, rx) = mpsc::channel(limits::COMMIT_QUEUE_OPS_MAX);
        let writer_core = core.clone();
        let writer_thread = std::thread::Builder::new()
            .name(format!("mdt{}-writer", cfg.mdt_index))
            .spawn(move || writer::run(writer_core, rx))
            .map_err(|e| WeftError::io(format!("cannot start the MDT writer thread: {e}")))?;
        let tasks = background::spawn_all(core.clone(), tx.clone());
        Ok(Arc::new(Mds {
            core,
            tx: Mutex::new(Some(tx)),
            writer_thread: Mutex::new(Some(writer_thread)),
            tasks: Mutex::new(tasks),
            stopping: AtomicBool::new(false),
            locks: std::sync::OnceLock::new(),
        }))
    }

    /// Which OSTs exist, their state, pools. Called at start and whenever the map changes.
    pub fn set_cluster_map(&self, map: &ClusterMap) {
        let stored = |ost: u32| -> (u32, u32) {
            let r = (|| -> WeftResult<Option<(u32, u32)>> {
                let txn = self.core.db.begin_read().map_err(storage_err)?;
                store::read_tables(&txn)?.precreate_state(ost)
            })();
            match r {
                Ok(Some(s)) => s,
                Ok(None) => (1, 0),
                Err(e) => {
                    // Starting from the beginning would hand out objects in use: refuse the OST
                    // (empty pool that never refills) rather than guess.
                    tracing::error!(ost, error = %e, "cannot read the precreate state of an OST");
                    (u32::MAX, u32::MAX - 1)
                }
            }
        };
        self.core.objects.set_map(map, stored);
    }

    pub fn stats(&self) -> MdsStats {
        let s = &self.core.stats;
        MdsStats {
            commits: s.commits.load(Ordering::Relaxed),
            mutations: s.mutations.load(Ordering::Relaxed),
            reply_cache_hits: s.reply_cache_hits.load(Ordering::Relaxed),
            batch_ops_max: s.batch_ops_max.load(Ordering::Relaxed),
            objects_destroyed: s.objects_destroyed.load(Ordering::Relaxed),
            open_handles: self.core.open_files().len() as u64,
        }
    }

    /// The MDT's lock namespace: once set, every request goes through [`locking`] (changes
    /// call back the clients caching what they change; answers carry intent locks).
    pub fn set_lock_namespace(&self, ns: Arc<weft_dlm::namespace::Namespace>) {
        let _ = self.locks.set(ns);
    }

    /// Executes one request.
    pub async fn handle(&self, header: &RequestHeader, req: MdtRequest) -> WeftResult<MdtReply> {
        match self.locks.get() {
            Some(ns) => locking::handle(self, ns, header, req).await,
            None => self.execute(header, req).await,
        }
    }

    /// Executes one request without taking locks.
    pub(crate) async fn execute(&self, header: &RequestHeader, req: MdtRequest) -> WeftResult<MdtReply> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(WeftError::new(ErrorCode::Again, "the MDS is shutting down; retry on its successor"));
        }
        if !req.is_mutation() {
            let txn = self.core.db.begin_read().map_err(storage_err)?;
            let tables = store::read_tables(&txn)?;
            return ops::read(&self.core, &tables, &header.identity, &req);
        }
        if header.request_id != 0 {
            let txn = self.core.db.begin_read().map_err(storage_err)?;
            if let Some(reply) = store::read_tables(&txn)?.cached_reply(header.client_id, header.request_id)? {
                self.core.stats.reply_cache_hits.fetch_add(1, Ordering::Relaxed);
                return reply;
            }
        }
        let reservation = self.prepare_objects(header, &req).await?;
        let (reply_tx, reply_rx) = oneshot::channel();
        self.send(Job::Request { header: header.clone(), req, reservation, reply: reply_tx }).await?;
        reply_rx.await.map_err(|_| WeftError::io("the MDT writer stopped before answering"))?
    }

    async fn send(&self, job: Job) -> WeftResult<()> {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let tx = tx.ok_or_else(|| WeftError::new(ErrorCode::Again, "the MDS is shutting down"))?;
        tx.send(job).await.map_err(|_| WeftError::new(ErrorCode::Again, "the MDT writer stopped"))
    }

    /// For a create of a new file or a new layout on an empty file: checks what can be
    /// checked without the writer and reserves objects. Errors here are not cached (nothing
    /// happened); `None` lets the writer decide (it reports the error, or the name exists).
    async fn prepare_objects(&self, header: &RequestHeader, req: &MdtRequest) -> WeftResult<Option<Reservation>> {
        let spec = {
            let txn = self.core.db.begin_read().map_err(storage_err)?;
            let t = store::read_tables(&txn)?;
            match req {
                MdtRequest::Create { parent, name, spec, .. } => {
                    ops::create::prepare(&t, &header.identity, *parent, name, spec.as_ref())?
                }
                MdtRequest::SetStripe { fid, spec } => ops::stripe::prepare(&self.core, &t, *fid, spec)?,
                _ => None,
            }
        };
        match spec {
            Some(spec) => Ok(Some(self.core.objects.reserve(&spec).await?)),
            None => Ok(None),
        }
    }

    /// Removes reply-cache entries stored more than `age_secs` ago (at most
    /// REPLY_CACHE_PRUNE_ENTRIES_MAX per call); returns how many. The background task does
    /// this every REPLY_CACHE_PRUNE_INTERVAL_MS with REPLY_CACHE_AGE_SECS_MAX.
    pub async fn prune_reply_cache(&self, age_secs: u64) -> WeftResult<u64> {
        let (done, rx) = oneshot::channel();
        let before = (now().sec.max(0) as u64).saturating_sub(age_secs).saturating_add(1);
        self.send(Job::Internal { op: InternalOp::PruneReplies { before_secs: before }, done }).await?;
        rx.await.map_err(|_| WeftError::io("the MDT writer stopped before answering"))?
    }

    /// Stops background tasks, waits for the in-flight batch to commit.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
        // A last durable checkpoint, so that a clean restart has no journal to replay.
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(tx) = tx {
            let (done, rx) = tokio::sync::oneshot::channel();
            if tx.send(Job::Internal { op: writer::InternalOp::Checkpoint, done }).await.is_ok() {
                if let Ok(Err(e)) = rx.await {
                    tracing::warn!(error = %e, "the final MDT checkpoint failed; the journal will be replayed at the next start");
                }
            }
        }
        // Dropping the last sender ends the writer once the queued jobs are committed.
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let thread = self.writer_thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for Mds {
    fn drop(&mut self) {
        for t in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            t.abort();
        }
    }
}

/// The inode an operation returns, with the open counts applied to the size rule.
pub fn inode_info(core: &Core, fid: Fid, rec: &InodeRecord) -> weft_proto::msg::InodeInfo {
    let writers = if rec.kind == FileType::Regular { core.open_files().counts(fid).writers } else { 0 };
    ops::inode_info_with(fid, rec, writers)
}

/// The directory default a new file under `dir` inherits: its own, else the root's.
pub fn inherited_spec<T: redb::ReadableTable<schema::Bytes, schema::Bytes>>(
    t: &store::Tables<T>,
    dir: &InodeRecord,
) -> WeftResult<StripeSpec> {
    if let Some(d) = &dir.dir_default {
        return Ok(d.clone());
    }
    if let Some(root) = t.inode(Fid::ROOT)? {
        if let Some(d) = root.dir_default {
            return Ok(d);
        }
    }
    Ok(StripeSpec::unset())
}
