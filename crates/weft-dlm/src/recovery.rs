//! What a target's recovery did, as `{mdt,obdfilter}.*.recovery_status` shows it in
//! Lustre's shapes: a restarted server, or a replicated MDT's new leader, holds lock grants
//! back for a window in which clients replay their locks (namespace.rs); this keeps when
//! the window began and ended and what the clients replayed. Pure: the caller passes the
//! clocks.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// One target's last recovery (none yet: `INACTIVE`).
#[derive(Debug, Default)]
pub struct Recovery {
    window: Option<Window>,
}

#[derive(Debug)]
struct Window {
    /// Unix seconds when it began, and when (on the monotonic clock) it ends.
    start_unix: u64,
    started: Instant,
    ends: Instant,
    clients: BTreeSet<u64>,
    locks_kept: u64,
    locks_refused: u64,
}

impl Recovery {
    /// A window begins (or, begun already and still open, lasts at least until `ends`).
    pub fn begin(&mut self, now: Instant, now_unix: u64, ends: Instant) {
        match &mut self.window {
            Some(w) if now < w.ends => w.ends = w.ends.max(ends),
            _ => {
                self.window = Some(Window {
                    start_unix: now_unix,
                    started: now,
                    ends,
                    clients: BTreeSet::new(),
                    locks_kept: 0,
                    locks_refused: 0,
                })
            }
        }
    }

    /// The open window ends at `ends` instead.
    pub fn end_at(&mut self, ends: Instant) {
        if let Some(w) = &mut self.window {
            w.ends = ends.max(w.started);
        }
    }

    /// `client` replayed its locks: `kept` were taken, `refused` were not.
    pub fn replayed(&mut self, client: u64, kept: u64, refused: u64) {
        if let Some(w) = &mut self.window {
            w.clients.insert(client);
            w.locks_kept += kept;
            w.locks_refused += refused;
        }
    }

    /// The `recovery_status` text at `now`: Lustre's `INACTIVE`, `RECOVERING` or `COMPLETE`
    /// shape. Imperative recovery is on (the management service tells clients where a target
    /// went); clients replay locks, not requests (the reply cache answers a resend instead),
    /// so the request lines count nothing; `replayed_locks` and `refused_locks` are Weft's.
    pub fn render(&self, now: Instant) -> String {
        let mut out = String::new();
        let Some(w) = &self.window else {
            out.push_str("status: INACTIVE\n");
            return out;
        };
        let clients = w.clients.len();
        if now < w.ends {
            let left = w.ends.saturating_duration_since(now);
            let _ = writeln!(out, "status: RECOVERING");
            let _ = writeln!(out, "recovery_start: {}", w.start_unix);
            let _ = writeln!(out, "time_remaining: {}", left.as_secs_f64().ceil() as u64);
            let _ = writeln!(out, "connected_clients: {clients}/{clients}");
            let _ = writeln!(out, "req_replay_clients: 0");
            let _ = writeln!(out, "lock_repay_clients: {clients}");
            let _ = writeln!(out, "completed_clients: {clients}");
            let _ = writeln!(out, "evicted_clients: 0");
            let _ = writeln!(out, "replayed_requests: 0");
            let _ = writeln!(out, "queued_requests: 0");
        } else {
            let took: Duration = w.ends.saturating_duration_since(w.started);
            let _ = writeln!(out, "status: COMPLETE");
            let _ = writeln!(out, "recovery_start: {}", w.start_unix);
            let _ = writeln!(out, "recovery_duration: {}", took.as_secs_f64().ceil() as u64);
            let _ = writeln!(out, "completed_clients: {clients}/{clients}");
            let _ = writeln!(out, "replayed_requests: 0");
        }
        let _ = writeln!(out, "replayed_locks: {}", w.locks_kept);
        let _ = writeln!(out, "refused_locks: {}", w.locks_refused);
        let _ = writeln!(out, "VBR: DISABLED");
        let _ = writeln!(out, "IR: ENABLED");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inactive_then_recovering_with_what_clients_replayed_then_complete() {
        let t0 = Instant::now();
        let mut r = Recovery::default();
        assert_eq!(r.render(t0), "status: INACTIVE\n");
        r.begin(t0, 1_700_000_000, t0 + Duration::from_millis(1_500));
        r.replayed(7, 10, 1);
        r.replayed(8, 3, 0);
        r.replayed(7, 2, 0);
        let during = r.render(t0 + Duration::from_millis(200));
        assert!(during.starts_with("status: RECOVERING\nrecovery_start: 1700000000\ntime_remaining: 2\n"), "{during}");
        assert!(during.contains("lock_repay_clients: 2\n") && during.contains("replayed_locks: 15\n"), "{during}");
        assert!(during.contains("refused_locks: 1\n"), "{during}");
        // A second hold while the window is open only lengthens it.
        r.begin(t0 + Duration::from_millis(300), 1_700_000_001, t0 + Duration::from_secs(2));
        let done = r.render(t0 + Duration::from_secs(3));
        assert!(done.starts_with("status: COMPLETE\nrecovery_start: 1700000000\nrecovery_duration: 2\n"), "{done}");
        assert!(done.contains("completed_clients: 2/2\n") && done.ends_with("VBR: DISABLED\nIR: ENABLED\n"), "{done}");
        // A later window starts afresh.
        r.begin(t0 + Duration::from_secs(10), 1_700_000_010, t0 + Duration::from_secs(11));
        assert!(r.render(t0 + Duration::from_secs(10)).contains("replayed_locks: 0\n"));
    }
}
