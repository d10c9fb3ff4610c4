//! One OST: a directory of object files. Every function here blocks (file I/O); the service
//! calls them on tokio's blocking pool.
//!
//! Layout of an OST directory (format version 1, see [`crate::target`]):
//! ```text
//! <dir>/target                     fsname, index, format version (TOML)
//! <dir>/O/<seq hex>/LAST_ID        highest precreated object id, decimal text
//! <dir>/O/<seq hex>/d<oid % 32>/<oid>   one file per object, sparse, its bytes are the object's;
//!                                       made by the object's first write or a passthrough
//!                                       open (`LocalPath`): a missing file is an empty object
//! ```
//! The object id alone names the file: a FID's version is not part of an object's identity.

use crate::durable;
use crate::handles::{HandleCache, Lookup};
use crate::limits::{LAST_ID_FILE_BYTES_MAX, OBJECT_DIRS_COUNT, PRECREATE_COUNT_MAX};
use bytes::{Bytes, BytesMut};
use std::fs::OpenOptions;
use std::io::{ErrorKind, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use weft_proto::limits::{BULK_BYTES_MAX, FILE_SIZE_MAX_BYTES};
use weft_proto::msg::ops::{Op, Payload};
use weft_proto::msg::{ost, OstReply, OstRequest, StatfsInfo};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

const LAST_ID_FILE_NAME: &str = "LAST_ID";

#[derive(Debug)]
pub(crate) struct Ost {
    index: u32,
    seq: u64,
    dir: PathBuf,
    /// `<dir>/O/<seq hex>`.
    seq_dir: PathBuf,
    handles: HandleCache,
    /// The persisted LAST_ID. The lock also serializes precreations, so LAST_ID only grows.
    last_id: Mutex<u32>,
    /// Per object directory (`d<n>`): a name may have been made in it since its last fsync,
    /// so a data sync of any object in it must also fsync it to make names durable (this
    /// file system may have no journal). One flag per directory, not per object: a create
    /// costs no fsync, and one directory fsync covers every name made before it. The mutex
    /// is held across the fsync: a sync that finds the flag clear knows the fsync is done.
    dirs_unsynced: Vec<Mutex<bool>>,
}

impl Ost {
    /// Opens an OST directory whose `target` file was already checked.
    pub fn open(index: u32, dir: PathBuf) -> WeftResult<Ost> {
        // Absolute, so that object paths handed to a client (LocalPath) hold anywhere.
        let dir = std::path::absolute(&dir)
            .map_err(|e| WeftError::io(format!("OST {index}: cannot make {} an absolute path: {e}", dir.display())))?;
        let seq = Fid::object_seq(index);
        let objects_dir = dir.join("O");
        let seq_dir = objects_dir.join(format!("{seq:x}"));
        let context = |what: &str, path: &Path, e: std::io::Error| {
            let mut err = WeftError::from(e);
            err.message = format!("OST {index}: {what} {}: {}", path.display(), err.message);
            err
        };
        for d in 0..OBJECT_DIRS_COUNT {
            let path = seq_dir.join(format!("d{d}"));
            std::fs::create_dir_all(&path).map_err(|e| context("cannot create", &path, e))?;
        }
        // Make the directory tree itself durable, or objects precreated into it could vanish
        // with it after a power loss.
        for path in [&seq_dir, &objects_dir, &dir] {
            durable::fsync_dir(path).map_err(|e| context("cannot fsync", path, e))?;
        }
        let last_id = read_last_id(&seq_dir.join(LAST_ID_FILE_NAME)).map_err(|mut e| {
            e.message = format!("OST {index}: {}", e.message);
            e
        })?;
        Ok(Ost {
            index,
            seq,
            dir,
            seq_dir,
            handles: HandleCache::new(),
            last_id: Mutex::new(last_id),
            // Names made by an earlier run of this process may not be durable yet.
            dirs_unsynced: (0..OBJECT_DIRS_COUNT).map(|_| Mutex::new(true)).collect(),
        })
    }

    /// The object id of `fid`, if the FID belongs to this OST.
    fn object_id(&self, fid: &Fid) -> WeftResult<u32> {
        if fid.seq != self.seq {
            return Err(WeftError::invalid(format!(
                "object {fid} is not in OST {}'s sequence {:#x}",
                self.index, self.seq
            )));
        }
        Ok(fid.oid)
    }

    fn object_dir(&self, oid: u32) -> PathBuf {
        self.seq_dir.join(format!("d{}", self.dir_index(oid)))
    }

    fn object_path(&self, oid: u32) -> PathBuf {
        self.object_dir(oid).join(oid.to_string())
    }

    /// Adds the object's path and this OST to an I/O error.
    fn io_error(&self, oid: u32, what: &str, e: std::io::Error) -> WeftError {
        let mut err = WeftError::from(e);
        err.message = format!("OST {} object {oid}: {what}: {}", self.index, err.message);
        err
    }

    /// The open object, or None when it does not exist.
    fn open_existing(&self, oid: u32) -> WeftResult<Option<Arc<std::fs::File>>> {
        let epoch = match self.handles.lookup(oid) {
            Lookup::Hit(h) => return Ok(Some(h)),
            Lookup::Miss { epoch } => epoch,
        };
        match OpenOptions::new().read(true).write(true).open(self.object_path(oid)) {
            Ok(file) => Ok(Some(self.handles.insert(oid, Arc::new(file), epoch))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(oid, "open", e)),
        }
    }

    /// The open object, created empty when it does not exist.
    fn open_or_create(&self, oid: u32) -> WeftResult<Arc<std::fs::File>> {
        let epoch = match self.handles.lookup(oid) {
            Lookup::Hit(h) => return Ok(h),
            Lookup::Miss { epoch } => epoch,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.object_path(oid))
            .map_err(|e| self.io_error(oid, "open or create", e))?;
        // Whether this request made the name or found it (a concurrent create may have made
        // it and not flagged it yet), flag the directory once the name exists: a sync after
        // this returns then fsyncs it, or waits for an fsync that began after the name.
        *lock_unpoisoned(&self.dirs_unsynced[self.dir_index(oid)]) = true;
        Ok(self.handles.insert(oid, Arc::new(file), epoch))
    }

    /// Which object directory (`d<n>`) holds `oid`.
    fn dir_index(&self, oid: u32) -> usize {
        (oid % OBJECT_DIRS_COUNT) as usize
    }

    /// fdatasync the object, and its directory if a name was made in it since its last fsync.
    fn sync_handle(&self, oid: u32, handle: &std::fs::File) -> WeftResult<()> {
        handle.sync_data().map_err(|e| self.io_error(oid, "fdatasync", e))?;
        let mut unsynced = lock_unpoisoned(&self.dirs_unsynced[self.dir_index(oid)]);
        if *unsynced {
            durable::fsync_dir(&self.object_dir(oid)).map_err(|e| self.io_error(oid, "fsync directory", e))?;
            *unsynced = false;
        }
        Ok(())
    }

    fn read(&self, fid: &Fid, offset: u64, len: u32) -> WeftResult<Bytes> {
        let oid = self.object_id(fid)?;
        let Some(handle) = self.open_existing(oid)? else {
            // Never written, or destroyed: reads as a hole of length zero.
            return Ok(Bytes::new());
        };
        let size = handle.metadata().map_err(|e| self.io_error(oid, "fstat", e))?.len();
        // Bound the buffer by what the object holds, so a large read of a small object does
        // not allocate the whole request length.
        let len = u64::from(len.min(BULK_BYTES_MAX)).min(size.saturating_sub(offset));
        let Ok(len) = usize::try_from(len) else {
            return Err(WeftError::invalid(format!("read length {len} does not fit in memory")));
        };
        if len == 0 {
            return Ok(Bytes::new());
        }
        let mut buf = BytesMut::zeroed(len);
        let mut filled = 0usize;
        while filled < len {
            match handle.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break, // truncated concurrently
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(oid, "read", e)),
            }
        }
        buf.truncate(filled);
        Ok(buf.freeze())
    }

    fn write(&self, fid: &Fid, offset: u64, sync: bool, bulk: &[u8]) -> WeftResult<ost::WriteDone> {
        let oid = self.object_id(fid)?;
        let len = match u32::try_from(bulk.len()) {
            Ok(len) if len <= BULK_BYTES_MAX => len,
            _ => {
                return Err(WeftError::invalid(format!(
                    "write of {} bytes exceeds the bulk limit of {BULK_BYTES_MAX} bytes",
                    bulk.len()
                )))
            }
        };
        match offset.checked_add(u64::from(len)) {
            Some(end) if end <= FILE_SIZE_MAX_BYTES => {}
            _ => {
                return Err(WeftError::new(
                    ErrorCode::FileTooBig,
                    format!(
                        "write of {len} bytes at offset {offset} passes the largest file size {FILE_SIZE_MAX_BYTES}"
                    ),
                ))
            }
        }
        let handle = self.open_or_create(oid)?;
        handle.write_all_at(bulk, offset).map_err(|e| self.io_error(oid, "write", e))?;
        if sync {
            self.sync_handle(oid, &handle)?;
        }
        Ok(ost::WriteDone { len })
    }

    fn punch(&self, fid: &Fid, size: u64) -> WeftResult<()> {
        let oid = self.object_id(fid)?;
        if size > FILE_SIZE_MAX_BYTES {
            return Err(WeftError::new(
                ErrorCode::FileTooBig,
                format!("size {size} passes the largest file size {FILE_SIZE_MAX_BYTES}"),
            ));
        }
        let handle = self.open_or_create(oid)?;
        handle.set_len(size).map_err(|e| self.io_error(oid, "truncate", e))
    }

    fn getattr(&self, fid: &Fid) -> WeftResult<ost::ObjectAttr> {
        let oid = self.object_id(fid)?;
        // A path stat, not a cached handle: a glimpse should not fill the cache with objects
        // nobody reads or writes.
        match std::fs::metadata(self.object_path(oid)) {
            Ok(m) => Ok(ost::ObjectAttr { size: m.len(), blocks: m.blocks() }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(ost::ObjectAttr { size: 0, blocks: 0 }),
            Err(e) => Err(self.io_error(oid, "stat", e)),
        }
    }

    /// The object's file, made if missing (as a first write would), by absolute path: a
    /// client of this process then reads and writes it itself (passthrough). Its sync still
    /// comes here, and fdatasyncs the same inode.
    fn local_path(&self, fid: &Fid) -> WeftResult<ost::ObjectPath> {
        let oid = self.object_id(fid)?;
        // Only objects this OST handed out: no request makes files past them.
        if oid > self.last_id() {
            return Err(WeftError::not_found(format!("object {fid} was never created on OST {}", self.index)));
        }
        self.open_or_create(oid)?;
        Ok(ost::ObjectPath { path: self.object_path(oid).into_os_string().into_vec() })
    }

    fn sync(&self, fid: &Fid) -> WeftResult<()> {
        let oid = self.object_id(fid)?;
        if let Some(handle) = self.open_existing(oid)? {
            self.sync_handle(oid, &handle)?;
        }
        Ok(())
    }

    fn destroy(&self, fid: &Fid) -> WeftResult<()> {
        let oid = self.object_id(fid)?;
        let result = match std::fs::remove_file(self.object_path(oid)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io_error(oid, "unlink", e)),
        };
        // After the unlink, not before: see the race described in `handles`.
        self.handles.invalidate(oid);
        result
    }

    fn precreate(&self, start_oid: u32, count: u32) -> WeftResult<ost::Precreated> {
        if count == 0 || count > PRECREATE_COUNT_MAX {
            return Err(WeftError::invalid(format!("precreate count {count} is outside 1..={PRECREATE_COUNT_MAX}")));
        }
        let Some(last_oid) = start_oid.checked_add(count - 1) else {
            return Err(WeftError::invalid(format!(
                "precreate of {count} objects from {start_oid} passes the largest object id {}",
                u32::MAX
            )));
        };
        // Only the ids are handed out: an object's file is made by its first write (or
        // punch), and until then it reads as empty, as a destroyed one does. An empty file
        // created here would cost an inode allocation and a directory entry per file
        // created on the MDS, most of them never written (mdtest, tar of small files...).
        let mut last_id = lock_unpoisoned(&self.last_id);
        if last_oid > *last_id {
            durable::replace_file(&self.seq_dir, LAST_ID_FILE_NAME, format!("{last_oid}\n").as_bytes()).map_err(
                |e| {
                    let mut err = WeftError::from(e);
                    err.message = format!("OST {}: cannot persist {LAST_ID_FILE_NAME}: {}", self.index, err.message);
                    err
                },
            )?;
            *last_id = last_oid;
        }
        Ok(ost::Precreated { last_oid })
    }

    fn statfs(&self) -> WeftResult<StatfsInfo> {
        let path = std::ffi::CString::new(self.dir.as_os_str().as_bytes())
            .map_err(|_| WeftError::invalid(format!("OST {}: directory path contains a NUL byte", self.index)))?;
        // SAFETY: statvfs only writes the struct we pass; the path is a valid C string.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
        if rc != 0 {
            let mut err = WeftError::from(std::io::Error::last_os_error());
            err.message = format!("OST {}: statvfs {}: {}", self.index, self.dir.display(), err.message);
            return Err(err);
        }
        Ok(statfs_info(&st))
    }

    #[cfg(test)]
    pub fn cached_handles(&self) -> usize {
        self.handles.len()
    }

    pub fn last_id(&self) -> u32 {
        *lock_unpoisoned(&self.last_id)
    }
}

