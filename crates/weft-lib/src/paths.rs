//! Paths to inodes: each name looked up from the root (the client's inode cache answers
//! the names it holds locks on without a request), `.` and `..` by the directories walked,
//! symbolic links followed as the kernel follows them.

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::limits::SYMLINKS_FOLLOWED_MAX;
use std::collections::VecDeque;
use weft_proto::msg::{Caller, FileType, InodeInfo};
use weft_proto::Fid;

/// Where a path ends: the directory that holds its last name, and that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    pub dir: Fid,
    pub name: Vec<u8>,
    /// The path ended in `/`: its last name must be a directory.
    pub trailing_slash: bool,
}

/// A path's names, without empty ones (doubled and trailing slashes).
fn split_names(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|b| *b == b'/').filter(|n| !n.is_empty()).map(<[u8]>::to_vec).collect()
}

fn no_such(path: &[u8]) -> Error {
    Error::new(libc::ENOENT, format!("{}: no such file or directory", String::from_utf8_lossy(path)))
}

impl Fs {
    /// Absolute symbolic links name host paths: those under `prefix` (the FUSE mount's
    /// directory, for the interception library) resolve from this file system's root, the
    /// others fail with EXDEV (the caller goes through the kernel for them). Without a
    /// prefix (the C API) they resolve from the root, as in a chroot.
    pub fn set_link_prefix(&mut self, prefix: Option<&[u8]>) {
        self.link_prefix = prefix.map(|p| p.strip_suffix(b"/").unwrap_or(p).to_vec());
    }

    /// The names an absolute link's target stands for, from the root.
    fn absolute_target(&self, target: &[u8]) -> Result<VecDeque<Vec<u8>>> {
        match &self.link_prefix {
            None => Ok(split_names(target)),
            Some(prefix) => match target.strip_prefix(prefix.as_slice()) {
                Some(rest) if rest.is_empty() || rest[0] == b'/' => Ok(split_names(rest)),
                _ => Err(Error::new(
                    libc::EXDEV,
                    format!("the link to {} leaves the file system", String::from_utf8_lossy(target)),
                )),
            },
        }
    }

    /// Walks `names` from the directory stack `dirs` (the root first), following links
    /// (the last name's too when `follow_last`); the inode the last name is, or the last
    /// directory's when the names are used up (`.`, `..`, the root).
    fn walk(
        &self,
        who: &Caller,
        path: &[u8],
        dirs: &mut Vec<Fid>,
        mut names: VecDeque<Vec<u8>>,
        follow_last: bool,
    ) -> Result<Option<InodeInfo>> {
        let mut links = 0;
        let mut last = None;
        while let Some(name) = names.pop_front() {
            last = None;
            let dir = *dirs.last().unwrap_or(&self.root);
            match name.as_slice() {
                b"." => continue,
                b".." => {
                    if dirs.len() > 1 {
                        dirs.pop();
                    }
                    continue;
                }
                _ => {}
            }
            let inode = self.run(self.client.lookup(who, dir, &name))?;
            match inode.attr.kind {
                FileType::Symlink if !names.is_empty() || follow_last => {
                    links += 1;
                    if links > SYMLINKS_FOLLOWED_MAX {
                        return Err(Error::new(
                            libc::ELOOP,
                            format!("{}: too many symbolic links", String::from_utf8_lossy(path)),
                        ));
                    }
                    let target = self.run(self.client.readlink(who, inode.attr.fid))?;
                    let mut more = if target.first() == Some(&b'/') {
                        dirs.truncate(1);
                        self.absolute_target(&target)?
                    } else {
                        split_names(&target)
                    };
                    more.extend(names.drain(..));
                    names = more;
                }
                FileType::Directory => {
                    dirs.push(inode.attr.fid);
                    last = Some(inode);
                }
                _ if !names.is_empty() => {
                    return Err(Error::new(
                        libc::ENOTDIR,
                        format!("{}: not a directory", String::from_utf8_lossy(path)),
                    ))
                }
                _ => last = Some(inode),
            }
        }
        Ok(last)
    }

    /// The inode `path` names (from the root, whether it starts with `/` or not), its last
    /// name's link followed when `follow`.
    pub fn resolve(&self, who: &Caller, path: &[u8], follow: bool) -> Result<InodeInfo> {
        if path.is_empty() {
            return Err(no_such(path));
        }
        let mut dirs = vec![self.root];
        match self.walk(who, path, &mut dirs, split_names(path), follow)? {
            Some(inode) => Ok(inode),
            // Used up on `.`/`..`/the root: the directory the walk stands in.
            None => self.run(self.client.getattr(who, *dirs.last().unwrap_or(&self.root))),
        }
    }

    /// The directory that holds `path`'s last name (links on the way followed) and the
    /// name: what a create, unlink or rename changes.
    pub fn parent(&self, who: &Caller, path: &[u8]) -> Result<Parent> {
        let mut all = split_names(path);
        let Some(name) = all.pop_back() else {
            return Err(Error::new(libc::EBUSY, "the root has no parent here"));
        };
        if name == b"." || name == b".." {
            return Err(Error::new(libc::EINVAL, format!("{}: ends in . or ..", String::from_utf8_lossy(path))));
        }
        let mut dirs = vec![self.root];
        if let Some(inode) = self.walk(who, path, &mut dirs, all, true)? {
            if inode.attr.kind != FileType::Directory {
                return Err(Error::new(libc::ENOTDIR, format!("{}: not a directory", String::from_utf8_lossy(path))));
            }
        }
        let dir = *dirs.last().unwrap_or(&self.root);
        Ok(Parent { dir, name, trailing_slash: path.ends_with(b"/") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_skip_empty_ones() {
        assert_eq!(split_names(b"/a//b/./c/"), [b"a".to_vec(), b"b".to_vec(), b".".to_vec(), b"c".to_vec()]);
        assert!(split_names(b"/").is_empty());
        assert!(split_names(b"").is_empty());
    }
}
