//! Remove a name of a non-directory.

use super::{err, owner, show, validate_name, Mutation, OpCtx};
use crate::perm;
use weft_proto::msg::{mdt, FileType};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub fn unlink(ctx: &mut OpCtx<'_>, parent: Fid, name: &[u8]) -> WeftResult<()> {
    let mut dir = ctx.t.must_dir(parent)?;
    validate_name(name)?;
    perm::check_dir_write(ctx.who, owner(&dir))?;
    let (fid, kind) =
        ctx.t.dentry(parent, name)?.ok_or_else(|| err(ErrorCode::NotFound, format!("no entry '{}'", show(name))))?;
    if kind == FileType::Directory {
        return Err(err(ErrorCode::IsDir, format!("'{}' is a directory: use rmdir", show(name))));
    }
    let rec =
        ctx.t.inode(fid)?.ok_or_else(|| WeftError::io(format!("entry '{}' names missing inode {fid}", show(name))))?;
    perm::check_sticky(ctx.who, owner(&dir), rec.uid)?;
    let flags = super::hsm::removal_flags(ctx, fid, &rec, rec.nlink == 1)?;
    // Checks done: writes follow.
    ctx.t.remove_entry(parent, name, fid)?;
    super::drop_link(ctx, fid, rec)?;
    super::touch_dir(&mut dir, ctx.now);
    ctx.t.put_inode(parent, &dir)?;
    ctx.record(weft_proto::msg::changelog::ChangelogType::Unlink, flags, fid, Some((parent, name)))?;
    Ok(())
}

impl Mutation for mdt::Unlink {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        unlink(ctx, self.parent, &self.name)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn unlink(parent: Fid, name: &str) -> MdtRequest {
        MdtRequest::Unlink(mdt::Unlink { parent, name: name.into() })
    }

    #[tokio::test]
    async fn unlink_removes_and_destroys_objects() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        let objects = env.getattr(f).await.unwrap().layout.unwrap().components[0].objects.clone();
        env.req(unlink(Fid::ROOT, "f")).await.unwrap();
        assert_eq!(code(env.lookup(Fid::ROOT, "f").await), ErrorCode::NotFound);
        assert_eq!(code(env.getattr(f).await), ErrorCode::NotFound);
        let destroyed = env.wait_destroyed(1).await;
        assert_eq!(destroyed, vec![(0, objects[0].fid)]);
        assert_eq!(code(env.req(unlink(Fid::ROOT, "f")).await), ErrorCode::NotFound);
        env.must_mkdir(Fid::ROOT, "d").await;
        assert_eq!(code(env.req(unlink(Fid::ROOT, "d")).await), ErrorCode::IsDir);
    }

    #[tokio::test]
    async fn sticky_directory_protects_other_users_entries() {
        let env = Env::new().await;
        let tmp = env.must_mkdir(Fid::ROOT, "tmp").await;
        env.req(MdtRequest::Setattr(mdt::Setattr {
            fid: tmp,
            set: SetAttr { mode: Some(0o1777), ..Default::default() },
            open_handle: None,
        }))
        .await
        .unwrap();
        let (a, h) = env.create_as(&user(1000), tmp, "alice", 0o666).await.unwrap();
        env.must_close(a.attr.fid, h, None).await;
        let bob = user(2000);
        assert_eq!(code(env.req_as(&bob, unlink(tmp, "alice")).await), ErrorCode::Perm);
        let rename = MdtRequest::Rename(mdt::Rename {
            src_parent: tmp,
            src_name: "alice".into(),
            dst_parent: tmp,
            dst_name: "bob".into(),
            flags: 0,
        });
        assert_eq!(code(env.req_as(&bob, rename).await), ErrorCode::Perm);
        env.req_as(&user(1000), unlink(tmp, "alice")).await.unwrap();
        // Without write permission on the directory: Access.
        let ro = env.must_mkdir(Fid::ROOT, "ro").await;
        env.must_file(ro, "f").await;
        assert_eq!(code(env.req_as(&bob, unlink(ro, "f")).await), ErrorCode::Access);
    }

    #[tokio::test]
    async fn unlinked_open_file_is_an_orphan_until_last_close() {
        let env = Env::new().await;
        let (i, h) = env.create_as(&Identity::root(), Fid::ROOT, "f", 0o644).await.unwrap();
        let fid = i.attr.fid;
        env.req(unlink(Fid::ROOT, "f")).await.unwrap();
        let a = env.must_attr(fid).await;
        assert_eq!(a.nlink, 0);
        // Nothing is queued for destruction while it is open, so nothing can be destroyed.
        let queued = env.mds().core.read_view().destroy_entries(usize::MAX, |_| true).unwrap();
        assert!(queued.is_empty(), "{queued:?}");
        assert!(env.targets.destroyed().is_empty());
        env.must_close(fid, h, None).await;
        assert_eq!(code(env.getattr(fid).await), ErrorCode::NotFound);
        env.wait_destroyed(1).await;
    }
}
