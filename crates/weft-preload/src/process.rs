//! Processes: a child after fork is a client of its own (its Weft descriptors reopened
//! through the mount, a new connection on its next open), and an exec keeps the
//! descriptors it should by making them kernel descriptors of the mount first.

use crate::fds;
use crate::mounts;
use crate::real::f as real;
use std::ffi::{c_char, c_int};

extern "C" fn before_fork() {
    for m in mounts::all() {
        m.fork_lock(true);
    }
    fds::fork_lock(true);
}

extern "C" fn after_fork_parent() {
    fds::fork_lock(false);
    for m in mounts::all() {
        m.fork_lock(false);
    }
}

extern "C" fn after_fork_child() {
    fds::fork_lock(false);
    for m in mounts::all() {
        m.fork_lock(false);
        m.forget_client();
    }
    fds::after_fork_child();
}

pub fn install_fork_handlers() {
    // SAFETY: registering handlers that live as long as the library.
    unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_parent), Some(after_fork_child)) };
}

/// # Safety
/// As execve(2).
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    fds::before_exec();
    // SAFETY: as execve(2).
    unsafe { real::execve(path, argv, envp) }
}

/// # Safety
/// As execveat(2).
#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    fds::before_exec();
    // SAFETY: as execveat(2).
    unsafe { real::execveat(dirfd, path, argv, envp, flags) }
}

/// # Safety
/// As fexecve(3).
#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    if !crate::io::kernel(fd) {
        return -1;
    }
    fds::before_exec();
    // SAFETY: as fexecve(3).
    unsafe { real::fexecve(fd, argv, envp) }
}

/// The C library's environment, for the exec calls that take none.
fn environ() -> *const *const c_char {
    extern "C" {
        static environ: *const *const c_char;
    }
    // SAFETY: reading the C library's pointer.
    unsafe { environ }
}

/// # Safety
/// As execv(3).
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: as execv(3).
    unsafe { execve(path, argv, environ()) }
}

/// execvp(3) and execvpe(3): the C library's search of PATH calls its own execve, which
/// this library does not see, so the descriptors are made the kernel's first.
///
/// # Safety
/// As execvp(3).
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    fds::before_exec();
    static REAL: crate::real::Real = crate::real::Real::new(c"execvp");
    // SAFETY: the C library's execvp.
    let f: unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int =
        unsafe { std::mem::transmute(REAL.get()) };
    // SAFETY: as execvp(3).
    unsafe { f(file, argv) }
}

/// # Safety
/// As execvpe(3).
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    fds::before_exec();
    static REAL: crate::real::Real = crate::real::Real::new(c"execvpe");
    type Execvpe = unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    // SAFETY: the C library's execvpe.
    let f: Execvpe = unsafe { std::mem::transmute(REAL.get()) };
    // SAFETY: as execvpe(3).
    unsafe { f(file, argv, envp) }
}

/// posix_spawn(3): the child gets the parent's descriptors without running this library,
/// so those that survive exec are made the kernel's first (in the parent, for good).
///
/// # Safety
/// As posix_spawn(3).
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    acts: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    fds::before_exec();
    // SAFETY: as posix_spawn(3).
    unsafe { real::posix_spawn(pid, path, acts, attr, argv, envp) }
}

/// # Safety
/// As posix_spawnp(3).
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    path: *const c_char,
    acts: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    fds::before_exec();
    // SAFETY: as posix_spawnp(3).
    unsafe { real::posix_spawnp(pid, path, acts, attr, argv, envp) }
}
