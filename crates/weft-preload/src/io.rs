//! Calls on descriptors: close, read and write (and their vectored and positioned forms),
//! lseek, dup, fcntl, fsync, ftruncate; and the calls this library leaves to the FUSE
//! mount (mmap, locks, ioctl, sendfile, ...), which first make a Weft descriptor a kernel
//! descriptor of the same file (`fds::to_kernel`).

use crate::fds::{self, Ofd};
use crate::real::f as real;
use crate::{c_result, fail, inside};
use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use std::sync::Arc;

/// Runs a libweft call on the thread, marked inside the library.
pub(crate) fn weft_call(f: impl FnOnce() -> weft::Result<i64>) -> i64 {
    c_result(inside(f).unwrap_or_else(|| Err(weft::Error::new(libc::EDEADLK, "a call inside libweft_preload"))))
}

/// Makes `fd` a kernel descriptor if it is Weft's: false (errno set) when it could not be.
pub(crate) fn kernel(fd: c_int) -> bool {
    !fds::is_weft(fd) || fds::to_kernel(fd)
}

/// # Safety
/// `buf` holds `count` writable bytes (or `count` is 0).
unsafe fn out<'a>(buf: *mut c_void, count: usize) -> &'a mut [u8] {
    match count {
        0 => &mut [],
        // SAFETY: as the caller promised.
        n => unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) },
    }
}

/// # Safety
/// `buf` holds `count` readable bytes (or `count` is 0).
unsafe fn inp<'a>(buf: *const c_void, count: usize) -> &'a [u8] {
    match count {
        0 => &[],
        // SAFETY: as the caller promised.
        n => unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) },
    }
}

/// # Safety
/// As close(2).
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if !crate::private::may_close(fd) {
        return 0;
    }
    if fds::is_weft(fd) && fds::in_vfork_child() {
        // The child's own number goes; the open is the parent's.
        // SAFETY: as close(2).
        return unsafe { real::close(fd) };
    }
    let Some(ofd) = fds::remove(fd) else {
        // SAFETY: as close(2).
        return unsafe { real::close(fd) };
    };
    // SAFETY: the number held for the Weft descriptor.
    unsafe { real::close(fd) };
    weft_call(|| Ofd::close_last(ofd).map(|()| 0)) as c_int
}

fn offset(off: i64) -> weft::Result<u64> {
    u64::try_from(off).map_err(|_| weft::Error::new(libc::EINVAL, format!("offset {off} is negative")))
}

/// # Safety
/// As read(2).
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize {
    match fds::get(fd) {
        // SAFETY: as read(2).
        None => unsafe { real::read(fd, buf, count) },
        // SAFETY: as read(2).
        Some(o) => weft_call(|| o.fs.read(o.file(), unsafe { out(buf, count) }).map(|n| n as i64)) as isize,
    }
}

/// # Safety
/// As write(2).
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    match fds::get(fd) {
        // SAFETY: as write(2).
        None => unsafe { real::write(fd, buf, count) },
        // SAFETY: as write(2).
        Some(o) => weft_call(|| o.fs.write(o.file(), unsafe { inp(buf, count) }).map(|n| n as i64)) as isize,
    }
}

/// # Safety
/// As pread(2).
#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, count: usize, off: libc::off_t) -> isize {
    match fds::get(fd) {
        // SAFETY: as pread(2).
        None => unsafe { real::pread(fd, buf, count, off) },
        // SAFETY: as pread(2).
        Some(o) => {
            weft_call(|| o.fs.pread(o.file(), unsafe { out(buf, count) }, offset(off)?).map(|n| n as i64)) as isize
        }
    }
}

/// # Safety
/// As pread(2).
#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, count: usize, off: libc::off64_t) -> isize {
    match fds::get(fd) {
        // SAFETY: as pread(2).
        None => unsafe { real::pread64(fd, buf, count, off) },
        // SAFETY: as pread(2).
        Some(o) => {
            weft_call(|| o.fs.pread(o.file(), unsafe { out(buf, count) }, offset(off)?).map(|n| n as i64)) as isize
        }
    }
}

/// # Safety
/// As pwrite(2).
#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: usize, off: libc::off_t) -> isize {
    match fds::get(fd) {
        // SAFETY: as pwrite(2).
        None => unsafe { real::pwrite(fd, buf, count, off) },
        // SAFETY: as pwrite(2).
        Some(o) => {
            weft_call(|| o.fs.pwrite(o.file(), unsafe { inp(buf, count) }, offset(off)?).map(|n| n as i64)) as isize
        }
    }
}

