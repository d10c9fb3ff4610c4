//! The namespace by path: stat, mkdir, rmdir, unlink, rename, link, symlink, readlink,
//! chmod, chown, utimens, truncate, access, statfs. Paths are from the file system's root.

use super::common::{bytes, copy_out, fs, guard, invalid, weft_fs};
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int};

/// Runs `call` with the file system and one path.
///
/// # Safety
/// `fsh` is a mounted handle, `path` a NUL-terminated string.
unsafe fn with_path(
    fsh: *const weft_fs,
    path: *const c_char,
    call: impl FnOnce(&crate::Fs, &[u8]) -> Result<i64>,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path) = unsafe { (fs(fsh)?, bytes(path, "the path")?) };
        call(fs, path)
    })
}

/// Runs `call` with the file system and two paths.
///
/// # Safety
/// As `with_path`, for both paths.
unsafe fn with_paths(
    fsh: *const weft_fs,
    a: *const c_char,
    b: *const c_char,
    call: impl FnOnce(&crate::Fs, &[u8], &[u8]) -> Result<i64>,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, a, b) = unsafe { (fs(fsh)?, bytes(a, "the first path")?, bytes(b, "the second path")?) };
        call(fs, a, b)
    })
}

/// The attributes of what `path` names, its last link followed (stat(2)).
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `st` a writable struct stat.
#[no_mangle]
pub unsafe extern "C" fn weft_stat(fs: *const weft_fs, path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { stat(fs, path, st, true) }
}

/// The attributes of what `path` names, a last link itself (lstat(2)).
///
/// # Safety
/// As `weft_stat`.
#[no_mangle]
pub unsafe extern "C" fn weft_lstat(fs: *const weft_fs, path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { stat(fs, path, st, false) }
}

/// # Safety
/// As `weft_stat`.
unsafe fn stat(fsh: *const weft_fs, path: *const c_char, st: *mut libc::stat, follow: bool) -> c_int {
    // SAFETY: as the caller promised.
    unsafe {
        with_path(fsh, path, |fs, path| {
            let st = st.as_mut().ok_or_else(|| invalid("the stat buffer"))?;
            fs.fill_stat(&fs.stat(path, follow)?, st);
            Ok(0)
        })
    }
}

/// Makes directory `path` with `mode` (the umask applied).
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_mkdir(fs: *const weft_fs, path: *const c_char, mode: libc::mode_t) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_path(fs, path, |fs, path| fs.mkdir(path, mode).map(|()| 0)) }
}

/// Removes the empty directory `path`.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_rmdir(fs: *const weft_fs, path: *const c_char) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_path(fs, path, |fs, path| fs.rmdir(path).map(|()| 0)) }
}

/// Removes the name `path` (not a directory).
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_unlink(fs: *const weft_fs, path: *const c_char) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_path(fs, path, |fs, path| fs.unlink(path).map(|()| 0)) }
}

/// Renames `from` to `to`, replacing what `to` named (rename(2)); `flags` as renameat2(2):
/// 0, RENAME_NOREPLACE (1) or RENAME_EXCHANGE (2).
///
/// # Safety
/// `fs` is a mounted handle, `from` and `to` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn weft_rename(fs: *const weft_fs, from: *const c_char, to: *const c_char, flags: u32) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_paths(fs, from, to, |fs, from, to| fs.rename(from, to, flags).map(|()| 0)) }
}

/// Makes `to` another name of the file `from` names (link(2)).
///
/// # Safety
/// `fs` is a mounted handle, `from` and `to` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn weft_link(fs: *const weft_fs, from: *const c_char, to: *const c_char) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_paths(fs, from, to, |fs, from, to| fs.link(from, to).map(|()| 0)) }
}

/// Makes `path` a symbolic link to `target` (symlink(2); an absolute target is resolved
/// from the file system's root by this library).
///
/// # Safety
/// `fs` is a mounted handle, `target` and `path` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn weft_symlink(fs: *const weft_fs, target: *const c_char, path: *const c_char) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_paths(fs, target, path, |fs, target, path| fs.symlink(target, path).map(|()| 0)) }
}

/// The target of the symbolic link `path` into `buf` (not NUL-terminated, as readlink(2));
/// its length. A target longer than `size` is cut to it.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `buf` `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_readlink(
    fs: *const weft_fs,
    path: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> libc::ssize_t {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?) };
        let target = fs.readlink(path)?;
        let n = target.len().min(size);
        // SAFETY: `buf` holds `size` >= n bytes.
        unsafe { copy_out(&target[..n], buf, size.max(1)) }
    })
}

/// Sets the permission bits (chmod(2)).
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_chmod(fs: *const weft_fs, path: *const c_char, mode: libc::mode_t) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_path(fs, path, |fs, path| fs.chmod(path, mode).map(|()| 0)) }
}

/// Sets the owner and group (chown(2)); -1 (as `(uid_t)-1`) leaves one as it is.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_chown(
    fs: *const weft_fs,
    path: *const c_char,
    uid: libc::uid_t,
    gid: libc::gid_t,
) -> c_int {
    let keep = |id: u32| (id != u32::MAX).then_some(id);
    // SAFETY: as the caller promised.
    unsafe { with_path(fs, path, |fs, path| fs.chown(path, keep(uid), keep(gid), true).map(|()| 0)) }
}

/// Sets the access and modification times (utimensat(2)'s `times`: NULL for now, or two
/// timespecs with UTIME_NOW and UTIME_OMIT allowed).
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `times` NULL or two timespecs.
#[no_mangle]
pub unsafe extern "C" fn weft_utimens(fs: *const weft_fs, path: *const c_char, times: *const libc::timespec) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_path(fs, path, |fs, path| fs.setattr(path, true, crate::namespace::utimens_attr(times)?).map(|_| 0)) }
}

/// Cuts or extends (with a hole) the file `path` names to `length` bytes.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_truncate(fs: *const weft_fs, path: *const c_char, length: libc::off_t) -> c_int {
    // SAFETY: as the caller promised.
    unsafe {
        with_path(fs, path, |fs, path| {
            let length = u64::try_from(length).map_err(|_| Error::new(libc::EINVAL, "a negative length"))?;
            fs.truncate(path, length).map(|()| 0)
        })
    }
}

/// Whether this process may read (R_OK), write (W_OK), execute (X_OK) what `path` names,
/// or whether it is there (F_OK), by its mode bits (access(2)).
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_access(fs: *const weft_fs, path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: as the caller promised.
    unsafe { with_path(fs, path, |fs, path| fs.access(path, mode).map(|()| 0)) }
}

/// Space over the OSTs and inodes over the MDTs (statvfs(3)).
///
/// # Safety
/// `fs` is a mounted handle, `buf` a writable struct statvfs.
#[no_mangle]
pub unsafe extern "C" fn weft_statfs(fs: *const weft_fs, buf: *mut libc::statvfs) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let fs = unsafe { super::common::fs(fs) }?;
        // SAFETY: as the caller promised.
        let out = unsafe { buf.as_mut() }.ok_or_else(|| invalid("the statvfs buffer"))?;
        let s = fs.statfs()?;
        // SAFETY: statvfs is plain old data; all zeros is a valid value.
        *out = unsafe { std::mem::zeroed() };
        out.f_bsize = u64::from(s.bsize);
        out.f_frsize = u64::from(s.bsize);
        out.f_blocks = s.blocks;
        out.f_bfree = s.bfree;
        out.f_bavail = s.bavail;
        out.f_files = s.files;
        out.f_ffree = s.ffree;
        out.f_favail = s.ffree;
        out.f_namemax = 255;
        Ok(0)
    })
}
