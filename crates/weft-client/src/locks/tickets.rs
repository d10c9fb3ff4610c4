//! The requests in flight that may bring a lock back (their answers carry grants), in the
//! order they were sent. A blocking callback can overtake the answer that grants the lock
//! it is about: a callback for an unknown lock first waits for the requests in flight when
//! it arrived, or for the grant ([`Tickets::await_landed_or`]); and a grant carried by an
//! answer to a request sent before a lock was called back is older than the callback (see
//! `LockTable::insert`).

use std::collections::BTreeSet;
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Tickets {
    state: Mutex<InFlight>,
    /// Wakes callbacks waiting for answers in flight.
    landed: tokio::sync::Notify,
}

#[derive(Default)]
struct InFlight {
    /// The last ticket issued (0: none yet).
    next: u64,
    active: BTreeSet<u64>,
}

/// Holds a place among the requests in flight until dropped (after the grant is recorded).
pub(crate) struct GrantTicket<'a> {
    tickets: &'a Tickets,
    id: u64,
}

impl GrantTicket<'_> {
    /// Its place in the order tickets were issued (from 1).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for GrantTicket<'_> {
    fn drop(&mut self) {
        self.tickets.state().active.remove(&self.id);
        self.tickets.landed.notify_waiters();
    }
}

impl Tickets {
    fn state(&self) -> std::sync::MutexGuard<'_, InFlight> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks a request as in flight.
    pub(crate) fn issue(&self) -> GrantTicket<'_> {
        let mut f = self.state();
        f.next += 1;
        let id = f.next;
        f.active.insert(id);
        GrantTicket { tickets: self, id }
    }

    /// The last ticket issued so far (0: none yet).
    pub(crate) fn last(&self) -> u64 {
        self.state().next
    }

    /// The oldest ticket still in flight (past the last one issued when none is).
    pub(crate) fn oldest(&self) -> u64 {
        let f = self.state();
        f.active.first().copied().unwrap_or(f.next + 1)
    }

    /// Waits, at most `max_ms`, until every request in flight now has landed, or until
    /// `found()` (checked again as each one lands): a callback waits for the grant of its
    /// lock, which may come with any of them, and once it has come need not wait for the
    /// others. One of those may be an enqueue the server holds behind the very request
    /// this callback is for, and lands only after the callback is answered: without
    /// `found` each such callback cost the whole `max_ms` (1 s), as four clients writing
    /// their own parts of every object of one file showed (docs/BENCHMARKS.md, MPI-IO).
    pub(crate) async fn await_landed_or(&self, max_ms: u64, found: impl Fn() -> bool) {
        let upto = self.last();
        let wait = async {
            loop {
                let landed = self.landed.notified();
                if found() || self.state().active.first().is_none_or(|first| *first > upto) {
                    return;
                }
                landed.await;
            }
        };
        let _ = tokio::time::timeout(std::time::Duration::from_millis(max_ms), wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn a_callback_waits_for_its_grant_not_for_every_request_in_flight() {
        let tickets = Tickets::default();
        let carrier = tickets.issue();
        // An enqueue the server holds until this callback is answered: it never lands here.
        let _held = tickets.issue();
        let granted = AtomicBool::new(false);
        let t0 = Instant::now();
        let wait = tickets.await_landed_or(5_000, || granted.load(Ordering::SeqCst));
        let land = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            // The reply that carries the grant is recorded, then its ticket lands.
            granted.store(true, Ordering::SeqCst);
            drop(carrier);
        };
        tokio::join!(wait, land);
        assert!(t0.elapsed() < Duration::from_secs(2), "waited {:?} for the held request", t0.elapsed());
        assert_eq!(tickets.oldest(), 2, "the held request is still in flight");

        // With nothing found, it waits for every request in flight then (here: up to max_ms).
        let t0 = Instant::now();
        tickets.await_landed_or(300, || false).await;
        assert!(t0.elapsed() >= Duration::from_millis(300), "returned before max_ms with a request in flight");
    }
}
