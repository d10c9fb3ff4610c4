//! Symbolic links: symlink and readlink.

use super::{check_new_entry, Mutation, OpCtx, Query, QueryCtx};
use crate::store::Tables;
use weft_proto::limits::SYMLINK_BYTES_MAX;
use weft_proto::msg::{mdt, FileType, InodeInfo};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub fn symlink(ctx: &mut OpCtx<'_>, parent: Fid, name: &[u8], target: &[u8]) -> WeftResult<InodeInfo> {
    if target.is_empty() || target.contains(&0) {
        return Err(WeftError::invalid("a symlink target must be non-empty and contain no NUL byte"));
    }
    if target.len() > SYMLINK_BYTES_MAX {
        return Err(WeftError::new(
            ErrorCode::NameTooLong,
            format!("symlink target of {} bytes is longer than {SYMLINK_BYTES_MAX}", target.len()),
        ));
    }
    let mut dir = check_new_entry(ctx, parent, name)?;
    let mut rec = super::new_record(FileType::Symlink, 0o777, 0, ctx.who, &dir, ctx.now);
    let admitted = super::quota::admit_inode(ctx.t, ctx.who, rec.quota_owner(), ctx.now)?;
    // Checks done: writes follow.
    admitted.write(ctx.t)?;
    let fid = ctx.t.next_inode_fid(ctx.core.mdt_index)?;
    rec.size = target.len() as u64;
    rec.symlink_target = Some(target.to_vec());
    ctx.t.put_inode(fid, &rec)?;
    ctx.t.add_entry(parent, name, fid, FileType::Symlink)?;
    super::touch_dir(&mut dir, ctx.now);
    ctx.t.put_inode(parent, &dir)?;
    ctx.record(weft_proto::msg::changelog::ChangelogType::Softlink, 0, fid, Some((parent, name)))?;
    Ok(super::inode_info_with(fid, &rec, 0))
}

pub fn readlink(t: &Tables, fid: Fid) -> WeftResult<Vec<u8>> {
    let rec = t.must_inode(fid)?;
    match (rec.kind, rec.symlink_target) {
        (FileType::Symlink, Some(target)) => Ok(target),
        (FileType::Symlink, None) => Err(WeftError::io(format!("symlink {fid} has no target stored"))),
        _ => Err(WeftError::invalid(format!("{fid} is not a symlink"))),
    }
}

impl Mutation for mdt::Symlink {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        symlink(ctx, self.parent, &self.name, &self.target)
    }
}

impl Query for mdt::Readlink {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<Vec<u8>> {
        readlink(q.t, self.fid)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn symlink_and_readlink() {
        let env = Env::new().await;
        let req = |name: &str, target: &[u8]| {
            MdtRequest::Symlink(mdt::Symlink { parent: Fid::ROOT, name: name.into(), target: target.to_vec() })
        };
        let l = match env.req(req("l", b"../some/where")).await.unwrap() {
            MdtReply::Inode(i) => i.attr,
            r => panic!("{r:?}"),
        };
        assert_eq!((l.kind, l.mode, l.size, l.size_known), (FileType::Symlink, 0o777, 13, true));
        assert_eq!(
            env.req(MdtRequest::Readlink(mdt::Readlink { fid: l.fid })).await.unwrap(),
            MdtReply::Data(b"../some/where".to_vec())
        );
        assert_eq!(code(env.req(MdtRequest::Readlink(mdt::Readlink { fid: Fid::ROOT })).await), ErrorCode::Invalid);
        assert_eq!(code(env.req(req("m", b"")).await), ErrorCode::Invalid);
        assert_eq!(code(env.req(req("m", &[b'a'; 4097])).await), ErrorCode::NameTooLong);
        assert_eq!(code(env.req(req("l", b"x")).await), ErrorCode::Exists);
    }
}