/// # Safety
/// As pwrite(2).
#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: usize, off: libc::off64_t) -> isize {
    match fds::get(fd) {
        // SAFETY: as pwrite(2).
        None => unsafe { real::pwrite64(fd, buf, count, off) },
        // SAFETY: as pwrite(2).
        Some(o) => {
            weft_call(|| o.fs.pwrite(o.file(), unsafe { inp(buf, count) }, offset(off)?).map(|n| n as i64)) as isize
        }
    }
}

/// The buffers of an iovec array.
///
/// # Safety
/// `iov` holds `n` iovecs whose buffers are valid.
unsafe fn iovecs<'a>(iov: *const libc::iovec, n: c_int) -> &'a [libc::iovec] {
    match usize::try_from(n) {
        Ok(n) if n > 0 && !iov.is_null() => unsafe { std::slice::from_raw_parts(iov, n) },
        _ => &[],
    }
}

/// A vectored read as one read into a buffer, scattered.
///
/// # Safety
/// As readv(2).
unsafe fn read_vectored(o: &Ofd, iov: *const libc::iovec, n: c_int, at: Option<u64>) -> isize {
    // SAFETY: as readv(2).
    let iov = unsafe { iovecs(iov, n) };
    let total: usize = iov.iter().map(|v| v.iov_len).sum();
    let mut buf = vec![0u8; total];
    let got = weft_call(|| match at {
        Some(off) => o.fs.pread(o.file(), &mut buf, off).map(|n| n as i64),
        None => o.fs.read(o.file(), &mut buf).map(|n| n as i64),
    });
    if got > 0 {
        let mut done = 0;
        for v in iov {
            let n = v.iov_len.min(got as usize - done);
            // SAFETY: each iovec's buffer holds iov_len writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(buf[done..].as_ptr(), v.iov_base.cast::<u8>(), n) };
            done += n;
        }
    }
    got as isize
}

/// A vectored write as one write of the buffers gathered (one request, as atomic).
///
/// # Safety
/// As writev(2).
unsafe fn write_vectored(o: &Ofd, iov: *const libc::iovec, n: c_int, at: Option<u64>) -> isize {
    // SAFETY: as writev(2).
    let iov = unsafe { iovecs(iov, n) };
    let mut buf = Vec::with_capacity(iov.iter().map(|v| v.iov_len).sum());
    for v in iov {
        // SAFETY: each iovec's buffer holds iov_len readable bytes.
        buf.extend_from_slice(unsafe { inp(v.iov_base, v.iov_len) });
    }
    weft_call(|| match at {
        Some(off) => o.fs.pwrite(o.file(), &buf, off).map(|n| n as i64),
        None => o.fs.write(o.file(), &buf).map(|n| n as i64),
    }) as isize
}

/// # Safety
/// As readv(2).
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    match fds::get(fd) {
        // SAFETY: as readv(2).
        None => unsafe { real::readv(fd, iov, n) },
        // SAFETY: as readv(2).
        Some(o) => unsafe { read_vectored(&o, iov, n, None) },
    }
}

/// # Safety
/// As writev(2).
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    match fds::get(fd) {
        // SAFETY: as writev(2).
        None => unsafe { real::writev(fd, iov, n) },
        // SAFETY: as writev(2).
        Some(o) => unsafe { write_vectored(&o, iov, n, None) },
    }
}

/// # Safety
/// As preadv(2).
#[no_mangle]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t) -> isize {
    match fds::get(fd) {
        // SAFETY: as preadv(2).
        None => unsafe { real::preadv(fd, iov, n, off) },
        Some(_) if off < 0 => fail(libc::EINVAL),
        // SAFETY: as preadv(2).
        Some(o) => unsafe { read_vectored(&o, iov, n, Some(off as u64)) },
    }
}

/// # Safety
/// As preadv(2).
#[no_mangle]
pub unsafe extern "C" fn preadv64(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off64_t) -> isize {
    // SAFETY: as preadv(2); off_t is 64 bits here.
    unsafe { preadv(fd, iov, n, off) }
}

/// # Safety
/// As pwritev(2).
#[no_mangle]
pub unsafe extern "C" fn pwritev(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t) -> isize {
    match fds::get(fd) {
        // SAFETY: as pwritev(2).
        None => unsafe { real::pwritev(fd, iov, n, off) },
        Some(_) if off < 0 => fail(libc::EINVAL),
        // SAFETY: as pwritev(2).
        Some(o) => unsafe { write_vectored(&o, iov, n, Some(off as u64)) },
    }
}

