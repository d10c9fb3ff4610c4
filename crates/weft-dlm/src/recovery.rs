//! What a target's recovery did, as `{mdt,obdfilter}.*.recovery_status` shows it in
//! Lustre's shapes: a restarted server, or a replicated MDT's new leader, holds lock grants
//! back for a window in which clients replay their locks (namespace.rs); this keeps when
//! the window began and ended, which clients it waits for (those a [`LockClients`] record
//! names: the window ends as soon as all of them replayed) and what they replayed. Pure:
//! the caller passes the clocks.

use futures::future::BoxFuture;
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
    /// The clients that replayed (or said they hold nothing).
    clients: BTreeSet<u64>,
    /// The clients the window waits for: those that held locks of the target's previous
    /// server, as recorded where the server's death does not take it (None: nobody knows,
    /// and the window lasts its whole length).
    expected: Option<BTreeSet<u64>>,
    /// Clients that began coming back (replayed their opens or advisory locks): their lock
    /// replay follows, and the window's end waits a little for it.
    begun: BTreeSet<u64>,
    /// Expected clients that did not come back in time: evicted.
    evicted: u64,
    locks_kept: u64,
    locks_refused: u64,
}

/// The clients that held a target's locks, kept where the death of its server does not lose
/// them (Lustre keeps its clients in `last_rcvd`): a replicated MDT keeps them in its store,
/// through its group. A recovery window waits for these clients to replay, and no longer:
/// it ends as soon as each of them replayed, and the ones that did not come back by its end
/// are evicted and forgotten. A client is recorded before its first lock is granted (or when
/// it replays locks) and forgotten when it disconnects or is evicted.
pub trait LockClients: Send + Sync + 'static {
    /// Whether `owner` is recorded (no I/O: asked before every grant).
    fn known(&self, owner: u64) -> bool;
    /// Records `owner` durably; answered once the record survives the server.
    fn record(&self, owner: u64) -> BoxFuture<'static, weft_proto::WeftResult<()>>;
    /// Forgets these clients (disconnected, or evicted).
    fn forget(&self, owners: Vec<u64>) -> BoxFuture<'static, weft_proto::WeftResult<()>>;
    /// Every recorded client; None while the record may miss some (a target from before
    /// the record: a window then lasts its whole length).
    fn recorded(&self) -> Option<Vec<u64>>;
    /// The record names every client holding locks from now on (said after a window that
    /// lasted its whole length, in which each of them replayed and was recorded).
    fn complete(&self) -> BoxFuture<'static, weft_proto::WeftResult<()>>;
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
                    expected: None,
                    begun: BTreeSet::new(),
                    evicted: 0,
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

    /// The open window waits for these clients (and ends once all of them replayed).
    pub fn expect(&mut self, clients: impl IntoIterator<Item = u64>) {
        if let Some(w) = &mut self.window {
            w.expected = Some(clients.into_iter().collect());
        }
    }

    /// `client` began coming back (its lock replay follows). Whether the open window waits
    /// for it and it has not replayed its locks yet.
    pub fn begun(&mut self, client: u64) -> bool {
        match &mut self.window {
            Some(w) => {
                w.begun.insert(client);
                w.expected.as_ref().is_some_and(|e| e.contains(&client)) && !w.clients.contains(&client)
            }
            None => false,
        }
    }

    /// The open window ends at `ends` or later.
    pub fn end_no_sooner_than(&mut self, ends: Instant) {
        if let Some(w) = &mut self.window {
            w.ends = w.ends.max(ends);
        }
    }

    /// The clients that replayed in the window (or said they hold nothing).
    pub fn came_back(&self) -> Vec<u64> {
        self.window.as_ref().map_or_else(Vec::new, |w| w.clients.iter().copied().collect())
    }

    /// Whether an expected client that has not replayed its locks began coming back.
    pub fn missing_begun(&self) -> bool {
        match &self.window {
            Some(Window { expected: Some(e), clients, begun, .. }) => e.difference(clients).any(|c| begun.contains(c)),
            _ => false,
        }
    }

    /// Whether the open window knows whom it waits for.
    pub fn knows_whom(&self) -> bool {
        self.window.as_ref().is_some_and(|w| w.expected.is_some())
    }

    /// Whether the open window waits for nobody any more: it knows whom it waits for and
    /// every one of them replayed.
    pub fn all_back(&self) -> bool {
        self.window.as_ref().is_some_and(|w| w.expected.as_ref().is_some_and(|e| e.is_subset(&w.clients)))
    }

    /// The expected clients that have not replayed (those to evict when the window ends).
    pub fn missing(&self) -> Vec<u64> {
        match &self.window {
            Some(Window { expected: Some(e), clients, .. }) => e.difference(clients).copied().collect(),
            _ => Vec::new(),
        }
    }

    /// `n` clients were evicted for not coming back in time.
    pub fn evicted(&mut self, n: u64) {
        if let Some(w) = &mut self.window {
            w.evicted += n;
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
        // Lustre's "n/m": of the clients it waits for (or, knowing none, of those that came).
        let total = w.expected.as_ref().map_or(clients, |e| e.len().max(clients));
        let back = w.expected.as_ref().map_or(clients, |e| e.intersection(&w.clients).count());
        if now < w.ends {
            let left = w.ends.saturating_duration_since(now);
            let _ = writeln!(out, "status: RECOVERING");
            let _ = writeln!(out, "recovery_start: {}", w.start_unix);
            let _ = writeln!(out, "time_remaining: {}", left.as_secs_f64().ceil() as u64);
            let _ = writeln!(out, "connected_clients: {back}/{total}");
            let _ = writeln!(out, "req_replay_clients: 0");
            let _ = writeln!(out, "lock_repay_clients: {clients}");
            let _ = writeln!(out, "completed_clients: {back}");
            let _ = writeln!(out, "evicted_clients: {}", w.evicted);
            let _ = writeln!(out, "replayed_requests: 0");
            let _ = writeln!(out, "queued_requests: 0");
        } else {
            let took: Duration = w.ends.saturating_duration_since(w.started);
            let _ = writeln!(out, "status: COMPLETE");
            let _ = writeln!(out, "recovery_start: {}", w.start_unix);
            // Lustre gives whole seconds; Weft's windows are shorter, so milliseconds too.
            let _ = writeln!(out, "recovery_duration: {}", took.as_secs_f64().ceil() as u64);
            let _ = writeln!(out, "recovery_duration_ms: {}", took.as_millis());
            let _ = writeln!(out, "completed_clients: {back}/{total}");
            let _ = writeln!(out, "evicted_clients: {}", w.evicted);
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
