//! Calls by path (and the attribute calls on descriptors): the stat family, mkdir, rmdir,
//! unlink, rename, link, symlink, readlink, chmod, chown, utimensat, truncate, access,
//! extended attributes, chdir. A path under a Weft mount is libweft's; the others, and
//! what libweft leaves to the kernel (EXDEV: a link that leaves the file system), are the
//! C library's.

use crate::fds;
use crate::io::weft_call;
use crate::paths::{classify, At};
use crate::real::f as real;
use crate::stat::fill_statx;
use crate::{fail, inside};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use weft::stat::Stat;
use weft_proto::msg::SetAttr;

/// The result of a libweft call on `at`, or None when it is the kernel's to do (the path
/// is not Weft's, or libweft said EXDEV: it leaves the file system).
fn on<T>(at: Option<At>, f: impl FnOnce(&At) -> weft::Result<T>) -> Option<weft::Result<T>> {
    let at = at?;
    match inside(|| f(&at))? {
        Err(e) if e.errno == libc::EXDEV => None,
        r => Some(r),
    }
}

fn done(r: weft::Result<i64>) -> c_int {
    weft_call(|| r) as c_int
}

/// The attributes of what `path` (from `dirfd`) names, if it is Weft's.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
unsafe fn stat_at(dirfd: c_int, path: *const c_char, flags: c_int) -> Option<(&'static weft::Fs, weft::Result<Stat>)> {
    // SAFETY: as the caller promised.
    if flags & libc::AT_EMPTY_PATH != 0 && (path.is_null() || unsafe { *path } == 0) {
        let o = fds::get(dirfd)?;
        return Some((o.fs, inside(|| o.fs.fstat(o.file()))?));
    }
    // SAFETY: as the caller promised.
    let at = unsafe { classify(dirfd, path) }?;
    let fs = at.fs;
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    on(Some(at), |at| fs.stat(&at.rel, follow)).map(|r| (fs, r))
}

/// Fills `st` (a struct stat, which stat64 is on 64-bit Linux) from a libweft answer.
///
/// # Safety
/// `st` is a writable struct stat.
unsafe fn fill(fs: &weft::Fs, r: weft::Result<Stat>, st: *mut libc::stat) -> c_int {
    match r {
        Ok(s) => {
            // SAFETY: as the caller promised.
            match unsafe { st.as_mut() } {
                Some(st) => {
                    fs.fill_stat(&s, st);
                    0
                }
                None => fail(libc::EFAULT),
            }
        }
        Err(e) => done(Err(e)),
    }
}

macro_rules! stat_by_path {
    ($name:ident, $real:ident, $st:ty, $follow:expr) => {
        /// # Safety
        /// As stat(2).
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, st: *mut $st) -> c_int {
            let flags = if $follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
            // SAFETY: as stat(2).
            match unsafe { stat_at(libc::AT_FDCWD, path, flags) } {
                // SAFETY: as stat(2).
                None => unsafe { real::$real(path, st) },
                // SAFETY: struct stat64 is struct stat on 64-bit Linux.
                Some((fs, r)) => unsafe { fill(fs, r, st.cast()) },
            }
        }
    };
}
stat_by_path!(stat, stat, libc::stat, true);
stat_by_path!(stat64, stat64, libc::stat64, true);
stat_by_path!(lstat, lstat, libc::stat, false);
stat_by_path!(lstat64, lstat64, libc::stat64, false);

macro_rules! stat_by_fd {
    ($name:ident, $real:ident, $st:ty) => {
        /// # Safety
        /// As fstat(2).
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, st: *mut $st) -> c_int {
            match fds::get(fd) {
                // SAFETY: as fstat(2).
                None => unsafe { real::$real(fd, st) },
                Some(o) => match inside(|| o.fs.fstat(o.file())) {
                    // SAFETY: struct stat64 is struct stat on 64-bit Linux.
                    Some(r) => unsafe { fill(o.fs, r, st.cast()) },
                    None => fail(libc::EDEADLK),
                },
            }
        }
    };
}
stat_by_fd!(fstat, fstat, libc::stat);
stat_by_fd!(fstat64, fstat64, libc::stat64);

