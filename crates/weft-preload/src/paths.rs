//! Which calls are Weft's: a path (from the working directory, or from a directory
//! descriptor of a Weft directory) that lies under a Weft mount, as the mount's file
//! system's path. Lexical: a `..` in what is left is the kernel's to resolve (it may leave
//! the mount), as is anything else this cannot tell.

use crate::lock::SpinLock;
use crate::mounts::{self, Mount};
use std::ffi::{c_char, c_int, CStr};
use weft::Fs;

/// A path under a Weft mount.
pub struct At {
    pub mount: &'static Mount,
    pub fs: &'static Fs,
    /// The path from the file system's root.
    pub rel: Vec<u8>,
    /// The path as the program would name it from `/` (for reopening through the kernel).
    pub abs: Vec<u8>,
}

/// The working directory, as getcwd last said (None: not looked at since it changed).
static CWD: SpinLock<Option<Vec<u8>>> = SpinLock::new(None);

/// The working directory changed (chdir, fchdir).
pub fn cwd_changed() {
    *CWD.lock() = None;
}

fn cwd() -> Option<Vec<u8>> {
    if let Some(cwd) = CWD.lock().clone() {
        return Some(cwd);
    }
    let cwd = std::env::current_dir().ok()?;
    let cwd = std::os::unix::ffi::OsStrExt::as_bytes(cwd.as_os_str()).to_vec();
    *CWD.lock() = Some(cwd.clone());
    Some(cwd)
}

/// The mount `abs` lies under and the path below it, if any and if the path below holds no
/// `..`.
pub fn under_mount(abs: &[u8]) -> Option<(&'static Mount, Vec<u8>)> {
    let mount = mounts::all()
        .iter()
        .filter(|m| {
            abs.starts_with(&m.point) && (abs.len() == m.point.len() || abs[m.point.len()] == b'/' || m.point == b"/")
        })
        .max_by_key(|m| m.point.len())?;
    let rest = &abs[mount.point.len()..];
    if rest.split(|b| *b == b'/').any(|n| n == b"..") {
        return None;
    }
    let rel = if rest.is_empty() { b"/".to_vec() } else { rest.to_vec() };
    Some((mount, rel))
}

/// Where `path` (relative to `dirfd` as the `*at` calls take it) is, if it is Weft's.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub unsafe fn classify(dirfd: c_int, path: *const c_char) -> Option<At> {
    if path.is_null() || crate::is_busy() || mounts::all().is_empty() {
        return None;
    }
    // SAFETY: as the caller promised.
    let path = unsafe { CStr::from_ptr(path) }.to_bytes();
    classify_bytes(dirfd, path)
}

pub fn classify_bytes(dirfd: c_int, path: &[u8]) -> Option<At> {
    if path.is_empty() {
        return None;
    }
    let abs = if path[0] == b'/' {
        path.to_vec()
    } else {
        let mut base = match dirfd {
            libc::AT_FDCWD => cwd()?,
            fd => crate::fds::path_of_dir(fd)?,
        };
        if !base.ends_with(b"/") {
            base.push(b'/');
        }
        base.extend_from_slice(path);
        base
    };
    let (mount, rel) = under_mount(&abs)?;
    let fs = mount.fs()?;
    Some(At { mount, fs, rel, abs })
}
