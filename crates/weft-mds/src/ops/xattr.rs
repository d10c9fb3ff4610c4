//! Extended attributes. Names in `weft.` are reserved for virtual attributes (the layout):
//! setting or removing them is NotSupported, reading them here is NoData. `trusted.*` is
//! root's; `user.*` follows the mode bits; other namespaces (security.*, system.*) are the
//! owner's or root's.

use super::{owner, Mutation, OpCtx, Query, QueryCtx};
use crate::perm;
use crate::schema::InodeRecord;
use crate::store::Tables;
use weft_proto::acl::{self, Acl};
use weft_proto::limits::{XATTR_NAME_BYTES_MAX, XATTR_VALUE_BYTES_MAX};
use weft_proto::msg::{mdt, FileType, Identity, Name, XATTR_CREATE, XATTR_REPLACE};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

const RESERVED_PREFIX: &[u8] = b"weft.";

fn validate(name: &[u8]) -> WeftResult<()> {
    if name.is_empty() || name.contains(&0) {
        return Err(WeftError::invalid("an xattr name must be non-empty and contain no NUL byte"));
    }
    if name.len() > XATTR_NAME_BYTES_MAX {
        return Err(WeftError::new(
            ErrorCode::NameTooLong,
            format!("xattr name of {} bytes is longer than {XATTR_NAME_BYTES_MAX}", name.len()),
        ));
    }
    Ok(())
}

fn no_data(name: &[u8]) -> WeftError {
    WeftError::new(ErrorCode::NoData, format!("no extended attribute '{}'", String::from_utf8_lossy(name)))
}

fn check_write(who: &Identity, rec: &InodeRecord, name: &[u8]) -> WeftResult<()> {
    if name.starts_with(b"trusted.") {
        return perm::check_root(who, "only root may change trusted.* attributes");
    }
    if name.starts_with(b"user.") {
        if !matches!(rec.kind, FileType::Regular | FileType::Directory) {
            return Err(WeftError::new(ErrorCode::Perm, "user.* attributes exist only on files and directories"));
        }
        if !perm::may(who, owner(rec), perm::MAY_WRITE) {
            return Err(WeftError::new(ErrorCode::Access, "changing user.* attributes needs write permission"));
        }
        return Ok(());
    }
    perm::check_owner(who, owner(rec), "only the owner or root may change these attributes")
}

/// Whether `who` may see the attribute at all (trusted.* is invisible to non-root, as Linux).
fn visible(who: &Identity, name: &[u8]) -> bool {
    !name.starts_with(RESERVED_PREFIX) && (perm::is_root(who) || !name.starts_with(b"trusted."))
}

pub fn get(t: &Tables, who: &Identity, fid: Fid, name: &[u8]) -> WeftResult<Vec<u8>> {
    let rec = t.must_inode(fid)?;
    validate(name)?;
    if !visible(who, name) {
        return Err(no_data(name));
    }
    if name.starts_with(b"user.") && !perm::may(who, owner(&rec), perm::MAY_READ) {
        return Err(WeftError::new(ErrorCode::Access, "reading user.* attributes needs read permission"));
    }
    if let Some(acl) = acl_of(&rec, name) {
        return acl.map(Acl::to_xattr).ok_or_else(|| no_data(name));
    }
    t.xattr(fid, name)?.ok_or_else(|| no_data(name))
}

/// For an ACL's name, the inode's ACL of that kind (None inside: it has none); None for
/// any other name. ACLs live in the inode record, where every permission check finds them.
fn acl_of<'a>(rec: &'a InodeRecord, name: &[u8]) -> Option<Option<&'a Acl>> {
    if name == acl::ACCESS_XATTR {
        Some(rec.acl.as_ref())
    } else if name == acl::DEFAULT_XATTR {
        Some(rec.default_acl.as_ref())
    } else {
        None
    }
}

pub fn list(t: &Tables, who: &Identity, fid: Fid) -> WeftResult<Vec<Name>> {
    let rec = t.must_inode(fid)?;
    let mut names: Vec<Name> = t.xattr_names(fid)?.into_iter().filter(|n| visible(who, n)).collect();
    for (name, present) in [(acl::ACCESS_XATTR, rec.acl.is_some()), (acl::DEFAULT_XATTR, rec.default_acl.is_some())] {
        if present {
            names.push(name.to_vec());
        }
    }
    Ok(names)
}

