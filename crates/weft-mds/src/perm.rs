//! Permission checks: pure functions of the caller's identity and an inode's owner, mode
//! and access ACL, as Linux decides them. The superuser (uid 0) bypasses mode checks.

use weft_proto::acl::Acl;
use weft_proto::msg::Identity;
use weft_proto::{ErrorCode, WeftError, WeftResult};

pub const MAY_READ: u32 = 4;
pub const MAY_WRITE: u32 = 2;
pub const MAY_EXEC: u32 = 1;

pub const S_ISUID: u32 = 0o4000;
pub const S_ISGID: u32 = 0o2000;
pub const S_ISVTX: u32 = 0o1000;

/// The owner, mode bits and access ACL that checks look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner<'a> {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    /// The access ACL, when the inode has one that names users or groups.
    pub acl: Option<&'a Acl>,
}

pub fn is_root(who: &Identity) -> bool {
    who.uid == 0
}

/// Whether `who` has every bit of `want` (MAY_READ | MAY_WRITE | MAY_EXEC) on `obj`.
pub fn may(who: &Identity, obj: Owner, want: u32) -> bool {
    if is_root(who) {
        return true;
    }
    // As Linux's acl_permission_check: the ACL is looked at only while the group bits (its
    // mask) grant something; with none, the mode bits decide.
    if let Some(acl) = obj.acl.filter(|_| obj.mode & 0o070 != 0) {
        return acl.permits(who, obj.uid, obj.gid, want);
    }
    let bits = if who.uid == obj.uid {
        (obj.mode >> 6) & 7
    } else if who.in_group(obj.gid) {
        (obj.mode >> 3) & 7
    } else {
        obj.mode & 7
    };
    bits & want == want
}

fn access_denied(what: &str) -> WeftError {
    WeftError::new(ErrorCode::Access, format!("permission denied: {what}"))
}

fn not_permitted(what: &str) -> WeftError {
    WeftError::new(ErrorCode::Perm, format!("operation not permitted: {what}"))
}

/// Lookup in a directory needs search (exec) permission.
pub fn check_lookup(who: &Identity, dir: Owner) -> WeftResult<()> {
    if may(who, dir, MAY_EXEC) {
        Ok(())
    } else {
        Err(access_denied("no search (x) permission on the directory"))
    }
}

/// Adding or removing names needs write and search permission on the directory.
pub fn check_dir_write(who: &Identity, dir: Owner) -> WeftResult<()> {
    if may(who, dir, MAY_WRITE | MAY_EXEC) {
        Ok(())
    } else {
        Err(access_denied("no write and search (wx) permission on the directory"))
    }
}

/// In a sticky directory only the entry's owner, the directory's owner or root may remove
/// or rename an entry.
pub fn check_sticky(who: &Identity, dir: Owner, entry_uid: u32) -> WeftResult<()> {
    if dir.mode & S_ISVTX == 0 || is_root(who) || who.uid == dir.uid || who.uid == entry_uid {
        Ok(())
    } else {
        Err(not_permitted("the directory is sticky (+t) and the entry belongs to another user"))
    }
}

pub fn check_readdir(who: &Identity, dir: Owner) -> WeftResult<()> {
    if may(who, dir, MAY_READ) {
        Ok(())
    } else {
        Err(access_denied("no read permission on the directory"))
    }
}

/// Open checks read and/or write permission per the open flags.
pub fn check_open(who: &Identity, obj: Owner, read: bool, write: bool) -> WeftResult<()> {
    let want = if read { MAY_READ } else { 0 } | if write { MAY_WRITE } else { 0 };
    if may(who, obj, want) {
        Ok(())
    } else {
        Err(access_denied(match (read, write) {
            (true, true) => "no read and write permission on the file",
            (false, true) => "no write permission on the file",
            _ => "no read permission on the file",
        }))
    }
}

/// An open by execve(2): execute permission (root's too was checked by the kernel, which
/// asks for an execute bit).
pub fn check_exec(who: &Identity, obj: Owner) -> WeftResult<()> {
    if may(who, obj, MAY_EXEC) {
        Ok(())
    } else {
        Err(access_denied("no execute permission on the file"))
    }
}

