//! What every C entry point shares: the handles, turning results into return values, the
//! thread's last error message, and reading C strings.

use crate::error::{Error, Result};
use crate::fs::Fs;
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A mounted file system.
#[allow(non_camel_case_types)]
pub struct weft_fs {
    pub(crate) fs: Fs,
}

/// An open file or directory.
#[allow(non_camel_case_types)]
pub struct weft_file {
    pub(crate) fs: *const weft_fs,
    pub(crate) file: crate::file::File,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn remember(e: &Error) {
    let text = CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = text);
}

/// The thread's last error message (empty before any failure).
pub(crate) fn last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// Runs `call`: its value, or a negative errno (its message kept for `weft_strerror`); a
/// panic is an EIO.
pub(crate) fn guard<T: TryFrom<i64> + Copy>(call: impl FnOnce() -> Result<i64>) -> T {
    let out = match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            remember(&e);
            -i64::from(e.errno)
        }
        Err(_) => {
            remember(&Error::new(libc::EIO, "libweft failed inside (a panic); the call did nothing more"));
            -i64::from(libc::EIO)
        }
    };
    T::try_from(out).unwrap_or_else(|_| T::try_from(-i64::from(libc::EOVERFLOW)).ok().expect("an errno fits"))
}

pub(crate) fn invalid(what: &str) -> Error {
    Error::new(libc::EINVAL, format!("{what} is NULL"))
}

/// A C string argument as bytes.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that lives through the call.
pub(crate) unsafe fn bytes<'a>(p: *const c_char, what: &str) -> Result<&'a [u8]> {
    if p.is_null() {
        return Err(invalid(what));
    }
    // SAFETY: as the caller promised.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// The file system behind a handle.
///
/// # Safety
/// `fs` is NULL or a handle `weft_mount` gave and `weft_umount` has not freed.
pub(crate) unsafe fn fs<'a>(fs: *const weft_fs) -> Result<&'a Fs> {
    // SAFETY: as the caller promised.
    unsafe { fs.as_ref() }.map(|f| &f.fs).ok_or_else(|| invalid("the file system"))
}

/// An open file's handle and its file system.
///
/// # Safety
/// `file` is NULL or a handle an open gave and `weft_close` has not freed, whose file
/// system is still mounted.
pub(crate) unsafe fn file<'a>(file: *const weft_file) -> Result<(&'a Fs, &'a crate::file::File)> {
    // SAFETY: as the caller promised.
    let f = unsafe { file.as_ref() }.ok_or_else(|| invalid("the file"))?;
    // SAFETY: a file's fs outlives it (the header's rule).
    Ok((unsafe { fs(f.fs) }?, &f.file))
}

/// Copies `data` into the caller's buffer of `size` bytes: its length when it fits (or
/// when `size` is 0, to ask the length), ERANGE when it does not.
///
/// # Safety
/// `buf` is NULL or holds `size` writable bytes.
pub unsafe fn copy_out(data: &[u8], buf: *mut c_char, size: usize) -> Result<i64> {
    if size == 0 {
        return Ok(data.len() as i64);
    }
    if buf.is_null() {
        return Err(invalid("the buffer"));
    }
    if data.len() > size {
        return Err(Error::new(libc::ERANGE, format!("{} bytes do not fit in a buffer of {size}", data.len())));
    }
    // SAFETY: `buf` holds `size` >= data.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), data.len()) };
    Ok(data.len() as i64)
}

/// A new handle for C.
pub(crate) fn boxed<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Stores a new handle where the caller asked.
///
/// # Safety
/// `out` is NULL or points to a writable pointer.
pub(crate) unsafe fn hand_out<T>(out: *mut *mut T, value: T) -> Result<i64> {
    if out.is_null() {
        return Err(invalid("the place for the handle"));
    }
    // SAFETY: as the caller promised.
    unsafe { *out = boxed(value) };
    Ok(0)
}