pub fn set(ctx: &mut OpCtx<'_>, fid: Fid, name: &[u8], value: &[u8], flags: u32) -> WeftResult<()> {
    let mut rec = ctx.t.must_inode(fid)?;
    validate(name)?;
    if name.starts_with(RESERVED_PREFIX) {
        return Err(WeftError::new(
            ErrorCode::NotSupported,
            "weft.* attributes are reserved: use setstripe to change a layout",
        ));
    }
    if flags & !(XATTR_CREATE | XATTR_REPLACE) != 0 || flags == XATTR_CREATE | XATTR_REPLACE {
        return Err(WeftError::invalid(format!("setxattr flags {flags:#x} are invalid")));
    }
    if name == acl::ACCESS_XATTR || name == acl::DEFAULT_XATTR {
        return set_acl(ctx, fid, rec, name, value);
    }
    if value.len() > XATTR_VALUE_BYTES_MAX {
        return Err(WeftError::new(
            ErrorCode::Range,
            format!("xattr value of {} bytes is larger than {XATTR_VALUE_BYTES_MAX}", value.len()),
        ));
    }
    check_write(ctx.who, &rec, name)?;
    let exists = ctx.t.xattr(fid, name)?.is_some();
    if flags & XATTR_CREATE != 0 && exists {
        return Err(WeftError::new(
            ErrorCode::Exists,
            format!("extended attribute '{}' exists already", String::from_utf8_lossy(name)),
        ));
    }
    if flags & XATTR_REPLACE != 0 && !exists {
        return Err(no_data(name));
    }
    // Checks done: writes follow.
    ctx.t.put_xattr(fid, name, value)?;
    rec.ctime = ctx.now;
    ctx.t.put_inode(fid, &rec)?;
    Ok(())
}

/// A POSIX ACL, kept in the inode record. An access ACL that names no one is the mode
/// bits, and only changes them (as ext4 keeps no such ACL and `ls -l` shows no '+'); one
/// that names users or groups is kept, and the mode's group bits become its mask (Linux's
/// `posix_acl_update_mode`, which also drops setgid for a caller outside the file's group).
/// A default ACL is a directory's only (EACCES elsewhere, as Linux), and kept whole.
fn set_acl(ctx: &mut OpCtx<'_>, fid: Fid, mut rec: InodeRecord, name: &[u8], value: &[u8]) -> WeftResult<()> {
    perm::check_owner(ctx.who, owner(&rec), "only the owner or root may change a file's ACL")?;
    let acl = Acl::from_xattr(value)?;
    if name == acl::DEFAULT_XATTR {
        if rec.kind != FileType::Directory {
            return Err(WeftError::new(ErrorCode::Access, "only a directory has a default ACL"));
        }
        // Checks done: writes follow.
        rec.default_acl = acl;
    } else {
        let acl =
            acl.ok_or_else(|| WeftError::invalid("an access ACL needs the owner's, group's and others' entries"))?;
        let mode = perm::check_chmod(ctx.who, owner(&rec), (rec.mode & !0o777) | acl.mode_bits())?;
        // Checks done: writes follow.
        rec.mode = mode;
        rec.acl = if acl.is_mode() { None } else { Some(acl) };
    }
    if ctx.t.xattr(fid, name)?.is_some() {
        // Kept as a plain xattr by an earlier version.
        ctx.t.remove_xattr(fid, name)?;
    }
    rec.ctime = ctx.now;
    ctx.t.put_inode(fid, &rec)?;
    Ok(())
}

/// Removing an ACL: the mode bits stay as they are (Linux's `set_posix_acl(NULL)`).
fn remove_acl(ctx: &mut OpCtx<'_>, fid: Fid, mut rec: InodeRecord, name: &[u8]) -> WeftResult<()> {
    perm::check_owner(ctx.who, owner(&rec), "only the owner or root may change a file's ACL")?;
    let slot = if name == acl::ACCESS_XATTR { &mut rec.acl } else { &mut rec.default_acl };
    if slot.take().is_none() {
        return Err(no_data(name));
    }
    rec.ctime = ctx.now;
    ctx.t.put_inode(fid, &rec)
}

