//! Open files: open and create (with a layout or the directory's default), read and write
//! at an offset or at the file position, seek, fsync, fstat, ftruncate, close. Reads and
//! writes take the same extent locks as every other client (`weft_client::OpenFile`), so
//! what one program writes here another reads through its mount, and the other way round.
//! Writes are on the OSTs when the call returns (no write-behind: the page cache, if any,
//! is the program's own).
//!
//! With the metadata write-back cache on (`WEFT_WBC=1`, [`crate::MountOptions::wbc`]), a
//! create in a directory the cache holds is made in this client and opened on the MDS only
//! at its first read, write or truncate: a create-and-close (mdtest's, touch's) costs no
//! request of its own, and goes to the MDS in a batch with many others.

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::limits::RW_BYTES_MAX;
use crate::stat::Stat;
use bytes::Bytes;
use std::sync::{Mutex, OnceLock};
use weft_client::OpenFile;
use weft_proto::layout::StripeSpec;
use weft_proto::msg::{FileType, InodeInfo, OPEN_READ, OPEN_WRITE};
use weft_proto::Fid;

/// An open file or directory.
#[derive(Debug)]
pub struct File {
    pub fid: Fid,
    /// What is open of it on the servers.
    kind: Kind,
    /// The open of a regular file on the MDS: set at open, or at the first I/O of a file
    /// the write-back cache made (`Kind::Made`).
    open: OnceLock<OpenFile>,
    /// The open(2) flags (access mode, O_APPEND, O_NONBLOCK...), as F_GETFL shows them.
    pub flags: Mutex<i32>,
    /// The file position of read, write and lseek.
    pos: Mutex<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Opened to list it or as the base of `*at` calls: nothing is open on the servers.
    Dir,
    /// A regular file opened on the MDS.
    Regular,
    /// A regular file the write-back cache made in directory `parent` and the MDS has not
    /// opened yet (perhaps not heard of yet: the create waits in a batch).
    Made { parent: Fid },
}

fn access_flags(flags: i32) -> u32 {
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => OPEN_WRITE,
        libc::O_RDWR => OPEN_READ | OPEN_WRITE,
        _ => OPEN_READ,
    }
}

fn writable(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY
}

fn bad_file(what: &str) -> Error {
    Error::new(libc::EBADF, format!("{what}: the file is not open for that"))
}

impl File {
    pub fn is_dir(&self) -> bool {
        self.kind == Kind::Dir
    }

    fn new(fid: Fid, kind: Kind, flags: i32) -> File {
        File { fid, kind, open: OnceLock::new(), flags: Mutex::new(flags), pos: Mutex::new(0) }
    }

