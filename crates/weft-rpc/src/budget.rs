//! Time budgets that a jump of the monotonic clock cannot spend at once.
//!
//! A bound such as "evict a client that does not answer a callback within 10 s" or "fail a
//! proposal no majority took within 6 s" is a deadline on the monotonic clock. If that clock
//! jumps ahead without the time passing (a clock fault; a VM resumed with its timers due),
//! every such deadline passes at the same instant: a healthy client is evicted, a write
//! the group is about to commit fails, and the program sees EIO. A [`Budget`] counts its
//! time in [`BUDGET_SLICES`] slices instead, each credited at most its own length however
//! far the clock moved while it ran: a jump spends one slice, and the rest is waited in
//! time that passes.

use crate::limits::BUDGET_SLICES;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// What is left of a bound, spent slice by slice.
#[derive(Debug, Clone)]
pub struct Budget {
    left: Duration,
    slice: Duration,
}

impl Budget {
    /// `total`, in slices of `total / BUDGET_SLICES` (at least 1 ms).
    pub fn new(total: Duration) -> Budget {
        Budget { left: total, slice: (total / BUDGET_SLICES).max(Duration::from_millis(1)) }
    }

    pub fn is_spent(&self) -> bool {
        self.left.is_zero()
    }

    /// Runs `work` until it ends (Some) or the budget is spent (None, `work` dropped).
    pub async fn run<F: Future>(&mut self, work: F) -> Option<F::Output> {
        tokio::pin!(work);
        while !self.left.is_zero() {
            let this = self.slice.min(self.left);
            let started = Instant::now();
            match tokio::time::timeout(this, &mut work).await {
                Ok(output) => {
                    self.left -= started.elapsed().min(this);
                    return Some(output);
                }
                Err(_) => self.left -= this,
            }
        }
        None
    }
}

/// `work`, or None once `total` is spent ([`Budget`]): `tokio::time::timeout` that a clock
/// jump cannot cut short by more than one slice.
pub async fn within<F: Future>(total: Duration, work: F) -> Option<F::Output> {
    Budget::new(total).run(work).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_budget_ends_work_after_its_time_and_lets_quicker_work_finish() {
        let start = Instant::now();
        assert_eq!(within(Duration::from_secs(8), std::future::pending::<()>()).await, None);
        assert_eq!(start.elapsed(), Duration::from_secs(8), "the whole budget, no more");
        let quick = within(Duration::from_secs(8), async {
            tokio::time::sleep(Duration::from_millis(2500)).await;
            7
        });
        assert_eq!(quick.await, Some(7));
        // What a first wait spent is not given again to the next.
        let mut b = Budget::new(Duration::from_secs(8));
        b.run(tokio::time::sleep(Duration::from_secs(5))).await.unwrap();
        let start = Instant::now();
        assert_eq!(b.run(std::future::pending::<()>()).await, None);
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        assert!(b.is_spent());
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_jump_spends_one_slice_not_the_budget() {
        let total = Duration::from_secs(8);
        let slice = total / BUDGET_SLICES;
        let waiting = tokio::spawn(within(total, std::future::pending::<()>()));
        tokio::task::yield_now().await;
        let start = Instant::now();
        // The clock jumps an hour at once: every timer due fires, no time passed for the waiter.
        tokio::time::advance(Duration::from_secs(3600)).await;
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one jump ends the slice under way, not the budget");
        // The rest is waited in time that passes.
        tokio::time::sleep(total - slice - Duration::from_millis(1)).await;
        assert!(!waiting.is_finished());
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(waiting.await.unwrap(), None);
        assert!(start.elapsed() >= Duration::from_secs(3600) + total - slice);
    }
}