/// # Safety
/// As pwritev(2).
#[no_mangle]
pub unsafe extern "C" fn pwritev64(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off64_t) -> isize {
    // SAFETY: as pwritev(2); off_t is 64 bits here.
    unsafe { pwritev(fd, iov, n, off) }
}

/// # Safety
/// As lseek(2).
#[no_mangle]
pub unsafe extern "C" fn lseek(fd: c_int, off: libc::off_t, whence: c_int) -> libc::off_t {
    match fds::get(fd) {
        // SAFETY: as lseek(2).
        None => unsafe { real::lseek(fd, off, whence) },
        Some(o) => weft_call(|| o.fs.seek(o.file(), off, whence).map(|p| p as i64)),
    }
}

/// # Safety
/// As lseek(2).
#[no_mangle]
pub unsafe extern "C" fn lseek64(fd: c_int, off: libc::off64_t, whence: c_int) -> libc::off64_t {
    // SAFETY: as lseek(2); off_t is 64 bits here.
    unsafe { lseek(fd, off, whence) }
}

/// After the kernel gave `new` the same open as Weft descriptor `old` (dup, dup2, dup3,
/// F_DUPFD), or put another file at `new` (`old` not Weft's): the table follows.
/// A Weft descriptor about to become standard input, output or error (a shell's `>`
/// redirection of a builtin, `2>&3`) is made the kernel's first: the C library's stdio
/// reads and writes those with calls of its own that no interposition sees. Both numbers
/// then share the kernel's open, position included. False (errno set) when it could not be.
fn stdio_target_ok(fd: c_int, to: c_int) -> bool {
    !(0..=libc::STDERR_FILENO).contains(&to) || kernel(fd)
}

fn duplicated(old: Option<Arc<Ofd>>, new: c_int) {
    if let Some(replaced) = fds::remove(new) {
        drop(replaced);
    }
    if let Some(ofd) = old {
        fds::insert(new, ofd);
    }
}

/// In a vfork child, a duplicate of Weft descriptor `fd` is a kernel descriptor of its file
/// (the child's table is its own, the library's state its parent's): `dup_with` runs on
/// a kernel copy.
fn vfork_dup(fd: c_int, dup_with: impl FnOnce(c_int) -> c_int) -> Option<c_int> {
    if !fds::is_weft(fd) || !fds::in_vfork_child() {
        return None;
    }
    let Some(kfd) = fds::kernel_copy(fd) else { return Some(-1) };
    let r = dup_with(kfd);
    // SAFETY: the copy made here.
    unsafe { real::close(kfd) };
    Some(r)
}

/// # Safety
/// As dup(2).
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: dup of a descriptor this process holds.
    if let Some(r) = vfork_dup(fd, |k| unsafe { real::dup(k) }) {
        return r;
    }
    // SAFETY: as dup(2).
    let new = unsafe { real::dup(fd) };
    if new >= 0 {
        if let Some(o) = fds::get(fd) {
            if fds::is_weft(new) || new as usize >= 65_536 {
                // SAFETY: the number just made.
                unsafe { real::close(new) };
                return fail(libc::EMFILE);
            }
            duplicated(Some(o), new);
        }
    }
    new
}

/// # Safety
/// As dup2(2).
#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, to: c_int) -> c_int {
    // SAFETY: dup2 of a descriptor this process holds.
    if let Some(r) = vfork_dup(fd, |k| unsafe { real::dup3(k, to, 0) }) {
        return r;
    }
    if !stdio_target_ok(fd, to) {
        return -1;
    }
    let old = fds::get(fd);
    // SAFETY: as dup2(2).
    let r = unsafe { real::dup2(fd, to) };
    if r >= 0 && fd != to {
        duplicated(old, to);
    }
    r
}

/// # Safety
/// As dup3(2).
#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, to: c_int, flags: c_int) -> c_int {
    // SAFETY: dup3 of a descriptor this process holds.
    if let Some(r) = vfork_dup(fd, |k| unsafe { real::dup3(k, to, flags) }) {
        return r;
    }
    if !stdio_target_ok(fd, to) {
        return -1;
    }
    let old = fds::get(fd);
    // SAFETY: as dup3(2).
    let r = unsafe { real::dup3(fd, to, flags) };
    if r >= 0 {
        duplicated(old, to);
    }
    r
}

