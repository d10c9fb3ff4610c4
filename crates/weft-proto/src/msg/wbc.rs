//! The metadata write-back cache's messages (protocol 26; docs/ARCHITECTURE.md, "The
//! metadata write-back cache").
//!
//! A client that holds a directory's lock exclusively ([`crate::lock::WBC_LOCK_BITS`], asked
//! for with the MDT's `WbcGrant`) makes files there itself, with FIDs the MDT granted it,
//! and sends what it did in batches: one `Batch` request of many [`BatchOp`]s, applied by
//! the MDT in one transaction, all or none.

use super::types::{InodeInfo, Name, SetAttr, Timestamp};
use crate::Fid;
use serde::{Deserialize, Serialize};

/// One change of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchOp {
    /// An empty regular file `name` in `parent`, with the FID `fid` (from a range the MDT
    /// granted) and the mode (umask applied), owner, group and time the client gave it
    /// (atime = mtime = ctime = `time`). The MDT checks that `mode`, `uid` and `gid` are
    /// what it would have given. Its layout is the directory's, not yet instantiated: the
    /// first write gives it objects (a layout intent).
    Create { parent: Fid, name: Name, fid: Fid, mode: u32, uid: u32, gid: u32, time: Timestamp },
    /// Attributes of a file (no size: a truncate goes on its own).
    Setattr { fid: Fid, set: SetAttr },
    /// Removes a name of a non-directory (one the batch made or one that was there).
    Unlink { parent: Fid, name: Name },
}

impl BatchOp {
    /// The directory whose entries the op changes, if any.
    pub fn parent(&self) -> Option<Fid> {
        match self {
            BatchOp::Create { parent, .. } | BatchOp::Unlink { parent, .. } => Some(*parent),
            BatchOp::Setattr { .. } => None,
        }
    }

    /// The directory or file the op is about (its MDT is the batch's).
    pub fn subject(&self) -> Fid {
        match self {
            BatchOp::Create { parent, .. } | BatchOp::Unlink { parent, .. } => *parent,
            BatchOp::Setattr { fid, .. } => *fid,
        }
    }

    /// The op's name for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            BatchOp::Create { .. } => "create",
            BatchOp::Setattr { .. } => "setattr",
            BatchOp::Unlink { .. } => "unlink",
        }
    }
}

/// What `WbcGrant` answers: the directory as it is now, its `lock` the exclusive one, and
/// `count` FIDs from `first` on (same sequence, consecutive object ids) that the client may
/// give to the files it makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WbcGranted {
    pub dir: InodeInfo,
    pub first: Fid,
    pub count: u32,
}
