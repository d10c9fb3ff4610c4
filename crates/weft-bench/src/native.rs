//! The benchmarks' file API over the Weft client library, without FUSE (as IOR's DFS backend
//! for DAOS). Paths are resolved by lookups from the root of the Weft namespace; directories
//! are remembered. An open file keeps the layout from its open or create reply; a writer's
//! close tells the MDS the size and blocks its objects hold (a glimpse), as the FUSE adapter's
//! release does.

use crate::fsapi::{BenchFs, Stat};
use crate::limits::CONNECT_TIMEOUT_S;
use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;
use weft_client::{Client, ClientConfig};
use weft_proto::layout::Layout;
use weft_proto::limits::READDIR_ENTRIES_MAX;
use weft_proto::lock::LockMode;
use weft_proto::msg::{Caller, FileType, Identity, InodeInfo, OPEN_READ, OPEN_WRITE};
use weft_proto::{Fid, WeftError};

pub struct NativeFs {
    rt: tokio::runtime::Runtime,
    client: Arc<Client>,
    who: Caller,
    /// Directory FIDs by path relative to the run's directory (`""`: the run's directory).
    dirs: HashMap<String, Fid>,
    /// How the run's directory was named, for messages.
    root_name: String,
}

pub struct NativeFile {
    fid: Fid,
    /// The open at the MDS; None for a file the write-back cache made and nobody opened
    /// yet (opened at its first read or write, which sends the cache's batch first).
    open: Option<(u64, Layout)>,
    size: u64,
    wrote: bool,
    last: Bytes,
}

fn weft_err(e: WeftError) -> anyhow::Error {
    anyhow!("{}", e.message).context(format!("{:?}", e.code))
}

/// `a/b/c` → components, ignoring empty ones and leading or doubled slashes.
fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty() && *c != ".")
}

fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

impl Drop for NativeFs {
    /// A client that goes away gives its locks back, so that nobody waits for it to answer.
    fn drop(&mut self) {
        self.rt.block_on(self.client.release_locks());
    }
}

impl NativeFs {
    /// Connects to the file system whose management service is at `mgs` and resolves `root`,
    /// a directory path from the root of the Weft namespace (`/bench`).
    pub fn connect(mgs: &str, root: &str) -> Result<NativeFs> {
        NativeFs::connect_with(mgs, root, false)
    }

    /// [`NativeFs::connect`], with the client's metadata write-back cache on (`wbc`).
    pub fn connect_with(mgs: &str, root: &str, wbc: bool) -> Result<NativeFs> {
        // One runtime thread of its own: lock callbacks from the servers must be answered
        // also while this process is between calls (a current-thread runtime would leave
        // them waiting, and the servers would evict the client).
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("tokio runtime")?;
        let mut config = ClientConfig::new(mgs);
        config.connect_timeout = std::time::Duration::from_secs(CONNECT_TIMEOUT_S);
        config.wbc.enabled = wbc;
        let client = rt.block_on(Client::connect(config)).map_err(weft_err)?;
        // SAFETY: geteuid/getegid cannot fail and touch no memory.
        let identity = unsafe { Identity { uid: libc::geteuid(), gid: libc::getegid(), groups: Vec::new() } };
        let who = Caller::new(identity, "weft-bench");
        let mut fid = Fid::ROOT;
        for name in components(root) {
            let inode = rt
                .block_on(client.lookup(&who, fid, name.as_bytes()))
                .map_err(weft_err)
                .with_context(|| format!("no directory {root} in the Weft namespace (with --api native, --dir is a path from the file system's root)"))?;
            if inode.attr.kind != FileType::Directory {
                return Err(anyhow!("{root} in the Weft namespace is not a directory"));
            }
            fid = inode.attr.fid;
        }
        let dirs = HashMap::from([(String::new(), fid)]);
        Ok(NativeFs { rt, client, who, dirs, root_name: root.to_string() })
    }

