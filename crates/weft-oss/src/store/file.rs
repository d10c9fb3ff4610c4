//! The objects of one OST as files in a directory: what servers use. One local file per
//! object keeps the Linux page cache (readahead, write-back) and sparse files for free, which
//! is most of what an object store needs; the cost is a file per object, which hashed
//! directories keep manageable. Every function here blocks (file I/O).
//!
//! Large aligned reads and writes go around the page cache (O_DIRECT, on a second
//! descriptor of the object): see [`DIRECT_IO_BYTES_MIN`]. They never share a page with the
//! buffered I/O of the same object (they cover whole pages), and the kernel keeps the two
//! coherent (a direct read writes back dirty pages in its range first; a direct write drops
//! cached pages in its range). A file system that refuses O_DIRECT gets buffered I/O only.
//!
//! Layout of an OST directory (format version 1, see [`crate::target`]):
//! ```text
//! <dir>/target                     fsname, index, format version (TOML)
//! <dir>/O/<seq hex>/LAST_ID        highest precreated object id of MDT 0, decimal text
//! <dir>/O/<seq hex>/LAST_ID.<n>    the same of MDT n (object ids are ranges per MDT)
//! <dir>/O/<seq hex>/COMMITTED      the commit record: "<starts> <committed transno> <boot>\n"
//!                                  (missing: never started with write replay; zeros)
//! <dir>/O/<seq hex>/d<oid % 32>/<oid>   one file per object, sparse, its bytes are the object's;
//!                                       made by the object's first write or a passthrough
//!                                       open (`LocalPath`): a missing file is an empty object
//! ```
//! The object id alone names the file: a FID's version is not part of an object's identity.

