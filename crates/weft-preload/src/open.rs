//! open(2) and its kin: a path under a Weft mount is opened by libweft and given a
//! descriptor number; anything else (and O_PATH, O_TMPFILE, special files, paths that
//! leave the file system) goes to the C library.

use crate::fds::{self, Ofd};
use crate::paths::{classify, At};
use crate::real::f as real;
use crate::{fail, inside, say};
use std::ffi::{c_char, c_int, c_uint};
use std::sync::Arc;

/// What the process's umask is (umask(2) is watched: creates apply it).
static UMASK: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);

fn umask_now() -> u32 {
    let mask = UMASK.load(std::sync::atomic::Ordering::Relaxed);
    if mask != u32::MAX {
        return mask;
    }
    let mask = weft::fs::process_umask();
    UMASK.store(mask, std::sync::atomic::Ordering::Relaxed);
    mask
}

/// umask(2), watched.
///
/// # Safety
/// As the C library's.
#[no_mangle]
pub unsafe extern "C" fn umask(mask: libc::mode_t) -> libc::mode_t {
    // SAFETY: as the C library's.
    let old = unsafe { real::umask(mask) };
    UMASK.store(mask & 0o777, std::sync::atomic::Ordering::Relaxed);
    old
}

/// Opens `at` with `flags` and `mode`: the descriptor; None to let the kernel do it.
fn open_weft(at: &At, flags: c_int, mode: c_uint) -> Option<c_int> {
    if flags & (libc::O_PATH | libc::O_TMPFILE) != 0 {
        return None;
    }
    let fs = at.fs;
    fs.swap_umask(umask_now());
    let opened = inside(|| fs.open(&at.rel, flags, mode))?;
    match opened {
        Ok(file) => {
            let ofd = Arc::new(Ofd::new(fs, file, at.abs.clone()));
            match fds::install(ofd, flags & libc::O_CLOEXEC != 0) {
                // Standard input, output or error (one was closed): the C library's stdio
                // writes them with calls of its own that no interposition sees, so they
                // are the kernel's (through the mount).
                Some(fd) if fd <= libc::STDERR_FILENO => {
                    say!("open {} = {fd}, a standard stream: through the mount", String::from_utf8_lossy(&at.abs));
                    Some(if fds::to_kernel(fd) { fd } else { -1 })
                }
                Some(fd) => {
                    say!("open {} = {fd}", String::from_utf8_lossy(&at.abs));
                    Some(fd)
                }
                // No descriptor number for it here: closed again (the Ofd's drop), and
                // the kernel tries (it gives EMFILE as it would have).
                None => None,
            }
        }
        Err(e) if e.errno == libc::ENXIO || e.errno == libc::EXDEV => {
            say!("open {}: {e}; through the mount", String::from_utf8_lossy(&at.abs));
            None
        }
        Err(e) => {
            say!("open {}: {e}", String::from_utf8_lossy(&at.abs));
            Some(fail(e.errno))
        }
    }
}

/// # Safety
/// `path` NULL or NUL-terminated.
unsafe fn open_any(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> Option<c_int> {
    // SAFETY: as the caller promised.
    let at = unsafe { classify(dirfd, path) }?;
    open_weft(&at, flags, mode)
}

/// # Safety
/// As open(2); `mode` is read only with O_CREAT or O_TMPFILE, as the C library reads it.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: as open(2).
    unsafe { open_any(libc::AT_FDCWD, path, flags, mode).unwrap_or_else(|| real::open(path, flags, mode)) }
}

/// # Safety
/// As open(2).
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: as open(2).
    unsafe { open_any(libc::AT_FDCWD, path, flags, mode).unwrap_or_else(|| real::open64(path, flags, mode)) }
}

/// # Safety
/// As openat(2).
#[no_mangle]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: as openat(2).
    unsafe { open_any(dirfd, path, flags, mode).unwrap_or_else(|| real::openat(dirfd, path, flags, mode)) }
}

/// # Safety
/// As openat(2).
#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: as openat(2).
    unsafe { open_any(dirfd, path, flags, mode).unwrap_or_else(|| real::openat64(dirfd, path, flags, mode)) }
}

/// # Safety
/// As creat(2).
#[no_mangle]
pub unsafe extern "C" fn creat(path: *const c_char, mode: libc::mode_t) -> c_int {
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
    // SAFETY: as creat(2).
    unsafe { open_any(libc::AT_FDCWD, path, flags, mode).unwrap_or_else(|| real::creat(path, mode)) }
}

/// # Safety
/// As creat(2).
#[no_mangle]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: libc::mode_t) -> c_int {
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
    // SAFETY: as creat(2).
    unsafe { open_any(libc::AT_FDCWD, path, flags, mode).unwrap_or_else(|| real::creat64(path, mode)) }
}

/// The fortified open of programs built with _FORTIFY_SOURCE (no mode: no O_CREAT).
///
/// # Safety
/// As open(2).
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as open(2).
    unsafe { open(path, flags, 0) }
}

/// # Safety
/// As open(2).
#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as open(2).
    unsafe { open64(path, flags, 0) }
}

/// # Safety
/// As openat(2).
#[no_mangle]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as openat(2).
    unsafe { openat(dirfd, path, flags, 0) }
}

/// # Safety
/// As openat(2).
#[no_mangle]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as openat(2).
    unsafe { openat64(dirfd, path, flags, 0) }
}