/// fcntl on a Weft descriptor: duplicates and descriptor flags on the number the kernel
/// holds, status flags in the open, anything else (locks, leases, pipes' sizes) on the
/// file reopened through the mount.
fn fcntl_weft(fd: c_int, o: Arc<Ofd>, cmd: c_int, arg: c_ulong) -> c_int {
    if matches!(cmd, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) {
        // SAFETY: fcntl on a descriptor this process holds.
        if let Some(r) = vfork_dup(fd, |k| unsafe { real::fcntl(k, cmd, arg) }) {
            return r;
        }
    }
    match cmd {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            // SAFETY: fcntl on a descriptor this process holds.
            let new = unsafe { real::fcntl(fd, cmd, arg) };
            if new >= 0 {
                duplicated(Some(o), new);
            }
            new
        }
        // SAFETY: the close-on-exec flag is on the number the kernel holds.
        libc::F_GETFD | libc::F_SETFD => unsafe { real::fcntl(fd, cmd, arg) },
        libc::F_GETFL => *o.file().flags.lock().unwrap_or_else(|p| p.into_inner()) | libc::O_LARGEFILE,
        libc::F_SETFL => {
            let settable = libc::O_APPEND | libc::O_NONBLOCK | libc::O_DIRECT | libc::O_NOATIME | libc::O_ASYNC;
            let mut flags = o.file().flags.lock().unwrap_or_else(|p| p.into_inner());
            *flags = (*flags & !settable) | (arg as c_int & settable);
            0
        }
        _ => {
            drop(o);
            if !kernel(fd) {
                return -1;
            }
            // SAFETY: fcntl on the kernel descriptor it is now.
            unsafe { real::fcntl(fd, cmd, arg) }
        }
    }
}

/// # Safety
/// As fcntl(2); `arg` read as the command reads it.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    match fds::get(fd) {
        // SAFETY: as fcntl(2).
        None => unsafe { real::fcntl(fd, cmd, arg) },
        Some(o) => fcntl_weft(fd, o, cmd, arg),
    }
}

/// # Safety
/// As fcntl(2).
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    match fds::get(fd) {
        // SAFETY: as fcntl(2).
        None => unsafe { real::fcntl64(fd, cmd, arg) },
        Some(o) => fcntl_weft(fd, o, cmd, arg),
    }
}

/// # Safety
/// As fsync(2).
#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match fds::get(fd) {
        // SAFETY: as fsync(2).
        None => unsafe { real::fsync(fd) },
        Some(o) => weft_call(|| o.fs.fsync(o.file()).map(|()| 0)) as c_int,
    }
}

/// # Safety
/// As fdatasync(2).
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match fds::get(fd) {
        // SAFETY: as fdatasync(2).
        None => unsafe { real::fdatasync(fd) },
        Some(o) => weft_call(|| o.fs.fsync(o.file()).map(|()| 0)) as c_int,
    }
}

/// # Safety
/// As ftruncate(2).
#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: libc::off_t) -> c_int {
    match fds::get(fd) {
        // SAFETY: as ftruncate(2).
        None => unsafe { real::ftruncate(fd, len) },
        Some(o) => weft_call(|| o.fs.ftruncate(o.file(), offset(len)?).map(|()| 0)) as c_int,
    }
}

/// # Safety
/// As ftruncate(2).
#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: libc::off64_t) -> c_int {
    // SAFETY: as ftruncate(2); off_t is 64 bits here.
    unsafe { ftruncate(fd, len) }
}

/// Advice about a Weft file is taken and ignored (as it may be).
///
/// # Safety
/// As posix_fadvise(3).
#[no_mangle]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, off: libc::off_t, len: libc::off_t, advice: c_int) -> c_int {
    match fds::is_weft(fd) {
        true => 0,
        // SAFETY: as posix_fadvise(3).
        false => unsafe { real::posix_fadvise(fd, off, len, advice) },
    }
}

/// # Safety
/// As posix_fadvise(3).
#[no_mangle]
pub unsafe extern "C" fn posix_fadvise64(fd: c_int, off: libc::off64_t, len: libc::off64_t, advice: c_int) -> c_int {
    // SAFETY: as posix_fadvise(3).
    unsafe { posix_fadvise(fd, off, len, advice) }
}

