//! Round robin over queues (the decisions of Lustre's CRRN and ORR policies), as pure logic:
//! at most `running_max` requests run at once; past that, requests wait in a queue per key
//! (a client for CRRN, an object for ORR), and each slot that frees goes to the key whose
//! turn it is. A key keeps the turn for `quantum` requests (or until its queue is empty),
//! then goes to the back of the ring. Within a queue, requests go in the order of their
//! `order` value, then of arrival: arrival alone for CRRN, the offset for ORR (so that an
//! object's reads reach the disk in order).
//!
//! Only keys with waiting requests are kept: the memory is bounded by the requests waiting,
//! which the connections' in-flight limits bound.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;

/// The round robin of one service; see the module documentation.
pub struct RoundRobin<K, T> {
    quantum: u32,
    running_max: usize,
    running: usize,
    queued: usize,
    /// Each key's waiting requests by (order, arrival).
    queues: HashMap<K, BTreeMap<(u64, u64), T>>,
    /// Keys with waiting requests, the one whose turn it is first.
    ring: VecDeque<K>,
    /// Requests the front key started in its current turn.
    served: u32,
    arrivals: u64,
}

impl<K: Hash + Eq + Clone, T> RoundRobin<K, T> {
    pub fn new(quantum: u32, running_max: usize) -> RoundRobin<K, T> {
        RoundRobin {
            quantum: quantum.max(1),
            running_max: running_max.max(1),
            running: 0,
            queued: 0,
            queues: HashMap::new(),
            ring: VecDeque::new(),
            served: 0,
            arrivals: 0,
        }
    }

    pub fn quantum(&self) -> u32 {
        self.quantum
    }

    pub fn set_quantum(&mut self, quantum: u32) {
        self.quantum = quantum.max(1);
    }

    pub fn running_max(&self) -> usize {
        self.running_max
    }

    pub fn set_running_max(&mut self, running_max: usize) {
        self.running_max = running_max.max(1);
    }

    /// A request of `key` arrives: `Some(item)` to start it now (a slot is free and nobody
    /// waits), or None when it waits (it comes out of [`RoundRobin::start_next`] later).
    pub fn arrive(&mut self, key: &K, order: u64, item: T) -> Option<T> {
        let mut item = Some(item);
        let now = self.arrive_with(key, order, || item.take().expect("made once"));
        if now {
            item
        } else {
            None
        }
    }

    /// As [`RoundRobin::arrive`], with the waiting item made only when the request waits.
    /// True when it starts now.
    pub fn arrive_with(&mut self, key: &K, order: u64, waiter: impl FnOnce() -> T) -> bool {
        if self.running < self.running_max && self.queued == 0 {
            self.running += 1;
            return true;
        }
        let queue = match self.queues.get_mut(key) {
            Some(q) => q,
            None => {
                self.ring.push_back(key.clone());
                self.queues.entry(key.clone()).or_default()
            }
        };
        self.arrivals += 1;
        queue.insert((order, self.arrivals), waiter());
        self.queued += 1;
        false
    }

    /// A started request finished: its slot is free.
    pub fn finished(&mut self) {
        self.running = self.running.saturating_sub(1);
    }

    /// The next waiting request to start, if a slot is free and one waits.
    pub fn start_next(&mut self) -> Option<T> {
        if self.running >= self.running_max {
            return None;
        }
        let key = self.ring.front()?.clone();
        let queue = self.queues.get_mut(&key).expect("a key in the ring has a queue");
        let (_, item) = queue.pop_first().expect("a key in the ring has waiting requests");
        let empty = queue.is_empty();
        self.queued -= 1;
        self.running += 1;
        self.served += 1;
        if empty {
            self.queues.remove(&key);
            self.ring.pop_front();
            self.served = 0;
        } else if self.served >= self.quantum {
            self.ring.rotate_left(1);
            self.served = 0;
        }
        Some(item)
    }