    pub fn position(&self) -> u64 {
        *self.pos.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn open_flags(&self) -> i32 {
        *self.flags.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Fs {
    /// open(2) of `path` with `flags` (O_CREAT with `mode`, O_EXCL, O_TRUNC, O_APPEND,
    /// O_DIRECTORY, O_NOFOLLOW); a new file takes its directory's default layout.
    pub fn open(&self, path: &[u8], flags: i32, mode: u32) -> Result<File> {
        self.open_with(path, flags, mode, None)
    }

    /// open(2) creating with layout `spec` when the file is new (`llapi_layout_file_open`).
    pub fn open_with(&self, path: &[u8], flags: i32, mode: u32, spec: Option<StripeSpec>) -> Result<File> {
        let who = self.who();
        if flags & libc::O_CREAT != 0 {
            let at = self.parent(&who, path)?;
            if at.trailing_slash {
                return Err(Error::new(
                    libc::EISDIR,
                    format!("{}: O_CREAT of a directory", String::from_utf8_lossy(path)),
                ));
            }
            let exclusive = flags & libc::O_EXCL != 0;
            if spec.is_none() {
                match self.run_opt(self.client.wbc_create(&who, at.dir, &at.name, mode & 0o7777)) {
                    Some(Ok(inode)) => return Ok(File::new(inode.attr.fid, Kind::Made { parent: at.dir }, flags)),
                    // There already: opened below as without O_CREAT.
                    Some(Err(e)) if !exclusive && e.errno == libc::EEXIST => {}
                    Some(Err(e)) => return Err(e),
                    None => {}
                }
            }
            let created = self.run(self.client.create(
                &who,
                at.dir,
                &at.name,
                mode & 0o7777,
                exclusive,
                spec,
                access_flags(flags),
            ));
            match created {
                Ok(opened) => return self.finish_open(opened.inode, opened.handle, flags),
                // An existing link or directory: opened as it would be without O_CREAT.
                Err(e) if !exclusive && (e.errno == libc::EISDIR || e.errno == libc::EEXIST) => {}
                Err(e) => return Err(e),
            }
        }
        let inode = self.resolve(&who, path, flags & libc::O_NOFOLLOW == 0)?;
        match inode.attr.kind {
            FileType::Directory if writable(flags) => {
                Err(Error::new(libc::EISDIR, format!("{} is a directory", String::from_utf8_lossy(path))))
            }
            FileType::Directory => Ok(self.dir_file(inode.attr.fid, flags)),
            _ if flags & libc::O_DIRECTORY != 0 => {
                Err(Error::new(libc::ENOTDIR, format!("{} is not a directory", String::from_utf8_lossy(path))))
            }
            FileType::Regular => {
                let opened = self.run(self.client.open(&who, inode.attr.fid, access_flags(flags)))?;
                self.finish_open(opened.inode, opened.handle, flags)
            }
            FileType::Symlink => {
                Err(Error::new(libc::ELOOP, format!("{} is a symbolic link", String::from_utf8_lossy(path))))
            }
            _ => Err(Error::new(
                libc::ENXIO,
                format!("{} is a special file: open it through a mount", String::from_utf8_lossy(path)),
            )),
        }
    }

    /// An open of directory `fid`: nothing on the servers.
    pub(crate) fn dir_file(&self, fid: Fid, flags: i32) -> File {
        File::new(fid, Kind::Dir, flags)
    }

    /// The MDS's open of a regular file; a file the write-back cache made is opened now
    /// (its batch goes first).
    fn regular<'f>(&self, file: &'f File) -> Result<&'f OpenFile> {
        if let Some(open) = file.open.get() {
            return Ok(open);
        }
        if file.kind == Kind::Dir {
            return Err(Error::new(libc::EISDIR, format!("{} is a directory", file.fid)));
        }
        let opened = self.run(self.client.open(&self.who(), file.fid, access_flags(file.open_flags())))?;
        let open = self.open_file(opened.inode, opened.handle);
        if let Err(open) = file.open.set(open) {
            // Another thread opened it meanwhile: one open is enough.
            self.close_in_background(open);
        }
        Ok(file.open.get().expect("set just now"))
    }

    fn open_file(&self, inode: InodeInfo, handle: u64) -> OpenFile {
        let lock = inode.lock.as_ref().map(|l| l.handle);
        let mut open = OpenFile::new(inode.attr.fid, handle, inode.layout, inode.attr.size);
        open.set_layout_lock(lock);
        open.generation = self.client.generation();
        open
    }

    /// After the MDS opened a file: its real size, O_TRUNC applied. Closes the MDS's open
    /// again if that fails.
    fn finish_open(&self, mut inode: InodeInfo, handle: u64, flags: i32) -> Result<File> {
        let who = self.who();
        let fid = inode.attr.fid;
        let prepared = self.rt.block_on(async {
            self.client.complete_size(&who, &mut inode).await?;
            if writable(flags) && flags & libc::O_TRUNC != 0 && inode.attr.size > 0 {
                if let Some(layout) = &inode.layout {
                    inode.attr = self.client.truncate(&who, fid, layout, 0, Some(handle)).await?;
                }
            }
            Ok::<_, weft_proto::WeftError>(())
        });
        if let Err(e) = prepared {
            if let Err(close) = self.rt.block_on(self.client.close(&who, fid, handle, None)) {
                tracing::warn!("closing {fid} after a failed open: {close}");
            }
            return Err(e.into());
        }
        let file = File::new(fid, Kind::Regular, flags);
        let _ = file.open.set(self.open_file(inode, handle));
        Ok(file)
    }

    fn readable_open<'f>(&self, file: &'f File, what: &str) -> Result<&'f OpenFile> {
        let open = self.regular(file)?;
        if file.open_flags() & libc::O_ACCMODE == libc::O_WRONLY {
            return Err(bad_file(what));
        }
        self.check_generation(open)?;
        Ok(open)
    }

    fn writable_open<'f>(&self, file: &'f File, what: &str) -> Result<&'f OpenFile> {
        let open = self.regular(file)?;
        if !writable(file.open_flags()) {
            return Err(bad_file(what));
        }
        self.check_generation(open)?;
        Ok(open)
    }

    /// An open made before this client was evicted is gone on the servers.
    fn check_generation(&self, open: &OpenFile) -> Result<()> {
        match open.generation == self.client.generation() {
            true => Ok(()),
            false => Err(Error::new(libc::EIO, format!("{}: this client was evicted since the open", open.fid))),
        }
    }

    /// pread(2): up to `buf.len()` bytes at `offset`; fewer at the end of the file.
    pub fn pread(&self, file: &File, buf: &mut [u8], offset: u64) -> Result<usize> {
        let open = self.readable_open(file, "read")?;
        if open.layout().is_none() {
            return Ok(0);
        }
        let len = buf.len().min(RW_BYTES_MAX) as u32;
        let data = self.run(self.client.read_open(&self.who(), open, offset, len))?;
        buf[..data.len()].copy_from_slice(&data);
        Ok(data.len())
    }

    /// pwrite(2): all of `data` at `offset`, with O_APPEND too (as POSIX says; Linux's own
    /// pwrite appends there).
    pub fn pwrite(&self, file: &File, data: &[u8], offset: u64) -> Result<usize> {
        let open = self.writable_open(file, "write")?;
        let data = &data[..data.len().min(RW_BYTES_MAX)];
        if data.is_empty() {
            return Ok(0);
        }
        self.run(self.client.write_open(&self.who(), open, offset, Bytes::copy_from_slice(data)))?;
        Ok(data.len())
    }

    /// read(2) at the file position, which moves past what was read.
    pub fn read(&self, file: &File, buf: &mut [u8]) -> Result<usize> {
        let mut pos = file.pos.lock().unwrap_or_else(|p| p.into_inner());
        let n = self.pread(file, buf, *pos)?;
        *pos += n as u64;
        Ok(n)
    }

    /// write(2) at the file position (at the end of the file with O_APPEND: its size from
    /// the objects, so appends of this process never overlap; appends of several clients
    /// at once are not ordered), which moves past what was written.
    pub fn write(&self, file: &File, data: &[u8]) -> Result<usize> {
        let mut pos = file.pos.lock().unwrap_or_else(|p| p.into_inner());
        if file.open_flags() & libc::O_APPEND != 0 {
            *pos = self.fstat(file)?.attr.size;
        }
        let n = self.pwrite(file, data, *pos)?;
        *pos += n as u64;
        Ok(n)
    }

    /// lseek(2): SEEK_SET, SEEK_CUR, SEEK_END (from the size the objects hold), and
    /// SEEK_DATA/SEEK_HOLE as a file with no holes answers them.
    pub fn seek(&self, file: &File, offset: i64, whence: i32) -> Result<u64> {
        let mut pos = file.pos.lock().unwrap_or_else(|p| p.into_inner());
        let invalid = || Error::new(libc::EINVAL, format!("lseek to {offset} from {whence} is outside the file"));
        let base = match whence {
            libc::SEEK_SET => 0,
            libc::SEEK_CUR => *pos as i64,
            libc::SEEK_END | libc::SEEK_DATA | libc::SEEK_HOLE if file.is_dir() => 0,
            libc::SEEK_END => self.fstat(file)?.attr.size as i64,
            libc::SEEK_DATA | libc::SEEK_HOLE => {
                let size = self.fstat(file)?.attr.size as i64;
                if offset < 0 || offset >= size {
                    return Err(Error::new(libc::ENXIO, format!("lseek past the end of the file ({size} bytes)")));
                }
                let to = if whence == libc::SEEK_DATA { offset } else { size };
                *pos = to as u64;
                return Ok(*pos);
            }
            _ => {
                return Err(Error::new(
                    libc::EINVAL,
                    format!("lseek whence {whence}: one of SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE"),
                ))
            }
        };
        let to = base.checked_add(offset).filter(|t| *t >= 0).ok_or_else(invalid)?;
        *pos = to as u64;
        Ok(*pos)
    }

    /// fsync(2): what this open wrote is on stable storage on the OSTs.
    pub fn fsync(&self, file: &File) -> Result<()> {
        let who = self.who();
        let Some(open) = file.open.get() else {
            return match file.kind {
                // Nothing written: durable once its create is (the batch committed).
                Kind::Made { parent } => self.run(self.client.fsync_dir(parent)),
                // A directory: the creates, setattrs and unlinks the cache holds of it.
                Kind::Dir => self.run(self.client.fsync_dir(file.fid)),
                Kind::Regular => Ok(()),
            };
        };
        self.rt
            .block_on(async {
                match self.client.current_layout(&who, open).await? {
                    Some(layout) => self.client.fsync_file(&who, Some(open.fid), &layout).await,
                    None => Ok(()),
                }
            })
            .map_err(Error::from)
    }

    /// fstat(2)'s attributes: the MDS's, the size and blocks the objects hold.
    pub fn fstat(&self, file: &File) -> Result<Stat> {
        let who = self.who();
        let mut inode = self.run(self.client.getattr(&who, file.fid))?;
        self.run(self.client.complete_size(&who, &mut inode))?;
        if let Some(open) = file.open.get() {
            open.raise_size(inode.attr.size);
        }
        Ok(Stat::new(inode.attr, inode.layout.as_ref()))
    }

    /// The layout of an open file, as it knows it (a file the write-back cache made is
    /// opened for it).
    pub fn file_layout(&self, file: &File) -> Option<weft_proto::layout::Layout> {
        self.regular(file).ok().and_then(|o| o.layout()).map(|l| (*l).clone())
    }

    /// ftruncate(2).
    pub fn ftruncate(&self, file: &File, size: u64) -> Result<()> {
        let open = self.writable_open(file, "ftruncate").map_err(|e| match e.errno {
            libc::EBADF => Error::new(libc::EINVAL, "ftruncate of a file not open for writing"),
            _ => e,
        })?;
        let who = self.who();
        let attr = self.rt.block_on(async {
            let layout = self.client.current_layout(&who, open).await?;
            let layout = layout.ok_or_else(|| weft_proto::WeftError::io(format!("{} has no layout", open.fid)))?;
            self.client.truncate(&who, open.fid, &layout, size, Some(open.mds_handle)).await
        })?;
        open.set_size(attr.size);
        Ok(())
    }

    /// close(2): a writer tells the MDS the size and blocks its objects hold, and hears
    /// whether it took them, waited for (with that close in the background, git failed to
    /// read the config it had just written, renamed and closed: tests/preload). An open
    /// that wrote nothing has nothing to tell: its close goes to the MDS in the background
    /// (as the kernel's release of a FUSE open does), so that a create-and-close costs one
    /// round trip; unmount and `release_locks` wait for it.
    pub fn close(&self, file: File) -> Result<()> {
        // A directory, or a file the write-back cache made and nobody used: nothing open.
        let Some(open) = file.open.into_inner() else { return Ok(()) };
        if open.wrote() {
            return self.run(self.client.close_open(&self.who(), &open));
        }
        self.close_in_background(open);
        Ok(())
    }

    /// The close of an open that wrote nothing, not waited for.
    fn close_in_background(&self, open: OpenFile) {
        let (client, who, pending) = (self.client.clone(), self.who(), self.closing.clone());
        pending.started(crate::limits::CLOSES_IN_FLIGHT_MAX);
        self.rt.spawn(async move {
            if let Err(e) = client.close(&who, open.fid, open.mds_handle, None).await {
                tracing::warn!("close of {}: {e}", open.fid);
            }
            pending.ended();
        });
    }
}
