//! The namespace by path: stat, mkdir, rmdir, unlink, rename, link, symlink, readlink,
//! chmod, chown, utimens, truncate, access, extended attributes, statfs, and listings.

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::stat::Stat;
use weft_proto::acl::Acl;
use weft_proto::limits::READDIR_ENTRIES_MAX;
use weft_proto::msg::{Attr, DirEntry, FileType, SetAttr, SetTime, StatfsInfo, Timestamp};
use weft_proto::Fid;

/// A directory being listed: one page of entries at a time, resumed after the last cookie.
#[derive(Debug)]
pub struct Dir {
    pub fid: Fid,
    page: Vec<DirEntry>,
    next: usize,
    cookie: u64,
    eof: bool,
    /// Entries handed out so far (`.` and `..` first), telldir's position.
    pub position: u64,
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: Vec<u8>,
    pub fid: Fid,
    pub kind: FileType,
}

/// `d_type` of a kind (dirent.h's DT_*).
pub fn dirent_type(kind: FileType) -> u8 {
    match kind {
        FileType::Regular => libc::DT_REG,
        FileType::Directory => libc::DT_DIR,
        FileType::Symlink => libc::DT_LNK,
        FileType::Fifo => libc::DT_FIFO,
        FileType::CharDevice => libc::DT_CHR,
        FileType::BlockDevice => libc::DT_BLK,
        FileType::Socket => libc::DT_SOCK,
    }
}

/// utimensat(2)'s `times` as a setattr: NULL sets both to now; a tv_nsec of UTIME_NOW sets
/// one to now, UTIME_OMIT leaves it.
///
/// # Safety
/// `times` is NULL or points to two timespecs.
pub unsafe fn utimens_attr(times: *const libc::timespec) -> Result<SetAttr> {
    let one = |t: &libc::timespec| match t.tv_nsec {
        libc::UTIME_OMIT => Ok(None),
        libc::UTIME_NOW => Ok(Some(SetTime::Now)),
        0..=999_999_999 => Ok(Some(SetTime::At(Timestamp { sec: t.tv_sec, nsec: t.tv_nsec as u32 }))),
        n => Err(Error::new(libc::EINVAL, format!("tv_nsec {n} is not a time"))),
    };
    let (atime, mtime) = match times.is_null() {
        true => (Some(SetTime::Now), Some(SetTime::Now)),
        // SAFETY: as the caller promised.
        false => unsafe { (one(&*times)?, one(&*times.add(1))?) },
    };
    Ok(SetAttr { atime, mtime, ..SetAttr::default() })
}

/// listxattr(2)'s buffer: the names one after another, each NUL-terminated.
pub fn xattr_names(names: Vec<Vec<u8>>) -> Vec<u8> {
    let mut all = Vec::new();
    for name in names {
        all.extend_from_slice(&name);
        all.push(0);
    }
    all
}

fn not_dir(path: &[u8]) -> Error {
    Error::new(libc::ENOTDIR, format!("{}: not a directory", String::from_utf8_lossy(path)))
}

impl Fs {
    /// stat(2) (`follow`) or lstat(2): the size and blocks a regular file's objects hold.
    pub fn stat(&self, path: &[u8], follow: bool) -> Result<Stat> {
        let who = self.who();
        let mut inode = self.resolve(&who, path, follow)?;
        self.run(self.client.complete_size(&who, &mut inode))?;
        Ok(Stat::new(inode.attr, inode.layout.as_ref()))
    }

    /// mkdir(2); a path that ends in `.`, `..` or is the root names a directory that is
    /// there already (EEXIST, as Linux says).
    pub fn mkdir(&self, path: &[u8], mode: u32) -> Result<()> {
        let who = self.who();
        let last = path.split(|b| *b == b'/').rfind(|n| !n.is_empty());
        if matches!(last, None | Some(b".") | Some(b"..")) && !path.is_empty() {
            self.resolve(&who, path, true)?;
            return Err(Error::new(libc::EEXIST, format!("{} exists", String::from_utf8_lossy(path))));
        }
        let at = self.parent(&who, path)?;
        self.run(self.client.mkdir(&who, at.dir, &at.name, mode & 0o7777)).map(drop)
    }

    pub fn rmdir(&self, path: &[u8]) -> Result<()> {
        let who = self.who();
        let at = self.parent(&who, path)?;
        self.run(self.client.rmdir(&who, at.dir, &at.name))
    }

