//! Filesets (Lustre's `nodemap_fileset_add`): the clients of a nodemap with a fileset see
//! that directory as their root, and nothing outside it. In front of the MDS:
//!
//! - `GetRoot` (a client connecting) is answered with the fileset's directory, which the
//!   mount then shows as its root;
//! - `..` looked up in the fileset's directory is that directory itself;
//! - every other request naming a FID (an inode, a parent, a lock's resource) is refused
//!   with ENOENT unless that FID is the fileset's directory or under it, by its links
//!   followed up ([`weft_mds::Mds::fid_within`]): no path, `..`, FID or rename reaches
//!   outside. Administration of the file system (changelogs, HSM copytools, quota limits)
//!   is refused (EPERM); a close is let through (its open was checked);
//! - `fid2path` answers paths from the fileset's directory.
//!
//! Clients of a nodemap without a fileset never come here.

use std::collections::HashMap;
use std::sync::Mutex;
use weft_mds::Mds;
use weft_proto::lock::LdlmRequest;
use weft_proto::msg::mdt::{self, MdtReply};
use weft_proto::msg::{MdtRequest, RequestHeader, Run};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The directories of the filesets in use, by path, looked up once.
#[derive(Default)]
pub(crate) struct Filesets {
    resolved: Mutex<HashMap<String, Fid>>,
}

fn outside(fid: Fid) -> WeftError {
    WeftError::not_found(format!("{fid} is not in this client's fileset"))
}

impl Filesets {
    /// Forgets the directories looked up (the nodemaps changed).
    pub fn forget(&self) {
        self.resolved.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The FID of the fileset directory `path`, looked up from the root as root.
    pub async fn root_of(&self, mds: &Mds, path: &str) -> WeftResult<Fid> {
        if let Some(fid) = self.resolved.lock().unwrap_or_else(|p| p.into_inner()).get(path) {
            return Ok(*fid);
        }
        let mut fid = Fid::ROOT;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            let op = MdtRequest::Lookup(mdt::Lookup { parent: fid, name: part.as_bytes().to_vec() });
            match mds.handle(&RequestHeader::default(), op, Run::Inline).await {
                Ok(MdtReply::Inode(i)) if i.attr.kind == weft_proto::msg::FileType::Directory => fid = i.attr.fid,
                Ok(_) => return Err(WeftError::new(ErrorCode::NotDir, format!("fileset {path}: not a directory"))),
                Err(e) => return Err(WeftError::new(e.code, format!("fileset {path}: {}", e.message))),
            }
        }
        self.resolved.lock().unwrap_or_else(|p| p.into_inner()).insert(path.to_string(), fid);
        Ok(fid)
    }
}