macro_rules! stat_at {
    ($name:ident, $real:ident, $st:ty) => {
        /// # Safety
        /// As fstatat(2).
        #[no_mangle]
        pub unsafe extern "C" fn $name(dirfd: c_int, path: *const c_char, st: *mut $st, flags: c_int) -> c_int {
            // SAFETY: as fstatat(2).
            match unsafe { stat_at(dirfd, path, flags) } {
                // SAFETY: as fstatat(2).
                None => unsafe { real::$real(dirfd, path, st, flags) },
                // SAFETY: struct stat64 is struct stat on 64-bit Linux.
                Some((fs, r)) => unsafe { fill(fs, r, st.cast()) },
            }
        }
    };
}
stat_at!(fstatat, fstatat, libc::stat);
stat_at!(fstatat64, fstatat64, libc::stat64);

/// The glibc < 2.33 entry points programs built then still call.
macro_rules! xstat {
    ($name:ident, $real:ident, $st:ty, $follow:expr) => {
        /// # Safety
        /// As stat(2).
        #[no_mangle]
        pub unsafe extern "C" fn $name(ver: c_int, path: *const c_char, st: *mut $st) -> c_int {
            let flags = if $follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
            // SAFETY: as stat(2).
            match unsafe { stat_at(libc::AT_FDCWD, path, flags) } {
                // SAFETY: as stat(2).
                None => unsafe { real::$real(ver, path, st) },
                // SAFETY: struct stat64 is struct stat on 64-bit Linux.
                Some((fs, r)) => unsafe { fill(fs, r, st.cast()) },
            }
        }
    };
}
xstat!(__xstat, __xstat, libc::stat, true);
xstat!(__xstat64, __xstat64, libc::stat64, true);
xstat!(__lxstat, __lxstat, libc::stat, false);
xstat!(__lxstat64, __lxstat64, libc::stat64, false);

