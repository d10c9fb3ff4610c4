//! Open an existing inode: permission by flags, O_TRUNC, the size rule for writers.

use super::{owner, OpCtx};
use crate::perm;
use weft_proto::msg::{FileType, MdtReply, OPEN_READ, OPEN_TRUNC, OPEN_WRITE};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub fn open(ctx: &mut OpCtx<'_, '_>, fid: Fid, flags: u32) -> WeftResult<MdtReply> {
    let mut rec = ctx.t.must_inode(fid)?;
    let read = flags & OPEN_READ != 0;
    let write = flags & (OPEN_WRITE | OPEN_TRUNC) != 0;
    if rec.kind == FileType::Directory && write {
        return Err(WeftError::new(ErrorCode::IsDir, format!("{fid} is a directory: it cannot be opened for writing")));
    }
    if rec.kind == FileType::Symlink {
        return Err(WeftError::invalid(format!("{fid} is a symlink: the client follows it before opening")));
    }
    perm::check_open(ctx.who, owner(&rec), read, write)?;
    // Checks done: writes follow.
    let regular = rec.kind == FileType::Regular;
    let mut changed = false;
    if regular && flags & OPEN_TRUNC != 0 {
        // The client punches the objects; the MDS records the new size and times.
        rec.size = 0;
        rec.blocks = 0;
        rec.mtime = ctx.now;
        rec.ctime = ctx.now;
        changed = true;
    }
    if regular && write && rec.size_known {
        // A writer may change the size at any time: not trusted until a writer's close.
        rec.size_known = false;
        changed = true;
    }
    if changed {
        ctx.t.put_inode(fid, &rec)?;
    }
    let handle = ctx.core.open_files().open(fid, flags, ctx.client_id, ctx.undo);
    Ok(MdtReply::Opened { inode: crate::inode_info(ctx.core, fid, &rec), handle })
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn open_checks_permissions_by_flags() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await; // 0644 root
        let open = |flags| MdtRequest::Open { fid: f, flags };
        let u = user(1000);
        assert!(env.req_as(&u, open(OPEN_READ)).await.is_ok());
        assert_eq!(code(env.req_as(&u, open(OPEN_WRITE)).await), ErrorCode::Access);
        assert_eq!(code(env.req_as(&u, open(OPEN_READ | OPEN_TRUNC)).await), ErrorCode::Access);
        assert_eq!(code(env.req(MdtRequest::Open { fid: Fid::ROOT, flags: OPEN_WRITE }).await), ErrorCode::IsDir);
        assert!(env.req(MdtRequest::Open { fid: Fid::ROOT, flags: OPEN_READ }).await.is_ok());
    }

    #[tokio::test]
    async fn size_rule_follows_writers() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        assert!(env.must_attr(f).await.size_known);
        let (h1, h2) = {
            let open = |flags| MdtRequest::Open { fid: f, flags };
            let h = |r| match r {
                MdtReply::Opened { handle, inode } => (handle, inode.attr.size_known),
                r => panic!("{r:?}"),
            };
            let (h1, k1) = h(env.req(open(OPEN_WRITE)).await.unwrap());
            let (h2, k2) = h(env.req(open(OPEN_WRITE)).await.unwrap());
            assert!(!k1 && !k2);
            (h1, h2)
        };
        // Not the last writer: its size is not recorded.
        env.must_close(f, h1, Some((10, 1))).await;
        assert!(!env.must_attr(f).await.size_known);
        env.must_close(f, h2, Some((5000, 16))).await;
        let a = env.must_attr(f).await;
        assert_eq!((a.size, a.blocks, a.size_known), (5000, 16, true));
        // O_TRUNC resets the size; a reader does not make it unknown.
        let r = env.req(MdtRequest::Open { fid: f, flags: OPEN_READ }).await.unwrap();
        assert!(matches!(r, MdtReply::Opened { ref inode, .. } if inode.attr.size_known));
        let h = match env.req(MdtRequest::Open { fid: f, flags: OPEN_WRITE | OPEN_TRUNC }).await.unwrap() {
            MdtReply::Opened { handle, inode } => {
                assert_eq!((inode.attr.size, inode.attr.size_known), (0, false));
                handle
            }
            r => panic!("{r:?}"),
        };
        // The last writer closing without a size leaves it unknown.
        env.must_close(f, h, None).await;
        assert!(!env.must_attr(f).await.size_known);
    }
}
