//! Conversions between Weft's attribute types and fuser's. Pure.

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use weft_proto::layout::Layout;
use weft_proto::msg::{Attr, FileType, SetTime, Timestamp};

/// st_blksize of files without a layout.
const BLOCK_SIZE_BYTES: u32 = 4096;

pub fn file_type(kind: FileType) -> fuser::FileType {
    match kind {
        FileType::Regular => fuser::FileType::RegularFile,
        FileType::Directory => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
        FileType::Socket => fuser::FileType::Socket,
    }
}

/// The node type in a mknod mode; `None` for a type mknod cannot make here.
pub fn mknod_type(mode: u32) -> Option<FileType> {
    match mode & libc::S_IFMT {
        libc::S_IFREG => Some(FileType::Regular),
        libc::S_IFIFO => Some(FileType::Fifo),
        libc::S_IFCHR => Some(FileType::CharDevice),
        libc::S_IFBLK => Some(FileType::BlockDevice),
        libc::S_IFSOCK => Some(FileType::Socket),
        _ => None,
    }
}

pub fn system_time(t: Timestamp) -> SystemTime {
    let nanos = Duration::from_nanos(t.nsec.min(999_999_999) as u64);
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.sec as u64) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + nanos
    }
}

pub fn timestamp(t: SystemTime) -> Timestamp {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timestamp { sec: d.as_secs() as i64, nsec: d.subsec_nanos() },
        Err(e) => {
            let d = e.duration();
            if d.subsec_nanos() == 0 {
                Timestamp { sec: -(d.as_secs() as i64), nsec: 0 }
            } else {
                Timestamp { sec: -(d.as_secs() as i64) - 1, nsec: 1_000_000_000 - d.subsec_nanos() }
            }
        }
    }
}

pub fn set_time(t: fuser::TimeOrNow) -> SetTime {
    match t {
        fuser::TimeOrNow::Now => SetTime::Now,
        fuser::TimeOrNow::SpecificTime(t) => SetTime::At(timestamp(t)),
    }
}

/// The attributes the kernel gets. st_blksize is the stripe size of a striped file, so
/// that tools size their buffers to whole stripes, as on Lustre.
pub fn file_attr(attr: &Attr, layout: Option<&Layout>) -> fuser::FileAttr {
    let blksize = layout
        .and_then(|l| l.components.first())
        .map(|c| u32::try_from(c.stripe_size).unwrap_or(u32::MAX))
        .filter(|s| *s > 0)
        .unwrap_or(BLOCK_SIZE_BYTES);
    fuser::FileAttr {
        ino: fuser::INodeNo(crate::root::ino_of(attr.fid)),
        size: attr.size,
        blocks: attr.blocks,
        atime: system_time(attr.atime),
        mtime: system_time(attr.mtime),
        ctime: system_time(attr.ctime),
        crtime: system_time(attr.ctime),
        kind: file_type(attr.kind),
        perm: (attr.mode & 0o7777) as u16,
        nlink: attr.nlink,
        uid: attr.uid,
        gid: attr.gid,
        rdev: attr.rdev,
        blksize,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::layout::StripeObject;
    use weft_proto::Fid;

    #[test]
    fn timestamps_round_trip_including_before_the_epoch() {
        for t in [
            Timestamp { sec: 0, nsec: 0 },
            Timestamp { sec: 1_700_000_000, nsec: 123_456_789 },
            Timestamp { sec: -1, nsec: 500 },
            Timestamp { sec: -86_400, nsec: 0 },
        ] {
            assert_eq!(timestamp(system_time(t)), t);
        }
    }

    #[test]
    fn attr_converts_with_ino_perm_and_stripe_blksize() {
        let attr = Attr {
            fid: Fid::ROOT,
            kind: FileType::Directory,
            mode: 0o41777,
            uid: 5,
            gid: 6,
            nlink: 3,
            size: 4096,
            size_known: true,
            blocks: 8,
            atime: Timestamp { sec: 1, nsec: 2 },
            mtime: Timestamp { sec: 3, nsec: 4 },
            ctime: Timestamp { sec: 5, nsec: 6 },
            rdev: 0,
            projid: 0,
            proj_inherit: false,
        };
        let fa = file_attr(&attr, None);
        assert_eq!(fa.ino, fuser::INodeNo(1));
        assert_eq!(fa.perm, 0o1777);
        assert_eq!(fa.kind, fuser::FileType::Directory);
        assert_eq!((fa.uid, fa.gid, fa.nlink, fa.size, fa.blocks, fa.blksize), (5, 6, 3, 4096, 8, 4096));
        let layout = Layout::raid0(2 << 20, None, vec![StripeObject { ost: 0, fid: Fid::new(1, 1, 0) }]);
        assert_eq!(file_attr(&attr, Some(&layout)).blksize, 2 << 20);
    }

    #[test]
    fn mknod_types_come_from_the_mode() {
        assert_eq!(mknod_type(libc::S_IFIFO | 0o644), Some(FileType::Fifo));
        assert_eq!(mknod_type(libc::S_IFREG | 0o644), Some(FileType::Regular));
        assert_eq!(mknod_type(libc::S_IFSOCK), Some(FileType::Socket));
        assert_eq!(mknod_type(libc::S_IFDIR | 0o755), None);
    }
}