/// # Safety
/// As fstat(2).
#[no_mangle]
pub unsafe extern "C" fn __fxstat(ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int {
    match fds::is_weft(fd) {
        // SAFETY: as fstat(2).
        true => unsafe { fstat(fd, st) },
        // SAFETY: as fstat(2).
        false => unsafe { real::__fxstat(ver, fd, st) },
    }
}

/// # Safety
/// As fstat(2).
#[no_mangle]
pub unsafe extern "C" fn __fxstat64(ver: c_int, fd: c_int, st: *mut libc::stat64) -> c_int {
    match fds::is_weft(fd) {
        // SAFETY: as fstat(2).
        true => unsafe { fstat64(fd, st) },
        // SAFETY: as fstat(2).
        false => unsafe { real::__fxstat64(ver, fd, st) },
    }
}

/// # Safety
/// As fstatat(2).
#[no_mangle]
pub unsafe extern "C" fn __fxstatat(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> c_int {
    // SAFETY: as fstatat(2).
    match unsafe { stat_at(dirfd, path, flags) } {
        // SAFETY: as fstatat(2).
        None => unsafe { real::__fxstatat(ver, dirfd, path, st, flags) },
        // SAFETY: as fstatat(2).
        Some((fs, r)) => unsafe { fill(fs, r, st) },
    }
}

/// # Safety
/// As fstatat(2).
#[no_mangle]
pub unsafe extern "C" fn __fxstatat64(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    st: *mut libc::stat64,
    flags: c_int,
) -> c_int {
    // SAFETY: as fstatat(2).
    match unsafe { stat_at(dirfd, path, flags) } {
        // SAFETY: as fstatat(2).
        None => unsafe { real::__fxstatat64(ver, dirfd, path, st, flags) },
        // SAFETY: struct stat64 is struct stat on 64-bit Linux.
        Some((fs, r)) => unsafe { fill(fs, r, st.cast()) },
    }
}

/// # Safety
/// As statx(2).
#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut libc::statx,
) -> c_int {
    // SAFETY: as statx(2).
    match unsafe { stat_at(dirfd, path, flags) } {
        // SAFETY: as statx(2).
        None => unsafe { real::statx(dirfd, path, flags, mask, buf) },
        Some((fs, Ok(s))) => {
            // SAFETY: as statx(2).
            match unsafe { buf.as_mut() } {
                Some(out) => {
                    fill_statx(fs, &s, out);
                    0
                }
                None => fail(libc::EFAULT),
            }
        }
        Some((_, Err(e))) => done(Err(e)),
    }
}

/// Declares a call on one path: the libweft call for a Weft path, the C library's else.
macro_rules! by_path {
    ($( $name:ident($dirfd:expr; $path:ident: *const c_char $(, $arg:ident: $ty:ty)*) -> $ret:ty => |$at:ident| $body:expr; )*) => {
        $(
            /// # Safety
            /// As the C library's function of this name.
            #[no_mangle]
            pub unsafe extern "C" fn $name($path: *const c_char $(, $arg: $ty)*) -> $ret {
                // SAFETY: as the C library's.
                let at = unsafe { classify($dirfd, $path) };
                match on(at, |$at: &At| $body) {
                    // SAFETY: as the C library's.
                    None => unsafe { real::$name($path $(, $arg)*) },
                    Some(r) => weft_call(|| r) as $ret,
                }
            }
        )*
    };
}

fn ok(r: weft::Result<()>) -> weft::Result<i64> {
    r.map(|()| 0)
}

by_path! {
    mkdir(libc::AT_FDCWD; path: *const c_char, mode: libc::mode_t) -> c_int => |at| ok(at.fs.mkdir(&at.rel, mode));
    rmdir(libc::AT_FDCWD; path: *const c_char) -> c_int => |at| ok(at.fs.rmdir(&at.rel));
    unlink(libc::AT_FDCWD; path: *const c_char) -> c_int => |at| ok(at.fs.unlink(&at.rel));
    chmod(libc::AT_FDCWD; path: *const c_char, mode: libc::mode_t) -> c_int => |at| ok(at.fs.chmod(&at.rel, mode));
    chown(libc::AT_FDCWD; path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int
        => |at| ok(at.fs.chown(&at.rel, keep(uid), keep(gid), true));
    lchown(libc::AT_FDCWD; path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int
        => |at| ok(at.fs.chown(&at.rel, keep(uid), keep(gid), false));
    truncate(libc::AT_FDCWD; path: *const c_char, len: libc::off_t) -> c_int => |at| ok(at.fs.truncate(&at.rel, size(len)?));
    truncate64(libc::AT_FDCWD; path: *const c_char, len: libc::off64_t) -> c_int => |at| ok(at.fs.truncate(&at.rel, size(len)?));
    access(libc::AT_FDCWD; path: *const c_char, mode: c_int) -> c_int => |at| ok(at.fs.access(&at.rel, mode));
    readlink(libc::AT_FDCWD; path: *const c_char, buf: *mut c_char, size: usize) -> isize
        => |at| at.fs.readlink(&at.rel).map(|t| copy_link(&t, buf, size));
    getxattr(libc::AT_FDCWD; path: *const c_char, name: *const c_char, value: *mut c_void, size: usize) -> isize
        => |at| xattr_out(at.fs.getxattr(&at.rel, cstr(name), true), value.cast(), size);
    lgetxattr(libc::AT_FDCWD; path: *const c_char, name: *const c_char, value: *mut c_void, size: usize) -> isize
        => |at| xattr_out(at.fs.getxattr(&at.rel, cstr(name), false), value.cast(), size);
    setxattr(libc::AT_FDCWD; path: *const c_char, name: *const c_char, value: *const c_void, size: usize, flags: c_int) -> c_int
        => |at| ok(at.fs.setxattr(&at.rel, cstr(name), bytes(value, size), flags as u32, true));
    lsetxattr(libc::AT_FDCWD; path: *const c_char, name: *const c_char, value: *const c_void, size: usize, flags: c_int) -> c_int
        => |at| ok(at.fs.setxattr(&at.rel, cstr(name), bytes(value, size), flags as u32, false));
    listxattr(libc::AT_FDCWD; path: *const c_char, list: *mut c_char, size: usize) -> isize
        => |at| xattr_out(at.fs.listxattr(&at.rel, true).map(weft::namespace::xattr_names), list, size);
    llistxattr(libc::AT_FDCWD; path: *const c_char, list: *mut c_char, size: usize) -> isize
        => |at| xattr_out(at.fs.listxattr(&at.rel, false).map(weft::namespace::xattr_names), list, size);
    removexattr(libc::AT_FDCWD; path: *const c_char, name: *const c_char) -> c_int
        => |at| ok(at.fs.removexattr(&at.rel, cstr(name), true));
    lremovexattr(libc::AT_FDCWD; path: *const c_char, name: *const c_char) -> c_int
        => |at| ok(at.fs.removexattr(&at.rel, cstr(name), false));
}

/// -1 (as `(uid_t)-1`) leaves an id as it is.
fn keep(id: u32) -> Option<u32> {
    (id != u32::MAX).then_some(id)
}

fn size(len: i64) -> weft::Result<u64> {
    u64::try_from(len).map_err(|_| weft::Error::new(libc::EINVAL, "a negative length"))
}

fn cstr<'a>(p: *const c_char) -> &'a [u8] {
    match p.is_null() {
        true => b"",
        // SAFETY: the C library's callers pass NUL-terminated names.
        false => unsafe { CStr::from_ptr(p) }.to_bytes(),
    }
}

fn bytes<'a>(p: *const c_void, size: usize) -> &'a [u8] {
    match (p.is_null(), size) {
        (true, _) | (_, 0) => b"",
        // SAFETY: the caller's value holds `size` bytes.
        _ => unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) },
    }
}

/// readlink(2)'s copy: cut to the buffer, not NUL-terminated.
fn copy_link(target: &[u8], buf: *mut c_char, size: usize) -> i64 {
    let n = target.len().min(size);
    if n > 0 && !buf.is_null() {
        // SAFETY: the caller's buffer holds `size` >= n bytes.
        unsafe { std::ptr::copy_nonoverlapping(target.as_ptr(), buf.cast::<u8>(), n) };
    }
    n as i64
}

/// getxattr(2)'s and listxattr(2)'s copy: the length with size 0, ERANGE when it does not
/// fit (libweft's C API's).
fn xattr_out(value: weft::Result<Vec<u8>>, buf: *mut c_char, size: usize) -> weft::Result<i64> {
    // SAFETY: the caller's buffer holds `size` bytes.
    unsafe { weft::ffi::common::copy_out(&value?, buf, size) }
}

/// # Safety
/// As mkdirat(2).
#[no_mangle]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: libc::mode_t) -> c_int {
    // SAFETY: as mkdirat(2).
    match on(unsafe { classify(dirfd, path) }, |at| ok(at.fs.mkdir(&at.rel, mode))) {
        // SAFETY: as mkdirat(2).
        None => unsafe { real::mkdirat(dirfd, path, mode) },
        Some(r) => done(r),
    }
}

