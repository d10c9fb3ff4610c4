//! Mount and unmount, the library's version, the last error, the job and umask of requests.

use super::common::{bytes, guard, hand_out, last_error, weft_fs};
use crate::fs::Fs;
use std::ffi::{c_char, c_int};

/// libweft's version, as `MAJOR.MINOR.PATCH`.
#[no_mangle]
pub extern "C" fn weft_version() -> *const c_char {
    static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr().cast()
}

/// The message of the last call that failed on this thread (what was asked, and why it
/// failed); empty before any. Valid until this thread's next failure.
#[no_mangle]
pub extern "C" fn weft_strerror() -> *const c_char {
    last_error()
}

/// Mounts the file system whose management service is at `mgs` ("host:port", or several
/// replicas' "a:p,b:p,c:p") as the calling process's user: `*fs` is its handle. Fails
/// within seconds when the service does not answer (-ETIMEDOUT, -ECONNREFUSED...).
///
/// # Safety
/// `mgs` is a NUL-terminated string; `fs` points to a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_mount(mgs: *const c_char, fs: *mut *mut weft_fs) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let mgs = unsafe { bytes(mgs, "the management service's address") }?;
        let mgs = String::from_utf8_lossy(mgs);
        let mounted = Fs::mount(&mgs)?;
        // SAFETY: as the caller promised.
        unsafe { hand_out(fs, weft_fs { fs: mounted }) }
    })
}

/// Unmounts: the client's locks go back to the servers and the handle is freed. Every file
/// and directory of it must be closed first.
///
/// # Safety
/// `fs` is a handle `weft_mount` gave, not unmounted before.
#[no_mangle]
pub unsafe extern "C" fn weft_umount(fs: *mut weft_fs) -> c_int {
    guard(|| {
        if fs.is_null() {
            return Err(super::common::invalid("the file system"));
        }
        // SAFETY: the handle came from Box::into_raw in weft_mount, and is freed once.
        drop(unsafe { Box::from_raw(fs) });
        Ok(0)
    })
}

/// This client's `max_rpcs_in_flight` (Lustre's `osc.*.max_rpcs_in_flight`): the
/// permanent setting `weft set-param -P max_rpcs_in_flight=N` made for every client, else 8;
/// what the MPI-IO layer's aggregators keep in flight per OST by default.
///
/// # Safety
/// `fs` is a mounted handle.
#[no_mangle]
pub unsafe extern "C" fn weft_max_rpcs_in_flight(fs: *const weft_fs) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let fs = unsafe { super::common::fs(fs) }?;
        Ok(fs.max_rpcs_in_flight() as i64)
    })
}

/// The job the requests of this mount count under from now on (job statistics and TBF
/// rules); by default WEFT_JOBID or SLURM_JOB_ID of the environment, else `program.uid`.
///
/// # Safety
/// `fs` is a mounted handle; `jobid` a NUL-terminated string. Not while other threads use
/// the same handle.
#[no_mangle]
pub unsafe extern "C" fn weft_set_jobid(fs: *mut weft_fs, jobid: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let jobid = unsafe { bytes(jobid, "the jobid") }?;
        // SAFETY: as the caller promised (no other thread uses it meanwhile).
        let fs = unsafe { fs.as_mut() }.ok_or_else(|| super::common::invalid("the file system"))?;
        fs.fs.set_jobid(&String::from_utf8_lossy(jobid));
        Ok(0)
    })
}

/// The umask the creates of this mount apply from now on (the process's at mount); the
/// previous one.
///
/// # Safety
/// `fs` is a mounted handle.
#[no_mangle]
pub unsafe extern "C" fn weft_set_umask(fs: *const weft_fs, mask: u32) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let fs = unsafe { super::common::fs(fs) }?;
        Ok(i64::from(fs.swap_umask(mask)))
    })
}