pub fn remove(ctx: &mut OpCtx<'_>, fid: Fid, name: &[u8]) -> WeftResult<()> {
    let mut rec = ctx.t.must_inode(fid)?;
    validate(name)?;
    if name.starts_with(RESERVED_PREFIX) {
        return Err(WeftError::new(ErrorCode::NotSupported, "weft.* attributes are reserved"));
    }
    if acl_of(&rec, name).is_some() {
        return remove_acl(ctx, fid, rec, name);
    }
    check_write(ctx.who, &rec, name)?;
    if ctx.t.xattr(fid, name)?.is_none() {
        return Err(no_data(name));
    }
    // Checks done: writes follow.
    ctx.t.remove_xattr(fid, name)?;
    rec.ctime = ctx.now;
    ctx.t.put_inode(fid, &rec)?;
    Ok(())
}

impl Query for mdt::GetXattr {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<Vec<u8>> {
        get(q.t, q.who, self.fid, &self.name)
    }
}

impl Query for mdt::ListXattr {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<Vec<Name>> {
        list(q.t, q.who, self.fid)
    }
}

impl Mutation for mdt::SetXattr {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        set(ctx, self.fid, &self.name, &self.value, self.flags)?;
        ctx.record(weft_proto::msg::changelog::ChangelogType::Xattr, 0, self.fid, None)
    }
}

impl Mutation for mdt::RemoveXattr {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        remove(ctx, self.fid, &self.name)?;
        ctx.record(weft_proto::msg::changelog::ChangelogType::Xattr, 0, self.fid, None)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn setx(fid: Fid, name: &str, value: &[u8], flags: u32) -> MdtRequest {
        MdtRequest::SetXattr(mdt::SetXattr { fid, name: name.into(), value: value.to_vec(), flags })
    }

