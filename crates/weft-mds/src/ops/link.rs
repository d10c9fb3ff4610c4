//! Hard links.

use super::{check_new_entry, err, Mutation, OpCtx};
use crate::limits::LINKS_PER_INODE_MAX;
use weft_proto::msg::{mdt, FileType, InodeInfo};
use weft_proto::{ErrorCode, Fid, WeftResult};

pub fn link(ctx: &mut OpCtx<'_>, fid: Fid, parent: Fid, name: &[u8]) -> WeftResult<InodeInfo> {
    let mut rec = ctx.t.must_inode(fid)?;
    if rec.kind == FileType::Directory {
        return Err(err(ErrorCode::Perm, "hard links to directories are not allowed"));
    }
    // A file without links may get one while it is open: an unnamed file (O_TMPFILE) named
    // by linkat. Which of those may be named (not O_EXCL, never a file unlinked while open)
    // is the kernel's to decide before it asks, as for any file system.
    let unnamed = rec.nlink == 0;
    if unnamed && ctx.core.open_files().counts(fid).opens == 0 {
        return Err(err(ErrorCode::NotFound, format!("{fid} has been removed")));
    }
    if rec.nlink >= LINKS_PER_INODE_MAX {
        return Err(err(ErrorCode::TooManyLinks, format!("{fid} has {LINKS_PER_INODE_MAX} links already")));
    }
    let mut dir = check_new_entry(ctx, parent, name)?;
    super::check_project(&dir, &rec)?;
    // Checks done: writes follow.
    rec.nlink += 1;
    rec.ctime = ctx.now;
    ctx.t.put_inode(fid, &rec)?;
    if unnamed {
        // Named now: its last close keeps it.
        ctx.t.remove_orphan(fid)?;
    }
    ctx.t.add_entry(parent, name, fid, rec.kind)?;
    super::touch_dir(&mut dir, ctx.now);
    ctx.t.put_inode(parent, &dir)?;
    ctx.record(weft_proto::msg::changelog::ChangelogType::Hardlink, 0, fid, Some((parent, name)))?;
    Ok(crate::inode_info(ctx.core, fid, &rec))
}

impl Mutation for mdt::Link {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        link(ctx, self.fid, self.parent, &self.name)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn links_count_and_survive_unlink_of_one_name() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let link = |fid, name: &str| MdtRequest::Link(mdt::Link { fid, parent: d, name: name.into() });
        env.req(link(f, "g")).await.unwrap();
        assert_eq!(env.must_attr(f).await.nlink, 2);
        assert_eq!(code(env.req(link(f, "g")).await), ErrorCode::Exists);
        assert_eq!(code(env.req(link(d, "dd")).await), ErrorCode::Perm);
        env.req(MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: "f".into() })).await.unwrap();
        let a = env.lookup(d, "g").await.unwrap().attr;
        assert_eq!((a.fid, a.nlink), (f, 1));
        assert!(env.targets.destroyed().is_empty());
    }
}
