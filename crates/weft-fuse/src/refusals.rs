//! Why the mount refused each thread's last `weft.*` request, for the CLI to read back.
//!
//! A setxattr or getxattr answers the kernel an errno only, so the words that came with the
//! error (the server's message, or the mount's own) would be lost on the way to the command
//! that asked. The mount keeps them by FUSE's request owner, the calling thread's task id,
//! with the file the request was about; the CLI, after a failure, reads the virtual
//! attribute `weft.error` of the same file from the same thread and is answered the errno
//! and the message once. Bounded: REFUSAL_THREADS_MAX threads, each reason at most
//! REFUSAL_MESSAGE_BYTES_MAX bytes, kept REFUSAL_KEPT_MS. The clock is read by the caller.

use crate::limits::{REFUSAL_KEPT_MS, REFUSAL_MESSAGE_BYTES_MAX, REFUSAL_THREADS_MAX};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use weft_client::virtual_xattr::ErrorAnswer;
use weft_proto::{Fid, WeftError};

struct Refusal {
    fid: Fid,
    errno: i32,
    message: String,
    at: Instant,
}

#[derive(Default)]
pub(crate) struct Refusals {
    by_thread: Mutex<HashMap<u32, Refusal>>,
}

/// `message` cut to at most `max` bytes, at a character's boundary.
fn cut(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_string();
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

impl Refusals {
    fn kept_for() -> Duration {
        Duration::from_millis(REFUSAL_KEPT_MS)
    }

    /// Keeps why `thread`'s request about `fid` was refused at `now`, in place of its
    /// previous refusal. At the bound, reasons past their time go first, then the oldest.
    pub(crate) fn keep(&self, thread: u32, fid: Fid, e: &WeftError, now: Instant) {
        let refusal =
            Refusal { fid, errno: e.code.errno(), message: cut(&e.message, REFUSAL_MESSAGE_BYTES_MAX), at: now };
        let mut map = self.by_thread.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= REFUSAL_THREADS_MAX && !map.contains_key(&thread) {
            map.retain(|_, r| now.saturating_duration_since(r.at) <= Self::kept_for());
            if map.len() >= REFUSAL_THREADS_MAX {
                let oldest = map.iter().min_by_key(|(t, r)| (r.at, **t)).map(|(t, _)| *t);
                if let Some(t) = oldest {
                    map.remove(&t);
                }
            }
        }
        map.insert(thread, refusal);
    }

    /// The reason kept for `thread`'s last refused request, if it was about `fid` and is
    /// still fresh at `now`; answered once.
    pub(crate) fn take(&self, thread: u32, fid: Fid, now: Instant) -> Option<ErrorAnswer> {
        let mut map = self.by_thread.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&thread)?.fid != fid {
            return None;
        }
        let r = map.remove(&thread)?;
        if now.saturating_duration_since(r.at) > Self::kept_for() {
            return None;
        }
        Some(ErrorAnswer { errno: r.errno, message: r.message, fid: r.fid.to_string() })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_thread.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::ErrorCode;

    fn fid(n: u32) -> Fid {
        Fid::new(0x200000400, n, 0)
    }

    #[test]
    fn a_threads_refusal_is_answered_once_for_its_file_with_its_errno() {
        let r = Refusals::default();
        let t0 = Instant::now();
        r.keep(7, fid(1), &WeftError::new(ErrorCode::Busy, "it is open"), t0);
        assert!(r.take(8, fid(1), t0).is_none(), "another thread");
        assert!(r.take(7, fid(2), t0).is_none(), "another file");
        let a = r.take(7, fid(1), t0 + Duration::from_millis(5)).expect("kept");
        assert_eq!((a.errno, a.message.as_str(), a.fid), (libc::EBUSY, "it is open", fid(1).to_string()));
        assert!(r.take(7, fid(1), t0).is_none(), "answered once");
    }

    #[test]
    fn a_later_refusal_replaces_the_threads_earlier_one() {
        let r = Refusals::default();
        let t0 = Instant::now();
        r.keep(7, fid(1), &WeftError::new(ErrorCode::Busy, "first"), t0);
        r.keep(7, fid(2), &WeftError::new(ErrorCode::Perm, "second"), t0);
        assert!(r.take(7, fid(1), t0).is_none());
        assert_eq!(r.take(7, fid(2), t0).map(|a| a.message), Some("second".to_string()));
    }

    #[test]
    fn a_reason_past_its_time_is_not_answered() {
        let r = Refusals::default();
        let t0 = Instant::now();
        let kept = Duration::from_millis(REFUSAL_KEPT_MS);
        r.keep(1, fid(1), &WeftError::invalid("x"), t0);
        r.keep(2, fid(1), &WeftError::invalid("y"), t0);
        assert!(r.take(1, fid(1), t0 + kept).is_some(), "at the limit");
        assert!(r.take(2, fid(1), t0 + kept + Duration::from_millis(1)).is_none(), "past it");
    }

    #[test]
    fn at_the_bound_stale_reasons_go_first_then_the_oldest() {
        let r = Refusals::default();
        let t0 = Instant::now();
        let e = WeftError::invalid("x");
        r.keep(0, fid(1), &e, t0);
        for t in 1..REFUSAL_THREADS_MAX as u32 {
            r.keep(t, fid(1), &e, t0 + Duration::from_millis(REFUSAL_KEPT_MS));
        }
        assert_eq!(r.len(), REFUSAL_THREADS_MAX);
        // One past the bound, when thread 0's reason is stale: only it goes.
        let later = t0 + Duration::from_millis(REFUSAL_KEPT_MS + 1);
        r.keep(5000, fid(1), &e, later);
        assert_eq!(r.len(), REFUSAL_THREADS_MAX);
        assert!(r.take(0, fid(1), later).is_none());
        // None stale: the oldest (the lowest thread of the oldest time) goes.
        r.keep(5001, fid(1), &e, later);
        assert_eq!(r.len(), REFUSAL_THREADS_MAX);
        assert!(r.take(1, fid(1), later).is_none(), "the oldest went");
        assert!(r.take(2, fid(1), later).is_some());
        assert!(r.take(5000, fid(1), later).is_some());
        assert!(r.take(5001, fid(1), later).is_some());
        // A thread already kept is replaced, not counted twice.
        r.keep(3, fid(2), &e, later);
        assert_eq!(r.len(), REFUSAL_THREADS_MAX - 3);
    }

    #[test]
    fn a_long_reason_is_cut_at_a_character() {
        let r = Refusals::default();
        let t0 = Instant::now();
        let long = "é".repeat(REFUSAL_MESSAGE_BYTES_MAX);
        r.keep(1, fid(1), &WeftError::invalid(long), t0);
        let a = r.take(1, fid(1), t0).unwrap();
        assert!(a.message.len() <= REFUSAL_MESSAGE_BYTES_MAX && a.message.len() >= REFUSAL_MESSAGE_BYTES_MAX - 1);
        assert!(a.message.chars().all(|c| c == 'é'));
    }
}
