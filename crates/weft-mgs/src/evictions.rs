//! The clients the servers evicted, as they told the MGS (`ClientsEvicted`), so that a map
//! watch of an evicted client is answered `Evicted` at once: an idle client learns that it
//! lost its locks (and must drop the caches they guarded) without pinging every server,
//! which is what Lustre's clients do and what costs big systems a message per client per
//! server every ping interval.
//!
//! In memory only, and per replica: a new leader of a replicated MGS knows none of them. A
//! client it does not warn learns the eviction at its next request to the server that
//! evicted it, as before; the watch only makes it sooner for an idle one.

use crate::limits::EVICTIONS_NOTICED_MAX;
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use tokio::sync::watch;

#[derive(Debug)]
pub(crate) struct Evictions {
    recent: Mutex<Recent>,
    /// Moves each time clients are added, to wake the watches waiting on them.
    added: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Recent {
    ids: HashSet<u64>,
    /// Oldest first: the first forgotten past the bound.
    order: VecDeque<u64>,
}

impl Default for Evictions {
    fn default() -> Self {
        Evictions { recent: Mutex::default(), added: watch::Sender::new(0) }
    }
}

impl Evictions {
    /// Notes that a server evicted `ids` (the anonymous id 0 is ignored); the most recent
    /// [`EVICTIONS_NOTICED_MAX`] are kept.
    pub(crate) fn note(&self, ids: &[u64]) {
        {
            let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            for &id in ids.iter().filter(|&&id| id != 0) {
                if recent.ids.insert(id) {
                    recent.order.push_back(id);
                }
            }
            while recent.order.len() > EVICTIONS_NOTICED_MAX {
                if let Some(old) = recent.order.pop_front() {
                    recent.ids.remove(&old);
                }
            }
        }
        self.added.send_modify(|n| *n += 1);
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        id != 0 && self.recent.lock().unwrap_or_else(|p| p.into_inner()).ids.contains(&id)
    }

    /// Returns once `id` is among the evicted; never for id 0.
    pub(crate) async fn wait_for(&self, id: u64) {
        if id == 0 {
            return std::future::pending().await;
        }
        let mut added = self.added.subscribe();
        loop {
            if self.contains(id) {
                return;
            }
            if added.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_watch_wakes_when_its_client_is_evicted_and_not_for_another() {
        let evictions = std::sync::Arc::new(Evictions::default());
        let waiting = tokio::spawn({
            let e = evictions.clone();
            async move { e.wait_for(7).await }
        });
        evictions.note(&[8]);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished(), "another client's eviction does not wake it");
        evictions.note(&[7]);
        tokio::time::timeout(Duration::from_secs(1), waiting).await.unwrap().unwrap();
        assert!(evictions.contains(7) && evictions.contains(8) && !evictions.contains(9));
        evictions.note(&[0]);
        assert!(!evictions.contains(0), "the anonymous client is never evicted");
    }

    #[test]
    fn only_the_most_recent_are_kept() {
        let evictions = Evictions::default();
        let ids: Vec<u64> = (1..=EVICTIONS_NOTICED_MAX as u64 + 2).collect();
        evictions.note(&ids);
        assert!(!evictions.contains(1) && !evictions.contains(2), "the oldest are forgotten past the bound");
        assert!(evictions.contains(3) && evictions.contains(EVICTIONS_NOTICED_MAX as u64 + 2));
    }
}