/// # Safety
/// As unlinkat(2).
#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let remove = |at: &At| match flags & libc::AT_REMOVEDIR != 0 {
        true => ok(at.fs.rmdir(&at.rel)),
        false => ok(at.fs.unlink(&at.rel)),
    };
    // SAFETY: as unlinkat(2).
    match on(unsafe { classify(dirfd, path) }, remove) {
        // SAFETY: as unlinkat(2).
        None => unsafe { real::unlinkat(dirfd, path, flags) },
        Some(r) => done(r),
    }
}

/// Two paths: both Weft's on one mount (libweft), neither (the C library), or one each
/// (EXDEV, as between two mounts).
///
/// # Safety
/// The paths are NULL or NUL-terminated.
unsafe fn two_paths(
    fd1: c_int,
    p1: *const c_char,
    fd2: c_int,
    p2: *const c_char,
    f: impl FnOnce(&At, &At) -> weft::Result<i64>,
) -> Option<c_int> {
    // SAFETY: as the caller promised.
    let (a, b) = unsafe { (classify(fd1, p1), classify(fd2, p2)) };
    match (a, b) {
        (None, None) => None,
        (Some(a), Some(b)) if std::ptr::eq(a.mount, b.mount) => match inside(|| f(&a, &b))? {
            Err(e) if e.errno == libc::EXDEV => None,
            r => Some(done(r)),
        },
        _ => Some(fail(libc::EXDEV)),
    }
}

/// # Safety
/// As rename(2).
#[no_mangle]
pub unsafe extern "C" fn rename(from: *const c_char, to: *const c_char) -> c_int {
    let cwd = libc::AT_FDCWD;
    // SAFETY: as rename(2).
    unsafe {
        two_paths(cwd, from, cwd, to, |a, b| ok(a.fs.rename(&a.rel, &b.rel, 0)))
            .unwrap_or_else(|| real::rename(from, to))
    }
}