    pub fn running(&self) -> usize {
        self.running
    }

    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Every waiting request, the scheduler done with (a policy switched away from lets
    /// them all go).
    pub fn take_waiting(&mut self) -> Vec<T> {
        self.ring.clear();
        self.served = 0;
        self.queued = 0;
        self.queues.drain().flat_map(|(_, q)| q.into_values()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts what may start, one at a time as each finishes, and returns the order.
    fn drain(rr: &mut RoundRobin<&'static str, String>) -> Vec<String> {
        let mut order = Vec::new();
        loop {
            rr.finished();
            match rr.start_next() {
                Some(item) => order.push(item),
                None => return order,
            }
        }
    }

    #[test]
    fn a_client_with_a_few_requests_is_not_stuck_behind_one_with_many() {
        let mut rr = RoundRobin::new(16, 1);
        assert_eq!(rr.arrive(&"a", 0, "a0".to_string()), Some("a0".to_string()), "a free slot: at once");
        for i in 1..=100 {
            assert!(rr.arrive(&"a", 0, format!("a{i}")).is_none());
        }
        for i in 0..4 {
            assert!(rr.arrive(&"b", 0, format!("b{i}")).is_none());
        }
        assert_eq!((rr.queued(), rr.running()), (104, 1));
        let order = drain(&mut rr);
        assert_eq!(order.len(), 104);
        // a keeps its turn for a quantum, then b's four go, then the rest of a's, in arrival
        // order each (FIFO would have made b wait for all 100).
        let b_at: Vec<usize> = order.iter().enumerate().filter(|(_, o)| o.starts_with('b')).map(|(i, _)| i).collect();
        assert_eq!(b_at, vec![16, 17, 18, 19]);
        let a: Vec<&String> = order.iter().filter(|o| o.starts_with('a')).collect();
        assert!(a.windows(2).all(|w| w[0][1..].parse::<u32>().unwrap() < w[1][1..].parse::<u32>().unwrap()));
        assert_eq!((rr.queued(), rr.running()), (0, 0));
    }

    #[test]
    fn objects_take_turns_and_each_objects_requests_go_by_offset() {
        let mut rr = RoundRobin::new(2, 1);
        assert!(rr.arrive(&"busy", 0, "first".to_string()).is_some());
        for (obj, offset) in [("x", 5), ("x", 1), ("y", 2), ("x", 3), ("y", 0)] {
            assert!(rr.arrive(&obj, offset, format!("{obj}{offset}")).is_none());
        }
        assert_eq!(drain(&mut rr), vec!["x1", "x3", "y0", "y2", "x5"]);
    }

    #[test]
    fn slots_bound_the_running_requests_and_nothing_jumps_the_queue() {
        let mut rr = RoundRobin::new(4, 2);
        assert!(rr.arrive(&"a", 0, "1".to_string()).is_some());
        assert!(rr.arrive(&"a", 0, "2".to_string()).is_some());
        assert!(rr.arrive(&"a", 0, "3".to_string()).is_none(), "both slots taken");
        assert_eq!(rr.start_next(), None, "no slot free");
        rr.finished();
        // A newcomer waits behind the queue even with a slot free: the slot is the queue's.
        assert!(rr.arrive(&"b", 0, "4".to_string()).is_none());
        assert_eq!(rr.start_next().as_deref(), Some("3"));
        rr.finished();
        assert_eq!(rr.start_next().as_deref(), Some("4"));
        assert_eq!(rr.start_next(), None);
        // Lowering the bound holds new starts until enough finished.
        rr.set_running_max(1);
        assert!(rr.arrive(&"a", 0, "5".to_string()).is_none());
        rr.finished();
        assert_eq!(rr.start_next(), None, "still one running, the bound is one");
        rr.finished();
        assert_eq!(rr.start_next().as_deref(), Some("5"));
    }

    #[test]
    fn switching_away_lets_every_waiting_request_go() {
        let mut rr = RoundRobin::new(1, 1);
        rr.arrive(&"a", 0, 0u32.to_string());
        for i in 1..50u32 {
            rr.arrive(&["a", "b", "c"][i as usize % 3], u64::from(i), i.to_string());
        }
        let mut waiting = rr.take_waiting();
        waiting.sort_by_key(|w| w.parse::<u32>().unwrap());
        assert_eq!(waiting, (1..50).map(|i: u32| i.to_string()).collect::<Vec<_>>());
        assert_eq!(rr.queued(), 0);
        assert_eq!(rr.start_next(), None);
    }
}
