//! The data types metadata requests and replies carry: attributes, inodes, directory pages,
//! statfs counts, and the flags of opens, renames and xattrs.

use crate::fid::Fid;
use crate::layout::Layout;
use crate::lock::LockGrant;
use serde::{Deserialize, Serialize};

/// A directory entry name or xattr name: bytes, as POSIX has them (not necessarily UTF-8).
pub type Name = Vec<u8>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct Timestamp {
    pub sec: i64,
    pub nsec: u32,
}

/// Linux's relatime: a read moves atime when it is a day old or more.
pub const RELATIME_INTERVAL_S: i64 = 24 * 60 * 60;

/// Whether an open with MDS `flags` moves a file's atime at `now`, as Linux's
/// `atime_needs_update` and `relatime_need_update` decide: only an open that reads (the
/// kernel's caches and passthrough keep most reads themselves from the mount, so the open
/// stands for them); always under `strictatime`; under `relatime` when atime is not later
/// than mtime or ctime (the first read after a change) or a day old; never to the time it
/// has already. The MDS decides by it; a mount whose cached inode (under its lock) says no
/// does not ask.
pub fn atime_moves(flags: u32, atime: Timestamp, mtime: Timestamp, ctime: Timestamp, now: Timestamp) -> bool {
    let mode = flags & (OPEN_ATIME_RELATIME | OPEN_ATIME_STRICT);
    if mode == 0 || flags & (OPEN_READ | OPEN_EXEC) == 0 || atime == now {
        return false;
    }
    mode & OPEN_ATIME_STRICT != 0 || atime <= mtime || atime <= ctime || now.sec - atime.sec >= RELATIME_INTERVAL_S
}

impl Timestamp {
    /// A time in nanoseconds since the epoch (an object's mtime as its OST reports it).
    pub fn from_nanos(ns: u64) -> Timestamp {
        Timestamp { sec: (ns / 1_000_000_000) as i64, nsec: (ns % 1_000_000_000) as u32 }
    }
}

/// Attributes as `stat` shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub fid: Fid,
    pub kind: FileType,
    /// Permission bits with setuid, setgid and sticky (07777); the type is in `kind`.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    /// The file size. For a regular file with `size_known == false` the client derives it
    /// from the objects' sizes (a glimpse), because a writer may have it open.
    pub size: u64,
    pub size_known: bool,
    /// 512-byte blocks, as st_blocks (0 from the MDS for regular files: the objects hold data).
    pub blocks: u64,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub rdev: u32,
    /// The project id (quotas by project); 0 is none.
    pub projid: u32,
    /// Directories: new entries take the project (PROJINHERIT).
    pub proj_inherit: bool,
}

/// An inode as the MDS returns it: attributes, plus the layout of a regular file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeInfo {
    pub attr: Attr,
    pub layout: Option<Layout>,
    /// The inode-bit lock the MDS granted the asking client with this answer (Lustre's
    /// intent locks): while the client holds it, what it covers may be cached.
    pub lock: Option<LockGrant>,
    /// A striped directory's stripes: the client sends each name's requests to its stripe.
    pub stripes: Option<Box<crate::dirstripe::DirStripes>>,
}

/// Time to set: `Now` takes the server's clock (utimensat's UTIME_NOW).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetTime {
    Now,
    At(Timestamp),
}

/// Which attributes a setattr changes; `None` leaves a field alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The client truncates the objects first, then records the size here.
    pub size: Option<u64>,
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
    pub ctime: Option<Timestamp>,
    /// The project id (`weft project -p`); root only.
    pub projid: Option<u32>,
    /// Directories: whether new entries take the project (`weft project -s`); root only.
    pub proj_inherit: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: Name,
    pub fid: Fid,
    pub kind: FileType,
    /// Resume a listing after this entry by passing this cookie.
    pub cookie: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirPage {
    pub entries: Vec<DirEntry>,
    /// True when no entries follow the last one.
    pub eof: bool,
}

/// Space and inode counts, as statfs(2) reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StatfsInfo {
    pub bsize: u32,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
}

/// Flags for rename (as renameat2).
pub const RENAME_NOREPLACE: u32 = 1;
pub const RENAME_EXCHANGE: u32 = 2;
/// Flags for setxattr.
pub const XATTR_CREATE: u32 = 1;
pub const XATTR_REPLACE: u32 = 2;
/// The virtual xattr that shows (and, on an empty file or a directory, sets) the layout.
pub const XATTR_LAYOUT: &[u8] = b"weft.layout";

/// Open flags the MDS cares about (the rest stay on the client).
pub const OPEN_READ: u32 = 1;
pub const OPEN_WRITE: u32 = 2;
pub const OPEN_TRUNC: u32 = 4;
/// The client would do this open's I/O straight on the object's file (FUSE passthrough):
/// it can, for files of one object on an OST of its own process. See [`OpenIo`].
pub const OPEN_PASSTHROUGH: u32 = 8;
/// A copytool's open of a released file it restores (root only, with OPEN_WRITE): the file
/// gets new objects, the open is not a writer's (the size stays the MDT's, the file does
/// not become dirty), and no restore is asked for.
pub const OPEN_HSM_RESTORE: u32 = 16;
/// The open of a file this client keeps in its read-write persistent client cache (see
/// `HS_PCCRW`): the file is released on the servers and its data is in the client's cache,
/// so the open is not refused and asks for no restore; the client does the I/O on its cache
/// copy. Otherwise an ordinary open (permissions, writer's size rule).
pub const OPEN_PCC: u32 = 32;
/// An open by execve(2) (the kernel's `__FMODE_EXEC`), for reading the program: it needs
/// execute permission, not read (a mode of 0100 runs for its owner), as a local file system
/// checks it.
pub const OPEN_EXEC: u32 = 64;
/// The opener's mount updates atime as Linux's `relatime` does (the default): an open for
/// reading moves the file's atime to now when atime is not later than mtime or ctime, or is
/// a day old. The MDS decides at the open, since the kernel's caches and passthrough keep
/// most reads from the mount; a mount with `noatime` (or an `O_NOATIME` open) sends neither
/// atime flag and nothing moves.
pub const OPEN_ATIME_RELATIME: u32 = 128;
/// As [`OPEN_ATIME_RELATIME`] for a `strictatime` mount: every open for reading moves atime.
pub const OPEN_ATIME_STRICT: u32 = 256;

/// How the MDS lets a client do the I/O of one open, so that every client's view of the
/// data stays true (answered by Open and Create).
///
/// A passthrough open reads and writes the object's file in the kernel, past the client and
/// past the extent locks, so no other client may cache the file's data while it lasts:
/// * `Passthrough` is granted only when no other client has the file open (for a file that
///   may hold data, the client also takes a write lock on the whole file first, which calls
///   back what others cached);
/// * while a passthrough open lasts, other clients' opens are `Uncached`: every read and
///   write goes to the OSTs under the usual locks, nothing is kept in page caches or queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpenIo {
    /// Page cache and write-behind under extent locks: the usual way.
    Cached,
    /// Straight to the object's file (asked for with [`OPEN_PASSTHROUGH`]).
    Passthrough,
    /// Another client has the file open in passthrough: no caching at all.
    Uncached,
}

/// Who asks: checked by the MDS against mode bits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Identity {
    pub fn root() -> Self {
        Identity::default()
    }
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}
