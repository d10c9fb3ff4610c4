//! Extended attributes. Names in `weft.` are reserved for virtual attributes (the layout):
//! setting or removing them is NotSupported, reading them here is NoData. `trusted.*` is
//! root's; `user.*` follows the mode bits; other namespaces (security.*, system.*) are the
//! owner's or root's.

use super::{owner, Mutation, OpCtx, Query, QueryCtx};
use crate::perm;
use crate::schema::InodeRecord;
use crate::store::Tables;
use weft_proto::limits::{XATTR_NAME_BYTES_MAX, XATTR_VALUE_BYTES_MAX};
use weft_proto::msg::{mdt, FileType, Identity, Name, XATTR_CREATE, XATTR_REPLACE};
use weft_proto::{acl, ErrorCode, Fid, WeftError, WeftResult};

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
    t.xattr(fid, name)?.ok_or_else(|| no_data(name))
}

pub fn list(t: &Tables, who: &Identity, fid: Fid) -> WeftResult<Vec<Name>> {
    t.must_inode(fid)?;
    Ok(t.xattr_names(fid)?.into_iter().filter(|n| visible(who, n)).collect())
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

/// A POSIX ACL (the kernel passes ACLs through as xattrs: the mount does not take them
/// over). One that says no more than the mode bits changes them, as a chmod, and is not
/// kept (as ext4 keeps none, and `ls -l` shows no '+'); one naming users or groups, or a
/// default ACL, is not supported yet: stored, it would look enforced and not be.
fn set_acl(ctx: &mut OpCtx<'_>, fid: Fid, mut rec: InodeRecord, name: &[u8], value: &[u8]) -> WeftResult<()> {
    perm::check_owner(ctx.who, owner(&rec), "only the owner or root may change a file's ACL")?;
    let not_yet = |what: &str| {
        WeftError::new(ErrorCode::NotSupported, format!("{what} are not supported yet: Weft keeps the mode bits only"))
    };
    if name == acl::DEFAULT_XATTR {
        return Err(not_yet("default ACLs"));
    }
    let bits = acl::mode_bits(value)?.ok_or_else(|| not_yet("ACLs that name users or groups"))?;
    // As Linux's posix_acl_update_mode: setgid goes for a caller outside the file's group.
    let mode = perm::check_chmod(ctx.who, owner(&rec), (rec.mode & !0o777) | bits)?;
    // Checks done: writes follow.
    if ctx.t.xattr(fid, name)?.is_some() {
        // Kept as a plain xattr by an earlier version.
        ctx.t.remove_xattr(fid, name)?;
    }
    rec.mode = mode;
    rec.ctime = ctx.now;
    ctx.t.put_inode(fid, &rec)?;
    Ok(())
}

pub fn remove(ctx: &mut OpCtx<'_>, fid: Fid, name: &[u8]) -> WeftResult<()> {
    let mut rec = ctx.t.must_inode(fid)?;
    validate(name)?;
    if name.starts_with(RESERVED_PREFIX) {
        return Err(WeftError::new(ErrorCode::NotSupported, "weft.* attributes are reserved"));
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
}
