//! stat(2) and statx(2) buffers filled from libweft's attributes, and the device number
//! of a mount as the kernel gives it (so both paths show the same st_dev).

use crate::real::f as real;
use std::ffi::CString;
use weft::stat::Stat;
use weft::Fs;

/// The st_dev the kernel gives `point`.
pub fn kernel_dev(point: &[u8]) -> Option<u64> {
    let path = CString::new(point.to_vec()).ok()?;
    // SAFETY: stat of a NUL-terminated path into a buffer we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { real::stat(path.as_ptr(), &mut st) } == 0).then_some(st.st_dev)
}

/// Fills a statx buffer as the kernel would for `s`.
pub fn fill_statx(fs: &Fs, s: &Stat, out: &mut libc::statx) {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    fs.fill_stat(s, &mut st);
    // SAFETY: statx is plain old data; all zeros is a valid value.
    *out = unsafe { std::mem::zeroed() };
    out.stx_mask = libc::STATX_BASIC_STATS;
    out.stx_blksize = st.st_blksize as u32;
    out.stx_nlink = st.st_nlink as u32;
    out.stx_uid = st.st_uid;
    out.stx_gid = st.st_gid;
    out.stx_mode = st.st_mode as u16;
    out.stx_ino = st.st_ino;
    out.stx_size = st.st_size as u64;
    out.stx_blocks = st.st_blocks as u64;
    let t = |sec: i64, nsec: i64| {
        // SAFETY: plain old data; all zeros is a valid value.
        let mut ts: libc::statx_timestamp = unsafe { std::mem::zeroed() };
        (ts.tv_sec, ts.tv_nsec) = (sec, nsec as u32);
        ts
    };
    out.stx_atime = t(st.st_atime, st.st_atime_nsec);
    out.stx_mtime = t(st.st_mtime, st.st_mtime_nsec);
    out.stx_ctime = t(st.st_ctime, st.st_ctime_nsec);
    out.stx_rdev_major = libc::major(st.st_rdev);
    out.stx_rdev_minor = libc::minor(st.st_rdev);
    out.stx_dev_major = libc::major(st.st_dev);
    out.stx_dev_minor = libc::minor(st.st_dev);
}