    #[tokio::test]
    async fn xattr_set_get_list_remove_and_flags() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        let get = |name: &str| MdtRequest::GetXattr(mdt::GetXattr { fid: f, name: name.into() });
        env.req(setx(f, "user.a", b"1", 0)).await.unwrap();
        env.req(setx(f, "trusted.t", b"2", 0)).await.unwrap();
        env.req(setx(f, "security.selinux", b"ctx", 0)).await.unwrap();
        assert_eq!(env.req(get("user.a")).await.unwrap(), MdtReply::Data(b"1".to_vec()));
        assert_eq!(code(env.req(setx(f, "user.a", b"x", XATTR_CREATE)).await), ErrorCode::Exists);
        assert_eq!(code(env.req(setx(f, "user.b", b"x", XATTR_REPLACE)).await), ErrorCode::NoData);
        env.req(setx(f, "user.a", b"3", XATTR_REPLACE)).await.unwrap();
        assert_eq!(env.req(get("user.a")).await.unwrap(), MdtReply::Data(b"3".to_vec()));
        let names = |r| match r {
            MdtReply::Names(mut n) => {
                n.sort();
                n
            }
            r => panic!("{r:?}"),
        };
        let all = names(env.req(MdtRequest::ListXattr(mdt::ListXattr { fid: f })).await.unwrap());
        assert_eq!(all, vec![b"security.selinux".to_vec(), b"trusted.t".to_vec(), b"user.a".to_vec()]);
        let as_user = names(env.req_as(&user(1000), MdtRequest::ListXattr(mdt::ListXattr { fid: f })).await.unwrap());
        assert_eq!(as_user, vec![b"security.selinux".to_vec(), b"user.a".to_vec()]);
        // Reserved names.
        assert_eq!(code(env.req(setx(f, "weft.layout", b"x", 0)).await), ErrorCode::NotSupported);
        assert_eq!(
            code(env.req(MdtRequest::RemoveXattr(mdt::RemoveXattr { fid: f, name: "weft.x".into() })).await),
            ErrorCode::NotSupported
        );
        assert_eq!(code(env.req(get("weft.layout")).await), ErrorCode::NoData);
        // Limits.
        assert_eq!(code(env.req(setx(f, &"u".repeat(256), b"", 0)).await), ErrorCode::NameTooLong);
        assert_eq!(code(env.req(setx(f, "user.big", &vec![0; 65537], 0)).await), ErrorCode::Range);
        assert!(env.req(setx(f, "user.max", &vec![0; 65536], 0)).await.is_ok());
        // Permissions: file is 0644 root.
        let u = user(1000);
        assert_eq!(code(env.req_as(&u, setx(f, "user.a", b"x", 0)).await), ErrorCode::Access);
        assert_eq!(code(env.req_as(&u, setx(f, "trusted.a", b"x", 0)).await), ErrorCode::Perm);
        assert_eq!(code(env.req_as(&u, get("trusted.t")).await), ErrorCode::NoData);
        // Remove.
        env.req(MdtRequest::RemoveXattr(mdt::RemoveXattr { fid: f, name: "user.a".into() })).await.unwrap();
        assert_eq!(code(env.req(get("user.a")).await), ErrorCode::NoData);
        assert_eq!(
            code(env.req(MdtRequest::RemoveXattr(mdt::RemoveXattr { fid: f, name: "user.a".into() })).await),
            ErrorCode::NoData
        );
    }

    /// `user::rw- user:1000:r-- group::--- mask::r-- other::---` as setfacl sends it.
    fn named_acl() -> Vec<u8> {
        let mut v = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in
            [(1u16, 6u16, u32::MAX), (2, 4, 1000), (4, 0, u32::MAX), (0x10, 4, u32::MAX), (0x20, 0, u32::MAX)]
        {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&perm.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    fn open_as(fid: Fid, flags: u32) -> MdtRequest {
        MdtRequest::Open(mdt::Open { fid, flags })
    }

    #[tokio::test]
    async fn an_acl_naming_a_user_is_kept_enforced_and_follows_chmod() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        env.req(setx(f, "system.posix_acl_access", &named_acl(), 0)).await.unwrap();
        let attr = env.getattr(f).await.unwrap().attr;
        assert_eq!(attr.mode & 0o777, 0o640, "the group bits are the mask");
        let get = MdtRequest::GetXattr(mdt::GetXattr { fid: f, name: "system.posix_acl_access".into() });
        assert_eq!(env.req(get.clone()).await.unwrap(), MdtReply::Data(named_acl()));
        let MdtReply::Names(names) = env.req(MdtRequest::ListXattr(mdt::ListXattr { fid: f })).await.unwrap() else {
            panic!()
        };
        assert!(names.contains(&b"system.posix_acl_access".to_vec()), "{names:?}");
        // The named user reads; another user does not, nor may the named user write.
        env.req_as(&user(1000), open_as(f, OPEN_READ)).await.unwrap();
        assert_eq!(code(env.req_as(&user(1000), open_as(f, OPEN_WRITE)).await), ErrorCode::Access);
        assert_eq!(code(env.req_as(&user(2000), open_as(f, OPEN_READ)).await), ErrorCode::Access);
        // Only the owner or root sets an ACL.
        assert_eq!(
            code(env.req_as(&user(1000), setx(f, "system.posix_acl_access", &named_acl(), 0)).await),
            ErrorCode::Perm
        );
        // chmod g-r sets the mask: the named user loses read; the entry stays.
        let chmod = |mode| {
            MdtRequest::Setattr(mdt::Setattr {
                fid: f,
                set: SetAttr { mode: Some(mode), ..SetAttr::default() },
                open_handle: None,
            })
        };
        env.req(chmod(0o600)).await.unwrap();
        assert_eq!(code(env.req_as(&user(1000), open_as(f, OPEN_READ)).await), ErrorCode::Access);
        env.req(chmod(0o640)).await.unwrap();
        env.req_as(&user(1000), open_as(f, OPEN_READ)).await.unwrap();
        // Removing the ACL leaves the mode; the named user is "other" again.
        env.req(MdtRequest::RemoveXattr(mdt::RemoveXattr { fid: f, name: "system.posix_acl_access".into() }))
            .await
            .unwrap();
        assert_eq!(env.getattr(f).await.unwrap().attr.mode & 0o777, 0o640);
        assert_eq!(code(env.req(get).await), ErrorCode::NoData);
        assert_eq!(code(env.req_as(&user(1000), open_as(f, OPEN_READ)).await), ErrorCode::Access);
        // A malformed ACL is refused whole.
        assert_eq!(code(env.req(setx(f, "system.posix_acl_access", &named_acl()[..20], 0)).await), ErrorCode::Invalid);
    }

    #[tokio::test]
    async fn a_default_acl_replaces_the_umask_and_passes_to_new_entries() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let plain = env.must_mkdir(Fid::ROOT, "plain").await;
        let f = env.must_file(Fid::ROOT, "f").await;
        assert_eq!(code(env.req(setx(f, "system.posix_acl_default", &named_acl(), 0)).await), ErrorCode::Access);
        env.req(setx(d, "system.posix_acl_default", &named_acl(), 0)).await.unwrap();
        let create = |parent, name: &str| {
            MdtRequest::Create(mdt::Create {
                parent,
                name: name.into(),
                mode: 0o666,
                exclusive: true,
                spec: None,
                open_flags: OPEN_READ,
                umask: 0o077,
            })
        };
        let mode_of = |r: MdtReply| match r {
            MdtReply::Opened(o) => (o.inode.attr.fid, o.inode.attr.mode & 0o7777),
            MdtReply::Inode(i) => (i.attr.fid, i.attr.mode & 0o7777),
            r => panic!("{r:?}"),
        };
        // In `plain` the umask applies; in `d` the default ACL does (rw- r-- ---), not the umask.
        assert_eq!(mode_of(env.req(create(plain, "a")).await.unwrap()).1, 0o600);
        let (nf, mode) = mode_of(env.req(create(d, "a")).await.unwrap());
        assert_eq!(mode, 0o640);
        env.req_as(&user(1000), open_as(nf, OPEN_READ)).await.unwrap();
        let mkdir = MdtRequest::Mkdir(mdt::Mkdir { parent: d, name: "sub".into(), mode: 0o777, umask: 0o077 });
        let (sub, mode) = mode_of(env.req(mkdir).await.unwrap());
        assert_eq!(mode, 0o640, "mkdir 0777 under the default rw-/r--/---");
        let get = |fid, name: &str| MdtRequest::GetXattr(mdt::GetXattr { fid, name: name.into() });
        assert_eq!(env.req(get(sub, "system.posix_acl_default")).await.unwrap(), MdtReply::Data(named_acl()));
        assert_eq!(env.req(get(nf, "system.posix_acl_access")).await.unwrap(), MdtReply::Data(named_acl()));
        assert_eq!(
            code(env.req(get(nf, "system.posix_acl_default")).await),
            ErrorCode::NoData,
            "files take no default"
        );
        // Kept across a restart.
        let mut env = env;
        env.restart().await;
        env.req_as(&user(1000), open_as(nf, OPEN_READ)).await.unwrap();
        assert_eq!(code(env.req_as(&user(2000), open_as(nf, OPEN_READ)).await), ErrorCode::Access);
    }

    #[tokio::test]
    async fn a_project_passes_to_new_entries_and_moving_out_of_it_is_exdev() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let other = env.must_mkdir(Fid::ROOT, "other").await;
        let set_project = |fid, projid, inherit| {
            let set = SetAttr { projid: Some(projid), proj_inherit: inherit, ..SetAttr::default() };
            MdtRequest::Setattr(mdt::Setattr { fid, set, open_handle: None })
        };
        assert_eq!(code(env.req_as(&user(1000), set_project(d, 7, Some(true))).await), ErrorCode::Perm, "root's");
        env.req(set_project(d, 7, Some(true))).await.unwrap();
        let f = env.must_file(d, "f").await;
        let sub = env.must_mkdir(d, "sub").await;
        let deep = env.must_file(sub, "deep").await;
        for (fid, inherit) in [(f, false), (sub, true), (deep, false)] {
            let a = env.getattr(fid).await.unwrap().attr;
            assert_eq!((a.projid, a.proj_inherit), (7, inherit), "{fid}");
        }
        let outside = env.must_file(other, "x").await;
        assert_eq!(env.getattr(outside).await.unwrap().attr.projid, 0);
        let rename = |sp, s: &str, dp, n: &str| {
            MdtRequest::Rename(mdt::Rename {
                src_parent: sp,
                src_name: s.into(),
                dst_parent: dp,
                dst_name: n.into(),
                flags: 0,
            })
        };
        assert_eq!(code(env.req(rename(other, "x", d, "x")).await), ErrorCode::CrossDevice);
        let link = MdtRequest::Link(mdt::Link { fid: outside, parent: d, name: "l".into() });
        assert_eq!(code(env.req(link).await), ErrorCode::CrossDevice);
        // Out of the project into a directory that passes none on: allowed.
        env.req(rename(d, "f", other, "f")).await.unwrap();
        assert_eq!(code(env.req(set_project(f, 7, Some(true))).await), ErrorCode::Invalid, "-s is for directories");
    }
}
