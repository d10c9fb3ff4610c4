//! POSIX ACLs (POSIX.1e draft 17, as Linux implements them): the xattr form the kernel
//! passes in `system.posix_acl_access` and `system.posix_acl_default` (a little-endian u32
//! version 2, then entries of u16 tag, u16 permissions, u32 id), and the rules every
//! server and client apply to them: the access check, what a chmod does to an ACL, what a
//! new file takes from its directory's default ACL, and when an ACL says no more than the
//! mode bits (then it is not kept, as ext4 keeps none and `ls -l` shows no '+').
//!
//! Entries are kept sorted by tag then id (the order `posix_acl_valid` requires), so two
//! equal ACLs have one form.

use crate::error::{WeftError, WeftResult};
use crate::msg::Identity;
use serde::{Deserialize, Serialize};

/// The xattr that holds a file's access ACL.
pub const ACCESS_XATTR: &[u8] = b"system.posix_acl_access";
/// The xattr that holds a directory's default ACL.
pub const DEFAULT_XATTR: &[u8] = b"system.posix_acl_default";

const VERSION: u32 = 2;
const ENTRY_BYTES: usize = 8;
/// Most entries one ACL may have (ext4's limit is about 500 in a block; XFS allows more):
/// a bound on what one inode record carries.
pub const ENTRIES_MAX: usize = 1024;

pub const USER_OBJ: u16 = 0x01;
pub const USER: u16 = 0x02;
pub const GROUP_OBJ: u16 = 0x04;
pub const GROUP: u16 = 0x08;
pub const MASK: u16 = 0x10;
pub const OTHER: u16 = 0x20;
/// The id of the entries that name no one (owner, owning group, mask, others).
pub const UNDEFINED_ID: u32 = u32::MAX;

/// One entry: whose (`tag`, with `id` for USER and GROUP) and which of rwx (`perm`, 0..=7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclEntry {
    pub tag: u16,
    pub id: u32,
    pub perm: u16,
}

/// A valid ACL: USER_OBJ, GROUP_OBJ and OTHER once each, named users and groups once each,
/// and a MASK whenever anyone is named; sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acl(Vec<AclEntry>);

fn invalid(why: impl Into<String>) -> WeftError {
    WeftError::invalid(format!("not a valid POSIX ACL: {}", why.into()))
}

impl Acl {
    /// Reads the xattr form; any order of entries is taken and sorted. An ACL with no
    /// entry at all (as `setfacl -k` may send for a default ACL) is None: no ACL.
    pub fn from_xattr(value: &[u8]) -> WeftResult<Option<Acl>> {
        let (head, body) = value.split_first_chunk::<4>().ok_or_else(|| invalid("shorter than its version"))?;
        if u32::from_le_bytes(*head) != VERSION {
            return Err(invalid(format!("version {} (2 expected)", u32::from_le_bytes(*head))));
        }
        if body.len() % ENTRY_BYTES != 0 {
            return Err(invalid("a partial entry"));
        }
        if body.len() / ENTRY_BYTES > ENTRIES_MAX {
            return Err(WeftError::new(
                crate::ErrorCode::NoSpace,
                format!("a POSIX ACL of {} entries is more than {ENTRIES_MAX}", body.len() / ENTRY_BYTES),
            ));
        }
        if body.is_empty() {
            return Ok(None);
        }
        let mut entries = Vec::with_capacity(body.len() / ENTRY_BYTES);
        for e in body.chunks_exact(ENTRY_BYTES) {
            let tag = u16::from_le_bytes([e[0], e[1]]);
            let perm = u16::from_le_bytes([e[2], e[3]]);
            let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            let id = match tag {
                USER | GROUP => id,
                USER_OBJ | GROUP_OBJ | MASK | OTHER => UNDEFINED_ID,
                other => return Err(invalid(format!("unknown tag {other:#x}"))),
            };
            if perm > 7 {
                return Err(invalid(format!("permissions {perm:#o} are not rwx")));
            }
            entries.push(AclEntry { tag, id, perm });
        }
        Acl::new(entries).map(Some)
    }

