//! Extended attributes by path (user.*, trusted.*, security.*, and the lustre.* / weft.*
//! virtual ones the servers answer).

use super::common::{bytes, copy_out, guard, invalid, weft_fs};
use std::ffi::{c_char, c_int, c_void};

/// The value of attribute `name` into `value` (`size` bytes); its length. With `size` 0,
/// only the length. -ENODATA when there is none, -ERANGE when it does not fit.
///
/// # Safety
/// `fs` is a mounted handle, `path` and `name` NUL-terminated strings, `value` `size`
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_getxattr(
    fs: *const weft_fs,
    path: *const c_char,
    name: *const c_char,
    value: *mut c_void,
    size: usize,
) -> libc::ssize_t {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path, name) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?, bytes(name, "the name")?) };
        let v = fs.getxattr(path, name, true)?;
        // SAFETY: as the caller promised.
        unsafe { copy_out(&v, value.cast(), size) }
    })
}

/// Sets attribute `name` to the `size` bytes of `value`; `flags` 0, XATTR_CREATE (1) or
/// XATTR_REPLACE (2).
///
/// # Safety
/// `fs` is a mounted handle, `path` and `name` NUL-terminated strings, `value` `size`
/// readable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_setxattr(
    fs: *const weft_fs,
    path: *const c_char,
    name: *const c_char,
    value: *const c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path, name) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?, bytes(name, "the name")?) };
        let value: &[u8] = match (value.is_null(), size) {
            (_, 0) => &[],
            (true, _) => return Err(invalid("the value")),
            // SAFETY: as the caller promised.
            (false, n) => unsafe { std::slice::from_raw_parts(value.cast::<u8>(), n) },
        };
        fs.setxattr(path, name, value, flags as u32, true).map(|()| 0)
    })
}

/// The names of the attributes, each NUL-terminated, one after another, into `list`
/// (`size` bytes); their length. With `size` 0, only the length.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `list` `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_listxattr(
    fs: *const weft_fs,
    path: *const c_char,
    list: *mut c_char,
    size: usize,
) -> libc::ssize_t {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?) };
        let all = crate::namespace::xattr_names(fs.listxattr(path, true)?);
        // SAFETY: as the caller promised.
        unsafe { copy_out(&all, list, size) }
    })
}

/// Removes attribute `name`; -ENODATA when there is none.
///
/// # Safety
/// `fs` is a mounted handle, `path` and `name` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn weft_removexattr(fs: *const weft_fs, path: *const c_char, name: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path, name) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?, bytes(name, "the name")?) };
        fs.removexattr(path, name, true).map(|()| 0)
    })
}
