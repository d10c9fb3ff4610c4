//! Every request and reply of every role. One enum per role; a request names its target
//! (the MGS, an MDT index, an OST index) so one server process can host many targets.
//!
//! Bulk data (read and write payloads) travels beside the message in the frame, not inside
//! it, so it is never copied through the encoder; see [`crate::wire`].
//!
//! Compatibility: these types are encoded with postcard, in field order. Add new variants at
//! the end of an enum and bump [`crate::wire::PROTOCOL_VERSION`] when a change is not
//! backwards compatible; docs/PROTOCOL.md records each version.

use crate::error::WeftError;
use crate::fid::Fid;
use crate::layout::{Layout, StripeSpec};
use crate::lock::{LdlmReply, LdlmRequest, LockGrant, LockTarget};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A directory entry name or xattr name: bytes, as POSIX has them (not necessarily UTF-8).
pub type Name = Vec<u8>;

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RequestHeader {
    /// Random per client instance (mount); with `reply_slot` the key of the reply cache.
    pub client_id: u64,
    /// Increases per client; a resend after reconnect carries the same id. 0: not
    /// resendable, never cached.
    pub request_id: u64,
    /// The client's reply-cache slot for this request (Lustre's multi-slot last_rcvd). A
    /// client holds a slot from sending a resendable mutation until it has the answer or has
    /// given up, so no two such requests in flight share one: the MDT keeps one reply per
    /// (client, slot), and a request older than its slot's last one is a stale resend.
    pub reply_slot: u32,
    pub identity: Identity,
    /// The job this request is for (Lustre's jobid), for scheduling and statistics.
    pub jobid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub header: RequestHeader,
    pub body: RequestBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RequestBody {
    /// Answered by every server process: liveness and round-trip measurement.
    Ping,
    Mgs(MgsRequest),
    Mdt {
        mdt: u32,
        op: MdtRequest,
    },
    Ost {
        ost: u32,
        op: OstRequest,
    },
    /// The lock manager of a target (see [`crate::lock`]).
    Ldlm {
        target: LockTarget,
        op: LdlmRequest,
    },
}

/// Every reply is a result: an error crosses the wire as a [`WeftError`].
pub type Reply = Result<ReplyBody, WeftError>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ReplyBody {
    Pong,
    Mgs(MgsReply),
    Mdt(MdtReply),
    Ost(OstReply),
    Ldlm(LdlmReply),
}

impl RequestBody {
    /// Whether the request only reads: executing it twice, or abandoning it halfway,
    /// changes nothing.
    pub fn is_read_only(&self) -> bool {
        match self {
            RequestBody::Ping => true,
            RequestBody::Mgs(op) => matches!(op, MgsRequest::GetMap { .. }),
            RequestBody::Mdt { op, .. } => !op.is_mutation(),
            RequestBody::Ost { op, .. } => {
                matches!(op, OstRequest::Read { .. } | OstRequest::Getattr { .. } | OstRequest::Statfs)
            }
            RequestBody::Ldlm { op, .. } => matches!(op, LdlmRequest::FlockGet { .. }),
        }
    }

    /// Short operation name for statistics and logs, as Lustre names them where it can.
    pub fn opcode_name(&self) -> &'static str {
        match self {
            RequestBody::Ping => "ping",
            RequestBody::Mgs(op) => match op {
                MgsRequest::Register { .. } => "mgs_register",
                MgsRequest::GetMap { .. } => "mgs_get_map",
                MgsRequest::SetTargetState { .. } => "mgs_set_state",
                MgsRequest::PoolAdd { .. } => "mgs_pool_add",
            },
            RequestBody::Mdt { op, .. } => op.opcode_name(),
            RequestBody::Ost { op, .. } => match op {
                OstRequest::Read { .. } => "ost_read",
                OstRequest::Write { .. } => "ost_write",
                OstRequest::Punch { .. } => "ost_punch",
                OstRequest::Getattr { .. } => "ost_getattr",
                OstRequest::Sync { .. } => "ost_sync",
                OstRequest::Destroy { .. } => "ost_destroy",
                OstRequest::Precreate { .. } => "ost_precreate",
                OstRequest::Statfs => "ost_statfs",
                OstRequest::LocalPath { .. } => "ost_local_path",
            },
            RequestBody::Ldlm { op, .. } => match op {
                LdlmRequest::Enqueue { .. } => "ldlm_enqueue",
                LdlmRequest::Cancel { .. } => "ldlm_cancel",
                LdlmRequest::FlockSet { .. } => "ldlm_flock_set",
                LdlmRequest::FlockGet { .. } => "ldlm_flock_get",
                LdlmRequest::FlockRelease { .. } => "ldlm_flock_release",
            },
        }
    }
}