    /// Checks and sorts `entries`.
    pub fn new(mut entries: Vec<AclEntry>) -> WeftResult<Acl> {
        entries.sort();
        for pair in entries.windows(2) {
            if (pair[0].tag, pair[0].id) == (pair[1].tag, pair[1].id) {
                return Err(invalid(format!("tag {:#x} id {} appears twice", pair[0].tag, pair[0].id)));
            }
        }
        let count = |tag| entries.iter().filter(|e| e.tag == tag).count();
        if count(USER_OBJ) != 1 || count(GROUP_OBJ) != 1 || count(OTHER) != 1 {
            return Err(invalid("it needs exactly one entry for the owner, the owning group and others"));
        }
        if count(MASK) == 0 && (count(USER) > 0 || count(GROUP) > 0) {
            return Err(invalid("an ACL naming users or groups needs a mask"));
        }
        Ok(Acl(entries))
    }

    /// The minimal ACL the mode bits are (owner, group, others).
    pub fn from_mode(mode: u32) -> Acl {
        let bits = |shift: u32| ((mode >> shift) & 7) as u16;
        Acl(vec![
            AclEntry { tag: USER_OBJ, id: UNDEFINED_ID, perm: bits(6) },
            AclEntry { tag: GROUP_OBJ, id: UNDEFINED_ID, perm: bits(3) },
            AclEntry { tag: OTHER, id: UNDEFINED_ID, perm: bits(0) },
        ])
    }

    /// The xattr form, as getxattr(2) returns it.
    pub fn to_xattr(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(4 + self.0.len() * ENTRY_BYTES);
        v.extend_from_slice(&VERSION.to_le_bytes());
        for e in &self.0 {
            v.extend_from_slice(&e.tag.to_le_bytes());
            v.extend_from_slice(&e.perm.to_le_bytes());
            v.extend_from_slice(&e.id.to_le_bytes());
        }
        v
    }

    pub fn entries(&self) -> &[AclEntry] {
        &self.0
    }

    fn perm_of(&self, tag: u16) -> Option<u16> {
        self.0.iter().find(|e| e.tag == tag).map(|e| e.perm)
    }

    fn set_perm(&mut self, tag: u16, perm: u16) {
        if let Some(e) = self.0.iter_mut().find(|e| e.tag == tag) {
            e.perm = perm;
        }
    }

    /// The permission bits (0o777) `ls -l` shows for a file with this access ACL: the
    /// owner's entry, the mask (the owning group's entry when there is none), others.
    pub fn mode_bits(&self) -> u32 {
        let p = |tag| u32::from(self.perm_of(tag).unwrap_or(0));
        let group = self.perm_of(MASK).map(u32::from).unwrap_or_else(|| p(GROUP_OBJ));
        p(USER_OBJ) << 6 | group << 3 | p(OTHER)
    }

    /// Whether the mode bits say all this ACL says (no one is named and there is no mask,
    /// as Linux's `posix_acl_equiv_mode`): then it is not kept.
    pub fn is_mode(&self) -> bool {
        !self.0.iter().any(|e| matches!(e.tag, USER | GROUP | MASK))
    }

    /// chmod(2) on a file with this access ACL (Linux's `__posix_acl_chmod`): the owner's
    /// and others' entries take the new bits, and the mask (or, without one, the owning
    /// group's entry) the group bits.
    pub fn chmod(&mut self, mode: u32) {
        let bits = |shift: u32| ((mode >> shift) & 7) as u16;
        self.set_perm(USER_OBJ, bits(6));
        self.set_perm(if self.perm_of(MASK).is_some() { MASK } else { GROUP_OBJ }, bits(3));
        self.set_perm(OTHER, bits(0));
    }