/// `op` from a client whose root is `top`, as the MDS is to run it, or why it is refused.
pub(crate) fn gate(mds: &Mds, top: Fid, op: MdtRequest) -> WeftResult<MdtRequest> {
    use MdtRequest as R;
    let fids: Vec<Fid> = match &op {
        R::GetRoot(_) => return Ok(R::Getattr(mdt::Getattr { fid: top })),
        R::Lookup(l) if l.parent == top && l.name == b".." => return Ok(R::Getattr(mdt::Getattr { fid: top })),
        R::Statfs(_) | R::QuotaGet(_) | R::QuotaAcquire(_) => return Ok(op),
        // A close names its file: checked too (a guessed handle of a file outside would
        // answer that file's attributes).
        R::Close(mdt::Close { fid, .. }) => vec![*fid],
        R::Lookup(mdt::Lookup { parent, .. })
        | R::Create(mdt::Create { parent, .. })
        | R::Mkdir(mdt::Mkdir { parent, .. })
        | R::MkdirStriped(mdt::MkdirStriped { parent, .. })
        | R::Mknod(mdt::Mknod { parent, .. })
        | R::Symlink(mdt::Symlink { parent, .. })
        | R::Unlink(mdt::Unlink { parent, .. })
        | R::Rmdir(mdt::Rmdir { parent, .. })
        | R::CreateTmpfile(mdt::CreateTmpfile { parent, .. }) => vec![*parent],
        R::Link(mdt::Link { fid, parent, .. }) => vec![*fid, *parent],
        R::Rename(r) => vec![r.src_parent, r.dst_parent],
        R::SwapLayouts(s) => vec![s.fid, s.with],
        R::Getattr(mdt::Getattr { fid })
        | R::Setattr(mdt::Setattr { fid, .. })
        | R::Readlink(mdt::Readlink { fid })
        | R::Readdir(mdt::Readdir { fid, .. })
        | R::ReaddirPlus(mdt::ReaddirPlus { fid, .. })
        | R::Open(mdt::Open { fid, .. })
        | R::GetXattr(mdt::GetXattr { fid, .. })
        | R::SetXattr(mdt::SetXattr { fid, .. })
        | R::ListXattr(mdt::ListXattr { fid })
        | R::RemoveXattr(mdt::RemoveXattr { fid, .. })
        | R::SetStripe(mdt::SetStripe { fid, .. })
        | R::DeleteStripe(mdt::DeleteStripe { fid })
        | R::GetStripe(mdt::GetStripe { fid })
        | R::Fid2Path(mdt::Fid2Path { fid })
        | R::HsmStateGet(mdt::HsmStateGet { fid })
        | R::HsmStateSet(mdt::HsmStateSet { fid, .. })
        | R::HsmRelease(mdt::HsmRelease { fid, .. })
        | R::HsmActionGet(mdt::HsmActionGet { fid })
        | R::LayoutIntent(mdt::LayoutIntent { fid, .. })
        | R::Mirror(mdt::Mirror { fid, .. })
        | R::CreateVolatile(mdt::CreateVolatile { like: fid, .. })
        | R::GetDirStripe(mdt::GetDirStripe { fid })
        | R::SetDirStripe(mdt::SetDirStripe { fid, .. })
        | R::WbcGrant(mdt::WbcGrant { dir: fid, .. }) => vec![*fid],
        // A batch's directories and files, each once.
        R::Batch(b) => {
            let mut fids: Vec<Fid> = b.ops.iter().map(|op| op.subject()).collect();
            fids.sort();
            fids.dedup();
            fids
        }
        R::HsmRequest(h) => h.fids.clone(),
        R::ReplayOpens(r) => r.opens.iter().map(|o| o.fid).collect(),
        R::ChangelogRegister(_)
        | R::ChangelogDeregister(_)
        | R::ChangelogClear(_)
        | R::ChangelogRead(_)
        | R::ChangelogUsersList(_)
        | R::HsmTake(_)
        | R::HsmProgress(_)
        | R::QuotaSet(_)
        | R::QuotaDelete(_)
        | R::QuotaSetGrace(_)
        | R::UpdatePrepare(_)
        | R::UpdateResolve(_)
        | R::TxnOutcome(_)
        | R::SyncStripe(_)
        | R::Migrate(_) => {
            return Err(WeftError::new(
                ErrorCode::Perm,
                format!("{} is not allowed to a client of a fileset", op.opcode_name()),
            ))
        }
    };
    for fid in fids {
        if !mds.fid_within(fid, top)? {
            return Err(outside(fid));
        }
    }
    Ok(op)
}

/// A lock request on the MDT from a client whose root is `top`: refused for a resource
/// outside it.
pub(crate) fn gate_lock(mds: &Mds, top: Fid, op: &LdlmRequest) -> WeftResult<()> {
    let fids: Vec<Fid> = match op {
        LdlmRequest::Enqueue(e) => vec![e.resource],
        LdlmRequest::FlockSet(f) => vec![f.fid],
        LdlmRequest::FlockGet(f) => vec![f.fid],
        LdlmRequest::FlockRelease(f) => vec![f.fid],
        LdlmRequest::Replay(r) => r.locks.iter().map(|g| g.resource).collect(),
        LdlmRequest::FlockReplay(r) => r.held.iter().map(|h| h.fid).collect(),
        _ => Vec::new(),
    };
    for fid in fids {
        if !mds.fid_within(fid, top)? {
            return Err(outside(fid));
        }
    }
    Ok(())
}

/// A `fid2path` answer from the root, as a path from the fileset `path` (`/a/b`).
pub(crate) fn path_in_fileset(path: &str, answer: &mut MdtReply) {
    let MdtReply::Data(full) = answer else { return };
    let top = path.trim_start_matches('/').as_bytes();
    if full.as_slice() == top {
        full.clear();
    } else if full.starts_with(top) && full.get(top.len()) == Some(&b'/') {
        full.drain(..=top.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fid2path_answers_from_the_fileset() {
        let answer = |p: &str| {
            let mut r = MdtReply::Data(p.as_bytes().to_vec());
            path_in_fileset("/projects/a", &mut r);
            match r {
                MdtReply::Data(d) => String::from_utf8(d).unwrap(),
                _ => unreachable!(),
            }
        };
        assert_eq!(answer("projects/a/sub/f"), "sub/f");
        assert_eq!(answer("projects/a"), "");
        assert_eq!(answer("projects/ab/f"), "projects/ab/f", "a sibling's prefix is not the fileset's");
    }
}
