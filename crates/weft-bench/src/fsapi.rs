//! The file operations the benchmarks need, over two APIs: system calls on a path
//! ([`PosixFs`], a Weft mount or any local directory) and the Weft client library
//! ([`crate::native::NativeFs`]). Paths are relative to the run's directory, `/`-separated;
//! `""` is the directory itself.

use crate::limits::DROP_CACHES_SETTLE_S;
use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, IntoRawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `stat` tells the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub mtime_ns: i128,
    pub is_dir: bool,
    pub is_file: bool,
}

pub trait BenchFs {
    type File;
    fn mkdir(&mut self, path: &str) -> Result<()>;
    /// O_CREAT|O_EXCL|O_WRONLY, mode 0644.
    fn create_excl(&mut self, path: &str) -> Result<Self::File>;
    /// An existing file, O_WRONLY.
    fn open_write(&mut self, path: &str) -> Result<Self::File>;
    fn open_read(&mut self, path: &str) -> Result<Self::File>;
    fn pwrite(&mut self, file: &mut Self::File, offset: u64, data: Bytes) -> Result<()>;
    /// Up to `len` bytes at `offset`; fewer only at the end of the file.
    fn pread<'f>(&mut self, file: &'f mut Self::File, offset: u64, len: usize) -> Result<&'f [u8]>;
    fn fsync(&mut self, file: &mut Self::File) -> Result<()>;
    fn close(&mut self, file: Self::File) -> Result<()>;
    fn stat(&mut self, path: &str) -> Result<Stat>;
    fn unlink(&mut self, path: &str) -> Result<()>;
    fn rmdir(&mut self, path: &str) -> Result<()>;
    /// Names and whether each is a directory, without "." and "..".
    fn readdir(&mut self, path: &str) -> Result<Vec<(String, bool)>>;
    /// Drops what this node caches of the file's data, so that a read reaches the file
    /// system (posix_fadvise DONTNEED; nothing to do for the client library).
    fn drop_cache(&mut self, path: &str) -> Result<()>;
    /// Makes the names made in directory `path` durable before a phase's time ends: the
    /// client library's write-back cache sends its batches and waits for the MDT; nothing
    /// for system calls (mdtest does not sync).
    fn sync_dir(&mut self, _path: &str) -> Result<()> {
        Ok(())
    }
}

pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// System calls under `root`.
pub struct PosixFs {
    root: PathBuf,
}

pub struct PosixFile {
    file: File,
    buf: Vec<u8>,
}

impl PosixFs {
    pub fn new(root: impl Into<PathBuf>) -> PosixFs {
        PosixFs { root: root.into() }
    }

    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    fn open(&self, rel: &str, opts: &OpenOptions, what: &str) -> Result<PosixFile> {
        let path = self.path(rel);
        let file = opts.open(&path).with_context(|| format!("{what} {}", path.display()))?;
        Ok(PosixFile { file, buf: Vec::new() })
    }
}

impl BenchFs for PosixFs {
    type File = PosixFile;

    fn mkdir(&mut self, path: &str) -> Result<()> {
        let p = self.path(path);
        std::fs::create_dir(&p).with_context(|| format!("mkdir {}", p.display()))
    }

    fn create_excl(&mut self, path: &str) -> Result<PosixFile> {
        self.open(path, OpenOptions::new().write(true).create_new(true).mode(0o644), "create")
    }

    fn open_write(&mut self, path: &str) -> Result<PosixFile> {
        self.open(path, OpenOptions::new().write(true), "open for writing")
    }

    fn open_read(&mut self, path: &str) -> Result<PosixFile> {
        self.open(path, OpenOptions::new().read(true), "open for reading")
    }

    fn pwrite(&mut self, file: &mut PosixFile, offset: u64, data: Bytes) -> Result<()> {
        file.file.write_all_at(&data, offset).with_context(|| format!("write of {} bytes at {offset}", data.len()))
    }

