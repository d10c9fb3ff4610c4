//! Remove an empty directory.

use super::{err, owner, show, validate_name, Mutation, OpCtx};
use crate::perm;
use weft_proto::msg::{mdt, FileType};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub fn rmdir(ctx: &mut OpCtx<'_>, parent: Fid, name: &[u8]) -> WeftResult<()> {
    let mut dir = ctx.t.must_dir(parent)?;
    validate_name(name)?;
    perm::check_dir_write(ctx.who, owner(&dir))?;
    let (fid, kind) =
        ctx.t.dentry(parent, name)?.ok_or_else(|| err(ErrorCode::NotFound, format!("no entry '{}'", show(name))))?;
    if kind != FileType::Directory {
        return Err(err(ErrorCode::NotDir, format!("'{}' is not a directory", show(name))));
    }
    let rec =
        ctx.t.inode(fid)?.ok_or_else(|| WeftError::io(format!("entry '{}' names missing inode {fid}", show(name))))?;
    perm::check_sticky(ctx.who, owner(&dir), rec.uid)?;
    if !ctx.t.dir_is_empty(fid)? {
        return Err(err(ErrorCode::NotEmpty, format!("directory '{}' is not empty", show(name))));
    }
    // Checks done: writes follow.
    ctx.t.remove_entry(parent, name, fid)?;
    ctx.t.destroy_inode(fid, &rec)?;
    assert!(dir.nlink > 2, "directory {parent} with a subdirectory has nlink {}", dir.nlink);
    dir.nlink -= 1;
    super::touch_dir(&mut dir, ctx.now);
    ctx.t.put_inode(parent, &dir)?;
    ctx.record(weft_proto::msg::changelog::ChangelogType::Rmdir, 0, fid, Some((parent, name)))?;
    Ok(())
}

impl Mutation for mdt::Rmdir {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        rmdir(ctx, self.parent, &self.name)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn rmdir_rules() {
        let env = Env::new().await;
        let rmdir = |parent, name: &str| MdtRequest::Rmdir(mdt::Rmdir { parent, name: name.into() });
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        env.must_file(d, "f").await;
        assert_eq!(code(env.req(rmdir(Fid::ROOT, "d")).await), ErrorCode::NotEmpty);
        assert_eq!(code(env.req(rmdir(d, "f")).await), ErrorCode::NotDir);
        assert_eq!(code(env.req(rmdir(Fid::ROOT, "nope")).await), ErrorCode::NotFound);
        env.req(MdtRequest::Unlink(mdt::Unlink { parent: d, name: "f".into() })).await.unwrap();
        env.req(MdtRequest::SetXattr(mdt::SetXattr { fid: d, name: "user.a".into(), value: b"1".to_vec(), flags: 0 }))
            .await
            .unwrap();
        assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 3);
        env.req(rmdir(Fid::ROOT, "d")).await.unwrap();
        assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 2);
        assert_eq!(code(env.getattr(d).await), ErrorCode::NotFound);
        assert!(env.sorted_names(Fid::ROOT).await.is_empty());
    }
}
