//! HSM by path (`llapi_hsm_request`, `llapi_hsm_state_get`).

use super::common::{bytes, guard, invalid, weft_fs};
use crate::error::Error;
use crate::hsm::HsmRequest;
use std::ffi::{c_char, c_int};

/// What `weft_hsm_request` asks.
#[repr(C)]
#[allow(non_camel_case_types)]
pub enum weft_hsm_action {
    /// Copy the files' data to the archive.
    WEFT_HSM_ARCHIVE = 1,
    /// Free the objects of archived, clean, closed files (at once).
    WEFT_HSM_RELEASE = 2,
    /// Copy the archive's copy back.
    WEFT_HSM_RESTORE = 3,
    /// Delete the archive's copy.
    WEFT_HSM_REMOVE = 4,
    /// Stop the actions waiting or running on the files.
    WEFT_HSM_CANCEL = 5,
}

/// A file's HSM state.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct weft_hsm_state {
    /// WEFT_HS_* flags.
    pub states: u32,
    pub archive_id: u32,
}

/// The file has a copy in the archive (maybe not up to date).
pub const WEFT_HS_EXISTS: u32 = 0x1;
/// The file changed since it was archived.
pub const WEFT_HS_DIRTY: u32 = 0x2;
/// Its data is only in the archive.
pub const WEFT_HS_RELEASED: u32 = 0x4;
/// The archive's copy is up to date.
pub const WEFT_HS_ARCHIVED: u32 = 0x8;
/// Never released.
pub const WEFT_HS_NORELEASE: u32 = 0x10;
/// Never archived.
pub const WEFT_HS_NOARCHIVE: u32 = 0x20;
/// The archive's copy is lost.
pub const WEFT_HS_LOST: u32 = 0x40;

/// Asks `action` (a `weft_hsm_action`) for the `count` files of `paths` (archive `archive_id`; 0: the file's or
/// the default archive). Archive, restore, remove and cancel are queued for the copytools.
///
/// # Safety
/// `fs` is a mounted handle, `paths` `count` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn weft_hsm_request(
    fs: *const weft_fs,
    paths: *const *const c_char,
    count: usize,
    action: c_int,
    archive_id: u32,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let fs = unsafe { super::common::fs(fs) }?;
        if paths.is_null() && count > 0 {
            return Err(invalid("the paths"));
        }
        let mut list = Vec::with_capacity(count);
        for i in 0..count {
            // SAFETY: `paths` holds `count` strings.
            list.push(unsafe { bytes(*paths.add(i), "a path") }?);
        }
        use weft_hsm_action::*;
        let request = match action {
            a if a == WEFT_HSM_ARCHIVE as c_int => HsmRequest::Archive,
            a if a == WEFT_HSM_RELEASE as c_int => HsmRequest::Release,
            a if a == WEFT_HSM_RESTORE as c_int => HsmRequest::Restore,
            a if a == WEFT_HSM_REMOVE as c_int => HsmRequest::Remove,
            a if a == WEFT_HSM_CANCEL as c_int => HsmRequest::Cancel,
            a => {
                return Err(Error::new(
                    libc::EINVAL,
                    format!("HSM action {a}: one of WEFT_HSM_ARCHIVE, _RELEASE, _RESTORE, _REMOVE, _CANCEL"),
                ))
            }
        };
        fs.hsm_request(&list, request, archive_id).map(|()| 0)
    })
}

/// The HSM state of the file `path` names.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `state` writable.
#[no_mangle]
pub unsafe extern "C" fn weft_hsm_state_get(
    fs: *const weft_fs,
    path: *const c_char,
    state: *mut weft_hsm_state,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?) };
        // SAFETY: as the caller promised.
        let out = unsafe { state.as_mut() }.ok_or_else(|| Error::new(libc::EINVAL, "the state is NULL"))?;
        let s = fs.hsm_state(path)?;
        *out = weft_hsm_state { states: s.states, archive_id: s.archive_id };
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::hsm as proto;

    /// The header's values (literals, for cbindgen) are the protocol's.
    #[test]
    fn the_header_states_are_the_protocols() {
        let pairs = [
            (WEFT_HS_EXISTS, proto::HS_EXISTS),
            (WEFT_HS_DIRTY, proto::HS_DIRTY),
            (WEFT_HS_RELEASED, proto::HS_RELEASED),
            (WEFT_HS_ARCHIVED, proto::HS_ARCHIVED),
            (WEFT_HS_NORELEASE, proto::HS_NORELEASE),
            (WEFT_HS_NOARCHIVE, proto::HS_NOARCHIVE),
            (WEFT_HS_LOST, proto::HS_LOST),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours, theirs);
        }
    }
}