    pub fn unlink(&self, path: &[u8]) -> Result<()> {
        let who = self.who();
        let at = self.parent(&who, path)?;
        if at.trailing_slash {
            return Err(not_dir(path));
        }
        self.run(self.client.unlink(&who, at.dir, &at.name))
    }

    /// rename(2), or renameat2(2) with `flags` (RENAME_NOREPLACE, RENAME_EXCHANGE).
    pub fn rename(&self, from: &[u8], to: &[u8], flags: u32) -> Result<()> {
        let who = self.who();
        let src = self.parent(&who, from)?;
        let dst = self.parent(&who, to)?;
        self.run(self.client.rename(&who, src.dir, &src.name, dst.dir, &dst.name, flags))
    }

    /// link(2): a new name `to` for the file `from` names (not following a last link).
    pub fn link(&self, from: &[u8], to: &[u8]) -> Result<()> {
        let who = self.who();
        let inode = self.resolve(&who, from, false)?;
        if inode.attr.kind == FileType::Directory {
            return Err(Error::new(libc::EPERM, "link of a directory"));
        }
        let dst = self.parent(&who, to)?;
        self.run(self.client.link(&who, inode.attr.fid, dst.dir, &dst.name)).map(drop)
    }

    /// symlink(2): `path` becomes a link whose target is `target`.
    pub fn symlink(&self, target: &[u8], path: &[u8]) -> Result<()> {
        let who = self.who();
        let at = self.parent(&who, path)?;
        self.run(self.client.symlink(&who, at.dir, &at.name, target)).map(drop)
    }

    pub fn readlink(&self, path: &[u8]) -> Result<Vec<u8>> {
        let who = self.who();
        let inode = self.resolve(&who, path, false)?;
        if inode.attr.kind != FileType::Symlink {
            return Err(Error::new(libc::EINVAL, format!("{} is not a symbolic link", String::from_utf8_lossy(path))));
        }
        self.run(self.client.readlink(&who, inode.attr.fid))
    }

    /// A setattr of what `path` names (`follow`: its last link followed).
    pub fn setattr(&self, path: &[u8], follow: bool, set: SetAttr) -> Result<Attr> {
        let who = self.who();
        let inode = self.resolve(&who, path, follow)?;
        self.setattr_fid(inode.attr.fid, set)
    }

    /// A setattr of the inode `fid` (an open file's: fchmod, fchown, futimens).
    pub fn setattr_fid(&self, fid: Fid, set: SetAttr) -> Result<Attr> {
        self.run(self.client.setattr(&self.who(), fid, set)).map(|i| i.attr)
    }

    pub fn chmod(&self, path: &[u8], mode: u32) -> Result<()> {
        self.setattr(path, true, SetAttr { mode: Some(mode & 0o7777), ..SetAttr::default() }).map(drop)
    }

    /// chown(2) (`follow`) or lchown(2); None leaves an id as it is (-1 in C).
    pub fn chown(&self, path: &[u8], uid: Option<u32>, gid: Option<u32>, follow: bool) -> Result<()> {
        self.setattr(path, follow, SetAttr { uid, gid, ..SetAttr::default() }).map(drop)
    }

    /// utimensat(2): None leaves a time as it is (UTIME_OMIT).
    pub fn utimens(&self, path: &[u8], atime: Option<SetTime>, mtime: Option<SetTime>, follow: bool) -> Result<()> {
        self.setattr(path, follow, SetAttr { atime, mtime, ..SetAttr::default() }).map(drop)
    }

    /// truncate(2) of a regular file by path.
    pub fn truncate(&self, path: &[u8], size: u64) -> Result<()> {
        let who = self.who();
        let inode = self.resolve(&who, path, true)?;
        let layout = match inode.attr.kind {
            FileType::Directory => return Err(Error::new(libc::EISDIR, "truncate of a directory")),
            FileType::Regular => inode.layout.ok_or_else(|| Error::new(libc::EIO, "the file has no layout"))?,
            _ => return Err(Error::new(libc::EINVAL, "truncate of a special file")),
        };
        self.run(self.client.truncate(&who, inode.attr.fid, &layout, size, None)).map(drop)
    }