/// chmod: owner or root. Returns the mode to store: a non-root caller outside the file's
/// group loses S_ISGID, as Linux does.
pub fn check_chmod(who: &Identity, obj: Owner, new_mode: u32) -> WeftResult<u32> {
    if !is_root(who) && who.uid != obj.uid {
        return Err(not_permitted("only the owner or root may change the mode"));
    }
    let mut mode = new_mode & 0o7777;
    if !is_root(who) && !who.in_group(obj.gid) {
        mode &= !S_ISGID;
    }
    Ok(mode)
}

/// Whether going from `old` to `new` only clears setuid and/or setgid: the change the
/// kernel makes when someone other than the owner writes or truncates such a file.
pub fn only_clears_suid_sgid(old: u32, new: u32) -> bool {
    let privileges = S_ISUID | S_ISGID;
    let (old, new) = (old & 0o7777, new & 0o7777);
    old & !privileges == new & !privileges && new & privileges & !old == 0 && new != old
}

/// chown/chgrp: root changes anything; the owner may change the group to one it is in
/// (and "change" the owner to itself).
pub fn check_chown(who: &Identity, obj: Owner, uid: Option<u32>, gid: Option<u32>) -> WeftResult<()> {
    if is_root(who) {
        return Ok(());
    }
    if let Some(u) = uid {
        if u != obj.uid || who.uid != obj.uid {
            return Err(not_permitted("only root may change the owner of a file"));
        }
    }
    if let Some(g) = gid {
        if who.uid != obj.uid {
            return Err(not_permitted("only the owner or root may change the group"));
        }
        if g != obj.gid && !who.in_group(g) {
            return Err(not_permitted("the owner may only change the group to a group it is a member of"));
        }
    }
    Ok(())
}

/// Mode bits Linux clears on chown by a non-root caller: setuid, and setgid if group-exec.
pub fn mode_after_chown(mode: u32, by_root: bool) -> u32 {
    if by_root {
        return mode;
    }
    let mut m = mode & !S_ISUID;
    if m & 0o010 != 0 {
        m &= !S_ISGID;
    }
    m
}

/// utimes: to the current time needs ownership or write permission; to an explicit time
/// needs ownership.
pub fn check_utimes(who: &Identity, obj: Owner, explicit: bool) -> WeftResult<()> {
    if is_root(who) || who.uid == obj.uid {
        return Ok(());
    }
    if explicit {
        return Err(not_permitted("only the owner or root may set times to a given value"));
    }
    if may(who, obj, MAY_WRITE) {
        Ok(())
    } else {
        Err(access_denied("setting times to now needs ownership or write permission"))
    }
}

/// truncate: write permission.
pub fn check_truncate(who: &Identity, obj: Owner) -> WeftResult<()> {
    if may(who, obj, MAY_WRITE) {
        Ok(())
    } else {
        Err(access_denied("truncating needs write permission on the file"))
    }
}

/// Changing attributes that only the owner may change (xattrs outside user.*, stripes).
pub fn check_owner(who: &Identity, obj: Owner, what: &str) -> WeftResult<()> {
    if is_root(who) || who.uid == obj.uid {
        Ok(())
    } else {
        Err(not_permitted(what))
    }
}

