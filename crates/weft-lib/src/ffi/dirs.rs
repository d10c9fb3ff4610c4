//! Listings: opendir, readdir, rewinddir, closedir.

use super::common::{bytes, fs, guard, hand_out, invalid, weft_fs};
use crate::namespace::{dirent_type, Dir};
use std::ffi::{c_char, c_int};

/// A directory being listed.
#[allow(non_camel_case_types)]
pub struct weft_dir {
    fs: *const weft_fs,
    dir: Dir,
}

/// Longest name an entry holds, without its NUL.
pub const WEFT_NAME_MAX: usize = 255;

/// One entry of a listing.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct weft_dirent {
    /// The inode number stat gives.
    pub d_ino: u64,
    /// DT_REG, DT_DIR, DT_LNK, DT_FIFO, DT_CHR, DT_BLK or DT_SOCK.
    pub d_type: u8,
    /// The name, NUL-terminated.
    pub d_name: [c_char; 256],
}

/// Opens directory `path` for listing: `*dir` is its handle.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `dir` a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_opendir(fs: *const weft_fs, path: *const c_char, dir: *mut *mut weft_dir) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (mounted, path) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?) };
        let listing = mounted.opendir(path)?;
        // SAFETY: as the caller promised.
        unsafe { hand_out(dir, weft_dir { fs, dir: listing }) }
    })
}

/// The next entry into `*entry` (`.` and `..` first): 1, or 0 at the end.
///
/// # Safety
/// `dir` is an open listing, `entry` a writable struct weft_dirent.
#[no_mangle]
pub unsafe extern "C" fn weft_readdir(dir: *mut weft_dir, entry: *mut weft_dirent) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let d = unsafe { dir.as_mut() }.ok_or_else(|| invalid("the directory"))?;
        // SAFETY: as the caller promised.
        let out = unsafe { entry.as_mut() }.ok_or_else(|| invalid("the entry"))?;
        // SAFETY: its file system is still mounted (the header's rule).
        let fs = unsafe { fs(d.fs) }?;
        let Some(e) = fs.readdir(&mut d.dir)? else { return Ok(0) };
        out.d_ino = fs.ino(e.fid);
        out.d_type = dirent_type(e.kind);
        let n = e.name.len().min(WEFT_NAME_MAX);
        for (to, from) in out.d_name.iter_mut().zip(&e.name[..n]) {
            *to = *from as c_char;
        }
        out.d_name[n] = 0;
        Ok(1)
    })
}

/// Starts the listing again from its first entry.
///
/// # Safety
/// `dir` is an open listing.
#[no_mangle]
pub unsafe extern "C" fn weft_rewinddir(dir: *mut weft_dir) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let d = unsafe { dir.as_mut() }.ok_or_else(|| invalid("the directory"))?;
        // SAFETY: its file system is still mounted (the header's rule).
        let fs = unsafe { fs(d.fs) }?;
        fs.seekdir(&mut d.dir, 0).map(|()| 0)
    })
}

/// Ends a listing and frees its handle.
///
/// # Safety
/// `dir` is an open listing, not closed before.
#[no_mangle]
pub unsafe extern "C" fn weft_closedir(dir: *mut weft_dir) -> c_int {
    guard(|| {
        if dir.is_null() {
            return Err(invalid("the directory"));
        }
        // SAFETY: the handle came from Box::into_raw in weft_opendir and is freed once.
        drop(unsafe { Box::from_raw(dir) });
        Ok(0)
    })
}
