//! Setattr: chmod, chown, truncate (the size record), utimes, ctime.

use super::{owner, OpCtx};
use crate::perm;
use weft_proto::limits::FILE_SIZE_MAX_BYTES;
use weft_proto::msg::{FileType, MdtReply, SetAttr, SetTime};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub fn setattr(ctx: &mut OpCtx<'_>, fid: Fid, set: &SetAttr) -> WeftResult<MdtReply> {
    let mut rec = ctx.t.must_inode(fid)?;
    let o = owner(&rec);
    let who = ctx.who;
    let new_mode = match set.mode {
        Some(m) => Some(perm::check_chmod(who, o, m)?),
        None => None,
    };
    if set.uid.is_some() || set.gid.is_some() {
        perm::check_chown(who, o, set.uid, set.gid)?;
    }
    if let Some(size) = set.size {
        match rec.kind {
            FileType::Regular => {}
            FileType::Directory => return Err(WeftError::new(ErrorCode::IsDir, format!("{fid} is a directory"))),
            k => return Err(WeftError::invalid(format!("cannot set the size of a {k:?}"))),
        }
        perm::check_truncate(who, o)?;
        if size > FILE_SIZE_MAX_BYTES {
            return Err(WeftError::new(ErrorCode::FileTooBig, format!("size {size} exceeds {FILE_SIZE_MAX_BYTES}")));
        }
    }
    let explicit = matches!(set.atime, Some(SetTime::At(_))) || matches!(set.mtime, Some(SetTime::At(_)));
    if set.atime.is_some() || set.mtime.is_some() {
        perm::check_utimes(who, o, explicit)?;
    }
    if set.ctime.is_some() {
        perm::check_owner(who, o, "only the owner or root may set the change time")?;
    }
    // Checks done: writes follow.
    let now = ctx.now;
    if let Some(m) = new_mode {
        rec.mode = m;
    }
    let chown = set.uid.is_some_and(|u| u != rec.uid) || set.gid.is_some_and(|g| g != rec.gid);
    if let Some(u) = set.uid {
        rec.uid = u;
    }
    if let Some(g) = set.gid {
        rec.gid = g;
    }
    if chown && rec.kind != FileType::Directory {
        rec.mode = perm::mode_after_chown(rec.mode, perm::is_root(who));
    }
    if let Some(size) = set.size {
        // The client truncated the objects; their sizes are the truth from now on.
        rec.size = size;
        rec.size_known = false;
        rec.mtime = now;
        ctx.core.open_files().size_changed(fid);
    }
    let at = |t: SetTime| match t {
        SetTime::Now => now,
        SetTime::At(ts) => ts,
    };
    if let Some(t) = set.atime {
        rec.atime = at(t);
    }
    if let Some(t) = set.mtime {
        rec.mtime = at(t);
    }
    rec.ctime = set.ctime.unwrap_or(now);
    ctx.t.put_inode(fid, &rec)?;
    Ok(MdtReply::Inode(crate::inode_info(ctx.core, fid, &rec)))
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn set(fid: Fid, s: SetAttr) -> MdtRequest {
        MdtRequest::Setattr { fid, set: s }
    }

    #[tokio::test]
    async fn setattr_as_root_and_as_users() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        env.req(set(d, SetAttr { mode: Some(0o777), ..Default::default() })).await.unwrap();
        let alice = user(1000);
        let (i, h) = env.create_as(&alice, d, "f", 0o644).await.unwrap();
        let f = i.attr.fid;
        env.must_close(f, h, Some((0, 0))).await;
        let bob = user(2000);
        assert_eq!(
            code(env.req_as(&bob, set(f, SetAttr { mode: Some(0o777), ..Default::default() })).await),
            ErrorCode::Perm
        );
        env.req_as(&alice, set(f, SetAttr { mode: Some(0o4755), ..Default::default() })).await.unwrap();
        assert_eq!(env.must_attr(f).await.mode, 0o4755);
        assert_eq!(
            code(env.req_as(&alice, set(f, SetAttr { uid: Some(2000), ..Default::default() })).await),
            ErrorCode::Perm
        );
        let in_group = Identity { uid: 1000, gid: 1000, groups: vec![77] };
        env.req_as(&in_group, set(f, SetAttr { gid: Some(77), ..Default::default() })).await.unwrap();
        let a = env.must_attr(f).await;
        assert_eq!((a.gid, a.mode), (77, 0o755), "chown by the owner clears setuid");
        env.req(set(f, SetAttr { uid: Some(3000), ..Default::default() })).await.unwrap();
        assert_eq!(env.must_attr(f).await.uid, 3000);

        // Times.
        let t = Timestamp { sec: 1000, nsec: 5 };
        let explicit = SetAttr { mtime: Some(SetTime::At(t)), ..Default::default() };
        assert_eq!(code(env.req_as(&alice, set(f, explicit.clone())).await), ErrorCode::Perm);
        env.req(set(f, explicit)).await.unwrap();
        let a = env.must_attr(f).await;
        assert_eq!(a.mtime, t);
        assert!(a.ctime > t);
        let now = SetAttr { atime: Some(SetTime::Now), mtime: Some(SetTime::Now), ..Default::default() };
        assert_eq!(code(env.req_as(&alice, set(f, now.clone())).await), ErrorCode::Access);
        env.req(set(f, SetAttr { mode: Some(0o666), ..Default::default() })).await.unwrap();
        env.req_as(&alice, set(f, now)).await.unwrap();
        assert!(env.must_attr(f).await.mtime > t);

        // Size.
        env.req_as(&alice, set(f, SetAttr { size: Some(12345), ..Default::default() })).await.unwrap();
        let a = env.must_attr(f).await;
        assert_eq!((a.size, a.size_known), (12345, false));
        assert_eq!(code(env.req(set(d, SetAttr { size: Some(0), ..Default::default() })).await), ErrorCode::IsDir);
        env.req(set(f, SetAttr { mode: Some(0o644), ..Default::default() })).await.unwrap();
        assert_eq!(
            code(env.req_as(&alice, set(f, SetAttr { size: Some(0), ..Default::default() })).await),
            ErrorCode::Access
        );
    }
}