pub fn check_root(who: &Identity, what: &str) -> WeftResult<()> {
    if is_root(who) {
        Ok(())
    } else {
        Err(not_permitted(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: u32, gid: u32, groups: &[u32]) -> Identity {
        Identity { uid, gid, groups: groups.to_vec() }
    }

    const FILE: Owner<'static> = Owner { uid: 1000, gid: 100, mode: 0o640, acl: None };

    #[test]
    fn clearing_suid_and_sgid_is_told_from_other_mode_changes() {
        assert!(only_clears_suid_sgid(0o6777, 0o0777));
        assert!(only_clears_suid_sgid(0o6777, 0o2777));
        assert!(only_clears_suid_sgid(0o4755, 0o0755));
        assert!(!only_clears_suid_sgid(0o6777, 0o6777), "no change");
        assert!(!only_clears_suid_sgid(0o0777, 0o4777), "setting setuid");
        assert!(!only_clears_suid_sgid(0o6777, 0o0775), "clearing a permission bit too");
        assert!(!only_clears_suid_sgid(0o7777, 0o0777), "clearing the sticky bit too");
    }

    #[test]
    fn mode_classes_owner_group_other_and_root() {
        let owner = user(1000, 1000, &[]);
        let member = user(2000, 2000, &[100]);
        let other = user(3000, 3000, &[]);
        assert!(may(&owner, FILE, MAY_READ | MAY_WRITE));
        assert!(!may(&owner, FILE, MAY_EXEC));
        assert!(may(&member, FILE, MAY_READ));
        assert!(!may(&member, FILE, MAY_WRITE));
        assert!(!may(&other, FILE, MAY_READ));
        assert!(may(&Identity::root(), FILE, MAY_READ | MAY_WRITE | MAY_EXEC));
        // The owner class decides even when the group would allow more (as Linux).
        let o = Owner { uid: 1000, gid: 100, mode: 0o070, acl: None };
        assert!(!may(&user(1000, 100, &[]), o, MAY_READ));
    }

    #[test]
    fn directory_checks_and_sticky() {
        let dir = Owner { uid: 0, gid: 0, mode: 0o1777, acl: None };
        let alice = user(1000, 1000, &[]);
        assert!(check_dir_write(&alice, dir).is_ok());
        assert_eq!(check_sticky(&alice, dir, 2000).unwrap_err().code, ErrorCode::Perm);
        assert!(check_sticky(&alice, dir, 1000).is_ok());
        assert!(check_sticky(&Identity::root(), dir, 2000).is_ok());
        let owned = Owner { uid: 1000, ..dir };
        assert!(check_sticky(&alice, owned, 2000).is_ok());
        let ro = Owner { uid: 0, gid: 0, mode: 0o755, acl: None };
        assert_eq!(check_dir_write(&alice, ro).unwrap_err().code, ErrorCode::Access);
        assert!(check_lookup(&alice, ro).is_ok());
        assert_eq!(check_lookup(&alice, Owner { mode: 0o700, ..ro }).unwrap_err().code, ErrorCode::Access);
        assert_eq!(check_readdir(&alice, Owner { mode: 0o711, ..ro }).unwrap_err().code, ErrorCode::Access);
    }

    #[test]
    fn chmod_chown_utimes_truncate() {
        let alice = user(1000, 1000, &[]);
        let bob = user(2000, 2000, &[]);
        assert_eq!(check_chmod(&bob, FILE, 0o777).unwrap_err().code, ErrorCode::Perm);
        // Alice is not in group 100: S_ISGID is dropped.
        assert_eq!(check_chmod(&alice, FILE, 0o2755).unwrap(), 0o755);
        assert_eq!(check_chmod(&user(1000, 100, &[]), FILE, 0o2755).unwrap(), 0o2755);
        assert_eq!(check_chown(&alice, FILE, Some(2000), None).unwrap_err().code, ErrorCode::Perm);
        assert!(check_chown(&alice, FILE, Some(1000), None).is_ok());
        assert!(check_chown(&user(1000, 1000, &[50]), FILE, None, Some(50)).is_ok());
        assert_eq!(check_chown(&alice, FILE, None, Some(50)).unwrap_err().code, ErrorCode::Perm);
        assert_eq!(check_chown(&bob, FILE, None, Some(2000)).unwrap_err().code, ErrorCode::Perm);
        assert!(check_chown(&Identity::root(), FILE, Some(5), Some(5)).is_ok());
        assert_eq!(mode_after_chown(0o6755, false), 0o0755);
        assert_eq!(mode_after_chown(0o6745, false), 0o2745);
        assert_eq!(mode_after_chown(0o6755, true), 0o6755);

        let shared = Owner { uid: 1000, gid: 100, mode: 0o666, acl: None };
        assert!(check_utimes(&bob, shared, false).is_ok());
        assert_eq!(check_utimes(&bob, shared, true).unwrap_err().code, ErrorCode::Perm);
        assert_eq!(check_utimes(&bob, FILE, false).unwrap_err().code, ErrorCode::Access);
        assert!(check_utimes(&alice, FILE, true).is_ok());
        assert!(check_truncate(&bob, shared).is_ok());
        assert_eq!(check_truncate(&bob, FILE).unwrap_err().code, ErrorCode::Access);
        assert_eq!(check_open(&bob, FILE, true, false).unwrap_err().code, ErrorCode::Access);
        assert!(check_open(&alice, FILE, true, true).is_ok());
    }
}
