//! Make a fifo, socket or device node.

use super::{check_new_entry, Mutation, OpCtx};
use crate::perm;
use weft_proto::msg::{mdt, FileType, InodeInfo};
use weft_proto::{WeftError, WeftResult};

pub fn mknod(ctx: &mut OpCtx<'_>, req: &mdt::Mknod) -> WeftResult<InodeInfo> {
    let mdt::Mknod { parent, ref name, kind, mode, rdev, umask } = *req;
    match kind {
        FileType::Fifo | FileType::Socket => {}
        FileType::CharDevice | FileType::BlockDevice => {
            perm::check_root(ctx.who, "only root may create device nodes")?;
        }
        other => {
            return Err(WeftError::invalid(format!(
                "mknod makes fifos, sockets and devices, not {other:?}: use create, mkdir or symlink"
            )))
        }
    }
    let mut dir = check_new_entry(ctx, parent, name)?;
    let mut rec = super::new_record(kind, mode, umask, ctx.who, &dir, ctx.now);
    let admitted = super::quota::admit_inode(ctx.t, ctx.who, rec.quota_owner(), ctx.now)?;
    // Checks done: writes follow.
    admitted.write(ctx.t)?;
    let fid = ctx.t.next_inode_fid(ctx.core.mdt_index)?;
    if matches!(kind, FileType::CharDevice | FileType::BlockDevice) {
        rec.rdev = rdev;
    }
    ctx.t.put_inode(fid, &rec)?;
    ctx.t.add_entry(parent, name, fid, kind)?;
    super::touch_dir(&mut dir, ctx.now);
    ctx.t.put_inode(parent, &dir)?;
    ctx.record(weft_proto::msg::changelog::ChangelogType::Mknod, 0, fid, Some((parent, name)))?;
    Ok(super::inode_info_with(fid, &rec, 0))
}

impl Mutation for mdt::Mknod {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        mknod(ctx, self)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn mknod(name: &str, kind: FileType, rdev: u32) -> MdtRequest {
        MdtRequest::Mknod(mdt::Mknod { parent: Fid::ROOT, name: name.into(), kind, mode: 0o640, rdev, umask: 0 })
    }

    #[tokio::test]
    async fn fifos_sockets_devices() {
        let env = Env::new().await;
        for (name, kind) in [("p", FileType::Fifo), ("s", FileType::Socket)] {
            match env.req(mknod(name, kind, 0)).await.unwrap() {
                MdtReply::Inode(i) => assert_eq!((i.attr.kind, i.attr.mode, i.layout), (kind, 0o640, None)),
                r => panic!("{r:?}"),
            }
        }
        match env.req(mknod("c", FileType::CharDevice, 0x0103)).await.unwrap() {
            MdtReply::Inode(i) => assert_eq!((i.attr.kind, i.attr.rdev), (FileType::CharDevice, 0x0103)),
            r => panic!("{r:?}"),
        }
        assert_eq!(code(env.req(mknod("r", FileType::Regular, 0)).await), ErrorCode::Invalid);
        assert_eq!(code(env.req(mknod("p", FileType::Fifo, 0)).await), ErrorCode::Exists);
        let d = env.must_mkdir(Fid::ROOT, "open").await;
        env.req(MdtRequest::Setattr(mdt::Setattr {
            fid: d,
            set: SetAttr { mode: Some(0o777), ..Default::default() },
            open_handle: None,
        }))
        .await
        .unwrap();
        let as_user =
            |kind| MdtRequest::Mknod(mdt::Mknod { parent: d, name: "b".into(), kind, mode: 0o600, rdev: 1, umask: 0 });
        assert_eq!(code(env.req_as(&user(1000), as_user(FileType::BlockDevice)).await), ErrorCode::Perm);
        assert!(env.req_as(&user(1000), as_user(FileType::Fifo)).await.is_ok());
    }
}
