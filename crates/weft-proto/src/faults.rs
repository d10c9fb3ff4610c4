//! Faults a storage layer can be told to inject, at chosen points, so that tests can show
//! what a server keeps of what it acknowledged when its disk fails or its machine loses
//! power. The fault-injecting wrappers of the OST's object store and the MDT's key-value
//! store and journal share one [`FaultPlan`] per simulated machine: every storage operation
//! counts, and the operation whose number the plan names gets its fault. Pure bookkeeping:
//! what a fault means is the wrapper's to do.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// A fault injected into one storage operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails with an I/O error and changes nothing.
    Fail,
    /// A write stores only a prefix of its data and says how much (a short write); any
    /// other operation fails as with [`Fault::Fail`].
    ShortWrite,
    /// The machine loses power before the operation: it and every later one fail, and what
    /// was not durable is gone when the store is brought back.
    PowerLoss,
}

/// Which storage operations get which faults; see the module documentation.
#[derive(Debug, Default)]
pub struct FaultPlan {
    next_op: AtomicU64,
    faults: Mutex<BTreeMap<u64, Fault>>,
    powered_off: AtomicBool,
}

impl FaultPlan {
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    /// Operation number `op` (counted from 0) gets `fault`.
    pub fn inject(&self, op: u64, fault: Fault) {
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).insert(op, fault);
    }

    /// Called by a store before each of its operations: the fault it must inject, if any.
    /// After a power loss every operation gets [`Fault::PowerLoss`].
    pub fn next(&self) -> Option<Fault> {
        if self.powered_off() {
            return Some(Fault::PowerLoss);
        }
        let op = self.next_op.fetch_add(1, Ordering::SeqCst);
        let fault = self.faults.lock().unwrap_or_else(|p| p.into_inner()).remove(&op);
        if fault == Some(Fault::PowerLoss) {
            self.powered_off.store(true, Ordering::SeqCst);
        }
        fault
    }

    /// The machine loses power now: every later operation fails (a simulation fences a
    /// machine it is about to restart this way, whatever faults were planned).
    pub fn power_off(&self) {
        self.powered_off.store(true, Ordering::SeqCst);
    }

    /// Whether the machine has lost power.
    pub fn powered_off(&self) -> bool {
        self.powered_off.load(Ordering::SeqCst)
    }

    /// Operations counted so far.
    pub fn ops(&self) -> u64 {
        self.next_op.load(Ordering::SeqCst)
    }

    /// Faults not reached yet.
    pub fn pending(&self) -> usize {
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chosen_operations_get_their_faults_and_power_stays_off() {
        let plan = FaultPlan::new();
        plan.inject(1, Fault::Fail);
        plan.inject(3, Fault::ShortWrite);
        plan.inject(5, Fault::PowerLoss);
        let got: Vec<_> = (0..8).map(|_| plan.next()).collect();
        assert_eq!(
            got,
            [
                None,
                Some(Fault::Fail),
                None,
                Some(Fault::ShortWrite),
                None,
                Some(Fault::PowerLoss),
                Some(Fault::PowerLoss),
                Some(Fault::PowerLoss)
            ]
        );
        assert!(plan.powered_off());
        assert_eq!(plan.ops(), 6, "operations after the power loss are not counted");
        assert_eq!(plan.pending(), 0);
    }
}
