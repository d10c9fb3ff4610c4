//! Attributes as stat(2) and statx(2) give them: the inode numbers, block size and device
//! a FUSE mount of the same file system shows, so programs that compare them agree.

use crate::fs::Fs;
use weft_proto::layout::Layout;
use weft_proto::msg::{Attr, FileType, Timestamp};

/// st_blksize where the layout says nothing (a directory, a link).
const BLOCK_SIZE_BYTES: u32 = 4096;

/// What stat(2) tells of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub attr: Attr,
    /// The first component's stripe size (what cp and others read at once), else 4 KiB.
    pub blksize: u32,
}

impl Stat {
    pub fn new(attr: Attr, layout: Option<&Layout>) -> Stat {
        let blksize = layout
            .and_then(|l| l.components.first())
            .map(|c| u32::try_from(c.stripe_size).unwrap_or(u32::MAX))
            .filter(|s| *s > 0)
            .unwrap_or(BLOCK_SIZE_BYTES);
        Stat { attr, blksize }
    }
}

/// S_IF* of a kind.
pub fn mode_type(kind: FileType) -> u32 {
    match kind {
        FileType::Regular => libc::S_IFREG,
        FileType::Directory => libc::S_IFDIR,
        FileType::Symlink => libc::S_IFLNK,
        FileType::Fifo => libc::S_IFIFO,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Socket => libc::S_IFSOCK,
    }
}

fn time(t: Timestamp) -> (i64, i64) {
    (t.sec, i64::from(t.nsec))
}

impl Fs {
    /// The device number stat shows (`Fs::set_dev`: the FUSE mount's, for the interception
    /// library; else one made of the file system's name).
    pub fn dev(&self) -> u64 {
        self.dev.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_dev(&self, dev: u64) {
        self.dev.store(dev, std::sync::atomic::Ordering::Relaxed);
    }

    /// `st` filled as stat(2) fills it.
    pub fn fill_stat(&self, s: &Stat, st: &mut libc::stat) {
        let a = &s.attr;
        // SAFETY: libc::stat is plain old data; all zeros is a valid value.
        *st = unsafe { std::mem::zeroed() };
        st.st_dev = self.dev();
        st.st_ino = self.ino(a.fid);
        st.st_mode = mode_type(a.kind) | (a.mode & 0o7777);
        st.st_nlink = a.nlink as libc::nlink_t;
        st.st_uid = a.uid;
        st.st_gid = a.gid;
        st.st_rdev = u64::from(a.rdev);
        st.st_size = a.size as i64;
        st.st_blksize = s.blksize as libc::blksize_t;
        st.st_blocks = a.blocks as i64;
        (st.st_atime, st.st_atime_nsec) = time(a.atime);
        (st.st_mtime, st.st_mtime_nsec) = time(a.mtime);
        (st.st_ctime, st.st_ctime_nsec) = time(a.ctime);
    }
}
