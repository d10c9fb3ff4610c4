//! The requests in flight that may bring a lock back (their answers carry grants), in the
//! order they were sent. A blocking callback can overtake the answer that grants the lock
//! it is about: a callback for an unknown lock first waits for the requests in flight when
//! it arrived ([`Tickets::await_landed`]); and a grant carried by an answer to a request
//! sent before a lock was called back is older than the callback (see `LockTable::insert`).

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

    /// Waits, at most `max_ms`, until every request in flight now has landed.
    pub(crate) async fn await_landed(&self, max_ms: u64) {
        let upto = self.last();
        let wait = async {
            loop {
                let landed = self.landed.notified();
                if self.state().active.first().is_none_or(|first| *first > upto) {
                    return;
                }
                landed.await;
            }
        };
        let _ = tokio::time::timeout(std::time::Duration::from_millis(max_ms), wait).await;
    }
}