    /// What a new inode created with `mode` (0o777 bits, no umask: a default ACL replaces
    /// it) in a directory with this default ACL gets (Linux's `__posix_acl_create`): its
    /// access ACL (None when it is just the mode) and its permission bits.
    pub fn inherit(&self, mode: u32) -> (Option<Acl>, u32) {
        let mut acl = self.clone();
        let bits = |shift: u32| ((mode >> shift) & 7) as u16;
        let group_tag = if acl.perm_of(MASK).is_some() { MASK } else { GROUP_OBJ };
        for (tag, shift) in [(USER_OBJ, 6), (group_tag, 3), (OTHER, 0)] {
            let p = acl.perm_of(tag).unwrap_or(0) & bits(shift);
            acl.set_perm(tag, p);
        }
        let bits = acl.mode_bits();
        (if acl.is_mode() { None } else { Some(acl) }, bits)
    }

    /// Whether `who` has every bit of `want` (4 read, 2 write, 1 search/execute) on a file
    /// owned by `uid`:`gid` with this access ACL (Linux's `posix_acl_permission`; root is
    /// the caller's to decide). The owner is judged by the owner's entry alone; a named user
    /// by theirs under the mask; a caller in the owning group or a named group is granted
    /// if one such entry grants under the mask, and refused otherwise; others by theirs.
    pub fn permits(&self, who: &Identity, uid: u32, gid: u32, want: u32) -> bool {
        let want = want as u16;
        let mask = self.perm_of(MASK).unwrap_or(7);
        let has = |perm: u16| perm & want == want;
        if who.uid == uid {
            return has(self.perm_of(USER_OBJ).unwrap_or(0));
        }
        if let Some(e) = self.0.iter().find(|e| e.tag == USER && e.id == who.uid) {
            return has(e.perm & mask);
        }
        let mut in_a_group = false;
        for e in &self.0 {
            let member = match e.tag {
                GROUP_OBJ => who.in_group(gid),
                GROUP => who.in_group(e.id),
                _ => false,
            };
            if member {
                // The owning group's entry is masked too when the ACL has a mask.
                if has(e.perm & mask) {
                    return true;
                }
                in_a_group = true;
            }
        }
        !in_a_group && has(self.perm_of(OTHER).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xattr(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut v = VERSION.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&perm.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    fn user(uid: u32, gid: u32, groups: &[u32]) -> Identity {
        Identity { uid, gid, groups: groups.to_vec() }
    }

    /// `user::rw- user:1000:rwx group::r-- group:50:-w- mask::r-x other::---`, given
    /// out of order.
    fn named() -> Acl {
        let x =
            xattr(&[(OTHER, 0, 0), (USER, 7, 1000), (MASK, 5, 0), (GROUP, 2, 50), (GROUP_OBJ, 4, 0), (USER_OBJ, 6, 0)]);
        Acl::from_xattr(&x).unwrap().unwrap()
    }

    #[test]
    fn the_xattr_form_is_read_checked_sorted_and_written_back() {
        let acl = named();
        let tags: Vec<u16> = acl.entries().iter().map(|e| e.tag).collect();
        assert_eq!(tags, [USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER]);
        assert_eq!(Acl::from_xattr(&acl.to_xattr()).unwrap().unwrap(), acl);
        assert_eq!(acl.mode_bits(), 0o650, "owner rw-, mask r-x, other ---");
        assert!(!acl.is_mode());
        assert_eq!(Acl::from_xattr(&xattr(&[])).unwrap(), None, "no entries: no ACL");
        let bad = [
            xattr(&[(USER_OBJ, 7, 0), (OTHER, 5, 0)]),
            xattr(&[(USER_OBJ, 7, 0), (USER_OBJ, 7, 0), (GROUP_OBJ, 5, 0), (OTHER, 5, 0)]),
            xattr(&[(USER_OBJ, 9, 0), (GROUP_OBJ, 5, 0), (OTHER, 5, 0)]),
            xattr(&[(USER_OBJ, 7, 0), (USER, 7, 5), (GROUP_OBJ, 5, 0), (OTHER, 5, 0)]),
            xattr(&[(USER_OBJ, 7, 0), (USER, 7, 5), (USER, 6, 5), (GROUP_OBJ, 5, 0), (MASK, 7, 0), (OTHER, 5, 0)]),
            xattr(&[(USER_OBJ, 7, 0), (0x40, 7, 5), (GROUP_OBJ, 5, 0), (OTHER, 5, 0)]),
            b"\x01\x00\x00\x00".to_vec(),
            vec![2, 0, 0, 0, 1],
            vec![],
        ];
        for b in bad {
            assert!(Acl::from_xattr(&b).is_err(), "{b:?}");
        }
    }

    #[test]
    fn an_acl_naming_no_one_is_the_mode_and_the_mode_is_an_acl() {
        let acl = Acl::from_xattr(&xattr(&[(USER_OBJ, 6, 0), (GROUP_OBJ, 4, 0), (OTHER, 0, 0)])).unwrap().unwrap();
        assert!(acl.is_mode());
        assert_eq!(acl.mode_bits(), 0o640);
        assert_eq!(Acl::from_mode(0o640), acl);
        // A mask with no one named is kept (as Linux keeps it): the mask is the group bits,
        // the owning group's entry stays what it is.
        let masked = Acl::from_xattr(&xattr(&[(USER_OBJ, 6, 0), (GROUP_OBJ, 7, 0), (MASK, 4, 0), (OTHER, 0, 0)]));
        let masked = masked.unwrap().unwrap();
        assert!(!masked.is_mode());
        assert_eq!(masked.mode_bits(), 0o640);
    }

    #[test]
    fn access_is_decided_as_linux_decides_it() {
        let acl = named();
        let (owner, group) = (10, 20);
        // The owner: the owner's entry, unmasked.
        assert!(acl.permits(&user(10, 1, &[]), owner, group, 6));
        assert!(!acl.permits(&user(10, 1, &[]), owner, group, 1));
        // A named user: rwx under the mask r-x.
        assert!(acl.permits(&user(1000, 1, &[]), owner, group, 5));
        assert!(!acl.permits(&user(1000, 1, &[]), owner, group, 2), "the mask takes w away");
        // The owning group: r--.
        assert!(acl.permits(&user(7, 20, &[]), owner, group, 4));
        assert!(!acl.permits(&user(7, 20, &[]), owner, group, 1));
        // A named group -w- under the mask r-x grants nothing, and a member of it is not
        // judged as "others".
        assert!(!acl.permits(&user(7, 1, &[50]), owner, group, 2));
        // In both groups: the owning group's r-- grants read.
        assert!(acl.permits(&user(7, 1, &[50, 20]), owner, group, 4));
        // Others: ---.
        assert!(!acl.permits(&user(7, 1, &[]), owner, group, 4));
        assert!(acl.permits(&user(7, 1, &[]), owner, group, 0));
    }

    #[test]
    fn chmod_sets_the_mask_and_keeps_the_named_entries() {
        let mut acl = named();
        acl.chmod(0o751);
        assert_eq!(acl.mode_bits(), 0o751);
        assert_eq!(acl.perm_of(GROUP_OBJ), Some(4), "with a mask the owning group's entry stays");
        assert_eq!(acl.perm_of(MASK), Some(5));
        assert!(acl.entries().iter().any(|e| e.tag == USER && e.id == 1000 && e.perm == 7));
        let mut plain = Acl::from_mode(0o644);
        plain.chmod(0o600);
        assert_eq!(plain, Acl::from_mode(0o600));
    }

    #[test]
    fn a_new_file_takes_the_default_acl_under_its_create_mode() {
        let default = named();
        // open(O_CREAT, 0666): owner rw- & rw-, mask r-x & rw- = r--, other --- & rw-.
        let (acl, bits) = default.inherit(0o666);
        assert_eq!(bits, 0o640);
        let acl = acl.expect("named entries are kept");
        assert_eq!(acl.perm_of(USER_OBJ), Some(6));
        assert_eq!(acl.perm_of(MASK), Some(4));
        assert!(acl.entries().iter().any(|e| e.tag == USER && e.id == 1000 && e.perm == 7));
        // mkdir(0777) keeps all of the default's bits.
        assert_eq!(default.inherit(0o777).1, 0o650);
        // A default that names no one gives a plain mode (no ACL kept).
        assert_eq!(Acl::from_mode(0o750).inherit(0o666), (None, 0o640));
    }
}