// ----------------------------------------------------------------------------------------
// Management (MGS)

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TargetKind {
    Mdt,
    Ost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TargetState {
    Up,
    /// Known to the map but not serving (stopped cleanly, or marked down by an admin).
    Down,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub kind: TargetKind,
    pub index: u32,
    /// `host:port` of the server process that serves this target.
    pub address: String,
    pub state: TargetState,
}

impl TargetInfo {
    /// Lustre's target name: `weft-OST0007`, `weft-MDT0000`.
    pub fn name(&self, fsname: &str) -> String {
        target_name(fsname, self.kind, self.index)
    }
}

pub fn target_name(fsname: &str, kind: TargetKind, index: u32) -> String {
    match kind {
        TargetKind::Mdt => format!("{fsname}-MDT{index:04x}"),
        TargetKind::Ost => format!("{fsname}-OST{index:04x}"),
    }
}

/// Everything a client or server needs to find every target. Clients learn it from the MGS
/// alone and refetch it when `version` moves or a target stops answering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ClusterMap {
    pub version: u64,
    pub fsname: String,
    pub targets: Vec<TargetInfo>,
    /// Pool name to OST indices.
    pub pools: BTreeMap<String, Vec<u32>>,
}

impl ClusterMap {
    pub fn target(&self, kind: TargetKind, index: u32) -> Option<&TargetInfo> {
        self.targets.iter().find(|t| t.kind == kind && t.index == index)
    }
    pub fn osts(&self) -> impl Iterator<Item = &TargetInfo> {
        self.targets.iter().filter(|t| t.kind == TargetKind::Ost)
    }
    pub fn mdts(&self) -> impl Iterator<Item = &TargetInfo> {
        self.targets.iter().filter(|t| t.kind == TargetKind::Mdt)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MgsRequest {
    /// A server announces a target it serves (at start). Sparse indices are fine; an index
    /// already registered moves to the new address.
    Register {
        target: TargetInfo,
    },
    /// The map, if newer than `known_version` (0 = always).
    GetMap {
        known_version: u64,
    },
    SetTargetState {
        kind: TargetKind,
        index: u32,
        state: TargetState,
    },
    /// Creates the pool if needed and adds the OSTs to it.
    PoolAdd {
        pool: String,
        osts: Vec<u32>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MgsReply {
    Map(ClusterMap),
    /// The caller's map is current.
    Unchanged {
        version: u64,
    },
}

// ----------------------------------------------------------------------------------------
// Metadata (MDT)

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
}

/// An inode as the MDS returns it: attributes, plus the layout of a regular file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeInfo {
    pub attr: Attr,
    pub layout: Option<Layout>,
    /// The inode-bit lock the MDS granted the asking client with this answer (Lustre's
    /// intent locks): while the client holds it, what it covers may be cached.
    pub lock: Option<LockGrant>,
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdtRequest {
    Lookup {
        parent: Fid,
        name: Name,
    },
    Getattr {
        fid: Fid,
    },
    Setattr {
        fid: Fid,
        set: SetAttr,
    },
    /// Create a regular file and open it. `exclusive` = O_EXCL (EEXIST if the name exists);
    /// without it an existing regular file is opened instead. `spec` overrides the
    /// directory's default layout. `open_flags` as in Open.
    Create {
        parent: Fid,
        name: Name,
        mode: u32,
        exclusive: bool,
        spec: Option<StripeSpec>,
        open_flags: u32,
    },
    Mkdir {
        parent: Fid,
        name: Name,
        mode: u32,
    },
    /// Fifos, sockets and device nodes.
    Mknod {
        parent: Fid,
        name: Name,
        kind: FileType,
        mode: u32,
        rdev: u32,
    },
    Symlink {
        parent: Fid,
        name: Name,
        target: Vec<u8>,
    },
    Link {
        fid: Fid,
        parent: Fid,
        name: Name,
    },
    Unlink {
        parent: Fid,
        name: Name,
    },
    Rmdir {
        parent: Fid,
        name: Name,
    },
    Rename {
        src_parent: Fid,
        src_name: Name,
        dst_parent: Fid,
        dst_name: Name,
        flags: u32,
    },
    Readlink {
        fid: Fid,
    },
    Readdir {
        fid: Fid,
        cookie: u64,
        max_entries: u32,
    },
    Open {
        fid: Fid,
        flags: u32,
    },
    /// Ends an open. A writer passes the size and 512-byte blocks it derived from the
    /// objects (a glimpse) so the MDS can record trusted values once no writer is left.
    Close {
        fid: Fid,
        handle: u64,
        size_blocks: Option<(u64, u64)>,
    },
    GetXattr {
        fid: Fid,
        name: Name,
    },
    SetXattr {
        fid: Fid,
        name: Name,
        value: Vec<u8>,
        flags: u32,
    },
    ListXattr {
        fid: Fid,
    },
    RemoveXattr {
        fid: Fid,
        name: Name,
    },
    /// On a directory: its default for new files. On a regular file of size 0: a new layout.
    SetStripe {
        fid: Fid,
        spec: StripeSpec,
    },
    /// Removes a directory's default layout (setstripe -d).
    DeleteStripe {
        fid: Fid,
    },
    GetStripe {
        fid: Fid,
    },
    Statfs,
    /// The path of a FID from the root (one of them, for a file with several links).
    Fid2Path {
        fid: Fid,
    },
}

impl MdtRequest {
    pub fn opcode_name(&self) -> &'static str {
        match self {
            MdtRequest::Lookup { .. } => "mds_lookup",
            MdtRequest::Getattr { .. } => "mds_getattr",
            MdtRequest::Setattr { .. } => "mds_setattr",
            MdtRequest::Create { .. } => "mds_create",
            MdtRequest::Mkdir { .. } => "mds_mkdir",
            MdtRequest::Mknod { .. } => "mds_mknod",
            MdtRequest::Symlink { .. } => "mds_symlink",
            MdtRequest::Link { .. } => "mds_link",
            MdtRequest::Unlink { .. } => "mds_unlink",
            MdtRequest::Rmdir { .. } => "mds_rmdir",
            MdtRequest::Rename { .. } => "mds_rename",
            MdtRequest::Readlink { .. } => "mds_readlink",
            MdtRequest::Readdir { .. } => "mds_readdir",
            MdtRequest::Open { .. } => "mds_open",
            MdtRequest::Close { .. } => "mds_close",
            MdtRequest::GetXattr { .. } => "mds_getxattr",
            MdtRequest::SetXattr { .. } => "mds_setxattr",
            MdtRequest::ListXattr { .. } => "mds_listxattr",
            MdtRequest::RemoveXattr { .. } => "mds_removexattr",
            MdtRequest::SetStripe { .. } => "mds_setstripe",
            MdtRequest::DeleteStripe { .. } => "mds_delstripe",
            MdtRequest::GetStripe { .. } => "mds_getstripe",
            MdtRequest::Statfs => "mds_statfs",
            MdtRequest::Fid2Path { .. } => "mds_fid2path",
        }
    }

    /// Whether the request changes state (and so goes through the reply cache and the
    /// transaction batcher) or only reads.
    pub fn is_mutation(&self) -> bool {
        !matches!(
            self,
            MdtRequest::Lookup { .. }
                | MdtRequest::Getattr { .. }
                | MdtRequest::Readlink { .. }
                | MdtRequest::Readdir { .. }
                | MdtRequest::GetXattr { .. }
                | MdtRequest::ListXattr { .. }
                | MdtRequest::GetStripe { .. }
                | MdtRequest::Statfs
                | MdtRequest::Fid2Path { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdtReply {
    Inode(InodeInfo),
    /// Create and Open: the inode and the open handle to pass to Close.
    Opened {
        inode: InodeInfo,
        handle: u64,
        io: OpenIo,
    },
    Empty,
    Data(Vec<u8>),
    Names(Vec<Name>),
    Dir(DirPage),
    Stripe {
        layout: Option<Layout>,
        default: Option<StripeSpec>,
    },
    Statfs(StatfsInfo),
}

// ----------------------------------------------------------------------------------------
// Object storage (OST)

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OstRequest {
    /// Reply bulk holds the bytes; shorter than `len` past the object's end.
    Read {
        fid: Fid,
        offset: u64,
        len: u32,
    },
    /// Request bulk holds the bytes (crc32c checked on arrival). `sync` = write-through.
    Write {
        fid: Fid,
        offset: u64,
        sync: bool,
    },
    /// Sets the object's size (truncate or extend with a hole).
    Punch {
        fid: Fid,
        size: u64,
    },
    Getattr {
        fid: Fid,
    },
    Sync {
        fid: Fid,
    },
    /// Removes an object; removing one that is gone succeeds.
    Destroy {
        fid: Fid,
    },
    /// Creates empty objects `start_oid ..= start_oid + count - 1` in this OST's sequence.
    Precreate {
        start_oid: u32,
        count: u32,
    },
    Statfs,
    /// The path of the object's file on the OSS's machine, made if missing: for a client in
    /// the same process to open it for passthrough (see [`OpenIo`]).
    LocalPath {
        fid: Fid,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OstReply {
    /// For Read: the bulk holds `len` bytes.
    Read {
        len: u32,
    },
    Written {
        len: u32,
    },
    Empty,
    ObjectAttr {
        size: u64,
        blocks: u64,
    },
    Precreated {
        last_oid: u32,
    },
    Statfs(StatfsInfo),
    LocalPath {
        path: Vec<u8>,
    },
}