/// The handler of an OST op: blocking file I/O on one OST, answered with the op's reply and
/// the reply's bulk (a read's data, else empty).
pub(crate) trait Handle: Op<Answer = OstReply> {
    fn run(&self, ost: &Ost, bulk: &Bytes) -> WeftResult<(Self::Reply, Bytes)>;
}

impl Handle for ost::Read {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::ReadDone, Bytes)> {
        let data = ost.read(&self.fid, self.offset, self.len)?;
        let len = u32::try_from(data.len()).map_err(|_| WeftError::io("read returned more than 4 GiB"))?;
        Ok((ost::ReadDone { len }, data))
    }
}

impl Handle for ost::Write {
    fn run(&self, ost: &Ost, bulk: &Bytes) -> WeftResult<(ost::WriteDone, Bytes)> {
        Ok((ost.write(&self.fid, self.offset, self.sync, bulk)?, Bytes::new()))
    }
}

impl Handle for ost::Punch {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<((), Bytes)> {
        Ok((ost.punch(&self.fid, self.size)?, Bytes::new()))
    }
}

impl Handle for ost::Getattr {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::ObjectAttr, Bytes)> {
        Ok((ost.getattr(&self.fid)?, Bytes::new()))
    }
}

impl Handle for ost::Sync {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<((), Bytes)> {
        Ok((ost.sync(&self.fid)?, Bytes::new()))
    }
}

