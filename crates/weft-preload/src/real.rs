//! The C library's own functions, found past this library (`dlsym(RTLD_NEXT)`): what an
//! intercepted call does when the path or descriptor is not Weft's, and what this library
//! uses itself.

use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

/// One function of the C library, looked up once.
pub struct Real {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

impl Real {
    pub const fn new(name: &'static CStr) -> Real {
        Real { name, ptr: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// The address of the next definition of the function (the C library's).
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name only reads.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        if p.is_null() {
            // Nothing to fall back on: say so and stop, rather than jump to address 0.
            let msg = format!("libweft_preload: the C library has no {}\n", self.name.to_string_lossy());
            // SAFETY: write(2) of a buffer we own; abort never returns.
            unsafe {
                libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
                libc::abort();
            }
        }
        self.ptr.store(p, Ordering::Release);
        p
    }
}

/// Declares the C library's functions with their types: `real::open(...)` calls the next
/// `open`.
macro_rules! reals {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(
            /// # Safety
            /// As the C library's function of that name.
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                static SYMBOL: Real = Real::new(match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                    Ok(c) => c,
                    Err(_) => panic!("a function name"),
                });
                // SAFETY: the symbol is the C library's function of this type.
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(SYMBOL.get()) };
                // SAFETY: as the caller promised.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

pub mod f {
    use super::*;
    use libc::{mode_t, off64_t, off_t, size_t, ssize_t};
    reals! {
        open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
        open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
        openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
        openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
        creat(path: *const c_char, mode: mode_t) -> c_int;
        creat64(path: *const c_char, mode: mode_t) -> c_int;
        close(fd: c_int) -> c_int;
        close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int;
        socket(domain: c_int, kind: c_int, protocol: c_int) -> c_int;
        epoll_create(size: c_int) -> c_int;
        epoll_create1(flags: c_int) -> c_int;
        eventfd(init: c_uint, flags: c_int) -> c_int;
        timerfd_create(clock: c_int, flags: c_int) -> c_int;
        read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t;
        write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t;
        pread(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t;
        pread64(fd: c_int, buf: *mut c_void, count: size_t, off: off64_t) -> ssize_t;
        pwrite(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t;
        pwrite64(fd: c_int, buf: *const c_void, count: size_t, off: off64_t) -> ssize_t;
        readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
        writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
        preadv(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t) -> ssize_t;
        pwritev(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t) -> ssize_t;
        lseek(fd: c_int, off: off_t, whence: c_int) -> off_t;
        dup(fd: c_int) -> c_int;
        dup2(fd: c_int, to: c_int) -> c_int;
        dup3(fd: c_int, to: c_int, flags: c_int) -> c_int;
        fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
        fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
        fsync(fd: c_int) -> c_int;
        fdatasync(fd: c_int) -> c_int;
        ftruncate(fd: c_int, len: off_t) -> c_int;
        truncate(path: *const c_char, len: off_t) -> c_int;
        truncate64(path: *const c_char, len: off64_t) -> c_int;
        stat(path: *const c_char, st: *mut libc::stat) -> c_int;
        stat64(path: *const c_char, st: *mut libc::stat64) -> c_int;
        lstat(path: *const c_char, st: *mut libc::stat) -> c_int;
        lstat64(path: *const c_char, st: *mut libc::stat64) -> c_int;
        fstat(fd: c_int, st: *mut libc::stat) -> c_int;
        fstat64(fd: c_int, st: *mut libc::stat64) -> c_int;
        fstatat(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int;
        fstatat64(dirfd: c_int, path: *const c_char, st: *mut libc::stat64, flags: c_int) -> c_int;
        __xstat(ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int;
        __xstat64(ver: c_int, path: *const c_char, st: *mut libc::stat64) -> c_int;
        __lxstat(ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int;
        __lxstat64(ver: c_int, path: *const c_char, st: *mut libc::stat64) -> c_int;
        __fxstat(ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int;
        __fxstat64(ver: c_int, fd: c_int, st: *mut libc::stat64) -> c_int;
        __fxstatat(ver: c_int, dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int;
        __fxstatat64(ver: c_int, dirfd: c_int, path: *const c_char, st: *mut libc::stat64, flags: c_int) -> c_int;
        statx(dirfd: c_int, path: *const c_char, flags: c_int, mask: c_uint, buf: *mut libc::statx) -> c_int;
        access(path: *const c_char, mode: c_int) -> c_int;
        faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int;
        mkdir(path: *const c_char, mode: mode_t) -> c_int;
        mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int;
        rmdir(path: *const c_char) -> c_int;
        unlink(path: *const c_char) -> c_int;
        unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
        rename(from: *const c_char, to: *const c_char) -> c_int;
        renameat(fromfd: c_int, from: *const c_char, tofd: c_int, to: *const c_char) -> c_int;
        renameat2(fromfd: c_int, from: *const c_char, tofd: c_int, to: *const c_char, flags: c_uint) -> c_int;
        link(from: *const c_char, to: *const c_char) -> c_int;
        linkat(fromfd: c_int, from: *const c_char, tofd: c_int, to: *const c_char, flags: c_int) -> c_int;
        symlink(target: *const c_char, path: *const c_char) -> c_int;
        symlinkat(target: *const c_char, dirfd: c_int, path: *const c_char) -> c_int;
        readlink(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t;
        readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t;
        chmod(path: *const c_char, mode: mode_t) -> c_int;
        fchmod(fd: c_int, mode: mode_t) -> c_int;
        fchmodat(dirfd: c_int, path: *const c_char, mode: mode_t, flags: c_int) -> c_int;
        chown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int;
        lchown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int;
        fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t) -> c_int;
        fchownat(dirfd: c_int, path: *const c_char, uid: libc::uid_t, gid: libc::gid_t, flags: c_int) -> c_int;
        utimensat(dirfd: c_int, path: *const c_char, times: *const libc::timespec, flags: c_int) -> c_int;
        futimens(fd: c_int, times: *const libc::timespec) -> c_int;
        opendir(path: *const c_char) -> *mut libc::DIR;
        fdopendir(fd: c_int) -> *mut libc::DIR;
        readdir(dir: *mut libc::DIR) -> *mut libc::dirent;
        readdir64(dir: *mut libc::DIR) -> *mut libc::dirent64;
        closedir(dir: *mut libc::DIR) -> c_int;
        dirfd(dir: *mut libc::DIR) -> c_int;
        rewinddir(dir: *mut libc::DIR) -> ();
        telldir(dir: *mut libc::DIR) -> c_long;
        seekdir(dir: *mut libc::DIR, pos: c_long) -> ();
        chdir(path: *const c_char) -> c_int;
        fchdir(fd: c_int) -> c_int;
        mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
        mmap64(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off64_t) -> *mut c_void;
        fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE;
        umask(mask: mode_t) -> mode_t;
        execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
        execveat(dirfd: c_int, path: *const c_char, argv: *const *const c_char, envp: *const *const c_char, flags: c_int) -> c_int;
        fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
        posix_spawn(pid: *mut libc::pid_t, path: *const c_char, acts: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *mut c_char, envp: *const *mut c_char) -> c_int;
        posix_spawnp(pid: *mut libc::pid_t, path: *const c_char, acts: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *mut c_char, envp: *const *mut c_char) -> c_int;
        getxattr(path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t;
        lgetxattr(path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t;
        fgetxattr(fd: c_int, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t;
        setxattr(path: *const c_char, name: *const c_char, value: *const c_void, size: size_t, flags: c_int) -> c_int;
        lsetxattr(path: *const c_char, name: *const c_char, value: *const c_void, size: size_t, flags: c_int) -> c_int;
        fsetxattr(fd: c_int, name: *const c_char, value: *const c_void, size: size_t, flags: c_int) -> c_int;
        listxattr(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t;
        llistxattr(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t;
        flistxattr(fd: c_int, list: *mut c_char, size: size_t) -> ssize_t;
        removexattr(path: *const c_char, name: *const c_char) -> c_int;
        lremovexattr(path: *const c_char, name: *const c_char) -> c_int;
        fremovexattr(fd: c_int, name: *const c_char) -> c_int;
        fstatfs(fd: c_int, buf: *mut libc::statfs) -> c_int;
        fstatfs64(fd: c_int, buf: *mut libc::statfs64) -> c_int;
        fstatvfs(fd: c_int, buf: *mut libc::statvfs) -> c_int;
        fstatvfs64(fd: c_int, buf: *mut libc::statvfs64) -> c_int;
        posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int;
        fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int;
        fallocate64(fd: c_int, mode: c_int, off: off64_t, len: off64_t) -> c_int;
        posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int;
        posix_fallocate64(fd: c_int, off: off64_t, len: off64_t) -> c_int;
        flock(fd: c_int, op: c_int) -> c_int;
        ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int;
        sendfile(out: c_int, input: c_int, off: *mut off_t, count: size_t) -> ssize_t;
        sendfile64(out: c_int, input: c_int, off: *mut off64_t, count: size_t) -> ssize_t;
        copy_file_range(input: c_int, off_in: *mut off64_t, out: c_int, off_out: *mut off64_t, len: size_t, flags: c_uint) -> ssize_t;
        splice(input: c_int, off_in: *mut off64_t, out: c_int, off_out: *mut off64_t, len: size_t, flags: c_uint) -> ssize_t;
        getdents64(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t;
        syncfs(fd: c_int) -> c_int;
        readahead(fd: c_int, off: off64_t, count: size_t) -> ssize_t;
        lockf(fd: c_int, cmd: c_int, len: off_t) -> c_int;
        lockf64(fd: c_int, cmd: c_int, len: off64_t) -> c_int;
        preadv2(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t;
        pwritev2(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t;
    }
}