/// # Safety
/// As renameat(2).
#[no_mangle]
pub unsafe extern "C" fn renameat(fromfd: c_int, from: *const c_char, tofd: c_int, to: *const c_char) -> c_int {
    // SAFETY: as renameat(2).
    unsafe {
        two_paths(fromfd, from, tofd, to, |a, b| ok(a.fs.rename(&a.rel, &b.rel, 0)))
            .unwrap_or_else(|| real::renameat(fromfd, from, tofd, to))
    }
}

/// # Safety
/// As renameat2(2).
#[no_mangle]
pub unsafe extern "C" fn renameat2(
    fromfd: c_int,
    from: *const c_char,
    tofd: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    // SAFETY: as renameat2(2).
    unsafe {
        two_paths(fromfd, from, tofd, to, |a, b| ok(a.fs.rename(&a.rel, &b.rel, flags)))
            .unwrap_or_else(|| real::renameat2(fromfd, from, tofd, to, flags))
    }
}

/// # Safety
/// As link(2).
#[no_mangle]
pub unsafe extern "C" fn link(from: *const c_char, to: *const c_char) -> c_int {
    let cwd = libc::AT_FDCWD;
    // SAFETY: as link(2).
    unsafe {
        two_paths(cwd, from, cwd, to, |a, b| ok(a.fs.link(&a.rel, &b.rel))).unwrap_or_else(|| real::link(from, to))
    }
}

/// # Safety
/// As linkat(2).
#[no_mangle]
pub unsafe extern "C" fn linkat(
    fromfd: c_int,
    from: *const c_char,
    tofd: c_int,
    to: *const c_char,
    flags: c_int,
) -> c_int {
    if flags & (libc::AT_EMPTY_PATH | libc::AT_SYMLINK_FOLLOW) != 0 {
        // SAFETY: as linkat(2).
        return unsafe { real::linkat(fromfd, from, tofd, to, flags) };
    }
    // SAFETY: as linkat(2).
    unsafe {
        two_paths(fromfd, from, tofd, to, |a, b| ok(a.fs.link(&a.rel, &b.rel)))
            .unwrap_or_else(|| real::linkat(fromfd, from, tofd, to, flags))
    }
}

/// # Safety
/// As symlink(2).
#[no_mangle]
pub unsafe extern "C" fn symlink(target: *const c_char, path: *const c_char) -> c_int {
    let t = cstr(target).to_vec();
    // SAFETY: as symlink(2).
    match on(unsafe { classify(libc::AT_FDCWD, path) }, |at| ok(at.fs.symlink(&t, &at.rel))) {
        // SAFETY: as symlink(2).
        None => unsafe { real::symlink(target, path) },
        Some(r) => done(r),
    }
}

/// # Safety
/// As symlinkat(2).
#[no_mangle]
pub unsafe extern "C" fn symlinkat(target: *const c_char, dirfd: c_int, path: *const c_char) -> c_int {
    let t = cstr(target).to_vec();
    // SAFETY: as symlinkat(2).
    match on(unsafe { classify(dirfd, path) }, |at| ok(at.fs.symlink(&t, &at.rel))) {
        // SAFETY: as symlinkat(2).
        None => unsafe { real::symlinkat(target, dirfd, path) },
        Some(r) => done(r),
    }
}

/// # Safety
/// As readlinkat(2).
#[no_mangle]
pub unsafe extern "C" fn readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, size: usize) -> isize {
    // SAFETY: as readlinkat(2).
    match on(unsafe { classify(dirfd, path) }, |at| at.fs.readlink(&at.rel).map(|t| copy_link(&t, buf, size))) {
        // SAFETY: as readlinkat(2).
        None => unsafe { real::readlinkat(dirfd, path, buf, size) },
        Some(r) => weft_call(|| r) as isize,
    }
}

/// # Safety
/// As fchmodat(2).
#[no_mangle]
pub unsafe extern "C" fn fchmodat(dirfd: c_int, path: *const c_char, mode: libc::mode_t, flags: c_int) -> c_int {
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    let set = SetAttr { mode: Some(mode & 0o7777), ..SetAttr::default() };
    // SAFETY: as fchmodat(2).
    match on(unsafe { classify(dirfd, path) }, |at| at.fs.setattr(&at.rel, follow, set).map(|_| 0)) {
        // SAFETY: as fchmodat(2).
        None => unsafe { real::fchmodat(dirfd, path, mode, flags) },
        Some(r) => done(r),
    }
}