impl Handle for ost::Destroy {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<((), Bytes)> {
        Ok((ost.destroy(&self.fid)?, Bytes::new()))
    }
}

impl Handle for ost::Precreate {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::Precreated, Bytes)> {
        Ok((ost.precreate(self.start_oid, self.count)?, Bytes::new()))
    }
}

impl Handle for ost::Statfs {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(StatfsInfo, Bytes)> {
        Ok((ost.statfs()?, Bytes::new()))
    }
}

impl Handle for ost::LocalPath {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::ObjectPath, Bytes)> {
        Ok((ost.local_path(&self.fid)?, Bytes::new()))
    }
}

/// [`Ost::execute`], dispatching every op of `weft_proto::ost_ops!` to its [`Handle`].
macro_rules! dispatch {
    (
        $Request:ident / $Answer:ident;
        $( $(#[$meta:meta])* $kind:ident $Op:ident { $($fields:tt)* } -> $Reply:ty = $name:literal; )*
    ) => {
        impl Ost {
            /// Executes one request: the reply and its bulk. Blocks (file I/O).
            pub fn execute(&self, req: &OstRequest, bulk: &Bytes) -> (WeftResult<OstReply>, Bytes) {
                let result = match req {
                    $( OstRequest::$Op(op) => Handle::run(op, self, bulk).map(|(r, b)| (r.into_reply(), b)), )*
                };
                match result {
                    Ok((reply, bulk)) => (Ok(reply), bulk),
                    Err(e) => (Err(e), Bytes::new()),
                }
            }
        }
    };
}

weft_proto::ost_ops!(dispatch);

// The statvfs field types differ between platforms; on Linux x86_64 some casts are no-ops.
#[allow(clippy::unnecessary_cast)]
fn statfs_info(st: &libc::statvfs) -> StatfsInfo {
    StatfsInfo {
        bsize: u32::try_from(st.f_frsize as u64).unwrap_or(u32::MAX),
        blocks: st.f_blocks as u64,
        bfree: st.f_bfree as u64,
        bavail: st.f_bavail as u64,
        files: st.f_files as u64,
        ffree: st.f_ffree as u64,
    }
}

/// LAST_ID as persisted; 0 when no precreation ever finished.
fn read_last_id(path: &Path) -> WeftResult<u32> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            let mut err = WeftError::from(e);
            err.message = format!("{}: {}", path.display(), err.message);
            return Err(err);
        }
    };
    let mut text = String::new();
    file.take(LAST_ID_FILE_BYTES_MAX).read_to_string(&mut text).map_err(|e| {
        let mut err = WeftError::from(e);
        err.message = format!("{}: {}", path.display(), err.message);
        err
    })?;
    text.trim().parse::<u32>().map_err(|_| {
        WeftError::io(format!("{} is damaged: expected a decimal object id, found {:?}", path.display(), text.trim()))
    })
}

fn lock_unpoisoned<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
