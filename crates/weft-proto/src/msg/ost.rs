//! The object storage service's operations (an OST's), each typed to its answer.

use super::types::StatfsInfo;

/// Every OST operation (see [`mdt_ops!`](crate::mdt_ops) for the list's form).
#[macro_export]
macro_rules! ost_ops {
    ($then:ident) => {
        $then! {
            OstRequest / OstReply;
            /// Reply bulk holds the bytes; shorter than `len` past the object's end.
            read Read { fid: $crate::Fid, offset: u64, len: u32 } -> $crate::msg::ost::ReadDone = "ost_read";
            /// Request bulk holds the bytes (crc32c checked on arrival). `sync` = write-through.
            /// `owner`: the file's owner, group and project, whose quotas the object's blocks
            /// count against (Lustre's o_uid, o_gid, o_projid); None when the writer does not
            /// know it (the object keeps the owner it has).
            /// `extents`: empty when the bulk goes to one range at `offset`; else the
            /// ranges of the object the bulk's bytes go to, in the bulk's order (Lustre's
            /// niobufs), `offset` being the first's: a client's write-behind sends small
            /// writes of one object that do not continue each other in one request (the
            /// records of IO-500's ior-hard by processes far apart in the file). One
            /// transno covers them all.
            write Write {
                fid: $crate::Fid,
                offset: u64,
                sync: bool,
                owner: Option<$crate::msg::quota::QuotaOwner>,
                extents: Vec<$crate::msg::ost::Extent>,
            } -> $crate::msg::ost::WriteDone = "ost_write";
            /// Sets the object's size (truncate or extend with a hole).
            write Punch { fid: $crate::Fid, size: u64 } -> () = "ost_punch";
            read Getattr { fid: $crate::Fid } -> $crate::msg::ost::ObjectAttr = "ost_getattr";
            /// Makes the object durable, and with it every write the OST answered before
            /// (a commit: see [`Committed`]), answered with what is committed now.
            write Sync { fid: $crate::Fid } -> $crate::msg::ost::Committed = "ost_sync";
            /// Removes an object; removing one that is gone succeeds.
            write Destroy { fid: $crate::Fid } -> () = "ost_destroy";
            /// Creates empty objects `start_oid ..= start_oid + count - 1` in this OST's
            /// sequence; answered with the last one.
            write Precreate { start_oid: u32, count: u32 } -> $crate::msg::ost::Precreated = "ost_precreate";
            read Statfs {} -> $crate::msg::StatfsInfo = "ost_statfs";
            /// The path of the object's file on the OSS's machine, made if missing: for a
            /// client in the same process to open it for passthrough (see
            /// [`OpenIo`](crate::msg::OpenIo)).
            write LocalPath { fid: $crate::Fid } -> $crate::msg::ost::ObjectPath = "ost_local_path";
            /// Sent by an MDS when it starts (Lustre's orphan cleanup), before it hands out
            /// any id of this OST: it handed out every object up to `above_oid` and none
            /// after, so objects past it belong to no file (their creates were lost with a
            /// power loss, or never committed) and are destroyed before their ids are handed
            /// out again. `None`: the MDS has no record of this OST, so nothing is destroyed
            /// and it skips past the OST's last id. The OST refuses a gap wider than an MDS
            /// can leave (its records are then not this OST's: another MDT's, an old backup)
            /// and destroys nothing. `mds_start` names the MDS's start: a late copy of a
            /// request already served (a resend) destroys nothing. Each MDT has its own
            /// range of object ids (`fid::object_oid_range(mdt)`) and its own cleanup.
            write DestroyOrphans { mdt: u32, above_oid: Option<u32>, mds_start: u64 } -> $crate::msg::ost::Orphans = "ost_destroy_orphans";
            /// fallocate(2) on `[offset, offset+len)` of the object: see [`FallocMode`].
            /// Without `keep_size`, allocating and zeroing extend the object to the range's
            /// end; punching never changes its size. A missing object is made by the modes
            /// that allocate and left missing by those that only make holes.
            write Fallocate {
                fid: $crate::Fid,
                offset: u64,
                len: u64,
                mode: $crate::msg::ost::FallocMode,
                keep_size: bool,
                owner: Option<$crate::msg::quota::QuotaOwner>,
            } -> () = "ost_fallocate";
            /// A write a client sends again after the OST's server restarted (Lustre's
            /// replay): the bytes of the write it was answered `transno` for, which the
            /// server had not committed then. The OST writes the parts of the range that no
            /// write of a later transno covered since its restart; one already committed, or
            /// of this start, changes nothing. Refused `Stale` once its replay window ended.
            /// Answered as a write: the bytes are uncommitted again under a new transno.
            write Replay { fid: $crate::Fid, offset: u64, transno: u64, owner: Option<$crate::msg::quota::QuotaOwner> }
                -> $crate::msg::ost::WriteDone = "ost_write_replay";
            /// What the OST committed: with `commit`, after a commit of everything answered
            /// so far (a client holding too many uncommitted bytes asks it); without, at
            /// once (a client prunes what it holds).
            write Commit { commit: bool } -> $crate::msg::ost::Committed = "ost_commit";
            /// The blocks the objects of `kind` `id` hold on this OST; `verify` (root) also
            /// counts them by a scan of the objects.
            read QuotaUsage { kind: $crate::msg::quota::QuotaKind, id: u32, verify: bool }
                -> $crate::msg::quota::QuotaUse = "ost_quota_usage";
            /// The object's file changed owner, group or project (a chown, `weft project`):
            /// its blocks count against the new ids from now on. Nothing for an object not
            /// written yet (its first write carries the owner).
            write SetOwner { fid: $crate::Fid, owner: $crate::msg::quota::QuotaOwner } -> () = "ost_set_owner";
            /// The blocks of every id whose objects hold any here (the quota master's round).
            read QuotaUsageAll {} -> Vec<$crate::msg::quota::QuotaUseEntry> = "ost_quota_usage_all";
            /// The quota master's grants for this OST, replacing every earlier one (an id
            /// without one is not limited here); answered with the blocks of those ids now.
            write QuotaGrants { grants: Vec<$crate::msg::quota::QuotaGrant> }
                -> Vec<$crate::msg::quota::QuotaUseEntry> = "ost_quota_grants";
        }
    };
}