use super::{CommitRecord, ObjectStore, StoreError, StoreResult};
use crate::durable;
use crate::handles::{HandleCache, Lookup};
use crate::limits::{DIRECT_IO_BYTES_MIN, LAST_ID_FILE_BYTES_MAX, OBJECT_DIRS_COUNT, SYNCFS_OBJECTS_MIN};
use crate::lock_unpoisoned;
use bytes::{Bytes, BytesMut};
use std::ffi::CString;
use std::fs::OpenOptions;
use std::io::{ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use weft_proto::limits::BULK_ALIGN_BYTES;
use weft_proto::msg::ost::{FallocMode, ObjectAttr};
use weft_proto::msg::quota::QuotaOwner;
use weft_proto::msg::StatfsInfo;

const LAST_ID_FILE_NAME: &str = "LAST_ID";
const COMMITTED_FILE_NAME: &str = "COMMITTED";
/// The files of a sequence's directory that are the OST's own records, not objects.
pub const RECORD_FILE_NAMES: [&str; 2] = [LAST_ID_FILE_NAME, COMMITTED_FILE_NAME];

/// Whether a file of a sequence's directory is one of the OST's own records (a LAST_ID of
/// any MDT, the commit record), not an object.
pub fn is_record_file(name: &std::ffi::OsStr) -> bool {
    let Some(name) = name.to_str() else { return false };
    RECORD_FILE_NAMES.contains(&name) || name.strip_prefix("LAST_ID.").is_some_and(|n| n.parse::<u32>().is_ok())
}

#[derive(Debug)]
pub struct FileStore {
    /// The OST directory, for statvfs.
    dir: CString,
    /// `<dir>/O/<seq hex>`.
    seq_dir: PathBuf,
    handles: HandleCache,
    /// The same objects opened with O_DIRECT, for large aligned I/O.
    direct: HandleCache,
    /// False once the file system refused O_DIRECT: buffered I/O only from then on.
    direct_io: AtomicBool,
    /// The persisted LAST_ID.
    /// LAST_ID per MDT range of object ids (`LAST_ID` for MDT 0's, `LAST_ID.<n>` for MDT
    /// n's).
    last_id: Mutex<std::collections::HashMap<u32, u32>>,
    /// The persisted commit record.
    commit_record: Mutex<CommitRecord>,
    /// Per object directory (`d<n>`): a name may have been made in it since its last fsync,
    /// so a data sync of any object in it must also fsync it to make names durable (this
    /// file system may have no journal). One flag per directory, not per object: a create
    /// costs no fsync, and one directory fsync covers every name made before it. The mutex
    /// is held across the fsync: a sync that finds the flag clear knows the fsync is done.
    dirs_unsynced: Vec<Mutex<bool>>,
}

impl FileStore {
    /// Opens the objects of sequence `seq` in an OST directory whose `target` file was
    /// already checked, making `O/<seq hex>/d0..d31` if missing.
    pub fn open(dir: &Path, seq: u64) -> StoreResult<FileStore> {
        // Absolute, so that object paths handed to a client (LocalPath) hold anywhere.
        let dir = std::path::absolute(dir)
            .map_err(|e| StoreError::Io { what: format!("cannot make {} an absolute path: {e}", dir.display()) })?;
        let objects_dir = dir.join("O");
        let seq_dir = objects_dir.join(format!("{seq:x}"));
        let context = |what: &str, path: &Path, e| StoreError::from_io(format_args!("{what} {}", path.display()), e);
        for d in 0..OBJECT_DIRS_COUNT {
            let path = seq_dir.join(format!("d{d}"));
            std::fs::create_dir_all(&path).map_err(|e| context("cannot create", &path, e))?;
        }
        // Make the directory tree itself durable, or objects precreated into it could vanish
        // with it after a power loss.
        for path in [&seq_dir, &objects_dir, &dir] {
            durable::fsync_dir(path).map_err(|e| context("cannot fsync", path, e))?;
        }
        let last_id = read_last_ids(&seq_dir)?;
        let commit_record = read_commit_record(&seq_dir.join(COMMITTED_FILE_NAME))?;
        // Checked once here rather than at every statfs; the directories made above could
        // not have been made under a path with a NUL byte anyway.
        let dir = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| StoreError::Io { what: format!("directory path {} contains a NUL byte", dir.display()) })?;
        Ok(FileStore {
            dir,
            seq_dir,
            handles: HandleCache::new(),
            direct: HandleCache::new(),
            direct_io: AtomicBool::new(true),
            last_id: Mutex::new(last_id),
            commit_record: Mutex::new(commit_record),
            // Names made by an earlier run of this process may not be durable yet.
            dirs_unsynced: (0..OBJECT_DIRS_COUNT).map(|_| Mutex::new(true)).collect(),
        })
    }

    fn object_dir(&self, oid: u32) -> PathBuf {
        self.seq_dir.join(format!("d{}", dir_index(oid)))
    }

    fn object_path(&self, oid: u32) -> PathBuf {
        self.object_dir(oid).join(oid.to_string())
    }

    /// The open object, or None when it does not exist.
    fn open_existing(&self, oid: u32) -> StoreResult<Option<Arc<std::fs::File>>> {
        let epoch = match self.handles.lookup(oid) {
            Lookup::Hit(h) => return Ok(Some(h)),
            Lookup::Miss { epoch } => epoch,
        };
        match OpenOptions::new().read(true).write(true).open(self.object_path(oid)) {
            Ok(file) => Ok(Some(self.handles.insert(oid, Arc::new(file), epoch))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(oid, "open", e)),
        }
    }

    /// The open object, created empty when it does not exist.
    fn open_or_create(&self, oid: u32) -> StoreResult<Arc<std::fs::File>> {
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
            .map_err(|e| io_error(oid, "open or create", e))?;
        // Whether this request made the name or found it (a concurrent create may have made
        // it and not flagged it yet), flag the directory once the name exists: a sync after
        // this returns then fsyncs it, or waits for an fsync that began after the name.
        *lock_unpoisoned(&self.dirs_unsynced[dir_index(oid)]) = true;
        Ok(self.handles.insert(oid, Arc::new(file), epoch))
    }

    /// The existing object opened for direct I/O; None if it does not exist, or where the
    /// file system refuses O_DIRECT.
    fn open_direct(&self, oid: u32) -> StoreResult<Option<Arc<std::fs::File>>> {
        if !self.direct_io.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let epoch = match self.direct.lookup(oid) {
            Lookup::Hit(h) => return Ok(Some(h)),
            Lookup::Miss { epoch } => epoch,
        };
        let opened = OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(self.object_path(oid));
        match opened {
            Ok(file) => Ok(Some(self.direct.insert(oid, Arc::new(file), epoch))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                self.refuse_direct(&e);
                Ok(None)
            }
            // Out of descriptors, say: the buffered descriptor serves.
            Err(e) => {
                tracing::debug!("object {oid}: open for direct I/O: {e}; buffered instead");
                Ok(None)
            }
        }
    }

    /// The file system (or its device's alignment) refused direct I/O: buffered from now on.
    fn refuse_direct(&self, e: &std::io::Error) {
        if self.direct_io.swap(false, Ordering::Relaxed) {
            let dir = Path::new(std::ffi::OsStr::from_bytes(self.dir.as_bytes()));
            tracing::info!("{}: direct I/O refused ({e}); object I/O goes through the page cache", dir.display());
        }
    }

    /// A direct read of `len` bytes at `offset` (a multiple of BULK_ALIGN_BYTES): the bytes,
    /// fewer at the end of the object; None if direct I/O turned out refused.
    fn read_direct(&self, oid: u32, file: &std::fs::File, offset: u64, len: usize) -> StoreResult<Option<Bytes>> {
        let padded = len.next_multiple_of(BULK_ALIGN_BYTES);
        let (mut buf, pad) = weft_proto::wire::page_aligned_buffer(padded);
        let mut filled = 0usize;
        while filled < padded {
            match pread_appending(file, &mut buf, padded - filled, offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => {
                    filled += n;
                    if !n.is_multiple_of(BULK_ALIGN_BYTES) {
                        break; // the end of the object
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    self.refuse_direct(&e);
                    return Ok(None);
                }
                Err(e) => return Err(io_error(oid, "read", e)),
            }
        }
        Ok(Some(buf.freeze().slice(pad..pad + filled.min(len))))
    }

    /// fdatasync the object, and its directory if a name was made in it since its last fsync.
    fn sync_handle(&self, oid: u32, handle: &std::fs::File) -> StoreResult<()> {
        handle.sync_data().map_err(|e| io_error(oid, "fdatasync", e))?;
        let mut unsynced = lock_unpoisoned(&self.dirs_unsynced[dir_index(oid)]);
        if *unsynced {
            durable::fsync_dir(&self.object_dir(oid)).map_err(|e| io_error(oid, "fsync directory", e))?;
            *unsynced = false;
        }
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn cached_handles(&self) -> usize {
        self.handles.len()
    }

    #[cfg(test)]
    pub(crate) fn direct_handles(&self) -> usize {
        self.direct.len()
    }
}

/// One pread of up to `want` bytes at `offset` into `buf`'s unfilled capacity (which must
/// hold `want`), appending what it read. Reading into capacity instead of a zeroed buffer
/// saves a pass over every read's bytes (memset was 3% of all CPU in one TCP read stream).
fn pread_appending(file: &std::fs::File, buf: &mut BytesMut, want: usize, offset: u64) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let spare = buf.spare_capacity_mut();
    assert!(spare.len() >= want, "pread_appending: {want} bytes wanted, {} of capacity", spare.len());
    let Ok(at) = libc::off_t::try_from(offset) else {
        return Err(ErrorKind::InvalidInput.into());
    };
    // SAFETY: the kernel writes at most `want` bytes into `spare`, which is that long and
    // ours alone while `buf` is borrowed mutably; those bytes are initialised once it
    // returns their count, and only they are added to `buf`'s length.
    let n = unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), want, at) };
    let Ok(n) = usize::try_from(n) else {
        return Err(std::io::Error::last_os_error());
    };
    let filled = buf.len() + n;
    // SAFETY: see above: n <= want bytes after the old length are initialised.
    unsafe { buf.set_len(filled) };
    Ok(n)
}

