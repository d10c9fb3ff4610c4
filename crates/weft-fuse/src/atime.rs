//! Access times. The kernel leaves atime to a FUSE file system (every inode is S_NOATIME),
//! and most reads never reach the mount (page cache, passthrough), so the MDS moves atime at
//! an open for reading, by the mount's mode as Linux's rules have it (see
//! `OPEN_ATIME_RELATIME`). The open's answer carries the new atime: the kernel's cached
//! attributes of the inode are dropped when it moved, so that the next stat shows it; other
//! clients that cached the old one were called back by the MDS.

use crate::convert::timestamp;
use crate::mount::Mount;
use fuser::INodeNo;
use std::time::SystemTime;
use weft_proto::msg::{atime_moves, Timestamp, OPEN_ATIME_RELATIME, OPEN_ATIME_STRICT};
use weft_proto::Fid;

/// The mount's atime mode (`-o noatime|relatime|strictatime`), as on a local file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AtimeMode {
    /// Reads never move atime.
    NoAtime,
    /// The first read after a change moves it, and a read of a file whose atime is a day old.
    #[default]
    Relatime,
    /// Every read moves it.
    StrictAtime,
}

impl AtimeMode {
    /// The mount option that names this mode.
    pub fn name(self) -> &'static str {
        match self {
            AtimeMode::NoAtime => "noatime",
            AtimeMode::Relatime => "relatime",
            AtimeMode::StrictAtime => "strictatime",
        }
    }

    /// The MDS open flags that ask for this mode, for an open with open(2) flags `flags`:
    /// none for `noatime` or an `O_NOATIME` open (the kernel let only the owner or a
    /// privileged caller give it).
    pub(crate) fn open_flags(self, flags: i32) -> u32 {
        if flags & libc::O_NOATIME != 0 {
            return 0;
        }
        match self {
            AtimeMode::NoAtime => 0,
            AtimeMode::Relatime => OPEN_ATIME_RELATIME,
            AtimeMode::StrictAtime => OPEN_ATIME_STRICT,
        }
    }

    /// The kernel's mount flag for this mode (shown in /proc/mounts); none for `relatime`,
    /// the kernel's default.
    pub(crate) fn mount_option(self) -> Option<fuser::MountOption> {
        match self {
            AtimeMode::NoAtime => Some(fuser::MountOption::NoAtime),
            AtimeMode::Relatime => None,
            AtimeMode::StrictAtime => Some(fuser::MountOption::StrictAtime),
        }
    }
}

impl Mount {
    /// `mds_flags` without its atime mode when the attributes this mount holds under a lock
    /// say the open would not move atime (under relatime, a file read since its last
    /// change): the usual repeated read then costs the MDS no inode look-up or lock
    /// decision. Another client's change or read that moved atime calls that lock back.
    pub(crate) fn without_needless_atime(&self, fid: Fid, mds_flags: u32) -> u32 {
        let asks = mds_flags & (OPEN_ATIME_RELATIME | OPEN_ATIME_STRICT) != 0;
        match self.client.cached_attr(fid) {
            // With a writer open (size not known) its close may move mtime without calling
            // this lock back: ask the MDS then.
            Some(a)
                if asks
                    && a.size_known
                    && !atime_moves(mds_flags, a.atime, a.mtime, a.ctime, timestamp(SystemTime::now())) =>
            {
                mds_flags & !(OPEN_ATIME_RELATIME | OPEN_ATIME_STRICT)
            }
            _ => mds_flags,
        }
    }

    /// Before an MDS open with `mds_flags` of `fid`: the atime this mount knows (the kernel's
    /// cached attributes came from it); None when the open cannot move atime.
    pub(crate) fn atime_before_open(&self, fid: Fid, mds_flags: u32) -> Option<Option<Timestamp>> {
        (mds_flags & (OPEN_ATIME_RELATIME | OPEN_ATIME_STRICT) != 0)
            .then(|| self.client.last_known(fid).map(|a| a.atime))
    }

    /// After the open: if the answered atime is not the one known before, the kernel's cached
    /// attributes of `fid` would hide it; they go (marked stale, nothing waits).
    pub(crate) fn atime_after_open(&self, fid: Fid, before: Option<Option<Timestamp>>, answered: Timestamp) {
        if before.is_some_and(|known| known != Some(answered)) {
            self.hooks.drop_attributes(INodeNo(crate::root::ino_of(fid)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_ask_the_mds_and_the_kernel_as_their_names_say() {
        assert_eq!(AtimeMode::default(), AtimeMode::Relatime);
        assert_eq!(AtimeMode::Relatime.open_flags(libc::O_RDONLY), OPEN_ATIME_RELATIME);
        assert_eq!(AtimeMode::StrictAtime.open_flags(libc::O_RDWR), OPEN_ATIME_STRICT);
        assert_eq!(AtimeMode::NoAtime.open_flags(libc::O_RDONLY), 0);
        assert_eq!(AtimeMode::StrictAtime.open_flags(libc::O_RDONLY | libc::O_NOATIME), 0, "O_NOATIME");
        assert_eq!(AtimeMode::NoAtime.mount_option(), Some(fuser::MountOption::NoAtime));
        assert_eq!(AtimeMode::StrictAtime.mount_option(), Some(fuser::MountOption::StrictAtime));
        assert_eq!(AtimeMode::Relatime.mount_option(), None, "the kernel's default");
    }
}
