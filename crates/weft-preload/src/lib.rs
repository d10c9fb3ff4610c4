//! libweft_preload.so: with `LD_PRELOAD=libweft_preload.so`, an unmodified dynamically
//! linked program's file calls on paths under a Weft FUSE mount go to libweft (a client
//! of the file system in the process) instead of through the kernel and FUSE; everything
//! else goes to the C library as before. As DAOS's libpil4dfs or GekkoFS's interception.
//!
//! - The Weft mounts are those /proc/self/mountinfo lists as `fuse.weft`; each gets its
//!   own client in the process on first use (`mounts.rs`). A process that never touches
//!   one pays a look at the descriptor bitmap per call.
//! - A descriptor of a Weft file is a real descriptor number, held in the kernel's table by
//!   a duplicate of an O_PATH descriptor of `/` (so a call that reaches the kernel past
//!   this library fails with EBADF, never reads or writes another file), with the open
//!   behind it in `fds.rs`.
//! - What this library does not do itself (mmap, locks, ioctl, sendfile, an exec that
//!   keeps descriptors, ...) goes to the FUSE mount: the descriptor is opened there again
//!   at its file position and takes the same number (`fds::to_kernel`), so a program never
//!   breaks, only slows. So do paths that leave the file system (`..` past its root, an
//!   absolute symbolic link elsewhere) and special files.
//! - After fork, the child is a new client: its descriptors of Weft files are reopened
//!   through the mount, and its next open under a mount connects again.
//!
//! WEFT_PRELOAD=0 in the environment turns it off; WEFT_PRELOAD_DEBUG=1 says on stderr
//! what goes where.

mod dirs;
mod fds;
mod io;
mod lock;
mod meta;
mod mounts;
mod open;
mod paths;
mod private;
mod process;
mod real;
mod stat;

use std::cell::Cell;

thread_local! {
    /// This thread is inside the library (its own file calls go to the C library).
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` marked as inside the library; None when this thread is inside it already.
pub(crate) fn inside<T>(f: impl FnOnce() -> T) -> Option<T> {
    if BUSY.with(|b| b.replace(true)) {
        return None;
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BUSY.with(|b| b.set(false));
        }
    }
    let _reset = Reset;
    Some(f())
}

/// Runs `f` as the library's own work (its C library calls go to the kernel), whether or
/// not a call of the library is running on this thread already: what must happen once
/// started, as the close on the servers of an open whose last descriptor a call of the
/// library ended (skipping it, as [`inside`] would, leaked the open on the MDS: the file's
/// size stayed unknown and its writer counted until the process ended).
pub(crate) fn within<T>(f: impl FnOnce() -> T) -> T {
    let was = BUSY.with(|b| b.replace(true));
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUSY.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(was);
    f()
}

pub(crate) fn is_busy() -> bool {
    BUSY.with(|b| b.get())
}

/// Sets errno and gives the failure value of a call.
pub(crate) fn fail<T: From<i8>>(errno: i32) -> T {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = errno };
    T::from(-1)
}

/// Whether the environment says to print what goes where.
pub(crate) fn debug() -> bool {
    static DEBUG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DEBUG.get_or_init(|| std::env::var_os("WEFT_PRELOAD_DEBUG").is_some_and(|v| v != "0"))
}

macro_rules! say {
    ($($arg:tt)*) => {
        if $crate::debug() {
            eprintln!("weft_preload[{}]: {}", std::process::id(), format_args!($($arg)*));
        }
    };
}
pub(crate) use say;

/// A libweft result as a C library return value: the value, or -1 with errno.
pub(crate) fn c_result(r: weft::Result<i64>) -> i64 {
    match r {
        Ok(v) => v,
        Err(e) => {
            say!("{e}");
            fail(e.errno)
        }
    }
}

/// At load: the fork handlers (before anything can fork).
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    process::install_fork_handlers();
}

/// At exit: the opens still open are closed (a writer's size told to the MDS, as the
/// kernel's close at exit would), and each client gives its locks back, so that no other
/// client waits for this process to answer a callback it never will.
#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

extern "C" fn fini() {
    leave();
}

/// _exit(2) skips the exit handlers: the same is done first.
///
/// # Safety
/// As _exit(2).
#[no_mangle]
pub unsafe extern "C" fn _exit(status: std::ffi::c_int) -> ! {
    leave();
    // SAFETY: as _exit(2).
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    unreachable!("exit_group returned")
}

/// The process ends: Weft descriptors closed, locks given back.
fn leave() {
    // Nothing of this process's (a vfork child, whose memory is its parent's, has no
    // client of its own): no thread to start.
    if !mounts::all().iter().any(|m| m.connected_here()) {
        return;
    }
    // On a thread of its own: by now the C library has destroyed this thread's
    // thread-locals, which the clients' runtime uses.
    let done = std::thread::Builder::new().name("weft-exit".into()).spawn(|| {
        fds::close_all();
        for m in mounts::all() {
            m.disconnect();
        }
    });
    if let Ok(thread) = done {
        let _ = thread.join();
    }
}
