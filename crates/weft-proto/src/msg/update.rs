//! Changes that touch several MDTs (a remote or striped directory made or removed, a name
//! of a file on another MDT made, removed or moved), done atomically by two-phase commit
//! with presumed abort.
//!
//! The MDT that received the client's request coordinates: it asks each other MDT involved
//! to prepare its part ([`Update`]), which that MDT does at once and durably, keeping a
//! record of how to undo it; then the coordinator makes its own part (the name) in one
//! batch with the record that the change committed, answers, and tells the others to
//! forget their undo records. A participant left with a record whose outcome it never
//! heard asks the coordinator ([`TxnOutcome`](crate::msg::mdt::TxnOutcome)): no record
//! of a commit on a coordinator that no longer runs the change means it aborted.

use crate::dirstripe::DirStripes;
use crate::msg::{FileType, InodeInfo, Name};
use crate::Fid;
use serde::{Deserialize, Serialize};

/// One distributed change: its coordinator, the coordinator's start (a start of an MDS,
/// or a replicated MDT's leader, runs only its own changes) and a number within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TxnId {
    pub coordinator: u32,
    pub start: u64,
    pub seq: u64,
}

impl std::fmt::Display for TxnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MDT{:04x}:{:x}:{}", self.coordinator, self.start, self.seq)
    }
}

/// A participant's part of a distributed change, prepared (done, with a way back) until
/// the coordinator's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Update {
    /// A new directory inode on this MDT: the directory named `name` in `parent` (its
    /// link here), or stripe `stripe` of the striped directory `master` (unnamed).
    /// `record`: the new inode as the coordinator made it from the parent (the MDS's own
    /// encoding; both ends are the same version).
    MakeDir { record: Vec<u8>, parent: Fid, name: Option<Name>, master: Option<Fid>, stripe: u32 },
    /// The stripes of a striped directory whose master is on this MDT.
    SetStripes { fid: Fid, stripes: DirStripes },
    /// A file of this MDT gets a name in a directory of another MDT (a link, the new name
    /// of a rename).
    AddLink { fid: Fid, parent: Fid, name: Name },
    /// A file of this MDT loses its name in a directory of another MDT; the file goes at
    /// the commit if that was its last name and it is not open. `sticky_dir_uid`: the
    /// directory's owner when the directory is sticky (only the file's owner, the
    /// directory's or root may remove the name).
    DropLink { fid: Fid, parent: Fid, name: Name, sticky_dir_uid: Option<u32> },
    /// An empty directory of this MDT (a remote directory, a stripe) goes: refused if it
    /// has entries; from now on nothing is made in it; destroyed at the commit.
    RemoveDir { fid: Fid, parent: Option<(Fid, Name)>, sticky_dir_uid: Option<u32> },
    /// A name of a file of another MDT in a directory of this MDT (the target of a
    /// rename): replaces the name's non-directory, unless `noreplace`. Answers what it
    /// replaced.
    AddEntry { parent: Fid, name: Name, fid: Fid, kind: FileType, noreplace: bool },
    /// An inode of this MDT named `name` in `parent` leaves for another MDT (a migration):
    /// refused if it is open, has other names, or is a striped directory; answers all it
    /// is ([`UpdateAnswer::Exported`]). Nothing changes until the commit, which forgets it
    /// here (its objects stay, the new inode has them); the MDT holds its locks on it
    /// until the outcome, so that no change of it is made meanwhile and lost.
    Export { fid: Fid, parent: Fid, name: Name },
    /// The new inode of a migration on this MDT, from what its old MDT exported: named
    /// `name` in `parent` (its reverse link here), with a directory's entries.
    Import { exported: Box<Exported>, parent: Fid, name: Name },
    /// Files of this MDT whose directory moved to a new inode: their reverse links (and a
    /// subdirectory's parent) name `to` instead of `from`.
    MoveLinks { from: Fid, to: Fid, children: Vec<(Fid, Name)> },
}

/// Everything an inode is, as a migration carries it to another MDT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exported {
    /// The inode record (the MDS's own encoding; both ends are the same version).
    pub record: Vec<u8>,
    /// Its extended attributes, by name.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// A directory's entries: name, inode, type.
    pub entries: Vec<(Name, Fid, FileType)>,
}

/// What a participant's prepare answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpdateAnswer {
    Done,
    /// MakeDir: the new directory.
    Made(Box<InodeInfo>),
    /// AddEntry: the entry the new name replaced, and the directory's owner when the
    /// directory is sticky (the replaced file's MDT checks the rule).
    Replaced {
        entry: Option<(Fid, FileType)>,
        sticky_dir_uid: Option<u32>,
    },
    /// AddEntry: the name is already the file's (another of its hard links): the rename
    /// does nothing, as POSIX has it.
    Same,
    /// Export: the inode leaving.
    Exported(Box<Exported>),
}

/// A distributed change's outcome as its coordinator knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    Committed,
    Aborted,
    /// The coordinator is still running it: ask again.
    Running,
}

/// A directory's placement over the MDTs (`getdirstripe`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirStripeInfo {
    /// The MDT the directory (its master) is on.
    pub mdt: u32,
    pub stripes: Option<DirStripes>,
    /// The default for new subdirectories (`setdirstripe -D`).
    pub default: Option<crate::dirstripe::DirStripeSpec>,
}
