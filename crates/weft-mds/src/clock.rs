//! The MDS's one clock: the wall clock plus what a test (or a simulation) moved it on.
//!
//! Every decision of the MDS that depends on time reads it here, never the system clock
//! itself: the batch's time (`OpCtx::now`), the reply cache's age, the HSM coordinator's
//! liveness and sweep, the changelog's warnings. So a test moves time on with
//! [`Clock::advance`] instead of sleeping through it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use weft_proto::msg::Timestamp;

/// See the [module documentation](self).
#[derive(Debug, Default)]
pub struct Clock {
    /// How far it was moved on, in milliseconds.
    moved_ms: AtomicU64,
}

impl Clock {
    fn moved(&self) -> Duration {
        Duration::from_millis(self.moved_ms.load(Ordering::Relaxed))
    }

    /// The wall clock: what times written to the MDT (ctime, a changelog record, an HSM
    /// action's last change) say.
    pub fn now(&self) -> Timestamp {
        let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default() + self.moved();
        Timestamp { sec: d.as_secs() as i64, nsec: d.subsec_nanos() }
    }

    /// The monotonic clock, for what only this start of the MDS measures (a copytool's
    /// silence).
    pub fn instant(&self) -> Instant {
        Instant::now() + self.moved()
    }

    /// Moves both clocks on by `by` (tests and simulations: instead of sleeping).
    pub fn advance(&self, by: Duration) {
        self.moved_ms.fetch_add(by.as_millis() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_both_clocks_on() {
        let clock = Clock::default();
        let (wall, mono) = (clock.now(), clock.instant());
        clock.advance(Duration::from_secs(3600));
        assert!(clock.now().sec >= wall.sec + 3600);
        assert!(clock.instant() >= mono + Duration::from_secs(3600));
    }
}