/// # Safety
/// As fchownat(2).
#[no_mangle]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: libc::uid_t,
    gid: libc::gid_t,
    flags: c_int,
) -> c_int {
    if flags & libc::AT_EMPTY_PATH == 0 || !cstr(path).is_empty() {
        let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        // SAFETY: as fchownat(2).
        return match on(unsafe { classify(dirfd, path) }, |at| ok(at.fs.chown(&at.rel, keep(uid), keep(gid), follow))) {
            // SAFETY: as fchownat(2).
            None => unsafe { real::fchownat(dirfd, path, uid, gid, flags) },
            Some(r) => done(r),
        };
    }
    // SAFETY: as fchown(2).
    unsafe { fchown(dirfd, uid, gid) }
}

/// # Safety
/// As utimensat(2).
#[no_mangle]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    if path.is_null() {
        // SAFETY: utimensat(fd, NULL, ...) is futimens(fd, ...).
        return unsafe { futimens(dirfd, times) };
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: as utimensat(2).
    let set = |at: &At| {
        unsafe { weft::namespace::utimens_attr(times) }.and_then(|set| at.fs.setattr(&at.rel, follow, set).map(|_| 0))
    };
    // SAFETY: as utimensat(2).
    match on(unsafe { classify(dirfd, path) }, set) {
        // SAFETY: as utimensat(2).
        None => unsafe { real::utimensat(dirfd, path, times, flags) },
        Some(r) => done(r),
    }
}

/// # Safety
/// As faccessat(2).
#[no_mangle]
pub unsafe extern "C" fn faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int {
    // SAFETY: as faccessat(2).
    match on(unsafe { classify(dirfd, path) }, |at| ok(at.fs.access(&at.rel, mode))) {
        // SAFETY: as faccessat(2).
        None => unsafe { real::faccessat(dirfd, path, mode, flags) },
        Some(r) => done(r),
    }
}

/// A setattr through a Weft descriptor's inode.
fn fd_setattr(fd: c_int, set: impl FnOnce() -> weft::Result<SetAttr>) -> Option<c_int> {
    let o = fds::get(fd)?;
    Some(weft_call(|| o.fs.setattr_fid(o.file().fid, set()?).map(|_| 0)) as c_int)
}

/// # Safety
/// As fchmod(2).
#[no_mangle]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: libc::mode_t) -> c_int {
    fd_setattr(fd, || Ok(SetAttr { mode: Some(mode & 0o7777), ..SetAttr::default() }))
        // SAFETY: as fchmod(2).
        .unwrap_or_else(|| unsafe { real::fchmod(fd, mode) })
}

/// # Safety
/// As fchown(2).
#[no_mangle]
pub unsafe extern "C" fn fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    fd_setattr(fd, || Ok(SetAttr { uid: keep(uid), gid: keep(gid), ..SetAttr::default() }))
        // SAFETY: as fchown(2).
        .unwrap_or_else(|| unsafe { real::fchown(fd, uid, gid) })
}

/// # Safety
/// As futimens(2).
#[no_mangle]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const libc::timespec) -> c_int {
    // SAFETY: as futimens(2).
    fd_setattr(fd, || unsafe { weft::namespace::utimens_attr(times) })
        .unwrap_or_else(|| unsafe { real::futimens(fd, times) })
}

/// # Safety
/// As chdir(2).
#[no_mangle]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    // SAFETY: as chdir(2).
    let r = unsafe { real::chdir(path) };
    crate::paths::cwd_changed();
    r
}

/// # Safety
/// As fchdir(2).
#[no_mangle]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    let r = match fds::path_of_dir(fd) {
        Some(path) => match std::ffi::CString::new(path) {
            // SAFETY: a NUL-terminated path we own.
            Ok(p) => unsafe { real::chdir(p.as_ptr()) },
            Err(_) => fail(libc::ENOENT),
        },
        // SAFETY: as fchdir(2).
        None => unsafe { real::fchdir(fd) },
    };
    crate::paths::cwd_changed();
    r
}