    fn full(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root_name.trim_end_matches('/'))
    }

    fn dir_fid(&mut self, rel: &str) -> Result<Fid> {
        if let Some(fid) = self.dirs.get(rel) {
            return Ok(*fid);
        }
        let (parent, name) = split(rel);
        let pfid = self.dir_fid(parent)?;
        let inode = self.lookup(pfid, name).with_context(|| format!("lookup {}", self.full(rel)))?;
        if inode.attr.kind != FileType::Directory {
            return Err(anyhow!("{} is not a directory", self.full(rel)));
        }
        self.dirs.insert(rel.to_string(), inode.attr.fid);
        Ok(inode.attr.fid)
    }

    fn lookup(&self, parent: Fid, name: &str) -> Result<InodeInfo> {
        self.rt.block_on(self.client.lookup(&self.who, parent, name.as_bytes())).map_err(weft_err)
    }

    fn file_of(&self, rel: &str, mut inode: InodeInfo, handle: u64) -> Result<NativeFile> {
        self.rt.block_on(self.client.complete_size(&self.who, &mut inode)).map_err(weft_err)?;
        let layout = inode.layout.ok_or_else(|| anyhow!("{} has no layout", self.full(rel)))?;
        let open = Some((handle, layout));
        Ok(NativeFile { fid: inode.attr.fid, open, size: inode.attr.size, wrote: false, last: Bytes::new() })
    }

    /// The file's open and layout: opened for reading and writing now if the write-back
    /// cache made it.
    fn opened(&self, file: &mut NativeFile) -> Result<(u64, Layout)> {
        if let Some(open) = &file.open {
            return Ok(open.clone());
        }
        let opened =
            self.rt.block_on(self.client.open(&self.who, file.fid, OPEN_READ | OPEN_WRITE)).map_err(weft_err)?;
        let layout = opened.inode.layout.ok_or_else(|| anyhow!("{} has no layout", file.fid))?;
        file.open = Some((opened.handle, layout.clone()));
        Ok((opened.handle, layout))
    }

    fn open(&mut self, rel: &str, flags: u32, what: &str) -> Result<NativeFile> {
        let (parent, name) = split(rel);
        let pfid = self.dir_fid(parent)?;
        let weft_client::Opened { inode, handle, .. } = (|| {
            let inode = self.lookup(pfid, name)?;
            self.rt.block_on(self.client.open(&self.who, inode.attr.fid, flags)).map_err(weft_err)
        })()
        .with_context(|| format!("{what} {}", self.full(rel)))?;
        self.file_of(rel, inode, handle)
    }
}

impl BenchFs for NativeFs {
    type File = NativeFile;

    fn mkdir(&mut self, path: &str) -> Result<()> {
        let (parent, name) = split(path);
        let pfid = self.dir_fid(parent)?;
        let inode = self
            .rt
            .block_on(self.client.mkdir(&self.who, pfid, name.as_bytes(), 0o755))
            .map_err(weft_err)
            .with_context(|| format!("mkdir {}", self.full(path)))?;
        self.dirs.insert(path.to_string(), inode.attr.fid);
        Ok(())
    }

    fn create_excl(&mut self, path: &str) -> Result<NativeFile> {
        let (parent, name) = split(path);
        let pfid = self.dir_fid(parent)?;
        if self.client.wbc_enabled() {
            // Not opened: a file nobody writes (mdtest's) costs no open, and is made by the
            // write-back cache when it holds the directory.
            let inode = self
                .rt
                .block_on(self.client.create_file(&self.who, pfid, name.as_bytes(), 0o644))
                .map_err(weft_err)
                .with_context(|| format!("create {}", self.full(path)))?;
            return Ok(NativeFile { fid: inode.attr.fid, open: None, size: 0, wrote: false, last: Bytes::new() });
        }
        let weft_client::Opened { inode, handle, .. } = self
            .rt
            .block_on(self.client.create(&self.who, pfid, name.as_bytes(), 0o644, true, None, OPEN_WRITE))
            .map_err(weft_err)
            .with_context(|| format!("create {}", self.full(path)))?;
        self.file_of(path, inode, handle)
    }

    fn open_write(&mut self, path: &str) -> Result<NativeFile> {
        self.open(path, OPEN_WRITE, "open for writing")
    }

    fn open_read(&mut self, path: &str) -> Result<NativeFile> {
        self.open(path, OPEN_READ, "open for reading")
    }

    fn pwrite(&mut self, file: &mut NativeFile, offset: u64, data: Bytes) -> Result<()> {
        let len = data.len();
        let (handle, mut layout) = self.opened(file)?;
        file.wrote = true;
        self.rt
            .block_on(async {
                // Objects for a layout the first write reaches (a file the cache made).
                if let Some(inode) =
                    self.client.instantiate(&self.who, file.fid, &layout, offset, len as u64, Some(handle)).await?
                {
                    layout = inode.layout.unwrap_or(layout);
                    file.open = Some((handle, layout.clone()));
                }
                let locks =
                    self.client.extent_lock(&self.who, file.fid, &layout, offset, len as u64, LockMode::Pw).await?;
                self.client.write(&self.who, &layout, offset, data, &locks).await
            })
            .map_err(weft_err)
            .with_context(|| format!("write of {len} bytes at {offset}"))?;
        file.size = file.size.max(offset + len as u64);
        Ok(())
    }

