//! Reply-cache slots (Lustre's multi-slot last_rcvd). The MDT keeps the reply of a client's
//! mutation under (client id, slot) so that a resend of it gets that reply instead of a
//! second effect. A mutation holds its slot from before it is first sent until it has its
//! answer or its caller gave up, so two mutations in flight never share one, and the next
//! mutation in a slot replaces the reply the client no longer needs: the MDT stores one row
//! per slot in use, overwritten, instead of one row per mutation that must be pruned later.

use crate::limits::MUTATIONS_IN_FLIGHT_MAX;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use tokio::sync::{Semaphore, SemaphorePermit};

pub(crate) struct ReplySlots {
    /// Free slots, lowest first: reusing low numbers keeps the MDT's rows as few as the
    /// client's peak of mutations in flight.
    free: Mutex<BinaryHeap<Reverse<u32>>>,
    /// One permit per free slot: a mutation beyond MUTATIONS_IN_FLIGHT_MAX waits for one.
    permits: Semaphore,
}

/// A slot held by one mutation; it is free again when this is dropped.
pub(crate) struct Slot<'a> {
    number: u32,
    slots: &'a ReplySlots,
    _permit: SemaphorePermit<'a>,
}

impl Slot<'_> {
    pub(crate) fn number(&self) -> u32 {
        self.number
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.slots.free.lock().unwrap_or_else(|p| p.into_inner()).push(Reverse(self.number));
    }
}

impl Default for ReplySlots {
    fn default() -> Self {
        let count = u32::try_from(MUTATIONS_IN_FLIGHT_MAX).expect("the slot count fits in u32");
        ReplySlots { free: Mutex::new((0..count).map(Reverse).collect()), permits: Semaphore::new(count as usize) }
    }
}

impl ReplySlots {
    /// The lowest free slot, waiting while MUTATIONS_IN_FLIGHT_MAX mutations hold one each.
    pub(crate) async fn take(&self) -> Slot<'_> {
        let permit = self.permits.acquire().await.expect("the slot semaphore is never closed");
        let Reverse(number) =
            self.free.lock().unwrap_or_else(|p| p.into_inner()).pop().expect("a permit stands for a free slot");
        Slot { number, slots: self, _permit: permit }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn held_slots_differ_and_freed_ones_are_reused_lowest_first() {
        let slots = ReplySlots::default();
        let (a, b, c) = (slots.take().await, slots.take().await, slots.take().await);
        assert_eq!((a.number(), b.number(), c.number()), (0, 1, 2));
        drop(b);
        drop(a);
        assert_eq!(slots.take().await.number(), 0);
        let again = slots.take().await;
        assert_eq!(again.number(), 0, "the slot taken just before was dropped at once");
        assert_eq!(slots.take().await.number(), 1);
    }

    #[tokio::test]
    async fn a_mutation_beyond_the_limit_waits_for_a_slot() {
        let slots = ReplySlots::default();
        let mut held = Vec::new();
        for _ in 0..MUTATIONS_IN_FLIGHT_MAX {
            held.push(slots.take().await);
        }
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), slots.take()).await;
        assert!(waiting.is_err(), "no slot is free");
        let freed = held.swap_remove(7).number();
        assert_eq!(slots.take().await.number(), freed);
    }
}
