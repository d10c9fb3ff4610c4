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
            write Write { fid: $crate::Fid, offset: u64, sync: bool } -> $crate::msg::ost::WriteDone = "ost_write";
            /// Sets the object's size (truncate or extend with a hole).
            write Punch { fid: $crate::Fid, size: u64 } -> () = "ost_punch";
            read Getattr { fid: $crate::Fid } -> $crate::msg::ost::ObjectAttr = "ost_getattr";
            write Sync { fid: $crate::Fid } -> () = "ost_sync";
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
            /// request already served (a resend) destroys nothing.
            write DestroyOrphans { above_oid: Option<u32>, mds_start: u64 } -> $crate::msg::ost::Orphans = "ost_destroy_orphans";
            /// fallocate(2) on `[offset, offset+len)` of the object: see [`FallocMode`].
            /// Without `keep_size`, allocating and zeroing extend the object to the range's
            /// end; punching never changes its size. A missing object is made by the modes
            /// that allocate and left missing by those that only make holes.
            write Fallocate { fid: $crate::Fid, offset: u64, len: u64, mode: $crate::msg::ost::FallocMode, keep_size: bool } -> () = "ost_fallocate";
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

/// A read's answer: the bulk holds `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadDone {
    pub len: u32,
}

/// A write's answer: how many bytes landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteDone {
    pub len: u32,
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
    }
}