impl ObjectStore for FileStore {
    fn read(&self, oid: u32, offset: u64, len: u32) -> StoreResult<Bytes> {
        let Some(handle) = self.open_existing(oid)? else {
            // Never written, or destroyed: reads as a hole of length zero.
            return Ok(Bytes::new());
        };
        let size = handle.metadata().map_err(|e| io_error(oid, "fstat", e))?.len();
        // Bound the buffer by what the object holds, so a large read of a small object does
        // not allocate the whole request length.
        let len = u64::from(len).min(size.saturating_sub(offset));
        let Ok(len) = usize::try_from(len) else {
            return Err(StoreError::Io { what: format!("object {oid}: read length {len} does not fit in memory") });
        };
        if len == 0 {
            return Ok(Bytes::new());
        }
        if len >= DIRECT_IO_BYTES_MIN && offset.is_multiple_of(BULK_ALIGN_BYTES as u64) {
            if let Some(direct) = self.open_direct(oid)? {
                if let Some(data) = self.read_direct(oid, &direct, offset, len)? {
                    return Ok(data);
                }
            }
        }
        let mut buf = BytesMut::with_capacity(len);
        while buf.len() < len {
            let filled = buf.len();
            match pread_appending(&handle, &mut buf, len - filled, offset + filled as u64) {
                Ok(0) => break, // truncated concurrently
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(oid, "read", e)),
            }
        }
        Ok(buf.freeze())
    }

    /// Stores all of `data` or fails: a regular file writes short only when it fails next.
    fn write(&self, oid: u32, offset: u64, data: &[u8]) -> StoreResult<usize> {
        let handle = self.open_or_create(oid)?;
        if direct_write_fits(data, offset) {
            if let Some(direct) = self.open_direct(oid)? {
                match direct.write_all_at(data, offset) {
                    Ok(()) => return Ok(data.len()),
                    // Nothing was written (the device wants a coarser alignment).
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.refuse_direct(&e),
                    Err(e) => return Err(io_error(oid, "write", e)),
                }
            }
        }
        handle.write_all_at(data, offset).map_err(|e| io_error(oid, "write", e))?;
        Ok(data.len())
    }

    fn set_len(&self, oid: u32, size: u64) -> StoreResult<()> {
        let handle = self.open_or_create(oid)?;
        handle.set_len(size).map_err(|e| io_error(oid, "truncate", e))
    }

    fn fallocate(&self, oid: u32, offset: u64, len: u64, mode: FallocMode, keep_size: bool) -> StoreResult<()> {
        let handle = if mode.needs_objects(keep_size) {
            self.open_or_create(oid)?
        } else {
            match self.open_existing(oid)? {
                Some(handle) => handle,
                None => return Ok(()),
            }
        };
        let keep = if keep_size { libc::FALLOC_FL_KEEP_SIZE } else { 0 };
        match mode {
            FallocMode::Allocate => fallocate_at(&handle, keep, offset, len),
            FallocMode::Punch => {
                fallocate_at(&handle, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len)
            }
            FallocMode::Zero => match fallocate_at(&handle, libc::FALLOC_FL_ZERO_RANGE | keep, offset, len) {
                // Some file systems (tmpfs) punch but do not zero ranges: the same bytes
                // and blocks from a punch and an allocation.
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    fallocate_at(&handle, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len)
                        .and_then(|()| fallocate_at(&handle, keep, offset, len))
                }
                other => other,
            },
        }
        .map_err(|e| io_error(oid, "fallocate", e))
    }

    fn stat(&self, oid: u32) -> StoreResult<ObjectAttr> {
        // A path stat, not a cached handle: a glimpse should not fill the cache with objects
        // nobody reads or writes.
        match std::fs::metadata(self.object_path(oid)) {
            Ok(m) => {
                Ok(ObjectAttr { size: m.len(), blocks: m.blocks(), mtime_ns: weft_proto::layout::object_mtime_ns(&m) })
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(ObjectAttr { size: 0, blocks: 0, mtime_ns: 0 }),
            Err(e) => Err(io_error(oid, "stat", e)),
        }
    }

    fn sync(&self, oid: u32) -> StoreResult<()> {
        if let Some(handle) = self.open_existing(oid)? {
            self.sync_handle(oid, &handle)?;
        }
        Ok(())
    }

    /// Past [`SYNCFS_OBJECTS_MIN`] objects, one syncfs(2) of the OST's file system instead of
    /// an fdatasync each: a commit after a second of small-file creates (mdtest) has
    /// thousands of objects to sync, and each fdatasync waits for a journal commit of its
    /// own, where syncfs writes everything back and commits once (names made in the object
    /// directories with it, as a journal keeps them).
    fn sync_many(&self, oids: &[u32]) -> StoreResult<()> {
        if oids.len() < SYNCFS_OBJECTS_MIN {
            return oids.iter().try_for_each(|oid| self.sync(*oid));
        }
        self.sync_all()
    }

    fn remove(&self, oid: u32) -> StoreResult<()> {
        let result = match std::fs::remove_file(self.object_path(oid)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error(oid, "unlink", e)),
        };
        // After the unlink, not before: see the race described in `handles`.
        self.handles.invalidate(oid);
        self.direct.invalidate(oid);
        result
    }

    fn last_id(&self, mdt: u32) -> u32 {
        lock_unpoisoned(&self.last_id).get(&mdt).copied().unwrap_or(0)
    }

    fn commit_record(&self) -> CommitRecord {
        *lock_unpoisoned(&self.commit_record)
    }

    fn machine_boot(&self) -> u64 {
        // Linux's boot id (a UUID, new at every boot): its first 16 hex digits.
        let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let hex: String = id.chars().filter(char::is_ascii_hexdigit).take(16).collect();
        u64::from_str_radix(&hex, 16).unwrap_or(0)
    }

    fn sync_all(&self) -> StoreResult<()> {
        let dir = std::fs::File::open(&self.seq_dir)
            .map_err(|e| StoreError::from_io(format_args!("cannot open {}", self.seq_dir.display()), e))?;
        // SAFETY: syncfs only reads the descriptor, which `dir` keeps open for the call.
        if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(StoreError::from_io(format_args!("syncfs of {}", self.seq_dir.display()), e));
        }
        Ok(())
    }

    fn set_commit_record(&self, record: CommitRecord) -> StoreResult<()> {
        // Held across the write: two commits never replace the file out of order.
        let mut kept = lock_unpoisoned(&self.commit_record);
        let text = format!("{} {} {}\n", record.starts, record.committed, record.boot);
        durable::replace_file(&self.seq_dir, COMMITTED_FILE_NAME, text.as_bytes())
            .map_err(|e| StoreError::from_io(format_args!("cannot persist {COMMITTED_FILE_NAME}"), e))?;
        *kept = record;
        Ok(())
    }

    fn set_last_id(&self, oid: u32) -> StoreResult<()> {
        let mdt = weft_proto::fid::object_oid_mdt(oid);
        let name = last_id_file_name(mdt);
        // Held across the write: two precreations never replace the file out of order.
        let mut kept = lock_unpoisoned(&self.last_id);
        durable::replace_file(&self.seq_dir, &name, format!("{oid}\n").as_bytes())
            .map_err(|e| StoreError::from_io(format_args!("cannot persist {name}"), e))?;
        kept.insert(mdt, oid);
        Ok(())
    }

    fn statfs(&self) -> StoreResult<StatfsInfo> {
        // SAFETY: statvfs only writes the struct we pass; the path is a valid C string.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statvfs(self.dir.as_ptr(), &mut st) };
        if rc != 0 {
            let path = Path::new(std::ffi::OsStr::from_bytes(self.dir.as_bytes()));
            return Err(StoreError::from_io(
                format_args!("statvfs {}", path.display()),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(statfs_info(&st))
    }

    /// By absolute path: a client of this process then reads and writes the file itself
    /// (passthrough). Its sync still comes here, and fdatasyncs the same inode.
    /// An fstat of the object's cached handle (a write just used it): no path lookup.
    fn allocated(&self, oid: u32) -> StoreResult<Option<u64>> {
        match self.open_existing(oid)? {
            Some(handle) => Ok(Some(handle.metadata().map_err(|e| io_error(oid, "fstat", e))?.blocks())),
            None => Ok(None),
        }
    }

    fn owner(&self, oid: u32) -> StoreResult<Option<QuotaOwner>> {
        let mut buf = [0u8; OWNER_XATTR_BYTES];
        match xattr_get(&self.object_path(oid), &mut buf) {
            Ok(OWNER_XATTR_BYTES) => Ok(Some(decode_owner(&buf))),
            // An owner of another size is not one this version wrote: none.
            Ok(_) => Ok(None),
            // No owner, no object, or a file system without user xattrs (its objects count
            // against nobody: their owners could not be recorded either).
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA) | Some(libc::ENOENT) | Some(libc::EOPNOTSUPP)) => {
                Ok(None)
            }
            Err(e) => Err(io_error(oid, "getxattr owner", e)),
        }
    }

    fn set_owner(&self, oid: u32, owner: QuotaOwner) -> StoreResult<()> {
        let path = CString::new(self.object_path(oid).as_os_str().as_bytes())
            .map_err(|_| io_error(oid, "setxattr owner", std::io::Error::from(ErrorKind::InvalidInput)))?;
        let value = encode_owner(owner);
        // SAFETY: path and OWNER_XATTR are NUL-terminated; value is readable for its length.
        let r = unsafe {
            libc::setxattr(path.as_ptr(), OWNER_XATTR.as_ptr().cast(), value.as_ptr().cast(), value.len(), 0)
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io_error(oid, "setxattr owner", std::io::Error::last_os_error()))
        }
    }

    fn object_ids(&self) -> StoreResult<Vec<u32>> {
        let mut ids = Vec::new();
        for d in 0..OBJECT_DIRS_COUNT {
            let dir = self.seq_dir.join(format!("d{d}"));
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(0, "list objects", e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io_error(0, "list objects", e))?;
                // Temporary and other files are not objects: only decimal names are.
                if let Some(oid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                    ids.push(oid);
                }
            }
        }
        Ok(ids)
    }

    fn local_path(&self, oid: u32) -> StoreResult<Option<PathBuf>> {
        self.open_or_create(oid)?;
        Ok(Some(self.object_path(oid)))
    }
}

