//! The library's own descriptors (its clients' sockets, epoll and event descriptors): made
//! close-on-exec at high numbers, out of the way of the program's, and kept from the
//! program's closes. Programs close what they did not open (a child closing every
//! descriptor before exec, `closefrom(3)`); a client whose epoll descriptor went would fail.
//! A close of one by the program is answered as done and does nothing.

use crate::real::f as real;
use std::cell::Cell;
use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicU64, Ordering};

const FDS_MAX: usize = 65_536;
static BITS: [AtomicU64; FDS_MAX / 64] = [const { AtomicU64::new(0) }; FDS_MAX / 64];

thread_local! {
    /// One of the clients' runtime threads.
    static CLIENT_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Run first by each runtime thread of a client.
pub fn mark_client_thread() {
    CLIENT_THREAD.with(|c| c.set(true));
}

/// Whether descriptors made now are the library's.
fn making_private() -> bool {
    crate::is_busy() || CLIENT_THREAD.with(|c| c.get())
}

fn bit(fd: c_int) -> Option<(&'static AtomicU64, u64)> {
    let fd = usize::try_from(fd).ok().filter(|fd| *fd < FDS_MAX)?;
    Some((&BITS[fd / 64], 1u64 << (fd % 64)))
}

pub fn is_private(fd: c_int) -> bool {
    bit(fd).is_some_and(|(w, m)| w.load(Ordering::Acquire) & m != 0)
}

/// Where the library's descriptors go: some way below the soft limit (at most 4096), where
/// programs rarely put theirs.
fn floor() -> c_int {
    let mut lim = libc::rlimit { rlim_cur: 1024, rlim_max: 1024 };
    // SAFETY: getrlimit into a struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (lim.rlim_cur.min(4096) as c_int - 256).max(64)
}

/// A descriptor the library just made: moved high, close-on-exec, marked. Others pass.
pub fn adopt(fd: c_int) -> c_int {
    if fd < 0 || !making_private() {
        return fd;
    }
    // SAFETY: fcntl and close on the descriptor just made.
    let high = unsafe { real::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor() as libc::c_ulong) };
    let fd = if high >= 0 {
        unsafe { real::close(fd) };
        high
    } else {
        fd
    };
    if let Some((w, m)) = bit(fd) {
        w.fetch_or(m, Ordering::AcqRel);
    }
    fd
}

/// A close: false when it is the program's close of a library descriptor (not done).
pub fn may_close(fd: c_int) -> bool {
    if !is_private(fd) {
        return true;
    }
    if making_private() {
        if let Some((w, m)) = bit(fd) {
            w.fetch_and(!m, Ordering::AcqRel);
        }
        return true;
    }
    false
}

macro_rules! making {
    ($( $name:ident($($arg:ident: $ty:ty),*); )*) => {
        $(
            /// Made by the library: moved out of the program's way.
            ///
            /// # Safety
            /// As the C library's function of this name.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                // SAFETY: as the C library's.
                adopt(unsafe { real::$name($($arg),*) })
            }
        )*
    };
}

making! {
    socket(domain: c_int, kind: c_int, protocol: c_int);
    epoll_create(size: c_int);
    epoll_create1(flags: c_int);
    eventfd(init: c_uint, flags: c_int);
    timerfd_create(clock: c_int, flags: c_int);
}

/// close_range(2): the library's descriptors in the range are left.
///
/// # Safety
/// As close_range(2).
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let top = (last as u64).min(FDS_MAX as u64 - 1);
    let any_private = (first as u64..=top).any(|fd| is_private(fd as c_int));
    if !any_private {
        // SAFETY: as close_range(2).
        return unsafe { real::close_range(first, last, flags) };
    }
    let mut from = first as u64;
    for fd in first as u64..=top {
        if is_private(fd as c_int) {
            if fd > from {
                // SAFETY: as close_range(2), on a part without the library's.
                unsafe { real::close_range(from as c_uint, (fd - 1) as c_uint, flags) };
            }
            from = fd + 1;
        }
    }
    if from <= last as u64 {
        // SAFETY: as close_range(2).
        unsafe { real::close_range(from as c_uint, last, flags) };
    }
    0
}

/// closefrom(3): as close_range from `low`.
///
/// # Safety
/// As closefrom(3).
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    // SAFETY: as closefrom(3).
    unsafe { close_range(low.max(0) as c_uint, c_uint::MAX, 0) };
}
