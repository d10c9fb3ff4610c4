//! Lookup (a name in a directory) and getattr (an inode by FID). Reads.

use super::{err, owner, show, validate_name, Query, QueryCtx};
use crate::perm;
use crate::store::Tables;
use crate::Core;
use weft_proto::msg::{mdt, Identity, InodeInfo};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub fn lookup(core: &Core, t: &Tables, who: &Identity, parent: Fid, name: &[u8]) -> WeftResult<InodeInfo> {
    let dir = t.must_dir(parent)?;
    if name == b".." {
        // A directory's parent (the root is its own), for a client that finds a directory
        // by its handle and connects it to the tree.
        perm::check_lookup(who, owner(&dir))?;
        let up = dir.parent.unwrap_or(Fid::ROOT);
        if up.mdt_index() != core.mdt_index {
            return Ok(remote_entry(up, weft_proto::msg::FileType::Directory));
        }
        return getattr(core, t, up);
    }
    validate_name(name)?;
    perm::check_lookup(who, owner(&dir))?;
    let (fid, kind) =
        t.dentry(parent, name)?.ok_or_else(|| err(ErrorCode::NotFound, format!("no entry '{}'", show(name))))?;
    if fid.mdt_index() != core.mdt_index {
        return Ok(remote_entry(fid, kind));
    }
    let rec = t
        .inode(fid)?
        .ok_or_else(|| WeftError::io(format!("entry '{}' in {parent} names missing inode {fid}", show(name))))?;
    Ok(crate::inode_info(core, fid, &rec))
}

/// What a lookup answers for a name whose inode is on another MDT: its FID and type; the
/// client asks that MDT for the rest (Lustre's remote entries).
pub fn remote_entry(fid: Fid, kind: weft_proto::msg::FileType) -> InodeInfo {
    InodeInfo {
        attr: weft_proto::msg::Attr {
            fid,
            kind,
            mode: 0,
            uid: 0,
            gid: 0,
            nlink: 0,
            size: 0,
            size_known: false,
            blocks: 0,
            atime: Default::default(),
            mtime: Default::default(),
            ctime: Default::default(),
            rdev: 0,
            projid: 0,
            proj_inherit: false,
        },
        layout: None,
        lock: None,
        stripes: None,
    }
}

pub fn getattr(core: &Core, t: &Tables, fid: Fid) -> WeftResult<InodeInfo> {
    let rec = t.must_inode(fid)?;
    Ok(crate::inode_info(core, fid, &rec))
}

impl Query for mdt::Lookup {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<InodeInfo> {
        lookup(q.core, q.t, q.who, self.parent, &self.name)
    }
}

impl Query for mdt::Getattr {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<InodeInfo> {
        getattr(q.core, q.t, self.fid)
    }
}

impl Query for mdt::GetRoot {
    /// The root: a fileset's directory is answered in front of the MDS (weft-server).
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<InodeInfo> {
        getattr(q.core, q.t, Fid::ROOT)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn root_exists_and_lookup_errors() {
        let env = Env::new().await;
        let root = env.must_attr(Fid::ROOT).await;
        assert_eq!((root.kind, root.mode, root.uid, root.gid, root.nlink), (FileType::Directory, 0o755, 0, 0, 2));
        assert!(root.size_known);
        assert_eq!(code(env.lookup(Fid::ROOT, "nope").await), ErrorCode::NotFound);
        for bad in ["", ".", "a/b", "a\0b"] {
            assert_eq!(code(env.lookup(Fid::ROOT, bad).await), ErrorCode::Invalid, "{bad:?}");
        }
        // ".." is a directory's parent (the root's is the root), for file handles.
        assert_eq!(env.lookup(Fid::ROOT, "..").await.unwrap().attr.fid, Fid::ROOT);
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let e = env.must_mkdir(d, "e").await;
        assert_eq!(env.lookup(e, "..").await.unwrap().attr.fid, d);
        assert_eq!(env.lookup(d, "..").await.unwrap().attr.fid, Fid::ROOT);
        assert_eq!(code(env.lookup(Fid::ROOT, &"x".repeat(256)).await), ErrorCode::NameTooLong);
        let f = env.must_file(Fid::ROOT, "f").await;
        assert_eq!(env.lookup(Fid::ROOT, "f").await.unwrap().attr.fid, f);
        assert_eq!(code(env.lookup(f, "x").await), ErrorCode::NotDir);
        assert_eq!(code(env.getattr(Fid::new(Fid::ROOT.seq, 999, 0)).await), ErrorCode::NotFound);
    }

    #[tokio::test]
    async fn lookup_needs_search_permission() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "private").await;
        env.must_file(d, "f").await;
        env.req(MdtRequest::Setattr(mdt::Setattr {
            fid: d,
            set: SetAttr { mode: Some(0o700), ..Default::default() },
            open_handle: None,
        }))
        .await
        .unwrap();
        let r = env.req_as(&user(1000), MdtRequest::Lookup(mdt::Lookup { parent: d, name: "f".into() })).await;
        assert_eq!(code(r), ErrorCode::Access);
    }
}