/// Whether a write of `data` at `offset` may go around the page cache: large, and whole
/// aligned blocks from an aligned buffer.
/// The xattr of an object's file that holds its owner: uid, gid, projid as u32 LE (the
/// object files' own owner stays the OSS's, so that no local quota or permission applies).
const OWNER_XATTR: &[u8] = b"user.weft.owner\0";
const OWNER_XATTR_BYTES: usize = 12;

fn encode_owner(o: QuotaOwner) -> [u8; OWNER_XATTR_BYTES] {
    let mut v = [0u8; OWNER_XATTR_BYTES];
    v[0..4].copy_from_slice(&o.uid.to_le_bytes());
    v[4..8].copy_from_slice(&o.gid.to_le_bytes());
    v[8..12].copy_from_slice(&o.projid.to_le_bytes());
    v
}

fn decode_owner(v: &[u8; OWNER_XATTR_BYTES]) -> QuotaOwner {
    let word = |i: usize| u32::from_le_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]]);
    QuotaOwner { uid: word(0), gid: word(4), projid: word(8) }
}

fn xattr_get(path: &Path, buf: &mut [u8]) -> std::io::Result<usize> {
    let path = CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(ErrorKind::InvalidInput))?;
    // SAFETY: path and OWNER_XATTR are NUL-terminated; buf is writable for its length.
    let r = unsafe { libc::getxattr(path.as_ptr(), OWNER_XATTR.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn direct_write_fits(data: &[u8], offset: u64) -> bool {
    let a = BULK_ALIGN_BYTES;
    data.len() >= DIRECT_IO_BYTES_MIN
        && data.len().is_multiple_of(a)
        && offset.is_multiple_of(a as u64)
        && (data.as_ptr() as usize).is_multiple_of(a)
}

/// Which object directory (`d<n>`) holds `oid`.
fn dir_index(oid: u32) -> usize {
    (oid % OBJECT_DIRS_COUNT) as usize
}

/// fallocate(2) with `flags` on `[offset, offset+len)` of `file`.
fn fallocate_at(file: &std::fs::File, flags: i32, offset: u64, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    loop {
        // SAFETY: fallocate only acts on the descriptor, which `file` keeps open.
        if unsafe { libc::fallocate(file.as_raw_fd(), flags, offset, len) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Names the object and the operation in an I/O error.
fn io_error(oid: u32, what: &str, e: std::io::Error) -> StoreError {
    StoreError::from_io(format_args!("object {oid}: {what}"), e)
}

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

/// The text of one of the OST's small record files (LAST_ID, COMMITTED), at most
/// `LAST_ID_FILE_BYTES_MAX` bytes of it; None when it does not exist.
fn read_record(path: &Path) -> StoreResult<Option<String>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::from_io(path.display(), e)),
    };
    let mut text = String::new();
    file.take(LAST_ID_FILE_BYTES_MAX).read_to_string(&mut text).map_err(|e| StoreError::from_io(path.display(), e))?;
    Ok(Some(text))
}

/// The commit record as persisted; zeros when the OST never started with one.
fn read_commit_record(path: &Path) -> StoreResult<CommitRecord> {
    let Some(text) = read_record(path)? else { return Ok(CommitRecord::default()) };
    let numbers: Vec<Option<u64>> = text.split_whitespace().map(|n| n.parse().ok()).collect();
    match numbers[..] {
        [Some(starts), Some(committed), Some(boot)] => Ok(CommitRecord { starts, committed, boot }),
        _ => Err(StoreError::Io {
            what: format!(
                "{} is damaged: expected three decimal numbers (starts, committed transno, boot), found {:?}",
                path.display(),
                text.trim()
            ),
        }),
    }
}

/// The file of MDT `mdt`'s LAST_ID: `LAST_ID` for MDT 0 (where a file system with one
/// MDT always kept it), `LAST_ID.<mdt>` for the others.
fn last_id_file_name(mdt: u32) -> String {
    match mdt {
        0 => LAST_ID_FILE_NAME.to_string(),
        n => format!("{LAST_ID_FILE_NAME}.{n}"),
    }
}

/// Every MDT's LAST_ID in a sequence's directory.
fn read_last_ids(seq_dir: &Path) -> StoreResult<std::collections::HashMap<u32, u32>> {
    let mut ids = std::collections::HashMap::new();
    ids.insert(0, read_last_id(&seq_dir.join(LAST_ID_FILE_NAME))?);
    let entries = std::fs::read_dir(seq_dir)
        .map_err(|e| StoreError::from_io(format_args!("cannot list {}", seq_dir.display()), e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(mdt) = name.to_str().and_then(|n| n.strip_prefix("LAST_ID.")).and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        ids.insert(mdt, read_last_id(&entry.path())?);
    }
    Ok(ids)
}

/// LAST_ID as persisted; 0 when no precreation ever finished.
fn read_last_id(path: &Path) -> StoreResult<u32> {
    let Some(text) = read_record(path)? else { return Ok(0) };
    text.trim().parse::<u32>().map_err(|_| StoreError::Io {
        what: format!("{} is damaged: expected a decimal object id, found {:?}", path.display(), text.trim()),
    })
}
