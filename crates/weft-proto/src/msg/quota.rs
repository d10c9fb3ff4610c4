//! Quotas (Lustre's): limits on the blocks and inodes a user, a group or a project holds,
//! with soft limits that turn hard after a grace time. The quota master (MDT0's) keeps the
//! limits and each id's grace deadlines; the MDT counts inodes; each OST counts the blocks
//! of its objects by their file's owner.

use serde::{Deserialize, Serialize};

/// Whose usage: Lustre's USRQUOTA, GRPQUOTA, PRJQUOTA (in that order on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum QuotaKind {
    User,
    Group,
    Project,
}

impl QuotaKind {
    pub const ALL: [QuotaKind; 3] = [QuotaKind::User, QuotaKind::Group, QuotaKind::Project];

    /// lfs's names: `usr`, `grp`, `prj`.
    pub fn name(self) -> &'static str {
        match self {
            QuotaKind::User => "usr",
            QuotaKind::Group => "grp",
            QuotaKind::Project => "prj",
        }
    }

    /// The id letter lfs prints (`uid`, `gid`, `pid`).
    pub fn letter(self) -> char {
        match self {
            QuotaKind::User => 'u',
            QuotaKind::Group => 'g',
            QuotaKind::Project => 'p',
        }
    }

    pub fn index(self) -> u8 {
        self as u8
    }

    pub fn from_index(i: u8) -> Option<QuotaKind> {
        QuotaKind::ALL.get(usize::from(i)).copied()
    }
}

/// The ids an inode counts against: its owner, its group and its project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QuotaOwner {
    pub uid: u32,
    pub gid: u32,
    pub projid: u32,
}

impl QuotaOwner {
    /// The id of `kind`.
    pub fn id(&self, kind: QuotaKind) -> u32 {
        match kind {
            QuotaKind::User => self.uid,
            QuotaKind::Group => self.gid,
            QuotaKind::Project => self.projid,
        }
    }
}

/// The id that holds a kind's default limits (for ids without their own). No user, group
/// or project has it: (uid_t)-1 is no one, and project 4294967295 is reserved.
pub const DEFAULT_ID: u32 = u32::MAX;

/// Lustre's default grace time for blocks and inodes: one week.
pub const GRACE_DEFAULT_S: u64 = 7 * 24 * 3600;

/// Limits; 0 is none. Blocks in KiB, as lfs takes and shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QuotaLimits {
    pub block_soft_kib: u64,
    pub block_hard_kib: u64,
    pub inode_soft: u64,
    pub inode_hard: u64,
}

impl QuotaLimits {
    pub fn is_none(&self) -> bool {
        *self == QuotaLimits::default()
    }
}

/// What `weft setquota` changes: `None` leaves a limit as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QuotaChange {
    pub block_soft_kib: Option<u64>,
    pub block_hard_kib: Option<u64>,
    pub inode_soft: Option<u64>,
    pub inode_hard: Option<u64>,
}

/// One id's quota as the master and the MDT know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaInfo {
    pub kind: QuotaKind,
    pub id: u32,
    /// The limits that apply (the id's own, else the kind's default).
    pub limits: QuotaLimits,
    /// Whether `limits` are the kind's default (the id has none of its own).
    pub default: bool,
    /// Inodes the MDT counts for the id.
    pub inodes: u64,
    /// When the block and inode soft limits' grace ends (unix seconds), for an id over them.
    pub block_grace_end: Option<u64>,
    pub inode_grace_end: Option<u64>,
    /// The kind's grace times, in seconds.
    pub block_grace_s: u64,
    pub inode_grace_s: u64,
    /// With `verify`: the inodes a scan of the MDT found for the id.
    pub inodes_scanned: Option<u64>,
}

/// One target's blocks for an id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaUse {
    /// Blocks the id's objects hold, in KiB.
    pub used_kib: u64,
    /// With `verify`: what a scan of the target's objects found.
    pub scanned_kib: Option<u64>,
}

/// One id's blocks on one OST.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaUseEntry {
    pub kind: QuotaKind,
    pub id: u32,
    pub used_kib: u64,
}

/// The blocks one OST may let an id hold (Lustre's granted quota): a write that would take
/// the id past it is refused with EDQUOT until the master grants more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaGrant {
    pub kind: QuotaKind,
    pub id: u32,
    pub grant_kib: u64,
}
