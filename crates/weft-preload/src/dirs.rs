//! Directory streams of Weft directories: opendir (and fdopendir of a Weft descriptor)
//! gives a stream of this library's, which every other DIR call then recognizes; streams
//! of other directories are the C library's.

use crate::fds::{self, Ofd};
use crate::io::weft_call;
use crate::lock::SpinLock;
use crate::paths::classify;
use crate::real::f as real;
use crate::{fail, inside};
use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_long};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A stream of a Weft directory.
struct WDir {
    ofd: Arc<Ofd>,
    dir: weft::Dir,
    /// The entry readdir last gave (its buffer is the stream's, as in the C library).
    entry: libc::dirent64,
    /// The descriptor dirfd gave or fdopendir took, closed with the stream.
    fd: Option<c_int>,
}

/// Addresses of the streams this library made.
static STREAMS: SpinLock<BTreeSet<usize>> = SpinLock::new(BTreeSet::new());
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn ours(dir: *mut libc::DIR) -> Option<&'static mut WDir> {
    if COUNT.load(Ordering::Acquire) == 0 || !STREAMS.lock().contains(&(dir as usize)) {
        return None;
    }
    // SAFETY: the address is a live WDir this library made (removed before it is freed);
    // a stream is used by one thread at a time, as POSIX asks.
    Some(unsafe { &mut *dir.cast::<WDir>() })
}

fn stream(ofd: Arc<Ofd>, fd: Option<c_int>) -> *mut libc::DIR {
    let dir = ofd.fs.opendir_fid(ofd.file().fid);
    // SAFETY: dirent64 is plain old data; all zeros is a valid value.
    let entry = unsafe { std::mem::zeroed() };
    let p = Box::into_raw(Box::new(WDir { ofd, dir, entry, fd })).cast::<libc::DIR>();
    STREAMS.lock().insert(p as usize);
    COUNT.fetch_add(1, Ordering::AcqRel);
    p
}

/// # Safety
/// As opendir(3).
#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    // SAFETY: as opendir(3).
    let Some(at) = (unsafe { classify(libc::AT_FDCWD, path) }) else {
        // SAFETY: as opendir(3).
        return unsafe { real::opendir(path) };
    };
    let fs = at.fs;
    match inside(|| fs.open(&at.rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)) {
        Some(Ok(file)) => stream(Arc::new(Ofd::new(fs, file, at.abs.clone())), None),
        Some(Err(e)) if e.errno == libc::EXDEV || e.errno == libc::ENXIO => {
            // SAFETY: as opendir(3).
            unsafe { real::opendir(path) }
        }
        Some(Err(e)) => {
            weft_call(|| Err(e));
            std::ptr::null_mut()
        }
        // SAFETY: as opendir(3).
        None => unsafe { real::opendir(path) },
    }
}

/// # Safety
/// As fdopendir(3).
#[no_mangle]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut libc::DIR {
    match fds::get(fd) {
        Some(o) if o.file().is_dir() => stream(o, Some(fd)),
        Some(_) => {
            fail::<c_int>(libc::ENOTDIR);
            std::ptr::null_mut()
        }
        // SAFETY: as fdopendir(3).
        None => unsafe { real::fdopendir(fd) },
    }
}

/// The next entry into the stream's buffer.
fn next(w: &mut WDir) -> *mut libc::dirent64 {
    let fs = w.ofd.fs;
    match inside(|| fs.readdir(&mut w.dir)) {
        Some(Ok(Some(e))) => {
            let d = &mut w.entry;
            d.d_ino = fs.ino(e.fid);
            d.d_off = w.dir.position as i64;
            d.d_type = weft::namespace::dirent_type(e.kind);
            let n = e.name.len().min(d.d_name.len() - 1);
            for (to, from) in d.d_name.iter_mut().zip(&e.name[..n]) {
                *to = *from as c_char;
            }
            d.d_name[n] = 0;
            d.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
            d
        }
        // The end: NULL with errno untouched.
        Some(Ok(None)) => std::ptr::null_mut(),
        Some(Err(e)) => {
            weft_call(|| Err(e));
            std::ptr::null_mut()
        }
        None => std::ptr::null_mut(),
    }
}

/// # Safety
/// As readdir(3).
#[no_mangle]
pub unsafe extern "C" fn readdir(dir: *mut libc::DIR) -> *mut libc::dirent {
    match ours(dir) {
        // dirent and dirent64 are the same on 64-bit Linux.
        Some(w) => next(w).cast(),
        // SAFETY: as readdir(3).
        None => unsafe { real::readdir(dir) },
    }
}

/// # Safety
/// As readdir(3).
#[no_mangle]
pub unsafe extern "C" fn readdir64(dir: *mut libc::DIR) -> *mut libc::dirent64 {
    match ours(dir) {
        Some(w) => next(w),
        // SAFETY: as readdir(3).
        None => unsafe { real::readdir64(dir) },
    }
}

/// # Safety
/// As closedir(3).
#[no_mangle]
pub unsafe extern "C" fn closedir(dir: *mut libc::DIR) -> c_int {
    if ours(dir).is_none() {
        // SAFETY: as closedir(3).
        return unsafe { real::closedir(dir) };
    }
    STREAMS.lock().remove(&(dir as usize));
    COUNT.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: made by Box::into_raw in `stream`, freed once (it left STREAMS above).
    let w = unsafe { Box::from_raw(dir.cast::<WDir>()) };
    if let Some(fd) = w.fd {
        // SAFETY: the stream owns the descriptor.
        unsafe { crate::io::close(fd) };
    }
    0
}

/// # Safety
/// As dirfd(3).
#[no_mangle]
pub unsafe extern "C" fn dirfd(dir: *mut libc::DIR) -> c_int {
    let Some(w) = ours(dir) else {
        // SAFETY: as dirfd(3).
        return unsafe { real::dirfd(dir) };
    };
    if let Some(fd) = w.fd {
        return fd;
    }
    match fds::install(w.ofd.clone(), true) {
        Some(fd) => {
            w.fd = Some(fd);
            fd
        }
        None => -1,
    }
}

/// # Safety
/// As rewinddir(3).
#[no_mangle]
pub unsafe extern "C" fn rewinddir(dir: *mut libc::DIR) {
    match ours(dir) {
        Some(w) => {
            let fs = w.ofd.fs;
            inside(|| fs.seekdir(&mut w.dir, 0));
        }
        // SAFETY: as rewinddir(3).
        None => unsafe { real::rewinddir(dir) },
    }
}

/// # Safety
/// As telldir(3).
#[no_mangle]
pub unsafe extern "C" fn telldir(dir: *mut libc::DIR) -> c_long {
    match ours(dir) {
        Some(w) => w.dir.position as c_long,
        // SAFETY: as telldir(3).
        None => unsafe { real::telldir(dir) },
    }
}

/// # Safety
/// As seekdir(3).
#[no_mangle]
pub unsafe extern "C" fn seekdir(dir: *mut libc::DIR, pos: c_long) {
    match ours(dir) {
        Some(w) => {
            let fs = w.ofd.fs;
            inside(|| fs.seekdir(&mut w.dir, pos.max(0) as u64));
        }
        // SAFETY: as seekdir(3).
        None => unsafe { real::seekdir(dir, pos) },
    }
}
