//! Open files: open, read, write, seek, fsync, fstat, ftruncate, close.

use super::common::{bytes, fs, guard, hand_out, invalid, weft_file, weft_fs};
use crate::error::Error;
use std::ffi::{c_char, c_int, c_void};

/// Opens (or with O_CREAT makes, `mode` applied with the mount's umask) the file `path`
/// names from the file system's root: `*file` is its handle. Flags as open(2): O_RDONLY,
/// O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_DIRECTORY, O_NOFOLLOW. A
/// directory opens read-only (for `weft_fstat`). A special file fails with -ENXIO.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `file` a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_open(
    fs: *const weft_fs,
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
    file: *mut *mut weft_file,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (mounted, path) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?) };
        let opened = mounted.open(path, flags, mode)?;
        // SAFETY: as the caller promised.
        unsafe { hand_out(file, weft_file { fs, file: opened }) }
    })
}

/// Closes an open file and frees its handle; a writer's close tells the MDS the size its
/// objects hold. The handle is freed even when the close fails.
///
/// # Safety
/// `file` is a handle an open gave, not closed before.
#[no_mangle]
pub unsafe extern "C" fn weft_close(file: *mut weft_file) -> c_int {
    guard(|| {
        if file.is_null() {
            return Err(invalid("the file"));
        }
        // SAFETY: the handle came from Box::into_raw at its open and is freed once.
        let handle = unsafe { Box::from_raw(file) };
        // SAFETY: its file system is still mounted (the header's rule).
        let fs = unsafe { fs(handle.fs) }?;
        fs.close(handle.file).map(|()| 0)
    })
}

/// A mutable byte buffer from C.
///
/// # Safety
/// `buf` holds `count` writable bytes (or `count` is 0).
unsafe fn out_buf<'a>(buf: *mut c_void, count: usize) -> Result<&'a mut [u8], Error> {
    match (buf.is_null(), count) {
        (_, 0) => Ok(&mut []),
        (true, _) => Err(invalid("the buffer")),
        // SAFETY: as the caller promised.
        (false, n) => Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) }),
    }
}

/// A byte buffer from C.
///
/// # Safety
/// `buf` holds `count` readable bytes (or `count` is 0).
unsafe fn in_buf<'a>(buf: *const c_void, count: usize) -> Result<&'a [u8], Error> {
    match (buf.is_null(), count) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(invalid("the buffer")),
        // SAFETY: as the caller promised.
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) }),
    }
}

fn offset(off: libc::off_t) -> Result<u64, Error> {
    u64::try_from(off).map_err(|_| Error::new(libc::EINVAL, format!("offset {off} is negative")))
}

/// Reads up to `count` bytes at the file position, which moves past them; 0 at the end.
///
/// # Safety
/// `file` is an open handle; `buf` holds `count` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_read(file: *const weft_file, buf: *mut c_void, count: usize) -> libc::ssize_t {
    guard(|| {
        // SAFETY: as the caller promised.
        let ((fs, f), buf) = unsafe { (super::common::file(file)?, out_buf(buf, count)?) };
        fs.read(f, buf).map(|n| n as i64)
    })
}

/// Writes `count` bytes at the file position (at the end with O_APPEND), which moves past
/// them; they are on the OSTs when it returns.
///
/// # Safety
/// `file` is an open handle; `buf` holds `count` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_write(file: *const weft_file, buf: *const c_void, count: usize) -> libc::ssize_t {
    guard(|| {
        // SAFETY: as the caller promised.
        let ((fs, f), buf) = unsafe { (super::common::file(file)?, in_buf(buf, count)?) };
        fs.write(f, buf).map(|n| n as i64)
    })
}

/// Reads up to `count` bytes at `offset`; the file position stays.
///
/// # Safety
/// `file` is an open handle; `buf` holds `count` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_pread(
    file: *const weft_file,
    buf: *mut c_void,
    count: usize,
    off: libc::off_t,
) -> libc::ssize_t {
    guard(|| {
        // SAFETY: as the caller promised.
        let ((fs, f), buf) = unsafe { (super::common::file(file)?, out_buf(buf, count)?) };
        fs.pread(f, buf, offset(off)?).map(|n| n as i64)
    })
}

/// Writes `count` bytes at `offset`; the file position stays.
///
/// # Safety
/// `file` is an open handle; `buf` holds `count` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_pwrite(
    file: *const weft_file,
    buf: *const c_void,
    count: usize,
    off: libc::off_t,
) -> libc::ssize_t {
    guard(|| {
        // SAFETY: as the caller promised.
        let ((fs, f), buf) = unsafe { (super::common::file(file)?, in_buf(buf, count)?) };
        fs.pwrite(f, buf, offset(off)?).map(|n| n as i64)
    })
}

/// Moves the file position (SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE); the new one.
///
/// # Safety
/// `file` is an open handle.
#[no_mangle]
pub unsafe extern "C" fn weft_lseek(file: *const weft_file, off: libc::off_t, whence: c_int) -> libc::off_t {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, f) = unsafe { super::common::file(file) }?;
        fs.seek(f, off, whence).map(|p| p as i64)
    })
}

/// Makes what this file's writes put on the OSTs durable there.
///
/// # Safety
/// `file` is an open handle.
#[no_mangle]
pub unsafe extern "C" fn weft_fsync(file: *const weft_file) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, f) = unsafe { super::common::file(file) }?;
        fs.fsync(f).map(|()| 0)
    })
}

/// The attributes of an open file, as fstat(2).
///
/// # Safety
/// `file` is an open handle; `st` points to a writable struct stat.
#[no_mangle]
pub unsafe extern "C" fn weft_fstat(file: *const weft_file, st: *mut libc::stat) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, f) = unsafe { super::common::file(file) }?;
        // SAFETY: as the caller promised.
        let st = unsafe { st.as_mut() }.ok_or_else(|| invalid("the stat buffer"))?;
        fs.fill_stat(&fs.fstat(f)?, st);
        Ok(0)
    })
}

/// Cuts or extends (with a hole) a file open for writing to `length` bytes.
///
/// # Safety
/// `file` is an open handle.
#[no_mangle]
pub unsafe extern "C" fn weft_ftruncate(file: *const weft_file, length: libc::off_t) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, f) = unsafe { super::common::file(file) }?;
        fs.ftruncate(f, offset(length)?).map(|()| 0)
    })
}