/// Declares calls that take a Weft descriptor through the mount first: `name(fd_arg, ...)`
/// makes each listed descriptor argument a kernel descriptor, then calls the C library's.
macro_rules! through_mount {
    ($( $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty, fds [$($fd:ident),*], failed $failed:expr; )*) => {
        $(
            /// Through the FUSE mount for a Weft descriptor.
            ///
            /// # Safety
            /// As the C library's function of this name.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                $(
                    if !kernel($fd) {
                        return $failed;
                    }
                )*
                // SAFETY: as the C library's.
                unsafe { real::$name($($arg),*) }
            }
        )*
    };
}

through_mount! {
    mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: libc::off_t) -> *mut c_void, fds [fd], failed libc::MAP_FAILED;
    mmap64(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: libc::off64_t) -> *mut c_void, fds [fd], failed libc::MAP_FAILED;
    flock(fd: c_int, op: c_int) -> c_int, fds [fd], failed -1;
    lockf(fd: c_int, cmd: c_int, len: libc::off_t) -> c_int, fds [fd], failed -1;
    lockf64(fd: c_int, cmd: c_int, len: libc::off64_t) -> c_int, fds [fd], failed -1;
    fallocate(fd: c_int, mode: c_int, off: libc::off_t, len: libc::off_t) -> c_int, fds [fd], failed -1;
    fallocate64(fd: c_int, mode: c_int, off: libc::off64_t, len: libc::off64_t) -> c_int, fds [fd], failed -1;
    posix_fallocate(fd: c_int, off: libc::off_t, len: libc::off_t) -> c_int, fds [fd], failed libc::EIO;
    posix_fallocate64(fd: c_int, off: libc::off64_t, len: libc::off64_t) -> c_int, fds [fd], failed libc::EIO;
    sendfile(out_fd: c_int, in_fd: c_int, off: *mut libc::off_t, count: usize) -> isize, fds [out_fd, in_fd], failed -1;
    sendfile64(out_fd: c_int, in_fd: c_int, off: *mut libc::off64_t, count: usize) -> isize, fds [out_fd, in_fd], failed -1;
    copy_file_range(in_fd: c_int, off_in: *mut libc::off64_t, out_fd: c_int, off_out: *mut libc::off64_t, len: usize, flags: c_uint) -> isize, fds [in_fd, out_fd], failed -1;
    splice(in_fd: c_int, off_in: *mut libc::off64_t, out_fd: c_int, off_out: *mut libc::off64_t, len: usize, flags: c_uint) -> isize, fds [in_fd, out_fd], failed -1;
    getdents64(fd: c_int, buf: *mut c_void, count: usize) -> isize, fds [fd], failed -1;
    syncfs(fd: c_int) -> c_int, fds [fd], failed -1;
    readahead(fd: c_int, off: libc::off64_t, count: usize) -> isize, fds [fd], failed -1;
    preadv2(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t, flags: c_int) -> isize, fds [fd], failed -1;
    pwritev2(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t, flags: c_int) -> isize, fds [fd], failed -1;
    fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE, fds [fd], failed std::ptr::null_mut();
    fstatfs(fd: c_int, buf: *mut libc::statfs) -> c_int, fds [fd], failed -1;
    fstatfs64(fd: c_int, buf: *mut libc::statfs64) -> c_int, fds [fd], failed -1;
    fstatvfs(fd: c_int, buf: *mut libc::statvfs) -> c_int, fds [fd], failed -1;
    fstatvfs64(fd: c_int, buf: *mut libc::statvfs64) -> c_int, fds [fd], failed -1;
    fgetxattr(fd: c_int, name: *const c_char, value: *mut c_void, size: usize) -> isize, fds [fd], failed -1;
    fsetxattr(fd: c_int, name: *const c_char, value: *const c_void, size: usize, flags: c_int) -> c_int, fds [fd], failed -1;
    flistxattr(fd: c_int, list: *mut c_char, size: usize) -> isize, fds [fd], failed -1;
    fremovexattr(fd: c_int, name: *const c_char) -> c_int, fds [fd], failed -1;
}

/// ioctl(2): a Weft file is no terminal (isatty's TCGETS, asked of every file Python
/// opens, answered here); other requests go to the file reopened through the mount.
///
/// # Safety
/// As ioctl(2); `arg` read as the request reads it.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int {
    if fds::is_weft(fd) {
        if matches!(req, libc::TCGETS | libc::TIOCGWINSZ | libc::TIOCGPGRP) {
            return fail(libc::ENOTTY);
        }
        if !kernel(fd) {
            return -1;
        }
    }
    // SAFETY: as ioctl(2).
    unsafe { real::ioctl(fd, req, arg) }
}