    /// access(2) by the mode bits, owner and groups (R_OK, W_OK, X_OK; F_OK is 0), judged
    /// as the servers judge mode bits (`Acl::from_mode`; a file's access ACL is not read
    /// here). Root may read and write anything, and execute what anyone may.
    pub fn access(&self, path: &[u8], mask: i32) -> Result<()> {
        let attr = self.stat(path, true)?.attr;
        let id = &self.caller.identity;
        let want = (mask & (libc::R_OK | libc::W_OK | libc::X_OK)) as u32;
        let allowed = match id.uid {
            0 => want & libc::X_OK as u32 == 0 || attr.mode & 0o111 != 0 || attr.kind == FileType::Directory,
            _ => Acl::from_mode(attr.mode).permits(id, attr.uid, attr.gid, want),
        };
        match allowed {
            true => Ok(()),
            false => Err(Error::new(libc::EACCES, format!("{}: permission denied", String::from_utf8_lossy(path)))),
        }
    }

    pub fn getxattr(&self, path: &[u8], name: &[u8], follow: bool) -> Result<Vec<u8>> {
        let who = self.who();
        let inode = self.resolve(&who, path, follow)?;
        self.run(self.client.getxattr(&who, inode.attr.fid, name))
    }

    /// setxattr(2) with `flags` XATTR_CREATE or XATTR_REPLACE (or 0).
    pub fn setxattr(&self, path: &[u8], name: &[u8], value: &[u8], flags: u32, follow: bool) -> Result<()> {
        let who = self.who();
        let inode = self.resolve(&who, path, follow)?;
        self.run(self.client.setxattr(&who, inode.attr.fid, name, value, flags))
    }

    pub fn listxattr(&self, path: &[u8], follow: bool) -> Result<Vec<Vec<u8>>> {
        let who = self.who();
        let inode = self.resolve(&who, path, follow)?;
        self.run(self.client.listxattr(&who, inode.attr.fid))
    }

    pub fn removexattr(&self, path: &[u8], name: &[u8], follow: bool) -> Result<()> {
        let who = self.who();
        let inode = self.resolve(&who, path, follow)?;
        self.run(self.client.removexattr(&who, inode.attr.fid, name))
    }

    /// statfs(2): space over the OSTs, inodes over the MDTs.
    pub fn statfs(&self) -> Result<StatfsInfo> {
        self.run(self.client.statfs())
    }

    /// opendir(3) of `path`.
    pub fn opendir(&self, path: &[u8]) -> Result<Dir> {
        let inode = self.resolve(&self.who(), path, true)?;
        if inode.attr.kind != FileType::Directory {
            return Err(not_dir(path));
        }
        Ok(self.opendir_fid(inode.attr.fid))
    }

    /// A listing of directory `fid` (fdopendir(3)).
    pub fn opendir_fid(&self, fid: Fid) -> Dir {
        Dir { fid, page: Vec::new(), next: 0, cookie: 0, eof: false, position: 0 }
    }

    /// readdir(3): the next entry, `.` and `..` first; None at the end.
    pub fn readdir(&self, dir: &mut Dir) -> Result<Option<Entry>> {
        let position = dir.position;
        if position < 2 {
            dir.position += 1;
            let name = if position == 0 { b".".to_vec() } else { b"..".to_vec() };
            return Ok(Some(Entry { name, fid: dir.fid, kind: FileType::Directory }));
        }
        while dir.next == dir.page.len() {
            if dir.eof {
                return Ok(None);
            }
            let page = self.run(self.client.readdir(&self.who(), dir.fid, dir.cookie, READDIR_ENTRIES_MAX))?;
            dir.eof = page.eof || page.entries.is_empty();
            if let Some(last) = page.entries.last() {
                dir.cookie = last.cookie;
            }
            dir.page = page.entries;
            dir.next = 0;
        }
        let e = &dir.page[dir.next];
        dir.next += 1;
        dir.position += 1;
        Ok(Some(Entry { name: e.name.clone(), fid: e.fid, kind: e.kind }))
    }

    /// rewinddir(3), and seekdir(3) to a position telldir gave (read again up to it).
    pub fn seekdir(&self, dir: &mut Dir, position: u64) -> Result<()> {
        *dir = self.opendir_fid(dir.fid);
        while dir.position < position {
            if self.readdir(dir)?.is_none() {
                break;
            }
        }
        Ok(())
    }
}