    fn pread<'f>(&mut self, file: &'f mut PosixFile, offset: u64, len: usize) -> Result<&'f [u8]> {
        file.buf.resize(len, 0);
        let mut done = 0;
        while done < len {
            match file.file.read_at(&mut file.buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).with_context(|| format!("read of {len} bytes at {offset}")),
            }
        }
        Ok(&file.buf[..done])
    }

    fn fsync(&mut self, file: &mut PosixFile) -> Result<()> {
        file.file.sync_all().context("fsync")
    }

    fn close(&mut self, file: PosixFile) -> Result<()> {
        // A file system may report a write error only at close (FUSE flush): check it.
        let fd = file.file.into_raw_fd();
        // SAFETY: `fd` is ours alone (taken from the File) and closed once.
        if unsafe { libc::close(fd) } != 0 {
            return Err(anyhow!("close: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn stat(&mut self, path: &str) -> Result<Stat> {
        let p = self.path(path);
        let m = std::fs::symlink_metadata(&p).with_context(|| format!("stat {}", p.display()))?;
        Ok(Stat {
            size: m.len(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            is_dir: m.is_dir(),
            is_file: m.is_file(),
        })
    }

    fn unlink(&mut self, path: &str) -> Result<()> {
        let p = self.path(path);
        std::fs::remove_file(&p).with_context(|| format!("unlink {}", p.display()))
    }

    fn rmdir(&mut self, path: &str) -> Result<()> {
        let p = self.path(path);
        std::fs::remove_dir(&p).with_context(|| format!("rmdir {}", p.display()))
    }

    fn readdir(&mut self, path: &str) -> Result<Vec<(String, bool)>> {
        let p = self.path(path);
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&p).with_context(|| format!("readdir {}", p.display()))? {
            let entry = entry.with_context(|| format!("readdir {}", p.display()))?;
            let is_dir = entry.file_type().with_context(|| format!("readdir {}", p.display()))?.is_dir();
            out.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
        }
        Ok(out)
    }

    fn drop_cache(&mut self, path: &str) -> Result<()> {
        let p = self.path(path);
        drop_page_cache(&p)
    }
}

/// posix_fadvise(DONTNEED) over the whole file: clean pages of it leave the page cache.
pub fn drop_page_cache(path: &Path) -> Result<()> {
    let f = File::open(path).with_context(|| format!("open {}", path.display()))?;
    // SAFETY: a valid open fd; the call only advises the kernel.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(anyhow!("posix_fadvise {}: {}", path.display(), std::io::Error::from_raw_os_error(rc)));
    }
    Ok(())
}

/// The node's whole page cache, dentries and inodes, as IO-500's `drop-caches` does between
/// phases: sync(2), then "3" into /proc/sys/vm/drop_caches (root only), then a pause of
/// [`DROP_CACHES_SETTLE_S`] seconds. Unlike [`drop_page_cache`] this also reaches pages a file
/// system keeps in another file, such as the object file behind a FUSE passthrough open.
pub fn drop_system_caches() -> Result<()> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n")
        .context("--drop-caches writes /proc/sys/vm/drop_caches, which needs root")?;
    std::thread::sleep(Duration::from_secs(DROP_CACHES_SETTLE_S));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posix_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = PosixFs::new(dir.path());
        fs.mkdir("d").unwrap();
        let mut f = fs.create_excl("d/f").unwrap();
        assert!(fs.create_excl("d/f").is_err(), "O_EXCL");
        fs.pwrite(&mut f, 3, Bytes::from_static(b"abc")).unwrap();
        fs.fsync(&mut f).unwrap();
        fs.close(f).unwrap();
        let mut r = fs.open_read("d/f").unwrap();
        assert_eq!(fs.pread(&mut r, 0, 10).unwrap(), b"\0\0\0abc");
        fs.close(r).unwrap();
        let st = fs.stat("d/f").unwrap();
        assert_eq!((st.size, st.is_file, st.is_dir), (6, true, false));
        assert!(fs.stat("d").unwrap().is_dir);
        assert_eq!(fs.readdir("d").unwrap(), vec![("f".to_string(), false)]);
        fs.drop_cache("d/f").unwrap();
        fs.unlink("d/f").unwrap();
        fs.rmdir("d").unwrap();
        let err = fs.open_read("nothing").err().unwrap();
        assert!(format!("{err:#}").contains("nothing"), "{err:#}");
    }
}
