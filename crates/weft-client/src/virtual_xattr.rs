//! What a mount answers for its virtual `weft.*` extended attributes, the interface between
//! the `weft` CLI and a mount (as lfs talks to llite through ioctls). The FUSE adapter encodes
//! these as JSON and the CLI decodes the same types, so the two cannot drift apart.

use serde::{Deserialize, Serialize};
use weft_proto::layout::{Layout, StripeSpec};

/// `weft.layout`: a file's layout, a directory's default, and the FID.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayoutAnswer {
    pub layout: Option<Layout>,
    pub default: Option<StripeSpec>,
    pub fid: String,
}

/// `weft.fid2path:FID`: the path below the mount point, without a leading slash.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PathAnswer {
    pub path: String,
}

/// The value set on `weft.create:NAME` of a directory: create NAME there with this layout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateWithLayout {
    pub spec: StripeSpec,
    /// Permission bits, the caller's umask already applied.
    pub mode: u32,
}

/// The value set on `weft.mkdir:NAME` of a directory: make NAME there, placed by `spec`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MkdirPlaced {
    pub spec: weft_proto::dirstripe::DirStripeSpec,
    /// Permission bits, before the caller's umask.
    pub mode: u32,
}

/// The value set on `weft.dirstripe`: the directory's default placement of new
/// subdirectories, or none.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirDefault {
    pub default: Option<weft_proto::dirstripe::DirStripeSpec>,
}

/// The value set on `weft.hsm`: HSM flags to set and to clear, and the archive id (0:
/// unchanged). Read, `weft.hsm` answers a `weft_proto::msg::hsm::HsmState`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct HsmChange {
    pub set: u32,
    pub clear: u32,
    pub archive_id: u32,
}

/// `weft.project`: read, a file's project (`ProjectState`); set, a `ProjectChange` (root).
pub const PROJECT: &str = "weft.project";

/// A file's project id and, for a directory, whether new entries take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectState {
    pub projid: u32,
    pub inherit: bool,
}

/// What `weft project` changes: `None` leaves it.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ProjectChange {
    pub projid: Option<u32>,
    pub inherit: Option<bool>,
}

/// `weft.quota:KIND:ID` (KIND `u`, `g` or `p`; `weft.quota:KIND:ID:verify` counts by a
/// scan too): a `crate::quota::QuotaReport`. `weft.quota.set`: set a JSON
/// `crate::quota::QuotaRequest` (root).
pub const QUOTA_PREFIX: &str = "weft.quota:";
pub const QUOTA_SET: &str = "weft.quota.set";

pub const HSM: &str = "weft.hsm";
/// Set (any value): release the file (its data stays in the archive only).
pub const HSM_RELEASE: &str = "weft.hsm.release";

/// `weft.df` answers a `Vec<crate::TargetStatfs>`, `weft.map` a `ClusterMap`, `weft.fid` the
/// FID as plain text.
pub const FID: &str = "weft.fid";
pub const LAYOUT: &str = "weft.layout";
pub const LAYOUT_DELETE: &str = "weft.layout.delete";
pub const DF: &str = "weft.df";
/// `weft.df:FROM`: the rows of the [`DF_PAGE_ROWS`] targets from position FROM (fewer at
/// the end), so that a file system of a thousand OSTs is read a page at a time: a value
/// read through an extended attribute holds 64 KiB at most.
pub const DF_PAGE: &str = "weft.df:";
/// Targets per page: some 250 bytes of JSON each.
pub const DF_PAGE_ROWS: usize = 128;
pub const MAP: &str = "weft.map";
/// OSTs `weft.map` lists at most (the first by index), so that the map of a file system of a
/// thousand OSTs fits the 64 KiB an extended attribute's value holds; `weft.df:FROM` pages
/// through every OST.
pub const MAP_OSTS_LISTED_MAX: usize = 256;
/// The mount's management service address, plain text.
pub const MGS: &str = "weft.mgs";
pub const FID2PATH_PREFIX: &str = "weft.fid2path:";
pub const CREATE_PREFIX: &str = "weft.create:";
/// Set on a directory: make the named directory placed over MDTs (a JSON [`MkdirPlaced`]).
pub const MKDIR_PREFIX: &str = "weft.mkdir:";
/// Get: a directory's placement over MDTs (a JSON `msg::update::DirStripeInfo`); set: its
/// default for new subdirectories (a JSON [`DirDefault`]).
pub const DIRSTRIPE: &str = "weft.dirstripe";

/// Read after a refused `weft.*` request (by the same thread, of the same file):
/// `weft.error` answers why, once, as an `ErrorAnswer`; ENODATA when no reason was kept.
pub const ERROR: &str = "weft.error";

/// Why the mount refused a thread's last `weft.*` request: the errno it answered, the words
/// that came with the error (the server's or the mount's), and the FID of the file they may
/// name (the CLI puts the user's path in its place).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorAnswer {
    pub errno: i32,
    pub message: String,
    pub fid: String,
}
