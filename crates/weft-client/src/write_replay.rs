//! The client's part of write replay (Lustre's): keeping each write an OST answered but had
//! not committed (the decisions in uncommitted.rs), learning what the OSTs committed, and
//! sending the kept writes again when an OST's server restarted.

use crate::limits::{REPLAYS_IN_FLIGHT_MAX, UNCOMMITTED_BYTES_MAX, UNCOMMITTED_POLL_MS};
use crate::uncommitted::Kept;
use crate::Client;
use bytes::Bytes;
use futures::StreamExt;
use std::sync::atomic::Ordering;
use std::time::Duration;
use weft_proto::lock::LockTarget;
use weft_proto::msg::{ost, Caller, TargetKind};
use weft_proto::ErrorCode;

impl Client {
    /// A write's answer from OST `ost`: keeps `write` when the OST has not committed it,
    /// and makes sure a task asks later what it committed. Not for an OST served in this
    /// very process (`weft up`): a power loss that takes its server takes this client and
    /// what it kept with it, so keeping would only hold buffers the allocator could reuse
    /// (measured: ior-easy-write under `weft up` some 15 % slower while kept).
    pub(crate) fn answered_write(&self, ost: u32, done: &ost::WriteDone, write: Kept) {
        if self.served_in_process(ost) {
            return;
        }
        if self.uncommitted.answered(ost, done.transno, done.committed, write) {
            self.poll_commits();
        }
    }

    /// Whether object target `ost` is served by a server of this process (reached by a
    /// direct call, not over TCP nor a simulated wire).
    fn served_in_process(&self, ost: u32) -> bool {
        let Some(network) = &self.config.network else { return false };
        let (kind, index) = crate::server_of(TargetKind::Ost, ost);
        self.map.current().address(kind, index).is_some_and(|address| network.in_process(address).is_some())
    }

    /// Past [`UNCOMMITTED_BYTES_MAX`] kept, asks the OST that keeps the most to commit now,
    /// and forgets what it committed (a writer faster than the OSTs' commits waits here).
    pub(crate) async fn bound_uncommitted(&self, who: &Caller) {
        let (bytes, Some(ost)) = self.uncommitted.bytes() else { return };
        if bytes <= UNCOMMITTED_BYTES_MAX {
            return;
        }
        match self.ost(who, ost, ost::Commit { commit: true }, Bytes::new()).await {
            Ok((done, _)) => self.uncommitted.committed(ost, done.committed),
            // Kept: the periodic commit or the next write's answer prunes them.
            Err(e) => tracing::debug!("OST {ost} did not commit on request: {e}"),
        }
    }

    /// Starts the task that asks the OSTs of the kept writes what they committed, unless it
    /// runs: every [`UNCOMMITTED_POLL_MS`] while writes are kept, one message per such OST;
    /// it ends when nothing is kept (an idle client sends nothing).
    fn poll_commits(&self) {
        if self.polling_commits.swap(true, Ordering::AcqRel) {
            return;
        }
        let client = self.weak_self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(UNCOMMITTED_POLL_MS)).await;
                let Some(c) = client.upgrade() else { return };
                let osts = c.uncommitted.osts();
                if osts.is_empty() {
                    c.polling_commits.store(false, Ordering::Release);
                    // A write kept between the look and the store started no task.
                    if c.uncommitted.osts().is_empty() || c.polling_commits.swap(true, Ordering::AcqRel) {
                        return;
                    }
                    continue;
                }
                let root = Caller::root();
                for ost in osts {
                    if let Ok((done, _)) = c.ost(&root, ost, ost::Commit { commit: false }, Bytes::new()).await {
                        c.uncommitted.committed(ost, done.committed);
                    }
                }
            }
        });
    }

    /// Whether this client keeps writes that `target`'s server may have to take again
    /// (an OST, or the MDT for its data-on-MDT objects).
    pub(crate) fn keeps_writes_for(&self, target: LockTarget) -> bool {
        self.write_target(target).is_some_and(|ost| self.uncommitted.holds_any(ost))
    }

    fn write_target(&self, target: LockTarget) -> Option<u32> {
        match target {
            LockTarget::Ost(index) => Some(index),
            LockTarget::Mdt(index) => Some(weft_proto::layout::dom_target(index)),
        }
    }

    /// `target`'s server restarted (or moved): sends every write kept for it again, before
    /// the lock replay. The restarted OST writes what it lost and nothing it has (its
    /// replay window, weft-oss commit.rs); what it takes is kept again under the new
    /// transno its answer gives. A replay it refuses after its window is a lost write:
    /// said in the log and counted in the import (`writes_lost`). One that does not get
    /// through is kept for the next restart or move.
    pub(crate) async fn replay_writes(&self, target: LockTarget) {
        let Some(ost) = self.write_target(target) else { return };
        let writes = self.uncommitted.take(ost);
        if writes.is_empty() {
            return;
        }
        let asked = writes.len();
        let root = Caller::root();
        let results: Vec<(bool, bool)> = futures::stream::iter(writes)
            .map(|(transno, kept)| {
                let root = &root;
                async move {
                    let op = ost::Replay { fid: kept.fid, offset: kept.offset, transno, owner: kept.owner };
                    match self.ost(root, ost, op, kept.bulk.clone()).await {
                        Ok((done, _)) => {
                            self.uncommitted.answered(ost, done.transno, done.committed, kept);
                            (true, false)
                        }
                        Err(e) if e.code == ErrorCode::Stale => {
                            tracing::error!("a write to {} at {} is lost: {e}", kept.fid, kept.offset);
                            (false, true)
                        }
                        Err(e) => {
                            tracing::warn!("replay of a write to {} on OST {ost} failed ({e}): kept", kept.fid);
                            self.uncommitted.answered(ost, transno, 0, kept);
                            (false, false)
                        }
                    }
                }
            })
            .buffer_unordered(REPLAYS_IN_FLIGHT_MAX)
            .collect()
            .await;
        let replayed = results.iter().filter(|(r, _)| *r).count() as u64;
        let lost = results.iter().filter(|(_, l)| *l).count() as u64;
        tracing::info!(ost, asked, replayed, lost, "replayed the writes its server had not committed");
        if replayed + lost > 0 {
            self.poll_commits();
        }
        self.note_write_replay(target, replayed, lost);
    }
}
