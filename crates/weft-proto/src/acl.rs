//! POSIX ACLs as Linux passes them in `system.posix_acl_access` (the xattr form:
//! a little-endian u32 version 2, then entries of u16 tag, u16 permissions, u32 id). Weft
//! keeps the mode bits only, so an ACL that says no more than they do is a chmod, as
//! ext4 stores it (no xattr); one naming users or groups is not supported yet.

use crate::error::{WeftError, WeftResult};

/// The xattr that holds a file's access ACL.
pub const ACCESS_XATTR: &[u8] = b"system.posix_acl_access";
/// The xattr that holds a directory's default ACL.
pub const DEFAULT_XATTR: &[u8] = b"system.posix_acl_default";

const VERSION: u32 = 2;
const ENTRY_BYTES: usize = 8;
const USER_OBJ: u16 = 0x01;
const GROUP_OBJ: u16 = 0x04;
const OTHER: u16 = 0x20;

/// The permission bits (0o777) an access ACL amounts to when it has exactly the owner's,
/// the group's and the others' entries; None when it names users or groups (or has a
/// mask), which the mode bits cannot say.
pub fn mode_bits(value: &[u8]) -> WeftResult<Option<u32>> {
    let malformed = || WeftError::invalid("a POSIX ACL must be version 2 followed by 8-byte entries");
    let (head, entries) = value.split_first_chunk::<4>().ok_or_else(malformed)?;
    if u32::from_le_bytes(*head) != VERSION || entries.len() % ENTRY_BYTES != 0 {
        return Err(malformed());
    }
    let (mut owner, mut group, mut other) = (None, None, None);
    for entry in entries.chunks_exact(ENTRY_BYTES) {
        let tag = u16::from_le_bytes([entry[0], entry[1]]);
        let perm = u16::from_le_bytes([entry[2], entry[3]]);
        if perm > 7 {
            return Err(WeftError::invalid(format!("a POSIX ACL entry's permissions {perm:#o} are not rwx")));
        }
        let slot = match tag {
            USER_OBJ => &mut owner,
            GROUP_OBJ => &mut group,
            OTHER => &mut other,
            _ => return Ok(None),
        };
        if slot.replace(u32::from(perm)).is_some() {
            return Err(WeftError::invalid(format!("a POSIX ACL names tag {tag:#x} twice")));
        }
    }
    match (owner, group, other) {
        (Some(u), Some(g), Some(o)) => Ok(Some(u << 6 | g << 3 | o)),
        _ => Err(WeftError::invalid("a POSIX ACL needs the owner's, the group's and the others' entries")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16)]) -> Vec<u8> {
        let mut v = VERSION.to_le_bytes().to_vec();
        for (tag, perm) in entries {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&perm.to_le_bytes());
            v.extend_from_slice(&u32::MAX.to_le_bytes());
        }
        v
    }

    #[test]
    fn an_acl_of_the_mode_bits_is_a_mode_and_others_are_told_apart() {
        assert_eq!(mode_bits(&acl(&[(USER_OBJ, 6), (GROUP_OBJ, 4), (OTHER, 0)])).unwrap(), Some(0o640));
        assert_eq!(mode_bits(&acl(&[(USER_OBJ, 7), (GROUP_OBJ, 5), (OTHER, 5)])).unwrap(), Some(0o755));
        // A named user (0x02) and a mask (0x10): more than the mode bits say.
        assert_eq!(mode_bits(&acl(&[(USER_OBJ, 7), (0x02, 7), (GROUP_OBJ, 5), (0x10, 7), (OTHER, 5)])).unwrap(), None);
        assert!(mode_bits(&acl(&[(USER_OBJ, 7), (OTHER, 5)])).is_err(), "no group entry");
        assert!(mode_bits(&acl(&[(USER_OBJ, 7), (USER_OBJ, 7), (GROUP_OBJ, 5), (OTHER, 5)])).is_err());
        assert!(mode_bits(&acl(&[(USER_OBJ, 9), (GROUP_OBJ, 5), (OTHER, 5)])).is_err());
        assert!(mode_bits(b"\x01\x00\x00\x00").is_err(), "version 1");
        assert!(mode_bits(&[2, 0, 0, 0, 1]).is_err(), "a partial entry");
        assert!(mode_bits(&[]).is_err());
    }
}
