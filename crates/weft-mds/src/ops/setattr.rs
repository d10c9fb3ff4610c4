//! Setattr: chmod, chown, truncate (the size record), utimes, ctime.

use super::{owner, Mutation, OpCtx};
use crate::perm::{self, Owner};
use weft_proto::limits::FILE_SIZE_MAX_BYTES;
use weft_proto::msg::changelog::ChangelogType;
use weft_proto::msg::{mdt, FileType, Identity, InodeInfo, SetAttr, SetTime};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// `open_handle`: the caller's open of `fid`, if it truncates through a descriptor.
pub fn setattr(ctx: &mut OpCtx<'_>, fid: Fid, set: &SetAttr, open_handle: Option<u64>) -> WeftResult<InodeInfo> {
    let mut rec = ctx.t.must_inode(fid)?;
    let o = owner(&rec);
    let who = ctx.who;
    let new_mode = match set.mode {
        Some(m) => Some(chmod(who, o, m)?),
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
        if !opened_for_writing(ctx, fid, open_handle) {
            perm::check_truncate(who, o)?;
        }
        if size > FILE_SIZE_MAX_BYTES {
            return Err(WeftError::new(ErrorCode::FileTooBig, format!("size {size} exceeds {FILE_SIZE_MAX_BYTES}")));
        }
        // A read-write cached file's owner sets the size its cache copy has (no objects).
        let cached = rec.layout.as_ref().is_some_and(|l| l.is_released())
            && super::hsm::state(ctx.t, fid)?.states & weft_proto::msg::hsm::HS_PCCRW != 0;
        if !cached && super::hsm::is_released(ctx.core, ctx.t, fid, &rec)? {
            return Err(super::open::released_error(fid));
        }
    }
    let explicit = matches!(set.atime, Some(SetTime::At(_))) || matches!(set.mtime, Some(SetTime::At(_)));
    if set.atime.is_some() || set.mtime.is_some() {
        perm::check_utimes(who, o, explicit)?;
    }
    if set.ctime.is_some() {
        perm::check_owner(who, o, "only the owner or root may set the change time")?;
    }
    if set.projid.is_some() || set.proj_inherit.is_some() {
        // As Lustre without `enable_chprojid_gid`: a project is an administrator's grant
        // (it decides whose quota a file counts against).
        perm::check_root(who, "only root may change a file's project")?;
        if set.proj_inherit.is_some() && rec.kind != FileType::Directory {
            return Err(WeftError::invalid("only a directory passes its project on (-s)"));
        }
    }
    let new_owner = weft_proto::msg::quota::QuotaOwner {
        uid: set.uid.unwrap_or(rec.uid),
        gid: set.gid.unwrap_or(rec.gid),
        projid: set.projid.unwrap_or(rec.projid),
    };
    let admitted = super::quota::admit_transfer(ctx.t, who, rec.quota_owner(), new_owner, ctx.now)?;
    // Checks done: writes follow.
    admitted.write(ctx.t)?;
    let now = ctx.now;
    if let Some(m) = new_mode {
        rec.mode = m;
        // The access ACL follows the mode: its owner's, mask's and others' entries.
        if let Some(acl) = rec.acl.as_mut() {
            acl.chmod(m);
        }
    }
    if let Some(p) = set.projid {
        rec.projid = p;
    }
    if let Some(i) = set.proj_inherit {
        rec.proj_inherit = i;
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
    if set.size.is_some() {
        super::hsm::mark_dirty_on_write(ctx, fid)?;
    }
    if let Some(size) = set.size {
        // The client truncated the objects; their sizes are the truth from now on. A file
        // released into a client's cache has none: the size set is the truth, while no
        // writer (its owner's) may change it.
        let released = rec.layout.as_ref().is_some_and(|l| l.is_released());
        rec.size = size;
        rec.size_known = released && ctx.core.open_files().counts(fid).writers == 0;
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
    ctx.record(changelog_type(set), 0, fid, None)?;
    Ok(crate::inode_info(ctx.core, fid, &rec))
}

/// The changelog's type of a setattr, as Lustre's MDD picks it: a truncate, else a change
/// of mode or owner, else of the times, the most telling first.
fn changelog_type(set: &SetAttr) -> ChangelogType {
    if set.size.is_some() {
        ChangelogType::Truncate
    } else if set.mode.is_some() || set.uid.is_some() || set.gid.is_some() || set.projid.is_some() {
        ChangelogType::Setattr
    } else if set.mtime.is_some() {
        ChangelogType::Mtime
    } else if set.ctime.is_some() {
        ChangelogType::Ctime
    } else if set.atime.is_some() {
        ChangelogType::Atime
    } else {
        ChangelogType::Setattr
    }
}

/// The mode a chmod stores. Besides the owner's and root's changes, a writer's kernel
/// clearing setuid and setgid (Linux's "kill suid" after a write or truncate by someone
/// else than the owner, which FUSE sends as a chmod by the writer) is done as on a local
/// file system: it only clears those bits, and only a caller that may write the file asks
/// for it (with `default_permissions` the kernel refuses a user's own chmod of a file it
/// does not own before it reaches the MDS).
fn chmod(who: &Identity, o: Owner, new_mode: u32) -> WeftResult<u32> {
    match perm::check_chmod(who, o, new_mode) {
        Ok(mode) => Ok(mode),
        Err(e) => {
            let kills_privileges = perm::only_clears_suid_sgid(o.mode, new_mode);
            if kills_privileges && perm::may(who, o, perm::MAY_WRITE) {
                Ok(new_mode & 0o7777)
            } else {
                Err(e)
            }
        }
    }
}

/// Whether `handle` is this client's open of `fid` for writing: then the size may change
/// whatever the mode bits say now (permission belongs to the open, as ftruncate(2) on a
/// descriptor opened O_CREAT|O_RDWR with mode 0 shows).
/// Whether `handle` is the caller's open of `fid` for writing (its right to write holds
/// whatever the mode bits say now).
pub fn opened_for_writing(ctx: &OpCtx<'_>, fid: Fid, handle: Option<u64>) -> bool {
    let Some(handle) = handle else { return false };
    let of = ctx.core.open_files();
    of.handle(handle).is_some_and(|oh| oh.fid == fid && oh.client_id == ctx.client_id && oh.writes())
}

impl Mutation for mdt::Setattr {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        setattr(ctx, self.fid, &self.set, self.open_handle)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn set(fid: Fid, s: SetAttr) -> MdtRequest {
        MdtRequest::Setattr(mdt::Setattr { fid, set: s, open_handle: None })
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

    /// Two defects a new user hit: the kernel's "kill suid" after another user's write came
    /// as a chmod by that user and was refused, so the write failed; and ftruncate on a
    /// descriptor its creator opened O_CREAT|O_RDWR with mode 0 was refused.
    #[tokio::test]
    async fn a_writer_clears_setuid_and_an_open_for_writing_may_truncate() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        env.req(set(d, SetAttr { mode: Some(0o777), ..Default::default() })).await.unwrap();
        let (alice, bob) = (user(1000), user(2000));
        let (i, h) = env.create_as(&alice, d, "suid", 0o6777).await.unwrap();
        let f = i.attr.fid;
        env.must_close(f, h, Some((0, 0))).await;
        assert_eq!(env.must_attr(f).await.mode, 0o6777);
        // Bob may write the file: clearing setuid and setgid is his kernel's to ask.
        env.req_as(&bob, set(f, SetAttr { mode: Some(0o0777), ..Default::default() })).await.unwrap();
        assert_eq!(env.must_attr(f).await.mode, 0o0777);
        // Any other mode change stays the owner's.
        env.req_as(&alice, set(f, SetAttr { mode: Some(0o6777), ..Default::default() })).await.unwrap();
        assert_eq!(
            code(env.req_as(&bob, set(f, SetAttr { mode: Some(0o0775), ..Default::default() })).await),
            ErrorCode::Perm
        );
        // Without write permission, no clearing either (o-w: bob is "other").
        env.req_as(&alice, set(f, SetAttr { mode: Some(0o4775), ..Default::default() })).await.unwrap();
        assert_eq!(
            code(env.req_as(&bob, set(f, SetAttr { mode: Some(0o0775), ..Default::default() })).await),
            ErrorCode::Perm
        );

        // O_CREAT|O_RDWR, mode 0: the open may truncate, a path truncate may not.
        let (i, h) = env.create_as(&alice, d, "mode0", 0).await.unwrap();
        let g = i.attr.fid;
        let truncate = |open_handle| {
            MdtRequest::Setattr(mdt::Setattr {
                fid: g,
                set: SetAttr { size: Some(100), ..Default::default() },
                open_handle,
            })
        };
        assert_eq!(code(env.req_as(&alice, truncate(None)).await), ErrorCode::Access);
        env.req_as(&alice, truncate(Some(h))).await.unwrap();
        assert_eq!(env.must_attr(g).await.size, 100);
        // Someone else's handle, or a closed one, gives nothing.
        assert_eq!(code(env.req_as(&bob, truncate(Some(h + 1000))).await), ErrorCode::Access);
        env.must_close(g, h, None).await;
        assert_eq!(code(env.req_as(&alice, truncate(Some(h))).await), ErrorCode::Access);
    }
}