crate::ost_ops!(define_ops);

/// What a fallocate does to a range (Linux's modes that files keep their offsets under;
/// collapsing and inserting ranges shift the bytes after them and are not served).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FallocMode {
    /// Mode 0: blocks for the range; bytes there stay as they were (zeros in holes).
    Allocate,
    /// FALLOC_FL_PUNCH_HOLE: the range becomes a hole (reads zeros, holds no blocks).
    Punch,
    /// FALLOC_FL_ZERO_RANGE: the range reads zeros and has its blocks.
    Zero,
}

impl FallocMode {
    /// Whether the mode leaves every byte of the range zero (a queued write into it must
    /// land first, or it would come back).
    pub fn clears(self) -> bool {
        matches!(self, FallocMode::Punch | FallocMode::Zero)
    }

    /// Whether it may make the file longer (when the size is not kept).
    pub fn may_extend(self, keep_size: bool) -> bool {
        !keep_size && self != FallocMode::Punch
    }

    /// Whether the range needs objects (blocks or a size to hold): allocating does, and
    /// zeroing that extends the file; a hole needs none (no object reads as zeros).
    pub fn needs_objects(self, keep_size: bool) -> bool {
        self == FallocMode::Allocate || self.may_extend(keep_size)
    }
}

/// One range of an object a write's bulk goes to (see `Write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Extent {
    pub offset: u64,
    pub len: u32,
}

/// A read's answer: the bulk holds `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadDone {
    pub len: u32,
}

/// A write's answer: how many bytes landed, under which transaction number, and the
/// OST's last committed one. A write whose `transno` is above `committed` is not durable
/// yet: the client keeps its bytes until an answer's `committed` reaches it, and sends them
/// again (`Replay`) if the OST's server restarts first. `transno` 0: nothing to keep (a
/// replay that changed nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteDone {
    pub len: u32,
    pub transno: u64,
    pub committed: u64,
    /// One of the object's ids is close to what this OST may let it hold (its share of a
    /// quota): the client writes its file through, not behind, for a while, so that the
    /// EDQUOT reaches the program at the write that passes the limit (as Lustre's clients
    /// turn to synchronous writes near a limit).
    pub quota_tight: bool,
}

/// An OST's commit state: every write answered with a transno up to `committed` is
/// durable. A transno is `start << TRANSNO_START_SHIFT | n`: the server's start count (one
/// more at every start of the OST, persisted) above a count within that start, so that the
/// numbers of a later start are above all earlier ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Committed {
    pub committed: u64,
}

/// Where a transno's start count begins (see [`Committed`]).
pub const TRANSNO_START_SHIFT: u32 = 40;

/// The start of the OST's server a transno was given by.
pub fn transno_start(transno: u64) -> u64 {
    transno >> TRANSNO_START_SHIFT
}

/// An object's size, 512-byte blocks and last data change (nanoseconds since the epoch on
/// disk, a change count in memory): what a file's data version is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectAttr {
    pub size: u64,
    pub blocks: u64,
    pub mtime_ns: u64,
}

/// The last object id a precreate made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Precreated {
    pub last_oid: u32,
}

/// An orphan cleanup's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Orphans {
    /// The OST's last created object id.
    pub last_oid: u32,
    /// Whether the objects past the MDS's last id are gone. False: they were left alone
    /// (no record, or a gap too wide to be orphans), and the MDS must hand out no id up to
    /// `last_oid`.
    pub destroyed: bool,
}

/// Where an object's file is on the OSS's machine.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectPath {
    pub path: Vec<u8>,
}

crate::define_replies! {
    /// An OST's answers.
    OstReply {
        Read(ReadDone),
        Written(WriteDone),
        Empty = (),
        ObjectAttr(ObjectAttr),
        Precreated(Precreated),
        Statfs(StatfsInfo),
        LocalPath(ObjectPath),
        Orphans(Orphans),
        Committed(Committed),
        QuotaUse(crate::msg::quota::QuotaUse),
        QuotaUses(Vec<crate::msg::quota::QuotaUseEntry>),
    }
}