    fn pread<'f>(&mut self, file: &'f mut NativeFile, offset: u64, len: usize) -> Result<&'f [u8]> {
        let len32 = u32::try_from(len).map_err(|_| anyhow!("a read of {len} bytes is too large"))?;
        let (_, layout) = self.opened(file)?;
        file.last = self
            .rt
            .block_on(async {
                let _locks =
                    self.client.extent_lock(&self.who, file.fid, &layout, offset, len as u64, LockMode::Pr).await?;
                self.client.read(&self.who, &layout, offset, len32, file.size).await
            })
            .map_err(weft_err)
            .with_context(|| format!("read of {len} bytes at {offset}"))?;
        Ok(&file.last)
    }

    fn fsync(&mut self, file: &mut NativeFile) -> Result<()> {
        let Some((_, layout)) = &file.open else {
            return Ok(()); // nothing written: the file is as durable as its directory
        };
        self.rt.block_on(self.client.fsync(&self.who, layout)).map_err(weft_err).context("fsync")
    }

    fn close(&mut self, file: NativeFile) -> Result<()> {
        let Some((handle, layout)) = &file.open else {
            return Ok(()); // made by the write-back cache, never opened
        };
        self.rt
            .block_on(async {
                let size_blocks =
                    if file.wrote { Some(self.client.glimpse_versioned(&self.who, layout).await?) } else { None };
                self.client.close(&self.who, file.fid, *handle, size_blocks).await
            })
            .map_err(weft_err)
            .context("close")
    }

    fn stat(&mut self, path: &str) -> Result<Stat> {
        let mut inode = if path.is_empty() {
            let fid = self.dir_fid("")?;
            self.rt.block_on(self.client.getattr(&self.who, fid)).map_err(weft_err)
        } else {
            let (parent, name) = split(path);
            let pfid = self.dir_fid(parent)?;
            self.lookup(pfid, name)
        }
        .with_context(|| format!("stat {}", self.full(path)))?;
        self.rt.block_on(self.client.complete_size(&self.who, &mut inode)).map_err(weft_err)?;
        let a = &inode.attr;
        Ok(Stat {
            size: a.size,
            mtime_ns: a.mtime.sec as i128 * 1_000_000_000 + a.mtime.nsec as i128,
            is_dir: a.kind == FileType::Directory,
            is_file: a.kind == FileType::Regular,
        })
    }

    fn unlink(&mut self, path: &str) -> Result<()> {
        let (parent, name) = split(path);
        let pfid = self.dir_fid(parent)?;
        self.rt
            .block_on(self.client.unlink(&self.who, pfid, name.as_bytes()))
            .map_err(weft_err)
            .with_context(|| format!("unlink {}", self.full(path)))
    }

    fn rmdir(&mut self, path: &str) -> Result<()> {
        let (parent, name) = split(path);
        let pfid = self.dir_fid(parent)?;
        self.rt
            .block_on(self.client.rmdir(&self.who, pfid, name.as_bytes()))
            .map_err(weft_err)
            .with_context(|| format!("rmdir {}", self.full(path)))?;
        self.dirs.remove(path);
        Ok(())
    }

    fn readdir(&mut self, path: &str) -> Result<Vec<(String, bool)>> {
        let fid = self.dir_fid(path)?;
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let page = self
                .rt
                .block_on(self.client.readdir(&self.who, fid, cookie, READDIR_ENTRIES_MAX))
                .map_err(weft_err)
                .with_context(|| format!("readdir {}", self.full(path)))?;
            for e in &page.entries {
                out.push((String::from_utf8_lossy(&e.name).into_owned(), e.kind == FileType::Directory));
            }
            match page.entries.last() {
                Some(last) if !page.eof => cookie = last.cookie,
                _ => break,
            }
        }
        Ok(out)
    }

    fn drop_cache(&mut self, _path: &str) -> Result<()> {
        Ok(())
    }

    fn sync_dir(&mut self, path: &str) -> Result<()> {
        let fid = self.dir_fid(path)?;
        self.rt
            .block_on(self.client.fsync_dir(fid))
            .map_err(weft_err)
            .with_context(|| format!("fsync {}", self.full(path)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(components("/bench//run/").collect::<Vec<_>>(), ["bench", "run"]);
        assert_eq!(components("/").count(), 0);
        assert_eq!(split("a/b/c"), ("a/b", "c"));
        assert_eq!(split("c"), ("", "c"));
    }
}
