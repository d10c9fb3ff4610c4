//! Make a directory.

use super::{check_new_entry, err, Mutation, OpCtx};
use crate::limits::LINKS_PER_INODE_MAX;
use weft_proto::msg::{mdt, FileType, InodeInfo};
use weft_proto::{ErrorCode, Fid, WeftResult};

pub fn mkdir(ctx: &mut OpCtx<'_>, parent: Fid, name: &[u8], mode: u32, umask: u32) -> WeftResult<InodeInfo> {
    let mut dir = check_new_entry(ctx, parent, name)?;
    if dir.nlink >= LINKS_PER_INODE_MAX {
        return Err(err(ErrorCode::TooManyLinks, format!("directory {parent} has too many subdirectories")));
    }
    let mut rec = super::new_record(FileType::Directory, mode, umask, ctx.who, &dir, ctx.now);
    let admitted = super::quota::admit_inode(ctx.t, ctx.who, rec.quota_owner(), ctx.now)?;
    // Checks done: writes follow.
    admitted.write(ctx.t)?;
    let fid = ctx.t.next_inode_fid(ctx.core.mdt_index)?;
    rec.size = crate::limits::DIRECTORY_SIZE_BYTES;
    rec.parent = Some(parent);
    // New subdirectories inherit the default layout, as in Lustre.
    rec.dir_default = dir.dir_default.clone();
    ctx.t.put_inode(fid, &rec)?;
    ctx.t.add_entry(parent, name, fid, FileType::Directory)?;
    dir.nlink += 1;
    super::touch_dir(&mut dir, ctx.now);
    ctx.t.put_inode(parent, &dir)?;
    ctx.record(weft_proto::msg::changelog::ChangelogType::Mkdir, 0, fid, Some((parent, name)))?;
    Ok(super::inode_info_with(fid, &rec, 0))
}

impl Mutation for mdt::Mkdir {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        mkdir(ctx, self.parent, &self.name, self.mode, self.umask)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn mkdir_counts_links_and_checks() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let a = env.must_attr(d).await;
        assert_eq!((a.kind, a.nlink, a.mode, a.size, a.size_known), (FileType::Directory, 2, 0o755, 4096, true));
        assert_eq!(env.must_attr(Fid::ROOT).await.nlink, 3);
        env.must_mkdir(d, "e").await;
        assert_eq!(env.must_attr(d).await.nlink, 3);
        assert_eq!(code(env.mkdir_as(&Identity::root(), Fid::ROOT, "d", 0o755).await), ErrorCode::Exists);
        assert_eq!(code(env.mkdir_as(&user(1000), Fid::ROOT, "x", 0o755).await), ErrorCode::Access);
        assert_eq!(code(env.mkdir_as(&Identity::root(), Fid::ROOT, "..", 0o755).await), ErrorCode::Invalid);
        let f = env.must_file(Fid::ROOT, "f").await;
        assert_eq!(code(env.mkdir_as(&Identity::root(), f, "x", 0o755).await), ErrorCode::NotDir);
        assert_eq!(env.sorted_names(Fid::ROOT).await, vec!["d", "f"]);
    }
}
