//! The inode numbers of one mount: a FID's (`Fid::to_ino`), except that the mount's root
//! is inode 1 when it is not the file system's root (a nodemap's fileset). A leaf.

use fuser::INodeNo;
use weft_proto::Fid;

/// The directory this process's mount shows as its root, when not the file system's root
/// (a nodemap's fileset, from the MDS as the mount starts): it takes inode 1 and the root
/// takes its inode number, so every inode number stays one FID's.
static MOUNT_ROOT: std::sync::OnceLock<Fid> = std::sync::OnceLock::new();

/// Sets the mount's root (once per process; a process runs one mount).
pub(crate) fn set_mount_root(fid: Fid) {
    if MOUNT_ROOT.get_or_init(|| fid) != &fid {
        tracing::warn!(
            "this process mounts {} as its root already; {fid} is not",
            MOUNT_ROOT.get().copied().unwrap_or(Fid::ROOT)
        );
    }
}

fn swap_root(fid: Fid) -> Fid {
    match MOUNT_ROOT.get() {
        Some(top) if *top == fid => Fid::ROOT,
        Some(top) if fid == Fid::ROOT => *top,
        _ => fid,
    }
}

pub(crate) fn fid_of(ino: INodeNo) -> Fid {
    swap_root(Fid::from_ino(ino.0))
}

/// The inode number of `fid` on this mount (the inverse of [`fid_of`]).
pub(crate) fn ino_of(fid: Fid) -> u64 {
    swap_root(fid).to_ino()
}
