//! Bandwidth reservations at run time (the QoS planner's `addReservationAsync`,
//! `testReservation` and `removeReservation`): a simulation reserves before a checkpoint,
//! writes once the reservation is active, and gives it back.

use super::common::{bytes, guard, invalid, weft_fs};
use crate::error::Error;
use std::ffi::{c_char, c_int};
use std::time::Duration;
use weft_proto::msg::qos::ReservationState;

/// No reservation of that id is known.
pub const WEFT_QOS_UNDEFINED: c_int = 0;
/// Planned, not started yet.
pub const WEFT_QOS_SCHEDULED: c_int = 1;
/// Its throughput is the job's now.
pub const WEFT_QOS_ACTIVE: c_int = 2;
/// Over, or cancelled.
pub const WEFT_QOS_DONE: c_int = 3;

fn code(state: ReservationState) -> i64 {
    i64::from(match state {
        ReservationState::Undefined => WEFT_QOS_UNDEFINED,
        ReservationState::Scheduled => WEFT_QOS_SCHEDULED,
        ReservationState::Active => WEFT_QOS_ACTIVE,
        ReservationState::Done => WEFT_QOS_DONE,
    })
}

/// The text of an optional C string (NULL: None).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn text<'a>(p: *const c_char, what: &str) -> crate::error::Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: as the caller promised.
    let b = unsafe { bytes(p, what) }?;
    std::str::from_utf8(b).map(Some).map_err(|_| Error::new(libc::EINVAL, format!("{what} is not UTF-8")))
}

/// Asks the `count` paths of `paths`.
///
/// # Safety
/// `paths` holds `count` NUL-terminated strings.
unsafe fn path_list<'a>(paths: *const *const c_char, count: usize) -> crate::error::Result<Vec<&'a [u8]>> {
    if count == 0 {
        return Err(Error::new(libc::EINVAL, "a reservation needs the paths whose OSTs it holds (count is 0)"));
    }
    if paths.is_null() {
        return Err(invalid("the paths"));
    }
    let mut list = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: `paths` holds `count` strings.
        list.push(unsafe { bytes(*paths.add(i), "a path") }?);
    }
    Ok(list)
}

/// The two reserve calls' arguments taken, and the reservation made (and waited for, with a
/// timeout).
///
/// # Safety
/// As `weft_qos_reserve_async`.
unsafe fn reserve(
    fs: *const weft_fs,
    id: *const c_char,
    job: *const c_char,
    (paths, count): (*const *const c_char, usize),
    throughput: *const c_char,
    duration_ms: u64,
    timeout: Option<Duration>,
) -> crate::error::Result<i64> {
    // SAFETY: as the caller promised.
    let (fs, id, job, paths, rate) = unsafe {
        (
            super::common::fs(fs)?,
            text(id, "the id")?.ok_or_else(|| invalid("the id"))?,
            text(job, "the job id")?,
            path_list(paths, count)?,
            text(throughput, "the throughput")?.ok_or_else(|| invalid("the throughput"))?,
        )
    };
    let duration = Duration::from_millis(duration_ms);
    match timeout {
        None => fs.qos_reserve(id, job, &paths, rate, duration),
        Some(t) => fs.qos_reserve_wait(id, job, &paths, rate, duration, t),
    }
    .map(code)
}

/// Plans reservation `id` of `throughput` ("100M" bytes per second, "500rps" requests per
/// second, for the whole job, divided evenly over the OSTs) on the OSTs of the `count`
/// files or directories of `paths`, for `duration_ms`, for the requests of job `job`
/// (NULL: this handle's job id, `weft_set_jobid`). Returns its state at once
/// (WEFT_QOS_SCHEDULED or WEFT_QOS_ACTIVE; `weft_qos_test` follows it), or a negative errno:
/// -EINVAL (over an OST's capacity, the free capacity named in `weft_strerror`), -EEXIST (the
/// id is planned or active already), -EBUSY (an OST is down), -ENOSPC (too many reservations,
/// the caller's or the file system's), -ENOENT (a path or an OST that is not there), -EPERM
/// (an id of the Slurm prolog's, `slurm-...`). "Active" is the plan's word: the servers hold
/// the rate from when they learn the plan, within moments.
///
/// # Safety
/// `fs` is a mounted handle; `id` and `throughput` are strings, `job` NULL or a string,
/// `paths` `count` strings.
#[no_mangle]
pub unsafe extern "C" fn weft_qos_reserve_async(
    fs: *const weft_fs,
    id: *const c_char,
    job: *const c_char,
    paths: *const *const c_char,
    count: usize,
    throughput: *const c_char,
    duration_ms: u64,
) -> c_int {
    // SAFETY: as the caller promised.
    guard(|| unsafe { reserve(fs, id, job, (paths, count), throughput, duration_ms, None) })
}

/// As `weft_qos_reserve_async`, then waits until the reservation is active (at most
/// `timeout_ms`: -ETIMEDOUT, the reservation staying planned; -ECANCELED if it was cancelled
/// first). Returns WEFT_QOS_ACTIVE.
///
/// # Safety
/// As `weft_qos_reserve_async`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // The C call's arguments, as its asynchronous twin's plus a timeout.
pub unsafe extern "C" fn weft_qos_reserve_sync(
    fs: *const weft_fs,
    id: *const c_char,
    job: *const c_char,
    paths: *const *const c_char,
    count: usize,
    throughput: *const c_char,
    duration_ms: u64,
    timeout_ms: u64,
) -> c_int {
    let timeout = Some(Duration::from_millis(timeout_ms));
    // SAFETY: as the caller promised.
    guard(|| unsafe { reserve(fs, id, job, (paths, count), throughput, duration_ms, timeout) })
}

/// The state of reservation `id` now: WEFT_QOS_UNDEFINED, _SCHEDULED, _ACTIVE or _DONE; or a
/// negative errno (the management service did not answer).
///
/// # Safety
/// `fs` is a mounted handle, `id` a string.
#[no_mangle]
pub unsafe extern "C" fn weft_qos_test(fs: *const weft_fs, id: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, id) = unsafe { (super::common::fs(fs)?, text(id, "the id")?.ok_or_else(|| invalid("the id"))?) };
        fs.qos_state(id).map(code)
    })
}

/// Ends reservation `id` now, giving its bandwidth back (its maker or root; one already done
/// is no error). 0, or a negative errno (-ENOENT: no such reservation; -EPERM).
///
/// # Safety
/// `fs` is a mounted handle, `id` a string.
#[no_mangle]
pub unsafe extern "C" fn weft_qos_remove(fs: *const weft_fs, id: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, id) = unsafe { (super::common::fs(fs)?, text(id, "the id")?.ok_or_else(|| invalid("the id"))?) };
        fs.qos_cancel(id).map(|()| 0)
    })
}
